"""Read a Delta table with delta-rs (a reader ingestd did not write) and print JSON:
{"version": N, "schema": [[name, type, nullable], ...], "rows": [...], "files": N,
 "history": [operation, ...]}, or {"version": N, "unsupported": why} for a table this
delta-rs release cannot read (a reader feature it lacks). Decimals are printed as strings, timestamps as µs since the
epoch (UTC), binary as hex.

usage: read_table.py TABLE_PATH
"""
import datetime
import decimal
import json
import os
import sys

from deltalake import DeltaTable
from deltalake.exceptions import DeltaProtocolError


def conv_typed(v, t):
    """Like conv, guided by the Arrow type: maps become objects (as Spark renders them)."""
    import pyarrow as pa
    if v is None:
        return None
    if pa.types.is_map(t):
        return {str(k): conv_typed(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {t.field(i).name: conv_typed(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [conv_typed(x, t.value_type) for x in v]
    return conv(v)


def conv(v):
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return (v - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: conv(x) for k, x in v.items()}
    if isinstance(v, list):
        return [conv(x) for x in v]
    return v


def main():
    dt = DeltaTable(sys.argv[1])
    try:
        t = dt.to_pyarrow_table()
    except DeltaProtocolError as e:
        # e.g. the typeWidening reader feature, which this delta-rs release cannot read:
        # say so (the caller checks such tables with Spark) instead of failing.
        print(json.dumps({"version": dt.version(), "unsupported": str(e)}))
        return
    schema = [[f.name, str(f.type), f.nullable] for f in t.schema]
    types = {f.name: f.type for f in t.schema}
    rows = [{k: conv_typed(v, types[k]) for k, v in r.items()} for r in t.to_pylist()]
    hist = [h.get("operation") for h in dt.history()]
    print(json.dumps({"version": dt.version(), "schema": schema, "rows": rows,
                      "files": len(dt.file_uris()), "history": hist}))


if __name__ == "__main__":
    main()
    # Leave without running interpreter teardown: delta-rs' runtime threads can abort the
    # process ("terminate called without an active exception") while it shuts down.
    sys.stdout.flush()
    os._exit(0)
