#!/usr/bin/env python3
"""The markdown report of scripts/bench-bigtable.sh: one table of every operation per
generated table, ingestd beside delta-rs; then, on local disk, each goal
(docs/performance.md, "Big tables") met or not met on the largest table; on S3, the
generation (uploads per second) and the real VACUUMs (objects deleted per second, batched
and one by one) with delta-rs' read-back.

Usage: bigtable_report.py results.jsonl SMALL_FILES [local|s3]
"""
import json
import sys


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    small = int(sys.argv[2])
    store = sys.argv[3] if len(sys.argv) > 3 else "local"
    by = {}
    for r in rows:
        if r["what"] != "vacuumreal":
            by[(r["engine"], r["n"], r["parts"], r["what"])] = r

    def get(e, n, p, w, k, default=None):
        r = by.get((e, n, p, w))
        return r.get(k, default) if r else default

    def f(x, fmt="{:.2f}"):
        return "–" if x is None else fmt.format(x)

    def ms(x):
        return "–" if x is None else "{:.1f}".format(x * 1000)

    tables = sorted({(r["n"], r["parts"]) for r in rows
                     if r["what"] not in ("gen", "vacuumreal", "readback") and (r["n"] != small or r["what"] not in ("startup", "commits"))})
    print("| live files | partitions | load s (CPU s) ingestd | delta-rs load+file_uris() s (CPU s) | × (CPU) | heap B/file | refresh p50 / max ms | checkpoint s (CPU s, alloc MiB) ingestd | delta-rs create_checkpoint() s (CPU s) | VACUUM dry run s (listing s) ingestd | delta-rs vacuum(dry_run) s | to delete (ingestd / delta-rs) | start→first commit s (CPU s) | commit p50 / p99 ms |")
    print("|---:|---:|---|---|---:|---:|---|---|---|---|---|---|---:|---|")
    for n, p in tables:
        lo, lt = get("ingestd", n, p, "load", "wallS"), get("delta-rs", n, p, "load", "wallS")
        co, ct = get("ingestd", n, p, "load", "cpuS"), get("delta-rs", n, p, "load", "cpuS")
        ratio = f(ct / co) if co and ct else "–"
        print("| {} | {} | {} ({}) | {} ({}) | {} | {} | {} / {} | {} ({}, {}) | {} ({}) | {} ({}) | {} | {} / {} | {} | {} / {} |".format(
            n, p or "none",
            f(lo), f(get("ingestd", n, p, "load", "cpuS")), f(lt), f(get("delta-rs", n, p, "load", "cpuS")), ratio,
            f(get("ingestd", n, p, "load", "heapBytesPerFile"), "{:.0f}"),
            ms(get("ingestd", n, p, "refresh", "p50S")), ms(get("ingestd", n, p, "refresh", "p99S")),
            f(get("ingestd", n, p, "checkpoint", "wallS")), f(get("ingestd", n, p, "checkpoint", "cpuS")),
            f(get("ingestd", n, p, "checkpoint", "allocMiB"), "{:.0f}"),
            f(get("delta-rs", n, p, "checkpoint", "wallS")), f(get("delta-rs", n, p, "checkpoint", "cpuS")),
            f(get("ingestd", n, p, "vacuum", "wallS")), f(get("ingestd", n, p, "vacuum", "listingWallS")),
            f(get("delta-rs", n, p, "vacuum", "wallS")),
            get("ingestd", n, p, "vacuum", "toDelete", "–"), get("delta-rs", n, p, "vacuum", "toDelete", "–"),
            "{} ({})".format(f(get("ingestd", n, p, "startup", "wallS")), f(get("ingestd", n, p, "startup", "cpuS"))),
            ms(get("ingestd", n, p, "commits", "p50S")), ms(get("ingestd", n, p, "commits", "p99S"))))
    print("| {} (baseline) | none | | | | | | | | | | | {} ({}) | {} / {} |".format(
        small, f(get("ingestd", small, 0, "startup", "wallS")), f(get("ingestd", small, 0, "startup", "cpuS")),
        ms(get("ingestd", small, 0, "commits", "p50S")), ms(get("ingestd", small, 0, "commits", "p99S"))))

    if store == "s3":
        s3_tables(rows, f, small)
        return
    big = max(n for n, _ in tables)
    print()
    print("Goals, on the {}-file tables (every partitioning):".format(big))
    print()

    def goal(name, ok, detail):
        mark = "–" if ok is None else ("met" if ok else "NOT met")
        print("- {}: **{}** ({})".format(name, mark, detail))

    print("Load, checkpoint, VACUUM and start-up are judged by CPU seconds (one core, taskset; on a")
    print("shared machine their wall time measures the load); refresh and commits by wall time.")
    print()
    for p in sorted({p for n, p in tables if n == big}):
        lbl = "partitioned ({})".format(p) if p else "unpartitioned"
        lo, lt = get("ingestd", big, p, "load", "cpuS"), get("delta-rs", big, p, "load", "cpuS")
        hb = get("ingestd", big, p, "load", "heapBytesPerFile")
        goal(lbl + ": snapshot load ≤ 2 s", lo is not None and lo <= 2, f(lo) + " CPU s")
        goal(lbl + ": ≤ 300 B of heap per live file", hb is not None and hb <= 300, f(hb, "{:.0f}") + " B")
        goal(lbl + ": load ≥ 2× delta-rs", lo is not None and lt is not None and lt >= 2 * lo,
             "delta-rs {} CPU s, {}×".format(f(lt), f(lt / lo) if lo and lt else "–"))
        rp = get("ingestd", big, p, "refresh", "p50S")
        goal(lbl + ": refresh after one commit ≤ 20 ms", rp is not None and rp <= 0.020,
             "p50 {} ms, max {} ms".format(ms(rp), ms(get("ingestd", big, p, "refresh", "p99S"))))
        cp = get("ingestd", big, p, "checkpoint", "cpuS")
        goal(lbl + ": checkpoint ≤ 5 s", cp is not None and cp <= 5, "{} CPU s, {} MiB allocated in all".format(
            f(cp), f(get("ingestd", big, p, "checkpoint", "allocMiB"), "{:.0f}")))
        vc, vl = get("ingestd", big, p, "vacuum", "cpuS"), get("ingestd", big, p, "vacuum", "listingWallS")
        goal(lbl + ": VACUUM dry run ≤ 5 s + listing", None if vc is None or vl is None else vc <= 5 + vl,
             "{} CPU s, listing alone {} s wall".format(f(vc), f(vl)))
        su, ss = get("ingestd", big, p, "startup", "cpuS"), get("ingestd", small, 0, "startup", "cpuS")
        goal(lbl + ": start → first commit ≤ small table + 3 s", su is not None and ss is not None and su <= ss + 3,
             "{} CPU s vs {} CPU s; wall {} s vs {} s".format(f(su), f(ss), f(get("ingestd", big, p, "startup", "wallS")),
                                                          f(get("ingestd", small, 0, "startup", "wallS"))))
        c50, s50 = get("ingestd", big, p, "commits", "p50S"), get("ingestd", small, 0, "commits", "p50S")
        c99, s99 = get("ingestd", big, p, "commits", "p99S"), get("ingestd", small, 0, "commits", "p99S")
        ok = None if None in (c50, s50, c99, s99) else (c50 <= 1.2 * s50 and c99 <= 1.2 * s99)
        goal(lbl + ": commit p50/p99 within 20 % of the small table's", ok,
             "{} / {} ms vs {} / {} ms; p99 of the {} commits begun during a background checkpoint {} ms, of the others {} ms".format(
                 ms(c50), ms(c99), ms(s50), ms(s99), get("ingestd", big, p, "commits", "duringCheckpointCount"),
                 ms(get("ingestd", big, p, "commits", "duringCheckpointP99S")), ms(get("ingestd", big, p, "commits", "othersP99S"))))

def s3_tables(rows, f, small):
    """The generation and the real VACUUMs of a STORE=s3 run."""
    print()
    print("Generation in the S3 emulator (gen: data files and orphans uploaded, 16 in flight, beside the log):")
    print()
    print("| live files | partitions | data objects | s | objects/s | CPU s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in sorted((r for r in rows if r["what"] == "gen"), key=lambda r: (r["n"], r["parts"])):
        objs = r.get("dataFiles", 0)
        print("| {} | {} | {} | {} | {} | {} |".format(
            r["n"], r["parts"] or "none", objs or "log only", f(r.get("seconds")),
            "{:.0f}".format(objs / r["seconds"]) if objs and r.get("seconds") else "–", f(r.get("cpuS"))))
    vac = sorted({(r["n"], r["parts"]) for r in rows if r["what"] == "vacuum"})
    if vac:
        print()
        print("VACUUM dry run's CPU (the listing's pages decoded included):")
        print()
        print("| live files | partitions | ingestd CPU s (alloc MiB) | delta-rs CPU s | × |")
        print("|---:|---:|---|---|---:|")
        byv = {(r["engine"], r["n"], r["parts"]): r for r in rows if r["what"] == "vacuum"}
        for n, p in vac:
            o, t = byv.get(("ingestd", n, p), {}), byv.get(("delta-rs", n, p), {})
            co, ct = o.get("cpuS"), t.get("cpuS")
            print("| {} | {} | {} ({}) | {} | {} |".format(n, p or "none", f(co), f(o.get("allocMiB"), "{:.0f}"), f(ct),
                                                         f(co / ct) if co and ct else "–"))
    real = [r for r in rows if r["what"] == "vacuumreal"]
    if not real:
        return
    print()
    print("Real VACUUM (retention 0, forced), the deleted objects put back before each; deletes: batched = "
          "storage.DeleteAll with DeleteObjects of ≤ 1,000 keys, single = the same paths through Delete, 16 requests in flight each:")
    print()
    print("| live files | partitions | round | deletes | objects deleted | requests | delete s | objects/s | VACUUM s (CPU s) | data files after |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---|---:|")
    for r in real:
        print("| {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} |".format(
            r["n"], r["parts"] or "none", r.get("round", 0) + 1, r.get("deletes"), r.get("deleted"), r.get("deleteRequests"),
            f(r.get("deleteWallS"), "{:.3f}"), f(r.get("deletedPerS"), "{:.0f}"), f(r.get("wallS")), f(r.get("cpuS")),
            r.get("dataFilesAfter")))
    for r in rows:
        if r["what"] == "readback":
            print()
            print("delta-rs reads the vacuumed {}-file table ({} partitions) back: {} live files.".format(
                r["n"], r["parts"] or "no", r.get("files")))


if __name__ == "__main__":
    main()
