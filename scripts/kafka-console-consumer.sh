#!/usr/bin/env bash
# kafka-console-consumer.sh: Kafka's kafka-console-consumer.sh (print a topic's records (headers with --property print.headers=true)) from the stack's jars; see kafka-tool.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-tool.sh" org.apache.kafka.tools.consumer.ConsoleConsumer "$@"
