"""LUE-DPTree (docs/ALGORITHMS.md §9; Kang et al. 2016): heteroscedastic discrete Laplace noise on an arbitrary
interval tree, budgets that minimise the expected range-query error, and BLUE consistency.

Mechanism. The data are elements with integer values in ``[1, n]`` (or their histogram). For an
:class:`~dphhh.privacy.offline.interval_tree.IntervalTree` over ``[1, n]`` every node x releases its
integer count plus **discrete Laplace** noise with P(k) ∝ exp(−ε_x·|k|), i.e. scale 1/ε_x
(:func:`dphhh.privacy.noise.discrete_laplace_elementwise`, one scale per node, from the secure source
unless a seed is injected). The per-node budgets ε_x are chosen before seeing the data (from the
tree and a public query workload) so that the budgets on every root-to-leaf path sum to at most ε
(exactly ε for the optimal budgets). Every released node value is an integer (docs/ALGORITHMS.md §3 "Integer
counts").

Guarantee. ε-DP with δ = 0 with respect to adding or removing one element. Proof: adding or
removing an element with value v changes the count of exactly the nodes on the root-to-leaf path
of the leaf ``[v, v]``, each by 1 (one node per level of that path) and no other node; for an
integer count, adding discrete Laplace noise of scale 1/ε_x is ε_x-DP for a change of 1 (an
integer output y has probabilities at counts c and c + 1 in the ratio
exp(ε_x(|y − c − 1| − |y − c|)), between e^{−ε_x} and e^{ε_x}); the path's
releases compose sequentially to Σ_path ε_x <= ε, and nodes off the path have identical
distributions on both inputs. Budgets, tree and workload are data-independent. BLUE consistency,
range answers and error figures are deterministic post-processing of the integer node values, so
their floating-point arithmetic cannot weaken the guarantee.

Floating point (Mironov 2012). The released node values are integers, and the set of values each
node can take is the same for neighbouring inputs (all integers), so the low-order bits of a printed value carry no information: the attack on
``x + Laplace`` computed in doubles (which makes some printed doubles possible for x and
impossible for x + 1, see ``tests/privacy/offline/test_float_attack.py``) does not apply. The version before this one
added continuous :func:`dphhh.privacy.noise.laplace` noise in doubles and was exposed to it. The sampler
(:func:`dphhh.privacy.noise.discrete_laplace_elementwise`) is exact: its law is the ideal discrete
Laplace of each node's scale, with no resolution limit, so the release is ε-DP as stated.

Budgets (docs/ALGORITHMS.md §9). With uniformly random range queries a node x is used by the canonical
decomposition of a query with probability P_x (:func:`uniform_coverage`), and answering by
canonical decomposition has expected squared error Σ P_x·σ_x². The spec's budgets minimise it for
σ_x² = 2/ε_x² (continuous Laplace) subject to every path summing to ε: K_leaf = 2P_leaf,
K_x = ((2P_x)^(1/3) + (Σ_children K_c)^(1/3))³, then top-down with B_root = ε:
ε_x = B_x·(2P_x)^(1/3) / ((2P_x)^(1/3) + (ΣK_c)^(1/3)), B_child = B_x − ε_x (leaves take all of
B_leaf). The minimum error is K_root/ε². These budgets are kept for the discrete noise: its
variance is 2/ε_x² − 1/6 + ε_x²/120 − …, and the constant −1/6 does not depend on the budgets,
so they stay optimal up to the O(ε_x²) term.

Variances (a documented choice). Everything that weighs or predicts the noise — BLUE's weights
(:func:`blue_estimates`) and the reported expected error (:func:`expected_query_error`) — uses by
default (``noise="discrete_laplace"``) the exact variance of the noise actually added,
σ_x² = 2q/(1 − q)² with q = e^{−ε_x} (:func:`dphhh.privacy.noise.discrete_laplace_variance`), which is
smaller than 2/ε_x². ``noise="laplace"`` gives the spec's analytic model σ_x² = 2/ε_x², in which
the paper's regression anchors (10.667 / 8.250 / 6.667 / 5.357) are stated; the mechanism never
adds continuous noise.

BLUE (docs/ALGORITHMS.md §9): weighted least squares of the leaf counts given all noisy node values with
variances σ_x², computed in two linear passes; the output is consistent (every parent equals the
sum of its children), so every covering of a range gives the same answer; :meth:`LueResult.answer`
uses the canonical decomposition (the fewest nodes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dphhh.privacy.noise import discrete_laplace_elementwise, discrete_laplace_variance
from dphhh.privacy.params import check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError

from .interval_tree import IntervalTree, node_count

__all__ = [
    "LueParams",
    "LueResult",
    "Workload",
    "BUDGET_RULES",
    "lue_dptree",
    "lue_dptree_counts",
    "uniform_coverage",
    "workload_coverage",
    "optimal_budgets",
    "uniform_budgets",
    "path_sums",
    "check_budgets",
    "noisy_node_values",
    "node_variances",
    "NOISE_MODELS",
    "MECHANISM_NOISE",
    "blue_estimates",
    "expected_query_error",
    "EXACT_BLUE_ERROR_MAX_N",
    "lue_memory_bytes",
]

BUDGET_RULES = ("optimal", "uniform")
_OWNER = "LUE-DPTree"
#: Largest domain for which the exact BLUE error (an n×n covariance matrix) is computed.
EXACT_BLUE_ERROR_MAX_N = 4096
_PATH_TOL = 1e-9
#: Noise models for :func:`node_variances`: the mechanism's discrete Laplace, and the spec's
#: analytic continuous-Laplace model (σ² = 2/ε², for the §9 regression anchors only).
NOISE_MODELS = ("discrete_laplace", "laplace")
#: The noise :func:`noisy_node_values` adds (and the default of every variance-dependent function).
MECHANISM_NOISE = "discrete_laplace"
#: Floor of the discrete variances: for ε_x >= 40 the sampler always returns 0 (its non-zero mass is
#: below 2^-53) and the exact variance 2q/(1 − q)² underflows to 0 beyond ε_x ≈ 710; BLUE's weights
#: 1/σ² stay finite with σ² floored at its value at ε_x = 40 (about 8.5e-18).
_MIN_DISCRETE_VARIANCE = float(discrete_laplace_variance(1.0 / 40.0))


# ---------------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class LueParams:
    """Parameters of one LUE-DPTree release.

    * ``epsilon``: total budget; the release is ε-DP (δ = 0) for adding/removing one element.
    * ``budgets``: ``"optimal"`` (docs/ALGORITHMS.md §9 formulas for the query workload) or ``"uniform"``
      (ε/height per node, the homoscedastic baseline).
    * ``blue``: post-process with BLUE consistency (default) or answer from the raw noisy nodes.
    * ``uniform_floor``: with a supplied query workload, the optimal budgets use the coverage of
      the workload mixed with the uniform-query coverage at this weight, so that nodes the
      workload never uses still get a positive budget (0 < uniform_floor <= 1).
    """

    epsilon: float
    budgets: str = "optimal"
    blue: bool = True
    uniform_floor: float = 0.01

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("LueParams", "epsilon", self.epsilon))
        if self.budgets not in BUDGET_RULES:
            raise UsageError(f"LueParams: budgets must be one of {', '.join(BUDGET_RULES)}, got {self.budgets!r}")
        if not isinstance(self.blue, bool):
            raise UsageError(f"LueParams: blue must be a bool, got {self.blue!r}")
        floor = check_positive("LueParams", "uniform_floor", self.uniform_floor)
        if floor > 1:
            raise UsageError(
                f"LueParams: uniform_floor must be a number with 0 < uniform_floor <= 1, got {self.uniform_floor!r}"
            )
        object.__setattr__(self, "uniform_floor", floor)

    def as_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "budgets": self.budgets,
            "blue": self.blue,
            "uniform_floor": self.uniform_floor,
        }


@dataclass(frozen=True)
class Workload:
    """A public range-query distribution: inclusive 1-based ranges with weights summing to 1."""

    lo: np.ndarray
    hi: np.ndarray
    weight: np.ndarray

    @classmethod
    def from_ranges(cls, tree: IntervalTree, queries: Iterable[Sequence[float]]) -> Workload:
        """Validate ``[(lo, hi, weight), ...]`` (``1 <= lo <= hi <= n``, weight >= 0, total > 0)
        and normalise the weights."""
        rows = list(queries)
        if not rows:
            raise UsageError(f"{_OWNER}: queries must contain at least one (lo, hi, weight) range")
        lo: list[int] = []
        hi: list[int] = []
        w: list[float] = []
        for i, q in enumerate(rows):
            if not isinstance(q, (tuple, list)) or len(q) != 3:
                raise UsageError(f"{_OWNER}: queries[{i}] must be (lo, hi, weight), got {q!r}")
            a, b = tree.check_range(q[0], q[1])
            weight = q[2]
            if (
                not isinstance(weight, (int, float, np.integer, np.floating))
                or isinstance(weight, bool)
                or not math.isfinite(weight)
                or weight < 0
            ):
                raise UsageError(f"{_OWNER}: queries[{i}] weight must be a finite number >= 0, got {weight!r}")
            lo.append(a)
            hi.append(b)
            w.append(float(weight))
        weights = np.array(w)
        if weights.sum() <= 0:
            raise UsageError(f"{_OWNER}: query weights must not all be 0")
        return cls(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), weights / weights.sum())

    @classmethod
    def all_ranges(cls, n: int) -> Workload:
        """Every range of ``[1, n]`` with equal weight (the uniform distribution, N = n(n+1)/2)."""
        lo, hi = np.triu_indices(n)
        count = lo.shape[0]
        return cls(lo.astype(np.int64) + 1, hi.astype(np.int64) + 1, np.full(count, 1.0 / count))


#: Peak bytes per tree node (building the tree from its nested description in Python, then the
#: release's per-node arrays), per squared domain value of the exact BLUE error (n x n matrices),
#: and per workload cell (:func:`workload_coverage`'s chunks) — see :func:`lue_memory_bytes`.
_NODE_BYTES = 320
_BLUE_CELL_BYTES = 33
_WORKLOAD_CELL_BYTES = 12
_WORKLOAD_CHUNK = 4_000_000


def lue_memory_bytes(n: int, fanouts: int | Sequence[int], *, blue: bool = True, workload_ranges: int = 0) -> int:
    """Predicted peak memory (bytes) of building the tree over ``[1, n]`` (``fanouts`` as for
    :func:`~dphhh.privacy.offline.interval_tree.node_count`) and releasing it: a pure function of public
    parameters.

    ``320·nodes`` (the tree is built from a nested Python description, about 300 bytes per node,
    then the release keeps some 20 per-node arrays), plus ``33·n²`` when BLUE's exact expected
    error is computed (``n <= EXACT_BLUE_ERROR_MAX_N``: n × n covariance matrices), plus
    ``12·min(ranges·nodes, max(4·10⁶, nodes))`` for a workload of ``workload_ranges`` ranges, plus
    ``16·n`` for the histogram. Measured with tracemalloc at 0.9–1.1 of the real peak. Not included:
    the values read (8 bytes per record).
    """
    nodes = node_count(n, fanouts)
    total = _NODE_BYTES * nodes + 16 * int(n)
    if blue and n <= EXACT_BLUE_ERROR_MAX_N:
        total += _BLUE_CELL_BYTES * int(n) * int(n)
    if workload_ranges:
        total += _WORKLOAD_CELL_BYTES * min(int(workload_ranges) * nodes, max(_WORKLOAD_CHUNK, nodes))
    return total


def _workload(tree: IntervalTree, queries: Workload | Iterable[Sequence[float]] | None) -> Workload | None:
    if queries is None or isinstance(queries, Workload):
        return queries
    return Workload.from_ranges(tree, queries)


# ---------------------------------------------------------------------------------- coverage


def uniform_coverage(tree: IntervalTree) -> np.ndarray:
    """P_x for uniformly random range queries: the probability that node x is in the canonical
    decomposition, P(x) = (l·(n − r + 1) − L·(n − R + 1))/N for x = [l, r] with parent [L, R],
    P(root) = 1/N, N = n(n + 1)/2."""
    n = tree.n
    total = n * (n + 1) / 2
    lo, hi = tree.lo.astype(float), tree.hi.astype(float)
    own = lo * (n - hi + 1)
    par = np.where(tree.parent >= 0, tree.parent, 0)
    parent_term = tree.lo[par] * (n - tree.hi[par] + 1.0)
    p = (own - np.where(tree.parent >= 0, parent_term, 0.0)) / total
    return p


def workload_coverage(tree: IntervalTree, queries: Workload | Iterable[Sequence[float]]) -> np.ndarray:
    """P_x = Σ weight of the queries whose canonical decomposition uses x (x ⊆ q and parent ⊄ q)."""
    wl = _workload(tree, queries)
    assert wl is not None
    out = np.zeros(tree.size)
    par = np.where(tree.parent >= 0, tree.parent, 0)
    has_parent = tree.parent >= 0
    chunk = max(1, _WORKLOAD_CHUNK // tree.size)
    for s in range(0, wl.lo.shape[0], chunk):
        qlo, qhi, qw = wl.lo[s : s + chunk, None], wl.hi[s : s + chunk, None], wl.weight[s : s + chunk]
        inside = (qlo <= tree.lo) & (tree.hi <= qhi)
        parent_inside = has_parent & (qlo <= tree.lo[par]) & (tree.hi[par] <= qhi)
        out += qw @ (inside & ~parent_inside)
    return out


def _coverage(tree: IntervalTree, wl: Workload | None, floor: float) -> np.ndarray:
    uni = uniform_coverage(tree)
    if wl is None:
        return uni
    return (1 - floor) * workload_coverage(tree, wl) + floor * uni


# ---------------------------------------------------------------------------------- budgets


def optimal_budgets(tree: IntervalTree, epsilon: float, coverage: np.ndarray | None = None) -> np.ndarray:
    """Budgets minimising Σ P_x·2/ε_x² subject to every root-to-leaf path summing to ε (docs/ALGORITHMS.md §9).

    ``coverage`` defaults to :func:`uniform_coverage`; every P_x must be > 0.
    """
    epsilon = check_positive(_OWNER, "epsilon", epsilon)
    p = uniform_coverage(tree) if coverage is None else np.asarray(coverage, dtype=float)
    if p.shape != (tree.size,) or not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise UsageError(f"{_OWNER}: coverage must be {tree.size} finite probabilities > 0 (one per node)")
    a = np.cbrt(2 * p)
    k = np.zeros(tree.size)
    child_k = np.zeros(tree.size)  # Σ_children K_c
    slices = tree.depth_slices()
    for s in reversed(slices):
        leaf = tree.is_leaf[s]
        kd = np.where(leaf, 2 * p[s], (a[s] + np.cbrt(child_k[s])) ** 3)
        k[s] = kd
        if s.start > 0:
            np.add.at(child_k, tree.parent[s], kd)
    eps = np.zeros(tree.size)
    remaining = np.zeros(tree.size)
    remaining[0] = epsilon
    for s in slices:
        if s.start > 0:
            remaining[s] = remaining[tree.parent[s]] - eps[tree.parent[s]]
        b = np.cbrt(child_k[s])
        eps[s] = np.where(tree.is_leaf[s], remaining[s], remaining[s] * a[s] / (a[s] + b))
    sums = path_sums(tree, eps)
    assert np.allclose(sums, epsilon, rtol=1e-9, atol=0), "optimal budgets: a path does not sum to epsilon"
    return eps


def uniform_budgets(tree: IntervalTree, epsilon: float) -> np.ndarray:
    """The homoscedastic baseline: ε/height for every node (paths shorter than the height sum to
    less than ε, which is still ε-DP)."""
    epsilon = check_positive(_OWNER, "epsilon", epsilon)
    eps = np.full(tree.size, epsilon / tree.height)
    assert np.all(path_sums(tree, eps) <= epsilon * (1 + 1e-12))
    return eps


def path_sums(tree: IntervalTree, budgets: np.ndarray) -> np.ndarray:
    """Σ ε_x along the root-to-leaf path of every leaf, indexed by value (``[v - 1]``)."""
    budgets = np.asarray(budgets, dtype=float)
    acc = budgets.copy()
    for s in tree.depth_slices()[1:]:
        acc[s] += acc[tree.parent[s]]
    return acc[tree.leaf_index()]


def check_budgets(tree: IntervalTree, budgets: Any, epsilon: float | None = None) -> np.ndarray:
    """``budgets`` as a float array if there is one finite ε_x > 0 per node and, when ``epsilon``
    is given, every root-to-leaf path sums to at most ε; else ``ValueError``."""
    eps = np.asarray(budgets, dtype=float)
    if eps.shape != (tree.size,) or not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise UsageError(f"{_OWNER}: budgets must be {tree.size} finite numbers > 0 (one per node)")
    if epsilon is not None and np.any(path_sums(tree, eps) > epsilon * (1 + _PATH_TOL)):
        raise UsageError(f"{_OWNER}: budgets along some root-to-leaf path sum to more than epsilon = {epsilon}")
    return eps


# ---------------------------------------------------------------------------------- release


def _integer_counts(node_counts: Any, size: int) -> np.ndarray:
    """``node_counts`` as int64, or ``ValueError`` unless they are ``size`` integer values."""
    arr = np.asarray(node_counts)
    if arr.shape != (size,) or arr.dtype.kind not in "iuf":
        raise UsageError(f"{_OWNER}: node counts must be {size} integers (one per node)")
    if arr.dtype.kind == "f":
        if not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))) or np.any(np.abs(arr) >= 2.0**53):
            # no value in the message: node counts are raw data
            raise UsageError(
                f"{_OWNER}: node counts must be integers (the discrete Laplace mechanism adds "
                "integer noise to integer counts)"
            )
    return arr.astype(np.int64)


def noisy_node_values(
    tree: IntervalTree,
    node_counts: np.ndarray,
    budgets: np.ndarray,
    rng: RandomSource | np.random.Generator | int | None = None,
    *,
    trials: int | None = None,
) -> np.ndarray:
    """Every node's integer count plus discrete Laplace noise of scale 1/ε_x (P(k) ∝ e^{−ε_x|k|}),
    the only randomised step (docs/ALGORITHMS.md §9, §3 "Integer counts").

    ``node_counts`` must be integers (an integer dtype, or floats with integer values).
    ``budgets`` must be positive; with path sums <= ε the output is ε-DP (δ = 0) for adding or
    removing one element (module docstring). Returns ``np.int64``: shape ``(size,)``, or with
    ``trials`` that many independent releases at once, shape ``(size, trials)`` (audits and error
    checks).
    """
    eps = check_budgets(tree, budgets)
    counts = _integer_counts(node_counts, tree.size)
    source = as_source(rng)
    scales = 1.0 / eps
    if trials is None:
        return counts + discrete_laplace_elementwise(scales, source)
    noise = discrete_laplace_elementwise(np.broadcast_to(scales, (trials, tree.size)), source)
    return counts[:, None] + noise.T


def node_variances(budgets: Any, noise: str = MECHANISM_NOISE) -> np.ndarray:
    """σ_x² of each node's noise for the budgets ε_x (see the module docstring, "Variances").

    ``noise="discrete_laplace"`` (default, what :func:`noisy_node_values` adds):
    2q/(1 − q)² with q = e^{−ε_x} (floored at about 8.5e-18, its value at ε_x = 40, where the
    sampler already adds no noise, so that BLUE's weights stay finite); ``noise="laplace"``: the
    spec's analytic 2/ε_x².
    """
    if noise not in NOISE_MODELS:
        raise UsageError(f"{_OWNER}: noise must be one of {', '.join(NOISE_MODELS)}, got {noise!r}")
    eps = np.asarray(budgets, dtype=float)
    if not (np.all(np.isfinite(eps)) and np.all(eps > 0)):
        raise UsageError(f"{_OWNER}: budgets must be finite numbers > 0")
    if noise == "laplace":
        return 2.0 / eps**2
    return np.maximum(np.asarray(discrete_laplace_variance(1.0 / eps), dtype=float), _MIN_DISCRETE_VARIANCE)


def _col(v: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Reshape a per-node vector to broadcast against ``like`` (nodes on axis 0)."""
    return v.reshape(v.shape + (1,) * (like.ndim - 1))


def blue_estimates(
    tree: IntervalTree, noisy: np.ndarray, budgets: np.ndarray, *, noise: str = MECHANISM_NOISE
) -> np.ndarray:
    """BLUE-consistent node values from the noisy ones (docs/ALGORITHMS.md §9), with σ_x² from
    :func:`node_variances` (default: the discrete Laplace's exact variance, the noise the
    mechanism adds; ``noise="laplace"``: the spec's 2/ε_x²).

    Up: leaf z = y, v = σ²; internal w = 1/σ_x² + 1/Σv_c, z_x = (y_x/σ_x² + Σz_c/Σv_c)/w,
    v_x = 1/w. Down: h_root = z_root; h_c = z_c + (v_c/Σv)·(h_parent − Σz). ``noisy`` has the
    nodes on axis 0 (extra axes are independent releases). The output satisfies parent = Σ
    children and equals weighted least squares of the leaves given all node values.
    """
    eps = check_budgets(tree, budgets)
    y = np.asarray(noisy, dtype=float)
    if y.shape[0] != tree.size:
        raise UsageError(f"{_OWNER}: noisy values must have {tree.size} rows (one per node), got {y.shape[0]}")
    sigma2 = node_variances(eps, noise)
    z = np.empty_like(y)
    v = np.empty(tree.size)
    sum_z = np.zeros_like(y)
    sum_v = np.zeros(tree.size)
    slices = tree.depth_slices()
    for s in reversed(slices):
        idx = np.arange(s.start, s.stop)
        leaf = tree.is_leaf[s]
        lv, iv = idx[leaf], idx[~leaf]
        z[lv], v[lv] = y[lv], sigma2[lv]
        if iv.size:
            w = 1.0 / sigma2[iv] + 1.0 / sum_v[iv]
            z[iv] = (y[iv] / _col(sigma2[iv], y) + sum_z[iv] / _col(sum_v[iv], y)) / _col(w, y)
            v[iv] = 1.0 / w
        if s.start > 0:
            # children of one parent are contiguous and all at this depth
            par = tree.parent[s]
            starts = np.flatnonzero(np.concatenate(([True], par[1:] != par[:-1])))
            parents = par[starts]
            sum_z[parents] = np.add.reduceat(z[s], starts, axis=0)
            sum_v[parents] = np.add.reduceat(v[s], starts)
    h = np.empty_like(y)
    h[0] = z[0]
    for s in slices[1:]:
        par = tree.parent[s]
        h[s] = z[s] + _col(v[s] / sum_v[par], y) * (h[par] - sum_z[par])
    return h


def _leaf_counts_from_values(values: Any, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise UsageError(f"{_OWNER}: values must be a 1-D array of integers in [1, n = {n}]")
    if arr.size and (arr.min() < 1 or arr.max() > n):
        # no value or count in the message: raw data never leaves in errors
        raise UsageError(f"{_OWNER}: values must be integers in [1, n = {n}]; some are outside the domain")
    return np.bincount(arr.astype(np.int64) - 1, minlength=n)


@dataclass(frozen=True, eq=False)
class LueResult:
    """A LUE-DPTree release: the noisy (and, with ``params.blue``, BLUE-consistent) node values.

    Everything here is a function of the noisy release and public inputs only (the raw counts are
    not kept). ``expected_error`` is the expected squared error of a range answer under the
    workload (data-independent); with BLUE on a domain larger than
    :data:`EXACT_BLUE_ERROR_MAX_N` it is the no-BLUE value, an upper bound
    (``expected_error_exact`` is then ``False``).
    """

    tree: IntervalTree
    params: LueParams
    budgets: np.ndarray
    noisy: np.ndarray
    estimates: np.ndarray
    seeded: bool
    expected_error: float
    expected_error_exact: bool = True
    workload_supplied: bool = False

    def answer(self, lo: int, hi: int) -> float:
        """The released count of values in ``[lo, hi]`` (inclusive, 1-based): the sum of the
        estimates over the canonical decomposition (fewest nodes)."""
        return float(sum(self.estimates[x] for x in self.tree.decompose(lo, hi)))

    def node_estimates(self) -> list[tuple[int, int, float]]:
        """``[(lo, hi, estimate), ...]`` for every node, breadth-first."""
        return [(int(a), int(b), float(e)) for a, b, e in zip(self.tree.lo, self.tree.hi, self.estimates)]

    def to_dict(self, *, include_nodes: bool | None = None) -> dict[str, Any]:
        """JSON-serialisable report. ``include_nodes`` (default: when the tree has <= 1024 nodes)
        adds every node's interval, budget and estimate; per-depth budget ranges are always in."""
        if include_nodes is None:
            include_nodes = self.tree.size <= 1024
        depth_budgets = []
        for d, s in enumerate(self.tree.depth_slices()):
            b = self.budgets[s]
            depth_budgets.append({"depth": d, "nodes": int(b.size), "min": float(b.min()), "max": float(b.max())})
        out: dict[str, Any] = {
            "algorithm": "LUE-DPTree",
            "params": self.params.as_dict(),
            "guarantee": {
                "epsilon": self.params.epsilon,
                "delta": 0.0,
                "neighbours": "add or remove one element",
                "text": (
                    f"epsilon-DP with epsilon = {self.params.epsilon:g}, delta = 0, for adding or removing one "
                    "element: every integer node count gets discrete Laplace noise (P(k) proportional to "
                    "exp(-epsilon_x |k|)) and the budgets on every root-to-leaf path sum to at most epsilon; "
                    "the noisy node values are integers, so printed values carry no floating-point "
                    "side channel (Mironov 2012); consistency and answers are post-processing"
                    + (" (seeded noise: NOT private, for tests only)" if self.seeded else "")
                ),
                "private": not self.seeded,
            },
            "noise": {
                "distribution": "discrete_laplace",
                "scale": "1/epsilon_x per node",
                "variance": "2q/(1-q)^2 with q = exp(-epsilon_x) (used by BLUE and the expected error)",
            },
            "tree": self.tree.summary(),
            "budgets": {
                "rule": self.params.budgets,
                "max_path_sum": float(path_sums(self.tree, self.budgets).max()),
                "by_depth": depth_budgets,
            },
            "expected_squared_error": {
                "value": self.expected_error,
                "workload": "supplied queries" if self.workload_supplied else "uniformly random ranges",
                "kind": "exact"
                if self.expected_error_exact
                else ("upper bound (canonical decomposition without BLUE; BLUE is never worse)"),
            },
        }
        if include_nodes:
            out["nodes"] = [
                {"lo": a, "hi": b, "epsilon": float(eps), "estimate": e}
                for (a, b, e), eps in zip(self.node_estimates(), self.budgets)
            ]
        return out


def lue_dptree_counts(
    counts: Any,
    tree: IntervalTree,
    params: LueParams,
    *,
    queries: Workload | Iterable[Sequence[float]] | None = None,
    rng: RandomSource | np.random.Generator | int | None = None,
) -> LueResult:
    """LUE-DPTree on a histogram: ``counts[v - 1]`` elements have value v (non-negative integers,
    length ``tree.n``). ε-DP (δ = 0, ε = ``params.epsilon``) for adding or removing one element.

    ``queries``: optional public workload ``[(lo, hi, weight), ...]`` for the optimal budgets and
    the reported expected error (default: uniformly random ranges). ``rng``: ``None`` for the
    secure source (production); a seed or Generator makes the output reproducible and not private.
    """
    arr = np.asarray(counts)
    if arr.shape != (tree.n,) or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0) or np.any(arr < 0):
        raise UsageError(f"{_OWNER}: counts must be {tree.n} non-negative integers (one per value of [1, n])")
    wl = _workload(tree, queries)
    if params.budgets == "optimal":
        budgets = optimal_budgets(tree, params.epsilon, _coverage(tree, wl, params.uniform_floor))
    else:
        budgets = uniform_budgets(tree, params.epsilon)
    assert np.all(path_sums(tree, budgets) <= params.epsilon * (1 + _PATH_TOL))
    source = as_source(rng)
    noisy = noisy_node_values(tree, tree.node_counts(arr), budgets, source)
    estimates = blue_estimates(tree, noisy, budgets) if params.blue else noisy
    # BLUE is never worse than the canonical decomposition (both are linear and unbiased), so the
    # no-BLUE error bounds the BLUE error where the exact figure would need too large a matrix.
    exact = not params.blue or tree.n <= EXACT_BLUE_ERROR_MAX_N
    expected = expected_query_error(tree, budgets, blue=params.blue and exact, queries=wl)
    return LueResult(tree, params, budgets, noisy, estimates, not source.secure, expected, exact, wl is not None)


def lue_dptree(
    values: Any,
    tree: IntervalTree,
    params: LueParams,
    *,
    queries: Workload | Iterable[Sequence[float]] | None = None,
    rng: RandomSource | np.random.Generator | int | None = None,
) -> LueResult:
    """LUE-DPTree on raw elements: ``values`` are integers in ``[1, tree.n]`` (one per element;
    callers with 0-based data such as port numbers pass ``value + 1``). ε-DP (δ = 0) for adding or
    removing one element. See :func:`lue_dptree_counts` for ``queries`` and ``rng``."""
    return lue_dptree_counts(_leaf_counts_from_values(values, tree.n), tree, params, queries=queries, rng=rng)


# ---------------------------------------------------------------------------------- error


def _blue_leaf_covariance(tree: IntervalTree, sigma2: np.ndarray) -> np.ndarray:
    """Covariance of the BLUE leaf estimates: (Aᵀ W A)⁻¹ with A the node/leaf incidence and
    W = diag(1/σ_x²), assembled with a 2-D difference array (no dense A)."""
    n = tree.n
    if n > EXACT_BLUE_ERROR_MAX_N:
        raise UsageError(
            f"{_OWNER}: the exact BLUE error needs an n x n covariance; n = {n} > {EXACT_BLUE_ERROR_MAX_N}"
        )
    w = 1.0 / sigma2
    diff = np.zeros((n + 1, n + 1))
    l0, r1 = tree.lo - 1, tree.hi  # 0-based start, exclusive end
    np.add.at(diff, (l0, l0), w)
    np.add.at(diff, (l0, r1), -w)
    np.add.at(diff, (r1, l0), -w)
    np.add.at(diff, (r1, r1), w)
    info = diff.cumsum(axis=0).cumsum(axis=1)[:n, :n]
    return np.linalg.inv(info)


def expected_query_error(
    tree: IntervalTree,
    budgets: Any,
    *,
    blue: bool,
    queries: Workload | Iterable[Sequence[float]] | None = None,
    noise: str = MECHANISM_NOISE,
) -> float:
    """Expected squared error of a range answer, averaged over the query distribution.

    ``queries``: ``None`` for uniformly random ranges, else ``[(lo, hi, weight), ...]``.
    ``noise``: the node variances σ_x² (:func:`node_variances`): ``"discrete_laplace"`` (default)
    is the error of the mechanism as released; ``"laplace"`` (σ_x² = 2/ε_x²) is the spec's analytic
    model of §9's regression anchors. Without BLUE (canonical decomposition of the raw noisy
    nodes): Σ_x P_x·σ_x². With BLUE (weights from the same σ_x²): the exact variance qᵀ C q of the
    BLUE estimate of each query, C = (AᵀWA)⁻¹ the covariance of the WLS leaf estimates (needs
    n <= :data:`EXACT_BLUE_ERROR_MAX_N`).
    """
    eps = check_budgets(tree, budgets)
    sigma2 = node_variances(eps, noise)
    wl = _workload(tree, queries)
    if not blue:
        p = uniform_coverage(tree) if wl is None else workload_coverage(tree, wl)
        return float(p @ sigma2)
    cov = _blue_leaf_covariance(tree, sigma2)
    n = tree.n
    if wl is None:
        # number of ranges containing both i and j (1-based): min(i, j)·(n − max(i, j) + 1)
        i = np.arange(1, n + 1)
        both = np.minimum.outer(i, i) * (n - np.maximum.outer(i, i) + 1)
        return float((cov * both).sum() / (n * (n + 1) / 2))
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = cov.cumsum(axis=0).cumsum(axis=1)
    a, b = wl.lo - 1, wl.hi
    block = prefix[b, b] - prefix[a, b] - prefix[b, a] + prefix[a, a]
    return float(wl.weight @ block)
