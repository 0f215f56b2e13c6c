"""Configuration of the stream job: one TOML file, environment overrides, flag overrides.

Precedence (later wins): built-in defaults < the TOML file (``--config FILE``) < environment
variables ``DPHHH_<SECTION>_<KEY>`` (e.g. ``DPHHH_KAFKA_BOOTSTRAP``) < ``--set section.key=value``
flags. Every value is type-checked and validated at start; an invalid value fails with a message
naming the key (``config: privacy.epsilon must be ...``). Unknown keys are refused (typos should
not silently fall back to defaults).
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dphhh.privacy.budget_guard import BudgetGuard
from dphhh.privacy.checks import guarantee_warnings
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy

from .config_sections import (
    SECTIONS,
    ConfigError,
    FlinkSection,
    HierarchySection,
    InputSection,
    KafkaSection,
    OutputSection,
    PrivacySection,
    TestingSection,
    WindowSection,
    parse_time_ms,
)

if TYPE_CHECKING:
    from .schedule import ReleaseSchedule

__all__ = ["DEFAULTS", "REPLACED", "JobConfig", "ConfigError", "load_config", "parse_time_ms"]

#: Every key's built-in default, per section in the file's order: the fields of
#: :mod:`dphhh.stream.config_sections`' dataclasses. The ``[testing]`` section holds the test suite's
#: hooks: a value other than its default is refused unless the environment says the run is a test
#: (TESTING_ENV = 1: tests/conftest.py sets it), see _check_testing.
DEFAULTS: dict[str, dict[str, Any]] = {section.NAME: section.defaults() for section in SECTIONS}
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
        raise ConfigError.of_key(section, key, f"must be a {type(like).__name__}, got {text!r}") from None
    return text


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
    """The validated configuration of one stream job: its sections (:mod:`dphhh.stream.config_sections`)
    and the domain objects they build.

    ``params`` are the parameters of the event-level mechanism; with user-level privacy they are
    the group-privacy calibration of the configured (ε, δ) (``unit.event_budget``), and
    ``budget`` is the configured per-window guarantee at the unit's level. ``guard`` is the
    budget guard, if one is configured. ``values`` is every key's value (``{section: {key: value}}``,
    what a worker is sent and re-validates); ``cfg["section.key"]`` reads one."""

    kafka: KafkaSection
    input: InputSection
    window: WindowSection
    privacy: PrivacySection
    flink: FlinkSection
    output: OutputSection
    testing: TestingSection
    hierarchy: Hierarchy
    params: HHHParams
    unit: PrivacyUnit
    budget: PrivacyBudget
    guard: BudgetGuard | None
    #: the δ charged for hashed keys' chance collisions — sketch keys and JSON unit keys
    #: (docs/calibration.md §8, §8.1) — in ``budget``
    key_delta: float
    values: Mapping[str, Mapping[str, Any]]

    def __getitem__(self, dotted: str) -> Any:
        section, _, key = dotted.partition(".")
        return self.values[section][key]

    @property
    def uses_key_secret(self) -> bool:
        """Whether the job hashes under the deployment's secret (:func:`dphhh.stream.ledger.job_key_secret`):
        hashed sketch keys (docs/ALGORITHMS.md §1 "Keys"), or JSON privacy-unit keys
        (:func:`dphhh.privacy.unit_cap.unit_keys_of`)."""
        return self.hierarchy.hashed_keys or self.privacy.json_units

    @property
    def seed(self) -> int | None:
        return None if self.privacy.seed < 0 else self.privacy.seed

    @property
    def mode(self) -> str:
        """``live`` or ``replay`` (``window.mode``)."""
        return self.window.mode

    @property
    def origin_ms(self) -> int | None:
        """The configured schedule origin (``None``: live default, the deployment's first start)."""
        return self.window.origin_ms

    @property
    def until_ms(self) -> int | None:
        """The configured end of the schedule (exclusive), if any."""
        return self.window.until_ms

    def schedule(self, origin_ms: int | None = None) -> ReleaseSchedule:
        """The release schedule, with ``origin_ms`` (the ledger's stored origin) where none is configured."""
        return self.window.schedule(origin_ms)

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
            "parallelism": self.flink.parallelism,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def checkpoint_path(self) -> Path:
        """This deployment's checkpoint folder: ``flink.checkpoint_dir``/<fingerprint> (absolute)."""
        return Path(self.flink.checkpoint_dir).resolve() / self.deployment_fingerprint()

    def warnings(self) -> list[str]:
        """Warnings about valid settings that weaken the guarantee (printed at start)."""
        out = guarantee_warnings(self.params, h=self.hierarchy.h, expected_n=self.privacy.expected_window_size or None)
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
        opts = {"bootstrap.servers": self.kafka.bootstrap, "security.protocol": self.kafka.security_protocol}
        opts.update({str(k): _secret(str(k), str(v)) for k, v in self.kafka.extra.items()})
        return opts

    def public_dict(self) -> dict[str, Any]:
        """The configuration without pass-through secrets (for logs)."""
        out = copy.deepcopy({s: dict(v) for s, v in self.values.items()})
        out["kafka"]["extra"] = {k: "***" for k in out["kafka"]["extra"]}
        return out


def _validate(values: Mapping[str, Mapping[str, Any]]) -> JobConfig:
    """The job's configuration of merged ``values`` (every key present; left as they are): each
    section checks its own keys, then the rules that join sections."""
    kafka = KafkaSection.of(values["kafka"])
    inputs = InputSection.of(values["input"])
    window = WindowSection.of(values["window"])
    flink = FlinkSection.of(values["flink"])
    output = OutputSection.of(values["output"])
    testing = TestingSection.of(values["testing"])
    privacy = PrivacySection.of(values["privacy"])
    if testing.debug_sketch_dir and privacy.seed < 0:
        raise ConfigError.of_key(
            "testing",
            "debug_sketch_dir",
            "writes the exact, NON-PRIVATE sketches of every window: it is refused unless privacy.seed is set "
            "too (a test run, whose reports say they are not private)",
        )
    spec = HierarchySection.of(values["hierarchy"])
    hierarchy = spec.hierarchy
    inputs.check_reads(hierarchy)
    if hierarchy.kind == "pair":
        inputs = _pair_input(hierarchy, inputs, privacy)
    unit = privacy.unit(inputs.format, inputs.record_weight_cap, inputs.flow_weight)
    budget = privacy.budget()
    key_delta = privacy.naming_keys(
        lambda: _key_collision_delta(budget, hierarchy, unit, privacy.counters, privacy.json_units)
    )
    event = privacy.naming_keys(lambda: unit.event_budget(PrivacyBudget(budget.epsilon, budget.delta - key_delta)))
    params = privacy.params(event)
    guard = privacy.guard(budget)
    sections = (kafka, inputs, spec, window, privacy, flink, output, testing)
    return JobConfig(
        kafka=kafka,
        input=inputs,
        window=window,
        privacy=privacy,
        flink=flink,
        output=output,
        testing=testing,
        hierarchy=hierarchy,
        params=params,
        unit=unit,
        budget=budget,
        guard=guard,
        key_delta=key_delta,
        values={section.NAME: section.as_values() for section in sections},
    )


def _pair_input(hierarchy: Any, inputs: InputSection, privacy: PrivacySection) -> InputSection:
    """A pair hierarchy (docs/ALGORITHMS.md §11) reads (source, destination) pairs: an input.format
    that reads pairs (:meth:`InputSection.check_reads`: ``packed-ipv4-pairs``, 8 bytes per element, or
    ``flow-json``, read with ``flow_key = "pair"``: both addresses of each record, weighted by
    ``input.flow_weight`` as in 1-D); IPv4 × IPv4, at event level or at user level per source
    host (the pair's first address). Returns the input as a pair hierarchy reads it."""
    if not (hierarchy.first.kind == hierarchy.second.kind == "ipv4"):
        raise ConfigError.of_key("hierarchy", "spec", f"{hierarchy.spec()!r}: the stream job reads IPv4 x IPv4 pairs")
    inputs = inputs.for_pairs()
    if privacy.unit_key.strip() and not privacy.source_units:
        raise ConfigError.of_key(
            "privacy",
            "unit_key",
            ": a pair hierarchy supports user level per source host only (unit_key = 'source-ipv4': the "
            "pair's source address)",
        )
    return inputs


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
            raise ConfigError.of_key(
                "testing",
                key,
                f"is a test hook, refused outside the test suite (it sets {TESTING_ENV}=1); leave [testing] "
                "at its defaults",
            )


def load_config_values(values: Mapping[str, Mapping[str, Any]]) -> JobConfig:
    """Validate an already merged configuration (e.g. ``JobConfig.values`` shipped to a worker)."""
    merged = copy.deepcopy(DEFAULTS)
    _merge(merged, values, "configuration values")
    return _validate(merged)
