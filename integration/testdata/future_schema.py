"""Produce records framed with a schema id the registry has not assigned yet, then (in a
second call) register the schema so that it gets exactly that id.

usage: future_schema.py produce  --brokers B --registry URL --topic T --out STATE.json
       future_schema.py register --registry URL --state STATE.json
The registry must assign ids sequentially and nobody else may register in between
(true for the project's registry during a test run).
"""
import argparse
import io
import json
import struct
import sys
import time

import fastavro
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["produce", "register"])
    ap.add_argument("--brokers")
    ap.add_argument("--registry", required=True)
    ap.add_argument("--topic")
    ap.add_argument("--out")
    ap.add_argument("--state")
    a = ap.parse_args()
    reg = SchemaRegistryClient({"url": a.registry})
    if a.mode == "register":
        with open(a.state) as f:
            st = json.load(f)
        got = reg.register_schema(st["subject"], Schema(json.dumps(st["schema"]), "AVRO"))
        print(json.dumps({"id": got, "want": st["id"]}))
        return
    tag = "F%d" % time.time_ns()
    dummy = {"type": "record", "name": "Dummy" + tag, "fields": [{"name": "x", "type": "long"}]}
    n = reg.register_schema("dummy-" + tag, Schema(json.dumps(dummy), "AVRO"))
    schema = {"type": "record", "name": "Order" + tag, "fields": [
        {"name": "order_id", "type": "long"}, {"name": "status", "type": "string"}]}
    parsed = fastavro.parse_schema(schema)
    p = Producer({"bootstrap.servers": a.brokers})
    for i in range(1, 4):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"order_id": i, "status": "NEW"})
        p.produce(a.topic, value=b"\x00" + struct.pack(">I", n + 1) + buf.getvalue(), partition=0)
    if p.flush(30) != 0:
        sys.exit("flush timed out")
    with open(a.out, "w") as f:
        json.dump({"id": n + 1, "subject": a.topic + "-late", "schema": schema}, f)


if __name__ == "__main__":
    main()
