#!/usr/bin/env python3
"""The markdown table of scripts/bench-upsert.sh from its results.jsonl files (one per table
size): per size and variant, ingestd's changes per CPU-second beside the append baseline of the
same run and beside each peer, with the ratios; then the key index and the peak RSS.

Usage: upsert_report.py rows-*/results.jsonl
"""
import json
import sys


def k(x):
    return f"{x / 1000:,.1f} K" if x < 1e6 else f"{x / 1e6:,.2f} M"


def main():
    sizes = []
    for path in sys.argv[1:]:
        with open(path) as f:
            last = {}  # a later run's line replaces an earlier one's (PHASES reruns)
            for r in (json.loads(l) for l in f if l.strip()):
                last[(r["what"], r.get("variant"), r.get("engine"))] = r
            sizes.append(list(last.values()))
    print("| table rows | variant | ingestd upsert, changes/CPU-s | append baseline (same batches, same run) | upsert ÷ append "
          "| delta-rs merge | ingestd ÷ delta-rs | Spark MERGE | ingestd ÷ Spark |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for recs in sizes:
        rows = next((r["rows"] for r in recs if r["what"] == "peer"), None)
        idx = next((r for r in recs if r["what"] == "index"), None)
        rows = rows or (idx and idx["keys"])
        peers = {(r["engine"], r["variant"]): r for r in recs if r["what"] == "peer"}
        for v in (r for r in recs if r["what"] == "variant"):
            line = [f"{rows:,}", v["variant"], k(v["ingestd_changes_per_cpu_s"]), k(v["append_changes_per_cpu_s"]),
                    f"{v['ingestd_changes_per_cpu_s'] / v['append_changes_per_cpu_s']:.2f}"]
            for eng in ("delta-rs merge", "Spark MERGE"):
                p = peers.get((eng, v["variant"]))
                if p:
                    line += [k(p["changes_per_cpu_s"]), f"{v['ingestd_changes_per_cpu_s'] / p['changes_per_cpu_s']:.1f}×"]
                else:
                    line += ["not run at this size", "–"]
            print("| " + " | ".join(line) + " |")
    print()
    print("| table rows | index build, CPU-s | index bytes per key (table; heap growth) | ingestd peak RSS | "
          "max_bytes + index + 256 MiB | delta-rs peak RSS | Spark JVM peak RSS |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    mib = 1 << 20
    for recs in sizes:
        idx = next((r for r in recs if r["what"] == "index"), None)
        mem = next((r for r in recs if r["what"] == "memory"), None)
        if not idx or not mem:
            continue
        peer = {r["engine"]: r for r in recs if r["what"] == "peer_memory"}
        goal = mem["max_bytes"] + mem["index_bytes"] + 256 * mib
        line = [f"{idx['keys']:,}", f"{idx['build_cpu_s']:.2f}",
                f"{idx['table_bytes_per_key']:.1f}; {idx['heap_bytes_per_key']:.1f}",
                f"{mem['peak_rss_bytes'] / mib:,.0f} MiB (of which the generator's key list {mem['generator_bytes'] / mib:,.0f} MiB)",
                f"{goal / mib:,.0f} MiB"]
        for eng in ("delta-rs merge", "Spark MERGE"):
            p = peer.get(eng)
            line.append(f"{p['peak_rss_bytes'] / mib:,.0f} MiB" if p else "not run")
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
