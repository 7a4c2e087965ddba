package decode

// Arena is caller-held decoding state for Decoder.DecodeWith and DecodeColumns: the
// per-record scratch state and the memory that decoded levelled string, binary, fixed and
// map-key values and wide-decimal (precision > 18) values live in. By default a record
// under 16 KiB is copied into the arena once when one of its string, bytes, fixed or
// map-key values goes to a levelled column, and those values are slices of the copy; the
// levelled values of larger records are copied one by one. A value DecodeColumns appends
// to a dense column's byte form (column.Column.AppendBytes) is copied from the payload
// into the column's own Bytes and takes no arena bytes, so a record whose such values
// all go to dense columns copies nothing into the arena (decided before the record is
// read: a non-repeated leaf takes one value per record, so a column dense before it
// takes its value in the byte form or turns levelled with a null). Values then never alias
// the payload; levelled ones point into the arena's chunks (64 KiB each; a value of
// 16 KiB or more gets its own allocation, which is never reused). An arena set to
// AliasPayloads copies nothing of the record instead: see AliasPayloads for that
// contract.
//
// Contract:
//
//   - Without Reset, an arena never hands out the same bytes twice: every value decoded
//     through it stays valid for as long as it is referenced, exactly as with Decode. So
//     forgetting Reset costs memory reuse, never correctness. The arena keeps at most
//     64 MiB of chunks for reuse (chunks beyond that are left to the garbage collector),
//     so an arena that is never reset does not grow without bound either.
//   - Reset makes every chunk reusable: values decoded through the arena before the Reset
//     may be overwritten by values decoded after it. Call Reset only when none of those
//     values will be read again, i.e. when the column buffers they were appended to (and
//     any copy of them) are no longer used: after the batch was written (e.g. after
//     deltawriter.WriteDataFile returned, whether it succeeded or not), and before the
//     buffers are reused for the next batch.
//   - The values a failed DecodeWith call had appended are cut from the columns, and the
//     arena bytes they used are handed out again; nothing the caller can still see is
//     affected.
//   - An Arena is not safe for concurrent use: one arena per goroutine. It may be shared
//     by several Decoders used one after another (e.g. several writer schemas in a batch).
//
// The zero value is ready to use (copying).
type Arena struct {
	s state
}

// AliasPayloads makes every later DecodeWith (and DecodeColumns) through a append
// levelled string, bytes, fixed and map-key values as sub-slices of the payload it was
// given, with no copy of the record and none per value (a 1 KB record of strings costs no
// arena bytes); values of a dense column's byte form are copied into the column's Bytes
// as without it, and alias nothing. Values the decoder
// computes (wide decimals, precision > 18) still go to the arena, enum symbols are still
// the decoder's constants, and an empty value is still a non-nil empty slice. The rollback
// of a failed record is unchanged: its values are cut from the columns and its arena bytes
// handed out again.
//
// Contract: the payloads passed to DecodeWith stay unmodified and reachable until Reset
// (and until the column buffers holding the values are no longer read, see Arena).
// Values alias the payloads' backing arrays, so holding a value keeps the payload's whole
// buffer (for a Kafka record, its fetch's buffer) alive: clear the column buffers that
// hold them when the batch is done, or they retain the batch's raw bytes. It is a
// property of the arena, set once before its first use (an arena per goroutine copies it
// from a template by calling AliasPayloads too); there is no way back to copying, so
// values of both kinds are never mixed in one arena's batch unknowingly.
func (a *Arena) AliasPayloads() { a.s.alias = true }

// AliasesPayloads reports whether AliasPayloads was called on a.
func (a *Arena) AliasesPayloads() bool { return a.s.alias }

// arenaRetainChunks bounds the chunks an Arena keeps for reuse: 64 MiB.
const arenaRetainChunks = (64 << 20) / slabChunk

// state is the decode state a's decodes run on, its retention bound set (an Arena's zero
// value has none yet).
func (a *Arena) state() *state {
	if a.s.retain == 0 {
		a.s.retain = arenaRetainChunks
	}
	return &a.s
}

// Reset makes all the arena's memory reusable by the next DecodeWith calls. Values decoded
// through the arena before Reset must not be read afterwards (see Arena).
func (a *Arena) Reset() {
	a.s.cur = nil
	a.s.next = 0
	a.s.detached = 0
}

// Detached reports the bytes the arena handed out since the last Reset that live outside
// the chunks it keeps: values of 16 KiB or more (each its own allocation) and chunks
// beyond the 64 MiB kept for reuse. When it is 0, every value decoded since the Reset
// points into the arena's kept chunks (or into the decoders' own constants, e.g. enum
// symbols): dropping those values frees no memory, so a caller may reuse the column
// buffers that hold them without clearing them first.
func (a *Arena) Detached() int { return a.s.detached }

// Retained reports the bytes of chunks the arena keeps for reuse.
func (a *Arena) Retained() int { return len(a.s.chunks) * slabChunk }
