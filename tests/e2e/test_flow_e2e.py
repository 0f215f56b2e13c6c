"""End to end with a real flow collector: softflowd → IPFIX → nfacctd → its kafka plugin → the job.

Real programs no one here wrote (Debian's softflowd and pmacct, installed by
``deploy/install-flow-tools.sh`` on first use): ``deploy/flow-pipeline.sh`` has softflowd read the
shared SYN-ACK capture and export its flows over IPFIX to nfacctd on loopback, whose kafka plugin
publishes one JSON record per flow to the job's input topic. ``dphhh run`` then replays the
capture's time range (``window.mode = replay``, one window; each record's own ``timestamp_start``
decides its window) with ``input.format = flow-json``, weighted by bytes, W = 1500.

Checked: the published flows (read back from the topic) carry exactly the capture's IPv4 packets
and bytes; every level's sketch (the test-only dump) holds exactly the published flows' bytes,
each clipped at W (three multi-packet flows of the capture exceed 1,500 bytes); the one report's
prefixes at a generous ε (point mode, τ = 40,000 bytes, ≥ 3,500 from every exact residual) equal
the exact weighted HHH computed from the capture itself (each packet weighted by its IPv4 length)
and from the clipped flows; its guarantee is stated per record, weighted by bytes, clipped at 1500.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.flow_json import FlowJsonDecoder
from dphhh.connectors.kafka_io import read_to_end
from dphhh.connectors.pcap import iter_capture_sources_with_lengths
from dphhh.connectors.skips import SkipCounter
from dphhh.sketches.exact import exact_hhh
from dphhh.sketches.hierarchy import IPv4Hierarchy
from dphhh.stream.paths import DEMO_CAPTURE, capture
from tests.e2e.jobs import BOOTSTRAP, JOB, dumped, reports, write_config
from tests.e2e.net import free_port

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "deploy" / "flow-pipeline.sh"
CAPTURE = capture(DEMO_CAPTURE)
HOUR = 3_600_000
TAU = 40_000.0


@pytest.fixture(scope="module")
def flow_tools() -> None:
    subprocess.run(
        ["bash", str(ROOT / "deploy" / "install-flow-tools.sh")], check=True, capture_output=True, timeout=900
    )


def _capture_truth() -> tuple[np.ndarray, np.ndarray]:
    chunks = list(iter_capture_sources_with_lengths(CAPTURE, SkipCounter()))
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])


def test_collector_flow_records_through_the_job(broker, flow_tools, tmp_path: Path) -> None:
    """Capture → softflowd → nfacctd → Kafka → dphhh run (flow-json, bytes): totals exact, HHH exact at a generous ε."""
    assert CAPTURE.exists(), f"shared capture missing: {CAPTURE}"
    name = f"e2e-flow-{uuid.uuid4().hex[:8]}"
    topics = {
        "input_topic": f"{name}-in",
        "reports_topic": f"{name}-reports",
        "dead_letter_topic": f"{name}-dead",
        "group_id": name,
        "bootstrap": BOOTSTRAP,
    }
    env = {
        **os.environ,
        "DPHHH_FLOW_VAR": str(tmp_path / "flow-run"),
        "DPHHH_FLOW_PORT": str(free_port()),
        "DPHHH_FLOW_BOOTSTRAP": BOOTSTRAP,
    }

    def pipeline(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(PIPELINE), *args], env=env, capture_output=True, text=True, timeout=180)

    try:
        started = pipeline("start", "--topic", topics["input_topic"], "--refresh", "2", "--capture", str(CAPTURE))
        assert started.returncode == 0, started.stderr[-3000:]
    finally:
        stopped = pipeline("stop")
    assert stopped.returncode == 0, stopped.stderr[-2000:]

    # what nfacctd published, read back: one record per flow, the capture's exact packets and bytes
    published = [v for _, v in read_to_end({"bootstrap.servers": BOOTSTRAP}, topics["input_topic"])]
    packets = FlowJsonDecoder("pmacct", weight="packets").decode_many(published)
    by_bytes = FlowJsonDecoder("pmacct", weight="bytes").decode_many(published)
    assert all(r is None for r in by_bytes.reasons)
    values, lengths = _capture_truth()
    assert int(packets.ipv4.weights.sum()) == values.size == 7_996
    assert int(by_bytes.ipv4.weights.sum()) == int(lengths.sum()) == 403_291

    # one window over the flows' own times
    origin = int(by_bytes.ipv4.event_ms.min()) // HOUR * HOUR
    until = (int(by_bytes.ipv4.event_ms.max()) // HOUR + 1) * HOUR
    config = write_config(
        tmp_path,
        "flow",
        kafka=topics,
        input={
            "format": "flow-json",
            "flow_schema": "pmacct",
            "flow_key": "src",
            "flow_weight": "bytes",
            "weight_cap": 1500,
        },
        window={"mode": "replay", "size_ms": until - origin, "origin": origin, "until": until},
        privacy={"epsilon": 600.0, "delta": 1e-6, "tau": TAU, "mode": "point", "seed": 11},
    )
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]

    clipped = np.minimum(by_bytes.ipv4.weights, 1500)
    sketches = dumped(tmp_path)
    assert sorted(sketches) == [(origin, sid) for sid in range(4)]
    assert {s.total for s in sketches.values()} == {int(clipped.sum())}  # the flows' bytes, each clipped at W

    from dphhh.stream.config import load_config

    (raw,) = reports(load_config(config, environ={}))
    report = json.loads(raw)
    exact = {e.prefix for e in exact_hhh(IPv4Hierarchy(), values, TAU, lengths)}
    assert exact == {"104.0.0.0/8", "107.0.0.0/8", "172.0.0.0/8", "0.0.0.0/0"}
    assert exact == {e.prefix for e in exact_hhh(IPv4Hierarchy(), by_bytes.ipv4.keys, TAU, clipped)}
    assert {x["prefix"] for x in report["hhh"]} == exact
    assert "one record of this window, each record weighted by bytes clipped at 1500" in report["budget"]["guarantee"]
