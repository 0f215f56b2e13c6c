"""End-to-end two-dimensional HHH (docs/ALGORITHMS.md §11): (source, destination) pairs through the
real broker and the real job with ``hierarchy.spec = "ipv4:8,16,24,32 x ipv4:8,16,24,32"``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.jobs import dead_letters, dumped, offline_sketches, replay_window, reports, run_replay, write_config

WINDOW = 2000
PAIR_SPEC = "ipv4:8,16,24,32 x ipv4:8,16,24,32"
HOST_PAIR = (0xC0000201, 0xCB007105)  # 192.0.2.1 → 203.0.113.5
NET_PAIR = (0x0A140000, 0xC6336400)  # 10.20.0.0/16 → 198.51.100.0/24


def _words(src: np.ndarray, dst: np.ndarray) -> bytes:
    return np.stack([src, dst], axis=1).astype(">u4").tobytes()


def _window(rng: np.random.Generator, planted: bool) -> tuple[np.ndarray, np.ndarray]:
    n = 20_000
    src = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    dst = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    if planted:
        src[:3000], dst[:3000] = HOST_PAIR
        src[3000:7000] = NET_PAIR[0] | rng.integers(0, 1 << 16, 4000).astype(np.uint32)
        dst[3000:7000] = NET_PAIR[1] | rng.integers(0, 256, 4000).astype(np.uint32)
    order = rng.permutation(n)
    return src[order], dst[order]


def test_a_pair_hierarchy_job_reports_source_destination_pairs(broker, tmp_path: Path) -> None:
    """Two windows (the second without the planted pairs), 8-byte (source, destination) elements:
    one report per window, each listing pairs as 'source prefix → destination prefix' with their
    lattice node and stating no coverage in 2-D; the planted host pair and network pair are in the
    first window's report and not in the second's; every node's sketch equals an offline replay of
    the same pairs through the one router; a message of 7 bytes is dead-lettered."""
    base = 1_700_000_000_000 // WINDOW * WINDOW
    config = write_config(
        tmp_path,
        "pairs",
        window=replay_window(base, 2, WINDOW),
        input={"format": "packed-ipv4-pairs"},
        hierarchy={"spec": PAIR_SPEC},
        privacy={"epsilon": 4.0, "delta": 1e-6, "tau": 2000.0, "counters": 512, "seed": 99},
    )
    rng = np.random.default_rng(3)
    windows = [_window(rng, planted=True), _window(rng, planted=False)]
    messages: list[tuple[int | None, bytes]] = []
    for w, (src, dst) in enumerate(windows):
        for i in range(0, src.size, 1000):
            messages.append((base + w * WINDOW + i // 1000, _words(src[i : i + 1000], dst[i : i + 1000])))
    messages.insert(2, (base + 9, b"\x01" * 7))
    cfg, _ = run_replay(tmp_path, config, messages)

    found = [json.loads(r) for r in reports(cfg)]
    assert [r["window"]["start_ms"] for r in found] == [base, base + WINDOW]
    first, second = ({x["prefix"]: x for x in r["hhh"]} for r in found)
    assert first["192.0.2.1/32 → 203.0.113.5/32"]["node"] == [4, 4]
    assert first["10.20.0.0/16 → 198.51.100.0/24"]["node"] == [2, 3]
    assert "192.0.2.1/32 → 203.0.113.5/32" not in second and "10.20.0.0/16 → 198.51.100.0/24" not in second
    for r in found:
        assert r["params"]["hierarchy"] == PAIR_SPEC and r["params"]["h"] == 24
        assert r["guarantees"]["coverage_holds"] is False and "2-D" in r["guarantees"]["coverage"]

    # every node's sketch = the canonical order of the window's pairs (keyed: the /32 × /32 node)
    assert dumped(tmp_path) == offline_sketches(cfg, messages, cfg.schedule(base))
    dead = [json.loads(d) for d in dead_letters(cfg)]
    assert [d["reason"] for d in dead] == ["bad_length"]
