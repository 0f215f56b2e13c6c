"""AHEAD: adaptive hierarchical decomposition for range queries under local DP (docs/ALGORITHMS.md §8).

Du et al., "AHEAD: Adaptive Hierarchical Decomposition for Range Query under Local Differential
Privacy" (CCS 2021). Guarantee: **ε-local DP, each user's value, one report per user.** Users are
split at random (independently of their data) into ``c`` groups; every user sends exactly one
report, through an ε-LDP frequency oracle (:mod:`dphhh.privacy.offline.ldp`), about which node of the
current decomposition holds their value. The decomposition offered to group ``i`` depends only
on earlier groups' reports (sequential interaction), and everything else is post-processing, so
the whole protocol is ε-LDP with respect to any one user's value.

Algorithm (domains are padded to a power of the per-dimension fan-out ``b``; ``m`` dimensions,
``B = b^m`` children per split, ``c = log_B |D|`` layers):

1. Random user partition into ``c`` groups.
2. Layer ``i``: every node of layer ``i − 1`` whose frequency estimate is ``> θ`` (and not yet
   frozen) is split into its ``B`` children; every other node is carried to layer ``i`` unchanged
   (frozen: it is re-estimated by every later group and never split). Group ``i`` reports its
   node in this decomposition ``E_i`` through GRR when ``|E_i| − 2 < 3e^ε`` and OUE otherwise
   (``oracle="auto"``). ``θ = √((B+1)·Var)`` with ``Var`` the oracle's per-cell variance for the
   group (``4e^ε·c/(N(e^ε−1)^2)`` for OUE; the GRR variance when GRR was used). The root (known
   frequency 1) uses the OUE ``θ`` as in the paper.
   Splits are decided on the raw (unbiased) layer estimates; a layer's nodes all share the
   oracle's ``f = 0`` per-cell variance for that group, which is also the ``V_n`` used below.
3. Post-processing: Norm-Sub per layer; bottom-up inverse-variance weighted averaging of each
   node with the (updated) sum of its children, ``f̃ = (V_c f̂ + V_n Σ f̃_c)/(V_c + V_n)``, updated
   variance ``V_n V_c/(V_n + V_c)``; uniform split of undivided nodes into a complete tree.
4. A range is answered by the fewest covering nodes of that complete tree (a node is used iff it
   lies inside the range and its parent does not).

As in the paper, the weighted averaging mixes nodes with different weights, so after it a layer
need not sum exactly to 1 (each value stays non-negative).

Floating point (Mironov 2012): safe — the only randomness is the data-independent user partition
and the frequency oracles' bit/integer reports (:mod:`dphhh.privacy.offline.ldp`); no continuous noise is
added, and every float printed is post-processing of those discrete reports.

Higher dimensions: :func:`ahead_lle` (LLE) builds one 2-D AHEAD tree per attribute pair, each on
its own random share of the users, and answers an m-dim query by maximum entropy (iterative
proportional fitting over the ``2^m`` in/out atoms constrained by the pairwise 2×2 tables).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from dphhh.privacy.noise import uniform01
from dphhh.privacy.offline.ldp import (
    _CHUNK_CELLS,
    Oracle,
    Sampling,
    estimate_frequencies,
    grr_variance,
    oue_variance,
    prefer_grr,
)
from dphhh.privacy.params import check_int, check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError

__all__ = [
    "AheadParams",
    "RangeEstimator",
    "LleEstimator",
    "ahead_1d",
    "ahead_2d",
    "ahead_nd",
    "ahead_lle",
    "norm_sub",
    "weighted_average",
    "max_entropy_atoms",
    "ahead_memory_bytes",
    "LDP_MODEL",
]

RngLike = RandomSource | np.random.Generator | int | None
LDP_MODEL = "local DP, each user's value, one report per user"
_ORACLES = ("auto", "oue", "grr")
_SAMPLINGS = ("per_user", "aggregate")


@dataclass(frozen=True)
class AheadParams:
    """AHEAD parameters.

    * ``epsilon``: each user's local-DP budget (ε > 0), spent on their single report.
    * ``branching``: fan-out per dimension ``b`` (2: B = 2 in 1-D, 2×2 = 4 in 2-D).
    * ``oracle``: ``auto`` (GRR iff ``|E_i| − 2 < 3e^ε``, else OUE), ``oue`` or ``grr``.
    * ``sampling``: ``per_user`` (every user runs the client perturbation; the default) or
      ``aggregate`` (server counts drawn directly with the exactly equivalent binomial sampling;
      for large benchmarks).
    """

    epsilon: float
    branching: int = 2
    oracle: Literal["auto", "oue", "grr"] = "auto"
    sampling: Sampling = "per_user"

    def __post_init__(self) -> None:
        owner = "AheadParams"
        object.__setattr__(self, "epsilon", check_positive(owner, "epsilon", self.epsilon))
        check_int(owner, "branching", self.branching, 2)
        if self.oracle not in _ORACLES:
            raise UsageError(f"{owner}: oracle must be one of {', '.join(_ORACLES)}, got {self.oracle!r}")
        if self.sampling not in _SAMPLINGS:
            raise UsageError(f"{owner}: sampling must be one of {', '.join(_SAMPLINGS)}, got {self.sampling!r}")


# ------------------------------------------------------------------------------------------
# Post-processing helpers
# ------------------------------------------------------------------------------------------


def norm_sub(estimates: np.ndarray) -> np.ndarray:
    """Norm-Sub (Wang et al. 2019c): non-negative values summing to 1.

    Negative values become 0; the excess ``(Σ positives − 1)`` is subtracted evenly from the
    positive values; repeat until nothing is negative. All-non-positive input gives uniform.
    """
    f = np.asarray(estimates, dtype=np.float64).copy()
    if f.size == 0:
        return f
    while True:
        f[f < 0] = 0.0
        positive = f > 0
        count = int(positive.sum())
        if count == 0:
            return np.full(f.size, 1.0 / f.size)
        f[positive] -= (f.sum() - 1.0) / count
        if not (f < 0).any():
            return f


def weighted_average(
    own: np.ndarray, own_var: np.ndarray | float, children_sum: np.ndarray, children_var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-variance combination of a node's estimate with the sum of its children.

    Returns ``(λ1·own + λ2·children_sum, V_own·V_children/(V_own + V_children))`` with
    ``λ1 = V_children/(V_own + V_children)`` and ``λ2 = V_own/(V_own + V_children)``.
    """
    v_n = np.asarray(own_var, dtype=np.float64)
    v_c = np.asarray(children_var, dtype=np.float64)
    total = v_n + v_c
    value = (v_c * np.asarray(own, dtype=np.float64) + v_n * np.asarray(children_sum, dtype=np.float64)) / total
    return value, v_n * v_c / total


# ------------------------------------------------------------------------------------------
# The complete tree and range answering
# ------------------------------------------------------------------------------------------


def _pad_exponent(owner: str, domain_sizes: Sequence[int], b: int) -> int:
    for d in domain_sizes:
        check_int(owner, "domain_size", d, 2)
    largest = max(domain_sizes)
    levels = 0
    while b**levels < largest:
        levels += 1
    return levels


class RangeEstimator:
    """Answers axis-aligned range queries from a complete ``b``-ary (per dimension) tree.

    ``levels[l]`` holds the node values of level ``l`` (shape ``(b^l,)*m``; level 0 is the root).
    A query is answered by the fewest covering nodes: a node is used iff it lies inside the
    range and its parent does not. Returned by :func:`ahead_1d`, :func:`ahead_2d`,
    :func:`ahead_nd` and the HIO baseline.
    """

    def __init__(
        self,
        algorithm: str,
        params: dict[str, Any],
        domain_sizes: Sequence[int],
        branching: int,
        levels: list[np.ndarray],
        summary: dict[str, Any],
    ) -> None:
        self.algorithm = algorithm
        self.params = params
        self.domain_sizes = tuple(int(d) for d in domain_sizes)
        self.dims = len(self.domain_sizes)
        self.branching = int(branching)
        self.levels = levels
        self.height = len(levels) - 1
        self.summary = summary
        self._prefix = []
        for arr in levels:
            p = arr.astype(np.float64)
            for axis in range(self.dims):
                p = np.cumsum(p, axis=axis)
                pad = [(0, 0)] * self.dims
                pad[axis] = (1, 0)
                p = np.pad(p, pad)
            self._prefix.append(p)

    # -- queries ------------------------------------------------------------------------------

    def _ranges(self, args: tuple) -> list[tuple[int, int]]:
        if self.dims == 1 and len(args) == 2 and not isinstance(args[0], (tuple, list)):
            ranges = [tuple(args)]
        else:
            ranges = [tuple(r) for r in args]
        if len(ranges) != self.dims:
            raise UsageError(f"{self.algorithm}: expected {self.dims} range(s), got {len(ranges)}")
        out = []
        for (lo, hi), d in zip(ranges, self.domain_sizes):
            lo, hi = int(lo), int(hi)
            if not (0 <= lo <= hi < d):
                raise UsageError(f"{self.algorithm}: range [{lo}, {hi}] must satisfy 0 <= lo <= hi < {d}")
            out.append((lo, hi))
        return out

    def _blocks(self, ranges: list[tuple[int, int]], level: int) -> list[tuple[int, int]] | None:
        size = self.branching ** (self.height - level)
        block = []
        for lo, hi in ranges:
            i0, i1 = -(-lo // size), (hi + 1) // size
            if i1 <= i0:
                return None
            block.append((i0, i1))
        return block

    def _box_sum(self, level: int, block: list[tuple[int, int]]) -> float:
        p = self._prefix[level]
        total = 0.0
        for corner in itertools.product((0, 1), repeat=self.dims):
            index = tuple(block[k][1] if c else block[k][0] for k, c in enumerate(corner))
            sign = (-1) ** (self.dims - sum(corner))
            total += sign * p[index]
        return float(total)

    def answer(self, *ranges: Any) -> float:
        """Estimated fraction of users inside the range(s) (inclusive bounds).

        1-D: ``answer(lo, hi)``; m-D: ``answer((lo1, hi1), (lo2, hi2), ...)``.
        """
        rs = self._ranges(ranges)
        total = 0.0
        parent = None
        for level in range(self.height + 1):
            block = self._blocks(rs, level)
            if block is not None:
                total += self._box_sum(level, block)
                if parent is not None:
                    total -= self._box_sum(level, [(a * self.branching, b * self.branching) for a, b in parent])
            parent = block
        return total

    def covering(self, *ranges: Any) -> list[tuple[int, tuple[int, ...]]]:
        """The nodes ``(level, index)`` used to answer the range (the fewest covering nodes)."""
        rs = self._ranges(ranges)
        nodes: list[tuple[int, tuple[int, ...]]] = []
        parent = None
        for level in range(self.height + 1):
            block = self._blocks(rs, level)
            if block is not None:
                for index in itertools.product(*(range(a, b) for a, b in block)):
                    inside_parent = parent is not None and all(
                        pa <= i // self.branching < pb for i, (pa, pb) in zip(index, parent)
                    )
                    if not inside_parent:
                        nodes.append((level, index))
            parent = block
        return nodes

    def node_value(self, level: int, index: tuple[int, ...]) -> float:
        """Value of one node of the complete tree."""
        return float(self.levels[level][tuple(index)])

    def frequencies(self) -> np.ndarray:
        """Estimated frequency of every cell of the (unpadded) domain."""
        leaf = self.levels[self.height]
        return leaf[tuple(slice(0, d) for d in self.domain_sizes)].copy()

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description: algorithm, params, guarantee and decomposition summary."""
        return {
            "algorithm": self.algorithm,
            "params": self.params,
            "domain_sizes": list(self.domain_sizes),
            "guarantee": {"epsilon": self.params["epsilon"], "model": LDP_MODEL},
            "summary": self.summary,
        }


# ------------------------------------------------------------------------------------------
# AHEAD construction
# ------------------------------------------------------------------------------------------


def _check_values(owner: str, values: np.ndarray, domain_sizes: Sequence[int]) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != len(domain_sizes) or (arr.size and arr.dtype.kind not in "iu"):
        raise UsageError(f"{owner}: values must be an integer array of shape (N, {len(domain_sizes)})")
    if arr.shape[0] < 1:
        raise UsageError(f"{owner}: at least one user is needed")
    for k, d in enumerate(domain_sizes):
        if int(arr[:, k].min()) < 0 or int(arr[:, k].max()) >= d:
            raise UsageError(f"{owner}: values of dimension {k} must lie in [0, {d})")
    return arr.astype(np.int64)


def _random_groups(n: int, groups: int, source: RandomSource) -> list[np.ndarray]:
    """A uniformly random partition of ``range(n)`` into ``groups`` near-equal parts (data-free)."""
    order = np.argsort(uniform01(source, n), kind="stable")
    return np.array_split(order, groups)


def _cells(values: np.ndarray, b: int, height: int, level: int) -> np.ndarray:
    """Flat index, in the level-``level`` grid, of the node holding each value."""
    shift = b ** (height - level)
    side = b**level
    flat = np.zeros(values.shape[0], dtype=np.int64)
    for k in range(values.shape[1]):
        flat = flat * side + values[:, k] // shift
    return flat


def _parent_flat(level: int, b: int, dims: int) -> np.ndarray:
    """For every cell of level ``level``, the flat index of its parent at ``level − 1``."""
    side = b**level
    idx = np.unravel_index(np.arange(side**dims), (side,) * dims)
    return np.ravel_multi_index(tuple(i // b for i in idx), (side // b,) * dims)


def _oracle_for(params: AheadParams, size: int) -> Oracle:
    if params.oracle != "auto":
        return params.oracle
    return "grr" if prefer_grr(size, params.epsilon) else "oue"


def _oracle_variance(oracle: str, epsilon: float, n: int, size: int) -> float:
    n = max(n, 1)
    return float(grr_variance(epsilon, n, size) if oracle == "grr" else oue_variance(epsilon, n))


#: Bytes per padded leaf cell and per tree node of one AHEAD tree's peak (see
#: :func:`ahead_memory_bytes`; measured with tracemalloc in tests/privacy/offline/test_ahead.py).
_LEAF_BYTES = 8 * 5
_NODE_BYTES = 8 * 5 // 2
#: Bytes per cell of one OUE report chunk (uniforms, thresholds, bits: privacy.offline.ldp._oue_bits).
_OUE_CELL_BYTES = 18


def _tree_shape(sizes: Sequence[int], b: int) -> tuple[int, int, int]:
    """``(side, leaves, nodes)`` of the complete tree over ``sizes`` padded to ``b^L`` per dimension."""
    height = 0
    while b**height < max(max(int(d) for d in sizes), 1):
        height += 1
    fanout = b ** len(sizes)
    leaves = fanout**height
    nodes = (fanout ** (height + 1) - 1) // (fanout - 1)
    return b**height, leaves, nodes


def ahead_memory_bytes(domain_sizes: Sequence[int], branching: int = 2, *, lle: bool | None = None) -> int:
    """Predicted peak memory (bytes) of :func:`ahead_nd` (or :func:`ahead_lle`) over ``domain_sizes``
    with fan-out ``branching`` per dimension: a pure function of those public parameters.

    One tree pads every dimension to ``side = b^L >= max(domain_sizes)`` and holds dense float64
    grids of every level (``leaves = side^m`` cells at the bottom, ``nodes = Σ_l B^l`` in all, B = b^m)
    twice (the values and their prefix sums), while building them it needs a few leaf-sized index
    arrays per level: the peak is about ``8·(5·leaves + 2.5·nodes)`` bytes (measured between 6.3 and
    8.6 × ``8·leaves`` for m = 1, 2 and b = 2, 3, 4; the estimate is 8.3–10). A decomposition wider
    than OUE's chunk (2^22 cells) adds one report row of ``18·leaves`` bytes. LLE (``lle``; default
    for three or more dimensions, as ``dphhh snapshot ahead`` runs) keeps one 2-D tree per pair of
    columns: the sum of their kept grids (``8·2.5·nodes`` each) plus the largest one's build.

    Not included: arrays proportional to the number of records (the values, the random user
    partition, the oracle's report chunks of at most 2^22 cells, about 75 MB).
    """
    b = int(branching)
    sizes = [int(d) for d in domain_sizes]
    if b < 2 or not sizes:
        raise UsageError("AHEAD: branching must be >= 2 and at least one domain size is needed")
    if lle is None:
        lle = len(sizes) > 2

    def one_tree(dims: Sequence[int]) -> tuple[int, int]:
        _, leaves, nodes = _tree_shape(dims, b)
        oue = _OUE_CELL_BYTES * leaves if leaves > _CHUNK_CELLS else 0
        return _LEAF_BYTES * leaves + oue, _NODE_BYTES * nodes

    if not lle:
        build, kept = one_tree(sizes)
        return build + kept
    trees = [one_tree([sizes[a], sizes[c]]) for a, c in itertools.combinations(range(len(sizes)), 2)]
    return sum(kept for _, kept in trees) + max(build for build, _ in trees)


def ahead_nd(
    values: np.ndarray, domain_sizes: Sequence[int], params: AheadParams, rng: RngLike = None, algorithm: str = "AHEAD"
) -> RangeEstimator:
    """AHEAD on ``m``-dimensional data (direct estimation, ``B = b^m``); ε-LDP per user.

    ``values``: integer array of shape ``(N, m)`` (or ``(N,)`` for m = 1), value ``k`` of each
    dimension in ``[0, domain_sizes[k])``. Domains are padded to ``b^L`` per dimension.
    """
    if not isinstance(params, AheadParams):
        raise TypeError(f"{algorithm}: params must be an AheadParams")
    sizes = [int(d) for d in domain_sizes]
    b, eps = params.branching, params.epsilon
    height = _pad_exponent(algorithm, sizes, b)
    vals = _check_values(algorithm, values, sizes)
    dims = len(sizes)
    fanout = b**dims
    n_users = vals.shape[0]
    source = as_source(rng)
    if n_users < height:
        raise UsageError(f"{algorithm}: at least {height} users are needed (one per group)")
    groups = _random_groups(n_users, height, source)
    e = math.exp(eps)
    # The paper's threshold for the (exactly known) root: OUE variance with N/c users.
    theta_root = math.sqrt((fanout + 1) * 4 * e * height / (n_users * (e - 1) ** 2))

    # Layer 0: the root. Per layer: node_level, node_flat, parent_pos, raw estimate, variance.
    prev_level = np.array([0])
    prev_flat = np.array([0])
    prev_est = np.array([1.0])
    prev_theta = theta_root
    prev_owner = np.zeros(1, dtype=np.int64)  # level-(l-1) cell -> position in E_{l-1}
    layers: list[dict[str, Any]] = []
    for level in range(1, height + 1):
        split = (prev_level == level - 1) & (prev_est > prev_theta)
        copies = np.flatnonzero(~split)
        splitting = np.flatnonzero(split)
        parent_of_cell = _parent_flat(level, b, dims)
        owner_prev = prev_owner[parent_of_cell]  # E_{l-1} position owning each level-l cell
        copy_pos = np.full(prev_level.size, -1, dtype=np.int64)
        copy_pos[copies] = np.arange(copies.size)
        cell_is_child = split[owner_prev]
        child_cells = np.flatnonzero(cell_is_child)
        owner = np.where(cell_is_child, 0, copy_pos[owner_prev])
        owner[child_cells] = copies.size + np.arange(child_cells.size)
        node_level = np.concatenate([prev_level[copies], np.full(child_cells.size, level)])
        node_flat = np.concatenate([prev_flat[copies], child_cells])
        parent_pos = np.concatenate([copies, owner_prev[child_cells]])
        size = node_level.size
        group = vals[groups[level - 1]]
        user_nodes = owner[_cells(group, b, height, level)]
        n = group.shape[0]
        if size == 1 or n == 0:
            oracle, est, var = "none", np.full(size, 1.0 / size), math.inf
            if size == 1:
                var = 0.0
        else:
            oracle = _oracle_for(params, size)
            est, n = estimate_frequencies(
                np.bincount(user_nodes, minlength=size), user_nodes, size, eps, oracle, source, params.sampling
            )
            var = _oracle_variance(oracle, eps, n, size)
        theta = math.sqrt((fanout + 1) * var) if math.isfinite(var) else math.inf
        layers.append(
            {
                "node_level": node_level,
                "node_flat": node_flat,
                "parent_pos": parent_pos,
                "estimate": est,
                "variance": var,
                "oracle": oracle,
                "users": int(n),
                "theta": theta,
                "split_before": int(splitting.size),
            }
        )
        prev_level, prev_flat, prev_est, prev_theta, prev_owner = node_level, node_flat, est, theta, owner

    levels = _postprocess(layers, b, dims, height)
    summary = {
        "layers": [
            {
                "layer": i + 1,
                "nodes": int(L["node_level"].size),
                "oracle": L["oracle"],
                "users": L["users"],
                "theta": L["theta"] if math.isfinite(L["theta"]) else None,
                "variance": L["variance"] if math.isfinite(L["variance"]) else None,
                "new_nodes": int((L["node_level"] == i + 1).sum()),
            }
            for i, L in enumerate(layers)
        ],
        "fanout": fanout,
        "groups": height,
        "padded_side": b**height,
        "users": n_users,
        "root_theta": theta_root,
    }
    return RangeEstimator(algorithm, asdict(params), sizes, b, levels, summary)


def _postprocess(layers: list[dict[str, Any]], b: int, dims: int, height: int) -> list[np.ndarray]:
    """Norm-Sub per layer, bottom-up weighted averaging, uniform completion (dense levels)."""
    if not layers:
        return [np.ones((1,) * dims)]
    smoothed = [norm_sub(L["estimate"]) for L in layers]
    # every entry is set below, bottom-up (the last layer first)
    values: list[np.ndarray] = [np.empty(0)] * len(layers)
    variances: list[np.ndarray] = [np.empty(0)] * len(layers)
    values[-1] = smoothed[-1]
    variances[-1] = np.full(smoothed[-1].size, layers[-1]["variance"])
    for i in range(len(layers) - 2, -1, -1):
        child = layers[i + 1]
        size = layers[i]["node_level"].size
        cs = np.bincount(child["parent_pos"], weights=values[i + 1], minlength=size)
        cv = np.bincount(child["parent_pos"], weights=variances[i + 1], minlength=size)
        own_var = layers[i]["variance"]
        if own_var == 0.0 or not np.isfinite(own_var):
            # Exactly known (single node) or unestimated layer: keep / take the children.
            values[i] = smoothed[i] if own_var == 0.0 else cs
            variances[i] = np.full(size, own_var) if own_var == 0.0 else cv
            continue
        values[i], variances[i] = weighted_average(smoothed[i], own_var, cs, cv)
    dense = [np.ones((1,) * dims)]
    for level in range(1, height + 1):
        grid = dense[-1]
        for axis in range(dims):
            grid = np.repeat(grid, b, axis=axis)
        grid = grid / (b**dims)
        layer = layers[level - 1]
        real = layer["node_level"] == level
        grid.reshape(-1)[layer["node_flat"][real]] = values[level - 1][real]
        dense.append(grid)
    return dense


def ahead_1d(values: np.ndarray, domain_size: int, params: AheadParams, rng: RngLike = None) -> RangeEstimator:
    """1-D AHEAD (fan-out ``params.branching``, 2 by default); ε-LDP per user.

    ``answer(lo, hi)`` estimates the fraction of users with value in ``[lo, hi]``.
    """
    return ahead_nd(np.asarray(values).reshape(-1), [domain_size], params, rng, "AHEAD-1D")


def ahead_2d(
    values: np.ndarray, domain_sizes: Sequence[int], params: AheadParams, rng: RngLike = None
) -> RangeEstimator:
    """2-D AHEAD (2×2 splits for ``branching = 2``, B = 4); ε-LDP per user.

    ``values`` has shape ``(N, 2)``; ``answer((lo1, hi1), (lo2, hi2))``.
    """
    if len(domain_sizes) != 2:
        raise UsageError("AHEAD-2D: domain_sizes must have two entries")
    return ahead_nd(values, domain_sizes, params, rng, "AHEAD-2D")


# ------------------------------------------------------------------------------------------
# Higher dimensions: LLE (pairwise 2-D trees + maximum entropy)
# ------------------------------------------------------------------------------------------


def max_entropy_atoms(
    dims: int, pair_tables: dict[tuple[int, int], np.ndarray], iterations: int = 200, tol: float = 1e-12
) -> np.ndarray:
    """Maximum-entropy distribution over ``2^dims`` binary atoms matching pairwise 2×2 tables.

    Iterative proportional fitting from the uniform distribution (its fixed point is the
    max-entropy distribution with those marginals when they are consistent). Returns an array of
    shape ``(2,)*dims``; index 1 on an axis means "inside the range on that attribute".
    """
    atoms = np.full((2,) * dims, 1.0 / 2**dims)
    for _ in range(iterations):
        change = 0.0
        for (a, c), table in pair_tables.items():
            other = tuple(k for k in range(dims) if k not in (a, c))
            marginal = atoms.sum(axis=other) if other else atoms
            ratio = np.where(marginal > 0, table / np.where(marginal > 0, marginal, 1.0), 0.0)
            shape = [1] * dims
            shape[a], shape[c] = 2, 2
            new = atoms * ratio.reshape(shape)
            change = max(change, float(np.abs(new - atoms).max()))
            atoms = new
        if change < tol:
            break
    return atoms


class LleEstimator:
    """m-dimensional range answers from pairwise 2-D AHEAD trees and maximum entropy (LLE)."""

    def __init__(
        self,
        params: AheadParams,
        domain_sizes: Sequence[int],
        trees: dict[tuple[int, int], RangeEstimator],
        users: dict[tuple[int, int], int],
    ) -> None:
        self.params = params
        self.domain_sizes = tuple(int(d) for d in domain_sizes)
        self.dims = len(self.domain_sizes)
        self.trees = trees
        self.users = users

    def pair_table(self, a: int, c: int, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
        """The 2×2 table (out/in × out/in) of attributes ``a`` and ``c`` for the query, from the
        pair's tree, clipped to non-negative and normalised to sum 1."""
        tree = self.trees[(a, c)]
        full_a, full_c = (0, self.domain_sizes[a] - 1), (0, self.domain_sizes[c] - 1)
        both = tree.answer(ranges[a], ranges[c])
        in_a = tree.answer(ranges[a], full_c)
        in_c = tree.answer(full_a, ranges[c])
        table = np.array([[1.0 - in_a - in_c + both, in_c - both], [in_a - both, both]])
        table = np.clip(table, 0.0, None)
        total = table.sum()
        return table / total if total > 0 else np.full((2, 2), 0.25)

    def answer(self, *ranges: tuple[int, int]) -> float:
        """Estimated fraction of users inside the m-dimensional box ``ranges`` (inclusive)."""
        if len(ranges) != self.dims:
            raise UsageError(f"AHEAD-LLE: expected {self.dims} ranges, got {len(ranges)}")
        for (lo, hi), d in zip(ranges, self.domain_sizes):
            if not (0 <= int(lo) <= int(hi) < d):
                raise UsageError(f"AHEAD-LLE: range [{lo}, {hi}] must satisfy 0 <= lo <= hi < {d}")
        tables = {pair: self.pair_table(pair[0], pair[1], ranges) for pair in self.trees}
        atoms = max_entropy_atoms(self.dims, tables)
        return float(atoms[(1,) * self.dims])

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description of the LLE estimator."""
        return {
            "algorithm": "AHEAD-LLE",
            "params": asdict(self.params),
            "domain_sizes": list(self.domain_sizes),
            "guarantee": {"epsilon": self.params.epsilon, "model": LDP_MODEL},
            "summary": {
                "pairs": [
                    {"attributes": list(p), "users": self.users[p], "tree": self.trees[p].summary} for p in self.trees
                ]
            },
        }


def ahead_lle(
    values_nd: np.ndarray, domain_sizes: Sequence[int], params: AheadParams, rng: RngLike = None
) -> LleEstimator:
    """AHEAD for ``m >= 3`` dimensions by LLE; ε-LDP per user (one report in one pair's tree).

    Users are split at random into ``C(m, 2)`` groups, one per attribute pair; each group runs
    2-D AHEAD on its pair (splitting itself further into that tree's layers).
    """
    sizes = [int(d) for d in domain_sizes]
    if len(sizes) < 2:
        raise UsageError("AHEAD-LLE: at least two dimensions are needed")
    if not isinstance(params, AheadParams):
        raise TypeError("AHEAD-LLE: params must be an AheadParams")
    vals = _check_values("AHEAD-LLE", values_nd, sizes)
    source = as_source(rng)
    pairs = list(itertools.combinations(range(len(sizes)), 2))
    groups = _random_groups(vals.shape[0], len(pairs), source)
    trees, users = {}, {}
    for pair, members in zip(pairs, groups):
        a, c = pair
        trees[pair] = ahead_nd(vals[members][:, [a, c]], [sizes[a], sizes[c]], params, source, "AHEAD-2D")
        users[pair] = int(members.size)
    return LleEstimator(params, sizes, trees, users)
