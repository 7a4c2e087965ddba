#!/usr/bin/env bash
# Resolves the Delta Lake jars for Spark (scripts/spark/pom.xml) from Maven Central into
# .stack/spark-jars with Maven, once: a stamp keyed on the POM's hash makes later runs a
# no-op, and Maven's local repository (~/.m2) caches the downloads across checkouts.
# The Spark interop tests pass these jars to Spark with spark.jars, so Spark never
# downloads anything at start-up. Prints the jar directory on stdout's last line.
#   SPARK_JARS_DIR=/some/dir scripts/spark-jars.sh   # choose the directory
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/spark/pom.xml"
OUT="${SPARK_JARS_DIR:-$ROOT/.stack/spark-jars}"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

log() { echo "spark-jars.sh: $*" >&2; }

command -v mvn >/dev/null 2>&1 || { log "mvn is not on PATH (install Maven)"; exit 1; }
# Only Delta's own jars: Spark (from the pyspark wheel) already ships newer Jackson, Hadoop,
# Parquet, Scala, RoaringBitmap…, and a second copy on the classpath would clash.
DELTA_GROUPS="io.delta,io.unitycatalog"
want="$( { cat "$POM"; echo "$DELTA_GROUPS"; } | sha256sum | cut -d' ' -f1)"
if [ -f "$OUT/.pom.sha256" ] && [ "$(cat "$OUT/.pom.sha256")" = "$want" ]; then
  log "up to date"
  echo "$OUT"
  exit 0
fi
log "resolving the Delta jars with Maven (first time only)"
mkdir -p "$(dirname "$OUT")"
rm -rf "$OUT.tmp"
if ! mvn -q -B -f "$POM" "$DEP_PLUGIN:copy-dependencies" \
      -DoutputDirectory="$OUT.tmp" -DincludeScope=runtime -DincludeGroupIds="$DELTA_GROUPS" > "$OUT.log" 2>&1; then
  tail -n 30 "$OUT.log" >&2
  log "Maven could not resolve the Delta jars"; exit 1
fi
ls "$OUT.tmp"/delta-spark_*.jar >/dev/null 2>&1 || { log "no delta-spark jar was resolved"; exit 1; }
echo "$want" > "$OUT.tmp/.pom.sha256"
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
log "ready: $OUT"
echo "$OUT"
