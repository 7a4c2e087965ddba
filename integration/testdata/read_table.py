#!/usr/bin/env python3
"""Read a Delta table with delta-rs (the `deltalake` package, a reader ingestd did not
write) and print it as one JSON document on stdout.

usage: read_table.py TABLE_PATH [--txn APP_ID ...] [--version N]
       read_table.py --parquet DIR

TABLE_PATH output:
  {"version": N,
   "protocol": {"minReaderVersion", "minWriterVersion", "readerFeatures", "writerFeatures"},
   "schema": [[name, arrow type, nullable], ...]   the table schema as delta-rs maps it to Arrow,
   "rows": [{column: value}, ...]                  every live row, sorted by its JSON form,
   "files": N                                      live data files,
   "history": [operation, ...]                     newest first, as delta-rs lists it,
   "txns": {APP_ID: version or null}}              only with --txn (delta-rs' transaction_version)
  or {"version": N, "unsupported": why} for a table this delta-rs release cannot read (a
  reader feature it lacks, e.g. typeWidening): the caller checks such tables with Spark.

--version N reads the table as of version N (delta-rs time travel, DeltaTable(version=N)).

TABLE_PATH may be an object-store URI (s3://, gs://, az://, abfss://); delta-rs then takes
its storage_options from the environment variable READ_TABLE_STORAGE_OPTIONS, a JSON object
of strings (e.g. {"AWS_ENDPOINT_URL": "http://127.0.0.1:7070", "AWS_ALLOW_HTTP": "true", ...}),
kept out of the command line because it may hold credentials.

--parquet DIR prints {"rows": [...]} for the plain Parquet files of DIR (e.g. the expected/
folder of a delta-kernel-rs golden table), rendered the same way.

Rows are read through delta-rs' query engine (DataFusion), which applies column mapping
(logical names from physical names or field ids), deletion vectors and V2 checkpoints;
to_pyarrow_table() would refuse those tables or read NULL for every column-mapped column.
The result is cast to the table schema, so types are reported as the Delta schema maps
them (string, not string_view). Values: timestamps (with or without zone) as integer µs
since the Unix epoch (UTC), decimals as exact strings, binary as hex, dates ISO, maps as
{str(key): value} objects (as Spark renders them), structs as objects, lists as arrays.
"""
import datetime
import decimal
import glob
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaError, DeltaProtocolError

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def plain(v, t):
    """Render value v of Arrow type t as plain JSON."""
    if v is None:
        return None
    if pa.types.is_map(t):
        return {str(k): plain(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {t.field(i).name: plain(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [plain(x, t.value_type) for x in v]
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:  # timestamp_ntz
            v = v.replace(tzinfo=datetime.timezone.utc)
        return (v - EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, float) and v != v:  # NaN is not JSON: the string "NaN"
        return "NaN"
    return v


def render(table):
    rows = [{f.name: plain(r[f.name], f.type) for f in table.schema} for r in table.to_pylist()]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return rows


def unsupported(e):
    """True when e says delta-rs lacks a reader feature the table needs."""
    return isinstance(e, DeltaProtocolError) or (isinstance(e, DeltaError) and "Unsupported table features" in str(e))


def storage_options():
    raw = os.environ.get("READ_TABLE_STORAGE_OPTIONS", "")
    return json.loads(raw) if raw else None


def read_table(path, txns, version=None):
    dt = DeltaTable(path, version=version, storage_options=storage_options())
    try:
        schema = pa.schema(dt.schema().to_arrow())
        got = pa.table(QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
    except (DeltaError, DeltaProtocolError) as e:
        if not unsupported(e):
            raise
        return {"version": dt.version(), "unsupported": str(e)}
    table = got.select(schema.names).cast(schema)
    p = dt.protocol()
    out = {
        "version": dt.version(),
        "protocol": {
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "readerFeatures": p.reader_features,
            "writerFeatures": p.writer_features,
        },
        "schema": [[f.name, str(f.type), f.nullable] for f in table.schema],
        "rows": render(table),
        "files": len(dt.file_uris()),
        "history": [h.get("operation") for h in dt.history()],
    }
    if txns:
        out["txns"] = {app: dt.transaction_version(app) for app in txns}
    return out


def read_parquet(folder):
    files = sorted(glob.glob(os.path.join(folder, "*.parquet")))
    if not files:
        sys.exit("no Parquet files in " + folder)
    tables = [pq.read_table(f) for f in files]
    table = pa.concat_tables(tables, promote_options="default")
    return {"rows": render(table)}


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--parquet":
        out = read_parquet(args[1])
    elif args and not args[0].startswith("--") and len(args) % 2 == 1 and all(a in ("--txn", "--version") for a in args[1::2]):
        flags = list(zip(args[1::2], args[2::2]))
        versions = [int(v) for f, v in flags if f == "--version"]
        if len(versions) > 1:
            sys.exit(__doc__)
        out = read_table(args[0], [v for f, v in flags if f == "--txn"], versions[0] if versions else None)
    else:
        sys.exit(__doc__)
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
    # Leave without running interpreter teardown: delta-rs' runtime threads can abort the
    # process ("terminate called without an active exception") while it shuts down.
    sys.stdout.flush()
    os._exit(0)
