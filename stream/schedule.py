"""The public release schedule and the per-element acceptance rule (docs/ALGORITHMS.md §0.1 d, e, g).

Windows are tumbling, ``size_ms`` long, aligned to multiples of ``size_ms`` since the epoch, and the
schedule covers every window from ``origin_ms`` on (up to ``until_ms``, exclusive, if set). The
origin is public: configured (``window.origin``) or the deployment's first start, stored in the
release ledger — an operator's act, never the time of a first element.

Two modes, both explicit in the configuration (``window.mode``):

* ``live``: an element's **arrival** is the broker's log-append time of its Kafka record (the
  input topic stores ``LogAppendTime``); its **event time** is its own time field if the format
  has one (``input.json_time_field``), else its arrival. Window W is released at its *scheduled
  time* ``end(W) + grace_ms`` by the broker's wall clock: the job's watermark advances only on the
  clock records that the job itself appends to every input partition (``stream.clock``), so it
  follows the wall clock whether or not data arrives, and replaying the log after a restore makes
  exactly the decisions the first run made. An element is counted in the window of its event time
  iff it arrived before that window's scheduled time; its event time must also lie within
  ``[arrival − max_past_ms, arrival + max_future_ms]`` and inside the schedule.
* ``replay``: a bounded job over the public range ``[origin_ms, until_ms)`` (backfills,
  benchmarks, tests with timestamps in the past). The event time is the element's own time field
  or its record timestamp; every element of the range is counted; every window of the range is
  released at end of input. No watermark is ever made from the data.

Every decision depends only on the element itself (its own times) and this public configuration:
whether another element exists never changes whether or where an element is counted (§0.1 e).
Rejected elements go to the dead-letter topic with one of :data:`ELEMENT_REASONS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from dphhh.sketches.errors import UsageError

__all__ = [
    "LIVE",
    "REPLAY",
    "MODES",
    "ELEMENT_REASONS",
    "MAX_SCHEDULE_WINDOWS",
    "ReleaseSchedule",
    "iso_ms",
    "suggested_publish_delay_ms",
]

LIVE, REPLAY = "live", "replay"
MODES = (LIVE, REPLAY)
#: Why a well-formed element is not counted (each a property of that element alone).
ELEMENT_REASONS = ("before_origin", "after_until", "too_far_ahead", "too_far_behind", "late")
#: The largest schedule a replay may span (windows); a bound on the reports one job can publish.
MAX_SCHEDULE_WINDOWS = 100_000

_ACCEPTED = -1  # reason code of a counted element


def suggested_publish_delay_ms(
    rate_per_s: float,
    *,
    sketches: int,
    counters: int,
    bundle_ms: int = 1000,
    clock_tick_ms: int = 100,
    epoch_ms: int = 100,
) -> int:
    """A ``window.publish_delay_ms`` a live deployment at ``rate_per_s`` elements/s (a public rate)
    can keep (docs/ALGORITHMS.md §0.1 g), from public settings only — an estimate for provisioning,
    not a guarantee (``reports_overdue`` counts the windows it missed):

    * the watermark's way to the release: one clock tick and the last epoch, and up to one Python
      bundle (``python.fn-execution.bundle.time``, 1 s) through each of the two keyed Python
      operators after ``decode`` (the sketches, the release);
    * the release's work: about 5 µs per counter of every sketch (noise draws, Algorithm 4);
    * the window's last epoch still to apply: about 2 µs per element on one core;

    with 25 % headroom, rounded up to a multiple of 500 ms."""
    base = 2 * bundle_ms + clock_tick_ms + epoch_ms
    work = sketches * counters * 0.005 + max(0.0, rate_per_s) * epoch_ms / 1000 * 0.002
    return int(-(-1.25 * (base + work) // 500) * 500)


def iso_ms(ms: int) -> str:
    """``ms`` (epoch milliseconds) as ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class ReleaseSchedule:
    """The public schedule: which windows exist, when each is released, which elements count.

    ``size_ms`` ≥ 1; ``origin_ms`` and ``until_ms`` (``None``: no end) are window boundaries
    (multiples of ``size_ms``) with ``until_ms > origin_ms``; ``grace_ms``, ``max_future_ms``,
    ``max_past_ms`` ≥ 0; ``mode`` is ``live`` or ``replay`` (a replay needs ``until_ms``)."""

    size_ms: int
    origin_ms: int
    mode: str = LIVE
    grace_ms: int = 0
    until_ms: int | None = None
    max_future_ms: int = 60_000
    max_past_ms: int = 60_000
    #: the public arrival interval whose elements a sketch takes together, in canonical order
    epoch_ms: int = 100
    #: live: a report becomes visible this long after its window's release time, on every surface
    publish_delay_ms: int = 0

    def __post_init__(self) -> None:
        def bad(name: str, detail: str) -> UsageError:
            return UsageError.of_parameter("ReleaseSchedule", name, detail)

        def whole(name: str, value: object, low: int) -> None:
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise bad(name, f"must be an integer >= {low}, got {value!r}")

        whole("size_ms", self.size_ms, 1)
        whole("epoch_ms", self.epoch_ms, 1)
        for name in ("grace_ms", "max_future_ms", "max_past_ms", "publish_delay_ms"):
            whole(name, getattr(self, name), 0)
        if self.mode not in MODES:
            raise bad("mode", f"must be 'live' or 'replay', got {self.mode!r}")
        if not isinstance(self.origin_ms, int) or self.origin_ms % self.size_ms:
            raise bad(
                "origin_ms",
                f"must be a window boundary (a multiple of size_ms = {self.size_ms}), got {self.origin_ms!r}",
            )
        if self.until_ms is None:
            if self.mode == REPLAY:
                detail = ": a replay needs until_ms (the end of its public range)"
                raise UsageError(
                    f"ReleaseSchedule{detail}", owner="ReleaseSchedule", parameter="until_ms", detail=detail
                )
            return
        if not isinstance(self.until_ms, int) or self.until_ms % self.size_ms or self.until_ms <= self.origin_ms:
            raise bad(
                "until_ms", f"must be a window boundary after the origin ({self.origin_ms}), got {self.until_ms!r}"
            )

    # --- windows -------------------------------------------------------------------------------

    def start_of(self, t_ms: int) -> int:
        """Start of the window holding ``t_ms``."""
        return t_ms - t_ms % self.size_ms

    def release_time(self, start: int) -> int:
        """The scheduled release time of the window starting at ``start``: its end + grace. The
        report's Kafka record timestamp, and the event-time timer of the operators."""
        return start + self.size_ms + self.grace_ms

    def publish_time(self, start: int) -> int:
        """When the window's report becomes visible (live: its release time + the public publication
        delay, docs/ALGORITHMS.md §0.1 g; a replay publishes every report at the end of its input)."""
        return self.release_time(start) + (self.publish_delay_ms if self.mode == LIVE else 0)

    def epoch_of(self, arrival_ms: np.ndarray) -> np.ndarray:
        """Start of the arrival epoch of each arrival time (int64 array; docs/ALGORITHMS.md §0 "Canonical order")."""
        a = np.asarray(arrival_ms, dtype=np.int64)
        return a - a % self.epoch_ms

    def start_of_release_time(self, release_time: int) -> int:
        """Inverse of :meth:`release_time`."""
        return release_time - self.grace_ms - self.size_ms

    def due_through(self, time_ms: int) -> int:
        """Start of the last window due at ``time_ms`` — the last whose release time (end + grace) is
        at or before it — capped at the schedule's last window. Windows from the next unreleased one up
        to this are due (none when it is smaller). The one rule for the release operator's timers and
        watermark (docs/ALGORITHMS.md §0.1 a) and for counting the windows a restarted job owes."""
        last, final = self.start_of(time_ms - self.grace_ms) - self.size_ms, self.last_window
        return last if final is None else min(last, final)

    def count_due(self, next_start: int, time_ms: int) -> int:
        """How many windows from ``next_start`` (the next unreleased one) on are due at ``time_ms``."""
        return max(0, (self.due_through(time_ms) - max(next_start, self.origin_ms)) // self.size_ms + 1)

    @property
    def last_window(self) -> int | None:
        """Start of the schedule's last window (``None``: the schedule has no end)."""
        return None if self.until_ms is None else self.until_ms - self.size_ms

    @property
    def windows(self) -> int | None:
        """Number of windows in the schedule (``None``: no end)."""
        return None if self.until_ms is None else (self.until_ms - self.origin_ms) // self.size_ms

    def in_schedule(self, start: int) -> bool:
        """Whether the window starting at ``start`` belongs to the schedule."""
        return start >= self.origin_ms and (self.until_ms is None or start < self.until_ms)

    def describe(self, start: int) -> dict[str, object]:
        """The report's ``window`` block: boundaries and scheduled release time (all public)."""
        end, release = start + self.size_ms, self.release_time(start)
        return {
            "kind": "tumbling",
            "start_ms": start,
            "end_ms": end,
            "start": iso_ms(start),
            "end": iso_ms(end),
            "release_ms": release,
            "release": iso_ms(release),
        }

    # --- acceptance ------------------------------------------------------------------------------

    def accept(self, event_ms: np.ndarray, arrival_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per element: (window start, reason code); code −1 = counted, else an index into
        :data:`ELEMENT_REASONS`. ``event_ms``/``arrival_ms``: int64 arrays of equal length (the
        event time, and the record's timestamp — the arrival in live mode)."""
        t = np.asarray(event_ms, dtype=np.int64)
        a = np.asarray(arrival_ms, dtype=np.int64)
        starts = t - t % self.size_ms
        code = np.full(t.shape, _ACCEPTED, dtype=np.int64)

        def reject(mask: np.ndarray, reason: str) -> None:
            code[(code == _ACCEPTED) & mask] = ELEMENT_REASONS.index(reason)

        reject(t < self.origin_ms, "before_origin")
        if self.until_ms is not None:
            reject(t >= self.until_ms, "after_until")
        if self.mode == LIVE:
            reject(t > a + self.max_future_ms, "too_far_ahead")
            reject(t < a - self.max_past_ms, "too_far_behind")
            reject(a >= starts + self.size_ms + self.grace_ms, "late")
        return starts, code
