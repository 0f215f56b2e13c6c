"""The stream job's wire formats: what one operator sends the next, as bytes (plain logic, no Flink).

* sketch payloads (``decode``/``cap`` → ``sketch``): per key partition, the keys of every level —
  compact kinds for IPv4 (the addresses once, with a per-partition level mask when P > 1, and the
  clipped record weights for weighted inputs) and generic ones (h int64 key arrays, and for
  weighted records the h weight arrays aligned with them) for pairs, IPv6 and paths:
  :func:`sketch_payloads`, :func:`ipv4_payloads`, :func:`pack_levels`, :func:`unpack_weighted_levels`;
* unit payloads (``decode`` → ``cap``, user-level privacy: unit keys, values and, for weighted
  records, their clipped weights): :func:`unit_payloads`, :func:`unpack_unit_payload`;
* sketch state (``sketch``'s keyed state): :func:`pack_sketches` / :func:`unpack_sketches`;
* dead-letter records (reason, the original bytes, the record timestamp): :func:`dead_letter_record`;
* stamped values (a value with the Kafka record timestamp it must carry): :func:`stamp` / :func:`unstamp`.

The (level, partition) routing is :func:`expand` — the same as :class:`dphhh.sketches.level_sketches.LevelSketches`
uses (:func:`dphhh.sketches.partition.route`, the one router), so a stream and a batch run sketch alike.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np

from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.misra_gries import MisraGries
from dphhh.sketches.partition import partition_of, route

from .assembler import sketch_id
from .config import JobConfig
from .epochs import AddressBatch, Batch

__all__ = [
    "select",
    "NO_STAMP",
    "dead_letter_record",
    "expand",
    "expand_by_partition",
    "ipv4_payloads",
    "pack_levels",
    "pack_sketches",
    "prefix_masks",
    "sketch_payloads",
    "stamp",
    "unit_payloads",
    "unit_shards",
    "unpack_levels",
    "unpack_sketch_batch",
    "unpack_sketches",
    "unpack_unit_payload",
    "unpack_weighted_levels",
    "unstamp",
]


def expand(values: np.ndarray, cfg: JobConfig, hierarchy: Hierarchy | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(sketch id, int64 keys) for every (level, partition) that the batch touches, input order kept
    (``hierarchy``: the configured one keyed with the window's key, for hashed keys)."""
    parts = cfg.params.partitions
    for level, p, keys, _ in route(cfg.hierarchy if hierarchy is None else hierarchy, values, parts):
        yield sketch_id(level, p, parts), keys


def expand_by_partition(values: np.ndarray, cfg: JobConfig) -> dict[int, list[np.ndarray]]:
    """partition → the keys of each level 1..h (int64, input order) that fall in that partition."""
    return {p: levels for p, (levels, _) in _route_by_partition(values, cfg, None).items()}


def _route_by_partition(
    values: Any, cfg: JobConfig, weights: np.ndarray | None, hierarchy: Hierarchy | None = None
) -> dict[int, tuple[list[np.ndarray], list[np.ndarray] | None]]:
    """partition → (the keys of each level 1..h in that partition, and — when ``weights`` are
    given, one per value — their values' weights, aligned with them; else ``None``), routed by
    :func:`dphhh.sketches.partition.route` as LevelSketches routes them."""
    hierarchy = cfg.hierarchy if hierarchy is None else hierarchy
    h, parts = hierarchy.h, cfg.params.partitions
    empty = np.empty(0, dtype=np.int64)
    out: dict[int, tuple[list[np.ndarray], list[np.ndarray] | None]] = {}
    for level, p, keys, part_weights in route(hierarchy, values, parts, weights):
        levels, level_weights = out.setdefault(p, ([empty] * h, None if weights is None else [empty] * h))
        levels[level - 1] = keys
        if level_weights is not None:
            assert part_weights is not None  # route keeps the weights of the keys it yields
            level_weights[level - 1] = part_weights
    return out


# Payload of one decode → sketch record: an int64 header (kind, element count), then
#   _KEYS:        the h per-level lengths and key arrays (int64) — any hierarchy;
#   _KEYS_W:      the same followed by the h per-level weight arrays (int64, clipped), each aligned
#                 with its level's keys — weighted records of a non-IPv4 hierarchy (pairs);
#   _IPV4:        the addresses (uint32), every level's keys in this partition (IPv4, P = 1);
#   _IPV4_MASKED: the addresses (uint32) and a uint32 level mask each (bit l-1: level l's key is in
#                 this partition) — IPv4, P > 1. IPv4 keys are masked addresses, so shipping the
#                 addresses (4 bytes, not 8 per level) lets the sketch side rebuild every level's keys.
#   _IPV4_W, _IPV4_MASKED_W: the same followed by each address's record weight (int64, already
#                 clipped to the public cap) — weighted flow records (docs/ALGORITHMS.md §2 "Weighted elements").
#   _VALUES:      P = 1, a hierarchy that packs its values (Hierarchy.pack_values: paths, IPv4 × IPv4
#                 pairs): the packed values' length (int64), the bytes (padded to 8); the sketch step
#                 keys them with the window's key (a few bytes an element where h keys take 8·h,
#                 and no labels: the sketch step's keyed hierarchy names its keys).
#   _VALUES_W:    the same followed by each value's record weight (int64, clipped).
_KEYS, _IPV4, _IPV4_MASKED, _IPV4_W, _IPV4_MASKED_W, _KEYS_W, _VALUES, _VALUES_W = 0, 1, 2, 3, 4, 5, 6, 7


def _header(kind: int, n: int) -> bytes:
    return np.array([kind, n], dtype=np.int64).tobytes()


def pack_levels(arrays: list[np.ndarray], weights: list[np.ndarray] | None = None) -> bytes:
    """A ``_KEYS`` payload: the h lengths, then the h key arrays (int64); with ``weights`` (one
    int64 array per level, aligned with that level's keys) a ``_KEYS_W`` payload, the h weight
    arrays after the keys."""
    sizes = np.array([a.size for a in arrays], dtype=np.int64)
    if weights is None:
        body = np.concatenate([sizes, *arrays]).astype(np.int64, copy=False).tobytes()
        return _header(_KEYS, int(sizes.sum())) + body
    if [w.size for w in weights] != sizes.tolist():
        raise UsageError("pack_levels: every level needs one weight per key")
    body = np.concatenate([sizes, *arrays, *weights]).astype(np.int64, copy=False).tobytes()
    return _header(_KEYS_W, int(sizes.sum())) + body


def ipv4_payloads(values: np.ndarray, cfg: JobConfig, weights: np.ndarray | None = None) -> dict[int, bytes]:
    """partition → payload of IPv4 ``values`` (the compact ``_IPV4`` / ``_IPV4_MASKED`` kinds, or
    their weighted ``_W`` forms when ``weights`` — int64, one per value, clipped — are given)."""
    hierarchy, parts = cfg.hierarchy, cfg.params.partitions
    addrs = np.ascontiguousarray(values, dtype=np.uint32)
    w = None if weights is None else np.ascontiguousarray(weights, dtype=np.int64)
    if parts == 1:
        if not addrs.size:
            return {}
        if w is None:
            return {0: _header(_IPV4, addrs.size) + addrs.tobytes()}
        return {0: _header(_IPV4_W, addrs.size) + addrs.tobytes() + w.tobytes()}
    masks = np.zeros((parts, addrs.size), dtype=np.uint32)
    for level in range(1, hierarchy.h + 1):
        owner = partition_of(hierarchy, hierarchy.keys(addrs, level), level, parts)
        masks[owner, np.arange(addrs.size)] |= np.uint32(1 << (level - 1))
    out = {}
    for p in range(parts):
        chosen = masks[p] != 0
        n = int(np.count_nonzero(chosen))
        if n:
            body = addrs[chosen].tobytes() + masks[p][chosen].tobytes()
            out[p] = (
                _header(_IPV4_MASKED, n) + body
                if w is None
                else _header(_IPV4_MASKED_W, n) + body + w[chosen].tobytes()
            )
    return out


def sketch_payloads(
    values: Any, cfg: JobConfig, weights: np.ndarray | None = None, hierarchy: Hierarchy | None = None
) -> Iterator[tuple[int, bytes, bytes]]:
    """(partition, payload, labels) of one window's ``values`` for the sketch operators; ``labels``
    (hashed-key hierarchies only) name the keys so that reports can show their prefixes.
    ``weights`` (clipped record weights, int64, one per value) travel with their values: with
    the addresses (IPv4), or routed with each level's keys (``_KEYS_W``: pairs, any hierarchy).
    ``hierarchy``: the configured one keyed with the window's hash key
    (:meth:`dphhh.sketches.hierarchy.Hierarchy.keyed`; default ``cfg.hierarchy``)."""
    hierarchy = cfg.hierarchy if hierarchy is None else hierarchy
    if hierarchy.address_masks() is not None:  # addresses travel, masked where they are counted
        for p, payload in ipv4_payloads(values, cfg, weights).items():
            yield p, payload, b""
        return
    w = None if weights is None else np.ascontiguousarray(weights, dtype=np.int64)
    count = len(values[0]) if isinstance(values, tuple) else len(values)
    if w is not None and w.shape != (count,):
        raise UsageError(f"sketch_payloads: {w.size} weights for {count} values (one weight per value)")
    packed = hierarchy.pack_values(values) if cfg.params.partitions == 1 else None
    if packed is not None:  # the values travel; the sketch step keys them
        yield 0, _pack_values(packed, count, w), b""
        return
    for p, (levels, level_weights) in _route_by_partition(values, cfg, w, hierarchy).items():
        labels = b""
        if hierarchy.hashed_keys:  # hashed keys travel with their labels
            named = {lv: hierarchy.labels_of(keys, lv) for lv, keys in enumerate(levels, start=1) if keys.size}
            named = {lv: known for lv, known in named.items() if known}  # exact pair nodes need none
            labels = pickle.dumps(named, protocol=5) if named else b""
        yield p, pack_levels(levels, level_weights), labels


def _pack_values(packed: bytes, n: int, weights: np.ndarray | None) -> bytes:
    """A ``_VALUES`` (``_VALUES_W`` with ``weights``) payload of ``n`` packed values (layout above)."""
    head = _header(_VALUES if weights is None else _VALUES_W, n) + np.array([len(packed)], np.int64).tobytes()
    body = packed + bytes(-len(packed) % 8)
    return head + body + (b"" if weights is None else weights.tobytes())


def _unpack_values(payload: bytes, hierarchy: Hierarchy) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Every level's keys (and weights) of a ``_VALUES``/``_VALUES_W`` payload, keyed by ``hierarchy``
    (the window's keyed one: its label tables learn the keys' prefixes)."""
    kind, n, size = np.frombuffer(payload, dtype=np.int64, count=3).tolist()
    weighted = kind == _VALUES_W
    end = 24 + size + (-size % 8)
    if n < 0 or size < 0 or len(payload) != end + (8 * n if weighted else 0):
        raise UsageError(f"SketchOperator: Possible corruption: a payload of kind {kind} does not hold its values")
    values = hierarchy.unpack_values(memoryview(payload)[24 : 24 + size])
    if hierarchy.count(values) != n:
        raise UsageError(f"SketchOperator: Possible corruption: a payload of kind {kind} does not hold {n} values")
    keys = list(hierarchy.level_keys(values))
    if not weighted:
        return keys, None
    return keys, [np.frombuffer(payload, dtype=np.int64, count=n, offset=end)] * hierarchy.h


def unit_shards(units: np.ndarray, shards: int) -> np.ndarray:
    """The cap operator shard of each unit key (a fixed, public mix of the key, mod ``shards``; a
    128-bit unit key, itself a keyed hash, is mixed through the XOR of its two words). Public, so
    crafted unit addresses can all go to one shard: at most ``shards`` times one shard's share of
    the load, never more per element (docs/ALGORITHMS.md §0.1 h)."""
    arr = np.asarray(units)
    if arr.dtype.names:  # privacy.unit_cap.UNIT_KEY_DTYPE
        arr = arr["hi"] ^ arr["lo"]
    mixed = (np.asarray(arr, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
    return (mixed % np.uint64(shards)).astype(np.int64)


def select(values: Any, mask: np.ndarray) -> Any:
    """The values where ``mask`` holds, in order, for every kind of hierarchy values: a list (paths),
    an array (IPv4), or a tuple of aligned arrays (IPv6 halves, (source, destination) pairs)."""
    if isinstance(values, list):
        return [v for v, m in zip(values, mask.tolist()) if m]
    if isinstance(values, tuple):
        return tuple(v[mask] for v in values)
    return values[mask]


def unit_payloads(
    values: Any, units: np.ndarray, shards: int, weights: np.ndarray | None = None
) -> Iterator[tuple[int, bytes]]:
    """(shard, payload) of one window's values and their unit keys, order kept within each shard;
    ``weights`` (the records' clipped weights, one per value) travel with their values."""
    owner = unit_shards(units, shards)
    for s in np.unique(owner).tolist():
        chosen = owner == s
        mine = None if weights is None else np.asarray(weights, dtype=np.int64)[chosen]
        yield s, pickle.dumps((units[chosen], select(values, chosen), mine), protocol=5)


def unpack_unit_payload(payload: bytes) -> tuple[np.ndarray, Any, np.ndarray | None]:
    """(unit keys, values, weights aligned with them or ``None``) of a :func:`unit_payloads` payload."""
    units, values, weights = pickle.loads(payload)
    return units, values, weights


def unpack_levels(payload: bytes, hierarchy: Hierarchy) -> list[np.ndarray]:
    """The h per-level key arrays (int64, input order) of any payload kind."""
    return unpack_weighted_levels(payload, hierarchy)[0]


def unpack_weighted_levels(payload: bytes, hierarchy: Hierarchy) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """The h per-level key arrays of any payload kind, and the per-level weight arrays aligned
    with them (``None`` for unweighted payloads)."""
    h = hierarchy.h
    kind, n = np.frombuffer(payload, dtype=np.int64, count=2).tolist()
    if kind in (_IPV4, _IPV4_W):
        addrs = np.frombuffer(payload, dtype=np.uint32, count=n, offset=16)
        keys = [hierarchy.keys(addrs, level) for level in range(1, h + 1)]
        if kind == _IPV4:
            return keys, None
        w = np.frombuffer(payload, dtype=np.int64, count=n, offset=16 + 4 * n)
        return keys, [w] * h
    if kind in (_IPV4_MASKED, _IPV4_MASKED_W):
        addrs = np.frombuffer(payload, dtype=np.uint32, count=n, offset=16)
        masks = np.frombuffer(payload, dtype=np.uint32, count=n, offset=16 + 4 * n)
        mine = [(masks >> np.uint32(level - 1)) & np.uint32(1) == 1 for level in range(1, h + 1)]
        keys = [hierarchy.keys(addrs[m], level) for level, m in zip(range(1, h + 1), mine)]
        if kind == _IPV4_MASKED:
            return keys, None
        w = np.frombuffer(payload, dtype=np.int64, count=n, offset=16 + 8 * n)
        return keys, [w[m] for m in mine]
    if kind in (_VALUES, _VALUES_W):
        return _unpack_values(payload, hierarchy)
    if kind not in (_KEYS, _KEYS_W):
        raise UsageError(f"SketchOperator: Possible corruption: unknown payload kind {kind}")
    flat = np.frombuffer(payload, dtype=np.int64, offset=16)
    sizes = flat[:h].tolist()
    if min(sizes, default=0) < 0 or sum(sizes) != n or flat.size != h + (2 if kind == _KEYS_W else 1) * n:
        raise UsageError(f"SketchOperator: Possible corruption: a payload of kind {kind} does not hold its keys")
    out, start = [], h
    for size in sizes:
        out.append(flat[start : start + size])
        start += size
    if kind == _KEYS:
        return out, None
    weights = []
    for size in sizes:
        weights.append(flat[start : start + size])
        start += size
    return out, weights


def prefix_masks(hierarchy: Hierarchy) -> tuple[int, ...] | None:
    """Each level's mask for a hierarchy whose payloads carry addresses, not keys (IPv4:
    :meth:`~dphhh.sketches.hierarchy.Hierarchy.address_masks`, :func:`unpack_sketch_batch`), else ``None``."""
    return hierarchy.address_masks()


def unpack_sketch_batch(seq: int, payload: bytes, hierarchy: Hierarchy) -> Batch | AddressBatch:
    """What the sketch operator buffers of one payload (state entry ``seq``): an IPv4 payload as its
    addresses, level bits and weights (views of ``payload``, no key computed yet:
    :class:`dphhh.stream.epochs.AddressBatch`), any other as its per-level keys and weights."""
    kind, n = np.frombuffer(payload, dtype=np.int64, count=2).tolist()
    if kind in (_IPV4, _IPV4_W, _IPV4_MASKED, _IPV4_MASKED_W):
        masked = kind in (_IPV4_MASKED, _IPV4_MASKED_W)
        weighted = kind in (_IPV4_W, _IPV4_MASKED_W)
        if n < 0 or len(payload) != 16 + (8 if masked else 4) * n + (8 * n if weighted else 0):
            raise UsageError(
                f"SketchOperator: Possible corruption: a payload of kind {kind} does not hold its addresses"
            )
        addresses = np.frombuffer(payload, dtype=np.uint32, count=n, offset=16)
        bits = np.frombuffer(payload, dtype=np.uint32, count=n, offset=16 + 4 * n) if masked else None
        weights = (
            np.frombuffer(payload, dtype=np.int64, count=n, offset=16 + (8 if masked else 4) * n) if weighted else None
        )
        return AddressBatch(seq, addresses, bits, weights)
    keys, level_weights = unpack_weighted_levels(payload, hierarchy)
    return Batch(seq, keys, level_weights)


def pack_sketches(sketches: list[MisraGries]) -> bytes:
    """The state value of one (partition, window): the h serialised sketches, length-prefixed."""
    parts = [s.to_bytes() for s in sketches]
    return b"".join(len(p).to_bytes(8, "little") + p for p in parts)


def unpack_sketches(data: bytes) -> list[MisraGries]:
    """Inverse of :func:`pack_sketches` (each sketch checked by ``MisraGries.from_bytes``)."""
    out, at = [], 0
    while at < len(data):
        n = int.from_bytes(data[at : at + 8], "little")
        out.append(MisraGries.from_bytes(data[at + 8 : at + 8 + n]))
        at += 8 + n
    return out


def dead_letter_record(reason: str, value: bytes | None, timestamp: int | None) -> bytes:
    """The dead-letter topic's record: the reason and the bad record itself (base64)."""

    return json.dumps(
        {"reason": reason, "timestamp_ms": timestamp, "value_b64": base64.b64encode(value or b"").decode("ascii")},
        sort_keys=True,
    ).encode("utf-8")


NO_STAMP = -(2**63)


def stamp(value: bytes, timestamp_ms: int | None) -> bytes:
    """``value`` with its Kafka record timestamp in front (8 bytes, big-endian), for the Java
    ``ScheduledTimestamps`` operator before a sink (``None``: no timestamp)."""
    ts = NO_STAMP if timestamp_ms is None else int(timestamp_ms)
    return ts.to_bytes(8, "big", signed=True) + value


def unstamp(data: bytes) -> tuple[int | None, bytes]:
    """Inverse of :func:`stamp` (for tests and tools)."""
    ts = int.from_bytes(data[:8], "big", signed=True)
    return (None if ts == NO_STAMP else ts), data[8:]
