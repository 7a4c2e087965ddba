#!/usr/bin/env python3
"""OPTIMIZE benchmark: ingestd `table optimize` beside delta-rs `optimize.compact()` on the
same tables, in one run (BENCHMARKS.md, "Maintenance"; `make bench-optimize`).

Per table of TABLES (ROW_BYTES:FILES:FILE_BYTES each: bytes of values a row holds, data
files, bytes a file is made about) a Delta table is written once by ingestd's data file
writer (cmd/benchoptimize gen: the end-to-end benchmark's 10-column record, snappy, as a
pipeline writes them, no deletion vectors). The default tables are 100 files of about
1.47 MB (147 MB) of 1 KB rows and of 200 B rows, whose row groups (≥ 1 MiB) ingestd
copies as encoded column chunks, and 1,000 files of about 147 KB of 1 KB rows, whose row
groups it merges column by column: the data pages of dictionary-free columns copied, the
others decoded and re-encoded. Each run copies the table afresh and
compacts the copy into files of up to 256 MiB, RUNS times per system, the systems
alternating which goes first:

  ingestd   `ingestd table optimize DIR --min-files 2 --target-file-size 256MiB --json`
            at GOMAXPROCS=1 (one core); its whole process is measured;
  delta-rs  `DeltaTable(DIR).optimize.compact(target_size=256 MiB)` (the venv's deltalake);
            the CPU of the compact() call only (measured inside the process with
            getrusage, so the interpreter's start and imports are not counted), and the
            process's peak RSS.

CPU seconds are user + system (os.wait4 of the child: every thread); peak RSS is the
child's ru_maxrss. MB/s per CPU-second is input bytes (10^6) / CPU seconds. After each run
delta-rs reads the table back and its row count must equal the rows written.

Goals (the issue's, on one core): ingestd ≥ 100 MB/s of input per CPU-second on 1 KB rows;
≥ 2× delta-rs per CPU-second; peak RSS ≤ 2 input row groups (their uncompressed size, the
largest of the inputs' footers) + 256 MiB.

Usage: scripts/bench/optimize.py   (environment: TABLES="1024:100:1470000 200:100:1470000
       1024:1000:147000" RUNS=2 BENCH_OUT=/tmp/bench-optimize.XXXX PYTHON=.venv/bin/python)
Prints a markdown table and the goals; writes them to $BENCH_OUT/results.md.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = os.environ.get("PYTHON") or os.path.join(ROOT, ".venv", "bin", "python")
TABLES = [tuple(int(x) for x in t.split(":"))
          for t in os.environ.get("TABLES", "1024:100:1470000 200:100:1470000 1024:1000:147000").split()]
RUNS = int(os.environ.get("RUNS", "2"))
TARGET = 256 << 20

DELTA_RS = r"""
import json, resource, sys
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
r0 = resource.getrusage(resource.RUSAGE_SELF)
m = dt.optimize.compact(target_size=int(sys.argv[2]))
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"cpu": cpu, "filesRemoved": m["numFilesRemoved"], "filesAdded": m["numFilesAdded"]}))
sys.stdout.flush()
import os; os._exit(0)
"""

COUNT = r"""
import json, sys
import pyarrow.parquet as pq
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
rows = dt.to_pyarrow_dataset().count_rows()
rg = 0
if len(sys.argv) > 2:
    for f in dt.file_uris():
        md = pq.ParquetFile(f).metadata
        rg = max([rg] + [md.row_group(i).total_byte_size for i in range(md.num_row_groups)])
print(json.dumps({"rows": rows, "files": len(dt.file_uris()), "maxRowGroupBytes": rg}))
sys.stdout.flush()
import os; os._exit(0)
"""


def measured(cmd, env=None):
    """Runs cmd, returns (stdout, cpu seconds, peak RSS MiB, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({p.returncode})")
    return out.decode(), ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, wall


def run(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout.decode()


def main():
    out_dir = os.environ.get("BENCH_OUT") or tempfile.mkdtemp(prefix="bench-optimize.")
    os.makedirs(out_dir, exist_ok=True)
    bins = os.path.join(out_dir, "bin")
    run(["go", "build", "-o", os.path.join(bins, "ingestd"), "./cmd/ingestd"])
    run(["go", "build", "-o", os.path.join(bins, "benchoptimize"), "./cmd/benchoptimize"])
    ingestd = os.path.join(bins, "ingestd")
    load0 = os.getloadavg()
    rows_md = []
    goals = []
    for size, FILES, file_bytes in TABLES:
        label = f"{size} B rows, {FILES} files"
        base = os.path.join(out_dir, f"base-{size}-{FILES}")
        shutil.rmtree(base, ignore_errors=True)
        gen = json.loads(run([os.path.join(bins, "benchoptimize"), "gen", "-dir", base, "-files", str(FILES),
                              "-file-bytes", str(file_bytes), "-row-bytes", str(size)]))
        info = json.loads(run([PY, "-c", COUNT, base, "rowgroups"]))
        if info["rows"] != gen["rows"]:
            sys.exit(f"base table of {size} B rows: delta-rs counts {info['rows']} rows, {gen['rows']} written")
        mb = gen["bytes"] / 1e6
        bound = 2 * info["maxRowGroupBytes"] / 2**20 + 256
        per = {"ingestd": [], "delta-rs": []}
        for r in range(RUNS):
            order = ["ingestd", "delta-rs"] if r % 2 == 0 else ["delta-rs", "ingestd"]
            for system in order:
                d = os.path.join(out_dir, f"t-{size}-{FILES}-{system}-{r}")
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(base, d)
                if system == "ingestd":
                    env = dict(os.environ, GOMAXPROCS="1")
                    out, cpu, rss, wall = measured([ingestd, "table", "optimize", d, "--min-files", "2",
                                                    "--target-file-size", "256MiB", "--json"], env)
                    res = json.loads(out)
                    removed, added = res["filesRemoved"], res["filesAdded"]
                else:
                    out, _, rss, wall = measured([PY, "-c", DELTA_RS, d, str(TARGET)])
                    res = json.loads(out)
                    cpu, removed, added = res["cpu"], res["filesRemoved"], res["filesAdded"]
                after = json.loads(run([PY, "-c", COUNT, d]))
                if after["rows"] != gen["rows"] or removed != FILES:
                    sys.exit(f"{system} on {size} B rows: {after['rows']} rows after (want {gen['rows']}), {removed} files removed")
                per[system].append((cpu, rss))
                rows_md.append(f"| {size} B | {system} | {r + 1} | {mb:.1f} MB, {FILES} files, {gen['rows']:,} rows | "
                               f"{cpu:.2f} | {mb / cpu:.0f} | {rss:.0f} | {wall:.2f} | {added} |")
                shutil.rmtree(d, ignore_errors=True)
        ing = min(c for c, _ in per["ingestd"])
        drs = min(c for c, _ in per["delta-rs"])
        rss = max(m for _, m in per["ingestd"])
        if size == 1024:
            goals.append(f"- {label}: ingestd ≥ 100 MB/s of input per CPU-second: {mb / ing:.0f} MB/s (best of {RUNS}) — "
                         + ("**met**" if mb / ing >= 100 else "**not met**"))
        goals.append(f"- {label}: ingestd ≥ 2× delta-rs per CPU-second: {drs / ing:.2f}× (best runs: {ing:.2f} s vs {drs:.2f} s) — "
                     + ("**met**" if drs / ing >= 2 else "**not met**"))
        goals.append(f"- {label}: ingestd peak RSS ≤ 2 input row groups + 256 MiB = {bound:.0f} MiB: {rss:.0f} MiB (worst of {RUNS}) — "
                     + ("**met**" if rss <= bound else "**not met**"))
    load1 = os.getloadavg()
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    text = "\n".join([
        f"Machine: {os.cpu_count()} cores, {cpu_model}, {platform.system()} {platform.machine()}; "
        f"load average {load0[0]:.1f} before, {load1[0]:.1f} after (shared machine).",
        "",
        "| rows | system | run | input | CPU s | MB/s per CPU-s | peak RSS MiB | wall s | files out |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows_md,
        "",
        *goals,
    ])
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
