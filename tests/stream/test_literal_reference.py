"""The literal reference of the exactly-once tests (tests/e2e/literal_reference.py) against a hand
trace, the product's own path (tests/e2e/jobs.py ``offline_sketches``: the product's decoder,
schedule, router and Misra–Gries) on random logs, and the changes it must see (issue 25 item 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.kafka_io import pack_ipv4
from dphhh.stream.config import load_config
from tests.e2e.jobs import offline_sketches
from tests.e2e.literal_reference import LiteralSketch, packed_ipv4_truth, splitmix64
from tests.sketches.test_misra_gries import reference_mg

SIZE, ORIGIN = 2000, 1_700_000_000_000 // 2000 * 2000


def _cfg(tmp_path: Path, mode: str, counters: int = 8):
    until = f"until = {ORIGIN + 3 * SIZE}\n" if mode == "replay" else ""
    path = tmp_path / f"{mode}.toml"
    path.write_text(
        f'[window]\nmode = "{mode}"\nsize_ms = {SIZE}\norigin = {ORIGIN}\n{until}grace_ms = 300\n'
        f"[privacy]\ncounters = {counters}\npartitions = 2\nseed = 1\n"
    )
    return load_config(path)


def _log(rng: np.random.Generator, n: int) -> list[tuple[int, bytes]]:
    """Messages over four windows and a little before the origin, few heavy hosts among many; bad
    lengths, empty values and tombstones among them."""
    hosts = rng.integers(0, 2**32, 40, dtype=np.uint64).astype(np.uint32)
    out: list[tuple[int, bytes | None]] = []
    for _ in range(n):
        ts = int(ORIGIN + rng.integers(-SIZE // 2, 4 * SIZE))
        kind = rng.random()
        if kind < 0.05:
            out.append((ts, b"\x01\x02\x03"))
        elif kind < 0.08:
            out.append((ts, b""))
        elif kind < 0.1:
            out.append((ts, None))
        else:
            out.append((ts, pack_ipv4(rng.choice(hosts, int(rng.integers(1, 30))))))
    return out


def test_splitmix64_is_the_published_function() -> None:
    """SplitMix64's finaliser of 0 and 1 (the published test values of the mixing constants)."""
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(1) == 0x910A2DEC89025CC1


def test_literal_sketch_follows_a_hand_trace() -> None:
    """κ = 2 on 5, 3, 5, 9, 1, 1: 5 and 3 take the slots; 5 → 2; 9 decrements all ({5: 1, 3: 0});
    1 takes 3's slot (the smallest counter); 1 → 2."""
    sketch = LiteralSketch(2, {})
    for x in (5, 3, 5, 9, 1, 1):
        sketch.insert(x)
    assert (sketch.slots, sketch.total, sketch.decrements) == ({5: 1, 1: 2}, 6, 1)


@pytest.mark.parametrize("seed", range(6))
def test_literal_sketch_equals_the_misra_gries_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, 12, 400).tolist()
    sketch = LiteralSketch(4, {})
    for x in stream:
        sketch.insert(x)
    keys, counts, decrements = reference_mg(4, stream)
    assert sketch.slots == {k: c for k, c in zip(keys, counts) if k >= 0} and sketch.decrements == decrements


@pytest.mark.parametrize("mode", ["live", "replay"])
@pytest.mark.parametrize("seed", range(4))
def test_the_reference_equals_the_products_path_on_random_logs(tmp_path: Path, mode: str, seed: int) -> None:
    """Both ways of counting a log agree on every (window, sketch): the sketch ids, totals,
    decrement counts and counters (κ = 8, so every sketch of /24 and /32 keys decrements)."""
    cfg = _cfg(tmp_path, mode)
    log = _log(np.random.default_rng(seed), 300)
    truth = packed_ipv4_truth(cfg.values, ORIGIN, log)
    product = offline_sketches(cfg, log, cfg.schedule(ORIGIN))
    assert set(truth) == set(product) and len(truth) >= 3 * 4  # windows × levels with data
    assert all(truth[key].matches(product[key]) for key in truth)
    assert any(sk.decrements for sk in truth.values())


def test_the_reference_sees_a_duplicated_a_lost_and_a_moved_element(tmp_path: Path) -> None:
    """Negative controls: one message counted twice, one lost, or one counted in the next window:
    the product's sketches of the original log no longer match the reference of the changed log."""
    cfg = _cfg(tmp_path, "live")
    log = [(ORIGIN + 100 + 7 * i, pack_ipv4([(i % 5) << 24 | i, 9 << 24])) for i in range(200)]
    product = offline_sketches(cfg, log, cfg.schedule(ORIGIN))
    assert all(sk.matches(product[key]) for key, sk in packed_ipv4_truth(cfg.values, ORIGIN, log).items())
    changed = {
        "duplicated": log + [log[17]],
        "lost": log[:17] + log[18:],
        "moved": log[:17] + [(log[17][0] + SIZE, log[17][1])] + log[18:],
    }
    for what, other in changed.items():
        truth = packed_ipv4_truth(cfg.values, ORIGIN, other)
        assert not all(key in product and sk.matches(product[key]) for key, sk in truth.items()), what
