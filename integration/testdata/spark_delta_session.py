#!/usr/bin/env python3
"""A long-lived Spark + Delta session for the interop tests (integration/delta_spark_test.go).

Starting Spark costs tens of seconds on two cores, so the Go test starts this helper once
and sends it every check as one JSON command per line on stdin; each command gets one JSON
reply per line on stdout ({"ok": ...} or {"error": "..."}). Spark's own logs go to stderr,
and so does everything else that writes to descriptor 1: before Spark starts, the helper
keeps stdout for its replies on a private descriptor and points descriptor 1 at stderr, so
the JVM (which inherits it) cannot break the protocol with a line of its own, e.g. HotSpot's
"[112.806s][warning][codecache] CodeCache is full." that ended one CI run.

Usage: spark_delta_session.py JAR_DIR
  JAR_DIR holds the Delta jars resolved from Maven Central by scripts/spark-jars.sh; Spark
  is started with them in spark.jars and never downloads anything.

Every command may carry "session": ID (the Go tests send their test's id): the command
then runs in that session's own SparkSession (spark.newSession(): its own SQL conf, e.g.
spark.sql.session.timeZone, and temp views) with that session's Hadoop options applied to
the shared SparkContext's Hadoop configuration for the duration of the command, so one
test's settings never reach another's commands. Commands are handled one at a time.

Commands:
  {"op": "read", "path": P}   → {"ok": {"schema": [{name, type, nullable}], "rows": [...]}}
      rows sorted by their JSON form; values rendered like read_table.py (delta-rs)
      (timestamps as µs since the epoch, decimals as exact strings, binary as hex, dates ISO)
  {"op": "sql", "query": Q}   → {"ok": [row as dict, ...]} (values rendered the same way)
  {"op": "hadoop", "conf": {K: V}} → {"ok": null}: sets Hadoop options (e.g. fs.s3a.* for
      reading s3a:// paths through S3A, hadoop-aws among JAR_DIR's jars) for the session's
      later commands; sent on stdin, so credentials never appear on a command line
  {"op": "drop"}  → {"ok": null}: forgets the session (its SparkSession and Hadoop options)
  {"op": "stats"} → {"ok": {"cpu_ms", "gc_ms", "gcs", "heap_used", "heap_max"}}: the JVM's
      CPU time (user + system), its time in garbage collection and its heap (bytes), for
      the Go tests' usage line
  {"op": "quit"}
"""
import datetime
import decimal
import glob
import json
import os
import sys
import traceback

os.environ["TZ"] = "UTC"  # pyspark turns TIMESTAMP values into naive local datetimes
import time

time.tzset()

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

EPOCH = datetime.datetime(1970, 1, 1)


def plain(v):
    if v is None:
        return None
    if isinstance(v, T.Row):
        return {k: plain(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, datetime.datetime):
        v = v.replace(tzinfo=None) if v.tzinfo is None else v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        d = v - EPOCH
        return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return v


def reply_channel():
    """Returns a line-buffered text stream on a private copy of stdout and points descriptor
    1 (and sys.stdout) at stderr, so only reply() writes to the Go test's pipe."""
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


REPLIES = None


def reply(obj, **kw):
    REPLIES.write(json.dumps(obj, **kw) + "\n")
    REPLIES.flush()


def main():
    global REPLIES
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    REPLIES = reply_channel()
    jars = sorted(glob.glob(os.path.join(sys.argv[1], "*.jar")))
    if not any("delta-spark" in j for j in jars):
        reply({"error": "no delta-spark jar in " + sys.argv[1]})
        sys.exit(1)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("ingestd-interop")
        .config("spark.jars", ",".join(jars))
        # A whole test run sends one helper hundreds of commands on hundreds of tables; with
        # 768 MB the old generation filled within minutes and the JVM spent most of its time
        # in back-to-back full collections (commands of a second on a fresh JVM took 25 s).
        # 2 GB, a bounded cache of DeltaLogs (each holds its snapshot's cached state) and a
        # short history of jobs and SQL executions keep the heap from filling.
        .config("spark.driver.memory", "2g")
        .config("spark.databricks.delta.delta.log.cacheSize", "16")
        .config("spark.ui.retainedJobs", "20")
        .config("spark.ui.retainedStages", "20")
        .config("spark.ui.retainedTasks", "1000")
        .config("spark.sql.ui.retainedExecutions", "20")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        # C1 only, for a fast boot; its code cache defaults to 48 MB, which a whole test run of
        # Spark's generated code filled (HotSpot then stops compiling), so it gets 256 MB.
        # -Xlog:gc+init:stdout prints a dozen lines on the JVM's stdout at start on purpose:
        # every run proves that the replies survive whatever the JVM writes there.
        .config(
            "spark.driver.extraJavaOptions",
            "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m -Xlog:gc+init=info:stdout",
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    sessions = {}  # id → SparkSession
    hadoop = {}  # id → {key: value}
    reply({"ok": {"spark": spark.version}})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        saved = {}  # Hadoop options replaced for this command: key → previous value or None
        try:
            cmd = json.loads(line)
            op = cmd["op"]
            sid = cmd.get("session")
            if op == "quit":
                reply({"ok": None})
                break
            if op == "drop":
                sessions.pop(sid, None)
                hadoop.pop(sid, None)
                reply({"ok": None})
                continue
            if op == "stats":
                mf = spark._jvm.java.lang.management.ManagementFactory
                beans = list(mf.getGarbageCollectorMXBeans())
                heap = mf.getMemoryMXBean().getHeapMemoryUsage()
                with open(f"/proc/{mf.getRuntimeMXBean().getPid()}/stat") as f:
                    ticks = f.read().rsplit(")", 1)[1].split()  # fields from the state on
                cpu_ms = (int(ticks[11]) + int(ticks[12])) * 1000 // os.sysconf("SC_CLK_TCK")
                reply({"ok": {
                    "cpu_ms": cpu_ms,
                    "gc_ms": sum(b.getCollectionTime() for b in beans),
                    "gcs": sum(b.getCollectionCount() for b in beans),
                    "heap_used": heap.getUsed(),
                    "heap_max": heap.getMax(),
                }})
                continue
            if op == "hadoop":
                hadoop.setdefault(sid, {}).update(cmd["conf"])
                reply({"ok": None})
                continue
            session = spark
            if sid is not None:
                if sid not in sessions:
                    sessions[sid] = spark.newSession()
                session = sessions[sid]
            for k, v in hadoop.get(sid, {}).items():
                saved[k] = hconf.get(k)
                hconf.set(k, v)
            if op == "read":
                df = session.read.format("delta").load(cmd["path"])
                rows = [plain(r) for r in df.collect()]
                rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
                schema = [{"name": f.name, "type": f.dataType.simpleString(), "nullable": f.nullable} for f in df.schema.fields]
                out = {"schema": schema, "rows": rows}
            elif op == "sql":
                out = [plain(r) for r in session.sql(cmd["query"]).collect()]
            else:
                raise ValueError("unknown op " + op)
            reply({"ok": out}, ensure_ascii=False)
        except Exception as e:  # noqa: BLE001 - reported to the Go test
            reply({"error": f"{type(e).__name__}: {e}"[:4000], "trace": traceback.format_exc()[-2000:]})
        finally:
            for k, v in saved.items():
                if v is None:
                    hconf.unset(k)
                else:
                    hconf.set(k, v)
    spark.stop()


if __name__ == "__main__":
    main()
