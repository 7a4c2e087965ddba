#!/usr/bin/env bash
# Big-table benchmark (docs/performance.md, "Big tables"; its figures are in BENCHMARKS.md):
# ingestd's Delta side beside delta-rs (the Python `deltalake` of .venv) on the same
# generated tables, in one run, each operation in its own process pinned to one core
# (taskset -c CPU; GOMAXPROCS=1 for ingestd), on local disk or in the S3 emulator:
#   load        snapshot load (checkpoint + tail) + the live files' paths, and the heap per
#               live file                              │ DeltaTable(uri) + files()
#   refresh     Snapshot after another writer's one-file commit (p50, max of N)
#   checkpoint  a checkpoint of the latest version     │ create_checkpoint()
#   vacuum      VACUUM dry run, and the bare listing of the table's files (on S3: pages of
#               ListObjectsV2)                         │ vacuum(dry_run=True, full=True)
#   commits     Snapshot + Commit of one file and a txn, paced PACE apart, background
#               checkpoints as in the daemon (p50, p99)
#   startup     process start → Open → first commit landed (the Delta side of a pipeline's
#               start; Kafka's share does not depend on the table)
# Tables (cmd/benchbig gen): SIZES live files × PARTS Hive partitions (0: unpartitioned),
# plus a SMALL-file table as the commits/startup baseline; 1-row Parquet data files with
# stats; N/50 tombstones (half expired), N/1000 orphans, a checkpoint and 10 commits after
# it. Operations that write (checkpoint, refresh, commits, startup) run on copies of
# _delta_log.
#
# STORE=local: data files are hard links of stubs dated 30 days back; tables are generated
# once and kept in BIG_DIR. VACUUM uses the table's 7-day retention.
#
# STORE=s3: tables are generated in the S3 emulator of .stack/env (scripts/stack.sh; the
# same endpoint for delta-rs' storage_options), in bucket S3_BUCKET under a prefix of this
# run, and deleted at the end (the bucket too, if this run created it; KEEP_S3=1 keeps
# them). Tables of at most S3_DATA_MAX files get their data files and orphans (uploads,
# GEN_WORKERS in flight; VACUUM lists them); larger ones their log only (the other
# operations read nothing else), and no VACUUM. The emulator dates each object at its
# upload, so both VACUUMs use retention 0 (every tombstone and orphan is a candidate). At
# VACUUM_REAL files, a real VACUUM follows: VROUNDS rounds of one whose deletes are batched
# (DeleteObjects of 1,000 keys, 16 in flight) and one sending the same paths one by one
# (DeleteObject, 16 in flight), the deleted objects put back before each; then delta-rs
# reads the vacuumed table back (its live-file count).
#
# Usage: scripts/bench-bigtable.sh            (or: make bench-bigtable)
#        STORE=s3 scripts/bench-bigtable.sh
# Environment (defaults): STORE=local  SIZES="10000 100000 1000000"  PARTS="0 100"  SMALL=100
#   BIG_DIR=/tmp/ingestd-bigtable  CPU=0  N=20 (refreshes)  COMMITS=200  PACE=200ms
#   S3_BUCKET=bench-big-<user>  S3_DATA_MAX=100000  VACUUM_REAL=100000  VROUNDS=2
#   GEN_WORKERS=16  STACK_ENV=.stack/env  KEEP_S3=
#   BENCH_OUT (default: a new /tmp/bench-bigtable.XXXX)
# Output: $BENCH_OUT/results.jsonl and $BENCH_OUT/results.md (printed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STORE="${STORE:-local}"
SIZES="${SIZES:-10000 100000 1000000}"; PARTS="${PARTS:-0 100}"; SMALL="${SMALL:-100}"
BIG_DIR="${BIG_DIR:-/tmp/ingestd-bigtable}"; CPU="${CPU:-0}"; N="${N:-20}"
COMMITS="${COMMITS:-200}"; PACE="${PACE:-200ms}"
S3_DATA_MAX="${S3_DATA_MAX:-100000}"; VACUUM_REAL="${VACUUM_REAL:-100000}"; VROUNDS="${VROUNDS:-2}"
GEN_WORKERS="${GEN_WORKERS:-16}"
BENCH_OUT="${BENCH_OUT:-$(mktemp -d /tmp/bench-bigtable.XXXX)}"
PY="${PY:-$ROOT/.venv/bin/python}"
mkdir -p "$BENCH_OUT"
BIN="$BENCH_OUT/benchbig"
go build -o "$BIN" ./cmd/benchbig
OUT="$BENCH_OUT/results.jsonl"
: > "$OUT"

# tag ENGINE N PARTS: appends stdin's JSON lines to OUT with the table's coordinates (what:
# "gen" for gen's line, which has none).
tag() { jq -c --arg e "$1" --argjson n "$2" --argjson p "$3" --arg s "$STORE" '{what: "gen"} + . + {engine: $e, n: $n, parts: $p, store: $s}' >> "$OUT"; }
ours() { local n=$1 p=$2 uri=$3 what=$4; shift 4
  taskset -c "$CPU" env GOMAXPROCS=1 "$BIN" measure -uri "$uri" -what "$what" "$@" | tag ingestd "$n" "$p"; }
theirs() { local n=$1 p=$2 uri=$3 what=$4; shift 4
  taskset -c "$CPU" "$PY" scripts/bench/bigtable_deltars.py "$what" "$uri" "$@" | tag delta-rs "$n" "$p"; }

case "$STORE" in
local)
  mkdir -p "$BIG_DIR"
  RETAIN=(); PYRETAIN=()
  # gen N PARTS: the table's directory, generated once (kept in BIG_DIR).
  gen() { local n=$1 p=$2 t="$BIG_DIR/t-$1-p$2"
    if [[ ! -f "$t/.generated" ]]; then
      rm -rf "$t"
      echo "generating $t" >&2
      "$BIN" gen -dir "$t" -files "$n" -partitions "$p" | tee "$BENCH_OUT/gen-$n-p$p.json" | tag ingestd "$n" "$p"
      touch "$t/.generated"
    fi
    echo "$t"
  }
  hasdata() { true; }
  # logcopy SRC DST: a table holding SRC's log only (the operations run on it read no data file).
  # The copy is flushed (sync) first: the commits measured on it fsync, and would otherwise
  # wait behind the writeback of the copy or of a table just generated.
  logcopy() { rm -rf "$2"; mkdir -p "$2"; cp -r "$1/_delta_log" "$2/"; sync; }
  drop() { rm -rf "$1"; }
  work="$BENCH_OUT"
  ;;
s3)
  STACK_ENV="${STACK_ENV:-$ROOT/.stack/env}"
  [[ -f "$STACK_ENV" ]] || { echo "STORE=s3 needs the stack's S3 emulator: $STACK_ENV is missing (scripts/stack.sh up)" >&2; exit 1; }
  set -a; . "$STACK_ENV"; set +a
  : "${AWS_ENDPOINT_URL_S3:?}" "${AWS_ACCESS_KEY_ID:?}" "${AWS_SECRET_ACCESS_KEY:?}"
  S3_BUCKET="${S3_BUCKET:-bench-big-$(id -un | tr -c 'a-z0-9\n' '-')}"
  RUN="$(basename "$BENCH_OUT")"
  work="s3://$S3_BUCKET/$RUN"
  # s3req PATH CURL-ARGS…: the status of a signed request to the emulator; the keys go to
  # curl on stdin, not on its command line.
  s3req() { local path=$1; shift
    printf 'user = "%s:%s"\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" |
      curl -sS -o /dev/null -w '%{http_code}' -K - --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
        -H "x-amz-content-sha256: $(sha256sum < /dev/null | cut -d' ' -f1)" "$@" "$AWS_ENDPOINT_URL_S3/$path"; }
  made_bucket=""
  [[ "$(s3req "$S3_BUCKET" -I)" == 200 ]] || made_bucket=1
  cleanup() {
    [[ -n "${KEEP_S3:-}" ]] && { echo "kept $work" >&2; return; }
    "$BIN" rm -uri "$work" > "$BENCH_OUT/rm.json" || echo "could not empty $work" >&2
    if [[ -n "$made_bucket" ]]; then echo "delete bucket $S3_BUCKET: HTTP $(s3req "$S3_BUCKET" -X DELETE)" >&2; fi
  }
  trap cleanup EXIT
  RETAIN=(-retain 0s); PYRETAIN=(0)
  gen() { local n=$1 p=$2 t="$work/t-$1-p$2" data=true
    hasdata "$n" || data=false
    echo "generating $t (data files: $data)" >&2
    "$BIN" gen -uri "$t" -files "$n" -partitions "$p" -data="$data" -workers "$GEN_WORKERS" |
      tee "$BENCH_OUT/gen-$n-p$p.json" | tag ingestd "$n" "$p"
    echo "$t"
  }
  hasdata() { (( $1 <= S3_DATA_MAX )); }
  logcopy() { "$BIN" rm -uri "$2" > /dev/null; "$BIN" copylog -from "$1" -to "$2" > /dev/null; }
  drop() { "$BIN" rm -uri "$1" > /dev/null; }
  ;;
*) echo "STORE=$STORE: local or s3" >&2; exit 1 ;;
esac

small=$(gen "$SMALL" 0)
logcopy "$small" "$work/w-small"
ours "$SMALL" 0 "$work/w-small" startup
ours "$SMALL" 0 "$work/w-small" commits -n "$COMMITS" -pace "$PACE"
drop "$work/w-small"
[[ "$STORE" == local ]] || drop "$small"

for n in $SIZES; do
  for p in $PARTS; do
    t=$(gen "$n" "$p")
    echo "table $t" >&2
    ours "$n" "$p" "$t" load
    theirs "$n" "$p" "$t" load
    if hasdata "$n"; then
      ours "$n" "$p" "$t" vacuum "${RETAIN[@]}"
      theirs "$n" "$p" "$t" vacuum "${PYRETAIN[@]}"
    fi
    w="$work/w-$n-$p"
    logcopy "$t" "$w-a"; logcopy "$t" "$w-b"
    ours "$n" "$p" "$w-a" checkpoint
    theirs "$n" "$p" "$w-b" checkpoint
    logcopy "$t" "$w-a"
    ours "$n" "$p" "$w-a" refresh -n "$N"
    logcopy "$t" "$w-a"
    ours "$n" "$p" "$w-a" startup
    ours "$n" "$p" "$w-a" commits -n "$COMMITS" -pace "$PACE"
    drop "$w-a"; drop "$w-b"
    if [[ "$STORE" == s3 ]]; then
      if [[ "$n" == "$VACUUM_REAL" ]] && hasdata "$n"; then
        ours "$n" "$p" "$t" vacuumreal "${RETAIN[@]}" -rounds "$VROUNDS"
        theirs "$n" "$p" "$t" readback
      fi
      drop "$t"
    fi
  done
done

{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); one core per operation (taskset -c $CPU); store: $STORE."
  echo
  "$PY" scripts/bench/bigtable_report.py "$OUT" "$SMALL" "$STORE"
} > "$BENCH_OUT/results.md"
cat "$BENCH_OUT/results.md"
