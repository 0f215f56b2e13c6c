"""Configuration of the stream job: one TOML file, environment overrides, flag overrides.

Precedence (later wins): built-in defaults < the TOML file (``--config FILE``) < environment
variables ``DPHHH_<SECTION>_<KEY>`` (e.g. ``DPHHH_KAFKA_BOOTSTRAP``) < ``--set section.key=value``
flags. Every value is type-checked and validated at start; an invalid value fails with a message
naming the key (``config: privacy.epsilon must be ...``). Unknown keys are refused (typos should
not silently fall back to defaults).
"""

from __future__ import annotations

import copy
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dphhh.connectors.messages import MESSAGE_FORMATS
from dphhh.privacy.budget_guard import BudgetGuard
from dphhh.privacy.checks import guarantee_warnings
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.specs import parse_hierarchy

if TYPE_CHECKING:
    from .schedule import ReleaseSchedule

__all__ = ["DEFAULTS", "REPLACED", "JobConfig", "ConfigError", "load_config", "parse_time_ms"]


class ConfigError(UsageError):
    """An invalid configuration value; the message names the key."""


DEFAULTS: dict[str, dict[str, Any]] = {
    "kafka": {
        "bootstrap": "127.0.0.1:9092",
        "input_topic": "dphhh-input",
        "reports_topic": "dphhh-reports",
        "dead_letter_topic": "dphhh-dead-letter",
        "group_id": "dphhh-job",
        # auto: live = the first record appended at or after the schedule's origin, replay = earliest
        "start": "auto",  # auto | earliest | latest | committed
        "start_local_broker": True,  # a loopback bootstrap that does not answer: start this checkout's broker
        "wait_s": 0,  # how long dphhh waits for an unreachable broker at start, retrying with backoff (0 = forever)
        "security_protocol": "PLAINTEXT",
        "extra": {},  # passed through to every Kafka client (e.g. sasl.mechanism)
    },
    "input": {
        "format": "packed-ipv4",
        "json_field": "ip",
        "json_time_field": "",
        # one-element formats (text-ipv4, json, path): a longer message is dead-lettered as "oversized";
        # packed formats are decoded element by element whatever their size (docs/ALGORITHMS.md §0.1 e)
        "max_message_bytes": 1 << 20,
        # format flow-json (a collector's JSON flow records, connectors/flow_json.py):
        "flow_schema": "pmacct",  # pmacct (nfacctd/sfacctd kafka plugin) | goflow2
        "flow_key": "src",  # the address the hierarchy is over: src | dst
        "flow_weight": "records",  # what a record counts: records (1) | packets | bytes
        # W: public cap on one record's weight (packets/bytes: required); the guarantee is then per
        # record, by group privacy over W unit elements (epsilon is divided by W)
        "weight_cap": 0,
    },
    "hierarchy": {"spec": "ipv4:8,16,24,32"},
    "window": {
        "mode": "live",  # live | replay (a bounded job over [origin, until), released at end of input)
        "size_ms": 10_000,
        "origin": "",  # first window: epoch ms or ISO-8601 time; live default "" = the deployment's first start
        "until": "",  # end of the schedule (exclusive); replay: required; live: the job stops after it
        "grace_ms": 0,  # a window is released at its end + grace (wall clock); elements arriving later are late
        "max_future_ms": 60_000,  # live, own event times: more than this ahead of the arrival is rejected
        "max_past_ms": 60_000,  # live, own event times: more than this behind the arrival is rejected
        "clock_tick_ms": 100,  # live: the job appends a clock record to every input partition this often
        # a sketch takes the elements that arrived in one epoch of this length together, in canonical order
        "epoch_ms": 100,
        # live: every report becomes visible this long after its window's release time (end + grace),
        # whatever its window held; a report not ready by then is an incident
        # (docs/explanation/stream-job.md, "Publication time")
        "publish_delay_ms": 3000,
    },
    "privacy": {
        "epsilon": 1.0,
        "delta": 1e-6,
        "beta": 0.05,
        "tau": 1000.0,
        "counters": 1024,
        "partitions": 1,
        "variant": "fresh",
        "mode": "conservative",
        "calibration": "tight",  # tight (exact-tail threshold, one scale; docs/calibration.md) | paper
        "seed": -1,  # >= 0 seeds the noise: reports are then NOT private (tests only)
        # user-level privacy: "" = event level; "source-ipv4" (input.format packed-ipv4-pairs, or
        # flow-json: each record's source host) or "json:FIELD" (input.format json) = the privacy unit;
        # each unit keeps <= unit_cap elements (records) per window; with weighted flow records the
        # guarantee is by group privacy over unit_cap * weight_cap unit elements
        "unit_key": "",
        "unit_cap": 1,
        # budget guard: total (epsilon, delta) per budget_period ("day" = UTC day, or "deployment");
        # budget_epsilon = 0: no guard; budget_delta = 0: as many windows' delta as the epsilon budget allows
        "budget_epsilon": 0.0,
        "budget_delta": 0.0,
        "budget_period": "day",
        "expected_window_size": 0,  # public hint of elements per window, for the delta warning (0 = unknown)
    },
    "flink": {
        "parallelism": 1,
        "checkpoint_interval_ms": 5_000,
        "checkpoint_dir": "var/flink/checkpoints",
        # failures in a row before the job gives up; restarts back off exponentially (1 s .. 60 s)
        "restart_attempts": 10,
        "resume": "latest",  # latest: resume from the newest retained checkpoint of this deployment; none
        "prometheus_port": "9249-9259",
        "remote": "",  # host:port of a Flink JobManager; empty = embedded MiniCluster
        # messages are packed into batches on the Java side before they reach the Python decoder
        "batch_max_messages": 4096,
        "batch_max_bytes": 1 << 20,
        "batch_max_delay_ms": 100,
        # flow-json: the batcher reads the usual records into columns (Java FlowRecordParser); the
        # Python decoder still decodes every record it leaves (and gives their reasons). false = all in Python
        "batch_parse_flows": True,
    },
    "output": {
        "reports_file": "var/reports.jsonl",
        "ledger_dir": "var/ledger",
        "run_dir": "",  # Flink's lib links, logs and markers; default var/runs/run-<time>
        "metrics_port": 9260,  # dphhh run's Prometheus endpoint of report metrics (0 = off)
    },
    # The test suite's hooks: a value other than its default is refused unless the environment says
    # the run is a test (TESTING_ENV = 1: tests/conftest.py sets it), see _check_testing.
    "testing": {
        "debug_sketch_dir": "",  # NON-PRIVATE sketch dumps at release (seeded runs only)
        "fail_after_window": -1,  # fault injection: fail once after releasing window #N
        "checkpoint_delay_ms": 0,  # every checkpoint takes at least this long
        "slow_decode_ms": 0,  # decode subtask 1 sleeps this long per batch (a lagging subtask)
        "hold_s": 0.0,  # a live job whose schedule ended keeps running this long before it stops
        "noise_per_attempt": False,  # seeded noise drawn afresh by every attempt of an operator
    },
}
#: The environment variable that makes a run a test run, allowing the [testing] hooks.
TESTING_ENV = "DPHHH_TESTING"


#: Keys of earlier versions, refused with what replaced them.
REPLACED = {
    "kafka.bounded": "window.mode = 'replay' (a bounded job over the public range [window.origin, window.until))",
    "window.allowed_lateness_ms": "window.grace_ms (a window is released at its end + grace, by the wall clock)",
    "window.out_of_orderness_ms": "nothing: windows are released on the wall clock, never on a watermark made from "
    "the data (live: window.grace_ms; backfills: window.mode = 'replay')",
    **{
        f"output.{old}": f"testing.{new} (a test hook: the [testing] section, test runs only)"
        for old, new in (
            ("debug_sketch_dir", "debug_sketch_dir"),
            ("fail_after_window", "fail_after_window"),
            ("test_checkpoint_delay_ms", "checkpoint_delay_ms"),
            ("test_slow_decode_ms", "slow_decode_ms"),
            ("test_hold_s", "hold_s"),
            ("test_noise_per_attempt", "noise_per_attempt"),
        )
    },
}


def _unknown_key(dotted: str, where: str) -> ConfigError:
    hint = REPLACED.get(dotted)
    if hint is not None:
        return ConfigError(f"config: {dotted} in {where} is no longer a key; use {hint}")
    return ConfigError(f"config: unknown key {dotted} in {where}")


def _merge(base: dict[str, dict[str, Any]], overlay: Mapping[str, Any], where: str) -> None:
    for section, values in overlay.items():
        if section not in base:
            raise ConfigError(f"config: unknown section {section!r} in {where}")
        if not isinstance(values, Mapping):
            raise ConfigError(f"config: {section} must be a table in {where}")
        for key, value in values.items():
            if key not in base[section]:
                raise _unknown_key(f"{section}.{key}", where)
            base[section][key] = value


def _coerce(section: str, key: str, text: str, like: Any) -> Any:
    name = f"{section}.{key}"
    try:
        if isinstance(like, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise UsageError(text)
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
        if isinstance(like, dict):
            return dict(item.split("=", 1) for item in text.split(",") if item)
    except ValueError:
        raise ConfigError(f"config: {name} must be a {type(like).__name__}, got {text!r}") from None
    return text


#: Keys that take a time: epoch milliseconds (an integer) or an ISO-8601 string; "" = not set.
TIME_KEYS = (("window", "origin"), ("window", "until"))


def parse_time_ms(text: Any, name: str) -> int | None:
    """Epoch milliseconds of a time key's value (an integer, digits, or ISO-8601; a time without a
    zone is UTC); ``None`` for ``""``. Raises :class:`ConfigError` naming the key."""
    from datetime import datetime

    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise ConfigError(f"config: {name} must be epoch milliseconds or an ISO-8601 time, got {text!r}")
    text = text.strip()
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"config: {name} must be epoch milliseconds or an ISO-8601 time (e.g. 2026-12-01T00:00:00Z), got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _check_type(section: str, key: str, value: Any, like: Any) -> Any:
    name = f"config: {section}.{key}"
    if (section, key) in TIME_KEYS:
        parse_time_ms(value, f"{section}.{key}")
        return value
    if isinstance(like, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
    elif isinstance(like, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    elif isinstance(like, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        value = float(value)
    elif isinstance(like, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a table, got {value!r}")
    elif not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _secret(key: str, value: str) -> str:
    """Resolve ``env:NAME`` / ``file:PATH`` references of a pass-through Kafka option."""
    if value.startswith("env:"):
        name = value[4:]
        if name not in os.environ:
            raise ConfigError(f"config: kafka.extra.{key} refers to environment variable {name}, which is not set")
        return os.environ[name]
    if value.startswith("file:"):
        try:
            return Path(value[5:]).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"config: kafka.extra.{key} refers to a file that cannot be read ({exc.strerror})"
            ) from None
    return value


@dataclass(frozen=True)
class JobConfig:
    """The validated configuration of one stream job.

    ``params`` are the parameters of the event-level mechanism; with user-level privacy they are
    the group-privacy calibration of the configured (ε, δ) (``unit.event_budget``), and
    ``budget`` is the configured per-window guarantee at the unit's level. ``guard`` is the
    budget guard, if one is configured."""

    values: Mapping[str, Mapping[str, Any]]
    hierarchy: Hierarchy
    params: HHHParams
    unit: PrivacyUnit = PrivacyUnit()
    budget: PrivacyBudget | None = None
    guard: BudgetGuard | None = None
    #: the δ charged for hashed keys' chance collisions — sketch keys and JSON unit keys
    #: (docs/calibration.md §8, §8.1) — in ``budget``
    key_delta: float = 0.0

    def __getitem__(self, dotted: str) -> Any:
        section, _, key = dotted.partition(".")
        return self.values[section][key]

    @property
    def uses_key_secret(self) -> bool:
        """Whether the job hashes under the deployment's secret (:func:`dphhh.stream.ledger.job_key_secret`):
        hashed sketch keys (docs/ALGORITHMS.md §1 "Keys"), or JSON privacy-unit keys
        (:func:`dphhh.privacy.unit_cap.unit_keys_of`)."""
        return self.hierarchy.hashed_keys or _json_units(self.values["privacy"])

    @property
    def seed(self) -> int | None:
        seed = self["privacy.seed"]
        return None if seed < 0 else seed

    @property
    def mode(self) -> str:
        """``live`` or ``replay`` (``window.mode``)."""
        return self["window.mode"]

    @property
    def origin_ms(self) -> int | None:
        """The configured schedule origin (``None``: live default, the deployment's first start)."""
        return parse_time_ms(self["window.origin"], "window.origin")

    @property
    def until_ms(self) -> int | None:
        """The configured end of the schedule (exclusive), if any."""
        return parse_time_ms(self["window.until"], "window.until")

    def schedule(self, origin_ms: int | None = None) -> ReleaseSchedule:
        """The release schedule, with ``origin_ms`` (the ledger's stored origin) where none is configured."""
        from .schedule import ReleaseSchedule

        w = self.values["window"]
        origin = self.origin_ms if self.origin_ms is not None else origin_ms
        if origin is None:
            raise UsageError("JobConfig: the schedule's origin is not known yet (see stream.ledger.resolve_origin)")
        return ReleaseSchedule(
            size_ms=w["size_ms"],
            origin_ms=origin,
            mode=w["mode"],
            grace_ms=w["grace_ms"],
            until_ms=self.until_ms,
            max_future_ms=w["max_future_ms"],
            max_past_ms=w["max_past_ms"],
            epoch_ms=w["epoch_ms"],
            publish_delay_ms=w["publish_delay_ms"],
        )

    def deployment_fingerprint(self) -> str:
        """A short hash of everything that makes two runs the *same deployment* (topics, input,
        hierarchy, windows, privacy, parallelism): runs share checkpoints and a release ledger
        only when their fingerprints agree."""
        import hashlib
        import json

        v = self.values
        key = {
            "kafka": {k: v["kafka"][k] for k in ("input_topic", "reports_topic", "group_id")},
            "input": dict(v["input"]),
            "hierarchy": dict(v["hierarchy"]),
            # until, the clock's tick and the publication delay only say when a job stops, how often
            # it looks at the clock and when reports become visible
            "window": {k: x for k, x in v["window"].items() if k not in ("until", "clock_tick_ms", "publish_delay_ms")},
            "privacy": {k: x for k, x in v["privacy"].items() if k != "expected_window_size"},  # a hint only
            "parallelism": v["flink"]["parallelism"],
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def checkpoint_path(self) -> Path:
        """This deployment's checkpoint folder: ``flink.checkpoint_dir``/<fingerprint> (absolute)."""
        return Path(self["flink.checkpoint_dir"]).resolve() / self.deployment_fingerprint()

    def warnings(self) -> list[str]:
        """Warnings about valid settings that weaken the guarantee (printed at start)."""
        out = guarantee_warnings(
            self.params, h=self.hierarchy.h, expected_n=self["privacy.expected_window_size"] or None
        )
        if self.seed is not None:
            out.append("privacy.seed is set: the noise is reproducible and the reports are NOT private (tests only)")
        if self.unit.kind == "user" and self.guard is None:
            out.append(
                "user-level privacy without a budget guard: a unit present in k windows is protected at "
                "k times the per-window (epsilon, delta); set privacy.budget_epsilon"
            )
        return out

    def kafka_client_options(self) -> dict[str, Any]:
        """Options shared by every Kafka client (bootstrap, security, pass-through extras).

        An extra whose value is ``env:NAME`` takes the value of environment variable NAME, and
        ``file:PATH`` the (stripped) content of that file — so secrets such as
        ``sasl.jaas.config`` need not sit in the configuration file. Their values are never
        logged (:meth:`public_dict` masks every extra) nor put in error messages."""
        opts = {"bootstrap.servers": self["kafka.bootstrap"], "security.protocol": self["kafka.security_protocol"]}
        opts.update({str(k): _secret(str(k), str(v)) for k, v in self["kafka.extra"].items()})
        return opts

    def public_dict(self) -> dict[str, Any]:
        """The configuration without pass-through secrets (for logs)."""
        out = copy.deepcopy({s: dict(v) for s, v in self.values.items()})
        out["kafka"]["extra"] = {k: "***" for k in out["kafka"]["extra"]}
        return out


def _validate(values: dict[str, dict[str, Any]]) -> JobConfig:
    for section, defaults in DEFAULTS.items():
        for key, like in defaults.items():
            values[section][key] = _check_type(section, key, values[section][key], like)
    k, i, w, f = values["kafka"], values["input"], values["window"], values["flink"]
    for key in ("bootstrap", "input_topic", "reports_topic", "dead_letter_topic", "group_id"):
        if not k[key].strip():
            raise ConfigError(f"config: kafka.{key} must not be empty")
    if k["wait_s"] < 0:
        raise ConfigError(f"config: kafka.wait_s must be >= 0, got {k['wait_s']}")
    if k["start"] not in ("auto", "earliest", "latest", "committed"):
        raise ConfigError(f"config: kafka.start must be auto, earliest, latest or committed, got {k['start']!r}")
    if i["format"] not in MESSAGE_FORMATS:  # the registry as it is now: a format registered later is read
        raise ConfigError(f"config: input.format must be one of {', '.join(MESSAGE_FORMATS)}, got {i['format']!r}")
    if i["max_message_bytes"] < 4:
        raise ConfigError(f"config: input.max_message_bytes must be >= 4, got {i['max_message_bytes']}")
    _check_window(w)
    if f["resume"] not in ("latest", "none"):
        raise ConfigError(f"config: flink.resume must be 'latest' or 'none', got {f['resume']!r}")
    if f["restart_attempts"] < 0:
        raise ConfigError(f"config: flink.restart_attempts must be >= 0, got {f['restart_attempts']}")
    if f["parallelism"] < 1:
        raise ConfigError(f"config: flink.parallelism must be >= 1, got {f['parallelism']}")
    for key in ("batch_max_messages", "batch_max_bytes", "batch_max_delay_ms"):
        if not 1 <= f[key] < 2**31:
            raise ConfigError(f"config: flink.{key} must be between 1 and 2^31 - 1, got {f[key]}")
    if not 0 <= values["output"]["metrics_port"] <= 65535:
        raise ConfigError(
            f"config: output.metrics_port must be between 0 and 65535, got {values['output']['metrics_port']}"
        )
    t = values["testing"]
    for key in ("checkpoint_delay_ms", "slow_decode_ms", "hold_s"):
        if not 0 <= t[key] <= 600_000:
            raise ConfigError(f"config: testing.{key} must be between 0 and 600000, got {t[key]}")
    if t["debug_sketch_dir"] and values["privacy"]["seed"] < 0:
        raise ConfigError(
            "config: testing.debug_sketch_dir writes the exact, NON-PRIVATE sketches of every window: it is "
            "refused unless privacy.seed is set too (a test run, whose reports say they are not private)"
        )
    if f["checkpoint_interval_ms"] < 100:
        raise ConfigError(f"config: flink.checkpoint_interval_ms must be >= 100, got {f['checkpoint_interval_ms']}")
    try:
        hierarchy = parse_hierarchy(values["hierarchy"]["spec"])
    except ValueError as exc:
        raise ConfigError(f"config: hierarchy.spec: {exc}") from None
    _check_format_fits(hierarchy, i["format"])
    if hierarchy.kind == "pair":
        _check_pair_input(hierarchy, i, values["privacy"])
    weight_cap = _check_flow_input(i)
    p = values["privacy"]
    unit = _privacy_unit(p, i["format"])
    if weight_cap > 1:
        unit = PrivacyUnit(unit.kind, unit.key, unit.cap, weight_cap=weight_cap, weight=i["flow_weight"])
    try:
        budget = PrivacyBudget(p["epsilon"], p["delta"])
        if not 0 < p["delta"] < 1:
            raise UsageError.of_parameter(
                "HHHParams", "delta", f"must be a number with 0 < delta < 1, got {p['delta']!r}"
            )
        key_delta = _key_collision_delta(budget, hierarchy, unit, p["counters"], _json_units(p))
        event = unit.event_budget(PrivacyBudget(budget.epsilon, budget.delta - key_delta))
        params = HHHParams(
            epsilon=event.epsilon,
            delta=event.delta,
            tau=p["tau"],
            beta=p["beta"],
            counters=p["counters"],
            partitions=p["partitions"],
            variant=p["variant"],
            mode=p["mode"],
            calibration=p["calibration"],
        )
    except UsageError as exc:  # about one of the privacy keys, named by its field (or the section's)
        raise ConfigError(f"config: {exc.about(f'privacy.{exc.parameter}' if exc.parameter else 'privacy')}") from None
    if p["expected_window_size"] < 0:
        raise ConfigError(f"config: privacy.expected_window_size must be >= 0, got {p['expected_window_size']}")
    return JobConfig(values, hierarchy, params, unit, budget, _budget_guard(p, budget), key_delta)


def _check_window(w: Mapping[str, Any]) -> None:
    """The schedule keys (see :mod:`dphhh.stream.schedule`): mode, size, origin/until, grace and bands."""
    from .schedule import MAX_SCHEDULE_WINDOWS, MODES, REPLAY

    if w["mode"] not in MODES:
        raise ConfigError(f"config: window.mode must be 'live' or 'replay', got {w['mode']!r}")
    if w["size_ms"] < 1:
        raise ConfigError(f"config: window.size_ms must be >= 1, got {w['size_ms']}")
    for key in ("grace_ms", "max_future_ms", "max_past_ms"):
        if w[key] < 0:
            raise ConfigError(f"config: window.{key} must be >= 0, got {w[key]}")
    if not 1 <= w["clock_tick_ms"] <= 60_000:
        raise ConfigError(f"config: window.clock_tick_ms must be between 1 and 60000, got {w['clock_tick_ms']}")
    if not 1 <= w["epoch_ms"] <= 60_000:
        raise ConfigError(f"config: window.epoch_ms must be between 1 and 60000, got {w['epoch_ms']}")
    if not 0 <= w["publish_delay_ms"] <= 3_600_000:
        raise ConfigError(f"config: window.publish_delay_ms must be between 0 and 3600000, got {w['publish_delay_ms']}")
    origin, until = parse_time_ms(w["origin"], "window.origin"), parse_time_ms(w["until"], "window.until")
    for key, value in (("origin", origin), ("until", until)):
        if value is not None and (value < 0 or value % w["size_ms"]):
            raise ConfigError(
                f"config: window.{key} must be a window boundary (a multiple of window.size_ms = "
                f"{w['size_ms']} ms since the epoch), got {value}"
            )
    if w["mode"] == REPLAY and (origin is None or until is None):
        raise ConfigError(
            "config: window.mode = 'replay' needs window.origin and window.until (the public range "
            "[origin, until) whose every window gets a report)"
        )
    if origin is not None and until is not None:
        if until <= origin:
            raise ConfigError(f"config: window.until ({w['until']}) must be after window.origin ({w['origin']})")
        if (until - origin) // w["size_ms"] > MAX_SCHEDULE_WINDOWS:
            raise ConfigError(
                f"config: window.origin .. window.until spans {(until - origin) // w['size_ms']} windows; "
                f"at most {MAX_SCHEDULE_WINDOWS} (each gets a report): use larger windows or a shorter range"
            )


def _check_format_fits(hierarchy: Hierarchy, fmt: str) -> None:
    """``input.format`` reads values of the hierarchy's kind (each format's ``hierarchy_kinds``,
    :mod:`dphhh.connectors.messages`)."""
    if hierarchy.kind in MESSAGE_FORMATS[fmt].hierarchy_kinds:
        return
    readers = [f"{name!r}" for name, cls in MESSAGE_FORMATS.items() if hierarchy.kind in cls.hierarchy_kinds]
    kinds = " or ".join(sorted(MESSAGE_FORMATS[fmt].hierarchy_kinds))
    if not readers:
        raise ConfigError(
            f"config: hierarchy.spec {hierarchy.spec()!r}: no input format of the stream job reads {hierarchy.kind} "
            f"values (input.format {fmt!r} reads {kinds} hierarchies)"
        )
    raise ConfigError(
        f"config: hierarchy.spec {hierarchy.spec()!r} needs input.format {' or '.join(readers)}, got {fmt!r} "
        f"(which reads values of {kinds} hierarchies)"
    )


def _check_pair_input(hierarchy: Any, i: dict[str, Any], p: Mapping[str, Any]) -> None:
    """A pair hierarchy (docs/ALGORITHMS.md §11) reads (source, destination) pairs: an input.format
    that reads pairs (:func:`_check_format_fits`: ``packed-ipv4-pairs``, 8 bytes per element, or
    ``flow-json``, whose ``input.flow_key`` is then ``pair``: both addresses of each record, weighted
    by ``input.flow_weight`` as in 1-D); IPv4 × IPv4, at event level or at user level per source
    host (the pair's first address)."""
    if not (hierarchy.first.kind == hierarchy.second.kind == "ipv4"):
        raise ConfigError(f"config: hierarchy.spec {hierarchy.spec()!r}: the stream job reads IPv4 x IPv4 pairs")
    if "flow_key" in MESSAGE_FORMATS[i["format"]].reads:  # flow records: both addresses of each
        if i["flow_key"] not in ("src", "pair"):
            raise ConfigError("config: input.flow_key: a pair hierarchy reads both addresses (flow_key = 'pair')")
        i["flow_key"] = "pair"
    if p["unit_key"].strip() and p["unit_key"].strip() != "source-ipv4":
        raise ConfigError(
            "config: privacy.unit_key: a pair hierarchy supports user level per source host only "
            "(unit_key = 'source-ipv4': the pair's source address)"
        )


def _check_flow_input(i: Mapping[str, Any]) -> int:
    """The flow-json keys (``input.flow_*``, ``input.weight_cap``); returns the weight cap W (1 when
    records are unweighted)."""
    from dphhh.connectors.flow_json import KEYS, SCHEMAS, WEIGHTS

    for key, allowed in (("flow_schema", SCHEMAS), ("flow_key", (*KEYS, "pair")), ("flow_weight", WEIGHTS)):
        if i[key] not in allowed:
            raise ConfigError(f"config: input.{key} must be one of {', '.join(allowed)}, got {i[key]!r}")
    cap = i["weight_cap"]
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise ConfigError(f"config: input.weight_cap must be an integer >= 1 (0 = unset), got {cap!r}")
    weighted = "flow_weight" in MESSAGE_FORMATS[i["format"]].reads and i["flow_weight"] != "records"
    if not weighted:
        if cap > 1:
            weighable = " or ".join(f"{n!r}" for n, c in MESSAGE_FORMATS.items() if "flow_weight" in c.reads)
            raise ConfigError(
                f"config: input.weight_cap applies to input.format {weighable} with input.flow_weight "
                f"'packets' or 'bytes' (got format {i['format']!r}, weight {i['flow_weight']!r})"
            )
        return 1
    if cap < 1:
        raise ConfigError(
            f"config: input.flow_weight = {i['flow_weight']!r} needs input.weight_cap = W: each record's "
            "weight is clipped to W and the guarantee covers one record by group privacy over W unit "
            "elements (epsilon is divided by W; see dphhh plan --weight-cap)"
        )
    return cap


def _privacy_unit(p: Mapping[str, Any], fmt: str) -> PrivacyUnit:
    """The privacy unit of ``privacy.unit_key`` / ``privacy.unit_cap`` (checked against the input
    format); the weight cap of weighted flow records is added by the caller (group size m·W)."""
    key, cap = p["unit_key"].strip(), p["unit_cap"]
    if not key:
        if cap != 1:
            raise ConfigError(
                f"config: privacy.unit_cap = {cap} needs a privacy.unit_key (event-level privacy caps nothing)"
            )
        return PrivacyUnit()
    if cap < 1:
        raise ConfigError(f"config: privacy.unit_cap must be an integer >= 1, got {cap}")
    if key == "source-ipv4":
        _check_unit_carrier(key, "source-ipv4", fmt)
        return PrivacyUnit("user", "source address", cap)
    if key.startswith("json:") and key[5:].strip():
        _check_unit_carrier(key, "json", fmt)
        return PrivacyUnit("user", f"json field {key[5:].strip()!r}", cap)
    raise ConfigError(f"config: privacy.unit_key must be empty, 'source-ipv4' or 'json:FIELD', got {key!r}")


#: The privacy.unit_key kinds: (what a unit is, the key's syntax), for the messages of :func:`_check_unit_carrier`.
_UNIT_KINDS = {"source-ipv4": ("user level per source host", "source-ipv4"), "json": ("a JSON field", "json:FIELD")}


def _check_unit_carrier(key: str, kind: str, fmt: str) -> None:
    """The unit key ``key`` (of ``kind``) is carried by ``input.format`` (each format's ``unit_keys``)."""
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
    raise ConfigError(f"config: privacy.unit_key {key!r} needs input.format {carriers}, got {fmt!r}{also}")


def _json_units(p: Mapping[str, Any]) -> bool:
    """Whether the privacy unit is a JSON field (``privacy.unit_key = "json:FIELD"``): its values
    get keyed 128-bit unit keys (:func:`dphhh.privacy.unit_cap.unit_keys_of`)."""
    return p["unit_key"].strip().startswith("json:")


def _key_collision_delta(
    budget: PrivacyBudget, hierarchy: Hierarchy, unit: PrivacyUnit, counters: int, json_units: bool = False
) -> float:
    """The δ of hashed keys' chance collisions (docs/calibration.md §8), taken from ``budget``: per
    hashed level, each of a unit's at most m distinct prefixes (1 at event level; a weighted record
    is one prefix) may meet a key of the final sketch, :func:`dphhh.sketches.keyed.collision_delta` each;
    with JSON units, another unit of the window may share the unit's hashed key,
    :func:`dphhh.privacy.unit_cap.unit_collision_delta` (§8.1)."""
    from dphhh.privacy.unit_cap import unit_collision_delta
    from dphhh.sketches.keyed import collision_delta

    distinct = unit.cap if unit.kind == "user" else 1
    sketch_keys = distinct * hierarchy.hashed_levels * collision_delta(counters)
    cost = sketch_keys + (unit_collision_delta() if json_units else 0.0)
    if cost and cost >= budget.delta / 2:
        what = "a hierarchy with hashed keys" if sketch_keys else "hashed (JSON) unit keys"
        raise UsageError.of_parameter(
            "HHHParams",
            "delta",
            f"= {budget.delta:g} is too small for {what}: their chance collisions alone cost {cost:.3g} "
            "(docs/calibration.md §8)",
        )
    return cost


def _budget_guard(p: Mapping[str, Any], per_window: PrivacyBudget) -> BudgetGuard | None:
    eps, delta, period = p["budget_epsilon"], p["budget_delta"], p["budget_period"]
    if period not in ("day", "deployment"):
        raise ConfigError(f"config: privacy.budget_period must be 'day' or 'deployment', got {period!r}")
    if eps == 0 and delta == 0:
        return None
    if not eps > 0 or not 0 <= delta < 1:
        raise ConfigError(
            f"config: privacy.budget_epsilon must be > 0 and privacy.budget_delta in [0, 1), got {eps!r}, {delta!r}"
        )
    if delta == 0:  # only epsilon is limited: delta grows with the windows the epsilon budget allows
        delta = min(per_window.delta * math.ceil(eps / per_window.epsilon - 1e-9), 0.5)
    if delta < per_window.delta:
        raise ConfigError(
            f"config: privacy.budget_delta = {delta:g} is below one window's delta = {per_window.delta:g} "
            "(set it to at least the per-window delta times the windows allowed)"
        )
    if eps < per_window.epsilon:
        raise ConfigError(
            f"config: privacy.budget_epsilon = {eps:g} is below one window's epsilon = {per_window.epsilon:g}: "
            "no window could ever be released"
        )
    return BudgetGuard(PrivacyBudget(eps, delta), period)


def load_config(
    path: str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> JobConfig:
    """Defaults, then the TOML file, then ``DPHHH_SECTION_KEY`` variables, then ``section.key=value``."""
    values = copy.deepcopy(DEFAULTS)
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None
        _merge(values, data, str(path))
    env = os.environ if environ is None else environ
    for section, defaults in DEFAULTS.items():
        for key, like in defaults.items():
            name = f"DPHHH_{section.upper()}_{key.upper()}"
            if name in env:
                values[section][key] = _coerce(section, key, env[name], like)
    for item in overrides:
        dotted, sep, text = item.partition("=")
        section, _, key = dotted.strip().partition(".")
        if sep and f"{section}.{key}" in REPLACED:
            raise _unknown_key(f"{section}.{key}", "--set")
        if not sep or section not in DEFAULTS or key not in DEFAULTS[section]:
            raise ConfigError(f"config: --set expects section.key=value with a known key, got {item!r}")
        values[section][key] = _coerce(section, key, text.strip(), DEFAULTS[section][key])
    _check_testing(values["testing"])
    return _validate(values)


def _check_testing(testing: Mapping[str, Any]) -> None:
    """The [testing] hooks are refused, each naming its key, unless the process environment has
    ``DPHHH_TESTING=1`` (the test suite's): a deployment's configuration cannot switch on a NON-PRIVATE
    dump, an injected failure or a delay by accident. This reads ``os.environ`` itself, never
    :func:`load_config`'s ``environ`` (which tests empty to keep their own variables out). Checked where
    a configuration is loaded, not again in the workers, which receive values this check has passed."""
    if os.environ.get(TESTING_ENV) == "1":
        return
    for key, default in DEFAULTS["testing"].items():
        if testing[key] != default:
            raise ConfigError(
                f"config: testing.{key} is a test hook, refused outside the test suite "
                f"(it sets {TESTING_ENV}=1); leave [testing] at its defaults"
            )


def load_config_values(values: Mapping[str, Mapping[str, Any]]) -> JobConfig:
    """Validate an already merged configuration (e.g. ``JobConfig.values`` shipped to a worker)."""
    merged = copy.deepcopy(DEFAULTS)
    _merge(merged, values, "configuration values")
    return _validate(merged)
