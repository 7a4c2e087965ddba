#!/usr/bin/env python3
"""Row count of a Delta table read with delta-rs, for scripts/bench-e2e.sh.

Usage: table_stats.py TABLE_DIR [--latency [--latency-window SECONDS]]
Prints one JSON object: rows (delta-rs row count of the latest snapshot) and unique_ids
(distinct values of the `id` column). With --latency also latency_p50_s / latency_p99_s:
for every row, the time its commit became visible (the mtime of the _delta_log/N.json that
added its file, PROTOCOL.md "Delta Log Entries") minus the record's `ts` (micros since the
epoch, stamped when the producer made it). With --latency-window, only the rows stamped
less than SECONDS after the first row count (latency_rows says how many): the steady
stream, not the records the producer made last, whose batch the stream's end leaves
waiting for max_age.
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable


def main():
    table = sys.argv[1]
    dt = DeltaTable(table)
    if "deletionVectors" in (dt.protocol().reader_features or []):
        # An upsert table (MODE=upsert): to_pyarrow_dataset refuses deletion vectors; the
        # kernel's query path applies them.
        from deltalake import QueryBuilder
        r = QueryBuilder().register("t", dt).execute("SELECT count(*) AS n, count(DISTINCT id) AS u FROM t").read_all()
        out = {"rows": r["n"][0].as_py(), "unique_ids": r["u"][0].as_py()}
    else:
        ids = dt.to_pyarrow_dataset().to_table(columns=["id"]).column("id")
        out = {"rows": len(ids), "unique_ids": pc.count_distinct(ids).as_py()}
    args = sys.argv[2:]
    if "--latency" in args:
        window = None
        if "--latency-window" in args:
            window = float(args[args.index("--latency-window") + 1])
        out.update(latency(table, window))
    print(json.dumps(out))


def latency(table, window):
    log = os.path.join(table, "_delta_log")
    rows = []  # (ts µs, visible µs)
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        visible_us = os.stat(os.path.join(log, name)).st_mtime_ns // 1000
        with open(os.path.join(log, name)) as f:
            for line in f:
                add = json.loads(line).get("add")
                if add is None:
                    continue
                path = os.path.join(table, add["path"])
                ts = pq.read_table(path, columns=["ts"]).column("ts").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
                rows.extend((t, visible_us) for t in ts.to_pylist())
    if not rows:
        return {}
    if window is not None:
        first = min(t for t, _ in rows)
        rows = [r for r in rows if r[0] < first + window * 1e6]
    lat = sorted((v - t) / 1e6 for t, v in rows)
    return {"latency_p50_s": lat[len(lat) // 2], "latency_p99_s": lat[min(len(lat) - 1, len(lat) * 99 // 100)],
            "latency_rows": len(lat)}


if __name__ == "__main__":
    main()
    # Leave without running interpreter teardown: delta-rs' runtime threads can abort the
    # process ("terminate called without an active exception", delta-io/delta-rs#2184) while it
    # shuts down, after the work is done.
    sys.stdout.flush()
    os._exit(0)
