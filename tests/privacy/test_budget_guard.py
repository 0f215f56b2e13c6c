"""BudgetGuard allows the first windows of each period that fit the total budget, and refuses the rest."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from dphhh.privacy.budget_guard import DAY_MS, BudgetGuard, GuardDecision
from dphhh.privacy.params import PrivacyBudget

HOUR = 3_600_000


def _ms(text: str) -> int:
    """Epoch milliseconds of an ISO UTC timestamp."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def test_day_allows_exactly_the_windows_that_fit() -> None:
    """With 12 total and 0.5 per hourly window, the first 24 windows of a day pass and the 25th would not."""
    guard = BudgetGuard(PrivacyBudget(12.0, 1e-5), "day")
    per = PrivacyBudget(0.5, 0.0)
    day = _ms("2026-11-30T00:00:00")
    decisions = [guard.decide(day + i * HOUR, HOUR, per, day) for i in range(24)]
    assert all(d.allowed and d.reason == "" for d in decisions)
    assert [d.window_index for d in decisions] == list(range(24))
    assert decisions[-1].spent_after == (12.0, 0.0) and decisions[-1].remaining == (0.0, 1e-5)
    assert decisions[5].spent_before == (2.5, 0.0) and decisions[5].spent_after == (3.0, 0.0)
    assert {d.period for d in decisions} == {"2026-11-30"}


def test_refusal_message_names_the_day_and_the_spending() -> None:
    """Once the day's budget is spent, windows are refused with a message naming the day, the count and ε."""
    guard = BudgetGuard(PrivacyBudget(12.0, 1e-5), "day")
    per = PrivacyBudget(0.5, 0.0)
    day = _ms("2026-11-30T00:00:00")
    half_hour = HOUR // 2
    d = guard.decide(day + 24 * half_hour, half_hour, per, day)
    assert not d.allowed
    assert d.reason == "privacy budget of day 2026-11-30 (UTC) exhausted: 24 windows of ε=0.5 spent of 12 total"
    assert d.spent_before == d.spent_after == (12.0, 0.0) and d.remaining == (0.0, 1e-5)
    later = guard.decide(day + 40 * half_hour, half_hour, per, day)
    assert not later.allowed and later.spent_before == (12.0, 0.0) and later.window_index == 40


def test_new_day_restores_the_budget() -> None:
    """The first window of the next UTC day is index 0 of a fresh budget."""
    guard = BudgetGuard(PrivacyBudget(1.0, 1e-6), "day")
    per = PrivacyBudget(1.0, 1e-6)
    first = _ms("2026-11-30T00:00:00")
    assert not guard.decide(first + HOUR, HOUR, per, first).allowed
    d = guard.decide(first + DAY_MS, HOUR, per, first)
    assert d.allowed and d.period == "2026-12-01" and d.window_index == 0 and d.spent_before == (0.0, 0.0)


def test_window_straddling_midnight_belongs_to_the_day_of_its_start() -> None:
    """A 7-hour schedule: the window from 21:00 to 04:00 counts for the earlier day; the next one opens the new day."""
    guard = BudgetGuard(PrivacyBudget(3.0, 0.0), "day")
    per = PrivacyBudget(1.0, 0.0)
    first = _ms("2026-11-30T00:00:00")
    w = 7 * HOUR
    straddling = guard.decide(first + 3 * w, w, per, first)  # 21:00 .. 04:00
    assert straddling.period == "2026-11-30" and straddling.window_index == 3 and not straddling.allowed
    nxt = guard.decide(first + 4 * w, w, per, first)  # 04:00 next day: the first window starting that day
    assert nxt.period == "2026-12-01" and nxt.window_index == 0 and nxt.allowed
    # windows at 04:00, 11:00, 18:00 of 12-01 are 0, 1, 2; the 01:00 window of 12-02 opens day 3
    assert [guard.decide(first + k * w, w, per, first).window_index for k in (5, 6, 7)] == [1, 2, 0]


def test_day_counting_starts_at_the_schedule_start() -> None:
    """On the deployment's first day, windows are counted from the schedule start, not from midnight."""
    guard = BudgetGuard(PrivacyBudget(2.0, 0.0), "day")
    per = PrivacyBudget(1.0, 0.0)
    start = _ms("2026-11-30T15:00:00")
    assert [guard.decide(start + k * HOUR, HOUR, per, start).allowed for k in range(3)] == [True, True, False]


def test_deployment_period_never_restores_the_budget() -> None:
    """With period 'deployment' the count runs from the schedule start across days."""
    guard = BudgetGuard(PrivacyBudget(10.0, 0.0), "deployment")
    per = PrivacyBudget(1.0, 0.0)
    start = _ms("2026-11-30T23:00:00")
    allowed = [guard.decide(start + k * HOUR, HOUR, per, start) for k in range(12)]
    assert [d.allowed for d in allowed] == [True] * 10 + [False] * 2
    assert {d.period for d in allowed} == {"deployment"}
    assert allowed[-1].reason == "privacy budget of deployment exhausted: 10 windows of ε=1 spent of 10 total"


def test_delta_can_be_the_exhausted_part() -> None:
    """When δ runs out before ε, the refusal names δ."""
    guard = BudgetGuard(PrivacyBudget(100.0, 3e-6), "day")
    per = PrivacyBudget(1.0, 1e-6)
    day = _ms("2026-11-30T00:00:00")
    got = [guard.decide(day + k * HOUR, HOUR, per, day) for k in range(4)]
    assert [d.allowed for d in got] == [True, True, True, False]
    assert (
        got[3].reason == "privacy budget of day 2026-11-30 (UTC) exhausted: 3 windows of δ=1e-06 spent of 3e-06 total"
    )
    assert got[3].windows_allowed == 3


def test_positive_window_delta_with_zero_total_delta_is_refused() -> None:
    """A pure-ε total refuses any window that spends δ, saying one window is already too much."""
    guard = BudgetGuard(PrivacyBudget(5.0, 0.0), "day")
    d = guard.decide(0, HOUR, PrivacyBudget(1.0, 1e-9), 0)
    assert not d.allowed and d.reason == (
        "privacy budget of day 1970-01-01 (UTC) too small: one window costs δ=1e-09, more than the δ=0 total"
    )


def test_float_sums_that_equal_the_total_are_allowed() -> None:
    """Ten windows of ε=0.1 fit a total of 1.0 although 10·0.1 is not exactly 1 in floating point."""
    guard = BudgetGuard(PrivacyBudget(1.0, 1e-6), "deployment")
    per = PrivacyBudget(0.1, 1e-7)
    got = [guard.decide(k * 10, 10, per, 0).allowed for k in range(11)]
    assert got == [True] * 10 + [False]


def test_decision_is_a_pure_function_of_the_schedule() -> None:
    """The same arguments give the same (frozen) decision; it carries a report dict."""
    guard = BudgetGuard(PrivacyBudget(2.0, 1e-6), "day")
    a = guard.decide(_ms("2026-11-30T05:00:00"), HOUR, PrivacyBudget(0.5, 1e-7), _ms("2026-11-29T12:00:00"))
    b = guard.decide(_ms("2026-11-30T05:00:00"), HOUR, PrivacyBudget(0.5, 1e-7), _ms("2026-11-29T12:00:00"))
    assert a == b and isinstance(a, GuardDecision)
    assert not a.allowed and a.window_index == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.allowed = True  # type: ignore[misc]
    report = a.as_dict()
    assert report["period"] == "2026-11-30" and report["spent_before"] == {"epsilon": 2.0, "delta": 4e-7}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(total=PrivacyBudget(1.0), period="week"), "BudgetGuard: period"),
        (dict(total=1.0, period="day"), "BudgetGuard: total"),
    ],
)
def test_invalid_guard_is_refused(kwargs: dict, message: str) -> None:
    """A guard needs a PrivacyBudget total and a known period."""
    with pytest.raises(ValueError, match=message):
        BudgetGuard(**kwargs)


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 0, PrivacyBudget(1.0), 0), "window_ms must be >= 1"),
        ((0, 1.5, PrivacyBudget(1.0), 0), "window_ms must be an integer"),
        ((0.0, 10, PrivacyBudget(1.0), 0), "window_start_ms must be an integer"),
        ((0, 10, (1.0, 0.0), 0), "per_window must be a PrivacyBudget"),
        ((0, 10, PrivacyBudget(1.0), 100), "before the schedule start"),
    ],
)
def test_invalid_decide_arguments_are_refused(args: tuple, message: str) -> None:
    """decide validates its schedule arguments and names the bad one."""
    with pytest.raises(ValueError, match=message):
        BudgetGuard(PrivacyBudget(1.0), "day").decide(*args)
