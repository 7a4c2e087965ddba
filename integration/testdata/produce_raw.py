"""Produce raw records (no serializer) to partition 0, in order.

usage: produce_raw.py --brokers B --topic T --spec SPEC.json
SPEC: [{"value_hex": "00000001..." | null (tombstone), "key": "k" | null,
        "timestamp_ms": N (optional: the CreateTime librdkafka writes as given; 0 means "now"
        to librdkafka, so it cannot write 0)}, ...]
"""
import argparse
import json
import sys

from confluent_kafka import Producer


def main():
    ap = argparse.ArgumentParser()
    for a in ("--brokers", "--topic", "--spec"):
        ap.add_argument(a, required=True)
    a = ap.parse_args()
    with open(a.spec) as f:
        spec = json.load(f)
    p = Producer({"bootstrap.servers": a.brokers, "enable.idempotence": True})
    errors = []
    for rec in spec:
        value = None if rec.get("value_hex") is None else bytes.fromhex(rec["value_hex"])
        key = rec.get("key")
        kw = {}
        if rec.get("timestamp_ms") is not None:
            kw["timestamp"] = rec["timestamp_ms"]
        p.produce(a.topic, value=value, key=key, partition=0,
                  on_delivery=lambda err, msg: err and errors.append(str(err)), **kw)
        p.flush(30)
    if errors:
        sys.exit("delivery failed: %s" % errors[0])


if __name__ == "__main__":
    main()
