"""The one source of randomness for every privacy mechanism.

Every sampler in :mod:`dphhh.privacy.noise` draws its randomness through a :class:`RandomSource`.
Production code uses :class:`SecureRandomSource`, which reads the operating system's
cryptographically secure generator (``os.urandom`` / ``getrandom``). Tests and reproducible
experiments pass a seeded :class:`numpy.random.Generator` (wrapped by :class:`SeededRandomSource`);
output produced that way is **not** private (the seed determines the noise) and reports say so.

A source provides only two primitives, so that the transformation from raw bits to a distribution
lives in one audited place (:mod:`dphhh.privacy.noise`):

* ``bits(n)``: ``n`` independent uniformly random 64-bit words (``numpy.uint64``);
* ``randbelow(m)``: one uniformly random integer in ``[0, m)`` for an arbitrary Python ``int``
  ``m >= 1`` (exact, unbounded, for the exact samplers that work in rational arithmetic).
"""

from __future__ import annotations

import os
import secrets
from typing import Protocol, runtime_checkable

import numpy as np

from dphhh.sketches.errors import UsageError

__all__ = ["RandomSource", "SecureRandomSource", "SeededRandomSource", "as_source"]


@runtime_checkable
class RandomSource(Protocol):
    """Uniform random bits for the samplers."""

    #: ``True`` only for a source whose output cannot be predicted (the secure source).
    secure: bool

    def bits(self, n: int) -> np.ndarray:
        """Return ``n`` independent uniform ``uint64`` words."""
        ...

    def randbelow(self, m: int) -> int:
        """Return a uniform integer in ``[0, m)``; ``m`` is a Python ``int`` >= 1."""
        ...


class SecureRandomSource:
    """Cryptographically secure randomness from the operating system (``os.urandom``)."""

    secure = True

    def bits(self, n: int) -> np.ndarray:
        if n < 0:
            raise UsageError(f"SecureRandomSource: n must be >= 0, got {n!r}")
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()

    def randbelow(self, m: int) -> int:
        if m < 1:
            raise UsageError(f"SecureRandomSource: m must be >= 1, got {m!r}")
        return secrets.randbelow(m)

    def __repr__(self) -> str:
        return "SecureRandomSource()"


class SeededRandomSource:
    """Reproducible randomness from a seeded numpy ``Generator``: for tests and experiments only."""

    secure = False

    def __init__(self, generator: np.random.Generator | int | None = None) -> None:
        if isinstance(generator, np.random.Generator):
            self.generator = generator
        else:
            self.generator = np.random.default_rng(generator)

    def bits(self, n: int) -> np.ndarray:
        if n < 0:
            raise UsageError(f"SeededRandomSource: n must be >= 0, got {n!r}")
        return self.generator.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)

    def randbelow(self, m: int) -> int:
        if m < 1:
            raise UsageError(f"SeededRandomSource: m must be >= 1, got {m!r}")
        if m <= 2**63:
            return int(self.generator.integers(0, m))
        # Arbitrary precision: rejection sampling over enough 64-bit words.
        nbits = (m - 1).bit_length()
        words = (nbits + 63) // 64
        while True:
            value = 0
            for word in self.bits(words):
                value = (value << 64) | int(word)
            value >>= words * 64 - nbits
            if value < m:
                return value

    def __repr__(self) -> str:
        return f"SeededRandomSource({self.generator!r})"


_SECURE = SecureRandomSource()


def as_source(rng: RandomSource | np.random.Generator | int | None) -> RandomSource:
    """Normalise the ``rng`` argument accepted by every mechanism.

    ``None`` gives the secure source; a numpy ``Generator`` or an ``int`` seed gives a
    :class:`SeededRandomSource` (tests only); a :class:`RandomSource` is returned unchanged.
    """
    if rng is None:
        return _SECURE
    if type(rng) in (SeededRandomSource, SecureRandomSource):  # the usual sources: no Protocol check (slow)
        return rng  # type: ignore[return-value]
    if isinstance(rng, (np.random.Generator, int)) and not isinstance(rng, bool):
        return SeededRandomSource(rng)
    if isinstance(rng, RandomSource):
        return rng
    raise TypeError(
        "rng: expected None (secure source), a numpy Generator, an int seed or a RandomSource, "
        f"got {type(rng).__name__}"
    )
