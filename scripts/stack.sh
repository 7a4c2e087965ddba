#!/usr/bin/env bash
# Real services on loopback for ingestd's integration tests, without Docker:
#   - Apache Kafka 4.4.0, one KRaft node (broker + controller), from the official jars that
#     Maven resolves from Maven Central (scripts/kafka/pom.xml);
#   - a Confluent-compatible schema registry: Apicurio Registry 3.0.9, its ccompat API
#     (/apis/ccompat/v7), in-memory (H2) storage, from the `-all.tar.gz` distribution of
#     io.apicurio:apicurio-registry-app on Maven Central.
# Why Apicurio and not karapace: karapace is not published on PyPI (pip finds no version at
# all), so it cannot be installed here. Why Apicurio 3.0.9: it is the newest release whose
# runnable distribution is on Maven Central and runs on Java 17 (3.3.x is built for Java 21).
# It is started with ccompat canonical hashing so that re-registering the same schema with
# other whitespace returns the same id, as Confluent's registry does, and its global
# compatibility is set to BACKWARD, Confluent's default.
#
#   - one object-store emulator per cloud (scripts/stack-stores.sh): versitygw for S3,
#     fake-gcs-server for GCS (both built from the Go module proxy) and Azurite for Azure Blob
#     (npm), each checked to refuse a second conditional create, each with a bucket "lake".
#   - for change-data-capture tests (scripts/stack-cdc.sh): PostgreSQL from Debian's
#     packages with wal_level=logical (PG_PORT, default 55432), and the jars of a Kafka
#     Connect worker with the Debezium PostgreSQL connector and Apicurio's Avro converter,
#     resolved once with Maven; the tests start the worker themselves.
#
# Usage: scripts/stack.sh up|down|status|start-kafka|stop-kafka|restart-kafka|start-registry|stop-registry|start-stores|stop-stores|start-postgres|stop-postgres|connect-jars
#   up      start everything (idempotent: a no-op for what already runs), write .stack/env
#   down    stop everything and delete its data, so the next `up` starts fresh
#   start-stores / stop-stores: the object-store emulators alone (idempotent; stop keeps data)
#   status  print what runs
#   start-kafka / stop-kafka / restart-kafka, start-registry / stop-registry: one service,
#           data kept (Kafka's log dirs; the registry is in-memory), for chaos tests.
#   start-postgres / stop-postgres: PostgreSQL alone (idempotent; stop keeps data)
#   connect-jars: resolve the Kafka Connect jars (idempotent) and print their env lines
#           (.stack/env gets them from up)
# STACK_DIR (default .stack) holds an instance's state; set it to run a private second
# instance next to a shared one (downloads stay in .stack).
# Environment: KAFKA_PORT (default 9092), KAFKA_CONTROLLER_PORT (default 9093),
# KAFKA_SSL_PORT (default 9094), KAFKA_SASL_PORT (default 9095), SR_PORT (default 8081). An
# unset port whose default is taken by another program is replaced by a free one; an
# explicitly set port that is taken is an error. .stack/env holds the result:
#   . .stack/env   # KAFKA_BROKERS, SCHEMA_REGISTRY_URL (the ccompat root, with its path),
#                  # and the secured listeners below (KAFKA_SSL_BROKERS, KAFKA_SASL_SSL_BROKERS, ...)
# The one broker has four listeners (no second JVM):
#   PLAINTEXT  KAFKA_PORT       User:ANONYMOUS, a super user: every other test and tool uses it
#   SSL        KAFKA_SSL_PORT   TLS with client certificates required (mTLS); CN=ingestd -> User:ingestd
#   SASL_SSL   KAFKA_SASL_PORT  TLS + SASL SCRAM-SHA-512, SCRAM-SHA-256, PLAIN and OAUTHBEARER
#                               (Kafka's unsecured JWS validator: any alg=none token with a sub)
#   CONTROLLER KAFKA_CONTROLLER_PORT  KRaft, plaintext
# with the StandardAuthorizer (no ACL, no access; super users User:ANONYMOUS and User:admin).
# Test certificates (a CA, the broker with IP SAN 127.0.0.1, clients ingestd and other) are
# made with openssl in $STACK_DIR/certs; SCRAM users admin and ingestd are created when the
# storage is formatted (kafka-storage format --add-scram); PLAIN users are in the JAAS line.
# Store ports: S3_PORT (7070), GCS_PORT (4443), AZURITE_PORT (10000), same rules; .stack/env
# then also has AWS_ENDPOINT_URL_S3 (and S3_ENDPOINT), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# AWS_REGION, STORAGE_EMULATOR_HOST, AZURE_STORAGE_CONNECTION_STRING, AZURITE_BLOB_ENDPOINT and
# AZURITE_ACCOUNT_KEY (the emulators' test credentials).
# Timeouts: KAFKA_START_TIMEOUT (default 120 s), SR_START_TIMEOUT (default 180 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Downloads (Kafka jars, the registry distribution) are shared by every instance; state
# (configs, data, pids, ports, logs, env) lives in STACK_DIR, default .stack, so that a
# test can run a private second instance: STACK_DIR=/tmp/x KAFKA_PORT=… scripts/stack.sh start-kafka
DL="$ROOT/.stack"
STACK="${STACK_DIR:-$DL}"
LOGS="$STACK/logs"

KAFKA_POM="$ROOT/scripts/kafka/pom.xml"
KAFKA_JARS="$DL/kafka-jars"
KAFKA_DIR="$STACK/kafka"            # config files
KAFKA_DATA="$STACK/kafka-data"      # log.dirs (deleted by down)
KAFKA_PID="$STACK/kafka.pid"
KAFKA_CERTS="$STACK/certs"          # test CA, broker and client certificates, password files
# Test credentials (loopback only). SCRAM: admin (super user) and ingestd; PLAIN: the same.
KAFKA_ADMIN_PASSWORD="admin-secret"
KAFKA_INGESTD_PASSWORD="ingestd-secret"
KAFKA_HEAP="${KAFKA_HEAP:--Xms256m -Xmx768m}"
# C1 only: start-up on two busy cores is about twice as fast, and a test broker needs no peak speed.
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:TieredStopAtLevel=1}"

APICURIO_VERSION="3.0.9"
SR_HOME="$DL/apicurio-registry-$APICURIO_VERSION"
SR_PID="$STACK/registry.pid"
SR_HEAP="${SR_HEAP:--Xms128m -Xmx512m}"
SR_JVM_OPTS="${SR_JVM_OPTS:--XX:TieredStopAtLevel=1}"
SR_API_PATH="/apis/ccompat/v7"

DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# The registry archive's parent POM (io.apicurio:apicurio-registry:3.0.9) is missing from Maven
# Central; plugin 3.x refuses to copy an artifact whose descriptor it cannot read, 2.8 copies it.
DEP_PLUGIN_COPY="org.apache.maven.plugins:maven-dependency-plugin:2.8"

KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
SR_START_TIMEOUT="${SR_START_TIMEOUT:-180}"

# shellcheck source=scripts/stack-stores.sh
. "$ROOT/scripts/stack-stores.sh"
# shellcheck source=scripts/stack-cdc.sh
. "$ROOT/scripts/stack-cdc.sh"

log() { echo "stack.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------------------
# helpers

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# alive NAME PIDFILE: the recorded process runs and is ours (its command line carries our marker).
alive() {
  local pid
  [ -f "$2" ] || return 1
  pid="$(cat "$2" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-Dingestd.stack=$1" || return 1
}

# pick_port VAR DEFAULT EXPLICIT [CHOSEN...]: echo DEFAULT if free; if taken and not
# explicit, a free one that is not among the ports CHOSEN for the other services.
pick_port() {
  local name="$1" def="$2" explicit="$3" p
  shift 3
  local chosen=" $* "
  if ! port_open "$def" && [[ "$chosen" != *" $def "* ]]; then echo "$def"; return; fi
  [ "$explicit" = 1 ] && die "$name=$def is taken by another program (free it or choose another port)"
  for p in $(seq $((def + 10000)) $((def + 10100))); do
    [[ "$chosen" == *" $p "* ]] && continue
    if ! port_open "$p"; then log "port $def is taken; $name uses $p"; echo "$p"; return; fi
  done
  die "no free port near $((def + 10000)) for $name"
}

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then die "missing $*; install it"; fi
  log "installing $* with apt-get"
  if [ ! -f "$DL/.apt-updated" ]; then apt-get update -qq >/dev/null && touch "$DL/.apt-updated"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_tools() {
  local v
  command -v curl >/dev/null 2>&1 || apt_install curl
  command -v tar >/dev/null 2>&1 || apt_install tar
  command -v gzip >/dev/null 2>&1 || apt_install gzip
  # A JDK, not only a runtime: integration/testdata/ProduceTimestamps.java runs as a
  # single source file, which needs the compiler module (jdk.compiler).
  if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then apt_install openjdk-17-jdk-headless; fi
  v="$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2}')"
  [ "${v%%.*}" -ge 17 ] 2>/dev/null || die "java $v found; Kafka 4 and Apicurio need Java 17+ (set PATH/JAVA_HOME)"
  command -v mvn >/dev/null 2>&1 || apt_install maven
}

# tail_log FILE: the end of a service's log, for a failure message.
tail_log() {
  echo "----- last 60 lines of $1 -----" >&2
  tail -n 60 "$1" >&2 2>/dev/null || true
  echo "-----" >&2
}

stop_pid() { # stop_pid NAME PIDFILE
  local pid _
  if alive "$1" "$2"; then
    pid="$(cat "$2")"
    log "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then log "$1 did not stop in 30 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
  fi
  rm -f "$2"
}

# launch NAME PIDFILE LOGFILE CMD...: start CMD in its own session, detached; pid to PIDFILE.
launch() {
  local name="$1" pidf="$2" logf="$3"; shift 3
  : > "$logf"
  # shellcheck disable=SC2016 # $$ is the inner shell's pid, which exec hands to CMD
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidf" "$@" < /dev/null >> "$logf" 2>&1 &
  local _
  for _ in $(seq 1 50); do [ -s "$pidf" ] && break; sleep 0.1; done
  [ -s "$pidf" ] || die "could not start $name"
}

# ---------------------------------------------------------------------------------------
# Kafka

kafka_jars() {
  local want
  want="$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)"
  if [ -f "$KAFKA_JARS/.pom.sha256" ] && [ "$(cat "$KAFKA_JARS/.pom.sha256")" = "$want" ]; then return; fi
  log "resolving Kafka jars with Maven (first time only)"
  rm -rf "$KAFKA_JARS.tmp"
  if ! mvn -q -B -f "$KAFKA_POM" "$DEP_PLUGIN:copy-dependencies" \
        -DoutputDirectory="$KAFKA_JARS.tmp" -DincludeScope=runtime > "$LOGS/mvn-kafka.log" 2>&1; then
    tail_log "$LOGS/mvn-kafka.log"; die "Maven could not resolve the Kafka jars"
  fi
  echo "$want" > "$KAFKA_JARS.tmp/.pom.sha256"
  rm -rf "$KAFKA_JARS"; mv "$KAFKA_JARS.tmp" "$KAFKA_JARS"
}

# kafka_certs: a test CA and certificates (ECDSA P-256, PKCS#8 keys as Kafka's PEM store
# needs, 10 years), made once per STACK_DIR: the broker's has both EKUs and SANs
# localhost + IP 127.0.0.1 (Go verifies IP SANs and rejects CN-only certificates); clients
# CN=ingestd and CN=other (clientAuth); the registry's (serverAuth). Also the password files.
kafka_certs() {
  [ -f "$KAFKA_CERTS/ca.crt" ] && [ -f "$KAFKA_CERTS/broker-keystore.pem" ] && return
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  log "making test certificates in $KAFKA_CERTS"
  rm -rf "$KAFKA_CERTS.tmp"; mkdir -p "$KAFKA_CERTS.tmp"
  (
    set -e; cd "$KAFKA_CERTS.tmp"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -keyout ca.key -out ca.crt -subj "/CN=ingestd-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    leaf() { # leaf NAME EKU [SAN]
      openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$1"
      printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\n%s\n' \
        "$2" "${3:+subjectAltName=$3}" > "$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.crt"
      rm -f "$1.csr" "$1.ext"
    }
    leaf broker serverAuth,clientAuth "DNS:localhost,IP:127.0.0.1"
    leaf registry serverAuth "DNS:localhost,IP:127.0.0.1"
    leaf ingestd clientAuth
    leaf other clientAuth
    cat broker.key broker.crt ca.crt > broker-keystore.pem
    printf '%s\n' "$KAFKA_INGESTD_PASSWORD" > ingestd.password
    printf '%s\n' "$KAFKA_ADMIN_PASSWORD" > admin.password
    chmod 600 ./*.key broker-keystore.pem ./*.password
  ) > "$LOGS/certs.log" 2>&1 || { tail_log "$LOGS/certs.log"; die "openssl could not make the test certificates"; }
  rm -rf "$KAFKA_CERTS"; mv "$KAFKA_CERTS.tmp" "$KAFKA_CERTS"
}

kafka_config() { # kafka_config PORT CPORT SSL_PORT SASL_PORT
  mkdir -p "$KAFKA_DIR" "$KAFKA_DATA"
  cat > "$KAFKA_DIR/server.properties" <<EOF
# written by scripts/stack.sh
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2,SSL://127.0.0.1:$3,SASL_SSL://127.0.0.1:$4
advertised.listeners=PLAINTEXT://127.0.0.1:$1,SSL://127.0.0.1:$3,SASL_SSL://127.0.0.1:$4
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
controller.quorum.bootstrap.servers=127.0.0.1:$2
# TLS from PEM files (no store passwords with PEM). mTLS on the SSL listener only.
ssl.keystore.type=PEM
ssl.keystore.location=$KAFKA_CERTS/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$KAFKA_CERTS/ca.crt
listener.name.ssl.ssl.client.auth=required
# CN=ingestd -> User:ingestd (the default principal would be the whole DN)
ssl.principal.mapping.rules=RULE:^CN=([^,]+)(,.*|\$)/\$1/,DEFAULT
# SASL on SASL_SSL: one JAAS line per mechanism
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="$KAFKA_ADMIN_PASSWORD" user_ingestd="$KAFKA_INGESTD_PASSWORD";
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
# KIP-368 re-authentication, so token refresh and re-reading credentials are exercised
# (integration/reauth_test.go, security_test.go)
listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms=30000
listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=60000
# ACLs. CONTROLLER and PLAINTEXT authenticate as User:ANONYMOUS, which must be a super user
# (the broker registers with its own controller that way, and every plaintext test is admin).
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin
allow.everyone.if.no.acl.found=false
log.dirs=$KAFKA_DATA
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
log.retention.hours=168
EOF
  # Broker log: INFO to stdout (redirected to .stack/logs/kafka.log), chatty classes at WARN.
  cat > "$KAFKA_DIR/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = org.apache.kafka
logger.kafka.level = info
logger.req.name = kafka.request.logger
logger.req.level = warn
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = warn
EOF
  cat > "$KAFKA_DIR/log4j2-tools.properties" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = error
rootLogger.appenderRef.err.ref = ERR
EOF
  cat > "$KAFKA_DIR/probe.properties" <<'EOF'
request.timeout.ms=5000
default.api.timeout.ms=10000
EOF
}

# A Kafka Uuid as StorageTool random-uuid prints it (16 random bytes, URL-safe base64, no
# padding, not starting with '-'), without paying for a JVM start.
new_cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    case "$id" in -*) ;; *) echo "$id"; return ;; esac
  done
}

# kafka_java CLASS ARGS...: run a Kafka tool class in the foreground, quietly.
kafka_java() {
  java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2-tools.properties" \
    -cp "$KAFKA_JARS/*" "$@"
}

kafka_probe() { # kafka_probe PORT: a real metadata round trip through the admin client
  port_open "$1" || return 1
  timeout 30 java -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2-tools.properties" \
    -cp "$KAFKA_JARS/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "127.0.0.1:$1" --command-config "$KAFKA_DIR/probe.properties" --list \
    >/dev/null 2>&1
}

kafka_start() { # kafka_start PORT CONTROLLER_PORT SSL_PORT SASL_PORT
  local port="$1" cport="$2" sslport="$3" saslport="$4" cluster_id
  kafka_certs
  kafka_config "$port" "$cport" "$sslport" "$saslport"
  if [ ! -f "$KAFKA_DATA/meta.properties" ]; then
    cluster_id="$(new_cluster_id)"
    log "formatting $KAFKA_DATA (cluster id $cluster_id, SCRAM users admin and ingestd)"
    if ! kafka_java kafka.tools.StorageTool format --standalone -t "$cluster_id" \
          -c "$KAFKA_DIR/server.properties" \
          --add-scram "SCRAM-SHA-512=[name=\"admin\",password=\"$KAFKA_ADMIN_PASSWORD\"]" \
          --add-scram "SCRAM-SHA-512=[name=\"ingestd\",password=\"$KAFKA_INGESTD_PASSWORD\"]" \
          --add-scram "SCRAM-SHA-256=[name=\"ingestd\",password=\"$KAFKA_INGESTD_PASSWORD\"]" \
          > "$LOGS/kafka-format.log" 2>&1; then
      tail_log "$LOGS/kafka-format.log"; die "kafka storage format failed"
    fi
  fi
  echo "$port" > "$STACK/kafka.port"
  echo "$cport" > "$STACK/kafka.controller.port"
  echo "$sslport" > "$STACK/kafka.ssl.port"
  echo "$saslport" > "$STACK/kafka.sasl.port"
  log "starting Kafka on 127.0.0.1:$port (SSL $sslport, SASL_SSL $saslport, controller $cport), log $LOGS/kafka.log"
  # shellcheck disable=SC2086
  launch kafka "$KAFKA_PID" "$LOGS/kafka.log" \
    java -Dingestd.stack=kafka $KAFKA_HEAP $KAFKA_JVM_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
      -Dkafka.logs.dir="$LOGS" \
      -cp "$KAFKA_JARS/*" kafka.Kafka "$KAFKA_DIR/server.properties"
}

kafka_wait() {
  local port deadline
  port="$(cat "$STACK/kafka.port")"
  deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  until kafka_probe "$port"; do
    if ! alive kafka "$KAFKA_PID"; then
      tail_log "$LOGS/kafka.log"; rm -f "$KAFKA_PID"; die "Kafka exited during start-up"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail_log "$LOGS/kafka.log"; stop_pid kafka "$KAFKA_PID"
      die "Kafka did not answer a metadata request on 127.0.0.1:$port within ${KAFKA_START_TIMEOUT}s"
    fi
    sleep 1
  done
}

# ---------------------------------------------------------------------------------------
# Schema registry (Apicurio)

sr_dist() {
  [ -f "$SR_HOME/apicurio-registry-app-$APICURIO_VERSION-runner.jar" ] && return
  log "fetching Apicurio Registry $APICURIO_VERSION with Maven (first time only)"
  rm -rf "$DL/dl" "$SR_HOME.tmp"; mkdir -p "$DL/dl" "$SR_HOME.tmp"
  if ! mvn -q -B "$DEP_PLUGIN_COPY:copy" \
        -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" \
        -DoutputDirectory="$DL/dl" > "$LOGS/mvn-registry.log" 2>&1; then
    tail_log "$LOGS/mvn-registry.log"; die "Maven could not fetch Apicurio Registry $APICURIO_VERSION"
  fi
  tar xzf "$DL/dl/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$SR_HOME.tmp"
  [ -f "$SR_HOME.tmp/apicurio-registry-app-$APICURIO_VERSION-runner.jar" ] \
    || die "the Apicurio archive has no runner jar"
  rm -rf "$SR_HOME" "$DL/dl"; mv "$SR_HOME.tmp" "$SR_HOME"
}

sr_url() { echo "http://127.0.0.1:$(cat "$STACK/registry.port")$SR_API_PATH"; }

sr_probe() { curl -sf -m 5 -o /dev/null "$(sr_url)/subjects"; }

sr_start() { # sr_start PORT
  local port="$1"
  echo "$port" > "$STACK/registry.port"
  log "starting Apicurio Registry on 127.0.0.1:$port, log $LOGS/registry.log"
  # shellcheck disable=SC2086
  launch registry "$SR_PID" "$LOGS/registry.log" \
    java -Dingestd.stack=registry $SR_HEAP $SR_JVM_OPTS -XX:+UseSerialGC -Djava.awt.headless=true \
      -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
      -Dquarkus.log.console.color=false \
      -Dapicurio.ccompat.use-canonical-hash=true \
      -Dapicurio.rest.deletion.group.enabled=true \
      -Dapicurio.rest.deletion.artifact.enabled=true \
      -Dapicurio.rest.deletion.artifact-version.enabled=true \
      -Djava.util.logging.manager=org.jboss.logmanager.LogManager \
      -jar "$SR_HOME/apicurio-registry-app-$APICURIO_VERSION-runner.jar"
  echo fresh > "$STACK/registry.fresh"
}

sr_wait() {
  local deadline
  deadline=$((SECONDS + SR_START_TIMEOUT))
  until sr_probe; do
    if ! alive registry "$SR_PID"; then
      tail_log "$LOGS/registry.log"; rm -f "$SR_PID"; die "the schema registry exited during start-up"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail_log "$LOGS/registry.log"; stop_pid registry "$SR_PID"
      die "the schema registry did not answer GET $(sr_url)/subjects within ${SR_START_TIMEOUT}s"
    fi
    sleep 0.5
  done
  if [ -f "$STACK/registry.fresh" ]; then
    # Confluent's default global compatibility is BACKWARD; Apicurio starts with none.
    curl -sf -m 10 -o /dev/null -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
      --data '{"compatibility":"BACKWARD"}' "$(sr_url)/config" \
      || die "could not set the registry's global compatibility"
    rm -f "$STACK/registry.fresh"
  fi
}

# ---------------------------------------------------------------------------------------

# kafka_env: the broker's endpoints and test credentials, as export lines (the secured
# ones only when this broker has them: one started by an older stack.sh has not; restart it).
kafka_env() {
  echo "export KAFKA_BROKERS=127.0.0.1:$(cat "$STACK/kafka.port")"
  [ -f "$STACK/kafka.ssl.port" ] && [ -f "$STACK/kafka.sasl.port" ] && [ -f "$KAFKA_CERTS/ca.crt" ] || return 0
  cat <<EOF
export KAFKA_SSL_BROKERS=127.0.0.1:$(cat "$STACK/kafka.ssl.port")
export KAFKA_SASL_SSL_BROKERS=127.0.0.1:$(cat "$STACK/kafka.sasl.port")
export KAFKA_TLS_CA_FILE=$KAFKA_CERTS/ca.crt
export KAFKA_TLS_CERT_FILE=$KAFKA_CERTS/ingestd.crt
export KAFKA_TLS_KEY_FILE=$KAFKA_CERTS/ingestd.key
export KAFKA_TLS_OTHER_CERT_FILE=$KAFKA_CERTS/other.crt
export KAFKA_TLS_OTHER_KEY_FILE=$KAFKA_CERTS/other.key
export KAFKA_SASL_USERNAME=ingestd
export KAFKA_SASL_PASSWORD_FILE=$KAFKA_CERTS/ingestd.password
export KAFKA_SASL_ADMIN_PASSWORD_FILE=$KAFKA_CERTS/admin.password
EOF
}

# write_env: .stack/env from what this instance runs (Kafka and the registry, the stores).
write_env() {
  : > "$STACK/env.tmp"
  if [ -f "$STACK/kafka.port" ] && [ -f "$STACK/registry.port" ]; then
    { kafka_env; echo "export SCHEMA_REGISTRY_URL=$(sr_url)"; } >> "$STACK/env.tmp"
  fi
  if [ -f "$STACK/stores.env" ]; then cat "$STACK/stores.env" >> "$STACK/env.tmp"; fi
  cdc_env >> "$STACK/env.tmp"
  mv "$STACK/env.tmp" "$STACK/env"
}

UP_STARTED=""
up_failed() {
  local rc=$? name
  [ "$rc" = 0 ] && return
  for name in $UP_STARTED; do stop_pid "$name" "$STACK/$name.pid"; done
  for name in ${STORES_STARTED:-}; do stop_store "$name"; done
  if [ -n "${PG_STARTED:-}" ]; then postgres_down; fi
  exit "$rc"
}

cmd_up() {
  mkdir -p "$STACK" "$LOGS"
  # Build/install the emulators (first time only) while Kafka and the registry start.
  stores_dist & local dist_pid=$!
  # The Connect jars too (Maven, first time only; about 45 s cold).
  connect_jars & local connect_pid=$!
  kafka_registry_up
  wait "$dist_pid" || die "could not install the object-store emulators (see above)"
  wait "$connect_pid" || die "could not resolve the Kafka Connect jars (see above)"
  # The emulators start in seconds once built (the first build takes a few minutes).
  UP_STARTED=""; STORES_STARTED=""; PG_STARTED=""
  trap up_failed EXIT
  stores_up
  pg_running || PG_STARTED=1
  postgres_up
  trap - EXIT
  write_env
  cat "$STACK/env"
}

kafka_registry_up() {
  mkdir -p "$STACK" "$LOGS"
  local started=0
  # A port asked for explicitly must be the one a running service uses.
  if [ -n "${KAFKA_PORT:-}" ] && alive kafka "$KAFKA_PID" && [ "$(cat "$STACK/kafka.port")" != "$KAFKA_PORT" ]; then
    die "Kafka already runs on port $(cat "$STACK/kafka.port"), not KAFKA_PORT=$KAFKA_PORT (run: $0 down)"
  fi
  if [ -n "${SR_PORT:-}" ] && alive registry "$SR_PID" && [ "$(cat "$STACK/registry.port")" != "$SR_PORT" ]; then
    die "the registry already runs on port $(cat "$STACK/registry.port"), not SR_PORT=$SR_PORT (run: $0 down)"
  fi
  if alive kafka "$KAFKA_PID" && alive registry "$SR_PID" && [ -f "$STACK/env" ] \
     && port_open "$(cat "$STACK/kafka.port")" && sr_probe; then
    log "Kafka and the registry already running"; return 0
  fi
  ensure_tools
  kafka_jars
  sr_dist
  # Ports first, so that a taken port fails before anything starts.
  local kport="" cport="" sslport="" saslport="" sport="" explicit
  if ! alive kafka "$KAFKA_PID"; then
    explicit=0; [ -n "${KAFKA_PORT:-}" ] && explicit=1
    kport="$(pick_port KAFKA_PORT "${KAFKA_PORT:-9092}" "$explicit")"
    explicit=0; [ -n "${KAFKA_CONTROLLER_PORT:-}" ] && explicit=1
    cport="$(pick_port KAFKA_CONTROLLER_PORT "${KAFKA_CONTROLLER_PORT:-9093}" "$explicit" "$kport")"
    explicit=0; [ -n "${KAFKA_SSL_PORT:-}" ] && explicit=1
    sslport="$(pick_port KAFKA_SSL_PORT "${KAFKA_SSL_PORT:-9094}" "$explicit" "$kport" "$cport")"
    explicit=0; [ -n "${KAFKA_SASL_PORT:-}" ] && explicit=1
    saslport="$(pick_port KAFKA_SASL_PORT "${KAFKA_SASL_PORT:-9095}" "$explicit" "$kport" "$cport" "$sslport")"
  fi
  if ! alive registry "$SR_PID"; then
    explicit=0; [ -n "${SR_PORT:-}" ] && explicit=1
    sport="$(pick_port SR_PORT "${SR_PORT:-8081}" "$explicit" $kport $cport $sslport $saslport)"
  fi
  if [ -n "$kport" ] && { [ "$kport" = "$cport" ] || [ "$kport" = "$sport" ] || [ "$cport" = "$sport" ]; }; then
    die "port clash: KAFKA_PORT=$kport KAFKA_CONTROLLER_PORT=$cport SR_PORT=${sport:-running}"
  fi
  # If start-up fails, stop what this call started: no half stack is left behind.
  trap up_failed EXIT
  # The registry is the slower starter and does not need Kafka: launch it first.
  if [ -z "$sport" ]; then
    log "schema registry already running (pid $(cat "$SR_PID"))"
  else
    rm -f "$SR_PID"; UP_STARTED="registry"; sr_start "$sport"; started=1
  fi
  if [ -z "$kport" ]; then
    log "Kafka already running (pid $(cat "$KAFKA_PID"))"
  else
    rm -f "$KAFKA_PID"; UP_STARTED="$UP_STARTED kafka"; kafka_start "$kport" "$cport" "$sslport" "$saslport"; started=1
  fi
  kafka_wait
  sr_wait
  write_env
  trap - EXIT
  if [ "$started" = 1 ]; then log "Kafka and the registry ready"; fi
}

cmd_down() {
  stop_pid registry "$SR_PID"
  stop_pid kafka "$KAFKA_PID"
  stores_down
  postgres_down
  rm -rf "$PG_DIR" "$PG_PORT_FILE" "$KAFKA_DATA" "$KAFKA_DIR" "$KAFKA_CERTS" "$STACK/env" "$STACK/kafka.port" "$STACK/kafka.controller.port" \
    "$STACK/kafka.ssl.port" "$STACK/kafka.sasl.port" "$STACK/registry.port" "$STACK/registry.fresh" "$STACK/stores.env" \
    "$STACK/s3.port" "$STACK/gcs.port" "$STACK/azurite.port" "$STACK/s3-data" "$STACK/s3-meta" "$STACK/gcs-data" "$STACK/azurite-data"
  log "stopped; data removed (downloads kept in $STACK)"
}

cmd_status() {
  local rc=0
  if alive kafka "$KAFKA_PID"; then
    if kafka_probe "$(cat "$STACK/kafka.port")"; then
      echo "kafka:    running, pid $(cat "$KAFKA_PID"), 127.0.0.1:$(cat "$STACK/kafka.port") (answers metadata)"
    else
      echo "kafka:    process alive, pid $(cat "$KAFKA_PID"), but not answering on 127.0.0.1:$(cat "$STACK/kafka.port")"; rc=1
    fi
  else
    echo "kafka:    not running"; rc=1
  fi
  if alive registry "$SR_PID"; then
    if sr_probe; then
      echo "registry: running, pid $(cat "$SR_PID"), $(sr_url) (Apicurio $APICURIO_VERSION)"
    else
      echo "registry: process alive, pid $(cat "$SR_PID"), but not answering at $(sr_url)"; rc=1
    fi
  else
    echo "registry: not running"; rc=1
  fi
  stores_status || rc=1
  postgres_status || rc=1
  [ -f "$STACK/env" ] && { echo "env ($STACK/env):"; sed 's/^/  /' "$STACK/env"; }
  return "$rc"
}

# ---------------------------------------------------------------------------------------
# One service at a time, keeping its data: for chaos tests (a broker restart, a registry
# outage). Use them on a private instance (STACK_DIR) when others share the default one.

write_kafka_env() {
  kafka_env > "$STACK/kafka.env"
}

cmd_start_kafka() { # start Kafka alone (idempotent), on the ports it used before if any
  mkdir -p "$STACK" "$LOGS"
  if alive kafka "$KAFKA_PID" && port_open "$(cat "$STACK/kafka.port")"; then
    log "Kafka already running (pid $(cat "$KAFKA_PID"))"; write_kafka_env; cat "$STACK/kafka.env"; return 0
  fi
  ensure_tools
  kafka_jars
  local kport cport sslport saslport explicit
  if [ -f "$STACK/kafka.port" ] && [ -z "${KAFKA_PORT:-}" ]; then KAFKA_PORT="$(cat "$STACK/kafka.port")"; fi
  if [ -f "$STACK/kafka.controller.port" ] && [ -z "${KAFKA_CONTROLLER_PORT:-}" ]; then
    KAFKA_CONTROLLER_PORT="$(cat "$STACK/kafka.controller.port")"
  fi
  # a restart keeps the secured ports too (clients hold them), so they become explicit
  if [ -f "$STACK/kafka.ssl.port" ] && [ -z "${KAFKA_SSL_PORT:-}" ]; then KAFKA_SSL_PORT="$(cat "$STACK/kafka.ssl.port")"; fi
  if [ -f "$STACK/kafka.sasl.port" ] && [ -z "${KAFKA_SASL_PORT:-}" ]; then KAFKA_SASL_PORT="$(cat "$STACK/kafka.sasl.port")"; fi
  explicit=0; [ -n "${KAFKA_PORT:-}" ] && explicit=1
  kport="$(pick_port KAFKA_PORT "${KAFKA_PORT:-9092}" "$explicit")"
  explicit=0; [ -n "${KAFKA_CONTROLLER_PORT:-}" ] && explicit=1
  cport="$(pick_port KAFKA_CONTROLLER_PORT "${KAFKA_CONTROLLER_PORT:-9093}" "$explicit" "$kport")"
  explicit=0; [ -n "${KAFKA_SSL_PORT:-}" ] && explicit=1
  sslport="$(pick_port KAFKA_SSL_PORT "${KAFKA_SSL_PORT:-9094}" "$explicit" "$kport" "$cport")"
  explicit=0; [ -n "${KAFKA_SASL_PORT:-}" ] && explicit=1
  saslport="$(pick_port KAFKA_SASL_PORT "${KAFKA_SASL_PORT:-9095}" "$explicit" "$kport" "$cport" "$sslport")"
  [ "$kport" != "$cport" ] || die "port clash: KAFKA_PORT=$kport KAFKA_CONTROLLER_PORT=$cport"
  rm -f "$KAFKA_PID"
  UP_STARTED="kafka"; trap up_failed EXIT
  kafka_start "$kport" "$cport" "$sslport" "$saslport"
  kafka_wait
  trap - EXIT
  write_kafka_env
  log "Kafka ready"
  cat "$STACK/kafka.env"
}

cmd_stop_kafka() { stop_pid kafka "$KAFKA_PID"; } # data kept

cmd_restart_kafka() {
  [ -f "$STACK/kafka.port" ] || die "no Kafka was started in $STACK"
  cmd_stop_kafka
  cmd_start_kafka
}

cmd_stop_registry() { stop_pid registry "$SR_PID"; } # in-memory registry: its schemas are lost

cmd_start_registry() {
  mkdir -p "$STACK" "$LOGS"
  if alive registry "$SR_PID" && sr_probe; then log "registry already running"; return 0; fi
  ensure_tools
  sr_dist
  local sport explicit
  if [ -f "$STACK/registry.port" ] && [ -z "${SR_PORT:-}" ]; then SR_PORT="$(cat "$STACK/registry.port")"; fi
  explicit=0; [ -n "${SR_PORT:-}" ] && explicit=1
  sport="$(pick_port SR_PORT "${SR_PORT:-8081}" "$explicit")"
  rm -f "$SR_PID"
  UP_STARTED="registry"; trap up_failed EXIT
  sr_start "$sport"
  sr_wait
  trap - EXIT
  log "registry ready at $(sr_url)"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  start-kafka) cmd_start_kafka ;;
  stop-kafka) cmd_stop_kafka ;;
  restart-kafka) cmd_restart_kafka ;;
  start-registry) cmd_start_registry ;;
  stop-registry) cmd_stop_registry ;;
  start-stores) STORES_STARTED=""; trap up_failed EXIT; stores_up; trap - EXIT; write_env; cat "$STACK/env" ;;
  stop-stores) stores_down ;;
  start-postgres) PG_STARTED=1; trap up_failed EXIT; postgres_up; trap - EXIT; write_env; cdc_env ;;
  stop-postgres) postgres_down ;;
  connect-jars) mkdir -p "$STACK"; connect_jars; cdc_env ;;
  *) echo "usage: $0 up|down|status|start-kafka|stop-kafka|restart-kafka|start-registry|stop-registry|start-stores|stop-stores|start-postgres|stop-postgres|connect-jars" >&2; exit 2 ;;
esac
