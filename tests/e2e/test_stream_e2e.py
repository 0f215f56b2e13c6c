"""End-to-end: real Kafka broker + real PyFlink job (MiniCluster) + the release ledger.

The job runs as ``dphhh run --config …`` in a subprocess on a bounded input topic. A known stream
spans four windows (one of them empty) plus malformed records. The tests check what a user would:
one report per window, the non-private sketch state at each window end equals an offline replay of
the same sequence, the reports equal the offline computation with the same (test-only) noise seed,
bad records are dead-lettered and counted, nothing raw reaches the logs, and a failure between a
release and the next checkpoint republishes byte-identical reports without losing or double
counting any element.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from connectors.decode import MessageDecoder
from connectors.kafka_io import PackedProducer, create_topics, iter_committed_values, pack_ipv4
from privacy.window import release_sketch
from sketches.misra_gries import MisraGries
from tests.e2e.net import free_port
from stream.assembler import WindowAssembler, noise_source_factory, sketch_of_id
from stream.config import load_config
from stream.ledger import ReleaseLedger
from stream.metrics_catalog import JOB_METRICS, REPORT_METRICS, prometheus_name
from stream.operators import expand
from stream.windows import TumblingWindows

WINDOW = 10_000
BOOTSTRAP = "127.0.0.1:9092"
CANARY = 0xC612074D  # 198.18.7.77: must never appear in a log
CANARY_TEXT = "198.18.7.77"
EXACT_SIZES = (12_347, 23_459, 0, 5_003)  # unusual numbers, searched for in the logs


def _window_values(rng: np.random.Generator) -> list[np.ndarray]:
    w0 = np.concatenate([
        (np.uint32(0x0A010000) + rng.integers(0, 2**16, 7_919, dtype=np.uint64)).astype(np.uint32),
        np.full(3_331, CANARY, dtype=np.uint32),
        rng.integers(0, 2**32, EXACT_SIZES[0] - 7_919 - 3_331, dtype=np.uint64).astype(np.uint32),
    ])
    rng.shuffle(w0)
    w1 = rng.integers(0, 2**32, EXACT_SIZES[1], dtype=np.uint64).astype(np.uint32)
    w3 = np.concatenate([np.full(2_500, 0x2D000001, np.uint32),
                         rng.integers(0, 2**32, EXACT_SIZES[3] - 2_500, dtype=np.uint64).astype(np.uint32)])
    return [w0, w1, np.empty(0, np.uint32), w3]


def _messages(base: int) -> tuple[list[tuple[int, bytes]], list[str]]:
    rng = np.random.default_rng(99)
    messages: list[tuple[int, bytes]] = []
    for w, values in enumerate(_window_values(rng)):
        for i in range(0, len(values), 1000):
            messages.append((base + w * WINDOW + 10 * (i // 1000), pack_ipv4(values[i : i + 1000])))
    # bad records among window 0's (timestamps inside window 0: a later one would move the watermark
    # past window 0 while its remaining records are still to come, and those would then be late)
    bad = [(base + 41, b"\x01\x02\x03"), (base + 42, b""), (base + 43, b"\x00" * 8200)]
    return messages[:5] + bad + messages[5:], ["bad_length", "empty", "oversized"]


def _offline_sketches(cfg, messages) -> dict[tuple[int, int], MisraGries]:
    """The sketch of every (window, sketch id), replaying the messages in Kafka order."""
    decoder = MessageDecoder("packed-ipv4", max_message_bytes=cfg["input.max_message_bytes"])
    windows = TumblingWindows(WINDOW)
    out: dict[tuple[int, int], MisraGries] = {}
    for ts, value in messages:
        decoded = decoder.decode(value)
        if not decoded.ok:
            continue
        for sid, keys in expand(decoded.values, cfg):
            out.setdefault((windows.start_of(ts), sid), MisraGries(cfg.params.counters)).update(keys)
    return out


def _config(tmp_path: Path, name: str, **output) -> Path:
    topic = f"e2e-{name}-{uuid.uuid4().hex[:8]}"
    lines = [
        "[kafka]", f'bootstrap = "{BOOTSTRAP}"', f'input_topic = "{topic}-in"', f'reports_topic = "{topic}-reports"',
        f'dead_letter_topic = "{topic}-dead"', f'group_id = "{topic}"', "bounded = true",
        "[input]", "max_message_bytes = 8192",
        "[window]", f"size_ms = {WINDOW}",
        "[privacy]", "epsilon = 2.0", "delta = 1e-6", "tau = 2000.0", "counters = 256", "partitions = 2",
        f"seed = {output.pop('seed', -1)}",
        "[flink]", f'checkpoint_dir = "{tmp_path / "checkpoints"}"',
        f"checkpoint_interval_ms = {output.pop('checkpoint_interval_ms', 2000)}",
        "[output]", f'ledger_dir = "{tmp_path / "ledger"}"', f'reports_file = "{tmp_path / "reports.jsonl"}"',
        f'debug_sketch_dir = "{tmp_path / "sketches"}"', f'run_dir = "{tmp_path / "run"}"',
        *(f"{k} = {v}" for k, v in output.items()),
    ]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _publish(config: Path, messages) -> tuple[object, PackedProducer]:
    """Create the job's topics and publish ``messages``; returns (config, the open producer)."""
    cfg = load_config(config, environ={})
    opts = cfg.kafka_client_options()
    create_topics(opts, [cfg["kafka.input_topic"], cfg["kafka.reports_topic"], cfg["kafka.dead_letter_topic"]])
    producer = PackedProducer(opts, cfg["kafka.input_topic"])
    for ts, value in messages:
        producer.send_value(value, ts)
    producer.flush()
    return cfg, producer


JOB = [str(Path(sys.executable).with_name("dphhh")), "run", "--replay", "no", "--config"]


def _run(tmp_path: Path, config: Path, messages, tombstone_at: int | None = None
         ) -> tuple[object, subprocess.CompletedProcess]:
    cfg, producer = _publish(config, messages)
    if tombstone_at is not None:  # a record with a null value (a Kafka tombstone)
        producer._producer.send(cfg["kafka.input_topic"], key=b"t", value=None, timestamp_ms=tombstone_at).get(timeout=30)
    producer.close()
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    return cfg, result


def _reports(cfg) -> list[bytes]:
    return [v for _, v in iter_committed_values(cfg.kafka_client_options(), cfg["kafka.reports_topic"], idle_timeout_s=3)]


def _dumped(tmp_path: Path) -> dict[tuple[int, int], MisraGries]:
    out = {}
    for path in (tmp_path / "sketches").glob("window-*-sketch-*.bin"):
        m = re.match(r"window-(\d+)-sketch-(\d+)\.bin", path.name)
        out[(int(m.group(1)), int(m.group(2)))] = MisraGries.from_bytes(path.read_bytes())
    return out


def _base() -> int:
    return 1_700_000_000_000 // WINDOW * WINDOW  # a fixed past event time


def test_stream_job_end_to_end(broker, tmp_path: Path) -> None:
    """One report per window (the empty one too), sketch state == offline replay, reports == offline
    computation with the same test seed, bad records dead-lettered and counted, no raw data in logs;
    a tombstone (null value) is skipped: neither counted nor dead-lettered, and the job is unharmed."""
    base = _base()
    messages, bad_reasons = _messages(base)
    config = _config(tmp_path, "main", seed=1234)
    cfg, result = _run(tmp_path, config, messages, tombstone_at=base + 44)

    reports = _reports(cfg)
    starts = [json.loads(r)["window"]["start_ms"] for r in reports]
    assert starts == [base + w * WINDOW for w in range(4)]

    offline = _offline_sketches(cfg, messages)
    assert _dumped(tmp_path) == offline  # the non-private state at each window end

    # the same releases offline, with the same per-(window, level, partition) test noise
    noise_for = noise_source_factory(1234)
    assembler = WindowAssembler(cfg.hierarchy, cfg.params, TumblingWindows(WINDOW), ReleaseLedger(tmp_path / "offline"),
                                seed=1234)
    for w, report in enumerate(reports):
        start = base + w * WINDOW
        releases = []
        for (win, sid), sketch in sorted(offline.items()):
            if win == start:
                level, part = sketch_of_id(sid, cfg.params.partitions)
                releases.append(release_sketch(level, part, sketch.counters(), sketch.total, params=cfg.params,
                                               h=cfg.hierarchy.h, rng=noise_for(start, level, part)))
        expected, _ = assembler.report(start, releases)
        assert report == expected, w
    first = json.loads(reports[0])
    assert {"10.1.0.0/16", f"{CANARY_TEXT}/32"} <= {x["prefix"] for x in first["hhh"]}
    assert json.loads(reports[2])["window"]["n_noisy"] >= 0 and "NOT private" in first["guarantees"]["randomness"]

    jsonl = (tmp_path / "reports.jsonl").read_bytes().splitlines()
    assert jsonl == reports

    dead = [json.loads(v) for _, v in iter_committed_values(cfg.kafka_client_options(), cfg["kafka.dead_letter_topic"],
                                                             idle_timeout_s=3)]
    assert sorted(d["reason"] for d in dead) == sorted(bad_reasons)
    # the dead-letter topic holds the bad records themselves and nothing else (no good record, no count)
    bad_values = sorted(v for _, v in messages if not MessageDecoder("packed-ipv4", max_message_bytes=8192).decode(v).ok)
    assert sorted(base64.b64decode(d["value_b64"]) for d in dead) == bad_values
    assert all(set(d) == {"reason", "timestamp_ms", "value_b64"} for d in dead)

    logs = result.stderr  # stdout carries the published (private) reports themselves
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file() and path.suffix in (".log", ".out", ".txt", ""):
            logs += path.read_text(errors="replace")
    assert CANARY_TEXT not in logs
    for n in (s for s in EXACT_SIZES if s):
        assert not re.search(rf"(?<![\d.]){n}(?![\d.])", logs), n


def _group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _interrupt(job: subprocess.Popen) -> tuple[str | None, str | None]:
    """Ctrl-C as a terminal sends it (SIGINT to the job's process group); the job's (stdout, stderr)
    once it ended, within 60 s (else it is killed and the test fails)."""
    os.killpg(job.pid, signal.SIGINT)
    try:
        return job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def test_failure_after_release_republishes_identically(broker, tmp_path: Path) -> None:
    """A live job fails right after a window's release (before the next checkpoint) and restarts
    from its last checkpoint: each window's report appears once, byte-identical to the ledger, and
    the sketches count every element exactly once. Ctrl-C (SIGINT to the job's process group, as a
    terminal sends it) then stops everything cleanly: exit status 130, no traceback, no process left."""
    base = _base()
    messages, _ = _messages(base)
    messages.append((base + 5 * WINDOW, pack_ipv4(np.array([1], np.uint32))))  # moves the watermark past window 3
    config = _config(tmp_path, "fail", fail_after_window=2, checkpoint_interval_ms=500)
    text = config.read_text().replace("bounded = true", "bounded = false")
    config.write_text(text)
    cfg, producer = _publish(config, messages)
    job = subprocess.Popen([*JOB, str(config)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        marker = tmp_path / "run" / "injected-failure.done"
        _wait_for(marker.exists, 180, "the injected failure")
        # After the restart the watermark starts afresh: new records move it past the open windows.
        for step in range(1, 30):
            producer.send_value(pack_ipv4(np.array([2], np.uint32)), base + (6 + step) * WINDOW)
            producer.flush()
            starts = [json.loads(r)["window"]["start_ms"] for r in _reports(cfg)]
            if len(starts) >= 6:
                break
            assert job.poll() is None, job.stderr.read()[-3000:]
    finally:
        producer.close()
        _, stderr = _interrupt(job)
    assert job.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert "job stopped" in stderr
    _wait_for(lambda: not _group_alive(job.pid), 20, "the job's processes to end")
    reports = _reports(cfg)
    starts = [json.loads(r)["window"]["start_ms"] for r in reports]
    assert starts[:6] == [base + w * WINDOW for w in range(6)], starts  # once each, in order, none missing
    assert len(starts) == len(set(starts))
    ledger = ReleaseLedger(tmp_path / "ledger")
    assert reports == [ledger.get(s) for s in starts]  # secure noise: identical only through the ledger
    dumped = _dumped(tmp_path)
    offline = _offline_sketches(cfg, messages)
    for key, sketch in offline.items():
        assert dumped[key] == sketch, key  # every element of windows 0..5 counted exactly once
    assert (tmp_path / "reports.jsonl").read_bytes().splitlines()[: len(reports)] == reports
    assert not logged_offsets(tmp_path / "run" / "log")
    assert not logged_state_sizes(tmp_path / "run" / "log")


def logged_offsets(log_dir: Path) -> list[str]:
    """Kafka offsets (message counts) in the job's logs. After a restore, Flink's Kafka source and client
    log the restored position at INFO ("StartingOffset: N", "offset=N"); the job's log configuration
    (deploy/flink/log4j-no-raw-counts.properties) keeps those lines out."""
    logs = "".join(p.read_text(errors="replace") for p in log_dir.glob("*") if p.is_file())
    return re.findall(r"(?:StartingOffset: |offset=|[Oo]ffsets? )[1-9]\d*", logs)


def logged_state_sizes(log_dir: Path) -> list[str]:
    """Checkpointed state sizes in the job's logs: buffered addresses and, at user level, privacy units
    make them coarse counts. Flink logs them at INFO ("Completed checkpoint N for job ... (N bytes",
    "restoring from state handle ... [N bytes]"); deploy/flink/log4j-no-raw-counts.properties drops them."""
    logs = "".join(p.read_text(errors="replace") for p in log_dir.glob("*") if p.is_file())
    return re.findall(r"Completed checkpoint \d+ for job \w+ \(\d+ bytes|restor\w* from state handle.*\d+ bytes", logs)


def test_path_hierarchy_stream(broker, tmp_path: Path) -> None:
    """A `/`-path topic (one path per message) yields reports that name heavy prefixes like de/bavaria;
    paths of the wrong depth are dead-lettered."""
    base = _base()
    rng = np.random.default_rng(5)
    paths = ["de/bavaria/munich"] * 2500 + [f"fr/r{rng.integers(0, 50)}/c{rng.integers(0, 999)}" for _ in range(800)]
    rng.shuffle(paths)
    messages = [(base + i, p.encode()) for i, p in enumerate(paths)] + [(base + 5, b"de/bavaria"), (base + 6, b"a//b")]
    config = _config(tmp_path, "paths", seed=7)
    text = config.read_text().replace("[input]\n", '[input]\nformat = "path"\n') + '[hierarchy]\nspec = "path:3"\n'
    text = text.replace("tau = 2000.0", "tau = 1000.0").replace('mode = "conservative"', "")
    config.write_text(text)
    cfg, _ = _run(tmp_path, config, messages)
    reports = [json.loads(r) for r in _reports(cfg)]
    assert len(reports) == 1 and reports[0]["params"]["hierarchy"] == "path:3"
    assert "de/bavaria/munich" in {x["prefix"] for x in reports[0]["hhh"]}
    dead = [json.loads(v)["reason"] for _, v in iter_committed_values(cfg.kafka_client_options(),
                                                                       cfg["kafka.dead_letter_topic"], idle_timeout_s=3)]
    assert sorted(dead) == ["bad_path_depth", "bad_path_empty_component"]


def test_json_records_with_their_own_event_time(broker, tmp_path: Path) -> None:
    """JSON records are windowed by their time field, not by the Kafka timestamp; a record without
    the address field is dead-lettered."""
    base = _base()
    now = int(time.time() * 1000)
    rows = [{"src": "10.9.8.7" if i % 3 else f"192.0.2.{i % 200}", "t": base + (i % 2) * WINDOW + i} for i in range(3000)]
    messages = [(now, json.dumps(r).encode()) for r in rows] + [(now, b'{"dst": "1.2.3.4", "t": 5}')]
    config = _config(tmp_path, "json", seed=3)
    text = config.read_text().replace("[input]\n", '[input]\nformat = "json"\njson_field = "src"\njson_time_field = "t"\n')
    # the rows alternate between two windows: a watermark bound of two windows keeps any of them
    # from being late, whenever the periodic watermark happens to be emitted
    text = text.replace("[window]\n", f"[window]\nout_of_orderness_ms = {2 * WINDOW}\n")
    config.write_text(text.replace("tau = 2000.0", "tau = 800.0"))
    cfg, _ = _run(tmp_path, config, messages)
    reports = [json.loads(r) for r in _reports(cfg)]
    assert [r["window"]["start_ms"] for r in reports] == [base, base + WINDOW]
    assert all("10.9.8.7/32" in {x["prefix"] for x in r["hhh"]} for r in reports)
    level_one = range(cfg.params.partitions)  # the sketch ids of level 1, one per partition
    dumped = _dumped(tmp_path)
    for start in (base, base + WINDOW):  # every row counted once, in the window of its own time
        assert sum(dumped[(start, sid)].total for sid in level_one if (start, sid) in dumped) == 1500
    dead = [json.loads(v)["reason"] for _, v in iter_committed_values(cfg.kafka_client_options(),
                                                                       cfg["kafka.dead_letter_topic"], idle_timeout_s=3)]
    assert dead == ["missing_field"]


def test_demo_publishes_six_reports(broker) -> None:
    """`dphhh demo` (the README's first command) publishes the sample stream, prints one report per
    window (six, one of them empty) and counts the three malformed records."""
    result = subprocess.run([str(Path(sys.executable).with_name("dphhh")), "demo"], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "6 window reports published, 3 records dead-lettered" in result.stderr
    assert result.stdout.count("dphhh private HHH report") == 6
    assert "Traceback" not in result.stderr



def _scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode("utf-8", "replace")


def _prometheus_query(port: int, expr: str) -> list | None:
    """The result vector of an instant query; None if the server refused it (or did not answer)."""
    import urllib.parse
    import urllib.request

    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]["result"]
    except OSError:
        return None


def test_metrics_leak_no_raw_count_and_a_real_prometheus_scrapes_them(broker, tmp_path: Path) -> None:
    """While a live job runs on the known stream, every metrics endpoint (Flink's reporter and dphhh
    run's report metrics) exports the documented metrics and no exact window size nor input address;
    Debian's Prometheus server scrapes both and answers queries over its HTTP API."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run(["bash", str(root / "deploy" / "install-debian.sh"), "prometheus"], check=True, capture_output=True, timeout=600)
    base = _base()
    messages, _ = _messages(base)
    messages.append((base + 5 * WINDOW, pack_ipv4(np.array([1], np.uint32))))  # moves the watermark past window 3
    job_port, report_port, prom_port = free_port(), free_port(), free_port()
    config = _config(tmp_path, "metrics", seed=11, metrics_port=report_port)
    text = config.read_text().replace("bounded = true", "bounded = false")
    config.write_text(text.replace("[flink]\n", f'[flink]\nprometheus_port = "{job_port}"\n'))
    cfg, producer = _publish(config, messages)
    producer.close()
    prom_config = tmp_path / "prometheus.yml"
    prom_config.write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n"
        f"  - job_name: dphhh-job\n    static_configs:\n      - targets: ['127.0.0.1:{job_port}']\n"
        f"  - job_name: dphhh-reports\n    static_configs:\n      - targets: ['127.0.0.1:{report_port}']\n")
    job = subprocess.Popen([*JOB, str(config)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    dashboard_port = free_port()
    dashboard_proc = subprocess.Popen([str(Path(sys.executable).with_name("dphhh")), "dashboard", "--topic",
                                  cfg["kafka.reports_topic"], "--port", str(dashboard_port)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prometheus = subprocess.Popen(
        ["prometheus", f"--config.file={prom_config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: len(_reports(cfg)) >= 4, 180, "four reports")
        scraped = {}
        for port in (job_port, report_port):
            scraped[port] = _scrape(port)
        exported = {port: set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", text, re.M)) for port, text in scraped.items()}
        ours = {m for m in exported[job_port] if "_dphhh_" in m}
        assert ours <= set(JOB_METRICS), ours - set(JOB_METRICS)  # no undocumented metric
        incremented = {prometheus_name("decode", f"dead_letters_{r}") for r in ("bad_length", "empty", "oversized")}
        always = {m for m in JOB_METRICS if "_dphhh_" not in m or m.endswith("_age_ms")}
        expected = always | incremented | {prometheus_name("release", "windows_released"),
                                           prometheus_name("sketch", "sketches_released")}
        assert expected <= exported[job_port], expected - exported[job_port]
        per_prefix = {"dphhh_report_hhh_count"}  # a series per prefix of the latest report: none if it has none
        assert set(REPORT_METRICS) - per_prefix <= exported[report_port]
        assert re.search(r"dphhh_decode_dead_letters_bad_length\{[^}]*\} 1\.0", scraped[job_port])
        # The canary is a published HHH of window 0, so it may appear as the prefix label of the latest
        # report's dphhh_report_hhh_count (exactly what the report publishes); nowhere else.
        report_lines = [ln for ln in scraped[report_port].splitlines() if not ln.startswith("dphhh_report_hhh_count{")]
        everything = scraped[job_port] + "\n".join(report_lines)
        assert CANARY_TEXT not in everything and str(CANARY) not in everything
        assert "CheckpointSize" not in everything and "CheckpointFullSize" not in everything  # state sizes
        for n in (s for s in EXACT_SIZES if s):
            assert not re.search(rf"(?<![\d.]){n}(?![\d.])", everything), n

        def scraped_by_prometheus() -> bool:
            reports = _prometheus_query(prom_port, "dphhh_reports_total") or []
            released = _prometheus_query(prom_port, "flink_taskmanager_job_task_operator_dphhh_release_windows_released")
            return bool(reports) and float(reports[0]["value"][1]) >= 4 and bool(released)

        _wait_for(scraped_by_prometheus, 60, "Prometheus to scrape the job and the report metrics")
        up = _prometheus_query(prom_port, "up") or []
        assert sorted(r["metric"]["job"] for r in up if r["value"][1] == "1") == ["dphhh-job", "dphhh-reports"]
        dashboard = json.loads((root / "deploy" / "grafana" / "dashboards" / "dphhh.json").read_text())
        for panel in dashboard["panels"]:  # every dashboard query is valid PromQL with data behind it
            for target in panel["targets"]:
                result = _prometheus_query(prom_port, target["expr"])
                assert result is not None, (panel["title"], target["expr"])
                # the latest window here is empty (the watermark passed window 4): no per-prefix series
                assert result or "hhh_count" in target["expr"], (panel["title"], target["expr"])
        # the built-in dashboard follows the reports topic: its data has every window, nothing raw
        def dashboard_state() -> dict:
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{dashboard_port}/api/state", timeout=5) as response:
                return json.loads(response.read())

        _wait_for(lambda: len(dashboard_state()["windows"]) >= 4, 30, "the dashboard to show four windows")
        state_text = json.dumps(dashboard_state())
        assert CANARY_TEXT in state_text  # a published HHH (the canary is heavy in window 0) ...
        assert not any(re.search(rf"(?<![\d.]){n}(?![\d.])", state_text) for n in EXACT_SIZES if n)  # ... no exact size
    finally:
        dashboard_proc.terminate()
        dashboard_proc.wait(timeout=30)
        prometheus.terminate()
        prometheus.wait(timeout=30)
        _interrupt(job)


def test_job_runs_on_a_standalone_cluster_with_two_taskmanagers(broker, tmp_path: Path) -> None:
    """deploy/flink-cluster.sh starts a JobManager and two TaskManagers from PyFlink's distribution; the
    same job submitted to it (flink.remote, parallelism 2, two input partitions) publishes one report per
    window and its sketches count every element of each window exactly once."""
    import urllib.request

    root = Path(__file__).resolve().parents[2]
    script = root / "deploy" / "flink-cluster.sh"
    started = subprocess.run(["bash", str(script), "start", "2"], capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        base = _base()
        messages, _ = _messages(base)
        config = _config(tmp_path, "cluster", seed=5)
        # the malformed records carry window 3's time amid window 0's messages: with two source
        # subtasks the watermark may see them early, so it waits for four windows of disorder
        text = config.read_text().replace("[flink]\n", '[flink]\nremote = "127.0.0.1:8081"\nparallelism = 2\n')
        config.write_text(text.replace("[window]\n", f"[window]\nout_of_orderness_ms = {4 * WINDOW}\n"))
        cfg = load_config(config, environ={})
        create_topics(cfg.kafka_client_options(), [cfg["kafka.input_topic"]], partitions=2)
        cfg, _ = _run(tmp_path, config, messages)
        starts = [json.loads(r)["window"]["start_ms"] for r in _reports(cfg)]
        assert starts == [base + w * WINDOW for w in range(4)]
        dumped = _dumped(tmp_path)
        level_one = range(cfg.params.partitions)
        for w, size in enumerate(EXACT_SIZES):  # element totals do not depend on the interleaving
            start = base + w * WINDOW
            assert sum(dumped[(start, sid)].total for sid in level_one if (start, sid) in dumped) == size
        with urllib.request.urlopen("http://127.0.0.1:8081/jobs/overview", timeout=5) as response:
            jobs = json.loads(response.read())["jobs"]
        ours = [j for j in jobs if j["name"] == "dphhh" and j["state"] == "FINISHED"]
        assert ours, jobs
        with urllib.request.urlopen(f"http://127.0.0.1:8081/jobs/{ours[-1]['jid']}", timeout=5) as response:
            vertices = json.loads(response.read())["vertices"]
        assert max(v["parallelism"] for v in vertices) == 2

        # the same job through Flink's own CLI: `flink run -pym stream.flink_entry`
        import pyflink

        flink = Path(pyflink.__file__).resolve().parent / "bin" / "flink"
        (tmp_path / "cli").mkdir()
        again = _config(tmp_path / "cli", "cluster-cli", seed=6)
        again.write_text(again.read_text().replace("[window]\n", f"[window]\nout_of_orderness_ms = {4 * WINDOW}\n")
                         .replace("[flink]\n", "[flink]\nparallelism = 2\n"))
        cfg_cli, producer = _publish(again, messages)
        producer.close()
        submitted = subprocess.run(
            ["bash", str(flink), "run", "-m", "127.0.0.1:8081", "-pyexec", sys.executable, "-pyclientexec",
             sys.executable, "-pym", "stream.flink_entry", "--config", str(again), "--run-dir", str(tmp_path / "cli-run")],
            capture_output=True, text=True, timeout=240, cwd=tmp_path,
            env={**os.environ, "FLINK_CONF_DIR": str(root / "var" / "flink-cluster" / "conf")})
        assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
        assert [json.loads(r)["window"]["start_ms"] for r in _reports(cfg_cli)] == starts
    finally:
        subprocess.run(["bash", str(script), "stop"], capture_output=True, timeout=120)
