"""The privacy unit validates itself, calibrates the event-level budget and states its guarantee."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from dphhh.privacy.params import PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(kind="users"), "kind"),
        (dict(kind="event", cap=2), "cap"),
        (dict(kind="user", key="source address", cap=0), "cap"),
        (dict(kind="user", key="source address", cap=2.0), "cap"),
        (dict(kind="user", key="source address", cap=True), "cap"),
        (dict(kind="user", key="", cap=4), "key"),
        (dict(kind="user", key="   ", cap=4), "key"),
        (dict(kind="user", key=7, cap=4), "key"),
    ],
)
def test_invalid_unit_is_refused_with_its_field(kwargs: dict, field: str) -> None:
    """Each invalid combination raises ValueError prefixed by the owner and naming the field."""
    with pytest.raises(ValueError) as info:
        PrivacyUnit(**kwargs)
    assert str(info.value).startswith("PrivacyUnit: ") and field in str(info.value)


def test_unit_is_immutable_and_defaults_to_event_level() -> None:
    """The default unit is one event with cap 1, and a unit cannot be changed after construction."""
    unit = PrivacyUnit()
    assert (unit.kind, unit.key, unit.cap) == ("event", "", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        unit.cap = 3  # type: ignore[misc]


def test_event_budget_is_unchanged_for_event_level() -> None:
    """The event-level unit runs the mechanism at the budget it is given."""
    b = PrivacyBudget(0.7, 1e-7)
    assert PrivacyUnit().event_budget(b) == b


def test_event_budget_for_user_level_is_the_group_calibration() -> None:
    """A user unit with cap m calibrates at ε/m and δ/(m·e^ε)."""
    b = PrivacyBudget(2.0, 1e-6)
    got = PrivacyUnit("user", "source address", 8).event_budget(b)
    assert got.epsilon == pytest.approx(2.0 / 8, rel=1e-15)
    assert got.delta == pytest.approx(1e-6 / (8 * math.exp(2.0)), rel=1e-12)


@pytest.mark.parametrize("m", [1, 2, 3, 7, 8, 10, 33, 100, 1000])
def test_user_cost_of_the_calibration_stays_within_the_budget(m: int) -> None:
    """For many (ε, δ, m), group privacy of the calibrated mechanism over m elements is <= (ε, δ)."""
    unit = PrivacyUnit("user", "k", m)
    for eps, delta in itertools.product([0.01, 0.1, 0.3, 0.7, 1.0, 1.1, 2.9, 5.0, 13.7], [0.0, 1e-12, 1e-6, 0.01, 0.5]):
        b = PrivacyBudget(eps, delta)
        cost = unit.user_cost(unit.event_budget(b))
        assert cost.epsilon <= b.epsilon, (eps, delta, m, cost)
        assert cost.delta <= b.delta, (eps, delta, m, cost)
        # and the calibration is not wasteful: ε is spent to the last bit, δ up to e^{-ε/m}
        assert cost.epsilon == pytest.approx(b.epsilon, rel=1e-12)
        assert cost.delta == pytest.approx(b.delta * math.exp(-eps / m), rel=1e-9)


def test_cost_is_group_privacy_of_the_event_level_budget() -> None:
    """cost(d) is (d·ε', d·e^{(d−1)ε'}·δ') and grows with the distance."""
    unit = PrivacyUnit("user", "k", 4)
    eb = PrivacyBudget(0.25, 1e-8)
    assert unit.cost(eb, 1) == eb
    c3 = unit.cost(eb, 3)
    assert c3.epsilon == pytest.approx(0.75)
    assert c3.delta == pytest.approx(3 * math.exp(2 * 0.25) * 1e-8)
    assert unit.user_cost(eb) == unit.cost(eb, 4)
    assert unit.cost(eb, 5).epsilon > unit.user_cost(eb).epsilon


def test_event_unit_user_cost_is_the_event_budget() -> None:
    """For the event-level unit (cap 1) one unit is one element: the cost is the budget itself."""
    eb = PrivacyBudget(1.0, 1e-6)
    assert PrivacyUnit().user_cost(eb) == eb


def test_cost_refuses_bad_distance_and_vacuous_delta() -> None:
    """Distance must be an integer >= 1, and a distance where δ reaches 1 has no guarantee."""
    unit = PrivacyUnit("user", "k", 4)
    with pytest.raises(ValueError, match="PrivacyUnit: distance"):
        unit.cost(PrivacyBudget(0.5, 1e-6), 0)
    with pytest.raises(ValueError, match="PrivacyUnit: no"):
        unit.cost(PrivacyBudget(1.0, 1e-3), 40)
    assert unit.cost(PrivacyBudget(1.0, 0.0), 40) == PrivacyBudget(40.0, 0.0)


def test_event_budget_survives_large_epsilon() -> None:
    """A huge ε does not overflow e^ε: δ' underflows towards 0, and where it reaches 0 (no
    meaningful δ is left: every release would be refused) the error says so."""
    got = PrivacyUnit("user", "k", 2).event_budget(PrivacyBudget(600.0, 1e-6))
    assert got.epsilon == 300.0 and 0.0 < got.delta < 1e-260
    with pytest.raises(ValueError, match="PrivacyUnit: the group-privacy delta/.* underflows to 0"):
        PrivacyUnit("user", "k", 2).event_budget(PrivacyBudget(1000.0, 1e-6))


def test_guarantee_sentences() -> None:
    """The guarantee names the budget, the unit's key and its cap (or one element for event level)."""
    b = PrivacyBudget(1.0, 1e-6)
    user = PrivacyUnit("user", "source address", 8).guarantee(b)
    assert user == (
        "(1, 1e-06)-DP with respect to adding or removing all elements of one privacy unit "
        "(source address), each unit capped at 8 elements per window"
    )
    assert PrivacyUnit().guarantee(b) == "(1, 1e-06)-DP with respect to adding or removing one element of this window"
    assert "capped at 1 element per window" in PrivacyUnit("user", "json field 'user'", 1).guarantee(b)


def test_as_dict_for_reports() -> None:
    """as_dict gives the unit kind, key and cap under the report's names."""
    assert PrivacyUnit("user", "json field 'user'", 3).as_dict() == {
        "unit": "user",
        "key": "json field 'user'",
        "cap": 3,
    }
    assert PrivacyUnit().as_dict() == {"unit": "event", "key": "", "cap": 1}


def test_budget_arguments_must_be_privacy_budgets() -> None:
    """Passing a bare number instead of a PrivacyBudget is a TypeError naming the owner."""
    unit = PrivacyUnit("user", "k", 2)
    for call in (lambda: unit.event_budget(1.0), lambda: unit.cost(1.0, 1), lambda: unit.guarantee((1.0, 0.0))):
        with pytest.raises(TypeError, match="PrivacyUnit: "):
            call()


def test_weight_cap_calibrates_over_record_weights() -> None:
    """A weight cap W makes one record W unit elements: event level calibrates at (ε/W, δ/(W·e^ε)),
    user level over m·W; the statements name the weight and the cap."""
    b = PrivacyBudget(1.0, 1e-6)
    rec = PrivacyUnit(weight_cap=50, weight="packets")
    assert rec.group_size == 50
    got = rec.event_budget(b)
    assert got.epsilon == pytest.approx(1 / 50) and got.delta == pytest.approx(1e-6 * math.exp(-1) / 50)
    cost = rec.user_cost(got)
    assert cost.epsilon <= 1.0 and cost.delta <= 1e-6
    assert "one record of this window, each record weighted by packets clipped at 50" in rec.guarantee(b)
    user = PrivacyUnit("user", "source address", 4, weight_cap=10, weight="bytes")
    assert user.group_size == 40 and user.event_budget(b).epsilon == pytest.approx(1 / 40)
    assert "capped at 4 records per window, each record weighted by bytes clipped at 10" in user.guarantee(b)
    assert user.as_dict() == {"unit": "user", "key": "source address", "cap": 4, "weight_cap": 10, "weight": "bytes"}
    with pytest.raises(ValueError, match="PrivacyUnit: weight must say"):
        PrivacyUnit(weight_cap=2)
    with pytest.raises(ValueError, match="PrivacyUnit: weight_cap must be"):
        PrivacyUnit(weight_cap=0, weight="bytes")


def test_the_weight_cap_is_bounded_so_no_window_can_reach_the_sketch_total_limit() -> None:
    """A sketch refuses a weighted update that brings its total to 2**62 (its kernel's headroom), a
    failure one more record could trigger; W is bounded so that it takes >= 2**42 records of one
    window and partition (docs/ALGORITHMS.md §0.1 h)."""
    from dphhh.privacy.unit import MAX_WEIGHT_CAP
    from dphhh.sketches.misra_gries import MAX_WEIGHTED_TOTAL, MisraGries

    assert MAX_WEIGHTED_TOTAL // MAX_WEIGHT_CAP >= 2**42
    assert PrivacyUnit(weight_cap=MAX_WEIGHT_CAP, weight="bytes").group_size == MAX_WEIGHT_CAP
    with pytest.raises(ValueError, match="PrivacyUnit: weight_cap must be at most 2\\*\\*20"):
        PrivacyUnit(weight_cap=MAX_WEIGHT_CAP + 1, weight="bytes")
    # the limit it keeps away: a total at 2**62 is refused
    mg = MisraGries(4)
    mg.update(np.array([1], dtype=np.int64), np.array([MAX_WEIGHTED_TOTAL - 1], dtype=np.int64))
    with pytest.raises(ValueError, match="2\\*\\*62"):
        mg.update(np.array([2], dtype=np.int64), np.array([1], dtype=np.int64))


def test_weighted_ledger_states_the_record_guarantee() -> None:
    """The window ledger of a weighted event-level unit states (ε, δ) per record and the unit-element
    calibration beside it; a mechanism not at that calibration is refused."""
    from dphhh.privacy.budget import budget_statement
    from dphhh.privacy.params import HHHParams

    unit = PrivacyUnit(weight_cap=8, weight="packets")
    b = PrivacyBudget(1.0, 1e-6)
    ev = unit.event_budget(b)
    led = budget_statement(HHHParams(epsilon=ev.epsilon, delta=ev.delta, tau=10), h=4, unit=unit, budget=b)
    assert led["unit"] == "event" and led["epsilon"] == 1.0 and led["weight_cap"] == 8
    assert (
        "one record" in led["guarantee"] and "group privacy over 8 unit elements" in led["event_level"]["calibration"]
    )
    with pytest.raises(ValueError, match="not at the group-privacy calibration"):
        budget_statement(HHHParams(epsilon=1.0, delta=1e-6, tau=10), h=4, unit=unit, budget=b)
