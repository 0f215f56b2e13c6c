"""A literal reference of what a packed-IPv4 job must have counted: the independent truth of the
exactly-once tests (docs/ALGORITHMS.md §0 "Canonical order", §2; issue 25 item 5).

Nothing here imports the product: the input log is read as the job reads it (record timestamp,
value), and every rule is written out again in plain Python from the configuration's own values —

* **decode**: a packed-IPv4 message is a run of big-endian 32-bit addresses; a length that is not a
  multiple of 4 (or zero) counts nothing;
* **schedule**: an element's time is its record timestamp; its window starts at ``t − t mod size``
  and belongs to the schedule iff ``origin ≤ start`` (and ``start < until`` when the schedule
  ends); live, it counts only if it arrived before its window's release time (end + grace);
* **hierarchy**: level ℓ's key is the address with its last ``32 − prefix_ℓ`` bits cleared;
* **partition**: ``splitmix64(key XOR (ℓ << 40)) mod P`` (the public mixing function, in Python
  integers); the sketch id is ``(ℓ − 1)·P + partition``;
* **canonical order**: a sketch takes its window's keys epoch by epoch (``t − t mod epoch``,
  ascending), each epoch's keys in ascending order;
* **Misra–Gries**: Algorithm 2 one element at a time, κ slots, a new key taking the slot with the
  smallest counter and, among those, the smallest key (``tests/sketches/test_misra_gries.py``'s
  literal reference, with a dictionary for the slot lookup).

A test that compares the job's sketches with :func:`packed_ipv4_truth` therefore compares them with
something the product's decoder, schedule, routing and sketch code did not produce.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LiteralSketch", "packed_ipv4_truth", "splitmix64"]

_M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """The SplitMix64 finaliser on one 64-bit integer."""
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


@dataclass
class LiteralSketch:
    """Algorithm 2 with unit inserts: ``slots`` (key → counter, zero counters kept), ``total``
    elements, ``decrements`` decrement-all steps."""

    kappa: int
    slots: dict[int, int]
    total: int = 0
    decrements: int = 0

    def insert(self, x: int) -> None:
        self.total += 1
        if x in self.slots:  # step 1: x is a key
            self.slots[x] += 1
        elif len(self.slots) < self.kappa:  # a free slot (a dummy with counter 0 and a key below every real one)
            self.slots[x] = 1
        elif min(self.slots.values()) >= 1:  # step 2: every counter >= 1: decrement all, x dropped
            for k in self.slots:
                self.slots[k] -= 1
            self.decrements += 1
        else:  # step 3: the smallest counter, and among those the smallest key, gives its slot to x
            victim = min(self.slots, key=lambda k: (self.slots[k], k))
            del self.slots[victim]
            self.slots[x] = 1

    def matches(self, sketch) -> bool:
        """Whether the product's ``MisraGries`` holds exactly this state."""
        return (
            sketch.k == self.kappa
            and sketch.total == self.total
            and sketch.decrements == self.decrements
            and sketch.counters() == self.slots
        )


def _addresses(value: bytes) -> list[int]:
    if not value or len(value) % 4:
        return []
    return [int.from_bytes(value[i : i + 4], "big") for i in range(0, len(value), 4)]


def _prefix_lengths(spec: str) -> list[int]:
    kind, _, lengths = spec.strip().partition(":")
    assert kind == "ipv4" and " x " not in spec, f"the literal reference reads ipv4:… hierarchies only, not {spec!r}"
    return [int(x) for x in lengths.split(",")]


def packed_ipv4_truth(
    values: dict, origin: int, messages: Iterable[tuple[int, bytes]]
) -> dict[tuple[int, int], LiteralSketch]:
    """(window start, sketch id) → the sketch every non-empty (window, sketch) must hold at its
    release, from the configuration's raw ``values`` (``cfg.values``), the schedule's resolved
    ``origin`` and the input log ``messages`` ((record timestamp, value), clock records left out)."""
    window, privacy = values["window"], values["privacy"]
    assert values["input"]["format"] == "packed-ipv4", values["input"]["format"]
    size, grace, epoch_ms = int(window["size_ms"]), int(window["grace_ms"]), int(window["epoch_ms"])
    until = int(window["until"]) if window.get("until") else None
    live = window["mode"] == "live"
    lengths = _prefix_lengths(values["hierarchy"]["spec"])
    parts, kappa = int(privacy["partitions"]), int(privacy["counters"])
    masks = [(_M64 << (32 - n)) & 0xFFFFFFFF for n in lengths]
    # (window, sketch id) → epoch → keys
    groups: dict[tuple[int, int], dict[int, list[int]]] = {}
    for ts, value in messages:
        if ts is None or ts < 0:
            continue
        start = ts - ts % size
        if start < origin or (until is not None and start >= until):
            continue
        if live and not ts < start + size + grace:
            continue
        epoch = ts - ts % epoch_ms
        for address in _addresses(value):
            for level, mask in enumerate(masks, start=1):
                key = address & mask
                partition = splitmix64(key ^ (level << 40)) % parts
                groups.setdefault((start, (level - 1) * parts + partition), {}).setdefault(epoch, []).append(key)
    out: dict[tuple[int, int], LiteralSketch] = {}
    for where, epochs in groups.items():
        sketch = out[where] = LiteralSketch(kappa, {})
        for epoch in sorted(epochs):
            for key in sorted(epochs[epoch]):
                sketch.insert(key)
    return out
