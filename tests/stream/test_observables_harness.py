"""Negative controls of the differential harness (``tests/e2e/observables.py``): each difference a
data-dependent job could show is planted and must be seen; each masked difference must be a time,
an id or a port, never a count."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.observables import (
    file_listing,
    log_differences,
    log_order_differences,
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


def test_shutdown_is_compared_at_warn_and_for_the_jobs_loggers_but_runtime_info_is_teardown() -> None:
    start, steady, stop = phases(log_records(_lines(LOG)))
    assert len(start) == 1 and len(steady) == 2 and len(stop) == 2
    warn = LOG + "2026-12-04 00:10:05,006 WARN  dphhh.publish [] - 3 reports left unsent\n"
    assert log_differences(_lines(LOG), _lines(warn))[1]
    job = LOG + "2026-12-04 00:10:05,006 INFO  dphhh.publish [] - closing\n"
    assert log_differences(_lines(LOG), _lines(job))[1]
    teardown = (
        LOG
        + "2026-12-04 00:10:05,006 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Close ResourceManager connection 0373eadefa7fa107110fcf74cfe80e39\n"
    )
    assert log_differences(_lines(LOG), _lines(teardown)) == ({}, {})
    early = LOG.replace(
        "2026-12-04 00:10:02,003 WARN",
        teardown.splitlines()[-1].replace("00:10:05,006", "00:10:01,500") + "\n2026-12-04 00:10:02,003 WARN",
    )
    assert log_differences(_lines(LOG), _lines(early))[1]  # the same runtime line before the shutdown is compared


def test_the_steady_phase_ends_at_flink_2_2s_stop_with_savepoint() -> None:
    log = LOG.replace(
        "Triggering checkpoint 7 (type=SavepointType{name='Suspend Savepoint'}) @ 1796341404619 for job 0373eadefa7fa107110fcf74cfe80e39.",
        "Triggering stop-with-savepoint for job 0373eadefa7fa107110fcf74cfe80e39.",
    )
    start, steady, stop = phases(log_records(_lines(log)))
    assert len(steady) == 2 and stop[0].endswith("Triggering stop-with-savepoint for job <id>.")


#: two tasks' lifecycles, interleaved by their threads, and two records of the job's own code
TASKS = """2026-12-04 00:10:00,001 INFO  org.apache.flink.runtime.taskmanager.Task [] - sketch (1/1)#0 (0373eadefa7fa107110fcf74cfe80e39_0_0) switched from DEPLOYING to INITIALIZING.
2026-12-04 00:10:00,002 INFO  org.apache.flink.runtime.taskmanager.Task [] - Source: kafka-source -> (Map -> sink, _key) (1/1)#0 (98dfbb85490d8204c0cb1092874b2908_0_0) switched from DEPLOYING to INITIALIZING.
2026-12-04 00:10:00,003 INFO  org.apache.flink.runtime.taskmanager.Task [] - sketch (1/1)#0 (0373eadefa7fa107110fcf74cfe80e39_0_0) switched from INITIALIZING to RUNNING.
2026-12-04 00:10:00,004 INFO  org.apache.flink.runtime.taskmanager.Task [] - Source: kafka-source -> (Map -> sink, _key) (1/1)#0 (98dfbb85490d8204c0cb1092874b2908_0_0) switched from INITIALIZING to RUNNING.
2026-12-04 00:10:01,000 INFO  dphhh.release [] - released window 1
2026-12-04 00:10:02,000 INFO  dphhh.release [] - released window 2
"""


def _swap(text: str, i: int, j: int) -> str:
    lines = text.splitlines(keepends=True)
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def test_shutdown_records_are_compared_as_a_multiset_only() -> None:
    one = "2026-12-04 00:10:06,000 INFO  dphhh.publish [] - one\n"
    two = "2026-12-04 00:10:07,000 INFO  dphhh.publish [] - two\n"
    a, b = LOG + one + two, LOG + two + one
    assert log_differences(_lines(a), _lines(a + one))[1]  # one more shutdown record: a difference
    assert log_differences(_lines(a), _lines(b)) == ({}, {}) and log_order_differences(_lines(a), _lines(b)) == {}


def test_two_records_of_one_logger_swapped_are_an_order_difference() -> None:
    assert log_order_differences(_lines(TASKS), _lines(TASKS)) == {}
    swapped = _swap(TASKS, 4, 5)  # the job's own records in another order: the same multiset
    assert log_differences(_lines(TASKS), _lines(swapped)) == ({}, {})
    assert list(log_order_differences(_lines(TASKS), _lines(swapped))) == [("dphhh.release", "")]


def test_two_tasks_interleaved_otherwise_are_equal_but_one_tasks_records_swapped_are_not() -> None:
    other_threads = _swap(TASKS, 1, 2)  # sketch's second record before the source's first: scheduling
    assert log_order_differences(_lines(TASKS), _lines(other_threads)) == {}
    one_task = _swap(_swap(TASKS, 0, 1), 0, 3)  # the source's records in another order
    keys = list(log_order_differences(_lines(TASKS), _lines(one_task)))
    assert keys == [("org.apache.flink.runtime.taskmanager.Task", "Source: kafka-source -> (Map -> sink, _key)")]


def test_a_planted_count_in_a_runtime_info_line_is_a_difference() -> None:
    line = "2026-12-04 00:10:00,500 INFO  org.apache.flink.runtime.taskmanager.Task [] - sketch (1/1)#0 (0373eadefa7fa107110fcf74cfe80e39_0_0) restored 12347 bytes\n"
    y = TASKS.replace("2026-12-04 00:10:01,000", line + "2026-12-04 00:10:01,000")
    assert log_differences(_lines(TASKS), _lines(y))[1]
    z = TASKS.replace("2026-12-04 00:10:01,000", line.replace("12347", "12348") + "2026-12-04 00:10:01,000")
    only_y, only_z = log_differences(_lines(y), _lines(z))
    assert sum(only_y.values()) == sum(only_z.values()) == 1


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


def test_runtime_info_is_compared_but_a_listed_timing_line_is_not() -> None:
    def plant(record: str) -> str:
        return LOG.replace(
            "2026-12-04 00:10:02,003 WARN", f"2026-12-04 00:10:01,500 {record}\n2026-12-04 00:10:02,003 WARN"
        )

    timing = plant(
        "INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Triggering checkpoint 8 for job 0373eadefa7fa107110fcf74cfe80e39"
    )
    assert log_differences(_lines(LOG), _lines(timing)) == ({}, {})
    runtime = plant("INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Decline")
    assert log_differences(_lines(LOG), _lines(runtime))[1]
    connector = plant("INFO  org.apache.flink.connector.kafka.source.KafkaSource [] - offset=12347")
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
