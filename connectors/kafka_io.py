"""Kafka helpers on kafka-python: topic admin, a packed-batch producer, report readers.

Client options use Kafka's dotted names (``bootstrap.servers``, ``security.protocol``,
``sasl.mechanism`` …) as in the job configuration; :func:`client_kwargs` maps them to
kafka-python's keyword arguments, so SASL/SSL settings pass through to every client.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

__all__ = [
    "client_kwargs",
    "create_topics",
    "pack_ipv4",
    "PackedProducer",
    "iter_committed_values",
    "wait_for_broker",
]

_BE_U32 = np.dtype(">u4")


def client_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python keyword arguments from dotted Kafka option names."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        name = key.replace(".", "_")
        if name == "bootstrap_servers" and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        out[name] = value
    return out


def wait_for_broker(options: Mapping[str, Any], timeout_s: float = 60.0) -> None:
    """Block until the broker answers a metadata request; ``TimeoutError`` naming it otherwise."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin = KafkaAdminClient(**client_kwargs(options), request_timeout_ms=5000)
            admin.list_topics()
            admin.close()
            return
        except (KafkaError, OSError, ValueError) as exc:
            last = exc
            time.sleep(0.5)
    raise TimeoutError(f"kafka: broker {options.get('bootstrap.servers')} not reachable after {timeout_s:.0f} s ({last})")


def create_topics(options: Mapping[str, Any], names: Iterable[str], partitions: int = 1) -> list[str]:
    """Create the topics that do not exist yet (replication 1); returns those created."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    names = list(names)
    admin = KafkaAdminClient(**client_kwargs(options))
    try:
        existing = set(admin.list_topics())
        missing = [n for n in names if n not in existing]
        if missing:
            admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in missing])
        deadline = time.monotonic() + 30
        while True:  # a topic is usable once its partitions have leaders
            described = admin.describe_topics(names)
            ready = all(
                not t.get("error_code") and t.get("partitions") and all(p.get("leader_id", -1) >= 0 for p in t["partitions"])
                for t in described
            )
            if ready:
                return missing
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka: topics {names} not ready after 30 s")
            time.sleep(0.2)
    finally:
        admin.close()


def pack_ipv4(addresses: np.ndarray) -> bytes:
    """The packed message format: big-endian uint32 addresses."""
    return np.asarray(addresses, dtype=np.uint32).astype(_BE_U32).tobytes()


class PackedProducer:
    """Publishes message values (e.g. :func:`pack_ipv4` batches) with explicit timestamps."""

    def __init__(self, options: Mapping[str, Any], topic: str, *, transactional: bool = False) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self._producer = KafkaProducer(
            **client_kwargs(options), acks="all", linger_ms=5, max_request_size=4 << 20, retries=10
        )
        self._pending: list = []
        self.messages = 0
        self.bytes = 0

    def send_value(self, value: bytes, timestamp_ms: int | None = None) -> None:
        """Publish one raw message value (asynchronously; :meth:`flush` reports failures)."""
        self._pending.append(self._producer.send(self.topic, value=value, timestamp_ms=timestamp_ms))
        self.messages += 1
        self.bytes += len(value)
        if len(self._pending) >= 10_000:
            self._check(self._pending[:5_000])
            del self._pending[:5_000]

    @staticmethod
    def _check(futures) -> None:
        for future in futures:
            future.get(timeout=60)  # raises the send's KafkaError, if any

    def flush(self) -> None:
        """Wait until every message sent so far is acknowledged; raise if one failed."""
        self._producer.flush()
        pending, self._pending = self._pending, []
        self._check(pending)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._producer.close()


def iter_committed_values(
    options: Mapping[str, Any],
    topic: str,
    *,
    follow: bool = False,
    idle_timeout_s: float = 5.0,
    group_id: str | None = None,
    from_beginning: bool = True,
    stop: "threading.Event | None" = None,
) -> Iterator[tuple[int, bytes]]:
    """(timestamp ms, value) of a topic, read-committed only, from the beginning (or, without
    ``from_beginning``, from records published after the start).

    Without ``follow`` it stops once no new record arrived for ``idle_timeout_s``; with ``follow``
    it keeps waiting, until ``stop`` is set if one is given (checked whenever the topic is idle).
    """
    from kafka import KafkaConsumer

    if not follow:
        timeout_ms: float = int(idle_timeout_s * 1000)
    else:
        timeout_ms = 500 if stop is not None else float("inf")
    consumer = KafkaConsumer(
        topic,
        **client_kwargs(options),
        group_id=group_id,
        auto_offset_reset="earliest" if from_beginning else "latest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        consumer_timeout_ms=timeout_ms,
    )
    try:
        while True:
            for record in consumer:
                yield record.timestamp, record.value
            if not follow or stop is None or stop.is_set():
                break
    finally:
        consumer.close()
