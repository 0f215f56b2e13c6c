"""deploy/kafka-transactions.sh checks its arguments before it needs a broker or a JVM (its real use,
find-hanging on the running broker, is exercised by tests/e2e/test_faults.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "kafka-transactions.sh"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "DPHHH_KAFKA_PORT": "1"},
    )


@pytest.mark.parametrize("args", [(), ("bogus",), ("find-hanging", "extra"), ("describe",), ("abort", "t", "0")])
def test_a_wrong_command_line_prints_the_usage_and_exits_2(args) -> None:
    """An unknown command or a wrong number of arguments prints the usage line and exits with 2."""
    result = _run(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: kafka-transactions.sh find-hanging")


@pytest.mark.parametrize(
    "args, name",
    [
        (("abort", "t", "x", "5"), "PARTITION"),
        (("abort", "t", "0", "-1"), "START_OFFSET"),
        (("describe-producers", "t", "1.5"), "PARTITION"),
    ],
)
def test_a_malformed_number_is_named_in_the_error(args, name: str) -> None:
    """A partition or offset that is not a whole number is refused with the argument named (exit 1)."""
    result = _run(*args)
    assert result.returncode == 1
    assert f"{name} must be a non-negative integer" in result.stderr


def test_a_valid_command_without_a_broker_says_how_to_start_one() -> None:
    """A valid command with no broker on the port fails with a message naming kafka-start.sh."""
    result = _run("find-hanging")
    assert result.returncode == 1
    assert "no broker listening on 127.0.0.1:1" in result.stderr and "kafka-start.sh" in result.stderr
