"""JSON-lines report file: one line per window, appended once.

The writer remembers which windows the file already holds (read at open), so a window
republished after a failure and restore — byte-identical, from the release ledger — is not
written twice. Each line is flushed and ``fsync``-ed; a write error (disk full, unwritable path)
raises :class:`ReportSinkError` with a clear message, cuts a partly written line off again and
leaves the file's earlier lines intact.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dphhh.sketches.errors import OperationalError

__all__ = ["JsonLinesReportFile", "ReportSinkError", "ReportsTopic", "ReportsTopicError"]


class ReportSinkError(OperationalError, OSError):
    """The report file could not be written."""


def _window_key(report: bytes) -> int:
    return int(json.loads(report)["window"]["start_ms"])


class JsonLinesReportFile:
    """Appends report bytes as lines, at most once per window start."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._seen: set[int] = set()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._drop_torn_tail()
                with open(self.path, "rb") as fh:
                    for line in fh:
                        line = line.strip()
                        if line:
                            try:
                                self._seen.add(_window_key(line))
                            except (ValueError, KeyError, TypeError):
                                continue  # not a report line: ignored
        except OSError as exc:
            raise ReportSinkError(f"report file {self.path}: cannot open: {exc.strerror}") from None

    def _drop_torn_tail(self) -> None:
        """Cut a last line left without its newline by a crash, so appends start on a new line."""
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def write(self, report: bytes) -> bool:
        """Append one report unless its window is already in the file; True if written."""
        key = _window_key(report)
        if key in self._seen:
            return False
        size = None
        try:
            with open(self.path, "ab") as fh:
                size = fh.tell()
                fh.write(report.rstrip(b"\n") + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if size is not None:  # a partial line (disk full mid-write) is cut off again
                try:
                    os.truncate(self.path, size)
                except OSError:
                    pass  # the next open drops a torn last line
            raise ReportSinkError(f"report file {self.path}: cannot write: {exc.strerror}") from None
        self._seen.add(key)
        return True


class ReportsTopicError(OperationalError):
    """The reports topic stayed unwritable for too long: the job fails, restarts and republishes the
    stored report (never a fresh one)."""


class ReportsTopic:
    """The reports topic, written by the release operator itself: one Kafka transaction per report,
    begun and committed at the report's publication time (docs/ALGORITHMS.md §0.1 g), so that when
    a report becomes readable — to ``read_committed`` and ``read_uncommitted`` readers alike, and
    as the partition's end offset — is a public time, not the time of a checkpoint.

    ``transactional_id`` is the deployment's (the job's group id): a new writer fences every older
    one (a zombie attempt of the release task cannot publish twice). While the broker is away a
    send is retried with backoff (a fresh writer each time) for up to ``retry_s``; then
    :class:`ReportsTopicError` (the job restarts and republishes the stored report)."""

    def __init__(self, options: dict, topic: str, transactional_id: str, retry_s: float = 300.0) -> None:
        self.options = dict(options)
        self.topic = topic
        self.transactional_id = transactional_id
        self.retry_s = retry_s
        self.producer: Any = None

    def _open(self, **bootstrap: Any) -> Any:
        from kafka import KafkaProducer

        from .kafka_io import _open_client

        producer = _open_client(
            KafkaProducer,
            self.options,
            **bootstrap,
            transactional_id=self.transactional_id,
            acks="all",
            linger_ms=0,
            retries=5,
        )
        producer.init_transactions()  # fences any older writer of this deployment
        return producer

    def connect(self) -> None:
        """Open the transactional producer now (the job's start), so that the first report reaches
        the topic as fast as every later one (docs/ALGORITHMS.md §0.1 g). A broker that does not
        answer yet is not an error here: :meth:`send` retries."""
        if self.producer is not None:
            return
        try:
            self.producer = self._open(bootstrap_timeout_ms=5000)  # a restart's open is not held up long
        except Exception:  # (the broker away at start: the first send opens it, with its retries)
            self.close()

    def send(self, report: bytes, timestamp_ms: int) -> None:
        """Publish one report in a transaction of its own (record timestamp = its scheduled time)."""
        import time

        deadline, pause, last = time.monotonic() + self.retry_s, 0.5, "unknown"
        while True:
            try:
                if self.producer is None:
                    self.producer = self._open()
                self.producer.begin_transaction()
                self.producer.send(self.topic, value=report, timestamp_ms=int(timestamp_ms)).get(timeout=30)
                self.producer.commit_transaction()
                return
            except Exception as exc:  # the broker away, a fenced or broken writer: a fresh one, later
                last = type(exc).__name__
                self.close()
                if time.monotonic() + pause > deadline:
                    raise ReportsTopicError(
                        f"reports topic {self.topic}: cannot publish for {self.retry_s:.0f} s ({last})"
                    ) from None
                time.sleep(pause)
                pause = min(2 * pause, 2.0)

    def holds(self, window_start: int, last: int = 64) -> bool:
        """Whether one of the topic's last ``last`` committed reports is the window's (after a crash
        between a publication and its mark in the ledger)."""
        from kafka import KafkaConsumer, TopicPartition

        from .kafka_io import _open_client

        consumer = _open_client(
            KafkaConsumer, self.options, group_id=None, enable_auto_commit=False, isolation_level="read_committed"
        )
        try:
            parts = [TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic) or [])]
            consumer.assign(parts)
            ends = consumer.end_offsets(parts)
            for tp in parts:
                consumer.seek(tp, max(0, ends[tp] - last))
            import time

            deadline = time.monotonic() + 30
            while any(consumer.position(tp) < ends[tp] for tp in parts):
                if time.monotonic() > deadline:
                    raise ReportsTopicError(f"reports topic {self.topic}: cannot read its last reports")
                for records in consumer.poll(timeout_ms=500).values():
                    for r in records:
                        try:
                            if _window_key(r.value) == int(window_start):
                                return True
                        except (ValueError, KeyError, TypeError):
                            continue
            return False
        finally:
            consumer.close()

    def close(self) -> None:
        if self.producer is not None:
            try:
                self.producer.close(timeout=5)
            except Exception:
                pass
            self.producer = None
