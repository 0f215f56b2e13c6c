"""Ctrl-C while ``dphhh run`` waits for its job (stream/runner.py): the interrupt is taken between
calls into the JVM, never inside one.

A Ctrl-C that lands inside a py4j call makes py4j log "KeyboardInterrupt while sending command." with
a traceback on the root logger, and may leave its connection half read: a fresh-clone run of
``tests/e2e/test_faults.py`` saw that traceback on the job's stderr after a clean stop. Here a fake
job's ``done()`` stands for the py4j call (it takes 0.3 s); a SIGINT sent to the process while it
runs must not interrupt it, yet the wait must end with KeyboardInterrupt and cancel the job.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from dphhh.stream import runner


class _Result:
    """A job that never ends; ``done()`` takes 0.3 s, like a call into the JVM."""

    def __init__(self) -> None:
        self.calls = 0
        self.interrupted_inside = False

    def done(self) -> bool:
        self.calls += 1
        try:
            time.sleep(0.3)
        except KeyboardInterrupt:
            self.interrupted_inside = True
            raise
        return False


class _Client:
    def __init__(self) -> None:
        self.result = _Result()

    def get_job_execution_result(self) -> _Result:
        return self.result


@pytest.fixture
def python_sigint():
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises, as in a terminal
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved)


def _interrupt_later(delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_stops_the_wait_between_jvm_calls_and_cancels_the_job(python_sigint, monkeypatch) -> None:
    cancelled: list[object] = []
    monkeypatch.setattr(runner, "cancel_job", lambda client, *a, **k: cancelled.append(client))
    client = _Client()
    timer = _interrupt_later(0.65)  # inside the second done(): calls at 0-0.3 s and 0.5-0.8 s
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.wait_for_job(client)
    finally:
        timer.cancel()
    assert not client.result.interrupted_inside
    assert cancelled == [client]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored after the wait


def test_the_flag_takes_the_signal_only_inside_the_block(python_sigint) -> None:
    with runner.interrupts_as_flag() as flag:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while not flag.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flag.is_set()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the restored handler raises here
