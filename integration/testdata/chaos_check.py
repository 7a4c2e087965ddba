"""Read the chaos test's table with delta-rs and count ids: prints JSON with rows,
distinct ids, ids present more than once, ids 1..N missing, ids outside 1..N, rows with a
channel, data files (and distinct ones), the version and the columns.

usage: chaos_check.py TABLE_PATH N
  TABLE_PATH may be an object-store URI (s3://…): delta-rs then takes its storage_options
  from READ_TABLE_STORAGE_OPTIONS (a JSON object, as for read_table.py).
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    raw = os.environ.get("READ_TABLE_STORAGE_OPTIONS", "")
    dt = DeltaTable(path, storage_options=json.loads(raw) if raw else None)
    # QueryBuilder (delta-rs' query engine) applies column mapping and deletion vectors;
    # to_pyarrow_table() does not (docs/readers.md).
    t = pa.table(QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
    ids = t.column("id")
    counts = pc.value_counts(ids)
    values = counts.field("values").to_pylist()
    times = counts.field("counts").to_pylist()
    present = set(values)
    dups = sorted(v for v, c in zip(values, times) if c > 1)
    missing = [i for i in range(1, n + 1) if i not in present]
    out_of_range = sum(1 for v in values if v is None or v < 1 or v > n)
    channel = 0
    if "channel" in t.column_names:
        channel = len(t) - t.column("channel").null_count
    files = dt.file_uris()
    print(json.dumps({
        "version": dt.version(),
        "columns": t.column_names,
        "rows": len(t),
        "distinct": len(present),
        "duplicated": len(dups),
        "missing": len(missing),
        "out_of_range": out_of_range,
        "channel_non_null": channel,
        "files": len(files),
        "distinct_files": len(set(files)),
        "first_duplicates": dups[:10],
        "first_missing": missing[:10],
    }))


if __name__ == "__main__":
    main()
    # Leave without running interpreter teardown: delta-rs' runtime threads can abort
    # the process ("terminate called without an active exception",
    # delta-io/delta-rs#2184) while it shuts down, after the work is done.
    sys.stdout.flush()
    os._exit(0)
