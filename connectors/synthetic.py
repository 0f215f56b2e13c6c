"""Synthetic address streams for demos, tests and benchmarks (seeded, reproducible).

:func:`synthetic_addresses` mixes a few heavy prefixes at several levels (a /8, a /16, a /24 and a
single host, as in a reflection attack) with uniformly random background traffic.
"""

from __future__ import annotations

import numpy as np

from dphhh.sketches.errors import UsageError

__all__ = ["synthetic_addresses", "HEAVY_PREFIXES"]

#: (network, prefix length, share of the stream) of the planted heavy hitters.
HEAVY_PREFIXES = (
    (0x2D000000, 8, 0.15),  # 45.0.0.0/8
    (0xC6336400, 24, 0.10),  # 198.51.100.0/24
    (0xCB007100, 32, 0.05),  # 203.0.113.0 (one host)
    (0x0A140000, 16, 0.10),  # 10.20.0.0/16
)


def synthetic_addresses(n: int, *, seed: int = 0) -> np.ndarray:
    """``n`` IPv4 addresses (uint32): the planted heavy prefixes plus uniform background."""
    if n < 0:
        raise UsageError(f"synthetic_addresses: n must be >= 0, got {n}")
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    pick = rng.random(n)
    low = 0.0
    for network, length, share in HEAVY_PREFIXES:
        chosen = (pick >= low) & (pick < low + share)
        host_bits = 32 - length
        hosts = rng.integers(0, 2**host_bits, int(chosen.sum()), dtype=np.uint64) if host_bits else 0
        out[chosen] = (np.uint64(network) + hosts).astype(np.uint32) if host_bits else np.uint32(network)
        low += share
    return out
