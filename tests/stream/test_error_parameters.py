"""Errors about one parameter carry it as fields, and the CLI and the config name it from them.

* :meth:`UsageError.of_parameter` sets ``owner``, ``parameter`` and ``detail``; :meth:`UsageError.about`
  renames the parameter as the user wrote it;
* the command line's message for such an error is built from the field, not from the text: an error
  whose text would read as another parameter is still named by its field;
* the config's privacy errors name ``privacy.<parameter>`` from the field, and an error about no single
  parameter keeps its whole text after ``privacy:`` (the old text split made ``privacy.no (ε, δ) …``).
"""

from __future__ import annotations

import pytest

from dphhh.privacy.params import HHHParams, PrivacyBudget, check_int
from dphhh.sketches.errors import UsageError
from dphhh.stream.cli.app import user_message
from dphhh.stream.config import ConfigError, load_config


def test_a_parameter_error_carries_its_owner_and_parameter() -> None:
    with pytest.raises(UsageError) as caught:
        check_int("MisraGries", "k", 0, 1)
    exc = caught.value
    assert (exc.owner, exc.parameter, exc.detail) == ("MisraGries", "k", "must be an integer >= 1, got 0")
    assert str(exc) == "MisraGries: k must be an integer >= 1, got 0"
    assert exc.about("--counters") == "--counters must be an integer >= 1, got 0"
    assert UsageError("HHHParams: the window is too small").about("privacy") == (
        "privacy: HHHParams: the window is too small"
    )


@pytest.mark.parametrize(
    "make, option",
    [
        (lambda: HHHParams(epsilon=0, delta=1e-6, tau=10), "--epsilon"),
        (lambda: HHHParams(epsilon=1, delta=1e-6, tau=10, counters=0), "--counters"),
        (lambda: HHHParams(epsilon=1, delta=1e-6, tau=10, mode="x"), "--mode"),
        (lambda: PrivacyBudget(1.0, 2.0), "--delta"),
    ],
)
def test_the_command_line_names_the_option_from_the_field(make, option: str) -> None:
    with pytest.raises(UsageError) as caught:
        make()
    assert user_message(caught.value).startswith(option + " must be"), user_message(caught.value)


def test_the_field_wins_over_the_text() -> None:
    """A message whose words would read as another parameter: the field decides."""
    exc = UsageError.of_parameter("HHHParams", "tau", "epsilon-like wording: must be > 0")
    assert user_message(exc) == "--tau epsilon-like wording: must be > 0"
    assert user_message(str(exc)) == "--tau epsilon-like wording: must be > 0"  # the text fallback agrees here
    plain = UsageError("HHHParams: beta must be in (0, 1)")  # an older raise site: the text is read
    assert user_message(plain) == "--beta must be in (0, 1)"


@pytest.mark.parametrize(
    "override, expected",
    [
        ("privacy.epsilon=-1", "config: privacy.epsilon must be a finite number > 0, got -1.0"),
        ("privacy.counters=0", "config: privacy.counters must be an integer >= 1, got 0"),
        ("privacy.calibration=x", "config: privacy.calibration must be one of tight, paper, got 'x'"),
        ("privacy.delta=0", "config: privacy.delta must be a number with 0 < delta < 1, got 0.0"),
    ],
)
def test_the_config_names_the_key_from_the_field(override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={}, overrides=[override])
    assert str(caught.value) == expected


def test_inftda_names_the_hierarchy_option_for_a_kind_it_does_not_release() -> None:
    from dphhh.privacy.offline.inftda import inftda_needs_domain
    from dphhh.sketches.specs import parse_hierarchy

    for spec, what in (("ipv6:32,64", "IPv6 hierarchies are not supported"), ("ipv4:8 x ipv4:8", "pair hierarchies")):
        with pytest.raises(UsageError) as caught:
            inftda_needs_domain(parse_hierarchy(spec), False)
        assert str(caught.value).startswith("InfTDA: ") and what in str(caught.value)
        assert user_message(caught.value).startswith(f"--hierarchy: {what}")


def test_a_hierarchy_no_format_reads_is_named_as_such() -> None:
    with pytest.raises(ConfigError, match=r"hierarchy.spec 'ipv6:32,64': no input format of the stream job reads ipv6"):
        load_config(None, environ={}, overrides=["hierarchy.spec=ipv6:32,64"])


def test_the_key_collision_guard_names_privacy_delta() -> None:
    with pytest.raises(
        ConfigError, match=r"^config: privacy.delta = 1e-16 is too small for a hierarchy with hashed keys"
    ):
        load_config(None, environ={}, overrides=["hierarchy.spec=path:4", "input.format=path", "privacy.delta=1e-16"])
