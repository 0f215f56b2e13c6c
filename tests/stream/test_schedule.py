"""The public release schedule and the per-element acceptance rule (docs/ALGORITHMS.md §0.1 d, e).

The property that matters for privacy: whether (and where) an element is counted depends on that
element and the public configuration only — never on the other elements of the stream. It is
checked here on the plain logic (hypothesis over random streams and one added element) and end to
end by ``tests/e2e/test_side_channels.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphhh.stream.config import ConfigError, load_config, parse_time_ms
from dphhh.stream.schedule import ELEMENT_REASONS, LIVE, REPLAY, ReleaseSchedule


def test_window_arithmetic_and_description() -> None:
    """Windows start at multiples of the size; the scheduled release is end + grace; the report's
    window block states both (public values only)."""
    s = ReleaseSchedule(size_ms=1000, origin_ms=5000, grace_ms=200)
    assert s.start_of(12_345) == 12_000 and s.start_of(12_000) == 12_000
    assert s.release_time(12_000) == 13_200 and s.start_of_release_time(13_200) == 12_000
    assert s.describe(0) == {
        "kind": "tumbling",
        "start_ms": 0,
        "end_ms": 1000,
        "start": "1970-01-01T00:00:00.000+00:00",
        "end": "1970-01-01T00:00:01.000+00:00",
        "release_ms": 1200,
        "release": "1970-01-01T00:00:01.200+00:00",
    }
    assert s.in_schedule(5000) and not s.in_schedule(4000) and s.last_window is None and s.windows is None
    r = ReleaseSchedule(size_ms=1000, origin_ms=5000, mode=REPLAY, until_ms=8000)
    assert r.last_window == 7000 and r.windows == 3 and r.in_schedule(7000) and not r.in_schedule(8000)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"size_ms": 0, "origin_ms": 0}, "size_ms"),
        ({"size_ms": 1000, "origin_ms": 10}, "window boundary"),
        ({"size_ms": 1000, "origin_ms": 0, "mode": "batch"}, "mode"),
        ({"size_ms": 1000, "origin_ms": 0, "mode": REPLAY}, "needs until_ms"),
        ({"size_ms": 1000, "origin_ms": 2000, "until_ms": 2000}, "until_ms"),
        ({"size_ms": 1000, "origin_ms": 0, "grace_ms": -1}, "grace_ms"),
    ],
)
def test_invalid_schedules_are_refused(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        ReleaseSchedule(**kwargs)


def test_live_acceptance_rules() -> None:
    """Live: counted iff the event time is inside the schedule and the band around the arrival, and
    the element arrived before its window's scheduled release; else the first failing reason."""
    s = ReleaseSchedule(
        size_ms=1000, origin_ms=1000, mode=LIVE, grace_ms=100, until_ms=9000, max_future_ms=2000, max_past_ms=500
    )
    cases = [  # (event, arrival, expected window or reason)
        (1500, 1500, 1000),
        (1999, 2099, 1000),
        (1999, 2100, "late"),
        (999, 999, "before_origin"),
        (9000, 9000, "after_until"),
        (4001, 2000, "too_far_ahead"),
        (4000, 2000, 4000),
        (2400, 2950, "too_far_behind"),
        (2450, 2950, 2000),
    ]
    starts, codes = s.accept(np.array([c[0] for c in cases]), np.array([c[1] for c in cases]))
    got = [int(w) if c < 0 else ELEMENT_REASONS[c] for w, c in zip(starts.tolist(), codes.tolist())]
    assert got == [c[2] for c in cases]


def test_replay_acceptance_ignores_arrival() -> None:
    """Replay: only the public range [origin, until) decides; arrival times do not matter."""
    s = ReleaseSchedule(size_ms=1000, origin_ms=1000, mode=REPLAY, until_ms=3000)
    starts, codes = s.accept(np.array([1000, 2999, 999, 3000, 1500]), np.array([10**12, 0, 0, 0, -5]))
    assert codes.tolist()[:2] == [-1, -1] and codes.tolist()[4] == -1 and starts.tolist()[4] == 1000
    assert [ELEMENT_REASONS[c] for c in codes.tolist()[2:4]] == ["before_origin", "after_until"]


_times = st.integers(min_value=0, max_value=40_000)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_times, _times), max_size=40),
    st.tuples(_times, _times),
    st.integers(0, 40),
    st.sampled_from([LIVE, REPLAY]),
)
def test_an_added_element_changes_nothing_for_the_others(stream, extra, at, mode) -> None:
    """For any stream X and any element e inserted anywhere, every element of X gets the same
    verdict and window in X + e as in X (no coupling, docs/ALGORITHMS.md §0.1 e)."""
    s = ReleaseSchedule(
        size_ms=1000, origin_ms=2000, mode=mode, grace_ms=300, until_ms=30_000, max_future_ms=5000, max_past_ms=2000
    )
    events, arrivals = np.array([e for e, _ in stream], np.int64), np.array([a for _, a in stream], np.int64)
    at = min(at, len(stream))
    plus_e = np.insert(events, at, extra[0]), np.insert(arrivals, at, extra[1])
    base = s.accept(events, arrivals)
    more = s.accept(*plus_e)
    keep = np.ones(len(stream) + 1, bool)
    keep[at] = False
    assert np.array_equal(more[0][keep], base[0]) and np.array_equal(more[1][keep], base[1])


def test_configuration_of_the_schedule() -> None:
    """window.* keys: times as epoch ms or ISO-8601, boundaries checked, a replay needs its range,
    old keys are refused with what replaced them."""
    assert parse_time_ms("2026-12-01T00:00:00Z", "x") == 1796083200000 == parse_time_ms(1796083200000, "x")
    assert parse_time_ms("2026-12-01T00:00:00", "x") == 1796083200000 and parse_time_ms("", "x") is None
    cfg = load_config(
        overrides=["window.mode=replay", "window.origin=2026-12-01T00:00:00Z", "window.until=2026-12-01T00:01:00Z"],
        environ={},
    )
    sched = cfg.schedule()
    assert (sched.mode, sched.origin_ms, sched.windows) == (REPLAY, 1796083200000, 6)
    assert load_config(environ={}).schedule(123_450_000).origin_ms == 123_450_000  # live: the stored origin
    for overrides, match in [
        (["window.mode=replay"], "needs window.origin and window.until"),
        (["window.origin=1234"], "window boundary"),
        (["window.origin=yesterday"], "ISO-8601"),
        (["window.origin=20000", "window.until=10000"], "must be after"),
        (["window.size_ms=1", "window.origin=0", "window.until=100001"], "at most 100000"),
        (["window.clock_tick_ms=0"], "clock_tick_ms"),
        (["kafka.bounded=true"], "window.mode = 'replay'"),
        (["window.allowed_lateness_ms=5"], "window.grace_ms"),
        (["window.out_of_orderness_ms=5"], "never on a watermark made from the data"),
    ]:
        with pytest.raises(ConfigError, match=match):
            load_config(overrides=overrides, environ={})


def test_until_and_the_clock_tick_do_not_change_the_deployment() -> None:
    """Extending a live schedule's end or the clock's tick keeps the deployment (its ledger and
    checkpoints); the origin, grace and bands are part of it."""
    base = load_config(environ={}).deployment_fingerprint()
    assert (
        load_config(
            overrides=["window.until=2000000000000", "window.clock_tick_ms=50"], environ={}
        ).deployment_fingerprint()
        == base
    )
    for changed in (["window.grace_ms=1"], ["window.origin=1000000000000"], ["window.max_future_ms=1"]):
        assert load_config(overrides=changed, environ={}).deployment_fingerprint() != base


def test_windows_due_at_a_start_counts_the_missed_windows() -> None:
    """A live job (re)started after a while owes a report for every window since its last one; dphhh run
    warns when that is many. Replays owe nothing up front."""
    from dphhh.stream.runner import windows_due

    s = ReleaseSchedule(1000, 10_000, grace_ms=0)
    assert windows_due(s, [], 10_999) == 0 and windows_due(s, [], 11_000) == 1
    assert windows_due(s, [10_000], 15_200) == 4  # windows 11000 .. 14000
    assert windows_due(ReleaseSchedule(1000, 10_000, grace_ms=500), [], 11_400) == 0  # not yet: end + grace
    assert windows_due(ReleaseSchedule(1000, 10_000, until_ms=12_000), [], 10**9) == 2
    assert windows_due(ReleaseSchedule(1000, 10_000, mode=REPLAY, until_ms=20_000), [], 10**9) == 0


def test_the_embedded_default_run_is_a_new_deployment_each_time() -> None:
    """`dphhh run` without --config gets its own ledger, checkpoints and group per run (no schedule owed
    from an earlier run)."""
    from dphhh.stream.cli.run import embedded_run_overrides

    first, second = (
        dict(o.split("=", 1) for o in embedded_run_overrides()),
        dict(o.split("=", 1) for o in embedded_run_overrides()),
    )
    for key in ("output.ledger_dir", "flink.checkpoint_dir", "kafka.group_id"):
        assert first[key] != second[key]
    load_config(overrides=embedded_run_overrides(), environ={})  # valid keys


_stamps = st.integers(min_value=0, max_value=12_000)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_stamps, _stamps, st.booleans()), max_size=30),
    st.tuples(_stamps, _stamps),
    st.integers(0, 30),
    st.sampled_from([LIVE, REPLAY]),
)
def test_a_batch_with_one_more_message_decides_the_others_alike(rows, extra, at, mode) -> None:
    """Through decode_batch itself (the job's code path, where lateness used to come from the
    watermark): for any batch X of JSON records (own time, arrival, some malformed) and one more
    record e anywhere in it, X + e yields X's windows with e's value added to its own window (or e's
    own dead letter), and exactly X's other dead letters."""
    from dphhh.connectors.decode import MessageDecoder
    from dphhh.stream.decode_batch import decode_batch
    from dphhh.stream.message_batch import pack_batch

    schedule = ReleaseSchedule(
        size_ms=1000, origin_ms=2000, mode=mode, grace_ms=200, until_ms=10_000, max_future_ms=2500, max_past_ms=1500
    )
    decoder = MessageDecoder("json", json_field="ip", json_time_field="t")

    def record(i: int, t: int, ok: bool) -> bytes:
        return (f'{{"ip": "10.0.{i // 256}.{i % 256}", "t": {t}}}' if ok else f'{{"t": {t}}}').encode()

    messages = [record(i, t, ok) for i, (t, _, ok) in enumerate(rows)]
    stamps = [a for _, a, _ in rows]
    e = f'{{"ip": "192.0.2.1", "t": {extra[0]}}}'.encode()
    at = min(at, len(rows))
    base = decode_batch(pack_batch(stamps, messages), decoder, schedule)
    more = decode_batch(
        pack_batch(stamps[:at] + [extra[1]] + stamps[at:], messages[:at] + [e] + messages[at:]), decoder, schedule
    )
    assert [d for d in more.dead if d[1] != e] == base.dead  # the others' dead letters, unchanged
    base_windows = {(start, epoch): values.tolist() for start, epoch, values, _, _ in base.windows}
    more_windows = {(start, epoch): values.tolist() for start, epoch, values, _, _ in more.windows}
    e_value = 0xC0000201
    own = [start for start, values in more_windows.items() if e_value in values]
    assert len(own) + sum(1 for d in more.dead if d[1] == e) == 1  # e counted once or dead-lettered
    for start in own:
        more_windows[start].remove(e_value)
        if not more_windows[start]:
            del more_windows[start]
    assert more_windows == base_windows  # every other element in the same window and epoch, in the same order


def test_due_through_and_count_due_agree_with_a_literal_enumeration() -> None:
    """The one rule of which windows are due (the release operator's timers and watermark, and the
    windows a restarted job owes): counted literally — every window of the schedule from ``next`` on
    whose end + grace is at or before ``t`` — over random schedules, clocks and restart points."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        size = int(rng.choice([1000, 5000, 10_000]))
        origin = size * int(rng.integers(0, 20))
        grace = int(rng.integers(0, 3 * size))
        until = None if rng.random() < 0.4 else origin + size * int(rng.integers(1, 15))
        s = ReleaseSchedule(size_ms=size, origin_ms=origin, grace_ms=grace, until_ms=until)
        t = int(rng.integers(0, origin + 25 * size))
        nxt = origin + size * int(rng.integers(-2, 12))
        last = until if until is not None else origin + 40 * size
        literal = [w for w in range(origin, last, size) if w >= nxt and w + size + grace <= t]
        assert s.count_due(nxt, t) == len(literal), (origin, size, grace, until, t, nxt)
        due = [w for w in range(origin, last, size) if w + size + grace <= t]
        if due:
            assert s.due_through(t) == due[-1]
        else:
            assert s.due_through(t) < origin
