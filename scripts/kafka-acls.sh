#!/usr/bin/env bash
# kafka-acls.sh: Kafka's kafka-acls.sh (add, list and remove ACLs) from the stack's jars; see kafka-tool.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-tool.sh" org.apache.kafka.tools.AclCommand "$@"
