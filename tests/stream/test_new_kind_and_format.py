"""A new hierarchy kind and a new message format are each one class and its registration.

This test defines both — ``port`` (TCP/UDP ports, levels by leading bits: ``port:4,8,12,16``) and
``text-port`` (one decimal port per message) — registers them, and runs the stream job's operators
unmodified (:mod:`tests.harness`: decode → sketch → release) on a replay of one window: the report
names the heavy port ranges, a bad message is dead-lettered with the format's own reason, and the
config refuses the new format with another kind's hierarchy. No product file knows either class.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from operator import itemgetter
from pathlib import Path

import numpy as np
import pytest
from pyflink.common import Types

from dphhh.connectors.messages import MESSAGE_FORMATS, DecodedBatch, MessageFormat, register_message_format
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import HIERARCHY_KINDS, Hierarchy, register_hierarchy_kind, splitmix64
from dphhh.sketches.specs import parse_hierarchy
from dphhh.stream.config import ConfigError, load_config
from dphhh.stream.message_batch import pack_batch
from dphhh.stream.operators import START, STEP_IDS, DecodeOperator, ReleaseOperator, SketchOperator
from dphhh.stream.wire import unstamp
from tests.harness import Chain, KeyedHarness, ProcessHarness

W = 10_000
ORIGIN = 1_700_000_000_000
RAW = Types.PRIMITIVE_ARRAY(Types.BYTE())
TO_SKETCH = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), RAW, RAW])
RELEASES = Types.TUPLE([Types.LONG(), RAW])


class PortHierarchy(Hierarchy):
    """Ports 0..65535 generalised to their leading ``bits`` (``port:4,8,12,16``): a level's key is
    the port's top bits; its label the range ``lo-hi``."""

    kind = "port"

    def __init__(self, bits: Sequence[int] = (4, 8, 12, 16)) -> None:
        self.bits = tuple(int(b) for b in bits)
        if not self.bits or any(not 1 <= b <= 16 for b in self.bits) or list(self.bits) != sorted(set(self.bits)):
            raise UsageError(f"PortHierarchy: bits must increase within 1..16, got {list(self.bits)}")

    @classmethod
    def from_spec_levels(cls, levels: list[int] | None, text: str) -> PortHierarchy:
        return cls(levels or (4, 8, 12, 16))

    @property
    def h(self) -> int:
        return len(self.bits)

    def spec(self) -> str:
        return "port:" + ",".join(map(str, self.bits))

    def keys(self, values, level: int) -> np.ndarray:
        self._check_level(level)
        return np.asarray(values, dtype=np.int64) >> (16 - self.bits[level - 1])

    def label(self, key: int, level: int) -> str:
        self._check_level(level, allow_root=True)
        shift = 16 - (self.bits[level - 1] if level else 0)
        return f"{int(key) << shift}-{((int(key) + 1) << shift) - 1}"

    def ancestor(self, key: int, level: int, to_level: int) -> int:
        return int(key) >> (self.bits[level - 1] - self.bits[to_level - 1])

    def key_hash(self, keys: np.ndarray, level: int) -> np.ndarray:
        return splitmix64(np.asarray(keys, dtype=np.int64).astype(np.uint64) ^ (np.uint64(level) << np.uint64(40)))

    def count(self, values) -> int:
        return len(values)

    def empty(self) -> np.ndarray:
        return np.empty(0, dtype=np.uint16)

    def concat(self, batches) -> np.ndarray:
        return np.concatenate(batches) if batches else self.empty()


class TextPort(MessageFormat):
    """One decimal port per message."""

    name = "text-port"
    summary = "one decimal port (0..65535) per message"
    reasons = ("empty", "oversized", "bad_port")
    hierarchy_kinds = frozenset({"port"})

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        reasons: list[str | None] = []
        ports = []
        for value in values:
            reason = self.size_reason(value)
            if reason is None:
                text = bytes(value).decode("ascii", "replace").strip()  # type: ignore[arg-type]
                if text.isdigit() and int(text) < 65536:
                    ports.append(int(text))
                else:
                    reason = "bad_port"
            reasons.append(reason)
        counts = np.array([r is None for r in reasons], dtype=np.int64)
        return DecodedBatch(reasons, counts, np.array(ports, dtype=np.uint16))

    def holds_element(self, value: bytes | None) -> bool:
        return bool(value) and any(chr(b).isdigit() for b in value)  # type: ignore[union-attr]


@pytest.fixture
def registered() -> Iterator[None]:
    register_hierarchy_kind(PortHierarchy)
    register_message_format(TextPort)
    try:
        yield
    finally:
        del HIERARCHY_KINDS["port"], MESSAGE_FORMATS["text-port"]


def _cfg(tmp_path: Path, *more: str):
    return load_config(
        None,
        environ={},
        overrides=[
            "window.mode=replay",
            f"window.size_ms={W}",
            f"window.origin={ORIGIN}",
            f"window.until={ORIGIN + W}",
            "privacy.epsilon=50",
            "privacy.tau=500",
            "privacy.seed=7",  # seeded: reproducible, NOT private
            f"output.ledger_dir={tmp_path / 'ledger'}",
            f"output.reports_file={tmp_path / 'reports.jsonl'}",
            *more,
        ],
    )


def test_the_new_kind_parses_alone_and_in_a_pair_and_the_new_format_fits_it_only(registered, tmp_path: Path) -> None:
    assert parse_hierarchy("port:8,16").spec() == "port:8,16"
    assert parse_hierarchy("ipv4:8,16 x port:8,16").h == 8  # (2 + 1)(2 + 1) − 1 pair nodes
    with pytest.raises(ConfigError, match=r"hierarchy.spec 'ipv4:8,16,24,32' needs input.format .*got 'text-port'"):
        _cfg(tmp_path, "input.format=text-port")
    with pytest.raises(ConfigError, match=r"hierarchy.spec 'port:4,8,12,16' needs input.format 'text-port'"):
        _cfg(tmp_path, "hierarchy.spec=port:4,8,12,16", "input.format=text-ipv4")


def test_without_registration_the_kind_is_refused() -> None:
    with pytest.raises(UsageError, match="kind must be ipv4, ipv6 or path, got 'port'"):
        parse_hierarchy("port:8,16")


def test_the_stream_operators_run_the_new_kind_and_format_unmodified(registered, tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "hierarchy.spec=port:4,8,12,16", "input.format=text-port")
    values = {s: dict(v) for s, v in cfg.values.items()}
    chain = Chain(
        ProcessHarness(DecodeOperator(values, ORIGIN), output_type=TO_SKETCH),
        KeyedHarness(SketchOperator(values, ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=RELEASES),
        KeyedHarness(
            ReleaseOperator(values, ORIGIN, str(tmp_path / "run"), None),
            lambda r: 0,
            key_type=Types.INT(),
            output_type=Types.PRIMITIVE_ARRAY(Types.BYTE()),
        ),
    ).open()
    chain.send((START, b""), at=2)
    rng = np.random.default_rng(3)
    ports = np.concatenate([np.full(3000, 443), 8080 + rng.integers(0, 16, 2000), rng.integers(0, 65536, 1000)])
    messages = [str(p).encode() for p in rng.permutation(ports)] + [b"http"]
    for i in range(0, len(messages), 500):
        part = messages[i : i + 500]
        chain.send(pack_batch([ORIGIN + 10 + i // 500] * len(part), part))
    chain.end_of_input()
    reports = [json.loads(unstamp(o)[1]) for o in chain.outputs]
    assert len(reports) == 1
    heavy = {x["prefix"] for x in reports[0]["hhh"]}
    assert {"443-443", "8080-8095"} <= heavy, heavy  # the one heavy port, the heavy /12 range
    dead = [json.loads(unstamp(d)[1])["reason"] for d in chain.stages[0].side_outputs[STEP_IDS["dead_letter"]]]
    assert dead == ["bad_port"], dead
    chain.close()
