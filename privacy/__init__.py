"""The privacy core: parameters, randomness, noise, releases, HHH extraction and reports (docs/ALGORITHMS.md §0–§5).

Everything that leaves dphhh passes through here: a sketch's counters are released with
:func:`release_level` (Algorithm 3), a window's sketches with :func:`release_window`, and the
heavy hitters are extracted from the released values by :func:`extract_hhh` (Algorithm 4, pure
post-processing). Noise comes from a :class:`RandomSource`: the operating system's secure
generator by default (``rng=None``); a seed or :class:`SeededRandomSource` is for tests and
experiments only, and reports made that way say they are **not** private.

Modules:

* :mod:`dphhh.privacy.params` — validated, immutable parameters (:class:`HHHParams`,
  :class:`PrivacyBudget`);
* :mod:`dphhh.privacy.randomness` — the one source of randomness (:class:`SecureRandomSource`,
  :class:`SeededRandomSource`, :func:`as_source`);
* :mod:`dphhh.privacy.noise` — the noise samplers (discrete Laplace, discrete Gaussian, …) on a
  :class:`RandomSource`;
* :mod:`dphhh.privacy.tails` — exact tails of discrete Laplace noise (thresholds and error bounds);
* :mod:`dphhh.privacy.release` — private release of one Misra-Gries sketch (:func:`release_level`,
  :class:`ReleaseScales`);
* :mod:`dphhh.privacy.calibration` — every number a window's release uses and its report states
  (:class:`WindowCalibration`);
* :mod:`dphhh.privacy.stream_size` — private sub-stream sizes and the root estimate (docs/ALGORITHMS.md §5);
* :mod:`dphhh.privacy.hhh` — HHH extraction from released values (:func:`extract_hhh`, Algorithm 4) and the
  verdicts (:func:`with_verdicts`);
* :mod:`dphhh.privacy.hhh2d` — two-dimensional extraction over a pair hierarchy (:func:`extract_hhh_2d`: point
  mode by inclusion–exclusion);
* :mod:`dphhh.privacy.window` — one window's release, split as the stream job splits it
  (:func:`release_sketch`, :func:`assemble_report`, :func:`release_window`);
* :mod:`dphhh.privacy.budget` — the per-window budget statement (the report's ``budget``);
* :mod:`dphhh.privacy.report` — the one builder of the ``dphhh.report/1`` schema;
* :mod:`dphhh.privacy.unit` — the privacy unit (event or user level, group-privacy calibration);
* :mod:`dphhh.privacy.unit_cap` — the per-window contribution cap of user-level privacy;
* :mod:`dphhh.privacy.budget_guard` — a total privacy budget per period for user-level privacy;
* :mod:`dphhh.privacy.checks` — warnings about valid parameters that weaken a guarantee;
* :mod:`dphhh.privacy.plan` — what a setting can detect, from public inputs only (``dphhh plan``);
* :mod:`dphhh.privacy.offline` — the snapshot (non-streaming) mechanisms: offline DP-HHH, InfTDA,
  local-DP AHEAD, LUE-DPTree (a subpackage, not imported by ``import dphhh.privacy``).
"""

from .budget import budget_statement
from .budget_guard import BudgetGuard, GuardDecision
from .calibration import WindowCalibration
from .checks import guarantee_warnings
from .hhh import HHHItem, SketchRelease, extract_hhh, with_verdicts
from .hhh2d import extract_hhh_2d
from .params import CALIBRATIONS, DEFAULT_CALIBRATION, MODES, VARIANTS, HHHParams, PrivacyBudget
from .plan import PlanInputs, detectable_count, make_plan, report_probability
from .randomness import RandomSource, SecureRandomSource, SeededRandomSource, as_source
from .release import ReleaseScales, release_level
from .report import SCHEMA, build_report
from .stream_size import root_estimate
from .unit import UNIT_KINDS, PrivacyUnit
from .unit_cap import UnitCap, UnitCapFormatError
from .window import assemble_report, release_sketch, release_window

__all__ = [
    # parameters
    "HHHParams",
    "PrivacyBudget",
    "VARIANTS",
    "MODES",
    "CALIBRATIONS",
    "DEFAULT_CALIBRATION",
    # randomness
    "RandomSource",
    "SecureRandomSource",
    "SeededRandomSource",
    "as_source",
    # releases and extraction
    "release_level",
    "ReleaseScales",
    "WindowCalibration",
    "release_sketch",
    "assemble_report",
    "release_window",
    "root_estimate",
    "SketchRelease",
    "HHHItem",
    "extract_hhh",
    "extract_hhh_2d",
    "with_verdicts",
    # reports
    "SCHEMA",
    "build_report",
    "budget_statement",
    # privacy units and budgets
    "PrivacyUnit",
    "UNIT_KINDS",
    "UnitCap",
    "UnitCapFormatError",
    "BudgetGuard",
    "GuardDecision",
    "guarantee_warnings",
    # planning
    "PlanInputs",
    "make_plan",
    "report_probability",
    "detectable_count",
]
