"""The canonical order through the real job (docs/ALGORITHMS.md §0 "Canonical order").

One input log — two partitions, heavy-tailed addresses over three windows — is replayed three times
by the real job with different timing: parallelism 1 (one source subtask reading both partitions,
batches of up to 4,096 messages); parallelism 2 with decode subtask 1 slowed down
(``testing.slow_decode_ms``); parallelism 2 with batches of 7 messages. The log is what a live
deployment's input holds: the broker's append times (LogAppendTime) and the clock records a
ticker appends to both partitions every 100 ms, so each replay's watermark follows that clock
(``stream.job.replay_clock``) and complete epochs are applied while the log is read, at moments
that differ between the runs. With the same test seed the three runs must dump byte-identical
sketches (every one of every window, the NON-PRIVATE test hook) and publish byte-identical reports,
and the sketches must equal the plain oracle of the canonical order (tests/e2e/jobs.py
``offline_sketches``). The sketches hold far fewer counters than keys, so any difference in the
order would show: with the old arrival order the interleaving of the partitions decided them
(tests/stream/test_canonical_order.py has that control). Replays of logs whose producers set the
timestamps (no clock: epochs applied at the end of input) are checked the same way against the
literal reference by the exactly-once tests (tests/e2e/test_faults.py, test_stream_e2e.py).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np

from dphhh.connectors.kafka_io import PackedProducer, create_topics, pack_ipv4
from dphhh.stream.clock import ClockTicker
from dphhh.stream.job import replay_clock
from dphhh.stream.kafka_setup import LIVE_INPUT_TOPIC
from tests.e2e.jobs import BOOTSTRAP, JOB, input_log, offline_sketches, replay_window, reports, write_config

SIZE = 1_000  # 1-s windows of 10 epochs: the log is written on the wall clock


def _log(topic: str) -> int:
    """Two partitions, 3 windows of the wall clock from the next window boundary (returned): 1,200
    messages of 1-60 addresses each, written in time order with the partitions interleaved, while a
    clock ticker appends clock records to both partitions."""
    rng = np.random.default_rng(11)
    pool = rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)
    plan = []  # (offset ms from the first window, partition, addresses)
    for p in (0, 1):
        t = p * 7
        for _ in range(600):
            t += int(rng.integers(0, 8))
            n = int(rng.integers(1, 60))
            plan.append((min(t, 3 * SIZE - 150), p, pool[np.minimum(rng.zipf(1.2, n), 2000) - 1]))
    plan.sort(key=lambda x: (x[0], x[1]))
    options = {"bootstrap.servers": BOOTSTRAP}
    producer = PackedProducer(options, topic)
    ticker = ClockTicker(options, topic, 100)
    ticker.start()
    base = (int(time.time() * 1000) // SIZE + 1) * SIZE
    try:
        for offset, p, addrs in plan:
            wait = (base + offset) / 1000 - time.time()
            if wait > 0:
                producer.flush()
                time.sleep(wait)
            producer._producer.send(topic, value=pack_ipv4(addrs), partition=p)
        producer.flush()
        while time.time() * 1000 < base + 3 * SIZE + 300:  # clock records past the range's end
            time.sleep(0.05)
    finally:
        ticker.stop()
        producer.close()
    return base


def _replay(
    tmp_path: Path, topic: str, base: int, name: str, slow_ms: int = 0, **flink
) -> tuple[dict[str, bytes], list[bytes], object]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = write_config(
        tmp_path,
        name,
        kafka={"input_topic": topic},
        window=replay_window(base, 3, SIZE),
        privacy={"epsilon": 2.0, "tau": 1500.0, "counters": 32, "partitions": 2, "seed": 5},
        flink=flink,
        testing={"slow_decode_ms": slow_ms},
    )
    from dphhh.stream.config import load_config

    cfg = load_config(config, environ={})
    assert replay_clock(cfg)  # the replay's watermark follows the log's clock records
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    dumps = {p.name: p.read_bytes() for p in sorted((tmp_path / "sketches").glob("*.bin"))}
    return dumps, reports(cfg), cfg


def test_the_same_log_replayed_with_other_timing_gives_identical_sketches_and_reports(broker, tmp_path: Path) -> None:
    topic = f"e2e-canonical-{uuid.uuid4().hex[:8]}-in"
    create_topics({"bootstrap.servers": BOOTSTRAP}, [topic], partitions=2, configs={topic: LIVE_INPUT_TOPIC})
    base = _log(topic)
    runs = [
        _replay(tmp_path / "p1", topic, base, "canon-p1", parallelism=1, batch_max_messages=4096),
        _replay(tmp_path / "slow", topic, base, "canon-slow", parallelism=2, slow_ms=40),
        _replay(tmp_path / "small", topic, base, "canon-small", parallelism=2, batch_max_messages=7),
    ]
    (dumps, published, cfg), *others = runs
    assert len(dumps) == 3 * 4 * 2  # every (window, level, partition)
    for other_dumps, other_reports, _ in others:
        assert other_dumps == dumps  # byte-identical sketches
        assert other_reports == published  # and, with the same seed, identical reports
    assert [json.loads(r)["window"]["start_ms"] for r in published] == [base, base + SIZE, base + 2 * SIZE]
    from dphhh.sketches.misra_gries import MisraGries

    oracle = offline_sketches(cfg, input_log(cfg), cfg.schedule(base))
    got = {}
    for name, data in dumps.items():
        window, sid = (int(x) for x in name.removesuffix(".bin").removeprefix("window-").split("-sketch-"))
        got[(window, sid)] = MisraGries.from_bytes(data)
    assert {k: v for k, v in got.items() if v.total} == oracle
    assert max(len(mg.counters()) for mg in oracle.values()) == 32  # κ is full: the order decides
