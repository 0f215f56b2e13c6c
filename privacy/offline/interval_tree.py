"""Interval trees over an integer domain [1, n] for hierarchical range counting (docs/ALGORITHMS.md §9).

A tree partitions the domain recursively: the root is ``[1, n]``, the children of a node are
non-empty, contiguous intervals, in increasing order, that partition their parent, and every leaf
is a single value ``[i, i]`` (the leaves are the histogram cells). Any fan-out per node is allowed
(0 children for a leaf, otherwise at least 2). Trees are built from data-independent rules only
(:meth:`IntervalTree.complete`, :meth:`IntervalTree.from_fanouts`, :meth:`IntervalTree.from_nested`),
so the shape itself reveals nothing about the data.

Nodes are numbered in breadth-first order: node 0 is the root, ``parent[i] < i``, the nodes of one
depth form a contiguous index range, and the children of a node are contiguous
(``first_child[i] .. first_child[i] + n_children[i] - 1``), sorted by their lower end.

Intervals are inclusive and 1-based: ``[lo, hi]`` contains the values ``lo, lo + 1, ..., hi``.

Floating point (Mironov 2012): not applicable — no noise here; node counts are exact integers
(raw data, used only inside :mod:`dphhh.privacy.offline.lue_dptree`, which adds integer noise).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dphhh.sketches.errors import UsageError

__all__ = ["IntervalTree", "Nested", "node_count"]

#: A nested tree specification: ``(lo, hi)`` for a leaf or ``(lo, hi, [child, child, ...])``.
Nested = tuple[Any, ...]

_OWNER = "IntervalTree"


def _check_int(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise UsageError(f"{_OWNER}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _even_split(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Split ``[lo, hi]`` into ``min(parts, width)`` contiguous pieces; the first ones get one more."""
    width = hi - lo + 1
    k = min(parts, width)
    base, extra = divmod(width, k)
    out, start = [], lo
    for i in range(k):
        size = base + (1 if i < extra else 0)
        out.append((start, start + size - 1))
        start += size
    return out


def node_count(n: int, fanouts: int | Sequence[int]) -> int:
    """The number of nodes of :meth:`IntervalTree.complete` (``fanouts`` an int) or
    :meth:`IntervalTree.from_fanouts` (a sequence) over ``[1, n]``, without building the tree.

    Level by level on the multiset of node widths (an even split of widths ``w`` and ``w + 1``
    gives widths ``q`` and ``q + 1`` only, so each level holds at most two distinct widths): time
    O(height). For a fan-out list too short to reach single values it counts the listed levels
    (``from_fanouts`` refuses such a list).
    """
    n = _check_int("n", n, 1)
    if isinstance(fanouts, Sequence) and not isinstance(fanouts, (str, bytes)):
        fans: list[int] | None = [_check_int(f"fanouts[{i}]", f, 2) for i, f in enumerate(fanouts)]
        fixed = 0
    else:
        fans = None
        fixed = _check_int("fanout", fanouts, 2)
    widths: dict[int, int] = {n: 1}
    total, depth = 1, 0
    while True:
        if fans is None:
            fan = fixed
        elif depth < len(fans):
            fan = fans[depth]
        else:
            return total
        nxt: dict[int, int] = {}
        for width, times in widths.items():
            if width == 1:
                continue
            k = min(fan, width)
            base, extra = divmod(width, k)
            if extra:
                nxt[base + 1] = nxt.get(base + 1, 0) + times * extra
            nxt[base] = nxt.get(base, 0) + times * (k - extra)
        if not nxt:
            return total
        total += sum(nxt.values())
        widths, depth = nxt, depth + 1


@dataclass(frozen=True, eq=False)
class IntervalTree:
    """An interval tree over ``[1, n]`` in breadth-first node order (see the module docstring).

    Attributes (numpy ``int64`` arrays of length ``size`` unless stated):
        n: the domain size.
        lo, hi: each node's inclusive interval.
        parent: the parent's index (−1 for the root).
        depth: 0 for the root.
        first_child, n_children: the contiguous index range of the children (0 children = leaf).
    """

    n: int
    lo: np.ndarray
    hi: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    first_child: np.ndarray
    n_children: np.ndarray

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_nested(cls, spec: Nested) -> IntervalTree:
        """Build from an explicit nested specification and validate it.

        ``spec`` is ``(lo, hi)`` for a leaf or ``(lo, hi, [child_spec, ...])``; the root must be
        ``(1, n, ...)``. Example (the paper's tree): ``(1, 3, [(1, 1), (2, 2), (3, 3)])``.
        """
        root = cls._parse(spec, "root")
        if root[0] != 1:
            raise UsageError(f"{_OWNER}: the root must start at 1, got [{root[0]}, {root[1]}]")
        return cls._build(root)

    @classmethod
    def complete(cls, n: int, fanout: int) -> IntervalTree:
        """The complete ``fanout``-ary tree over ``[1, n]``: every node splits into ``fanout``
        near-equal parts (fewer when narrower) until the parts are single values."""
        n = _check_int("n", n, 1)
        fanout = _check_int("fanout", fanout, 2)

        def grow(lo: int, hi: int) -> Nested:
            if lo == hi:
                return (lo, hi)
            return (lo, hi, [grow(a, b) for a, b in _even_split(lo, hi, fanout)])

        return cls._build(cls._parse(grow(1, n), "root"))

    @classmethod
    def from_fanouts(cls, n: int, fanouts: Sequence[int]) -> IntervalTree:
        """A tree whose nodes at depth d split into ``fanouts[d]`` near-equal parts.

        Widths that do not divide give uneven parts (the first parts are one wider); a node
        narrower than the fan-out splits into single values; a single value is a leaf. After
        the last listed level every node must be a single value, else ``ValueError``.
        """
        n = _check_int("n", n, 1)
        if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
            raise UsageError(f"{_OWNER}: fanouts must be a sequence of integers >= 2, got {fanouts!r}")
        fans = [_check_int(f"fanouts[{i}]", f, 2) for i, f in enumerate(fanouts)]

        def grow(lo: int, hi: int, d: int) -> Nested:
            if lo == hi:
                return (lo, hi)
            if d >= len(fans):
                raise UsageError(
                    f"{_OWNER}: fanouts {fans} leave [{lo}, {hi}] wider than one value after "
                    f"{len(fans)} levels; add levels or use larger fan-outs"
                )
            return (lo, hi, [grow(a, b, d + 1) for a, b in _even_split(lo, hi, fans[d])])

        return cls._build(cls._parse(grow(1, n, 0), "root"))

    @staticmethod
    def _parse(spec: Any, where: str) -> tuple[int, int, list]:
        """Validate one nested node (recursively) into ``(lo, hi, children)``."""
        if not isinstance(spec, (tuple, list)) or len(spec) not in (2, 3):
            raise UsageError(f"{_OWNER}: node {where} must be (lo, hi) or (lo, hi, [children]), got {spec!r}")
        lo, hi = spec[0], spec[1]
        for name, v in (("lo", lo), ("hi", hi)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise UsageError(f"{_OWNER}: node {where}: {name} must be an integer, got {v!r}")
        lo, hi = int(lo), int(hi)
        if lo > hi:
            raise UsageError(f"{_OWNER}: node {where} [{lo}, {hi}] is empty (lo > hi)")
        raw_children = spec[2] if len(spec) == 3 else []
        if not isinstance(raw_children, (tuple, list)):
            raise UsageError(f"{_OWNER}: node {where} [{lo}, {hi}]: children must be a list, got {raw_children!r}")
        if len(raw_children) == 0:
            if lo != hi:
                raise UsageError(
                    f"{_OWNER}: leaf [{lo}, {hi}] covers more than one value; every leaf must be a single value [i, i]"
                )
            return (lo, hi, [])
        if len(raw_children) == 1:
            raise UsageError(f"{_OWNER}: node [{lo}, {hi}] has one child; a node has 0 or >= 2 children")
        children = [IntervalTree._parse(c, f"{where}.{i}") for i, c in enumerate(raw_children)]
        if children[0][0] != lo:
            raise UsageError(
                f"{_OWNER}: children of [{lo}, {hi}] must start at {lo}, the first starts at {children[0][0]}"
            )
        for a, b in zip(children, children[1:]):
            if b[0] != a[1] + 1:
                kind = "overlap" if b[0] <= a[1] else "leave a gap"
                raise UsageError(
                    f"{_OWNER}: children [{a[0]}, {a[1]}] and [{b[0]}, {b[1]}] of [{lo}, {hi}] {kind}; "
                    "children must be contiguous and in increasing order"
                )
        if children[-1][1] != hi:
            raise UsageError(f"{_OWNER}: children of [{lo}, {hi}] must end at {hi}, the last ends at {children[-1][1]}")
        return (lo, hi, children)

    @classmethod
    def _build(cls, root: tuple[int, int, list]) -> IntervalTree:
        lo: list[int] = []
        hi: list[int] = []
        parent: list[int] = []
        depth: list[int] = []
        first: list[int] = []
        count: list[int] = []
        queue: deque[tuple[tuple[int, int, list], int, int]] = deque([(root, -1, 0)])
        while queue:
            (a, b, kids), par, d = queue.popleft()
            index = len(lo)
            lo.append(a)
            hi.append(b)
            parent.append(par)
            depth.append(d)
            first.append(0)
            count.append(len(kids))
            for kid in kids:
                queue.append((kid, index, d + 1))
        # In BFS order the children of node i follow those of nodes < i, so they are contiguous.
        count_arr = np.array(count, dtype=np.int64)
        first_arr = 1 + np.concatenate(([0], np.cumsum(count_arr)[:-1]))
        first_arr[count_arr == 0] = 0
        arr = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
        return cls(root[1], arr(lo), arr(hi), arr(parent), arr(depth), first_arr, count_arr)

    # ------------------------------------------------------------------ structure

    @property
    def size(self) -> int:
        """Number of nodes."""
        return int(self.lo.shape[0])

    @property
    def height(self) -> int:
        """Number of nodes on the longest root-to-leaf path (levels)."""
        return int(self.depth.max()) + 1

    @property
    def is_leaf(self) -> np.ndarray:
        """Boolean mask of the leaves."""
        return self.n_children == 0

    def children(self, node: int) -> range:
        """Indices of the children of ``node`` (empty for a leaf)."""
        f, k = int(self.first_child[node]), int(self.n_children[node])
        return range(f, f + k)

    def depth_slices(self) -> list[slice]:
        """For each depth d, the contiguous slice of node indices at depth d."""
        bounds = np.searchsorted(self.depth, np.arange(self.height + 1), side="left")
        return [slice(int(bounds[d]), int(bounds[d + 1])) for d in range(self.height)]

    def leaf_index(self) -> np.ndarray:
        """``leaf_index()[v - 1]`` is the node index of the leaf ``[v, v]``."""
        leaves = np.flatnonzero(self.is_leaf)
        out = np.empty(self.n, dtype=np.int64)
        out[self.lo[leaves] - 1] = leaves
        return out

    def path(self, node: int) -> list[int]:
        """Node indices from the root down to ``node``."""
        out = []
        while node >= 0:
            out.append(int(node))
            node = int(self.parent[node])
        return out[::-1]

    def decompose(self, lo: int, hi: int) -> list[int]:
        """The canonical decomposition of ``[lo, hi]``: the nodes x with x ⊆ [lo, hi] whose parent
        is not ⊆ [lo, hi]. They partition the query and are the fewest tree nodes that do."""
        lo, hi = self.check_range(lo, hi)
        out: list[int] = []
        stack = [0]
        while stack:
            x = stack.pop()
            a, b = int(self.lo[x]), int(self.hi[x])
            if lo <= a and b <= hi:
                out.append(x)
                continue
            f, k = int(self.first_child[x]), int(self.n_children[x])
            # children overlapping [lo, hi]: their lo's are sorted
            kid_lo = self.lo[f : f + k]
            start = max(int(np.searchsorted(kid_lo, lo, side="right")) - 1, 0)
            stop = int(np.searchsorted(kid_lo, hi, side="right"))
            stack.extend(range(f + stop - 1, f + start - 1, -1))
        return out

    def check_range(self, lo: Any, hi: Any) -> tuple[int, int]:
        """``(lo, hi)`` as ints if ``1 <= lo <= hi <= n``, else ``ValueError``."""
        for name, v in (("lo", lo), ("hi", hi)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise UsageError(f"{_OWNER}: range {name} must be an integer, got {v!r}")
        lo, hi = int(lo), int(hi)
        if not (1 <= lo <= hi <= self.n):
            raise UsageError(f"{_OWNER}: range [{lo}, {hi}] must satisfy 1 <= lo <= hi <= n = {self.n}")
        return lo, hi

    def incidence(self) -> np.ndarray:
        """Dense ``(size, n)`` 0/1 matrix: row x has ones on the values of node x (small trees)."""
        cols = np.arange(1, self.n + 1)
        return ((self.lo[:, None] <= cols) & (cols <= self.hi[:, None])).astype(float)

    def node_counts(self, leaf_counts: np.ndarray) -> np.ndarray:
        """Every node's count from the per-value counts (``leaf_counts[v - 1]`` for value v)."""
        prefix = np.concatenate(([0], np.cumsum(np.asarray(leaf_counts, dtype=np.int64))))
        return prefix[self.hi] - prefix[self.lo - 1]

    def summary(self) -> dict[str, Any]:
        """JSON-serialisable description: domain, node and leaf counts, height, fan-outs."""
        internal = self.n_children[self.n_children > 0]
        return {
            "n": self.n,
            "nodes": self.size,
            "leaves": int(self.is_leaf.sum()),
            "height": self.height,
            "min_fanout": int(internal.min()) if internal.size else 0,
            "max_fanout": int(internal.max()) if internal.size else 0,
        }

    def to_nested(self, node: int = 0) -> Nested:
        """The nested specification of the subtree at ``node`` (inverse of :meth:`from_nested`)."""
        a, b = int(self.lo[node]), int(self.hi[node])
        kids = self.children(node)
        if not kids:
            return (a, b)
        return (a, b, [self.to_nested(c) for c in kids])
