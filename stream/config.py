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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from connectors.decode import FORMATS
from privacy.params import HHHParams
from sketches.hierarchy import Hierarchy, parse_hierarchy

__all__ = ["DEFAULTS", "JobConfig", "ConfigError", "load_config"]


class ConfigError(ValueError):
    """An invalid configuration value; the message names the key."""


DEFAULTS: dict[str, dict[str, Any]] = {
    "kafka": {
        "bootstrap": "127.0.0.1:9092",
        "input_topic": "dphhh-input",
        "reports_topic": "dphhh-reports",
        "dead_letter_topic": "dphhh-dead-letter",
        "group_id": "dphhh-job",
        "start": "earliest",  # earliest | latest | committed
        "bounded": False,  # stop at the end offsets present at start (tests, replays)
        "security_protocol": "PLAINTEXT",
        "extra": {},  # passed through to every Kafka client (e.g. sasl.mechanism)
    },
    "input": {
        "format": "packed-ipv4",
        "json_field": "ip",
        "json_time_field": "",
        "max_message_bytes": 1 << 20,
    },
    "hierarchy": {"spec": "ipv4:8,16,24,32"},
    "window": {"size_ms": 10_000, "allowed_lateness_ms": 0, "out_of_orderness_ms": 0},
    "privacy": {
        "epsilon": 1.0,
        "delta": 1e-6,
        "beta": 0.05,
        "tau": 1000.0,
        "counters": 1024,
        "partitions": 1,
        "variant": "fresh",
        "mode": "conservative",
        "seed": -1,  # >= 0 seeds the noise: reports are then NOT private (tests only)
    },
    "flink": {
        "parallelism": 1,
        "checkpoint_interval_ms": 5_000,
        "checkpoint_dir": "var/flink/checkpoints",
        "restart_attempts": 3,
        "prometheus_port": "9249-9259",
        "remote": "",  # host:port of a Flink JobManager; empty = embedded MiniCluster
        # messages are packed into batches on the Java side before they reach the Python decoder
        "batch_max_messages": 4096,
        "batch_max_bytes": 1 << 20,
        "batch_max_delay_ms": 100,
    },
    "output": {
        "reports_file": "var/reports.jsonl",
        "ledger_dir": "var/ledger",
        "debug_sketch_dir": "",  # NON-PRIVATE sketch dumps at release, for tests only
        "fail_after_window": -1,  # fault injection for tests: fail once after releasing window #N
        "run_dir": "",  # Flink's lib links, logs and markers; default var/runs/run-<time>
        "metrics_port": 9260,  # dphhh run's Prometheus endpoint of report metrics (0 = off)
    },
}


def _merge(base: dict[str, dict[str, Any]], overlay: Mapping[str, Any], where: str) -> None:
    for section, values in overlay.items():
        if section not in base:
            raise ConfigError(f"config: unknown section {section!r} in {where}")
        if not isinstance(values, Mapping):
            raise ConfigError(f"config: {section} must be a table in {where}")
        for key, value in values.items():
            if key not in base[section]:
                raise ConfigError(f"config: unknown key {section}.{key} in {where}")
            base[section][key] = value


def _coerce(section: str, key: str, text: str, like: Any) -> Any:
    name = f"{section}.{key}"
    try:
        if isinstance(like, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
        if isinstance(like, dict):
            return dict(item.split("=", 1) for item in text.split(",") if item)
    except ValueError:
        raise ConfigError(f"config: {name} must be a {type(like).__name__}, got {text!r}") from None
    return text


def _check_type(section: str, key: str, value: Any, like: Any) -> Any:
    name = f"config: {section}.{key}"
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
            raise ConfigError(f"config: kafka.extra.{key} refers to a file that cannot be read ({exc.strerror})") from None
    return value


@dataclass(frozen=True)
class JobConfig:
    """The validated configuration of one stream job."""

    values: Mapping[str, Mapping[str, Any]]
    hierarchy: Hierarchy
    params: HHHParams

    def __getitem__(self, dotted: str) -> Any:
        section, _, key = dotted.partition(".")
        return self.values[section][key]

    @property
    def seed(self) -> int | None:
        seed = self["privacy.seed"]
        return None if seed < 0 else seed

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
    if k["start"] not in ("earliest", "latest", "committed"):
        raise ConfigError(f"config: kafka.start must be earliest, latest or committed, got {k['start']!r}")
    if i["format"] not in FORMATS:
        raise ConfigError(f"config: input.format must be one of {', '.join(FORMATS)}, got {i['format']!r}")
    if i["max_message_bytes"] < 4:
        raise ConfigError(f"config: input.max_message_bytes must be >= 4, got {i['max_message_bytes']}")
    if w["size_ms"] < 1:
        raise ConfigError(f"config: window.size_ms must be >= 1, got {w['size_ms']}")
    for key in ("allowed_lateness_ms", "out_of_orderness_ms"):
        if w[key] < 0:
            raise ConfigError(f"config: window.{key} must be >= 0, got {w[key]}")
    if f["parallelism"] < 1:
        raise ConfigError(f"config: flink.parallelism must be >= 1, got {f['parallelism']}")
    for key in ("batch_max_messages", "batch_max_bytes", "batch_max_delay_ms"):
        if not 1 <= f[key] < 2**31:
            raise ConfigError(f"config: flink.{key} must be between 1 and 2^31 - 1, got {f[key]}")
    if not 0 <= values["output"]["metrics_port"] <= 65535:
        raise ConfigError(f"config: output.metrics_port must be between 0 and 65535, got {values['output']['metrics_port']}")
    if f["checkpoint_interval_ms"] < 100:
        raise ConfigError(f"config: flink.checkpoint_interval_ms must be >= 100, got {f['checkpoint_interval_ms']}")
    try:
        hierarchy = parse_hierarchy(values["hierarchy"]["spec"])
    except ValueError as exc:
        raise ConfigError(f"config: hierarchy.spec: {exc}") from None
    if hierarchy.kind != "ipv4" and i["format"] != "path":
        raise ConfigError(f"config: hierarchy.spec {hierarchy.spec()!r} needs input.format 'path' or an ipv4 hierarchy")
    if i["format"] == "path" and hierarchy.kind != "path":
        raise ConfigError("config: input.format 'path' needs a path hierarchy (hierarchy.spec = 'path:DEPTH')")
    p = values["privacy"]
    try:
        params = HHHParams(
            epsilon=p["epsilon"], delta=p["delta"], tau=p["tau"], beta=p["beta"], counters=p["counters"],
            partitions=p["partitions"], variant=p["variant"], mode=p["mode"],
        )
    except ValueError as exc:
        raise ConfigError(f"config: privacy.{str(exc).removeprefix('HHHParams: ')}") from None
    return JobConfig(values, hierarchy, params)


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
        if not sep or section not in DEFAULTS or key not in DEFAULTS[section]:
            raise ConfigError(f"config: --set expects section.key=value with a known key, got {item!r}")
        values[section][key] = _coerce(section, key, text.strip(), DEFAULTS[section][key])
    return _validate(values)


def load_config_values(values: Mapping[str, Mapping[str, Any]]) -> JobConfig:
    """Validate an already merged configuration (e.g. ``JobConfig.values`` shipped to a worker)."""
    merged = copy.deepcopy(DEFAULTS)
    _merge(merged, values, "configuration values")
    return _validate(merged)
