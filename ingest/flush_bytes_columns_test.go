package ingest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// The typed column path of the flush for strings: a non-repeated
// BYTE_ARRAY column (string, binary, enum) is held in the byte form (column.Column: the
// rows' bytes back to back, one end offset a row) while its values are set, and turns
// levelled at its first null. The flush carries these columns through the budget, the
// fills (generated columns, CHECK constraints, Kafka columns), the partitioner and the
// data files: the files read back hold exactly the records' values, and exactly what the
// same flush writes with every column levelled (flusher.levelled, the baseline).

// bytesAvsc is the writer schema of these tests (id 30): a long, a nullable string, a
// string, bytes and an enum.
var bytesAvsc = map[int]string{30: `{"type":"record","name":"s","fields":[
 {"name":"id","type":"long"},{"name":"s","type":["null","string"]},{"name":"region","type":"string"},
 {"name":"b","type":"bytes"},{"name":"e","type":{"type":"enum","name":"color","symbols":["RED","GREEN","BLUE"]}}]}`}

// bytesRec is one record of bytesAvsc; a nil s is null.
type bytesRec struct {
	id     int64
	s      *string
	region string
	b      []byte
	e      string
}

func strp(v string) *string { return &v }

// bytesRecords frames rows as Kafka records of topic brk, partition 0, offsets 0, 1, ….
func bytesRecords(t *testing.T, rows []bytesRec) []*kgo.Record {
	t.Helper()
	var recs []breakRec
	for _, r := range rows {
		v := map[string]any{"id": r.id, "s": nil, "region": r.region, "b": r.b, "e": r.e}
		if r.s != nil {
			v["s"] = map[string]any{"string": *r.s}
		}
		recs = append(recs, breakRec{30, v})
	}
	return breakRecords(t, bytesAvsc, recs)
}

// bytesTableSchema is the table of bytesAvsc (every column nullable) and extra columns.
func bytesTableSchema(extra ...*deltalog.StructField) *deltalog.StructType {
	return &deltalog.StructType{Fields: append([]*deltalog.StructField{
		{Name: "id", Type: deltalog.Long, Nullable: true},
		{Name: "s", Type: deltalog.String, Nullable: true},
		{Name: "region", Type: deltalog.String, Nullable: true},
		{Name: "b", Type: deltalog.Binary, Nullable: true},
		{Name: "e", Type: deltalog.String, Nullable: true},
	}, extra...)}
}

// bytesRow renders the row of r as readAny does (leaves in name order), with the
// columns of extra ("name" → rendered value), without the columns of drop (a partition
// column).
func bytesRow(r bytesRec, extra map[string]string, drop ...string) string {
	vals := map[string]string{"id": strconv.FormatInt(r.id, 10), "s": "null", "region": strconv.Quote(r.region),
		"b": strconv.Quote(string(r.b)), "e": strconv.Quote(r.e)}
	if r.s != nil {
		vals["s"] = strconv.Quote(*r.s)
	}
	maps.Copy(vals, extra)
	for _, d := range drop {
		delete(vals, d)
	}
	names := slices.Sorted(maps.Keys(vals))
	var s []string
	for _, n := range names {
		s = append(s, n+"="+vals[n])
	}
	return strings.Join(s, " ")
}

// A nullable string whose first null comes after byte-form rows turns levelled at that
// row and keeps the earlier rows' values (which alias its own Bytes); a record that
// fails to decode after it turned (its body cut short in b, after s and region were
// appended) is rolled back and dead-lettered; the other string, bytes and enum columns
// stay in the byte form. The next flush of the same flusher, without a null, starts
// every column dense again on the kept buffers. The files hold exactly the written
// records, as the levelled baseline's do.
func TestBytesColumnTurnsLevelledMidBatch(t *testing.T) {
	schemas := breakSchemas(t, bytesAvsc)
	rows := []bytesRec{{0, strp("zero"), "eu", []byte{0, 1, 2}, "RED"}, {1, strp(""), "eu", []byte{}, "GREEN"},
		{2, strp("twee"), "us-west", []byte("\xff\xfe"), "BLUE"}, {3, nil, "eu", []byte("three"), "RED"},
		{4, strp("vier"), "ap", []byte("four!"), "GREEN"}, {5, strp("vijf \u00e9"), "eu", []byte("5"), "BLUE"}}
	recs := bytesRecords(t, rows)
	recs[4].Value = recs[4].Value[:len(recs[4].Value)-1] // e cut off, after s, region and b were appended: truncated
	var written []string
	for _, r := range append(slices.Clone(rows[:4]), rows[5]) {
		written = append(written, bytesRow(r, nil))
	}
	next := []bytesRec{{10, strp("tien"), "eu", []byte("x"), "RED"}, {11, strp("elf"), "us", []byte("yy"), "BLUE"}}
	var written2 []string
	for _, r := range next {
		written2 = append(written2, bytesRow(r, nil))
	}
	for _, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createBreakTable(t, dir, bytesTableSchema(), nil, nil)
			f, st := newBreakFlusher(t, dir, breakConfig(dir), schemas, levelled)
			res := breakFlushWith(t, f, st, recs)
			wantForms := "b:D e:D id:D region:D s:L"
			if levelled {
				wantForms = "b:L e:L id:L region:L s:L"
			}
			if got := res.forms[""]; got != wantForms {
				t.Errorf("forms after the decode: %s; want %s", got, wantForms)
			}
			if got := deadLetters(res.out); fmt.Sprint(got) != "[4:truncated]" {
				t.Errorf("dead letters %v; want [4:truncated]", got)
			}
			if got := res.files[""]; res.out.rows != 5 || !slices.Equal(got, written) {
				t.Errorf("%d rows:\n%s\nwant:\n%s", res.out.rows, strings.Join(got, "\n"), strings.Join(written, "\n"))
			}
			res = breakFlushWith(t, f, st, bytesRecords(t, next))
			wantForms = "b:D e:D id:D region:D s:D"
			if levelled {
				wantForms = "b:L e:L id:L region:L s:L"
			}
			if got := res.forms[""]; got != wantForms {
				t.Errorf("second flush: forms after the decode: %s; want %s", got, wantForms)
			}
			if got := res.files[""]; !slices.Equal(got, written2) {
				t.Errorf("second flush:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(written2, "\n"))
			}
		})
	}
}

// Partitioned by a string column: rows alternate between partition values (a run of one
// value, then another: partitioner.sameAsLast compares the row's value with the last
// row's, which must not alias the table-wide column's Bytes, overwritten by the next
// row), and move into their partition's file in the byte form while set: the file of
// region "a/x" keeps s dense although the batch's table-wide s turned levelled at region
// "b=y"'s null, and that file turns levelled at it. A row the partitioner drops (a third
// region over batch.max_open_partitions 2) after s turned levelled leaves nothing behind.
// Directories and add.partitionValues hold the strings, Hive-escaped in the path.
func TestBytesColumnsPartitionByString(t *testing.T) {
	schemas := breakSchemas(t, bytesAvsc)
	rows := []bytesRec{{0, strp("s0"), "a/x", []byte("b0"), "RED"}, {1, strp("s1"), "b=y", []byte("b1"), "GREEN"},
		{2, nil, "b=y", []byte("b2"), "BLUE"}, {3, strp("s3"), "a/x", []byte(""), "RED"}, {4, strp("s4"), "b=y", []byte("b4"), "RED"},
		{5, strp("s5"), "a/x", []byte("b5"), "GREEN"}, {6, strp("s6"), "c", []byte("b6"), "BLUE"}, {7, strp("s7"), "a/x", []byte("b7"), "BLUE"}}
	recs := bytesRecords(t, rows)
	// The directories Hive-escape the values (deltawriter.EscapePartitionName); add.path,
	// a URI, escapes the escapes' '%'.
	da, db := "region="+deltawriter.EscapePartitionName("a/x"), "region="+deltawriter.EscapePartitionName("b=y")
	if da != "region=a%2Fx" || db != "region=b%3Dy" {
		t.Fatalf("directories %s, %s; want region=a%%2Fx, region=b%%3Dy", da, db)
	}
	pa, pb := "region=a%252Fx", "region=b%253Dy" // in add.path
	want := map[string][]string{}
	for _, r := range rows {
		switch r.region {
		case "a/x":
			want[pa] = append(want[pa], bytesRow(r, nil, "region"))
		case "b=y":
			want[pb] = append(want[pb], bytesRow(r, nil, "region"))
		}
	}
	for _, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createBreakTable(t, dir, bytesTableSchema(), []string{"region"}, nil)
			cfg := breakConfig(dir)
			cfg.Batch.MaxOpenPartitions = 2
			res := runBreakFlush(t, dir, cfg, schemas, recs, levelled)
			wantForms := map[string]string{"": "b:D e:D id:D region:D s:L", da: "b:D e:D id:D s:D", db: "b:D e:D id:D s:L"}
			if levelled {
				wantForms = map[string]string{"": "b:L e:L id:L region:L s:L", da: "b:L e:L id:L s:L", db: "b:L e:L id:L s:L"}
			}
			if !maps.Equal(res.forms, wantForms) {
				t.Errorf("forms after the decode: %v; want %v", res.forms, wantForms)
			}
			if got := res.out.cutAt[topicPartition{"brk", 0}]; got != 6 || len(res.out.cutAt) != 1 {
				t.Errorf("cut at %v; want offset 6 of brk/0 (region c, over the limit)", res.out.cutAt)
			}
			// Record 7 follows the cut record of its Kafka partition: left for the next
			// flush with it.
			want := maps.Clone(want)
			want[pa] = want[pa][:len(want[pa])-1]
			if !maps.EqualFunc(res.files, want, slices.Equal) {
				t.Errorf("files %v;\nwant %v", res.files, want)
			}
			for d, pv := range map[string]string{pa: "a/x", pb: "b=y"} {
				if got := res.parts[d]["region"]; got == nil || *got != pv || len(res.parts[d]) != 1 {
					t.Errorf("%s: add.partitionValues %v; want region=%q", d, res.parts[d], pv)
				}
			}
		})
	}
}

// A string generated column (up = upper(region)), the Kafka columns topic, partition,
// offset and a string key, and CHECK constraints reading strings (length(region) < 5,
// s <> 'bad'): the rows they reject (after the strings were appended, one after s turned
// levelled: a null s violates s <> 'bad') are dropped, the others are written with their
// computed up and Kafka coordinates. The columns the fills set stay in the byte form (the
// decoder's NULL for them goes to the row's spare columns) until a null key turns
// _kafka_key levelled; unpartitioned and partitioned by the generated string column.
func TestBytesColumnsGeneratedConstraintsKafkaKey(t *testing.T) {
	schemas := breakSchemas(t, bytesAvsc)
	rows := []bytesRec{{0, strp("a"), "eu", []byte("0"), "RED"}, {1, strp("b"), "us", []byte("1"), "GREEN"},
		{2, strp("c"), "toolong", []byte("2"), "BLUE"}, {3, strp("d"), "Eu", []byte("3"), "RED"},
		{4, nil, "us", []byte("4"), "RED"}, {5, strp("bad"), "eu", []byte("5"), "GREEN"}, {6, strp("g"), "ap", []byte("6"), "BLUE"},
		{7, strp("h"), "us", []byte("7"), "RED"}}
	recs := bytesRecords(t, rows)
	for i, r := range recs {
		if i != 6 {
			r.Key = []byte("k" + strconv.Itoa(i))
		}
	}
	reject := map[int]string{2: "check_violation", 4: "check_violation", 5: "check_violation"}
	var wantDead []string
	wantUnpart, wantPart := []string{}, map[string][]string{}
	for i, r := range rows {
		if why := reject[i]; why != "" {
			wantDead = append(wantDead, fmt.Sprintf("%d:%s", i, why))
			continue
		}
		key := strconv.Quote("k" + strconv.Itoa(i))
		if i == 6 {
			key = "null"
		}
		up := strings.ToUpper(r.region)
		extra := map[string]string{"_kafka_topic": `"brk"`, "_kafka_partition": "0", "_kafka_offset": strconv.Itoa(i), "_kafka_key": key, "up": strconv.Quote(up)}
		wantUnpart = append(wantUnpart, bytesRow(r, extra))
		wantPart["up="+up] = append(wantPart["up="+up], bytesRow(r, extra, "up"))
	}
	kcols := []string{kafkacols.Topic, kafkacols.Partition, kafkacols.Offset, kafkacols.Key}
	kfields, err := kafkacols.Fields(kcols, kafkacols.KeyString, nil)
	if err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{"delta.constraints.region_short": "length(region) < 5", "delta.constraints.s_good": "s <> 'bad'"}
	for _, part := range []bool{false, true} {
		var stats [2]map[string]string
		for li, levelled := range []bool{false, true} {
			t.Run(fmt.Sprintf("partitioned=%v/levelled=%v", part, levelled), func(t *testing.T) {
				dir := t.TempDir()
				var by []string
				if part {
					by = []string{"up"}
				}
				up := &deltalog.StructField{Name: "up", Type: deltalog.String, Nullable: true, Metadata: map[string]any{deltalog.MetaGenerationExpression: "upper(region)"}}
				createGenTable(t, dir, bytesTableSchema(append([]*deltalog.StructField{up}, kfields...)...), by, conf)
				cfg := breakConfig(dir)
				cfg.Table.KafkaColumns, cfg.Table.KeyFormat = kcols, kafkacols.KeyString
				res := runBreakFlush(t, dir, cfg, schemas, recs, levelled)
				if got := deadLetters(res.out); !slices.Equal(got, wantDead) {
					t.Errorf("dead letters %v; want %v", got, wantDead)
				}
				wantForms := "_kafka_key:L _kafka_offset:D _kafka_partition:D _kafka_topic:D b:D e:D id:D region:D s:L up:D"
				if part {
					wantForms = "_kafka_key:L _kafka_offset:D _kafka_partition:D _kafka_topic:D b:D e:D id:D region:D s:L up:D"
				}
				if levelled {
					wantForms = "_kafka_key:L _kafka_offset:L _kafka_partition:L _kafka_topic:L b:L e:L id:L region:L s:L up:L"
				}
				if got := res.forms[""]; got != wantForms {
					t.Errorf("forms after the decode: %s; want %s", got, wantForms)
				}
				if part {
					if !maps.EqualFunc(res.files, wantPart, slices.Equal) {
						t.Errorf("files:\n%v\nwant:\n%v", res.files, wantPart)
					}
					if !levelled {
						// The file of up=US holds no null key and no null s: every column dense.
						if got, want := res.forms["up=US"], "_kafka_key:D _kafka_offset:D _kafka_partition:D _kafka_topic:D b:D e:D id:D region:D s:D"; got != want {
							t.Errorf("forms of up=US: %s; want %s", got, want)
						}
					}
				} else if got := res.files[""]; !slices.Equal(got, wantUnpart) {
					t.Errorf("file rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantUnpart, "\n"))
				}
				stats[li] = res.stats
			})
		}
		if !maps.Equal(stats[0], stats[1]) {
			t.Errorf("partitioned=%v: add.stats differ:\ndense    %v\nlevelled %v", part, stats[0], stats[1])
		}
	}
}

// The batch budget with strings (README, "batch": a dense byte-form value is charged 8
// bytes of offset plus its bytes, column.Column.ByteSize): the column buffers a flush
// holds, Bytes capacity included, stay within what it charges for them, up to an eighth
// more, with string lengths that vary from row to row and s's first null at the last
// row of a large unpartitioned batch (its levelled values then alias its kept Bytes).
func TestBytesColumnMemoryWithinCharge(t *testing.T) {
	schemas := breakSchemas(t, bytesAvsc)
	const n = 8_000
	var rows []bytesRec
	for i := range n {
		r := bytesRec{int64(i), strp(strings.Repeat("s", 4+i%17)), strings.Repeat("r", 1+i%7), []byte(strings.Repeat("b", i%33)), []string{"RED", "GREEN", "BLUE"}[i%3]}
		if i == n-1 {
			r.s = nil
		}
		rows = append(rows, r)
	}
	recs := bytesRecords(t, rows)
	for _, levelled := range []bool{true, false} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createBreakTable(t, dir, bytesTableSchema(), nil, nil)
			cfg := breakConfig(dir)
			cfg.Batch.MaxRecords = n
			f, st := newBreakFlusher(t, dir, cfg, schemas, levelled)
			res := breakFlushWith(t, f, st, recs)
			if got := res.files[""]; len(got) != n || got[n-1] != bytesRow(rows[n-1], nil) || got[100] != bytesRow(rows[100], nil) {
				t.Fatalf("%d rows written, want %d (last %q)", len(got), n, got[len(got)-1])
			}
			charged, held := colBytes(f.colBufs), heldBytes(f.colBufs)
			var strBytes int64
			for _, r := range rows {
				strBytes += int64(len(r.region) + len(r.b) + len(r.e))
				if r.s != nil {
					strBytes += int64(len(*r.s))
				}
			}
			t.Logf("charged %d B, held %d B (%.2f×); string bytes %d", charged, held, float64(held)/float64(charged), strBytes)
			// Dense: id, region, b, e a word or offset a row plus their bytes; s a levelled
			// value a row plus its bytes (kept in its Bytes). Levelled: a value a column and
			// row, the bytes in the records.
			want := int64(n)*(4*denseBytes+valueBytes) + strBytes
			if levelled {
				want = int64(n) * 5 * valueBytes
			}
			if charged != want {
				t.Errorf("charged %d B; want %d (offsets, words, values and the bytes the columns hold)", charged, want)
			}
			if held > charged+charged/8 {
				for i := range f.colBufs {
					c := &f.colBufs[i]
					t.Logf("column %d: dense=%v len %d, cap(Values) %d, cap(Dense) %d, len(Bytes) %d, cap(Bytes) %d", i, c.IsDense(), c.Len(), cap(c.Values), cap(c.Dense), len(c.Bytes), cap(c.Bytes))
				}
				t.Errorf("the flush's column buffers hold %d bytes, %.2f× the %d bytes it charges for them", held, float64(held)/float64(charged), charged)
			}
		})
	}
}
