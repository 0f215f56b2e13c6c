#!/usr/bin/env bash
# The real flow-telemetry chain into Kafka: softflowd -> NetFlow/IPFIX over loopback UDP -> nfacctd
# (pmacct) -> its kafka plugin -> JSON flow records on a Kafka topic: dphhh's flow-json input
# (decoder connectors/flow_json.py, schema "pmacct"; goflow2's JSON is schema "goflow2").
#
#   bash deploy/flow-pipeline.sh start [--capture FILE] [options]   # collector up; FILE replayed into it
#   bash deploy/flow-pipeline.sh replay --capture FILE               # export one more capture into it
#   bash deploy/flow-pipeline.sh status                              # exit 0 running, 3 stopped
#   bash deploy/flow-pipeline.sh stop                                # stops everything start started
#
# Example, on the local development broker:
#   bash deploy/install-flow-tools.sh          # once: Debian's softflowd and pmacct
#   bash deploy/kafka-start.sh
#   bash deploy/flow-pipeline.sh start --topic dphhh-flows --capture data/pcaps/amp.UDP.isakmp.pcap
#     flow-pipeline: nfacctd listening on 127.0.0.1:9995 (IPFIX/NetFlow), publishing JSON to dphhh-flows on 127.0.0.1:9092
#     flow-pipeline: softflowd exported amp.UDP.isakmp.pcap: 3978 flows (3984 packets, 924288 bytes) in 150 IPFIX datagrams
#     flow-pipeline: nfacctd published 3978 flow records to dphhh-flows
#   bash deploy/flow-pipeline.sh stop
#
# Options (each also as an environment variable; the option wins):
#   --capture FILE             pcap/pcapng file softflowd reads (-r) and exports; start without it
#                              leaves the collector waiting for any exporter (a router, softflowd -i)
#   --topic NAME               DPHHH_FLOW_TOPIC      Kafka topic            (default dphhh-flows)
#   --bootstrap HOST:PORT      DPHHH_FLOW_BOOTSTRAP  Kafka broker           (default 127.0.0.1:$DPHHH_KAFKA_PORT or :9092)
#   --listen IP                DPHHH_FLOW_LISTEN     collector's UDP address (default 127.0.0.1)
#   --port N                   DPHHH_FLOW_PORT       collector's UDP port    (default 9995)
#   --netflow-version 10|9     DPHHH_FLOW_VERSION    softflowd's export protocol: 10 = IPFIX (default), 9
#   --collector nfacctd|goflow2  DPHHH_FLOW_COLLECTOR  (default nfacctd; goflow2: see below)
#   --refresh SECONDS          DPHHH_FLOW_REFRESH    how often the collector publishes (default 5)
#   --timestamps utc|rfc3339|epoch  DPHHH_FLOW_TIMESTAMPS  nfacctd's time format (default utc)
#   --nfacctd-option 'KEY: VALUE'   (repeatable; DPHHH_FLOW_NFACCTD_OPTIONS, one per line) appended
#                              to the generated nfacctd.conf, e.g. 'kafka_history[flows]: 1m'
#   DPHHH_FLOW_VAR             run directory (default var/flow-pipeline): nfacctd.conf, pid files, logs
#   DPHHH_FLOW_STOP_TIMEOUT    seconds stop waits before SIGKILL (default 20)
#
# What start does: checks the tools (bash deploy/install-flow-tools.sh installs them), that the
# UDP port is free and the broker answers; creates the topic if it is missing (with the venv's
# kafka-python: deploy/kafka's broker does not auto-create topics, and nfacctd's plugin drops the
# records it cannot deliver); generates $DPHHH_FLOW_VAR/nfacctd.conf (plugin kafka[flows], output
# json, aggregate src_host, dst_host, proto, src_port, dst_port, timestamp_start, timestamp_end;
# packets and bytes are always published); starts nfacctd in the background; with --capture, runs
# `softflowd -d -r FILE -n 127.0.0.1:PORT -v 10 -a -A milli` once (it exits when the file is
# exported) and waits for nfacctd's next cache purge to Kafka, printing the counts. The collector
# keeps running (and publishing what exporters send) until stop.
#
# The records (one JSON object per Kafka message), as nfacctd 1.7.7 publishes them:
#   {"event_type": "purge", "ip_src": "192.0.2.10", "ip_dst": "198.51.100.7", "port_src": 5353,
#    "port_dst": 53, "ip_proto": "udp", "timestamp_start": "2026-11-30 01:55:00.250000",
#    "timestamp_end": "2026-11-30 01:55:00.370000", "packets": 3, "bytes": 204, "writer_id": "flows/3250"}
# IPv4 and IPv6 flows share the topic. Times are the flows' own (from the capture: softflowd -a
# keeps the capture's clock, -A milli exports absolute millisecond times), in UTC (timestamps_utc:
# without it pmacct writes the collector's local time with no zone); --timestamps rfc3339 gives
# "2026-11-30T01:55:00.250000Z", epoch gives "1796003700.250000" (a string).
#
# Facts this script works around (Debian 12: softflowd 1.1.0, pmacct 1.7.7, librdkafka 2.0.2):
# * nfacctd (daemonized) keeps SIGTERM blocked; it stops on SIGINT, and only once its receive loop
#   wakes up: stop
#   sends SIGINT and then a 4-byte datagram to the collector port (the final purge then publishes
#   what is left, ~3 s), SIGKILL after DPHHH_FLOW_STOP_TIMEOUT.
# * nfacctd binds with SO_REUSEPORT: a second collector on the same port would silently take a
#   share of the datagrams, so start refuses a port that is in use.
# * plugin_buffer_size is left unset: with a transfer buffer the core keeps the last, partly
#   filled buffer until more data arrives (the last ~72 flows of a capture were never published).
# * softflowd -r sends the whole capture in one burst: nfacctd_pipe_size asks for a 4 MiB socket
#   buffer (with the kernel default, 208 KiB, a plain receiver lost 35 of 127 datagrams).
# * softflowd 1.1.0 -r with -c PATH (a control socket of its own) garbles the capture's file name
#   and hangs: the script passes no -c (none is opened when reading a file).
# * softflowd 1.1.0's NetFlow v9 header counts only the data records (3 in a datagram that also
#   carries 4 templates and an options template and record): nfacctd and goflow2 both published
#   nothing of an export that fits in one datagram (a capture of a few flows), while multi-datagram
#   exports arrived whole. IPFIX (-v 10, the default) is exact: each bundled capture's flows arrived
#   with their packet and byte totals intact.
#
# --collector goflow2: github.com/netsampler/goflow2 v2 instead of nfacctd (build it with
# `bash deploy/install-flow-tools.sh goflow2`, or set DPHHH_GOFLOW2 to a binary); it publishes its
# own JSON (input.flow_schema = "goflow2": src_addr, dst_addr, bytes, packets, time_flow_start_ns,
# ...). It keeps the kernel's default socket buffer, so a large capture loses datagrams in
# softflowd's burst (2,442 of amp.UDP.isakmp.pcap's 3,978 flows arrived here); small ones are exact.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
me=flow-pipeline

die() { echo "$me: $*" >&2; exit 1; }
usage() {
  echo "usage: flow-pipeline.sh start [--capture FILE] [--topic NAME] [--bootstrap HOST:PORT] [--listen IP] [--port N]" >&2
  echo "                         [--netflow-version 10|9] [--collector nfacctd|goflow2] [--refresh S]" >&2
  echo "                         [--timestamps utc|rfc3339|epoch] [--nfacctd-option 'KEY: VALUE' ...]" >&2
  echo "       flow-pipeline.sh replay --capture FILE | status | stop" >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
cmd="$1"; shift
case "$cmd" in start|replay|status|stop) ;; -h|--help|help) usage ;; *) echo "$me: unknown command '$cmd'" >&2; usage ;; esac

capture=""
topic="${DPHHH_FLOW_TOPIC:-dphhh-flows}"
bootstrap="${DPHHH_FLOW_BOOTSTRAP:-127.0.0.1:${DPHHH_KAFKA_PORT:-9092}}"
listen="${DPHHH_FLOW_LISTEN:-127.0.0.1}"
port="${DPHHH_FLOW_PORT:-9995}"
version="${DPHHH_FLOW_VERSION:-10}"
collector="${DPHHH_FLOW_COLLECTOR:-nfacctd}"
refresh="${DPHHH_FLOW_REFRESH:-5}"
timestamps="${DPHHH_FLOW_TIMESTAMPS:-utc}"
nfacctd_options=()
if [[ -n "${DPHHH_FLOW_NFACCTD_OPTIONS:-}" ]]; then
  while IFS= read -r line; do [[ -z "$line" ]] || nfacctd_options+=("$line"); done <<<"$DPHHH_FLOW_NFACCTD_OPTIONS"
fi
while [[ $# -gt 0 ]]; do
  opt="$1"
  [[ $# -ge 2 ]] || { echo "$me: option $opt needs a value" >&2; usage; }
  case "$opt" in
    --capture) capture="$2" ;;
    --topic) topic="$2" ;;
    --bootstrap) bootstrap="$2" ;;
    --listen) listen="$2" ;;
    --port) port="$2" ;;
    --netflow-version) version="$2" ;;
    --collector) collector="$2" ;;
    --refresh) refresh="$2" ;;
    --timestamps) timestamps="$2" ;;
    --nfacctd-option) nfacctd_options+=("$2") ;;
    *) echo "$me: unknown option '$opt'" >&2; usage ;;
  esac
  shift 2
done

run_dir="${DPHHH_FLOW_VAR:-$root/var/flow-pipeline}"
[[ "$run_dir" = /* ]] || run_dir="$root/$run_dir"
state="$run_dir/pipeline.env"
stop_timeout="${DPHHH_FLOW_STOP_TIMEOUT:-20}"
[[ "$stop_timeout" =~ ^[0-9]+$ ]] || die "DPHHH_FLOW_STOP_TIMEOUT must be a whole number of seconds, got '$stop_timeout'"

# --- validation ---------------------------------------------------------------------------
check_settings() {
  [[ "$port" =~ ^[0-9]+$ ]] && (( port >= 1 && port <= 65535 )) || die "--port must be a UDP port number (1-65535), got '$port'"
  [[ "$topic" =~ ^[A-Za-z0-9._-]{1,249}$ ]] || die "invalid topic name '$topic' (letters, digits, '.', '_', '-'; at most 249)"
  [[ "$bootstrap" =~ ^([A-Za-z0-9._-]+):([0-9]{1,5})$ ]] || die "--bootstrap must be HOST:PORT (one broker), got '$bootstrap'"
  kafka_host="${BASH_REMATCH[1]}"; kafka_port="${BASH_REMATCH[2]}"
  [[ "$listen" =~ ^[0-9.]+$|^[0-9A-Fa-f:]+$ ]] || die "--listen must be an IP address, got '$listen'"
  case "$version" in 9|10) ;; *) die "--netflow-version must be 10 (IPFIX) or 9, got '$version'" ;; esac
  case "$collector" in nfacctd|goflow2) ;; *) die "--collector must be nfacctd or goflow2, got '$collector'" ;; esac
  [[ "$refresh" =~ ^[1-9][0-9]*$ ]] || die "--refresh must be a whole number of seconds >= 1, got '$refresh'"
  case "$timestamps" in utc|rfc3339|epoch) ;; *) die "--timestamps must be utc, rfc3339 or epoch, got '$timestamps'" ;; esac
  [[ -z "$capture" || ( -f "$capture" && -r "$capture" ) ]] || die "capture '$capture' is not a readable file"
  local o
  for o in "${nfacctd_options[@]+"${nfacctd_options[@]}"}"; do
    [[ "$o" =~ ^[A-Za-z0-9_]+(\[[A-Za-z0-9_]+\])?:\ *[^[:cntrl:]]+$ ]] || die "--nfacctd-option must look like 'key: value' or 'key[flows]: value', got '$o'"
  done
}

# --- processes ------------------------------------------------------------------------------
# pid_alive FILE NAME: prints the pid in FILE if it is a live process whose command line names NAME.
pid_alive() {
  local pid
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$2" || return 1
  echo "$pid"
}
collector_pid() {
  pid_alive "$run_dir/nfacctd.pid" nfacctd || pid_alive "$run_dir/goflow2.pid" goflow2
}
udp_in_use() {  # PORT: something is bound to this UDP port (any address)
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Hlun "( sport = :$1 )" 2>/dev/null)" ]]
  else
    ! python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", int(sys.argv[1])))' "$1" 2>/dev/null
  fi
}
wake() {  # a 4-byte datagram (too short for NetFlow, dropped): nfacctd handles a pending SIGINT once its receive loop returns
  local to="$1"
  [[ "$to" == 0.0.0.0 ]] && to=127.0.0.1
  [[ "$to" == :: ]] && to=::1
  { printf '\0\0\0\0' >"/dev/udp/$to/$2"; } 2>/dev/null || true
}
python_with_kafka() {
  local py
  for py in "$root/.venv/bin/python" python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import kafka' 2>/dev/null; then echo "$py"; return 0; fi
  done
  return 1
}

ensure_topic() {
  local py
  if ! py="$(python_with_kafka)"; then
    echo "$me: warning: no python with kafka-python (./dphhh creates .venv): cannot check that topic '$topic' exists; create it first (deploy/kafka-topics.sh create $topic)" >&2
    return 0
  fi
  "$py" - "$bootstrap" "$topic" <<'PY' || die "could not create or find topic '$topic' on $bootstrap (see above)"
import sys
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError
bootstrap, topic = sys.argv[1], sys.argv[2]
admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="flow-pipeline", request_timeout_ms=10000)
try:
    if topic not in admin.list_topics():
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
            print(f"flow-pipeline: created topic {topic} (1 partition)")
        except TopicAlreadyExistsError:
            pass
finally:
    admin.close()
PY
}

write_nfacctd_conf() {
  local conf="$run_dir/nfacctd.conf" o
  {
    echo "! generated by deploy/flow-pipeline.sh start: do not edit (regenerated on each start)"
    echo "daemonize: true"
    echo "pidfile: $run_dir/nfacctd.pid"
    echo "logfile: $run_dir/nfacctd.log"
    echo "nfacctd_ip: $listen"
    echo "nfacctd_port: $port"
    echo "! a 4 MiB socket buffer: softflowd -r exports a whole capture in one burst"
    echo "nfacctd_pipe_size: 4194304"
    echo "! the flows' own times, not their arrival at the collector"
    echo "nfacctd_time_new: false"
    case "$timestamps" in
      utc) echo "timestamps_utc: true" ;;
      rfc3339) echo "timestamps_utc: true"; echo "timestamps_rfc3339: true" ;;
      epoch) echo "timestamps_since_epoch: true" ;;
    esac
    echo "plugins: kafka[flows]"
    echo "aggregate[flows]: src_host, dst_host, proto, src_port, dst_port, timestamp_start, timestamp_end"
    echo "kafka_output[flows]: json"
    echo "kafka_topic[flows]: $topic"
    echo "kafka_broker_host[flows]: $kafka_host"
    echo "kafka_broker_port[flows]: $kafka_port"
    echo "kafka_refresh_time[flows]: $refresh"
    echo "! no plugin_buffer_size: a transfer buffer would hold back the last flows until more arrive"
    echo "plugin_pipe_size[flows]: 40960000"
    for o in "${nfacctd_options[@]+"${nfacctd_options[@]}"}"; do echo "$o"; done
  } >"$conf"
}

start_nfacctd() {
  command -v nfacctd >/dev/null 2>&1 || die "nfacctd not found: run bash deploy/install-flow-tools.sh (Debian package pmacct)"
  nfacctd -V 2>/dev/null | sed -n '/^Plugins:/,$p' | grep -qx kafka \
    || die "this nfacctd has no kafka plugin ($(nfacctd -V 2>/dev/null | head -n 1)); use Debian's pmacct or --collector goflow2"
  write_nfacctd_conf
  local log="$run_dir/nfacctd.log" offset deadline pid
  offset=$(( $(stat -c %s "$log" 2>/dev/null || echo 0) + 1 ))
  rm -f "$run_dir/nfacctd.pid" "$run_dir"/nfacctd.pid-*
  nfacctd -f "$run_dir/nfacctd.conf" >"$run_dir/nfacctd.out" 2>&1 || {
    cat "$run_dir/nfacctd.out" >&2; tail -c +"$offset" "$log" 2>/dev/null | tail -n 20 >&2
    die "nfacctd did not start (config: $run_dir/nfacctd.conf)"; }
  deadline=$(( $(date +%s) + 15 ))
  until tail -c +"$offset" "$log" 2>/dev/null | grep -q "waiting for NetFlow/IPFIX data" \
        && tail -c +"$offset" "$log" 2>/dev/null | grep -q "( flows/kafka ): JSON: setting object handlers" \
        && pid_alive "$run_dir/nfacctd.pid" nfacctd >/dev/null; do
    if tail -c +"$offset" "$log" 2>/dev/null | grep -q "ERROR"; then
      tail -c +"$offset" "$log" | grep -E "ERROR|WARN" | tail -n 10 >&2
      stop_all >/dev/null 2>&1 || true
      die "nfacctd reported an error at start-up (log: $log)"
    fi
    if (( $(date +%s) >= deadline )); then
      tail -c +"$offset" "$log" 2>/dev/null | tail -n 10 >&2
      stop_all >/dev/null 2>&1 || true
      die "nfacctd was not ready after 15 s (log: $log)"
    fi
    sleep 0.2
  done
  pid="$(pid_alive "$run_dir/nfacctd.pid" nfacctd)"
  echo "$me: nfacctd listening on $listen:$port (IPFIX/NetFlow), publishing JSON to $topic on $bootstrap (pid $pid, log $log)"
}

goflow2_bin() {
  local b
  for b in "${DPHHH_GOFLOW2:-}" "$root/var/flow-tools/bin/goflow2" "$(command -v goflow2 || true)"; do
    [[ -n "$b" && -x "$b" ]] && { echo "$b"; return 0; }
  done
  return 1
}

start_goflow2() {
  local bin log="$run_dir/goflow2.log" deadline pid host="$listen"
  bin="$(goflow2_bin)" || die "goflow2 not found: build it with bash deploy/install-flow-tools.sh goflow2 (or set DPHHH_GOFLOW2)"
  [[ "$host" == *:* ]] && host="[$host]"
  : >"$log"
  nohup setsid "$bin" -listen "netflow://$host:$port" -addr 127.0.0.1:0 -format json \
    -transport kafka -transport.kafka.brokers "$bootstrap" -transport.kafka.topic "$topic" \
    -transport.kafka.flushfreq "${refresh}s" >"$log" 2>&1 </dev/null &
  echo $! >"$run_dir/goflow2.pid"
  deadline=$(( $(date +%s) + 15 ))
  until grep -q "starting collection" "$log"; do
    if ! pid_alive "$run_dir/goflow2.pid" goflow2 >/dev/null; then
      tail -n 10 "$log" >&2; rm -f "$run_dir/goflow2.pid"; die "goflow2 exited at start-up (log: $log)"
    fi
    if (( $(date +%s) >= deadline )); then
      tail -n 10 "$log" >&2; stop_all >/dev/null 2>&1 || true; die "goflow2 was not ready after 15 s (log: $log)"
    fi
    sleep 0.2
  done
  pid="$(pid_alive "$run_dir/goflow2.pid" goflow2)"
  echo "$me: goflow2 listening on $listen:$port (IPFIX/NetFlow), publishing JSON to $topic on $bootstrap (pid $pid, log $log)"
}

# nfacctd_published OFFSET: "STARTS ENDS RECORDS FAILURES" of the kafka plugin's purges logged after OFFSET
nfacctd_published() {
  tail -c +"$1" "$run_dir/nfacctd.log" 2>/dev/null | awk '
    /Purging cache - START/ { s++ }
    /Purging cache - END/ { e++; if (match($0, /QN: [0-9]+/)) r += substr($0, RSTART + 4, RLENGTH - 4) }
    /ERROR \( flows\/kafka \)/ { f++ }
    END { printf "%d %d %d %d\n", s, e, r, f }'
}

feed() {
  [[ -n "$capture" ]] || return 0
  [[ -f "$capture" && -r "$capture" ]] || die "capture '$capture' is not a readable file"
  command -v softflowd >/dev/null 2>&1 || die "softflowd not found: run bash deploy/install-flow-tools.sh"
  local to="$listen" offset sflog="$run_dir/softflowd.log" flows datagrams totals
  [[ "$to" == 0.0.0.0 ]] && to=127.0.0.1
  [[ "$to" == :: ]] && to=::1
  [[ "$to" == *:* ]] && to="[$to]"
  offset=$(( $(stat -c %s "$run_dir/nfacctd.log" 2>/dev/null || echo 0) + 1 ))
  # -d: foreground (it exits once the file is exported); -a: the capture's clock; -A milli:
  # absolute millisecond flow times; -m: room for many flows before forced expiry. No -c: with a
  # control-socket path of its own, softflowd 1.1.0 -r garbles the capture's name and hangs (it
  # opens no control socket when reading a file anyway). Its pid is kept for stop.
  local rc=0
  softflowd -d -r "$capture" -n "$to:$port" -v "$version" -a -A milli -m 65536 >"$sflog" 2>&1 </dev/null &
  echo $! >"$run_dir/softflowd.pid"
  wait $! || rc=$?
  rm -f "$run_dir/softflowd.pid"
  if (( rc != 0 )) || ! grep -q '^Flows exported' "$sflog"; then
    tail -n 15 "$sflog" >&2
    die "softflowd failed on $capture (exit $rc; log: $sflog)"
  fi
  flows="$(sed -n 's/^Flows exported: \([0-9]*\) .*/\1/p' "$sflog" | tail -n 1)"
  datagrams="$(sed -n 's/^Flows exported: .* in \([0-9]*\) packets.*/\1/p' "$sflog" | tail -n 1)"
  totals="$(awk '/^Per-protocol statistics/ { on = 1; next } on && /\([0-9]+\):/ { o += $(NF-3); p += $(NF-2) } END { printf "%d packets, %d bytes", p, o }' "$sflog")"
  local unit="IPFIX"; [[ "$version" == 9 ]] && unit="NetFlow v9"
  echo "$me: softflowd exported $(basename "$capture"): ${flows:-0} flows ($totals) in ${datagrams:-0} $unit datagrams"
  if [[ "$(state_get COLLECTOR)" == goflow2 ]]; then
    sleep $(( refresh + 2 ))
    echo "$me: goflow2 flushes to $topic every $refresh s (it logs no counts; read the topic to check)"
    return 0
  fi
  # Every flow is in the plugin once softflowd is done (+1 s): the first purge that starts after
  # that point, and every purge before it, publish them.
  sleep 1
  local before s e r f deadline=$(( $(date +%s) + refresh * 3 + 15 ))
  read -r before _ _ _ < <(nfacctd_published "$offset")
  while :; do
    read -r s e r f < <(nfacctd_published "$offset")
    (( s > before && e >= s )) && break
    if (( $(date +%s) >= deadline )); then
      echo "$me: warning: nfacctd has not finished a purge to Kafka in time (log: $run_dir/nfacctd.log)" >&2
      break
    fi
    sleep 0.5
  done
  echo "$me: nfacctd published $r flow records to $topic"
  if (( r < ${flows:-0} )); then
    echo "$me: warning: fewer records than softflowd exported (nfacctd merges flows with the same key and times; with --netflow-version 9 small exports are lost, see the header of this script)" >&2
  fi
  if (( f > 0 )); then
    tail -c +"$offset" "$run_dir/nfacctd.log" | grep "ERROR ( flows/kafka )" | tail -n 3 >&2
    die "nfacctd's kafka plugin reported $f errors: records may be lost (log: $run_dir/nfacctd.log)"
  fi
}

state_get() { sed -n "s/^$1=//p" "$state" 2>/dev/null | tail -n 1; }
load_state() {  # replay/status/stop use the settings the collector was started with
  [[ -f "$state" ]] || return 0
  topic="$(state_get TOPIC)"; bootstrap="$(state_get BOOTSTRAP)"; listen="$(state_get LISTEN)"
  port="$(state_get PORT)"; refresh="$(state_get REFRESH)"
}

stop_pid() {  # FILE NAME SIGNAL: stop the process named by FILE, waking nfacctd meanwhile
  local pid deadline
  pid="$(pid_alive "$1" "$2")" || { rm -f "$1"; return 0; }
  kill "-$3" "$pid" 2>/dev/null || true
  deadline=$(( $(date +%s) + stop_timeout ))
  while kill -0 "$pid" 2>/dev/null; do
    [[ "$2" == nfacctd ]] && wake "$listen" "$port"
    if (( $(date +%s) >= deadline )); then
      echo "$me: $2 (pid $pid) still running after $stop_timeout s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.5
  done
  rm -f "$1"
  echo "$me: stopped $2 (pid $pid)"
}

stop_all() {
  local f any=0
  if pid_alive "$run_dir/softflowd.pid" softflowd >/dev/null; then stop_pid "$run_dir/softflowd.pid" softflowd TERM; any=1; fi
  if pid_alive "$run_dir/nfacctd.pid" nfacctd >/dev/null; then stop_pid "$run_dir/nfacctd.pid" nfacctd INT; any=1; fi
  # nfacctd's plugin (and a purge writer) exit with the core; kill a straggler by its pid file
  for f in "$run_dir"/nfacctd.pid-*; do
    [[ -e "$f" ]] || continue
    if pid_alive "$f" nfacctd >/dev/null; then stop_pid "$f" nfacctd KILL; any=1; else rm -f "$f"; fi
  done
  if pid_alive "$run_dir/goflow2.pid" goflow2 >/dev/null; then stop_pid "$run_dir/goflow2.pid" goflow2 TERM; any=1; fi
  rm -f "$run_dir/goflow2.pid"
  (( any )) || echo "$me: not running"
}

case "$cmd" in
  start)
    check_settings
    mkdir -p "$run_dir"
    if pid="$(collector_pid)"; then
      load_state
      echo "$me: already running (pid $pid, $(state_get COLLECTOR) on $listen:$port, topic $topic)"
      feed
      exit 0
    fi
    if udp_in_use "$port"; then
      die "UDP port $port is already in use; nfacctd would share it (SO_REUSEPORT) and lose flows to the other socket: choose another with --port"
    fi
    (exec 3<>"/dev/tcp/$kafka_host/$kafka_port") 2>/dev/null \
      || die "no Kafka broker answers on $bootstrap; start one with deploy/kafka-start.sh or pass --bootstrap"
    ensure_topic
    printf 'COLLECTOR=%s\nTOPIC=%s\nBOOTSTRAP=%s\nLISTEN=%s\nPORT=%s\nREFRESH=%s\nVERSION=%s\nLOG_OFFSET=%s\n' \
      "$collector" "$topic" "$bootstrap" "$listen" "$port" "$refresh" "$version" \
      $(( $(stat -c %s "$run_dir/nfacctd.log" 2>/dev/null || echo 0) + 1 )) >"$state"
    if [[ "$collector" == nfacctd ]]; then start_nfacctd; else start_goflow2; fi
    feed
    ;;
  replay)
    [[ -n "$capture" ]] || die "replay needs --capture FILE"
    version_opt="$version"
    load_state
    version="$version_opt"
    collector_pid >/dev/null || die "not running: start it first (flow-pipeline.sh start)"
    feed
    ;;
  status)
    load_state
    if pid="$(collector_pid)"; then
      line="$me: running: $(state_get COLLECTOR) pid $pid on $listen:$port, topic $topic on $bootstrap"
      if [[ "$(state_get COLLECTOR)" == nfacctd ]]; then
        read -r _ _ r f < <(nfacctd_published "$(state_get LOG_OFFSET)")
        line+="; $r flow records published so far, $f kafka errors (log $run_dir/nfacctd.log)"
      fi
      echo "$line"
      exit 0
    fi
    echo "$me: not running"
    exit 3
    ;;
  stop)
    load_state
    stop_all
    ;;
esac
