#!/usr/bin/env bash
# Re-record the flow-JSON fixtures of tests/connectors/test_flow_json.py through the real chain
# (deploy/flow-pipeline.sh: softflowd -> IPFIX -> nfacctd or goflow2 -> Kafka), reading back what
# the collectors published. Needs the flow tools (bash deploy/install-flow-tools.sh [goflow2]),
# the venv (kafka-python) and a broker (bash deploy/kafka-start.sh); the bundled captures in
# data/pcaps. Writes the *.jsonl files beside this script (one published message per
# line, as published) and prints the totals for docs/tutorials/flows.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
pipeline="$root/deploy/flow-pipeline.sh"
py="$root/.venv/bin/python"
pcaps="${DPHHH_PCAPS:-$root/data/pcaps}"
work="$(mktemp -d)"
trap 'bash "$pipeline" stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export DPHHH_FLOW_VAR="$work/run" DPHHH_FLOW_PORT="${DPHHH_FLOW_PORT:-9997}"
stamp="$(date +%s)"

"$py" "$root/tests/connectors/flow_capture.py" "$work/mixed.pcap"

# read_topic TOPIC OUT [LIMIT]: the topic's messages, one per line, the first LIMIT of them
read_topic() {
  "$py" - "$@" <<'PY'
import sys
from kafka import KafkaConsumer, TopicPartition
topic, out = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
c = KafkaConsumer(bootstrap_servers="127.0.0.1:9092", enable_auto_commit=False, consumer_timeout_ms=5000)
parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
c.assign(parts)
c.seek_to_beginning(*parts)
values = [m.value for m in c]
c.close()
with open(out, "wb") as f:
    for v in values[:limit]:
        assert b"\n" not in v.rstrip(b"\n")
        f.write(v.rstrip(b"\n") + b"\n")
import json
recs = [json.loads(v) for v in values]
pk = sum(r.get("packets", 0) for r in recs); by = sum(r.get("bytes", 0) for r in recs)
print(f"{out.rsplit('/', 1)[-1]}: {len(values)} records published ({pk} packets, {by} bytes), {min(len(values), limit or len(values))} kept")
PY
}

# record NAME CAPTURE LIMIT [start options...]
record() {
  local name="$1" capture="$2" limit="$3"; shift 3
  local topic="fixture-$name-$stamp"
  bash "$pipeline" start --topic "$topic" --refresh 1 --capture "$capture" "$@"
  bash "$pipeline" stop
  read_topic "$topic" "$here/$name.jsonl" "$limit"
}

record pmacct-ipfix-mixed "$work/mixed.pcap" 100
record pmacct-ipfix-mixed-rfc3339 "$work/mixed.pcap" 100 --timestamps rfc3339
record pmacct-ipfix-mixed-epoch "$work/mixed.pcap" 100 --timestamps epoch
record pmacct-ipfix-mixed-history "$work/mixed.pcap" 100 \
  --nfacctd-option 'kafka_history[flows]: 1m' --nfacctd-option 'kafka_history_roundoff[flows]: m'
# the collector's local time with an offset (timestamps_rfc3339 without timestamps_utc)
TZ=Europe/Berlin record pmacct-ipfix-mixed-rfc3339-berlin "$work/mixed.pcap" 100 \
  --nfacctd-option 'timestamps_rfc3339: true' --nfacctd-option 'timestamps_utc: false'
record pmacct-ipfix-synack-head "$pcaps/amp.TCP.reflection.SYNACK.pcap" 100
record goflow2-ipfix-mixed "$work/mixed.pcap" 100 --collector goflow2
record goflow2-ipfix-isakmp-head "$pcaps/amp.UDP.isakmp.pcap" 30 --collector goflow2
