"""Compiled keyed BLAKE2b (RFC 7693) of many short messages at once, bit for bit ``hashlib.blake2b``.

:meth:`dphhh.sketches.keyed.KeySecret.digests` hashes a batch's distinct path or IPv6 prefixes
with it: the same keys as :meth:`~dphhh.sketches.keyed.KeySecret.digest` (``hashlib``, one call
per message; ``tests/sketches/test_keyed.py`` compares the two on every length around the block
boundaries), without a Python call per message (docs/ALGORITHMS.md §1 "Keys": a key is the keyed
hash of (prefix, level); which implementation computes it is not observable).

Only what keyed hashing needs: a key of 1..64 bytes, a digest of 1..64 bytes, no salt or
personalisation. A keyed BLAKE2b first compresses the key padded to one 128-byte block, then the
message; :func:`keyed_chain` computes the chain value after the key block once per key, and
:func:`blake2b_after_key` each message from there (the message must not be empty: the key block
is then the last one, which this kernel does not handle; the callers append a level suffix).
Every message costs the same per 128-byte block whatever its bytes.

Words are read little-endian, as the RFC specifies (``_word``), so the result does not depend on
the machine's byte order.
"""

from __future__ import annotations

import numpy as np

from ._mg_kernel import njit

__all__ = ["keyed_chain", "blake2b_after_key", "BLOCK"]

#: BLAKE2b's block size in bytes.
BLOCK = 128

_IV = np.array(
    [
        0x6A09E667F3BCC908,
        0xBB67AE8584CAA73B,
        0x3C6EF372FE94F82B,
        0xA54FF53A5F1D36F1,
        0x510E527FADE682D1,
        0x9B05688C2B3E6C1F,
        0x1F83D9ABFB41BD6B,
        0x5BE0CD19137E2179,
    ],
    dtype=np.uint64,
)

_SIGMA = np.array(
    [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
        [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
        [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
        [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
        [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
        [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
        [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
        [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
        [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    ],
    dtype=np.int64,
)


@njit(cache=True, inline="always")
def _rotr(x, b):
    return (x >> np.uint64(b)) | (x << np.uint64(64 - b))


@njit(cache=True, inline="always")
def _g(v, a, b, c, d, x, y):
    v[a] = v[a] + v[b] + x
    v[d] = _rotr(v[d] ^ v[a], 32)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 24)
    v[a] = v[a] + v[b] + y
    v[d] = _rotr(v[d] ^ v[a], 16)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 63)


@njit(cache=True)
def _compress(h, m, t, last, v, iv, sigma):
    """RFC 7693 F: ``h`` updated in place by the block of words ``m`` at byte counter ``t`` (< 2⁶⁴)."""
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = iv[i]
    v[12] ^= t
    if last:
        v[14] = ~v[14]
    for r in range(12):
        s = sigma[r % 10]  # rounds 10 and 11 reuse the first two permutations (RFC 7693 §3.2)
        _g(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _g(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _g(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _g(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _g(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _g(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _g(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _g(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@njit(cache=True)
def _load_block(data, start, stop, m):
    """The bytes ``data[start:stop]`` (at most one block) as 16 little-endian words, zero-padded."""
    for w in range(16):
        m[w] = np.uint64(0)
    for j in range(stop - start):
        m[j >> 3] |= np.uint64(data[start + j]) << np.uint64((j & 7) * 8)


@njit(cache=True)
def _keyed_chain(key, digest_size, iv, sigma):
    h = iv.copy()
    h[0] ^= np.uint64(0x01010000) ^ (np.uint64(key.shape[0]) << np.uint64(8)) ^ np.uint64(digest_size)
    m = np.zeros(16, dtype=np.uint64)
    v = np.empty(16, dtype=np.uint64)
    _load_block(key, 0, key.shape[0], m)
    _compress(h, m, np.uint64(BLOCK), False, v, iv, sigma)
    return h


def keyed_chain(key: bytes, digest_size: int) -> np.ndarray:
    """The chain value (8 words) of ``blake2b(key=key, digest_size=digest_size)`` after its key block."""
    if not 1 <= len(key) <= 64 or not 1 <= digest_size <= 64:
        raise ValueError("keyed_chain: the key and the digest must be 1..64 bytes")
    return _keyed_chain(np.frombuffer(bytes(key), dtype=np.uint8), np.int64(digest_size), _IV, _SIGMA)


@njit(cache=True)
def _after_key(chain, data, ends, mask, out, iv, sigma):
    m = np.zeros(16, dtype=np.uint64)
    v = np.empty(16, dtype=np.uint64)
    h = np.empty(8, dtype=np.uint64)
    start = 0
    for i in range(ends.shape[0]):
        stop = ends[i]
        for w in range(8):
            h[w] = chain[w]
        t = np.uint64(BLOCK)
        pos = start
        while stop - pos > BLOCK:  # every block but the last (which may be full)
            _load_block(data, pos, pos + BLOCK, m)
            t += np.uint64(BLOCK)
            _compress(h, m, t, False, v, iv, sigma)
            pos += BLOCK
        _load_block(data, pos, stop, m)
        t += np.uint64(stop - pos)
        _compress(h, m, t, True, v, iv, sigma)
        out[i] = np.int64(h[0] & mask)
        start = stop


def blake2b_after_key(chain: np.ndarray, data: np.ndarray, ends: np.ndarray, bits: int) -> np.ndarray:
    """The first 8 digest bytes (little-endian, as an int) of each message ``data[ends[i-1]:ends[i]]``
    hashed from ``chain`` (:func:`keyed_chain`), reduced to ``bits`` (1..63) bits: int64 keys >= 0.
    Every message must hold at least one byte."""
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    out = np.empty(ends.shape[0], dtype=np.int64)
    if ends.size:
        if np.any(np.diff(ends, prepend=0) < 1):
            raise ValueError("blake2b_after_key: every message must hold at least one byte")
        _after_key(chain, data, ends, np.uint64((1 << bits) - 1), out, _IV, _SIGMA)
    return out
