#!/usr/bin/env bash
# Resolves the Delta Lake jars and S3A (hadoop-aws + the AWS SDK bundle) for Spark
# (scripts/spark/pom.xml) from Maven Central into .stack/spark-jars-<hash> with Maven, once:
# the directory is keyed on the POM's hash, so later runs are a no-op and checkouts with
# different POMs sharing one .stack never replace each other's jars; Maven's local
# repository (~/.m2) caches the downloads across checkouts.
# The Spark interop tests pass these jars to Spark with spark.jars, so Spark never
# downloads anything at start-up. Prints the jar directory on stdout's last line.
#   SPARK_JARS_DIR=/some/dir scripts/spark-jars.sh   # choose the directory
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/spark/pom.xml"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

log() { echo "spark-jars.sh: $*" >&2; }

command -v mvn >/dev/null 2>&1 || { log "mvn is not on PATH (install Maven)"; exit 1; }
# Only Delta's own jars and S3A's: Spark (from the pyspark wheel) already ships newer
# Jackson, Hadoop, Parquet, Scala, RoaringBitmap…, and a second copy on the classpath would
# clash: from org.apache.hadoop only hadoop-aws is taken (hadoop-common is provided in its
# POM; unitycatalog-hadoop pulls hadoop-client-api/-runtime 3.4.2, left out).
DELTA_GROUPS="io.delta,io.unitycatalog,org.apache.hadoop,software.amazon.awssdk,software.amazon.s3.analyticsaccelerator"
EXCLUDE="hadoop-client-api,hadoop-client-runtime,hadoop-common"
want="$( { cat "$POM"; echo "$DELTA_GROUPS $EXCLUDE"; } | sha256sum | cut -d' ' -f1)"
OUT="${SPARK_JARS_DIR:-$ROOT/.stack/spark-jars-${want:0:12}}"
if [ -f "$OUT/.pom.sha256" ] && [ "$(cat "$OUT/.pom.sha256")" = "$want" ]; then
  log "up to date"
  echo "$OUT"
  exit 0
fi
log "resolving the Delta and S3A jars with Maven (first time only)"
mkdir -p "$(dirname "$OUT")"
rm -rf "$OUT.tmp"
if ! mvn -q -B -f "$POM" "$DEP_PLUGIN:copy-dependencies" \
      -DoutputDirectory="$OUT.tmp" -DincludeScope=runtime -DincludeGroupIds="$DELTA_GROUPS" -DexcludeArtifactIds="$EXCLUDE" > "$OUT.log" 2>&1; then
  tail -n 30 "$OUT.log" >&2
  log "Maven could not resolve the Delta and S3A jars"; exit 1
fi
ls "$OUT.tmp"/delta-spark_*.jar >/dev/null 2>&1 || { log "no delta-spark jar was resolved"; exit 1; }
ls "$OUT.tmp"/hadoop-aws-*.jar >/dev/null 2>&1 || { log "no hadoop-aws jar was resolved"; exit 1; }
for j in "$OUT.tmp"/hadoop-common-*.jar "$OUT.tmp"/hadoop-client-*.jar; do
  [ -e "$j" ] && { log "a second copy of Hadoop was resolved ($(basename "$j"); Spark ships its own)"; exit 1; }
done
echo "$want" > "$OUT.tmp/.pom.sha256"
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
log "ready: $OUT"
echo "$OUT"
