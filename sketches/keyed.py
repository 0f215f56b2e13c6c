"""Secret, per-window sketch keys for prefixes that do not fit 63 bits (docs/ALGORITHMS.md §1 "Keys").

IPv4 prefixes, and the IPv4 × IPv4 pair nodes with at most 63 significant bits, are their own keys
(exact, collision-free). Every other prefix — a path, an IPv6 prefix, the /32 × /32 host-pair
node, a pair with an IPv6 or path side — is given a 63-bit key by a **keyed** hash:

* the key of a deployment (:class:`KeySecret`, 32 bytes from the secure source, kept beside the
  release ledger with mode 0600; or derived from the test seed) is never output;
* each window gets its own key, ``BLAKE2b(key=deployment key, "dphhh.window" ‖ start)``, and each
  level its own sub-key, so the hash of one window tells nothing about another's;
* strings and byte prefixes are hashed with keyed BLAKE2b (:meth:`KeySecret.digest`); 64-bit and
  128-bit values with SipHash-2-4 (:func:`siphash_words`, compiled, vectorised).

Nobody who has not read the key can compute a collision, and two prefixes that do collide by
chance are **merged** — one counter, labelled with the smaller prefix — never refused: no input
can make the engine fail. docs/calibration.md §8 proves what a merge can cost: an element whose
prefix collides with a key held by the window's final sketch can change a released label, with
probability at most κ·2⁻⁶³ over the window's key (``KEY_BITS`` bits), which the stream job
charges to δ (:func:`collision_delta`).

``KEY_BITS`` is 63 in production; tests lower it to craft collisions (the code paths are the same).

Its compiled kernels are cached by numba with their module's name, ``dphhh.sketches.keyed`` since the
namespace change (this line also invalidates caches a checkout wrote under the old name).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._blake2b_kernel import blake2b_after_key, keyed_chain
from ._mg_kernel import njit
from .errors import OperationalError, UsageError

__all__ = ["KEY_BITS", "KeySecret", "siphash_words", "siphash_reference", "collision_delta", "SECRET_FILE"]

#: Width of a hashed sketch key (tests lower it to craft collisions; read when a key is made).
KEY_BITS = 63
#: The deployment key's file name in the ledger folder (mode 0600).
SECRET_FILE = "key-secret"
_SECRET_BYTES = 32


def collision_delta(kappa: int, bits: int | None = None) -> float:
    """The δ one element's prefix costs at one hashed level through label merges: κ·2^-bits — the
    probability, over the window's secret key, that its key meets one of the ≤ κ keys of the
    window's final sketch (docs/calibration.md §8). The stream job charges it per distinct prefix of
    a privacy unit and per hashed level (``stream.config``)."""
    return int(kappa) * 2.0 ** (-(KEY_BITS if bits is None else int(bits)))


class KeySecret:
    """A secret hash key (32 bytes) with per-window and per-level derivations."""

    __slots__ = ("_key", "_digest_state", "_chain")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) != _SECRET_BYTES:
            raise UsageError(f"KeySecret: the key must be {_SECRET_BYTES} bytes")
        self._key = bytes(key)
        # BLAKE2b keyed once: digest() copies it per message instead of keying a new state (the same
        # hash, ~2.5x faster per call; every call costs the same)
        self._digest_state = self.keyed_blake2b(8)
        self._chain: np.ndarray | None = None  # the same state for the compiled digests(), made at first use

    @classmethod
    def generate(cls) -> KeySecret:
        """A fresh key from the operating system's secure generator."""
        return cls(secrets.token_bytes(_SECRET_BYTES))

    @classmethod
    def from_seed(cls, seed: int) -> KeySecret:
        """A reproducible key for a seeded (NOT private) run: tests compare runs key for key."""
        return cls(hashlib.blake2b(b"dphhh.seeded-key:%d" % int(seed), digest_size=_SECRET_BYTES).digest())

    @classmethod
    def load_or_create(cls, directory: str | os.PathLike[str]) -> KeySecret:
        """The deployment key stored in ``directory`` (the release ledger), created (0600) on first use."""
        path = Path(directory) / SECRET_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            fresh = secrets.token_bytes(_SECRET_BYTES)
            tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    os.write(fd, fresh)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                try:
                    os.link(tmp, path)  # atomic: the first writer's key wins
                except FileExistsError:
                    pass
                finally:
                    tmp.unlink(missing_ok=True)
                data = path.read_bytes()
            except OSError as exc:
                raise OperationalError(f"KeySecret: cannot create {path}: {exc.strerror}") from None
        except OSError as exc:
            raise OperationalError(f"KeySecret: cannot read {path}: {exc.strerror}") from None
        if len(data) != _SECRET_BYTES:
            raise OperationalError(f"KeySecret: {path} is not a key ({len(data)} bytes); restore it or start anew")
        return cls(data)

    def window(self, start_ms: int) -> KeySecret:
        """The key of the window starting at ``start_ms``."""
        msg = b"dphhh.window:" + int(start_ms).to_bytes(8, "little", signed=True)
        return KeySecret(hashlib.blake2b(msg, key=self._key, digest_size=_SECRET_BYTES).digest())

    def purpose(self, name: bytes) -> KeySecret:
        """The key of one use of this key, ``BLAKE2b(key, "dphhh.purpose:" ‖ name)`` (e.g. ``b"unit"``
        for privacy-unit keys, :func:`dphhh.privacy.unit_cap.unit_keys_of`): keys of different uses, and
        the per-window keys, tell nothing about each other."""
        msg = b"dphhh.purpose:" + bytes(name)
        return KeySecret(hashlib.blake2b(msg, key=self._key, digest_size=_SECRET_BYTES).digest())

    def keyed_blake2b(self, digest_size: int, person: bytes = b"") -> hashlib.blake2b:
        """A BLAKE2b state keyed with this key (``digest_size`` bytes, personalisation ``person``):
        to hash many messages, ``copy()`` it and ``update()`` the copy with each."""
        return hashlib.blake2b(key=self._key, digest_size=digest_size, person=person)

    def level(self, level: int, tag: bytes = b"") -> tuple[int, int]:
        """The two 64-bit SipHash keys of one level (``tag`` separates uses within a level)."""
        msg = b"dphhh.level:" + int(level).to_bytes(4, "little") + tag
        digest = hashlib.blake2b(msg, key=self._key, digest_size=16).digest()
        return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")

    def digest(self, level: int, data: bytes, bits: int | None = None) -> int:
        """The keyed ``bits``-bit hash (default :data:`KEY_BITS`) of ``data`` at ``level``."""
        width = KEY_BITS if bits is None else bits
        h = self._digest_state.copy()  # = self.keyed_blake2b(8)
        h.update(data)
        h.update(b"\x00" + int(level).to_bytes(4, "little"))  # a fixed-length suffix: (data, level) is injective
        return int.from_bytes(h.digest(), "little") & ((1 << width) - 1)

    def digests(self, level: int, messages: Sequence[bytes], bits: int | None = None) -> np.ndarray:
        """:meth:`digest` of each message at ``level``, as int64 keys: the same keys, computed by the
        compiled BLAKE2b of :mod:`dphhh.sketches._blake2b_kernel` in one call for the batch."""
        if not len(messages):
            return np.empty(0, dtype=np.int64)
        suffix = b"\x00" + int(level).to_bytes(4, "little")  # as digest(): (data, level) is injective
        data = np.frombuffer(suffix.join(messages) + suffix, dtype=np.uint8)
        ends = np.cumsum(np.fromiter(map(len, messages), dtype=np.int64, count=len(messages)) + len(suffix))
        return self._keys_after(data, ends, bits)

    def text_digests(self, level: int, texts: Sequence[str], bits: int | None = None) -> np.ndarray:
        """:meth:`digests` of the texts' UTF-8 bytes: ASCII texts are joined and encoded in one call
        (their byte lengths are their lengths), others encoded one by one."""
        if not len(texts):
            return np.empty(0, dtype=np.int64)
        suffix = "\x00" + int(level).to_bytes(4, "little").decode("latin-1")
        joined = suffix.join(texts) + suffix
        if not joined.isascii():  # a non-ASCII text, or a level past 127 (never: h <= 64)
            return self.digests(level, [t.encode("utf-8") for t in texts], bits)
        ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + len(suffix))
        return self._keys_after(np.frombuffer(joined.encode("ascii"), dtype=np.uint8), ends, bits)

    def _keys_after(self, data: np.ndarray, ends: np.ndarray, bits: int | None) -> np.ndarray:
        width = KEY_BITS if bits is None else bits
        if not 1 <= width <= 63:
            raise UsageError(f"KeySecret: bits must be in 1..63, got {width}")
        if self._chain is None:
            self._chain = keyed_chain(self._key, 8)
        return blake2b_after_key(self._chain, data, ends, width)

    def __repr__(self) -> str:  # never the key itself
        return "KeySecret(<hidden>)"

    def __reduce__(self):  # shipped to workers as its bytes (cloudpickle)
        return (KeySecret, (self._key,))


_M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash_reference(k0: int, k1: int, message: bytes) -> int:
    """SipHash-2-4 of ``message`` in plain Python (the specification, for tests)."""
    v0, v1, v2, v3 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _M64
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _M64
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _M64
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _M64
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    n = len(message)
    whole = n - n % 8
    for i in range(0, whole, 8):
        m = int.from_bytes(message[i : i + 8], "little")
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = int.from_bytes(message[whole:] + bytes(8 - (n - whole)), "little") | ((n & 0xFF) << 56)
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


@njit(cache=True, inline="always")
def _rot(x, b):
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@njit(cache=True, inline="always")
def _sipround(v0, v1, v2, v3):
    v0 = v0 + v1
    v1 = _rot(v1, 13) ^ v0
    v0 = _rot(v0, 32)
    v2 = v2 + v3
    v3 = _rot(v3, 16) ^ v2
    v0 = v0 + v3
    v3 = _rot(v3, 21) ^ v0
    v2 = v2 + v1
    v1 = _rot(v1, 17) ^ v2
    v2 = _rot(v2, 32)
    return v0, v1, v2, v3


@njit(cache=True)
def _siphash16(k0, k1, a, b, mask, out):
    """SipHash-2-4 of the 16-byte messages ``a[i] ‖ b[i]`` (little-endian words), masked."""
    for i in range(a.shape[0]):
        v0 = k0 ^ np.uint64(0x736F6D6570736575)
        v1 = k1 ^ np.uint64(0x646F72616E646F6D)
        v2 = k0 ^ np.uint64(0x6C7967656E657261)
        v3 = k1 ^ np.uint64(0x7465646279746573)
        for m in (a[i], b[i]):
            v3 ^= m
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
            v0 ^= m
        last = np.uint64(16) << np.uint64(56)
        v3 ^= last
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= last
        v2 ^= np.uint64(0xFF)
        for _ in range(4):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        out[i] = np.int64((v0 ^ v1 ^ v2 ^ v3) & mask)


def siphash_words(keys: tuple[int, int], a: np.ndarray, b: np.ndarray, bits: int | None = None) -> np.ndarray:
    """SipHash-2-4 (keys ``(k0, k1)``) of each 16-byte message ``a[i] ‖ b[i]`` (uint64 words,
    little-endian), reduced to ``bits`` bits (default :data:`KEY_BITS`), as int64 keys >= 0."""
    width = KEY_BITS if bits is None else bits
    if not 1 <= width <= 63:
        raise UsageError(f"siphash_words: bits must be in 1..63, got {width}")
    a = np.ascontiguousarray(a, dtype=np.uint64)
    b = np.ascontiguousarray(b, dtype=np.uint64)
    if a.shape != b.shape:
        raise UsageError("siphash_words: the two word arrays must have one length")
    out = np.empty(a.shape[0], dtype=np.int64)
    if a.size:
        _siphash16(np.uint64(keys[0]), np.uint64(keys[1]), a, b, np.uint64((1 << width) - 1), out)
    return out
