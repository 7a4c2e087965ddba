package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The workload's key spaces: each worker owns the ids of its class mod the worker count,
// inserts new ids of its class above every id loaded, and its picks follow the 60/20/20 mix.
func TestSplitKeysAndPick(t *testing.T) {
	ks := splitKeys([]int64{1, 2, 3, 4, 5, 6, 7}, 7, 3)
	if got := [][]int64{ks[0].live, ks[1].live, ks[2].live}; !slices.Equal(got[0], []int64{3, 6}) || !slices.Equal(got[1], []int64{1, 4, 7}) || !slices.Equal(got[2], []int64{2, 5}) {
		t.Fatalf("live ids by worker: %v", got)
	}
	if ks[0].next != 9 || ks[1].next != 10 || ks[2].next != 8 {
		t.Fatalf("first inserts: %d %d %d, want 9 10 8", ks[0].next, ks[1].next, ks[2].next)
	}

	k := splitKeys(seq(1, 100_000), 100_000, 4)[1]
	live := map[int64]bool{}
	for _, id := range k.live {
		live[id] = true
	}
	rng := rand.New(rand.NewPCG(7, 9))
	var n [3]int
	for range 100_000 {
		op, id := k.pick(rng)
		n[op]++
		if id%4 != 1 {
			t.Fatalf("worker 1 picked id %d", id)
		}
		switch op {
		case opInsert:
			if live[id] {
				t.Fatalf("insert of live id %d", id)
			}
			live[id] = true
		case opUpdate, opDelete:
			if !live[id] {
				t.Fatalf("op %d of id %d, which is not live", op, id)
			}
			if op == opDelete {
				delete(live, id)
			}
		}
	}
	if len(live) != len(k.live) {
		t.Fatalf("%d live ids in the model, %d in the key space", len(live), len(k.live))
	}
	// 100 000 picks: each share within 1 point of its target.
	for op, want := range map[opKind]int{opUpdate: 60_000, opInsert: 20_000, opDelete: 20_000} {
		if n[op] < want-1000 || n[op] > want+1000 {
			t.Errorf("op %d picked %d times of 100000, want %d ± 1000", op, n[op], want)
		}
	}
}

// An empty key space inserts.
func TestPickEmptyInserts(t *testing.T) {
	k := splitKeys(nil, 0, 2)[0]
	rng := rand.New(rand.NewPCG(1, 2))
	if op, id := k.pick(rng); op != opInsert || id != 2 {
		t.Fatalf("pick = %d %d, want an insert of 2", op, id)
	}
}

func TestWorkloadRecords(t *testing.T) {
	s := workloadStats{Updates: 6, Inserts: 2, Deletes: 3}
	if s.changes() != 11 || s.records() != 14 {
		t.Fatalf("changes %d records %d, want 11 and 14 (a tombstone per delete)", s.changes(), s.records())
	}
}

// txnLog keeps each appId's greatest version across commits; handled sums version+1.
func TestTxnLog(t *testing.T) {
	var l txnLog
	l.versions = map[string]int64{}
	commits := []string{
		`{"commitInfo":{"timestamp":1}}` + "\n" + `{"txn":{"appId":"ingestd-src-t-0","version":0}}` + "\n" + `{"add":{"path":"a.parquet"}}`,
		`{"txn":{"appId":"ingestd-src-t-0","version":41}}` + "\n" + `{"txn":{"appId":"other-1","version":9}}`,
		`{"txn":{"appId":"ingestd-src-t-0","version":7}}`, // an older version never lowers it
	}
	for _, c := range commits {
		if err := l.parse([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if l.versions["ingestd-src-t-0"] != 41 || l.handled() != 52 {
		t.Fatalf("versions %v handled %d, want 41 and 52", l.versions, l.handled())
	}
	if err := l.parse([]byte(`{"txn":`)); err == nil {
		t.Fatal("a broken line parsed")
	}
}

func TestParseStatCPU(t *testing.T) {
	stat := []byte("4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 40 0 123 0 0")
	got, err := parseStatCPU(stat)
	if err != nil || got != 3.25 {
		t.Fatalf("parseStatCPU = %v, %v; want 3.25 (utime 250 + stime 75 ticks)", got, err)
	}
	if _, err := parseStatCPU([]byte("1 (x) S 1 2")); err == nil {
		t.Fatal("a short stat parsed")
	}
}

// The per-bucket MD5 matches scripts/bench/cdc_report.py's: lines of a bucket joined by
// "\n", each followed by one.
func TestChecksummer(t *testing.T) {
	c := newChecksummer(2)
	c.add(1, "1|a")
	c.add(2, "2|b")
	c.add(3, "3|c")
	s := c.sum()
	// md5("2|b\n") and md5("1|a\n3|c\n")
	want := []string{"89371b5686ded90abe5f2974d8132d2f", "46e29eb36993410fc611306c6d8cc30b"}
	if s.Rows != 3 || !slices.Equal(s.Buckets, want) {
		t.Fatalf("sum %+v, want 3 rows and buckets %v", s, want)
	}
}

func seq(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}
