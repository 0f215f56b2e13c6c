"""End-to-end user-level privacy: (source, destination) pairs, the source address as the privacy unit,
a per-window cap per unit and a per-deployment budget guard, on the real broker and job."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import numpy as np

from dphhh.connectors.decode import MessageDecoder
from dphhh.sketches.misra_gries import MisraGries
from dphhh.stream.config import load_config
from dphhh.stream.ledger import ReleaseLedger
from tests.e2e.jobs import BOOTSTRAP, JOB, dumped, publish, read_now
from tests.e2e.test_stream_e2e import WINDOW, _base

CAP = 3
HEAVY_UNIT, HEAVY_DST = 0xC0A80001, 0x0A090909  # one source sending 5,000 elements to 10.9.9.9


def _pairs(units: np.ndarray, dsts: np.ndarray) -> bytes:
    return np.stack([units, dsts], axis=1).astype(">u4").tobytes()


def _messages(base: int) -> list[tuple[int, bytes]]:
    rng = np.random.default_rng(7)
    out: list[tuple[int, bytes]] = []
    for w in (0, 1, 3):
        many = rng.integers(1, 2**31, 3_000, dtype=np.uint64).astype(np.uint32)  # 3,000 sources ...
        units = np.repeat(many, rng.integers(1, 5, many.size))  # ... sending 1-4 elements each to 10.1/16
        dsts = (np.uint32(0x0A010000) + rng.integers(0, 2**16, units.size, dtype=np.uint64)).astype(np.uint32)
        units = np.concatenate([units, np.full(5_000, HEAVY_UNIT, np.uint32)])
        dsts = np.concatenate([dsts, np.full(5_000, HEAVY_DST, np.uint32)])
        order = rng.permutation(units.size)
        units, dsts = units[order], dsts[order]
        for i in range(0, units.size, 1000):
            out.append((base + w * WINDOW + i // 1000, _pairs(units[i : i + 1000], dsts[i : i + 1000])))
    out.insert(3, (base + 7, b"\x01" * 7))  # not a multiple of 8 bytes: dead-lettered
    return out


def _offline(cfg, messages) -> dict[tuple[int, int], MisraGries]:
    """The canonical order written out plainly: per window, epoch by epoch (the record timestamp's
    ``window.epoch_ms`` interval), the epoch's (unit, destination) elements sorted; a unit's kept
    while it has fewer than CAP kept in the window; each (level, partition) then takes the epoch's
    kept keys sorted, one unit insert at a time."""
    from dphhh.sketches.partition import route

    decoder = MessageDecoder("packed-ipv4-pairs")
    epochs: dict[int, dict[int, list[tuple[int, int]]]] = {}
    for ts, value in messages:
        d = decoder.decode(value)
        if not d.ok:
            continue
        group = epochs.setdefault(ts - ts % WINDOW, {}).setdefault(ts - ts % cfg["window.epoch_ms"], [])
        group += list(zip(d.units.tolist(), d.values.tolist()))
    out: dict[tuple[int, int], MisraGries] = {}
    for start, by_epoch in epochs.items():
        kept_of: dict[int, int] = {}
        for epoch in sorted(by_epoch):
            kept = []
            for unit, dst in sorted(by_epoch[epoch]):
                if kept_of.get(unit, 0) < CAP:
                    kept_of[unit] = kept_of.get(unit, 0) + 1
                    kept.append(dst)
            values = np.array(kept, dtype=np.uint32)
            for level, p, keys, _ in route(cfg.hierarchy, values, cfg.params.partitions):
                sid = (level - 1) * cfg.params.partitions + p
                out.setdefault((start, sid), MisraGries(cfg.params.counters)).update(np.sort(keys))
    return {key: mg for key, mg in out.items() if mg.total}


def test_user_level_job_caps_units_states_the_unit_guarantee_and_guards_the_budget(broker, tmp_path: Path) -> None:
    """Each source keeps at most CAP elements per window (sketches equal a capped offline replay), reports
    state the per-unit (ε, δ) with the cap, the heavy single source is not reported, and windows past the
    deployment's budget are refused, on schedule, with nothing data-derived in them."""
    name = f"e2e-user-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "job.toml"
    config.write_text(
        "\n".join(
            [
                "[kafka]",
                f'bootstrap = "{BOOTSTRAP}"',
                f'input_topic = "{name}-in"',
                f'reports_topic = "{name}-reports"',
                f'dead_letter_topic = "{name}-dead"',
                f'group_id = "{name}"',
                "[input]",
                'format = "packed-ipv4-pairs"',
                "[window]",
                'mode = "replay"',
                f"size_ms = {WINDOW}",
                f"origin = {_base()}",
                f"until = {_base() + 4 * WINDOW}",
                "[privacy]",
                "epsilon = 2.0",
                "delta = 1e-6",
                "tau = 1500.0",
                "counters = 256",
                "partitions = 2",
                'unit_key = "source-ipv4"',
                f"unit_cap = {CAP}",
                "budget_epsilon = 6.0",
                'budget_period = "deployment"',
                "seed = 31",  # the sketch dumps below are refused otherwise (the reports say: not private)
                "[flink]",
                f'checkpoint_dir = "{tmp_path / "checkpoints"}"',
                "checkpoint_interval_ms = 2000",
                "[output]",
                f'ledger_dir = "{tmp_path / "ledger"}"',
                f'reports_file = "{tmp_path / "reports.jsonl"}"',
                f'run_dir = "{tmp_path / "run"}"',
                "metrics_port = 0",
                "[testing]",
                f'debug_sketch_dir = "{tmp_path / "sketches"}"',
            ]
        )
        + "\n"
    )
    cfg = load_config(config, environ={})
    base = _base()
    messages = _messages(base)
    opts = cfg.kafka_client_options()
    _, producer = publish(config, messages)
    producer.close()
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]

    assert dumped(tmp_path) == _offline(cfg, messages)  # capped per unit, every kept element counted once
    reports = [json.loads(v) for _, v in read_now(opts, cfg["kafka.reports_topic"])]
    assert [r["window"]["start_ms"] for r in reports] == [base + w * WINDOW for w in range(4)]
    released, refused = reports[:3], reports[3]
    for r in released:
        assert r["budget"]["unit"] == "user" and r["budget"]["epsilon"] == 2.0 and r["budget"]["unit_cap"] == CAP
        assert "one privacy unit (source address)" in r["guarantees"]["privacy"]
        assert f"capped at {CAP} elements per window" in r["guarantees"]["privacy"]
    prefixes = [{x["prefix"] for x in r["hhh"]} for r in released]
    assert "10.1.0.0/16" in prefixes[0] and "10.1.0.0/16" in prefixes[1] and not prefixes[2] - {"0.0.0.0/0"}
    assert not any(p.startswith("10.9.") for ps in prefixes for p in ps)  # 5,000 elements, one unit: capped
    assert [r["budget"]["spending"]["spent"]["epsilon"] for r in released] == [2.0, 4.0, 6.0]
    assert "exhausted" in refused["refused"] and refused["hhh"] == [] and "n_noisy" not in refused["window"]
    assert ReleaseLedger(tmp_path / "ledger").windows() == [r["window"]["start_ms"] for r in reports]
    dead = [json.loads(v) for _, v in read_now(opts, cfg["kafka.dead_letter_topic"])]
    assert [d["reason"] for d in dead] == ["bad_length"]
    assert "user-level privacy without a budget guard" not in result.stderr
