"""No failure that depends on the data (docs/ALGORITHMS.md §0.1 h): on random neighbouring inputs —
X, and X with one more element, colliding keys included — no layer (decode, cap, sketch, release,
report) raises for one and not the other, for every hierarchy kind the stream job reads.

Collisions are crafted by lowering the hashed keys' width to 6 bits (``sketches.keyed.KEY_BITS``;
the code paths are the production ones): at that width nearly every hashed level holds colliding
prefixes, and the added element is chosen to share a key with a prefix of X. Before this change
the pair hierarchy's /32 × /32 key was a public 63-bit mix and a collision raised ("63-bit key
collision … cannot continue"), as did path keys: one crafted record made the job fail iff its
victim had been seen.
"""

from __future__ import annotations

import json
from operator import itemgetter
from pathlib import Path

import numpy as np
import pytest
from pyflink.common import Types

import dphhh.sketches.keyed as keyed
from dphhh.sketches.keyed import KeySecret
from dphhh.stream.config import load_config
from dphhh.stream.message_batch import pack_batch
from dphhh.stream.operators import START, CapOperator, DecodeOperator, ReleaseOperator, SketchOperator
from dphhh.stream.wire import unstamp
from tests.harness import Chain, KeyedHarness, ProcessHarness

W = 1000
ORIGIN = 1_700_000_000_000
RAW = Types.PRIMITIVE_ARRAY(Types.BYTE())
TO_SKETCH = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), RAW, RAW])

KINDS = {
    "ipv4": ("ipv4:8,16,24,32", "packed-ipv4", ""),
    "pairs": ("ipv4:8,16,24,32 x ipv4:8,16,24,32", "packed-ipv4-pairs", ""),
    "pairs-user": ("ipv4:16,32 x ipv4:16,32", "packed-ipv4-pairs", "source-ipv4"),
    "path": ("path:3", "path", ""),
}


def _cfg(tmp: Path, kind: str):
    spec, fmt, unit = KINDS[kind]
    more = [f"privacy.unit_key={unit}", "privacy.unit_cap=3", "privacy.budget_epsilon=10000"] if unit else []
    return load_config(
        None,
        environ={},
        overrides=[
            "window.mode=replay",
            f"window.size_ms={W}",
            f"window.origin={ORIGIN}",
            f"window.until={ORIGIN + 2 * W}",
            f"hierarchy.spec={spec}",
            f"input.format={fmt}",
            "privacy.epsilon=4",
            "privacy.delta=0.4",  # (6-bit keys cost a large δ: κ·2⁻⁶ per level, docs/calibration.md §8)
            "privacy.tau=20",
            "privacy.counters=2",
            "privacy.partitions=2",
            "privacy.seed=1",
            f"output.ledger_dir={tmp / 'ledger'}",
            f"output.reports_file={tmp / 'reports.jsonl'}",
            *more,
        ],
    )


def _run(tmp: Path, kind: str, messages: list[tuple[int, bytes]]) -> list[dict]:
    cfg = _cfg(tmp, kind)
    values = {s: dict(v) for s, v in cfg.values.items()}
    stages = [ProcessHarness(DecodeOperator(values, ORIGIN), output_type=TO_SKETCH)]
    if cfg.unit.kind == "user":
        stages.append(
            KeyedHarness(CapOperator(values, ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=TO_SKETCH)
        )
    stages.append(
        KeyedHarness(
            SketchOperator(values, ORIGIN),
            itemgetter(0),
            key_type=Types.INT(),
            output_type=Types.TUPLE([Types.LONG(), RAW]),
        )
    )
    stages.append(
        KeyedHarness(
            ReleaseOperator(values, ORIGIN, str(tmp / "run"), None), lambda r: 0, key_type=Types.INT(), output_type=RAW
        )
    )
    chain = Chain(*stages).open()
    chain.send((START, b""), at=len(stages) - 1)
    for i in range(0, len(messages), 5):
        chunk = messages[i : i + 5]
        chain.send(pack_batch([t for t, _ in chunk], [m for _, m in chunk]))
    chain.end_of_input()
    reports = [json.loads(unstamp(o)[1]) for o in chain.outputs]
    chain.close()
    return reports


def _element(kind: str, rng: np.random.Generator, pool: np.ndarray, paths: list[str]) -> bytes:
    if kind == "path":
        return paths[int(rng.integers(0, len(paths)))].encode()
    a, b = pool[rng.integers(0, len(pool), 2)]
    if kind == "ipv4":
        return int(b).to_bytes(4, "big")
    return int(a).to_bytes(4, "big") + int(b).to_bytes(4, "big")


def _colliding(kind: str, secret: KeySecret, stream: list[tuple[int, bytes]], rng: np.random.Generator) -> bytes:
    """An element new to X whose finest-level key (6 bits) equals a key of X's elements."""
    from dphhh.sketches.specs import parse_hierarchy

    h = parse_hierarchy(KINDS[kind][0]).keyed(secret)
    level = h.h
    if kind == "path":
        have = [m.decode() for _, m in stream]
        held = set(h.keys(have, level).tolist())
        for i in range(10_000):
            cand = f"zz/q{i}/w{i}"
            if cand not in have and int(h.keys([cand], level)[0]) in held:
                return cand.encode()
    else:
        words = np.frombuffer(b"".join(m for _, m in stream), dtype=">u4").astype(np.uint32).reshape(-1, 2)
        held = set(h.keys((words[:, 0], words[:, 1]), level).tolist())
        for _ in range(10_000):
            a, b = rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)
            if int(h.keys((np.array([a]), np.array([b])), level)[0]) in held:
                return int(a).to_bytes(4, "big") + int(b).to_bytes(4, "big")
    raise AssertionError("no colliding element found")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_layer_fails_for_one_neighbour_and_not_the_other(kind: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(keyed, "KEY_BITS", 6)
    rng = np.random.default_rng(sorted(KINDS).index(kind))
    pool = rng.integers(0, 2**32, 50, dtype=np.uint64).astype(np.uint32)
    paths = [f"c{i % 3}/r{i % 11}/s{i}" for i in range(60)]
    for case in range(12):
        stream = [
            (int(ORIGIN + rng.integers(0, 2 * W)), _element(kind, rng, pool, paths))
            for _ in range(int(rng.integers(5, 80)))
        ]
        secret = KeySecret.from_seed(1)  # the seeded job's key (stream.ledger.job_key_secret)
        extra_at = int(ORIGIN + rng.integers(0, 2 * W))
        if kind != "ipv4" and case % 2 == 0:  # the added element collides with X's keys in its window
            window = extra_at - extra_at % W
            same = [(t, m) for t, m in stream if t - t % W == window] or stream
            extra = _colliding(kind, secret.window(window), same, rng)
        else:
            extra = _element(kind, rng, pool, paths)
        at = int(rng.integers(0, len(stream) + 1))
        neighbour = stream[:at] + [(extra_at, extra)] + stream[at:]
        outcomes = []
        for name, log in (("x", stream), ("y", neighbour)):
            try:
                reports = _run(tmp_path / f"{kind}-{case}-{name}", kind, log)
                outcomes.append(("ok", [r["window"]["start_ms"] for r in reports]))
            except Exception as exc:  # noqa: BLE001 - what is compared is whether one side fails
                outcomes.append(("raised", type(exc).__name__))
        assert outcomes[0] == outcomes[1] == ("ok", [ORIGIN, ORIGIN + W]), (case, outcomes)
