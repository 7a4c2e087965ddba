// Package batcher buffers a pipeline's records until a flush is due: a record count, a
// byte size or an age bound is reached, or the hold of records kept back after a failed
// flush ends.
//
// It is pure: no I/O, no clocks of its own and no goroutines. The times callers pass are
// the batcher's clock, which never goes back: a time earlier than one already given counts
// as that one.
//
// Items are grouped by a key (a source partition). The batcher keeps one ordering promise:
// a key's items are handed out oldest first, and never while an older item of the same key
// is still held back, so a key's progress (its Delta txn) never passes an item that is
// still waiting.
//
// # Memory
//
// Each item has a size in bytes, given with Add (or Hold) and kept with the item while it
// is fresh, taken or held back, so that Limits.MaxBytes counts every item held: a batch
// holds at most MaxBytes plus the size of its last item, and what the batcher holds and the
// one batch its owner has in flight stay within 2 × MaxBytes together, plus the last item
// of each batch (Limits says how held-back items are charged). The sizes Take returns are
// the batcher's buffer, reused by the next Take.
//
// # Concurrency
//
// A Batcher is not safe for concurrent use: its owner, one pipeline, serialises access.
package batcher
