"""Print each benchmark table's commits: how many, the rows of the last one, and the gap
before it (seconds between the mtimes of the last two _delta_log/N.json that added rows).

A last commit that holds a partial batch waits for the batch's age bound (ingestd
batch.max_age, kafka-delta-ingest --allowed_latency): that gap is inside the harness's wall
time. Usage: python3 scripts/bench/commit_gaps.py $BENCH_OUT/tables/*
"""
import glob
import json
import os
import sys


def commits(table):
    out = []
    for path in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        rows = 0
        with open(path) as f:
            for line in f:
                action = json.loads(line)
                stats = action.get("add", {}).get("stats")
                if stats:
                    rows += json.loads(stats)["numRecords"]
        if rows:
            out.append((os.path.getmtime(path), rows))
    return sorted(out)


for table in sys.argv[1:]:
    c = commits(table)
    if len(c) < 2:
        print(f"{os.path.basename(table)}: {len(c)} commit(s)")
        continue
    print(f"{os.path.basename(table)}: commits={len(c)} rows={sum(r for _, r in c)} "
          f"last commit rows={c[-1][1]} gap before it={c[-1][0] - c[-2][0]:.2f} s")
