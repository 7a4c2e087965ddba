package ingest

import (
	"context"
	"fmt"
	"slices"

	"github.com/ingestd/ingestd/ingest/rowfill"
)

// changelogTombstones writes the row of each tombstone of a changelog flush (table.mode
// changelog; docs/keyed-tables.md, Changelog): its key columns from its Kafka key,
// _change_operation 'delete', every other column NULL but those the row stage fills
// (rowfill.Stage.TombstoneRow). A tombstone of a partition that halted or was cut before
// it is not handled by this flush and writes nothing; one whose row cannot be written
// (its key cannot be read: missing_key; a CHECK constraint its NULLs fail) is
// dead-lettered, whatever the schema policy, as an upsert table's unreadable tombstone
// is. Nothing is written before the table has a schema (no record defined it yet).
func (f *flusher) changelogTombstones(t tableState, b *prepared, items []item, out *outcome) {
	if b.stage == nil || envelopeSkipsTombstones(f.cfg) {
		return
	}
	stopped := out.stoppedAt()
	for i := range items {
		it := &items[i]
		if !it.tomb || stopped.covers(it.rec) {
			continue
		}
		if err := b.stage.TombstoneRow(f.cfg, it.rec, b.cols); err != nil {
			out.fresh = append(out.fresh, f.tombstoneDeadLetter(t, it.rec, err))
			continue
		}
		if b.parts == nil {
			b.rows++ // the row stays in b.cols
		}
		out.rows++
	}
}

// changelogUnavailable replaces the placeholders of a changelog flush's rows (Debezium's
// unavailable values; fillUnavailable) with the value of the key's latest earlier change
// in the flush that has one, else NULL: a changelog is not read back, so a value from
// an earlier flush is not known (docs/keyed-tables.md, Unavailable values (TOAST)). A
// NOT NULL column's row without a value is dropped and its record dead-lettered.
// Errors: none today (nothing is read from the table); kept for the upsert path's shape.
func (f *flusher) changelogUnavailable(ctx context.Context, t tableState, b *prepared, items []item, out *outcome) error {
	if b.stage == nil || f.placeholder == "" {
		return nil
	}
	changes := b.stage.Changes()
	pos := make([]int32, len(changes))
	next := 0
	for i := range items {
		if next < len(changes) && changes[next].Rec == items[i].rec {
			pos[next] = int32(i)
			next++
		}
	}
	fill, err := f.fillUnavailable(ctx, t, b, changes, pos, f.cfg.Table.SequenceBy != "", func(*rowfill.Change) bool { return true }, nil)
	if err != nil || fill == nil {
		return err
	}
	b.unavailable = fill
	if len(fill.drop) == 0 {
		return nil
	}
	f.dropUnavailable(t, b, fill, changes, items, pos, out)
	for _, ff := range flushFiles(b) {
		rows := fill.drop[ff.file]
		if len(rows) == 0 {
			continue
		}
		keep := make([]bool, ff.rows)
		for i := range keep {
			keep[i] = !slices.Contains(rows, i)
		}
		keepColumns(ff.cols, keep)
		if ff.file == nil {
			b.rows -= len(rows)
		} else {
			ff.file.Rows -= len(rows)
		}
		out.rows -= len(rows)
	}
	return nil
}

// changelogSequences gives each snapshot read of a changelog flush that lacks its
// envelope sequence (rowfill.Change.SeqFromPosition) the greatest sequence of its key
// among the flush's earlier changes, as an upsert table would order it, and writes it
// into its row (_change_sequence and the envelope sequence column,
// rowfill.Stage.SetSequence); NULL when the flush holds no earlier change of its key (a
// changelog reads nothing of the table): such a row is ordered by its Kafka position,
// like a tombstone's. Run it before the tombstones' rows are added (a tombstone carries
// no sequence) and before changelogUnavailable drops rows (positions are the decoded
// rows'). Errors: SetSequence's (a column the start-up check requires).
func (f *flusher) changelogSequences(b *prepared) error {
	if b.stage == nil || !f.cfg.Table.SequenceByEnvelope() {
		return nil
	}
	changes := b.stage.Changes()
	if !slices.ContainsFunc(changes, func(c rowfill.Change) bool { return c.SeqFromPosition }) {
		return nil
	}
	high := map[string]int64{} // per key, the greatest sequence so far
	for i := range changes {
		c := &changes[i]
		h, have := high[string(c.Key)]
		if c.SeqFromPosition {
			c.Seq = minSeq
			if have {
				c.Seq = h
			}
			if err := b.stage.SetSequence(b.cols, *c); err != nil {
				return fmt.Errorf("write a snapshot read in table %s: %w", f.cfg.Table.URI, err)
			}
		}
		if !have || c.Seq > h {
			high[string(c.Key)] = c.Seq
		}
	}
	return nil
}
