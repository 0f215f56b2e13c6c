"""Accuracy of the private HHH release (docs/ALGORITHMS.md §3–§4) against the exact HHH (Definition 2.3.5).

What it measures
----------------
For every dataset and threshold τ, the Misra-Gries sketches are built **once** (they are
deterministic), the exact HHH set is computed once with :func:`dphhh.sketches.exact.exact_hhh`, and then
:func:`dphhh.privacy.window.release_window` is called ``--runs`` times (default 50) per setting with seeds
0 .. runs−1. Settings: ε ∈ {0.5, 1, 2, 4} × variant {fresh, reuse} × mode {conservative, point}.
The same seed is used for every setting of a run, so modes (which only differ in post-processing)
see identical noise. Other parameters: δ (default 1e-6), β (default 0.05), κ (default 1024), P = 1,
IPv4 levels /8, /16, /24, /32.

Datasets
    * the four bundled captures (``data/pcaps``), source IPv4
      addresses read with the project's :mod:`dphhh.connectors.pcap` reader;
    * ``geoip-zipf``: a synthetic stream (default 10^6 addresses) over the real allocated IPv4
      ranges of Debian's ``tor-geoipdb`` (``/usr/share/tor/geoip``); see :func:`geoip_zipf_stream`.

    * ``geoip-zipf flows, bytes``: the same addresses as flow records weighted by bytes — heavy-tailed
      (Zipf packets × 40..1500 bytes per packet) and clipped at ``--weight-cap`` (default 15,000) —
      released at the group-privacy calibration over W (docs/ALGORITHMS.md §2 "Weighted elements"); the exact
      reference is the byte-weighted HHH (``--no-flows`` leaves it out).

τ per dataset is a fraction of the stream length n (``--tau-fractions``, default 5 % and 1 %; for
the weighted scenario n is the total of the clipped bytes); the absolute τ is printed.

Metrics per setting (averages are means over runs)
    * precision, recall, F1 of the reported set S against the exact HHH set E, both as sets of
      (level, prefix) pairs, **root excluded** from both (the root is not a heavy-hitter finding;
      it is printed separately as whether the root was reported). Empty-set conventions: precision
      of an empty S is 1, recall against an empty E is 1 (so the flat control capture scores 1/1
      when nothing is reported).
    * coverage-violation rate (checked against β only where the report claims coverage, τ >= 2·α1;
      "void" where the report itself says coverage does not hold): fraction of runs in which some prefix p ∉ S (at any level 0..h,
      among the prefixes that occur in the data; a prefix that does not occur has residual 0)
      has exact residual ``F_{X,S}(p)`` > τ − α1, where ``F_{X,S}(p)`` counts the elements under
      p that are not under any reported descendant of p, and α1 is the report's
      ``guarantees.alpha1``. The conservative mode promises a rate ≤ β; point mode promises nothing
      (the rate is shown for comparison). Where τ ≤ α1 every unreported occurring prefix
      violates, so the promise cannot hold there; the ``τ/α1`` column shows the regime.
    * max err/α1: the maximum over runs and reported items (root included) of
      |estimate − truth| / α1(item), with α1(item) = (upper − lower)/2 from the report. "truth" is
      the exact **residual** ``F_{X,S}(p)`` w.r.t. the reported set: the estimate of Algorithm 4 is
      the item's released count minus what was subtracted for its reported descendants, i.e. an
      estimate of the residual mass, which is what Theorem 4.1.3 / Definition 2.3.6 bound in the
      conservative setting. Also printed: the same maximum over only the items without a reported
      descendant (where residual = count, so the two notions agree); the fraction of reported items
      whose residual error exceeds α1; and, against the unconditional count f(p) (all elements
      under p), the maximum of |count − f(p)|/α1 where ``count`` is the item's released noisy count
      (reports whose items have no ``count`` field fall back to ``estimate``), with the share of
      runs in which some item's interval [lower, upper] misses f(p) (promised ≤ β).

Two-dimensional HHH (docs/ALGORITHMS.md §11; ``--pairs``, default on, ``--no-pairs`` leaves it out)
    The same protocol over (source, destination) pairs with the byte × byte lattice
    ``ipv4:8,16,24,32 x ipv4:8,16,24,32`` (H = 24 sketched nodes, so the release is calibrated with
    h := 24): sketches built once, the exact 2-D HHH (:func:`dphhh.sketches.exact2d.exact_hhh_2d`, overlap
    semantics) once, then ``--runs`` releases (seeds 0 .. runs−1) per setting, ε ∈ {1, 2, 4}
    (``--pair-epsilons``) × variant, δ = ``--delta``, κ = ``--pair-counters`` (default ``--counters``,
    1024), P = 1, tight calibration; a pair hierarchy's release always extracts in **point mode** by
    inclusion–exclusion and claims no coverage, so no coverage rate is measured.
    τ is the **absolute, public** τ = 2 % of the exact n (``--pair-tau-fraction``), the same number
    for the exact reference and the release (not ``tau_share``, which would apply 2 % to the noisy ñ).
    Precision/recall/F1 compare sets of (lattice node, pair key), **root excluded on both sides** (its
    share of runs is printed as ``root``); the empty-set conventions are the 1-D ones. ``F1 min`` is
    the worst run; ``int-miss`` the share of runs in which some reported pair's [lower, upper] misses
    its exact count (promised <= β). Beside |E| the table prints how many exact HHHs there are at
    0.9τ and 1.1τ: where they differ, the data has pairs near the threshold that any estimate with an
    error of 10 % of τ can flip.

    Datasets:
      * ``planted``: a synthetic pair stream (``--pair-elements``, default 10^6 and 10^5) of heavy
        pairs planted at five lattice nodes (3–5 % of n each, :data:`PLANTED_PAIRS`: a /16 → /24, a
        host pair /32 → /32, a source /24 → any, any → a destination /16, a /8 → /16) over a
        heavy-tailed background (80 % of n: source and destination independent hierarchical Zipf
        addresses, exponent ``--pair-background-s`` per octet, so some background /8s are HHHs at
        the (1, 0) and (0, 1) nodes and more sit below τ); see :func:`planted_pair_stream`. The
        10^6-element stream at ε = 2 is issue 13's acceptance test (F1 >= 0.9, printed as met or not).
      * each bundled capture's (source, destination) pairs (:func:`dphhh.connectors.pcap.iter_capture_pairs`);
        every capture has one destination (the anonymised victim 10.10.10.10), so its HHHs are
        ``source prefix → 10.10.10.10/32`` pairs (each source prefix's mass sits, identically, at the
        four destination levels; the finest is the HHH). With n of 4·10^3 – 4·10^4, τ = 2 % of n
        (80 – 757) is at or below the per-key release threshold of most settings (h = 24 spreads ε
        over 24 sketches: about 1,036 at ε = 1 fresh down to 131 at ε = 4 reuse, κ = 1024), so an
        exact HHH is found only where its count clears that threshold, and ancestors of a selected
        pair can pass τ on the noise difference alone: these rows show what h = 24 costs on small
        windows, not the planted stream's regime (τ/α1 is printed per setting).

Run::

    .venv/bin/python benchmarks/accuracy.py            # full: 4 captures + 10^6 geoip stream, 50 runs
    .venv/bin/python benchmarks/accuracy.py --quick    # smoke: 1 capture, 10^5 stream, 5 runs
    .venv/bin/python benchmarks/accuracy.py --only-pairs   # the two-dimensional section alone

If ``/usr/share/tor/geoip`` is missing, install it with ``bash deploy/fetch-geoip.sh``.
Progress goes to stderr, the results table to stdout.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dphhh.privacy.params import HHHParams, PrivacyBudget  # noqa: E402
from dphhh.privacy.unit import PrivacyUnit  # noqa: E402
from dphhh.privacy.window import release_window  # noqa: E402
from dphhh.sketches.exact import exact_hhh  # noqa: E402
from dphhh.sketches.exact2d import exact_hhh_2d  # noqa: E402
from dphhh.sketches.hierarchy import IPv4Hierarchy  # noqa: E402
from dphhh.sketches.level_sketches import LevelSketches  # noqa: E402
from dphhh.sketches.pairs import ARROW, PairHierarchy, parse_pair_hierarchy  # noqa: E402
from dphhh.stream.paths import data_dir  # noqa: E402

PCAP_DIR = data_dir() / "pcaps"
CAPTURES = (
    "amp.TCP.reflection.SYNACK.pcap",
    "amp.UDP.isakmp.pcap",
    "amp.UDP.snmp.src161.pcapng",
    "pkt.TCP.synflood.spoofed.pcap",
)
GEOIP_FILE = Path("/usr/share/tor/geoip")
EPSILONS = (0.5, 1.0, 2.0, 4.0)
VARIANTS = ("fresh", "reuse")
MODES = ("conservative", "point")
CALIBRATIONS = ("tight", "paper")  # new default first, the paper's scales second (same streams, same seeds)
PAIR_SPEC = "ipv4:8,16,24,32 x ipv4:8,16,24,32"
PAIR_EPSILONS = (1.0, 2.0, 4.0)
#: Heavy pairs planted in the synthetic pair stream: (source prefix, destination prefix, share of n).
#: Inside a planted prefix the free bits are uniform, so each pair is heavy at its own node only.
PLANTED_PAIRS = (
    ("10.20.0.0/16", "198.51.100.0/24", 0.05),
    ("203.0.113.7/32", "192.0.2.55/32", 0.04),
    ("172.16.5.0/24", "0.0.0.0/0", 0.04),
    ("0.0.0.0/0", "100.64.0.0/16", 0.04),
    ("45.0.0.0/8", "8.8.0.0/16", 0.03),
)
# 2^31 - 1 is prime and larger than every range in the geoip file (the largest is ~5·10^7), so
# r -> (r·P + shift) mod L is a bijection on 0..L-1 for every range size L.
_SCATTER_PRIME = 2_147_483_647


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Datasets


def load_capture(path: Path) -> np.ndarray:
    """Source IPv4 addresses (uint32, capture order) of a pcap/pcapng file, via the project reader."""
    from dphhh.connectors.pcap import iter_capture_sources
    from dphhh.connectors.skips import SkipCounter

    skips = SkipCounter()
    chunks = list(iter_capture_sources(path, skips))
    values = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint32)
    if skips.total:
        log(f"  {path.name}: skipped {skips.as_dict()}")
    return values.astype(np.uint32, copy=False)


def read_geoip_ranges(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(start, size) of every range with a known country in a tor geoip file (``start,end,CC``)."""
    starts, ends = [], []
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            a, b, cc = line.split(",")
            if cc == "??":  # no country known for the range: leave it out
                continue
            starts.append(int(a))
            ends.append(int(b))
    start = np.array(starts, dtype=np.int64)
    size = np.array(ends, dtype=np.int64) - start + 1
    if (size <= 0).any() or (size >= _SCATTER_PRIME).any():
        raise ValueError(f"{path}: unexpected range sizes")
    return start, size


def geoip_zipf_stream(
    path: Path, n: int, *, seed: int, range_s: float, host_s: float, host_zipf_share: float
) -> np.ndarray:
    """A seeded stream of ``n`` addresses over real allocated IPv4 ranges.

    Generator:
      1. Ranges (every ``start,end,CC`` line with a known country) are put in a random order
         (seeded) and range of rank r gets weight ∝ 1/r^range_s (Zipf over ~385k ranges; with
         range_s = 1 the top range carries ~7 % of the stream).
      2. Each element picks a range by these weights. Inside a range of size L:
         * with probability 1 − host_zipf_share the address is uniform in the range (background
           traffic spread over the block);
         * otherwise it is a "popular host": rank r = (Zipf(host_s) − 1) mod L, placed at offset
           (r·P + shift) mod L with P = 2^31 − 1 and a random per-range shift, so a block's popular
           hosts are scattered through it rather than packed at its start.
    Heavy hitters therefore arise at several levels: whole popular ranges (/8../24, depending on
    the range size) and popular hosts (/32) in popular ranges.
    """
    start, size = read_geoip_ranges(path)
    rng = np.random.default_rng(seed)
    order = rng.permutation(start.size)
    weights = np.empty(start.size, dtype=np.float64)
    weights[order] = 1.0 / np.arange(1, start.size + 1, dtype=np.float64) ** range_s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    which = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), start.size - 1)
    L = size[which]
    offset = np.floor(rng.random(n) * L).astype(np.int64)
    hot = rng.random(n) < host_zipf_share
    shift = rng.integers(0, 2**62, size=start.size) % size
    ranks = (rng.zipf(host_s, int(hot.sum())).astype(np.int64) - 1) % L[hot]
    offset[hot] = (ranks * _SCATTER_PRIME + shift[which[hot]]) % L[hot]
    return (start[which] + offset).astype(np.uint32)


# ------------------------------------------------------------------------------------------------
# Exact residuals given a reported set


def flow_bytes(n: int, cap: int, seed: int) -> np.ndarray:
    """Bytes of ``n`` flow records, heavy-tailed (Zipf packets x 40..1500 bytes each), clipped at ``cap``."""
    rng = np.random.default_rng(seed)
    packets = np.minimum(rng.zipf(1.5, n), 100_000)
    return np.minimum(packets * rng.integers(40, 1501, n), cap).astype(np.int64)


class ResidualOracle:
    """Exact counts and residuals of prefixes of one dataset, on its unique values with counts.

    For a reported set S (pairs (level, key)), let D(x) be the deepest level at which x's prefix is
    in S (−1 if none; 0 if only the root). The residual of p at level ℓ w.r.t. S — elements under p
    not under any reported descendant of p — is the mass of the x under p with D(x) < ℓ when
    p ∉ S, and with D(x) = ℓ when p ∈ S (x's reported ancestors form a chain).
    """

    def __init__(self, hierarchy: IPv4Hierarchy, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        self.h = hierarchy.h
        uniq, inverse = np.unique(values, return_inverse=True)
        w = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.weights = np.bincount(inverse.reshape(-1), weights=w, minlength=uniq.size).astype(np.float64)
        self.n = int(values.shape[0]) if weights is None else int(np.asarray(weights).sum())
        self.level_keys: dict[int, np.ndarray] = {}
        self.inverse: dict[int, np.ndarray] = {}
        self.full: dict[int, np.ndarray] = {}
        for level in range(1, self.h + 1):
            keys, inv = np.unique(hierarchy.keys(uniq, level), return_inverse=True)
            self.level_keys[level] = keys
            self.inverse[level] = inv.reshape(-1)
            self.full[level] = np.bincount(self.inverse[level], weights=self.weights, minlength=keys.size)

    def locate(self, level: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Indices of ``keys`` among the level's keys and whether each occurs in the data."""
        table = self.level_keys[level]
        idx = np.searchsorted(table, keys)
        idx = np.minimum(idx, table.size - 1)
        return idx, table[idx] == keys

    def evaluate(self, reported: dict[int, np.ndarray]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], float]:
        """For reported keys per level (level 0: ``[0]`` or empty): their residuals and unconditional
        counts (aligned with the given keys), and the largest residual of an unreported prefix."""
        deepest = np.full(self.weights.size, 0 if reported.get(0, np.empty(0)).size else -1, dtype=np.int64)
        located = {}
        for level in range(1, self.h + 1):
            keys = reported.get(level, np.empty(0, dtype=np.int64))
            idx, present = self.locate(level, keys) if keys.size else (np.empty(0, np.int64), np.empty(0, bool))
            located[level] = (idx, present)
            member = np.zeros(self.level_keys[level].size, dtype=bool)
            member[idx[present]] = True
            deepest = np.where(member[self.inverse[level]], level, deepest)
        residuals: dict[int, np.ndarray] = {}
        counts: dict[int, np.ndarray] = {}
        worst_unreported = 0.0
        for level in range(1, self.h + 1):
            inv = self.inverse[level]
            idx, present = located[level]
            below = np.bincount(inv, weights=self.weights * (deepest < level), minlength=self.level_keys[level].size)
            if below.size:
                unreported = np.ones(below.size, dtype=bool)
                unreported[idx[present]] = False
                if unreported.any():
                    worst_unreported = max(worst_unreported, float(below[unreported].max()))
            if idx.size:
                at = np.bincount(inv, weights=self.weights * (deepest == level), minlength=self.level_keys[level].size)
                residuals[level] = np.where(present, at[idx], 0.0)
                counts[level] = np.where(present, self.full[level][idx], 0.0)
        if reported.get(0, np.empty(0)).size:
            residuals[0] = np.array([float(self.weights[deepest == 0].sum())])
            counts[0] = np.array([float(self.n)])
        elif self.n:
            worst_unreported = max(worst_unreported, float(self.weights[deepest < 0].sum()))
        return residuals, counts, worst_unreported


# ------------------------------------------------------------------------------------------------
# One setting


@dataclass
class SettingResult:
    precision: float
    recall: float
    f1: float
    mean_reported: float
    root_rate: float
    coverage_violation_rate: float
    max_err_residual: float
    max_err_count: float
    max_err_leaf: float
    interval_miss_rate: float
    frac_items_over_alpha1: float
    alpha1: float


def prefix_key(label: str) -> int:
    """Sketch key of an IPv4 report label ``a.b.c.d/len`` (the report does not carry the key)."""
    return int(ipaddress.IPv4Address(label.split("/", 1)[0]))


def run_setting(
    sketches: LevelSketches,
    oracle: ResidualOracle,
    exact: set[tuple[int, int]],
    params: HHHParams,
    runs: int,
    unit: PrivacyUnit | None = None,
    budget: PrivacyBudget | None = None,
) -> SettingResult:
    h = oracle.h
    precisions, recalls, f1s, sizes, roots = [], [], [], [], []
    violations = 0
    interval_misses = 0
    max_res = max_cnt = max_leaf = 0.0
    over = items_total = 0
    alpha1s = []
    for seed in range(runs):
        report = release_window(sketches, params, rng=seed, unit=unit, budget=budget)
        alpha1 = float(report["guarantees"]["alpha1"])
        alpha1s.append(alpha1)
        items = report["hhh"]
        by_level: dict[int, list[int]] = {level: [] for level in range(0, h + 1)}
        est: dict[int, list[float]] = {level: [] for level in range(0, h + 1)}
        cnt: dict[int, list[float]] = {level: [] for level in range(0, h + 1)}
        a1: dict[int, list[float]] = {level: [] for level in range(0, h + 1)}
        lowers: dict[int, list[float]] = {level: [] for level in range(0, h + 1)}
        uppers: dict[int, list[float]] = {level: [] for level in range(0, h + 1)}
        for it in items:
            level = int(it["level"])
            by_level[level].append(prefix_key(it["prefix"]) if level else 0)
            est[level].append(float(it.get("residual", it.get("estimate"))))
            # Newer reports carry the released unconditional noisy count ("count") besides the
            # residual-adjusted estimate; count is within α1 of the truth, and [lower, upper] (the
            # tighter interval of docs/calibration.md §4) holds it. Older ones had only estimate.
            cnt[level].append(float(it.get("count", it.get("residual", it.get("estimate")))))
            a1[level].append(alpha1)
            lowers[level].append(float(it["lower"]))
            uppers[level].append(float(it["upper"]))
        reported = {level: np.array(keys, dtype=np.int64) for level, keys in by_level.items()}
        found = {(level, key) for level in range(1, h + 1) for key in by_level[level]}
        tp = len(found & exact)
        p = tp / len(found) if found else 1.0
        r = tp / len(exact) if exact else 1.0
        precisions.append(p)
        recalls.append(r)
        f1s.append(2 * p * r / (p + r) if p + r else 0.0)
        sizes.append(len(found))
        roots.append(1.0 if by_level[0] else 0.0)

        residuals, counts, worst_unreported = oracle.evaluate(reported)
        if worst_unreported > params.tau - alpha1:
            violations += 1
        missed = False
        for level, res in residuals.items():
            e = np.array(est[level])
            scale = np.array(a1[level])
            err_res = np.abs(e - res) / scale
            err_cnt = np.abs(np.array(cnt[level]) - counts[level]) / scale
            truth = counts[level]
            missed |= bool(((truth < np.array(lowers[level]) - 0.05) | (truth > np.array(uppers[level]) + 0.05)).any())
            max_res = max(max_res, float(err_res.max()))
            max_cnt = max(max_cnt, float(err_cnt.max()))
            # Reported keys occur in the data, so an item has a reported descendant iff its
            # residual is below its count; items without one are where residual == count.
            leaf = res == counts[level]
            if leaf.any():
                max_leaf = max(max_leaf, float(err_res[leaf].max()))
            over += int((err_res > 1.0).sum())
            items_total += e.size
        interval_misses += missed
    return SettingResult(
        precision=float(np.mean(precisions)),
        recall=float(np.mean(recalls)),
        f1=float(np.mean(f1s)),
        mean_reported=float(np.mean(sizes)),
        root_rate=float(np.mean(roots)),
        coverage_violation_rate=violations / runs,
        max_err_residual=max_res,
        max_err_count=max_cnt,
        max_err_leaf=max_leaf,
        interval_miss_rate=interval_misses / runs,
        frac_items_over_alpha1=over / items_total if items_total else 0.0,
        alpha1=float(np.mean(alpha1s)),
    )


# ------------------------------------------------------------------------------------------------
# Two-dimensional HHH


def load_capture_pairs(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(sources, destinations) (uint32, capture order) of a pcap/pcapng file, via the project reader."""
    from dphhh.connectors.pcap import iter_capture_pairs
    from dphhh.connectors.skips import SkipCounter

    skips = SkipCounter()
    chunks = list(iter_capture_pairs(path, skips))
    if skips.total:
        log(f"  {path.name}: skipped {skips.as_dict()}")
    if not chunks:
        return np.empty(0, dtype=np.uint32), np.empty(0, dtype=np.uint32)
    src = np.concatenate([c[0] for c in chunks]).astype(np.uint32, copy=False)
    dst = np.concatenate([c[1] for c in chunks]).astype(np.uint32, copy=False)
    return src, dst


def hierarchical_zipf_addresses(rng: np.random.Generator, n: int, s: float) -> np.ndarray:
    """``n`` IPv4 addresses whose four octets are truncated-Zipf ranks (exponent ``s`` over 256),
    each mapped through a fixed permutation shifted by a hash of the parent prefix, so different
    /8s have different popular /16s and so on (the generator of benchmarks/sketch_throughput.py)."""
    weights = 1.0 / np.arange(1, 257, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    perm = rng.permutation(256).astype(np.uint32)
    addr = np.zeros(n, dtype=np.uint32)
    for _ in range(4):
        rank = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), 255).astype(np.uint32)
        with np.errstate(over="ignore"):
            shift = ((addr * np.uint32(0x9E3779B1)) >> np.uint32(24)) & np.uint32(0xFF)
        addr = (addr << np.uint32(8)) | ((perm[rank] + shift) & np.uint32(0xFF))
    return addr


def _network(text: str) -> tuple[np.uint32, np.uint32]:
    """(network address, mask) of ``a.b.c.d/len`` as uint32."""
    net = ipaddress.IPv4Network(text)
    return np.uint32(int(net.network_address)), np.uint32(int(net.netmask))


def planted_pair_stream(n: int, *, seed: int, background_s: float) -> tuple[np.ndarray, np.ndarray]:
    """A seeded stream of ``n`` (source, destination) pairs with :data:`PLANTED_PAIRS` planted.

    Each planted pair (A, B, share) contributes round(share·n) elements whose source is uniform in
    prefix A and destination uniform in prefix B (a /0 side is uniform over all of IPv4, a /32 side
    is the host). The rest of the stream (80 % of n) is background: source and destination drawn
    independently by :func:`hierarchical_zipf_addresses` with exponent ``background_s``. The
    elements are shuffled (seeded), so heavy and background pairs interleave in the stream."""
    rng = np.random.default_rng(seed)
    srcs, dsts = [], []
    for first, second, share in PLANTED_PAIRS:
        m = int(round(share * n))
        (net_a, mask_a), (net_b, mask_b) = _network(first), _network(second)
        free_a = rng.integers(0, 2**32, m, dtype=np.uint64).astype(np.uint32) & ~mask_a
        free_b = rng.integers(0, 2**32, m, dtype=np.uint64).astype(np.uint32) & ~mask_b
        srcs.append(net_a | free_a)
        dsts.append(net_b | free_b)
    rest = n - sum(x.size for x in srcs)
    srcs.append(hierarchical_zipf_addresses(rng, rest, background_s))
    dsts.append(hierarchical_zipf_addresses(rng, rest, background_s))
    order = rng.permutation(n)
    return np.concatenate(srcs)[order], np.concatenate(dsts)[order]


class PairCounts:
    """Exact counts f(p) of every pair that occurs in a dataset, per lattice node."""

    def __init__(self, hierarchy: PairHierarchy, values: tuple[np.ndarray, np.ndarray]) -> None:
        self.keys: dict[int, np.ndarray] = {}
        self.counts: dict[int, np.ndarray] = {}
        for level in range(1, hierarchy.h + 1):
            self.keys[level], self.counts[level] = np.unique(hierarchy.keys(values, level), return_counts=True)

    def count(self, level: int, key: int) -> int:
        table = self.keys[level]
        i = int(np.searchsorted(table, key))
        return int(self.counts[level][i]) if i < table.size and table[i] == key else 0


def pair_item_key(hierarchy: PairHierarchy, item: dict) -> tuple[tuple[int, int], int]:
    """(lattice node, pair key) of a 2-D report item (the report carries the label ``a → b``)."""
    level = int(item["level"])
    first, second = item["prefix"].split(ARROW)
    ka, kb = (int(ipaddress.IPv4Network(side).network_address) for side in (first, second))
    key = hierarchy.encode(np.array([ka], dtype=np.int64), np.array([kb], dtype=np.int64), level)
    return hierarchy.node(level), int(key[0])


@dataclass
class PairSettingResult:
    precision: float
    recall: float
    f1: float
    f1_min: float
    mean_reported: float
    root_rate: float
    interval_miss_rate: float
    alpha1: float
    misses: dict[str, int]  # exact HHH label -> runs that missed it
    extras: dict[str, int]  # reported non-HHH label -> runs that reported it


def run_pair_setting(
    sketches: LevelSketches,
    truth: PairCounts,
    exact: dict[tuple[tuple[int, int], int], str],
    params: HHHParams,
    runs: int,
) -> PairSettingResult:
    hierarchy = sketches.hierarchy
    assert isinstance(hierarchy, PairHierarchy)
    precisions, recalls, f1s, sizes, roots, alpha1s = [], [], [], [], [], []
    misses: dict[str, int] = {}
    extras: dict[str, int] = {}
    interval_misses = 0
    for seed in range(runs):
        report = release_window(sketches, params, rng=seed)
        alpha1s.append(float(report["guarantees"]["alpha1"]))
        found: dict[tuple[tuple[int, int], int], str] = {}
        missed = False
        root = False
        for it in report["hhh"]:
            level = int(it["level"])
            if level == 0:
                root = True
                continue
            node_key = pair_item_key(hierarchy, it)
            found[node_key] = it["prefix"]
            f = truth.count(level, node_key[1])
            missed |= f < float(it["lower"]) - 0.05 or f > float(it["upper"]) + 0.05
        tp = len(found.keys() & exact.keys())
        p = tp / len(found) if found else 1.0
        r = tp / len(exact) if exact else 1.0
        precisions.append(p)
        recalls.append(r)
        f1s.append(2 * p * r / (p + r) if p + r else 0.0)
        sizes.append(len(found))
        roots.append(1.0 if root else 0.0)
        interval_misses += missed
        for node_key in exact.keys() - found.keys():
            misses[exact[node_key]] = misses.get(exact[node_key], 0) + 1
        for node_key in found.keys() - exact.keys():
            extras[found[node_key]] = extras.get(found[node_key], 0) + 1
    return PairSettingResult(
        precision=float(np.mean(precisions)),
        recall=float(np.mean(recalls)),
        f1=float(np.mean(f1s)),
        f1_min=float(np.min(f1s)),
        mean_reported=float(np.mean(sizes)),
        root_rate=float(np.mean(roots)),
        interval_miss_rate=interval_misses / runs,
        alpha1=float(np.mean(alpha1s)),
        misses=misses,
        extras=extras,
    )


def _top(counts: dict[str, int], k: int = 2) -> str:
    return ", ".join(f"{label} ({c})" for label, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:k])


def pairs_section(args: argparse.Namespace) -> list[str]:
    """The two-dimensional scenario: its table and notes, as printed lines."""
    hierarchy = parse_pair_hierarchy(PAIR_SPEC)
    kappa = args.pair_counters or args.counters
    datasets: list[tuple[str, tuple[np.ndarray, np.ndarray]]] = []
    for n_planted in args.pair_elements:
        log(f"2-D: generating a planted pair stream of {n_planted:,} pairs ...")
        values = planted_pair_stream(n_planted, seed=args.seed + 2, background_s=args.pair_background_s)
        datasets.append((f"planted {n_planted:.0e}".replace("e+0", "e"), values))
    for name in [c for c in args.captures.split(",") if c]:
        path = args.pcap_dir / name
        log(f"2-D: loading pairs of {path} ...")
        datasets.append((name, load_capture_pairs(path)))

    header = (
        f"{'dataset':<32} {'n':>9} {'tau':>7} {'eps':>4} {'variant':<7} {'|E|':>4} {'E.9t':>5} {'E1.1t':>5} "
        f"{'|S|':>6} {'root':>5} {'prec':>6} {'recall':>6} {'F1':>6} {'F1 min':>6} {'int-miss':>8} "
        f"{'alpha1':>8} {'tau/a1':>6}"
    )
    rows, notes, exact_lines = [], [], []
    acceptance: list[str] = []
    for name, values in datasets:
        n = int(values[0].shape[0])
        tau = max(1.0, round(args.pair_tau_fraction * n))
        distinct = np.unique((values[0].astype(np.uint64) << np.uint64(32)) | values[1]).size
        log(f"{name}: n={n:,}, distinct host pairs={distinct:,}; building sketches (H={hierarchy.h}, κ={kappa}) ...")
        sketches = LevelSketches(hierarchy, kappa, 1)
        sketches.update(values)
        truth = PairCounts(hierarchy, values)
        exact_all = exact_hhh_2d(hierarchy, values, tau)
        exact = {(e.node, e.key): e.prefix for e in exact_all if e.level > 0}
        near = [sum(1 for e in exact_hhh_2d(hierarchy, values, f * tau) if e.level > 0) for f in (0.9, 1.1)]
        shown = ", ".join(f"{e.prefix} {e.node} {e.residual:,}" for e in exact_all if e.level > 0)
        nodes: dict[tuple[int, int], int] = {}
        for e in exact_all:
            if e.level > 0:
                nodes[e.node] = nodes.get(e.node, 0) + 1
        exact_lines.append(
            f"#   {name}: n={n:,}, {distinct:,} distinct host pairs, tau={tau:g}: |E|={len(exact)} non-root"
            + (" + root" if any(e.level == 0 for e in exact_all) else "")
            + (
                f": {shown}"
                if len(exact) <= 12
                else " at nodes " + ", ".join(f"{k}: {v}" for k, v in sorted(nodes.items()))
            )
        )
        log(exact_lines[-1][1:])
        for eps in args.pair_epsilons:
            for variant in args.variants:
                params = HHHParams(
                    epsilon=eps,
                    delta=args.delta,
                    tau=tau,
                    beta=args.beta,
                    counters=kappa,
                    partitions=1,
                    variant=variant,
                    mode="point",
                    calibration="tight",
                )
                res = run_pair_setting(sketches, truth, exact, params, args.runs)
                line = (
                    f"{name:<32} {n:>9,} {tau:>7g} {eps:>4g} {variant:<7} {len(exact):>4} {near[0]:>5} {near[1]:>5} "
                    f"{res.mean_reported:>6.1f} {res.root_rate:>5.2f} {res.precision:>6.3f} {res.recall:>6.3f} "
                    f"{res.f1:>6.3f} {res.f1_min:>6.3f} {res.interval_miss_rate:>8.2f} {res.alpha1:>8.1f} "
                    f"{tau / res.alpha1:>6.2f}"
                )
                rows.append(line)
                log("    " + line)
                if res.misses or res.extras:
                    notes.append(
                        f"#   {name}, eps={eps:g}, {variant}: missed (runs) {_top(res.misses) or '-'}; "
                        f"reported non-HHH (runs) {_top(res.extras) or '-'}"
                    )
                if name.startswith("planted") and n == 1_000_000 and eps == 2.0:
                    verdict = "met" if res.f1 >= 0.9 else "NOT met"
                    acceptance.append(
                        f"# acceptance (issue 13): planted 10^6 pairs, eps=2, tau=2% of n, {variant}: mean F1 "
                        f"{res.f1:.3f} (min {res.f1_min:.3f} over {args.runs} runs) >= 0.9: {verdict}"
                    )
    out = [
        "",
        f"# two-dimensional HHH accuracy (docs/ALGORITHMS.md §11): {PAIR_SPEC} (H = {hierarchy.h} sketched nodes, "
        f"release calibrated with h = {hierarchy.h}), κ={kappa}, P=1, δ={args.delta:g}, β={args.beta:g}, tight "
        f"calibration, point mode (inclusion-exclusion); {args.runs} runs per setting (seeds 0..{args.runs - 1})",
        f"# tau = {args.pair_tau_fraction:g}·n (absolute, public; the same for the exact 2-D HHH); precision/recall/F1 "
        "over (node, pair key) sets, root excluded on both sides (root = share of runs reporting it); F1 min = worst "
        "run; |E| exact non-root HHHs, E.9t/E1.1t the same at 0.9·tau/1.1·tau; int-miss = share of runs where a "
        "reported pair's [lower, upper] misses its exact count",
        f"# planted: {', '.join(f'{a} → {b} {share:.0%}' for a, b, share in PLANTED_PAIRS)} of n, over a background "
        f"of independent hierarchical-Zipf sources and destinations (s={args.pair_background_s:g} per octet), "
        f"seed {args.seed + 2}",
        "# exact 2-D HHH (residuals):",
        *exact_lines,
        header,
        *rows,
        *acceptance,
    ]
    if notes:
        out += ["# most frequent differences from the exact set (label (runs out of " + f"{args.runs})):", *notes]
    return out


# ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=50, help="releases per setting (default 50)")
    ap.add_argument(
        "--tau-fractions",
        type=lambda t: [float(v) for v in t.split(",")],
        default=[0.05, 0.01],
        metavar="F1,F2",
        help="τ as fractions of each dataset's n (default 0.05,0.01)",
    )
    ap.add_argument(
        "--epsilons", type=lambda t: [float(v) for v in t.split(",")], default=list(EPSILONS), metavar="E1,E2"
    )
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--counters", "--kappa", dest="counters", type=int, default=1024, help="κ (default 1024)")
    ap.add_argument(
        "--captures", default=",".join(CAPTURES), help="comma-separated capture names under data/pcaps ('' for none)"
    )
    ap.add_argument("--pcap-dir", type=Path, default=PCAP_DIR)
    ap.add_argument("--geoip", type=Path, default=GEOIP_FILE, help=f"tor geoip file (default {GEOIP_FILE})")
    ap.add_argument("--zipf-elements", type=int, default=1_000_000, help="geoip-zipf stream length (default 10^6)")
    ap.add_argument("--range-s", type=float, default=1.0, help="Zipf exponent over ranges (default 1.0)")
    ap.add_argument("--host-s", type=float, default=1.2, help="Zipf exponent over hosts in a range (default 1.2, > 1)")
    ap.add_argument(
        "--host-zipf-share", type=float, default=0.5, help="share of in-range draws that are Zipf hosts (default 0.5)"
    )
    ap.add_argument("--seed", type=int, default=20240601, help="seed of the geoip-zipf stream")
    ap.add_argument(
        "--calibrations",
        type=lambda t: [v for v in t.split(",") if v],
        default=list(CALIBRATIONS),
        metavar="C1,C2",
        help="calibrations to compare (default tight,paper)",
    )
    ap.add_argument(
        "--variants",
        type=lambda t: [v for v in t.split(",") if v],
        default=list(VARIANTS),
        metavar="V1,V2",
        help="release variants (default fresh,reuse)",
    )
    ap.add_argument(
        "--flows",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the weighted scenario: the geoip-zipf stream as flow records weighted by bytes (default on)",
    )
    ap.add_argument("--weight-cap", type=int, default=15_000, help="W of the weighted scenario (default 15000 bytes)")
    ap.add_argument(
        "--pairs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the two-dimensional scenario: (source, destination) pairs, planted stream and captures (default on)",
    )
    ap.add_argument("--only-pairs", action="store_true", help="run the two-dimensional scenario only")
    ap.add_argument(
        "--pair-elements",
        type=lambda t: [int(float(v)) for v in t.split(",") if v],
        default=[1_000_000, 100_000],
        metavar="N1,N2",
        help="lengths of the planted pair streams (default 10^6,10^5)",
    )
    ap.add_argument(
        "--pair-epsilons",
        type=lambda t: [float(v) for v in t.split(",")],
        default=list(PAIR_EPSILONS),
        metavar="E1,E2",
        help="ε of the two-dimensional scenario (default 1,2,4)",
    )
    ap.add_argument("--pair-tau-fraction", type=float, default=0.02, help="2-D τ as a fraction of n (default 0.02)")
    ap.add_argument("--pair-counters", type=int, default=0, help="κ of the 2-D sketches (default: --counters)")
    ap.add_argument(
        "--pair-background-s",
        type=float,
        default=0.6,
        help="Zipf exponent per octet of the planted stream's background addresses (default 0.6)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 5 runs, first capture, 10^5-element streams (1-D and 2-D)"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.runs = min(args.runs, 5)
        args.captures = args.captures.split(",")[0] if args.captures else ""
        args.zipf_elements = min(args.zipf_elements, 100_000)
        args.pair_elements = sorted({min(m, 100_000) for m in args.pair_elements})
    if args.only_pairs:
        t_start = time.perf_counter()
        for line in pairs_section(args):
            print(line)
        print(f"# runtime {time.perf_counter() - t_start:.1f}s")
        return 0

    if not args.geoip.is_file():
        print(
            f"accuracy: {args.geoip} is missing: it comes from Debian's tor-geoipdb package.\n"
            f"Install it with:  bash deploy/fetch-geoip.sh   (from {REPO})",
            file=sys.stderr,
        )
        return 2

    t_start = time.perf_counter()
    hierarchy = IPv4Hierarchy()
    datasets: list[tuple[str, np.ndarray, np.ndarray | None]] = []
    for name in [c for c in args.captures.split(",") if c]:
        path = args.pcap_dir / name
        log(f"loading {path} ...")
        datasets.append((name, load_capture(path), None))
    log(f"generating geoip-zipf stream of {args.zipf_elements:,} addresses from {args.geoip} ...")
    zipf = geoip_zipf_stream(
        args.geoip,
        args.zipf_elements,
        seed=args.seed,
        range_s=args.range_s,
        host_s=args.host_s,
        host_zipf_share=args.host_zipf_share,
    )
    datasets.append(("geoip-zipf", zipf, None))
    if args.flows:
        datasets.append(
            (
                f"geoip-zipf flows, bytes (W={args.weight_cap})",
                zipf,
                flow_bytes(zipf.shape[0], args.weight_cap, seed=args.seed + 1),
            )
        )

    header = (
        f"{'dataset':<32} {'n':>9} {'tau':>7} {'eps':>4} {'calib':<5} {'variant':<7} {'mode':<12} {'|E|':>4} {'|S|':>7} "
        f"{'root':>5} {'prec':>6} {'recall':>6} {'F1':>6} {'cov-viol':>8} {'<=beta':>6} {'err/a1':>7} "
        f"{'err/a1(L)':>9} {'>a1':>6} {'cnt/a1':>6} {'int-miss':>8} {'alpha1':>8} {'tau/a1':>6}"
    )
    lines = []
    for name, values, weights in datasets:
        n = int(values.shape[0]) if weights is None else int(weights.sum())
        log(f"{name}: n={n:,}, distinct={np.unique(values).size:,}; building sketches (κ={args.counters}) ...")
        sketches = LevelSketches(hierarchy, args.counters, 1)
        sketches.update(values, weights)
        oracle = ResidualOracle(hierarchy, values, weights)
        unit = None if weights is None else PrivacyUnit(weight_cap=args.weight_cap, weight="bytes")
        for frac in args.tau_fractions:
            tau = max(1.0, round(frac * n))
            exact_all = exact_hhh(hierarchy, values, tau, weights)
            exact = {(e.level, e.key) for e in exact_all if e.level > 0}
            exact_root = any(e.level == 0 for e in exact_all)
            log(
                f"  τ={tau:g} ({frac:.0%} of n): exact HHH {len(exact)} non-root"
                + (" + root" if exact_root else "")
                + ": "
                + ", ".join(e.prefix for e in exact_all[:8])
                + (" ..." if len(exact_all) > 8 else "")
            )
            for eps in args.epsilons:
                for variant, calibration, mode in (
                    (v, c, m) for v in args.variants for c in args.calibrations for m in MODES
                ):
                    budget = PrivacyBudget(eps, args.delta)
                    event = budget if unit is None else unit.event_budget(budget)
                    params = HHHParams(
                        epsilon=event.epsilon,
                        delta=event.delta,
                        tau=tau,
                        beta=args.beta,
                        counters=args.counters,
                        partitions=1,
                        variant=variant,
                        mode=mode,
                        calibration=calibration,
                    )
                    res = run_setting(
                        sketches, oracle, exact, params, args.runs, unit=unit, budget=None if unit is None else budget
                    )
                    if mode != "conservative":
                        ok = "n/a"
                    elif tau < 2 * res.alpha1:  # the report itself says coverage is void (tau < 2*alpha1)
                        ok = "void"
                    else:
                        ok = "ok" if res.coverage_violation_rate <= args.beta else "FAIL"
                    line = (
                        f"{name:<32} {n:>9,} {tau:>7g} {eps:>4g} {calibration:<5} {variant:<7} {mode:<12} {len(exact):>4} "
                        f"{res.mean_reported:>7.1f} {res.root_rate:>5.2f} {res.precision:>6.3f} {res.recall:>6.3f} "
                        f"{res.f1:>6.3f} {res.coverage_violation_rate:>8.2f} {ok:>6} {res.max_err_residual:>7.2f} "
                        f"{res.max_err_leaf:>9.2f} {res.frac_items_over_alpha1:>6.3f} {res.max_err_count:>6.2f} "
                        f"{res.interval_miss_rate:>8.2f} {res.alpha1:>8.1f} "
                        f"{tau / res.alpha1:>6.2f}"
                    )
                    lines.append(line)
                    log("    " + line)

    print(
        f"# private HHH accuracy: IPv4 /8,/16,/24,/32, κ={args.counters}, P=1, δ={args.delta:g}, β={args.beta:g}, "
        f"{args.runs} runs per setting (seeds 0..{args.runs - 1}, shared across settings)"
    )
    print(
        f"# geoip-zipf: {args.zipf_elements:,} addresses, ranges Zipf s={args.range_s:g}, "
        f"hosts Zipf s={args.host_s:g} for {args.host_zipf_share:.0%} of in-range draws, seed {args.seed}"
    )
    print(
        "# precision/recall/F1: means over runs of (level, prefix) sets, root excluded; |E| exact non-root HHHs, "
        "|S| mean reported non-root, root = share of runs reporting the root"
    )
    print(
        "# cov-viol: share of runs with an unreported prefix whose exact residual given S > tau - alpha1 "
        "(promise for conservative: <= beta; point mode promises nothing)"
    )
    print(
        "# err/a1: max over runs and reported items of |estimate - exact residual given S| / alpha1(item); "
        "err/a1(L): same over items without a reported descendant; >a1: share of reported items with residual "
        "error > alpha1"
    )
    print(
        "# cnt/a1: max over runs and items of |count - exact unconditional count| / alpha1 (the report's "
        "'within alpha1' claim); int-miss: share of runs where some item's [lower, upper] = [count - B, count + B + "
        "n_upper/(kappa+1)] misses its unconditional count (promise: <= beta)"
    )
    print(
        "# calib: tight = the default (one scale per variant, exact-tail threshold, docs/calibration.md); "
        "paper = the DP-HHH paper's scales, on the same streams with the same seeds"
    )
    print(header)
    for line in lines:
        print(line)
    if args.pairs:
        for line in pairs_section(args):
            print(line)
    log(f"total runtime {time.perf_counter() - t_start:.1f}s")
    print(f"# runtime {time.perf_counter() - t_start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
