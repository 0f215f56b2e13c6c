"""Differential side-channel test through the real job (docs/ALGORITHMS.md §0.1; issue 11).

The live job runs on a stream X and, with the same test seed and the same arrival times relative to
the schedule's origin, on X plus one element at each placement a review found to leak:

* ``first_window``: an element in the schedule's first window, which X leaves empty (the schedule
  used to start at the first window with data);
* ``late_before_stragglers``: an element of window W+1 sent before X's stragglers of W (it used to
  move the watermark and make them late);
* ``over_size_limit``: one more address in a packed message exactly at ``input.max_message_bytes``
  (the message used to be dead-lettered whole);
* ``far_future``: an element whose own time is ~10^10 ms ahead (it used to open ~10^6 windows);
* ``beyond_band``: an element whose own time lies inside the schedule but further ahead of its
  arrival than ``window.max_future_ms``.

The four JSON placements share one run (X plus one element at each of them): an observable that
depends on none of the data stays equal however many elements are added, and each placement's
leak shows as its own difference (its window's count, a late straggler, ~10^6 windows, a missing
dead letter), so one run checks them as four would. The packed run adds a single element — with a
**pair hierarchy** (packed (source, destination) pairs over the 24-node byte lattice, whose host-pair
node has keyed-hash keys) — and the **path hierarchy** run adds one path in the first window (keyed-
hash keys at every level, labels travelling with them). X and Y run at the same time, on one
schedule, which starts once both jobs are surely up (no report is then late by start-up: the late
counter is compared like every other metric).

Every observable except the reports' noisy values must be identical (the differential harness,
``tests/e2e/observables.py``): the list of reported windows, each report's Kafka record timestamp,
when each report became readable to a ``read_committed`` reader (watched live; within 250 ms
between the runs where both are on time, never before its publication time), when the job exited,
the metric names against the test's own list (``tests/e2e/expected_metrics.py``), every series
with all its labels — at the end, and at fixed instants mid-run (gauges and `dphhh run`'s endpoint;
the Python operators' counters lag their bundles and are compared at the end) — the dead-letter
topic as a multiset apart from the added element's own dead letters, `dphhh run`'s output in
order, and the job's log records of every level and every logger — Flink's runtime and Beam's
runners included, start-up to exit — as multisets and as ordered lists, one per logger (per task
for loggers several task threads write at once); times, ids and ports masked, never counts; left out
only the lines whose number follows the run's clock or the race of the cluster's shutdown, each
listed with its reason in ``observables``), and
every folder and file the run left (ledger, run folder, logs, checkpoint folders) with its mode —
all 0700/0600 — and, where its content is public, its size (``observables.file_listing``). The
non-private sketch dumps then show that the added element is the only difference in the data the
job counted: one more element in its own window, nothing else changed. The harness's negative
controls are ``tests/stream/test_observables_harness.py``.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.jobs import (
    JOB,
    dead_letters,
    dumped,
    live_origin,
    publish,
    report_records,
    sleep_until,
    wait_for,
    write_config,
)
from tests.e2e.net import free_port
from tests.e2e.observables import (
    MetricSampler,
    Watch,
    file_listing,
    log_differences,
    log_order_differences,
    masked_log_lines,
    metric_series,
    metric_total,
    read_logs,
    scrape,
    topic_reader,
)

pytestmark = pytest.mark.quiet  # runs last and alone (./dphhh test): it compares two runs' report visibility

SIZE = 2000
WINDOWS = 4
GRACE = 500
LEAD_S = 25  # both jobs are up (JVM, MiniCluster, Python workers) well before the schedule's origin
LIMIT = 4096  # input.max_message_bytes of the packed runs
BAND = 3000  # window.max_future_ms and max_past_ms
#: report metrics of `dphhh run` that are not computed from reports (compared by value)
OPERATIONAL = ("dphhh_kafka_broker_up", "dphhh_kafka_connect_retries_total", "dphhh_reports_topic_stalled")
#: the end of the latest report `dphhh run`'s reader has read: public (the report says it), equal in
#: both runs once both readers have read the same reports
READ_THROUGH = "dphhh_report_window_end_seconds"


def _row(ip: str, t: int) -> bytes:
    return json.dumps({"ip": ip, "t": t}).encode()


#: The JSON placements: the added element's address, and the window it counts in or the reason
#: it is dead-lettered.
PLACEMENTS = {
    "first_window": ("192.0.2.55", 0, None),
    "late_before_stragglers": ("192.0.2.56", 2, None),
    "far_future": ("192.0.2.57", None, "after_until"),  # beyond the schedule (and the band): rejected by its own time
    "beyond_band": ("192.0.2.58", None, "too_far_ahead"),  # inside the schedule, beyond the band
}


def json_plan(extras: tuple[str, ...] = ()) -> list[tuple[int, bytes | None]]:
    """(arrival offset from the origin in ms, value with times relative to the origin) of the JSON
    stream X, plus one element at each named placement. Values hold ``{t}`` offsets, resolved at
    send time."""
    rows: list[tuple[int, bytes | None]] = []
    rows += [(2100, _row(f"10.1.0.{i % 7}", 2100 + i)) for i in range(40)]  # window 1
    rows.append((2200, b'{"ip": "not json"'))  # a bad record, dead-lettered in both runs
    rows += [(4200, _row(f"10.2.0.{i % 5}", 4200 + i)) for i in range(30)]  # window 2
    rows += [(3600, _row("10.1.9.9", 3500 + i)) for i in range(5)]  # stragglers of window 1 (arrive in it)
    if "first_window" in extras:  # after the beyond_band element: that one stays the first arrival
        rows.append((1500, _row(PLACEMENTS["first_window"][0], 1500)))
    if "late_before_stragglers" in extras:  # of window 2, sent during window 1
        rows.append((3400, _row(PLACEMENTS["late_before_stragglers"][0], 4100)))
    if "far_future" in extras:
        rows.append((2300, _row(PLACEMENTS["far_future"][0], 10**10)))
    if "beyond_band" in extras:  # window 2 or 3, but 4 s ahead of arrival
        rows.append((1000, _row(PLACEMENTS["beyond_band"][0], 1000 + BAND + 1000)))
    return sorted(rows, key=lambda r: r[0])


def _pairs(words: np.ndarray) -> bytes:
    return words.astype(">u4").tobytes()


def packed_pairs_plan(extra: str | None) -> list[tuple[int, bytes | None]]:
    """The packed (source, destination) stream X: in window 1 one message exactly at the size limit,
    then smaller ones, a few hosts heavy; ``over_size_limit`` puts one more pair into the big message."""
    rng = np.random.default_rng(8)
    hosts = rng.integers(0, 2**32, 30, dtype=np.uint64).astype(np.uint32)

    def pairs(n: int) -> np.ndarray:
        return np.stack([rng.choice(hosts, n), rng.choice(hosts, n)], axis=1)

    big = pairs(LIMIT // 8)
    if extra == "over_size_limit":
        big = np.vstack([big, np.array([[0xC0000239, 0xCB007105]], dtype=np.uint32)])
    small = [pairs(300) for _ in range(3)]
    return [
        (2100, _pairs(big)),
        (2300, _pairs(small[0])),
        (4200, _pairs(small[1])),
        (4300, b"\x01\x02\x03"),
        (6100, _pairs(small[2])),
    ]


def path_plan(extra: str | None) -> list[tuple[int, bytes | None]]:
    """The path stream X (one path per message, its arrival its time): windows 1 and 2, a bad path;
    ``first_window`` adds one path in the first window, which X leaves empty."""
    rng = np.random.default_rng(9)
    cities = [f"de/{r}/{c}" for r in ("by", "he", "nw") for c in ("a", "b", "c", "d")]
    rows: list[tuple[int, bytes | None]] = [
        (2100 + 10 * i, f"{rng.choice(cities)}/s{i % 9}".encode()) for i in range(60)
    ]
    rows += [(4200 + 10 * i, f"{rng.choice(cities)}/s{i % 5}".encode()) for i in range(40)]
    rows.append((4300, b"a//b/c"))  # a bad path, dead-lettered in both runs
    if extra == "first_window":
        rows.append((1500, b"fr/idf/paris/rivoli"))
    return sorted(rows, key=lambda r: r[0])


@dataclass
class Observed:
    """Everything a run showed, made comparable across runs (times relative to the origin)."""

    fmt: str
    windows: list[int]
    record_times: list[int]
    visible_ms: dict[
        int, float
    ]  # window → when its report was first readable (read_committed), after its publication time
    exit_ms: float  # when the job's process exited, after the schedule's end
    metric_names: set[str]
    metric_values: dict[str, float]
    metric_samples: list[dict[str, float]]  # every series with all its labels, at fixed instants mid-run
    dead: Counter  # (reason, value) -> how many times on the dead-letter topic
    log_lines: list[str]  # dphhh run's own output (stderr), in order
    flink_lines: list[str]  # the job's log, every level, masked
    window_totals: dict[int, int]  # NON-PRIVATE (test hook): elements counted per window, level 1
    exit_status: int
    files: Counter  # every folder and file the run left: (masked path, mode, size where public)


def _resolve(value: bytes, origin: int) -> bytes:
    """A JSON row's time field from an offset to an absolute time."""
    if value.startswith(b'{"ip"') and b'"t": ' in value:
        row = json.loads(value)
        row["t"] += origin
        return json.dumps(row).encode()
    return value


def _metrics(job_text: str, report_text: str) -> tuple[set[str], dict[str, float]]:
    """Metric names of both endpoints, and the values of every series (all labels, run ids masked)
    not derived from published reports: the job's counters and gauges, `dphhh run`'s operational
    gauges."""
    job, report = metric_series(job_text), metric_series(report_text)
    names = {k.split("{")[0] for k in (*job, *report)}
    values = dict(job)
    values.update({"report:" + k: v for k, v in report.items() if k.split("{")[0] in OPERATIONAL})
    return names, values


#: Expected metric names (the test's own list, not the product's catalogue): what the job's endpoint
#: and `dphhh run`'s expose. A metric added to the product must be added here, where the test
#: compares its values between X and X + e.
from tests.e2e.expected_metrics import (  # noqa: E402
    JOB_ENDPOINT,
    ON_FIRST_INCREMENT,
    REPORT_ENDPOINT,
    dead_letter_metrics,
)

#: mid-run sampling instants (ms after the origin): before any data, between the last arrival (4.6 s)
#: and the third release (6.5 s), and after the last release (8.5 s) — each at least 1.8 s after the
#: event before it: the Python operators' counters reach the job's endpoint when their bundle ends
#: (up to about a second later; a sample 1.2 s after a dead letter saw it in one run only)
SAMPLE_OFFSETS = [1500, 6400, 11000]
#: the Python operators' counters reach the job's endpoint only when a bundle of that operator ends,
#: which for the release operator (a few records per window) was seen 4 s after the release in one
#: run and not in the other: their values are compared at the end (awaited), not at the mid-run
#: instants; every other series — gauges, the job's restarts, `dphhh run`'s endpoint — at each instant
BUNDLED_COUNTERS = "flink_taskmanager_job_task_operator_dphhh_"


def _run_series(sample: dict[int, str], job_port: int, report_port: int) -> dict[str, float]:
    """One mid-run sample: every job series, and `dphhh run`'s series not computed from reports
    (their values; report-derived series by name and labels only, valued 0)."""
    out = dict(metric_series(sample[job_port]))
    for key, value in metric_series(sample[report_port]).items():
        out["report:" + key] = value if key.split("{")[0] in (*OPERATIONAL, READ_THROUGH) else 0.0
    return out


def _report_derived(key: str) -> bool:
    return key.startswith("report:") and key[len("report:") :].split("{")[0] not in OPERATIONAL


#: the dead-letter reasons each format's stream X holds (one counter each on the job's endpoint)
DEAD_LETTER_REASONS = {
    "json": ("bad_json",),
    "packed-ipv4-pairs": ("bad_length",),
    "path": ("bad_path_empty_component",),
}

HIERARCHIES = {
    "json": "ipv4:8,16,24,32",
    "packed-ipv4-pairs": "ipv4:8,16,24,32 x ipv4:8,16,24,32",
    "path": "path:4",
}


def run_live(tmp_path: Path, name: str, fmt: str, plan: list[tuple[int, bytes | None]], origin: int) -> Observed:
    """Run the live job (schedule of WINDOWS windows from ``origin``, same seed) on ``plan``; observe everything."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    job_port, report_port = free_port(), free_port()
    inp = {"format": fmt, "max_message_bytes": LIMIT}
    if fmt == "json":
        inp.update({"json_field": "ip", "json_time_field": "t"})
    config = write_config(
        tmp_path,
        name,
        input=inp,
        hierarchy={"spec": HIERARCHIES[fmt]},
        window={
            "size_ms": SIZE,
            "origin": origin,
            "until": origin + WINDOWS * SIZE,
            "grace_ms": GRACE,
            "max_future_ms": BAND,
            "max_past_ms": BAND,
        },
        privacy={"epsilon": 1.0, "tau": 50.0, "counters": 64, "partitions": 2, "seed": 77},
        flink={"checkpoint_interval_ms": 1000, "prometheus_port": str(job_port)},
        output={"metrics_port": report_port},
        testing={"hold_s": 3.0},
    )
    cfg, producer = publish(config, [])
    reader = topic_reader(cfg.kafka_client_options(), cfg["kafka.reports_topic"], "read_committed")
    visible = Watch("reports", reader, start_at=origin / 1000, interval_s=0.02)
    visible.start()
    sampler = MetricSampler([job_port, report_port], [(origin + o) / 1000 for o in SAMPLE_OFFSETS])
    sampler.start()
    err = tmp_path / "job.err"
    with open(err, "w") as log:
        job = subprocess.Popen(
            [*JOB, str(config)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
        )
    for offset, value in plan:
        sleep_until(origin + offset)
        producer.send_value(_resolve(value, origin))
        producer.flush()
    producer.close()
    wait_for(lambda: "the schedule ended" in err.read_text() or job.poll() is not None, 240, "the schedule's end")
    # during the hold: every window released — and counted: the Python workers' counters reach the
    # reporter with their bundles, which may end just after a report is readable (a condition, awaited)
    released = "flink_taskmanager_job_task_operator_dphhh_release_windows_released"
    wait_for(
        lambda: f"{released}{{" in (t := scrape(job_port)) and metric_total(t, released) >= WINDOWS, 30, "the counters"
    )
    scraped = (scrape(job_port), scrape(report_port))
    job.wait(timeout=120)
    exited = time.time()
    visible.stop_event.set()
    sampler.join(timeout=60)
    records = report_records(cfg)
    names, values = _metrics(*scraped)
    run = {
        cfg["kafka.input_topic"]: "<in>",
        cfg["kafka.reports_topic"]: "<reports>",
        cfg["kafka.dead_letter_topic"]: "<dead>",
        cfg["kafka.group_id"]: "<group>",
        str(tmp_path): "<tmp>",
    }
    flink_log = read_logs(tmp_path / "run" / "log", "*.log")
    totals: dict[int, int] = {}
    for (window, sid), sketch in dumped(tmp_path).items():
        if sid < cfg.params.partitions:  # level 1: every element once
            totals[window - origin] = totals.get(window - origin, 0) + sketch.total
    return Observed(
        fmt=fmt,
        windows=[json.loads(v)["window"]["start_ms"] - origin for _, v in records],
        record_times=[ts - origin for ts, _ in records],
        visible_ms={w - origin: at * 1000 - (w + SIZE + GRACE + PUBLISH_DELAY) for w, at in visible.seen.items()},
        exit_ms=exited * 1000 - (origin + WINDOWS * SIZE),
        metric_names=names,
        metric_values=values,
        metric_samples=[_run_series(sample, job_port, report_port) for sample in sampler.samples],
        dead=Counter((d["reason"], d["value_b64"]) for d in map(json.loads, dead_letters(cfg))),
        log_lines=masked_log_lines(err.read_text(), run),
        flink_lines=masked_log_lines(flink_log, run),
        window_totals=totals,
        exit_status=job.returncode,
        files=file_listing(tmp_path, run, SIZED_FILES, skip=TEST_FILES),
    )


#: files whose sizes are public (the others hold noisy reports, exact state, logs with times)
SIZED_FILES = (r"key-secret$", r"schedule-start$", r"\.pid$")
#: what the test itself writes beside the run (its config, the job's stderr it captures) and the
#: NON-PRIVATE sketch dumps of the test hook (one per release attempt, their sizes follow the data)
TEST_FILES = (r"^[^/]*\.toml$", r"^job\.err$", r"^sketches(/|$)")

#: window.publish_delay_ms (the default): a report is readable from its release time plus this
PUBLISH_DELAY = 3000
#: how far apart two runs' report visibility may be: scheduling jitter of two jobs on one 2-core
#: machine (test_publication_time measures the data-independence of the publication time at 20 ms,
#: on medians of many windows)
VISIBLE_TOLERANCE_MS = 250
#: a report readable within this of its publication time is on time. The two jobs start together and
#: their first windows' reports can be late — their transactions commit with checkpoints, which queue
#: for seconds while both jobs' Python workers start (measured 1–4 s late, differing by up to 1 s
#: between the runs with the machine's load): start-up timing, compared only as "not early"
ON_TIME_MS = 200
EXIT_TOLERANCE_MS = 5000


def _without(values: dict[str, float], names: frozenset[str]) -> dict[str, float]:
    return {k: v for k, v in values.items() if k.split("{")[0] not in names}


def assert_same_observables(x: Observed, y: Observed, own_dead_letters: Counter | None = None) -> None:
    """Everything but the noisy values equal; ``own_dead_letters`` = the added elements' own."""
    assert x.exit_status == y.exit_status == 0
    assert x.windows == y.windows == [w * SIZE for w in range(WINDOWS)]  # every window of the schedule, once
    assert x.record_times == y.record_times  # the scheduled publication times
    assert sorted(x.visible_ms) == sorted(y.visible_ms) == x.windows  # every report seen while running
    assert min(x.visible_ms.values()) >= -50 and min(y.visible_ms.values()) >= -50  # never before its time
    on_time = [w for w in x.windows if max(x.visible_ms[w], y.visible_ms[w]) <= ON_TIME_MS]
    assert on_time, (x.visible_ms, y.visible_ms)
    for w in on_time:  # readable at the same moment in both runs
        assert abs(x.visible_ms[w] - y.visible_ms[w]) <= VISIBLE_TOLERANCE_MS, (w, x.visible_ms, y.visible_ms)
    assert abs(x.exit_ms - y.exit_ms) <= EXIT_TOLERANCE_MS, (x.exit_ms, y.exit_ms)
    # a report overdue by the two jobs' start-up on one machine registers the overdue counter in one
    # run only (timing: docs/ALGORITHMS.md §0.1 g states the overdue channel as a known limit)
    assert x.metric_names - ON_FIRST_INCREMENT == y.metric_names - ON_FIRST_INCREMENT
    expected = JOB_ENDPOINT | REPORT_ENDPOINT | dead_letter_metrics(*DEAD_LETTER_REASONS[x.fmt])
    assert expected <= x.metric_names <= expected | ON_FIRST_INCREMENT, sorted(x.metric_names ^ expected)
    assert _without(x.metric_values, ON_FIRST_INCREMENT) == _without(y.metric_values, ON_FIRST_INCREMENT)
    assert len(x.metric_samples) == len(y.metric_samples) == len(SAMPLE_OFFSETS)
    read_through = f"report:{READ_THROUGH}{{}}"
    for i, (sx, sy) in enumerate(zip(x.metric_samples, y.metric_samples)):  # the same series, values, mid-run
        # `dphhh run`'s series computed from reports are compared when both readers had read the same
        # reports: a reader that lags a report by a poll (seen: 900 ms on a loaded machine) shows the
        # last report's series later, a difference of the reader's timing, not of the data — the
        # visibility of each report is compared above (visible_ms)
        same_reports = sx.get(read_through) == sy.get(read_through)
        diff = {
            k: (sx.get(k), sy.get(k))
            for k in set(sx) | set(sy)
            if sx.get(k) != sy.get(k)
            and not k.startswith(BUNDLED_COUNTERS)
            and k.split("{")[0] not in ON_FIRST_INCREMENT
            and (same_reports or not _report_derived(k))
        }
        assert not diff, (SAMPLE_OFFSETS[i], diff)
    assert y.dead - x.dead == (own_dead_letters or Counter()) and not x.dead - y.dead
    assert x.log_lines == y.log_lines, "\n".join(sorted(set(x.log_lines) ^ set(y.log_lines)))
    only_x, only_y = log_differences(x.flink_lines, y.flink_lines)
    assert not only_x and not only_y, f"only in X: {dict(only_x)}\nonly in X + e: {dict(only_y)}"
    out_of_order = log_order_differences(x.flink_lines, y.flink_lines)  # each logger's (task's) records in order
    assert not out_of_order, out_of_order
    # the same folders and files, with the same modes (and sizes where public), in both runs
    assert x.files == y.files, (sorted((x.files - y.files).elements()), sorted((y.files - x.files).elements()))
    assert any(size is not None for _, _, size in x.files)  # the public sizes are compared (schedule-start)
    private = ("0o700", "0o600", "symlink")  # every folder and file as private as the raw input (§0.1 i)
    assert x.files and all(mode in private for _, mode, _ in x.files), [f for f in x.files if f[1] not in private]


def _diff_totals(x: Observed, y: Observed) -> dict[int, int]:
    windows = set(x.window_totals) | set(y.window_totals)
    return {
        w: y.window_totals.get(w, 0) - x.window_totals.get(w, 0)
        for w in windows
        if y.window_totals.get(w, 0) != x.window_totals.get(w, 0)
    }


def run_pair(tmp_path: Path, name: str, fmt: str, x_plan, y_plan) -> tuple[Observed, Observed]:
    """X and Y at the same time on one schedule (each its own job, topics and folders)."""
    from concurrent.futures import ThreadPoolExecutor

    origin = live_origin(SIZE, LEAD_S)
    with ThreadPoolExecutor(2) as pool:
        x = pool.submit(run_live, tmp_path / "x", f"{name}-x", fmt, x_plan, origin)
        y = pool.submit(run_live, tmp_path / "y", f"{name}-y", fmt, y_plan, origin)
        return x.result(), y.result()


def test_one_more_json_element_at_each_placement_changes_no_observable(broker, tmp_path: Path) -> None:
    """X vs X plus one element at each placement (JSON with own event times): identical observables;
    the elements count in their own windows only, or are dead-lettered by their own times, and
    every other count is unchanged."""
    x, y = run_pair(tmp_path, "side-json", "json", json_plan(), json_plan(tuple(PLACEMENTS)))
    own = y.dead - x.dead  # the added elements' own dead letters (their values hold their own times)
    by_address = {json.loads(base64.b64decode(value))["ip"]: reason for reason, value in own.elements()}
    assert sum(own.values()) == len(by_address)  # one dead letter per dead-lettered element
    assert by_address == {ip: reason for ip, _, reason in PLACEMENTS.values() if reason}
    assert_same_observables(x, y, own)  # and X's dead letters all in Y's
    assert _diff_totals(x, y) == {w * SIZE: 1 for _, w, _ in PLACEMENTS.values() if w is not None}


def test_one_more_pair_over_the_old_size_limit_changes_no_observable(broker, tmp_path: Path) -> None:
    """A pair hierarchy (24 nodes, keyed host-pair keys): X vs X + one pair that takes a packed
    message over input.max_message_bytes: identical observables, and that message's every pair is
    counted (one more, nothing dropped)."""
    x, y = run_pair(
        tmp_path, "side-pairs", "packed-ipv4-pairs", packed_pairs_plan(None), packed_pairs_plan("over_size_limit")
    )
    assert_same_observables(x, y)
    assert _diff_totals(x, y) == {1 * SIZE: 1}
    assert x.window_totals[1 * SIZE] == LIMIT // 8 + 300


def test_one_more_path_in_the_first_window_changes_no_observable(broker, tmp_path: Path) -> None:
    """A path hierarchy (keyed-hash keys at every level): X vs X + one path in the schedule's first
    window: identical observables; the path counts in that window only."""
    x, y = run_pair(tmp_path, "side-paths", "path", path_plan(None), path_plan("first_window"))
    assert_same_observables(x, y)
    assert _diff_totals(x, y) == {0: 1}
    assert x.window_totals == {1 * SIZE: 60, 2 * SIZE: 40}
