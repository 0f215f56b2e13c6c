"""The configuration's sections (dphhh.stream.config_sections): typed, checked without side effects,
each error about one key carrying that key, and the domain objects built by their sections.

* the built-in defaults are the sections' field defaults, in the file's order, and the annotated
  sample ``deploy/dphhh.toml`` is exactly those defaults (one list of keys, not two);
* validation reads its input and never writes it: the merged values are handed over read-only (any
  write raises), a pair hierarchy read from flow records included (``flow_key`` becomes ``pair`` in
  the job's *own* values, not in what it was given);
* each invalid value raises :class:`ConfigError` whose ``parameter`` is the key, and whose message
  starts with ``config:`` and names the key — the field, not the text, is what a caller reads;
* the sections build what they configure: the schedule, the privacy unit, the parameters, the guard.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from dphhh.privacy.params import PrivacyBudget
from dphhh.stream.config import DEFAULTS, ConfigError, _validate, load_config, load_config_values
from dphhh.stream.config_sections import SECTIONS, InputSection, PrivacySection, WindowSection
from dphhh.stream.paths import deploy_dir


def test_the_defaults_are_the_sections_fields_in_order() -> None:
    assert list(DEFAULTS) == [s.NAME for s in SECTIONS]
    for section in SECTIONS:
        assert list(DEFAULTS[section.NAME]) == [f.name for f in dataclasses.fields(section)]
        assert section.of(DEFAULTS[section.NAME]).as_values() == DEFAULTS[section.NAME]
    assert load_config(deploy_dir() / "dphhh.toml", environ={}).values == DEFAULTS


def _read_only(values: dict) -> MappingProxyType:
    return MappingProxyType({s: MappingProxyType(dict(v)) for s, v in values.items()})


def _merged(*overrides: str) -> dict:
    return {s: dict(v) for s, v in load_config(overrides=list(overrides), environ={}).values.items()}


@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("input.format=flow-json", "hierarchy.spec=ipv4:8,16 x ipv4:8,16"),  # flow_key src -> pair
        ("window.mode=replay", "window.origin=0", "window.until=60000", "privacy.epsilon=2"),
        ("privacy.budget_epsilon=5", "input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4"),
    ],
)
def test_validation_never_writes_what_it_reads(overrides: tuple[str, ...]) -> None:
    """Read-only input: a write anywhere in the checks raises TypeError (the old validator rewrote
    ``input.flow_key`` and every float-typed value in place)."""
    merged = _merged(*overrides)
    merged["privacy"]["epsilon"] = int(merged["privacy"]["epsilon"])  # an int where a float is expected
    before = copy.deepcopy(merged)
    cfg = _validate(_read_only(merged))
    assert merged == before
    assert isinstance(cfg.values["privacy"]["epsilon"], float)  # the job's own values are typed


def test_a_pair_hierarchy_reads_flow_records_by_both_addresses_in_its_own_values() -> None:
    given = _merged("input.format=flow-json", "hierarchy.spec=ipv4:8,16 x ipv4:8,16")
    given["input"]["flow_key"] = "src"
    cfg = load_config_values(given)
    assert given["input"]["flow_key"] == "src"
    assert cfg.input.flow_key == "pair" and cfg.values["input"]["flow_key"] == "pair"
    with pytest.raises(ConfigError) as caught:
        load_config_values({**given, "input": {**given["input"], "flow_key": "dst"}})
    assert caught.value.parameter == "input.flow_key"


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["kafka.group_id= "], "kafka.group_id"),
        (["kafka.wait_s=-1"], "kafka.wait_s"),
        (["kafka.start=middle"], "kafka.start"),
        (["kafka.wait_s=soon"], "kafka.wait_s"),  # the text of a --set that is not an integer
        (["input.format=csv"], "input.format"),
        (["input.max_message_bytes=3"], "input.max_message_bytes"),
        (["input.flow_schema=nfdump"], "input.flow_schema"),
        (["input.weight_cap=-2"], "input.weight_cap"),
        (["input.weight_cap=5"], "input.weight_cap"),  # not a weighted format
        (["input.format=flow-json", "input.flow_weight=bytes"], "input.flow_weight"),  # no cap
        (["input.format=path", "hierarchy.spec=ipv4:8,16"], "input.format"),
        (["hierarchy.spec=ipv4:8,40"], "hierarchy.spec"),
        (["window.mode=sometimes"], "window.mode"),
        (["window.size_ms=0"], "window.size_ms"),
        (["window.grace_ms=-1"], "window.grace_ms"),
        (["window.clock_tick_ms=0"], "window.clock_tick_ms"),
        (["window.epoch_ms=60001"], "window.epoch_ms"),
        (["window.publish_delay_ms=-5"], "window.publish_delay_ms"),
        (["window.origin=1234"], "window.origin"),
        (["window.origin=yesterday"], "window.origin"),
        (["window.origin=20000", "window.until=10000"], "window.until"),
        (["window.mode=replay"], "window.mode"),
        (["privacy.epsilon=-1"], "privacy.epsilon"),
        (["privacy.delta=2"], "privacy.delta"),
        (["privacy.counters=0"], "privacy.counters"),
        (["privacy.unit_cap=3"], "privacy.unit_cap"),
        (["privacy.unit_key=mac"], "privacy.unit_key"),
        (["privacy.unit_key=json:user"], "privacy.unit_key"),  # packed-ipv4 carries no JSON field
        (["privacy.budget_period=week"], "privacy.budget_period"),
        (["privacy.budget_epsilon=0.5"], "privacy.budget_epsilon"),
        (["privacy.budget_epsilon=10", "privacy.budget_delta=1e-9"], "privacy.budget_delta"),
        (["privacy.expected_window_size=-1"], "privacy.expected_window_size"),
        (["flink.parallelism=0"], "flink.parallelism"),
        (["flink.resume=oldest"], "flink.resume"),
        (["flink.restart_attempts=-1"], "flink.restart_attempts"),
        (["flink.batch_max_bytes=0"], "flink.batch_max_bytes"),
        (["flink.checkpoint_interval_ms=99"], "flink.checkpoint_interval_ms"),
        (["output.metrics_port=70000"], "output.metrics_port"),
        (["testing.slow_decode_ms=-1"], "testing.slow_decode_ms"),
        (["testing.debug_sketch_dir=/tmp/x"], "testing.debug_sketch_dir"),  # needs privacy.seed
        (
            ["hierarchy.spec=ipv4:8,16 x ipv4:8,16", "input.format=packed-ipv4-pairs", "privacy.unit_key=json:u"],
            "privacy.unit_key",
        ),
    ],
)
def test_each_invalid_value_names_its_key_as_a_field(overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides=overrides, environ={})
    exc = caught.value
    assert exc.parameter == key, (str(exc), exc.parameter)
    assert str(exc).startswith("config: ") and key in str(exc), str(exc)


def test_a_section_checks_its_own_keys_alone() -> None:
    """A section is made from its own mapping, without the others."""
    midnight = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)
    assert WindowSection.of({**DEFAULTS["window"], "origin": "2026-12-01T00:00:00Z"}).origin_ms == midnight
    with pytest.raises(ConfigError) as caught:
        InputSection.of({**DEFAULTS["input"], "json_field": 7})
    assert caught.value.parameter == "input.json_field" and "must be a string" in str(caught.value)


def test_the_sections_build_what_they_configure() -> None:
    window = WindowSection.of({**DEFAULTS["window"], "size_ms": 5000, "grace_ms": 250})
    schedule = window.schedule(origin_ms=10_000)
    assert (schedule.size_ms, schedule.origin_ms, schedule.grace_ms) == (5000, 10_000, 250)
    privacy = PrivacySection.of({**DEFAULTS["privacy"], "unit_key": "json:user", "unit_cap": 4})
    unit = privacy.unit("json")
    assert (unit.kind, unit.cap, privacy.unit_field, privacy.json_units, privacy.source_units) == (
        "user",
        4,
        "user",
        True,
        False,
    )
    weighted = PrivacySection.of(DEFAULTS["privacy"]).unit("flow-json", weight_cap=1500, weight="bytes")
    assert (weighted.weight_cap, weighted.weight) == (1500, "bytes")
    params = privacy.params(PrivacyBudget(0.5, 1e-7))
    assert (params.epsilon, params.delta, params.counters) == (0.5, 1e-7, DEFAULTS["privacy"]["counters"])
    guarded = PrivacySection.of({**DEFAULTS["privacy"], "budget_epsilon": 3.0})
    guard = guarded.guard(PrivacyBudget(1.0, 1e-6))
    assert guard is not None and guard.total == PrivacyBudget(3.0, 3e-6)
    assert PrivacySection.of(DEFAULTS["privacy"]).guard(PrivacyBudget(1.0, 1e-6)) is None


def test_the_job_reads_its_sections() -> None:
    cfg = load_config(overrides=["flink.parallelism=2", "kafka.input_topic=in", "output.metrics_port=0"], environ={})
    assert (cfg.flink.parallelism, cfg.kafka.input_topic, cfg.output.metrics_port) == (2, "in", 0)
    assert cfg["flink.parallelism"] == 2 and cfg.values["kafka"]["input_topic"] == "in"
    assert cfg.schedule(0).size_ms == cfg.window.size_ms
