#!/usr/bin/env bash
# kafka-topics.sh: Kafka's kafka-topics.sh (create, list, describe and alter topics) from the stack's jars; see kafka-tool.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-tool.sh" org.apache.kafka.tools.TopicCommand "$@"
