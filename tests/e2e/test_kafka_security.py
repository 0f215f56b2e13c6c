"""End-to-end over a real SASL_SSL listener: a second, secured local broker (deploy/kafka-start.sh
with DPHHH_KAFKA_SECURITY=sasl_ssl on ports 19092/19093, its own folder under the test's tmp) and
the real Flink job.

The job configuration names the client password only through ``env:DPHHH_TEST_JAAS``; the tests
check that every client gets the SASL/SSL settings (``dphhh produce`` and the reports reader on
kafka-python, the job's Kafka source and sinks on the Java client), that the password appears in
no output or log, and that wrong credentials or a PLAINTEXT client are refused with a clear message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dphhh.connectors.kafka_io import read_to_end, wait_for_broker
from dphhh.stream.broker import LocalBroker
from dphhh.stream.config import load_config
from tests.e2e.jobs import own_broker

# how a refusal is seen follows the load (beside the plain tests, when they took a third of the CPU, a
# wrong password once showed as a bare disconnect; beside two CPU hogs: 15 of 15 refusals named): so
# ./dphhh test runs it with the serial tests, one at a time, beside only the `own_broker` test
pytestmark = pytest.mark.serial

PORT = 19092
WINDOW = 1000
DPHHH = str(Path(sys.executable).with_name("dphhh"))
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="dphhh" password="{}";'


@pytest.fixture(scope="session")  # not "module": ./dphhh test's xdist group may interleave other modules' tests
def secure_broker(tmp_path_factory):
    """A SASL_SSL broker of its own (not the main one on 9092), stopped at the end of the session."""
    with own_broker(
        PORT, tmp_path_factory.mktemp("kafka-secure"), controller_port=PORT + 1, security="sasl_ssl"
    ) as broker:
        yield broker


def _config(tmp_path: Path, broker: LocalBroker) -> Path:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    lines = [
        "[kafka]",
        f'bootstrap = "{broker.bootstrap}"',
        'security_protocol = "SASL_SSL"',
        f'input_topic = "{topic}-in"',
        f'reports_topic = "{topic}-reports"',
        f'dead_letter_topic = "{topic}-dead"',
        f'group_id = "{topic}"',
        "[kafka.extra]",
        '"sasl.mechanism" = "PLAIN"',
        '"sasl.jaas.config" = "env:DPHHH_TEST_JAAS"',
        '"ssl.truststore.type" = "PEM"',
        f'"ssl.truststore.location" = "{broker.ca_file}"',
        '"ssl.endpoint.identification.algorithm" = ""',
        "[window]",
        f"size_ms = {WINDOW}",
        "[privacy]",
        "epsilon = 1.0",
        "delta = 1e-6",
        "tau = 500.0",
        "counters = 64",
        "[flink]",
        f'checkpoint_dir = "{tmp_path / "checkpoints"}"',
        "checkpoint_interval_ms = 1000",
        "[output]",
        f'ledger_dir = "{tmp_path / "ledger"}"',
        f'reports_file = "{tmp_path / "reports.jsonl"}"',
        f'run_dir = "{tmp_path / "run"}"',
        "metrics_port = 0",
    ]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _env(password: str) -> dict[str, str]:
    return {**os.environ, "DPHHH_TEST_JAAS": JAAS.format(password)}


def _logs(tmp_path: Path, *results: subprocess.CompletedProcess) -> str:
    text = "".join(r.stdout + r.stderr for r in results)
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".out", ".txt", ".json", ".jsonl", ""):
            text += path.read_text(errors="replace")
    return text


def test_job_and_clients_work_over_sasl_ssl_without_showing_the_password(
    secure_broker, tmp_path: Path, monkeypatch
) -> None:
    """dphhh produce, the Flink job and the reports reader all pass SASL_SSL with the password from the
    environment; the job publishes one report per window and the password shows up nowhere."""
    password = secure_broker.client_password_file.read_text().strip()
    config = _config(tmp_path, secure_broker)
    env = _env(password)
    produce = subprocess.run(
        [
            DPHHH,
            "produce",
            "--synthetic",
            "6000",
            "--rate",
            "2500",
            "--batch",
            "250",
            "--config",
            str(config),
            "--topic",
            load_config(config, environ={})["kafka.input_topic"],
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert produce.returncode == 0, produce.stderr[-3000:]
    monkeypatch.setenv("DPHHH_TEST_JAAS", env["DPHHH_TEST_JAAS"])  # the env: reference, in this process
    cfg = load_config(config, environ={})
    stamps = [ts for ts, _ in read_to_end(cfg.kafka_client_options(), cfg["kafka.input_topic"])]
    assert len(stamps) == 6000 // 250
    first, last = min(stamps) // WINDOW * WINDOW, max(stamps) // WINDOW * WINDOW
    expected = list(range(first, last + WINDOW, WINDOW))
    assert len(expected) >= 2  # the stream spans several windows (2.4 s of input at 2500 addresses/s)
    # a replay of exactly those windows (arrival times set by the broker: `dphhh produce` made the topic)
    config.write_text(
        config.read_text().replace(
            f"[window]\nsize_ms = {WINDOW}\n",
            f'[window]\nmode = "replay"\nsize_ms = {WINDOW}\norigin = {first}\nuntil = {last + WINDOW}\n',
        )
    )
    run = subprocess.run(
        [DPHHH, "run", "--feed", "no", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-4000:]

    reports = subprocess.run(
        [DPHHH, "reports", "--json", "--config", str(config), "--topic", cfg["kafka.reports_topic"]],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert reports.returncode == 0, reports.stderr[-3000:]
    starts = [json.loads(line)["window"]["start_ms"] for line in reports.stdout.splitlines() if line.strip()]
    assert starts == expected

    assert password not in _logs(tmp_path, produce, run, reports)


def test_wrong_password_is_refused_with_a_clear_message(secure_broker, tmp_path: Path) -> None:
    """A kafka-python client with a wrong password stops with a message naming the refusal, and
    neither a traceback nor the password it tried."""
    config = _config(tmp_path, secure_broker)
    wrong = f"wrong-{uuid.uuid4().hex}"
    result = subprocess.run(
        [DPHHH, "produce", "--synthetic", "10", "--config", str(config), "--topic", "sec-denied"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(wrong),
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "refused the connection" in result.stderr and "Authentication failed" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and wrong not in result.stdout + result.stderr


def test_plaintext_client_cannot_use_the_sasl_ssl_port(secure_broker) -> None:
    """A client without the security settings never gets through the SASL_SSL listener."""
    with pytest.raises(TimeoutError, match="not reachable"):
        wait_for_broker({"bootstrap.servers": secure_broker.bootstrap}, timeout_s=3)
