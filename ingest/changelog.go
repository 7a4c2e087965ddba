package ingest

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
		if it.rec.Value != nil || it.route != routeSkip || stopped.covers(it.rec) {
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
