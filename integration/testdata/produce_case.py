"""Produce a schema-drift case with confluent-kafka's AvroSerializer through a real
registry: every event is serialised with its own writer schema, in order, to partition 0.

usage: produce_case.py --brokers B --registry URL --topic T --spec SPEC.json --out OUT.json

SPEC: {"schemas": {"v1": <avsc>, ...}, "events": [["v1", {...value...}], ...]}
Each schema version is registered under its own subject <topic>-<label>.
OUT: [{"offset": N, "schema": "v1", "schema_id": ID}, ...] in event order.
"""
import argparse
import json
import sys

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer


def main():
    ap = argparse.ArgumentParser()
    for a in ("--brokers", "--registry", "--topic", "--spec", "--out"):
        ap.add_argument(a, required=True)
    a = ap.parse_args()
    with open(a.spec) as f:
        spec = json.load(f)
    reg = SchemaRegistryClient({"url": a.registry})
    producers, ids = {}, {}
    for label, schema in spec["schemas"].items():
        # One subject per schema version, so the registry's compatibility rules (the cases
        # include incompatible changes on purpose) never refuse one; ingestd only sees ids.
        ser = AvroSerializer(reg, json.dumps(schema), conf={
            "auto.register.schemas": True,
            "subject.name.strategy": lambda ctx, name, label=label: "%s-%s" % (a.topic, label)})
        producers[label] = SerializingProducer({"bootstrap.servers": a.brokers,
                                                "value.serializer": ser, "enable.idempotence": True})
    out = []
    for label, value in spec["events"]:
        p = producers[label]
        result = {}

        def on_delivery(err, msg, result=result):
            if err is not None:
                sys.exit("delivery failed: %s" % err)
            result["offset"] = msg.offset()
            v = msg.value()
            result["schema_id"] = int.from_bytes(v[1:5], "big")

        # produce and flush one at a time: order across the per-schema producers matters
        p.produce(a.topic, value=value, partition=0, on_delivery=on_delivery)
        if p.flush(30) != 0:
            sys.exit("flush timed out")
        out.append({"offset": result["offset"], "schema": label, "schema_id": result["schema_id"]})
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
