#!/usr/bin/env python3
"""Create the empty Delta table kafka-delta-ingest writes into (it cannot create one), with
delta-rs, in the schema ingestd derives from the benchmark record (cmd/benche2e, record.go):
id long, name string, score double, active boolean, ts timestamp (UTC, micros), note string
(nullable), count int, amount double, kind string (the Avro enum), tags array<string>.

Usage: create_table.py TABLE_DIR
"""
import os
import sys

import pyarrow as pa
from deltalake import DeltaTable

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string(), nullable=False),
    pa.field("score", pa.float64(), nullable=False),
    pa.field("active", pa.bool_(), nullable=False),
    pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("note", pa.string()),
    pa.field("count", pa.int32(), nullable=False),
    pa.field("amount", pa.float64(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
    pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
])

if __name__ == "__main__":
    DeltaTable.create(sys.argv[1], schema=SCHEMA)
    # Leave without running interpreter teardown: delta-rs' runtime threads can abort the
    # process ("terminate called without an active exception", delta-io/delta-rs#2184) while it
    # shuts down, after the work is done.
    sys.stdout.flush()
    os._exit(0)
