"""Counting of skipped input records by reason.

Every input connector (capture files, text files) drops records it cannot use — a non-IPv4 packet,
a malformed address line — and reports *how many* it dropped and *why* through a
:class:`SkipCounter`. The counter only ever holds ``reason -> count``: it never sees or stores the
content of a skipped record, so it is safe to log or print.
"""

from __future__ import annotations

__all__ = ["SkipCounter"]


class SkipCounter:
    """A mapping ``reason -> number of skipped records`` that never stores record contents."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, reason: str, n: int = 1) -> None:
        """Count ``n`` (>= 0) more skipped records under ``reason``; ``n == 0`` records nothing."""
        if not isinstance(reason, str) or not reason:
            raise ValueError("skip reason must be a non-empty string")
        n = int(n)
        if n < 0:
            raise ValueError(f"skip count must be >= 0, got {n}")
        if n:
            self._counts[reason] = self._counts.get(reason, 0) + n

    def merge(self, other: SkipCounter) -> None:
        """Add all of ``other``'s counts into this counter (``other`` is left unchanged)."""
        for reason, n in other._counts.items():
            self.add(reason, n)

    def as_dict(self) -> dict[str, int]:
        """A copy of the counts as a dict whose keys are in sorted order."""
        return {reason: self._counts[reason] for reason in sorted(self._counts)}

    @property
    def total(self) -> int:
        """The number of skipped records over all reasons."""
        return sum(self._counts.values())

    def __getitem__(self, reason: str) -> int:
        """The count for ``reason`` (0 if nothing was skipped for it)."""
        return self._counts.get(reason, 0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SkipCounter):
            return NotImplemented
        return self._counts == other._counts

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SkipCounter({self.as_dict()!r})"
