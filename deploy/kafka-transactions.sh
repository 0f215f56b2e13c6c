#!/usr/bin/env bash
# Inspect (and, as a last resort, abort) Kafka transactions on dphhh's development broker with
# Kafka's own TransactionsCommand.
#
#   bash deploy/kafka-transactions.sh find-hanging                # open transactions the coordinator forgot
#   bash deploy/kafka-transactions.sh list                        # transactional ids and their state
#   bash deploy/kafka-transactions.sh describe TRANSACTIONAL_ID
#   bash deploy/kafka-transactions.sh describe-producers TOPIC [PARTITION]
#   bash deploy/kafka-transactions.sh abort TOPIC PARTITION START_OFFSET
#
# Why: the job publishes reports and dead letters in Kafka transactions (one per checkpoint). If the
# broker is killed while it commits one, the restarted broker may finish that commit while the
# partition briefly has no leader and skip its commit marker ("Couldn't find leader endpoint ... can be
# skipped" in var/kafka/logs/server.log): the partition keeps an open transaction nobody will end and
# read_committed readers (dphhh reports, the dashboard) stall at it. find-hanging lists such
# transactions (topic, partition, producer, StartOffset). abort writes an ABORT marker at StartOffset:
# readers move on, but that transaction's records are dropped from the topic — a dropped report is
# still in the job's release ledger and reports file. docs/howto/troubleshoot.md, "Known limits".
#
# The broker must be running (deploy/kafka-start.sh); DPHHH_KAFKA_PORT / DPHHH_KAFKA_VAR /
# DPHHH_KAFKA_SECURITY pick it as for deploy/kafka-topics.sh. Each call starts a JVM (about 1-2 s).
set -euo pipefail
kafka_script=kafka-transactions
source "$(dirname "${BASH_SOURCE[0]}")/kafka/common.sh"

usage() {
  echo "usage: kafka-transactions.sh find-hanging | list | describe TRANSACTIONAL_ID" \
       "| describe-producers TOPIC [PARTITION] | abort TOPIC PARTITION START_OFFSET" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
cmd="$1"; shift

whole() {  # NAME VALUE: VALUE must be a non-negative integer
  [[ "$2" =~ ^[0-9]+$ ]] || kafka_die "$1 must be a non-negative integer, got '$2'"
}

case "$cmd" in  # arguments first: a usage error needs no broker
  find-hanging) [[ $# -eq 0 ]] || usage; args=(find-hanging) ;;
  list) [[ $# -eq 0 ]] || usage; args=(list) ;;
  describe) [[ $# -eq 1 ]] || usage; args=(describe --transactional-id "$1") ;;
  describe-producers)
    [[ $# -ge 1 && $# -le 2 ]] || usage
    whole PARTITION "${2:-0}"
    args=(describe-producers --topic "$1" --partition "${2:-0}")
    ;;
  abort)
    [[ $# -eq 3 ]] || usage
    whole PARTITION "$2"; whole START_OFFSET "$3"
    args=(abort --topic "$1" --partition "$2" --start-offset "$3")
    ;;
  *) usage ;;
esac

kafka_require_admin
if [[ "$cmd" == find-hanging ]]; then
  node_id="$(sed -n 's/^node\.id=\([0-9][0-9]*\)$/\1/p' "$kafka_config" | head -n1)"
  args+=(--broker-id "${node_id:-1}")
fi
kafka_admin_tool org.apache.kafka.tools.TransactionsCommand "${args[@]}"
