"""Parameter values validate themselves and name the bad field."""

from __future__ import annotations

import dataclasses
import math

import pytest

from dphhh.privacy.params import HHHParams, PrivacyBudget


def _params(**kw):
    base = dict(epsilon=1.0, delta=1e-6, tau=100.0)
    base.update(kw)
    return HHHParams(**base)


@pytest.mark.parametrize(
    "field, value",
    [
        ("epsilon", 0),
        ("epsilon", -1.0),
        ("epsilon", math.inf),
        ("epsilon", math.nan),
        ("epsilon", True),
        ("delta", 0),
        ("delta", 1),
        ("delta", 1.5),
        ("delta", "0.1"),
        ("beta", 0),
        ("beta", 1),
        ("tau", 0),
        ("tau", -5),
        ("counters", 0),
        ("counters", 2.5),
        ("partitions", 0),
        ("variant", "literal"),
        ("mode", "greedy"),
        ("size_share", 1.0),
        ("size_beta_share", 0.0),
    ],
)
def test_bad_value_is_refused_with_its_name(field: str, value: object) -> None:
    """Each invalid field raises ValueError naming the owner, the field and the value."""
    with pytest.raises(ValueError) as info:
        _params(**{field: value})
    message = str(info.value)
    assert message.startswith("HHHParams: ") and field in message and repr(value) in message


def test_params_are_immutable() -> None:
    """A parameter value cannot be changed after construction."""
    p = _params()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.epsilon = 2.0  # type: ignore[misc]


def test_budget_split_adds_up_to_the_window_budget() -> None:
    """Release and size budgets compose back to exactly (ε, δ)."""
    p = _params(epsilon=2.0, delta=1e-7, size_share=0.25)
    total = p.release_budget + p.size_budget
    assert math.isclose(total.epsilon, 2.0) and total.delta == 1e-7
    assert math.isclose(p.key_beta + p.size_beta, p.beta)


def test_privacy_budget_validation() -> None:
    """A PrivacyBudget allows δ = 0 but refuses ε <= 0 and δ >= 1."""
    assert PrivacyBudget(1.0).delta == 0.0
    with pytest.raises(ValueError, match="PrivacyBudget: epsilon"):
        PrivacyBudget(0.0)
    with pytest.raises(ValueError, match="PrivacyBudget: delta"):
        PrivacyBudget(1.0, 1.0)
