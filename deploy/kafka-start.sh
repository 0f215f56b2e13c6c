#!/usr/bin/env bash
# Start dphhh's single-node Kafka 4 broker (KRaft, broker + controller in one JVM) in the background.
#
#   bash deploy/kafka-start.sh          # then clients use bootstrap servers 127.0.0.1:9092
#
# Environment (all optional):
#   DPHHH_KAFKA_PORT             client port                          (default 9092)
#   DPHHH_KAFKA_CONTROLLER_PORT  controller port                      (default 9093)
#   DPHHH_KAFKA_HEAP             JVM heap options        (default "-Xms256m -Xmx512m")
#   DPHHH_KAFKA_START_TIMEOUT    seconds to wait until it is ready    (default 60)
#   DPHHH_KAFKA_VAR              its folder (data, logs, pid)         (default var/kafka)
#   DPHHH_KAFKA_SECURITY         plaintext | sasl_ssl                 (default plaintext)
#
# A second, independent broker (e.g. a secured one for tests) needs its own DPHHH_KAFKA_VAR and
# ports; stop it with the same variables. With DPHHH_KAFKA_SECURITY=sasl_ssl the client listener is
# SASL_SSL (mechanism PLAIN, user "dphhh"); deploy/kafka/security.sh makes, once, a CA (clients
# trust $DPHHH_KAFKA_VAR/secrets/ca.pem), the broker's certificate and random passwords (the
# client's in secrets/client.password, mode 600), and deploy/kafka/sasl-ssl.properties is added to
# the generated server.properties (then mode 600: it holds the passwords).
#
# Idempotent: does nothing if the broker of this checkout is already running. On first use it
# fetches the jars (deploy/fetch-jars.sh) and formats the storage in var/kafka/data once; data
# persists across restarts (delete var/kafka/data, broker stopped, for a clean slate). Files:
#   var/kafka/server.properties   generated from deploy/kafka/server.properties (ports filled in)
#   var/kafka/kafka.pid           the broker's pid
#   var/kafka/logs/server.log     the broker's log (log4j2: deploy/kafka/log4j2.properties)
#   var/kafka/logs/kafka.out      JVM stdout/stderr (crashes before logging starts)
# Stop it with deploy/kafka-stop.sh. Exits 0 once the broker accepts clients, 1 otherwise.
set -euo pipefail
kafka_script=kafka-start
source "$(dirname "${BASH_SOURCE[0]}")/kafka/common.sh"

[[ $# -eq 0 ]] || kafka_die "takes no arguments (configure it with DPHHH_KAFKA_* variables)"
timeout_s="$(kafka_seconds DPHHH_KAFKA_START_TIMEOUT 60)"

if pid="$(kafka_running_pid)"; then
  echo "kafka-start: already running (pid $pid, $(grep -o "$kafka_listener_name://[^,]*" "$kafka_config" | head -n1))"
  exit 0
fi

kafka_require_java
bash "$deploy_dir/fetch-jars.sh"

for port in "$kafka_port" "$kafka_controller_port"; do
  if kafka_port_open "$port"; then
    kafka_die "port $port on 127.0.0.1 is already in use by another process; stop it or choose other ports with DPHHH_KAFKA_PORT / DPHHH_KAFKA_CONTROLLER_PORT"
  fi
done

umask 077  # the log segments hold raw input and dead letters; server.properties may hold passwords
mkdir -p "$kafka_data" "$kafka_logs"
chmod 700 "$kafka_data" "$kafka_logs"
if [[ "$kafka_security" == sasl_ssl ]]; then
  source "$kafka_conf_dir/security.sh"
  kafka_security_material
fi
sed -e "s#@KAFKA_PORT@#$kafka_port#g" \
    -e "s#@CONTROLLER_PORT@#$kafka_controller_port#g" \
    -e "s#@DATA_DIR@#$kafka_data#g" \
    "$kafka_conf_dir/server.properties" >"$kafka_config.tmp"
if [[ "$kafka_security" == sasl_ssl ]]; then
  kafka_security_overlay >>"$kafka_config.tmp"
fi
mv "$kafka_config.tmp" "$kafka_config"

# Format the storage once (KRaft needs a cluster id and a bootstrap metadata snapshot).
if [[ ! -f "$kafka_data/meta.properties" ]]; then
  cluster_id="$(kafka_tool kafka.tools.StorageTool random-uuid)"
  if ! kafka_tool kafka.tools.StorageTool format --cluster-id "$cluster_id" --config "$kafka_config" \
       >"$kafka_logs/format.log" 2>&1; then
    cat "$kafka_logs/format.log" >&2
    kafka_die "formatting $kafka_data failed"
  fi
  echo "kafka-start: formatted $kafka_data (cluster id $cluster_id)"
fi

# Remember where this run's log starts, to look for its readiness line only.
log_file="$kafka_logs/server.log"
log_offset=$(( $(stat -c %s "$log_file" 2>/dev/null || echo 0) + 1 ))

start_ms=$(( $(date +%s%N) / 1000000 ))
# setsid + nohup: the broker outlives this script and ignores the terminal's Ctrl-C and hang-up.
# shellcheck disable=SC2086  # DPHHH_KAFKA_HEAP is a list of JVM options
nohup setsid java ${DPHHH_KAFKA_HEAP:--Xms256m -Xmx512m} \
  -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
  -Djava.awt.headless=true \
  -Dkafka.logs.dir="$kafka_logs" \
  -Dlog4j2.configurationFile="$kafka_conf_dir/log4j2.properties" \
  -cp "$kafka_jars/*" kafka.Kafka "$kafka_config" \
  >"$kafka_logs/kafka.out" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$kafka_pid_file"

fail() {
  echo "kafka-start: $1; last lines of $log_file:" >&2
  tail -c +"$log_offset" "$log_file" 2>/dev/null | tail -n 25 >&2 || true
  if [[ -s "$kafka_logs/kafka.out" ]]; then
    echo "--- $kafka_logs/kafka.out:" >&2
    tail -n 15 "$kafka_logs/kafka.out" >&2
  fi
  exit 1
}

# Ready = the client port accepts connections and the server logged that it has started.
deadline=$(( $(date +%s) + timeout_s ))
until kafka_port_open "$kafka_port" \
      && tail -c +"$log_offset" "$log_file" 2>/dev/null | grep -q "Kafka Server started"; do
  # the log was rolled over (50 MB) since start-up began: this run's lines start the new file
  (( $(stat -c %s "$log_file" 2>/dev/null || echo 0) + 1 >= log_offset )) || log_offset=1
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$kafka_pid_file"
    fail "the broker exited during start-up"
  fi
  if (( $(date +%s) >= deadline )); then
    bash "$deploy_dir/kafka-stop.sh" >/dev/null  # do not leave a half-started broker behind
    fail "the broker was not ready after ${timeout_s} s (stopped it again; raise DPHHH_KAFKA_START_TIMEOUT?)"
  fi
  sleep 0.25
done
elapsed_ms=$(( $(date +%s%N) / 1000000 - start_ms ))
printf 'kafka-start: ready on %s in %d.%d s (pid %s, logs in %s)\n' \
  "$kafka_bootstrap" $(( elapsed_ms / 1000 )) $(( elapsed_ms % 1000 / 100 )) "$pid" "$kafka_logs"
