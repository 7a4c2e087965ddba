"""Produce the orders stream with confluent-kafka's AvroSerializer (a client ingestd did not
write) through a real schema registry, and write what was produced as JSON lines.

usage: produce_orders.py --brokers B --registry URL --topic T --v1 N --v2 M --start ID --out FILE

Orders start at --start and are numbered consecutively: --v1 records with schema v1, then
(after a flush, so every partition holds its v1 records before its v2 records) --v2 records
with schema v2, which adds the nullable field `channel`. Values are a pure function of
order_id (see row()), so tests can recompute them.
"""
import argparse
import datetime
import decimal
import json
import os
import sys

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import StringSerializer

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
BASE_US = 1_793_491_200_000_000  # 2026-11-01T00:00:00Z in µs
STATUSES = ["NEW", "PAID", "SHIPPED"]
CHANNELS = ["web", "app", "store"]


def row(order_id, v2):
    r = {
        "order_id": order_id,
        "customer": "customer-%03d" % (order_id % 250),
        # exact decimals, negative ones too: unscaled = (order_id*37 % 200001) - 100000
        "amount": decimal.Decimal((order_id * 37 % 200001) - 100000).scaleb(-2),
        "created_at": BASE_US + order_id * 1_000_003,
        "status": STATUSES[order_id % 3],
        "note": None if order_id % 5 == 0 else "n%d" % order_id,
    }
    if v2:
        r["channel"] = None if order_id % 7 == 0 else CHANNELS[order_id % 3]
    return r


def to_avro(r, ctx):
    out = dict(r)
    out["created_at"] = EPOCH + datetime.timedelta(microseconds=r["created_at"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--v1", type=int, default=0)
    ap.add_argument("--v2", type=int, default=0)
    ap.add_argument("--start", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timestamp-ms", type=int, default=0, help="record timestamp (default: now)")
    a = ap.parse_args()
    reg = SchemaRegistryClient({"url": a.registry})
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(str(err))

    oid = a.start
    with open(a.out, "w") as out:
        for version, count in (("v1", a.v1), ("v2", a.v2)):
            if count == 0:
                continue
            with open(os.path.join(HERE, "orders-%s.avsc" % version)) as f:
                schema = f.read()
            ser = AvroSerializer(reg, schema, to_avro, conf={"auto.register.schemas": True})
            p = SerializingProducer({
                "bootstrap.servers": a.brokers,
                "key.serializer": StringSerializer("utf_8"),
                "value.serializer": ser,
                "enable.idempotence": True,
                "linger.ms": 20,
            })
            for _ in range(count):
                r = row(oid, version == "v2")
                kw = {"timestamp": a.timestamp_ms} if a.timestamp_ms else {}
                p.produce(a.topic, key=str(oid), value=r, on_delivery=on_delivery, **kw)
                p.poll(0)
                rec = dict(r)
                rec["amount"] = str(r["amount"])
                rec["version"] = version
                out.write(json.dumps(rec) + "\n")
                oid += 1
            if p.flush(60) != 0:
                sys.exit("flush timed out")
            if failures:
                sys.exit("delivery failed: %s" % failures[0])
    print("produced %d records to %s" % (oid - a.start, a.topic))


if __name__ == "__main__":
    main()
