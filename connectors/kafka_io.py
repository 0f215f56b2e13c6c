"""Kafka helpers on kafka-python: topic admin, a packed-batch producer, report readers.

Client options use Kafka's dotted names (``bootstrap.servers``, ``security.protocol``,
``sasl.mechanism`` …) as in the job configuration; :func:`client_kwargs` maps them to
kafka-python's keyword arguments, so SASL/SSL settings pass through to every client.
"""

from __future__ import annotations

import logging
import re
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from kafka.errors import KafkaConnectionError

__all__ = [
    "BrokerRefusedError",
    "client_kwargs",
    "java_client_properties",
    "parse_jaas_login",
    "create_topics",
    "topic_settings",
    "read_to_end",
    "iter_to_end",
    "open_client",
    "pack_ipv4",
    "PackedProducer",
    "iter_committed_values",
    "StableOffsetProbe",
    "wait_for_broker",
]

_BE_U32 = np.dtype(">u4")


# --- client options: Java client names -> kafka-python keyword arguments -------------------------

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = {
    "PLAIN": "PlainLoginModule",
    "SCRAM-SHA-256": "ScramLoginModule",
    "SCRAM-SHA-512": "ScramLoginModule",
}
# Java client options whose kafka-python keyword is the name with dots replaced (same meaning).
_INT_OPTIONS = frozenset(
    {
        "request.timeout.ms",
        "retry.backoff.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "metadata.max.age.ms",
        "send.buffer.bytes",
        "receive.buffer.bytes",
    }
)
_STR_OPTIONS = frozenset({"client.id"})
# Options that only concern the Java clients of the Flink job (Java TLS/SASL plumbing, the Flink
# connector's own settings, producer/consumer tuning): dphhh's kafka-python clients ignore them and
# choose their own acks, isolation level, offsets and timeouts.
_JAVA_ONLY = frozenset(
    {
        "ssl.truststore.type",
        "ssl.keystore.type",
        "ssl.truststore.password",
        "ssl.keystore.password",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.provider",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.login.retry.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "partition.discovery.interval.ms",
        "client.id.prefix",
        "commit.offsets.on.checkpoint",
        "register.consumer.metrics",
        "acks",
        "linger.ms",
        "batch.size",
        "buffer.memory",
        "compression.type",
        "retries",
        "delivery.timeout.ms",
        "max.request.size",
        "max.block.ms",
        "enable.idempotence",
        "transaction.timeout.ms",
        "transactional.id",
        "max.in.flight.requests.per.connection",
        "group.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "isolation.level",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.max.wait.ms",
        "max.partition.fetch.bytes",
        "max.poll.records",
        "max.poll.interval.ms",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "check.crcs",
        "client.rack",
        "partition.assignment.strategy",
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
    }
)
_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(r'\s*(?:(?P<word>[^\s=;"]+)|(?P<eq>=)|(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<semi>;))', re.S)


def _option_error(key: str, problem: str) -> ValueError:
    """A ValueError naming the option; never its value (it may be a secret)."""
    return ValueError(f"kafka options: {key} {problem}")


def parse_jaas_login(text: str, key: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """The login module class and options of a one-module JAAS entry such as
    ``org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";``.

    Quoted values may contain ``\\"`` and ``\\\\``. Raises ``ValueError`` naming ``key`` (never the
    text) if the entry is malformed or holds more than one module."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _option_error(key, 'is not a JAAS login entry (module flag key="value" ...;)')
        kind = m.lastgroup
        assert kind is not None  # every alternative of _JAAS_TOKEN is a named group, and one matched
        value = m.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
        tokens.append((kind, value))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if (
        len(tokens) < 3
        or tokens[0][0] != "word"
        or tokens[1] not in (("word", f) for f in _JAAS_FLAGS)
        or tokens[-1][0] != "semi"
    ):
        raise _option_error(key, 'is not a JAAS login entry (module flag key="value" ...;)')
    body, options = tokens[2:-1], {}
    if len(body) % 3:
        raise _option_error(key, 'is not a JAAS login entry (module flag key="value" ...;)')
    for i in range(0, len(body), 3):
        (k_kind, name), (e_kind, _), (v_kind, value) = body[i : i + 3]
        if k_kind != "word" or e_kind != "eq" or v_kind not in ("word", "quoted"):
            raise _option_error(key, 'must hold exactly one login module: module flag key="value" ...;')
        options[name] = value
    return tokens[0][1], options


def _sasl_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    mechanism = str(options.get("sasl.mechanism", "")).strip()
    if not mechanism:
        raise _option_error(
            "sasl.mechanism", f"must be set with a SASL security.protocol (one of {', '.join(_SASL_MECHANISMS)})"
        )
    if mechanism not in _SASL_MECHANISMS:
        raise _option_error(
            "sasl.mechanism", f"must be one of {', '.join(_SASL_MECHANISMS)} for dphhh's kafka-python clients"
        )
    if "sasl.jaas.config" not in options:
        raise _option_error("sasl.jaas.config", f"must be set for sasl.mechanism {mechanism} (username and password)")
    module, login = parse_jaas_login(str(options["sasl.jaas.config"]))
    if module.rsplit(".", 1)[-1] != _SASL_MECHANISMS[mechanism]:
        raise _option_error(
            "sasl.jaas.config", f"must use the {_SASL_MECHANISMS[mechanism]} for sasl.mechanism {mechanism}"
        )
    if "tokenauth" in login:
        raise _option_error(
            "sasl.jaas.config", "uses delegation tokens (tokenauth), which dphhh's kafka-python clients do not support"
        )
    for name in ("username", "password"):
        if not login.get(name):
            raise _option_error("sasl.jaas.config", f'must give {name}="..."')
    return {
        "sasl_mechanism": mechanism,
        "sasl_plain_username": login["username"],
        "sasl_plain_password": login["password"],
    }


def _pem_file(options: Mapping[str, Any], store: str) -> str:
    kind = str(options.get(f"ssl.{store}.type", "JKS")).strip().upper()  # Java's default type is JKS
    if kind != "PEM":
        raise _option_error(
            f"ssl.{store}.location",
            f'must be a PEM file for dphhh\'s kafka-python clients (set ssl.{store}.type = "PEM")',
        )
    return str(options[f"ssl.{store}.location"])


def _ssl_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "ssl.truststore.location" in options:
        out["ssl_cafile"] = _pem_file(options, "truststore")
    if "ssl.keystore.location" in options:
        out["ssl_certfile"] = _pem_file(options, "keystore")  # the key is read from the same file
        if "ssl.key.password" in options:
            out["ssl_password"] = str(options["ssl.key.password"])
    if "ssl.endpoint.identification.algorithm" in options:
        algorithm = str(options["ssl.endpoint.identification.algorithm"]).strip().lower()
        if algorithm not in ("", "https"):
            raise _option_error("ssl.endpoint.identification.algorithm", 'must be "https" or "" (no host name check)')
        out["ssl_check_hostname"] = algorithm == "https"
    return out


_SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config")
_SSL_KEYS = (
    "ssl.truststore.location",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)


def client_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python keyword arguments, shared by its producer, consumer and admin client, from Kafka's
    Java client option names (the job configuration's ``bootstrap.servers``, ``security.protocol``
    and ``kafka.extra``).

    Translated: ``bootstrap.servers``; ``security.protocol``; ``sasl.mechanism`` (PLAIN,
    SCRAM-SHA-256/512) with ``sasl.jaas.config`` (a PlainLoginModule / ScramLoginModule entry whose
    ``username``/``password`` become ``sasl_plain_username``/``sasl_plain_password``);
    ``ssl.truststore.location`` of type PEM → ``ssl_cafile``; ``ssl.keystore.location`` of type PEM
    (key and certificate chain in one file) → ``ssl_certfile`` with ``ssl.key.password`` →
    ``ssl_password``; ``ssl.endpoint.identification.algorithm`` ``""`` → ``ssl_check_hostname=False``;
    a few connection settings (``client.id``, ``request.timeout.ms`` …) by name. Options that only
    concern the Java clients (``ssl.truststore.type``, Flink connector settings, producer/consumer
    tuning) are dropped. Any other option, or one kafka-python cannot honour, raises ``ValueError``
    naming the option only — values may be secrets and never appear in messages.
    """
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "bootstrap.servers":
            out["bootstrap_servers"] = (
                [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
            )
        elif key == "security.protocol":
            protocol = str(value).strip().upper()
            if protocol not in _SECURITY_PROTOCOLS:
                raise _option_error(key, f"must be one of {', '.join(_SECURITY_PROTOCOLS)}")
            out["security_protocol"] = protocol
        elif key in _INT_OPTIONS:
            try:
                out[key.replace(".", "_")] = int(str(value).strip())
            except ValueError:
                raise _option_error(key, "must be a whole number") from None
        elif key in _STR_OPTIONS:
            out[key.replace(".", "_")] = str(value)
        elif key not in _SASL_KEYS and key not in _SSL_KEYS and key not in _JAVA_ONLY:
            raise _option_error(
                key,
                "is not a Kafka client option dphhh's kafka-python clients can honour "
                "(use the Java client names, e.g. sasl.jaas.config, ssl.truststore.location)",
            )
    protocol = out.get("security_protocol", "PLAINTEXT")
    if protocol.startswith("SASL_"):
        out.update(_sasl_kwargs(options))
    elif any(k in options for k in _SASL_KEYS):
        raise _option_error(
            next(k for k in _SASL_KEYS if k in options), "needs security.protocol SASL_SSL or SASL_PLAINTEXT"
        )
    if protocol.endswith("SSL"):
        out.update(_ssl_kwargs(options))
    elif any(k in options for k in _SSL_KEYS):
        raise _option_error(next(k for k in _SSL_KEYS if k in options), "needs security.protocol SSL or SASL_SSL")
    return out


_SHADED_PREFIX = "org.apache.flink.kafka.shaded."


def java_client_properties(options: Mapping[str, Any], *, shaded: bool = True) -> dict[str, str]:
    """The properties to set on the Flink job's Kafka source and sinks (everything but
    ``bootstrap.servers``, which the builders take apart), as strings.

    With ``shaded`` (the ``flink-sql-connector-kafka`` jar relocates the Kafka client under
    ``org.apache.flink.kafka.shaded.``), the login module class of ``sasl.jaas.config`` is
    relocated likewise, so the standard ``org.apache.kafka...PlainLoginModule`` works there."""
    out = {}
    for key, value in options.items():
        if key == "bootstrap.servers":
            continue
        text = str(value)
        if shaded and key == "sasl.jaas.config" and text.lstrip().startswith("org.apache.kafka."):
            text = text.replace("org.apache.kafka.", _SHADED_PREFIX + "org.apache.kafka.", 1)
        out[key] = text
    return out


# --- opening clients: fail fast, and say why, when the broker refuses the credentials -------------

_BOOTSTRAP_TIMEOUT_S = 30.0  # kafka-python's default bootstrap_timeout_ms
_ATTEMPT_MS = 5000


class BrokerRefusedError(KafkaConnectionError):
    """The broker refused the credentials, or the TLS handshake failed: retrying cannot help."""


class _BootstrapFailures(logging.Handler):
    """Collects the reasons kafka-python logs for failed bootstrap connections."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if (
            isinstance(record.msg, str)
            and record.msg.startswith("Bootstrap connection to")
            and isinstance(record.args, tuple)
            and len(record.args) >= 2
        ):
            if isinstance(record.args[1], BaseException):
                self.reasons.append(record.args[1])

    @staticmethod
    def fatal(exc: BaseException) -> bool:
        """Retrying cannot help: the broker refused the credentials or the TLS handshake failed."""
        name = type(exc).__name__
        return (
            "Sasl" in name
            or "Authentication" in name
            or isinstance(exc, ssl.SSLError)
            or "Handshake failed" in str(exc)
            or "CERTIFICATE_VERIFY_FAILED" in str(exc)
        )


def _open_client(cls, options: Mapping[str, Any], **overrides: Any):
    """``cls(**client_kwargs(options), **overrides)`` (a kafka-python client), retrying the bootstrap
    for up to 30 s but stopping at once on an authentication or TLS failure; either way raises a
    ``KafkaConnectionError`` (``BrokerRefusedError`` for the former) that says why (the broker's
    reason, never an option's value)."""
    from kafka.errors import KafkaTimeoutError

    kwargs = {**client_kwargs(options), **overrides}
    deadline = time.monotonic() + kwargs.pop("bootstrap_timeout_ms", _BOOTSTRAP_TIMEOUT_S * 1000) / 1000
    where = ",".join(kwargs.get("bootstrap_servers", [])) or "localhost:9092"
    log = logging.getLogger("kafka.net.manager")
    while True:
        attempt_ms = max(100, min(_ATTEMPT_MS, int((deadline - time.monotonic()) * 1000)))
        failures = _BootstrapFailures()
        log.addHandler(failures)
        try:
            return cls(**kwargs, bootstrap_timeout_ms=attempt_ms)
        except KafkaTimeoutError:
            fatal = [r for r in failures.reasons if failures.fatal(r)]
            if not fatal and time.monotonic() < deadline:
                continue
        finally:
            log.removeHandler(failures)
        if fatal:
            raise BrokerRefusedError(
                f"broker {where} refused the connection: {fatal[-1]} "
                "(check kafka.security_protocol and the SASL/TLS settings in kafka.extra)"
            ) from None
        last = f" (last failure: {failures.reasons[-1]})" if failures.reasons else ""
        raise KafkaConnectionError(
            f"cannot bootstrap from {where}{last}; is the broker up, and do "
            "kafka.bootstrap and kafka.security_protocol match its listener?"
        ) from None


open_client = _open_client


class StableOffsetProbe:
    """Reads, for each partition of ``topic``, its last stable offset (as far as read-committed readers
    can go) and its end offset. They differ while a transaction is open: its first record holds the
    stable offset back until the transaction ends. Two kafka-python consumers, no group, no records read.
    """

    def __init__(self, options: Mapping[str, Any], topic: str, *, request_timeout_ms: int = 30_000) -> None:
        from kafka import KafkaConsumer

        self.topic = topic
        opened = []
        try:
            for isolation in ("read_committed", "read_uncommitted"):
                opened.append(
                    _open_client(
                        lambda **kw: KafkaConsumer(**kw),
                        options,
                        isolation_level=isolation,
                        enable_auto_commit=False,
                        request_timeout_ms=request_timeout_ms,
                    )
                )
        except BaseException:
            for consumer in opened:
                consumer.close()
            raise
        self._committed, self._uncommitted = opened

    def read(self) -> dict[int, tuple[int, int]]:
        """partition → (last stable offset, end offset); empty if the topic does not exist (yet)."""
        from kafka import TopicPartition

        partitions = [
            TopicPartition(self.topic, p) for p in sorted(self._committed.partitions_for_topic(self.topic) or ())
        ]
        if not partitions:
            return {}
        stable = self._committed.end_offsets(partitions)
        end = self._uncommitted.end_offsets(partitions)
        return {tp.partition: (stable[tp], end[tp]) for tp in partitions}

    def close(self) -> None:
        self._committed.close()
        self._uncommitted.close()


def wait_for_broker(options: Mapping[str, Any], timeout_s: float = 60.0) -> None:
    """Block until the broker answers a metadata request; ``TimeoutError`` naming it otherwise."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    client_kwargs(options)  # an invalid option is a ValueError at once, not a timeout
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
            admin = _open_client(KafkaAdminClient, options, request_timeout_ms=5000, bootstrap_timeout_ms=remaining_ms)
            admin.list_topics()
            admin.close()
            return
        except BrokerRefusedError:
            raise  # wrong credentials or TLS settings: waiting will not help
        except (KafkaError, OSError) as exc:
            last = exc
            time.sleep(0.5)
    raise TimeoutError(
        f"kafka: broker {options.get('bootstrap.servers')} not reachable after {timeout_s:.0f} s ({last})"
    )


def create_topics(
    options: Mapping[str, Any],
    names: Iterable[str],
    partitions: int = 1,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> list[str]:
    """Create the topics that do not exist yet (replication 1; ``configs``: topic → its configuration,
    e.g. ``{"message.timestamp.type": "LogAppendTime"}``); returns those created."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    names = list(names)
    configs = configs or {}
    admin = _open_client(KafkaAdminClient, options)
    try:
        existing = set(admin.list_topics())
        missing = [n for n in names if n not in existing]
        if missing:
            admin.create_topics(
                [
                    NewTopic(n, num_partitions=partitions, replication_factor=1, topic_configs=dict(configs.get(n, {})))
                    for n in missing
                ]
            )
        deadline = time.monotonic() + 30
        while True:  # a topic is usable once its partitions have leaders
            described = admin.describe_topics(names)
            ready = all(
                not t.get("error_code")
                and t.get("partitions")
                and all(p.get("leader_id", -1) >= 0 for p in t["partitions"])
                for t in described
            )
            if ready:
                return missing
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka: topics {names} not ready after 30 s")
            time.sleep(0.2)
    finally:
        admin.close()


def topic_settings(options: Mapping[str, Any], topic: str, keys: Iterable[str]) -> dict[str, str | None]:
    """The current values of configuration ``keys`` of ``topic`` (defaults included), and its
    partition count under the key ``"partitions"``."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    keys = list(keys)
    admin = _open_client(KafkaAdminClient, options)
    try:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, keys)], config_filter="all")
        entries = found.get("topic", {}).get(topic, {}) if isinstance(found, dict) else {}
        out: dict[str, str | None] = {k: (entries.get(k) or {}).get("value") for k in keys}
        described = admin.describe_topics([topic])
        out["partitions"] = str(len(described[0].get("partitions") or [])) if described else None
        return out
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
        self._producer = _open_client(
            KafkaProducer, options, acks="all", linger_ms=5, max_request_size=4 << 20, retries=10
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


def iter_to_end(
    options: Mapping[str, Any], topic: str, stall_s: float = 30.0, isolation: str = "read_committed"
) -> Iterator[tuple[int, int, bytes]]:
    """(partition, record timestamp, value) of every committed record of ``topic`` up to its end *now*
    (each partition's last stable offset when called), in log order within each partition. Unlike an
    idle timeout, this ends even while a live job keeps appending to the topic (its clock records);
    ``TimeoutError`` if no record arrives for ``stall_s`` before the end is reached. With
    ``isolation="read_uncommitted"``: every record, aborted and open transactions' too, up to the
    partition's high watermark."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = _open_client(KafkaConsumer, options, group_id=None, enable_auto_commit=False, isolation_level=isolation)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        progress = time.monotonic()
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            if time.monotonic() - progress > stall_s:
                raise TimeoutError(f"kafka: no record of {topic} for {stall_s:.0f} s before its end")
            for tp, records in consumer.poll(timeout_ms=500).items():
                progress = time.monotonic()
                for r in records:
                    if r.offset < ends[tp]:
                        yield tp.partition, r.timestamp, r.value
    finally:
        consumer.close()


def read_to_end(
    options: Mapping[str, Any], topic: str, stall_s: float = 30.0, isolation: str = "read_committed"
) -> list[tuple[int, bytes]]:
    """(record timestamp, value) of :func:`iter_to_end`, partition by partition in log order."""
    out: dict[int, list[tuple[int, bytes]]] = {}
    for partition, ts, value in iter_to_end(options, topic, stall_s, isolation):
        out.setdefault(partition, []).append((ts, value))
    return [record for p in sorted(out) for record in out[p]]


def iter_committed_values(
    options: Mapping[str, Any],
    topic: str,
    *,
    follow: bool = False,
    idle_timeout_s: float = 5.0,
    group_id: str | None = None,
    from_beginning: bool = True,
    stop: threading.Event | None = None,
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
    consumer = _open_client(
        lambda **kw: KafkaConsumer(topic, **kw),
        options,
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
