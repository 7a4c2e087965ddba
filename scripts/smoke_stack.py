#!/usr/bin/env python3
"""Smoke check of the loopback test stack started by scripts/stack.sh.

Creates a fresh topic with 3 partitions, produces 5 Avro records through the schema
registry (Confluent wire format), reads the schema back by id over HTTP, consumes the
records with the Avro deserializer and compares them. Exits non-zero on any failure.

Run with the project venv:  .venv/bin/python scripts/smoke_stack.py
Addresses come from KAFKA_BROKERS / SCHEMA_REGISTRY_URL, else from .stack/env.
"""
import json
import os
import pathlib
import struct
import sys
import time
import uuid

import requests
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import StringDeserializer, StringSerializer
from confluent_kafka import DeserializingConsumer, SerializingProducer

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCHEMA = json.dumps({
    "type": "record",
    "name": "SmokeEvent",
    "namespace": "io.ingestd.smoke",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": ["null", "double"], "default": None},
    ],
})


def load_env():
    env = {}
    f = ROOT / ".stack" / "env"
    if f.exists():
        for line in f.read_text().splitlines():
            line = line.strip()
            if line.startswith("export "):
                line = line[len("export "):]
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v
    brokers = os.environ.get("KAFKA_BROKERS") or env.get("KAFKA_BROKERS")
    sr = os.environ.get("SCHEMA_REGISTRY_URL") or env.get("SCHEMA_REGISTRY_URL")
    if not brokers or not sr:
        sys.exit("smoke: no KAFKA_BROKERS / SCHEMA_REGISTRY_URL (run scripts/stack.sh up)")
    return brokers, sr.rstrip("/")


def main():
    brokers, sr_url = load_env()
    topic = "smoke-" + uuid.uuid4().hex[:8]
    subject = topic + "-value"
    t0 = time.monotonic()
    print(f"smoke: brokers={brokers} registry={sr_url} topic={topic}")

    r = requests.get(sr_url + "/subjects", timeout=10)
    r.raise_for_status()
    print(f"smoke: GET /subjects -> {r.json()}")

    admin = AdminClient({"bootstrap.servers": brokers})
    for t, fut in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).items():
        fut.result(timeout=30)
    md = admin.list_topics(topic, timeout=10)
    nparts = len(md.topics[topic].partitions)
    assert nparts == 3, f"topic has {nparts} partitions, want 3"
    print(f"smoke: created {topic} with {nparts} partitions (broker {md.brokers})")

    src = SchemaRegistryClient({"url": sr_url})
    producer = SerializingProducer({
        "bootstrap.servers": brokers,
        "key.serializer": StringSerializer("utf_8"),
        "value.serializer": AvroSerializer(src, SCHEMA),
        "enable.idempotence": True,
    })
    sent = [{"id": i, "name": f"row-{i}", "score": (i * 1.5 if i % 2 else None)} for i in range(5)]
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for rec in sent:
        producer.produce(topic, key=f"k{rec['id']}", value=rec, on_delivery=on_delivery)
    left = producer.flush(30)
    assert left == 0 and not errors, f"produce failed: {left} undelivered, errors {errors}"
    print(f"smoke: produced {len(sent)} Avro records")

    latest = src.get_latest_version(subject)
    r = requests.get(f"{sr_url}/schemas/ids/{latest.schema_id}", timeout=10)
    r.raise_for_status()
    assert json.loads(r.json()["schema"])["name"] == "SmokeEvent", r.text
    print(f"smoke: subject {subject} version {latest.version} id {latest.schema_id}; "
          f"GET /schemas/ids/{latest.schema_id} ok")

    # stack.sh sets the registry's global compatibility to BACKWARD (Confluent's default):
    # turning a long field into a string must be refused with 409.
    bad = json.loads(SCHEMA)
    bad["fields"][0]["type"] = "string"
    r = requests.post(f"{sr_url}/subjects/{subject}/versions", timeout=10,
                      headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                      data=json.dumps({"schema": json.dumps(bad)}))
    assert r.status_code == 409, f"incompatible schema got HTTP {r.status_code}: {r.text}"
    print("smoke: incompatible schema refused (409, BACKWARD)")

    consumer = DeserializingConsumer({
        "bootstrap.servers": brokers,
        "group.id": "smoke-" + uuid.uuid4().hex[:8],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "key.deserializer": StringDeserializer("utf_8"),
        "value.deserializer": AvroDeserializer(src),
    })
    consumer.subscribe([topic])
    got, parts = [], set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"consume error: {msg.error()}")
            got.append(msg.value())
            parts.add(msg.partition())
    finally:
        consumer.close()
    assert len(got) == len(sent), f"consumed {len(got)} of {len(sent)} records in 60 s"
    assert sorted(got, key=lambda v: v["id"]) == sent, f"records differ: {got} != {sent}"
    print(f"smoke: consumed {len(got)} records from partitions {sorted(parts)}, values match")

    # The Confluent wire format: magic byte 0, then the 4-byte schema id.
    raw = DeserializingConsumer({
        "bootstrap.servers": brokers,
        "group.id": "smoke-raw-" + uuid.uuid4().hex[:8],
        "auto.offset.reset": "earliest",
    })
    raw.subscribe([topic])
    ids = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = raw.poll(1.0)
            if msg is not None and not msg.error():
                magic, sid = struct.unpack(">bI", msg.value()[:5])
                ids.add((magic, sid))
                break
    finally:
        raw.close()
    assert ids == {(0, latest.schema_id)}, f"wire header {ids}, want magic 0 id {latest.schema_id}"
    print(f"smoke: wire format ok (magic 0, schema id {latest.schema_id})")

    for t, fut in admin.delete_topics([topic]).items():
        fut.result(timeout=30)
    print(f"smoke: OK in {time.monotonic() - t0:.1f}s")


if __name__ == "__main__":
    main()
