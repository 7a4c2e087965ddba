#!/usr/bin/env python3
"""The change-data-capture benchmark's check and report (scripts/bench-cdc.sh; BENCHMARKS.md,
"Change data capture").

1. Correctness: the Delta table, read by delta-rs, has the source table's row count, distinct
   ids, and the same MD5 per bucket (id mod 64) of its canonical rows
   (id|name|payload|amount|counter|updated in µs, in id order) as `benchcdc checksum`
   computed from PostgreSQL. A mismatch fails the run (exit 1) naming the buckets.
2. Lag, PostgreSQL commit → row visible in Delta, per streaming phase: each row carries
   `_source_ts_ms` (envelope_columns: [source_ts_ms]: the source transaction's commit time,
   ms). A row became visible at the Delta commit of the version whose add action first
   holds it (key and `_source_lsn`: the first version, so a file rewritten later does not
   count again), at the mtime of that version's log file (the moment the commit was
   published on the local file system; commitInfo.timestamp, taken just before the put, is
   reported beside it). The row's `_kafka_timestamp` (kafka_columns: [timestamp]; the topic
   has message.timestamp.type=LogAppendTime, so it is when the broker appended the record)
   splits the lag into PostgreSQL → Kafka (Debezium and the Connect worker) and Kafka →
   Delta (ingestd). Only rows committed in PostgreSQL during the phase's workload count;
   a delete counts too (with sequence_by ingestd writes the deleted key's row, marked
   deleted in the same commit); a change superseded by a later change of its key within one
   batch is not written, so it has no lag of its own.
3. The markdown table of results.jsonl.

With SNAPSHOT=no_data the table holds only the keys the workload changed, so the source side
is `WHERE counter > 0 OR id > ROWS` (rows updated or inserted, and still live).

Usage: cdc_report.py TABLE_DIR RESULTS_JSONL SOURCE_CHECKSUM_JSON MAX_AGE_S RUN_LABEL
Appends lag and check fields to a report.jsonl beside RESULTS_JSONL and prints the table rows.
"""
import hashlib
import json
import os
import sys
import urllib.parse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder

BUCKETS = 64


def canonical(table_dir):
    # QueryBuilder (delta-rs' DataFusion scan) applies deletion vectors; to_pyarrow_table refuses them.
    dt = DeltaTable(table_dir)
    t = pa.table(QueryBuilder().register("t", dt).execute(
        "SELECT id, name, payload, amount, counter, updated FROM t ORDER BY id").read_all())
    upd = pc.cast(pc.cast(t["updated"], pa.timestamp("us", tz="UTC")), pa.int64())
    parts = [pc.cast(t["id"], pa.string()), pc.cast(t["name"], pa.string()), pc.cast(t["payload"], pa.string()),
             pc.cast(t["amount"], pa.string()),
             pc.cast(t["counter"], pa.string()), pc.cast(upd, pa.string())]
    lines = pc.binary_join_element_wise(*parts, "|").to_pylist()
    ids = t["id"].to_pylist()
    hs = [hashlib.md5() for _ in range(BUCKETS)]
    for i, line in zip(ids, lines):
        h = hs[abs(i) % BUCKETS]
        h.update(line.encode())
        h.update(b"\n")
    return {"rows": t.num_rows, "distinct_ids": len(set(ids)), "buckets": [h.hexdigest() for h in hs]}


def log_versions(table_dir):
    """(version, mtime_ms, commitInfo.timestamp, [added paths]) in version order."""
    d = os.path.join(table_dir, "_delta_log")
    out = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json") or not name[:20].isdigit():
            continue
        p = os.path.join(d, name)
        mtime = os.stat(p).st_mtime_ns // 1_000_000
        ts, adds = None, []
        with open(p) as f:
            for line in f:
                a = json.loads(line)
                if "commitInfo" in a:
                    ts = a["commitInfo"].get("timestamp")
                elif "add" in a and a["add"].get("dataChange", True):
                    adds.append(urllib.parse.unquote(a["add"]["path"]))
        out.append((int(name[:20]), mtime, ts, adds))
    return out


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def lags(table_dir, versions, start_ms, end_ms):
    seen = set()
    by_mtime, by_commit, to_kafka, from_kafka = [], [], [], []
    for _, mtime, ts, adds in versions:
        if mtime < start_ms:
            continue
        for path in adds:
            t = pq.read_table(os.path.join(table_dir, path), columns=["id", "_source_lsn", "_source_ts_ms", "_kafka_timestamp"])
            kts = pc.cast(pc.cast(t["_kafka_timestamp"], pa.timestamp("ms", tz="UTC")), pa.int64()).to_pylist()
            for i, lsn, src, kt in zip(t["id"].to_pylist(), t["_source_lsn"].to_pylist(), t["_source_ts_ms"].to_pylist(), kts):
                if (i, lsn) in seen or src is None or src < start_ms or src > end_ms:
                    continue
                seen.add((i, lsn))
                by_mtime.append(mtime - src)
                to_kafka.append(kt - src)
                from_kafka.append(mtime - kt)
                if ts is not None:
                    by_commit.append(ts - src)
    return {"lag_rows": len(by_mtime), "lag_p50_ms": pct(by_mtime, 0.50), "lag_p99_ms": pct(by_mtime, 0.99),
            "lag_max_ms": max(by_mtime) if by_mtime else None,
            "to_kafka_p50_ms": pct(to_kafka, 0.50), "to_kafka_p99_ms": pct(to_kafka, 0.99),
            "kafka_to_delta_p50_ms": pct(from_kafka, 0.50), "kafka_to_delta_p99_ms": pct(from_kafka, 0.99),
            "commitinfo_lag_p50_ms": pct(by_commit, 0.50), "commitinfo_lag_p99_ms": pct(by_commit, 0.99)}


def k(x):
    return f"{x / 1000:,.1f} K" if x >= 1000 else f"{x:,.0f}"


def main():
    table_dir, results, source_json, max_age_s, label = sys.argv[1:6]
    max_age_ms = float(max_age_s) * 1000
    with open(source_json) as f:
        src = json.load(f)
    got = canonical(table_dir)
    bad = [b for b in range(BUCKETS) if got["buckets"][b] != src["buckets"][b]]
    ok = got["rows"] == src["rows"] and got["distinct_ids"] == src["rows"] and not bad
    check = {"what": "check", "run": label, "source_rows": src["rows"], "delta_rows": got["rows"],
             "delta_distinct_ids": got["distinct_ids"], "buckets_differing": bad, "equal": ok}
    versions = log_versions(table_dir)
    out = [check]
    with open(results) as f:
        phases = [json.loads(l) for l in f if l.strip()]
    dead = max((p.get("dead_letters", 0) for p in phases), default=0)
    check["dead_letters"] = dead
    ok = ok and dead == 0
    check["equal"] = ok
    for p in phases:
        if p["phase"] != "snapshot":
            p.update(lags(table_dir, versions, p["start_ms"], p["end_ms"]))
        p["run"] = label
        out.append(p)
    with open(os.path.join(os.path.dirname(results), "report.jsonl"), "a") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")
    print(f"check: source {src['rows']:,} rows; Delta (delta-rs) {got['rows']:,} rows, {got['distinct_ids']:,} distinct ids; "
          f"MD5 of {BUCKETS} buckets {'equal' if not bad else 'DIFFER in buckets ' + str(bad)}; {dead} dead letters → {'OK' if ok else 'MISMATCH'}")
    print()
    print("| run | phase | changes | PostgreSQL changes/s | Debezium → Kafka, records/s (changes/s) | end to end, changes/s "
          "| Connect worker CPU s (µs/change) | ingestd CPU s (µs/change) | ingestd ÷ Connect CPU | lag p50 / p99 / max, s | max_age |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in phases:
        what = {"snapshot": "snapshot (initial)", "steady": f"steady {p.get('target_rate', 0):,.0f}/s ({p.get('tx_rows', 1)} change/transaction)",
                "flat": f"flat out ({p.get('tx_rows', 1)} changes/transaction)",
                "warmup": f"warm-up {p.get('target_rate', 0):,.0f}/s (outside the goals)"}[p["phase"]]
        lag = "–"
        if p.get("lag_p50_ms") is not None:
            lag = f"{p['lag_p50_ms'] / 1000:.2f} / {p['lag_p99_ms'] / 1000:.2f} / {p['lag_max_ms'] / 1000:.2f}"
        pgr = k(p["pg_changes_per_s"]) if p["phase"] != "snapshot" else "–"
        print(f"| {label} | {what} | {p['changes']:,} | {pgr} | {k(p['debezium_records_per_s'])} ({k(p['debezium_changes_per_s'])}) "
              f"| {k(p['e2e_changes_per_s'])} | {p['connect_cpu_s']:.1f} ({p['connect_cpu_us_per_change']:.0f}) "
              f"| {p['ingestd_cpu_s']:.1f} ({p['ingestd_cpu_us_per_change']:.0f}) | {p['ingestd_to_connect_cpu']:.2f} | {lag} | {max_age_ms / 1000:g} s |")
    print()
    for p in (p for p in phases if p["phase"] != "warmup"):
        goal = "met" if p["ingestd_to_connect_cpu"] <= 0.2 else "NOT met"
        line = f"{label} {p['phase']}: ingestd CPU/change ÷ Connect's = {p['ingestd_to_connect_cpu']:.2f} (goal ≤ 0.20: {goal})"
        if p.get("lag_p99_ms") is not None:
            lg = "met" if p["lag_p99_ms"] <= max_age_ms + 3000 else "NOT met"
            line += (f"; lag p99 {p['lag_p99_ms'] / 1000:.2f} s over {p['lag_rows']:,} rows (goal ≤ max_age + 3 s = "
                     f"{max_age_ms / 1000 + 3:g} s: {lg}); of which PostgreSQL → Kafka p50/p99 {p['to_kafka_p50_ms']}/{p['to_kafka_p99_ms']} ms, Kafka → Delta {p['kafka_to_delta_p50_ms']}/{p['kafka_to_delta_p99_ms']} ms; "
                     f"by commitInfo.timestamp p50/p99 {p['commitinfo_lag_p50_ms']}/{p['commitinfo_lag_p99_ms']} ms")
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
