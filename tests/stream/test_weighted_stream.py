"""The stream job's weighted path without Flink: flow-JSON decode, clipped weights in the sketch
payloads, and sketches equal to the batch path's (docs/ALGORITHMS.md §2 "Weighted elements")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dphhh.connectors.decode import MessageDecoder
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.misra_gries import MisraGries, clip_weights
from dphhh.sketches.partition import route
from dphhh.stream.config import load_config
from dphhh.stream.decode_batch import decode_batch
from dphhh.stream.message_batch import pack_batch
from dphhh.stream.schedule import ReleaseSchedule
from dphhh.stream.wire import (
    pack_levels,
    sketch_payloads,
    unit_payloads,
    unit_shards,
    unpack_levels,
    unpack_unit_payload,
    unpack_weighted_levels,
)

PAIRS = "hierarchy.spec=ipv4:8,16,24,32 x ipv4:8,16,24,32"


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
    assert [r for r, _, _, _ in out.dead] == ["bad_json", "wrong_family", "bad_counter"]
    assert [(s, v.tolist(), w.tolist()) for s, _, v, _, w in out.windows] == [
        (0, [(10 << 24) | (2 << 16) | (2 << 8) | 2], [5000]),
        (1000, [(10 << 24) | (1 << 16) | (1 << 8) | 1], [500]),
    ]


def _pair_cfg(partitions: int):
    return load_config(
        None,
        environ={},
        overrides=[
            PAIRS,
            "input.format=flow-json",
            "input.flow_weight=bytes",
            "input.weight_cap=1000",
            f"privacy.partitions={partitions}",
        ],
    )


def _pair_records(seed: int, n: int = 3000) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    src = ((192 << 24) + rng.integers(0, 1 << 12, n) * 37).astype(np.uint32)
    dst = ((10 << 24) + rng.integers(0, 1 << 10, n) * 4099).astype(np.uint32)
    src[: n // 3], dst[: n // 3] = 0xC0000201, 0xCB007105  # one heavy host pair: the 64-bit node's keys
    order = rng.permutation(n)
    return (src[order], dst[order]), clip_weights(rng.zipf(1.3, n), 1000)


@pytest.mark.parametrize("partitions", [1, 3])
def test_weighted_pair_payloads_carry_each_levels_weights_with_its_keys(partitions: int) -> None:
    """Weighted pairs travel with their weights — as packed pairs keyed by the sketch step (P = 1)
    or in the generic weighted payload (P > 1) — giving per (node, partition) the keys and the
    weights that the router gives them (sketches.partition.route, which LevelSketches uses), in
    order, so that sketching the payloads leaves exactly LevelSketches.update(pairs, weights)."""
    cfg = _pair_cfg(partitions)
    h = cfg.hierarchy.h
    pairs, weights = _pair_records(partitions)
    expected = {(level, p): (k, w) for level, p, k, w in route(cfg.hierarchy, pairs, partitions, weights)}
    batch = LevelSketches(cfg.hierarchy, 64, partitions)
    batch.update(pairs, weights)
    streamed = {(level, p): MisraGries(64) for level in range(1, h + 1) for p in range(partitions)}
    seen = set()
    for p, payload, labels in sketch_payloads(pairs, cfg, weights):
        assert bool(labels) == (partitions > 1)  # the (/32, /32) node's keys travel with their labels
        keys, w = unpack_weighted_levels(payload, cfg.hierarchy)
        assert w is not None and len(keys) == len(w) == h
        for level in range(1, h + 1):
            k, lw = keys[level - 1], w[level - 1]
            assert k.shape == lw.shape and lw.dtype == np.int64
            if (level, p) in expected:
                seen.add((level, p))
                assert k.tolist() == expected[(level, p)][0].tolist()
                assert lw.tolist() == expected[(level, p)][1].tolist()
            else:
                assert k.size == 0
            streamed[(level, p)].update(k, lw)
        assert [a.tolist() for a in unpack_levels(payload, cfg.hierarchy)] == [a.tolist() for a in keys]
    assert seen == set(expected) and len({p for _, p in seen}) == partitions
    for (level, p), sketch in batch.items():
        assert streamed[(level, p)] == sketch and streamed[(level, p)].total == sketch.total
    assert sum(batch.sketch(1, p).total for p in range(partitions)) == int(weights.sum())
    # unweighted pairs keep the unweighted generic kind
    ((_, plain, _),) = list(sketch_payloads(pairs, _pair_cfg(1)))
    keys, w = unpack_weighted_levels(plain, cfg.hierarchy)
    assert w is None and keys[0].size == pairs[0].size


def test_a_corrupted_weighted_generic_payload_is_refused() -> None:
    """A weighted generic payload whose kind is unknown, or that is cut short or padded, is a clear
    error ("Possible corruption"), never a silent sketch update; weights must match their keys."""
    cfg = _pair_cfg(1)
    pairs, weights = _pair_records(7, 50)
    ((_, payload, _),) = list(sketch_payloads(pairs, cfg, weights))
    for kind in (8, 99, -1):
        bad = np.array([kind], dtype=np.int64).tobytes() + payload[8:]
        with pytest.raises(ValueError, match="Possible corruption: unknown payload kind"):
            unpack_weighted_levels(bad, cfg.hierarchy)
    for bad in (payload[:-8], payload + bytes(8)):
        with pytest.raises(ValueError, match="Possible corruption"):
            unpack_weighted_levels(bad, cfg.hierarchy)
    arrays = [np.arange(3, dtype=np.int64), np.array([5], np.int64)]
    with pytest.raises(ValueError, match="one weight per key"):
        pack_levels(arrays, [np.ones(3, np.int64), np.ones(2, np.int64)])
    with pytest.raises(ValueError, match="one weight per value"):
        list(sketch_payloads(pairs, cfg, weights[:-1]))


def test_unit_payloads_carry_the_clipped_weights_with_their_values() -> None:
    """User level with weighted records: each unit shard's payload holds its units, values (pairs
    too) and weights aligned, in input order; without weights the payload carries none."""
    rng = np.random.default_rng(3)
    units = rng.integers(0, 40, 1500).astype(np.uint64)
    pairs = (units.astype(np.uint32), rng.integers(0, 2**32, 1500, dtype=np.uint64).astype(np.uint32))
    weights = clip_weights(rng.zipf(1.5, 1500), 100)
    shards = unit_shards(units, 3)
    got = dict(unit_payloads(pairs, units, 3, weights))
    assert sorted(got) == sorted(set(shards.tolist()))
    for s, payload in got.items():
        u, (first, second), w = unpack_unit_payload(payload)
        chosen = shards == s
        assert u.tolist() == units[chosen].tolist() and first.tolist() == pairs[0][chosen].tolist()
        assert second.tolist() == pairs[1][chosen].tolist() and w.tolist() == weights[chosen].tolist()
    for payload in dict(unit_payloads(pairs[1], units, 3)).values():
        assert unpack_unit_payload(payload)[2] is None
