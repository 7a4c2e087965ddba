#!/usr/bin/env python3
"""Read a Delta table with delta-rs (the `deltalake` package) and print it as JSON.

Usage: readcheck.py TABLE_URI_OR_PATH

Output (one JSON document on stdout):
  version   table version
  protocol  {minReaderVersion, minWriterVersion, readerFeatures, writerFeatures}
  schema    the Arrow schema as delta-rs resolves it: [{name, type, nullable}]
  files     number of live files
  rows      all rows, sorted by their JSON form; timestamps as integer microseconds
            since the Unix epoch (UTC), decimals as exact strings, binary as hex
  history   [{version, operation, engineInfo, isBlindAppend}] oldest first

Exit status is non-zero if delta-rs cannot read the table. Used by the integration
suite and by hand; the Go unit tests do not depend on it.
"""
import datetime
import decimal
import json
import sys

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def plain(v, t):
    """Render value v of Arrow type t as plain JSON."""
    if v is None:
        return None
    if pa.types.is_map(t):
        return {str(k): plain(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {f.name: plain(v.get(f.name), f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [plain(x, t.value_type) for x in v]
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:  # timestamp_ntz
            v = v.replace(tzinfo=datetime.timezone.utc)
        d = v - EPOCH
        return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return v


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    dt = DeltaTable(sys.argv[1])
    p = dt.protocol()
    # QueryBuilder (DataFusion) applies column mapping; to_pyarrow_dataset() reads the
    # physical Parquet names and returns NULLs for column-mapped tables.
    table = pa.table(QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
    rows = [{f.name: plain(r[f.name], f.type) for f in table.schema} for r in table.to_pylist()]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    history = sorted(dt.history(), key=lambda h: h.get("version", 0))
    out = {
        "version": dt.version(),
        "protocol": {
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "readerFeatures": p.reader_features,
            "writerFeatures": p.writer_features,
        },
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in table.schema],
        "files": len(dt.file_uris()),
        "rows": rows,
        "history": [
            {k: h.get(k) for k in ("version", "operation", "engineInfo", "isBlindAppend")}
            for h in history
        ],
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
