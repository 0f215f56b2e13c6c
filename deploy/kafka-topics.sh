#!/usr/bin/env bash
# Manage topics on dphhh's development Kafka broker with Kafka's own TopicCommand.
#
#   bash deploy/kafka-topics.sh create NAME [PARTITIONS]   # idempotent; PARTITIONS defaults to 1
#   bash deploy/kafka-topics.sh list
#   bash deploy/kafka-topics.sh describe [NAME]
#   bash deploy/kafka-topics.sh delete NAME                # idempotent
#
# The broker must be running (deploy/kafka-start.sh); DPHHH_KAFKA_PORT picks its port (default
# 9092), DPHHH_KAFKA_VAR / DPHHH_KAFKA_SECURITY a secured test broker (see kafka-start.sh). Replication factor is always 1 (one broker). Each call starts a JVM (about 1-2 s); from
# Python, kafka-python's KafkaAdminClient does the same without it.
set -euo pipefail
kafka_script=kafka-topics
source "$(dirname "${BASH_SOURCE[0]}")/kafka/common.sh"

usage() {
  echo "usage: kafka-topics.sh create NAME [PARTITIONS] | list | describe [NAME] | delete NAME" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
cmd="$1"; shift

valid_name() {
  [[ "$1" =~ ^[A-Za-z0-9._-]{1,249}$ ]] \
    || kafka_die "invalid topic name '$1' (letters, digits, '.', '_', '-'; at most 249)"
}

kafka_require_admin
topics() { kafka_admin_tool org.apache.kafka.tools.TopicCommand "$@"; }

case "$cmd" in
  create)
    [[ $# -ge 1 && $# -le 2 ]] || usage
    valid_name "$1"
    partitions="${2:-1}"
    [[ "$partitions" =~ ^[1-9][0-9]*$ ]] || kafka_die "PARTITIONS must be a positive integer, got '$partitions'"
    topics --create --if-not-exists --topic "$1" --partitions "$partitions" --replication-factor 1
    ;;
  list)
    [[ $# -eq 0 ]] || usage
    topics --list
    ;;
  describe)
    [[ $# -le 1 ]] || usage
    if [[ $# -eq 1 ]]; then valid_name "$1"; topics --describe --topic "$1"; else topics --describe; fi
    ;;
  delete)
    [[ $# -eq 1 ]] || usage
    valid_name "$1"
    topics --delete --if-exists --topic "$1"
    ;;
  *) usage ;;
esac
