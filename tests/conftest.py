"""Common test set-up: the ``e2e`` marker on every test that needs real outside programs.

``./dphhh test -m "not e2e"`` runs the plain-logic tests only: no JVM, no Kafka broker, no Flink
job, no browser, no Debian flow tools. The end-to-end tests are those in ``tests/e2e/`` and the
few modules elsewhere that start one of those programs (listed in :data:`E2E_MODULES`).

No test may be skipped: a skip hides a missing input (a program, a file, a port) behind a pass, so
any skipped test fails the run (:func:`pytest_sessionfinish`); an expected failure must be an
``xfail`` with its reason.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# The JVMs the tests start (the job's PyFlink gateway with its MiniCluster, a standalone cluster's
# JobManager and TaskManagers: PyFlink and Flink's scripts read JVM_ARGS) compile with C1 only: a
# test's job lives seconds, and the C2 compiler's work was ~30 % of a short job's CPU (measured: a
# two-window replay 25 -> 18 CPU-s). What runs is the same code; only its warm-up costs less. The
# broker (started by ./dphhh test, not here) and the benchmarks keep the JVM's defaults.
# ./dphhh test also makes a class-data archive of the job's JVM once per JDK and class path, kept in
# $DPHHH_HOME/cds (DPHHH_TEST_JVM_ARCHIVE): the tests' job JVMs map Flink's classes from it instead
# of loading them (measured on the demo, whole process tree: 18.8 and 19.8 -> 14.9 and 14.4 CPU-s).
# Every job of a checkout has the same class path (stream.job.gateway_lib_dir), which the JVM checks;
# a JVM whose class path differs (a standalone cluster's) runs as without it; -Xlog keeps that silent.
_ARCHIVE = os.environ.get("DPHHH_TEST_JVM_ARCHIVE", "")
_CDS = f" -XX:SharedArchiveFile={_ARCHIVE} -Xlog:cds=off -Xlog:cds+dynamic=off" if os.path.isfile(_ARCHIVE) else ""
os.environ.setdefault("JVM_ARGS", "-XX:TieredStopAtLevel=1" + _CDS)
# A test run: the job configuration's [testing] hooks are allowed (stream.config.TESTING_ENV), here and
# in every job a test starts (they inherit this environment).
os.environ["DPHHH_TESTING"] = "1"

HERE = Path(__file__).resolve().parent
E2E_DIRS = (HERE / "e2e",)
E2E_MODULES = {
    HERE / "connectors" / "test_flow_pipeline.py",  # softflowd, nfacctd and the broker
    HERE / "stream" / "test_metric_filter.py",  # Flink's own reporter filter, in a JVM
    HERE / "stream" / "test_flow_record_parser.py",  # the Java flow parser, compiled and run in a JVM
    HERE / "deploy" / "test_log_filter.py",  # the job's log4j2 configuration, in a JVM
}


def _interrupt_on_term(signum, frame):  # noqa: ARG001 (a signal handler's signature)
    raise KeyboardInterrupt


def pytest_configure(config: pytest.Config) -> None:
    # ./dphhh test stops a background pytest (the plain tests, the own_broker lane) with TERM on
    # Ctrl-C: handled as Ctrl-C, so fixtures and finally blocks still stop what a test started (a
    # broker of its own, a job); xdist's workers are stopped by their controller
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        signal.signal(signal.SIGTERM, _interrupt_on_term)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path)).resolve()
        in_e2e_dir = any(d in path.parents for d in E2E_DIRS)
        if path in E2E_MODULES or in_e2e_dir:
            item.add_marker(pytest.mark.e2e)
        # ./dphhh test collects only tests/e2e for its serial and quiet parts: a serial or quiet test
        # elsewhere would never run there
        if not in_e2e_dir and (item.get_closest_marker("serial") or item.get_closest_marker("quiet")):
            raise pytest.UsageError(f"{item.nodeid}: serial and quiet tests belong in tests/e2e (./dphhh test)")


_SKIPPED: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.append(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _SKIPPED:
        terminalreporter.write_line(f"FAILED: {len(_SKIPPED)} test(s) skipped (no test may be skipped):", red=True)
        for nodeid in _SKIPPED:
            terminalreporter.write_line(f"  {nodeid}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SKIPPED and session.exitstatus == 0:
        session.exitstatus = 1
