"""InfTDA: integer, non-negative, consistent hierarchical counts under zCDP (docs/ALGORITHMS.md §7).

TopDown over a hierarchy (Boninsegna & Silvestri, corrected by the spec):

* the root count ``n`` is released first: under **add/remove** neighbours (default) it gets
  discrete Gaussian noise with a share ``root_share`` of ρ (then clamped at 0); under
  **substitution** neighbours ``n`` is not sensitive and is released exactly;
* levels ``1..h`` each get ``ρ_level = (1 − root_share)·ρ / h`` (``ρ / h`` under substitution).
  For every *kept* parent ``(u, c)`` of the previous level (ascending key order), all children of
  ``u`` in a **public, data-independent** child domain get noise ``DG(σ²)`` (the exact
  Canonne–Kamath–Steinke discrete Gaussian of :func:`dphhh.privacy.noise.discrete_gaussian`) with
  ``σ² = Δ₂² / (2·ρ_level)``; :func:`~dphhh.privacy.offline.intopt.int_opt` turns the noisy vector into
  non-negative integers summing to ``c``; children with a non-zero result are kept.
* L2 sensitivity per level (and of the root): a privacy unit contributing at most ``m`` elements
  (``contribution``) changes the level's count vector by at most ``Δ₂ = m`` in L2 norm under
  add/remove, ``Δ₂ = m·√2`` under substitution (m elements leave one set of nodes and join another).
  (The public InfTDA code swaps these branches for m > 1; this is not a port of it.)

**Guarantee.** Noising the children of kept parents only is the same as noising the whole level
vector and discarding the rest (the kept set is a function of earlier *released* values and the
child domain is public), so each level is a Gaussian mechanism of ``ρ_level``-zCDP and, by
adaptive composition, the whole release is ``ρ``-zCDP with respect to the chosen neighbouring
relation of one privacy unit with at most ``contribution`` elements; hence (ε, δ)-DP with
``ε = ρ + 2√(ρ ln(1/δ))`` (:mod:`dphhh.privacy.offline.zcdp`). The caller guarantees the contribution
bound (with ``contribution=1`` every element is its own unit: event level). Each ``σ²`` is
computed in exact rational arithmetic and rounded **up** to a multiple of 1/1024, so every part
spends at most its nominal ρ.

Floating point (Mironov 2012): safe — the noise is the exact integer discrete Gaussian (rational
arithmetic, no floats), IntOPT returns integers, so every released count is an integer.

Child domains (never the observed children, which would leak): IPv4 hierarchies enumerate all
``2^(len_l − len_{l−1})`` children of a prefix (refused above ``max_children``); path hierarchies
need a user-supplied :class:`PathDomain`; IPv6 hierarchies are refused.
"""

from __future__ import annotations

import ipaddress
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dphhh.privacy.noise import DG_ROUND, discrete_gaussian
from dphhh.privacy.offline.intopt import int_opt
from dphhh.privacy.offline.zcdp import epsilon_from_rho, rho_from_epsilon_delta
from dphhh.privacy.params import check_int, check_open_unit, check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy, IPv4Hierarchy, IPv6Hierarchy, PathHierarchy
from dphhh.sketches.specs import parse_hierarchy

__all__ = [
    "NEIGHBOURS",
    "DEFAULT_MAX_CHILDREN",
    "InfTDAParams",
    "InfTDACalibration",
    "PathDomain",
    "InfTDAResult",
    "noisy_counts",
    "inftda",
    "inftda_from_counts",
    "inftda_level_memory_bytes",
    "inftda_needs_domain",
]

_OWNER = "InfTDA"
NEIGHBOURS = ("add_remove", "substitution")
#: Largest number of children per parent enumerated by default (a 16-bit prefix step).
DEFAULT_MAX_CHILDREN = 2**16
#: σ² is rounded up to a multiple of 1/_SIGMA2_GRID (keeps the exact sampler's integers small).
_SIGMA2_GRID = 1024

RngLike = RandomSource | np.random.Generator | int | None


# --------------------------------------------------------------------------------------------
# Parameters and calibration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InfTDACalibration:
    """The noise of one InfTDA run over a hierarchy with ``h`` levels.

    * ``delta2``: L2 sensitivity of the root and of each level's count vector;
    * ``root_rho`` / ``root_sigma2``: the root's share (``None`` under substitution: exact root);
    * ``level_rho`` / ``level_sigma2``: each level's share and discrete Gaussian ``σ²``
      (``σ² >= Δ₂² / (2ρ)``, exact :class:`~fractions.Fraction`).
    """

    h: int
    delta2: float
    root_rho: float | None
    root_sigma2: Fraction | None
    level_rho: float
    level_sigma2: Fraction


def _sigma2_for(delta2_squared: Fraction, rho: Fraction) -> Fraction:
    """``Δ₂² / (2ρ)`` rounded up to the 1/1024 grid (exact arithmetic)."""
    exact = delta2_squared / (2 * rho)
    return Fraction(math.ceil(exact * _SIGMA2_GRID), _SIGMA2_GRID)


@dataclass(frozen=True)
class InfTDAParams:
    """Privacy parameters of InfTDA.

    Give either ``epsilon`` and ``delta`` (converted to the largest ρ that implies them,
    :func:`~dphhh.privacy.offline.zcdp.rho_from_epsilon_delta`), or ``rho`` (optionally with ``delta``,
    to also state the implied ε).

    * ``neighbours``: ``"add_remove"`` (default; one privacy unit added or removed, the root count
      is noised) or ``"substitution"`` (one unit's elements replaced; ``n`` is public and exact).
    * ``contribution``: m, the most elements one privacy unit contributes (Δ₂ = m per level under
      add/remove, m·√2 under substitution). The caller guarantees it.
    * ``root_share``: share of ρ for the root count under add/remove; default ``None`` means
      ``1/(h + 1)`` (the root costs the same as a level). Must stay ``None`` under substitution.
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    neighbours: str = "add_remove"
    contribution: int = 1
    root_share: float | None = None

    def __post_init__(self) -> None:
        if self.rho is None:
            if self.epsilon is None or self.delta is None:
                raise UsageError(f"{_OWNER}: give epsilon and delta, or rho")
            object.__setattr__(self, "epsilon", check_positive(_OWNER, "epsilon", self.epsilon))
            object.__setattr__(self, "delta", check_open_unit(_OWNER, "delta", self.delta))
        else:
            if self.epsilon is not None:
                raise UsageError(f"{_OWNER}: give either rho or epsilon (with delta), not both")
            object.__setattr__(self, "rho", check_positive(_OWNER, "rho", self.rho))
            if self.delta is not None:
                object.__setattr__(self, "delta", check_open_unit(_OWNER, "delta", self.delta))
        if self.neighbours not in NEIGHBOURS:
            raise UsageError(f"{_OWNER}: neighbours must be one of {', '.join(NEIGHBOURS)}, got {self.neighbours!r}")
        check_int(_OWNER, "contribution", self.contribution, 1)
        if self.root_share is not None:
            if self.neighbours == "substitution":
                raise UsageError(
                    f"{_OWNER}: root_share must be None under substitution neighbours "
                    "(the root count is public and released exactly)"
                )
            object.__setattr__(self, "root_share", check_open_unit(_OWNER, "root_share", self.root_share))

    @property
    def total_rho(self) -> float:
        """The ρ of the whole release (given, or derived from (ε, δ))."""
        if self.rho is not None:
            return self.rho
        assert self.epsilon is not None and self.delta is not None
        return rho_from_epsilon_delta(self.epsilon, self.delta)

    @property
    def implied_epsilon(self) -> float | None:
        """ε of the implied (ε, δ)-DP guarantee, or ``None`` when no δ was given."""
        if self.delta is None:
            return None
        return epsilon_from_rho(self.total_rho, self.delta)

    def calibration(self, h: int) -> InfTDACalibration:
        """The noise for a hierarchy with ``h`` levels (see :class:`InfTDACalibration`)."""
        check_int(_OWNER, "h", h, 1)
        rho = Fraction(self.total_rho)
        m = self.contribution
        if self.neighbours == "substitution":
            delta2_sq = Fraction(2 * m * m)
            level_rho = rho / h
            root_rho = None
            root_sigma2 = None
        else:
            delta2_sq = Fraction(m * m)
            share = Fraction(1, h + 1) if self.root_share is None else Fraction(self.root_share)
            root_rho = rho * share
            level_rho = rho * (1 - share) / h
            root_sigma2 = _sigma2_for(delta2_sq, root_rho)
        return InfTDACalibration(
            h=h,
            delta2=math.sqrt(delta2_sq),
            root_rho=None if root_rho is None else float(root_rho),
            root_sigma2=root_sigma2,
            level_rho=float(level_rho),
            level_sigma2=_sigma2_for(delta2_sq, level_rho),
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (for reports)."""
        return asdict(self)


# --------------------------------------------------------------------------------------------
# Public child domains
# --------------------------------------------------------------------------------------------


class PathDomain:
    """The public domain of a path hierarchy: which children every prefix may have.

    Build it from public knowledge only, never from the data being released:

    * :meth:`from_paths` — every possible full path (e.g. a public catalogue of locations);
    * :meth:`from_components` — per level, the allowed component names (every parent has the same
      candidate children).
    """

    def __init__(
        self, depth: int, children: Mapping[str, tuple[str, ...]] | None, components: tuple[tuple[str, ...], ...] | None
    ) -> None:
        self.depth = depth
        self._children = children
        self._components = components
        self._component_sets = None if components is None else [set(c) for c in components]

    @classmethod
    def from_paths(cls, paths: Iterable[str]) -> PathDomain:
        """Domain of all the given full paths (all must have the same number of components)."""
        unique = sorted(set(paths))
        if not unique or not all(isinstance(p, str) for p in unique):
            raise UsageError("PathDomain: paths must be a non-empty collection of strings")
        depth = unique[0].count("/") + 1
        if any(p.count("/") + 1 != depth for p in unique):
            raise UsageError("PathDomain: every path must have the same number of components")
        children: dict[str, set[str]] = {}
        for path in unique:
            parts = path.split("/")
            for level in range(1, depth + 1):
                children.setdefault("/".join(parts[: level - 1]), set()).add("/".join(parts[:level]))
        return cls(depth, {k: tuple(sorted(v)) for k, v in children.items()}, None)

    @classmethod
    def from_components(cls, components: Sequence[Sequence[str]]) -> PathDomain:
        """Domain where level ℓ's children of any prefix are ``prefix/name`` for ``components[ℓ-1]``."""
        levels = tuple(tuple(dict.fromkeys(level)) for level in components)
        if not levels or any(not level for level in levels):
            raise UsageError("PathDomain: components must give a non-empty list of names per level")
        for level in levels:
            for name in level:
                if not isinstance(name, str) or not name or "/" in name:
                    raise UsageError("PathDomain: component names must be non-empty strings without '/'")
        return cls(len(levels), None, levels)

    def children(self, parent: str, level: int) -> tuple[str, ...]:
        """Labels of the level-``level`` children of the level-``level − 1`` prefix ``parent`` ("" = root)."""
        if self._components is not None:
            prefix = parent + "/" if parent else ""
            return tuple(prefix + name for name in self._components[level - 1])
        assert self._children is not None
        return self._children.get(parent, ())

    def max_children(self, level: int) -> int:
        """The largest number of children a level-``level − 1`` prefix has in this domain."""
        if self._components is not None:
            return len(self._components[level - 1])
        assert self._children is not None
        return max(
            (len(v) for k, v in self._children.items() if (k.count("/") + 1 if k else 0) == level - 1), default=0
        )

    def contains(self, path: str) -> bool:
        """Whether a full path belongs to the domain."""
        parts = path.split("/")
        if len(parts) != self.depth:
            return False
        if self._component_sets is not None:
            return all(part in allowed for part, allowed in zip(parts, self._component_sets))
        assert self._children is not None
        return path in self._children.get("/".join(parts[:-1]), ())

    def __repr__(self) -> str:
        kind = "components" if self._components is not None else "paths"
        return f"PathDomain(depth={self.depth}, from {kind})"


class _IPv4Children:
    """All ``2^(len_l − len_{l−1})`` children of an IPv4 prefix, as masked-address keys."""

    def __init__(self, hierarchy: IPv4Hierarchy, max_children: int) -> None:
        self.hierarchy = hierarchy
        self.lengths = (0,) + tuple(hierarchy.prefix_lengths)
        for level in range(1, len(self.lengths)):
            step = self.lengths[level] - self.lengths[level - 1]
            if 2**step > max_children:
                raise UsageError(
                    f"{_OWNER}: the step from /{self.lengths[level - 1]} to /{self.lengths[level]} "
                    f"gives 2**{step} children per prefix, more than max_children={max_children}; "
                    "use a hierarchy with smaller steps (e.g. ipv4:8,16,24,32) or raise max_children"
                )

    def children(self, parent_key: int, level: int) -> np.ndarray:
        step = self.lengths[level] - self.lengths[level - 1]
        shift = 32 - self.lengths[level]
        return int(parent_key) + (np.arange(2**step, dtype=np.int64) << shift)

    def count(self, parent_key: int, level: int) -> int:
        """Size of :meth:`children` (every IPv4 prefix has ``2^step`` children)."""
        return 2 ** (self.lengths[level] - self.lengths[level - 1])

    def widest(self, level: int) -> int:
        """The most children a level-``level − 1`` prefix has."""
        return 2 ** (self.lengths[level] - self.lengths[level - 1])

    def check_values(self, values: Any) -> None:
        return None


class _PathChildren:
    """Children of a path prefix from a public :class:`PathDomain`, as hierarchy keys."""

    def __init__(self, hierarchy: PathHierarchy, domain: PathDomain | None, max_children: int) -> None:
        if domain is None:
            raise UsageError(
                f"{_OWNER}: path hierarchies need a public child domain: pass "
                "domain=PathDomain.from_paths(all_possible_paths) or PathDomain.from_components(...) "
                "(the observed children cannot be used: that would leak)"
            )
        if not isinstance(domain, PathDomain):
            raise UsageError(f"{_OWNER}: domain must be a PathDomain, got {type(domain).__name__}")
        if domain.depth != hierarchy.h:
            raise UsageError(
                f"{_OWNER}: the domain has depth {domain.depth} but the hierarchy has {hierarchy.h} levels"
            )
        for level in range(1, hierarchy.h + 1):
            widest = domain.max_children(level)
            if widest > max_children:
                raise UsageError(
                    f"{_OWNER}: the domain gives up to {widest} children per prefix at level {level}, "
                    f"more than max_children={max_children}; raise max_children"
                )
        self.hierarchy = hierarchy
        self.domain = domain

    def key_of_labels(self, labels: Sequence[str], level: int) -> np.ndarray:
        """Hierarchy keys of level-``level`` prefix labels (padded with empty components)."""
        if not labels:
            return np.empty(0, dtype=np.int64)
        pad = "/" * (self.hierarchy.h - level)
        return self.hierarchy.keys([label + pad for label in labels], level)

    def children(self, parent_key: int, level: int) -> np.ndarray:
        parent = "" if level == 1 else self.hierarchy.label(parent_key, level - 1)
        return self.key_of_labels(list(self.domain.children(parent, level)), level)

    def count(self, parent_key: int, level: int) -> int:
        """Size of :meth:`children`."""
        parent = "" if level == 1 else self.hierarchy.label(parent_key, level - 1)
        return len(self.domain.children(parent, level))

    def widest(self, level: int) -> int:
        """The most children a level-``level − 1`` prefix has in the domain."""
        return self.domain.max_children(level)

    def check_values(self, values: Sequence[str]) -> None:
        for path in set(values):
            if not isinstance(path, str) or not self.domain.contains(path):
                raise UsageError(
                    f"{_OWNER}: some values are not in the public domain; add them to the domain "
                    "or filter them out before the release"
                )


def inftda_needs_domain(hierarchy: Hierarchy, domain_given: bool) -> bool:
    """Whether InfTDA releases ``hierarchy`` with a public child domain (paths: the possible paths
    must be given, the observed ones would leak) or enumerates every child itself (IPv4; a domain
    is refused); ``UsageError`` for a hierarchy it does not release (IPv6: child domains too wide
    to enumerate) or a domain given where none is used. The snapshot CLI calls it before any data is
    read; :func:`inftda` applies the same rules (a path hierarchy's missing domain in its own words)."""
    if isinstance(hierarchy, IPv4Hierarchy):
        if domain_given:
            raise UsageError.of_parameter(
                _OWNER, "domain", "is only used with path hierarchies (IPv4 children are enumerated)"
            )
        return False
    if isinstance(hierarchy, PathHierarchy):
        if not domain_given:
            raise UsageError.of_parameter(
                _OWNER,
                "domain",
                "must be given for a path hierarchy: it needs the public list of possible paths "
                "(the paths seen in the data cannot be used as the domain)",
            )
        return True
    if isinstance(hierarchy, IPv6Hierarchy):
        why = "IPv6 hierarchies are not supported (their public child domains are too wide to enumerate)"
    else:
        why = f"{hierarchy.kind} hierarchies are not supported"
    detail = f"{why}; use an ipv4 or path hierarchy"
    raise UsageError(f"{_OWNER}: {detail}", owner=_OWNER, parameter="hierarchy", detail=f": {detail}")


def _child_domain(hierarchy: Hierarchy, domain: PathDomain | None, max_children: int):
    check_int(_OWNER, "max_children", max_children, 2)
    if isinstance(hierarchy, PathHierarchy):
        return _PathChildren(hierarchy, domain, max_children)
    inftda_needs_domain(hierarchy, domain is not None)  # raises for any kind but IPv4
    assert isinstance(hierarchy, IPv4Hierarchy)
    return _IPv4Children(hierarchy, max_children)


# --------------------------------------------------------------------------------------------
# The noise core (audited in tests/audit/test_inftda_audit.py)
# --------------------------------------------------------------------------------------------


#: Bytes per noised child count of one level (keys, lookups, the noise, the noisy vector;
#: IntOPT's work on the widest parent), and per sample of one round of the exact sampler's working
#: arrays (privacy.noise.DG_ROUND samples at most) — see :func:`inftda_level_memory_bytes`.
_DRAW_BYTES = 40
_ROUND_BYTES = 270


def inftda_level_memory_bytes(draws: int, widest: int) -> int:
    """Predicted working memory (bytes) of one TopDown level that noises ``draws`` child counts,
    ``widest`` of them under one parent: ``40·(draws + widest) + 270·min(draws, DG_ROUND)`` (measured
    with tracemalloc between 0.9 and 1.3 of the peak on IPv4 levels of 768 … 1.4·10⁶ draws).

    Both numbers are public before the level is noised — ``draws`` is the number of kept parents
    of the released previous level times their public child domains (what ``progress`` of
    :func:`inftda` receives), ``widest`` the widest public child domain of the level — so a caller
    may refuse a level that cannot fit before it is allocated. Not included: the kept prefixes of
    earlier levels (a dict entry and a label, about 200 bytes each) and the per-record arrays.
    """
    check_int(_OWNER, "draws", draws, 0)
    check_int(_OWNER, "widest", widest, 0)
    return _DRAW_BYTES * (int(draws) + int(widest)) + _ROUND_BYTES * min(int(draws), DG_ROUND)


def noisy_counts(exact: np.ndarray, sigma2: Fraction, rng: RngLike = None) -> np.ndarray:
    """``exact + DG(σ²)`` elementwise: the Gaussian mechanism used for the root and every level.

    ``exact`` is an integer array; the noise is the exact discrete Gaussian
    (:func:`dphhh.privacy.noise.discrete_gaussian`), drawn in the array's (C) order.
    """
    arr = np.asarray(exact, dtype=np.int64)
    return arr + discrete_gaussian(sigma2, arr.shape, as_source(rng))


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class InfTDAResult:
    """The released tree: integer, non-negative, consistent counts per level.

    * ``root``: the released total (level 0); ``levels[ℓ − 1]``: ``{key: count}`` of the kept
      (non-zero) prefixes of level ℓ, with ``labels[ℓ − 1]`` their prefix labels. Every kept
      parent's count equals the sum of its kept children's counts.
    * ``noised``: number of discrete Gaussian draws per level ``0..h`` (public: a function of the
      released tree and the public domain); used by :meth:`error_bound`.
    * ``seeded``: ``True`` when a reproducible (non-private) random source was used.
    """

    hierarchy: str
    params: InfTDAParams
    calibration: InfTDACalibration
    root_label: str
    root: int
    levels: tuple[dict[int, int], ...]
    labels: tuple[dict[int, str], ...]
    noised: tuple[int, ...]
    seeded: bool

    @property
    def h(self) -> int:
        """Number of levels below the root."""
        return len(self.levels)

    def level_counts(self, level: int) -> dict[str, int]:
        """``{prefix label: count}`` of the kept prefixes at ``level`` (0 = root)."""
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= self.h:
            raise UsageError(f"{_OWNER}: level must be in 0..{self.h}, got {level!r}")
        if level == 0:
            return {self.root_label: self.root}
        labels = self.labels[level - 1]
        by_address = self.hierarchy.startswith("ipv4")  # address order for IPv4, label order for paths
        items = sorted(self.levels[level - 1].items(), key=lambda kc: kc[0] if by_address else labels[kc[0]])
        return {labels[k]: c for k, c in items}

    def count(self, prefix: str) -> int:
        """The released count of a prefix label (``0`` for a valid prefix that was not kept)."""
        if prefix == self.root_label:
            return self.root
        for level in range(1, self.h + 1):
            for key, label in self.labels[level - 1].items():
                if label == prefix:
                    return self.levels[level - 1][key]
        self._check_prefix(prefix)
        return 0

    def _check_prefix(self, prefix: str) -> None:
        hierarchy = parse_hierarchy(self.hierarchy)
        ok = False
        if isinstance(prefix, str) and isinstance(hierarchy, IPv4Hierarchy):
            try:
                net = ipaddress.IPv4Network(prefix, strict=True)
                ok = net.prefixlen in hierarchy.prefix_lengths
            except ValueError:
                ok = False
        elif isinstance(prefix, str) and isinstance(hierarchy, PathHierarchy):
            ok = 1 <= prefix.count("/") + 1 <= hierarchy.h and "" not in prefix.split("/")
        if not ok:
            raise UsageError(f"{_OWNER}: {prefix!r} is not a prefix label of the hierarchy {self.hierarchy}")

    def error_bound(self, beta: float) -> tuple[int, ...]:
        """Per level ``0..h``, a bound ``E_ℓ`` on ``max_u |released(u) − true(u)|`` over *all*
        prefixes ``u`` of level ℓ (kept or not), holding jointly with probability ``>= 1 − β``
        (the mechanism of docs/ALGORITHMS.md §7: discrete Gaussian ``σ²`` per level, IntOPT).

        Derivation. Split β equally over the ``L`` noised parts (the root under add/remove, and the
        ``h`` levels). The discrete Gaussian ``DG(σ²)`` is σ-sub-Gaussian (Canonne–Kamath–Steinke
        2020), so ``P(|Z| > B) <= 2·exp(−B²/(2σ²))``; with ``N_ℓ`` draws at level ℓ (``noised``)
        and ``B_ℓ = ⌊σ_ℓ·√(2 ln(2 N_ℓ L / β))⌋`` a union bound gives ``P(some |Z| > B_ℓ) <= β/L``
        (conditionally on the earlier levels, which fix ``N_ℓ``; the noise is integer, hence the
        floor). On the event that no draw exceeds its ``B``:

        * root: ``E_0 = B_0`` (clamping at 0 cannot increase the error; ``E_0 = 0`` under
          substitution, where n is exact);
        * kept parent with released ``c``, ``|c − q(u)| <= E_{ℓ−1}``, children's true vector ``x``
          (``x >= 0``, ``Σx = q(u)``): moving ``|c − q(u)|`` units of ``x`` gives a feasible
          ``y'`` (``y' >= 0``, ``Σy' = c``) with ``‖y' − x‖∞ <= E_{ℓ−1}``, so IntOPT's optimum
          ``y`` has ``‖y − x̃‖∞ <= ‖y' − x̃‖∞ <= E_{ℓ−1} + B_ℓ`` and
          ``‖y − x‖∞ <= E_{ℓ−1} + 2 B_ℓ``;
        * a child of a parent released as 0 is released as 0 and its true count is at most its
          parent's, itself at most ``E_{ℓ−1}``.

        Hence ``E_ℓ = E_{ℓ−1} + 2 B_ℓ``, i.e. ``E_ℓ = B_0 + 2·Σ_{j<=ℓ} B_j`` with
        ``B_j = ⌊σ_j·√(2 ln(2 N_j L / β))⌋`` (``σ_0² = root_sigma2``, ``σ_j² = level_sigma2``, the
        union bound running over the ``N_j`` noised counts of level j, a superset of its released
        ones). Returns the tuple ``(E_0, …, E_h)`` of ints.
        """
        beta_f = check_open_unit(_OWNER, "beta", beta)
        cal = self.calibration
        parts = self.h + (1 if cal.root_sigma2 is not None else 0)
        share = beta_f / parts

        def bound(sigma2: Fraction | None, draws: int) -> int:
            if sigma2 is None or draws == 0:
                return 0
            return math.floor(math.sqrt(float(sigma2)) * math.sqrt(2.0 * math.log(2.0 * draws / share)))

        errors = [bound(cal.root_sigma2, self.noised[0])]
        for level in range(1, self.h + 1):
            errors.append(errors[-1] + 2 * bound(cal.level_sigma2, self.noised[level]))
        return tuple(errors)

    def guarantee(self) -> dict[str, Any]:
        """The privacy guarantee: ρ, the implied (ε, δ) (if δ was given), the relation, a sentence."""
        p = self.params
        rho = p.total_rho
        eps = p.implied_epsilon
        relation = (
            "adding or removing one privacy unit"
            if p.neighbours == "add_remove"
            else "substituting one privacy unit (the total count is public and exact)"
        )
        text = f"{rho:.6g}-zCDP with respect to {relation} contributing at most {p.contribution} element(s)"
        if eps is not None:
            text += f"; implies ({eps:.6g}, {p.delta:.3g})-DP"
        if self.seeded:
            text += ". NOT PRIVATE: produced with a seeded, reproducible random source"
        return {
            "rho": rho,
            "epsilon": eps,
            "delta": p.delta,
            "neighbours": p.neighbours,
            "contribution": p.contribution,
            "text": text,
        }

    def to_dict(self, beta: float | None = None) -> dict[str, Any]:
        """A JSON-serialisable report: algorithm, hierarchy, params, guarantee, levels 0..h.

        With ``beta``, every level also carries ``error_bound`` (:meth:`error_bound`: with
        probability >= 1 − β, jointly over all levels, no prefix of the level — kept or not — has
        ``|released − true|`` above it) and the report an ``error_bounds`` entry saying so."""
        cal = self.calibration
        levels: list[dict[str, Any]] = [{"level": 0, "counts": [{"prefix": self.root_label, "count": int(self.root)}]}]
        for level in range(1, self.h + 1):
            counts = self.level_counts(level)
            levels.append({"level": level, "counts": [{"prefix": k, "count": int(v)} for k, v in counts.items()]})
        extra: dict[str, Any] = {}
        if beta is not None:
            for entry, bound in zip(levels, self.error_bound(beta)):
                entry["error_bound"] = int(bound)
            extra["error_bounds"] = {
                "beta": float(beta),
                "text": (
                    f"with probability >= 1 - beta (beta = {beta:g}), jointly over all levels, every prefix "
                    "of level l (listed or not; an unlisted prefix is released as 0) has |released - true| "
                    "<= error_bound of level l: E_0 = B_0, E_l = E_(l-1) + 2 B_l with "
                    "B_l = floor(sigma_l sqrt(2 ln(2 N_l L / beta))), N_l the counts noised at level l, "
                    "L the number of noised parts (docs/ALGORITHMS.md section 7)"
                ),
                "noised": list(self.noised),
            }
        return {
            "algorithm": "InfTDA",
            "hierarchy": self.hierarchy,
            "params": self.params.as_dict(),
            "guarantee": self.guarantee(),
            "noise": {
                "delta2": cal.delta2,
                "root_sigma2": None if cal.root_sigma2 is None else float(cal.root_sigma2),
                "level_sigma2": float(cal.level_sigma2),
                "root_rho": cal.root_rho,
                "level_rho": cal.level_rho,
            },
            "seeded": self.seeded,
            **extra,
            "levels": levels,
        }


# --------------------------------------------------------------------------------------------
# The algorithm
# --------------------------------------------------------------------------------------------


class _ExactLevel:
    """Exact counts of one level as sorted key/count arrays (never leaves this module)."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys = np.asarray(keys, dtype=np.int64)[order]
        self.counts = np.asarray(counts, dtype=np.int64)[order]

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        if self.keys.size == 0:
            return np.zeros(keys.shape, dtype=np.int64)
        idx = np.clip(np.searchsorted(self.keys, keys), 0, self.keys.size - 1)
        return np.where(self.keys[idx] == keys, self.counts[idx], 0)


def _as_hierarchy(hierarchy: Hierarchy | str) -> Hierarchy:
    if isinstance(hierarchy, str):
        return parse_hierarchy(hierarchy)
    if not isinstance(hierarchy, Hierarchy):
        raise UsageError(f"{_OWNER}: hierarchy must be a Hierarchy or a spec such as 'ipv4:8,16,24,32'")
    return hierarchy


def _check_params(params: InfTDAParams) -> None:
    if not isinstance(params, InfTDAParams):
        raise UsageError(f"{_OWNER}: params must be an InfTDAParams, got {type(params).__name__}")


def inftda(
    values: Any,
    hierarchy: Hierarchy | str,
    params: InfTDAParams,
    *,
    domain: PathDomain | None = None,
    rng: RngLike = None,
    max_children: int = DEFAULT_MAX_CHILDREN,
    progress: Callable[[int, int, int], None] | None = None,
) -> InfTDAResult:
    """Release integer, non-negative, consistent counts of every prefix of ``values``.

    Parameters:
        values: the elements (IPv4: uint32 addresses; path: ``/``-paths of ``h`` components).
        hierarchy: an :class:`~dphhh.sketches.hierarchy.IPv4Hierarchy` / ``PathHierarchy`` or its spec.
        params: :class:`InfTDAParams` (budget, neighbouring relation, contribution bound).
        domain: the public :class:`PathDomain` (required for path hierarchies, refused otherwise).
        rng: ``None`` (secure OS source, the production default), or a seed / numpy Generator /
            RandomSource (tests only: the output is then not private, and says so).
        max_children: the widest child domain enumerated per prefix (default 2**16).
        progress: called before each level's noise, and before its arrays are allocated, with
            (level, h, number of noisy counts to draw) — public quantities (they follow from the
            previous level's private output); it may raise to stop the release (e.g. a memory
            guard with :func:`inftda_level_memory_bytes`).

    Guarantee: ``params.total_rho``-zCDP, hence ``(ε, δ)``-DP with ``ε = ρ + 2√(ρ ln(1/δ))``, with
    respect to ``params.neighbours`` of one privacy unit with at most ``params.contribution``
    elements (see the module docstring). Values outside a path domain raise ``ValueError``
    (without counts).
    """
    _check_params(params)
    hier = _as_hierarchy(hierarchy)
    children = _child_domain(hier, domain, max_children)
    source = as_source(rng)
    if isinstance(hier, PathHierarchy):
        values = list(values)
    children.check_values(values)
    exact = []
    for level in range(1, hier.h + 1):
        keys = hier.keys(values, level)
        uniq, cnt = np.unique(keys, return_counts=True)
        exact.append(_ExactLevel(uniq, cnt))
    return _top_down(hier, children, exact, hier.count(values), params, source, progress)


def inftda_from_counts(
    level_counts: Sequence[Mapping[int | str, int]],
    hierarchy: Hierarchy | str,
    params: InfTDAParams,
    *,
    domain: PathDomain | None = None,
    rng: RngLike = None,
    max_children: int = DEFAULT_MAX_CHILDREN,
) -> InfTDAResult:
    """As :func:`inftda`, from exact per-level counts of one dataset.

    ``level_counts[ℓ − 1]`` maps each level-ℓ prefix (a hierarchy key or its label, e.g.
    ``"10.0.0.0/8"`` or ``"de/bavaria"``) to its exact count (integers >= 0). Every level must
    have the same total (the root count n). The guarantee is as for :func:`inftda`, with respect
    to the dataset these counts were computed from.
    """
    _check_params(params)
    hier = _as_hierarchy(hierarchy)
    children = _child_domain(hier, domain, max_children)
    source = as_source(rng)
    if len(level_counts) != hier.h:
        raise UsageError(
            f"{_OWNER}: level_counts must have one mapping per level (h={hier.h}), got {len(level_counts)}"
        )
    exact = []
    totals = set()
    for level, mapping in enumerate(level_counts, start=1):
        keys: list[int] = []
        counts: list[int] = []
        for key, count in mapping.items():
            if isinstance(count, (bool, np.bool_)) or not isinstance(count, numbers.Integral) or count < 0:
                raise UsageError(f"{_OWNER}: counts must be integers >= 0 (level {level})")
            keys.append(_key_of(hier, children, key, level))
            counts.append(int(count))
        key_arr = np.array(keys, dtype=np.int64)
        if np.unique(key_arr).size != key_arr.size:
            raise UsageError(f"{_OWNER}: a prefix appears twice at level {level}")
        exact.append(_ExactLevel(key_arr, np.array(counts, dtype=np.int64)))
        totals.add(sum(counts))
    if len(totals) != 1:
        raise UsageError(f"{_OWNER}: every level's counts must have the same total (one dataset)")
    return _top_down(hier, children, exact, totals.pop(), params, source)


def _key_of(hier: Hierarchy, children: Any, key: int | str, level: int) -> int:
    """Validated hierarchy key of a level-``level`` prefix given as a key or a label."""
    if isinstance(hier, IPv4Hierarchy):
        length = hier.prefix_lengths[level - 1]
        if isinstance(key, str):
            try:
                net = ipaddress.IPv4Network(key, strict=True)
            except ValueError:
                raise UsageError(f"{_OWNER}: {key!r} is not an IPv4 prefix") from None
            if net.prefixlen != length:
                raise UsageError(f"{_OWNER}: {key!r} is not a /{length} prefix (level {level})")
            return int(net.network_address)
        if (
            isinstance(key, bool)
            or not isinstance(key, numbers.Integral)
            or not 0 <= key < 2**32
            or int(key) & hier.mask(level) != int(key)
        ):
            raise UsageError(f"{_OWNER}: key {key!r} is not a masked /{length} address (level {level})")
        return int(key)
    assert isinstance(children, _PathChildren)
    if isinstance(key, str):
        parts = key.split("/")
        if len(parts) != level or key not in children.domain.children("/".join(parts[:-1]), level):
            raise UsageError(f"{_OWNER}: a label at level {level} is not in the public domain")
        return int(children.key_of_labels([key], level)[0])
    if isinstance(key, bool) or not isinstance(key, numbers.Integral):
        raise UsageError(f"{_OWNER}: path prefixes must be given as labels or hierarchy keys")
    try:
        label = hier.label(int(key), level)
    except KeyError:
        raise UsageError(f"{_OWNER}: unknown path key at level {level}; give labels instead") from None
    return _key_of(hier, children, label, level)


def _top_down(
    hier: Hierarchy,
    children: Any,
    exact: list[_ExactLevel],
    n: int,
    params: InfTDAParams,
    source: RandomSource,
    progress: Callable[[int, int, int], None] | None = None,
) -> InfTDAResult:
    """The TopDown loop; draws: root first, then per level the kept parents in ascending key order."""
    cal = params.calibration(hier.h)
    if cal.root_sigma2 is None:
        root = int(n)
        noised = [0]
    else:
        root = max(0, int(noisy_counts(np.array([n]), cal.root_sigma2, source)[0]))
        noised = [1]
    kept: dict[int, int] = {0: root} if root > 0 else {}
    levels: list[dict[int, int]] = []
    labels: list[dict[int, str]] = []
    for level in range(1, hier.h + 1):
        parents = sorted(kept.items())
        if progress is not None:  # before any of the level's arrays: the caller may refuse it
            progress(level, hier.h, sum(children.count(key, level) for key, _ in parents))
        child_keys = [children.children(key, level) for key, _ in parents]
        sizes = [c.size for c in child_keys]
        flat = np.concatenate(child_keys) if child_keys else np.empty(0, dtype=np.int64)
        noisy = noisy_counts(exact[level - 1].lookup(flat), cal.level_sigma2, source)
        released: dict[int, int] = {}
        start = 0
        for (_, parent_count), size in zip(parents, sizes):
            keys = flat[start : start + size]
            y = int_opt(noisy[start : start + size], parent_count)
            start += size
            nz = np.flatnonzero(y)
            released.update(zip(keys[nz].tolist(), y[nz].tolist()))
        noised.append(int(flat.size))
        levels.append(released)
        labels.append({key: hier.label(key, level) for key in released})
        kept = released
    return InfTDAResult(
        hierarchy=hier.spec(),
        params=params,
        calibration=cal,
        root_label=hier.label(0, 0),
        root=root,
        levels=tuple(levels),
        labels=tuple(labels),
        noised=tuple(noised),
        seeded=not source.secure,
    )
