// Command benchoptimize writes the tables of the OPTIMIZE benchmark, driven by
// scripts/bench/optimize.py (the figures are in BENCHMARKS.md, "Maintenance"). It is not
// part of the daemon.
//
//	benchoptimize gen -dir DIR [-files 100] [-file-bytes 1470000] [-row-bytes 1024] [-seed 1]
//	    creates a Delta table at DIR and commits -files data files written by ingestd's
//	    data file writer (as a pipeline writes them: snappy, the decoder's column forms), of
//	    rows of about -row-bytes bytes of values each, as many rows a file as make it about
//	    -file-bytes bytes; prints one JSON object {files, rows, bytes, rowsPerFile}.
//
// The rows are the end-to-end benchmark's record (cmd/benche2e): id long, name string,
// score double, active boolean, ts timestamp, note string (nullable, the bulk of the row:
// words and hex numbers drawn at random, so it compresses about 2× as text does and has no dictionary), count int,
// amount double, kind string, tags array<string>.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

const tableSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":false,"metadata":{}},
{"name":"name","type":"string","nullable":false,"metadata":{}},
{"name":"score","type":"double","nullable":false,"metadata":{}},
{"name":"active","type":"boolean","nullable":false,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":false,"metadata":{}},
{"name":"note","type":"string","nullable":true,"metadata":{}},
{"name":"count","type":"integer","nullable":false,"metadata":{}},
{"name":"amount","type":"double","nullable":false,"metadata":{}},
{"name":"kind","type":"string","nullable":false,"metadata":{}},
{"name":"tags","type":{"type":"array","elementType":"string","containsNull":false},"nullable":false,"metadata":{}}]}`

var (
	words = strings.Fields(`order shipped customer spring campaign gift wrap requested delivery
		window morning evening express standard return refund exchange size colour blue green
		red black white cotton linen wool leather small medium large note review rating five
		stars fast friendly packaging damaged replaced warehouse berlin paris madrid lisbon
		rome vienna prague warsaw dublin oslo first second third repeat loyal member points
		voucher discount code applied newsletter signup mobile desktop tablet app browser`)
	tags  = []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}
	kinds = []string{"CLICK", "VIEW", "BUY"}
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "gen" {
		fmt.Fprintln(os.Stderr, "usage: benchoptimize gen -dir DIR [-files N] [-file-bytes B] [-row-bytes B] [-seed S]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	dir := fs.String("dir", "", "table directory (created)")
	files := fs.Int("files", 100, "data files")
	fileBytes := fs.Int64("file-bytes", 1_470_000, "bytes a data file is made about")
	rowBytes := fs.Int("row-bytes", 1024, "bytes of values a row holds about")
	seed := fs.Uint64("seed", 1, "random seed of the notes")
	_ = fs.Parse(os.Args[2:])
	if err := gen(context.Background(), *dir, *files, *fileBytes, *rowBytes, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "benchoptimize:", err)
		os.Exit(1)
	}
}

// gen writes the table (see the package doc).
func gen(ctx context.Context, dir string, files int, fileBytes int64, rowBytes int, seed uint64) error {
	if dir == "" || files < 1 || rowBytes < 120 {
		return fmt.Errorf("gen: -dir, -files ≥ 1 and -row-bytes ≥ 120 are needed")
	}
	st, err := storage.Open(dir)
	if err != nil {
		return err
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		return err
	}
	schema, err := deltalog.ParseSchema(tableSchema)
	if err != nil {
		return err
	}
	sd, fo, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: sd.Protocol, Metadata: sd.Metadata, Operation: "CREATE TABLE"}); err != nil {
		return err
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		return err
	}
	g := &rowGen{rnd: rand.New(rand.NewPCG(seed, 7)), noteLen: rowBytes - 110, leaves: column.Leaves(pq), at: map[string]int{}}
	for i, p := range pq.Columns() {
		g.at[p[0]] = i
	}
	// a probe file sizes the rows per file
	const probeRows = 2000
	probe, err := deltawriter.WriteColumns(ctx, st, pq, g.columns(0, probeRows), probeRows, fo)
	if err != nil {
		return err
	}
	perFile := max(1, int(float64(fileBytes)/(float64(probe.Size)/probeRows)))
	var adds []deltalog.Add
	var total int64
	for f := 0; f < files; f++ {
		a, err := deltawriter.WriteColumns(ctx, st, pq, g.columns(int64(f*perFile), perFile), perFile, fo)
		if err != nil {
			return err
		}
		adds = append(adds, a)
		total += a.Size
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Adds: adds, Operation: "WRITE"}); err != nil {
		return err
	}
	_ = os.Remove(dir + "/" + probe.Path) // never committed
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"files": files, "rows": files * perFile, "bytes": total, "rowsPerFile": perFile})
}

type rowGen struct {
	rnd     *rand.Rand
	noteLen int
	leaves  []column.Leaf
	at      map[string]int // leaf index by top-level column name
	note    []byte
}

// columns returns n rows from id first in the decoder's forms (dense until a null).
func (g *rowGen) columns(first int64, n int) []column.Column {
	cols := make([]column.Column, len(g.leaves))
	for i := range cols {
		cols[i].Reset(g.leaves[i])
	}
	c := func(name string) *column.Column { return &cols[g.at[name]] }
	tagsAt := g.at["tags"]
	for j := range int64(n) {
		i := first + j
		c("id").AppendDense(uint64(1_000_000_000_000 + i))
		c("name").AppendBytes(fmt.Appendf(nil, "customer-%012d (Ann Example, ann@example.com)", i))
		c("score").AppendDense(math.Float64bits(float64(i%10_000) / 100))
		c("active").AppendDense(uint64(i % 2))
		c("ts").AppendDense(uint64(1_700_000_000_000_000 + i*1000))
		if i%50 == 49 {
			c("note").Append(parquet.NullValue().Level(0, 0, g.at["note"]))
		} else {
			c("note").AppendBytes(g.text())
		}
		c("count").AppendDense(uint64(100 + i%7000))
		c("amount").AppendDense(math.Float64bits(-1234567.89 + float64(i%100)))
		c("kind").AppendBytes([]byte(kinds[i%3]))
		for k, t := range tags {
			rep := 0
			if k > 0 {
				rep = 1
			}
			cols[tagsAt].Append(parquet.ByteArrayValue([]byte(t)).Level(rep, g.leaves[tagsAt].MaxDef, tagsAt))
		}
	}
	return cols
}

// text is a note of about noteLen bytes of random words.
func (g *rowGen) text() []byte {
	g.note = g.note[:0]
	for len(g.note) < g.noteLen {
		if len(g.note) > 0 {
			g.note = append(g.note, ' ')
		}
		if g.rnd.IntN(3) == 0 { // order numbers, amounts, codes: what keeps text from compressing well
			g.note = fmt.Appendf(g.note, "%x", g.rnd.Uint32())
		} else {
			g.note = append(g.note, words[g.rnd.IntN(len(words))]...)
		}
	}
	return g.note[:g.noteLen]
}
