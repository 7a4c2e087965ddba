#!/usr/bin/env bash
# Change-data-capture benchmark (BENCHMARKS.md, "Change data capture"; docs/performance.md):
# PostgreSQL → Debezium 3.7.1 (PostgreSQL connector, pgoutput) on a Kafka Connect 4.4 worker
# (distributed mode, Avro in the Confluent framing through the stack's registry) → the
# stack's broker → `ingestd run` (envelope: debezium, mode: upsert, key_format: avro,
# sequence_by: source.lsn, envelope_columns: [source_ts_ms], kafka_columns: [timestamp]) → a
# local Delta table.
# The Connect worker is the baseline: its CPU seconds are measured over the same changes.
#
#   1. setup (not measured): a database of its own with table src, ROWS rows of ~200 bytes
#      loaded by one INSERT … SELECT FROM generate_series; the topic (one partition,
#      message.timestamp.type=LogAppendTime: each record's timestamp is when the broker
#      appended it) and its dead-letter topic; the Connect worker (JIT and GC at the JVM's
#      defaults, -Xmx1g); ingestd.
#   2. snapshot (SNAPSHOT=initial only): the connector is registered and the ROWS rows go
#      through as snapshot reads (op r) into a new table: measured on its own. By default
#      (SNAPSHOT=no_data) the connector starts streaming at once and this phase is skipped.
#   3. warmup: the steady workload for WARMUP (the worker's JIT, ingestd's first commits
#      and PostgreSQL's caches), measured and reported but outside the goals.
#   4. steady: WORKERS connections change src at RATE changes/s in all for DURATION: 60 %
#      updates, 20 % inserts, 20 % deletes of uniformly chosen live ids, TX_ROWS changes per
#      transaction (1: single-row autocommit transactions).
#   5. flat: the same mix flat out for FLAT_DURATION, FLAT_TX_ROWS changes per transaction (small
#      batches: single-row transactions from WORKERS connections bound the rate at what
#      PostgreSQL commits, below what Debezium streams).
# Each phase ends when the topic holds every record of its changes (one per change and a
# tombstone per delete: Debezium's own throughput, the bound) and then when the table's txn
# version has reached the topic's end (end to end). CPU seconds of the worker JVM and of
# ingestd come from /proc/<pid>/stat (utime+stime) at the phase's start and at those two
# moments. At the end the Delta table, read by delta-rs, must equal `SELECT … FROM src`
# (row count, distinct ids, MD5 of the canonical rows per id bucket), else the run fails.
# The lag PostgreSQL commit → visible in Delta is read from the rows' _source_ts_ms and the
# log (scripts/bench/cdc_report.py says how).
#
# Usage: scripts/bench-cdc.sh           (or: make bench-cdc)
# Environment (defaults):
#   ROWS=1000000       rows in src before the connector starts
#   RATE=1000          steady phase: changes/s         DURATION=60s   the steady phase
#   FLAT_DURATION=30s  the flat phase (Debezium drains its backlog for as long again)
#   WORKERS=4          workload connections            TX_ROWS=1      changes per transaction
#   FLAT_TX_ROWS=10    changes per transaction in the flat phase
#   WARMUP=15s         the warmup phase's workload
#   PHASES="snapshot warmup steady flat"
#   SNAPSHOT=no_data   the connector's snapshot.mode: no_data (the default: streaming only, no
#                      snapshot phase; the table holds only the keys the workload changes, and
#                      the check compares it with the source rows updated or inserted,
#                      counter > 0 OR id > ROWS) or initial (the ROWS rows first go through
#                      as snapshot reads, measured as their own phase, and the streaming
#                      phases then upsert into a table of ROWS keys; at 1 M rows the snapshot
#                      alone takes ~3 minutes on 2 shared cores)
#   MAX_AGE=2s  MAX_RECORDS=50000  MAX_BYTES=64MiB     ingestd's batch bounds
#   CPUPROFILE=0       1: ingestd writes a CPU profile to $BENCH_OUT/ingestd.cpu
#                      (go tool pprof -top $BENCH_OUT/bin/ingestd $BENCH_OUT/ingestd.cpu)
#   BENCH_ENV          a stack env file instead of .stack/env (scripts/stack.sh up makes it)
#   BENCH_OUT          output folder (default: a new /tmp/bench-cdc.XXXX); KEEP=1 keeps the
#                      Delta table there (default: deleted after the check)
# Output: $BENCH_OUT/results.jsonl (one line per phase), report.jsonl (with lags and the
# check), results.md (the table), printed. Everything the run creates — the connector, its
# replication slot and publication, the database, the topics, the worker's internal topics,
# the registry subjects, the consumer group, the worker and ingestd — is removed on exit,
# also on failure; the shared stack keeps running.
set -euo pipefail
# The whole script is one function, read before it runs: an edit during a run cannot change it.
main() {

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROWS="${ROWS:-1000000}"; RATE="${RATE:-1000}"; DURATION="${DURATION:-60s}"; FLAT_DURATION="${FLAT_DURATION:-30s}"
WORKERS="${WORKERS:-4}"; TX_ROWS="${TX_ROWS:-1}"; FLAT_TX_ROWS="${FLAT_TX_ROWS:-10}"; PHASES="${PHASES:-snapshot warmup steady flat}"; WARMUP="${WARMUP:-15s}"
MAX_AGE="${MAX_AGE:-2s}"; MAX_RECORDS="${MAX_RECORDS:-50000}"; MAX_BYTES="${MAX_BYTES:-64MiB}"
CPUPROFILE="${CPUPROFILE:-0}"; KEEP="${KEEP:-0}"; SNAPSHOT="${SNAPSHOT:-no_data}"
case "$SNAPSHOT" in
  initial) ;;
  no_data) PHASES="$(echo ${PHASES//snapshot/})" ;; # word-split on purpose: no empty words left
  *) echo "bench-cdc: SNAPSHOT=$SNAPSHOT: want initial or no_data" >&2; exit 1 ;;
esac
OUT="${BENCH_OUT:-$(mktemp -d /tmp/bench-cdc.XXXX)}"
mkdir -p "$OUT/bin" "$OUT/logs" "$OUT/connect"
log() { echo "bench-cdc: $(date -u +%T) $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- the stack (never started or stopped here beyond `up` when it has no env yet)
ENV_FILE="${BENCH_ENV:-$ROOT/.stack/env}"
[ -f "$ENV_FILE" ] || scripts/stack.sh up
# shellcheck disable=SC1090
. "$ENV_FILE"
for v in KAFKA_BROKERS SCHEMA_REGISTRY_URL POSTGRES_URL CONNECT_LIB_DIR CONNECT_PLUGIN_PATH; do
  [ -n "${!v:-}" ] || die "the stack env ($ENV_FILE) has no $v: run scripts/stack.sh up"
done
[ -d "$CONNECT_PLUGIN_PATH/debezium-connector-postgres" ] || die "no Debezium plugin in $CONNECT_PLUGIN_PATH (scripts/stack.sh connect-jars)"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || scripts/venv.sh
[ -x "$PY" ] || die "no Python venv at $ROOT/.venv (scripts/venv.sh)"
PGHOSTPORT="${POSTGRES_URL#*@}"; PGHOSTPORT="${PGHOSTPORT%%/*}"
PGHOST="${PGHOSTPORT%:*}"; PGPORT="${PGHOSTPORT##*:}"

log "building ingestd and benchcdc"
go build -o "$OUT/bin/ingestd" ./cmd/ingestd
go build -o "$OUT/bin/benchcdc" ./cmd/benchcdc
B="$OUT/bin/benchcdc"

# --- names of this run only
SUFFIX="$(date +%s)$$"
DB="cdcbench_$SUFFIX"; PREFIX="cdcbench$SUFFIX"; TOPIC="$PREFIX.public.src"; DLQ="$TOPIC.dlq"
CONNECTOR="cdcbench-$SUFFIX"; SLOT="cdcbench_$SUFFIX"; GROUP="connect-cdcbench-$SUFFIX"; CGROUP="cdcbench-ingestd-$SUFFIX"
TABLE="$OUT/table-$SUFFIX"
CONNECT_PID=""; INGESTD_PID=""; REST=""
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stop_pid() { # pid signal-timeout-s: SIGTERM, then SIGKILL after the timeout
  local pid="$1" t="$2"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $((t * 10))); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  log "pid $pid did not exit after SIGTERM and ${t}s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  set +e
  log "cleaning up (exit status $rc)"
  [ -n "$REST" ] && curl -s -o /dev/null -X DELETE "$REST/connectors/$CONNECTOR"
  stop_pid "$INGESTD_PID" 30
  stop_pid "$CONNECT_PID" 30
  "$B" cleanup -pg "$POSTGRES_URL" -db "$DB" -brokers "$KAFKA_BROKERS" \
    -topics "$TOPIC,$DLQ,$GROUP-configs,$GROUP-offsets,$GROUP-status" -groups "$CGROUP,$GROUP" \
    -registry "$SCHEMA_REGISTRY_URL" -subjects "$TOPIC-key,$TOPIC-value" || log "cleanup incomplete (see above)"
  [ "$KEEP" = 1 ] || rm -rf "$TABLE"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "loading $ROWS rows into $DB.src"
"$B" setup -pg "$POSTGRES_URL" -db "$DB" -rows "$ROWS" | tee "$OUT/setup.json" >&2
"$B" topics -brokers "$KAFKA_BROKERS" -create "$TOPIC,$DLQ"

# --- the Connect worker: distributed mode, a group of one (as integration/connect_test.go)
PORT="$(free_port)"; REST="http://127.0.0.1:$PORT"
cat > "$OUT/connect/worker.properties" <<PROPS
bootstrap.servers=$KAFKA_BROKERS
group.id=$GROUP
config.storage.topic=$GROUP-configs
offset.storage.topic=$GROUP-offsets
status.storage.topic=$GROUP-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
offset.storage.partitions=1
status.storage.replication.factor=1
status.storage.partitions=1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
offset.flush.interval.ms=1000
plugin.path=$CONNECT_PLUGIN_PATH
plugin.discovery=service_load
listeners=$REST
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$PORT
PROPS
cat > "$OUT/connect/log4j2.properties" <<'PROPS'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %X{connector.context}%m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
logger.reflections.name = org.reflections
logger.reflections.level = error
logger.kafka.name = org.apache.kafka.clients
logger.kafka.level = warn
PROPS
log "starting the Connect worker on $REST"
java -Xms512m -Xmx1g -Djava.awt.headless=true -Dlog4j2.configurationFile="$OUT/connect/log4j2.properties" \
  -cp "$CONNECT_LIB_DIR/*" org.apache.kafka.connect.cli.ConnectDistributed "$OUT/connect/worker.properties" \
  > "$OUT/logs/connect.log" 2>&1 &
CONNECT_PID=$!
for i in $(seq 1200); do
  curl -sf -o /dev/null "$REST/connectors" && break
  kill -0 "$CONNECT_PID" 2>/dev/null || { tail -50 "$OUT/logs/connect.log" >&2; die "the Connect worker exited"; }
  [ "$i" -lt 1200 ] || die "the Connect worker's REST API is not up after 120 s"
  sleep 0.1
done

APICURIO="${SCHEMA_REGISTRY_URL%/apis/ccompat/v7}/apis/registry/v2"
"$PY" - "$OUT/connector.json" <<PYEOF
import json, sys
c = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "tasks.max": "1",
    "database.hostname": "$PGHOST", "database.port": "$PGPORT",
    "database.user": "postgres", "database.password": "postgres", "database.dbname": "$DB",
    "topic.prefix": "$PREFIX", "plugin.name": "pgoutput",
    "slot.name": "$SLOT", "publication.name": "${SLOT}_pub", "publication.autocreate.mode": "filtered",
    "table.include.list": "public.src", "snapshot.mode": "$SNAPSHOT", "tombstones.on.delete": "true",
    "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1",
    "schema.name.adjustment.mode": "avro", "field.name.adjustment.mode": "avro",
}
for side in ("key", "value"):
    p = side + ".converter"
    c[p] = "io.apicurio.registry.utils.converter.AvroConverter"
    c[p + ".apicurio.registry.url"] = "$APICURIO"
    c[p + ".apicurio.registry.auto-register"] = "true"
    c[p + ".apicurio.registry.find-latest"] = "true"
    c[p + ".apicurio.registry.headers.enabled"] = "false"
    c[p + ".apicurio.registry.as-confluent"] = "true"
    c[p + ".apicurio.registry.use-id"] = "contentId"
json.dump(c, open(sys.argv[1], "w"), indent=1)
PYEOF

# --- ingestd
cat > "$OUT/pipeline.yaml" <<YAML
name: src
kafka: {brokers: ["$KAFKA_BROKERS"], topics: [$TOPIC], group: $CGROUP, start_offset: earliest}
schema_registry: {url: "$SCHEMA_REGISTRY_URL"}
table: {uri: "$TABLE", create: true, mode: upsert, key: [id], key_format: avro, envelope: debezium, sequence_by: source.lsn, envelope_columns: [source_ts_ms], kafka_columns: [timestamp]}
schema: {policy: evolve}
dead_letter: {topic: $DLQ}
batch: {max_records: $MAX_RECORDS, max_bytes: $MAX_BYTES, max_age: $MAX_AGE}
YAML
IPORT="$(free_port)"
PROF=()
[ "$CPUPROFILE" = 1 ] && PROF=(--cpuprofile "$OUT/ingestd.cpu")
log "starting ingestd"
"$OUT/bin/ingestd" run --config "$OUT/pipeline.yaml" --listen "127.0.0.1:$IPORT" "${PROF[@]}" > "$OUT/logs/ingestd.log" 2>&1 &
INGESTD_PID=$!
for i in $(seq 300); do
  curl -sf -o /dev/null "http://127.0.0.1:$IPORT/healthz" && break
  kill -0 "$INGESTD_PID" 2>/dev/null || { tail -20 "$OUT/logs/ingestd.log" >&2; die "ingestd exited"; }
  [ "$i" -lt 300 ] || die "ingestd is not healthy after 30 s"
  sleep 0.1
done

log "phases: $PHASES (rate $RATE/s for $DURATION after $WARMUP, flat out for $FLAT_DURATION; $WORKERS connections, $TX_ROWS changes per transaction, flat $FLAT_TX_ROWS)"
: > "$OUT/results.jsonl"
"$B" run -pg "$POSTGRES_URL" -db "$DB" -connect "$REST" -connector "$CONNECTOR" -config "$OUT/connector.json" \
  -brokers "$KAFKA_BROKERS" -topic "$TOPIC" -dlq "$DLQ" -table "$TABLE" -connect-pid "$CONNECT_PID" -ingestd-pid "$INGESTD_PID" \
  -rows "$ROWS" -phases "$PHASES" -rate "$RATE" -duration "$DURATION" -flat-duration "$FLAT_DURATION" -warmup "$WARMUP" -workers "$WORKERS" -tx-rows "$TX_ROWS" -flat-tx-rows "$FLAT_TX_ROWS" \
  -out "$OUT/results.jsonl" >&2

stop_pid "$INGESTD_PID" 60; INGESTD_PID=""
log "checking the table against the source: the source's checksum"
CHANGED=0; [ "$SNAPSHOT" = initial ] || CHANGED="$ROWS"
"$B" checksum -pg "$POSTGRES_URL" -db "$DB" -changed-after "$CHANGED" > "$OUT/source.json"
LABEL="$(date -u +%FT%H:%MZ) $(git rev-parse --short HEAD)"
log "checking the table against the source: delta-rs, and the lags"
set +e
"$PY" scripts/bench/cdc_report.py "$TABLE" "$OUT/results.jsonl" "$OUT/source.json" "${MAX_AGE%s}" "$LABEL" | tee "$OUT/results.md"
rc=${PIPESTATUS[0]}
set -e
{
  echo
  echo "ROWS=$ROWS SNAPSHOT=$SNAPSHOT RATE=$RATE DURATION=$DURATION FLAT_DURATION=$FLAT_DURATION WARMUP=$WARMUP WORKERS=$WORKERS TX_ROWS=$TX_ROWS FLAT_TX_ROWS=$FLAT_TX_ROWS MAX_AGE=$MAX_AGE MAX_RECORDS=$MAX_RECORDS; nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$OUT/results.md"
log "output in $OUT"
exit "$rc"
}
main "$@"
