package decode

// Arena is caller-held decoding state for Decoder.DecodeWith: the per-record scratch state
// and the memory that decoded string, binary and wide-decimal (precision > 18) values live
// in. A record (under 16 KiB) whose schema has string, bytes, fixed or map-key columns is
// copied into the arena once, and those values are slices of the copy; the values of
// larger records are copied one by one. Values never alias the payload; they point into
// the arena's chunks (64 KiB each; a value of 16 KiB or more gets its own allocation,
// which is never reused).
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
// The zero value is ready to use.
type Arena struct {
	s state
}

// arenaRetainChunks bounds the chunks an Arena keeps for reuse: 64 MiB.
const arenaRetainChunks = (64 << 20) / slabChunk

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
