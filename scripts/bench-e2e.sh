#!/usr/bin/env bash
# End-to-end benchmark (docs/performance.md; its figures are in BENCHMARKS.md): Kafka → Delta
# for the whole path, three readers of the same topic side by side:
#   1. a consume-only baseline (franz-go, no decode): the broker's and client's share;
#   2. `ingestd run`, one `evolve` pipeline, GOMAXPROCS=1 and GOMAXPROCS=2;
#   3. kafka-delta-ingest (the closest peer), built once with cargo from KDI_SRC and cached
#      (BENCH_CACHE), into a table created beforehand; without KDI_SRC or KDI_BIN its column
#      is skipped, with a note saying so.
# They run one after another, then again in the other order, on one topic per record size.
# Each writer runs until every record is committed (ingestd: its /metrics; kdi: its table's
# log), is measured from /proc (utime+stime, VmHWM) at that moment, then gets SIGTERM; each
# table is counted with delta-rs (rows and distinct ids must both equal N).
#
# Usage: scripts/bench-e2e.sh            (or: make bench-e2e)
# Environment (defaults):
#   N=2000000          records per topic          P=4       partitions
#   SIZES="200 1024"   framed record sizes         COMPRESSION=none   (or lz4: producer side)
#   FORMATS=avro       the record formats, a topic each per size: avro (Confluent-framed),
#                      protobuf (Confluent-framed), json (plain; ingestd takes the columns
#                      from the record's .avsc, avro_schema_file), json_schema (the json
#                      record Confluent-framed, its JSON Schema registered). The record is the
#                      same in each: the Avro record's fields and values, its note as long as
#                      in the Avro record of the size (so a SIZE names the Avro record's size;
#                      the table's "record" column shows each format's mean value size).
#                      Readers of a format other than avro are labelled "(format)"; kdi reads
#                      avro and json (it has no Protobuf nor JSON Schema input), the latency
#                      run the first format.
#   READERS="baseline ingestd1 ingestd2 kdi"       the first order; the second is reversed
#   LATENCY=1          also produce → visible latency at RATE records/s for LAT_SECONDS, then
#                      LAT_TAIL more seconds (default MAX_AGE + 2 s) that are produced and
#                      committed but not measured: the window's last batch closes by the stream
#   RATE=auto          (auto: 50 % of ingestd GOMAXPROCS=1's measured wall rate at the first size)
#   LAT_SECONDS=20     MAX_RECORDS=auto  MAX_BYTES=128MiB  MAX_AGE=5s  (ingestd batch; kdi
#                      gets --max_messages_per_batch MAX_RECORDS --allowed_latency MAX_AGE).
#                      auto: 50000 records for records of up to 200 B, 12500 above. Both keep
#                      both writers' batches bound by the record count (ingestd flushes at half
#                      of max_bytes: ≈ 70 K records of 200 B, ≈ 21 K of 1 KB), so N = 1 M or
#                      2 M ends on a full batch and no run's wall time includes a max_age wait
#                      for a last, partial batch (with 50000 at 1 KB, ingestd's batches were
#                      bound by bytes and the last, partial one waited max_age). A number
#                      applies to every size.
#   MODE=append        upsert: ingestd's pipelines write an upsert table keyed by id
#                      (table.mode upsert, merge-on-read; every record a new key: the index
#                      lookups, the reduction and the commit of a keyed flush, no stored row
#                      replaced); kdi is not run (append only)
#   BENCH_ENV          a stack env file to use instead of `scripts/stack.sh up` + .stack/env
#   BENCH_OUT          output folder (default: a new /tmp/bench-e2e.XXXX); BENCH_CACHE: where
#                      kdi is built (default ~/.cache/ingestd-bench)
#   KDI_SRC            kafka-delta-ingest's source: a tarball (.tar.gz, one top-level folder,
#                      e.g. a GitHub archive of delta-io/kafka-delta-ingest) or a checkout. The
#                      build uses --locked with a Cargo.lock: KDI_CARGO_LOCK if set, else one
#                      beside the tarball, else the checkout's own; without any, cargo resolves
#                      the crates afresh. Unset (and no KDI_BIN): the kdi column is skipped.
#   KDI_BIN            a kafka-delta-ingest binary to use instead of building one
#   BASE_REF           a git revision of this repository to measure beside the work tree: its
#                      ingestd is built from `git archive BASE_REF`, and READERS may then name
#                      base1 / base2 (that binary, GOMAXPROCS=1 / 2; labelled "base ingestd@REV",
#                      outside the goals), e.g. READERS="baseline base1 ingestd1"
#   PROFILE=0          1: each ingestd run also writes a CPU and a heap profile (pprof) to
#                      $BENCH_OUT/prof/<tag>.cpu and .mem (`go tool pprof -top FILE`)
#   TRACE=0            1: each ingestd run also writes an execution trace to
#                      $BENCH_OUT/prof/<tag>.trace (`go tool trace FILE`; BASE_REF's binary
#                      must know --trace)
#   BROKER_PID=auto    the Kafka broker's pid, whose CPU seconds over each run fill the
#                      "broker CPU s" column (the broker shares the cores); auto: kafka.pid of
#                      the stack (beside BENCH_ENV, or .stack), if that process is the stack's
#                      broker; empty: not measured
# Output: $BENCH_OUT/results.jsonl and $BENCH_OUT/results.md (one markdown table), printed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${N:-2000000}"; P="${P:-4}"; SIZES="${SIZES:-200 1024}"; COMPRESSION="${COMPRESSION:-none}"
READERS="${READERS:-baseline ingestd1 ingestd2 kdi}"
FORMATS="${FORMATS:-avro}"; FORMAT="${FORMATS%% *}"; FMT_LABEL=""
LATENCY="${LATENCY:-1}"; RATE="${RATE:-auto}"; LAT_SECONDS="${LAT_SECONDS:-20}"; LAT_TAIL="${LAT_TAIL:-}"
MODE="${MODE:-append}"; TABLE_EXTRA=""; MODE_LABEL=""
case "$MODE" in
  append) ;;
  upsert) TABLE_EXTRA=", mode: upsert, key: [id]"; MODE_LABEL=" upsert"; READERS="${READERS// kdi/}"; READERS="${READERS//kdi /}" ;;
  *) echo "bench-e2e: MODE=$MODE: want append or upsert" >&2; exit 1 ;;
esac
MAX_RECORDS="${MAX_RECORDS:-auto}"; MAX_BYTES="${MAX_BYTES:-128MiB}"; MAX_AGE="${MAX_AGE:-5s}"
OUT="${BENCH_OUT:-$(mktemp -d /tmp/bench-e2e.XXXX)}"
CACHE="${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingestd-bench}"
KDI_SRC="${KDI_SRC:-}"
mkdir -p "$OUT/bin" "$OUT/tables" "$OUT/logs" "$CACHE"
RESULTS="$OUT/results.jsonl"; : > "$RESULTS"
log() { echo "bench-e2e: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- the stack
if [ -n "${BENCH_ENV:-}" ]; then
  # shellcheck disable=SC1090
  . "$BENCH_ENV"
else
  scripts/stack.sh up
  # shellcheck disable=SC1091
  . .stack/env
fi
[ -n "${KAFKA_BROKERS:-}" ] && [ -n "${SCHEMA_REGISTRY_URL:-}" ] || die "the stack env has no KAFKA_BROKERS / SCHEMA_REGISTRY_URL"
BROKER_PID="${BROKER_PID-auto}"
if [ "$BROKER_PID" = auto ]; then
  BROKER_PID="$(cat "$(dirname "${BENCH_ENV:-$ROOT/.stack/env}")/kafka.pid" 2>/dev/null || true)"
  tr '\0' ' ' < "/proc/$BROKER_PID/cmdline" 2>/dev/null | grep -q -- "-Dingestd.stack=kafka" || BROKER_PID=""
fi
[ -n "$BROKER_PID" ] || log "the broker's pid is unknown: no broker CPU column (BROKER_PID)"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || { scripts/venv.sh; }
[ -x "$PY" ] || die "no Python venv at $ROOT/.venv (scripts/venv.sh)"

# --- binaries
log "building ingestd and benche2e"
go build -o "$OUT/bin/ingestd" ./cmd/ingestd
go build -o "$OUT/bin/benche2e" ./cmd/benche2e
BASE_REV=""
if [ -n "${BASE_REF:-}" ]; then
  BASE_REV="$(git rev-parse --short "$BASE_REF^{commit}")" || die "BASE_REF=$BASE_REF is not a revision of $ROOT"
  log "building ingestd at $BASE_REV (BASE_REF=$BASE_REF)"
  mkdir -p "$OUT/base-src"
  git archive "$BASE_REV" | tar -x -C "$OUT/base-src"
  (cd "$OUT/base-src" && go build -o "$OUT/bin/ingestd-base" ./cmd/ingestd)
fi
B="$OUT/bin/benche2e"

# kdi: built once per source (KDI_SRC and its Cargo.lock), cached under a hash of both. A
# missing source or a failed build is reported and kdi skipped.
KDI_SKIP=""
build_kdi() {
  local sum dir lock="${KDI_CARGO_LOCK:-}" locked=(--locked)
  if [ -z "$KDI_SRC" ]; then
    KDI_SKIP="no source: set KDI_SRC=<path to a kafka-delta-ingest source tarball or checkout> (or KDI_BIN=<a built binary>)"
    return 1
  fi
  [ -e "$KDI_SRC" ] || { KDI_SKIP="KDI_SRC=$KDI_SRC does not exist"; return 1; }
  if [ -z "$lock" ] && [ -f "$KDI_SRC" ] && [ -f "$(dirname "$KDI_SRC")/Cargo.lock" ]; then lock="$(dirname "$KDI_SRC")/Cargo.lock"; fi
  if [ -z "$lock" ] && [ -d "$KDI_SRC" ] && [ -f "$KDI_SRC/Cargo.lock" ]; then lock="$KDI_SRC/Cargo.lock"; fi
  [ -z "$lock" ] || [ -f "$lock" ] || { KDI_SKIP="KDI_CARGO_LOCK=$lock does not exist"; return 1; }
  if [ -f "$KDI_SRC" ]; then
    sum="$(cat "$KDI_SRC" ${lock:+"$lock"} | sha256sum | cut -c1-16)"
  else
    sum="$( { (cd "$KDI_SRC" && find . -path ./target -prune -o -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); [ -z "$lock" ] || cat "$lock"; } | sha256sum | cut -c1-16)"
  fi
  KDI_BIN="$CACHE/kafka-delta-ingest-$sum"
  [ -x "$KDI_BIN" ] && return 0
  command -v cargo >/dev/null || { KDI_SKIP="cargo is not installed"; return 1; }
  dir="$CACHE/src-$sum"
  rm -rf "$dir"; mkdir -p "$dir/kafka-delta-ingest"
  if [ -f "$KDI_SRC" ]; then
    tar xzf "$KDI_SRC" -C "$dir/kafka-delta-ingest" --strip-components=1
  else
    tar -C "$KDI_SRC" --exclude=./target --exclude=./.git -cf - . | tar -C "$dir/kafka-delta-ingest" -xf -
  fi
  [ -f "$dir/kafka-delta-ingest/Cargo.toml" ] || { KDI_SKIP="KDI_SRC=$KDI_SRC holds no Cargo.toml (one top-level folder expected in a tarball)"; return 1; }
  if [ -n "$lock" ]; then cp "$lock" "$dir/kafka-delta-ingest/Cargo.lock"; else locked=(); fi
  log "building kafka-delta-ingest from $KDI_SRC with cargo (30–40 min of CPU the first time; log: $CACHE/build-$sum.log)"
  # build.rs needs the s3 or azure feature; azure is the lighter one.
  if ! (cd "$dir/kafka-delta-ingest" && CARGO_PROFILE_RELEASE_LTO=thin cargo build --release "${locked[@]}" --features azure) > "$CACHE/build-$sum.log" 2>&1; then
    KDI_SKIP="cargo build failed: $(grep -m1 -E '^error' "$CACHE/build-$sum.log" || tail -1 "$CACHE/build-$sum.log")"
    return 1
  fi
  cp "$dir/kafka-delta-ingest/target/release/kafka-delta-ingest" "$KDI_BIN"
}
if [[ " $READERS " == *" kdi "* ]]; then
  if [ -n "${KDI_BIN:-}" ]; then [ -x "$KDI_BIN" ] || die "KDI_BIN=$KDI_BIN is not executable"
  elif ! build_kdi; then log "kafka-delta-ingest skipped: $KDI_SKIP"; fi
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }
NOTES="$OUT/notes.txt"; : > "$NOTES"
# failed WHAT LOG: a writer that did not commit every record is noted (with its log's last
# lines) and the benchmark goes on with the other readers.
failed() {
  log "FAILED: $1 (log: $2)"
  { echo "FAILED: $1 — last lines of $2:"; tail -n 5 "$2" | cut -c1-400 | sed 's/^/    /'; } >> "$NOTES"
}
STAMP="$(date +%s)"
LOADS="$OUT/load.txt"; : > "$LOADS"

# run_reader READER TOPIC SIZE [extra run flags]: one measured run, appended to RESULTS.
run_reader() {
  local r="$1" topic="$2" size="$3"; shift 3
  local tag="$topic-$r-$RANDOM" t
  t="$OUT/tables/$tag"
  echo "$(date -u +%T) $tag load $(load)" >> "$LOADS"
  log "$r on $topic"
  case "$r" in
    baseline)
      "$B" consume -out "$RESULTS" -topic "$topic" -record-bytes "$(record_bytes "$size")" -broker-pid "$BROKER_PID" -label "consume-only (franz-go)$FMT_LABEL" >/dev/null ;;
    ingestd1|ingestd2|base1|base2)
      local procs="${r: -1}" cfg="$OUT/cfg-$tag" port bin="$OUT/bin/ingestd" name="ingestd"
      if [ "${r#base}" != "$r" ]; then
        [ -n "$BASE_REV" ] || die "reader $r needs BASE_REF"
        bin="$OUT/bin/ingestd-base" name="base ingestd@$BASE_REV"
      fi
      mkdir -p "$cfg"
      local prof=()
      if [ "${PROFILE:-0}" = 1 ]; then
        mkdir -p "$OUT/prof"
        prof=(--cpuprofile "$OUT/prof/$tag.cpu" --memprofile "$OUT/prof/$tag.mem")
      fi
      if [ "${TRACE:-0}" = 1 ]; then
        mkdir -p "$OUT/prof"
        prof+=(--trace "$OUT/prof/$tag.trace")
      fi
      # Below the kernel's ephemeral range (32768 and up: the clients' own sockets), and
      # not one something already listens on.
      port=$((20000 + RANDOM % 12000))
      while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((20000 + RANDOM % 12000)); done
      local source="schema_registry: {url: \"$SCHEMA_REGISTRY_URL\"}"
      case "$FORMAT" in
        protobuf) source="format: protobuf
$source" ;;
        json) "$B" avsc > "$cfg/bench.avsc"; source="format: json
avro_schema_file: bench.avsc" ;;
        json_schema) source="format: json_schema
$source" ;;
      esac
      cat > "$cfg/bench.yaml" <<YAML
name: bench
kafka: {brokers: ["$KAFKA_BROKERS"], topics: [$topic], group: bench-$tag, start_offset: earliest}
$source
table: {uri: "file://$t", create: true, partition_by: []$TABLE_EXTRA}
schema: {policy: evolve, on_incompatible: halt, allow_table_features: []}
dead_letter: {topic: $topic.dlq}
batch: {max_records: $(batch_records "$size"), max_bytes: $MAX_BYTES, max_age: $MAX_AGE}
YAML
      "$B" run -out "$RESULTS" -label "$name GOMAXPROCS=$procs$MODE_LABEL$FMT_LABEL${SUFFIX:-}" -topic "$topic" -want "$N_WANT" -record-bytes "$(record_bytes "$size")" \
        -table "$t" -metrics "http://127.0.0.1:$port/metrics" -python "$PY" -log "$OUT/logs/$tag.log" -broker-pid "$BROKER_PID" \
        -env "GOMAXPROCS=$procs" "$@" -- "$bin" run --config "$cfg" --listen "127.0.0.1:$port" "${prof[@]}" >/dev/null \
        || failed "$r on $topic" "$OUT/logs/$tag.log" ;;
    kdi)
      if [ -n "$KDI_SKIP" ] || [ -z "${KDI_BIN:-}" ] || [ "$FORMAT" = protobuf ] || [ "$FORMAT" = json_schema ]; then return 0; fi
      local input=(--avro "$SCHEMA_REGISTRY_URL")
      [ "$FORMAT" = json ] && input=()
      "$PY" scripts/bench/create_table.py "$t"
      "$B" run -out "$RESULTS" -label "kafka-delta-ingest$FMT_LABEL${SUFFIX:-}" -topic "$topic" -want "$N_WANT" -record-bytes "$(record_bytes "$size")" \
        -table "$t" -python "$PY" -log "$OUT/logs/$tag.log" -broker-pid "$BROKER_PID" "$@" -- \
        "$KDI_BIN" ingest "$topic" "file://$t" --kafka "$KAFKA_BROKERS" --consumer_group "bench-$tag" --app_id "bench-$tag" \
        --auto_offset_reset earliest "${input[@]}" --allowed_latency "${MAX_AGE%s}" \
        --max_messages_per_batch "$(batch_records "$size")" --checkpoints >/dev/null \
        || failed "$r on $topic" "$OUT/logs/$tag.log" ;;
    *) die "unknown reader $r (want baseline, ingestd1, ingestd2, base1, base2 or kdi)" ;;
  esac
}

# batch_records SIZE: the batch's record bound for records of SIZE bytes (MAX_RECORDS).
batch_records() {
  if [ "$MAX_RECORDS" != auto ]; then echo "$MAX_RECORDS"; elif [ "$1" -le 200 ]; then echo 50000; else echo 12500; fi
}

# record_bytes SIZE: the mean value size of FORMAT's records of SIZE (from its produce output).
record_bytes() {
  local f="$OUT/produce-$FORMAT-$1.json"
  if [ -f "$f" ]; then sed -n 's/.*"record_bytes":\([0-9]*\).*/\1/p' "$f"; else echo "$1"; fi
}

reversed() { local out="" x; for x in $1; do out="$x $out"; done; echo "$out"; }

FIRST_RATE=""
for size in $SIZES; do
 for FORMAT in $FORMATS; do
  case "$FORMAT" in avro) FMT_LABEL="" ;; protobuf|json|json_schema) FMT_LABEL=" ($FORMAT)" ;; *) die "FORMATS: $FORMAT is not avro, protobuf, json or json_schema" ;; esac
  topic="bench-e2e-$size-$STAMP"
  [ "$FORMAT" = avro ] || topic="bench-e2e-$FORMAT-$size-$STAMP"
  log "producing $N $FORMAT records of $size B to $topic ($P partitions, compression $COMPRESSION)"
  echo "$(date -u +%T) produce $topic load $(load)" >> "$LOADS"
  "$B" produce -topic "$topic" -partitions "$P" -n "$N" -size "$size" -compression "$COMPRESSION" -format "$FORMAT" > "$OUT/produce-$FORMAT-$size.json"
  N_WANT="$N"
  for r in $READERS $(reversed "$READERS"); do run_reader "$r" "$topic" "$size"; done
 done
 FORMAT="${FORMATS%% *}"  # the latency run's
 case "$FORMAT" in avro) FMT_LABEL="" topic="bench-e2e-$size-$STAMP" ;; *) FMT_LABEL=" ($FORMAT)" topic="bench-e2e-$FORMAT-$size-$STAMP" ;; esac
  if [ -z "$FIRST_RATE" ]; then
    FIRST_RATE="$(awk -v t="$topic" -v l="\"label\":\"ingestd GOMAXPROCS=1$MODE_LABEL$FMT_LABEL\"" -F'"wall_seconds":' 'index($0, l) && index($0, "\"topic\":\"" t "\"") {split($2, a, ","); w=a[1]; n=$0; sub(/.*"records":/, "", n); sub(/,.*/, "", n); print int(n / w / 2); exit}' "$RESULTS")"
  fi
done

# --- produce → visible latency: a writer runs while records are produced at a fixed rate.
if [ "$LATENCY" = 1 ]; then
  rate="$RATE"; [ "$rate" = auto ] && rate="${FIRST_RATE:-50000}"
  size="${SIZES%% *}"
  # The producer goes on for LAT_TAIL seconds past the measured window (default max_age + 2 s), so
  # that the window's last batch is closed by the stream, not left waiting max_age by its end.
  tail_s="${LAT_TAIL:-$(( ${MAX_AGE%s} + 2 ))}"
  N_WANT=$((rate * (LAT_SECONDS + tail_s)))
  for r in ingestd1 kdi; do
    [ "$r" = kdi ] && { [ -n "$KDI_SKIP" ] || [ -z "${KDI_BIN:-}" ]; } && continue
    topic="bench-e2e-lat-$r-$size-$STAMP"
    "$B" produce -topic "$topic" -partitions "$P" -n 0 -size "$size" -format "$FORMAT" > /dev/null  # register the schema, create the topic
    SUFFIX=", latency run at $rate records/s" run_reader "$r" "$topic" "$size" -latency -latency-window "${LAT_SECONDS}s" &
    rpid=$!
    sleep 3
    log "producing $N_WANT records at $rate records/s to $topic (latency over the first ${LAT_SECONDS} s)"
    "$B" produce -topic "$topic" -existing -partitions "$P" -n "$N_WANT" -size "$size" -compression "$COMPRESSION" -rate "$rate" -format "$FORMAT" > /dev/null
    wait "$rpid"
  done
fi

mib="${MAX_BYTES%MiB}"; [[ "$mib" =~ ^[0-9]+$ ]] || mib=128  # the RSS goal's max_bytes, in MiB
"$B" report -max-bytes-mib "$mib" -max-age-s "${MAX_AGE%s}" "$RESULTS" > "$OUT/results.md"
{
  cat "$OUT/results.md"
  echo
  echo "N=$N P=$P SIZES=\"$SIZES\" FORMATS=\"$FORMATS\" COMPRESSION=$COMPRESSION batch: $MAX_RECORDS ($(for s in $SIZES; do printf '%s B: %s ' "$s" "$(batch_records "$s")"; done| sed 's/ $//')) records / $MAX_BYTES / $MAX_AGE; $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)); results in $OUT"
  [ -n "$KDI_SKIP" ] && echo "kafka-delta-ingest skipped: $KDI_SKIP"
  cat "$NOTES"
  echo "load average (1, 5, 15 min) at each run's start:"; sed 's/^/    /' "$LOADS"
} | tee "$OUT/summary.md"
