"""What a setting can detect, from public inputs only (``dphhh plan``; docs/calibration.md §7).

:func:`make_plan` takes what a deployment is configured with — the expected window size n (a
public guess, never the data's count), ε, δ, β, the hierarchy's h, P, κ, variant, mode,
calibration, τ and the unit and weight caps — and computes, through the same
:class:`~dphhh.privacy.calibration.WindowCalibration` the reports use:

* T*, B, α2 and α1 (at a window of exactly n elements: ``n̂ = n + S``);
* the smallest τ at which conservative coverage holds (``τ >= 2·α1``);
* the smallest count a prefix needs to be **reported with probability >= 0.9**
  (:func:`report_probability`; a prefix whose count the sketch holds exactly and with no reported
  descendant — the sketch may undercount it by up to n/(κ+1) more);
* sketch memory and serialised state per window, and the recommended κ: the power of two that
  minimises α1 for this n within ``max_memory``.

Nothing here looks at data, so a plan can be printed, shared and put in a ticket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dphhh.sketches.misra_gries import MAX_KAPPA
from dphhh.sketches.sizing import sketch_memory_bytes, sketch_state_bytes

from .calibration import WindowCalibration
from .params import HHHParams, PrivacyBudget, check_int
from .tails import dlap_sum_tail
from .unit import PrivacyUnit

__all__ = [
    "PlanInputs",
    "make_plan",
    "report_probability",
    "detectable_count",
    "suggest_epsilon",
    "DETECT_PROBABILITY",
    "SUGGESTED_EPSILONS",
]

#: The probability of being reported that "detectable" refers to.
DETECT_PROBABILITY = 0.9


@dataclass(frozen=True)
class PlanInputs:
    """The public inputs of a plan. ``unit_cap``: m elements per privacy unit (1: event level);
    ``weight_cap``: W units per weighted record (1: unweighted); together group privacy over m·W."""

    n: int
    epsilon: float
    delta: float
    h: int
    tau: float | None = None
    beta: float = 0.05
    counters: int = 1024
    partitions: int = 1
    variant: str = "fresh"
    mode: str = "conservative"
    calibration: str = "tight"
    unit_cap: int = 1
    weight_cap: int = 1
    max_memory: int | None = None

    def __post_init__(self) -> None:
        check_int("dphhh plan", "n", self.n, 1)
        check_int("dphhh plan", "h", self.h, 1)
        check_int("dphhh plan", "unit_cap", self.unit_cap, 1)
        check_int("dphhh plan", "weight_cap", self.weight_cap, 1)
        if self.max_memory is not None:
            check_int("dphhh plan", "max_memory", self.max_memory, 1)

    def params(self, counters: int | None = None) -> HHHParams:
        """The event-level :class:`HHHParams` a deployment with these inputs runs (group privacy
        over ``unit_cap · weight_cap`` elements when either is > 1)."""
        budget = PrivacyBudget(self.epsilon, self.delta)
        group = self.unit_cap * self.weight_cap
        if group > 1:
            budget = PrivacyUnit("user", "planned unit", group).event_budget(budget)
        return HHHParams(
            epsilon=budget.epsilon,
            delta=budget.delta,
            tau=self.tau or 1.0,
            beta=self.beta,
            counters=self.counters if counters is None else counters,
            partitions=self.partitions,
            variant=self.variant,
            mode=self.mode,
            calibration=self.calibration,
        )


def report_probability(count: int, cal: WindowCalibration, *, mode: str, tau: float | None, n_upper: float) -> float:
    """P(a prefix whose counter is ``count`` is reported), for a prefix with no reported descendant
    in a window whose size bound is ``n_upper``.

    It is reported iff it passes the threshold (``count + γ + w > T*``) and is selected — point:
    ``C̃ >= τ``; conservative: ``C̃ + margin > τ − α1`` (:meth:`WindowCalibration.selection_margin`)
    — where C̃ is the released value. ``fresh``: C̃
    carries independent release noise, so the probability is the product of the two; ``reuse``:
    C̃ is the tested value, so both conditions are on the same variable. ``tau=None``: passing the
    threshold only."""
    s = cal.scales
    t_pass = s.integer_threshold - count  # pass iff γ + w >= this
    p_pass = dlap_sum_tail(t_pass, s.gamma, s.w)
    if tau is None:
        return min(1.0, p_pass)
    # select iff C̃ >= cut (point) / C̃ > cut (conservative)
    cut = tau if mode == "point" else tau - cal.alpha1(n_upper) - cal.selection_margin(n_upper)
    t_sel = math.ceil(cut) - count if mode == "point" else math.floor(cut) + 1 - count
    if s.w_release is None:  # reuse: one variable
        return min(1.0, dlap_sum_tail(max(t_pass, t_sel), s.gamma, s.w))
    assert s.gamma_release is not None  # fresh: both release scales are set
    return min(1.0, p_pass * dlap_sum_tail(t_sel, s.gamma_release, s.w_release))


def detectable_count(
    cal: WindowCalibration, *, mode: str, tau: float | None, n_upper: float, probability: float = DETECT_PROBABILITY
) -> int:
    """The smallest counter reported with probability >= ``probability`` (binary search: the
    probability increases with the count)."""
    lo, hi = 0, 1
    while report_probability(hi, cal, mode=mode, tau=tau, n_upper=n_upper) < probability:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if report_probability(mid, cal, mode=mode, tau=tau, n_upper=n_upper) >= probability:
            hi = mid
        else:
            lo = mid + 1
    return hi


def _numbers(inputs: PlanInputs, counters: int) -> dict[str, Any]:
    params = inputs.params(counters)
    cal = WindowCalibration.of(params, inputs.h)
    n_upper = inputs.n + cal.size_slack
    a1 = cal.alpha1(n_upper)
    sketches = inputs.h * inputs.partitions
    detect = detectable_count(cal, mode=inputs.mode, tau=inputs.tau, n_upper=n_upper)
    return {
        "counters": counters,
        "calibration": cal.as_dict(),
        "alpha1": round(a1, 3),
        "alpha2": round(cal.alpha2, 3),
        "threshold": round(cal.threshold, 3),
        "noise_bound": cal.noise_bound,
        "sketch_error": round(cal.sketch_error(n_upper), 3),
        "coverage_min_tau": round(2 * a1, 3),
        "detectable": detect,
        "detectable_worst_case": detect + math.ceil(cal.sketch_error(n_upper)),
        "memory_bytes": sketches * sketch_memory_bytes(counters),
        "state_bytes": sketches * sketch_state_bytes(counters),
        "event_level": {"epsilon": params.epsilon, "delta": params.delta},
    }


def _recommended_counters(inputs: PlanInputs) -> dict[str, Any] | None:
    """The power of two κ with the smallest α1 for n whose memory fits ``max_memory``."""
    best = None
    k = 16
    while k <= MAX_KAPPA:
        mem = inputs.h * inputs.partitions * sketch_memory_bytes(k)
        if inputs.max_memory is not None and mem > inputs.max_memory:
            break
        cal = WindowCalibration.of(inputs.params(k), inputs.h)
        a1 = cal.alpha1(inputs.n + cal.size_slack)
        if best is None or a1 < best[1]:
            best = (k, a1, mem)
        elif k > 4 * best[0]:  # α1 is unimodal in κ: it only grows from here
            break
        k *= 2
    if best is None:
        return None
    return {"counters": best[0], "alpha1": round(best[1], 3), "memory_bytes": best[2]}


def make_plan(inputs: PlanInputs) -> dict[str, Any]:
    """The plan: inputs, the numbers at the configured κ, and the recommended κ."""
    out: dict[str, Any] = {
        "schema": "dphhh.plan/1",
        "inputs": {k: getattr(inputs, k) for k in PlanInputs.__dataclass_fields__},
        **_numbers(inputs, inputs.counters),
        "detect_probability": DETECT_PROBABILITY,
    }
    rec = _recommended_counters(inputs)
    out["recommended"] = rec
    if inputs.tau is not None:
        out["coverage_holds"] = inputs.mode == "conservative" and inputs.tau >= out["coverage_min_tau"]
    return out


#: The ε values :func:`suggest_epsilon` tries, smallest first.
SUGGESTED_EPSILONS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def suggest_epsilon(inputs: PlanInputs, tau: float) -> float | None:
    """The smallest ε of :data:`SUGGESTED_EPSILONS` at which a window of ``inputs.n`` elements
    reports a prefix of count ``tau`` with probability >= 0.9 and, in conservative mode, its
    coverage holds (τ >= 2·α1); ``None`` when even the largest does not. Public inputs only (``n``
    is a guess or a noisy size)."""
    from dataclasses import replace

    for eps in SUGGESTED_EPSILONS:
        numbers = _numbers(replace(inputs, epsilon=eps, tau=tau), inputs.counters)
        covered = inputs.mode != "conservative" or tau >= numbers["coverage_min_tau"]
        if covered and numbers["detectable"] <= tau:
            return eps
    return None
