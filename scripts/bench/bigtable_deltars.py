#!/usr/bin/env python3
"""delta-rs (the Python `deltalake`) beside `benchbig measure` on a generated big table
(scripts/bench-bigtable.sh): one operation per process, one JSON line on stdout with the
same keys (wallS, cpuS: user+system of this process, files, toDelete, peakRssMiB).

Usage: bigtable_deltars.py load|vacuum|checkpoint|readback TABLE [RETAIN_HOURS]
  load        DeltaTable(uri) + file_uris() (files() in deltalake < 1.0) (timed)
  vacuum      DeltaTable(uri), then vacuum(dry_run=True, full=True) (timed; full: orphans
              too, like ingestd), with the table's retention or RETAIN_HOURS (not enforced)
  checkpoint  DeltaTable(uri), then create_checkpoint()       (the checkpoint timed)
  readback    DeltaTable(uri) + file_uris() after a real VACUUM: the live files' count

TABLE is a directory or an s3:// URI; for s3://, storage_options name the endpoint of
AWS_ENDPOINT_URL_S3 with the keys and region of the environment (as benchbig reads them),
kept out of the command line.
"""
import json
import os
import resource
import sys
import time

from deltalake import DeltaTable


def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def storage_options(uri):
    if not uri.startswith("s3://"):
        return None
    env = os.environ
    opts = {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "aws_region": env.get("AWS_REGION", "us-east-1")}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        opts["aws_endpoint_url"] = endpoint
        opts["aws_allow_http"] = "true"
    return opts


def main():
    what, uri = sys.argv[1], sys.argv[2]
    retain = int(sys.argv[3]) if len(sys.argv) > 3 else None
    opts = storage_options(uri)
    out = {"what": what, "dir": uri}
    if what in ("load", "readback"):
        c0, t0 = cpu(), time.perf_counter()
        dt = DeltaTable(uri, storage_options=opts)
        files = dt.file_uris()
        out["wallS"], out["cpuS"] = time.perf_counter() - t0, cpu() - c0
        out["files"] = len(files)
    elif what == "vacuum":
        dt = DeltaTable(uri, storage_options=opts)
        c0, t0 = cpu(), time.perf_counter()
        gone = dt.vacuum(retention_hours=retain, dry_run=True, enforce_retention_duration=retain is None, full=True)
        out["wallS"], out["cpuS"] = time.perf_counter() - t0, cpu() - c0
        out["toDelete"] = len(gone)
    elif what == "checkpoint":
        dt = DeltaTable(uri, storage_options=opts)
        c0, t0 = cpu(), time.perf_counter()
        dt.create_checkpoint()
        out["wallS"], out["cpuS"] = time.perf_counter() - t0, cpu() - c0
    else:
        raise SystemExit("unknown operation " + what)
    out["peakRssMiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out), flush=True)
    # Leave without interpreter teardown: delta-rs' runtime threads can abort it.
    os._exit(0)


if __name__ == "__main__":
    main()
