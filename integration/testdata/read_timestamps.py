"""Print the timestamps the broker holds for partition 0 of a topic, read with librdkafka
(not franz-go, which converts through nanoseconds): one JSON array of
{"offset": N, "type": "create_time" | "log_append_time" | "none", "ms": N}.

usage: read_timestamps.py --brokers B --topic T --count N
"""
import argparse
import json
import sys

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition


def main():
    ap = argparse.ArgumentParser()
    for a in ("--brokers", "--topic", "--count"):
        ap.add_argument(a, required=True)
    a = ap.parse_args()
    c = Consumer({"bootstrap.servers": a.brokers, "group.id": "read-timestamps", "enable.auto.commit": False})
    c.assign([TopicPartition(a.topic, 0, 0)])
    out = []
    while len(out) < int(a.count):
        m = c.poll(30)
        if m is None:
            sys.exit("read %d of %s records" % (len(out), a.count))
        if m.error():
            sys.exit(str(m.error()))
        kind, ms = m.timestamp()
        out.append({"offset": m.offset(), "ms": ms, "type": {TIMESTAMP_CREATE_TIME: "create_time",
                    TIMESTAMP_LOG_APPEND_TIME: "log_append_time"}.get(kind, "none")})
    c.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
