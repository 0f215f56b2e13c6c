"""Offline DP-HHH (docs/ALGORITHMS.md §6): Algorithm 1 (corrected) against the stability-histogram baseline.

What it measures
----------------
A synthetic Zipf-like snapshot of n IPv4 addresses (default n = 10^7; ``--quick``: 2·10^6) is
counted once per hierarchy — ``ipv4:8,16,24,32`` (h = 4) and ``ipv4:1,2,…,32`` (h = 32) — and the
exact HHH at each τ ∈ {10^3, 10^4, 10^5, 10^6} is computed (root omitted, Definition 2.3.5). Both
mechanisms then run ``--runs`` times per setting (seeds 0 .. runs−1) at final ε ∈ {1, 8}
(``--quick``: ε = 1), δ = 1e-6, β = 0.05. Algorithm 1 refuses τ below its guard 24Δ·ln(2h/(δβ))
(at ε = 1 ≈ 6.8·10^5 for h = 4 and ≈ 7.5·10^5 for h = 32; at ε = 8 about 13 times lower): such
cells print "refused (guard)".

Data: 200 000 distinct addresses whose four bytes are drawn from Zipf(1.2) ranks over a fixed
permutation of 0..255 (so popular prefixes exist at every level), and n elements drawn over those
addresses with Zipf(1.0) weights (numpy generator, seed 2026).

Metrics per mechanism (means over runs unless said otherwise)
    * FP / FN: reported prefixes not in the exact HHH at τ / exact HHH not reported;
    * count err mean / max: |reported count − exact conditioned count F_{X,S}(p)| over reported p,
      where S is the mechanism's own reported set (mean of per-run means; max over runs);
    * sel dev: the largest |noisy statistic p is selected on − F_{X,S}(p)| over the nodes at stake
      (F >= τ/2), max over runs — the realised width of the band where selection errors happen;
    * worst = max(sel dev, count err max): the realised counterpart of the planner's predicted
      worst error (:mod:`dphhh.privacy.offline.hhh_planner`); "measured better" is the mechanism with the
      smaller worst ("equal" if both are equal, e.g. no node at stake).
    Ratios are Algorithm 1 / baseline from the same run. The planner (given the public n) is
    printed beside the measured better one; the last column says whether they agree. The
    "agree" column says "equal" where both mechanisms measured the same worst error (e.g. no node
    at stake), which the planner's choice cannot contradict. The "counts only" column says which mechanism had the smaller mean count error (for information:
    Algorithm 1's release noise DLap(2/ε) beats the baseline's h/ε noise whenever it runs).

Run::

    .venv/bin/python benchmarks/hhh_offline.py            # full (n = 10^7, 5 runs, eps 1 and 8), < 1 min
    .venv/bin/python benchmarks/hhh_offline.py --quick    # n = 2·10^6, 2 runs, eps 1, a few seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np

from dphhh.privacy.offline.hhh_algorithm1 import Algorithm1Scales, LevelOutcome, algorithm1_levels
from dphhh.privacy.offline.hhh_baseline import BaselineScales, baseline_levels
from dphhh.privacy.offline.hhh_offline import HierarchyCounts, count_hierarchy, exact_selection
from dphhh.privacy.offline.hhh_planner import plan_offline_hhh
from dphhh.privacy.randomness import SeededRandomSource
from dphhh.sketches.specs import parse_hierarchy

DELTA, BETA = 1e-6, 0.05
HIERARCHIES = ["ipv4:8,16,24,32", "ipv4:" + ",".join(str(i) for i in range(1, 33))]
NAMES = {"algorithm1": "alg1", "stability_histogram": "baseline", "equal": "equal"}


def zipf_ipv4(n: int, seed: int = 2026, distinct: int = 200_000) -> np.ndarray:
    """n addresses: ``distinct`` hierarchical Zipf(1.2)-byte addresses drawn with Zipf(1.0) weights."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, 257, dtype=np.float64)
    cdf = np.cumsum(ranks**-1.2)
    cdf /= cdf[-1]
    address = np.zeros(distinct, dtype=np.uint64)
    for _ in range(4):
        perm = rng.permutation(256).astype(np.uint64)
        r = np.minimum(np.searchsorted(cdf, rng.random(distinct)), 255)
        address = (address << np.uint64(8)) | perm[r]
    address = np.unique(address.astype(np.uint32))
    weights = np.arange(1, address.size + 1, dtype=np.float64) ** -1.0
    weights = rng.permutation(weights)
    weights /= weights.sum()
    return address[rng.choice(address.size, size=n, p=weights)]


@dataclass
class RunMetrics:
    fp: int
    fn: int
    count_mean: float
    count_max: float
    sel_dev: float


def measure(tree: HierarchyCounts, outcome: list[LevelOutcome], exact: dict[int, np.ndarray], tau: float) -> RunMetrics:
    fp = fn = 0
    errs = []
    sel_dev = 0.0
    for o in outcome:
        sel, ex = o.selected[0], exact[o.level][0]
        fp += int((sel & ~ex).sum())
        fn += int((~sel & ex).sum())
        errs.append(np.abs(o.released[0, sel] - o.conditioned[0, sel]))
        stake = o.conditioned[0] >= tau / 2
        if stake.any():
            sel_dev = max(sel_dev, float(np.abs(o.statistic[0, stake] - o.conditioned[0, stake]).max()))
    e = np.concatenate(errs) if errs else np.zeros(0)
    return RunMetrics(fp, fn, float(e.mean()) if e.size else 0.0, float(e.max()) if e.size else 0.0, sel_dev)


@dataclass
class Summary:
    fp: float
    fn: float
    count_mean: float
    count_max: float
    sel_dev: float

    @property
    def worst(self) -> float:
        return max(self.sel_dev, self.count_max)


def summarise(runs: list[RunMetrics]) -> Summary:
    return Summary(
        float(np.mean([r.fp for r in runs])),
        float(np.mean([r.fn for r in runs])),
        float(np.mean([r.count_mean for r in runs])),
        max(r.count_max for r in runs),
        max(r.sel_dev for r in runs),
    )


def ratio(a: float, b: float) -> str:
    if b == 0:
        return "-" if a == 0 else "inf"
    return f"{a / b:.3g}"


def fmt(x: float) -> str:
    return f"{x:.3g}" if x < 1e4 else f"{x:.2e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 2*10^6, 2 runs (under a minute)")
    parser.add_argument("--n", type=int, default=None, help="snapshot size (default 10^7, quick 2*10^6)")
    parser.add_argument("--runs", type=int, default=None, help="runs per setting (default 5, quick 2)")
    args = parser.parse_args(argv)
    n = args.n or (2_000_000 if args.quick else 10_000_000)
    runs = args.runs or (2 if args.quick else 5)
    epsilons = [1.0] if args.quick else [1.0, 8.0]
    taus = [1e3, 1e4, 1e5, 1e6]
    t0 = time.perf_counter()
    values = zipf_ipv4(n)
    print(
        f"# data: n={n:,} Zipf-like IPv4 ({np.unique(values).size:,} distinct), eps={epsilons}, "
        f"delta={DELTA}, beta={BETA}, runs={runs}",
        flush=True,
    )
    header = (
        f"{'eps':>3} {'h':>3} {'tau':>8} {'mechanism':>9} {'FP':>7} {'FN':>7} {'cnt mean':>9} {'cnt max':>9} "
        f"{'sel dev':>9} {'worst':>9} | {'worst ratio':>11} {'cnt ratio':>9} {'FP+FN ratio':>11} | "
        f"{'counts only':>11} {'planner':>8} {'measured':>8} {'agree':>5}"
    )
    print(header)
    print("-" * len(header))
    disagreements = 0
    trees = {}
    for epsilon, spec in [(e, sp) for e in epsilons for sp in HIERARCHIES]:
        hierarchy = parse_hierarchy(spec)
        h = hierarchy.h
        if spec not in trees:
            t1 = time.perf_counter()
            trees[spec] = count_hierarchy(values, hierarchy)
            print(
                f"# {spec}: counted {sum(lc.size for lc in trees[spec].levels.values()):,} nodes in "
                f"{time.perf_counter() - t1:.1f}s",
                file=sys.stderr,
                flush=True,
            )
        tree = trees[spec]
        a1_scales = Algorithm1Scales.for_budget(epsilon, DELTA)
        b_scales = BaselineScales.for_budget(epsilon, DELTA, h)
        min_tau = a1_scales.min_tau(h, BETA)
        for tau in taus:
            exact = exact_selection(tree, tau)
            n_exact = int(sum(m.sum() for m in exact.values()))
            plan = plan_offline_hhh(h, tau, epsilon, DELTA, n, BETA)
            base = summarise(
                [
                    measure(tree, baseline_levels(tree, tau, b_scales, SeededRandomSource(seed)), exact, tau)
                    for seed in range(runs)
                ]
            )
            alg1 = None
            if tau >= min_tau:
                alg1 = summarise(
                    [
                        measure(tree, algorithm1_levels(tree, tau, a1_scales, SeededRandomSource(seed)), exact, tau)
                        for seed in range(runs)
                    ]
                )
            if alg1 is None or base.worst < alg1.worst:
                measured = "stability_histogram"
            elif alg1.worst < base.worst:
                measured = "algorithm1"
            else:
                measured = "equal"
            counts_only = "baseline" if alg1 is None or base.count_mean <= alg1.count_mean else "alg1"
            agree = measured == plan.choice or measured == "equal"
            disagreements += not agree
            verdict = "equal" if measured == "equal" else ("yes" if agree else "NO")
            row = (
                f"{epsilon:>3g} {h:>3} {tau:>8.0e} {'baseline':>9} {base.fp:>7.1f} {base.fn:>7.1f} {fmt(base.count_mean):>9} "
                f"{fmt(base.count_max):>9} {fmt(base.sel_dev):>9} {fmt(base.worst):>9} |"
            )
            print(f"{row} {'':>11} {'':>9} {'':>11} | {'':>11} {'':>8} {'':>8} {'':>5}   (exact HHH: {n_exact})")
            if alg1 is None:
                print(
                    f"{epsilon:>3g} {h:>3} {tau:>8.0e} {'alg1':>9} {'refused (guard: tau >= ' + f'{min_tau:.3g})':>61} | "
                    f"{'':>11} {'':>9} {'':>11} | {counts_only:>11} {NAMES[plan.choice]:>8} "
                    f"{NAMES[measured]:>8} {verdict:>5}"
                )
            else:
                print(
                    f"{epsilon:>3g} {h:>3} {tau:>8.0e} {'alg1':>9} {alg1.fp:>7.1f} {alg1.fn:>7.1f} {fmt(alg1.count_mean):>9} "
                    f"{fmt(alg1.count_max):>9} {fmt(alg1.sel_dev):>9} {fmt(alg1.worst):>9} | "
                    f"{ratio(alg1.worst, base.worst):>11} {ratio(alg1.count_mean, base.count_mean):>9} "
                    f"{ratio(alg1.fp + alg1.fn, base.fp + base.fn):>11} | {counts_only:>11} "
                    f"{NAMES[plan.choice]:>8} {NAMES[measured]:>8} {verdict:>5}"
                )
            print(
                f"    planner: predicted worst alg1={'refused' if plan.algorithm1.refused else fmt(plan.algorithm1.worst)}"
                f" baseline={fmt(plan.baseline.worst)}; {plan.reason}"
            )
    print("-" * len(header))
    # Where the planner would switch (prediction only, not measured): smallest n choosing Algorithm 1.
    for epsilon, spec in [(e, sp) for e in epsilons for sp in HIERARCHIES]:
        h = parse_hierarchy(spec).h
        lo, hi = 1, 10**16
        if plan_offline_hhh(h, 1e6, epsilon, DELTA, hi, BETA).choice != "algorithm1":
            print(f"# planner: eps={epsilon:g}, h={h}, tau=1e6: Algorithm 1 is never chosen for n <= 1e16")
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            if plan_offline_hhh(h, 1e6, epsilon, DELTA, mid, BETA).choice == "algorithm1":
                hi = mid
            else:
                lo = mid + 1
        print(
            f"# planner: eps={epsilon:g}, h={h}, tau=1e6: Algorithm 1 is chosen from n >= {lo:.3g} (predicted, not measured)"
        )
    print(f"# planner and measurement disagree in {disagreements} setting(s); total {time.perf_counter() - t0:.0f}s")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
