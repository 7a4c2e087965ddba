package integration

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/internal/tarzst"
)

// ingestd appends to copies of Delta tables written by Spark and delta-rs (the
// delta-kernel-rs conformance tables in testdata/delta-kernel-rs): column
// mapping by name and by id, timestamp_ntz (also as a partition column), deletion
// vectors with a checkpoint, V2 checkpoints with and without sidecars, and app
// transactions. Each append goes through ingestd's Delta writer as a pipeline flush does
// (snapshot, rows in the table's schema under its physical names and field ids,
// WriteDataFile per partition, one Commit with a txn). delta-rs (testdata/read_table.py)
// and Spark (the long-lived session of delta_spark_test.go) then must read every old row
// unchanged (the same rows as before the append, and as expected/ where the table has
// one) plus exactly the new rows; where ingestd wrote a checkpoint, both read the table
// again from that checkpoint alone. The type-widening table records a change Delta 4 no
// longer allows: ingestd refuses it like Spark does, and a type-widened table made by
// Spark is appended to instead.

// goldenCase is one table and what ingestd appends to it.
type goldenCase struct {
	name string // subtest name
	src  string // "golden_data/<name>" (has expected/) or "data/<name>"
	// rows returns the rows of append i (0-based), as the readers render them, by logical
	// column name; missing columns are null.
	rows    func(i int) []string
	appends int
	// txnApp returns the txn appId and version of append i; nil uses
	// ingestd-golden-<case index>-0 with version i.
	txnApp func(i int) (string, int64)
	// keepTxns are txns of the original table that must survive the appends.
	keepTxns map[string]int64
	// checkpoint is the version at which ingestd must write a checkpoint (0: none); v2
	// says it is a V2 (UUID-named JSON) checkpoint.
	checkpoint int64
	v2         bool
	// noDeltaRS: delta-rs 1.6.6 cannot read the table (typeWidening): read_table.py must
	// say so, naming this feature.
	noDeltaRS string
	// refused: ingestd must refuse to append, with an error wrapping
	// deltawriter.ErrUnsupportedFeature that contains this text, and leave the table as it
	// was; Spark must refuse the table too (sparkRefusal in its error).
	refused, sparkRefusal string
	// empty: the original holds no rows (metadata only); the appended ones are all.
	empty bool
	// legacyShift: expected/ was read by Spark in the writer's session zone, and the log's
	// legacy zone-less timestamp partition values mean that zone's local time; delta-rs,
	// Spark in UTC and ingestd (which reads a legacy zone-less value as UTC) read
	// them as UTC. expected/ then differs from delta-rs by exactly this shift (µs, by
	// column), which the comparison applies.
	legacyShift map[string]int64
}

func ids(from int, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d}`, from+i)
	}
	return out
}

var goldenCases = []goldenCase{
	{name: "column mapping name, all types", src: "golden_data/table-with-columnmapping-mode-name", appends: 1, rows: cmAllTypesRows},
	{name: "column mapping id, all types", src: "golden_data/table-with-columnmapping-mode-id", appends: 1, rows: cmAllTypesRows},
	// Written by a Delta 3.3 preview that allowed byte/short/int → decimal(p<10) and
	// long → decimal(p<20) (byte_decimal: byte → decimal(4,1)). The protocol's type
	// widening does not, and Delta 4 refuses to read or write such a table; ingestd refuses
	// to append to it. TestGoldenAppend's "type widening by Spark" case appends to a
	// valid type-widened table instead.
	{name: "type widening", src: "data/type-widening", appends: 1, noDeltaRS: "TypeWideningPreview",
		refused: `column "byte_decimal" recorded the type change byte → decimal(4,1)`, sparkRefusal: "DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA",
		rows: func(int) []string { return []string{`{"byte_long":7}`} }},
	{name: "timestamp_ntz partitioned", src: "golden_data/data-reader-timestamp_ntz", appends: 1, rows: ntzRows},
	// Partitioned tables: every partition type Delta allows but binary, nulls,
	// an existing partition with Spark's legacy timestamp value, escaping, column mapping,
	// materialized partition columns, decimals keeping their scale. (data/timestamp-partitioned-table
	// is left out: Spark cannot read the original, whose add.path has an unescaped ':'.)
	{name: "partition values, every type", src: "golden_data/data-reader-partition-values", appends: 1, rows: partitionValueRows,
		legacyShift: map[string]int64{"as_timestamp": 7 * 3600 * 1_000_000}}, // written in a US Pacific (PDT) session
	{name: "partitioned, column mapping none", src: "data/partition_cm/none", appends: 1, rows: categoryRows, empty: true},
	{name: "partitioned, column mapping name", src: "data/partition_cm/name", appends: 1, rows: categoryRows, empty: true},
	{name: "partitioned, column mapping id", src: "data/partition_cm/id", appends: 1, rows: categoryRows, empty: true},
	{name: "partitioned, materialized partition columns", src: "data/partitioned_with_materialize_feature", appends: 1, rows: letterRows},
	{name: "partitioned, letters and nulls", src: "data/basic_partitioned", appends: 1, rows: letterRows},
	{name: "partitioned by long, null partitions", src: "data/mixed-nulls", appends: 1, rows: func(int) []string {
		return []string{`{"id":100,"part":0,"value":"old partition","n":null}`, `{"id":101,"part":null,"value":"null partition","n":"x"}`, `{"id":102,"part":-9223372036854775808,"value":"min","n":null}`}
	}},
	{name: "partitioned by decimal", src: "data/basic-decimal-table", appends: 1, rows: func(int) []string {
		return []string{`{"part":"234.00000","col1":"1.50","col2":"2.00000","col3":"3.0000000000"}`, `{"part":"-0.00001","col1":"-1.00","col2":null,"col3":null}`, `{"part":null,"col1":null,"col2":null,"col3":null}`}
	}},
	{name: "timestamp_ntz column mapping name", src: "golden_data/data-reader-timestamp_ntz-name-mode", appends: 1, rows: ntzRows},
	{name: "timestamp_ntz column mapping id", src: "golden_data/data-reader-timestamp_ntz-id-mode", appends: 1, rows: ntzRows},
	{name: "deletion vectors with checkpoint", src: "golden_data/dv-partitioned-with-checkpoint", appends: 5, checkpoint: 20, rows: dvRows},
	{name: "deletion vectors with column mapping", src: "golden_data/dv-with-columnmapping", appends: 5, checkpoint: 20, rows: dvRows},
	{name: "V2 checkpoint JSON", src: "golden_data/v2-checkpoint-json", appends: 2, checkpoint: 4, v2: true, rows: func(i int) []string { return ids(100+10*i, 3) }},
	{name: "V2 checkpoint Parquet", src: "golden_data/v2-checkpoint-parquet", appends: 2, checkpoint: 4, v2: true, rows: func(i int) []string { return ids(100+10*i, 3) }},
	{name: "V2 checkpoints with sidecars", src: "data/v2-checkpoints-json-with-sidecars", appends: 1, checkpoint: 7, v2: true, rows: func(int) []string { return ids(5000, 4) }},
	{name: "V2 checkpoints Parquet with sidecars", src: "data/v2-checkpoints-parquet-with-sidecars", appends: 1, checkpoint: 7, v2: true, rows: func(int) []string { return ids(5000, 4) }},
	{name: "app txn with checkpoint", src: "data/app-txn-checkpoint", appends: 2, keepTxns: map[string]int64{"my-app2": 2},
		// The first append continues the table's own appId my-app (3 → 4): its txn is
		// replaced across the checkpoint; the second is ingestd's own.
		txnApp: func(i int) (string, int64) {
			if i == 0 {
				return "my-app", 4
			}
			return "ingestd-golden-app-txn-0", 41
		},
		rows: appTxnRows},
	{name: "app txn without checkpoint", src: "data/app-txn-no-checkpoint", appends: 1, keepTxns: map[string]int64{"my-app": 3, "my-app2": 2},
		txnApp: func(int) (string, int64) { return "ingestd-golden-app-txn-0", 7 }, rows: appTxnRows},
}

func cmAllTypesRows(int) []string {
	return []string{
		`{"ByteType":-128,"ShortType":32767,"IntegerType":-2147483648,"LongType":9223372036854775807,"FloatType":1.5,"DoubleType":-2.25,
		  "decimal":"-99999999.99","BooleanType":true,"StringType":"héllo ✓","BinaryType":"00ff","DateType":"1969-07-20","TimestampType":-1,
		  "nested_struct":{"aa":"x","ac":{"aca":-7}},"array_of_prims":[7,null,8],"array_of_arrays":[[1],[],null],"array_of_structs":[{"ab":9},null,{"ab":null}],
		  "map_of_prims":{"-1":null,"10":11},"map_of_rows":{"12":{"ab":13},"14":null},"map_of_arrays":{"15":[16,null],"17":null}}`,
		`{"ByteType":100,"nested_struct":{"aa":null,"ac":null},"array_of_prims":[],"map_of_prims":{}}`,
	}
}

func ntzRows(int) []string {
	return []string{
		`{"id":100,"tsNtz":1373043660123456,"tsNtzPartition":1373043660123456}`,  // an existing partition
		`{"id":101,"tsNtz":-62135596800000000,"tsNtzPartition":946684800000001}`, // a new one; year 1
		`{"id":102,"tsNtz":253402300799999999,"tsNtzPartition":null}`,
	}
}

// shiftRows adds shift[col] µs to the non-null values of col in rows (copies).
func shiftRows(t *testing.T, rows []map[string]any, shift map[string]int64) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		c := map[string]any{}
		for k, v := range r {
			c[k] = v
			if d, ok := shift[k]; ok && v != nil {
				n, err := v.(json.Number).Int64()
				if err != nil {
					t.Fatal(err)
				}
				c[k] = json.Number(strconv.FormatInt(n+d, 10))
			}
		}
		out[i] = c
	}
	return out
}

func partitionValueRows(int) []string {
	return []string{
		// Spark's existing partition (its timestamp partition value is the legacy form).
		`{"as_int":0,"as_long":0,"as_byte":0,"as_short":0,"as_boolean":true,"as_float":0.0,"as_double":0.0,"as_string":"0","as_string_lit_null":"null","as_date":"2021-09-08","as_timestamp":1631099471000000,"as_big_decimal":"0","value":"ingestd-0"}`,
		`{"as_int":-7,"as_long":9223372036854775807,"as_byte":-128,"as_short":32767,"as_boolean":false,"as_float":1.5,"as_double":-2.25,"as_string":"a/b c%d","as_string_lit_null":"NULL","as_date":"1969-12-31","as_timestamp":-1,"as_big_decimal":"-9","value":"ingestd-1"}`,
		`{"value":"ingestd-null"}`,
	}
}

func categoryRows(int) []string {
	return []string{`{"value":100,"category":"x/y"}`, `{"value":101,"category":null}`, `{"value":102,"category":"München"}`}
}

func letterRows(int) []string {
	return []string{`{"letter":"a","number":100,"a_float":1.5}`, `{"letter":"R&D {x}","number":101,"a_float":null}`, `{"letter":null,"number":102,"a_float":2.5}`}
}

func dvRows(i int) []string {
	return []string{
		fmt.Sprintf(`{"part":%d,"col1":%d,"col2":"ingestd%d"}`, i, 1000+i, i), // partition i has deleted rows
		fmt.Sprintf(`{"part":%d,"col1":%d,"col2":null}`, 100+i, 2000+i),       // a new partition
	}
}

func appTxnRows(i int) []string {
	return []string{
		fmt.Sprintf(`{"id":"ingestd-%d","value":%d,"modified":"2021-02-02"}`, i, 100+i),
		fmt.Sprintf(`{"id":"ingestd-%d","value":null,"modified":"2026-11-29"}`, i),
		fmt.Sprintf(`{"id":null,"value":%d,"modified":null}`, 200+i),
	}
}

// goldenRun is the state of one case between the delta-rs and the Spark phases.
type goldenRun struct {
	orig, copy, cpOnly string
	newRows            []string // canonical JSON of every appended row
	deltaRSBefore      []string // nil when delta-rs cannot read the table
	ok                 bool
}

func TestGoldenAppend(t *testing.T) {
	t.Parallel() // waits on Spark or the broker; own topics and temp dirs (see TestMain)
	start := time.Now()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while ingestd appends and delta-rs reads
	src := goldenTestdata(t)
	work := t.TempDir()

	runs := make([]*goldenRun, len(goldenCases))
	for ci, gc := range goldenCases {
		r := &goldenRun{}
		runs[ci] = r
		t.Run("delta-rs/"+gc.name, func(t *testing.T) {
			orig, expected := goldenTableDir(t, src, gc.src, filepath.Join(work, fmt.Sprintf("orig%02d", ci)))
			r.orig = orig
			r.copy = filepath.Join(work, fmt.Sprintf("table%02d", ci))
			if err := os.CopyFS(r.copy, os.DirFS(orig)); err != nil {
				t.Fatal(err)
			}

			before := readDeltaRS(t, python, orig)
			if gc.noDeltaRS != "" {
				if !strings.Contains(before.Unsupported, gc.noDeltaRS) {
					t.Fatalf("delta-rs read the original (unsupported=%q), want a refusal naming %s", before.Unsupported, gc.noDeltaRS)
				}
			} else {
				if before.Unsupported != "" {
					t.Fatalf("delta-rs cannot read the original: %s", before.Unsupported)
				}
				r.deltaRSBefore = canonJSONRows(t, before.Rows)
				if len(r.deltaRSBefore) == 0 && !gc.empty {
					t.Fatal("delta-rs read no rows from the original")
				}
				if expected != "" {
					got := r.deltaRSBefore
					if gc.legacyShift != nil {
						got = canonJSONRows(t, shiftRows(t, before.Rows, gc.legacyShift))
					}
					if want := readExpectedRows(t, python, expected); !slices.Equal(got, want) {
						t.Fatalf("delta-rs reads the original as\n%s\nexpected/ has\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
				}
			}

			// ingestd appends.
			ctx := context.Background()
			tbl, err := deltawriter.Open(ctx, mustStore(t, r.copy))
			if err != nil {
				t.Fatal(err)
			}
			snap0, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantTxns := map[string]int64{}
			for k, v := range snap0.Txns {
				wantTxns[k] = v
			}
			for k, v := range gc.keepTxns {
				if snap0.Txns[k] != v {
					t.Fatalf("original txns %v lack %s=%d", snap0.Txns, k, v)
				}
			}
			if gc.refused != "" {
				err := snap0.CheckWritable()
				if !errors.Is(err, deltawriter.ErrUnsupportedFeature) || !strings.Contains(err.Error(), gc.refused) {
					t.Fatalf("CheckWritable = %v, want an ErrUnsupportedFeature containing %q", err, gc.refused)
				}
				// A flush commits and is refused the same way; the table does not change.
				_, err = goldenAppend(t, tbl, gc.rows(0), deltalog.Txn{AppID: "ingestd-golden-refused-0", Version: 0})
				if !errors.Is(err, deltawriter.ErrUnsupportedFeature) || !strings.Contains(err.Error(), gc.refused) {
					t.Fatalf("append = %v, want an ErrUnsupportedFeature containing %q", err, gc.refused)
				}
				t.Logf("ingestd refuses: %v", err)
				after, err := openSnapshot(r.copy)
				if err != nil || after.Version != snap0.Version || after.Files.Len() != snap0.Files.Len() || !reflect.DeepEqual(after.Txns, snap0.Txns) {
					t.Errorf("after the refusal: %v, version %d with %d files, want %d with %d", err, after.Version, after.Files.Len(), snap0.Version, snap0.Files.Len())
				}
				r.ok = !t.Failed()
				return
			}
			for i := range gc.appends {
				app, ver := fmt.Sprintf("ingestd-golden-%02d-0", ci), int64(i)
				if gc.txnApp != nil {
					app, ver = gc.txnApp(i)
				}
				rows := gc.rows(i)
				v, err := goldenAppend(t, tbl, rows, deltalog.Txn{AppID: app, Version: ver})
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if want := snap0.Version + int64(i) + 1; v != want {
					t.Fatalf("append %d committed version %d, want %d", i, v, want)
				}
				wantTxns[app] = ver
				for _, row := range rows {
					r.newRows = append(r.newRows, fullRow(t, snap0.Schema, row))
				}
			}
			sort.Strings(r.newRows)
			last := snap0.Version + int64(gc.appends)

			// The table's own app id: a late retry of the first commit is fenced off.
			if gc.txnApp != nil {
				app, ver := gc.txnApp(0)
				_, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap0.Version, Txns: []deltalog.Txn{{AppID: app, Version: ver}}})
				if !errors.Is(err, deltawriter.ErrTxnAlreadyCommitted) {
					t.Errorf("re-commit of %s=%d after version %d: %v, want ErrTxnAlreadyCommitted", app, ver, snap0.Version, err)
				}
			}

			// ingestd's own view from a fresh log replay.
			fresh, err := deltawriter.Open(ctx, mustStore(t, r.copy))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := fresh.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version != last || !reflect.DeepEqual(snap.Txns, wantTxns) {
				t.Errorf("reopened: version %d txns %v, want %d %v", snap.Version, snap.Txns, last, wantTxns)
			}
			if snap.Files.Len() != snap0.Files.Len()+gc.appends*countPartitions(t, snap0, gc) {
				t.Errorf("reopened: %d live files, want %d before plus the new ones", snap.Files.Len(), snap0.Files.Len())
			}

			if gc.checkpoint > 0 {
				if gc.checkpoint != last {
					t.Fatalf("case wants a checkpoint at %d but ends at version %d", gc.checkpoint, last)
				}
				r.cpOnly = checkpointOnlyCopy(t, r.copy, gc.checkpoint, gc.v2, filepath.Join(work, fmt.Sprintf("cponly%02d", ci)))
				cp, err := openSnapshot(r.cpOnly)
				if err != nil {
					t.Fatalf("ingestd reads its own checkpoint %d: %v", gc.checkpoint, err)
				}
				if cp.Version != last || !reflect.DeepEqual(cp.Txns, wantTxns) || !reflect.DeepEqual(maps.Collect(cp.Files.All()), maps.Collect(snap.Files.All())) {
					t.Errorf("from checkpoint %d alone: version %d, %d files, txns %v; want %d, %d files, txns %v",
						gc.checkpoint, cp.Version, cp.Files.Len(), cp.Txns, last, snap.Files.Len(), wantTxns)
				}
			}

			// delta-rs reads old rows unchanged plus exactly the new ones.
			apps := slices.Sorted(func(yield func(string) bool) {
				for k := range wantTxns {
					if !yield(k) {
						return
					}
				}
			})
			for _, p := range []string{r.copy, r.cpOnly} {
				if p == "" {
					continue
				}
				after := readDeltaRS(t, python, p, apps...)
				if gc.noDeltaRS != "" {
					if !strings.Contains(after.Unsupported, gc.noDeltaRS) || after.Version != last {
						t.Errorf("%s: delta-rs: version %d unsupported=%q, want %d and a refusal naming %s", filepath.Base(p), after.Version, after.Unsupported, last, gc.noDeltaRS)
					}
					continue
				}
				if after.Version != last {
					t.Errorf("%s: delta-rs reads version %d, want %d", filepath.Base(p), after.Version, last)
				}
				sameRowSet(t, "delta-rs "+filepath.Base(p), canonJSONRows(t, after.Rows), r.deltaRSBefore, r.newRows)
				gotTxns := map[string]int64{}
				for k, v := range after.Txns {
					n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
					if err != nil {
						t.Errorf("delta-rs txn %s = %v", k, v)
					}
					gotTxns[k] = n
				}
				if !reflect.DeepEqual(gotTxns, wantTxns) {
					t.Errorf("%s: delta-rs txns %v, want %v", filepath.Base(p), gotTxns, wantTxns)
				}
			}
			r.ok = !t.Failed()
		})
	}
	t.Logf("appends and delta-rs reads took %v", time.Since(start).Round(time.Millisecond))

	sparkStart := time.Now()
	for ci, gc := range goldenCases {
		r := runs[ci]
		t.Run("Spark/"+gc.name, func(t *testing.T) {
			if !r.ok {
				t.Skip("the delta-rs phase of this case failed")
			}
			if gc.refused != "" {
				for _, p := range []string{r.orig, r.copy} {
					err := spark.try(t, map[string]any{"op": "read", "path": p}, nil)
					if err == nil || !strings.Contains(err.Error(), gc.sparkRefusal) {
						t.Errorf("Spark read %s: %v, want an error containing %s", filepath.Base(p), err, gc.sparkRefusal)
					}
				}
				return
			}
			var before sparkRead
			spark.call(t, map[string]any{"op": "read", "path": r.orig}, &before)
			old := canonJSONRows(t, before.Rows)
			if len(old) == 0 && !gc.empty {
				t.Fatal("Spark read no rows from the original")
			}
			if r.deltaRSBefore != nil && !slices.Equal(old, r.deltaRSBefore) {
				t.Fatalf("Spark and delta-rs disagree on the original:\nSpark\n%s\ndelta-rs\n%s", strings.Join(old, "\n"), strings.Join(r.deltaRSBefore, "\n"))
			}
			for _, p := range []string{r.copy, r.cpOnly} {
				if p == "" {
					continue
				}
				var after sparkRead
				spark.call(t, map[string]any{"op": "read", "path": p}, &after)
				sameRowSet(t, "Spark "+filepath.Base(p), canonJSONRows(t, after.Rows), old, r.newRows)
			}
		})
	}
	t.Run("Spark/type widening by Spark", func(t *testing.T) { sparkWidenedAppend(t, spark, python, filepath.Join(work, "widened")) })
	t.Logf("Spark reads took %v; whole test %v", time.Since(sparkStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// sameRowSet checks that got is exactly old plus added (as multisets of canonical rows).
func sameRowSet(t *testing.T, who string, got, old, added []string) {
	t.Helper()
	want := append(append([]string{}, old...), added...)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s read %d rows, want %d (%d old + %d new)\n got:\n%s\nwant:\n%s", who, len(got), len(want), len(old), len(added),
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// countPartitions is the number of data files one append of gc writes: one per distinct
// partition value among the rows of append 0 (1 for an unpartitioned table).
func countPartitions(t *testing.T, s *deltawriter.Snapshot, gc goldenCase) int {
	t.Helper()
	if len(s.Metadata.PartitionColumns) == 0 {
		return 1
	}
	seen := map[string]bool{}
	for _, row := range gc.rows(0) {
		m := decodeRow(t, row)
		var key []string
		for _, c := range s.Metadata.PartitionColumns {
			key = append(key, fmt.Sprint(m[c]))
		}
		seen[strings.Join(key, "/")] = true
	}
	return len(seen)
}

// goldenAppend writes rows (reader JSON, logical names) to tbl as ingestd does: one data
// file per partition value, built from the latest snapshot's schema with physical names
// and field ids, and one commit carrying every file and the txn. It returns the version,
// or Commit's error.
func goldenAppend(t *testing.T, tbl *deltawriter.Table, rows []string, txn deltalog.Txn) (int64, error) {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mode := snap.ColumnMapping
	parts := snap.Metadata.PartitionColumns
	isPart := map[string]bool{}
	for _, c := range parts {
		isPart[strings.ToLower(c)] = true
	}
	// Partition columns stay in the data files only with materializePartitionColumns.
	materialize := slices.Contains(snap.Protocol.WriterFeatures, deltalog.FeatureMaterializePartitionColumns)
	dataSchema := &deltalog.StructType{}
	for _, f := range snap.Schema.Fields {
		if materialize || !isPart[strings.ToLower(f.Name)] {
			dataSchema.Fields = append(dataSchema.Fields, f)
		}
	}
	pq, err := deltawriter.ParquetSchema(dataSchema, mode)
	if err != nil {
		t.Fatal(err)
	}

	type group struct {
		dir  string
		pv   map[string]*string
		rows []map[string]any
	}
	groups := map[string]*group{}
	var order []string
	for _, text := range rows {
		logical := decodeRow(t, text)
		phys := map[string]any{}
		pv := map[string]*string{}
		var names, dirs []string
		for _, f := range snap.Schema.Fields {
			v := logical[f.Name]
			name := f.PhysicalName(mode)
			wv := writerValue(t, f.Type, v, mode)
			if isPart[strings.ToLower(f.Name)] {
				// ingestd's own serialisation (deltawriter/partition.go), which Spark and
				// delta-rs must read back beside the files they wrote.
				pval := parquet.NullValue()
				if wv != nil {
					pval = parquet.ValueOf(wv)
				}
				s, err := deltawriter.PartitionValue(f.Type, pval)
				if err != nil {
					t.Fatal(err)
				}
				pv[name] = s
				names = append(names, name)
				var us int64
				if n, ok := wv.(int64); ok {
					us = n
				}
				dirs = append(dirs, deltawriter.PartitionDirValue(f.Type, s, us))
				if !materialize {
					continue
				}
			}
			phys[name] = wv
		}
		dir := deltawriter.PartitionDir(names, dirs)
		g := groups[dir]
		if g == nil {
			g = &group{dir: dir, pv: pv}
			groups[dir] = g
			order = append(order, dir)
		}
		g.rows = append(g.rows, phys)
	}

	c := deltawriter.Commit{ReadVersion: snap.Version, Operation: "WRITE", OperationParameters: map[string]string{"mode": "Append"},
		EngineInfo: "ingestd/golden-append-test", Txns: []deltalog.Txn{txn}}
	for _, dir := range order {
		g := groups[dir]
		cols, err := deltawriter.RowsToColumns(pq, g.rows)
		if err != nil {
			t.Fatal(err)
		}
		fo := snap.FileOptions()
		fo.Dir, fo.PartitionValues = g.dir, g.pv
		add, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, len(g.rows), fo)
		if err != nil {
			t.Fatal(err)
		}
		c.Adds = append(c.Adds, add)
	}
	return tbl.Commit(ctx, c)
}

func decodeRow(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("row %s: %v", text, err)
	}
	return m
}

// writerValue turns a value as the readers render it into what RowsToColumns takes for
// Delta type dt, with struct fields under their physical names.
func writerValue(t *testing.T, dt deltalog.DataType, v any, mode deltalog.ColumnMappingMode) any {
	t.Helper()
	if v == nil {
		return nil
	}
	num := func() json.Number {
		n, ok := v.(json.Number)
		if !ok {
			t.Fatalf("%s value %v is not a number", dt, v)
		}
		return n
	}
	switch dt := dt.(type) {
	case deltalog.PrimitiveType:
		switch dt {
		case deltalog.Byte, deltalog.Short, deltalog.Integer:
			n, err := strconv.ParseInt(string(num()), 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int32(n)
		case deltalog.Long, deltalog.Timestamp, deltalog.TimestampNtz:
			n, err := strconv.ParseInt(string(num()), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		case deltalog.Float:
			f, err := strconv.ParseFloat(string(num()), 32)
			if err != nil {
				t.Fatal(err)
			}
			return float32(f)
		case deltalog.Double:
			f, err := strconv.ParseFloat(string(num()), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		case deltalog.Boolean:
			return v.(bool)
		case deltalog.String:
			return v.(string)
		case deltalog.Binary:
			b, err := hex.DecodeString(v.(string))
			if err != nil {
				t.Fatal(err)
			}
			return b
		case deltalog.Date:
			d, err := time.Parse("2006-01-02", v.(string))
			if err != nil {
				t.Fatal(err)
			}
			return int32(d.Unix() / 86400)
		}
	case deltalog.DecimalType:
		s := v.(string)
		whole, frac, _ := strings.Cut(s, ".")
		if len(frac) != dt.Scale {
			t.Fatalf("decimal %s for %s: write it with exactly %d decimals, as the readers print it", s, dt, dt.Scale)
		}
		u, ok := new(big.Int).SetString(whole+frac, 10)
		if !ok {
			t.Fatalf("decimal %q", s)
		}
		switch {
		case dt.Precision <= 9:
			return int32(u.Int64())
		case dt.Precision <= 18:
			return u.Int64()
		default:
			return fixed(u.String(), deltawriter.DecimalBytes(dt.Precision))
		}
	case *deltalog.StructType:
		m := v.(map[string]any)
		out := map[string]any{}
		for _, f := range dt.Fields {
			out[f.PhysicalName(mode)] = writerValue(t, f.Type, m[f.Name], mode)
		}
		return out
	case *deltalog.ArrayType:
		var out []any
		for _, e := range v.([]any) {
			out = append(out, writerValue(t, dt.ElementType, e, mode))
		}
		if out == nil {
			out = []any{}
		}
		return out
	case *deltalog.MapType:
		m := v.(map[string]any)
		out := []deltawriter.MapEntry{}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}) {
			key := writerValue(t, dt.KeyType, mapKey(dt.KeyType, k), mode)
			out = append(out, deltawriter.MapEntry{Key: key, Value: writerValue(t, dt.ValueType, m[k], mode)})
		}
		return out
	}
	t.Fatalf("no test conversion for type %s", dt)
	return nil
}

// mapKey turns a rendered map key (always a string) back into the value of keyType.
func mapKey(keyType deltalog.DataType, k string) any {
	switch keyType {
	case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long:
		return json.Number(k)
	}
	return k
}

// fullRow renders a test row as the readers print it: every column of schema present
// (null when the row omits it, also inside present structs), canonical JSON.
func fullRow(t *testing.T, schema *deltalog.StructType, text string) string {
	t.Helper()
	var fill func(dt deltalog.DataType, v any) any
	fill = func(dt deltalog.DataType, v any) any {
		switch dt := dt.(type) {
		case *deltalog.StructType:
			m, ok := v.(map[string]any)
			if !ok {
				return v
			}
			out := map[string]any{}
			for _, f := range dt.Fields {
				out[f.Name] = fill(f.Type, m[f.Name])
			}
			return out
		case *deltalog.ArrayType:
			l, ok := v.([]any)
			if !ok {
				return v
			}
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = fill(dt.ElementType, e)
			}
			return out
		case *deltalog.MapType:
			m, ok := v.(map[string]any)
			if !ok {
				return v
			}
			out := map[string]any{}
			for k, e := range m {
				out[k] = fill(dt.ValueType, e)
			}
			return out
		}
		return v
	}
	b, err := json.Marshal(fill(schema, decodeRow(t, text)))
	if err != nil {
		t.Fatal(err)
	}
	return canonicalJSON(t, b)
}

// canonJSONRows renders rows as sorted canonical JSON (sorted keys, exact numbers).
func canonJSONRows(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = canonicalJSON(t, b)
	}
	sort.Strings(out)
	return out
}

// readExpectedRows reads a golden table's expected/ Parquet files (Spark's read of the
// table, stored by delta-kernel-rs) through read_table.py --parquet.
func readExpectedRows(t *testing.T, python, dir string) []string {
	t.Helper()
	cmd := exec.Command(python, filepath.Join(repoRoot, "integration", "testdata", "read_table.py"), "--parquet", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_table.py --parquet %s: %v\n%s", dir, err, stderr.String())
	}
	var d struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	rows := make([]string, len(d.Rows))
	for i, r := range d.Rows {
		rows[i] = canonicalJSON(t, r)
	}
	sort.Strings(rows)
	return rows
}

// checkpointOnlyCopy copies table to dst without the commits and checkpoints before
// version cp, as Delta's log cleanup leaves it: readers must start from ingestd's
// checkpoint cp (named by _last_checkpoint). Commit cp stays (Spark needs the commit of
// the version it loads).
func checkpointOnlyCopy(t *testing.T, table string, cp int64, v2 bool, dst string) string {
	t.Helper()
	logDir := filepath.Join(table, "_delta_log")
	pattern := fmt.Sprintf("%020d.checkpoint.parquet", cp)
	if v2 {
		pattern = fmt.Sprintf("%020d.checkpoint.*.json", cp)
	}
	got, _ := filepath.Glob(filepath.Join(logDir, pattern))
	if len(got) != 1 {
		t.Fatalf("ingestd wrote %d checkpoints matching %s at version %d, want 1", len(got), pattern, cp)
	}
	var lc struct {
		Version int64 `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(logDir, "_last_checkpoint"))
	if err == nil {
		err = json.Unmarshal(b, &lc)
	}
	if err != nil || lc.Version != cp {
		t.Fatalf("_last_checkpoint %s (%v), want version %d", b, err, cp)
	}
	if err := os.CopyFS(dst, os.DirFS(table)); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(dst, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || len(name) < 20 {
			continue
		}
		v, err := strconv.ParseInt(name[:20], 10, 64)
		if err != nil {
			continue
		}
		if v < cp { // commits and checkpoints before cp; commit cp itself stays, as after log cleanup

			if err := os.Remove(filepath.Join(dst, "_delta_log", name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

func mustStore(t *testing.T, root string) *storage.Local {
	t.Helper()
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openSnapshot(root string) (*deltawriter.Snapshot, error) {
	st, err := storage.NewLocal(root)
	if err != nil {
		return nil, err
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		return nil, err
	}
	return tbl.Snapshot(context.Background())
}

// goldenTestdata returns the delta-kernel-rs test data directory of the repository
// (testdata/delta-kernel-rs).
func goldenTestdata(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "testdata", "delta-kernel-rs")
	if _, err := os.Stat(filepath.Join(dir, "golden_data")); err != nil {
		t.Fatalf("golden append test needs the delta-kernel-rs test data at %s: %v", dir, err)
	}
	return dir
}

// goldenTableDir returns the root of table key ("golden_data/<name>" or "data/<name>"),
// extracting a .tar.zst into scratch when needed, and its expected/ folder ("" if none).
func goldenTableDir(t *testing.T, src, key, scratch string) (root, expected string) {
	t.Helper()
	sub, name, _ := strings.Cut(key, "/")
	if fi, err := os.Stat(filepath.Join(src, sub, name)); err == nil && fi.IsDir() {
		return filepath.Join(src, sub, name), ""
	}
	if err := tarzst.Extract(filepath.Join(src, sub, name+".tar.zst"), scratch); err != nil {
		t.Fatal(err)
	}
	if sub == "golden_data" {
		base := filepath.Join(scratch, name)
		if fi, err := os.Stat(filepath.Join(base, "expected")); err == nil && fi.IsDir() {
			expected = filepath.Join(base, "expected")
		}
		return filepath.Join(base, "delta"), expected
	}
	return filepath.Join(scratch, name), ""
}

// try is call for a command that may fail: it returns Spark's error instead of failing t
// (a helper that is gone still fails t).
func (s *sparkSession) try(t *testing.T, cmd map[string]any, into any) error {
	t.Helper()
	raw, err := s.do(cmd)
	s.logSlow(t)
	var se *sparkError
	if err != nil && !errors.As(err, &se) {
		b, _ := json.Marshal(cmd)
		p := s.proc()
		t.Fatalf("%s: %v\nSpark log tail (JVM %d):\n%s", b, err, p.n, p.logTail(0))
	}
	if err != nil || into == nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// sparkWidenedAppend covers type widening on a valid table: Spark creates it, writes a
// row and widens every column with ALTER COLUMN TYPE (one kind of Delta 4 widening each),
// reaching version 9; ingestd appends version 10 in the widened types, which also writes
// its checkpoint 10. Spark then reads the old row unchanged plus ingestd's rows, from
// the full log and from the checkpoint alone; delta-rs refuses the typeWidening feature.
func sparkWidenedAppend(t *testing.T, spark *sparkSession, python, dir string) {
	q := "delta.`" + dir + "`"
	for _, sql := range []string{
		"CREATE TABLE " + q + " (b TINYINT, s SMALLINT, i INT, l BIGINT, f FLOAT, d DECIMAL(10,2), dt DATE, n INT) USING delta " +
			"TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.feature.timestampNtz' = 'supported')",
		"INSERT INTO " + q + " VALUES (1, 2, 3, 4, 1.5, 12.34, DATE'2024-01-01', 5)",
		"ALTER TABLE " + q + " ALTER COLUMN b TYPE INT",
		"ALTER TABLE " + q + " ALTER COLUMN s TYPE BIGINT",
		"ALTER TABLE " + q + " ALTER COLUMN i TYPE DOUBLE",
		"ALTER TABLE " + q + " ALTER COLUMN l TYPE DECIMAL(22,1)",
		"ALTER TABLE " + q + " ALTER COLUMN f TYPE DOUBLE",
		"ALTER TABLE " + q + " ALTER COLUMN d TYPE DECIMAL(20,5)",
		"ALTER TABLE " + q + " ALTER COLUMN dt TYPE TIMESTAMP_NTZ",
		"ALTER TABLE " + q + " ALTER COLUMN n TYPE DECIMAL(12,1)",
	} {
		spark.call(t, map[string]any{"op": "sql", "query": sql}, nil)
	}
	var before sparkRead
	spark.call(t, map[string]any{"op": "read", "path": dir}, &before)
	old := canonJSONRows(t, before.Rows)
	want := []string{`{"b":1,"d":"12.34000","dt":1704067200000000,"f":1.5,"i":3.0,"l":"4.0","n":"5.0","s":2}`}
	if !slices.Equal(old, want) {
		t.Fatalf("Spark reads the widened table as %s, want %s", old, want)
	}

	ctx := context.Background()
	tbl, err := deltawriter.Open(ctx, mustStore(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 9 || !slices.Contains(snap.Protocol.ReaderFeatures, "typeWidening") {
		t.Fatalf("Spark's table: version %d protocol %+v, want 9 with typeWidening", snap.Version, snap.Protocol)
	}
	rows := []string{
		`{"b":2147483647,"s":-9223372036854775808,"i":0.25,"l":"123456789012345678901.5","f":1e+300,
		  "d":"123456789012345.67891","dt":253402300799999999,"n":"-12345678901.5"}`,
		`{"b":null,"s":7}`,
	}
	v, err := goldenAppend(t, tbl, rows, deltalog.Txn{AppID: "ingestd-golden-widened-0", Version: 0})
	if err != nil || v != 10 {
		t.Fatalf("append: version %d, %v; want 10", v, err)
	}
	var added []string
	for _, r := range rows {
		added = append(added, fullRow(t, snap.Schema, r))
	}
	cpOnly := checkpointOnlyCopy(t, dir, 10, false, dir+"-cponly")
	for _, p := range []string{dir, cpOnly} {
		var after sparkRead
		spark.call(t, map[string]any{"op": "read", "path": p}, &after)
		sameRowSet(t, "Spark "+filepath.Base(p), canonJSONRows(t, after.Rows), old, added)
		if r := readDeltaRS(t, python, p); !strings.Contains(r.Unsupported, "TypeWidening") || r.Version != 10 {
			t.Errorf("delta-rs %s: version %d unsupported=%q, want 10 and a refusal naming TypeWidening", filepath.Base(p), r.Version, r.Unsupported)
		}
	}
}
