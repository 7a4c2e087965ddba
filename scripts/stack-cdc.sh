# Change-data-capture services for scripts/stack.sh (sourced by it; uses its ROOT, DL,
# STACK, LOGS, DEP_PLUGIN, log, die, pick_port, port_open, tail_log, apt_install):
#   - PostgreSQL from Debian's packages (`postgresql`), one cluster with wal_level=logical
#     on loopback, data in $STACK/postgres, run as the `postgres` OS user when stack.sh runs
#     as root (initdb and the server refuse to run as root);
#   - the jars of a Kafka Connect worker (org.apache.kafka:connect-runtime, the broker's
#     version) and two Connect plugins, the Debezium PostgreSQL connector (pgoutput) and
#     Apicurio's Avro converter, resolved once from Maven Central into $DL/connect-<hash>.
#     No worker runs here: integration tests start their own (integration/connect_test.go),
#     against the shared broker or a private one.
# .stack/env then has POSTGRES_URL (a superuser URL, database postgres, trust auth on
# 127.0.0.1), CONNECT_LIB_DIR (the worker's classpath directory) and CONNECT_PLUGIN_PATH
# (its plugin.path).

PG_DIR="$STACK/postgres"          # socket directory; owned by the server's OS user
PG_DATA="$PG_DIR/data"            # the cluster (deleted by down)
PG_PORT_FILE="$STACK/postgres.port"
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"

CONNECT_POMS="worker-pom.xml debezium-pom.xml apicurio-pom.xml"
# Jars a plugin must not carry: the worker provides the Kafka API (and Connect loads
# org.apache.kafka.* from its own classpath anyway), slf4j and the compression codecs, and
# the copies Maven resolves for a plugin are of the Kafka version it was built against.
CONNECT_PLUGIN_EXCLUDE_GROUPS="org.apache.kafka,org.slf4j"
CONNECT_PLUGIN_EXCLUDE_ARTIFACTS="lz4-java,snappy-java,zstd-jni"

# ---------------------------------------------------------------------------------------
# PostgreSQL

# pg_bin: the newest installed server's bin directory (Debian: /usr/lib/postgresql/N/bin),
# installing the `postgresql` package when there is none.
pg_bin() {
  local d
  if ! d="$(pg_find)"; then
    apt_install postgresql
    d="$(pg_find)" || die "no PostgreSQL server found after installing it"
  fi
  echo "$d"
}

pg_find() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

# as_pg CMD...: run CMD as the server's OS user: `postgres` under root, else the caller.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_running() {
  local bin
  [ -f "$PG_PORT_FILE" ] && [ -f "$PG_DATA/postmaster.pid" ] && bin="$(pg_find)" || return 1
  as_pg "$bin/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1 && port_open "$(cat "$PG_PORT_FILE")"
}

pg_url() { echo "postgres://postgres@127.0.0.1:$(cat "$PG_PORT_FILE")/postgres?sslmode=disable"; }

# postgres_up: start the cluster (idempotent), initdb on first use. The settings are given
# on the command line, so postgresql.conf stays initdb's. fsync, full_page_writes and
# synchronous_commit are off: test data, and a crash loses nothing a test needs.
postgres_up() {
  mkdir -p "$STACK" "$LOGS"
  if pg_running; then log "PostgreSQL already running on 127.0.0.1:$(cat "$PG_PORT_FILE")"; return 0; fi
  local bin port explicit
  bin="$(pg_bin)"
  mkdir -p "$PG_DIR"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "no OS user postgres (the postgresql package makes it)"
    chown postgres: "$PG_DIR"
    runuser -u postgres -- test -w "$PG_DIR" \
      || die "the OS user postgres cannot write $PG_DIR: a directory above it is closed to other users (move the checkout or set STACK_DIR)"
  fi
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    rm -rf "$PG_DATA"
    log "initdb $PG_DATA"
    as_pg "$bin/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
      > "$LOGS/postgres-initdb.log" 2>&1 || { tail_log "$LOGS/postgres-initdb.log"; die "initdb failed"; }
  fi
  explicit=0; [ -n "${PG_PORT:-}" ] && explicit=1
  if [ -f "$PG_PORT_FILE" ] && [ -z "${PG_PORT:-}" ]; then PG_PORT="$(cat "$PG_PORT_FILE")"; fi
  port="$(pick_port PG_PORT "${PG_PORT:-55432}" "$explicit")"
  echo "$port" > "$PG_PORT_FILE"
  : > "$LOGS/postgres.log"
  [ "$(id -u)" = 0 ] && chown postgres: "$LOGS/postgres.log"
  log "starting PostgreSQL $(basename "$(dirname "$bin")") on 127.0.0.1:$port, log $LOGS/postgres.log"
  # pg_ctl puts the server in a session of its own: it outlives this script.
  if ! as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$LOGS/postgres.log" -w -t "$PG_START_TIMEOUT" -o "\
-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$PG_DIR \
-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 \
-c fsync=off -c full_page_writes=off -c synchronous_commit=off -c shared_buffers=64MB \
-c max_connections=200" start > "$LOGS/postgres-ctl.log" 2>&1; then
    tail_log "$LOGS/postgres.log"; die "PostgreSQL did not start"
  fi
}

postgres_down() { # stop the server (fast shutdown); data kept
  local bin
  [ -f "$PG_DATA/postmaster.pid" ] && bin="$(pg_find)" || return 0
  log "stopping PostgreSQL"
  as_pg "$bin/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1 \
    || log "PostgreSQL did not stop cleanly (see $LOGS/postgres.log)"
}

postgres_status() {
  if pg_running; then
    echo "postgres: running, $(pg_url) (wal_level=logical)"
  else
    echo "postgres: not running"; return 1
  fi
}

# ---------------------------------------------------------------------------------------
# Kafka Connect and its plugins (jars only)

connect_hash() {
  local p
  { for p in $CONNECT_POMS; do cat "$ROOT/scripts/connect/$p"; done
    echo "$CONNECT_PLUGIN_EXCLUDE_GROUPS $CONNECT_PLUGIN_EXCLUDE_ARTIFACTS service-manifest"; } | sha256sum | cut -d' ' -f1
}

# connect_dir: where this checkout's POMs resolve to; keyed on their hash, so that
# checkouts sharing one .stack with other POMs never replace each other's jars.
connect_dir() { echo "$DL/connect-$(connect_hash | cut -c1-12)"; }

connect_ready() { [ -f "$(connect_dir)/.pom.sha256" ]; }

# connect_copy POM DIR [plugin]: copy-dependencies of one POM; a plugin without the
# worker's own jars.
connect_copy() {
  local pom="$ROOT/scripts/connect/$1" out="$2" name
  name="$(basename "$1" .xml)"
  local args=(-q -B -f "$pom" "$DEP_PLUGIN:copy-dependencies" -DoutputDirectory="$out" -DincludeScope=runtime)
  if [ "${3:-}" = plugin ]; then
    args+=(-DexcludeGroupIds="$CONNECT_PLUGIN_EXCLUDE_GROUPS" -DexcludeArtifactIds="$CONNECT_PLUGIN_EXCLUDE_ARTIFACTS")
  fi
  mvn "${args[@]}" > "$LOGS/mvn-connect-$name.log" 2>&1 || { tail_log "$LOGS/mvn-connect-$name.log"; return 1; }
}

# connect_jars: resolve the worker and plugin jars once (the three POMs in parallel).
connect_jars() {
  mkdir -p "$LOGS"
  connect_ready && return 0
  command -v mvn >/dev/null 2>&1 || apt_install maven
  command -v jar >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
  local dir tmp p1 p2 p3 j
  dir="$(connect_dir)"; tmp="$dir.tmp.$$"
  log "resolving Kafka Connect, Debezium and the Apicurio converter with Maven (first time only)"
  rm -rf "$tmp"
  connect_copy worker-pom.xml "$tmp/lib" & p1=$!
  connect_copy debezium-pom.xml "$tmp/plugins/debezium-connector-postgres" plugin & p2=$!
  connect_copy apicurio-pom.xml "$tmp/plugins/apicurio-converter" plugin & p3=$!
  wait "$p1" && wait "$p2" && wait "$p3" || { rm -rf "$tmp"; die "Maven could not resolve the Kafka Connect jars"; }
  ls "$tmp"/lib/connect-runtime-*.jar "$tmp"/plugins/debezium-connector-postgres/debezium-connector-postgres-*.jar \
    "$tmp"/plugins/apicurio-converter/apicurio-registry-utils-converter-*.jar >/dev/null \
    || { rm -rf "$tmp"; die "the Kafka Connect jars are incomplete"; }
  for j in "$tmp"/plugins/*/kafka-clients-*.jar "$tmp"/plugins/*/connect-api-*.jar; do
    [ -e "$j" ] && { rm -rf "$tmp"; die "a plugin carries Kafka's own jars ($(basename "$j"))"; }
  done
  # Apicurio's converter jar has no ServiceLoader manifest, so a worker would have to scan
  # every class of every plugin by reflection (about 11 s of each start on two busy cores);
  # with this manifest it runs with plugin.discovery=service_load (half a second).
  mkdir -p "$tmp/manifest/META-INF/services"
  echo io.apicurio.registry.utils.converter.AvroConverter > "$tmp/manifest/META-INF/services/org.apache.kafka.connect.storage.Converter"
  jar cf "$tmp/plugins/apicurio-converter/apicurio-converter-service-manifest.jar" -C "$tmp/manifest" META-INF \
    || { rm -rf "$tmp"; die "could not write the Apicurio converter's service manifest"; }
  rm -rf "$tmp/manifest"
  connect_hash > "$tmp/.pom.sha256"
  rm -rf "$dir"; mv "$tmp" "$dir"
  log "Kafka Connect jars ready in $dir"
}

# cdc_env: POSTGRES_URL and the Connect directories, as export lines (what is ready).
cdc_env() {
  if [ -f "$PG_PORT_FILE" ] && [ -f "$PG_DATA/PG_VERSION" ]; then echo "export POSTGRES_URL=\"$(pg_url)\""; fi
  if connect_ready; then
    echo "export CONNECT_LIB_DIR=$(connect_dir)/lib"
    echo "export CONNECT_PLUGIN_PATH=$(connect_dir)/plugins"
  fi
}
