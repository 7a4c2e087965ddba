#!/usr/bin/env python3
"""delta-rs (the Python `deltalake`) beside `benchbig measure` on a generated big table
(scripts/bench-bigtable.sh): one operation per process, one JSON line on stdout with the
same keys (wallS, cpuS: user+system of this process, files, toDelete, peakRssMiB).

Usage: bigtable_deltars.py load|vacuum|checkpoint TABLE_DIR
  load        DeltaTable(dir) + file_uris() (files() in deltalake < 1.0) (timed)
  vacuum      DeltaTable(dir), then vacuum(dry_run=True, full=True) (timed; full: orphans too, like ingestd)
  checkpoint  DeltaTable(dir), then create_checkpoint()       (the checkpoint timed)
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


def main():
    what, path = sys.argv[1], sys.argv[2]
    out = {"what": what, "dir": path}
    if what == "load":
        c0, t0 = cpu(), time.perf_counter()
        dt = DeltaTable(path)
        files = dt.file_uris()
        out["wallS"], out["cpuS"] = time.perf_counter() - t0, cpu() - c0
        out["files"] = len(files)
    elif what == "vacuum":
        dt = DeltaTable(path)
        c0, t0 = cpu(), time.perf_counter()
        gone = dt.vacuum(dry_run=True, full=True)
        out["wallS"], out["cpuS"] = time.perf_counter() - t0, cpu() - c0
        out["toDelete"] = len(gone)
    elif what == "checkpoint":
        dt = DeltaTable(path)
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
