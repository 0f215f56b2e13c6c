"""Traffic of the embedded default: the demo's sample stream and the live feeder of ``dphhh run --feed``.

Both are built from the bundled SYN-ACK reflection capture (:data:`dphhh.stream.paths.DEMO_CAPTURE`)
and seeded synthetic traffic with planted heavy prefixes (:func:`dphhh.connectors.synthetic.synthetic_addresses`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from dphhh.connectors.kafka_io import PackedProducer, pack_ipv4
from dphhh.connectors.synthetic import synthetic_addresses

from .config import JobConfig
from .paths import DEMO_CAPTURE
from .paths import capture as bundled_capture

__all__ = ["feed_forever", "sample_stream"]


def sample_stream(window_ms: int, base_ms: int, capture: Path | None) -> list[tuple[int, bytes]]:
    """The demo's sample: (timestamp ms, message value) over six windows.

    window 0: the bundled SYN-ACK reflection capture; windows 1, 3, 4: synthetic traffic with
    planted heavy prefixes; window 2: nothing (an empty window still gets its report);
    window 5: background only; plus three malformed messages (dead-lettered).
    """
    from dphhh.connectors.pcap import read_capture_sources

    messages: list[tuple[int, bytes]] = []

    def add(window: int, addresses: np.ndarray, batch: int = 1000) -> None:
        start = base_ms + window * window_ms
        chunks = max(1, -(-len(addresses) // batch))
        for i in range(chunks):
            ts = start + (i * (window_ms - 1)) // chunks
            messages.append((ts, pack_ipv4(addresses[i * batch : (i + 1) * batch])))

    if capture is not None and capture.exists():
        values, _ = read_capture_sources(capture)
        add(0, values)
    for window, seed in ((1, 1), (3, 3), (4, 4)):
        add(window, synthetic_addresses(50_000, seed=seed))
    add(5, np.random.default_rng(5).integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32))
    bad_ts = base_ms + 4 * window_ms + 7
    messages += [(bad_ts, b"\x01\x02\x03"), (bad_ts, b""), (bad_ts, b"x" * 4097 * 4 + b"abc")]
    return messages


def feed_forever(cfg: JobConfig, stop: threading.Event, rate: float, batch: int) -> None:
    """The embedded default's producer: the bundled capture and synthetic traffic, timestamp = now
    (a live input topic records the broker's arrival time anyway)."""
    capture = bundled_capture(DEMO_CAPTURE)
    parts = []
    if capture.exists():
        from dphhh.connectors.pcap import read_capture_sources

        parts.append(read_capture_sources(capture)[0])
    parts.append(synthetic_addresses(200_000, seed=7))
    stream = np.concatenate(parts)
    producer = PackedProducer(cfg.kafka_client_options(), cfg.kafka.input_topic)
    sent, t0, i = 0, time.monotonic(), 0
    try:
        while not stop.is_set():
            chunk = stream[i : i + batch]
            i = (i + batch) % len(stream)
            producer.send_value(pack_ipv4(chunk), int(time.time() * 1000))
            sent += len(chunk)
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                stop.wait(ahead)
    finally:
        producer.close()
