"""Fault injection on the real broker and job: a Python worker, the whole job or the broker is killed
(SIGKILL) at a chosen moment, several kills in one job's life, and the job recovers each time: per
moment a worker then the job (these tests run beside others); and the broker at each moment in turn
(``serial``: its kills are timed against the job's commits, which a loaded machine would move). The
tests that kill a broker kill one of their own (:func:`tests.e2e.jobs.own_broker`, not the shared one on 9092), so
the others' jobs are not touched.

The jobs are live: a sender appends a message to the input every 250 ms (the broker stamps its
arrival time), windows are 2 s, and reports follow the public schedule from a configured origin.
Moments: ``mid_window`` (a checkpoint holds a half-filled window), ``after_release`` (a window's
report was just written, before the next checkpoint commits it), ``in_checkpoint`` (a checkpoint is
in progress: the test hook ``testing.checkpoint_delay_ms`` makes its synchronous phase last 4 s).
After recovery the tests check what the issue promises: every element counted exactly once in the
non-private sketch state at each window's release (equal to an offline replay of the input log, by
arrival time), exactly one committed report per window of the schedule, republished reports
byte-identical (the ledger's), and the ledger's budget total unchanged (one entry of ε per window).
A killed job is restarted with the same ``dphhh run`` command, which resumes from the deployment's
newest retained checkpoint; the windows that passed while it was down are released when it catches up.

The broker is killed away from the transaction commits (the dead-letter sink's, a few milliseconds
after each checkpoint completes; each report's, at its publication time): a broker killed inside one and restarted before its old registration expires
can skip that transaction's commit marker, a Kafka behaviour no client can repair (docs/howto/troubleshoot.md,
"Known limits"). The broker scenarios also check that no transaction is left open on the job's topics.

Also: the broker is down when the job starts (it waits with backoff, then runs), and a full disk
under the reports file stops the job cleanly (exit 1, a clear message, no torn line).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.kafka_io import PackedProducer, pack_ipv4
from dphhh.stream.broker import LocalBroker
from dphhh.stream.config import load_config
from dphhh.stream.ledger import ReleaseLedger
from tests.e2e.jobs import (
    BOOTSTRAP,
    JOB,
    dump_attempts,
    every_record,
    group_alive,
    input_log,
    interrupt,
    live_origin,
    logged_offsets,
    logged_state_sizes,
    own_broker,
    publish,
    reports,
    wait_for,
    write_config,
)
from tests.e2e.literal_reference import packed_ipv4_truth

SIZE = 2000  # live windows of 2 s


def _live_config(tmp_path: Path, name: str, origin: int, bootstrap: str = BOOTSTRAP, **testing) -> Path:
    return write_config(
        tmp_path,
        name,
        kafka={"bootstrap": bootstrap},
        window={"size_ms": SIZE, "origin": origin},
        privacy={"epsilon": 2.0, "delta": 1e-6, "tau": 2000.0, "counters": 256, "partitions": 2},
        flink={"checkpoint_interval_ms": testing.pop("checkpoint_interval_ms", 1500)},
        testing={"noise_per_attempt": True, **testing},
    )


class Sender(threading.Thread):
    """Appends a message of 200 addresses to the job's input every 250 ms until stopped; a send that
    fails while the broker is away is dropped (the offline replay reads what the log holds)."""

    def __init__(self, cfg) -> None:
        super().__init__(daemon=True)
        self.cfg = cfg
        self.stop_event = threading.Event()
        self.rng = np.random.default_rng(17)

    def run(self) -> None:
        producer = None
        while not self.stop_event.wait(0.25):
            try:
                if producer is None:
                    producer = PackedProducer(self.cfg.kafka_client_options(), self.cfg["kafka.input_topic"])
                producer.send_value(pack_ipv4(self.rng.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32)))
                producer.flush()
            except Exception:  # the broker is away: try again (with a new client) at the next step
                producer = None
        if producer is not None:
            producer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)


ROOT = Path(__file__).resolve().parents[2]


def _start(config: Path, tmp_path: Path, tag: str) -> subprocess.Popen:
    log = open(tmp_path / f"job-{tag}.err", "w")
    return subprocess.Popen(
        [*JOB, str(config)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log, text=True, start_new_session=True
    )


def _stderr(tmp_path: Path, tag: str) -> str:
    return (tmp_path / f"job-{tag}.err").read_text(errors="replace")


def _stop(job: subprocess.Popen, tmp_path: Path, tag: str) -> None:
    """Ctrl-C as a terminal sends it; the job must stop cleanly and leave no process."""
    interrupt(job)
    err = _stderr(tmp_path, tag)
    assert job.returncode == 130 and "Traceback" not in err, err[-3000:]
    wait_for(lambda: not group_alive(job.pid), 30, "the job's processes to end")


def _kill_group(job: subprocess.Popen) -> None:
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    wait_for(lambda: not group_alive(job.pid), 30, "the killed job's processes to end")


def _group_pids(pgid: int) -> list[tuple[int, str]]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append((int(stat.parent.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _python_workers(pgid: int) -> list[int]:
    """The job's Python worker processes (PyFlink's process mode: beam SDK workers)."""
    return [pid for pid, cmd in _group_pids(pgid) if "pyflink.fn_execution" in cmd or "beam_boot" in cmd]


def _completed_checkpoints(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "checkpoints").glob("*/*/chk-*/_metadata"))


def _latest_checkpoint_id(tmp_path: Path) -> int:
    """The newest completed checkpoint's number (only the newest is retained), or 0."""
    return max((int(p.parent.name[4:]) for p in _completed_checkpoints(tmp_path)), default=0)


def _in_progress(tmp_path: Path) -> set[Path]:
    """Checkpoint folders without ``_metadata`` (in progress, or left by a killed attempt)."""
    return {d for d in (tmp_path / "checkpoints").glob("*/*/chk-*") if not (d / "_metadata").exists()}


def _newest_completion_age_s(tmp_path: Path) -> float:
    """Seconds since the newest checkpoint completed (its ``_metadata`` was written); inf if none."""
    written = []
    for path in _completed_checkpoints(tmp_path):
        try:
            written.append(path.stat().st_mtime)
        except FileNotFoundError:  # an older checkpoint, removed once a newer one completed
            continue
    return time.time() - max(written) if written else float("inf")


COMMIT_MARGIN_S = 0.25  # a commit takes milliseconds once _metadata exists; 0.25 s is far above that
PUBLISH_MARGIN_S = 0.6  # a report's own transaction: begun at its publication time, committed within this


def _away_from_commits(tmp_path: Path, gap_s: float, schedule) -> None:
    """Wait until a kill cannot land in a transaction commit: the dead-letter sink's, at checkpoints (at
    least COMMIT_MARGIN_S after the newest checkpoint completed and as long before the next one, ``gap_s``
    = expected time between completions), nor a report's, at its publication time (at least
    PUBLISH_MARGIN_S after the newest publication time and COMMIT_MARGIN_S before the next).
    If that is too close, this waits (the kill then follows one more checkpoint or report)."""
    first = schedule.publish_time(schedule.origin_ms)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        since_publication = ((time.time() * 1000 - first) % SIZE) / 1000
        if (
            COMMIT_MARGIN_S <= _newest_completion_age_s(tmp_path) <= gap_s - COMMIT_MARGIN_S
            and PUBLISH_MARGIN_S <= since_publication <= SIZE / 1000 - COMMIT_MARGIN_S
        ):
            return
        time.sleep(0.02)
    raise AssertionError("no moment away from every commit in 60 s")


def _hanging_transactions(topics: list[str], broker: LocalBroker) -> list[str]:
    """Open transactions on ``topics`` that Kafka's coordinator no longer tracks (find-hanging)."""
    out = subprocess.run(
        ["bash", str(ROOT / "deploy" / "kafka-transactions.sh"), "find-hanging"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **broker.scripts_environment()},
    )
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines()[1:] if line.split() and line.split()[0] in topics]


def _report_lines(tmp_path: Path) -> int:
    path = tmp_path / "reports.jsonl"
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _check_exactly_once(tmp_path: Path, cfg, origin: int) -> int:
    """Every window of the schedule up to the newest report once, in order, = the ledger; every
    report any reader could have seen — committed, aborted or open, on the topic and in the reports
    file — is the ledger's, so each window's noise was exposed once (the budget spent is one ledger
    entry per window); every release attempt's sketch of those windows = the literal reference
    (:mod:`tests.e2e.literal_reference`) of the input log. Returns the number of windows that held data."""
    found = reports(cfg)
    starts = [json.loads(r)["window"]["start_ms"] for r in found]
    assert starts == [origin + w * SIZE for w in range(len(starts))], starts  # once each, in order, no gap
    ledger = ReleaseLedger(tmp_path / "ledger")
    assert found == [ledger.get(s) for s in starts]  # republished = the ledger's bytes
    # one ledger entry per window, nothing released twice; windows the stop (a cancel) caught between
    # their release and the commit of their report are in the ledger only: the next run republishes them
    later = ledger.windows()[len(starts) :]
    assert ledger.windows()[: len(starts)] == starts and later == [
        starts[-1] + (i + 1) * SIZE for i in range(len(later))
    ]
    # what was spent: every release a reader could see is the ledger's entry of its window (with
    # testing.noise_per_attempt each attempt draws other noise, so a recomputed report differs)
    exposed = [v for _, v in every_record(cfg.kafka_client_options(), cfg["kafka.reports_topic"])]
    exposed += (tmp_path / "reports.jsonl").read_bytes().splitlines()
    for value in exposed:
        assert value == ledger.get(json.loads(value)["window"]["start_ms"]), value[:200]
    assert {json.loads(v)["window"]["start_ms"] for v in exposed} <= set(ledger.windows())
    truth = {k: sk for k, sk in packed_ipv4_truth(cfg.values, origin, input_log(cfg)).items() if k[0] <= starts[-1]}
    attempts = {k: sks for k, sks in dump_attempts(tmp_path).items() if k[0] <= starts[-1]}
    assert {k for k, sks in attempts.items() if sks[0].total} == set(truth)  # no sketch the input does not explain
    for key, sketches in attempts.items():  # every element counted exactly once, at every release attempt
        for attempt, sketch in enumerate(sketches):
            assert truth[key].matches(sketch) if key in truth else sketch.total == 0, (key, attempt)
    assert (tmp_path / "reports.jsonl").read_bytes().splitlines()[: len(found)] == found
    assert not logged_offsets(tmp_path / "run" / "log")  # restored Kafka positions are message counts
    assert not logged_state_sizes(tmp_path / "run" / "log")  # nor checkpointed or restored state sizes
    return len({w for w, _ in truth})


def _last_data_window(cfg) -> int:
    """The window (by arrival) of the newest message in the input log."""
    return max(ts for ts, _ in input_log(cfg)) // SIZE * SIZE


#: the ports of the brokers of the tests that kill theirs (each + 1: its controller)
KILL_BROKER_PORT, DOWN_BROKER_PORT = 29092, 29192


def _kill_broker(broker: LocalBroker) -> None:
    assert broker.var_dir is not None  # a broker of the test's own
    pid = int((broker.var_dir / "kafka.pid").read_text().strip())
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
        30,
        "the broker to die",
    )


MOMENTS = ("mid_window", "after_release", "in_checkpoint")


def _job_logs(tmp_path: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (tmp_path / "run" / "log").glob("*.log"))


def _reach(moment: str, tmp_path: Path) -> None:
    """Wait for ``moment`` on the running job (after any number of earlier reports and checkpoints)."""
    lines = _report_lines(tmp_path)
    if moment == "mid_window":  # a checkpoint taken after a release holds a half-filled window
        wait_for(lambda: _report_lines(tmp_path) > lines, 120, "a window's report")
        seen = _latest_checkpoint_id(tmp_path)
        wait_for(lambda: _latest_checkpoint_id(tmp_path) > seen, 60, "a checkpoint after the release")
    elif moment == "after_release":  # a report just written, before the next checkpoint
        wait_for(lambda: _latest_checkpoint_id(tmp_path) >= 1, 120, "a first checkpoint")
        lines = _report_lines(tmp_path)
        wait_for(lambda: _report_lines(tmp_path) > lines, 120, "a window's report", every_s=0.01)
    else:  # a later checkpoint in progress, an earlier one complete
        wait_for(lambda: _report_lines(tmp_path) > lines, 120, "a window's report")
        seen = _latest_checkpoint_id(tmp_path)
        wait_for(lambda: _latest_checkpoint_id(tmp_path) > seen, 60, "a completed checkpoint")
        stale = _in_progress(tmp_path)  # a killed attempt's unfinished checkpoint is not this one
        wait_for(lambda: bool(_in_progress(tmp_path) - stale), 60, "a checkpoint in progress", every_s=0.02)


def _kill_and_recover(
    tmp_path: Path,
    name: str,
    kills: list[tuple[str, str]],
    interval: int,
    delay: int,
    broker: LocalBroker | None = None,
) -> None:
    """One live job; each (victim, moment) of ``kills`` in turn: wait for the moment, SIGKILL the
    victim (a Python worker; the whole job, then started again; or the broker, away 3 s), wait for a
    report after the recovery. Then every element is counted once, every window has one committed
    report equal to the ledger's, the ledger's budget total is unchanged; a worker's kill was a
    restore in place, a job's a resume from its newest checkpoint, a broker's left no open transaction."""
    origin = live_origin(SIZE, 3)
    bootstrap = broker.bootstrap if broker is not None else BOOTSTRAP
    config = _live_config(tmp_path, name, origin, bootstrap, checkpoint_interval_ms=interval, checkpoint_delay_ms=delay)
    cfg, producer = publish(config, [])
    producer.close()
    sender = Sender(cfg)
    job, tag, runs = _start(config, tmp_path, "1"), "1", 1
    sender.start()
    resumed: list[tuple[str, int]] = []
    try:
        wait_for(lambda: time.time() * 1000 > origin + SIZE, 60, "the first window's end")
        for victim, moment in kills:
            _reach(moment, tmp_path)
            if victim == "worker":
                workers = _python_workers(job.pid)
                assert workers, _group_pids(job.pid)
                for pid in workers:
                    os.kill(pid, signal.SIGKILL)
            elif victim == "job":
                _kill_group(job)
                assert not (tmp_path / "run" / "fatal.txt").exists()
                runs += 1
                resumed.append((str(runs), _latest_checkpoint_id(tmp_path)))  # what the next run resumes from
                job, tag = _start(config, tmp_path, str(runs)), str(runs)
            else:  # between completions: 1.5 s / 3 s apart, or 4 s during a slow checkpoint
                assert broker is not None  # the test's own
                _away_from_commits(tmp_path, 4.0 if delay else interval / 1000, cfg.schedule(origin))
                _kill_broker(broker)
                time.sleep(3)  # the broker stays away this long (a fault being injected, not a wait for a condition)
                broker.start()
            lines = _report_lines(tmp_path)
            wait_for(lambda n=lines: _report_lines(tmp_path) > n, 180, f"a report after the {victim}'s recovery")
            if victim == "worker":  # restored in place from a checkpoint: the log saw a restore (and no offset)
                assert "Restoring job" in _job_logs(tmp_path)
        recovered = time.time() * 1000
        wait_for(
            lambda: max(ts for ts, _ in input_log(cfg)) > recovered + 2 * SIZE,
            120,
            "two more windows of input after the last recovery",
            every_s=1.0,
        )  # the sender is on
        sender.stop()
        last = _last_data_window(cfg)
        try:
            wait_for(
                lambda: any(json.loads(r)["window"]["start_ms"] >= last for r in reports(cfg)),
                240,
                "the report of the last window with data",
            )
        except AssertionError as exc:  # say whether an open transaction holds the readers back
            hanging = (
                _hanging_transactions([cfg["kafka.reports_topic"], cfg["kafka.dead_letter_topic"]], broker)
                if broker is not None
                else []
            )
            raise AssertionError(f"{exc}; hanging transactions: {hanging or 'none'}") from None
    finally:
        sender.stop()
        if job.poll() is None:
            _stop(job, tmp_path, tag)
    # each restarted run resumed from the newest checkpoint at its kill: said on stderr without its
    # number (public), named in the run folder's private file
    noted_file = tmp_path / "run" / "resumed-from.txt"
    noted = noted_file.read_text().splitlines() if resumed else []
    assert len(noted) == len(resumed) and noted_file.exists() == bool(resumed), noted
    for (run, resumable), line in zip(resumed, noted):
        err = _stderr(tmp_path, run)
        assert "resuming from the newest checkpoint" in err and "chk-" not in err, err[-2000:]
        assert resumable >= 1 and line.endswith(f"/chk-{resumable}"), (line, resumable)
    if resumed:
        assert oct(noted_file.stat().st_mode & 0o777) == "0o600"
    if broker is not None:  # every transaction was ended: readers are not stuck
        topics = [cfg["kafka.input_topic"], cfg["kafka.reports_topic"], cfg["kafka.dead_letter_topic"]]
        assert not _hanging_transactions(topics, broker)
    assert _check_exactly_once(tmp_path, cfg, origin) >= 4  # data in at least four windows


CHECKPOINTS = {"mid_window": (1500, 0), "after_release": (3000, 0), "in_checkpoint": (1000, 4000)}  # interval, delay


@pytest.mark.parametrize("moment", MOMENTS)
def test_kill_a_worker_then_the_job_and_recover_exactly_once(broker, tmp_path: Path, moment: str) -> None:
    """At the moment, SIGKILL a Python worker; once the job has recovered, at the same moment SIGKILL
    the whole job and start it again: every element once, every report once (see _kill_and_recover)."""
    interval, delay = CHECKPOINTS[moment]
    _kill_and_recover(
        tmp_path, f"kill-{moment}".replace("_", "-"), [("worker", moment), ("job", moment)], interval, delay
    )


# its kills are timed against the job's commits (_away_from_commits), which a loaded machine would move;
# ./dphhh test runs it beside the other serial tests only, which run one at a time (own_broker: it
# kills a broker of its own, not theirs)
@pytest.mark.serial
@pytest.mark.own_broker
def test_kill_the_broker_at_each_moment_and_recover_exactly_once(tmp_path: Path) -> None:
    """SIGKILL the broker mid-window, then just after a release, then during a checkpoint (4 s slow
    checkpoints make that moment last), each once the job has recovered from the previous kill:
    every element once, every report once, no transaction left open (see _kill_and_recover)."""
    with own_broker(KILL_BROKER_PORT, tmp_path / "kafka") as broker:
        _kill_and_recover(tmp_path, "kill-broker", [("broker", m) for m in MOMENTS], 1000, 4000, broker)


def test_broker_down_at_start_the_job_waits_and_then_runs(tmp_path: Path) -> None:
    """With the broker away at start, dphhh run retries with backoff and logs it (no crash), and once
    the broker is back it creates its topics and reports every window exactly once (a broker of the
    test's own: it runs beside other tests)."""
    with own_broker(DOWN_BROKER_PORT, tmp_path / "kafka") as broker:
        _broker_down_at_start(tmp_path, broker)


def _broker_down_at_start(tmp_path: Path, broker: LocalBroker) -> None:
    origin = live_origin(SIZE, 3)
    config = _live_config(tmp_path, "broker-down", origin, broker.bootstrap)
    config.write_text(config.read_text().replace("[kafka]\n", "[kafka]\nstart_local_broker = false\n"))
    cfg = load_config(config, environ={})
    _kill_broker(broker)
    job = _start(config, tmp_path, "1")
    sender = Sender(cfg)
    try:
        wait_for(lambda: "not reachable (attempt 3)" in _stderr(tmp_path, "1"), 60, "three failed attempts")
        assert job.poll() is None
        broker.start()
        wait_for(lambda: "job submitted" in _stderr(tmp_path, "1"), 120, "the job to start")
        sender.start()
        feeding = time.time() * 1000
        wait_for(lambda: time.time() * 1000 > max(origin, feeding) + 2 * SIZE, 60, "two windows of input")
        sender.stop()
        last = _last_data_window(cfg)
        wait_for(
            lambda: any(json.loads(r)["window"]["start_ms"] >= last for r in reports(cfg)),
            180,
            "the report of the last window with data",
        )
    finally:
        sender.stop()
        broker.start()
        if job.poll() is None:
            _stop(job, tmp_path, "1")
    err = _stderr(tmp_path, "1")
    assert "retrying in 1 s" in err and "retrying in 2 s" in err and "reachable after" in err
    assert _check_exactly_once(tmp_path, cfg, origin) >= 2


def test_a_full_disk_stops_the_job_cleanly(broker, tmp_path: Path) -> None:
    """When the reports file's disk fills up, dphhh run stops with a clear message (exit 1, no traceback, no
    process left), the file holds only complete report lines, and the ledger is intact."""
    from tests.e2e.test_stream_e2e import _base, _config, _messages

    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(small)], capture_output=True, text=True
    )
    assert mounted.returncode == 0, f"the test needs root to mount a tiny tmpfs: {mounted.stderr}"
    try:
        messages, _ = _messages(_base())
        config = _config(tmp_path, "disk-full", windows=6)
        config.write_text(
            config.read_text().replace(
                f'reports_file = "{tmp_path / "reports.jsonl"}"', f'reports_file = "{small / "reports.jsonl"}"'
            )
        )
        (small / "filler").write_bytes(b"\0" * 4 * 1024)  # leaves two 4 KiB pages: room for a few reports
        cfg, producer = publish(config, messages)
        producer.close()
        job = _start(config, tmp_path, "1")
        try:
            job.wait(timeout=240)
        except subprocess.TimeoutExpired as timeout:
            os.killpg(job.pid, signal.SIGKILL)
            raise AssertionError(_stderr(tmp_path, "1")[-3000:]) from timeout
        err = _stderr(tmp_path, "1")
        assert job.returncode == 1, err[-3000:]
        assert "No space left on device" in err and "Traceback" not in err, err[-3000:]
        wait_for(lambda: not group_alive(job.pid), 30, "the job's processes to end")
        lines = (small / "reports.jsonl").read_bytes().split(b"\n")
        assert lines[-1] == b""  # no torn last line
        written = [json.loads(line) for line in lines[:-1]]
        assert 1 <= len(written) < 6  # six windows are due: the disk filled up before the last
        ledger = ReleaseLedger(tmp_path / "ledger")
        for report in written:
            assert json.loads(ledger.get(report["window"]["start_ms"])) == report
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
