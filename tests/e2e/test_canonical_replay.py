"""The canonical order through the real job (docs/ALGORITHMS.md §0 "Canonical order").

One input log — two partitions, heavy-tailed addresses over three windows, timestamps in the past —
is replayed three times by the real job with different timing: parallelism 1 (one source subtask
reading both partitions, batches of up to 4,096 messages); parallelism 2 with decode subtask 1
slowed down (``output.test_slow_decode_ms``); parallelism 2 with batches of 7 messages. With the
same test seed the three runs must dump byte-identical sketches (every one of every window, the
NON-PRIVATE test hook) and publish byte-identical reports, and the sketches must equal the plain
oracle of the canonical order (tests/e2e/jobs.py ``offline_sketches``). The sketches hold far fewer
counters than keys, so any difference in the order would show: with the old arrival order the
interleaving of the partitions decided them (tests/stream/test_canonical_order.py has that control).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import numpy as np

from connectors.kafka_io import PackedProducer, create_topics, pack_ipv4
from tests.e2e.jobs import BOOTSTRAP, JOB, input_log, offline_sketches, replay_window, reports, write_config

SIZE = 10_000
BASE = 1_700_000_000_000 // SIZE * SIZE  # a fixed past time: a replay's range


def _log(topic: str) -> None:
    """Two partitions, 3 windows: 1,200 messages of 1-60 addresses each, timestamps increasing per
    partition, the partitions' times interleaved."""
    rng = np.random.default_rng(11)
    pool = rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)
    producer = PackedProducer({"bootstrap.servers": BOOTSTRAP}, topic)
    for p in (0, 1):
        t = BASE + p * 7
        for _ in range(600):
            t += int(rng.integers(0, 100))
            n = int(rng.integers(1, 60))
            addrs = pool[np.minimum(rng.zipf(1.2, n), 2000) - 1]
            producer._producer.send(
                topic, value=pack_ipv4(addrs), partition=p, timestamp_ms=min(t, BASE + 3 * SIZE - 1)
            )
    producer.flush()
    producer.close()


def _replay(
    tmp_path: Path, topic: str, name: str, slow_ms: int = 0, **flink
) -> tuple[dict[str, bytes], list[bytes], object]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = write_config(
        tmp_path,
        name,
        kafka={"input_topic": topic},
        window=replay_window(BASE, 3, SIZE),
        privacy={"epsilon": 2.0, "tau": 1500.0, "counters": 32, "partitions": 2, "seed": 5},
        flink=flink,
        output={"test_slow_decode_ms": slow_ms},
    )
    from stream.config import load_config

    cfg = load_config(config, environ={})
    result = subprocess.run([*JOB, str(config)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    dumps = {p.name: p.read_bytes() for p in sorted((tmp_path / "sketches").glob("*.bin"))}
    return dumps, reports(cfg), cfg


def test_the_same_log_replayed_with_other_timing_gives_identical_sketches_and_reports(broker, tmp_path: Path) -> None:
    topic = f"e2e-canonical-{uuid.uuid4().hex[:8]}-in"
    create_topics({"bootstrap.servers": BOOTSTRAP}, [topic], partitions=2)
    _log(topic)
    runs = [
        _replay(tmp_path / "p1", topic, "canon-p1", parallelism=1, batch_max_messages=4096),
        _replay(tmp_path / "slow", topic, "canon-slow", parallelism=2, slow_ms=40),
        _replay(tmp_path / "small", topic, "canon-small", parallelism=2, batch_max_messages=7),
    ]
    (dumps, published, cfg), *others = runs
    assert len(dumps) == 3 * 4 * 2  # every (window, level, partition)
    for other_dumps, other_reports, _ in others:
        assert other_dumps == dumps  # byte-identical sketches
        assert other_reports == published  # and, with the same seed, identical reports
    assert [json.loads(r)["window"]["start_ms"] for r in published] == [BASE, BASE + SIZE, BASE + 2 * SIZE]
    from sketches.misra_gries import MisraGries

    oracle = offline_sketches(cfg, input_log(cfg), cfg.schedule(BASE))
    got = {}
    for name, data in dumps.items():
        window, sid = (int(x) for x in name.removesuffix(".bin").removeprefix("window-").split("-sketch-"))
        got[(window, sid)] = MisraGries.from_bytes(data)
    assert {k: v for k, v in got.items() if v.total} == oracle
    assert max(len(mg.counters()) for mg in oracle.values()) == 32  # κ is full: the order decides
