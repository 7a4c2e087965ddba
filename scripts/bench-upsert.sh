#!/usr/bin/env bash
# Upsert benchmark (BENCHMARKS.md, "Upserts at 10 M rows"): batches of changes applied to a
# table that already holds ROWS rows of the end-to-end benchmark's ~200-byte record, by ingestd
# (an upsert pipeline's flush, GOMAXPROCS=1, beside an append pipeline's flush of the same
# batches in the same process: the baseline), by delta-rs `merge` and by Spark `MERGE INTO`
# (delta-spark, deletion vectors enabled), one merge per batch of BATCH changes.
#
# Per size in ROWS_LIST:
#   1. create (not measured): ingestd's append flush writes DIR/base (ROWS rows, files of 1 M
#      rows) and DIR/changes (one commit per batch, for the peers), with the expected live
#      rows after each variant in DIR/plan.json (ingest/keyed_table_bench_test.go,
#      BenchmarkUpsertTable);
#   2. ingestd: a copy of DIR/base gets every batch (the key index built first and
#      measured: CPU, bytes per key); then again without the append baseline, for the peak
#      RSS from the index build on;
#   3. each peer in PEERS (for this size) applies the same batches to its own copy of DIR/base.
# The variants, applied in order to one table: update=1, update=10, update=100 (uniform keys)
# and update=100/hot (updates among the first 1 % of the keys), each BATCHES batches, every
# batch with 5 % deletes of stored keys. Every engine's live rows are checked against the
# model after each variant.
#
# Usage: scripts/bench-upsert.sh        (or: make bench-upsert)
# Environment (defaults):
#   ROWS_LIST="10000000 1000000"   table sizes, one full run each
#   BATCH=100000  BATCHES=3        changes per batch (ingestd flush), batches per variant
#   PEERS_10000000="deltars"       the peers run at a size (PEERS_<ROWS>; default for other
#   PEERS="deltars spark"          sizes: PEERS); Spark's MERGE at 10 M rows on 2 cores takes
#                                  too long for a routine run, so it runs at 1 M
#   PHASES="create ingestd peers"  the steps to run; a later invocation with the same BENCH_OUT
#                                  may run some again on the tables the first one created
#                                  (e.g. PHASES=ingestd after a change; results.jsonl keeps
#                                  every run's lines, the report takes the last of each)
#   CPUPROFILE                     set (e.g. 1): each Go phase writes a CPU profile to
#                                  rows-<ROWS>/<phase>.cpu, its flushes labelled
#                                  pipeline=upsert|append (go tool pprof -tagfocus=pipeline=upsert
#                                  $BENCH_OUT/ingest.test FILE)
#   BENCH_OUT                      output folder (default: a new /tmp/bench-upsert.XXXX)
# Output: $BENCH_OUT/rows-<ROWS>/results.jsonl, and one markdown table printed (and in
# $BENCH_OUT/results.md). Needs Go and the Python venv (.venv: deltalake, pyspark,
# delta-spark; scripts/venv.sh) and, for Spark, the Delta jars (scripts/spark-jars.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROWS_LIST="${ROWS_LIST:-10000000 1000000}"
BATCH="${BATCH:-100000}"; BATCHES="${BATCHES:-3}"
PEERS="${PEERS:-deltars spark}"
PEERS_10000000="${PEERS_10000000:-deltars}"
PHASES="${PHASES:-create ingestd peers}"
OUT="${BENCH_OUT:-$(mktemp -d /tmp/bench-upsert.XXXX)}"
PY="$ROOT/.venv/bin/python"
log() { echo "bench-upsert: $*" >&2; }
[ -x "$PY" ] || scripts/venv.sh
[ -x "$PY" ] || { log "no Python venv at $ROOT/.venv (scripts/venv.sh)"; exit 1; }
mkdir -p "$OUT"
LOADS="$OUT/load.txt"; touch "$LOADS"
stamp() { echo "$(date -u +%T) $1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOADS"; }

log "building the benchmark binary"
go test -c -o "$OUT/ingest.test" ./ingest/
bench() { # PHASE DIR ROWS [GOMAXPROCS]
  UPSERT_BENCH_PHASE="$1" UPSERT_BENCH_DIR="$2" UPSERT_BENCH_ROWS="$3" UPSERT_BENCH_BATCH="$BATCH" UPSERT_BENCH_BATCHES="$BATCHES" \
    GOMAXPROCS="${4:-1}" "$OUT/ingest.test" -test.run '^$' -test.bench '^BenchmarkUpsertTable$' -test.benchtime 1x \
    -test.cpu "${4:-1}" -test.timeout 0 ${CPUPROFILE:+-test.cpuprofile "$2/$1.cpu"}
}

JARS=""
for rows in $ROWS_LIST; do
  dir="$OUT/rows-$rows"
  mkdir -p "$dir"
  var="PEERS_$rows"; peers="${!var-$PEERS}"
  if [[ " $PHASES " == *" create "* ]]; then
    log "$rows rows: creating the table and the batches (not measured)"
    rm -rf "$dir/base" "$dir/changes"
    stamp "create $rows"
    bench create "$dir" "$rows" 2 > "$dir/create.log"
  fi
  if [[ " $PHASES " == *" ingestd "* ]]; then
    log "$rows rows: ingestd"
    rm -rf "$dir/ingestd" "$dir/append"
    cp -r "$dir/base" "$dir/ingestd"
    stamp "ingestd $rows"
    bench ingestd "$dir" "$rows" 1 > "$dir/ingestd.log"
    rm -rf "$dir/ingestd" "$dir/append"
    log "$rows rows: ingestd's peak RSS (without the append baseline)"
    cp -r "$dir/base" "$dir/ingestd"
    bench memory "$dir" "$rows" 1 > "$dir/memory.log"
    rm -rf "$dir/ingestd"
  fi
  [[ " $PHASES " == *" peers "* ]] || continue
  for peer in $peers; do
    log "$rows rows: $peer"
    rm -rf "$dir/$peer"
    cp -r "$dir/base" "$dir/$peer"
    extra=()
    if [ "$peer" = spark ]; then
      [ -n "$JARS" ] || JARS="$(scripts/spark-jars.sh | tail -1)"
      extra=("$JARS")
    fi
    stamp "$peer $rows"
    "$PY" scripts/bench/upsert_peers.py "$peer" "$dir/$peer" "$dir/changes" "$dir/plan.json" "$dir/results.jsonl" "${extra[@]}" \
      2> "$dir/$peer.log" || { log "$peer failed: $(tail -3 "$dir/$peer.log")"; }
    rm -rf "$dir/$peer"
  done
done

"$PY" scripts/bench/upsert_report.py "$OUT"/rows-*/results.jsonl > "$OUT/results.md"
{
  cat "$OUT/results.md"
  echo
  echo "BATCH=$BATCH BATCHES=$BATCHES; $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); results in $OUT"
  echo "load average (1, 5, 15 min) at each step's start:"; sed 's/^/    /' "$LOADS"
} | tee "$OUT/summary.md"
