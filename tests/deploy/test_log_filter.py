"""The job's log configuration keeps Kafka offsets (message counts) out of the log, in a real log4j2
(docs/ALGORITHMS.md §0.1; deploy/flink/log4j-no-raw-counts.properties).

The configuration the job writes (PyFlink's ``log4j-cli.properties`` followed by dphhh's file, as
``stream.job`` builds it; only the file appender's path is the test's) is loaded by log4j2 in the
PyFlink gateway's JVM, in a logger context of its own. Each logger named below then logs lines that
Flink's Kafka connector and the Kafka client really write — among them the WARN a checkpoint's offset
commit logs when it meets a broker that has just started, which an end-to-end run caught in the job's
log ("... at offset 12: The coordinator is loading ...") — and lines without an offset. What reaches
the file must be exactly the latter: without the ``offsets`` filters every WARN line gets through. (End-to-end: a JVM;
tests/conftest.py E2E_MODULES.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

from dphhh.stream.paths import deploy_dir

OURS = deploy_dir() / "flink" / "log4j-no-raw-counts.properties"

#: (logger, level, message, kept?): offsets in the forms Kafka and the connector write them
LINES = [
    (
        "org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
        "warn",
        "[Consumer clientId=j-0, groupId=j] Offset commit failed on partition j-in-0 at offset 12: "
        "The coordinator is loading and hence can't process requests.",
        False,
    ),
    (
        "org.apache.kafka.clients.consumer.internals.SubscriptionState",
        "warn",
        "[Consumer clientId=c, groupId=g] Resetting offset for partition t-0 to position "
        "FetchPosition{offset=4711, offsetEpoch=Optional.empty}.",
        False,
    ),
    (
        "org.apache.flink.connector.kafka.source.reader.KafkaSourceReader",
        "error",
        "Failed to commit consumer offsets for checkpoint 3: offsets 4096",
        False,
    ),
    (
        "org.apache.flink.connector.base.source.reader.SourceReaderBase",
        "warn",
        "Adding split(s) to reader: [[Partition: t-0, StartingOffset: 977, StoppingOffset: -9223372036854775808]]",
        False,
    ),
    (
        "org.apache.flink.runtime.source.coordinator.SourceCoordinator",
        "warn",
        "Offsets 12 of the split were not committed",
        False,
    ),
    (
        "org.apache.kafka.clients.consumer.KafkaConsumer",
        "warn",
        "Committed Offset=12 for partition t-0; position offset: 4096",
        False,
    ),
    (
        "org.apache.flink.kafka.shaded.org.apache.kafka.clients.NetworkClient",
        "warn",
        "[Consumer clientId=j-0, groupId=j] Connection to node 1 (/127.0.0.1:9092) could not be established.",
        True,
    ),
    (
        "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
        "warn",
        "[Consumer clientId=c, groupId=g] Offset commit failed: The coordinator is not available.",
        True,
    ),
]


def _configuration(tmp_path: Path, ours: str) -> tuple[Path, Path]:
    import pyflink

    cli = (Path(pyflink.__file__).resolve().parent / "conf" / "log4j-cli.properties").read_text()
    log = tmp_path / "job.log"
    assert "${sys:log.file}" in cli
    text = cli.replace("${sys:log.file}", str(log)).replace("monitorInterval=30", "") + "\n" + ours
    path = tmp_path / "log4j.properties"
    path.write_text(text)
    return path, log


def _logged(tmp_path: Path, ours: str) -> str:
    """Load the configuration into a fresh log4j2 context, log every line of LINES, return the file."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    path, log = _configuration(tmp_path, ours)
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    context = configurator.initialize(f"dphhh-test-{uuid.uuid4().hex}", None, str(path))
    try:
        for name, level, message, _ in LINES:
            getattr(context.getLogger(name), level)(message)
    finally:
        configurator.shutdown(context)
    return log.read_text() if log.exists() else ""


def test_offsets_stay_out_of_the_log_and_other_warnings_stay_in(tmp_path: Path) -> None:
    logged = _logged(tmp_path, OURS.read_text())
    kept = [message for _, _, message, keep in LINES if keep]
    dropped = [message for _, _, message, keep in LINES if not keep]
    assert all(message in logged for message in kept), logged
    assert not [message for message in dropped if message in logged], logged


def test_without_the_offset_filters_the_offsets_reach_the_log(tmp_path: Path) -> None:
    """The negative control: the same configuration without the ``offsets`` filters lets them through."""
    ours = "\n".join(line for line in OURS.read_text().splitlines() if ".filter.offsets." not in line)
    logged = _logged(tmp_path, ours)
    assert all(message in logged for _, _, message, _ in LINES), logged
