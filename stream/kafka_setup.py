"""The job's Kafka side before it starts: the broker reachable (or started locally), the topics right.

* :func:`wait_for_kafka` — wait for the configured broker with backoff, counted in the report metrics;
* :func:`prepare_kafka` — start the local broker when the configured loopback one is down (and
  ``kafka.start_local_broker``), wait for it, create the job's topics;
* :func:`ensure_job_topics` — create the missing topics and check the existing ones' timestamp
  types (a live input records the broker's arrival time: docs/ALGORITHMS.md §0.1 e).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dphhh.connectors.kafka_io import create_topics

from .broker import LocalBroker, reachable
from .config import JobConfig
from .console import say

if TYPE_CHECKING:
    from .report_metrics import ReportMetrics

__all__ = [
    "LIVE_INPUT_TOPIC",
    "OUTPUT_TOPIC",
    "REPORTS_TOPIC",
    "ensure_job_topics",
    "prepare_kafka",
    "wait_for_kafka",
]


def wait_for_kafka(
    cfg: JobConfig,
    metrics: ReportMetrics | None = None,
    *,
    what: str = "dphhh run",
    sleep: Callable[[float], None] = time.sleep,
    probe: Callable[..., None] | None = None,
) -> None:
    """Wait until the configured broker answers, retrying with exponential backoff (1 s, 2 s, 4 s …
    30 s), each failed attempt logged and counted (``dphhh_kafka_connect_retries_total``,
    ``dphhh_kafka_broker_up``); ``kafka.wait_s`` > 0 bounds the wait (then ``TimeoutError``).
    ``probe(options, timeout_s=)`` raises ``TimeoutError`` while the broker does not answer."""
    from dphhh.connectors.kafka_io import wait_for_broker

    probe = probe or wait_for_broker

    bootstrap, limit = cfg.kafka.bootstrap, cfg.kafka.wait_s
    started, delay, attempt = time.monotonic(), 1.0, 0
    while True:
        attempt += 1
        try:
            probe(cfg.kafka_client_options(), timeout_s=5.0)
        except TimeoutError:
            if metrics is not None:
                metrics.broker_up.set(0)
                metrics.connect_retries.inc()
            waited = time.monotonic() - started
            if limit and waited + delay > limit:
                raise TimeoutError(
                    f"kafka: broker {bootstrap} not reachable after {attempt} attempts in "
                    f"{waited:.0f} s (kafka.wait_s = {limit})"
                ) from None
            say(
                f"{what}: broker {bootstrap} not reachable (attempt {attempt}); retrying in {delay:.0f} s "
                "(Ctrl-C stops)"
            )
            sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        if metrics is not None:
            metrics.broker_up.set(1)
        if attempt > 1:
            say(f"{what}: broker {bootstrap} reachable after {attempt} attempts")
        return


def prepare_kafka(cfg: JobConfig, metrics: ReportMetrics | None = None) -> LocalBroker | None:
    """Start the local broker if the configured one is a loopback address that does not answer (and
    ``kafka.start_local_broker``), else wait for the broker (:func:`wait_for_kafka`); create the
    job's topics. Returns the broker this call started (to stop later), if any."""
    bootstrap = cfg.kafka.bootstrap
    broker = None
    if not reachable(bootstrap) and cfg.kafka.start_local_broker:
        broker = LocalBroker.for_bootstrap(bootstrap)
        if broker is not None:
            say(f"dphhh: starting the local Kafka broker on {broker.bootstrap} ...")
            broker.start()
    wait_for_kafka(cfg, metrics)
    ensure_job_topics(cfg)
    return broker if broker is not None and broker.started else None


#: A live job's input topic: every record carries the broker's arrival time (docs/ALGORITHMS.md §0.1 e).
LIVE_INPUT_TOPIC = {"message.timestamp.type": "LogAppendTime"}
#: The job's output topics keep the timestamps the job writes (a report's: its scheduled time).
OUTPUT_TOPIC = {"message.timestamp.type": "CreateTime"}
#: The reports topic also keeps its records for good: a replay's reports carry timestamps in the past,
#: which time-based retention would delete right after they are written (reports are small).
REPORTS_TOPIC = {**OUTPUT_TOPIC, "retention.ms": "-1"}
_TIMESTAMP_TYPE = "message.timestamp.type"


def ensure_job_topics(cfg: JobConfig) -> None:
    """Create the job's missing topics (a live input with ``LogAppendTime``, the outputs with
    ``CreateTime``; one partition per subtask) and check existing ones: a live job refuses an input
    topic whose timestamps producers set (they would decide windows and lateness), and any job refuses
    output topics that would overwrite the reports' scheduled timestamps with the broker's clock."""
    from dphhh.connectors.kafka_io import topic_settings

    from .config import ConfigError
    from .schedule import LIVE

    opts = cfg.kafka_client_options()
    inp, reports, dead = cfg.kafka.input_topic, cfg.kafka.reports_topic, cfg.kafka.dead_letter_topic
    configs = {reports: REPORTS_TOPIC, dead: OUTPUT_TOPIC}
    if cfg.mode == LIVE:
        configs[inp] = LIVE_INPUT_TOPIC
    create_topics(opts, [inp, dead], partitions=cfg.flink.parallelism, configs=configs)
    create_topics(opts, [reports], partitions=1, configs=configs)  # one partition: readers see window order
    found = {topic: topic_settings(opts, topic, [_TIMESTAMP_TYPE]) for topic in configs}
    for topic, wanted in configs.items():
        stored = found[topic][_TIMESTAMP_TYPE]
        if stored == wanted[_TIMESTAMP_TYPE]:
            continue
        if topic == inp:
            raise ConfigError(
                f"kafka: input topic {topic} stores {stored} timestamps (set by its producers); a live "
                "job needs the broker's arrival time (LogAppendTime) to decide windows. Change it with "
                f"`kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config "
                f"{_TIMESTAMP_TYPE}=LogAppendTime`, or replay past data with window.mode = 'replay'"
            )
        raise ConfigError(
            f"kafka: topic {topic} stores {stored} timestamps; the job's output topics "
            f"need CreateTime (a report's timestamp is its scheduled release time); set "
            f"{_TIMESTAMP_TYPE}=CreateTime on it or use another topic"
        )
    parts = found[reports]["partitions"]
    if parts is not None and int(parts) > 1:
        say(
            f"dphhh: warning: reports topic {reports} has {parts} partitions: the job writes its reports "
            "in window order, but readers of several partitions may see them out of order (give it one partition)"
        )
    parts = found[inp]["partitions"] if inp in found else None
    if parts is not None and int(parts) < cfg.flink.parallelism:
        say(
            f"dphhh: warning: input topic {inp} has {parts} partitions for flink.parallelism = "
            f"{cfg.flink.parallelism}: the job reads it with {parts} source subtask(s) (give it one partition per "
            "subtask to use them all)"
        )
