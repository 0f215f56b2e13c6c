#!/usr/bin/env bash
# Stop dphhh's development Kafka broker started by deploy/kafka-start.sh.
#
#   bash deploy/kafka-stop.sh
#
# Sends SIGTERM (a controlled shutdown that flushes the logs), waits up to
# DPHHH_KAFKA_STOP_TIMEOUT seconds (default 30), then SIGKILLs. Removes var/kafka/kafka.pid.
# Idempotent: succeeds and says so when the broker is not running. Data in var/kafka/data is kept.
# A second broker (DPHHH_KAFKA_VAR, ports: see kafka-start.sh) is stopped with the same variables.
set -euo pipefail
kafka_script=kafka-stop
source "$(dirname "${BASH_SOURCE[0]}")/kafka/common.sh"

[[ $# -eq 0 ]] || kafka_die "takes no arguments"
timeout_s="$(kafka_seconds DPHHH_KAFKA_STOP_TIMEOUT 30)"

if ! pid="$(kafka_running_pid)"; then
  echo "kafka-stop: not running"
  exit 0
fi

kill -TERM "$pid" 2>/dev/null || true
deadline=$(( $(date +%s) + timeout_s ))
while kill -0 "$pid" 2>/dev/null; do
  if (( $(date +%s) >= deadline )); then
    echo "kafka-stop: pid $pid still running after ${timeout_s} s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
    break
  fi
  sleep 0.2
done
rm -f "$kafka_pid_file"
echo "kafka-stop: stopped (pid $pid)"
