package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// srcDDL is the benchmark's source table: ~200 bytes a row on disk (a 120-character
// payload, a name, a numeric, a counter and a timestamptz beside the key). REPLICA IDENTITY
// DEFAULT: a delete's before image holds the key only, as for most tables in production.
const srcDDL = `CREATE TABLE src (
	id bigint PRIMARY KEY,
	name text NOT NULL,
	payload text NOT NULL,
	amount numeric(12,2) NOT NULL,
	counter bigint NOT NULL,
	updated timestamptz NOT NULL)`

// srcLoad fills src with ids 1..$1 in one statement (no row-by-row client round trips).
const srcLoad = `INSERT INTO src
	SELECT g, 'customer-' || g, left(repeat(md5(g::text), 4), 120), (g % 100000000) / 100.0, 0, now()
	FROM generate_series(1, $1::bigint) g`

// canonicalQuery renders each source row as the line scripts/bench/cdc_report.py renders
// the Delta table's: id|name|payload|amount|counter|updated in µs since the epoch. $1 > 0
// keeps only the rows a workload changed after a load of ids 1..$1 (updated or inserted):
// those a connector without a snapshot has streamed.
const canonicalQuery = `SELECT id, id::text || '|' || name || '|' || payload || '|' || amount::text || '|' ||
	counter::text || '|' || (extract(epoch FROM updated) * 1000000)::bigint::text FROM src
	WHERE $1::bigint = 0 OR counter > 0 OR id > $1::bigint ORDER BY id`

// checksumBuckets is how many MD5 buckets (by id mod checksumBuckets) a checksum has: a
// mismatch names the buckets that differ.
const checksumBuckets = 64

// dbURL is base (a PostgreSQL URL) with its database replaced by name.
func dbURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func setupCmd(args []string) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	pg := fs.String("pg", "", "PostgreSQL URL of a superuser (POSTGRES_URL)")
	db := fs.String("db", "", "database to create")
	rows := fs.Int64("rows", 1_000_000, "rows to load")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, *pg)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{*db}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", *db, err)
	}
	u, err := dbURL(*pg, *db)
	if err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect to database %s: %w", *db, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, srcDDL); err != nil {
		return fmt.Errorf("create table src: %w", err)
	}
	start := time.Now()
	if _, err := c.Exec(ctx, srcLoad, *rows); err != nil {
		return fmt.Errorf("load %d rows: %w", *rows, err)
	}
	load := time.Since(start).Seconds()
	if _, err := c.Exec(ctx, "VACUUM ANALYZE src"); err != nil {
		return fmt.Errorf("vacuum src: %w", err)
	}
	var size int64
	if err := c.QueryRow(ctx, "SELECT pg_table_size('src')").Scan(&size); err != nil {
		return fmt.Errorf("size of src: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"rows": *rows, "load_s": round3(load), "table_bytes": size, "bytes_per_row": round3(float64(size) / float64(max(*rows, 1))),
	})
}

// checksum is a table's row count and the MD5 of each bucket's canonical lines in id order.
type checksum struct {
	Rows    int64    `json:"rows"`
	Buckets []string `json:"buckets"` // hex MD5 of bucket id mod len(Buckets)
}

func checksumCmd(args []string) error {
	fs := flag.NewFlagSet("checksum", flag.ContinueOnError)
	pg := fs.String("pg", "", "PostgreSQL URL of a superuser (POSTGRES_URL)")
	db := fs.String("db", "", "database")
	changedAfter := fs.Int64("changed-after", 0, "> 0: only the rows changed after a load of ids 1..N (no snapshot)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	u, err := dbURL(*pg, *db)
	if err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect to database %s: %w", *db, err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, canonicalQuery, *changedAfter)
	if err != nil {
		return fmt.Errorf("read src: %w", err)
	}
	cs := newChecksummer(checksumBuckets)
	var id int64
	var line string
	if _, err := pgx.ForEachRow(rows, []any{&id, &line}, func() error { cs.add(id, line); return nil }); err != nil {
		return fmt.Errorf("read src: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(cs.sum())
}

// checksummer accumulates canonical lines, in id order, into per-bucket MD5s.
type checksummer struct {
	rows int64
	h    []hash.Hash
}

func newChecksummer(buckets int) *checksummer {
	c := &checksummer{h: make([]hash.Hash, buckets)}
	for i := range c.h {
		c.h[i] = md5.New()
	}
	return c
}

func (c *checksummer) add(id int64, line string) {
	c.rows++
	b := id % int64(len(c.h))
	if b < 0 {
		b = -b
	}
	c.h[b].Write([]byte(line))
	c.h[b].Write([]byte{'\n'})
}

func (c *checksummer) sum() checksum {
	out := checksum{Rows: c.rows}
	for _, h := range c.h {
		out.Buckets = append(out.Buckets, hex.EncodeToString(h.Sum(nil)))
	}
	return out
}

// dropDatabase drops database name's replication slots (terminating their walsenders,
// retrying while a reader reconnects), its publications and the database.
func dropDatabase(ctx context.Context, pg, name string) error {
	admin, err := pgx.Connect(ctx, pg)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer admin.Close(ctx)
	for {
		left := -1
		err := admin.QueryRow(ctx, `
			WITH s AS (SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = $1),
			     k AS (SELECT pg_terminate_backend(active_pid) FROM s WHERE active_pid IS NOT NULL),
			     d AS (SELECT pg_drop_replication_slot(slot_name) FROM s WHERE active_pid IS NULL)
			SELECT (SELECT count(*) FROM k) + (SELECT count(*) FROM s) - (SELECT count(*) FROM d)`, name).Scan(&left)
		if err == nil && left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slots of %s (%d left, %v): %w", name, left, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if !exists {
		return nil
	}
	u, err := dbURL(pg, name)
	if err != nil {
		return err
	}
	db, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", name, err)
	}
	rows, err := db.Query(ctx, "SELECT pubname FROM pg_publication")
	var pubs []string
	if err == nil {
		pubs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	for _, p := range pubs {
		if err == nil {
			_, err = db.Exec(ctx, "DROP PUBLICATION "+pgx.Identifier{p}.Sanitize())
		}
	}
	_ = db.Close(ctx)
	if err != nil {
		return fmt.Errorf("drop publications of %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}
