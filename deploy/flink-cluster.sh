#!/usr/bin/env bash
# A local standalone Flink session cluster from PyFlink's own distribution (the venv's pyflink/):
# one JobManager and N TaskManagers (1 slot each) on 127.0.0.1, REST on port 8081, Flink's
# Prometheus reporter on 9250-9269, Python workers run by the venv's Python.
#   bash deploy/flink-cluster.sh start [N]    # default N = 2 TaskManagers
#   bash deploy/flink-cluster.sh stop
#   bash deploy/flink-cluster.sh status
# Submit the job to it with `dphhh run --config deploy/flink-cluster/cluster.toml` (flink.remote).
# Configuration: deploy/flink-cluster/config.yaml (copied with PyFlink's other conf files into
# var/flink-cluster/conf); logs in var/flink-cluster/log.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${DPHHH_VENV_PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || { echo "flink-cluster: $python not found; run ./dphhh once to create the venv" >&2; exit 1; }
flink_home="$("$python" -c 'import os, pyflink; print(os.path.dirname(os.path.abspath(pyflink.__file__)))')"
state="$root/var/flink-cluster"
export FLINK_HOME="$flink_home" FLINK_CONF_DIR="$state/conf" FLINK_LOG_DIR="$state/log" FLINK_PID_DIR="$state/pid"
rest="http://127.0.0.1:8081"

up() { curl -sf "$rest/overview" >/dev/null 2>&1; }
taskmanagers() { curl -sf "$rest/overview" 2>/dev/null | "$python" -c 'import json,sys; print(json.load(sys.stdin)["taskmanagers"])' 2>/dev/null || echo 0; }

case "${1:-}" in
  start)
    n="${2:-2}"
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "flink-cluster: N must be a positive integer, got '$n'" >&2; exit 2; }
    if up; then echo "flink-cluster: already running ($rest, $(taskmanagers) TaskManager(s))"; exit 0; fi
    umask 077  # checkpoints (exact sketches, buffered elements) and logs are as private as raw input
    rm -rf "$state/conf" && mkdir -p "$state/conf" "$state/log" "$state/pid" "$state/checkpoints"
    chmod 700 "$state/checkpoints" "$state/log"
    cp "$flink_home"/conf/log4j*.properties "$flink_home"/conf/logback*.xml "$state/conf/"
    # no Kafka offsets (message counts) in the JobManager's and TaskManagers' logs
    for f in "$state"/conf/log4j.properties "$state"/conf/log4j-console.properties; do
      if [[ -f "$f" ]]; then { echo; cat "$here/flink/log4j-no-raw-counts.properties"; } >> "$f"; fi
    done
    sed -e "s#@PYTHON@#$python#g" -e "s#@CHECKPOINTS@#file://$state/checkpoints#g" "$here/flink-cluster/config.yaml" > "$state/conf/config.yaml"
    bash "$flink_home/bin/jobmanager.sh" start >"$state/log/start.out" 2>&1
    for _ in $(seq 1 "$n"); do bash "$flink_home/bin/taskmanager.sh" start >>"$state/log/start.out" 2>&1; done
    for _ in $(seq 1 120); do
      if up && [[ "$(taskmanagers)" -ge "$n" ]]; then
        echo "flink-cluster: running at $rest with $n TaskManager(s) (logs in $state/log)"; exit 0
      fi
      sleep 0.5
    done
    echo "flink-cluster: not ready after 60 s (logs in $state/log)" >&2; exit 1 ;;
  stop)
    bash "$flink_home/bin/taskmanager.sh" stop-all >/dev/null 2>&1 || true
    bash "$flink_home/bin/jobmanager.sh" stop-all >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do up || { echo "flink-cluster: stopped"; exit 0; }; sleep 0.5; done
    echo "flink-cluster: still answering after 30 s" >&2; exit 1 ;;
  status)
    if up; then echo "flink-cluster: running at $rest with $(taskmanagers) TaskManager(s)"; else echo "flink-cluster: not running"; exit 1; fi ;;
  *) echo "usage: flink-cluster.sh start [N] | stop | status" >&2; exit 2 ;;
esac
