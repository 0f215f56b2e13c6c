"""Bounded soak of the real stream job under bad input: nothing lost, every bad record dead-lettered,
memory flat.

What it does (one run, on this machine, against the local broker)
-----------------------------------------------------------------
* Starts the local Kafka broker if it does not answer (and stops it at the end only then); creates
  fresh input, reports and dead-letter topics with a unique suffix (deleted at the end unless
  ``--keep``).
* Runs the REAL job as the user starts it — ``dphhh run --feed no --config FILE`` (live,
  embedded MiniCluster, parallelism 1) — in its own process group, with ``testing.debug_sketch_dir``
  set: a NON-PRIVATE test hook that dumps each window's sketches at release, so the benchmark can
  count exactly how many good elements the job counted (sum over windows of the level-1 sketch
  totals; every element lands in exactly one level-1 sketch).
* Once the Flink log shows the tasks running, a producer thread publishes for ``--seconds``
  (``--quick``: 60) at ``--rate`` messages/s a mix of about ``1 - --bad-share`` good messages and
  ``--bad-share`` bad ones of many kinds. The live job windows them by arrival (the broker's
  log-append time), so ``--window-ms`` windows are released by the wall clock during the run; the
  per-window tallies are made again from the input log's timestamps. ``packed-ipv4`` (default):
  good = 100-1000 skewed addresses (:func:`dphhh.connectors.synthetic.synthetic_addresses`: planted heavy
  prefixes over a uniform background); bad = empty, long odd-length, truncated batches (odd length),
  random bytes of a length that is not a multiple of 4. ``--format json``: good = ``{"ip": ...}``
  with one address; bad = empty, oversized, invalid UTF-8, not JSON, JSON without the field, a
  non-string field, IPv6 on the IPv4 topic, out-of-range quads. Every bad message's expected reason
  comes from :class:`dphhh.connectors.decode.MessageDecoder` configured like the job (the oracle), and the
  producer keeps exact tallies: good messages and elements per window, bad messages per reason.
* A sampler records every ``--sample-s`` seconds the resident set size (``VmRSS`` from /proc) of
  the job's whole process tree: the ``dphhh`` client, Flink's JVM and the Python worker processes.
* After the producer stops, once the last produced window's report is readable (read_committed;
  it comes at the window's end by the wall clock) and the dead-letter topic holds every expected
  record, the job's own counters are scraped from its Prometheus endpoint and the job is stopped
  with SIGINT to its process group (as a terminal does; ``dphhh run`` exits 130). The benchmark then makes sure no
  process of the job's tree is left.

Printed: messages in, good messages, good elements, bad messages by reason, dead-lettered (records
on the dead-letter topic, by the reason in their JSON), elements counted by the job (sketch dumps),
lost = good elements produced - counted, windows reported (each exactly once, no gap in the
schedule), report latency after each window's end, the memory table (time vs
MB) with the least-squares slope over the second half of the soak, and the job log check.

Exit status 1 unless: lost == 0, dead-lettered == bad (in total and per reason), every produced
window reported exactly once (and no other), memory flat (the fitted growth over the second half is
below ``max(--mem-tolerance-mb, --mem-tolerance-pct % of the mean)``), and the job exited 130
after SIGINT with no process left.

Run (heavy: wrap in the machine's lock)::

    flock /tmp/dphhh-heavy.lock .venv/bin/python benchmarks/fuzz_soak.py --quick        # ~2 min
    flock /tmp/dphhh-heavy.lock .venv/bin/python benchmarks/fuzz_soak.py                # ~11 min
    flock /tmp/dphhh-heavy.lock .venv/bin/python benchmarks/fuzz_soak.py --format json --quick

Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import traceback
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stream_throughput import (  # noqa: E402
    Job,
    Kafka,
    log,
    start_bench_broker,
    tasks_running_at,
    toml_text,
)
from dphhh.connectors.decode import MessageDecoder  # noqa: E402
from dphhh.connectors.kafka_io import PackedProducer, iter_committed_values, pack_ipv4, read_to_end  # noqa: E402
from dphhh.connectors.synthetic import synthetic_addresses  # noqa: E402
from dphhh.sketches.misra_gries import MisraGries  # noqa: E402
from dphhh.stream.assembler import sketch_of_id  # noqa: E402
from dphhh.stream.config import load_config  # noqa: E402

# a test tool: its job uses the [testing] hook debug_sketch_dir, allowed in a test run only (it and
# the job it starts, which inherits this environment)
os.environ["DPHHH_TESTING"] = "1"
MAX_MESSAGE_BYTES = 8192  # the job's input.max_message_bytes: good messages stay far below it
POOL_ADDRESSES = 1 << 21  # the skewed address pool good packed messages are cut from
DUMP_NAME = re.compile(r"window-(\d+)-sketch-(\d+)\.bin$")


# ------------------------------------------------------------------------------------------------
# The message mix


@dataclass
class Message:
    """One produced message: its value, the number of good elements (0 when bad), and for a bad one
    its kind (how it was made) and the reason the decoder oracle gives."""

    value: bytes
    elements: int
    kind: str = ""
    reason: str = ""


class MessageMix:
    """Good and bad messages of one input format, in proportion ``bad_share``.

    Every bad message is classified by ``MessageDecoder`` configured like the job (the oracle); a
    generated "bad" message that the oracle accepts is a bug of this generator and raises.

    Parameters: ``fmt`` ('packed-ipv4' or 'json'), ``bad_share`` in [0, 1), ``seed`` (the stream,
    not privacy noise: the job's noise stays secure), ``min_per_message``/``max_per_message``
    (addresses of a good packed message, 1 <= min <= max, 4·max < MAX_MESSAGE_BYTES).
    """

    def __init__(
        self, fmt: str, bad_share: float, seed: int, min_per_message: int = 100, max_per_message: int = 1000
    ) -> None:
        if fmt not in ("packed-ipv4", "json"):
            raise ValueError(f"MessageMix: format must be packed-ipv4 or json, got {fmt!r}")
        if not 0.0 <= bad_share < 1.0:
            raise ValueError(f"MessageMix: bad_share must be in [0, 1), got {bad_share!r}")
        if not 1 <= min_per_message <= max_per_message or 4 * max_per_message >= MAX_MESSAGE_BYTES:
            raise ValueError(
                f"MessageMix: need 1 <= min_per_message <= max_per_message < {MAX_MESSAGE_BYTES // 4}, "
                f"got {min_per_message}, {max_per_message}"
            )
        self.format, self.bad_share = fmt, bad_share
        self.lo, self.hi = min_per_message, max_per_message
        self.rng = np.random.default_rng(seed)
        self.pool = synthetic_addresses(POOL_ADDRESSES, seed=seed)
        self.packed = pack_ipv4(self.pool)
        self.oracle = MessageDecoder(fmt, max_message_bytes=MAX_MESSAGE_BYTES, json_field="ip")
        self.bad_kinds: dict[str, Callable[[], bytes]] = (
            {
                "empty": lambda: b"",
                "long, odd length": self._oversized_packed,
                "truncated batch": self._truncated,
                "random bytes": self._random_odd,
            }
            if fmt == "packed-ipv4"
            else {
                "empty": lambda: b"",
                "oversized": self._oversized_json,
                "invalid UTF-8": self._invalid_utf8,
                "not JSON": self._not_json,
                "field missing": self._field_missing,
                "field not a string": self._field_number,
                "IPv6 on IPv4 topic": self._ipv6,
                "bad quad": self._bad_quad,
                "random bytes": self._random_any,
            }
        )
        self.kind_names = list(self.bad_kinds)

    # good messages
    def _good_packed(self) -> tuple[bytes, int]:
        n = int(self.rng.integers(self.lo, self.hi + 1))
        at = int(self.rng.integers(0, POOL_ADDRESSES - n + 1))
        return self.packed[4 * at : 4 * (at + n)], n

    def _quad(self) -> str:
        a = int(self.pool[int(self.rng.integers(0, POOL_ADDRESSES))])
        return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"

    def _good_json(self) -> tuple[bytes, int]:
        return json.dumps({"ip": self._quad(), "port": int(self.rng.integers(0, 65536))}).encode(), 1

    # bad messages
    def _bytes(self, n: int) -> bytes:
        return self.rng.integers(0, 256, n, dtype=np.uint8).tobytes()

    def _oversized_packed(self) -> bytes:
        """Longer than max_message_bytes and not a whole number of addresses (a packed message is
        decoded whatever its size, so only its length makes it bad)."""
        n = int(self.rng.integers(MAX_MESSAGE_BYTES + 1, 3 * MAX_MESSAGE_BYTES // 2))
        return self._bytes(n + (1 if n % 4 == 0 else 0))

    def _truncated(self) -> bytes:
        value, _ = self._good_packed()
        return value[: len(value) - int(self.rng.integers(1, 4))]

    def _random_odd(self) -> bytes:
        n = int(self.rng.integers(1, 1000)) * 4 + int(self.rng.integers(1, 4))
        return self._bytes(n)

    def _random_any(self) -> bytes:
        return self._bytes(int(self.rng.integers(1, 200)))

    def _oversized_json(self) -> bytes:
        pad = "x" * int(self.rng.integers(MAX_MESSAGE_BYTES, 3 * MAX_MESSAGE_BYTES // 2))
        return json.dumps({"ip": self._quad(), "pad": pad}).encode()

    def _invalid_utf8(self) -> bytes:
        text = json.dumps({"ip": self._quad()}).encode()
        cut = int(self.rng.integers(0, len(text)))
        return text[:cut] + b"\xff\xfe" + text[cut:]

    def _not_json(self) -> bytes:
        text = json.dumps({"ip": self._quad()})
        return text[: int(self.rng.integers(1, len(text)))].encode()  # truncated: never valid JSON

    def _field_missing(self) -> bytes:
        return json.dumps({"src": self._quad(), "port": 80}).encode()

    def _field_number(self) -> bytes:
        return json.dumps({"ip": int(self.rng.integers(0, 2**32))}).encode()

    def _ipv6(self) -> bytes:
        groups = self.rng.integers(0, 65536, 8).tolist()
        return json.dumps({"ip": ":".join(f"{g:x}" for g in groups)}).encode()

    def _bad_quad(self) -> bytes:
        octets = self.rng.integers(0, 256, 4).tolist()
        octets[int(self.rng.integers(0, 4))] = int(self.rng.integers(256, 1000))
        return json.dumps({"ip": ".".join(map(str, octets))}).encode()

    def next(self) -> Message:
        """The next message of the mix."""
        if self.rng.random() >= self.bad_share:
            value, n = self._good_packed() if self.format == "packed-ipv4" else self._good_json()
            return Message(value, n)
        kind = self.kind_names[int(self.rng.integers(0, len(self.kind_names)))]
        value = self.bad_kinds[kind]()
        decoded = self.oracle.decode(value)
        if decoded.ok:
            raise AssertionError(f"MessageMix: generated a {kind!r} message that decodes as good")
        return Message(value, 0, kind, decoded.reason or "")


# ------------------------------------------------------------------------------------------------
# The producer


@dataclass
class Tally:
    """The producer's exact record of what it published."""

    messages: int = 0
    bytes: int = 0
    good_messages: Counter = field(default_factory=Counter)  # window start -> messages
    good_elements: Counter = field(default_factory=Counter)  # window start -> elements
    bad_by_reason: Counter = field(default_factory=Counter)
    bad_by_kind: Counter = field(default_factory=Counter)
    first_ts: int | None = None
    last_ts: int | None = None


class SoakProducer(threading.Thread):
    """Publishes the mix for ``seconds`` at up to ``rate`` messages/s (0 = as fast as it can), with
    the wall clock as event time (never decreasing); tallies everything it published."""

    def __init__(self, options: dict, topic: str, mix: MessageMix, seconds: float, rate: float, window_ms: int) -> None:
        super().__init__(daemon=True)
        if seconds <= 0 or rate < 0 or window_ms < 1:
            raise ValueError(
                f"SoakProducer: need seconds > 0, rate >= 0, window_ms >= 1, got {seconds}, {rate}, {window_ms}"
            )
        self.options, self.topic, self.mix = options, topic, mix
        self.seconds, self.rate, self.window_ms = seconds, rate, window_ms
        self.tally = Tally()
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.started_at = self.last_send = self.ended_at = None  # monotonic

    def run(self) -> None:
        t = self.tally
        producer = PackedProducer(self.options, self.topic)
        try:
            self.started_at = t0 = time.monotonic()
            last_log = t0
            ts = 0
            while not self.stop_event.is_set():
                now = time.monotonic()
                if now - t0 >= self.seconds:
                    break
                if self.rate:
                    ahead = t.messages / self.rate - (now - t0)
                    if ahead > 0.002:
                        time.sleep(min(ahead, 0.05))
                        continue
                msg = self.mix.next()
                ts = max(ts, int(time.time() * 1000))
                producer.send_value(msg.value, ts)
                t.messages += 1
                t.bytes += len(msg.value)
                t.first_ts = ts if t.first_ts is None else t.first_ts
                t.last_ts = ts
                self.last_send = now
                if msg.elements:
                    window = ts // self.window_ms * self.window_ms
                    t.good_messages[window] += 1
                    t.good_elements[window] += msg.elements
                else:
                    t.bad_by_reason[msg.reason] += 1
                    t.bad_by_kind[msg.kind] += 1
                if now - last_log > 15:
                    last_log = now
                    log(
                        f"  producer: {now - t0:.0f} s, {t.messages:,} messages "
                        f"({t.messages / (now - t0):,.0f}/s), {sum(t.bad_by_reason.values()):,} bad"
                    )
            producer.flush()
        except BaseException as exc:  # reported by the caller
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            try:
                producer.close()
            except Exception as exc:
                self.error = self.error or exc


# ------------------------------------------------------------------------------------------------
# Memory of the job's process tree


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every live, non-zombie process."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z":
            out[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    return out


def job_tree(root: int) -> list[int]:
    """The live processes of the job: ``root``'s descendants plus its process group's members."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = {root} if root in table else set()
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    found |= {pid for pid, (_, pgid) in table.items() if pgid == root}
    return sorted(found)


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        return None
    return 0.0


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "client"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    exe = os.path.basename(cmd[0].decode(errors="replace")) if cmd and cmd[0] else ""
    if exe == "java":
        return "jvm"
    if exe.startswith("python"):
        return "python workers"
    return "other"


ROLES = ("client", "jvm", "python workers", "other")


@dataclass
class Sample:
    t: float  # monotonic
    mb: dict[str, float]
    processes: int

    @property
    def total(self) -> float:
        return sum(self.mb.values())


class MemorySampler(threading.Thread):
    """Samples the RSS of the job's process tree every ``period_s``; remembers every pid it saw."""

    def __init__(self, root: int, period_s: float) -> None:
        super().__init__(daemon=True)
        self.root, self.period_s = root, period_s
        self.samples: list[Sample] = []
        self.seen: dict[int, str] = {}
        self.stop_event = threading.Event()

    def sample(self) -> None:
        mb = dict.fromkeys(ROLES, 0.0)
        pids = job_tree(self.root)
        for pid in pids:
            role = self.seen.setdefault(pid, _role(pid, self.root))
            rss = _rss_mb(pid)
            if rss is not None:
                mb[role] += rss
        if pids:  # nothing to sample once the job has ended
            self.samples.append(Sample(time.monotonic(), mb, len(pids)))

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(self.period_s)


def slope_per_minute(samples: list[Sample]) -> float:
    """Least-squares slope of total MB over time, in MB/min."""
    t = np.array([s.t for s in samples]) / 60.0
    y = np.array([s.total for s in samples])
    return float(np.polyfit(t - t.mean(), y, 1)[0])


@dataclass
class MemoryVerdict:
    flat: bool
    text: str


def memory_verdict(samples: list[Sample], start: float, end: float, tol_mb: float, tol_pct: float) -> MemoryVerdict:
    """Fit over the samples of the soak's second half ([start + (end-start)/2, end]): flat when the
    fitted growth over that span is below max(tol_mb, tol_pct % of the mean)."""
    half = [s for s in samples if start + (end - start) / 2 <= s.t <= end]
    if len(half) < 3:
        return MemoryVerdict(False, f"NOT measured: {len(half)} sample(s) in the second half (need >= 3)")
    slope = slope_per_minute(half)
    span_min = (half[-1].t - half[0].t) / 60.0
    growth = slope * span_min
    mean = float(np.mean([s.total for s in half]))
    tolerance = max(tol_mb, tol_pct / 100.0 * mean)
    flat = growth < tolerance
    return MemoryVerdict(
        flat,
        (
            f"second half ({len(half)} samples over {span_min * 60:.0f} s): slope {slope:+.2f} MB/min, fitted growth "
            f"{growth:+.1f} MB ({100 * growth / mean:+.2f} % of the mean {mean:.0f} MB); tolerance "
            f"max({tol_mb:g} MB, {tol_pct:g} %) = {tolerance:.1f} MB: {'flat' if flat else 'NOT flat'}"
        ),
    )


# ------------------------------------------------------------------------------------------------
# The job


@dataclass
class _Host:
    """What :class:`benchmarks.stream_throughput.Job` needs from its benchmark."""

    work: Path
    prefix: str
    bootstrap: str
    kafka: Kafka
    job_set: list[str]


class SoakJob(Job):
    """The unbounded job with this benchmark's settings; stopped by SIGINT to its process group."""

    def __init__(self, host: _Host, topics: dict[str, str], *, fmt: str, window_ms: int, checkpoint_ms: int) -> None:
        super().__init__(host, "soak", topics, windows=None, fmt=fmt, checkpoint_ms=checkpoint_ms)
        values = tomllib.loads(self.config.read_text())
        values["window"]["size_ms"] = window_ms
        values["input"]["max_message_bytes"] = MAX_MESSAGE_BYTES
        values["input"]["json_field"] = "ip"
        self.dump_dir = self.dir / "sketches"
        values.setdefault("testing", {})["debug_sketch_dir"] = str(self.dump_dir)  # NON-PRIVATE test hook
        values["output"]["metrics_port"] = 0  # no fixed port that another run could hold
        self.config.write_text(toml_text(values))
        self.cfg = load_config(self.config, overrides=host.job_set, environ={})
        self.prometheus_port = self.port

    def stop(self) -> None:
        """SIGINT to the whole process group (as a terminal's Ctrl-C); SIGKILL after 90 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal_group(signal.SIGINT)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            log(f"  {self.name}: no exit 90 s after SIGINT: killing its process group {self.proc.pid}")
            self.result.note = "killed: no exit 90 s after SIGINT"
            self._signal_group(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def wait_running(self, timeout_s: float) -> bool:
        """Wait until the Flink log shows tasks RUNNING and no new task started for 3 s."""
        deadline = time.monotonic() + timeout_s
        last, since = None, time.monotonic()
        while time.monotonic() < deadline and self.alive():
            running = tasks_running_at(sorted((self.dir / "run" / "log").glob("*.log")))
            if running != last:
                last, since = running, time.monotonic()
            elif last is not None and time.monotonic() - since >= 3:
                return True
            time.sleep(0.5)
        return False


def tally_by_arrival(options: dict, topic: str, decoder: MessageDecoder, window_ms: int, tally: Tally) -> None:
    """Count the good messages and elements per window again by their arrival (the broker's log-append
    time, read back from the input topic: the live job's windows), the job's clock records left out."""
    from dphhh.stream.clock import is_tick

    tally.good_messages, tally.good_elements = Counter(), Counter()
    first = last = None
    for ts, value in read_to_end(options, topic):
        if is_tick(value):
            continue
        first = ts if first is None else min(first, ts)
        last = ts if last is None else max(last, ts)
        decoded = decoder.decode(value)
        if decoded.ok:
            tally.good_messages[ts // window_ms * window_ms] += 1
            tally.good_elements[ts // window_ms * window_ms] += len(decoded.values)
    tally.first_ts, tally.last_ts = first, last


def counted_by_window(dump_dir: Path, partitions: int) -> Counter:
    """window start -> elements the job counted: the totals of the dumped level-1 sketches."""
    out: Counter = Counter()
    for path in dump_dir.glob("window-*-sketch-*.bin"):
        m = DUMP_NAME.match(path.name)
        if m is None:
            continue
        level, _ = sketch_of_id(int(m.group(2)), partitions)
        if level == 1:
            out[int(m.group(1))] += MisraGries.from_bytes(path.read_bytes()).total
    return out


def scrape_decode_counters(port: int) -> dict[str, float] | None:
    """The job's decode-operator counters (dead letters by reason, late messages) from its Flink
    Prometheus endpoint, summed over subtasks; None if the endpoint does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    prefix = "flink_taskmanager_job_task_operator_dphhh_decode_"
    out: Counter = Counter()
    for line in text.splitlines():
        if line.startswith(prefix):
            name, _, rest = line[len(prefix) :].partition("{")
            try:
                out[name] += float(rest.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return dict(out)


class DeadLetterTally(threading.Thread):
    """Counts the committed records of the dead-letter topic by the reason in their JSON."""

    def __init__(self, options: dict, topic: str) -> None:
        super().__init__(daemon=True)
        self.options, self.topic = options, topic
        self.by_reason: Counter = Counter()
        self.stop_event = threading.Event()
        self.error: Exception | None = None

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def run(self) -> None:
        try:
            for _, value in iter_committed_values(self.options, self.topic, follow=True, stop=self.stop_event):
                try:
                    reason = str(json.loads(value)["reason"])
                except (ValueError, KeyError, TypeError):
                    reason = "(unreadable dead letter)"
                self.by_reason[reason] += 1
        except Exception as exc:  # reported by the caller
            self.error = exc


def wait_until(
    predicate: Callable[[], bool], timeout_s: float, alive: Callable[[], bool] = lambda: True, every_s: float = 0.25
) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        if not alive():
            return predicate()
        time.sleep(every_s)
    return predicate()


# ------------------------------------------------------------------------------------------------
# The soak


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def say(self, text: str = "") -> None:
        self.lines.append(text)

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)


def run_soak(args: argparse.Namespace, work: Path) -> Outcome:
    out = Outcome()
    kafka = Kafka(args.bootstrap)
    prefix = f"bench-soak-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    host = _Host(work, prefix, args.bootstrap, kafka, list(args.job_set))
    job = producer = dead = sampler = None
    metrics = None
    try:
        topics = kafka.topics(prefix, live=True)
        mix = MessageMix(args.format, args.bad_share, args.seed, args.min_per_message, args.max_per_message)
        job = SoakJob(host, topics, fmt=args.format, window_ms=args.window_ms, checkpoint_ms=args.checkpoint_ms)
        dead = DeadLetterTally(kafka.options, topics["dead_letter_topic"])
        dead.start()
        job.start()
        sampler = MemorySampler(job.proc.pid, args.sample_s)
        sampler.start()
        log(f"waiting for the job's tasks to run (Flink log in {job.dir / 'run' / 'log'}) ...")
        if not job.wait_running(180):
            raise RuntimeError(
                "the job's tasks did not start within 180 s"
                if job.alive()
                else f"the job exited with status {job.proc.returncode} during start-up"
            )
        log(
            f"job running after {time.monotonic() - job.t0:.1f} s; producing for {args.seconds:g} s at "
            f"{'max' if not args.rate else f'{args.rate:,.0f}'} messages/s, {100 * args.bad_share:g} % bad ..."
        )
        producer = SoakProducer(kafka.options, topics["input_topic"], mix, args.seconds, args.rate, args.window_ms)
        producer.start()
        while producer.is_alive():
            producer.join(timeout=1)
            if not job.alive():
                producer.stop_event.set()
                producer.join()
                raise RuntimeError(f"the job exited with status {job.proc.returncode} during the soak")
        if producer.error is not None:
            raise RuntimeError(f"producer failed: {type(producer.error).__name__}: {producer.error}")
        tally = producer.tally
        tally_by_arrival(kafka.options, topics["input_topic"], mix.oracle, args.window_ms, tally)
        windows = list(
            range(
                tally.first_ts // args.window_ms * args.window_ms,
                tally.last_ts // args.window_ms * args.window_ms + 1,
                args.window_ms,
            )
        )
        last = windows[-1]
        t_done = time.monotonic()
        log(
            f"producer done ({tally.messages:,} messages over {len(windows)} windows, by arrival); waiting for the "
            f"last window's report (released by the wall clock) ..."
        )
        if not job.watcher.wait_for(lambda: job.watcher.arrival_of(last) is not None, args.drain_timeout, job.alive):
            out.failures.append(f"no report of the last window within {args.drain_timeout:.0f} s")
        else:
            log(f"  last report readable {time.monotonic() - t_done:.1f} s after the producer stopped")
        bad_total = sum(tally.bad_by_reason.values())
        if not wait_until(lambda: dead.total >= bad_total, 60, dead.is_alive):
            log(f"  dead-letter topic: {dead.total:,} of {bad_total:,} expected records after 60 s")
        time.sleep(2)  # anything beyond the expected count would show up now
        metrics = scrape_decode_counters(job.prometheus_port)
        log("stopping the job: SIGINT to its process group ...")
        result = job.finish()
        sampler.stop_event.set()
        sampler.join(timeout=10)
        left = wait_until(lambda: not [p for p in sampler.seen if p in _proc_table()], 20)
        still = sorted(p for p in sampler.seen if p in _proc_table())
        dead.stop_event.set()
        dead.join(timeout=10)
        report(
            out,
            args,
            job,
            tally,
            windows,
            dead,
            metrics,
            sampler,
            producer,
            result.rc,
            result.problems.summary(),
            still if not left else [],
        )
        for sample in result.problems.samples[:3]:
            out.say(f"    {sample}")
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            out.failures.append("interrupted")
        else:
            log(traceback.format_exc())
            out.failures.append(f"{type(exc).__name__}: {exc}")
        if producer is not None:
            producer.stop_event.set()
        if job is not None and job.proc is not None:
            job.finish()
            if job.proc.returncode not in (0, 130):
                tail = (job.dir / "job.stderr").read_text(errors="replace")[-2000:]
                log(f"end of the job's stderr:\n{tail}")
        if sampler is not None:
            sampler.stop_event.set()
        if dead is not None:
            dead.stop_event.set()
    finally:
        kafka.close()
        if not args.keep:
            kafka.delete_created()
    return out


def report(
    out: Outcome,
    args: argparse.Namespace,
    job: SoakJob,
    tally: Tally,
    windows: list[int],
    dead: DeadLetterTally,
    metrics: dict[str, float] | None,
    sampler: MemorySampler,
    producer: SoakProducer,
    rc: int | None,
    log_check: str,
    left: list[int],
) -> None:
    w = args.window_ms
    good_msgs = sum(tally.good_messages.values())
    good_elems = sum(tally.good_elements.values())
    bad = sum(tally.bad_by_reason.values())
    secs = (producer.last_send or producer.ended_at) - producer.started_at
    out.say(
        f"# fuzz soak: `dphhh run` (embedded MiniCluster, parallelism {job.cfg['flink.parallelism']}), format "
        f"{args.format}, {w / 1000:g}-s windows, {job.cfg.hierarchy.spec()}, κ={job.cfg.params.counters}, "
        f"P={job.cfg.params.partitions}, checkpoints every {args.checkpoint_ms} ms; {platform.node()}: "
        f"{os.cpu_count()} CPUs, load average (1 min) {os.getloadavg()[0]:.2f} at the end"
    )
    out.say(
        f"produced for {secs:.0f} s: {tally.messages:,} messages in ({tally.messages / secs:,.0f}/s, "
        f"{tally.bytes / 1e6:,.1f} MB), {good_elems / secs:,.0f} good elements/s"
        + ("" if not args.rate else f" (rate limit {args.rate:,.0f} messages/s)")
    )
    out.say(f"  good messages        {good_msgs:>12,}")
    out.say(f"  good elements        {good_elems:>12,}")
    out.say(f"  bad messages         {bad:>12,}  ({100 * bad / max(1, tally.messages):.2f} % of messages)")
    for reason, n in sorted(tally.bad_by_reason.items()):
        out.say(f"    {reason:<22} {n:>10,}")
    out.say("    by kind: " + ", ".join(f"{k} {n:,}" for k, n in sorted(tally.bad_by_kind.items())))
    out.say(f"  dead-lettered        {dead.total:>12,}  (records on the dead-letter topic)")
    for reason in sorted(set(dead.by_reason) | set(tally.bad_by_reason)):
        got, want = dead.by_reason.get(reason, 0), tally.bad_by_reason.get(reason, 0)
        out.say(f"    {reason:<22} {got:>10,}" + ("" if got == want else f"   EXPECTED {want:,}"))
    out.check(
        dead.total == bad and dead.by_reason == tally.bad_by_reason,
        f"dead-lettered {dead.total:,} != bad {bad:,} (or the reasons differ)",
    )
    if dead.error is not None:
        out.failures.append(f"dead-letter reader failed: {dead.error}")

    counted = counted_by_window(job.dump_dir, job.cfg.params.partitions)
    counted_in = sum(counted.get(s, 0) for s in windows)
    lost = good_elems - counted_in
    out.say(
        f"  counted by the job   {counted_in:>12,}  (level-1 sketch totals of the produced windows, "
        "NON-PRIVATE debug dumps)"
    )
    out.say(f"  lost                 {lost:>12,}  (good elements produced - counted; must be 0)")
    out.check(lost == 0, f"lost = {lost:,} elements")
    wrong = [s for s in windows if counted.get(s, 0) != tally.good_elements.get(s, 0)]
    extra = sorted(s for s in counted if s not in windows)
    if wrong:
        out.say(
            f"    windows whose count differs: {len(wrong)} (first: "
            + ", ".join(
                f"{s}: produced {tally.good_elements.get(s, 0):,} counted {counted.get(s, 0):,}" for s in wrong[:3]
            )
            + ")"
        )
    if extra:
        out.say(f"    sketch dumps of windows outside the produced range: {extra[:5]}")
        out.check(False, f"sketch dumps of {len(extra)} window(s) outside the produced range")
    if metrics is not None:
        job_dead = {
            k.removeprefix("dead_letters_"): int(v) for k, v in metrics.items() if k.startswith("dead_letters_") and v
        }
        out.say(
            "  job's own counters:  dead letters "
            + (", ".join(f"{k} {v:,}" for k, v in sorted(job_dead.items())) or "none")
            + " (Flink metrics; informational)"
        )
    else:
        out.say("  job's own counters:  n/a (the Prometheus endpoint did not answer)")

    arrivals = list(job.watcher.arrivals)
    seen = Counter(s for _, s in arrivals)
    missing = [s for s in windows if seen.get(s, 0) == 0]
    twice = [s for s in seen if seen[s] > 1]
    schedule = sorted(seen)  # the live schedule: every window from the origin on, data or not
    gaps = [s for s in range(schedule[0], schedule[-1] + w, w) if s not in seen] if schedule else []
    out.say(
        f"  windows reported     {sum(1 for s in windows if seen.get(s) == 1):>12,}  of {len(windows)} produced, "
        f"{len(seen):,} in all (each exactly once, no gap: {'yes' if not (missing or twice or gaps) else 'NO'}; "
        f"missing {len(missing)}, more than once {len(twice)}, gaps {len(gaps)})"
    )
    out.check(
        not (missing or twice or gaps),
        f"windows: {len(missing)} missing, {len(twice)} repeated, {len(gaps)} gaps in the schedule",
    )
    offset = time.time() - time.monotonic()  # monotonic -> epoch seconds
    lat = [t + offset - (s + w) / 1000 for t, s in arrivals if s in windows]
    if lat:
        out.say(
            f"  report latency after a window's end (wall clock, includes the checkpoint wait): median "
            f"{float(np.median(lat)):.2f} s, max {max(lat):.2f} s over {len(lat)} windows"
        )

    # memory
    samples = sampler.samples
    start, end = producer.started_at, producer.ended_at
    out.say("")
    out.say(
        f"memory: RSS of the job's process tree (VmRSS, /proc; {len(sampler.seen)} processes seen; shared "
        f"pages count once per process), every {args.sample_s:g} s; t = seconds since the producer started"
    )
    out.say(f"  {'t (s)':>7} {'phase':<8} {'total MB':>9} " + " ".join(f"{r:>15}" for r in ROLES) + f" {'procs':>6}")
    step = max(1, -(-len(samples) // 40))
    shown = [s for i, s in enumerate(samples) if i % step == 0 or i == len(samples) - 1]
    for s in shown:
        phase = "start-up" if s.t < start else "soak" if s.t <= end else "drain"
        out.say(
            f"  {round(s.t - start):>7d} {phase:<8} {s.total:>9.1f} "
            + " ".join(f"{s.mb[r]:>15.1f}" for r in ROLES)
            + f" {s.processes:>6}"
        )
    if step > 1:
        out.say(f"  (one sample in {step} shown, {len(samples)} in all)")
    soak = [s for s in samples if start <= s.t <= end]
    if soak:
        out.say(f"  during the soak: min {min(s.total for s in soak):.1f} MB, max {max(s.total for s in soak):.1f} MB")
    verdict = memory_verdict(samples, start, end, args.mem_tolerance_mb, args.mem_tolerance_pct)
    out.say(f"  {verdict.text}")
    out.check(verdict.flat, f"memory: {verdict.text}")

    out.say("")
    out.say(
        f"job: exit status {rc} after SIGINT to its process group (130 = clean stop); "
        f"processes left: {left or 'none'}; log check: {log_check}"
    )
    out.check(rc == 130, f"job exit status {rc} (expected 130 after SIGINT)")
    out.check(not left, f"processes left after the job's stop: {left}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument("--seconds", type=float, default=600.0, help="how long the producer sends (default 600)")
    ap.add_argument("--quick", action="store_true", help="a 60-s soak (--seconds 60)")
    ap.add_argument(
        "--rate",
        "--rate-limit",
        dest="rate",
        type=float,
        default=2000.0,
        help="messages/s the producer aims at; 0 = as fast as it can (default 2000)",
    )
    ap.add_argument("--bad-share", type=float, default=0.10, help="share of bad messages (default 0.10)")
    ap.add_argument("--window-ms", type=int, default=5000, help="the job's window.size_ms (default 5000)")
    ap.add_argument(
        "--format",
        choices=("packed-ipv4", "json"),
        default="packed-ipv4",
        help="input format of the topic (default packed-ipv4)",
    )
    ap.add_argument("--min-per-message", type=int, default=100, help="packed: fewest addresses per good message (100)")
    ap.add_argument("--max-per-message", type=int, default=1000, help="packed: most addresses per good message (1000)")
    ap.add_argument("--checkpoint-ms", type=int, default=2000, help="the job's checkpoint interval (default 2000)")
    ap.add_argument("--sample-s", type=float, default=5.0, help="memory sampling period in seconds (default 5)")
    ap.add_argument(
        "--mem-tolerance-mb",
        type=float,
        default=20.0,
        help="memory is flat if its fitted growth over the second half is below this many MB ... (20)",
    )
    ap.add_argument("--mem-tolerance-pct", type=float, default=5.0, help="... or below this %% of the mean (5)")
    ap.add_argument(
        "--drain-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for the last window's report after the producer stops (default 600)",
    )
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated stream (not of the job's noise)")
    ap.add_argument(
        "--set",
        dest="job_set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="passed to the job as `dphhh run --set` (e.g. privacy.partitions=2)",
    )
    ap.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap (default the local broker)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, dumps) and the topics")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds = 60.0
    if args.seconds <= 0 or args.rate < 0 or args.window_ms < 1 or args.sample_s <= 0 or args.checkpoint_ms < 100:
        ap.error("need --seconds > 0, --rate >= 0, --window-ms >= 1, --sample-s > 0, --checkpoint-ms >= 100")
    if not 0.0 <= args.bad_share < 1.0:
        ap.error(f"--bad-share must be in [0, 1), got {args.bad_share}")
    if not 1 <= args.min_per_message <= args.max_per_message < MAX_MESSAGE_BYTES // 4:
        ap.error(f"need 1 <= --min-per-message <= --max-per-message < {MAX_MESSAGE_BYTES // 4}")
    try:
        load_config(None, overrides=args.job_set, environ={})
    except ValueError as exc:
        ap.error(str(exc))

    work = Path(tempfile.mkdtemp(prefix="dphhh-bench-soak-"))
    log(f"work folder: {work}")
    broker = start_bench_broker(args.bootstrap)
    try:
        outcome = run_soak(args, work)
    finally:
        if broker is not None:
            broker.stop()
    for line in outcome.lines:
        print(line)
    if outcome.failures:
        print("FAIL: " + "; ".join(outcome.failures))
    else:
        print(
            "PASS: nothing lost, every bad record dead-lettered with its reason, each window reported once, "
            "memory flat, clean stop"
        )
    if args.keep:
        log(f"kept: {work} (soak/job.toml, job.stderr, run/log, sketches/) and the topics bench-soak-*")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main())
