"""The stream job's weighted path without Flink: flow-JSON decode, clipped weights in the sketch
payloads, and sketches equal to the batch path's (docs/ALGORITHMS.md §2 "Weighted elements")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from connectors.decode import MessageDecoder
from sketches.level_sketches import LevelSketches
from sketches.misra_gries import MisraGries, clip_weights
from stream.config import load_config
from stream.decode_batch import decode_batch
from stream.message_batch import pack_batch
from stream.schedule import ReleaseSchedule
from stream.wire import sketch_payloads, unpack_weighted_levels


def _cfg(partitions: int):
    return load_config(
        None,
        environ={},
        overrides=[
            "input.format=flow-json",
            "input.flow_weight=bytes",
            "input.weight_cap=1000",
            f"privacy.partitions={partitions}",
        ],
    )


@pytest.mark.parametrize("partitions", [1, 3])
def test_weighted_payloads_rebuild_the_batch_sketches(partitions: int) -> None:
    """Sketching the payloads of a batch of weighted records, partition by partition, leaves the same
    sketches as LevelSketches.update(values, weights) — keys and weights routed together."""
    cfg = _cfg(partitions)
    rng = np.random.default_rng(8)
    values = ((10 << 24) + rng.integers(0, 1 << 14, 4000) * 61).astype(np.uint32)
    weights = clip_weights(rng.zipf(1.4, values.size), 1000)
    batch = LevelSketches(cfg.hierarchy, 64, partitions)
    batch.update(values, weights)
    streamed = {(level, p): MisraGries(64) for level in range(1, 5) for p in range(partitions)}
    for p, payload, labels in sketch_payloads(values, cfg, weights):
        assert labels == b""
        keys, w = unpack_weighted_levels(payload, cfg.hierarchy)
        assert w is not None
        for level in range(1, 5):
            streamed[(level, p)].update(keys[level - 1], w[level - 1])
    for (level, p), sketch in batch.items():
        assert streamed[(level, p)] == sketch and streamed[(level, p)].total == sketch.total


def test_unweighted_payloads_carry_no_weights() -> None:
    """Without weights the compact unweighted payload kinds are used (no weights on the wire)."""
    cfg = load_config(None, environ={})
    values = np.array([1, 2, 3], dtype=np.uint32)
    ((_, payload, _),) = list(sketch_payloads(values, cfg))
    keys, w = unpack_weighted_levels(payload, cfg.hierarchy)
    assert w is None and keys[-1].tolist() == [1, 2, 3] and len(payload) == 16 + 12


def test_decode_batch_keeps_weights_with_their_records() -> None:
    """flow-json messages: bad records dead-lettered with their reason, the good ones' weights
    (unclipped: the decode operator clips) aligned with their addresses, per window of their own time."""

    def rec(ip: str, nbytes: int, t: str) -> bytes:
        return json.dumps(
            {"ip_src": ip, "ip_dst": "10.0.0.1", "packets": 1, "bytes": nbytes, "timestamp_start": t}
        ).encode()

    messages = [
        rec("10.1.1.1", 500, "1970-01-01 00:00:01.500"),
        b"{bad",
        rec("10.2.2.2", 5000, "1970-01-01 00:00:00.200"),
        rec("2001:db8::1", 80, "1970-01-01 00:00:01.100"),
        json.dumps({"ip_src": "10.3.3.3", "packets": -1, "bytes": 2}).encode(),
    ]
    decoder = MessageDecoder("flow-json", flow_weight="bytes")
    schedule = ReleaseSchedule(size_ms=1000, origin_ms=0, mode="live", max_past_ms=10_000)
    out = decode_batch(pack_batch([900] * len(messages), messages), decoder, schedule)
    assert [r for r, _, _ in out.dead] == ["bad_json", "wrong_family", "bad_counter"]
    assert [(s, v.tolist(), w.tolist()) for s, v, _, w in out.windows] == [
        (0, [(10 << 24) | (2 << 16) | (2 << 8) | 2], [5000]),
        (1000, [(10 << 24) | (1 << 16) | (1 << 8) | 1], [500]),
    ]
