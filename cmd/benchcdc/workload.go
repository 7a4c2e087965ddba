package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The workload's statements; every one changes exactly one row of src.
const (
	sqlUpdate = `UPDATE src SET name = $2, amount = $3::bigint / 100.0, counter = counter + 1, updated = now() WHERE id = $1`
	sqlInsert = `INSERT INTO src VALUES ($1, $2, $3, $4::bigint / 100.0, 0, now())`
	sqlDelete = `DELETE FROM src WHERE id = $1`
)

// opKind is one change of the workload.
type opKind int

const (
	opUpdate opKind = iota
	opInsert
	opDelete
)

// keySpace is the live ids one worker owns (every id ≡ its index mod the worker count), so
// workers never touch the same row and each knows which ids are live without asking.
type keySpace struct {
	live []int64
	next int64 // the next id to insert
	step int64 // the worker count
}

// splitKeys divides the live ids among workers by id mod workers; each worker's first
// insert is the smallest id of its class above the greatest live (or ever inserted) id.
func splitKeys(ids []int64, maxID int64, workers int) []*keySpace {
	ks := make([]*keySpace, workers)
	for w := range ks {
		next := maxID + 1
		for next%int64(workers) != int64(w) {
			next++
		}
		ks[w] = &keySpace{next: next, step: int64(workers)}
	}
	for _, id := range ids {
		k := ks[id%int64(workers)]
		k.live = append(k.live, id)
	}
	return ks
}

// pick chooses the next change: 60 % updates, 20 % inserts, 20 % deletes of uniformly
// chosen live ids (an insert when none is live); it updates the key space as if the
// change were committed and returns the id it changes.
func (k *keySpace) pick(rng *rand.Rand) (opKind, int64) {
	r := rng.IntN(100)
	if len(k.live) == 0 || r >= 60 && r < 80 {
		id := k.next
		k.next += k.step
		k.live = append(k.live, id)
		return opInsert, id
	}
	i := rng.IntN(len(k.live))
	id := k.live[i]
	if r < 60 {
		return opUpdate, id
	}
	k.live[i] = k.live[len(k.live)-1]
	k.live = k.live[:len(k.live)-1]
	return opDelete, id
}

// workloadStats counts what a phase committed.
type workloadStats struct {
	Updates, Inserts, Deletes int64
	Transactions              int64
	Seconds                   float64 // from the start to the last commit
}

// changes is the source rows changed.
func (s workloadStats) changes() int64 { return s.Updates + s.Inserts + s.Deletes }

// records is the Kafka records Debezium writes for them: one event per change and a
// tombstone after each delete (tombstones.on.delete).
func (s workloadStats) records() int64 { return s.changes() + s.Deletes }

// workload runs changes against src from one connection per key space.
type workload struct {
	url   string
	keys  []*keySpace
	txRow int // changes per transaction: 1 is one autocommit statement each
}

// run changes rows for d: at rate changes/s in all (paced per worker), or flat out when
// rate ≤ 0. Each transaction of txRow changes is one round trip (a pipelined batch, which
// PostgreSQL runs as one implicit transaction).
func (w *workload) run(ctx context.Context, rate float64, d time.Duration, seed uint64) (workloadStats, error) {
	var (
		mu    sync.Mutex
		total workloadStats
		wg    sync.WaitGroup
		errs  = make([]error, len(w.keys))
	)
	start := time.Now()
	deadline := start.Add(d)
	for i, ks := range w.keys {
		wg.Add(1)
		go func() { // owned by run: it waits for every worker
			defer wg.Done()
			st, err := w.worker(ctx, ks, rate/float64(len(w.keys)), start, deadline, rand.New(rand.NewPCG(seed, uint64(i))))
			errs[i] = err
			mu.Lock()
			total.Updates += st.Updates
			total.Inserts += st.Inserts
			total.Deletes += st.Deletes
			total.Transactions += st.Transactions
			mu.Unlock()
		}()
	}
	wg.Wait()
	total.Seconds = time.Since(start).Seconds()
	return total, errors.Join(errs...)
}

func (w *workload) worker(ctx context.Context, ks *keySpace, rate float64, start, deadline time.Time, rng *rand.Rand) (workloadStats, error) {
	var st workloadStats
	c, err := pgx.Connect(ctx, w.url)
	if err != nil {
		return st, fmt.Errorf("connect workload: %w", err)
	}
	defer c.Close(context.Background())
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(w.txRow) / rate * float64(time.Second))
	}
	for k := int64(0); ; k++ {
		if rate > 0 {
			at := start.Add(time.Duration(k) * interval)
			if at.After(deadline) {
				return st, nil
			}
			if wait := time.Until(at); wait > 0 {
				time.Sleep(wait)
			}
		} else if time.Now().After(deadline) {
			return st, nil
		}
		b := &pgx.Batch{}
		var tx workloadStats
		for range w.txRow {
			op, id := ks.pick(rng)
			switch op {
			case opUpdate:
				tx.Updates++
				b.Queue(sqlUpdate, id, "customer-"+strconv.FormatInt(id, 10)+"-u"+strconv.Itoa(rng.IntN(1000)), rng.Int64N(10_000_000_000))
			case opInsert:
				tx.Inserts++
				b.Queue(sqlInsert, id, "customer-"+strconv.FormatInt(id, 10), payload(id), rng.Int64N(10_000_000_000))
			case opDelete:
				tx.Deletes++
				b.Queue(sqlDelete, id)
			}
		}
		if err := c.SendBatch(ctx, b).Close(); err != nil {
			return st, fmt.Errorf("workload transaction: %w", err)
		}
		st.Updates += tx.Updates
		st.Inserts += tx.Inserts
		st.Deletes += tx.Deletes
		st.Transactions++
	}
}

// payload is an inserted row's 120-character payload, as long as the loaded rows'.
func payload(id int64) string {
	s := strings.Repeat(strconv.FormatInt(id*2654435761, 36)+"-", 20)
	return s[:120]
}
