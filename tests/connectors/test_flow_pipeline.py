"""deploy/flow-pipeline.sh end to end: softflowd -> IPFIX -> nfacctd -> its kafka plugin -> a real broker,
and the published records through connectors/flow_json.py.

Installs Debian's softflowd and pmacct on first use (deploy/install-flow-tools.sh: root or sudo),
as the monitoring tests install Prometheus; starts this checkout's broker if none answers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from dphhh.connectors.flow_json import FlowJsonDecoder

from .flow_capture import expected_totals, write_mixed_pcap

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "deploy" / "flow-pipeline.sh"


@pytest.fixture(scope="module")
def broker():
    from dphhh.stream.broker import LocalBroker

    subprocess.run(
        ["bash", str(ROOT / "deploy" / "install-flow-tools.sh")], check=True, capture_output=True, timeout=900
    )
    local = LocalBroker(9092)
    local.start()
    yield local
    local.stop()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_topic(bootstrap: str, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        return [m.value for m in consumer]
    finally:
        consumer.close()


def pids_of(run_dir: Path) -> list[int]:
    """The live processes named by the pipeline's pid files."""
    out = []
    for f in run_dir.glob("*.pid*"):
        try:
            pid = int(f.read_text().strip())
            os.kill(pid, 0)
            out.append(pid)
        except (ValueError, ProcessLookupError):
            pass
    return out


def test_the_chain_publishes_the_captures_flows_and_stop_ends_it(broker, tmp_path: Path) -> None:
    """start --capture publishes one JSON record per flow of a capture with IPv4 and IPv6 flows
    (their exact packets and bytes); status reports it; stop ends every process it started; a
    second start on a port in use is refused with a clear message."""
    capture = write_mixed_pcap(tmp_path / "mixed.pcap")
    topic = f"flow-e2e-{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "DPHHH_FLOW_VAR": str(run_dir),
        "DPHHH_FLOW_PORT": str(free_udp_port()),
        "DPHHH_FLOW_BOOTSTRAP": broker.bootstrap,
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(PIPELINE), *args], env=env, capture_output=True, text=True, timeout=120)

    try:
        started = run("start", "--topic", topic, "--refresh", "1", "--capture", str(capture))
        assert started.returncode == 0, started.stderr
        assert "softflowd exported mixed.pcap: 6 flows (21 packets, 2016 bytes)" in started.stdout
        assert f"nfacctd published 6 flow records to {topic}" in started.stdout
        status = run("status")
        assert status.returncode == 0 and "running: nfacctd" in status.stdout and "6 flow records" in status.stdout
        clash = run("start", "--topic", topic, "--port", env["DPHHH_FLOW_PORT"])
        assert clash.returncode == 0 and "already running" in clash.stdout
        other = subprocess.run(
            ["bash", str(PIPELINE), "start", "--topic", topic],
            env={**env, "DPHHH_FLOW_VAR": str(tmp_path / "other")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.returncode == 1 and "already in use" in other.stderr
        assert pids_of(run_dir)
    finally:
        stopped = run("stop")
    assert stopped.returncode == 0 and "stopped nfacctd" in stopped.stdout, stopped.stderr
    assert pids_of(run_dir) == []
    assert run("status").returncode == 3

    records = read_topic(broker.bootstrap, topic)
    batch = FlowJsonDecoder("pmacct", family="both", weight="bytes").decode_many(records)
    assert batch.reasons == [None] * 6
    assert sorted(batch.ipv4.weights.tolist() + batch.ipv6.weights.tolist()) == sorted(
        b for _, b in expected_totals().values()
    )
    assert len(batch.ipv6) == 3 and (batch.ipv4.event_ms > 0).all()
