#!/usr/bin/env bash
# kafka-tool.sh CLASS ARGS...: run one of Kafka's command-line tools from the jars that
# scripts/stack.sh resolved (.stack/kafka-jars), for a machine without a Kafka
# distribution. kafka-topics.sh, kafka-acls.sh and kafka-console-consumer.sh beside this
# file call it with their tool's class; their arguments are Kafka's own
# (--bootstrap-server, --command-config for TLS/SASL client properties, …).
#
# KAFKA_JARS overrides the jar directory (e.g. a Kafka distribution's libs/); java 17+
# must be on PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JARS="${KAFKA_JARS:-$ROOT/.stack/kafka-jars}"
if ! ls "$JARS"/kafka-tools-*.jar >/dev/null 2>&1; then
  echo "$(basename "$0"): no Kafka tools jar in $JARS: run scripts/stack.sh once (it resolves the jars), or set KAFKA_JARS to a Kafka distribution's libs/ directory" >&2
  exit 2
fi
LOG4J="$ROOT/.stack/kafka/log4j2-tools.properties"
opts=(-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC)
if [ -f "$LOG4J" ]; then opts+=("-Dlog4j2.configurationFile=$LOG4J"); fi
exec java "${opts[@]}" -cp "$JARS/*" "$@"
