"""An in-process harness for the stream job's PyFlink operators: no JVM, no broker, no Flink job.

The operators of :mod:`dphhh.stream.operators` (``DecodeOperator``, ``CapOperator``, ``SketchOperator``,
``ReleaseOperator``) run here **unmodified**: :class:`KeyedHarness` and :class:`ProcessHarness` call
their own ``open``, ``process_element``, ``on_timer`` and ``close`` exactly as PyFlink's Python
worker does, and :class:`Chain` wires several harnesses into the job's line (decode → cap → sketch
→ release), forwarding each output record and watermark the way Flink's FIFO channels do. In the
spirit of bytewax's in-process testing sources and sinks, a test feeds records in, moves the
watermark, and reads what came out.

What is **faked** (the PyFlink runtime around the operator):

* the runtime context (:class:`FakeRuntimeContext`): subtask index, parallelism, keyed state and a
  metric group (:class:`FakeMetricGroup`, whose counters and gauges record their values under
  their dotted group path, e.g. ``dphhh.release.windows_released``);
* keyed state (:class:`FakeMapState`, :class:`FakeValueState`): scoped to the current key, held as
  **encoded bytes** — keys and values go through PyFlink's own Python coders
  (``pyflink.fn_execution.coders.from_type_info`` of the state descriptor's types), so a value of
  the wrong type fails as in the worker, and what comes back is a fresh decoded copy (mutating a
  value read from state changes nothing until it is put back, as with the real backend);
* the timer service (:class:`FakeTimerService`): event- and processing-time timers per (key,
  time), deduplicated as Flink does; a watermark advance first sets the watermark, then fires every
  due timer in time order (also those registered while firing), through an on-timer context whose
  ``get_current_key`` is the timer's key (:class:`FakeOnTimerContext`); watermarks that do not
  increase are ignored (Flink forwards increasing watermarks only); the initial watermark is
  ``Long.MIN_VALUE``, the end of a bounded input ``Long.MAX_VALUE`` (:meth:`KeyedHarness.end_of_input`);
* the element context (:class:`FakeContext`): ``timer_service()``, ``get_current_key()``,
  ``timestamp()``; a record an operator emits carries its input's timestamp (from a timer: the
  timer's time), as in PyFlink;
* the wire: before ``open`` the operator is shipped through ``cloudpickle`` (as PyFlink ships it to
  a worker); outputs are split like PyFlink's ``_emit_results`` (a ``(OutputTag, value)`` tuple is
  a side output, by ``tag_id``) and, when the harness is given the operator's ``output_type`` (as in
  :mod:`dphhh.stream.job`), encoded and decoded with PyFlink's coder of that type — side outputs with
  their tag's type; keys with ``key_type`` (default: pickled, as ``key_by`` without a type);
* checkpoints, logically: :meth:`KeyedHarness.snapshot` copies the keyed state (encoded) and the
  timers; a new harness built with ``restore=`` starts from it with a fresh operator, empty caches
  and the watermark at ``Long.MIN_VALUE`` — optionally without the timers, to stand for timers a
  checkpoint may have missed.

What is **real**: every line of the operators and of what they call (decoding, the public
schedule, unit caps, Misra-Gries sketches, noise, Algorithm 4, the release ledger and the reports
file on disk — point ``output.ledger_dir`` / ``output.reports_file`` at ``tmp_path``), and PyFlink's
Python classes (``OutputTag``, state descriptors, type information and coders; importing them starts
no JVM — only ``pyflink.java_gateway.get_gateway`` does, which the operators do not call).

What this **cannot catch** (covered by ``tests/e2e``): serialisation across the JVM/Python boundary
(the Java ``TypeSerializer`` of each type against the Python coder, the Beam runner, bundles and the
asynchronous way PyFlink hands timer registrations to Java), the Java operators (``MessageBatcher``,
``ClockWatermarks``, ``ScheduledTimestamps``), Kafka sources, transactional sinks and offsets, real
checkpoint barriers and restores from a state backend, key groups and several subtasks per operator
(a harness is one instance holding every key; a watermark is one value, not a minimum over
channels), the live clock ticker (``ReleaseOperator`` is given no Kafka options, so it starts none)
and the metric reporter and its filter.
"""

from __future__ import annotations

import heapq
import itertools
import pickle
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
from pyflink.common import Types
from pyflink.common.typeinfo import TupleTypeInfo, TypeInformation
from pyflink.datastream import KeyedProcessFunction, OutputTag, ProcessFunction, RuntimeContext, TimeDomain
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

with warnings.catch_warnings():  # the coders import Beam and PyFlink's table API, which warn about themselves
    warnings.simplefilter("ignore", DeprecationWarning)
    from pyflink.fn_execution.coders import from_type_info

__all__ = [
    "MIN_WATERMARK",
    "MAX_WATERMARK",
    "Record",
    "FakeCounter",
    "FakeMetricGroup",
    "FakeValueState",
    "FakeMapState",
    "FakeKeyedBackend",
    "FakeRuntimeContext",
    "FakeTimerService",
    "FakeContext",
    "FakeOnTimerContext",
    "Snapshot",
    "ProcessHarness",
    "KeyedHarness",
    "Chain",
]

MIN_WATERMARK = -(2**63)  # Long.MIN_VALUE: no watermark yet (a replay's watermark until end of input)
MAX_WATERMARK = 2**63 - 1  # Long.MAX_VALUE: end of a bounded input


@dataclass(frozen=True)
class Record:
    """One emitted record: its value and its Flink record timestamp (``None``: none)."""

    value: Any
    timestamp: int | None = None


# --- the wire: PyFlink's own Python coders -----------------------------------------------------------


class _Codec:
    """Encode/decode with PyFlink's Python coder of ``type_info`` (the one its worker uses)."""

    def __init__(self, type_info: TypeInformation) -> None:
        self.type_info = type_info
        self.impl = from_type_info(type_info).get_impl()

    def encode(self, value: Any, what: str) -> bytes:
        _check_shape(value, self.type_info, what)  # PyFlink's fast tuple coder crashes on a wrong arity
        try:
            return self.impl.encode(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(f"{what}: {value!r:.80} does not encode as {self.type_info}: {exc}") from exc

    def decode(self, data: bytes) -> Any:
        return self.impl.decode(data)

    def round_trip(self, value: Any, what: str) -> Any:
        return self.decode(self.encode(value, what))


def _check_shape(value: Any, type_info: TypeInformation, what: str) -> None:
    if isinstance(type_info, TupleTypeInfo):
        fields = type_info.get_field_types()
        if not isinstance(value, tuple) or len(value) != len(fields):
            raise TypeError(f"{what}: expected a tuple of {len(fields)} fields ({type_info}), got {value!r:.80}")
        for i, (v, t) in enumerate(zip(value, fields)):
            _check_shape(v, t, f"{what}[{i}]")


_PICKLED = Types.PICKLED_BYTE_ARRAY()


# --- metrics ----------------------------------------------------------------------------------------


class FakeCounter:
    """A metric counter that keeps its count."""

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class _FakeMeter:
    def __init__(self) -> None:
        self.count = 0

    def mark_event(self, value: int = 1) -> None:
        self.count += value

    def get_count(self) -> int:
        return self.count


class _FakeDistribution:
    def __init__(self) -> None:
        self.values: list[int] = []

    def update(self, value: int) -> None:
        self.values.append(value)


class FakeMetricGroup:
    """A metric group: ``add_group`` nests, ``counter``/``gauge``/``meter``/``distribution`` register
    under the dotted path (shared by every group of one runtime context). Registering a name twice in
    one group is an error (Flink would warn and report only the first)."""

    def __init__(self, registry: dict[str, Any] | None = None, path: tuple[str, ...] = ()) -> None:
        self.registry: dict[str, Any] = {} if registry is None else registry
        self.path = path

    def add_group(self, name: str, extra: str | None = None) -> FakeMetricGroup:
        return FakeMetricGroup(self.registry, self.path + ((name,) if extra is None else (name, extra)))

    def _register(self, name: str, metric: Any) -> Any:
        dotted = ".".join((*self.path, name))
        if dotted in self.registry:
            raise ValueError(f"FakeMetricGroup: metric {dotted!r} registered twice")
        self.registry[dotted] = metric
        return metric

    def counter(self, name: str) -> FakeCounter:
        return self._register(name, FakeCounter())

    def gauge(self, name: str, obj: Callable[[], int]) -> None:
        self._register(name, obj)

    def meter(self, name: str, time_span_in_seconds: int = 60) -> _FakeMeter:
        return self._register(name, _FakeMeter())

    def distribution(self, name: str) -> _FakeDistribution:
        return self._register(name, _FakeDistribution())

    def values(self) -> dict[str, Any]:
        """Dotted name → current value (counters and meters: the count; gauges: called now)."""
        out: dict[str, Any] = {}
        for name, metric in self.registry.items():
            if isinstance(metric, (FakeCounter, _FakeMeter)):
                out[name] = metric.get_count()
            elif isinstance(metric, _FakeDistribution):
                out[name] = list(metric.values)
            else:
                out[name] = metric()
        return out


# --- keyed state --------------------------------------------------------------------------------------


class FakeKeyedBackend:
    """The keyed state of one operator instance: state name → encoded key → encoded value (value
    state) or {encoded map key: encoded value} (map state); plus the current key."""

    def __init__(self, key_type: TypeInformation = _PICKLED) -> None:
        self.key_codec = _Codec(key_type)
        self.tables: dict[str, dict[bytes, Any]] = {}
        self.types: dict[str, str] = {}
        self.current: bytes | None = None
        self.current_key: Any = None

    def set_current_key(self, key: Any) -> Any:
        """Make ``key`` current; returns it as the operator sees it (encoded and decoded)."""
        self.current = self.key_codec.encode(key, "key")
        self.current_key = self.key_codec.decode(self.current)
        return self.current_key

    def set_current_encoded_key(self, encoded: bytes) -> Any:
        self.current = encoded
        self.current_key = self.key_codec.decode(encoded)
        return self.current_key

    def table(self, name: str, type_info: TypeInformation) -> dict[bytes, Any]:
        kind = str(type_info)
        held = self.types.setdefault(name, kind)
        if held != kind:
            raise TypeError(f"state {name!r}: registered (or restored) as {held}, now asked for as {kind}")
        return self.tables.setdefault(name, {})

    def key(self, name: str) -> bytes:
        if self.current is None:
            raise RuntimeError(f"state {name!r}: keyed state accessed without a current key (e.g. in open())")
        return self.current


class FakeValueState:
    """``ValueState``: ``value()`` / ``update(v)`` / ``clear()``, per current key."""

    def __init__(self, backend: FakeKeyedBackend, descriptor: ValueStateDescriptor) -> None:
        self.backend, self.name = backend, descriptor.name
        self.codec = _Codec(descriptor.type_info)
        self.table = backend.table(self.name, descriptor.type_info)

    def value(self) -> Any:
        data = self.table.get(self.backend.key(self.name))
        return None if data is None else self.codec.decode(data)

    def update(self, value: Any) -> None:
        # as in PyFlink, None is a value like any other (a LONG state cannot hold it; use clear())
        self.table[self.backend.key(self.name)] = self.codec.encode(value, f"state {self.name!r}")

    def clear(self) -> None:
        self.table.pop(self.backend.key(self.name), None)


class FakeMapState:
    """``MapState``: get/put/put_all/remove/contains/keys/values/items/is_empty/clear, per current key
    (``get`` of a missing key is ``None``, as in PyFlink)."""

    def __init__(self, backend: FakeKeyedBackend, descriptor: MapStateDescriptor) -> None:
        self.backend, self.name = backend, descriptor.name
        map_type = descriptor.type_info
        self.key_codec = _Codec(map_type._key_type_info)
        self.value_codec = _Codec(map_type._value_type_info)
        self.table = backend.table(self.name, map_type)

    def _map(self, create: bool = False) -> dict[bytes, bytes] | None:
        key = self.backend.key(self.name)
        found = self.table.get(key)
        if found is None and create:
            found = self.table[key] = {}
        return found

    def _tidy(self) -> None:
        key = self.backend.key(self.name)
        if key in self.table and not self.table[key]:
            del self.table[key]  # an empty map is no state at all

    def get(self, key: Any) -> Any:
        m = self._map()
        data = None if m is None else m.get(self.key_codec.encode(key, f"state {self.name!r} key"))
        return None if data is None else self.value_codec.decode(data)

    def put(self, key: Any, value: Any) -> None:
        k = self.key_codec.encode(key, f"state {self.name!r} key")
        v = self.value_codec.encode(value, f"state {self.name!r} value")
        m = self._map(create=True)
        assert m is not None
        m[k] = v

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        for k, v in dict_value.items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        m = self._map()
        if m is not None:
            m.pop(self.key_codec.encode(key, f"state {self.name!r} key"), None)
            self._tidy()

    def contains(self, key: Any) -> bool:
        m = self._map()
        return m is not None and self.key_codec.encode(key, f"state {self.name!r} key") in m

    def keys(self) -> Iterator[Any]:
        return iter([self.key_codec.decode(k) for k in (self._map() or {})])

    def values(self) -> Iterator[Any]:
        return iter([self.value_codec.decode(v) for v in (self._map() or {}).values()])

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter([(self.key_codec.decode(k), self.value_codec.decode(v)) for k, v in (self._map() or {}).items()])

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self.table.pop(self.backend.key(self.name), None)

    __getitem__ = get
    __setitem__ = put
    __delitem__ = remove
    __contains__ = contains

    def __iter__(self) -> Iterator[Any]:
        return self.keys()


# --- runtime context, timers, contexts -----------------------------------------------------------------


class FakeRuntimeContext(RuntimeContext):
    """The operator's runtime context: subtask, parallelism, metrics, keyed state (keyed operators)."""

    def __init__(
        self,
        backend: FakeKeyedBackend | None = None,
        *,
        task_name: str = "harness",
        subtask: int = 0,
        parallelism: int = 1,
        max_parallelism: int = 128,
        attempt: int = 0,
        job_parameters: dict[str, str] | None = None,
    ) -> None:
        if not 0 <= subtask < parallelism:
            raise ValueError(f"FakeRuntimeContext: subtask {subtask} outside 0..{parallelism - 1}")
        self.backend = backend
        self.task_name = task_name
        self.subtask, self.parallelism, self.max_parallelism, self.attempt = (
            subtask,
            parallelism,
            max_parallelism,
            attempt,
        )
        self.job_parameters = dict(job_parameters or {})
        self.metric_group = FakeMetricGroup()
        self.state_names: list[str] = []

    def get_task_name(self) -> str:
        return self.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self.subtask

    def get_attempt_number(self) -> int:
        return self.attempt

    def get_task_name_with_subtasks(self) -> str:
        return f"{self.task_name} ({self.subtask + 1}/{self.parallelism})"

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> FakeMetricGroup:
        return self.metric_group

    def _keyed(self) -> FakeKeyedBackend:
        if self.backend is None:
            raise Exception("This state is only accessible by functions executed on a KeyedStream.")
        return self.backend

    def get_state(self, state_descriptor: ValueStateDescriptor) -> FakeValueState:
        state = FakeValueState(self._keyed(), state_descriptor)
        self.state_names.append(state.name)
        return state

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> FakeMapState:
        state = FakeMapState(self._keyed(), state_descriptor)
        self.state_names.append(state.name)
        return state

    def get_list_state(self, state_descriptor):  # pragma: no cover - the operators use none
        raise NotImplementedError("FakeRuntimeContext: list state is not faked")

    def get_reducing_state(self, state_descriptor):  # pragma: no cover - the operators use none
        raise NotImplementedError("FakeRuntimeContext: reducing state is not faked")

    def get_aggregating_state(self, state_descriptor):  # pragma: no cover - the operators use none
        raise NotImplementedError("FakeRuntimeContext: aggregating state is not faked")


_LONG = _Codec(Types.LONG())


class FakeTimerService:
    """Timers per (domain, time, key), deduplicated; the watermark; a settable processing time.
    Without a keyed backend (a ``ProcessFunction``) registering a timer fails, as in PyFlink."""

    def __init__(self, backend: FakeKeyedBackend | None) -> None:
        self.backend = backend
        self.watermark = MIN_WATERMARK
        self.processing_time = 0
        self._seq = itertools.count()
        self._live: dict[tuple[TimeDomain, int, bytes], int] = {}
        self._heaps: dict[TimeDomain, list[tuple[int, int, bytes]]] = {
            TimeDomain.EVENT_TIME: [],
            TimeDomain.PROCESSING_TIME: [],
        }

    # the TimerService interface
    def current_watermark(self) -> int:
        return self.watermark

    def current_processing_time(self) -> int:
        return self.processing_time

    def register_event_time_timer(self, t: int) -> None:
        self._register(TimeDomain.EVENT_TIME, t)

    def register_processing_time_timer(self, t: int) -> None:
        self._register(TimeDomain.PROCESSING_TIME, t)

    def delete_event_time_timer(self, t: int) -> None:
        self._delete(TimeDomain.EVENT_TIME, t)

    def delete_processing_time_timer(self, t: int) -> None:
        self._delete(TimeDomain.PROCESSING_TIME, t)

    # the harness side
    def _key(self, verb: str) -> bytes:
        if self.backend is None:
            raise Exception(f"{verb} timers is only supported on a keyed stream.")
        return self.backend.key("timers")

    def _register(self, domain: TimeDomain, t: int) -> None:
        at = _LONG.round_trip(t, "timer timestamp")
        entry = (domain, at, self._key("Register"))
        if entry in self._live:
            return  # one timer per key and time
        seq = next(self._seq)
        self._live[entry] = seq
        heapq.heappush(self._heaps[domain], (at, seq, entry[2]))

    def _delete(self, domain: TimeDomain, t: int) -> None:
        self._live.pop((domain, _LONG.round_trip(t, "timer timestamp"), self._key("Deleting")), None)

    def pop_due(self, domain: TimeDomain, until: int) -> tuple[int, bytes] | None:
        """The earliest live timer of ``domain`` at or before ``until`` (removed), or ``None``."""
        heap = self._heaps[domain]
        while heap and heap[0][0] <= until:
            at, seq, key = heapq.heappop(heap)
            if self._live.get((domain, at, key)) == seq:
                del self._live[(domain, at, key)]
                return at, key
        return None

    def pending(self, domain: TimeDomain = TimeDomain.EVENT_TIME) -> list[tuple[int, bytes]]:
        return sorted((at, key) for (d, at, key) in self._live if d == domain)

    def restore(self, timers: Iterable[tuple[TimeDomain, int, bytes]]) -> None:
        for domain, at, key in timers:
            seq = next(self._seq)
            self._live[(domain, at, key)] = seq
            heapq.heappush(self._heaps[domain], (at, seq, key))


class FakeContext(KeyedProcessFunction.Context, ProcessFunction.Context):
    """The context of ``process_element`` (keyed or not)."""

    def __init__(self, timers: FakeTimerService, key: Any = None, timestamp: int | None = None) -> None:
        self._timers, self._key, self._timestamp = timers, key, timestamp

    def timer_service(self) -> FakeTimerService:  # type: ignore[override]
        return self._timers

    def get_current_key(self) -> Any:
        return self._key

    def timestamp(self) -> int | None:  # type: ignore[override]
        return self._timestamp


class FakeOnTimerContext(FakeContext, KeyedProcessFunction.OnTimerContext):
    """The context of ``on_timer``: the timer's key, time and domain."""

    def __init__(self, timers: FakeTimerService, key: Any, timestamp: int, domain: TimeDomain) -> None:
        super().__init__(timers, key, timestamp)
        self._domain = domain

    def time_domain(self) -> TimeDomain:
        return self._domain


# --- the harnesses ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A logical checkpoint of a keyed operator: its encoded state and its timers."""

    tables: dict[str, dict[bytes, Any]]
    types: dict[str, str]
    timers: tuple[tuple[TimeDomain, int, bytes], ...] = field(default_factory=tuple)


class ProcessHarness:
    """Runs a (non-keyed) ``ProcessFunction`` in process: ``open()``, ``process(value)``,
    ``advance_watermark(wm)``, ``close()``; main outputs in :attr:`records` / :attr:`outputs`, side
    outputs in :attr:`side_outputs` by tag id.

    ``output_type``: the operator's declared output type (as given to ``process`` in
    :mod:`dphhh.stream.job`): main outputs are then encoded and decoded with PyFlink's coder of it (side
    outputs always are, with their tag's type). ``ship``: send the operator through ``cloudpickle``
    first, as PyFlink does (:attr:`operator` is then the shipped copy)."""

    keyed = False

    def __init__(
        self,
        operator: Any,
        *,
        output_type: TypeInformation | None = None,
        subtask: int = 0,
        parallelism: int = 1,
        ship: bool = True,
    ) -> None:
        self.operator = cloudpickle.loads(cloudpickle.dumps(operator)) if ship else operator
        self.output_codec = None if output_type is None else _Codec(output_type)
        self.backend = self._backend()
        self.runtime_context = FakeRuntimeContext(
            self.backend, task_name=type(operator).__name__, subtask=subtask, parallelism=parallelism
        )
        self.timers = FakeTimerService(self.backend)
        self.records: list[Record] = []
        self.side_outputs: dict[str, list[Any]] = {}
        self.opened = self.closed = False

    def _backend(self) -> FakeKeyedBackend | None:
        return None

    # --- life cycle
    def open(self) -> ProcessHarness:
        if self.opened:
            raise RuntimeError("harness: open() twice")
        self.operator.open(self.runtime_context)
        self.opened = True
        return self

    def close(self) -> None:
        if self.opened and not self.closed:
            self.closed = True
            self.operator.close()

    def __enter__(self):
        return self.open() if not self.opened else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if not self.opened or self.closed:
            raise RuntimeError("harness: the operator is not open (call open() first, and not after close())")

    # --- input
    def process(self, value: Any, timestamp: int | None = None) -> list[Any]:
        """Feed one record; returns the main outputs it produced (also appended to :attr:`records`)."""
        self._check_open()
        ctx = FakeContext(self.timers, None, timestamp)
        return self._collect(self.operator.process_element(value, ctx), timestamp)

    def process_all(self, values: Iterable[Any], timestamp: int | None = None) -> list[Any]:
        out: list[Any] = []
        for value in values:
            out.extend(self.process(value, timestamp))
        return out

    def advance_watermark(self, watermark: int) -> list[Any]:
        """Move the watermark forward (a lower or equal one is ignored, as Flink forwards only
        increasing watermarks); returns the main outputs of the timers it fired."""
        self._check_open()
        if watermark <= self.timers.watermark:
            return []
        self.timers.watermark = _LONG.round_trip(watermark, "watermark")
        return self._fire(TimeDomain.EVENT_TIME, watermark)

    def end_of_input(self) -> list[Any]:
        """End of a bounded input: the watermark jumps to ``Long.MAX_VALUE``."""
        return self.advance_watermark(MAX_WATERMARK)

    def advance_processing_time(self, t: int) -> list[Any]:
        """Set the processing time and fire the processing-time timers due by then."""
        self._check_open()
        self.timers.processing_time = max(self.timers.processing_time, t)
        return self._fire(TimeDomain.PROCESSING_TIME, self.timers.processing_time)

    def _fire(self, domain: TimeDomain, until: int) -> list[Any]:
        return []

    def _collect(self, results: Iterable[Any] | None, timestamp: int | None) -> list[Any]:
        """Split an operator's results like PyFlink's ``_emit_results`` (consuming the generator)."""
        out: list[Any] = []
        if results is None:
            return out
        for result in results:
            if isinstance(result, tuple) and result and isinstance(result[0], OutputTag):
                tag: OutputTag = result[0]
                value = _Codec(tag.type_info).round_trip(result[1], f"side output {tag.tag_id!r}")
                self.side_outputs.setdefault(tag.tag_id, []).append(value)
                continue
            if self.output_codec is not None:
                result = self.output_codec.round_trip(result, "output")
            self.records.append(Record(result, timestamp))
            out.append(result)
        return out

    # --- output
    @property
    def outputs(self) -> list[Any]:
        """Every main output so far (values; :attr:`records` has their timestamps)."""
        return [r.value for r in self.records]

    def take(self) -> list[Any]:
        """The main outputs collected so far, which are then forgotten."""
        out, self.records = self.outputs, []
        return out

    def take_side(self, tag_id: str) -> list[Any]:
        """The side outputs of ``tag_id`` collected so far, which are then forgotten."""
        return self.side_outputs.pop(tag_id, [])

    def metrics(self) -> dict[str, Any]:
        """The operator's metrics: dotted name → value (e.g. ``dphhh.release.windows_released``)."""
        return self.runtime_context.metric_group.values()


class KeyedHarness(ProcessHarness):
    """Runs a ``KeyedProcessFunction`` in process, keyed by ``key_selector`` (as ``key_by``).

    ``key_type``: the key's type information (as ``key_by(..., key_type=)``; default: pickled keys);
    ``restore``: a :class:`Snapshot` to start from (state and timers; the operator is new, its
    caches are empty, the watermark is ``Long.MIN_VALUE``). Timers fire on :meth:`advance_watermark`
    in time order (ties: registration order), each with its own key current."""

    keyed = True

    def __init__(
        self,
        operator: Any,
        key_selector: Callable[[Any], Any],
        *,
        key_type: TypeInformation = _PICKLED,
        output_type: TypeInformation | None = None,
        subtask: int = 0,
        parallelism: int = 1,
        ship: bool = True,
        restore: Snapshot | None = None,
    ) -> None:
        self._key_type = key_type
        super().__init__(operator, output_type=output_type, subtask=subtask, parallelism=parallelism, ship=ship)
        self.key_selector = key_selector
        if restore is not None:
            assert self.backend is not None
            self.backend.tables = _copy_tables(restore.tables)
            self.backend.types = dict(restore.types)
            self.timers.restore(restore.timers)

    def _backend(self) -> FakeKeyedBackend:
        return FakeKeyedBackend(self._key_type)

    @property
    def keyed_backend(self) -> FakeKeyedBackend:
        assert self.backend is not None
        return self.backend

    def process(self, value: Any, timestamp: int | None = None) -> list[Any]:
        self._check_open()
        key = self.keyed_backend.set_current_key(self.key_selector(value))
        ctx = FakeContext(self.timers, key, timestamp)
        return self._collect(self.operator.process_element(value, ctx), timestamp)

    def _fire(self, domain: TimeDomain, until: int) -> list[Any]:
        out: list[Any] = []
        while (due := self.timers.pop_due(domain, until)) is not None:
            at, encoded = due
            key = self.keyed_backend.set_current_encoded_key(encoded)
            ctx = FakeOnTimerContext(self.timers, key, at, domain)
            out.extend(self._collect(self.operator.on_timer(at, ctx), at))
        return out

    # --- inspection
    def pending_timers(self, key: Any = None, domain: TimeDomain = TimeDomain.EVENT_TIME) -> list[int]:
        """Times of the live timers (of ``key``, if given), ascending."""
        codec = self.keyed_backend.key_codec
        wanted = None if key is None else codec.encode(key, "key")
        return sorted(at for at, k in self.timers.pending(domain) if wanted is None or k == wanted)

    def state_names(self) -> list[str]:
        """Names of the states the operator registered, in order."""
        return list(self.runtime_context.state_names)

    def state_keys(self, name: str) -> list[Any]:
        """The (decoded) keys holding state ``name``."""
        codec = self.keyed_backend.key_codec
        return [codec.decode(k) for k in self.keyed_backend.tables.get(name, {})]

    def map_state(self, name: str, key: Any, key_type: TypeInformation, value_type: TypeInformation) -> dict[Any, Any]:
        """Map state ``name`` of ``key``, decoded with the given types (``{}``: none)."""
        encoded = self.keyed_backend.key_codec.encode(key, "key")
        held = self.keyed_backend.tables.get(name, {}).get(encoded) or {}
        kc, vc = _Codec(key_type), _Codec(value_type)
        return {kc.decode(k): vc.decode(v) for k, v in held.items()}

    def value_state(self, name: str, key: Any, value_type: TypeInformation) -> Any:
        """Value state ``name`` of ``key``, decoded (``None``: none)."""
        encoded = self.keyed_backend.key_codec.encode(key, "key")
        data = self.keyed_backend.tables.get(name, {}).get(encoded)
        return None if data is None else _Codec(value_type).decode(data)

    def snapshot(self, *, timers: bool = True) -> Snapshot:
        """A logical checkpoint: a copy of the encoded state and (unless ``timers=False``) the timers."""
        kept = tuple((d, at, k) for (d, at, k) in self.timers._live) if timers else ()
        return Snapshot(_copy_tables(self.keyed_backend.tables), dict(self.keyed_backend.types), kept)


def _copy_tables(tables: dict[str, dict[bytes, Any]]) -> dict[str, dict[bytes, Any]]:
    return pickle.loads(pickle.dumps(tables))


class Chain:
    """Harnesses in a line (e.g. decode → sketch → release): each main output of stage i is the
    next input of stage i + 1 (with its timestamp), in emission order; a watermark reaches stage
    i + 1 only after the records stage i emitted before it — what Flink's FIFO channels guarantee.
    Main outputs of the last stage collect in :attr:`outputs`."""

    def __init__(self, *stages: ProcessHarness) -> None:
        if not stages:
            raise ValueError("Chain: no stages")
        self.stages = list(stages)
        self.records: list[Record] = []

    def open(self) -> Chain:
        for stage in self.stages:
            if not stage.opened:
                stage.open()
        return self

    def close(self) -> None:
        for stage in self.stages:
            stage.close()

    def __enter__(self) -> Chain:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, value: Any, timestamp: int | None = None, at: int = 0) -> None:
        """Feed ``value`` into stage ``at`` (0: the first; e.g. the release operator's start record
        goes straight into the last stage) and on through the line."""
        stage = self.stages[at]
        before = len(stage.records)
        stage.process(value, timestamp)
        self._forward(at, stage.records[before:])

    def _forward(self, at: int, records: list[Record]) -> None:
        if at + 1 == len(self.stages):
            self.records.extend(records)
            return
        for r in records:
            self.send(r.value, r.timestamp, at + 1)

    def advance_watermark(self, watermark: int) -> None:
        for i, stage in enumerate(self.stages):
            before = len(stage.records)
            stage.advance_watermark(watermark)
            self._forward(i, stage.records[before:])

    def end_of_input(self) -> None:
        self.advance_watermark(MAX_WATERMARK)

    @property
    def outputs(self) -> list[Any]:
        return [r.value for r in self.records]

    def take(self) -> list[Any]:
        out, self.records = self.outputs, []
        return out
