"""On the real broker: an open transaction holds read-committed readers back, StableOffsetProbe sees it,
the watch dphhh run starts warns about it and notes when readers move on (after the commit), and
``dphhh reports`` says that records after an open transaction are not readable yet."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

from kafka import KafkaProducer

from dphhh.connectors.kafka_io import StableOffsetProbe, client_kwargs, create_topics
from dphhh.stream.reports_stall import ReportsStallWatch

OPTIONS = {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "PLAINTEXT"}
DPHHH = str(Path(sys.executable).with_name("dphhh"))


def _until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_an_open_transaction_is_a_stall_until_it_is_committed(broker) -> None:
    """One committed record, then a record in a transaction left open: the stable offset stays below
    the end, the watch (limit 1 s) warns once; after the commit the offsets meet and it says so."""
    topic = f"e2e-stall-{uuid.uuid4().hex[:8]}"
    create_topics(OPTIONS, [topic])
    producer = KafkaProducer(**client_kwargs(OPTIONS), transactional_id=f"{topic}-tx")
    said: list[str] = []
    watch = ReportsStallWatch(OPTIONS, topic, 1.0, poll_s=0.2, say=said.append)
    probe = StableOffsetProbe(OPTIONS, topic)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"{}")
        producer.commit_transaction()  # offsets 0 (record) and 1 (commit marker)
        producer.begin_transaction()
        producer.send(topic, b"{}")
        producer.flush()  # offset 2, in a transaction that stays open
        assert _until(lambda: probe.read() == {0: (2, 3)}, 10), probe.read()
        shown = subprocess.run(
            [DPHHH, "reports", "--json", "--topic", topic, "--bootstrap", "127.0.0.1:9092"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0 and shown.stdout == "{}\n", shown.stderr  # only the committed record
        assert f"partition 0 of {topic} has an open transaction" in shown.stderr
        watch.start()
        assert _until(lambda: any("warning" in s for s in said), 15), said
        assert f"readers of {topic} (partition 0) have been held back" in said[0]
        producer.commit_transaction()
        assert _until(lambda: said[-1].endswith("move on again"), 15), said
        stable, end = probe.read()[0]
        assert stable == end == 4  # record, marker, record, marker
        assert len(said) == 2
    finally:
        watch.stop()
        probe.close()
        producer.close()
