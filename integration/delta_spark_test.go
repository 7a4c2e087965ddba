package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// Interop with real Spark (pyspark + delta-spark, Delta jars from Maven Central through
// scripts/spark-jars.sh) and delta-rs. The test binary keeps a small pool of Spark helper
// processes (testdata/spark_delta_session.py, each a long-lived JVM fed one JSON command
// per line), started by the first startSpark and stopped by TestMain. Each test's session
// is pinned to one helper at its first command: the one with the least queued work. The
// pool has sparkJVMsDefault helpers unless INGESTD_TEST_SPARK_JVMS says otherwise (1
// gives the old single shared JVM).

const (
	sparkJVMsEnv     = "INGESTD_TEST_SPARK_JVMS"
	sparkJVMsDefault = 2
	// sparkSlowCommand is the duration above which a test logs a command (op, table,
	// time), so a slow CI run shows which Spark commands made it slow.
	sparkSlowCommand = 5 * time.Second
)

// sparkPool is the test binary's Spark helpers, started (all of them, booting in the
// background) by the first startSpark and stopped by TestMain (stopSpark).
type sparkPool struct {
	mu       sync.Mutex // guards sessions and every proc's pending, live and sessions
	procs    []*sparkProc
	sessions int // session ids handed out
}

// sparkProc is one Spark helper process. Commands of the sessions pinned to it go through
// mu, one at a time; each carries its test's session id.
type sparkProc struct {
	n        int        // 1-based index in the pool, for the usage lines
	mu       sync.Mutex // held for one command and its reply
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Scanner
	logPath  string        // Spark's stderr
	booted   chan struct{} // closed once the first reply (or its failure) arrived
	bootErr  error         // set before booted closes
	bootTime time.Duration
	dead     error // set under mu once the helper exited or replied garbage
	calls    int
	busy     time.Duration // time inside commands, under mu
	owner    string        // test that started the pool
	jvmStats string        // the JVM's GC time and heap at the end, set by stop
	// under the pool's mu: commands asked and not yet answered, live pinned sessions,
	// sessions ever pinned
	pending, live, sessions int
}

var (
	sparkOnce   sync.Once
	sharedSpark *sparkPool
	sparkErr    error // why the pool could not be started
)

// sparkSession is one test's view of the pool: its own Spark SQL session on the helper
// it is pinned to (SparkSession.newSession(): SQL conf such as spark.sql.session.timeZone
// and temp views are the test's own) and its own Hadoop options (op "hadoop": applied to
// that helper's SparkContext only for this session's commands, see
// spark_delta_session.py). The session is dropped when the test ends.
type sparkSession struct {
	pool *sparkPool
	id   string
	// p is the helper the session is pinned to, chosen at its first command (nil before);
	// under pool.mu (proc reads it).
	p       *sparkProc
	logFrom int64 // size of p's log when the session was pinned, for the tail on failure
	// under p.mu: commands sent, time inside them, time waiting for other tests' commands
	calls        int
	busy, queued time.Duration
	slow         []string // commands slower than sparkSlowCommand, logged by call
}

// needSpark returns the venv's python and the Delta jar directory, resolving the jars
// with scripts/spark-jars.sh when needed; it skips locally (fails under CI) when pyspark,
// Java or Maven are missing.
func needSpark(t *testing.T) (python, jars string) {
	t.Helper()
	python = filepath.Join(repoRoot, ".venv", "bin", "python")
	fail := func(msg string) {
		msg = "Spark interop test needs " + msg + ": run scripts/venv.sh && scripts/spark-jars.sh (make test does both)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if err := exec.Command(python, "-c", "import pyspark, delta, deltalake").Run(); err != nil {
		fail("a Python venv with pyspark, delta-spark and deltalake (" + python + ")")
	}
	if _, err := exec.LookPath("java"); err != nil {
		fail("Java 17+")
	}
	out, err := exec.Command(filepath.Join(repoRoot, "scripts", "spark-jars.sh")).Output()
	if err != nil {
		fail(fmt.Sprintf("the Delta jars from Maven Central (scripts/spark-jars.sh: %v)", err))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return python, lines[len(lines)-1]
}

// sparkJVMs is the pool size: INGESTD_TEST_SPARK_JVMS (1..8) or sparkJVMsDefault.
func sparkJVMs() (int, error) {
	v := os.Getenv(sparkJVMsEnv)
	if v == "" {
		return sparkJVMsDefault, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 8 {
		return 0, fmt.Errorf("parse %s=%q: want a number of JVMs from 1 to 8", sparkJVMsEnv, v)
	}
	return n, nil
}

// startSpark returns the test's session on the binary's Spark pool, starting the pool on
// first use; Spark boots in the background while the caller works (a command waits for
// its helper's boot, up to 4 minutes). Tests may run in parallel: commands on one helper
// are serialized. The session's log lines (per-session usage, slow commands, the tail of
// Spark's log on failure) name its helper.
func startSpark(t *testing.T, python, jars string) *sparkSession {
	t.Helper()
	sparkOnce.Do(func() { sharedSpark, sparkErr = launchSparkPool(python, jars, t.Name()) })
	if sparkErr != nil {
		t.Fatalf("start Spark: %v", sparkErr)
	}
	pool := sharedSpark
	pool.mu.Lock()
	pool.sessions++
	s := &sparkSession{pool: pool, id: fmt.Sprintf("s%d", pool.sessions)}
	pool.mu.Unlock()
	t.Cleanup(func() {
		if err := s.drop(); err != nil && !t.Failed() {
			t.Errorf("drop Spark session %s: %v", s.id, err)
		}
		pool.mu.Lock()
		p, logFrom := s.p, s.logFrom
		if p != nil {
			p.live--
		}
		pool.mu.Unlock()
		if p == nil {
			t.Logf("Spark session %s: no commands", s.id)
			return
		}
		p.mu.Lock()
		t.Logf("Spark session %s (JVM %d): %d commands, %v inside them, %v waiting for other tests' commands",
			s.id, p.n, s.calls, s.busy.Round(time.Millisecond), s.queued.Round(time.Millisecond))
		p.mu.Unlock()
		if t.Failed() {
			t.Logf("Spark log tail (JVM %d):\n%s", p.n, p.logTail(logFrom))
		}
	})
	return s
}

// launchSparkPool starts every helper of the pool at once; they boot in the background.
func launchSparkPool(python, jars, owner string) (*sparkPool, error) {
	n, err := sparkJVMs()
	if err != nil {
		return nil, err
	}
	pool := &sparkPool{}
	for i := 1; i <= n; i++ {
		p, err := launchSpark(python, jars, owner, i)
		if err != nil {
			pool.stop()
			return nil, fmt.Errorf("start Spark JVM %d of %d: %w", i, n, err)
		}
		pool.procs = append(pool.procs, p)
	}
	return pool, nil
}

// launchSpark starts one helper process; its log lives in a temporary directory that
// stopSpark removes.
func launchSpark(python, jars, owner string, n int) (*sparkProc, error) {
	dir, err := os.MkdirTemp("", "ingestd-spark-")
	if err != nil {
		return nil, fmt.Errorf("create Spark log dir: %w", err)
	}
	logPath := filepath.Join(dir, "spark.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create Spark log: %w", err)
	}
	cmd := exec.Command(python, filepath.Join(repoRoot, "integration", "testdata", "spark_delta_session.py"), jars)
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("open Spark stdin: %w", err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("open Spark stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	_ = logf.Close() // the child holds its own descriptor
	p := &sparkProc{n: n, cmd: cmd, in: in, out: bufio.NewScanner(outp), logPath: logPath, booted: make(chan struct{}), owner: owner}
	p.out.Buffer(make([]byte, 1<<20), 64<<20)
	begin := time.Now()
	go func() { // ends with the helper's first reply or its exit
		_, p.bootErr = p.reply()
		p.bootTime = time.Since(begin)
		close(p.booted)
	}()
	return p, nil
}

// stopSpark quits the pool's helpers if they were started (from TestMain, after every
// test) and prints one line of usage figures per helper and one for the whole pool.
func stopSpark() {
	if sharedSpark != nil {
		sharedSpark.stop()
	}
}

func (pool *sparkPool) stop() {
	var wg sync.WaitGroup
	for _, p := range pool.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	if len(pool.procs) == 0 {
		return
	}
	var calls int
	var busy time.Duration
	for _, p := range pool.procs {
		fmt.Fprintf(os.Stderr, "spark: JVM %d of %d (booted in %v), %d sessions, %d commands, %v inside commands%s\n",
			p.n, len(pool.procs), p.bootTime.Round(time.Millisecond), p.sessions, p.calls, p.busy.Round(time.Millisecond), p.jvmStats)
		calls += p.calls
		busy += p.busy
	}
	fmt.Fprintf(os.Stderr, "spark: %d JVM(s) for the whole run (started by %s), %d sessions, %d commands, %v inside commands\n",
		len(pool.procs), pool.procs[0].owner, pool.sessions, calls, busy.Round(time.Millisecond))
}

// stop asks the helper for its JVM's figures (p.jvmStats), quits it, kills it after 30 s
// and removes its log.
func (p *sparkProc) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jvmStats = p.askStats()
	_, _ = io.WriteString(p.in, `{"op":"quit"}`+"\n")
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(filepath.Dir(p.logPath))
}

// askStats returns the JVM's CPU time, time in garbage collection and heap as a suffix of
// the usage line, or "" when the helper cannot tell (not booted, gone). Called under mu.
func (p *sparkProc) askStats() string {
	if !isClosed(p.booted) || p.bootErr != nil || p.dead != nil {
		return ""
	}
	if _, err := io.WriteString(p.in, `{"op":"stats"}`+"\n"); err != nil {
		return ""
	}
	raw, err := p.reply()
	if err != nil {
		return ""
	}
	var st struct {
		CPUms    int64 `json:"cpu_ms"`
		GCms     int64 `json:"gc_ms"`
		GCs      int64 `json:"gcs"`
		HeapUsed int64 `json:"heap_used"`
		HeapMax  int64 `json:"heap_max"`
	}
	if json.Unmarshal(raw, &st) != nil {
		return ""
	}
	ms := func(n int64) time.Duration { return (time.Duration(n) * time.Millisecond).Round(time.Millisecond) }
	return fmt.Sprintf(", JVM CPU %v, GC %v in %d collections, heap %d of %d MiB in use",
		ms(st.CPUms), ms(st.GCms), st.GCs, st.HeapUsed>>20, st.HeapMax>>20)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logTail is the last 4,000 bytes of Spark's log from offset from on.
func (p *sparkProc) logTail(from int64) string {
	b, _ := os.ReadFile(p.logPath)
	if from > int64(len(b)) {
		from = 0
	}
	b = b[from:]
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (p *sparkProc) reply() (json.RawMessage, error) {
	if !p.out.Scan() {
		return nil, fmt.Errorf("spark helper exited: %v", p.out.Err())
	}
	var r struct {
		OK    json.RawMessage `json:"ok"`
		Error string          `json:"error"`
		Trace string          `json:"trace"`
	}
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("spark helper: %v in %q", err, p.out.Text())
	}
	if r.Error != "" {
		return nil, &sparkError{msg: fmt.Sprintf("spark: %s\n%s", r.Error, r.Trace)}
	}
	return r.OK, nil
}

// sparkError is an error Spark reported for one command; the helper keeps running.
type sparkError struct{ msg string }

func (e *sparkError) Error() string { return e.msg }

// pin returns the helper of session s, choosing it at the first command: the helper
// with the fewest commands asked and not yet answered (queued work right now), then the
// fewest live sessions (work to come), then the one that has booted, then the first.
// It counts the command about to be sent as pending on that helper.
func (s *sparkSession) pin() *sparkProc {
	pool := s.pool
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if s.p == nil {
		best := pool.procs[0]
		for _, p := range pool.procs[1:] {
			if p.pending != best.pending {
				if p.pending < best.pending {
					best = p
				}
				continue
			}
			if p.live != best.live {
				if p.live < best.live {
					best = p
				}
				continue
			}
			if isClosed(p.booted) && !isClosed(best.booted) {
				best = p
			}
		}
		best.live++
		best.sessions++
		s.p = best
		s.logFrom = fileSize(best.logPath)
	}
	s.p.pending++
	return s.p
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// do sends one command of session s and returns its reply: a *sparkError when Spark
// refused the command, any other error when the helper is gone (every later command
// then fails with the same error). A command slower than sparkSlowCommand is noted in
// s.slow for call to log.
func (s *sparkSession) do(cmd map[string]any) (json.RawMessage, error) {
	p := s.pin()
	defer func() {
		s.pool.mu.Lock()
		p.pending--
		s.pool.mu.Unlock()
	}()
	select {
	case <-p.booted:
	case <-time.After(4 * time.Minute):
		return nil, fmt.Errorf("spark JVM %d did not start within 4 minutes", p.n)
	}
	if p.bootErr != nil {
		return nil, fmt.Errorf("start Spark JVM %d: %w", p.n, p.bootErr)
	}
	withID := make(map[string]any, len(cmd)+1)
	for k, v := range cmd {
		withID[k] = v
	}
	withID["session"] = s.id
	b, err := json.Marshal(withID)
	if err != nil {
		return nil, fmt.Errorf("encode Spark command: %w", err)
	}
	asked := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return nil, fmt.Errorf("spark helper (JVM %d) died earlier: %w", p.n, p.dead)
	}
	begin := time.Now()
	defer func() {
		d := time.Since(begin)
		p.calls++
		p.busy += d
		s.calls++
		s.busy += d
		s.queued += begin.Sub(asked)
		if d > sparkSlowCommand {
			s.slow = append(s.slow, fmt.Sprintf("slow Spark command (JVM %d): %v for %s", p.n, d.Round(time.Millisecond), describeSparkCmd(cmd)))
		}
	}()
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.dead = fmt.Errorf("write to spark helper: %w", err)
		return nil, p.dead
	}
	raw, err := p.reply()
	var se *sparkError
	if err != nil && !errors.As(err, &se) {
		p.dead = err
	}
	return raw, err
}

// describeSparkCmd names a command's op and table for the slow-command line: the path
// of a read, the first 160 characters of a statement.
func describeSparkCmd(cmd map[string]any) string {
	op, _ := cmd["op"].(string)
	switch op {
	case "read":
		return fmt.Sprintf("read %v", cmd["path"])
	case "sql":
		q := fmt.Sprint(cmd["query"])
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		return "sql " + q
	default:
		return op
	}
}

// proc is the helper s is pinned to, nil before its first command.
func (s *sparkSession) proc() *sparkProc {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return s.p
}

// logSlow logs and forgets the session's slow commands (see sparkSlowCommand).
func (s *sparkSession) logSlow(t *testing.T) {
	t.Helper()
	p := s.proc()
	if p == nil {
		return
	}
	p.mu.Lock()
	slow := s.slow
	s.slow = nil
	p.mu.Unlock()
	for _, l := range slow {
		t.Log(l)
	}
}

// drop ends the session: its Spark SQL session and Hadoop options are forgotten. A helper
// that is gone is no error of the dropping test's.
func (s *sparkSession) drop() error {
	p := s.proc()
	if p == nil {
		return nil // never used: nothing to drop (and no need to wait for the boot)
	}
	select {
	case <-p.booted:
	default:
		return nil
	}
	if p.bootErr != nil {
		return nil
	}
	_, err := s.do(map[string]any{"op": "drop"})
	var se *sparkError
	if err != nil && !errors.As(err, &se) {
		return nil // the helper is gone: the test whose command saw it failed with the log tail
	}
	return err
}

func (s *sparkSession) call(t *testing.T, cmd map[string]any, into any) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	raw, err := s.do(cmd)
	s.logSlow(t)
	if err != nil {
		var se *sparkError
		if !errors.As(err, &se) {
			p := s.proc()
			t.Fatalf("%s: %v\nSpark log tail (JVM %d):\n%s", b, err, p.n, p.logTail(0))
		}
		t.Fatalf("%s: %v", b, err)
	}
	if into != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s: decode %s: %v", b, raw, err)
		}
	}
}

type sparkRead struct {
	Schema []struct {
		Name, Type string
		Nullable   bool
	} `json:"schema"`
	Rows []map[string]any `json:"rows"`
}

// deltaRSRead is what testdata/read_table.py (delta-rs) prints, with exact numbers.
type deltaRSRead struct {
	Version     int64            `json:"version"`
	Unsupported string           `json:"unsupported"` // delta-rs lacks a reader feature the table needs
	Files       int              `json:"files"`
	Rows        []map[string]any `json:"rows"`
	History     []string         `json:"history"` // operations, newest first
	Txns        map[string]any   `json:"txns"`    // appId → version (json.Number) or nil, for the txns asked
}

// readDeltaRS reads a table with delta-rs (testdata/read_table.py), asking for the
// transaction versions of txnApps; numbers stay exact (json.Number).
func readDeltaRS(t *testing.T, python, path string, txnApps ...string) deltaRSRead {
	t.Helper()
	args := []string{filepath.Join(repoRoot, "integration", "testdata", "read_table.py"), path}
	for _, app := range txnApps {
		args = append(args, "--txn", app)
	}
	cmd := exec.Command(python, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("delta-rs read %s: %v\n%s", path, err, stderr.String())
	}
	var r deltaRSRead
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("delta-rs read: %v", err)
	}
	return r
}

// ---- the all-types table ----

const interopSchema = `{"type":"struct","fields":[
{"name":"l","type":"long","nullable":true,"metadata":{}},
{"name":"b","type":"byte","nullable":true,"metadata":{}},
{"name":"sh","type":"short","nullable":true,"metadata":{}},
{"name":"i","type":"integer","nullable":true,"metadata":{}},
{"name":"f","type":"float","nullable":true,"metadata":{}},
{"name":"d","type":"double","nullable":true,"metadata":{}},
{"name":"bo","type":"boolean","nullable":true,"metadata":{}},
{"name":"s","type":"string","nullable":true,"metadata":{}},
{"name":"bin","type":"binary","nullable":true,"metadata":{}},
{"name":"dt","type":"date","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"tsn","type":"timestamp_ntz","nullable":true,"metadata":{}},
{"name":"d5","type":"decimal(5,2)","nullable":true,"metadata":{}},
{"name":"d15","type":"decimal(15,4)","nullable":true,"metadata":{}},
{"name":"d30","type":"decimal(30,6)","nullable":true,"metadata":{}},
{"name":"st","type":{"type":"struct","fields":[
  {"name":"a","type":"integer","nullable":true,"metadata":{}},
  {"name":"inner","type":{"type":"struct","fields":[
    {"name":"x","type":"string","nullable":true,"metadata":{}},
    {"name":"ys","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
{"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[
  {"name":"k","type":"string","nullable":true,"metadata":{}},
  {"name":"v","type":"double","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},
{"name":"arr2","type":{"type":"array","elementType":{"type":"array","elementType":"integer","containsNull":true},"containsNull":true},"nullable":true,"metadata":{}},
{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[
  {"name":"n","type":"long","nullable":true,"metadata":{}},
  {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}}]},"valueContainsNull":true},"nullable":true,"metadata":{}},
{"name":"m2","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":true},"nullable":true,"metadata":{}}
]}`

func micros(s string) int64 {
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return ts.UnixMicro()
}

func days(s string) int32 {
	d, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return int32(d.Unix() / 86400)
}

// fixed returns the big-endian two's complement of unscaled in n bytes.
func fixed(unscaled string, n int) []byte {
	v, _ := new(big.Int).SetString(unscaled, 10)
	if v.Sign() < 0 {
		v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	b := v.Bytes()
	return append(make([]byte, n-len(b)), b...)
}

// interopRows are the rows written by ingestd, and wantRows the same rows as the readers
// render them (timestamps as µs, decimals as strings, binary as hex, dates ISO).
func interopRows() []map[string]any {
	n30 := deltawriter.DecimalBytes(30)
	type me = deltawriter.MapEntry
	return []map[string]any{
		{ // every value set, nested nulls inside
			"l": int64(9223372036854775807), "b": int32(-128), "sh": int32(32767), "i": int32(-2147483648),
			"f": float32(1.5), "d": -2.5, "bo": true, "s": "héllo ✓", "bin": []byte{0x00, 0xff, 0x10},
			"dt": days("1969-07-20"), "ts": micros("1901-12-13T20:45:52.123456Z"), "tsn": micros("9999-12-31T23:59:59.999999Z"),
			"d5": int32(-99999), "d15": int64(123456789012345), "d30": fixed("-123456789012345678901234567890", n30),
			"st":   map[string]any{"a": int32(1), "inner": map[string]any{"x": "x", "ys": []any{int64(1), nil, int64(3)}}},
			"arr":  []any{map[string]any{"k": "a", "v": 0.5}, nil, map[string]any{"k": nil, "v": nil}},
			"arr2": []any{[]any{int32(1), int32(2)}, []any{}, nil, []any{nil}},
			"m": []me{{Key: "k1", Value: map[string]any{"n": int64(1), "tags": []any{"t", nil}}},
				{Key: "k2", Value: nil}, {Key: "k3", Value: map[string]any{"n": nil, "tags": []any{}}}},
			"m2": []me{{Key: "a", Value: int64(1)}, {Key: "b", Value: nil}},
		},
		{ // empty containers, null inner struct, year 9999 and before 1900
			"l": int64(2), "s": "", "bin": []byte{}, "ts": micros("9999-12-31T23:59:59.999999Z"), "tsn": micros("1899-12-31T23:59:59.000001Z"),
			"dt": days("9999-12-31"), "d5": int32(1), "d15": int64(-1), "d30": fixed("1", n30),
			"st": map[string]any{"a": nil, "inner": nil}, "arr": []any{}, "arr2": []any{}, "m": []me{}, "m2": []me{},
		},
		{"l": int64(3)}, // null everywhere
		{ // nulls one level down
			"l": int64(4), "st": map[string]any{"a": nil, "inner": map[string]any{"x": nil, "ys": nil}},
			"arr": []any{nil}, "arr2": []any{nil}, "m": []me{{Key: "only", Value: map[string]any{"n": nil, "tags": nil}}},
		},
	}
}

const wantRowsJSON = `[
{"l":9223372036854775807,"b":-128,"sh":32767,"i":-2147483648,"f":1.5,"d":-2.5,"bo":true,"s":"héllo ✓","bin":"00ff10",
 "dt":"1969-07-20","ts":-2147483647876544,"tsn":253402300799999999,"d5":"-999.99","d15":"12345678901.2345","d30":"-123456789012345678901234.567890",
 "st":{"a":1,"inner":{"x":"x","ys":[1,null,3]}},"arr":[{"k":"a","v":0.5},null,{"k":null,"v":null}],"arr2":[[1,2],[],null,[null]],
 "m":{"k1":{"n":1,"tags":["t",null]},"k2":null,"k3":{"n":null,"tags":[]}},"m2":{"a":1,"b":null}},
{"l":2,"b":null,"sh":null,"i":null,"f":null,"d":null,"bo":null,"s":"","bin":"","dt":"9999-12-31","ts":253402300799999999,"tsn":-2208988800999999,
 "d5":"0.01","d15":"-0.0001","d30":"0.000001","st":{"a":null,"inner":null},"arr":[],"arr2":[],"m":{},"m2":{}},
{"l":3,"b":null,"sh":null,"i":null,"f":null,"d":null,"bo":null,"s":null,"bin":null,"dt":null,"ts":null,"tsn":null,
 "d5":null,"d15":null,"d30":null,"st":null,"arr":null,"arr2":null,"m":null,"m2":null},
{"l":4,"b":null,"sh":null,"i":null,"f":null,"d":null,"bo":null,"s":null,"bin":null,"dt":null,"ts":null,"tsn":null,
 "d5":null,"d15":null,"d30":null,"st":{"a":null,"inner":{"x":null,"ys":null}},"arr":[null],"arr2":[null],"m":{"only":{"n":null,"tags":null}},"m2":null}
]`

// nullRow is a row with only some columns set, as the readers render it.
func nullRow(set map[string]any) map[string]any {
	var proto []map[string]any
	_ = json.Unmarshal([]byte(wantRowsJSON), &proto)
	r := map[string]any{}
	for k := range proto[0] {
		r[k] = nil
	}
	for k, v := range set {
		r[k] = v
	}
	return r
}

// canonRows renders rows as canonical JSON (sorted keys, exact numbers), sorted by l.
func canonRows(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		_ = dec.Decode(&v)
		b, _ = json.Marshal(v) // map keys sorted
		out[i] = string(b)
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := lOf(out[i]), lOf(out[j])
		if li != lj {
			return li < lj
		}
		return out[i] < out[j]
	})
	return out
}

func lOf(row string) string {
	var v struct {
		L json.Number `json:"l"`
	}
	_ = json.Unmarshal([]byte(row), &v)
	return fmt.Sprintf("%25s", v.L)
}

func wantRows(t *testing.T, extra ...map[string]any) []string {
	t.Helper()
	var rows []map[string]any
	dec := json.NewDecoder(strings.NewReader(wantRowsJSON))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		t.Fatal(err)
	}
	return canonRows(t, append(rows, extra...))
}

func sameRows(t *testing.T, who string, got []map[string]any, want []string) {
	t.Helper()
	g := canonRows(t, got)
	if !reflect.DeepEqual(g, want) {
		t.Errorf("%s read %d rows:\n%s\nwant %d rows:\n%s", who, len(g), strings.Join(g, "\n"), len(want), strings.Join(want, "\n"))
	}
}

// appendRows writes rows as one data file and commits them (ReadVersion = latest).
func appendRows(t *testing.T, tbl *deltawriter.Table, rows []map[string]any, meta *deltalog.Metadata, schema *deltalog.StructType) int64 {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if schema == nil {
		schema = snap.Schema
	}
	mode := snap.ColumnMapping
	pq, err := deltawriter.ParquetSchema(schema, mode)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	fo := snap.FileOptions()
	fo.Schema = schema
	add, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, len(rows), fo)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Metadata: meta, Adds: []deltalog.Add{add},
		Txns: []deltalog.Txn{{AppID: "interop-0", Version: snap.Version + 100}}, EngineInfo: "ingestd/test"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func createInteropTable(t *testing.T, root string, schemaJSON string, conf map[string]string) *deltawriter.Table {
	t.Helper()
	return createTableWith(t, root, schemaJSON, deltawriter.SchemaChange{Name: "interop", Properties: conf})
}

// createTableWith creates the table at root on local disk with ingestd's writer: c with
// the schema schemaJSON, committed as CREATE TABLE.
func createTableWith(t *testing.T, root string, schemaJSON string, c deltawriter.SchemaChange) *deltawriter.Table {
	t.Helper()
	ctx := context.Background()
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if c.Schema, err = deltalog.ParseSchema(schemaJSON); err != nil {
		t.Fatal(err)
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE", EngineInfo: "ingestd/test"}); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func TestDeltaSparkInterop(t *testing.T) {
	t.Parallel() // waits on Spark or the broker; own topics and temp dirs (see TestMain)
	start := time.Now()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the tables are written
	dir := t.TempDir()

	// 1. The all-types table, written by ingestd.
	allTypes := filepath.Join(dir, "all_types")
	tbl := createInteropTable(t, allTypes, interopSchema, nil)
	appendRows(t, tbl, interopRows()[:2], nil, nil)
	appendRows(t, tbl, interopRows()[2:], nil, nil)

	// 2. 25 commits with checkpoints at 10 and 20; a copy without commits 0..19 must be
	// read through checkpoint 20.
	cpTable := filepath.Join(dir, "checkpointed")
	cp := createInteropTable(t, cpTable, `{"type":"struct","fields":[{"name":"l","type":"long","nullable":true,"metadata":{}}]}`, nil)
	for i := 1; i <= 24; i++ {
		appendRows(t, cp, []map[string]any{{"l": int64(i)}}, nil, nil)
	}
	for _, v := range []int{10, 20} {
		if _, err := os.Stat(filepath.Join(cpTable, "_delta_log", fmt.Sprintf("%020d.checkpoint.parquet", v))); err != nil {
			t.Fatalf("checkpoint %d: %v", v, err)
		}
	}
	cpOnly := filepath.Join(dir, "checkpoint_only")
	if err := os.CopyFS(cpOnly, os.DirFS(cpTable)); err != nil {
		t.Fatal(err)
	}
	for v := 0; v < 20; v++ {
		if err := os.Remove(filepath.Join(cpOnly, "_delta_log", fmt.Sprintf("%020d.json", v))); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Remove(filepath.Join(cpOnly, "_delta_log", fmt.Sprintf("%020d.checkpoint.parquet", 10)))

	// 3. Column mapping (name) with an evolution that adds a top-level and a nested field.
	cmTable := filepath.Join(dir, "colmap")
	cm := createInteropTable(t, cmTable, `{"type":"struct","fields":[{"name":"l","type":"long","nullable":true,"metadata":{}},
		{"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`,
		map[string]string{deltalog.PropColumnMappingMode: "name"})
	cmSnap, _ := cm.Snapshot(context.Background())
	physRow := func(s *deltalog.StructType, l int64, a, b, c any) map[string]any {
		st := s.Field("st")
		sub := st.Type.(*deltalog.StructType)
		inner := map[string]any{sub.Field("a").PhysicalName(deltalog.ColumnMappingName): a}
		if f := sub.Field("b"); f != nil {
			inner[f.PhysicalName(deltalog.ColumnMappingName)] = b
		}
		r := map[string]any{s.Field("l").PhysicalName(deltalog.ColumnMappingName): l, st.PhysicalName(deltalog.ColumnMappingName): inner}
		if f := s.Field("c"); f != nil {
			r[f.PhysicalName(deltalog.ColumnMappingName)] = c
		}
		return r
	}
	appendRows(t, cm, []map[string]any{physRow(cmSnap.Schema, 1, "a1", nil, nil)}, nil, nil)
	evolved := cmSnap.Schema.Clone()
	evolved.Fields = append(evolved.Fields, &deltalog.StructField{Name: "c", Type: deltalog.String, Nullable: true})
	stType := evolved.Field("st").Type.(*deltalog.StructType)
	stType.Fields = append(stType.Fields, &deltalog.StructField{Name: "b", Type: deltalog.Long, Nullable: true})
	change, fo, err := deltawriter.PrepareSchemaChange(cmSnap, deltawriter.SchemaChange{Schema: evolved})
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, cm, []map[string]any{physRow(fo.Schema, 2, "a2", int64(22), "c2")}, change.Metadata, fo.Schema)
	wantCM := []string{
		`{"c":null,"l":1,"st":{"a":"a1","b":null}}`,
		`{"c":"c2","l":2,"st":{"a":"a2","b":22}}`,
	}
	t.Logf("tables written in %v", time.Since(start).Round(time.Millisecond))

	// delta-rs first (Spark is still starting).
	t.Run("delta-rs reads all types", func(t *testing.T) {
		r := readDeltaRS(t, python, allTypes)
		sameRows(t, "delta-rs", r.Rows, wantRows(t))
	})
	t.Run("delta-rs reads through checkpoint 20", func(t *testing.T) {
		for _, p := range []string{cpTable, cpOnly} {
			if r := readDeltaRS(t, python, p); len(r.Rows) != 24 || r.Version != 24 {
				t.Errorf("%s: version %d with %d rows, want 24 and 24", filepath.Base(p), r.Version, len(r.Rows))
			}
		}
	})
	t.Run("delta-rs reads the evolved column-mapped table", func(t *testing.T) {
		r := readDeltaRS(t, python, cmTable)
		if g := canonRows(t, r.Rows); !reflect.DeepEqual(g, wantCM) {
			t.Errorf("delta-rs rows %s, want %s", g, wantCM)
		}
	})

	sparkStart := time.Now()
	t.Run("Spark reads all types", func(t *testing.T) {
		var r sparkRead
		spark.call(t, map[string]any{"op": "read", "path": allTypes}, &r)
		sameRows(t, "Spark", r.Rows, wantRows(t))
		types := map[string]string{}
		for _, f := range r.Schema {
			types[f.Name] = f.Type
		}
		for col, want := range map[string]string{"b": "tinyint", "sh": "smallint", "ts": "timestamp", "tsn": "timestamp_ntz",
			"d5": "decimal(5,2)", "d15": "decimal(15,4)", "d30": "decimal(30,6)", "m": "map<string,struct<n:bigint,tags:array<string>>>",
			"arr2": "array<array<int>>"} {
			if types[col] != want {
				t.Errorf("Spark type of %s = %s, want %s", col, types[col], want)
			}
		}
	})
	t.Run("DESCRIBE HISTORY and DETAIL", func(t *testing.T) {
		var hist []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "DESCRIBE HISTORY delta.`" + allTypes + "`"}, &hist)
		var got []string
		for _, h := range hist {
			got = append(got, fmt.Sprintf("%v:%v:%v", h["version"], h["operation"], h["engineInfo"]))
		}
		want := []string{"2:WRITE:ingestd/test", "1:WRITE:ingestd/test", "0:CREATE TABLE:ingestd/test"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("history %v, want %v", got, want)
		}
		var detail []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "DESCRIBE DETAIL delta.`" + allTypes + "`"}, &detail)
		if len(detail) != 1 || detail[0]["format"] != "delta" || fmt.Sprint(detail[0]["numFiles"]) != "2" ||
			fmt.Sprint(detail[0]["minReaderVersion"]) != "3" || fmt.Sprint(detail[0]["minWriterVersion"]) != "7" {
			t.Errorf("detail %v", detail)
		}
	})
	t.Run("Spark appends, then ingestd appends", func(t *testing.T) {
		spark.call(t, map[string]any{"op": "sql", "query": "INSERT INTO delta.`" + allTypes + "` (l, s, ts, d30) VALUES (100, 'spark', TIMESTAMP'2000-01-01 00:00:00', 1.5)"}, nil)
		v := appendRows(t, tbl, []map[string]any{{"l": int64(200), "s": "ingestd after spark"}}, nil, nil)
		if v != 4 {
			t.Errorf("ingestd committed version %d, want 4 (after Spark's 3)", v)
		}
		want := wantRows(t,
			nullRow(map[string]any{"l": json.Number("100"), "s": "spark", "ts": json.Number("946684800000000"), "d30": "1.500000"}),
			nullRow(map[string]any{"l": json.Number("200"), "s": "ingestd after spark"}))
		var r sparkRead
		spark.call(t, map[string]any{"op": "read", "path": allTypes}, &r)
		sameRows(t, "Spark", r.Rows, want)
		sameRows(t, "delta-rs", readDeltaRS(t, python, allTypes).Rows, want)
	})
	t.Run("Spark reads through checkpoint 20", func(t *testing.T) {
		for _, p := range []string{cpTable, cpOnly} {
			var r []map[string]any
			spark.call(t, map[string]any{"op": "sql", "query": "SELECT count(*) AS n, sum(l) AS s FROM delta.`" + p + "`"}, &r)
			if len(r) != 1 || fmt.Sprint(r[0]["n"]) != "24" || fmt.Sprint(r[0]["s"]) != "300" {
				t.Errorf("%s: %v, want n=24 s=300", filepath.Base(p), r)
			}
		}
	})
	t.Run("Spark reads the evolved column-mapped table", func(t *testing.T) {
		var r sparkRead
		spark.call(t, map[string]any{"op": "read", "path": cmTable}, &r)
		if g := canonRows(t, r.Rows); !reflect.DeepEqual(g, wantCM) {
			t.Errorf("Spark rows %s, want %s", g, wantCM)
		}
	})
	t.Logf("Spark checks took %v after the tables were written; whole test %v", time.Since(sparkStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
