"""Flow-JSON records — the JSON that flow collectors publish to Kafka — decoded in batches.

One record is one flow as a collector publishes it: one JSON object per Kafka message (or per
line of a JSON-lines file). Two schemas (``input.flow_schema``):

``pmacct``  nfacctd / sfacctd's kafka plugin (``kafka_output: json``), e.g. as published by
            Debian's pmacct 1.7.7 fed by softflowd over IPFIX (``deploy/flow-pipeline.sh``)::

                {"event_type": "purge", "ip_src": "192.0.2.10", "ip_dst": "198.51.100.7",
                 "port_src": 5353, "port_dst": 53, "ip_proto": "udp",
                 "timestamp_start": "2026-11-30 01:55:00.250000",
                 "timestamp_end": "2026-11-30 01:55:00.370000", "packets": 3, "bytes": 204,
                 "writer_id": "flows/3250"}

            Key ``ip_src`` / ``ip_dst``; counters ``packets``, ``bytes``; event time the first
            present, non-zero one of ``timestamp_start``, ``timestamp_end``,
            ``timestamp_arrival``, ``stamp_inserted`` (pmacct writes
            ``0000-00-00 00:00:00.000000`` for a time the exporter did not send). The time
            formats pmacct publishes, all accepted:

            * ``2026-11-30 01:55:00.250000`` — the default. pmacct writes the collector's
              **local** time without a zone unless ``timestamps_utc: true`` (which
              flow-pipeline.sh sets); a zone-less time is read as UTC;
            * ``2026-11-30 01:55:00`` — ``stamp_inserted`` / ``stamp_updated`` (``kafka_history``);
            * ``2026-11-30T01:55:00.250000Z`` or ``2026-11-30T02:55:00.250000+01:00`` —
              ``timestamps_rfc3339: true``, with or without ``timestamps_utc``;
            * ``"1796003700.250000"`` (a string; an integer is read the same) —
              ``timestamps_since_epoch: true``: seconds since the epoch.

            Any 1-9 fraction digits are read (to the millisecond, truncated).

``goflow2`` goflow2 v2's ``-format json`` (snake_case protobuf names, times in nanoseconds)::

                {"type": "IPFIX", "time_received_ns": 1796128258296754607, ...,
                 "time_flow_start_ns": 1796003700280000000, "bytes": 448, "packets": 4,
                 "src_addr": "2001:db8:1::10", "dst_addr": "2001:db8:2::20", "etype": "IPv6", ...}

            Key ``src_addr`` / ``dst_addr``; counters ``packets``, ``bytes``; event time
            ``time_flow_start_ns``, else ``time_received_ns`` (when the flow time is 0 or
            absent). goflow2 v1's CamelCase names (``SrcAddr``, ``DstAddr``, ``Packets``,
            ``Bytes``, ``TimeFlowStartNs``, ``TimeReceivedNs``) are read too.

Options: ``key`` = ``src`` | ``dst`` (``input.flow_key``: which address the hierarchy is over);
``weight`` = ``packets`` | ``bytes`` | ``records`` (``input.flow_weight``; ``records`` weighs
each flow record 1); ``family`` = ``ipv4`` | ``ipv6`` | ``both`` (a record of the other family
is rejected as ``wrong_family``, an *excluded* reason, see :mod:`dphhh.connectors.skips`).

Output (:class:`FlowBatch`): one reason per input record (``None`` = decoded), and per family the
decoded records' input positions, keys (IPv4: ``uint32`` host integers as in
:mod:`dphhh.connectors.decode`; IPv6: ``(hi, lo)`` ``uint64`` halves as in
:class:`dphhh.sketches.hierarchy.IPv6Hierarchy`), weights (``int64``) and event times (``int64``
epoch milliseconds; ``-1`` when the record holds no time: the caller then uses the Kafka
record's timestamp, as for the ``json`` format).

Reasons, checked in this order (the first that applies; never any record content):

* ``empty`` (no bytes), ``oversized`` (over ``max_record_bytes``, default 64 KiB);
* ``invalid_utf8``; ``bad_json`` (not JSON, or not an object — e.g. pmacct's
  ``kafka_multi_values``, several objects in one message, is not supported);
* ``missing_field`` — the key address, ``packets`` or ``bytes`` is absent or ``null``;
* ``bad_counter`` — ``packets`` or ``bytes`` is not a JSON integer (``4.5``, ``4.0``, ``"4"``,
  ``true``) or is negative;
* ``counter_too_large`` — ``packets`` or ``bytes`` over ``max_counter``, by default
  :data:`MAX_COUNTER` = 2**48 (2.8e14): 281 TB in one flow record is 400 Gb/s sustained for 94
  minutes, beyond the active timeouts exporters flush records at (minutes); the bound also keeps
  sums of up to 2**15 records within int64. It is a sanity check on the input, not a privacy
  bound: what weight one element may carry in a DP release is the job's business;
* ``bad_counter`` again for ``bytes < packets`` (a packet has at least one byte), checked once
  both counters are known to be in range;
* ``bad_address`` — the key field is not a string holding a dotted quad or an IPv6 address
  (zone ids such as ``fe80::1%eth0`` are not addresses);
* ``wrong_family`` — a valid address of the other family (``family`` = ``ipv4`` or ``ipv6``);
* ``bad_time`` — the time field is not a time in a format above, or not after the epoch (with
  ``require_time=True`` a record with no time at all is also ``bad_time``);
* ``zero_weight`` — a valid record whose weight (``packets`` or ``bytes``, when the decoder weights
  by one of them) is 0: it carries nothing to count, and a sketch takes weights >= 1 only
  (exporters do emit such records, e.g. for flows whose packets were all sampled away).

JSON is parsed with orjson (2-3x the whole decoder's speed with the standard library's parser,
see tests/connectors/bench_flow_json.py) and falls back to :mod:`json` when orjson is missing or
rejects a record, so the reasons do not depend on the parser: orjson refuses ``NaN`` and invalid
UTF-8, which the fallback classifies, and reads an integer beyond 64 bits as a float, which is
re-read with :mod:`json` (``counter_too_large``, not ``bad_counter``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dphhh.sketches.errors import UsageError

from .skips import SkipCounter, is_unparsable
from .text import iter_text_lines, may_hold_address, parse_ipv4_each

_fast_loads: Callable[[bytes | str], Any]
try:  # pragma: no cover - exercised through whichever is installed
    import orjson as _orjson

    _fast_loads = _orjson.loads
except ImportError:  # pragma: no cover
    _fast_loads = json.loads

__all__ = [
    "FlowPairs",
    "decode_pairs",
    "SCHEMAS",
    "KEYS",
    "WEIGHTS",
    "FAMILIES",
    "REASONS",
    "MAX_COUNTER",
    "FlowColumns",
    "FlowBatch",
    "FlowJsonDecoder",
    "split_json_lines",
    "iter_flow_file",
]

SCHEMAS = ("pmacct", "goflow2")
KEYS = ("src", "dst")
WEIGHTS = ("packets", "bytes", "records")
FAMILIES = ("ipv4", "ipv6", "both")
#: Every reason :class:`FlowJsonDecoder` gives, in the order they are checked.
REASONS = (
    "empty",
    "oversized",
    "invalid_utf8",
    "bad_json",
    "missing_field",
    "bad_counter",
    "counter_too_large",
    "bad_address",
    "wrong_family",
    "bad_time",
    "zero_weight",
)
#: Default bound on ``packets`` and ``bytes`` (see the module docstring).
MAX_COUNTER = 1 << 48

# Field names: (primary, alternative) per role; the alternative is goflow2 v1's CamelCase.
_FIELDS: dict[str, dict[str, tuple[Any, ...]]] = {  # "time": the time fields, in order
    "pmacct": {
        "src": ("ip_src", None),
        "dst": ("ip_dst", None),
        "packets": ("packets", None),
        "bytes": ("bytes", None),
        "time": ("timestamp_start", "timestamp_end", "timestamp_arrival", "stamp_inserted"),
    },
    "goflow2": {
        "src": ("src_addr", "SrcAddr"),
        "dst": ("dst_addr", "DstAddr"),
        "packets": ("packets", "Packets"),
        "bytes": ("bytes", "Bytes"),
        "time": ("time_flow_start_ns", "TimeFlowStartNs", "time_received_ns", "TimeReceivedNs"),
    },
}
# How pmacct writes a time the exporter did not send (treated as absent: the next field is tried).
_ZERO_TIMES = frozenset(
    {
        0,
        "0",
        "0.000000",
        "0000-00-00 00:00:00.000000",
        "0000-00-00 00:00:00",
        "0000-00-00T00:00:00.000000Z",
        "0000-00-00T00:00:00Z",
        "0000-00-00T00:00:00.000000",
    }
)
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
_MAX_NS = (1 << 63) - 1
_EPOCH_RE = re.compile(r"([0-9]{1,12})(?:\.([0-9]{1,9}))?")
_BAD_TIME = object()  # a time value of the wrong JSON type (resolved after the address checks)
_LO_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class FlowColumns:
    """The decoded records of one address family, in input order.

    ``index``: int64 position of each record in the input; ``keys``: family 4 a uint32 array,
    family 6 a ``(hi, lo)`` pair of uint64 arrays; ``weights`` and ``event_ms``: int64 (``-1`` =
    the record holds no time)."""

    family: int
    index: np.ndarray
    keys: Any
    weights: np.ndarray
    event_ms: np.ndarray

    def __len__(self) -> int:
        return int(self.index.shape[0])


@dataclass(frozen=True)
class FlowBatch:
    """``reasons[i]`` is ``None`` for a decoded record, else why record ``i`` is bad; the decoded
    records are in :attr:`ipv4` and :attr:`ipv6` (empty for a family not asked for)."""

    reasons: list[str | None]
    ipv4: FlowColumns
    ipv6: FlowColumns

    @property
    def ok(self) -> np.ndarray:
        """Bool per input record: decoded (in one of the families)."""
        return np.fromiter((r is None for r in self.reasons), dtype=bool, count=len(self.reasons))

    @property
    def counts(self) -> np.ndarray:
        """int64 per input record: 1 if decoded, else 0 (as :class:`dphhh.connectors.decode.DecodedBatch`)."""
        return self.ok.astype(np.int64)

    def dead_letters(self) -> list[tuple[int, str]]:
        """``(input position, reason)`` of every bad record, in input order."""
        return [(i, r) for i, r in enumerate(self.reasons) if r is not None]


def _empty_columns(family: int) -> FlowColumns:
    keys: Any = (np.empty(0, np.uint64), np.empty(0, np.uint64)) if family == 6 else np.empty(0, np.uint32)
    return FlowColumns(family, np.empty(0, np.int64), keys, np.empty(0, np.int64), np.empty(0, np.int64))


class FlowJsonDecoder:
    """Decodes flow-JSON records of one schema; validated at construction.

    ``time_fields`` replaces the schema's list of event-time fields (first present, non-zero
    one wins); ``require_time`` makes a record without any time ``bad_time`` instead of ``-1``.
    """

    def __init__(
        self,
        schema: str = "pmacct",
        *,
        key: str = "src",
        weight: str = "packets",
        family: str = "ipv4",
        max_counter: int = MAX_COUNTER,
        max_record_bytes: int = 1 << 16,
        time_fields: tuple[str, ...] | None = None,
        require_time: bool = False,
    ) -> None:
        if schema not in SCHEMAS:
            raise UsageError(f"FlowJsonDecoder: schema must be one of {', '.join(SCHEMAS)}, got {schema!r}")
        if key not in KEYS:
            raise UsageError(f"FlowJsonDecoder: key must be one of {', '.join(KEYS)}, got {key!r}")
        if weight not in WEIGHTS:
            raise UsageError(f"FlowJsonDecoder: weight must be one of {', '.join(WEIGHTS)}, got {weight!r}")
        if family not in FAMILIES:
            raise UsageError(f"FlowJsonDecoder: family must be one of {', '.join(FAMILIES)}, got {family!r}")
        if isinstance(max_counter, bool) or not isinstance(max_counter, int) or not 1 <= max_counter < (1 << 62):
            raise UsageError(f"FlowJsonDecoder: max_counter must be an integer in 1 .. 2**62-1, got {max_counter!r}")
        if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int) or max_record_bytes < 16:
            raise UsageError(f"FlowJsonDecoder: max_record_bytes must be an integer >= 16, got {max_record_bytes!r}")
        fields = _FIELDS[schema]
        if time_fields is None:
            time_fields = fields["time"]
        elif isinstance(time_fields, str) or not time_fields or not all(isinstance(f, str) and f for f in time_fields):
            raise UsageError(
                f"FlowJsonDecoder: time_fields must be a non-empty sequence of field names, got {time_fields!r}"
            )
        self.schema = schema
        self.key = key
        self.weight = weight
        self.family = family
        self.max_counter = max_counter
        self.max_record_bytes = max_record_bytes
        self.time_fields = tuple(time_fields)
        self.require_time = bool(require_time)
        self._key_field, self._key_alt = fields[key]
        self._packets_field, self._packets_alt = fields["packets"]
        self._bytes_field, self._bytes_alt = fields["bytes"]

    # ------------------------------------------------------------------------------------------
    def decode_many(self, values: Sequence[bytes | str | None]) -> FlowBatch:
        """Decode many records (Kafka message values or lines); never raises for bad content.

        Column by column when every record of the batch parses to a JSON object of the right
        size (:meth:`_decode_columns`: one pass per field over the whole batch, checks on numpy
        arrays, the per-record rules only for the records those checks refuse), else record by
        record (:meth:`decode_each`). Both give the same :class:`FlowBatch` for every input
        (``tests/connectors/test_flow_json.py`` compares them on mixed and fuzzed batches).
        """
        if len(values) >= _COLUMNAR_MIN:
            out = self._decode_columns(values)
            if out is not None:
                return out
        return self.decode_each(values)

    def _decode_columns(self, values: Sequence[bytes | str | None]) -> FlowBatch | None:
        """The columnar path, or ``None`` when a record is empty, oversized, not JSON or not an
        object (then the caller decodes record by record, which gives those their reasons).

        One pass parses each record and keeps only its key, counters and first time field (a
        batch of whole parsed objects alive at once costs more than the parse: goflow2's records
        have 40 fields); a record whose first time is absent or zero is parsed again for the
        later time fields."""
        n = len(values)
        kf, ka = self._key_field, self._key_alt
        pf, pa = self._packets_field, self._packets_alt
        bf, ba = self._bytes_field, self._bytes_alt
        t0 = self.time_fields[0]
        loads = _fast_loads
        records = cast("Sequence[bytes | str]", values)  # a None among them raises TypeError below
        rows: list[tuple[Any, ...]]
        try:
            sizes = list(map(len, records))  # TypeError for a None value
            if min(sizes) == 0 or max(sizes) > self.max_record_bytes:
                return None
            # AttributeError for a JSON value that is not an object (only dict has .get)
            if ka is None:
                rows = [(o.get(kf), o.get(pf), o.get(bf), o.get(t0)) for o in map(loads, records)]
            else:
                rows = [
                    (o.get(kf), o.get(pf), o.get(bf), o.get(t0), o.get(ka), o.get(pa), o.get(ba))
                    for o in map(loads, records)
                ]
        except Exception:  # a value that is None, not JSON, invalid UTF-8, not an object, ...
            return None
        cols = list(zip(*rows))
        del rows
        a, p, b, times = list(cols[0]), cols[1], cols[2], list(cols[3])
        if ka is not None:  # goflow2 v1's CamelCase names where the v2 ones are absent or null
            if None in a:
                a = [x if x is not None else y for x, y in zip(a, cols[4])]
            if None in p:
                p = tuple(x if x is not None else y for x, y in zip(p, cols[5]))
            if None in b:
                b = tuple(x if x is not None else y for x, y in zip(b, cols[6]))
        top = self.max_counter
        arrays = None
        if set(map(type, a)) == _STR_ONLY and set(map(type, p)) == _INT_ONLY and set(map(type, b)) == _INT_ONLY:
            try:
                pk = np.array(p, dtype=np.int64)
                by = np.array(b, dtype=np.int64)
            except OverflowError:  # beyond int64: counter_too_large, found record by record below
                ok = np.fromiter((0 <= y <= z <= top for y, z in zip(p, b)), dtype=bool, count=n)
            else:
                ok = (pk >= 0) & (pk <= by) & (by <= top)
                arrays = (pk, by)
        else:
            ok = np.fromiter(
                (
                    x.__class__ is str and y.__class__ is int and z.__class__ is int and 0 <= y <= z <= top
                    for x, y, z in zip(a, p, b)
                ),
                dtype=bool,
                count=n,
            )
        reasons: list[str | None] = [None] * n
        packets: np.ndarray | Sequence[int]
        nbytes: np.ndarray | Sequence[int]
        if not ok.all():
            # the records refused: their reasons exactly as the record-by-record path gives them
            for i in np.flatnonzero(~ok).tolist():
                reasons[i] = self.decode_each([values[i]]).reasons[0]
            where = np.flatnonzero(ok)
            keep = where.tolist()
            a = [a[i] for i in keep]
            times = [times[i] for i in keep]
            if arrays is not None:
                packets, nbytes = arrays[0][where], arrays[1][where]
            else:
                packets, nbytes = [p[i] for i in keep], [b[i] for i in keep]
        else:
            keep = list(range(n))
            packets, nbytes = arrays if arrays is not None else (p, b)
        if not (set(map(type, times)) <= _TIME_TYPES and _ZERO_TIMES.isdisjoint(times)):
            # absent, zero or mistyped first times: the whole chain, on the record parsed again
            for j, t in enumerate(times):
                if not _is_time(t):
                    times[j] = _time_chain(loads(values[keep[j]]), self.time_fields)
        return self._finish(reasons, keep, a, packets, nbytes, times)

    def decode_each(self, values: Sequence[bytes | str | None]) -> FlowBatch:
        """Decode record by record (the reference for :meth:`decode_many`'s columnar path)."""
        n = len(values)
        reasons: list[str | None] = [None] * n
        where: list[int] = []
        addrs: list[str] = []
        packets: list[int] = []
        nbytes: list[int] = []
        times: list[Any] = []
        loads = _fast_loads
        kf, ka = self._key_field, self._key_alt
        pf, pa = self._packets_field, self._packets_alt
        bf, ba = self._bytes_field, self._bytes_alt
        chain = self.time_fields
        t0 = chain[0]
        top = self.max_counter
        limit = self.max_record_bytes
        for i, raw in enumerate(values):
            if not raw:
                reasons[i] = "empty"
                continue
            if len(raw) > limit:
                reasons[i] = "oversized"
                continue
            try:
                obj = loads(raw)
            except Exception:  # orjson.JSONDecodeError / ValueError / TypeError (not bytes or str)
                obj, why = _slow_loads(raw)
                if why is not None:
                    reasons[i] = why
                    continue
            if obj.__class__ is not dict:
                reasons[i] = "bad_json"
                continue
            a = obj.get(kf)
            p = obj.get(pf)
            b = obj.get(bf)
            if ka is not None:
                if a is None:
                    a = obj.get(ka)
                if p is None:
                    p = obj.get(pa)
                if b is None:
                    b = obj.get(ba)
            if p.__class__ is not int or b.__class__ is not int or not 0 <= p <= b <= top or a.__class__ is not str:
                if (p.__class__ is float or b.__class__ is float) and loads is not json.loads:
                    # orjson reads an integer beyond 64 bits as a float: ask the standard library
                    exact = _slow_loads(raw)[0]
                    if exact.__class__ is dict:
                        a, p, b = self._fields(exact)
                reasons[i] = self._record_reason(a, p, b)
                continue
            t = obj.get(t0)
            if not _is_time(t):  # absent, zero or mistyped: the whole chain decides
                t = _time_chain(obj, chain)
            where.append(i)
            addrs.append(a)
            packets.append(p)
            nbytes.append(b)
            times.append(t)
        return self._finish(reasons, where, addrs, packets, nbytes, times)

    def holds_element(self, value: bytes | str | None) -> bool:
        """Whether a record this decoder refused may still hold an element: its key field is an
        IP address (either family), whatever its counters, time or size. A refused record is
        counted in a public metric only when this is False (docs/ALGORITHMS.md §0.1 f); when in
        doubt the answer is True."""
        if not value:
            return False
        if len(value) > self.max_record_bytes:
            return True  # not parsed: it may hold one
        obj, reason = _slow_loads(value, ints_as_text=True)  # a counter of any length: the key decides
        if reason is not None:  # unreadable (invalid UTF-8, malformed JSON): it may still hold one
            return may_hold_address(value.encode() if isinstance(value, str) else value)
        if not isinstance(obj, dict):
            return False
        a = obj.get(self._key_field)
        if a is None and self._key_alt is not None:
            a = obj.get(self._key_alt)
        if not isinstance(a, str):
            return False
        return bool(parse_ipv4_each([a])[1].all()) or _ipv6_int(a) is not None

    def decode(self, value: bytes | str | None) -> FlowBatch:
        """Decode one record (a batch of one)."""
        return self.decode_many([value])

    # ------------------------------------------------------------------------------------------
    def _fields(self, obj: dict) -> tuple[Any, Any, Any]:
        """(key, packets, bytes) of a parsed record, alternative names included."""
        out = []
        for main, alt in (
            (self._key_field, self._key_alt),
            (self._packets_field, self._packets_alt),
            (self._bytes_field, self._bytes_alt),
        ):
            v = obj.get(main)
            if v is None and alt is not None:
                v = obj.get(alt)
            out.append(v)
        return out[0], out[1], out[2]

    def _record_reason(self, a: Any, p: Any, b: Any) -> str:
        """Why a parsed object with key ``a`` and counters ``p``, ``b`` is bad (the slow path)."""
        if a is None or p is None or b is None:
            return "missing_field"
        for c in (p, b):
            if c.__class__ is not int or c < 0:
                return "bad_counter"
        if p > self.max_counter or b > self.max_counter:
            return "counter_too_large"
        if b < p:
            return "bad_counter"
        return "bad_address"  # a is not a string

    def _finish(self, reasons, where, addrs, packets, nbytes, times) -> FlowBatch:
        m = len(where)
        at = np.array(where, dtype=np.int64)
        if self.weight == "packets":
            weights = np.array(packets, dtype=np.int64)
        elif self.weight == "bytes":
            weights = np.array(nbytes, dtype=np.int64)
        else:
            weights = np.ones(m, dtype=np.int64)
        # Addresses: dotted quads (vectorised) and IPv6 (ipaddress, memoised per batch).
        is6 = np.fromiter((":" in s for s in addrs), dtype=bool, count=m)
        ok = np.ones(m, dtype=bool)
        v4_at = np.flatnonzero(~is6)
        v6_at = np.flatnonzero(is6)
        v4_keys, v4_ok = parse_ipv4_each([addrs[j] for j in v4_at.tolist()])
        hi = np.zeros(v6_at.size, dtype=np.uint64)
        lo = np.zeros(v6_at.size, dtype=np.uint64)
        v6_ok = np.ones(v6_at.size, dtype=bool)
        memo: dict[str, int | None] = {}
        for k, j in enumerate(v6_at.tolist()):
            s = addrs[j]
            v = memo.get(s, -1)
            if v == -1:
                v = memo[s] = _ipv6_int(s)
            if v is None:
                v6_ok[k] = False
            else:
                hi[k] = v >> 64
                lo[k] = v & _LO_MASK
        ok[v4_at[~v4_ok]] = False
        ok[v6_at[~v6_ok]] = False
        for j in np.flatnonzero(~ok).tolist():
            reasons[where[j]] = "bad_address"
        if self.family != "both":
            other = is6 if self.family == "ipv4" else ~is6
            for j in np.flatnonzero(ok & other).tolist():
                reasons[where[j]] = "wrong_family"
            ok &= ~other
        # Times, for the records still good.
        event_ms, t_ok = self._times_ms(times, ok)
        for j in np.flatnonzero(ok & ~t_ok).tolist():
            reasons[where[j]] = "bad_time"
        ok &= t_ok
        if self.weight != "records":  # weight 0: nothing to count (a sketch takes weights >= 1)
            zero = ok & (weights == 0)
            for j in np.flatnonzero(zero).tolist():
                reasons[where[j]] = "zero_weight"
            ok &= ~zero
        sel4 = ok[v4_at]
        sel6 = ok[v6_at]
        cols4 = FlowColumns(
            4, at[v4_at[sel4]], v4_keys[sel4].astype(np.uint32), weights[v4_at[sel4]], event_ms[v4_at[sel4]]
        )
        cols6 = FlowColumns(6, at[v6_at[sel6]], (hi[sel6], lo[sel6]), weights[v6_at[sel6]], event_ms[v6_at[sel6]])
        if self.family == "ipv4":
            cols6 = _empty_columns(6)
        elif self.family == "ipv6":
            cols4 = _empty_columns(4)
        return FlowBatch(reasons, cols4, cols6)

    def _times_ms(self, times: list[Any], wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(epoch ms, valid) per collected time; ``None`` -> -1 (valid unless ``require_time``)."""
        m = len(times)
        kinds = set(map(type, times))
        if m and kinds == _STR_ONLY and self.schema != "goflow2":  # pmacct's usual: every time a string
            ms, ok = _parse_times_ms(times)
            return np.where(ok, ms, -1), ok
        if m and kinds == _INT_ONLY:  # goflow2's usual (ns), pmacct's timestamps_since_epoch (s)
            try:
                t = np.array(times, dtype=np.int64)
            except OverflowError:
                pass  # beyond int64: bad_time, found one by one below
            else:
                if self.schema == "goflow2":
                    ms = t // 1_000_000
                    ok = (t > 0) & (ms > 0)  # t <= _MAX_NS always holds in int64
                else:
                    ok = (t > 0) & (t <= _MAX_MS // 1000)
                    ms = np.where(ok, t, 0) * 1000
                return np.where(ok, ms, -1), ok
        out = np.full(m, -1, dtype=np.int64)
        valid = np.ones(m, dtype=bool)
        strs: list[str] = []
        str_at: list[int] = []
        goflow2 = self.schema == "goflow2"
        for j, t in enumerate(times):
            if not wanted[j]:
                continue
            if t is None:
                if self.require_time:
                    valid[j] = False
            elif t is _BAD_TIME:
                valid[j] = False
            elif t.__class__ is int:
                if goflow2:
                    fits = 0 < t <= _MAX_NS
                    t_ms = t // 1_000_000
                else:  # pmacct with timestamps_since_epoch: seconds
                    fits = 0 < t <= _MAX_MS // 1000
                    t_ms = t * 1000
                if fits and t_ms > 0:
                    out[j] = t_ms
                else:
                    valid[j] = False
            elif goflow2:  # goflow2 publishes integers only
                valid[j] = False
            else:
                strs.append(t)
                str_at.append(j)
        if strs:
            at = np.array(str_at, dtype=np.int64)
            ms, ok = _parse_times_ms(strs)
            out[at] = np.where(ok, ms, -1)
            valid[at] = ok
        return out, valid


_COLUMNAR_MIN = 16  # smaller batches go record by record (the columnar set-up does not pay)
_STR_ONLY = frozenset({str})
_INT_ONLY = frozenset({int})  # bool is not int here: ``true`` is a bad counter
_TIME_TYPES = frozenset({str, int})


def _is_time(t: Any) -> bool:
    """Whether a time field's value is used as it is: a JSON string or integer that is not one of
    pmacct's zero times (else :func:`_time_chain` looks further)."""
    return t.__class__ in _TIME_TYPES and t not in _ZERO_TIMES


def _time_chain(obj: dict, fields: tuple[str, ...]) -> Any:
    """The first present, non-zero value of ``fields`` (:data:`_BAD_TIME` for one of a wrong
    JSON type), or None."""
    for f in fields:
        t = obj.get(f)
        tc = t.__class__
        if tc is str or tc is int:
            if t not in _ZERO_TIMES:
                return t
        elif t is not None:
            return _BAD_TIME
    return None


def _slow_loads(raw: Any, *, ints_as_text: bool = False) -> tuple[Any, str | None]:
    """The standard library's verdict on a record the fast parser refused: (object, None) or
    (None, reason). ``ints_as_text``: integers stay their digit strings (no conversion, so no
    limit on their length: the standard library refuses integers of more than 4300 digits)."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None, "invalid_utf8"
    elif isinstance(raw, str):
        text = raw
    else:
        return None, "bad_json"
    try:
        return (json.loads(text, parse_int=str) if ints_as_text else json.loads(text)), None
    except (ValueError, RecursionError):
        return None, "bad_json"


def _ipv6_int(s: str) -> int | None:
    """The 128-bit value of an IPv6 address text, or None (zone ids and non-ASCII refused)."""
    if "%" in s or not s.isascii():
        return None
    try:
        return int(ipaddress.IPv6Address(s.strip()))
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------------
# Time strings, vectorised: "YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z|±HH:MM]" and epoch "S[.f{1,9}]".

_TW = 35  # 19 + ".fffffffff" + "+HH:MM"
_DIM = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _parse_times_ms(strs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(epoch ms, valid) per string; a time must be after the epoch and before year 10000."""
    n = len(strs)
    ms = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    iso = np.fromiter((len(s) > 4 and s[4] == "-" for s in strs), dtype=bool, count=n)
    iso_at = np.flatnonzero(iso)
    if iso_at.size:
        v, good = _parse_iso_ms([strs[j] for j in iso_at.tolist()])
        ms[iso_at] = v
        ok[iso_at] = good
    for j in np.flatnonzero(~iso).tolist():  # epoch seconds as a string (timestamps_since_epoch)
        hit = _EPOCH_RE.fullmatch(strs[j])
        if hit is None:
            continue
        frac = (hit.group(2) or "") + "000"
        value = int(hit.group(1)) * 1000 + int(frac[:3])
        if 0 < value <= _MAX_MS:
            ms[j] = value
            ok[j] = True
    return ms, ok


def _digits(d: np.ndarray, cols: tuple[int, ...]) -> npt.NDArray[np.int64]:
    out = np.zeros(d.shape[0], dtype=np.int64)
    for c in cols:
        out = out * 10 + d[:, c]
    return out


def _parse_iso_ms(strs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    n = len(strs)
    rows = np.arange(n)
    lens = np.fromiter(map(len, strs), dtype=np.int64, count=n)
    # Fixed-width UCS4 (longer strings are cut, and refused by length); code points > 255 clamp.
    c = np.minimum(np.array(strs, dtype=f"U{_TW}").view(np.uint32).reshape(n, _TW), 255).astype(np.int16)
    d = c - 48
    dig = (d >= 0) & (d <= 9)
    ok = (lens >= 19) & (lens <= _TW)
    for p in (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18):
        ok &= dig[:, p]
    ok &= (
        (c[:, 4] == 45) & (c[:, 7] == 45) & ((c[:, 10] == 32) | (c[:, 10] == 84)) & (c[:, 13] == 58) & (c[:, 16] == 58)
    )
    d = np.where(dig, d, 0)
    year, month, day = _digits(d, (0, 1, 2, 3)), _digits(d, (5, 6)), _digits(d, (8, 9))
    hour, minute, sec = _digits(d, (11, 12)), _digits(d, (14, 15)), _digits(d, (17, 18))
    # fraction: "." then 1..9 digits; the first three give the milliseconds
    has_frac = (lens > 19) & (c[:, 19] == 46)
    in_frac = has_frac.copy()
    ndig = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    for j in range(20, 29):
        step = in_frac & (lens > j) & dig[:, j]
        frac = np.where(step & (ndig < 3), frac * 10 + d[:, j], frac)
        ndig += step
        in_frac = step
    ok &= ~has_frac | (ndig >= 1)
    frac_ms = frac * np.array([1000, 100, 10, 1], dtype=np.int64)[np.minimum(ndig, 3)]
    # zone: nothing (read as UTC), "Z", or "+HH:MM" / "-HH:MM"
    pos = np.where(has_frac, 20 + ndig, 19)
    rest = lens - pos
    first = c[rows, np.minimum(pos, _TW - 1)]
    zulu = (rest == 1) & (first == 90)
    offset = (rest == 6) & ((first == 43) | (first == 45))
    ok &= (rest == 0) | zulu | offset
    q = np.minimum(pos[:, None] + np.array([1, 2, 3, 4, 5]), _TW - 1)
    oc = c[rows[:, None], q]
    od = oc - 48
    off_digits = ((od >= 0) & (od <= 9))[:, [0, 1, 3, 4]].all(axis=1) & (oc[:, 2] == 58)
    ok &= ~offset | off_digits
    off_h = od[:, 0] * 10 + od[:, 1]
    off_m = od[:, 3] * 10 + od[:, 4]
    ok &= ~offset | ((off_h <= 23) & (off_m <= 59))
    off_min = np.where(offset, np.where(first == 45, -1, 1) * (off_h * 60 + off_m), 0)
    # calendar checks
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    mi = np.clip(month, 1, 12) - 1
    dim = _DIM[mi] + ((mi == 1) & leap)
    ok &= (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= dim)
    ok &= (hour <= 23) & (minute <= 59) & (sec <= 59)
    # days since 1970-01-01 (H. Hinnant's days_from_civil), then milliseconds
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    out = ((days * 86400 + hour * 3600 + minute * 60 + sec - off_min * 60) * 1000) + frac_ms
    ok &= (out > 0) & (out <= _MAX_MS)
    return np.where(ok, out, 0), ok


# ----------------------------------------------------------------------------------------------
# JSON-lines files


def split_json_lines(data: bytes) -> list[bytes]:
    """The non-blank lines of a JSON-lines blob (``\\n`` or ``\\r\\n`` endings), as records."""
    out = []
    for line in data.split(b"\n"):
        line = line.strip()
        if line:
            out.append(line)
    return out


@dataclass(frozen=True)
class FlowPairs:
    """Flow records as (source, destination) IPv4 pairs: ``reasons[i]`` is ``None`` for a record whose
    two addresses decode, else the source decoder's reason, then the destination's (e.g.
    ``wrong_family`` for an IPv6 destination); the good records, in input order, are at ``index``
    with their ``sources``, ``destinations`` (uint32), ``weights`` and ``event_ms`` (the source
    decoder's, int64)."""

    reasons: list[str | None]
    index: np.ndarray
    sources: np.ndarray
    destinations: np.ndarray
    weights: np.ndarray
    event_ms: np.ndarray


def decode_pairs(src: FlowJsonDecoder, dst: FlowJsonDecoder, values: Sequence[bytes | str | None]) -> FlowPairs:
    """Decode ``values`` with a ``key="src"`` and a ``key="dst"`` decoder of the same schema and
    weight, and keep the records both decode (pair hierarchies, docs/ALGORITHMS.md §11)."""
    a, b = src.decode_many(values), dst.decode_many(values)
    reasons = [x if x is not None else y for x, y in zip(a.reasons, b.reasons)]
    common, ia, ib = np.intersect1d(a.ipv4.index, b.ipv4.index, assume_unique=True, return_indices=True)
    return FlowPairs(
        reasons,
        common,
        np.asarray(a.ipv4.keys, dtype=np.uint32)[ia],
        np.asarray(b.ipv4.keys, dtype=np.uint32)[ib],
        a.ipv4.weights[ia],
        a.ipv4.event_ms[ia],
    )


def iter_flow_file(
    path: str | os.PathLike[str], decoder: FlowJsonDecoder, skips: SkipCounter, chunk_size: int = 65536
) -> Iterator[FlowBatch]:
    """Decode a JSON-lines file of flow records in chunks of up to ``chunk_size`` lines.

    Lines are read as by :func:`dphhh.connectors.text.iter_text_lines` (blank and ``#`` lines skipped;
    ``invalid_utf8`` counted there). A refused record is counted under its reason only when it
    holds no element (:meth:`FlowJsonDecoder.holds_element`, as the stream's dead-letter counters
    do, docs/ALGORITHMS.md §0.1 f); one that may — an IP address with bad counters, time or size,
    or a line too long to read — is somebody's record, counted as ``unusable_record`` (excluded:
    never shown). A missing file raises :class:`ValueError` naming it.
    """
    text = SkipCounter()
    try:
        for lines in iter_text_lines(path, text, chunk_size):
            batch = decoder.decode_many(lines)
            for line, reason in zip(lines, batch.reasons):
                if reason is not None:
                    held = is_unparsable(reason) and decoder.holds_element(line)  # (excluded ones stay)
                    skips.add("unusable_record" if held else reason)
            yield batch
    finally:  # a line too long to read may be a flow record: excluded, like one refused above
        skips.add("unusable_record", text["line_too_long"])
        for reason, n in text.as_dict().items():
            if reason != "line_too_long":
                skips.add(reason, n)
