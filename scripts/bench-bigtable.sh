#!/usr/bin/env bash
# Big-table benchmark (docs/performance.md, "Big tables"; its figures are in BENCHMARKS.md):
# ingestd's Delta side beside delta-rs (the Python `deltalake` of .venv) on the same
# generated tables, in one run, each operation in its own process pinned to one core
# (taskset -c CPU; GOMAXPROCS=1 for ingestd):
#   load        snapshot load (checkpoint + tail) + the live files' paths, and the heap per
#               live file                              │ DeltaTable(dir) + files()
#   refresh     Snapshot after another writer's one-file commit (p50, max of N)
#   checkpoint  a checkpoint of the latest version     │ create_checkpoint()
#   vacuum      VACUUM dry run (table retention), and the bare listing of the table's files
#                                                      │ vacuum(dry_run=True)
#   commits     Snapshot + Commit of one file and a txn, paced PACE apart, background
#               checkpoints as in the daemon (p50, p99)
#   startup     process start → Open → first commit landed (the Delta side of a pipeline's
#               start; Kafka's share does not depend on the table)
# Tables (cmd/benchbig gen): SIZES live files × PARTS Hive partitions (0: unpartitioned),
# plus a SMALL-file table as the commits/startup baseline; data files are hard links of
# 1-row Parquet stubs with stats; N/50 tombstones (half expired), N/1000 orphans, a
# checkpoint and 10 commits after it. Generated once and kept in BIG_DIR; operations that
# write (checkpoint, refresh, commits, startup) run on copies of _delta_log.
#
# Usage: scripts/bench-bigtable.sh            (or: make bench-bigtable)
# Environment (defaults): SIZES="10000 100000 1000000"  PARTS="0 100"  SMALL=100
#   BIG_DIR=/tmp/ingestd-bigtable  CPU=0  N=20 (refreshes)  COMMITS=200  PACE=200ms
#   BENCH_OUT (default: a new /tmp/bench-bigtable.XXXX)
# Output: $BENCH_OUT/results.jsonl and $BENCH_OUT/results.md (printed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SIZES="${SIZES:-10000 100000 1000000}"; PARTS="${PARTS:-0 100}"; SMALL="${SMALL:-100}"
BIG_DIR="${BIG_DIR:-/tmp/ingestd-bigtable}"; CPU="${CPU:-0}"; N="${N:-20}"
COMMITS="${COMMITS:-200}"; PACE="${PACE:-200ms}"
BENCH_OUT="${BENCH_OUT:-$(mktemp -d /tmp/bench-bigtable.XXXX)}"
PY="${PY:-$ROOT/.venv/bin/python}"
mkdir -p "$BIG_DIR" "$BENCH_OUT"
BIN="$BENCH_OUT/benchbig"
go build -o "$BIN" ./cmd/benchbig
OUT="$BENCH_OUT/results.jsonl"
: > "$OUT"

# tag ENGINE N PARTS: appends stdin's JSON line to OUT with the table's coordinates.
tag() { jq -c --arg e "$1" --argjson n "$2" --argjson p "$3" '. + {engine: $e, n: $n, parts: $p}' >> "$OUT"; }
ours() { local n=$1 p=$2 dir=$3 what=$4; shift 4
  taskset -c "$CPU" env GOMAXPROCS=1 "$BIN" measure -dir "$dir" -what "$what" "$@" | tag ingestd "$n" "$p"; }
theirs() { local n=$1 p=$2 dir=$3 what=$4
  taskset -c "$CPU" "$PY" scripts/bench/bigtable_deltars.py "$what" "$dir" | tag delta-rs "$n" "$p"; }

gen() { local n=$1 p=$2 t="$BIG_DIR/t-$1-p$2"
  if [[ ! -f "$t/.generated" ]]; then
    rm -rf "$t"
    echo "generating $t" >&2
    "$BIN" gen -dir "$t" -files "$n" -partitions "$p" > "$BENCH_OUT/gen-$n-p$p.json"
    touch "$t/.generated"
  fi
  echo "$t"
}

# logcopy SRC DST: a table holding SRC's log only (the operations run on it read no data file).
# The copy is flushed (sync) first: the commits measured on it fsync, and would otherwise
# wait behind the writeback of the copy or of a table just generated.
logcopy() { rm -rf "$2"; mkdir -p "$2"; cp -r "$1/_delta_log" "$2/"; sync; }

small=$(gen "$SMALL" 0)
logcopy "$small" "$BENCH_OUT/w-small"
ours "$SMALL" 0 "$BENCH_OUT/w-small" startup
ours "$SMALL" 0 "$BENCH_OUT/w-small" commits -n "$COMMITS" -pace "$PACE"
rm -rf "$BENCH_OUT/w-small"

for n in $SIZES; do
  for p in $PARTS; do
    t=$(gen "$n" "$p")
    echo "table $t" >&2
    ours "$n" "$p" "$t" load
    theirs "$n" "$p" "$t" load
    ours "$n" "$p" "$t" vacuum
    theirs "$n" "$p" "$t" vacuum
    w="$BENCH_OUT/w-$n-$p"
    logcopy "$t" "$w-a"; logcopy "$t" "$w-b"
    ours "$n" "$p" "$w-a" checkpoint
    theirs "$n" "$p" "$w-b" checkpoint
    logcopy "$t" "$w-a"
    ours "$n" "$p" "$w-a" refresh -n "$N"
    logcopy "$t" "$w-a"
    ours "$n" "$p" "$w-a" startup
    ours "$n" "$p" "$w-a" commits -n "$COMMITS" -pace "$PACE"
    rm -rf "$w-a" "$w-b"
  done
done

{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); one core per operation (taskset -c $CPU)."
  echo
  "$PY" scripts/bench/bigtable_report.py "$OUT" "$SMALL"
} > "$BENCH_OUT/results.md"
cat "$BENCH_OUT/results.md"
