"""Helpers of the end-to-end tests: job configurations, publishing, reading topics back, offline replays.

Every job runs as the user runs it: ``dphhh run --feed no --config FILE`` in a subprocess, on topics
with unique names, with its ledger, reports file, checkpoints and Flink run folder under the test's
``tmp_path``. Replays (``window.mode = replay``) read input published beforehand with explicit
timestamps in the past; live jobs read input whose timestamps the broker sets on arrival.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.kafka_io import PackedProducer, read_to_end
from dphhh.sketches.misra_gries import MisraGries
from dphhh.stream.broker import LocalBroker
from dphhh.stream.clock import is_tick
from dphhh.stream.config import load_config
from dphhh.stream.kafka_setup import ensure_job_topics
from dphhh.stream.schedule import LIVE, ReleaseSchedule
from dphhh.stream.wire import expand

BOOTSTRAP = "127.0.0.1:9092"
DPHHH = str(Path(sys.executable).with_name("dphhh"))
JOB = [DPHHH, "run", "--feed", "no", "--config"]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(tmp_path: Path, name: str, **sections: dict[str, Any]) -> Path:
    """``tmp_path/job.toml``: unique topics and group, the job's folders under ``tmp_path``, then
    ``sections`` (e.g. ``window={"mode": "replay", ...}``) over those defaults."""
    topic = f"e2e-{name}-{uuid.uuid4().hex[:8]}"
    values: dict[str, dict[str, Any]] = {
        "kafka": {
            "bootstrap": BOOTSTRAP,
            "input_topic": f"{topic}-in",
            "reports_topic": f"{topic}-reports",
            "dead_letter_topic": f"{topic}-dead",
            "group_id": topic,
        },
        "flink": {"checkpoint_dir": str(tmp_path / "checkpoints"), "checkpoint_interval_ms": 2000},
        "output": {
            "ledger_dir": str(tmp_path / "ledger"),
            "reports_file": str(tmp_path / "reports.jsonl"),
            "run_dir": str(tmp_path / "run"),
            "metrics_port": 0,
        },
        "testing": {"debug_sketch_dir": str(tmp_path / "sketches")},
    }
    for section, entries in sections.items():
        values.setdefault(section, {}).update(entries)
    # the NON-PRIVATE sketch dumps are refused unless the noise is seeded (docs/ALGORITHMS.md §0.1 i):
    # a job that asks for secure noise (seed -1) gets no dumps; the others a test seed
    privacy = values.setdefault("privacy", {})
    if privacy.setdefault("seed", 1234) < 0:
        values["testing"].pop("debug_sketch_dir", None)
    lines = []
    for section, entries in values.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(v)}" for key, v in entries.items()]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def replay_window(base: int, windows: int, size: int, **more: Any) -> dict[str, Any]:
    """The ``[window]`` table of a replay of ``windows`` windows of ``size`` ms from ``base``."""
    return {"mode": "replay", "size_ms": size, "origin": base, "until": base + windows * size, **more}


def publish(config: Path, messages: Iterable[tuple[int | None, bytes]]):
    """Create and check the job's topics as the job does (:func:`dphhh.stream.kafka_setup.ensure_job_topics`: a
    live input records arrival times) and publish ``messages`` ((timestamp or None, value)); returns
    (the configuration, the open producer)."""
    cfg = load_config(config, environ={})
    ensure_job_topics(cfg)
    producer = PackedProducer(cfg.kafka_client_options(), cfg["kafka.input_topic"])
    for ts, value in messages:
        producer.send_value(value, ts)
    producer.flush()
    return cfg, producer


def run_replay(
    tmp_path: Path, config: Path, messages, timeout_s: float = 240
) -> tuple[Any, subprocess.CompletedProcess]:
    """Publish ``messages`` and run the (bounded) replay job to its end; it must exit 0."""
    cfg, producer = publish(config, messages)
    producer.close()
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=timeout_s, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    return cfg, result


def read_now(options, topic: str) -> list[tuple[int, bytes]]:
    """Every committed record of ``topic`` up to its end now (see :func:`dphhh.connectors.kafka_io.read_to_end`)."""
    return read_to_end(options, topic)


def report_records(cfg) -> list[tuple[int, bytes]]:
    """(Kafka record timestamp, value) of every committed report so far."""
    return read_now(cfg.kafka_client_options(), cfg["kafka.reports_topic"])


def reports(cfg) -> list[bytes]:
    return [v for _, v in report_records(cfg)]


def dead_letters(cfg) -> list[bytes]:
    return [v for _, v in read_now(cfg.kafka_client_options(), cfg["kafka.dead_letter_topic"])]


def input_log(cfg) -> list[tuple[int, bytes]]:
    """The input topic as the job reads it — (record timestamp, value), the job's clock records
    left out — partition by partition (within a partition in log order)."""
    return [(ts, v) for ts, v in read_now(cfg.kafka_client_options(), cfg["kafka.input_topic"]) if not is_tick(v)]


_DUMP = re.compile(r"window-(\d+)-sketch-(\d+)(?:\.attempt-(\d+))?\.bin")


def dump_attempts(tmp_path: Path) -> dict[tuple[int, int], list[MisraGries]]:
    """The NON-PRIVATE sketch dumps (``testing.debug_sketch_dir``) of every release attempt:
    (window, sketch id) → its sketch at each attempt, in attempt order (a window released again after
    a restore has more than one; the ledger holds the report of one of them)."""
    found: dict[tuple[int, int], dict[int, MisraGries]] = {}
    for path in (tmp_path / "sketches").glob("window-*-sketch-*.bin"):
        m = _DUMP.fullmatch(path.name)
        assert m, path.name
        attempt = int(m.group(3) or 0)
        found.setdefault((int(m.group(1)), int(m.group(2))), {})[attempt] = MisraGries.from_bytes(path.read_bytes())
    out = {}
    for key, attempts in found.items():
        assert sorted(attempts) == list(range(len(attempts))), (key, sorted(attempts))  # none lost
        out[key] = [attempts[a] for a in sorted(attempts)]
    return out


def dumped(tmp_path: Path, *, empty: bool = False) -> dict[tuple[int, int], MisraGries]:
    """The first release attempt's dump of every sketch (see :func:`dump_attempts`): (window,
    sketch id) → sketch. Every sketch of every released window is dumped; those without an element
    only with ``empty``."""
    return {key: first for key, (first, *_) in dump_attempts(tmp_path).items() if first.total or empty}


def every_record(options, topic: str) -> list[tuple[int, bytes]]:
    """(record timestamp, value) of every record ``topic`` holds — committed, aborted and still open
    (``read_uncommitted``): what any reader of the broker could have seen — up to its end now."""
    return read_to_end(options, topic, isolation="read_uncommitted")


def offline_sketches(cfg, messages, schedule: ReleaseSchedule) -> dict[tuple[int, int], MisraGries]:
    """The sketch of every (window, sketch id), replaying ``messages`` ((record timestamp, value))
    with the schedule's rule and the canonical order written out plainly: an element counts in the
    window of its own time iff that window is in the schedule (and, live, it arrived before the
    window's release); a sketch takes its window's elements epoch by epoch (the ``window.epoch_ms``
    interval of their arrival), each epoch's keys sorted and inserted one by one."""
    i = cfg.values["input"]
    decoder = MessageDecoder(
        i["format"],
        max_message_bytes=i["max_message_bytes"],
        json_field=i["json_field"],
        json_time_field=i["json_time_field"] or None,
        path_depth=cfg.hierarchy.h,
    )
    from dphhh.sketches.keyed import KeySecret

    groups: dict[tuple[int, int], dict[int, list[np.ndarray]]] = {}
    for ts, value in messages:
        decoded = decoder.decode(value)
        if not decoded.ok or ts is None or ts < 0:
            continue
        t = decoded.event_time if decoded.event_time is not None else ts
        start = schedule.start_of(t)
        if not schedule.in_schedule(start):
            continue
        if schedule.mode == LIVE and not (
            ts < schedule.release_time(start) and ts - schedule.max_past_ms <= t <= ts + schedule.max_future_ms
        ):
            continue
        epoch = ts - ts % cfg["window.epoch_ms"]
        hierarchy = cfg.hierarchy
        if hierarchy.hashed_keys:
            hierarchy = hierarchy.keyed(KeySecret.from_seed(cfg.seed).window(start))
        values = np.asarray(decoded.values) if i["format"] != "path" else decoded.values
        if cfg.hierarchy.kind == "pair":  # (source, destination): the decoder's units are the first addresses
            values = (np.asarray(decoded.units, dtype=np.uint32), values)
        for sid, keys in expand(values, cfg, hierarchy):
            groups.setdefault((start, sid), {}).setdefault(epoch, []).append(np.asarray(keys, dtype=np.int64))
    out: dict[tuple[int, int], MisraGries] = {}
    for where, epochs in groups.items():
        mg = out[where] = MisraGries(cfg.params.counters)
        for epoch in sorted(epochs):
            mg.update(np.sort(np.concatenate(epochs[epoch])))
    return out


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def interrupt(job: subprocess.Popen) -> tuple[str | None, str | None]:
    """Ctrl-C as a terminal sends it (SIGINT to the job's process group); the job's (stdout, stderr)
    once it ended, within 60 s (else it is killed and the test fails)."""
    os.killpg(job.pid, signal.SIGINT)
    try:
        return job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 0.2) -> None:
    """Poll ``predicate`` until it holds (a condition, not a sleep); fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def sleep_until(epoch_ms: int) -> None:
    """Wait for a wall-clock time (live tests send input at chosen arrival times)."""
    delay = epoch_ms / 1000 - time.time()
    if delay > 0:
        time.sleep(delay)


def live_origin(size_ms: int, lead_s: float) -> int:
    """A window boundary at least ``lead_s`` from now: a live test's configured schedule origin (the job
    is up, or catches up from the log, by then — decisions do not depend on when it reads)."""
    at = int((time.time() + lead_s) * 1000)
    return at - at % size_ms + size_ms


def logged_offsets(log_dir: Path) -> list[str]:
    """Kafka offsets (message counts) in the job's logs. After a restore, Flink's Kafka source and client
    log the restored position at INFO ("StartingOffset: N", "offset=N"); the job's log configuration
    (deploy/flink/log4j-no-raw-counts.properties) keeps those lines out."""
    logs = "".join(p.read_text(errors="replace") for p in log_dir.glob("*") if p.is_file())
    return re.findall(r"(?:StartingOffset: |offset=|[Oo]ffsets? )[1-9]\d*", logs)


def logged_state_sizes(log_dir: Path) -> list[str]:
    """Checkpointed state sizes in the job's logs: buffered addresses and, at user level, privacy units
    make them coarse counts. Flink logs them at INFO ("Completed checkpoint N for job ... (N bytes",
    "restoring from state handle ... [N bytes]"), and the times of its "Triggering checkpoint N"
    lines show how long the previous one took when it outlasted the interval;
    deploy/flink/log4j-no-raw-counts.properties drops them."""
    logs = "".join(p.read_text(errors="replace") for p in log_dir.glob("*") if p.is_file())
    return re.findall(
        r"Completed checkpoint \d+ for job \w+ \(\d+ bytes|restor\w* from state handle.*\d+ bytes|Triggering checkpoint \d+",
        logs,
    )


# A number is a run of digits not inside a longer one: letters and underscores may touch it
# (``12347ms``, ``count_12347``, ``n12347``), another digit or a decimal point before it may not.
_NUMBER = re.compile(r"(?<![\d.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\d)")
# random identifiers hold digit runs that are not numbers: UUIDs; hex ids of 16+ digits; hex runs of
# 8+ characters with letters and digits, also where underscores join them (Flink's attempt and vertex
# ids "ff12..._4d13..._0_0", object hashes "@9c9c1317", temporary folder names); and source positions
# of stack traces ("Task.java:1317": the code's, public); Kafka producer ids. A count glued to letters that are not all
# hex digits (12347ms, count_12347, x12347y) is still a number.
_IDS = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|\b[0-9a-fA-F]{16,}\b"
    r"|(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}(?![0-9A-Za-z])"
    r"|\b\w+\.(?:java|scala|kt):\d+"
    r"|(?i:producer ?id)(?: set to |=)\d+"  # the broker numbers the producers of all its clients
)


_TIMES = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
)


def mask_times(text: str) -> str:
    """``text`` with dates and times of day (log line stamps such as ``2026-12-01 08:57:10,744``) masked."""
    return _TIMES.sub("<time>", text)


def number_tokens(text: str) -> set[float]:
    """Every number in ``text`` (times of day and random ids masked first) as a float (``12347``,
    ``12347.0``, ``12,347``, ``1.2347e4`` alike, and glued to letters: ``12347ms``,
    ``count_12347``): the leak scans compare exact counts against these, so no print format hides one."""
    out = set()
    for token in _NUMBER.findall(_IDS.sub("<id>", mask_times(text))):
        try:
            out.add(float(token.replace(",", "")))
        except ValueError:
            continue
    return out


def leaked_counts(text: str, counts: Iterable[int]) -> set[int]:
    """The exact ``counts`` that appear as a number anywhere in ``text``."""
    found = number_tokens(text)
    return {c for c in counts if float(c) in found}


@contextmanager
def own_broker(port: int, var_dir: Path, **options: Any) -> Iterator[LocalBroker]:
    """A broker of a test's own on ``port`` (its data in ``var_dir``; ``options``: the other
    :class:`LocalBroker` settings, e.g. ``security="sasl_ssl"``), not the shared one on 9092;
    stopped at the end. Refused when the port is taken (a broker left by another run)."""
    local = LocalBroker(port, var_dir=var_dir, **options)
    local.start()
    assert local.started, f"port {port} was already taken by another process"
    try:
        yield local
    finally:
        local.stop()
