package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// missingService skips the test (locally) or fails it (CI=true) with msg.
func missingService(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// pgServer is the stack's PostgreSQL server (scripts/stack.sh: wal_level=logical, trust
// authentication on 127.0.0.1, superuser postgres).
type pgServer struct {
	url        *url.URL // POSTGRES_URL: the superuser on database postgres
	host, port string
}

// needPostgres returns the stack's PostgreSQL (POSTGRES_URL from the environment or
// .stack/env), or skips (locally) / fails (CI=true) when it is not configured or does not
// answer.
func needPostgres(t *testing.T) pgServer {
	t.Helper()
	raw := stackEnvOr("POSTGRES_URL")
	msg := "CDC integration test needs PostgreSQL (POSTGRES_URL=" + raw + "): run scripts/stack.sh up (make test does)"
	u, err := url.Parse(raw)
	if raw == "" || err != nil || !reachable(u.Host) {
		missingService(t, msg)
	}
	srv := pgServer{url: u, host: u.Hostname(), port: u.Port()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, raw)
	if err != nil {
		missingService(t, msg+": "+err.Error())
	}
	defer c.Close(ctx)
	var wal string
	if err := c.QueryRow(ctx, "SHOW wal_level").Scan(&wal); err != nil || wal != "logical" {
		t.Fatalf("PostgreSQL at %s: wal_level=%q (%v), want logical (restart it with scripts/stack.sh)", u.Host, wal, err)
	}
	return srv
}

// dbURL is the superuser URL of database name.
func (s pgServer) dbURL(name string) string {
	u := *s.url
	u.Path = "/" + name
	return u.String()
}

// pgDB is a database of one test, created by createPGDatabase and dropped at its
// cleanup with every replication slot on it and its publications.
type pgDB struct {
	srv  pgServer
	name string
	conn *pgx.Conn // the test's connection (not safe for concurrent use)
}

// createPGDatabase creates an empty database for the test (name t_<unique>) and
// connects to it. Cleanup, after the test's later cleanups (a Connect worker started
// afterwards stops first): terminate the walsenders still reading its slots, drop the
// slots (a slot left behind holds WAL for ever), the publications and the database.
func createPGDatabase(t *testing.T, srv pgServer) *pgDB {
	t.Helper()
	ctx := context.Background()
	name := "t_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	admin, err := pgx.Connect(ctx, srv.url.String())
	if err != nil {
		t.Fatalf("connect to %s: %v", srv.url.Host, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	d := &pgDB{srv: srv, name: name}
	t.Cleanup(func() {
		if d.conn != nil {
			_ = d.conn.Close(ctx)
		}
		if err := dropPGDatabase(srv, name); err != nil {
			t.Errorf("drop database %s and its slots: %v", name, err)
		}
	})
	d.conn, err = pgx.Connect(ctx, srv.dbURL(name))
	if err != nil {
		t.Fatalf("connect to database %s: %v", name, err)
	}
	return d
}

// dropPGDatabase drops database name's replication slots (terminating their readers,
// retrying while a reader reconnects), its publications and the database.
func dropPGDatabase(srv pgServer, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, srv.url.String())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
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
		// A slot still read, or taken again between the look-up and the drop (a reader
		// reconnecting): terminate and try again.
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slots (%d left): %v: %w", left, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	db, err := pgx.Connect(ctx, srv.dbURL(name))
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
		return fmt.Errorf("drop publications: %w", err)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database: %w", err)
	}
	return nil
}

// exec runs statements (one string may hold several, separated by semicolons).
func (d *pgDB) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := d.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("database %s: %s: %v", d.name, sql, err)
	}
}

// slotActive reports whether a walsender streams from the replication slot (Debezium's
// streaming phase: after the snapshot).
func (d *pgDB) slotActive(t *testing.T, slot string) bool {
	t.Helper()
	var active bool
	err := d.conn.QueryRow(context.Background(),
		"SELECT active FROM pg_replication_slots WHERE slot_name = $1 AND database = $2", slot, d.name).Scan(&active)
	if err == pgx.ErrNoRows {
		return false
	}
	if err != nil {
		t.Fatalf("look up replication slot %s: %v", slot, err)
	}
	return active
}

// needCDC is what a change-data-capture test needs: the stack, PostgreSQL and the Kafka
// Connect jars (a test that cannot have them fails in CI), a database of its own, the
// venv's python (delta-rs) and a Spark session to read the tables back.
func needCDC(t *testing.T) (stack, *pgDB, string, *sparkSession) {
	t.Helper()
	s := need(t)
	pg := needPostgres(t)
	needConnect(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	return s, createPGDatabase(t, pg), python, spark
}
