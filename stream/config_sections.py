"""The stream job's configuration, one frozen dataclass per section (docs/reference/config.md).

Each section holds its keys as typed fields (their defaults are the built-in defaults,
:data:`dphhh.stream.config.DEFAULTS` is read from them), checks them when it is made
(:meth:`Section.of`, which never changes the mapping it reads) and builds the domain objects it
configures: :class:`WindowSection` the :class:`~dphhh.stream.schedule.ReleaseSchedule`,
:class:`PrivacySection` the :class:`~dphhh.privacy.params.PrivacyBudget`,
:class:`~dphhh.privacy.unit.PrivacyUnit`, :class:`~dphhh.privacy.params.HHHParams` and
:class:`~dphhh.privacy.budget_guard.BudgetGuard`. An invalid value raises :class:`ConfigError`
whose ``parameter`` is the key (``privacy.epsilon``) and whose message names it
(``config: privacy.epsilon must be ...``). Checks that need two sections (a pair hierarchy and its
input, the test dump and the seed) are :func:`dphhh.stream.config.load_config`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Self

from dphhh.connectors.messages import MESSAGE_FORMATS
from dphhh.privacy.budget_guard import PERIODS, BudgetGuard
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.specs import parse_hierarchy

if TYPE_CHECKING:
    from .schedule import ReleaseSchedule

__all__ = [
    "ConfigError",
    "Section",
    "KafkaSection",
    "InputSection",
    "HierarchySection",
    "WindowSection",
    "PrivacySection",
    "FlinkSection",
    "OutputSection",
    "TestingSection",
    "SECTIONS",
    "parse_time_ms",
]


class ConfigError(UsageError):
    """An invalid configuration value; the message names the key, and ``parameter`` is the key
    (``section.key``) when the error is about one."""

    @classmethod
    def of_key(cls, section: str, key: str, detail: str) -> ConfigError:
        """``"config: {section}.{key} {detail}"`` (a ``detail`` that starts with ``":"`` follows the key
        directly, as in :meth:`UsageError.about`), about the key ``section.key``."""
        name = f"{section}.{key}"
        text = f"config: {name}{'' if detail.startswith(':') else ' '}{detail}"
        return cls(text, owner="config", parameter=name, detail=detail)

    @classmethod
    def of_usage(cls, exc: UsageError, name: str) -> ConfigError:
        """The error of a domain object the config builds (``exc``) as the config's, naming the key
        ``name`` instead of the object's parameter (``name`` is the section when ``exc`` is about no
        single parameter)."""
        return cls(
            f"config: {exc.about(name)}", owner="config", parameter=name if exc.parameter else None, detail=exc.detail
        )


def parse_time_ms(text: Any, name: str) -> int | None:
    """Epoch milliseconds of a time key's value (an integer, digits, or ISO-8601; a time without a
    zone is UTC); ``None`` for ``""``. Raises :class:`ConfigError` naming the key."""
    section, _, key = name.partition(".")
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise ConfigError.of_key(section, key, f"must be epoch milliseconds or an ISO-8601 time, got {text!r}")
    text = text.strip()
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError.of_key(
            section, key, f"must be epoch milliseconds or an ISO-8601 time (e.g. 2026-12-01T00:00:00Z), got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _typed(section: str, key: str, value: Any, like: Any, is_time: bool) -> Any:
    """``value`` checked against the type of its default ``like`` (an int where a float is expected
    becomes a float; a time key takes an integer or a string)."""
    if is_time:
        parse_time_ms(value, f"{section}.{key}")
        return value
    if isinstance(like, bool):
        if not isinstance(value, bool):
            raise ConfigError.of_key(section, key, f"must be true or false, got {value!r}")
    elif isinstance(like, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError.of_key(section, key, f"must be an integer, got {value!r}")
    elif isinstance(like, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConfigError.of_key(section, key, f"must be a number, got {value!r}")
        value = float(value)
    elif isinstance(like, dict):
        if not isinstance(value, dict):
            raise ConfigError.of_key(section, key, f"must be a table, got {value!r}")
        value = dict(value)
    elif not isinstance(value, str):
        raise ConfigError.of_key(section, key, f"must be a string, got {value!r}")
    return value


@dataclass(frozen=True)
class Section:
    """A configuration section: its keys are the dataclass's fields, their defaults the built-in ones."""

    #: the section's name in the file (``[kafka]``) and in ``--set kafka.bootstrap=…``
    NAME: ClassVar[str] = ""
    #: keys whose value is a time (epoch ms or ISO-8601; ``""`` = not set)
    TIME_KEYS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{key: default}`` in the section's order (a fresh copy)."""
        return {f.name: _default(f) for f in dataclasses.fields(cls)}

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Self:
        """The section of ``values`` (every key present), type-checked and validated; ``values`` is
        left as it was. Raises :class:`ConfigError` naming the first invalid key."""
        like = cls.defaults()
        section = cls(**{k: _typed(cls.NAME, k, values[k], like[k], k in cls.TIME_KEYS) for k in like})
        section.check()
        return section

    def check(self) -> None:
        """The section's own rules (types are already checked); raises :class:`ConfigError`."""

    def bad(self, key: str, detail: str) -> ConfigError:
        """The error about this section's ``key``: ``config: {section}.{key} {detail}``."""
        return ConfigError.of_key(self.NAME, key, detail)

    def as_values(self) -> dict[str, Any]:
        """``{key: value}`` (a fresh mapping)."""
        return {f.name: _copy(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _default(f: dataclasses.Field) -> Any:
    if f.default is dataclasses.MISSING:
        factory: Callable[[], Any] = f.default_factory  # type: ignore[assignment]
        return factory()
    return f.default


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def _between(section: Section, key: str, low: int, high: int, high_text: str | None = None) -> None:
    value = getattr(section, key)
    if not low <= value <= high:
        raise section.bad(key, f"must be between {low} and {high_text or high}, got {value}")


@dataclass(frozen=True)
class KafkaSection(Section):
    """``[kafka]``: the broker, the topics and the clients' options."""

    NAME: ClassVar[str] = "kafka"
    bootstrap: str = "127.0.0.1:9092"
    input_topic: str = "dphhh-input"
    reports_topic: str = "dphhh-reports"
    dead_letter_topic: str = "dphhh-dead-letter"
    group_id: str = "dphhh-job"
    # auto: live = the first record appended at or after the schedule's origin, replay = earliest
    start: str = "auto"  # auto | earliest | latest | committed
    start_local_broker: bool = True  # a loopback bootstrap that does not answer: start this checkout's broker
    wait_s: int = 0  # how long dphhh waits for an unreachable broker at start, retrying with backoff (0 = forever)
    security_protocol: str = "PLAINTEXT"
    extra: dict[str, str] = field(default_factory=dict)  # passed through to every Kafka client (e.g. sasl.mechanism)

    STARTS: ClassVar[tuple[str, ...]] = ("auto", "earliest", "latest", "committed")

    def check(self) -> None:
        for key in ("bootstrap", "input_topic", "reports_topic", "dead_letter_topic", "group_id"):
            if not getattr(self, key).strip():
                raise self.bad(key, "must not be empty")
        if self.wait_s < 0:
            raise self.bad("wait_s", f"must be >= 0, got {self.wait_s}")
        if self.start not in self.STARTS:
            raise self.bad("start", f"must be auto, earliest, latest or committed, got {self.start!r}")


@dataclass(frozen=True)
class InputSection(Section):
    """``[input]``: the message format and its options (docs/reference/formats.md)."""

    NAME: ClassVar[str] = "input"
    format: str = "packed-ipv4"
    json_field: str = "ip"
    json_time_field: str = ""
    # one-element formats (text-ipv4, json, path): a longer message is dead-lettered as "oversized";
    # packed formats are decoded element by element whatever their size (docs/ALGORITHMS.md §0.1 e)
    max_message_bytes: int = 1 << 20
    # format flow-json (a collector's JSON flow records, connectors/flow_json.py):
    flow_schema: str = "pmacct"  # pmacct (nfacctd/sfacctd kafka plugin) | goflow2
    flow_key: str = "src"  # the address the hierarchy is over: src | dst
    flow_weight: str = "records"  # what a record counts: records (1) | packets | bytes
    # W: public cap on one record's weight (packets/bytes: required); the guarantee is then per
    # record, by group privacy over W unit elements (epsilon is divided by W)
    weight_cap: int = 0

    def check(self) -> None:
        from dphhh.connectors.flow_json import KEYS, SCHEMAS, WEIGHTS

        if self.format not in MESSAGE_FORMATS:  # the registry as it is now: a format registered later is read
            raise self.bad("format", f"must be one of {', '.join(MESSAGE_FORMATS)}, got {self.format!r}")
        if self.max_message_bytes < 4:
            raise self.bad("max_message_bytes", f"must be >= 4, got {self.max_message_bytes}")
        for key, allowed in (("flow_schema", SCHEMAS), ("flow_key", (*KEYS, "pair")), ("flow_weight", WEIGHTS)):
            if getattr(self, key) not in allowed:
                raise self.bad(key, f"must be one of {', '.join(allowed)}, got {getattr(self, key)!r}")
        cap = self.weight_cap
        if cap < 0:
            raise self.bad("weight_cap", f"must be an integer >= 1 (0 = unset), got {cap!r}")
        if not self.weighted:
            if cap > 1:
                weighable = " or ".join(f"{n!r}" for n, c in MESSAGE_FORMATS.items() if "flow_weight" in c.reads)
                raise self.bad(
                    "weight_cap",
                    f"applies to input.format {weighable} with input.flow_weight 'packets' or 'bytes' "
                    f"(got format {self.format!r}, weight {self.flow_weight!r})",
                )
        elif cap < 1:
            raise self.bad(
                "flow_weight",
                f"= {self.flow_weight!r} needs input.weight_cap = W: each record's weight is clipped to W and the "
                "guarantee covers one record by group privacy over W unit elements (epsilon is divided by W; "
                "see dphhh plan --weight-cap)",
            )

    @property
    def weighted(self) -> bool:
        """Whether records carry weights (flow records counted in packets or bytes)."""
        return "flow_weight" in MESSAGE_FORMATS[self.format].reads and self.flow_weight != "records"

    @property
    def record_weight_cap(self) -> int:
        """W, the public cap on one record's weight (1 when records are unweighted)."""
        return self.weight_cap if self.weighted else 1

    def for_pairs(self) -> InputSection:
        """This input read for a pair hierarchy (docs/ALGORITHMS.md §11): flow records give both
        addresses of each (``flow_key = "pair"``); other formats are as they are."""
        if "flow_key" not in MESSAGE_FORMATS[self.format].reads:
            return self
        if self.flow_key not in ("src", "pair"):
            raise self.bad("flow_key", ": a pair hierarchy reads both addresses (flow_key = 'pair')")
        return dataclasses.replace(self, flow_key="pair")

    def check_reads(self, hierarchy: Hierarchy) -> None:
        """``format`` reads values of the hierarchy's kind (each format's ``hierarchy_kinds``,
        :mod:`dphhh.connectors.messages`)."""
        fmt = self.format
        if hierarchy.kind in MESSAGE_FORMATS[fmt].hierarchy_kinds:
            return
        readers = [f"{name!r}" for name, cls in MESSAGE_FORMATS.items() if hierarchy.kind in cls.hierarchy_kinds]
        kinds = " or ".join(sorted(MESSAGE_FORMATS[fmt].hierarchy_kinds))
        if not readers:
            detail = (
                f"{hierarchy.spec()!r}: no input format of the stream job reads {hierarchy.kind} values "
                f"(input.format {fmt!r} reads {kinds} hierarchies)"
            )
            raise ConfigError.of_key("hierarchy", "spec", detail)
        raise ConfigError(
            f"config: hierarchy.spec {hierarchy.spec()!r} needs input.format {' or '.join(readers)}, got {fmt!r} "
            f"(which reads values of {kinds} hierarchies)",
            owner="config",
            parameter="input.format",
        )


@dataclass(frozen=True)
class HierarchySection(Section):
    """``[hierarchy]``: the hierarchy's spec (docs/ALGORITHMS.md §1)."""

    NAME: ClassVar[str] = "hierarchy"
    spec: str = "ipv4:8,16,24,32"

    def check(self) -> None:
        self.hierarchy  # noqa: B018 (parsed once, here: an invalid spec fails now)

    @cached_property
    def hierarchy(self) -> Hierarchy:
        """The parsed hierarchy."""
        try:
            return parse_hierarchy(self.spec)
        except ValueError as exc:
            raise self.bad("spec", f": {exc}") from None


@dataclass(frozen=True)
class WindowSection(Section):
    """``[window]``: the public release schedule (:mod:`dphhh.stream.schedule`)."""

    NAME: ClassVar[str] = "window"
    TIME_KEYS: ClassVar[tuple[str, ...]] = ("origin", "until")
    mode: str = "live"  # live | replay (a bounded job over [origin, until), released at end of input)
    size_ms: int = 10_000
    # first window: epoch ms or ISO-8601 time; live default "" = the deployment's first start
    origin: str | int = ""
    until: str | int = ""  # end of the schedule (exclusive); replay: required; live: the job stops after it
    grace_ms: int = 0  # a window is released at its end + grace (wall clock); elements arriving later are late
    max_future_ms: int = 60_000  # live, own event times: more than this ahead of the arrival is rejected
    max_past_ms: int = 60_000  # live, own event times: more than this behind the arrival is rejected
    clock_tick_ms: int = 100  # live: the job appends a clock record to every input partition this often
    # a sketch takes the elements that arrived in one epoch of this length together, in canonical order
    epoch_ms: int = 100
    # live: every report becomes visible this long after its window's release time (end + grace),
    # whatever its window held; a report not ready by then is an incident
    # (docs/explanation/stream-job.md, "Publication time")
    publish_delay_ms: int = 3000

    #: the schedule's parameters that are this section's keys (:class:`~dphhh.stream.schedule.ReleaseSchedule`)
    SCHEDULE_KEYS: ClassVar[dict[str, str]] = {"origin_ms": "origin", "until_ms": "until"}

    def check(self) -> None:
        """The schedule's own rules (sizes, mode, boundaries: :class:`~dphhh.stream.schedule.ReleaseSchedule`
        checks them, at the configured origin or, where none is configured, at 0), and the job's:
        the clock's tick, the epoch and the publication delay bounded, no time before 1970, a
        replay's range given and at most ``MAX_SCHEDULE_WINDOWS`` windows."""
        from .schedule import MAX_SCHEDULE_WINDOWS, REPLAY

        _between(self, "clock_tick_ms", 1, 60_000)
        _between(self, "epoch_ms", 1, 60_000)
        _between(self, "publish_delay_ms", 0, 3_600_000)
        origin, until = self.origin_ms, self.until_ms
        for key, value in (("origin", origin), ("until", until)):
            if value is not None and value < 0:
                raise self.bad(key, f"must be a time at or after 1970-01-01 (epoch ms >= 0), got {value}")
        if self.mode == REPLAY and (origin is None or until is None):
            raise self.bad(
                "mode",
                "= 'replay' needs window.origin and window.until (the public range [origin, until) whose every "
                "window gets a report)",
            )
        if origin is not None and until is not None and until <= origin:
            raise self.bad("until", f"({self.until}) must be after window.origin ({self.origin})")
        try:
            self.schedule(0)
        except UsageError as exc:
            if exc.parameter is None:
                raise
            raise ConfigError.of_usage(exc, f"window.{self.SCHEDULE_KEYS.get(exc.parameter, exc.parameter)}") from None
        if origin is not None and until is not None and (until - origin) // self.size_ms > MAX_SCHEDULE_WINDOWS:
            raise ConfigError(
                f"config: window.origin .. window.until spans {(until - origin) // self.size_ms} windows; "
                f"at most {MAX_SCHEDULE_WINDOWS} (each gets a report): use larger windows or a shorter range",
                owner="config",
                parameter="window.until",
            )

    @property
    def origin_ms(self) -> int | None:
        """The configured schedule origin (``None``: live default, the deployment's first start)."""
        return parse_time_ms(self.origin, "window.origin")

    @property
    def until_ms(self) -> int | None:
        """The configured end of the schedule (exclusive), if any."""
        return parse_time_ms(self.until, "window.until")

    def schedule(self, origin_ms: int | None = None) -> ReleaseSchedule:
        """The release schedule, with ``origin_ms`` (the ledger's stored origin) where none is configured."""
        from .schedule import ReleaseSchedule

        origin = self.origin_ms if self.origin_ms is not None else origin_ms
        if origin is None:
            raise UsageError("JobConfig: the schedule's origin is not known yet (see stream.ledger.resolve_origin)")
        return ReleaseSchedule(
            size_ms=self.size_ms,
            origin_ms=origin,
            mode=self.mode,
            grace_ms=self.grace_ms,
            until_ms=self.until_ms,
            max_future_ms=self.max_future_ms,
            max_past_ms=self.max_past_ms,
            epoch_ms=self.epoch_ms,
            publish_delay_ms=self.publish_delay_ms,
        )


#: The privacy.unit_key kinds: (what a unit is, the key's syntax), for the messages of
#: :meth:`PrivacySection.unit`.
_UNIT_KINDS = {"source-ipv4": ("user level per source host", "source-ipv4"), "json": ("a JSON field", "json:FIELD")}


@dataclass(frozen=True)
class PrivacySection(Section):
    """``[privacy]``: the guarantee, the mechanism's parameters, the privacy unit and the budget guard
    (docs/ALGORITHMS.md §0, §3, §9)."""

    NAME: ClassVar[str] = "privacy"
    epsilon: float = 1.0
    delta: float = 1e-6
    beta: float = 0.05
    tau: float = 1000.0
    counters: int = 1024
    partitions: int = 1
    variant: str = "fresh"
    mode: str = "conservative"
    calibration: str = "tight"  # tight (exact-tail threshold, one scale; docs/calibration.md) | paper
    seed: int = -1  # >= 0 seeds the noise: reports are then NOT private (tests only)
    # user-level privacy: "" = event level; "source-ipv4" (input.format packed-ipv4-pairs, or
    # flow-json: each record's source host) or "json:FIELD" (input.format json) = the privacy unit;
    # each unit keeps <= unit_cap elements (records) per window; with weighted flow records the
    # guarantee is by group privacy over unit_cap * weight_cap unit elements
    unit_key: str = ""
    unit_cap: int = 1
    # budget guard: total (epsilon, delta) per budget_period ("day" = UTC day, or "deployment");
    # budget_epsilon = 0: no guard; budget_delta = 0: as many windows' delta as the epsilon budget allows
    budget_epsilon: float = 0.0
    budget_delta: float = 0.0
    budget_period: str = "day"
    expected_window_size: int = 0  # public hint of elements per window, for the delta warning (0 = unknown)

    def check(self) -> None:
        if self.budget_period not in PERIODS:
            raise self.bad("budget_period", f"must be 'day' or 'deployment', got {self.budget_period!r}")
        if self.expected_window_size < 0:
            raise self.bad("expected_window_size", f"must be >= 0, got {self.expected_window_size}")

    @property
    def json_units(self) -> bool:
        """Whether the privacy unit is a JSON field (``unit_key = "json:FIELD"``): its values get keyed
        128-bit unit keys (:func:`dphhh.privacy.unit_cap.unit_keys_of`)."""
        return self.unit_field is not None

    @property
    def unit_field(self) -> str | None:
        """The JSON field holding the privacy unit (``unit_key = "json:FIELD"``), else ``None``."""
        key = self.unit_key.strip()
        return key[5:].strip() if key.startswith("json:") else None

    @property
    def source_units(self) -> bool:
        """Whether the privacy unit is each record's source host (``unit_key = "source-ipv4"``)."""
        return self.unit_key.strip() == "source-ipv4"

    def unit(self, fmt: str, weight_cap: int = 1, weight: str = "records") -> PrivacyUnit:
        """The privacy unit of ``unit_key``/``unit_cap``, carried by input format ``fmt``; records
        weighted by ``weight`` (packets, bytes) up to the cap W make the group m·W (docs/ALGORITHMS.md §9)."""
        key, cap = self.unit_key.strip(), self.unit_cap
        if not key:
            if cap != 1:
                raise self.bad("unit_cap", f"= {cap} needs a privacy.unit_key (event-level privacy caps nothing)")
            unit = PrivacyUnit()
        elif cap < 1:
            raise self.bad("unit_cap", f"must be an integer >= 1, got {cap}")
        elif self.source_units:
            _check_unit_carrier(key, "source-ipv4", fmt)
            unit = PrivacyUnit("user", "source address", cap)
        elif self.unit_field:
            _check_unit_carrier(key, "json", fmt)
            unit = PrivacyUnit("user", f"json field {self.unit_field!r}", cap)
        else:
            raise self.bad("unit_key", f"must be empty, 'source-ipv4' or 'json:FIELD', got {key!r}")
        if weight_cap > 1:
            unit = PrivacyUnit(unit.kind, unit.key, unit.cap, weight_cap=weight_cap, weight=weight)
        return unit

    def budget(self) -> PrivacyBudget:
        """The configured per-window (ε, δ)."""
        return self.naming_keys(self._budget)

    def _budget(self) -> PrivacyBudget:
        budget = PrivacyBudget(self.epsilon, self.delta)
        if not 0 < self.delta < 1:
            raise UsageError.of_parameter(
                "HHHParams", "delta", f"must be a number with 0 < delta < 1, got {self.delta!r}"
            )
        return budget

    def params(self, event: PrivacyBudget) -> HHHParams:
        """The event-level mechanism's parameters at the budget ``event`` (the configured one, or
        its group-privacy calibration at user level)."""
        return self.naming_keys(
            lambda: HHHParams(
                epsilon=event.epsilon,
                delta=event.delta,
                tau=self.tau,
                beta=self.beta,
                counters=self.counters,
                partitions=self.partitions,
                variant=self.variant,
                mode=self.mode,
                calibration=self.calibration,
            )
        )

    def naming_keys(self, build: Callable[[], Any]) -> Any:
        """``build()``, its :class:`UsageError` about one of this section's keys turned into the
        :class:`ConfigError` about that key (or about the section)."""
        try:
            return build()
        except UsageError as exc:
            raise ConfigError.of_usage(exc, f"privacy.{exc.parameter}" if exc.parameter else "privacy") from None

    def guard(self, per_window: PrivacyBudget) -> BudgetGuard | None:
        """The budget guard (``budget_*``), or ``None`` when none is configured."""
        eps, delta = self.budget_epsilon, self.budget_delta
        if eps == 0 and delta == 0:
            return None
        if not eps > 0 or not 0 <= delta < 1:
            raise ConfigError(
                "config: privacy.budget_epsilon must be > 0 and privacy.budget_delta in [0, 1), "
                f"got {eps!r}, {delta!r}",
                owner="config",
                parameter="privacy.budget_epsilon" if not eps > 0 else "privacy.budget_delta",
            )
        if delta == 0:  # only epsilon is limited: delta grows with the windows the epsilon budget allows
            delta = min(per_window.delta * math.ceil(eps / per_window.epsilon - 1e-9), 0.5)
        if delta < per_window.delta:
            raise self.bad(
                "budget_delta",
                f"= {delta:g} is below one window's delta = {per_window.delta:g} "
                "(set it to at least the per-window delta times the windows allowed)",
            )
        if eps < per_window.epsilon:
            raise self.bad(
                "budget_epsilon",
                f"= {eps:g} is below one window's epsilon = {per_window.epsilon:g}: no window could ever be released",
            )
        return BudgetGuard(PrivacyBudget(eps, delta), self.budget_period)


def _check_unit_carrier(key: str, kind: str, fmt: str) -> None:
    """The unit key ``key`` (of ``kind``) is carried by input format ``fmt`` (each format's ``unit_keys``)."""
    carried = MESSAGE_FORMATS[fmt].unit_keys
    if kind in carried:
        return
    carriers = " or ".join(f"{n!r} ({c.unit_keys[kind]})" for n, c in MESSAGE_FORMATS.items() if kind in c.unit_keys)
    also = ""
    if carried:
        what = MESSAGE_FORMATS[fmt].noun
        units = ", ".join(
            f"{_UNIT_KINDS[k][0]} (unit_key = {_UNIT_KINDS[k][1]!r})" if k in _UNIT_KINDS else f"unit_key kind {k!r}"
            for k in carried
        )
        also = f"; {what} support {units} only"
    raise ConfigError.of_key("privacy", "unit_key", f"{key!r} needs input.format {carriers}, got {fmt!r}{also}")


@dataclass(frozen=True)
class FlinkSection(Section):
    """``[flink]``: where and how the job runs (parallelism, checkpoints, restarts, batches)."""

    NAME: ClassVar[str] = "flink"
    parallelism: int = 1
    checkpoint_interval_ms: int = 5_000
    checkpoint_dir: str = "var/flink/checkpoints"
    # failures in a row before the job gives up; restarts back off exponentially (1 s .. 60 s)
    restart_attempts: int = 10
    resume: str = "latest"  # latest: resume from the newest retained checkpoint of this deployment; none
    prometheus_port: str = "9249-9259"
    remote: str = ""  # host:port of a Flink JobManager; empty = embedded MiniCluster
    # messages are packed into batches on the Java side before they reach the Python decoder
    batch_max_messages: int = 4096
    batch_max_bytes: int = 1 << 20
    batch_max_delay_ms: int = 100
    # flow-json: the batcher reads the usual records into columns (Java FlowRecordParser); the
    # Python decoder still decodes every record it leaves (and gives their reasons). false = all in Python
    batch_parse_flows: bool = True

    def check(self) -> None:
        if self.resume not in ("latest", "none"):
            raise self.bad("resume", f"must be 'latest' or 'none', got {self.resume!r}")
        if self.restart_attempts < 0:
            raise self.bad("restart_attempts", f"must be >= 0, got {self.restart_attempts}")
        if self.parallelism < 1:
            raise self.bad("parallelism", f"must be >= 1, got {self.parallelism}")
        for key in ("batch_max_messages", "batch_max_bytes", "batch_max_delay_ms"):
            _between(self, key, 1, 2**31 - 1, "2^31 - 1")
        if self.checkpoint_interval_ms < 100:
            raise self.bad("checkpoint_interval_ms", f"must be >= 100, got {self.checkpoint_interval_ms}")


@dataclass(frozen=True)
class OutputSection(Section):
    """``[output]``: where reports, the ledger and the run's files go; ``dphhh run``'s metrics port."""

    NAME: ClassVar[str] = "output"
    reports_file: str = "var/reports.jsonl"
    ledger_dir: str = "var/ledger"
    run_dir: str = ""  # Flink's lib links, logs and markers; default var/runs/run-<time>
    metrics_port: int = 9260  # dphhh run's Prometheus endpoint of report metrics (0 = off)

    def check(self) -> None:
        _between(self, "metrics_port", 0, 65535)


@dataclass(frozen=True)
class TestingSection(Section):
    """``[testing]``: the test suite's hooks. A value other than its default is refused unless the
    environment says the run is a test (:func:`dphhh.stream.config.load_config`)."""

    NAME: ClassVar[str] = "testing"
    debug_sketch_dir: str = ""  # NON-PRIVATE sketch dumps at release (seeded runs only)
    fail_after_window: int = -1  # fault injection: fail once after releasing window #N
    checkpoint_delay_ms: int = 0  # every checkpoint takes at least this long
    slow_decode_ms: int = 0  # decode subtask 1 sleeps this long per batch (a lagging subtask)
    hold_s: float = 0.0  # a live job whose schedule ended keeps running this long before it stops
    noise_per_attempt: bool = False  # seeded noise drawn afresh by every attempt of an operator

    def check(self) -> None:
        for key in ("checkpoint_delay_ms", "slow_decode_ms", "hold_s"):
            value = getattr(self, key)
            if not 0 <= value <= 600_000:
                raise self.bad(key, f"must be between 0 and 600000, got {value}")


#: The sections in the file's order.
SECTIONS: tuple[type[Section], ...] = (
    KafkaSection,
    InputSection,
    HierarchySection,
    WindowSection,
    PrivacySection,
    FlinkSection,
    OutputSection,
    TestingSection,
)
