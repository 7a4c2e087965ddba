package ingest

import (
	"math"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// batchBytes is the bytes bound of one batch, in budgetSize bytes: half of
// batch.max_bytes, because the batch in flight (flushWorker) and the one being filled
// share it, so that both together stay within batch.max_bytes and the soft memory limit
// that ingestd run derives from it (peak RSS within max_bytes + 256 MiB:
// docs/architecture.md, "Memory"). 0: no bound.
func batchBytes(cfg *config.Config) int64 { return int64(cfg.Batch.MaxBytes) / 2 }

// recordSize is r's key and value, in bytes: the raw part of its budget charge.
func recordSize(r *kgo.Record) int64 { return int64(len(r.Key) + len(r.Value)) }

// initialDecodedPerByte is decodedPerByte before a flush has measured it, for a
// pipeline of format (config.Format*). Binary records (avro, protobuf): a 200-byte record
// of 10 fields decodes to ~13 column values of 24 bytes and its 195-byte body, charged
// though no longer copied (outcome.decodedBytes) (≈ 2.3 decoded bytes per raw byte,
// measured); a 1 KB one to ≈ 2.1; 2.5 keeps the first batch within batch.max_bytes for
// both. JSON text (json, json_schema, connect_json) spells the same values in more raw
// bytes (field names, quotes, numbers and timestamps as text) and decodes to the same
// body and values: the benchmark's record measures ≈ 1.83 as 325 bytes of JSON and
// ≈ 1.95 as 1.1 KB; 2.0 keeps both within the bound. Charged 2.5, a first batch of
// max_records such records (e.g. 50,000 of 325 bytes against max_bytes 128 MiB) would be
// cut by the bytes bound before max_records (at about 49,200 rows). Kafka Connect JSON also carries its
// schema in every record, so it measures lower still: 2.0 charges it more than it costs,
// never less.
func initialDecodedPerByte(format string) float64 {
	switch format {
	case config.FormatJSON, config.FormatJSONSchema, config.FormatConnectJSON:
		return 2.0
	}
	return 2.5
}

// rechargeDrift is how far, as a fraction of the ratio the buffered records were charged
// by, a flush's measured decodedPerByte must move for measureDecoded to charge them again
// by it: the first measurement (after initialDecodedPerByte's guess) or a change of the
// records' shape, not every flush's small drift (charging again reads every buffered
// record: a cache miss each).
const rechargeDrift = 0.05

// recordOverhead is the memory a buffered record takes besides its bytes, in bytes: the
// client's kgo.Record and the flush's item (≈ 250 bytes, more than a 200-byte record).
const recordOverhead = int64(unsafe.Sizeof(kgo.Record{}) + unsafe.Sizeof(item{}))

// budgetSize is r's charge against batch.max_bytes, in bytes: its key and value, plus the
// decoded values the flush will build from them (decodedPerByte) and recordOverhead, so
// that the budget bounds the memory a batch takes while it is written, not only its raw
// bytes (docs/architecture.md, "Memory").
func (p *Pipeline) budgetSize(r *kgo.Record) int64 {
	n := recordSize(r)
	return n + int64(float64(n)*p.decodedPerByte) + recordOverhead
}

// measureDecoded updates decodedPerByte from a flush's outcome, holding the flush token
// and batchMu (the poll loop's budgetSize reads it under batchMu). When the ratio moved
// by more than rechargeDrift from the one the buffered records were charged by, it
// charges them again (batcher.Recharge): the records added while the first batch was
// decoded would otherwise count by initialDecodedPerByte's guess, and cut the batch they
// fill by the bytes bound early (or late) too.
func (p *Pipeline) measureDecoded(out *outcome) {
	if out.rawBytes <= 0 || out.decodedBytes <= 0 {
		return
	}
	p.decodedPerByte = float64(out.decodedBytes) / float64(out.rawBytes)
	if math.Abs(p.decodedPerByte-p.chargedPerByte) > rechargeDrift*p.chargedPerByte {
		p.batch.Recharge(p.budgetSize)
		p.chargedPerByte = p.decodedPerByte
	}
}

// sizesOf returns the budget sizes of left, records of recs given back after a failed
// flush (tryFlushLocked: the whole of recs, or some of its records), in left's order:
// sizes[i] is recs[i]'s charge against batch.max_bytes, in bytes, as the batcher handed it
// out, so that a record given back keeps the charge it was added with. A record of left
// that is not in recs (tryFlushLocked returns none) is charged its budgetSize now.
// batchMu held (budgetSize reads decodedPerByte).
func (p *Pipeline) sizesOf(left, recs []*kgo.Record, sizes []int64) []int64 {
	if len(left) == len(recs) && (len(left) == 0 || &left[0] == &recs[0]) {
		return sizes // all of recs: tryFlushLocked returns recs itself
	}
	of := make(map[*kgo.Record]int64, len(left))
	for _, r := range left {
		of[r] = -1
	}
	for i, r := range recs {
		if _, ok := of[r]; ok {
			of[r] = sizes[i]
		}
	}
	out := make([]int64, len(left))
	for i, r := range left {
		if out[i] = of[r]; out[i] < 0 {
			out[i] = p.budgetSize(r)
		}
	}
	return out
}

// SetMaxBytes bounds the pipeline's batches as if its batch.max_bytes were maxBytes
// (bytes; the batcher's bound is half of it, see batchBytes): a Router shares its
// batch.max_bytes among its tables this way. Records already buffered stay; a batch
// that now exceeds the bound is flushed by the next poll. Safe from any goroutine.
func (p *Pipeline) SetMaxBytes(maxBytes int64) {
	p.batchMu.Lock()
	defer p.batchMu.Unlock()
	p.batch.SetMaxBytes(maxBytes / 2)
	p.wakePollLocked()
}
