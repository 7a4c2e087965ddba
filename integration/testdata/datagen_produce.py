"""Produce records for every datagen schema with confluent-kafka's AvroSerializer through
the real schema registry, and write, per schema, the rows a Delta reader must see.

usage: datagen_produce.py --brokers B --registry URL --schemas DIR --topic-prefix P
                          --count N --out DIR

For each DIR/*.avsc that is valid JSON, topic = P + file stem. Values are a pure function
of (field path, Avro type, record index), covering edge values (0, -1, min/max int and long,
pre-1970 dates and timestamps, empty strings and collections, non-ASCII text, negative
decimals). OUT/<stem>.jsonl holds one JSON row per record in read_table.py's representation
of the Delta value: long/int as integers, decimals as exact strings, timestamp and
timestamp_ntz as microseconds since the epoch, dates as ISO strings, bytes/fixed as hex,
enums and uuids as strings, maps as {key: value} objects (as read_table.py and Spark render them), records as objects,
multi-branch unions as {member0: ..., member1: ...}, a null-typed field omitted.
"""
import argparse
import datetime
import decimal
import glob
import json
import os
import struct
import sys

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import StringSerializer

INTS = [0, -1, 1, 2147483647, -2147483648, 42, -123456, 19708]
LONGS = [0, -1, 1, 9223372036854775807, -9223372036854775808, 3000000010, -1702771200123456]
DOUBLES = [0.0, -1.5, 1e300, -2.2250738585072014e-308, 0.1, 123456.789, -0.0]
STRINGS = ["", "a", "héllo wörld", "日本語", "emoji 🎉", "with \"quotes\" and \\ and \n", "x" * 40]
# days: 1970-01-01, 1969-12-31, 2023-12-17, 1900-01-01, 9999-12-31, 0001-01-01
DAYS = [0, -1, 19708, -25567, 2932896, -719162]
# ms since the epoch, within the years 1..9999 that Python datetimes hold
MILLIS = [0, -1, 1702771200123, -2208988800000, 253402300799999, -62135596800000, 1]


def pick(seq, i, salt):
    return seq[(i * 5 + salt) % len(seq)]


def salt_of(path):
    return sum(ord(c) for c in path)


def gen(t, i, path, named):
    """Returns (avro_value, delta_value, present) for type t; present False for null-typed."""
    s = salt_of(path)
    if isinstance(t, list):  # union
        non_null = [b for b in t if b != "null"]
        if not non_null:
            return None, None, False
        has_null = len(non_null) < len(t)
        if has_null and (i + s) % 4 == 0:
            return None, None, True
        k = (i + s) % len(non_null)
        av, dv, _ = gen(non_null[k], i, path + "|" + str(k), named)
        if len(non_null) == 1:
            return av, dv, True
        b = non_null[k]
        bname = b if isinstance(b, str) else b.get("name") or b["type"]
        if isinstance(b, dict) and b.get("type") in ("record", "enum", "fixed") and "namespace" in b:
            bname = b["namespace"] + "." + b["name"]
        members = {"member%d" % j: None for j in range(len(non_null))}
        members["member%d" % k] = dv
        return (bname, av), members, True
    if isinstance(t, str):
        if t in named:
            return gen(named[t], i, path, named)
        t = {"type": t}
    typ = t["type"]
    if isinstance(typ, (dict, list)):
        return gen(typ, i, path, named)
    lt = t.get("logicalType")
    if typ in ("record", "enum", "fixed"):
        named[t["name"]] = t
        if "namespace" in t:
            named[t["namespace"] + "." + t["name"]] = t
    if typ == "null":
        return None, None, False
    if typ == "boolean":
        v = (i + s) % 2 == 0
        return v, v, True
    if typ == "int":
        v = pick(INTS, i, s)
        if lt == "date":
            v = pick(DAYS, i, s)
            return v, (datetime.date(1970, 1, 1) + datetime.timedelta(days=v)).isoformat(), True
        return v, v, True
    if typ == "long":
        if lt in ("timestamp-millis", "local-timestamp-millis"):
            v = pick(MILLIS, i, s)
            return v, v * 1000, True
        if lt in ("timestamp-micros", "local-timestamp-micros"):
            v = pick(MILLIS, i, s) * 1000 + (i % 1000)
            return v, v, True
        v = pick(LONGS, i, s)
        return v, v, True
    if typ == "float":
        v = struct.unpack("<f", struct.pack("<f", pick(DOUBLES[:2] + [0.1, 3.5, -1e30], i, s)))[0]
        return v, v, True
    if typ == "double":
        v = pick(DOUBLES, i, s)
        return v, v, True
    if typ == "string":
        if lt == "uuid":
            v = "6c0e4b2a-0000-4000-8000-%012d" % i
            return v, v, True
        v = pick(STRINGS, i, s)
        return v, v, True
    if typ == "bytes" and lt == "decimal" or typ == "fixed" and lt == "decimal":
        p, sc = t["precision"], t.get("scale", 0)
        mag = (i * 7919 + s) % (10 ** p)
        if i % 5 == 0:
            mag = 10 ** p - 1  # the largest magnitude the precision holds
        unscaled = -mag if i % 2 else mag
        d = decimal.Decimal(unscaled).scaleb(-sc)
        return d, str(decimal.Decimal(unscaled).scaleb(-sc)), True
    if typ == "bytes":
        v = bytes((i * 31 + k + s) % 256 for k in range(i % 6))
        return v, v.hex(), True
    if typ == "fixed":
        v = bytes((i * 17 + k + s) % 256 for k in range(t["size"]))
        return v, v.hex(), True
    if typ == "enum":
        v = pick(t["symbols"], i, s)
        return v, v, True
    if typ == "array":
        av, dv = [], []
        for k in range((i + s) % 4):
            a, d, _ = gen(t["items"], i * 4 + k, path + "[]", named)
            av.append(a)
            dv.append(d)
        return av, dv, True
    if typ == "map":
        av, dv = {}, {}
        for k in range((i + s) % 4):
            a, d, _ = gen(t["values"], i * 4 + k, path + "{}", named)
            key = "k%d-%s" % (k, pick(STRINGS, k, s))
            av[key] = a
            dv[key] = d
        return av, dv, True
    if typ == "record":
        av, dv = {}, {}
        for f in t["fields"]:
            a, d, present = gen(f["type"], i, path + "." + f["name"], named)
            av[f["name"]] = a
            if present:
                dv[f["name"]] = d
        return av, dv, True
    sys.exit("unsupported type %r at %s" % (t, path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--schemas", required=True)
    ap.add_argument("--topic-prefix", required=True)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    reg = SchemaRegistryClient({"url": a.registry})
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(str(err))

    p = SerializingProducer({"bootstrap.servers": a.brokers, "key.serializer": StringSerializer("utf_8"),
                             "value.serializer": lambda v, ctx: v, "enable.idempotence": True, "linger.ms": 20})
    produced = {}
    for path in sorted(glob.glob(os.path.join(a.schemas, "*.avsc"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            text = f.read()
        try:
            schema = json.loads(text)
        except ValueError:
            continue  # the invalid-JSON schema of the folder
        topic = a.topic_prefix + stem
        ser = AvroSerializer(reg, text, conf={"auto.register.schemas": True})
        from confluent_kafka.serialization import SerializationContext, MessageField
        ctx = SerializationContext(topic, MessageField.VALUE)
        with open(os.path.join(a.out, stem + ".jsonl"), "w") as out:
            for i in range(a.count):
                av, dv, _ = gen(schema, i, stem, {})
                p.produce(topic, key=str(i), value=ser(av, ctx), on_delivery=on_delivery)
                p.poll(0)
                out.write(json.dumps(dv, ensure_ascii=False) + "\n")
        produced[stem] = topic
    if p.flush(60) != 0:
        sys.exit("flush timed out")
    if failures:
        sys.exit("delivery failed: %s" % failures[0])
    print(json.dumps(produced))


if __name__ == "__main__":
    main()
