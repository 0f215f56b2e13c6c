"""Negative controls of the differential harness (``tests/e2e/observables.py``): each difference a
data-dependent job could show is planted and must be seen; each masked difference must be a time,
an id or a port, never a count."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.observables import (
    file_listing,
    log_differences,
    log_records,
    masked_log_lines,
    metric_series,
    phases,
    read_logs,
)

RUN = {"topic-x-1234": "<in>"}
LOG = """2026-12-04 00:10:00,001 INFO  org.apache.flink.runtime.taskmanager.Task [] - sketch (1/1)#0 switched from INITIALIZING to RUNNING.
2026-12-04 00:10:01,002 INFO  dphhh.release [] - released window 1 of topic-x-1234 in 12 ms
2026-12-04 00:10:02,003 WARN  dphhh.decode [] - a record was dead-lettered
2026-12-04 00:10:03,004 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Triggering checkpoint 7 (type=SavepointType{name='Suspend Savepoint'}) @ 1796341404619 for job 0373eadefa7fa107110fcf74cfe80e39.
2026-12-04 00:10:04,005 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Disconnect TaskExecutor 0b12347e-1c2d-4e5f-8a9b-0c1d2e3f4a5b because: shutting down
"""


def _lines(text: str) -> list[str]:
    return masked_log_lines(text, RUN)


def test_identical_logs_with_other_times_ids_and_ports_are_equal() -> None:
    other = (
        LOG.replace("00:10:0", "07:31:5")
        .replace("12 ms", "97 ms")
        .replace("0373eadefa7fa107110fcf74cfe80e39", "98dfbb85490d8204c0cb1092874b2908")
        .replace("1796341404619", "1796341999999")
        .replace("topic-x-1234", "topic-y-9876")
    )
    run_y = {"topic-y-9876": "<in>"}
    assert log_differences(_lines(LOG), masked_log_lines(other, run_y)) == ({}, {})


@pytest.mark.parametrize(
    "planted",
    [
        "released window 1 of topic-x-1234 in 12 ms (12347 elements)",  # a count in an INFO line
        "released window 1 of topic-x-1234 in 12 ms count_12347",  # glued to letters
        "released window 1 of topic-x-1234 in 12 ms n=12347ms",  # glued to a unit
    ],
)
def test_a_planted_count_in_an_info_line_is_a_difference(planted: str) -> None:
    y = LOG.replace("released window 1 of topic-x-1234 in 12 ms", planted)
    only_x, only_y = log_differences(_lines(LOG), _lines(y))
    assert only_x and only_y


def test_a_warning_repeated_once_more_is_a_difference() -> None:
    line = "2026-12-04 00:10:02,003 WARN  dphhh.decode [] - a record was dead-lettered\n"
    y = LOG.replace(line, line + line)
    only_x, only_y = log_differences(_lines(LOG), _lines(y))
    assert not only_x and sum(only_y.values()) == 1


def test_a_shutdown_warning_is_compared_but_shutdown_info_is_lifecycle() -> None:
    info = LOG.replace("because: shutting down", "because: shutting down (late)")
    assert log_differences(_lines(LOG), _lines(info)) == ({}, {})
    warn = LOG + "2026-12-04 00:10:05,006 WARN  dphhh.publish [] - 3 reports left unsent\n"
    assert log_differences(_lines(LOG), _lines(warn))[1]
    start, steady, stop = phases(log_records(_lines(LOG)))
    assert len(start) == 1 and len(steady) == 2 and len(stop) == 2


def test_a_stack_trace_belongs_to_its_record() -> None:
    trace = LOG.replace("a record was dead-lettered\n", "a record was dead-lettered\n\tat a.b(C.java:12)\n")
    only_x, only_y = log_differences(_lines(LOG), _lines(trace))
    assert sum(only_x.values()) == sum(only_y.values()) == 1


def test_series_that_differ_in_one_label_stay_apart() -> None:
    text = 'm{job_id="a1",reason="bad_json"} 1.0\nm{job_id="a1",reason="bad_time"} 2.0\n'
    series = metric_series(text)
    assert series == {"m{job_id=<run>,reason=bad_json}": 1.0, "m{job_id=<run>,reason=bad_time}": 2.0}
    with pytest.raises(AssertionError):  # a mask that merged two series would hide one
        metric_series('m{job_id="a1"} 1.0\nm{job_id="b2"} 2.0\n')


def test_a_gauge_that_moved_mid_run_is_a_difference() -> None:
    x = [metric_series('g{task="t"} 0.0\n'), metric_series('g{task="t"} 0.0\n')]
    y = [metric_series('g{task="t"} 0.0\n'), metric_series('g{task="t"} 5.0\n')]
    assert [sx == sy for sx, sy in zip(x, y)] == [True, False]


def test_an_empty_log_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        read_logs(tmp_path, "*.log")
    (tmp_path / "a.log").write_text("\n")
    with pytest.raises(AssertionError):
        read_logs(tmp_path, "*.log")
    (tmp_path / "a.log").write_text("x\n")
    assert read_logs(tmp_path, "*.log") == "x\n"


def test_runtime_lifecycle_info_is_not_compared_but_a_connector_info_line_is() -> None:
    lifecycle = LOG.replace(
        "2026-12-04 00:10:02,003 WARN",
        "2026-12-04 00:10:01,500 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Decline\n"
        "2026-12-04 00:10:02,003 WARN",
    )
    assert log_differences(_lines(LOG), _lines(lifecycle)) == ({}, {})
    connector = LOG.replace(
        "2026-12-04 00:10:02,003 WARN",
        "2026-12-04 00:10:01,500 INFO  org.apache.flink.connector.kafka.source.KafkaSource [] - offset=12347\n"
        "2026-12-04 00:10:02,003 WARN",
    )
    assert log_differences(_lines(LOG), _lines(connector))[1]


def _run_folder(root: Path, run_id: str) -> Path:
    """A run's folder as the job leaves it: a ledger, a run folder with its own id, a checkpoint."""
    (root / "ledger").mkdir(parents=True, mode=0o700)
    (root / "ledger" / "key-secret").write_bytes(b"k" * 32)
    (root / "ledger" / "window-2000.json").write_text('{"noisy": 12}')
    (root / "ledger" / "window-2000.json").chmod(0o600)
    (root / "run" / run_id / "chk-7").mkdir(parents=True)
    (root / "run" / run_id / "chk-7" / "_metadata").write_bytes(b"state" * 9)
    return root


def test_the_file_listing_sees_one_more_file_another_mode_or_a_public_size(tmp_path: Path) -> None:
    """Runs that differ only in ids, checkpoint numbers, noisy contents and checkpoint contents list
    alike; one more file, another mode, or another size of a public-size file is a difference."""
    run_a = _run_folder(tmp_path / "a", "0123456789abcdef0123456789abcdef")
    run_b = _run_folder(tmp_path / "b", "fedcba9876543210fedcba9876543210")
    (run_b / "ledger" / "window-2000.json").write_text('{"noisy": 12345}')  # noisy values: not a size
    (run_b / "run" / "fedcba9876543210fedcba9876543210" / "chk-7").rename(
        run_b / "run" / "fedcba9876543210fedcba9876543210" / "chk-9"
    )
    (run_b / "run" / "fedcba9876543210fedcba9876543210" / "chk-9" / "shared-state").write_bytes(b"x")
    sized = [r"key-secret$"]

    def listing(root: Path) -> object:
        return file_listing(root, {}, sized)

    assert listing(run_a) == listing(run_b)
    (run_b / "ledger" / "window-4000.json").write_text("{}")  # one more file
    assert listing(run_a) != listing(run_b)
    (run_b / "ledger" / "window-4000.json").unlink()
    (run_b / "ledger" / "window-2000.json").chmod(0o644)  # another mode
    assert listing(run_a) != listing(run_b)
    (run_b / "ledger" / "window-2000.json").chmod(0o600)
    assert listing(run_a) == listing(run_b)
    (run_b / "ledger" / "key-secret").write_bytes(b"k" * 33)  # a public size
    assert listing(run_a) != listing(run_b)
