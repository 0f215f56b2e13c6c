"""Advice that holds (issue 27 item 3): every ``dphhh plan`` line a warning of ``dphhh hhh`` suggests is
accepted by ``plan`` as written, carries the settings the user gave, and ``plan`` on it agrees with
the warning.

Over random option sets (hypothesis; derandomized, a fixed number of examples, so a run is
reproducible): ``noise_warnings`` gets the report numbers a release with those settings carries
(α1 and the coverage from the same calibration code, at a random noisy size); for each warning
with a plan line, the line is parsed by the real command line and run:

* "the planner suggests --epsilon X": at X, ``plan`` says the coverage holds (conservative mode) and
  the threshold is detectable; at the user's ε it does not say both;
* "no epsilon up to 32 …": at ε = 32 ``plan`` does not say both.

The old lines failed this: they dropped ``--delta`` and ``--weight-cap`` (so ``plan`` computed
another budget) and printed ``--tau 0`` for a threshold below 1, which ``plan`` refuses; the
suggested ε was per weighted unit, not per record.
"""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dphhh.privacy.params import PrivacyBudget
from dphhh.privacy.plan import PlanInputs, make_plan
from dphhh.sketches.specs import parse_hierarchy
from dphhh.stream.cli import main
from dphhh.stream.cli.hhh import noise_warnings
from dphhh.stream.cli.options import params

# capsys is only read after each plan run (readouterr empties it), so sharing it between examples is safe
CASES = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

options = st.fixed_dictionaries(
    {
        "epsilon": st.sampled_from([0.05, 0.1, 0.3, 1.0, 2.5]),
        "delta": st.sampled_from([1e-6, 1e-7, 3.3e-9]),
        "tau": st.sampled_from([0.5, 40.0, 300.0, 2_500.0, 17_584.55]),
        "n": st.integers(50, 20_000_000),
        "weight_cap": st.sampled_from([1, 1, 60, 1500]),
        "counters": st.sampled_from([256, 1024, 4096]),
        "partitions": st.sampled_from([1, 2]),
        "variant": st.sampled_from(["fresh", "reuse"]),
        "calibration": st.sampled_from(["tight", "paper"]),
        "beta": st.sampled_from([0.05, 0.01]),
        "hierarchy": st.sampled_from(["ipv4:8,16,24,32", "ipv4:16,24", "path:3"]),
    }
)


def _plan(capsys, argv: list[str]) -> dict:
    code = main(argv + ["--format", "json"])
    out = capsys.readouterr().out
    assert code == 0, argv
    return json.loads(out)


def _detects(doc: dict) -> bool:
    return bool(doc["coverage_holds"]) and doc["detectable"] <= doc["inputs"]["tau"]


@CASES
@given(o=options)
def test_every_suggested_plan_line_runs_and_agrees_with_its_warning(capsys, o: dict) -> None:
    hierarchy = parse_hierarchy(o["hierarchy"])
    settings_given = {k: o[k] for k in ("epsilon", "delta", "beta", "counters", "partitions", "variant", "calibration")}
    settings_given["mode"] = "conservative"
    args = SimpleNamespace(**settings_given, tau=SimpleNamespace(count=o["tau"], share=None))
    user = PlanInputs(n=o["n"], h=hierarchy.h, tau=o["tau"], weight_cap=o["weight_cap"], **settings_given)
    released = make_plan(user)  # the numbers a release with these settings states
    report = {
        "window": {"n_noisy": o["n"]},
        "params": {"tau": o["tau"]},
        "guarantees": {"alpha1": released["alpha1"], "coverage_holds": released["coverage_holds"]},
    }
    from dphhh.privacy.unit import PrivacyUnit

    unit = PrivacyUnit(weight_cap=o["weight_cap"], weight="bytes") if o["weight_cap"] > 1 else PrivacyUnit()
    warnings = noise_warnings(
        report,
        hierarchy,
        params(args, unit),
        budget=PrivacyBudget(o["epsilon"], o["delta"]),
        weight_cap=o["weight_cap"],
    )
    for warning in warnings:
        if "`" not in warning:
            continue
        line = warning.split("`")[1]
        words = shlex.split(line)
        assert words[:2] == ["dphhh", "plan"] and words[-2:] == ["--epsilon", "E"], line
        assert f"--delta {o['delta']:.12g}" in line
        assert ("--weight-cap" in words) == (o["weight_cap"] > 1)
        if "suggests --epsilon" in warning:
            suggested = warning.split("suggests --epsilon ")[1].split()[0]
            assert float(suggested) > o["epsilon"]
            assert _detects(_plan(capsys, words[1:-1] + [suggested])), line
            assert not _detects(_plan(capsys, words[1:-1] + [str(o["epsilon"])])), line
        else:
            assert "no epsilon up to 32" in warning
            assert not _detects(_plan(capsys, words[1:-1] + ["32"])), line


def test_the_old_plan_line_dropped_the_settings() -> None:
    """A worked case: W = 60, δ = 1e-7, τ = 0.5 — the line carries all three as given."""
    hierarchy = parse_hierarchy("ipv4:8,16,24,32")
    args = SimpleNamespace(
        epsilon=1.0,
        delta=1e-7,
        beta=0.05,
        counters=1024,
        partitions=1,
        variant="fresh",
        mode="conservative",
        calibration="tight",
        tau=SimpleNamespace(count=0.5, share=None),
    )
    from dphhh.privacy.unit import PrivacyUnit

    unit = PrivacyUnit(weight_cap=60, weight="bytes")
    report = {
        "window": {"n_noisy": 900},
        "params": {"tau": 0.5},
        "guarantees": {"alpha1": 5e4, "coverage_holds": False},
    }
    (line,) = [
        w.split("`")[1]
        for w in noise_warnings(report, hierarchy, params(args, unit), budget=PrivacyBudget(1.0, 1e-7), weight_cap=60)
        if "`" in w
    ]
    assert line == "dphhh plan --n 900 --tau 0.5 --delta 1e-07 --weight-cap 60 --epsilon E"


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
