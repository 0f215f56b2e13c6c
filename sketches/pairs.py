"""Pair hierarchies for two-dimensional HHH: (source prefix, destination prefix) (docs/ALGORITHMS.md §11).

A :class:`PairHierarchy` combines two hierarchies H1 (levels 0..h1) and H2 (levels 0..h2). Its
lattice nodes are the pairs (ℓ1, ℓ2); (0, 0) is the root and the other
``H = (h1 + 1)(h2 + 1) − 1`` nodes are sketched. To the rest of dphhh a pair hierarchy *is* a
hierarchy with ``h = H`` "levels": level ``i`` (1..H) is the node :attr:`PairHierarchy.nodes`
``[i − 1]``, ordered by ``ℓ1 + ℓ2`` then ``ℓ1`` (so the finest node is level H). Sketching
(:class:`~dphhh.sketches.level_sketches.LevelSketches`) and release therefore work unchanged, and the
release is calibrated with h := H because each element touches H sketches.

Keys (int64, >= 0, one sketch per node, so keys need only be distinct within a node):

* IPv4 × IPv4: the two prefixes' significant bits side by side, ``bits(a, L1) << L2 | bits(b, L2)``
  with ``L1, L2`` the nodes' prefix lengths — **collision-free** for every node with
  ``L1 + L2 <= 63``, computed straight from the two uint32 address arrays (a few vectorised
  shifts per node); a node with 64 significant bits (``/32 × /32``) gets a 63-bit keyed SipHash
  of them (:mod:`dphhh.sketches.keyed`: a secret key per window, so no collision can be crafted);
* any other combination (IPv6, paths): a 63-bit keyed SipHash of the two sides' keys.

Hashed keys are remembered with their pairs in a compiled hash table
(:class:`~dphhh.sketches._pair_table.KeyTable`, one O(n) pass per batch, no Python loop); two pairs
that collide by chance are merged under the smaller pair, never refused (docs/ALGORITHMS.md §1
"Keys", §11). The table belongs to the keyed object (:meth:`PairHierarchy.keyed`: one per window).

Values are ``(first_values, second_values)`` with the element order of the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._pair_table import KeyTable
from .errors import UsageError
from .hierarchy import PUBLIC_KEY, Hierarchy, IPv4Hierarchy, parse_single_hierarchy, splitmix64
from .keyed import KeySecret, siphash_words

__all__ = ["PairHierarchy", "parse_pair_hierarchy", "is_pair_spec", "PAIR_SEPARATOR", "ARROW"]

#: How a pair hierarchy's spec separates its two sides: ``"ipv4:8,16 x ipv4:8,16"``.
PAIR_SEPARATOR = " x "
#: How a pair prefix is written: ``"10.0.0.0/8 → 198.51.100.0/24"``.
ARROW = " → "


class PairHierarchy(Hierarchy):
    """The lattice of (first prefix, second prefix) pairs; ``h`` counts the sketched nodes."""

    kind = "pair"

    def __init__(self, first: Hierarchy, second: Hierarchy, secret: KeySecret | None = None) -> None:
        for side, name in ((first, "first"), (second, "second")):
            if not isinstance(side, Hierarchy) or isinstance(side, PairHierarchy):
                raise UsageError(f"PairHierarchy: the {name} side must be a one-dimensional hierarchy, got {side!r}")
        self.secret = PUBLIC_KEY if secret is None else secret
        self.first, self.second = first.keyed(secret), second.keyed(secret)
        nodes = [(a, b) for a in range(first.h + 1) for b in range(second.h + 1) if (a, b) != (0, 0)]
        self.nodes: list[tuple[int, int]] = sorted(nodes, key=lambda n: (n[0] + n[1], n[0]))
        self._level_of = {node: i + 1 for i, node in enumerate(self.nodes)}
        self._ipv4 = isinstance(first, IPv4Hierarchy) and isinstance(second, IPv4Hierarchy)
        # per level: key -> (first key, second key), for nodes whose keys cannot be decoded
        self._table: list[KeyTable | None] = [None] * (len(self.nodes) + 1)
        self.hashed_keys = not all(self._exact(node) for node in self.nodes)
        self._merges = 0

    @property
    def hashed_levels(self) -> int:
        return sum(1 for node in self.nodes if not self._exact(node))

    @property
    def collisions(self) -> int:
        return self._merges + self.first.collisions + self.second.collisions

    def keyed(self, secret: KeySecret | None) -> PairHierarchy:
        return PairHierarchy(self.first, self.second, secret)

    # ------------------------------------------------------------------ the lattice

    @property
    def h(self) -> int:
        return len(self.nodes)

    def spec(self) -> str:
        return f"{self.first.spec()}{PAIR_SEPARATOR}{self.second.spec()}"

    def node(self, level: int) -> tuple[int, int]:
        """The lattice node (ℓ1, ℓ2) of ``level`` (0 is the root (0, 0))."""
        self._check_level(level, allow_root=True)
        return (0, 0) if level == 0 else self.nodes[level - 1]

    def level_of(self, node: tuple[int, int]) -> int:
        """The level index of lattice node ``node`` (0 for the root)."""
        if tuple(node) == (0, 0):
            return 0
        try:
            return self._level_of[(int(node[0]), int(node[1]))]
        except KeyError:
            raise UsageError(f"PairHierarchy: no node {tuple(node)!r} in {self.spec()}") from None

    def _lengths(self, node: tuple[int, int]) -> tuple[int, int]:
        assert isinstance(self.first, IPv4Hierarchy) and isinstance(self.second, IPv4Hierarchy)
        a, b = node
        la = 0 if a == 0 else self.first.prefix_lengths[a - 1]
        lb = 0 if b == 0 else self.second.prefix_lengths[b - 1]
        return la, lb

    def _exact(self, node: tuple[int, int]) -> bool:
        return self._ipv4 and sum(self._lengths(node)) <= 63

    def pack_values(self, values: Any) -> bytes | None:
        """IPv4 × IPv4: the two address arrays (little-endian uint32), 8 bytes a pair where its h
        keys take 8·h; other pairs ship their keys (``None``)."""
        if not self._ipv4:
            return None
        first, second = values
        return np.asarray(first, dtype="<u4").tobytes() + np.asarray(second, dtype="<u4").tobytes()

    def unpack_values(self, data: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
        if not self._ipv4 or len(data) % 8:
            raise UsageError(f"PairHierarchy: these bytes are not packed pairs of {self.spec()}")
        both = np.frombuffer(data, dtype="<u4")
        half = both.size // 2
        return both[:half].astype(np.uint32), both[half:].astype(np.uint32)

    # ------------------------------------------------------------------ keys

    def side_keys(self, values: Any, node: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The two sides' keys (int64) of ``values`` at ``node`` (0 for a side at its root)."""
        first_values, second_values = values
        n = self.first.count(first_values)
        a, b = node
        ka = self.first.keys(first_values, a) if a else np.zeros(n, dtype=np.int64)
        kb = self.second.keys(second_values, b) if b else np.zeros(n, dtype=np.int64)
        return ka, kb

    def encode(self, ka: np.ndarray, kb: np.ndarray, level: int) -> np.ndarray:
        """Pair keys at ``level`` of the side keys ``ka``, ``kb`` (int64 arrays)."""
        self._check_level(level, allow_root=True)
        ka, kb = np.asarray(ka, dtype=np.int64), np.asarray(kb, dtype=np.int64)
        if self._ipv4:
            return self._ipv4_keys(ka.astype(np.uint64), kb.astype(np.uint64), level)
        return self._remember(level, self._hash_pairs(ka, kb, level), ka, kb)

    def _ipv4_keys(self, a: np.ndarray, b: np.ndarray, level: int) -> np.ndarray:
        """IPv4 × IPv4 pair keys at ``level`` of addresses or side keys ``a``, ``b`` (uint64 arrays,
        which it may overwrite): the significant bits side by side, mixed (and remembered) at 64 bits."""
        la, lb = self._lengths(self.node(level))
        if la:
            np.right_shift(a, np.uint64(32 - la), out=a)
            if lb:
                np.left_shift(a, np.uint64(lb), out=a)
        if lb:
            np.right_shift(b, np.uint64(32 - lb), out=b)
        packed = (a | b) if la and lb else a if la else b if lb else np.zeros(a.shape, np.uint64)
        if la + lb <= 63:
            return packed.view(np.int64)
        # the /32 × /32 node: a keyed 63-bit SipHash, its pairs remembered; (a, b) are the addresses
        keys = siphash_words(self.secret.level(level, b"pair"), packed, np.zeros_like(packed))
        return self._remember(level, keys, packed >> np.uint64(32), packed & np.uint64(0xFFFFFFFF))

    def _hash_pairs(self, ka: np.ndarray, kb: np.ndarray, level: int) -> np.ndarray:
        return siphash_words(self.secret.level(level, b"pair"), ka.astype(np.uint64), kb.astype(np.uint64))

    def _remember(self, level: int, keys: np.ndarray, ka: np.ndarray, kb: np.ndarray) -> np.ndarray:
        """Record key → (ka, kb) for undecodable keys (two pairs of one key: the smaller is kept)."""
        if keys.size == 0:
            return keys
        table = self._table[level]
        if table is None:
            table = self._table[level] = KeyTable()
        self._merges += table.enter(keys, ka, kb)
        return keys

    def keys(self, values: Any, level: int) -> np.ndarray:
        self._check_level(level)
        if self._ipv4:  # straight from the two address arrays (the sides' masks are implied by the shifts)
            first_values, second_values = values
            a = np.asarray(first_values, dtype=np.uint32)
            b = np.asarray(second_values, dtype=np.uint32)
            if a.shape[0] != b.shape[0]:
                raise UsageError(f"PairHierarchy: {a.shape[0]} first values but {b.shape[0]} second values")
            first_at, second_at = self.node(level)
            zeros = np.zeros(a.shape[0], dtype=np.uint64)  # a side at its root contributes no bits
            a64 = a.astype(np.uint64) if first_at else zeros
            b64 = b.astype(np.uint64) if second_at else zeros
            return self._ipv4_keys(a64, b64, level)
        ka, kb = self.side_keys(values, self.node(level))
        if ka.shape[0] != kb.shape[0]:
            raise UsageError(f"PairHierarchy: {ka.shape[0]} first values but {kb.shape[0]} second values")
        return self.encode(ka, kb, level)

    def decode(self, key: int, level: int) -> tuple[int, int]:
        """The two side keys of pair ``key`` at ``level``."""
        node = self.node(level)
        if level == 0:
            return 0, 0
        if self._exact(node):
            la, lb = self._lengths(node)
            key = int(key)
            bits_a, bits_b = key >> lb, key & ((1 << lb) - 1)
            return (bits_a << (32 - la)) if la else 0, (bits_b << (32 - lb)) if lb else 0
        return next(iter(self._looked_up(np.array([int(key)], dtype=np.int64), level).values()))

    def _looked_up(self, keys: np.ndarray, level: int) -> dict[int, tuple[int, int]]:
        """``{key: (first key, second key)}`` from the table of an undecodable node; every key must be in it."""
        table = self._table[level]
        found, ka, kb = table.lookup(keys) if table is not None else (np.zeros(keys.shape[0], bool), keys, keys)
        if not found.all():
            raise UsageError(f"PairHierarchy: unknown key at node {self.node(level)} (never seen by this hierarchy)")
        return dict(zip(keys.tolist(), zip(ka.tolist(), kb.tolist())))

    def labels_of(self, keys: np.ndarray, level: int) -> dict[int, tuple[int, int]]:
        """``{key: (first key, second key)}`` of undecodable keys (to ship beside hashed keys)."""
        self._check_level(level)
        if self._exact(self.node(level)):
            return {}
        return self._looked_up(np.unique(np.asarray(keys, dtype=np.int64)), level)

    def remember(self, level: int, labels: dict[int, Any]) -> None:
        """Learn ``{key: (first key, second key)}`` produced elsewhere (under the same key); each is
        checked against its key, and of two pairs of one key the smaller is kept."""
        self._check_level(level)
        if not labels:
            return
        keys = np.fromiter((int(k) for k in labels), dtype=np.int64, count=len(labels))
        ka = np.fromiter((int(pair[0]) for pair in labels.values()), dtype=np.int64, count=len(labels))
        kb = np.fromiter((int(pair[1]) for pair in labels.values()), dtype=np.int64, count=len(labels))
        if not np.array_equal(self.encode(ka, kb, level), keys):
            raise UsageError("PairHierarchy: a label does not match its key")

    # ------------------------------------------------------------------ prefixes

    def side_labels(self, key: int, level: int) -> tuple[str, str]:
        a, b = self.node(level)
        ka, kb = self.decode(key, level)
        return self.first.label(ka, a), self.second.label(kb, b)

    def label(self, key: int, level: int) -> str:
        return ARROW.join(self.side_labels(key, level))

    def generalises(self, key: int, level: int, other_key: int, other_level: int) -> bool:
        """True iff pair (``key``, ``level``) generalises (``other_key``, ``other_level``) (or equals it)."""
        (a, b), (c, d) = self.node(level), self.node(other_level)
        if a > c or b > d:
            return False
        ka, kb = self.decode(key, level)
        oa, ob = self.decode(other_key, other_level)
        up_a = 0 if a == 0 else self.first.ancestor(oa, c, a)
        up_b = 0 if b == 0 else self.second.ancestor(ob, d, b)
        return up_a == ka and up_b == kb

    def ancestor(self, key: int, level: int, to_level: int) -> int:
        (a, b), (c, d) = self.node(level), self.node(to_level)
        if not (1 <= to_level <= self.h) or c > a or d > b:
            raise UsageError(f"PairHierarchy: node {(c, d)} does not generalise node {(a, b)}")
        ka, kb = self.decode(key, level)
        up_a = 0 if c == 0 else self.first.ancestor(ka, a, c)
        up_b = 0 if d == 0 else self.second.ancestor(kb, b, d)
        return int(self.encode(np.array([up_a], np.int64), np.array([up_b], np.int64), to_level)[0])

    def meet(self, key: int, level: int, other_key: int, other_level: int) -> tuple[int, int] | None:
        """The greatest lower bound of two pairs — the pair whose elements are exactly those under
        both — as ``(key, level)``, or ``None`` when no element is under both."""
        (a, b), (c, d) = self.node(level), self.node(other_level)
        ka, kb = self.decode(key, level)
        oa, ob = self.decode(other_key, other_level)

        def side(h: Hierarchy, x: int, lx: int, y: int, ly: int) -> tuple[int, int] | None:
            if lx >= ly:
                return (x, lx) if ly == 0 or h.ancestor(x, lx, ly) == y else None
            return (y, ly) if lx == 0 or h.ancestor(y, ly, lx) == x else None

        first = side(self.first, ka, a, oa, c)
        second = side(self.second, kb, b, ob, d)
        if first is None or second is None:
            return None
        level_meet = self.level_of((first[1], second[1]))
        if level_meet == 0:
            return 0, 0
        pair = self.encode(np.array([first[0]], np.int64), np.array([second[0]], np.int64), level_meet)
        return int(pair[0]), level_meet

    def key_hash(self, keys: np.ndarray, level: int) -> np.ndarray:
        self._check_level(level)
        salted = np.asarray(keys, dtype=np.int64).astype(np.uint64) ^ (np.uint64(level) << np.uint64(56))
        return splitmix64(salted)

    def count(self, values: Any) -> int:
        return self.first.count(values[0])

    def empty(self) -> tuple[Any, Any]:
        return self.first.empty(), self.second.empty()

    def concat(self, batches: Sequence[Any]) -> tuple[Any, Any]:
        """(first values, second values) of the batches, each side concatenated by its hierarchy."""
        return self.first.concat([b[0] for b in batches]), self.second.concat([b[1] for b in batches])


def is_pair_spec(text: str) -> bool:
    """True iff ``text`` names a pair hierarchy (``"A x B"`` or ``"A × B"``)."""
    return isinstance(text, str) and (" x " in text or "×" in text)


def parse_pair_hierarchy(text: str) -> PairHierarchy:
    """``"ipv4:8,16,24,32 x ipv4:8,16,24,32"`` → a :class:`PairHierarchy` (any two 1-D specs)."""
    parts: Sequence[str] = [p.strip() for p in str(text).replace("×", " x ").split(" x ")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"hierarchy: a pair hierarchy is 'A x B' with two one-dimensional specs, got {text!r}")
    return PairHierarchy(parse_single_hierarchy(parts[0]), parse_single_hierarchy(parts[1]))
