"""Hierarchies over which heavy hitters are sought (docs/ALGORITHMS.md §1).

A hierarchy has levels ``0 .. h``: level 0 is the root (everything), level ``h`` the fully
specified element, and levels ``1 .. h`` are sketched. Each hierarchy turns a batch of *values*
(numpy arrays, or lists of strings for paths) into integer **sketch keys** per level with a
vectorised generalisation, formats a key as a prefix label, finds a key's ancestors, and gives a
fixed, public, data-independent **partition hash** of each key (docs/ALGORITHMS.md §2) computed from the prefix
itself, never from arrival order.

* :class:`IPv4Hierarchy` — prefix lengths, default ``(8, 16, 24, 32)``; keys are the masked
  addresses; labels ``107.0.0.0/8``.
* :class:`IPv6Hierarchy` — prefix lengths on 128-bit values held as ``(hi, lo)`` uint64 pairs;
  labels ``2001:db8::/32``.
* :class:`PathHierarchy` — ``/``-paths of exactly ``h`` components (``de/bavaria/munich/x``);
  level ℓ keeps the first ℓ components; labels ``de/bavaria``.

IPv6 and path keys are a 63-bit **keyed** hash of (level, prefix) (:mod:`dphhh.sketches.keyed`): a fixed
function of the prefix within one window — the same in every batch, process and run, independent of
arrival order (the sketch's smallest-key tie-break and the partition hash rely on that) — under a
secret key per window (:meth:`Hierarchy.keyed`), so nobody can compute a collision. The object
remembers each key's prefix to format labels; two prefixes that collide by chance are merged under
the smaller one, never refused (docs/ALGORITHMS.md §1 "Keys"; their cost is charged to δ,
docs/calibration.md §8). A hierarchy that was never keyed hashes with a public all-zero key:
for exact references and tests only — every private path keys its hierarchy.
"""

from __future__ import annotations

import ipaddress
import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .errors import UsageError
from .keyed import KeySecret

__all__ = [
    "HIERARCHY_KINDS",
    "Hierarchy",
    "register_hierarchy_kind",
    "IPv4Hierarchy",
    "IPv6Hierarchy",
    "PathHierarchy",
    "parse_single_hierarchy",
    "splitmix64",
]

_U64 = np.uint64


def splitmix64(values: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser on a uint64 array: a fixed public mixing function."""
    z = np.asarray(values, dtype=np.uint64) + _U64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


class Hierarchy(ABC):
    """A generalisation hierarchy with sketched levels ``1 .. h`` and the root at level 0."""

    kind: str
    #: whether keys are secret hashes of the prefixes (then they travel with labels, and the
    #: hierarchy must be :meth:`keyed` with the window's key before it makes private keys)
    hashed_keys: bool = False
    #: the IP address family of a hierarchy whose values are addresses (``"ipv4"``, ``"ipv6"``):
    #: the family of address a flow record's column gives it; ``None`` for any other kind
    address_family: str | None = None

    def labels_of(self, keys: np.ndarray, level: int) -> dict[int, Any]:
        """``{key: prefix}`` of hashed keys this object has seen (to ship labels beside them);
        ``{}`` for a hierarchy of exact keys (a key is its own label)."""
        return {}

    @property
    def collisions(self) -> int:
        """Non-zero once this object met a prefix under a key it held for another (merged: the smaller
        prefix labels the key); the number follows how the values were batched. Whole-input commands
        re-key and start over when it is not 0."""
        return sum(t.merges for t in getattr(self, "_keys", ()))

    @property
    def hashed_levels(self) -> int:
        """How many sketched levels have keyed-hash keys (each is charged a δ for label merges,
        :func:`dphhh.sketches.keyed.collision_delta`)."""
        return self.h if self.hashed_keys else 0

    @classmethod
    def from_spec_levels(cls, levels: list[int] | None, text: str) -> Hierarchy:
        """The hierarchy of the spec ``text`` = ``kind[:levels]`` (``levels`` parsed, ``None`` when
        the spec gives none: the kind's default). One-dimensional kinds registered with
        :func:`register_hierarchy_kind` implement it; raises :class:`UsageError` naming the bad part."""
        raise UsageError(f"hierarchy: {cls.__name__} is not parsed from a spec")

    def address_masks(self) -> tuple[int, ...] | None:
        """Per sketched level, the mask that turns a value into its key, when values are 32-bit
        addresses whose level key is the masked address (IPv4): the sketch operators then ship
        addresses and mask them where they count (:func:`dphhh.stream.wire.sketch_payloads`);
        ``None`` for any other hierarchy (its keys are computed before routing)."""
        return None

    def pack_values(self, values: Any) -> bytes | None:
        """``values`` as bytes, for a hierarchy whose keys are better computed where they are
        counted than shipped (h keys of 8 bytes against a few bytes of value): the stream's sketch
        step then keys them with the window's key (:func:`dphhh.stream.wire.sketch_payloads`);
        ``None`` (the default): the keys travel. :meth:`unpack_values` inverts it."""
        return None

    def unpack_values(self, data: bytes | memoryview) -> Any:
        """The values of :meth:`pack_values`'s bytes (a :class:`UsageError` for bytes it did not make)."""
        raise UsageError(f"hierarchy: {type(self).__name__} does not pack its values")

    def keyed(self, secret: KeySecret | None) -> Hierarchy:
        """This hierarchy making its hashed keys under ``secret`` (a window's key,
        :meth:`dphhh.sketches.keyed.KeySecret.window`), with fresh label tables (freed with the object);
        a hierarchy of exact keys returns itself."""
        return self

    @property
    @abstractmethod
    def h(self) -> int:
        """Number of sketched levels (the root is not sketched)."""

    @abstractmethod
    def spec(self) -> str:
        """The textual form accepted by :func:`parse_hierarchy`, e.g. ``ipv4:8,16,24,32``."""

    @abstractmethod
    def keys(self, values: Any, level: int) -> np.ndarray:
        """Sketch keys (int64, >= 0) of ``values`` generalised to ``level`` (1..h), in input order."""

    def level_keys(self, values: Any) -> Iterable[np.ndarray]:
        """The keys of ``values`` at every sketched level 1..h, in order (``keys(values, 1)``, …), one
        level at a time by default (a pair hierarchy has up to 24); a kind whose levels share work
        (paths: one split per distinct path) computes them together."""
        return (self.keys(values, level) for level in range(1, self.h + 1))

    @abstractmethod
    def label(self, key: int, level: int) -> str:
        """The prefix label of ``key`` at ``level`` (level 0 is the root)."""

    @abstractmethod
    def ancestor(self, key: int, level: int, to_level: int) -> int:
        """The key of the ancestor at ``to_level`` (1 <= to_level <= level) of ``key``."""

    @abstractmethod
    def key_hash(self, keys: np.ndarray, level: int) -> np.ndarray:
        """A public, data-independent uint64 hash of each prefix (used for partitioning)."""

    @abstractmethod
    def count(self, values: Any) -> int:
        """Number of elements in a batch of values."""

    @abstractmethod
    def empty(self) -> Any:
        """A batch of no values, of the form :meth:`keys` takes (``count(empty()) == 0``)."""

    @abstractmethod
    def concat(self, batches: Sequence[Any]) -> Any:
        """The batches' values as one batch, in order (:meth:`empty` for no batch)."""

    def _check_level(self, level: int, *, allow_root: bool = False) -> None:
        low = 0 if allow_root else 1
        if not (low <= level <= self.h):
            raise UsageError(f"{type(self).__name__}: level must be in {low}..{self.h}, got {level!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hierarchy) and other.spec() == self.spec()

    def __hash__(self) -> int:
        return hash(self.spec())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec()!r})"


def _check_prefix_lengths(owner: str, lengths: Sequence[int], width: int) -> tuple[int, ...]:
    out = tuple(int(x) for x in lengths)
    if not out:
        raise UsageError(f"{owner}: prefix lengths must not be empty")
    for x in out:
        if not (1 <= x <= width):
            raise UsageError(f"{owner}: prefix length must be in 1..{width}, got {x}")
    if any(b <= a for a, b in zip(out, out[1:])):
        raise UsageError(f"{owner}: prefix lengths must be strictly increasing, got {list(out)}")
    return out


class IPv4Hierarchy(Hierarchy):
    """IPv4 prefixes of the given increasing lengths; values are uint32 addresses."""

    kind = "ipv4"
    address_family = "ipv4"

    def __init__(self, prefix_lengths: Sequence[int] = (8, 16, 24, 32)) -> None:
        self.prefix_lengths = _check_prefix_lengths("IPv4Hierarchy", prefix_lengths, 32)
        self._masks = [np.uint32(0)] + [np.uint32((0xFFFFFFFF << (32 - x)) & 0xFFFFFFFF) for x in self.prefix_lengths]

    @property
    def h(self) -> int:
        return len(self.prefix_lengths)

    def spec(self) -> str:
        return "ipv4:" + ",".join(str(x) for x in self.prefix_lengths)

    @classmethod
    def from_spec_levels(cls, levels: list[int] | None, text: str) -> IPv4Hierarchy:
        return cls(levels or (8, 16, 24, 32))

    def mask(self, level: int) -> int:
        """The network mask of ``level`` as an int."""
        self._check_level(level, allow_root=True)
        return int(self._masks[level])

    def address_masks(self) -> tuple[int, ...]:
        return tuple(self.mask(level) for level in range(1, self.h + 1))

    def keys(self, values: np.ndarray, level: int) -> np.ndarray:
        self._check_level(level)
        arr = np.asarray(values, dtype=np.uint32)
        return (arr & self._masks[level]).astype(np.int64)

    def label(self, key: int, level: int) -> str:
        self._check_level(level, allow_root=True)
        length = 0 if level == 0 else self.prefix_lengths[level - 1]
        return f"{ipaddress.IPv4Address(int(key) & self.mask(level))}/{length}"

    def ancestor(self, key: int, level: int, to_level: int) -> int:
        self._check_level(level)
        if not (1 <= to_level <= level):
            raise UsageError(f"IPv4Hierarchy: to_level must be in 1..{level}, got {to_level!r}")
        return int(key) & self.mask(to_level)

    def key_hash(self, keys: np.ndarray, level: int) -> np.ndarray:
        self._check_level(level)
        salted = np.asarray(keys, dtype=np.int64).astype(np.uint64) ^ (np.uint64(level) << np.uint64(40))
        return splitmix64(salted)

    def count(self, values: np.ndarray) -> int:
        return int(np.asarray(values).shape[0])

    def empty(self) -> np.ndarray:
        return np.empty(0, dtype=np.uint32)

    def concat(self, batches: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(batches) if batches else self.empty()


#: The key of a hierarchy that was never keyed: public (exact references and tests only).
PUBLIC_KEY = KeySecret(bytes(32))


def _distinct(values: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """(the distinct values in order of first appearance, each value's index among them: int64)."""
    distinct = list(dict.fromkeys(values))
    index = {v: i for i, v in enumerate(distinct)}
    return distinct, np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))


_SLASHES = operator.methodcaller("count", "/")
_LAST_COMPONENT = re.compile(r"/[^/\n]*$", re.MULTILINE)


def _parents(paths: list[str]) -> list[str]:
    """Each path without its last component (every path holds a ``/``): one substitution over the
    joined paths when none holds a line feed, else one by one."""
    joined = "\n".join(paths)
    if joined.count("\n") != len(paths) - 1:
        return [p.rpartition("/")[0] for p in paths]
    return _LAST_COMPONENT.sub("", joined).split("\n") if paths else []


def dicts_agree(held: dict[Any, Any], new: dict[Any, Any]) -> bool:
    """Whether every key in both dicts maps to equal values (at C speed: no Python loop)."""
    common = held.keys() & new.keys()
    return all(map(operator.eq, map(held.__getitem__, common), map(new.__getitem__, common)))


class _PrefixKeys:
    """Keys of one level: key = keyed hash of (level, prefix bytes); remembers key → prefix, the
    smaller prefix when two collide (a merge, never an error: docs/ALGORITHMS.md §1 "Keys")."""

    def __init__(self, level: int, secret: KeySecret) -> None:
        self.level = level
        self.secret = secret
        self.items: dict[int, Any] = {}
        self.merges = 0  # prefixes met under a key already held for another prefix

    def key_of(self, item: Any, encoded: bytes) -> int:
        key = self.secret.digest(self.level, encoded)
        self._learn(item, key)
        return key

    def _learn(self, item: Any, key: int) -> None:
        seen = self.items.get(key)
        if seen is None or item < seen:
            self.items[key] = item
        if seen is not None and seen != item:
            self.merges += 1

    def keys_of(self, uniques: Sequence[Any], encode: Callable[[Any], bytes] | None = None) -> np.ndarray:
        """The keys of distinct items — texts hashed as UTF-8 (``encode`` None), others as ``encode``
        makes them bytes — in one compiled call (:meth:`KeySecret.digests`); the table learns them as
        :meth:`key_of` would, one by one where two of them share a key."""
        if encode is None:
            keys = self.secret.text_digests(self.level, uniques)
        else:
            keys = self.secret.digests(self.level, [encode(u) for u in uniques])
        fresh = dict(zip(keys.tolist(), uniques))
        items = self.items
        if len(fresh) == len(uniques) and dicts_agree(items, fresh):
            items.update(fresh)  # no key shared by two prefixes: the same table as key_of, item by item
            return keys
        for item, key in zip(uniques, keys.tolist()):
            self._learn(item, key)
        return keys


class IPv6Hierarchy(Hierarchy):
    """IPv6 prefixes of the given increasing lengths; values are ``(hi, lo)`` uint64 arrays."""

    kind = "ipv6"
    address_family = "ipv6"
    hashed_keys = True

    def __init__(self, prefix_lengths: Sequence[int] = (16, 32, 48, 64, 128), secret: KeySecret | None = None) -> None:
        self.prefix_lengths = _check_prefix_lengths("IPv6Hierarchy", prefix_lengths, 128)
        self.secret = PUBLIC_KEY if secret is None else secret
        self._keys = [_PrefixKeys(level, self.secret) for level in range(len(self.prefix_lengths) + 1)]

    @classmethod
    def from_spec_levels(cls, levels: list[int] | None, text: str) -> IPv6Hierarchy:
        return cls(levels or (16, 32, 48, 64, 128))

    def keyed(self, secret: KeySecret | None) -> IPv6Hierarchy:
        return IPv6Hierarchy(self.prefix_lengths, secret)

    @property
    def h(self) -> int:
        return len(self.prefix_lengths)

    def spec(self) -> str:
        return "ipv6:" + ",".join(str(x) for x in self.prefix_lengths)

    def _masks(self, level: int) -> tuple[np.uint64, np.uint64]:
        length = 0 if level == 0 else self.prefix_lengths[level - 1]
        full = (1 << 128) - 1
        m = (full << (128 - length)) & full
        return np.uint64(m >> 64), np.uint64(m & 0xFFFFFFFFFFFFFFFF)

    def keys(self, values: tuple[np.ndarray, np.ndarray], level: int) -> np.ndarray:
        self._check_level(level)
        hi, lo = (np.asarray(v, dtype=np.uint64) for v in values)
        mhi, mlo = self._masks(level)
        pair = np.empty((hi.shape[0], 2), dtype=np.uint64)
        pair[:, 0] = hi & mhi
        pair[:, 1] = lo & mlo
        uniq, inverse = np.unique(pair, axis=0, return_inverse=True)
        as_ints = [(int(a) << 64) | int(b) for a, b in uniq]
        ids = self._keys[level].keys_of(as_ints, lambda v: v.to_bytes(16, "big"))
        return ids[inverse.reshape(-1)]

    def value_of(self, key: int, level: int) -> int:
        """The 128-bit prefix value of a key seen by this object."""
        self._check_level(level)
        return self._keys[level].items[int(key)]

    def labels_of(self, keys: np.ndarray, level: int) -> dict[int, int]:
        """``{key: 128-bit prefix value}`` for keys this object has seen (labels beside hashed keys)."""
        self._check_level(level)
        distinct = np.unique(np.asarray(keys, dtype=np.int64)).tolist()
        return dict(zip(distinct, map(self._keys[level].items.__getitem__, distinct)))

    def remember(self, level: int, labels: dict[int, int]) -> None:
        """Learn ``{key: prefix value}`` produced elsewhere (under the same key); each is checked."""
        self._check_level(level)
        for key, value in labels.items():
            if self._keys[level].key_of(int(value), int(value).to_bytes(16, "big")) != int(key):
                raise UsageError("IPv6Hierarchy: a label does not match its key")

    def label(self, key: int, level: int) -> str:
        self._check_level(level, allow_root=True)
        if level == 0:
            return "::/0"
        return f"{ipaddress.IPv6Address(self.value_of(key, level))}/{self.prefix_lengths[level - 1]}"

    def ancestor(self, key: int, level: int, to_level: int) -> int:
        if not (1 <= to_level <= level):
            raise UsageError(f"IPv6Hierarchy: to_level must be in 1..{level}, got {to_level!r}")
        mhi, mlo = self._masks(to_level)
        value = self.value_of(key, level) & ((int(mhi) << 64) | int(mlo))
        return self._keys[to_level].key_of(value, value.to_bytes(16, "big"))

    def key_hash(self, keys: np.ndarray, level: int) -> np.ndarray:
        self._check_level(level)
        return splitmix64(np.asarray(keys, dtype=np.int64).astype(np.uint64))

    def count(self, values: tuple[np.ndarray, np.ndarray]) -> int:
        return int(np.asarray(values[0]).shape[0])

    def empty(self) -> tuple[np.ndarray, np.ndarray]:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)

    def concat(self, batches: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        if not batches:
            return self.empty()
        return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])


class PathHierarchy(Hierarchy):
    """``/``-separated paths of exactly ``depth`` components; level ℓ keeps ℓ components."""

    kind = "path"
    hashed_keys = True

    def __init__(self, depth: int = 4, secret: KeySecret | None = None) -> None:
        if not isinstance(depth, (int, np.integer)) or isinstance(depth, bool) or depth < 1:
            raise UsageError(f"PathHierarchy: depth must be an integer >= 1, got {depth!r}")
        self.depth = int(depth)
        self.secret = PUBLIC_KEY if secret is None else secret
        self._keys = [_PrefixKeys(level, self.secret) for level in range(self.depth + 1)]

    @classmethod
    def from_spec_levels(cls, levels: list[int] | None, text: str) -> PathHierarchy:
        if levels is not None and len(levels) != 1:
            raise UsageError(f"hierarchy: path takes one depth, e.g. 'path:4', got {text!r}")
        return cls(levels[0] if levels else 4)

    def keyed(self, secret: KeySecret | None) -> PathHierarchy:
        return PathHierarchy(self.depth, secret)

    @property
    def h(self) -> int:
        return self.depth

    def spec(self) -> str:
        return f"path:{self.depth}"

    def _distinct_paths(self, values: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """(the distinct paths in order of first appearance, each value's index among them), every
        path checked to have exactly ``depth`` components."""
        paths, inverse = _distinct(values)
        slashes = np.fromiter(map(_SLASHES, paths), dtype=np.int64, count=len(paths))
        wrong = np.flatnonzero(slashes != self.depth - 1)
        if wrong.size:
            raise UsageError(
                f"PathHierarchy: every path must have exactly {self.depth} components, "
                f"got one with {int(slashes[wrong[0]]) + 1}"
            )
        return paths, inverse

    def pack_values(self, values: Sequence[str]) -> bytes:
        """The count, each path's UTF-8 length (uint32) and the paths' bytes: ~18 bytes a path
        where its h keys take 8·h (and their labels as much again)."""
        encoded = [p.encode("utf-8") for p in values]
        lengths = np.fromiter(map(len, encoded), dtype="<u4", count=len(encoded))
        return np.array([len(encoded)], dtype="<u8").tobytes() + lengths.tobytes() + b"".join(encoded)

    def unpack_values(self, data: bytes | memoryview) -> list[str]:
        raw = bytes(data)
        n = int(np.frombuffer(raw, dtype="<u8", count=1)[0]) if len(raw) >= 8 else -1
        if n < 0 or len(raw) < 8 + 4 * n:
            raise UsageError("PathHierarchy: these bytes are not packed paths")
        ends = np.cumsum(np.frombuffer(raw, dtype="<u4", count=n, offset=8), dtype=np.int64) + 8 + 4 * n
        if (ends[-1] if n else 8 + 4 * n) != len(raw):
            raise UsageError("PathHierarchy: these bytes are not packed paths")
        try:
            return [raw[a:b].decode("utf-8") for a, b in zip([8 + 4 * n, *ends[:-1].tolist()], ends.tolist())]
        except UnicodeDecodeError:
            raise UsageError("PathHierarchy: these bytes are not packed paths") from None

    def keys(self, values: Sequence[str], level: int) -> np.ndarray:
        self._check_level(level)
        paths, inverse = self._distinct_paths(values)
        if level < self.depth:  # each distinct path's prefix, each distinct prefix hashed once
            paths, of_path = _distinct(["/".join(p.split("/", level)[:level]) for p in paths])
            inverse = of_path[inverse]
        return self._keys[level].keys_of(paths)[inverse]

    def level_keys(self, values: Sequence[str]) -> list[np.ndarray]:
        """Every level's keys at once, from the leaves up: each level's distinct prefixes are the
        distinct parents of the level below's, each hashed once (the same keys and label tables as
        :meth:`keys` level by level)."""
        paths, inverse = self._distinct_paths(values)
        out: list[np.ndarray] = []
        for level in range(self.depth, 0, -1):
            out.append(self._keys[level].keys_of(paths)[inverse])
            if level > 1:
                paths, of_path = _distinct(_parents(paths))
                inverse = of_path[inverse]
        return out[::-1]

    def label(self, key: int, level: int) -> str:
        self._check_level(level, allow_root=True)
        if level == 0:
            return "*"
        return self._keys[level].items[int(key)]

    def ancestor(self, key: int, level: int, to_level: int) -> int:
        if not (1 <= to_level <= level):
            raise UsageError(f"PathHierarchy: to_level must be in 1..{level}, got {to_level!r}")
        prefix = "/".join(self.label(key, level).split("/")[:to_level])
        return self._keys[to_level].key_of(prefix, prefix.encode("utf-8"))

    def key_hash(self, keys: np.ndarray, level: int) -> np.ndarray:
        self._check_level(level)
        return splitmix64(np.asarray(keys, dtype=np.int64).astype(np.uint64))

    def labels_of(self, keys: np.ndarray, level: int) -> dict[int, str]:
        """``{key: prefix}`` for keys this object has seen (to ship labels beside hashed keys)."""
        self._check_level(level)
        distinct = np.unique(np.asarray(keys, dtype=np.int64)).tolist()
        return dict(zip(distinct, map(self._keys[level].items.__getitem__, distinct)))

    def remember(self, level: int, labels: dict[int, str]) -> None:
        """Learn ``{key: prefix}`` produced elsewhere (under the same key); each key is checked
        against its prefix, and of two prefixes of one key the smaller is kept."""
        self._check_level(level)
        for key, prefix in labels.items():
            if not isinstance(prefix, str) or prefix.count("/") + 1 != level:
                raise UsageError(f"PathHierarchy: a label for level {level} must have {level} components")
            if self._keys[level].key_of(prefix, prefix.encode("utf-8")) != int(key):
                raise UsageError("PathHierarchy: a label does not match its key")

    def count(self, values: Sequence[str]) -> int:
        return len(values)

    def empty(self) -> list[str]:
        return []

    def concat(self, batches: Sequence[Sequence[str]]) -> list[str]:
        return [p for b in batches for p in b]


#: The one-dimensional hierarchy kinds by the name their specs begin with (``kind[:levels]``), in
#: registration order; pairs of them are parsed by :func:`dphhh.sketches.specs.parse_hierarchy`.
HIERARCHY_KINDS: dict[str, type[Hierarchy]] = {}


def register_hierarchy_kind(cls: type[Hierarchy]) -> type[Hierarchy]:
    """Register the one-dimensional hierarchy class ``cls`` under ``cls.kind``: specs ``kind[:levels]``
    then parse to it (:meth:`Hierarchy.from_spec_levels`). A kind is registered once."""
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind or kind != kind.lower() or ":" in kind or " " in kind:
        raise ValueError(f"register_hierarchy_kind: {cls.__name__} needs a lower-case kind name, got {kind!r}")
    if "from_spec_levels" not in vars(cls):
        raise TypeError(f"register_hierarchy_kind: {cls.__name__} does not define from_spec_levels")
    if HIERARCHY_KINDS.get(kind, cls) is not cls:
        raise ValueError(f"register_hierarchy_kind: kind {kind!r} is already registered")
    HIERARCHY_KINDS[kind] = cls
    return cls


for _kind in (IPv4Hierarchy, IPv6Hierarchy, PathHierarchy):
    register_hierarchy_kind(_kind)


def parse_single_hierarchy(text: str) -> Hierarchy:
    """Parse a one-dimensional spec of a registered kind (:data:`HIERARCHY_KINDS`) — ``ipv4[:8,16,24,32]``,
    ``ipv6[:16,32,48,64,128]`` or ``path[:4]`` — into a hierarchy (:func:`dphhh.sketches.specs.parse_hierarchy`
    parses pairs too).

    Raises :class:`UsageError` naming the bad part.
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"hierarchy: expected e.g. 'ipv4:8,16,24,32', got {text!r}")
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    try:
        numbers = [int(x) for x in rest.split(",")] if rest.strip() else None
    except ValueError:
        raise UsageError(f"hierarchy: levels must be comma-separated integers, got {rest!r}") from None
    if kind not in HIERARCHY_KINDS:
        names = list(HIERARCHY_KINDS)
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise UsageError(f"hierarchy: kind must be {listed}, got {kind!r}")
    return HIERARCHY_KINDS[kind].from_spec_levels(numbers, text)
