"""Produce one topic per registry format with confluent-kafka's own serializers
(ProtobufSerializer, JSONSerializer, AvroSerializer: clients ingestd did not write), through
a real schema registry's Confluent-compatible API, and print what was sent as JSON.

usage: produce_interop.py --brokers B --registry URL --protobuf T1 --json-schema T2 --avro T3

Every serializer registers its schema itself (auto.register.schemas, the default): the
Protobuf one as the base64 of its FileDescriptorProto, which Apicurio's Confluent-compatible
API serves back as it was sent; the framing (magic byte 0, the 4-byte schema id, the
message-index array the serializer derives from the descriptor) is all the serializer's own.

Records: two Order records (index array [1]: the file's second message) and one Order.Line
record ([1, 0]: the first message nested in the second). Values are the constants below.

Output (stdout): {"protobuf": [{"id": schema id, "prefix": hex of the bytes before the
body}, ...], "json_schema": [...], "avro": [...]}, one entry per record in produce order.
"""
import argparse
import datetime
import decimal
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass

UTC = datetime.timezone.utc
F = descriptor_pb2.FieldDescriptorProto

ORDERS_PROTO = """syntax = "proto3";
package interop;
import "google/protobuf/timestamp.proto";
message Header { string source = 1; }
message Order {
  message Line { string sku = 1; int32 qty = 2; }
  enum Kind { KIND_UNSPECIFIED = 0; RETAIL = 1; WHOLESALE = 2; }
  int64 id = 1;
  google.protobuf.Timestamp at = 2;
  repeated Line lines = 3;
  Line first = 4;
  optional string note = 5;
  Kind kind = 6;
  sint32 delta = 7;
}
"""


def orders_file():
    """The FileDescriptorProto of ORDERS_PROTO, as protoc builds it (file interop/orders.proto)."""
    fd = descriptor_pb2.FileDescriptorProto(
        name="interop/orders.proto", package="interop", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"])
    hdr = fd.message_type.add(name="Header")
    hdr.field.add(name="source", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="source")
    order = fd.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="sku")
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, json_name="qty")
    kind = order.enum_type.add(name="Kind")
    for i, n in enumerate(["KIND_UNSPECIFIED", "RETAIL", "WHOLESALE"]):
        kind.value.add(name=n, number=i)
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, json_name="id")
    order.field.add(name="at", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".google.protobuf.Timestamp", json_name="at")
    order.field.add(name="lines", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                    type_name=".interop.Order.Line", json_name="lines")
    order.field.add(name="first", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".interop.Order.Line", json_name="first")
    # proto3 `optional`: a synthetic oneof holds the field.
    order.oneof_decl.add(name="_note")
    order.field.add(name="note", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                    proto3_optional=True, oneof_index=0, json_name="note")
    order.field.add(name="kind", number=6, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                    type_name=".interop.Order.Kind", json_name="kind")
    order.field.add(name="delta", number=7, type=F.TYPE_SINT32, label=F.LABEL_OPTIONAL, json_name="delta")
    return fd


def protobuf_classes():
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    pool.Add(ts)
    pool.Add(orders_file())
    return (GetMessageClass(pool.FindMessageTypeByName("interop.Order")),
            GetMessageClass(pool.FindMessageTypeByName("interop.Order.Line")))


JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "sensor": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "value": {"type": "number"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "loc": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"]},
        "note": {"type": ["string", "null"]},
    },
    "required": ["id", "sensor"],
})

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "Payment", "namespace": "interop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "payer", "type": {"type": "record", "name": "Party",
                                   "fields": [{"name": "name", "type": "string"},
                                              {"name": "iban", "type": ["null", "string"], "default": None}]}},
        {"name": "method", "type": {"type": "enum", "name": "Method", "symbols": ["CARD", "SEPA", "CASH"]}},
        {"name": "fee", "type": ["null", "double"], "default": None},
        {"name": "raw", "type": "bytes"},
    ],
})


def uvarint(b, i):
    """The unsigned varint at b[i] and the offset after it."""
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--protobuf", required=True, help="topic of the Protobuf records")
    ap.add_argument("--json-schema", required=True, help="topic of the JSON Schema records")
    ap.add_argument("--avro", required=True, help="topic of the Avro records")
    a = ap.parse_args()
    reg = SchemaRegistryClient({"url": a.registry})
    order_cls, line_cls = protobuf_classes()
    pb_conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    pb_order = ProtobufSerializer(order_cls, reg, pb_conf)
    pb_line = ProtobufSerializer(line_cls, reg, pb_conf)

    o1 = order_cls(id=1, kind=1, delta=-3, note="")
    o1.at.FromDatetime(datetime.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC))
    o1.lines.add(sku="a", qty=2)
    o1.lines.add(sku="b", qty=-7)
    o1.first.sku, o1.first.qty = "a", 2
    o2 = order_cls(id=2)  # every field unset: zero values, NULL for presence fields
    l3 = line_cls(sku="solo", qty=9)

    js = JSONSerializer(JSON_SCHEMA, reg, conf={"auto.register.schemas": True})
    js_records = [
        {"id": 10, "sensor": "s-1", "at": "2024-05-01T12:00:00.25+02:00", "day": "2024-05-01",
         "value": 21.5, "ok": True, "tags": ["a", "b"], "loc": {"lat": 52.52, "lon": 13.405}, "note": "é"},
        {"id": 11, "sensor": "s-2", "note": None},
    ]
    av = AvroSerializer(reg, AVRO_SCHEMA, conf={"auto.register.schemas": True})
    av_records = [
        {"id": 20, "amount": decimal.Decimal("-123456789.125"),
         "at": datetime.datetime(2024, 5, 1, 10, 0, 0, 654321, tzinfo=UTC),
         "day": datetime.date(2024, 2, 29), "payer": {"name": "Zoë", "iban": "DE00"},
         "method": "SEPA", "fee": 0.25, "raw": b"\x00\xff"},
        {"id": 21, "amount": decimal.Decimal("0.001"),
         "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
         "day": datetime.date(1970, 1, 1), "payer": {"name": "", "iban": None},
         "method": "CASH", "fee": None, "raw": b""},
    ]

    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(str(err))

    p = Producer({"bootstrap.servers": a.brokers, "enable.idempotence": True})
    out = {"protobuf": [], "json_schema": [], "avro": []}

    def send(kind, topic, ser, value):
        b = ser(value, SerializationContext(topic, MessageField.VALUE))
        body_at = 5
        if kind == "protobuf":
            # The index array: a zig-zag varint count (0 is [0]), then that many varints.
            count, body_at = uvarint(b, 5)
            for _ in range((count >> 1) ^ -(count & 1)):
                _, body_at = uvarint(b, body_at)
        out[kind].append({"id": int.from_bytes(b[1:5], "big"), "prefix": b[:body_at].hex()})
        p.produce(topic, value=b, on_delivery=on_delivery)

    for m, ser in ((o1, pb_order), (o2, pb_order), (l3, pb_line)):
        send("protobuf", a.protobuf, ser, m)
    for r in js_records:
        send("json_schema", a.json_schema, js, r)
    for r in av_records:
        send("avro", a.avro, av, r)
    if p.flush(60) != 0 or failures:
        sys.exit("produce failed: %s" % (failures or "flush timed out"))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
