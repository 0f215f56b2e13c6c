"""Tumbling event-time windows: assignment, release time and lateness (spec §0).

A window ``[start, start + size)`` is released once the watermark reaches
``start + size − 1 + allowed_lateness`` (its *release time*, the event-time timer of the
operators). An element whose window's release time is already at or below the watermark is
**late**: it is dropped and counted, never added to a released window (a released window is never
re-fired).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = ["TumblingWindows", "MAX_WATERMARK"]

MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True)
class TumblingWindows:
    """Window arithmetic for windows of ``size_ms`` with ``allowed_lateness_ms``."""

    size_ms: int
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.size_ms, int) or self.size_ms < 1:
            raise ValueError(f"TumblingWindows: size_ms must be an integer >= 1, got {self.size_ms!r}")
        if not isinstance(self.allowed_lateness_ms, int) or self.allowed_lateness_ms < 0:
            raise ValueError(
                f"TumblingWindows: allowed_lateness_ms must be an integer >= 0, got {self.allowed_lateness_ms!r}"
            )

    def start_of(self, timestamp_ms: int) -> int:
        """Start of the window holding ``timestamp_ms``."""
        return timestamp_ms - timestamp_ms % self.size_ms

    def release_time(self, start: int) -> int:
        """Event-time timer of the window starting at ``start``."""
        return start + self.size_ms - 1 + self.allowed_lateness_ms

    def start_of_release_time(self, release_time: int) -> int:
        """Inverse of :meth:`release_time`."""
        return release_time - self.allowed_lateness_ms - self.size_ms + 1

    def is_late(self, start: int, watermark: int) -> bool:
        """True when the window starting at ``start`` is already released at ``watermark``."""
        return self.release_time(start) <= watermark

    def describe(self, start: int) -> dict[str, object]:
        """The report's ``window`` block (public: boundaries only)."""
        end = start + self.size_ms

        def iso(ms: int) -> str:
            return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")

        return {"kind": "tumbling", "start_ms": start, "end_ms": end, "start": iso(start), "end": iso(end)}
