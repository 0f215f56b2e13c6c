"""End-to-end: real Kafka broker + real PyFlink job (MiniCluster) + the release ledger.

A known stream spans four windows (one of them empty) plus malformed records. The tests check what
a user would: one report per window of the public schedule, the non-private sketch state at each
window's release equals an offline replay of the same sequence, the reports equal the offline
computation with the same (test-only) noise seed, bad records are dead-lettered, nothing raw
reaches the logs, and a failure between a release and the next checkpoint republishes
byte-identical reports without losing or double counting any element.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.kafka_io import create_topics, pack_ipv4
from dphhh.privacy.window import release_sketch
from dphhh.stream.assembler import WindowAssembler, noise_source_factory, sketch_of_id
from dphhh.stream.config import load_config
from dphhh.stream.ledger import ReleaseLedger
from dphhh.stream.metrics_catalog import FORBIDDEN_WORDS, JOB_METRICS, REPORT_METRICS, prometheus_name
from tests.e2e.jobs import (
    DPHHH,
    JOB,
    dead_letters,
    dump_attempts,
    dumped,
    every_record,
    group_alive,
    input_log,
    interrupt,
    leaked_counts,
    live_origin,
    logged_offsets,
    logged_state_sizes,
    offline_sketches,
    publish,
    replay_window,
    report_records,
    reports,
    run_replay,
    sleep_until,
    wait_for,
    write_config,
)
from tests.e2e.literal_reference import packed_ipv4_truth
from tests.e2e.net import free_port
from tests.e2e.observables import metric_total
from tests.e2e.prom import prometheus_query

WINDOW = 10_000
CANARY = 0xC612074D  # 198.18.7.77: must never appear in a log
CANARY_TEXT = "198.18.7.77"
EXACT_SIZES = (12_347, 23_459, 0, 5_003)  # unusual numbers, searched for in the logs
BIG = 2_131  # addresses in window 0's one packed message over input.max_message_bytes (counted, not dropped)


def _window_values(rng: np.random.Generator) -> list[np.ndarray]:
    w0 = np.concatenate(
        [
            (np.uint32(0x0A010000) + rng.integers(0, 2**16, 5_779, dtype=np.uint64)).astype(np.uint32),
            np.full(3_331, CANARY, dtype=np.uint32),
            rng.integers(0, 2**32, EXACT_SIZES[0] - 5_779 - 3_331 - BIG, dtype=np.uint64).astype(np.uint32),
        ]
    )
    rng.shuffle(w0)
    w1 = rng.integers(0, 2**32, EXACT_SIZES[1], dtype=np.uint64).astype(np.uint32)
    w3 = np.concatenate(
        [
            np.full(2_500, 0x2D000001, np.uint32),
            rng.integers(0, 2**32, EXACT_SIZES[3] - 2_500, dtype=np.uint64).astype(np.uint32),
        ]
    )
    return [w0, w1, np.empty(0, np.uint32), w3]


def _messages(base: int) -> tuple[list[tuple[int, bytes]], list[str]]:
    """The known stream (timestamps from ``base``) and the reasons its rejected records get."""
    rng = np.random.default_rng(99)
    messages: list[tuple[int, bytes]] = []
    for w, values in enumerate(_window_values(rng)):
        for i in range(0, len(values), 1000):
            messages.append((base + w * WINDOW + 10 * (i // 1000), pack_ipv4(values[i : i + 1000])))
    big = pack_ipv4(rng.integers(0, 2**32, BIG, dtype=np.uint64).astype(np.uint32))  # 8,524 bytes > 8,192
    # bad records, a big packed message and one outside the schedule, among window 0's: with a public
    # schedule a later timestamp changes nothing for the others
    odd = [(base + 41, b"\x01\x02\x03"), (base + 42, b""), (base + 43, big), (base + 40 * WINDOW, pack_ipv4([7]))]
    return messages[:5] + odd + messages[5:], ["bad_length", "empty", "after_until"]


def _config(tmp_path: Path, name: str, *, seed: int = -1, windows: int = 4, **output) -> Path:
    """A replay of the known stream's four windows from :func:`_base` (the shared e2e settings)."""
    return write_config(
        tmp_path,
        name,
        input={"max_message_bytes": 8192},
        window=replay_window(_base(), windows, WINDOW),
        privacy={"epsilon": 2.0, "delta": 1e-6, "tau": 2000.0, "counters": 256, "partitions": 2, "seed": seed},
        flink={"checkpoint_interval_ms": output.pop("checkpoint_interval_ms", 2000)},
        output=output,
    )


def _base() -> int:
    return 1_700_000_000_000 // WINDOW * WINDOW  # a fixed past time: a replay's range


def test_stream_job_end_to_end(broker, tmp_path: Path) -> None:
    """One report per window of the replay's range (the empty one too), each with its scheduled release
    time as its Kafka timestamp; sketch state == offline replay (a packed message over
    input.max_message_bytes counted whole); reports == offline computation with the same test seed;
    bad records and a record outside the range dead-lettered; no raw data in logs; a tombstone (null
    value) is skipped: neither counted nor dead-lettered, and the job is unharmed."""
    base = _base()
    messages, bad_reasons = _messages(base)
    config = _config(tmp_path, "main", seed=1234)
    cfg, producer = publish(config, messages)
    producer._producer.send(cfg["kafka.input_topic"], key=b"t", value=None, timestamp_ms=base + 44).get(timeout=30)
    producer.close()
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    schedule = cfg.schedule()

    records = report_records(cfg)
    found = [r for _, r in records]
    starts = [json.loads(r)["window"]["start_ms"] for r in found]
    assert starts == [base + w * WINDOW for w in range(4)]
    assert [ts for ts, _ in records] == [schedule.release_time(s) for s in starts]  # the scheduled times
    assert all(json.loads(r)["window"]["release_ms"] == schedule.release_time(s) for r, s in zip(found, starts))

    offline = offline_sketches(cfg, messages, schedule)
    got = dumped(tmp_path)
    assert got == offline  # the non-private state at each window's release (the oracle of the reports below)
    truth = packed_ipv4_truth(cfg.values, base, messages)  # and the literal reference's, independently
    assert set(got) == set(truth) and all(truth[key].matches(got[key]) for key in truth)
    level_one = range(cfg.params.partitions)
    assert sum(offline[(base, sid)].total for sid in level_one) == EXACT_SIZES[0]  # the big message too

    # the same releases offline, with the same per-(window, level, partition) test noise
    noise_for = noise_source_factory(1234)
    assembler = WindowAssembler(cfg.hierarchy, cfg.params, schedule, ReleaseLedger(tmp_path / "offline"), seed=1234)
    for w, report in enumerate(found):
        start = base + w * WINDOW
        releases = []
        for (win, sid), sketch in sorted(offline.items()):
            if win == start:
                level, part = sketch_of_id(sid, cfg.params.partitions)
                releases.append(
                    release_sketch(
                        level,
                        part,
                        sketch.counters(),
                        sketch.total,
                        params=cfg.params,
                        h=cfg.hierarchy.h,
                        rng=noise_for(start, level, part),
                    )
                )
        expected, _ = assembler.report(start, releases)
        assert report == expected, w
    first = json.loads(found[0])
    assert {"10.1.0.0/16", f"{CANARY_TEXT}/32"} <= {x["prefix"] for x in first["hhh"]}
    assert json.loads(found[2])["window"]["n_noisy"] >= 0 and "NOT private" in first["guarantees"]["randomness"]

    jsonl = (tmp_path / "reports.jsonl").read_bytes().splitlines()
    assert jsonl == found

    dead = [json.loads(v) for v in dead_letters(cfg)]
    assert sorted(d["reason"] for d in dead) == sorted(bad_reasons)
    # the dead-letter topic holds the rejected records themselves and nothing else (no good record, no count)
    decoder = MessageDecoder("packed-ipv4")
    rejected = sorted(v for t, v in messages if not decoder.decode(v).ok or t >= schedule.until_ms)
    assert sorted(base64.b64decode(d["value_b64"]) for d in dead) == rejected
    assert all(set(d) == {"reason", "timestamp_ms", "value_b64"} for d in dead)

    logs = result.stderr  # stdout carries the published (private) reports themselves
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file() and path.suffix in (".log", ".out", ".txt", ""):
            logs += path.read_text(errors="replace")
    assert CANARY_TEXT not in logs
    sizes = [s for s in EXACT_SIZES if s] + [sk.total for sk in offline.values()]  # windows and sub-streams
    assert not leaked_counts(logs, sizes)


def _live_config(tmp_path: Path, name: str, size: int, origin: int, testing: dict | None = None, **output) -> Path:
    return write_config(
        tmp_path,
        name,
        window={"size_ms": size, "origin": origin},
        privacy={
            "epsilon": 2.0,
            "delta": 1e-6,
            "tau": 2000.0,
            "counters": 256,
            "partitions": 2,
            "seed": output.pop("seed", -1),
        },
        flink={
            "checkpoint_interval_ms": output.pop("checkpoint_interval_ms", 1000),
            "prometheus_port": str(output.pop("prometheus_port", "9249-9259")),
        },
        output=output,
        testing=testing or {},
    )


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode("utf-8", "replace")


def _metric_value(text: str, name: str) -> float:
    """The sum of ``name``'s samples in a Prometheus scrape (0 if absent)."""
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def test_failure_after_release_republishes_identically(broker, tmp_path: Path) -> None:
    """A live job fails right after a window's release (before the next checkpoint) and restarts
    from its last checkpoint: the window is republished (the job's windows_republished counter says
    so), each window's report appears once, byte-identical to the ledger, and the sketches count
    every element exactly once. Ctrl-C (SIGINT to the job's process group, as a terminal sends it)
    then stops everything cleanly: exit status 130, no traceback, no process left."""
    size = 2000
    origin = live_origin(size, 3)
    port = free_port()
    config = _live_config(
        tmp_path,
        "fail",
        size,
        origin,
        checkpoint_interval_ms=1500,
        prometheus_port=port,
        seed=21,
        testing={"fail_after_window": 3, "noise_per_attempt": True},
    )  # seeded: the sketch dumps are refused otherwise; each attempt draws other noise, so a window
    # recomputed after the restart instead of read back from the ledger would publish another report
    cfg, producer = publish(config, [])
    job = subprocess.Popen(
        [*JOB, str(config)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    rng = np.random.default_rng(3)
    republished = 0.0
    try:
        for w in range(6):  # a message of 500 addresses 100 ms into each of the first six windows
            sleep_until(origin + w * size + 100)
            producer.send_value(pack_ipv4(rng.integers(0, 2**32, 500, dtype=np.uint64).astype(np.uint32)))
            producer.flush()
        marker = tmp_path / "run" / "injected-failure.done"
        wait_for(marker.exists, 180, "the injected failure")
        wait_for(lambda: len(reports(cfg)) >= 8, 180, "eight reports after the restart")

        def republish_counted() -> bool:
            nonlocal republished
            try:
                republished = _metric_value(_scrape(port), prometheus_name("release", "windows_republished"))
            except OSError:
                return False
            return republished >= 1

        wait_for(republish_counted, 60, "the restarted job's windows_republished counter")
        assert job.poll() is None, job.stderr.read()[-3000:]
    finally:
        producer.close()
        _, stderr = interrupt(job)
    assert job.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert "job stopped" in stderr
    wait_for(lambda: not group_alive(job.pid), 20, "the job's processes to end")
    found = reports(cfg)
    starts = [json.loads(r)["window"]["start_ms"] for r in found]
    assert starts == [origin + w * size for w in range(len(starts))], starts  # once each, in order, none missing
    ledger = ReleaseLedger(tmp_path / "ledger")
    assert found == [ledger.get(s) for s in starts]
    assert republished >= 1  # the restarted job read the released window back from the ledger
    for value in every_record(cfg.kafka_client_options(), cfg["kafka.reports_topic"]):  # aborted ones too
        assert value[1] == ledger.get(json.loads(value[1])["window"]["start_ms"])  # each window's noise seen once
    truth = {k: sk for k, sk in packed_ipv4_truth(cfg.values, origin, input_log(cfg)).items() if k[0] <= starts[-1]}
    attempts = {k: sks for k, sks in dump_attempts(tmp_path).items() if k[0] <= starts[-1]}
    assert {k for k, sks in attempts.items() if sks[0].total} == set(truth)
    for key, sketches in attempts.items():  # every element of the released windows counted exactly once,
        for sketch in sketches:  # at the release whose report the ledger holds and at the re-release
            assert truth[key].matches(sketch) if key in truth else sketch.total == 0, key
    assert max(len(sks) for sks in attempts.values()) >= 2  # a window was released again after the restart
    assert len(truth) >= 6 * cfg.hierarchy.h  # data in six windows
    assert (tmp_path / "reports.jsonl").read_bytes().splitlines()[: len(found)] == found
    assert not logged_offsets(tmp_path / "run" / "log")
    assert not logged_state_sizes(tmp_path / "run" / "log")


def test_path_hierarchy_stream(broker, tmp_path: Path) -> None:
    """A `/`-path topic (one path per message) yields reports that name heavy prefixes like de/bavaria;
    paths of the wrong depth are dead-lettered."""
    base = _base()
    rng = np.random.default_rng(5)
    paths = ["de/bavaria/munich"] * 2500 + [f"fr/r{rng.integers(0, 50)}/c{rng.integers(0, 999)}" for _ in range(800)]
    rng.shuffle(paths)
    messages = [(base + i, p.encode()) for i, p in enumerate(paths)] + [(base + 5, b"de/bavaria"), (base + 6, b"a//b")]
    config = write_config(
        tmp_path,
        "paths",
        input={"format": "path"},
        hierarchy={"spec": "path:3"},
        window=replay_window(base, 1, WINDOW),
        privacy={"epsilon": 2.0, "tau": 1000.0, "counters": 256, "partitions": 2, "seed": 7},
    )
    cfg, _ = run_replay(tmp_path, config, messages)
    found = [json.loads(r) for r in reports(cfg)]
    assert len(found) == 1 and found[0]["params"]["hierarchy"] == "path:3"
    assert "de/bavaria/munich" in {x["prefix"] for x in found[0]["hhh"]}
    dead = [json.loads(v)["reason"] for v in dead_letters(cfg)]
    assert sorted(dead) == ["bad_path_depth", "bad_path_empty_component"]


def test_json_records_with_their_own_event_time(broker, tmp_path: Path) -> None:
    """JSON records are windowed by their time field, not by the Kafka timestamp; a record without
    the address field is dead-lettered, one whose time is outside the replay's range too."""
    base = _base()
    now = int(time.time() * 1000)
    rows = [
        {"src": "10.9.8.7" if i % 3 else f"192.0.2.{i % 200}", "t": base + (i % 2) * WINDOW + i} for i in range(3000)
    ]
    messages = [(now, json.dumps(r).encode()) for r in rows] + [
        (now, b'{"dst": "1.2.3.4", "t": 5}'),
        (now, b'{"src": "1.2.3.4", "t": 4611686018427387903}'),
    ]
    config = write_config(
        tmp_path,
        "json",
        input={"format": "json", "json_field": "src", "json_time_field": "t"},
        window=replay_window(base, 2, WINDOW),
        privacy={"epsilon": 2.0, "tau": 800.0, "counters": 256, "partitions": 2, "seed": 3},
    )
    cfg, _ = run_replay(tmp_path, config, messages)
    found = [json.loads(r) for r in reports(cfg)]
    assert [r["window"]["start_ms"] for r in found] == [base, base + WINDOW]
    assert all("10.9.8.7/32" in {x["prefix"] for x in r["hhh"]} for r in found)
    level_one = range(cfg.params.partitions)  # the sketch ids of level 1, one per partition
    got = dumped(tmp_path)
    for start in (base, base + WINDOW):  # every row counted once, in the window of its own time
        assert sum(got[(start, sid)].total for sid in level_one if (start, sid) in got) == 1500
    dead = [json.loads(v)["reason"] for v in dead_letters(cfg)]
    assert sorted(dead) == ["after_until", "missing_field"]


def test_demo_publishes_six_reports(broker) -> None:
    """`dphhh demo` (the README's first command) publishes the sample stream, prints one report per
    window (six, one of them empty) and counts the three malformed records."""
    result = subprocess.run([DPHHH, "demo"], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "6 window reports published, 3 records dead-lettered" in result.stderr
    assert result.stdout.count("dphhh private HHH report") == 6
    assert "Traceback" not in result.stderr


def exported_names(scrape: str) -> set[str]:
    """Every metric name of a Prometheus text scrape (samples and # TYPE lines alike)."""
    names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", scrape, re.M))
    names |= set(re.findall(r"^# (?:TYPE|HELP) ([a-zA-Z_:][a-zA-Z0-9_:]*)", scrape, re.M))
    return names


def _base_name(name: str) -> str:
    """A counter's sample name without the _total/_created suffixes Prometheus clients add."""
    return re.sub(r"_(total|created)$", "", name)


def test_metrics_are_an_allow_list_with_no_raw_count_and_a_real_prometheus_scrapes_them(broker, tmp_path: Path) -> None:
    """While a live job runs on one address per message (text-ipv4: Flink's record counters would then
    be exact window sizes), every name either endpoint exports is in the catalogue — none of busyTime,
    backPressured, Watermark, Heap, incoming-byte, fetch-size … —, no exact window or sub-stream
    size nor input address appears, Debian's Prometheus server scrapes both endpoints and answers
    every dashboard query, and the built-in dashboard shows every window and nothing raw."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        ["bash", str(root / "deploy" / "install-debian.sh"), "prometheus"], check=True, capture_output=True, timeout=600
    )
    size = 3000
    origin = live_origin(size, 3)
    job_port, report_port, prom_port = free_port(), free_port(), free_port()
    config = write_config(
        tmp_path,
        "metrics",
        input={"format": "text-ipv4"},
        window={"size_ms": size, "origin": origin},
        privacy={"epsilon": 2.0, "tau": 1500.0, "counters": 256, "partitions": 2, "seed": 11},
        flink={"checkpoint_interval_ms": 1000, "prometheus_port": str(job_port)},
        output={"metrics_port": report_port},
    )
    cfg, producer = publish(config, [])
    prom_config = tmp_path / "prometheus.yml"
    prom_config.write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n"
        f"  - job_name: dphhh-job\n    static_configs:\n      - targets: ['127.0.0.1:{job_port}']\n"
        f"  - job_name: dphhh-reports\n    static_configs:\n      - targets: ['127.0.0.1:{report_port}']\n"
    )
    job = subprocess.Popen(
        [*JOB, str(config)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    dashboard_port = free_port()
    dashboard_proc = subprocess.Popen(
        [DPHHH, "dashboard", "--topic", cfg["kafka.reports_topic"], "--port", str(dashboard_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={prom_config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rng = np.random.default_rng(11)
    heavy = ["198.18.7.77"] * 1_731 + ["10.1.2.3"] * 977  # the canary above tau: an HHH of windows 0 and 2
    try:
        for w, n in enumerate((4_321, 0, 2_719)):  # one address per message, 200 ms into windows 0..2
            sleep_until(origin + w * size + 200)
            texts = heavy + [f"10.{a}.{b}.{c}" for a, b, c in rng.integers(0, 256, (n, 3)).tolist()] if n else []
            for text in texts:
                producer.send_value(text.encode())
            producer.send_value(b"not an address")
            producer.flush()
        producer.close()
        final = origin + 5 * size  # windows 0..4 reported (3 and 4 empty)
        wait_for(
            lambda: any(json.loads(r)["window"]["start_ms"] >= final - size for r in reports(cfg)), 180, "five reports"
        )
        # the Python operators' counters reach the job's endpoint when their bundle ends, which may
        # be after the report is readable: await the release counter (a condition, not a pause)
        released = "flink_taskmanager_job_task_operator_dphhh_release_windows_released"
        wait_for(
            lambda: metric_total(_scrape(job_port), released) >= 5,
            60,
            "the release counter on the job's endpoint",
        )
        scraped = {port: _scrape(port) for port in (job_port, report_port)}
        names = {port: exported_names(text) for port, text in scraped.items()}
        for port, catalogue in ((job_port, JOB_METRICS), (report_port, REPORT_METRICS)):  # allow-lists
            unknown = {_base_name(n) for n in names[port]} - {_base_name(m) for m in catalogue}
            assert not unknown, unknown
        for word in FORBIDDEN_WORDS:
            assert not [n for n in names[job_port] | names[report_port] if word.lower() in n.lower()], word
        expected = {
            prometheus_name("release", "windows_released"),
            prometheus_name("decode", "dead_letters_bad_ipv4"),
            "flink_jobmanager_job_numRestarts",
        }
        assert expected <= names[job_port], expected - names[job_port]
        per_prefix = {"dphhh_report_hhh_count"}  # a series per prefix of the latest report: none if it has none
        assert {_base_name(m) for m in set(REPORT_METRICS) - per_prefix} <= {_base_name(n) for n in names[report_port]}
        assert _metric_value(scraped[job_port], prometheus_name("decode", "dead_letters_bad_ipv4")) == 3

        logged = input_log(cfg)
        schedule = cfg.schedule(origin)
        sizes = {}
        for ts, value in logged:
            if value != b"not an address":
                sizes[schedule.start_of(ts)] = sizes.get(schedule.start_of(ts), 0) + 1
        sub_streams = [sk.total for sk in offline_sketches(cfg, logged, schedule).values()]
        exact = [n for n in (*sizes.values(), *sub_streams) if n > 3]  # small numbers are everywhere
        assert sorted(sizes.values()) == sorted(len(heavy) + n for n in (4_321, 2_719))  # one window each
        # The canary is a published HHH of window 0, so it may appear as the prefix label of the latest
        # report's dphhh_report_hhh_count (exactly what the report publishes); nowhere else.
        report_lines = [ln for ln in scraped[report_port].splitlines() if not ln.startswith("dphhh_report_hhh_count{")]
        assert CANARY_TEXT not in scraped[job_port] + "\n".join(report_lines)
        assert str(CANARY) not in scraped[job_port] + scraped[report_port]
        assert not leaked_counts(scraped[job_port], exact), leaked_counts(scraped[job_port], exact)
        # what `dphhh run` and the dashboard show comes from the published (noisy) reports: a noisy value
        # may equal an exact count by chance, but then the reports show it too — nothing beyond them
        published = "\n".join(r.decode() for r in reports(cfg))
        assert leaked_counts(scraped[report_port], exact) <= leaked_counts(published, exact)

        def scraped_by_prometheus() -> bool:
            seen = prometheus_query(prom_port, "dphhh_reports_total") or []
            released = prometheus_query(prom_port, "flink_taskmanager_job_task_operator_dphhh_release_windows_released")
            return bool(seen) and float(seen[0]["value"][1]) >= 2 and bool(released)

        wait_for(scraped_by_prometheus, 60, "Prometheus to scrape the job and the report metrics")
        up = prometheus_query(prom_port, "up") or []
        assert sorted(r["metric"]["job"] for r in up if r["value"][1] == "1") == ["dphhh-job", "dphhh-reports"]
        dashboard = json.loads((root / "deploy" / "grafana" / "dashboards" / "dphhh.json").read_text())
        for panel in dashboard["panels"]:  # every dashboard query is valid PromQL with data behind it
            for target in panel["targets"]:
                result = prometheus_query(prom_port, target["expr"])
                assert result is not None, (panel["title"], target["expr"])
                # the latest window here is empty: no per-prefix series
                assert result or "hhh_count" in target["expr"], (panel["title"], target["expr"])

        def dashboard_state() -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{dashboard_port}/api/state", timeout=5) as response:
                return json.loads(response.read())

        wait_for(lambda: len(dashboard_state()["windows"]) >= 5, 30, "the dashboard to show five windows")
        state_text = json.dumps(dashboard_state())
        assert CANARY_TEXT in state_text  # a published HHH (the canary is heavy in window 0) ...
        published = "\n".join(r.decode() for r in reports(cfg))
        assert leaked_counts(state_text, exact) <= leaked_counts(published, exact)  # ... nothing the reports lack
    finally:
        dashboard_proc.terminate()
        dashboard_proc.wait(timeout=30)
        prometheus.terminate()
        prometheus.wait(timeout=30)
        interrupt(job)


def test_job_runs_on_a_standalone_cluster_with_two_taskmanagers(broker, tmp_path: Path) -> None:
    """deploy/flink-cluster.sh starts a JobManager and two TaskManagers from PyFlink's distribution; the
    same job submitted to it (flink.remote, parallelism 2, two input partitions) publishes one report per
    window and its sketches count every element of each window exactly once."""
    root = Path(__file__).resolve().parents[2]
    script = root / "deploy" / "flink-cluster.sh"
    started = subprocess.run(["bash", str(script), "start", "2"], capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        base = _base()
        messages, _ = _messages(base)
        config = _config(tmp_path, "cluster", seed=5)
        text = config.read_text().replace("[flink]\n", '[flink]\nremote = "127.0.0.1:8081"\nparallelism = 2\n')
        config.write_text(text)
        cfg = load_config(config, environ={})
        create_topics(cfg.kafka_client_options(), [cfg["kafka.input_topic"]], partitions=2)
        cfg, _ = run_replay(tmp_path, config, messages)
        starts = [json.loads(r)["window"]["start_ms"] for r in reports(cfg)]
        assert starts == [base + w * WINDOW for w in range(4)]
        got = dumped(tmp_path)
        level_one = range(cfg.params.partitions)
        for w, n in enumerate(EXACT_SIZES):  # element totals do not depend on the interleaving
            start = base + w * WINDOW
            assert sum(got[(start, sid)].total for sid in level_one if (start, sid) in got) == n
        with urllib.request.urlopen("http://127.0.0.1:8081/jobs/overview", timeout=5) as response:
            jobs = json.loads(response.read())["jobs"]
        ours = [j for j in jobs if j["name"] == "dphhh" and j["state"] == "FINISHED"]
        assert ours, jobs
        with urllib.request.urlopen(f"http://127.0.0.1:8081/jobs/{ours[-1]['jid']}", timeout=5) as response:
            vertices = json.loads(response.read())["vertices"]
        assert max(v["parallelism"] for v in vertices) == 2

        # the same job through Flink's own CLI: `flink run -pym dphhh.stream.flink_entry`
        import pyflink

        flink = Path(pyflink.__file__).resolve().parent / "bin" / "flink"
        (tmp_path / "cli").mkdir()
        again = _config(tmp_path / "cli", "cluster-cli", seed=6)
        again.write_text(again.read_text().replace("[flink]\n", "[flink]\nparallelism = 2\n"))
        cfg_cli, producer = publish(again, messages)
        producer.close()
        submitted = subprocess.run(
            [
                "bash",
                str(flink),
                "run",
                "-m",
                "127.0.0.1:8081",
                "-pyexec",
                sys.executable,
                "-pyclientexec",
                sys.executable,
                "-pym",
                "dphhh.stream.flink_entry",
                "--config",
                str(again),
                "--run-dir",
                str(tmp_path / "cli-run"),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
            env={**os.environ, "FLINK_CONF_DIR": str(root / "var" / "flink-cluster" / "conf")},
        )
        assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
        assert [json.loads(r)["window"]["start_ms"] for r in reports(cfg_cli)] == starts
    finally:
        subprocess.run(["bash", str(script), "stop"], capture_output=True, timeout=120)
