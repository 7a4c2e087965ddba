#!/usr/bin/env python3
"""Regenerates golden_expect.json: what delta-rs (the `deltalake` package, an independent
Delta implementation) says about every table of testdata/delta-kernel-rs/ (the repository's), for
the conformance test in conformance_test.go.

Usage: .venv/bin/python deltawriter/testdata/golden_expect.py [TESTDATA_DIR] > deltawriter/testdata/golden_expect.json

For each table (golden_data/<name>.tar.zst → <name>/delta, data/<name>[.tar.zst]):
  version, protocol {minReaderVersion, minWriterVersion, readerFeatures, writerFeatures},
  partitionColumns, schema (delta-rs' JSON schema), files (sorted add paths as delta-rs
  reports them), numRecords (sum of add stats numRecords, physical rows, or null),
  txns {appId: version} for every appId found in the log (JSON commits and checkpoint
  txn columns, read here with pyarrow), or error when delta-rs cannot load the table.
The Go test never runs this script; it is checked in so the expectations are reviewable.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable


def app_ids(root):
    ids = set()
    log = os.path.join(root, "_delta_log")
    for f in glob.glob(os.path.join(log, "*.json")):
        for line in open(f, encoding="utf-8"):
            line = line.strip()
            if line.startswith('{"txn"'):
                ids.add(json.loads(line)["txn"]["appId"])
    for f in glob.glob(os.path.join(log, "*.checkpoint*.parquet")):
        t = pq.read_table(f)
        if "txn" in t.column_names:
            for v in t.column("txn").to_pylist():
                if v and v.get("appId"):
                    ids.add(v["appId"])
    return sorted(ids)


def describe(root):
    try:
        dt = DeltaTable(root)
        p = dt.protocol()
        md = dt.metadata()
        adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
        total = 0
        for a in adds:
            n = a.get("num_records")
            if n is None:
                total = None
                break
            total += n
        txns = {}
        for app in app_ids(root):
            v = dt.transaction_version(app)
            if v is not None:
                txns[app] = v
        return {
            "version": dt.version(),
            "protocol": {
                "minReaderVersion": p.min_reader_version,
                "minWriterVersion": p.min_writer_version,
                "readerFeatures": sorted(p.reader_features or []),
                "writerFeatures": sorted(p.writer_features or []),
            },
            "partitionColumns": list(md.partition_columns),
            "schema": json.loads(dt.schema().to_json()),
            "files": sorted(a["path"] for a in adds),
            "numRecords": total,
            "txns": txns,
        }
    except Exception as e:  # noqa: BLE001 - recorded, the Go test decides
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}


def main():
    td = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../testdata/delta-kernel-rs")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arc in sorted(glob.glob(os.path.join(td, "golden_data", "*.tar.zst"))):
            name = os.path.basename(arc)[: -len(".tar.zst")]
            d = os.path.join(tmp, "golden", name)
            os.makedirs(d)
            subprocess.run(["tar", "--zstd", "-xf", arc, "-C", d], check=True, stderr=subprocess.DEVNULL)
            out["golden_data/" + name] = describe(os.path.join(d, name, "delta"))
        for ent in sorted(os.listdir(os.path.join(td, "data"))):
            p = os.path.join(td, "data", ent)
            if ent.endswith(".tar.zst"):
                name = ent[: -len(".tar.zst")]
                d = os.path.join(tmp, "data", name)
                os.makedirs(d)
                subprocess.run(["tar", "--zstd", "-xf", p, "-C", d], check=True, stderr=subprocess.DEVNULL)
                root = os.path.join(d, name) if os.path.isdir(os.path.join(d, name)) else d
            elif os.path.isdir(p):
                name, root = ent, p
            else:
                continue
            if os.path.isdir(os.path.join(root, "_delta_log")):
                out["data/" + name] = describe(root)
                continue
            for sub in sorted(os.listdir(root)):  # a folder of tables (partition_cm/{id,name,none})
                if os.path.isdir(os.path.join(root, sub, "_delta_log")):
                    out["data/" + name + "/" + sub] = describe(os.path.join(root, sub))
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
