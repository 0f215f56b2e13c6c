"""What hashed keys' chance collisions cost (docs/calibration.md §8, docs/ALGORITHMS.md §1 "Keys").

The claim of §8: with a secret random key per window and every key labelled by the smallest prefix
of the window that maps to it, adding one element of a new prefix q to a window X can change the
released label of a key only if q's key is one of the ≤ κ keys of X's final sketch — an event of
probability ≤ κ·2^-b over the window's key — so charging κ·2^-b of δ per hashed level (and per
distinct prefix of a unit) covers every label change.

Checked at b = 6 bits (frequent enough to count) on heavy-tailed windows whose prefixes collide:
(1) in every trial where a label held by both final sketches changes, q's key is a key of X's final
sketch (the implication the proof uses); (2) the frequency of that event, with a Clopper–Pearson
lower bound at α = 10⁻⁶ over 3,000 independent keys, does not exceed κ·2^-b (a correct bound fails
this with probability < 10⁻⁶: the observed rate would have to be 4.9 standard deviations above it);
and labels do change (the event is not vacuous). The check fails when the guarantee is broken by a
factor of 2: keys one bit narrower than charged (``test_keys_one_bit_narrower_than_charged_are_flagged``)
double the event's probability, and the bound is exceeded.
"""

from __future__ import annotations

import numpy as np
import pytest

import dphhh.sketches.keyed as keyed
from dphhh.sketches.canonical import apply_canonical
from dphhh.sketches.hierarchy import PathHierarchy
from dphhh.sketches.keyed import KeySecret, collision_delta
from dphhh.sketches.misra_gries import MisraGries
from tests.audit.audit_tools import clopper_pearson

KAPPA, BITS, TRIALS, ALPHA = 4, 6, 3000, 1e-6


def _window(rng: np.random.Generator) -> list[str]:
    """20 random prefixes with heavy-tailed counts (up to 30 each), in random order."""
    names = [f"{int(rng.integers(0, 10**6)):06d}" for _ in range(20)]
    counts = np.minimum(rng.zipf(1.5, 20), 30)
    out = [names[i] for i in range(20) for _ in range(int(counts[i]))]
    rng.shuffle(out)
    return out


def _labelled_release(prefixes: list[str], secret: KeySecret) -> tuple[dict[int, str], PathHierarchy]:
    """The final sketch's keys with their labels (the engine's rule: the smallest prefix of the key)."""
    h = PathHierarchy(1).keyed(secret)
    keys = h.keys(prefixes, 1)
    mg = MisraGries(KAPPA)
    apply_canonical(mg, keys)
    return {k: h.label(k, 1) for k in mg.counters()}, h


def _trials(bits: int, seed: int) -> tuple[int, int, int]:
    """(trials where q's key is a key of X's final sketch, label changes, changes without that)."""
    rng = np.random.default_rng(seed)
    collide = changed = unexplained = 0
    old = keyed.KEY_BITS
    keyed.KEY_BITS = bits
    try:
        for t in range(TRIALS):
            x = _window(rng)
            q = f"{int(rng.integers(0, 10**6)):06d}"
            while q in x:
                q = f"{int(rng.integers(0, 10**6)):06d}"
            at = int(rng.integers(0, len(x) + 1))
            secret = KeySecret.from_seed(seed * 10**6 + t).window(0)  # a fresh window key per trial
            a, h = _labelled_release(x, secret)
            b, _ = _labelled_release(x[:at] + [q] + x[at:], secret)
            hit = int(h.keys([q], 1)[0]) in a
            moved = any(a[k] != b[k] for k in set(a) & set(b))
            collide += hit
            changed += moved
            unexplained += moved and not hit
    finally:
        keyed.KEY_BITS = old
    return collide, changed, unexplained


def test_a_label_changes_only_when_the_new_prefix_meets_a_final_key_at_most_kappa_over_two_to_the_b() -> None:
    collide, changed, unexplained = _trials(BITS, seed=1)
    assert unexplained == 0  # every label change is explained by q's key meeting a key of X's final sketch
    assert changed > 0  # labels do change: the event the charge covers is real
    lower, _ = clopper_pearson(collide, TRIALS, ALPHA)
    assert lower <= collision_delta(KAPPA, bits=BITS) == KAPPA / 2**BITS


def test_keys_one_bit_narrower_than_charged_are_flagged() -> None:
    """The broken variant: keys of b − 1 bits, charged κ·2^-b — the collision rate doubles and the
    bound check above fails."""
    collide, _, _ = _trials(BITS - 1, seed=2)
    lower, _ = clopper_pearson(collide, TRIALS, ALPHA)
    assert lower > collision_delta(KAPPA, bits=BITS)


def test_the_stream_job_charges_it_per_hashed_level_and_distinct_prefix() -> None:
    """``stream.config`` lowers the mechanism's δ by m·L·κ·2⁻⁶³ and states it as an entry of its own;
    IPv4 (no hashed level) is not charged; a δ too small for the charge is refused."""
    from dphhh.stream.config import ConfigError, load_config

    plain = load_config(environ={})
    assert plain.key_delta == 0.0
    paths = load_config(environ={}, overrides=["hierarchy.spec=path:4", "input.format=path"])
    assert paths.key_delta == 4 * collision_delta(1024)
    assert paths.params.delta == pytest.approx(1e-6 - paths.key_delta, rel=1e-12)
    pairs = load_config(
        environ={},
        overrides=[
            "hierarchy.spec=ipv4:8,16,24,32 x ipv4:8,16,24,32",
            "input.format=packed-ipv4-pairs",
            "privacy.unit_key=source-ipv4",
            "privacy.unit_cap=5",
            "privacy.budget_epsilon=10",
        ],
    )
    assert pairs.key_delta == 5 * 1 * collision_delta(1024)  # one hashed node, five prefixes per unit
    with pytest.raises(ConfigError, match="too small for a hierarchy with hashed keys"):
        load_config(environ={}, overrides=["hierarchy.spec=path:4", "input.format=path", "privacy.delta=1e-16"])


def test_json_unit_keys_are_charged_their_chance_collision() -> None:
    """User level per JSON field: the unit keys' chance collision with a victim's key, < 2⁻⁶⁵ per
    window (docs/calibration.md §8.1), is taken from δ before the group-privacy calibration and
    stated with the hashed keys' charge; source-address units (their own keys) are not charged."""
    import math

    from dphhh.privacy.unit_cap import unit_collision_delta
    from dphhh.stream.config import ConfigError, load_config

    json_units = ["input.format=json", "privacy.unit_key=json:user", "privacy.unit_cap=3", "privacy.budget_epsilon=10"]
    cfg = load_config(environ={}, overrides=json_units)
    assert cfg.key_delta == unit_collision_delta() == 2.0**-65 and cfg.uses_key_secret
    assert math.isclose(cfg.params.delta, (1e-6 - cfg.key_delta) * math.exp(-1) / 3, rel_tol=1e-12)
    by_source = load_config(
        environ={}, overrides=["input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4", "privacy.unit_cap=3"]
    )
    assert by_source.key_delta == 0.0 and not by_source.uses_key_secret
    with pytest.raises(ConfigError, match="too small for hashed \\(JSON\\) unit keys"):
        load_config(environ={}, overrides=[*json_units, "privacy.delta=1e-20"])
