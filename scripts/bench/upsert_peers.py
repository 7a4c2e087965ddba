#!/usr/bin/env python3
"""The peers of the upsert benchmark (scripts/bench-upsert.sh): the same batches of changes
that ingestd applied, applied to a copy of the same table by delta-rs `merge` or by Spark
`MERGE INTO` (delta-spark, deletion vectors enabled), one merge per batch, foreachBatch-style.

DIR/changes is an append table whose commit i holds batch i in record order (written by
BenchmarkUpsertTable's create phase); DIR/plan.json names the variants, their batch counts and
the live rows the model expects after each. A batch is first reduced to the last change per
`id` (both peers refuse or duplicate rows on a source with two rows for one key), then merged:

    MERGE INTO t USING s ON t.id = s.id
    WHEN MATCHED AND s.kind = 'BUY' THEN DELETE
    WHEN MATCHED THEN UPDATE SET *
    WHEN NOT MATCHED AND s.kind != 'BUY' THEN INSERT *

CPU seconds are the engine process's utime + stime over the reduction and the merge, every
thread (delta-rs: this process; Spark: its JVM, from /proc); reading the batch's Parquet file
is outside for delta-rs (inside for Spark, whose read is lazy). Spark first merges the first
batch into a scratch table, unmeasured, to warm its JIT up. Peak RSS is the engine
process's VmHWM at the end. The live rows after each variant are checked against the plan.

Usage: upsert_peers.py deltars|spark TABLE CHANGES PLAN OUT.jsonl [SPARK_JAR_DIR]
"""
import glob
import json
import os
import resource
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MERGE_SQL = """MERGE INTO delta.`{table}` t USING batch s ON t.id = s.id
WHEN MATCHED AND s.kind = 'BUY' THEN DELETE
WHEN MATCHED THEN UPDATE SET *
WHEN NOT MATCHED AND s.kind != 'BUY' THEN INSERT *"""


def batches(changes):
    """The Parquet file of each commit of the changes table, in version order."""
    out = []
    for path in sorted(glob.glob(os.path.join(changes, "_delta_log", "*.json"))):
        with open(path) as f:
            adds = [a["add"]["path"] for a in map(json.loads, f) if "add" in a]
        if len(adds) != 1:
            sys.exit(f"{path}: {len(adds)} data files, want one per batch")
        out.append(os.path.join(changes, adds[0]))
    return out


def last_per_key(t):
    """t reduced to its last row per id, in record order."""
    t = t.append_column("_pos", pa.array(range(len(t)), pa.int64()))
    last = t.group_by("id").aggregate([("_pos", "max")])["_pos_max"].combine_chunks()
    return t.take(pc.take(last, pc.array_sort_indices(last))).drop_columns(["_pos"])


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick  # utime, stime


def proc_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


class DeltaRS:
    name = "delta-rs merge"

    def __init__(self, table):
        import deltalake
        self.table, self.version = table, deltalake.__version__
        self.pid = os.getpid()

    def apply(self, path):
        from deltalake import DeltaTable
        t = pq.read_table(path)
        c0 = proc_cpu(self.pid)
        s = last_per_key(t)
        dt = DeltaTable(self.table)
        (dt.merge(source=s, predicate="t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_delete(predicate="s.kind = 'BUY'")
         .when_matched_update_all()
         .when_not_matched_insert_all(predicate="s.kind != 'BUY'")
         .execute())
        return proc_cpu(self.pid) - c0

    def live(self):
        from deltalake import DeltaTable, QueryBuilder
        return QueryBuilder().register("t", DeltaTable(self.table)).execute("SELECT count(*) AS n FROM t").read_all()["n"][0].as_py()

    def hwm(self):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Spark:
    name = "Spark MERGE"

    def __init__(self, table, jars):
        os.environ["TZ"] = "UTC"
        time.tzset()
        from pyspark.sql import SparkSession
        self.spark = (SparkSession.builder.master("local[2]")
                      .config("spark.jars", ",".join(sorted(glob.glob(os.path.join(jars, "*.jar")))))
                      .config("spark.driver.memory", "2g")
                      .config("spark.ui.enabled", "false")
                      .config("spark.ui.showConsoleProgress", "false")
                      .config("spark.sql.shuffle.partitions", "2")
                      .config("spark.sql.session.timeZone", "UTC")
                      .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                      .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
                      .config("spark.databricks.delta.snapshotPartitions", "2")
                      .getOrCreate())
        self.spark.sparkContext.setLogLevel("ERROR")
        self.table = table
        self.version = self.spark.version
        self.pid = self.spark._jvm.java.lang.ProcessHandle.current().pid()
        # Merge-on-read like ingestd: MERGE marks replaced rows in deletion vectors.
        self.spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")

    def warm_up(self, path):
        """One unmeasured MERGE of the first batch into a small scratch table: the JVM's
        JIT and Spark's code generation warm up once in a long-running foreachBatch job,
        not per batch."""
        import tempfile
        scratch = tempfile.mkdtemp(prefix="upsert-warmup-")
        self.spark.read.parquet(path).limit(10_000).write.format("delta").mode("overwrite").save(scratch)
        saved, self.table = self.table, scratch
        try:
            self.spark.sql(f"ALTER TABLE delta.`{scratch}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
            self.apply(path)
        finally:
            self.table = saved

    def apply(self, path):
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        c0 = proc_cpu(self.pid)
        # The batch as foreachBatch hands it over, reduced to the last change per key (one
        # file, one split: monotonically_increasing_id follows the record order).
        df = self.spark.read.parquet(path).withColumn("_pos", F.monotonically_increasing_id())
        w = Window.partitionBy("id").orderBy(F.col("_pos").desc())
        df = df.withColumn("_rn", F.row_number().over(w)).where("_rn = 1").drop("_rn", "_pos")
        df.createOrReplaceTempView("batch")
        self.spark.sql(MERGE_SQL.format(table=self.table))
        return proc_cpu(self.pid) - c0

    def live(self):
        return self.spark.sql(f"SELECT count(*) AS n FROM delta.`{self.table}`").collect()[0]["n"]

    def hwm(self):
        return proc_hwm(self.pid)


def main():
    engine, table, changes, plan_path, out = sys.argv[1:6]
    with open(plan_path) as f:
        plan = json.load(f)
    files = batches(changes)
    want = sum(v["batches"] for v in plan["variants"])
    if len(files) != want:
        sys.exit(f"{changes} holds {len(files)} batches, the plan {want}")
    e = DeltaRS(table) if engine == "deltars" else Spark(table, sys.argv[6])
    if hasattr(e, "warm_up"):
        e.warm_up(files[0])
    i = 0
    with open(out, "a") as res:
        for v in plan["variants"]:
            cpu, w0 = 0.0, time.monotonic()
            for _ in range(v["batches"]):
                cpu += e.apply(files[i])
                i += 1
            wall = time.monotonic() - w0
            live = e.live()
            if live != v["live_after"]:
                sys.exit(f"{e.name} {v['name']}: the table holds {live} live rows, the model {v['live_after']}")
            n = plan["batch"] * v["batches"]
            res.write(json.dumps({"what": "peer", "engine": e.name, "engine_version": e.version, "variant": v["name"],
                                  "rows": plan["rows"], "changes": n, "cpu_s": cpu, "wall_s": wall,
                                  "changes_per_cpu_s": n / cpu, "live_after": live, "load": load()}) + "\n")
            res.flush()
            print(f"{e.name}: {v['name']}: {n / cpu:,.0f} changes per CPU-second ({cpu:.1f} CPU-s, {wall:.1f} s)", file=sys.stderr)
        res.write(json.dumps({"what": "peer_memory", "engine": e.name, "rows": plan["rows"], "peak_rss_bytes": e.hwm()}) + "\n")
    # delta-rs' runtime threads can abort the process at interpreter teardown
    # (delta-io/delta-rs#2184): leave once the work is done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
