"""Keyed-hash sketch keys (sketches/keyed.py, docs/ALGORITHMS.md §1 "Keys").

SipHash-2-4 against the specification's test vectors; the deployment key's derivations (per window,
per level) and its file; collisions merged under the smaller prefix — crafted at a lowered key width
(the code paths are the production ones) — for paths, IPv6 prefixes and pairs, the same whatever the
order the prefixes come in; whole-input commands re-key after a chance collision.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import dphhh.sketches.keyed as keyed
from dphhh.sketches.errors import OperationalError
from dphhh.sketches.hierarchy import IPv6Hierarchy, PathHierarchy
from dphhh.sketches.keyed import KEY_BITS, KeySecret, collision_delta, siphash_reference, siphash_words
from dphhh.sketches.specs import parse_hierarchy

K0, K1 = 0x0706050403020100, 0x0F0E0D0C0B0A0908  # the specification's key 00 01 .. 0f


def test_siphash_matches_the_specification_vectors() -> None:
    """Aumasson & Bernstein's SipHash-2-4 vectors (key 00..0f, message 00..0e; and the 16-byte message
    00..0f of the reference implementation's table); the compiled 16-byte kernel equals the reference."""
    assert siphash_reference(K0, K1, bytes(range(15))) == 0xA129CA6149BE45E5
    assert siphash_reference(K0, K1, b"") == 0x726FDB47DD0E0E31
    assert siphash_reference(K0, K1, bytes(range(16))) == 0x3F2ACC7F57C29BDB
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2**64, 200, dtype=np.uint64)
    b = rng.integers(0, 2**64, 200, dtype=np.uint64)
    got = siphash_words((K0, K1), a, b, bits=63)
    want = [
        siphash_reference(K0, K1, int(x).to_bytes(8, "little") + int(y).to_bytes(8, "little")) & ((1 << 63) - 1)
        for x, y in zip(a, b)
    ]
    assert got.tolist() == want and (got >= 0).all()


def test_digest_is_keyed_blake2b_of_the_data_and_the_level_whatever_came_before() -> None:
    """The literal construction: BLAKE2b-64 keyed with the secret over ``data ‖ 0x00 ‖ level (LE32)``,
    cut to the key width — also after other digests (the keyed state is copied, never advanced),
    and for a secret rebuilt from its bytes as workers receive it."""
    secret = KeySecret(bytes(range(32)))
    shipped = pickle.loads(pickle.dumps(secret))
    for level, data in [(1, b"de"), (3, b"de/by/muc"), (1, b""), (2, b"x" * 300), (1, b"de")]:
        reference = hashlib.blake2b(data + b"\x00" + level.to_bytes(4, "little"), key=bytes(range(32)), digest_size=8)
        expected = int.from_bytes(reference.digest(), "little") & ((1 << KEY_BITS) - 1)
        assert secret.digest(level, data) == shipped.digest(level, data) == expected
        assert secret.digest(level, data, bits=20) == expected & ((1 << 20) - 1)


def test_compiled_digests_are_the_hashlib_digests_at_every_length_around_the_blocks() -> None:
    """``digests`` (one compiled BLAKE2b call for a batch) gives :meth:`KeySecret.digest`'s keys for
    every message length from 0 to 300 bytes (so 0, 1 and 2 blocks after the 5-byte level suffix,
    each boundary met exactly) and two long ones, at two levels and two key widths."""
    secret = KeySecret(os.urandom(32))
    rng = np.random.default_rng(8)
    messages = [rng.bytes(n) for n in [*range(301), 1000, 5000]]
    for level in (1, 7):
        for bits in (None, 20):
            got = secret.digests(level, messages, bits=bits)
            assert got.dtype == np.int64
            assert got.tolist() == [secret.digest(level, m, bits=bits) for m in messages]
    assert secret.digests(1, []).shape == (0,)
    texts = ["", "de", "de/by/muc", "é/ü", "x" * 200, "a\x00b", "中文/路"]
    for level in (1, 5):  # texts: ASCII joined and encoded at once, the others one by one
        assert secret.text_digests(level, texts).tolist() == [secret.digest(level, t.encode()) for t in texts]
        ascii_only = [t for t in texts if t.isascii()]
        want = [secret.digest(level, t.encode()) for t in ascii_only]
        assert secret.text_digests(level, ascii_only).tolist() == want


@pytest.mark.parametrize("bits", [6, 63])
@pytest.mark.parametrize("seed", [1, 2])
def test_batched_prefix_keys_learn_the_label_table_as_one_at_a_time_at_any_split(
    monkeypatch: pytest.MonkeyPatch, bits: int, seed: int
) -> None:
    """The batch path (``keys_of``: one compiled call, the label table updated at once where no key
    is shared) and the one-at-a-time path (``key_of``) give the same keys, the same key → smallest
    prefix table and the same merge count, over batches cut at random points: at 6-bit keys (many
    collisions inside a batch and against earlier batches: the item-by-item branch) and at 63 bits
    (none: the update-at-once branch)."""
    monkeypatch.setattr(keyed, "KEY_BITS", bits)
    rng = np.random.default_rng(seed)
    secret = KeySecret.from_seed(seed).window(0)
    prefixes = [f"c{i}/r{rng.integers(0, 50)}" for i in rng.integers(0, 150, 400)]
    one, batched = PathHierarchy(2).keyed(secret), PathHierarchy(2).keyed(secret)
    cuts = np.sort(rng.choice(np.arange(1, len(prefixes)), size=5, replace=False))
    for part in np.split(np.array(prefixes, dtype=object), cuts):
        distinct = list(dict.fromkeys(part.tolist()))
        singles = [one._keys[2].key_of(p, p.encode()) for p in distinct]
        assert batched._keys[2].keys_of(distinct, str.encode).tolist() == singles
    assert batched._keys[2].items == one._keys[2].items
    assert batched._keys[2].merges == one._keys[2].merges
    assert (one._keys[2].merges > 0) == (bits == 6)


def test_keys_are_per_window_and_per_level_and_the_key_never_shows() -> None:
    secret = KeySecret.from_seed(1)
    w0, w1 = secret.window(0), secret.window(10_000)
    assert w0.level(1) != w1.level(1) and w0.level(1) != w0.level(2)
    assert w0.level(1) == KeySecret.from_seed(1).window(0).level(1)  # reproducible across processes
    assert w0.digest(1, b"de/by") != w1.digest(1, b"de/by") and w0.digest(1, b"de/by") != w0.digest(2, b"de/by")
    assert "hidden" in repr(secret) and secret._key.hex() not in repr(secret)
    assert KeySecret.generate().window(0).level(1) != KeySecret.generate().window(0).level(1)
    with pytest.raises(ValueError, match="32 bytes"):
        KeySecret(b"short")


def _load(directory: str) -> bytes:
    return KeySecret.load_or_create(directory)._key


def test_the_deployment_key_is_created_once_0600_even_by_concurrent_workers(tmp_path: Path) -> None:
    """Four processes creating the key at once all get the one key stored (0600, whatever the umask)."""
    old = os.umask(0o022)
    try:
        with ProcessPoolExecutor(4) as pool:
            keys = list(pool.map(_load, [str(tmp_path)] * 8))
    finally:
        os.umask(old)
    assert len(set(keys)) == 1 and (tmp_path / keyed.SECRET_FILE).read_bytes() == keys[0]
    assert stat.S_IMODE((tmp_path / keyed.SECRET_FILE).stat().st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name != keyed.SECRET_FILE]  # no temporary file left
    (tmp_path / keyed.SECRET_FILE).write_bytes(b"x")
    with pytest.raises(OperationalError, match="not a key"):
        KeySecret.load_or_create(tmp_path)


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> int:
    """A key width of 6 bits: collisions are easy to craft; everything else is production code."""
    monkeypatch.setattr(keyed, "KEY_BITS", 6)
    return 6


def test_path_collisions_merge_under_the_smaller_prefix_in_any_order(narrow: int) -> None:
    """Paths sharing a key (many at 6 bits) are one key labelled with the smallest of them, whatever
    order the paths arrive in; nothing raises; the ancestor of a merged key is its label's."""
    secret = KeySecret.from_seed(2).window(0)
    paths = [f"c{i % 5}/r{i}/x" for i in range(300)]
    by_order = []
    for order in (paths, paths[::-1], list(np.random.default_rng(3).permutation(paths))):
        h = PathHierarchy(3).keyed(secret)
        keys = h.keys(list(order), 2)
        assert (keys < 2**narrow).all() and h.collisions > 0
        by_order.append({int(k): h.label(int(k), 2) for k in keys})
        for k, p in zip(keys.tolist(), order):
            assert h.label(k, 2) <= "/".join(p.split("/")[:2])  # the smallest prefix of the key
    assert by_order[0] == by_order[1] == by_order[2]
    h = PathHierarchy(3).keyed(secret)
    keys = h.keys(paths, 3)
    for k in set(keys.tolist()):
        assert h.ancestor(k, 3, 1) == int(h.keys([h.label(k, 3)], 1)[0])


def test_ipv6_collisions_merge_too(narrow: int) -> None:
    rng = np.random.default_rng(4)
    hi = rng.integers(0, 2**64, 500, dtype=np.uint64)
    lo = rng.integers(0, 2**64, 500, dtype=np.uint64)
    h = IPv6Hierarchy().keyed(KeySecret.from_seed(5).window(0))
    keys = h.keys((hi, lo), 5)
    assert h.collisions > 0 and len(set(keys.tolist())) <= 2**narrow
    values = {int(k): [] for k in keys}
    for k, a, b in zip(keys.tolist(), hi.tolist(), lo.tolist()):
        values[k].append((a << 64) | b)
    assert all(h.value_of(k, 5) == min(v) for k, v in values.items())


def test_an_unkeyed_hierarchy_uses_a_public_key_and_a_keyed_one_the_secret() -> None:
    paths = ["a/b", "c/d"]
    public = PathHierarchy(2).keys(paths, 2)
    assert np.array_equal(public, PathHierarchy(2).keys(paths, 2))
    assert not np.array_equal(public, PathHierarchy(2).keyed(KeySecret.from_seed(1)).keys(paths, 2))
    assert parse_hierarchy("ipv4:8,16").keyed(KeySecret.from_seed(1)) is not None
    assert parse_hierarchy("ipv4:8,16").hashed_levels == 0
    assert parse_hierarchy("ipv4:8,16,24,32 x ipv4:8,16,24,32").hashed_levels == 1  # /32 × /32 only
    assert parse_hierarchy("path:4").hashed_levels == 4


def test_collision_delta_is_kappa_over_two_to_the_bits() -> None:
    assert collision_delta(1024) == 1024 * 2.0**-63
    assert collision_delta(4, bits=6) == 4 / 64


def test_batch_releases_rekey_after_a_chance_collision(narrow: int, tmp_path: Path) -> None:
    """`dphhh hhh`'s release re-keys when two prefixes met one key: at 6 bits a few paths collide
    under one key and not under another; the report then names every heavy path exactly."""
    from dphhh.connectors.skips import SkipCounter
    from dphhh.privacy.params import HHHParams
    from dphhh.stream.batch import batch_report

    lines = [f"de/r{i}/x" for i in range(6) for _ in range(400)]
    f = tmp_path / "paths.txt"
    f.write_text("\n".join(lines) + "\n")

    def collides(seed: int) -> bool:
        h = PathHierarchy(3).keyed(KeySecret.from_seed(seed))
        for level in (1, 2, 3):
            h.keys(lines, level)
        return h.collisions > 0

    seed = next(s for s in range(100) if collides(s) and not collides(s + 1))  # the first key collides
    params = HHHParams(epsilon=8.0, delta=1e-6, tau=300, counters=16, mode="point")
    report = batch_report(
        f, input_format="text", hierarchy=PathHierarchy(3), params=params, seed=seed, skips=SkipCounter()
    )
    found = {x["prefix"] for x in report["hhh"] if x["level"] == 3}
    assert found == {f"de/r{i}/x" for i in range(6)}
