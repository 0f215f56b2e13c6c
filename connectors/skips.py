"""Counting of skipped input records by reason, and which of those counts may be shown.

Every input connector (capture files, text files, snapshot csv/JSON lines) drops records it cannot
use and reports *how many* it dropped and *why* through a :class:`SkipCounter`. The counter only
ever holds ``reason -> count``: it never sees or stores the content of a skipped record.

Two kinds of skipped record (docs/ALGORITHMS.md §0.1 f)
------------------------------------------

A count of records is data unless the records are not elements at all. Every reason is therefore
in exactly one of two classes:

**Unparsable** (:data:`UNPARSABLE`): the record does not hold an element of any kind — it is not
text, not an address, not a row, not a number. Their counts are *operational*: a command may print
them on **stderr only**, on one line labelled "operational, not private"
(:meth:`SkipCounter.operational_line`), never inside a report or a snapshot document.

* ``invalid_utf8`` — a text line that is not valid UTF-8;
* ``line_too_long`` — a text line over the reader's size limit (not read);
* ``bad_ipv4`` — not a dotted quad, and not an IPv6 address either;
* ``bad_ipv6`` — not an IPv6 address, and not a dotted quad either (zone ids such as
  ``fe80::1%eth0`` are outside the IPv6 grammar);
* ``bad_path_empty_component`` — a malformed path (empty line, ``a//b``, leading ``/``);
* ``bad_path_too_long`` — a path over the reader's length limit (4096 characters);
* ``bad_int`` — not an integer literal of ASCII digits (``http``, ``4.5``, ``true``, empty);
* ``bad_csv_row`` / ``bad_json`` — a row the csv / JSON parser rejects;
* ``missing_column`` — a row or object without the requested column / field;
* ``truncated`` — a captured packet cut before the IPv4 address(es) it is read for;
* ``corrupt_file_tail`` — the unreadable rest of a damaged capture file;
* ``empty``, ``oversized``, ``bad_length``, ``missing_field``, ``bad_time``, ``missing_unit`` —
  stream messages without a decodable element, a required field, a readable time or a
  privacy-unit key (the message formats of :mod:`dphhh.connectors.messages`);
* ``bad_address``, ``bad_counter``, ``counter_too_large`` — a flow-JSON record whose key field is
  no IP address, or whose ``packets`` / ``bytes`` are not non-negative integers (or ``bytes <
  packets``) or exceed the decoder's sanity bound (:mod:`dphhh.connectors.flow_json`, which also uses
  ``empty``, ``oversized``, ``invalid_utf8``, ``bad_json``, ``missing_field``, ``bad_time`` and,
  excluded, ``wrong_family``).

**Excluded** (:data:`EXCLUDED`): the record is a valid record — somebody's data — that is not an
element of *this* run. Its count is as private as any other count of elements and is **never
printed** (not in reports, snapshot output, stderr, nor exceptions):

* ``not_ipv4`` — a well-formed packet of another protocol (IPv6, ARP, ...);
* ``unsupported_linktype`` — a packet of a link type the capture reader cannot decode (an
  802.11 interface's, say), or a pcapng packet naming an interface that was never defined
  (``unknown_interface``): either may carry an IPv4 element the reader cannot see;
* ``truncated_header`` — an IPv4 packet cut inside its 20-byte header but after the address(es) it
  is read for: left out (its header is not whole), but it may be somebody's element;
* ``wrong_family`` — a valid IPv6 address in an IPv4 run, or a valid dotted quad in an IPv6 run
  (also a flow record of the other family, :mod:`dphhh.connectors.flow_json`);
* ``zero_weight`` — a valid flow record of 0 packets or bytes in a run weighted by them;
* ``bad_path_depth`` / ``bad_path_too_deep`` — a well-formed path with another number of
  components than the hierarchy's;
* ``out_of_domain`` — a valid value outside a public ``--domain`` (the snapshot modules clamp or
  drop these without even counting them).
* ``unusable_record`` — a flow-JSON record of a file that the run cannot use but that may hold an
  element (its key field is an IP address; its counters, time or size are bad; or its line is too
  long to read): somebody's record, as in the stream, whose dead-letter counters leave it out.

A reason in neither list is treated as excluded (fail closed: an unknown count is not shown).
"""

from __future__ import annotations

from dphhh.sketches.errors import InputError, UsageError

__all__ = ["SkipCounter", "UNPARSABLE", "EXCLUDED", "is_unparsable", "NoReadableInput", "no_readable_message"]

#: Reasons for records that hold no element: their counts are operational (stderr only).
UNPARSABLE = frozenset(
    {
        "invalid_utf8",
        "line_too_long",
        "bad_ipv4",
        "bad_ipv6",
        "bad_pair",
        "bad_path_empty_component",
        "bad_path_too_long",
        "bad_int",
        "bad_csv_row",
        "bad_json",
        "missing_column",
        "truncated",
        "corrupt_file_tail",
        "empty",
        "oversized",
        "bad_length",
        "missing_field",
        "bad_time",
        "missing_unit",
        "bad_address",
        "bad_counter",
        "counter_too_large",
    }
)

#: Reasons for valid records that are not elements of this run: their counts are never shown.
EXCLUDED = frozenset(
    {
        "not_ipv4",
        "wrong_family",
        "zero_weight",
        "bad_path_depth",
        "bad_path_too_deep",
        "out_of_domain",
        "unusable_record",
        "unsupported_linktype",
        "unknown_interface",
        "truncated_header",
    }
)


def is_unparsable(reason: str) -> bool:
    """True iff ``reason`` is in :data:`UNPARSABLE` (an unknown reason is not: fail closed)."""
    return reason in UNPARSABLE


class NoReadableInput(InputError):
    """The input held no element of the requested kind (every record was skipped, or it was empty)."""


def no_readable_message(path: object, skips: SkipCounter, hint: str = "") -> str:
    """The message of :class:`NoReadableInput` for ``path``: it never names a count.

    ``hint`` is a static, data-independent suggestion (e.g. which ``--hierarchy`` reads IPv6).
    When some records were unparsable the message points at the operational line printed before
    it (:meth:`SkipCounter.operational_line`), which is where their count is.
    """
    parts = ["the file is empty or every record was skipped"]
    if skips.unparsable():
        parts.append("unparsable records: see the operational line above")
    if hint:
        parts.append(hint)
    return f"input: no readable record in {path} ({'; '.join(parts)})"


class SkipCounter:
    """A mapping ``reason -> number of skipped records`` that never stores record contents.

    :meth:`as_dict` and :attr:`total` cover every reason and are for internal use (tests,
    non-private evaluation output); anything a private command shows goes through
    :meth:`unparsable` / :meth:`operational_line`, which leave the excluded reasons out.
    """

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, reason: str, n: int = 1) -> None:
        """Count ``n`` (>= 0) more skipped records under ``reason``; ``n == 0`` records nothing."""
        if not isinstance(reason, str) or not reason:
            raise UsageError("SkipCounter: skip reason must be a non-empty string")
        n = int(n)
        if n < 0:
            raise UsageError(f"SkipCounter: skip count must be >= 0, got {n}")
        if n:
            self._counts[reason] = self._counts.get(reason, 0) + n

    def merge(self, other: SkipCounter) -> None:
        """Add all of ``other``'s counts into this counter (``other`` is left unchanged)."""
        for reason, n in other._counts.items():
            self.add(reason, n)

    def as_dict(self) -> dict[str, int]:
        """A copy of all the counts (excluded reasons included) as a dict in sorted key order."""
        return {reason: self._counts[reason] for reason in sorted(self._counts)}

    def unparsable(self) -> dict[str, int]:
        """The counts of the :data:`UNPARSABLE` reasons only, in sorted key order."""
        return {reason: n for reason, n in self.as_dict().items() if is_unparsable(reason)}

    def operational_line(self, who: str) -> str | None:
        """``"<who>: operational, not private: N unparsable records skipped (reason=n, ...)"``, or
        ``None`` when no record was unparsable. Excluded reasons never appear in it."""
        counts = self.unparsable()
        if not counts:
            return None
        total = sum(counts.values())
        detail = ", ".join(f"{reason}={n}" for reason, n in counts.items())
        noun = "record" if total == 1 else "records"
        return f"{who}: operational, not private: {total} unparsable {noun} skipped ({detail})"

    @property
    def total(self) -> int:
        """The number of skipped records over all reasons (internal: excluded reasons included)."""
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
