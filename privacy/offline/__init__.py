"""Offline (snapshot) mechanisms on the same privacy core as the stream engine (docs/ALGORITHMS.md §6–§9).

* :mod:`dphhh.privacy.offline.hhh_offline` — non-streaming DP-HHH (Algorithm 1, corrected), the
  per-level stability-histogram baseline, and a planner that picks between them;
* :mod:`dphhh.privacy.offline.inftda` — InfTDA: integer, non-negative, consistent hierarchical counts
  under zCDP (TopDown with IntOPT);
* :mod:`dphhh.privacy.offline.ldp` and :mod:`dphhh.privacy.offline.ahead` — local-DP frequency oracles
  (OUE, GRR) and AHEAD range queries (1-D, 2-D, higher dimensions by LLE), with HIO and Uni
  baselines;
* :mod:`dphhh.privacy.offline.lue_dptree` — LUE-DPTree: optimal non-uniform budgets on arbitrary
  interval trees and BLUE consistency, for range queries.

Every mechanism draws its noise from :mod:`dphhh.privacy.noise` through :mod:`dphhh.privacy.randomness`
(secure by default; tests inject seeded sources). No printed value carries continuous
floating-point noise (Mironov 2012; docs/ALGORITHMS.md §3 "Integer counts"): central-model releases are integers
(discrete Laplace or discrete Gaussian on integer counts), local-model reports are bits or
integers, and every float in an output is post-processing of those. The one continuous sampler in
use, Algorithm 1's selection noise, only feeds a comparison (see
:mod:`dphhh.privacy.offline.hhh_algorithm1`).

Supporting modules: :mod:`dphhh.privacy.offline.hhh_algorithm1` (Algorithm 1),
:mod:`dphhh.privacy.offline.hhh_baseline` (the stability-histogram baseline),
:mod:`dphhh.privacy.offline.hhh_planner` (the choice between them), :mod:`dphhh.privacy.offline.intopt`
(IntOPT, InfTDA's integer projection), :mod:`dphhh.privacy.offline.zcdp` (zCDP ↔ (ε, δ) conversion),
:mod:`dphhh.privacy.offline.range_baselines` (HIO and Uni, the AHEAD baselines) and
:mod:`dphhh.privacy.offline.interval_tree` (the trees LUE-DPTree runs on).

The package re-exports each module's entry points (see ``__all__``). Two functions share their
module's name and are therefore *not* re-exported, so that ``privacy.offline.inftda`` and
``privacy.offline.lue_dptree`` stay the modules: call ``privacy.offline.inftda.inftda(values, …)``
and ``privacy.offline.lue_dptree.lue_dptree(values, …)`` (or the re-exported
:func:`inftda_from_counts` / :func:`lue_dptree_counts`, which take exact counts).
"""

from .ahead import AheadParams, LleEstimator, RangeEstimator, ahead_1d, ahead_2d, ahead_lle, ahead_nd
from .hhh_algorithm1 import Algorithm1Scales, algorithm1_hhh, algorithm1_min_tau
from .hhh_baseline import BaselineScales, stability_histogram_hhh
from .hhh_offline import (
    HierarchyCounts,
    LevelCounts,
    OfflineHHHItem,
    OfflineHHHParams,
    OfflineHHHResult,
    count_hierarchy,
)
from .hhh_planner import OfflinePlan, PredictedErrors, plan_offline_hhh
from .inftda import InfTDACalibration, InfTDAParams, InfTDAResult, PathDomain, inftda_from_counts
from .interval_tree import IntervalTree
from .intopt import int_opt
from .ldp import (
    ORACLES,
    aggregate_grr,
    aggregate_oue,
    estimate_frequencies,
    perturb_grr,
    perturb_grr_batch,
    perturb_oue,
    perturb_oue_batch,
)
from .lue_dptree import LueParams, LueResult, Workload, lue_dptree_counts
from .range_baselines import HioParams, UniformEstimator, hio, uniform_guess
from .zcdp import epsilon_from_rho, rho_from_epsilon_delta

__all__ = [
    # offline DP-HHH (Algorithm 1, the baseline, the planner)
    "OfflineHHHParams",
    "OfflineHHHResult",
    "OfflineHHHItem",
    "HierarchyCounts",
    "LevelCounts",
    "count_hierarchy",
    "Algorithm1Scales",
    "algorithm1_hhh",
    "algorithm1_min_tau",
    "BaselineScales",
    "stability_histogram_hhh",
    "OfflinePlan",
    "PredictedErrors",
    "plan_offline_hhh",
    # InfTDA (zCDP)
    "InfTDAParams",
    "InfTDACalibration",
    "InfTDAResult",
    "PathDomain",
    "inftda_from_counts",
    "int_opt",
    "rho_from_epsilon_delta",
    "epsilon_from_rho",
    # local DP: frequency oracles, AHEAD, baselines
    "ORACLES",
    "perturb_oue",
    "perturb_oue_batch",
    "perturb_grr",
    "perturb_grr_batch",
    "aggregate_oue",
    "aggregate_grr",
    "estimate_frequencies",
    "AheadParams",
    "RangeEstimator",
    "LleEstimator",
    "ahead_1d",
    "ahead_2d",
    "ahead_nd",
    "ahead_lle",
    "HioParams",
    "hio",
    "UniformEstimator",
    "uniform_guess",
    # LUE-DPTree
    "IntervalTree",
    "LueParams",
    "LueResult",
    "Workload",
    "lue_dptree_counts",
]
