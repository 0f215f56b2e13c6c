"""Tests of the generalisation hierarchies (docs/ALGORITHMS.md §1) and their partition hash (docs/ALGORITHMS.md §1; its use: §2 "Parallelism without merging")."""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import IPv4Hierarchy, IPv6Hierarchy, PathHierarchy, splitmix64
from dphhh.sketches.specs import parse_hierarchy


def _ip4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _mask32(length: int) -> int:
    return ((1 << length) - 1) << (32 - length) if length else 0


def _ip6_arrays(texts) -> tuple[np.ndarray, np.ndarray]:
    ints = [int(ipaddress.IPv6Address(t)) for t in texts]
    return _split128(ints)


def _split128(ints) -> tuple[np.ndarray, np.ndarray]:
    hi = np.array([v >> 64 for v in ints], dtype=np.uint64)
    lo = np.array([v & (2**64 - 1) for v in ints], dtype=np.uint64)
    return hi, lo


def _mask128(length: int) -> int:
    return ((1 << length) - 1) << (128 - length) if length else 0


# ---------------------------------------------------------------------------------------------
# IPv4
# ---------------------------------------------------------------------------------------------


def test_ipv4_default_is_byte_level():
    """The default IPv4 hierarchy has the byte-level prefix lengths 8/16/24/32 and h = 4."""
    h = IPv4Hierarchy()
    assert h.prefix_lengths == (8, 16, 24, 32)
    assert h.h == 4
    assert h.spec() == "ipv4:8,16,24,32"
    assert [h.mask(level) for level in range(5)] == [0, 0xFF000000, 0xFFFF0000, 0xFFFFFF00, 0xFFFFFFFF]


def test_ipv4_keys_and_labels_of_one_address():
    """107.10.11.12 generalises to its /8, /16, /24 and /32 with dotted-quad labels."""
    h = IPv4Hierarchy()
    value = np.array([_ip4("107.10.11.12")], dtype=np.uint32)
    keys = [int(h.keys(value, level)[0]) for level in range(1, 5)]
    assert keys == [_ip4("107.0.0.0"), _ip4("107.10.0.0"), _ip4("107.10.11.0"), _ip4("107.10.11.12")]
    labels = [h.label(k, level) for level, k in enumerate(keys, start=1)]
    assert labels == ["107.0.0.0/8", "107.10.0.0/16", "107.10.11.0/24", "107.10.11.12/32"]
    assert h.label(0, 0) == "0.0.0.0/0"


def test_ipv4_keys_match_python_masking_for_random_addresses():
    """Vectorised keys equal Python bit masking for random addresses, in input order, as int64 >= 0."""
    rng = np.random.default_rng(1)
    values = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    values[:3] = [0, 0xFFFFFFFF, 0x80000000]
    for lengths in [(8, 16, 24, 32), (1, 7, 13, 20, 31), tuple(range(1, 33))]:
        h = IPv4Hierarchy(lengths)
        for level, length in enumerate(lengths, start=1):
            keys = h.keys(values, level)
            assert keys.dtype == np.int64
            assert keys.min() >= 0
            expected = [v & _mask32(length) for v in values.tolist()]
            assert keys.tolist() == expected


def test_ipv4_bit_level_hierarchy():
    """With lengths 1..32 (h = 32) each level keeps one more bit and labels carry that length."""
    h = IPv4Hierarchy(range(1, 33))
    assert h.h == 32
    assert h.spec() == "ipv4:" + ",".join(str(i) for i in range(1, 33))
    value = np.array([_ip4("255.255.255.255")], dtype=np.uint32)
    assert h.label(int(h.keys(value, 1)[0]), 1) == "128.0.0.0/1"
    assert h.label(int(h.keys(value, 9)[0]), 9) == "255.128.0.0/9"
    assert h.label(int(h.keys(value, 32)[0]), 32) == "255.255.255.255/32"
    assert [h.mask(level) for level in range(33)] == [_mask32(i) for i in range(33)]


def test_ipv4_accepts_python_int_lists():
    """A plain list of Python ints works like a uint32 array."""
    h = IPv4Hierarchy()
    values = [_ip4("10.1.2.3"), _ip4("10.200.0.1")]
    assert h.keys(values, 2).tolist() == [_ip4("10.1.0.0"), _ip4("10.200.0.0")]
    assert h.count(values) == 2


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        ([], "must not be empty"),
        ([16, 8], "strictly increasing"),
        ([8, 8, 16], "strictly increasing"),
        ([0, 8], r"1\.\.32"),
        ([8, 33], r"1\.\.32"),
        ([-8], r"1\.\.32"),
    ],
)
def test_ipv4_invalid_prefix_lengths_rejected(lengths, message):
    """Empty, non-increasing or out-of-range prefix lengths raise ValueError with a clear message."""
    with pytest.raises(ValueError, match=message):
        IPv4Hierarchy(lengths)


def test_ipv4_level_bounds_checked():
    """Levels outside 1..h (0..h for labels) and bad ancestor targets raise ValueError."""
    h = IPv4Hierarchy()
    values = np.array([1], dtype=np.uint32)
    for bad in (0, 5, -1):
        with pytest.raises(ValueError, match="level"):
            h.keys(values, bad)
        with pytest.raises(ValueError, match="level"):
            h.key_hash(np.array([0]), bad)
    with pytest.raises(ValueError, match="level"):
        h.label(0, 5)
    with pytest.raises(ValueError, match="to_level"):
        h.ancestor(0, 2, 3)
    with pytest.raises(ValueError, match="to_level"):
        h.ancestor(0, 2, 0)


def test_ipv4_ancestor_consistency():
    """ancestor(key(x, ℓ), ℓ, j) == key(x, j) for random x and all j <= ℓ, for several hierarchies."""
    rng = np.random.default_rng(2)
    values = rng.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32)
    for lengths in [(8, 16, 24, 32), (3, 11, 19, 27), tuple(range(1, 33))]:
        h = IPv4Hierarchy(lengths)
        per_level = {level: h.keys(values, level).tolist() for level in range(1, h.h + 1)}
        for level in range(1, h.h + 1):
            for to_level in range(1, level + 1):
                got = [h.ancestor(k, level, to_level) for k in per_level[level]]
                assert got == per_level[to_level]


def test_ipv4_key_hash_is_deterministic_and_batch_independent():
    """The hash of a prefix depends only on the prefix and level, not on batch, order or object."""
    rng = np.random.default_rng(3)
    keys = IPv4Hierarchy().keys(rng.integers(0, 2**32, 500, dtype=np.uint64).astype(np.uint32), 3)
    a, b = IPv4Hierarchy(), IPv4Hierarchy()
    whole = a.key_hash(keys, 3)
    assert whole.dtype == np.uint64
    perm = rng.permutation(keys.size)
    assert np.array_equal(b.key_hash(keys[perm], 3), whole[perm])
    singles = np.concatenate([a.key_hash(keys[i : i + 1], 3) for i in range(keys.size)])
    assert np.array_equal(singles, whole)
    assert np.array_equal(a.key_hash(keys, 3), whole)  # repeated call
    # Distinct prefixes get distinct hashes here (a collision among 500 64-bit values is ~1e-14).
    assert np.unique(whole).size == np.unique(keys).size


def test_splitmix64_known_values():
    """splitmix64 is the standard SplitMix64 finaliser (reference outputs for seeds 0 and 1)."""
    out = splitmix64(np.array([0, 1], dtype=np.uint64))
    # First outputs of the SplitMix64 generator seeded with 0 and with 1.
    assert out.tolist() == [0xE220A8397B1DCDAF, 0x910A2DEC89025CC1]


# ---------------------------------------------------------------------------------------------
# IPv6
# ---------------------------------------------------------------------------------------------


def test_ipv6_default_lengths_and_labels():
    """An IPv6 address generalises to /16, /32, /48, /64, /128 with compressed labels."""
    h = IPv6Hierarchy()
    assert h.prefix_lengths == (16, 32, 48, 64, 128) and h.h == 5
    assert h.spec() == "ipv6:16,32,48,64,128"
    values = _ip6_arrays(["2001:db8:85a3:1234:0:8a2e:370:7334"])
    labels = [h.label(int(h.keys(values, level)[0]), level) for level in range(1, 6)]
    assert labels == [
        "2001::/16",
        "2001:db8::/32",
        "2001:db8:85a3::/48",
        "2001:db8:85a3:1234::/64",
        "2001:db8:85a3:1234:0:8a2e:370:7334/128",
    ]
    assert h.label(0, 0) == "::/0"


def test_ipv6_keys_identify_prefixes_exactly():
    """Two addresses share a level-ℓ key iff their ℓ-prefixes are equal; value_of gives the prefix."""
    rng = np.random.default_rng(4)
    # Clustered addresses so that many prefixes are shared at the shorter lengths.
    base = [int(ipaddress.IPv6Address("2001:db8::")) + (int(x) << 80) for x in rng.integers(0, 4, 400)]
    ints = [b + (int(rng.integers(0, 3)) << 64) + int(rng.integers(0, 2**63)) for b in base]
    lengths = (20, 32, 50, 64, 100, 128)
    h = IPv6Hierarchy(lengths)
    values = _split128(ints)
    for level, length in enumerate(lengths, start=1):
        keys = h.keys(values, level).tolist()
        prefixes = [v & _mask128(length) for v in ints]
        assert all(k >= 0 for k in keys)
        for i in range(0, 400, 7):
            for j in range(0, 400, 11):
                assert (keys[i] == keys[j]) == (prefixes[i] == prefixes[j])
        assert [h.value_of(k, level) for k in keys] == prefixes


def test_ipv6_keys_stable_across_batches():
    """A prefix seen in an earlier batch gets the same key in later batches of the same object."""
    h = IPv6Hierarchy([32, 64])
    first = h.keys(_ip6_arrays(["2001:db8::1", "2001:db9::1"]), 1).tolist()
    second = h.keys(_ip6_arrays(["fe80::1", "2001:db9::5", "2001:db8::7"]), 1).tolist()
    assert second[1] == first[1] and second[2] == first[0]
    assert second[0] not in first


def test_ipv6_ancestor_consistency():
    """ancestor(key(x, ℓ), ℓ, j) == key(x, j) for random IPv6 addresses after all levels are keyed."""
    rng = np.random.default_rng(5)
    ints = [int(rng.integers(0, 2**62)) << 66 | int(rng.integers(0, 2**62)) for _ in range(200)]
    ints += [ints[0] ^ 1, ints[1] ^ (1 << 70)]  # near-duplicates share long prefixes
    h = IPv6Hierarchy()
    values = _split128(ints)
    per_level = {level: h.keys(values, level).tolist() for level in range(1, h.h + 1)}
    for level in range(1, h.h + 1):
        for to_level in range(1, level + 1):
            assert [h.ancestor(k, level, to_level) for k in per_level[level]] == per_level[to_level]
    with pytest.raises(ValueError, match="to_level"):
        h.ancestor(per_level[2][0], 2, 3)


def test_ipv6_key_hash_independent_of_interning_order():
    """The same prefix has the same key and hash in two objects that saw the batches in different orders."""
    batch_a = _ip6_arrays(["2001:db8::1", "2001:db8:1::1", "fe80::1"])
    batch_b = _ip6_arrays(["fe80::2", "2400:cb00::1", "2001:db8::9"])
    h1, h2 = IPv6Hierarchy(), IPv6Hierarchy()
    level = 2
    a1, b1 = h1.keys(batch_a, level), h1.keys(batch_b, level)
    b2, a2 = h2.keys(batch_b, level), h2.keys(batch_a, level)
    assert a1.tolist() == a2.tolist()  # keys are a function of the prefix, not of the order seen
    assert np.array_equal(h1.key_hash(a1, level), h2.key_hash(a2, level))
    assert np.array_equal(h1.key_hash(b1, level), h2.key_hash(b2, level))
    # Same /32 ("2001:db8::/32") in different batches -> same hash.
    assert h1.key_hash(a1[:1], level)[0] == h1.key_hash(b1[2:], level)[0]


def test_ipv6_empty_batch():
    """An empty batch yields no keys."""
    h = IPv6Hierarchy()
    empty = (np.array([], dtype=np.uint64), np.array([], dtype=np.uint64))
    assert h.keys(empty, 3).size == 0
    assert h.count(empty) == 0


@pytest.mark.parametrize(
    ("lengths", "message"),
    [([], "must not be empty"), ([0], r"1\.\.128"), ([64, 129], r"1\.\.128"), ([64, 32], "strictly increasing")],
)
def test_ipv6_invalid_prefix_lengths_rejected(lengths, message):
    """Empty, out-of-range or non-increasing IPv6 prefix lengths raise ValueError."""
    with pytest.raises(ValueError, match=message):
        IPv6Hierarchy(lengths)


# ---------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------


def test_path_levels_and_labels():
    """A depth-4 path generalises by dropping trailing components; labels are the prefixes."""
    h = PathHierarchy(4)
    assert h.h == 4 and h.spec() == "path:4"
    values = ["de/bavaria/munich/x", "de/bavaria/augsburg/y", "fr/idf/paris/z"]
    labels = {level: [h.label(k, level) for k in h.keys(values, level).tolist()] for level in range(1, 5)}
    assert labels[1] == ["de", "de", "fr"]
    assert labels[2] == ["de/bavaria", "de/bavaria", "fr/idf"]
    assert labels[3] == ["de/bavaria/munich", "de/bavaria/augsburg", "fr/idf/paris"]
    assert labels[4] == values
    assert h.label(0, 0) == "*"
    level2 = h.keys(values, 2).tolist()
    assert level2[0] == level2[1] != level2[2]


def test_path_wrong_depth_rejected():
    """A path with too few or too many components is rejected, naming the expected depth."""
    h = PathHierarchy(4)
    for bad in (["de/bavaria/munich"], ["de/bavaria/munich/x/y"], ["de/bavaria/munich/x", "de"]):
        with pytest.raises(ValueError, match="exactly 4 components"):
            h.keys(bad, 2)


@pytest.mark.parametrize("depth", [0, -1, True, 2.0, "3"])
def test_path_invalid_depth_rejected(depth):
    """The depth must be an integer >= 1 (bool, float and str rejected)."""
    with pytest.raises(ValueError, match="depth"):
        PathHierarchy(depth)


def test_path_ancestor_consistency():
    """ancestor(key(x, ℓ), ℓ, j) == key(x, j) for random paths."""
    rng = np.random.default_rng(6)
    values = ["/".join(f"c{level}_{int(rng.integers(0, 3))}" for level in range(4)) for _ in range(300)]
    h = PathHierarchy(4)
    per_level = {level: h.keys(values, level).tolist() for level in range(1, 5)}
    for level in range(1, 5):
        for to_level in range(1, level + 1):
            assert [h.ancestor(k, level, to_level) for k in per_level[level]] == per_level[to_level]


def test_path_key_hash_independent_of_interning_order():
    """The same prefix has the same key and hash in two objects that saw the batches in different orders."""
    batch_a = ["de/bavaria/munich/x", "fr/idf/paris/y", "it/lazio/rome/z"]
    batch_b = ["us/ca/sf/q", "de/bavaria/nuremberg/r", "fr/idf/versailles/s"]
    h1, h2 = PathHierarchy(4), PathHierarchy(4)
    for level in (1, 2, 3):
        a1, b1 = h1.keys(batch_a, level), h1.keys(batch_b, level)
        b2, a2 = h2.keys(batch_b, level), h2.keys(batch_a, level)
        assert a1.tolist() == a2.tolist()  # keys are a function of the prefix, not of the order seen
        assert np.array_equal(h1.key_hash(a1, level), h2.key_hash(a2, level))
        assert np.array_equal(h1.key_hash(b1, level), h2.key_hash(b2, level))
    # 'de/bavaria' appears in both batches: its hash does not depend on which batch introduced it.
    assert h1.key_hash(h1.keys(batch_a, 2)[:1], 2)[0] == h2.key_hash(h2.keys(batch_b, 2)[1:2], 2)[0]


def test_path_keys_stable_and_empty_batch():
    """Keys of a prefix stay fixed across batches; an empty batch gives no keys."""
    h = PathHierarchy(3)
    first = h.keys(["a/b/c", "x/y/z"], 2).tolist()
    second = h.keys(["x/y/w", "a/b/q"], 2).tolist()
    assert second == first[::-1]
    assert h.keys([], 1).size == 0 and h.count([]) == 0


# ---------------------------------------------------------------------------------------------
# parse_hierarchy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ipv4", IPv4Hierarchy((8, 16, 24, 32))),
        ("ipv4:8,16", IPv4Hierarchy((8, 16))),
        (" IPv4:8,16,24,32 ", IPv4Hierarchy()),
        ("ipv6", IPv6Hierarchy((16, 32, 48, 64, 128))),
        ("ipv6:32,64", IPv6Hierarchy((32, 64))),
        ("path:3", PathHierarchy(3)),
        ("path", PathHierarchy(4)),
    ],
)
def test_parse_hierarchy_valid(text, expected):
    """Valid specs parse to the corresponding hierarchy with the given (or default) levels."""
    got = parse_hierarchy(text)
    assert type(got) is type(expected)
    assert got == expected
    assert got.spec() == expected.spec()


def test_parse_hierarchy_round_trips_spec():
    """parse_hierarchy(h.spec()) reproduces h, and equality/hash follow the spec string."""
    for h in (IPv4Hierarchy(range(1, 33)), IPv6Hierarchy((20, 100)), PathHierarchy(7)):
        again = parse_hierarchy(h.spec())
        assert again == h and hash(again) == hash(h)
    assert IPv4Hierarchy((8, 16)) != IPv4Hierarchy((8, 16, 24))
    assert IPv4Hierarchy((8, 16)) != IPv6Hierarchy((8, 16))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected e.g."),
        ("   ", "expected e.g."),
        (None, "expected e.g."),
        ("ipv5:8", "kind must be ipv4, ipv6 or path"),
        ("ipv4:8,x", "comma-separated integers"),
        ("ipv4:8,,16", "comma-separated integers"),
        ("ipv4:16,8", "strictly increasing"),
        ("ipv4:8,40", r"1\.\.32"),
        ("ipv6:64,200", r"1\.\.128"),
        ("path:3,4", "one depth"),
        ("path:0", "depth"),
    ],
)
def test_parse_hierarchy_rejects_bad_input_clearly(text, message):
    """Bad specs raise ValueError with a message naming what is wrong."""
    with pytest.raises(ValueError, match=message):
        parse_hierarchy(text)


def test_path_labels_travel_between_hierarchy_objects():
    """Labels shipped from one PathHierarchy let another name and generalise the same hashed keys."""
    sender, receiver = PathHierarchy(3), PathHierarchy(3)
    keys = sender.keys(["de/bavaria/munich", "fr/idf/paris"], 3)
    receiver.remember(3, sender.labels_of(keys, 3))
    assert receiver.label(int(keys[0]), 3) == "de/bavaria/munich"
    assert receiver.label(receiver.ancestor(int(keys[0]), 3, 1), 1) == "de"
    with pytest.raises(ValueError, match="does not match"):
        receiver.remember(3, {int(keys[0]): "fr/idf/paris"})


@pytest.mark.parametrize("spec", ["ipv4:8,16,24,32", "ipv6:16,32,48,64,128", "path:3", "ipv4:8,16 x ipv4:16,32"])
def test_a_hierarchy_concatenates_its_own_batches_and_has_an_empty_batch(spec: str) -> None:
    """Values are the hierarchy's own business (issue: a new kind is one class): split points of one
    batch, concatenated back, give the same keys at every level as the whole batch; no batch is the
    hierarchy's empty batch, which has no element and no key."""
    hierarchy = parse_hierarchy(spec)
    rng = np.random.default_rng(5)
    n = 200
    if hierarchy.kind == "ipv6":
        whole = (rng.integers(0, 2**63, n, dtype=np.uint64), rng.integers(0, 2**63, n, dtype=np.uint64))
        split = lambda a, b: (whole[0][a:b], whole[1][a:b])  # noqa: E731
    elif hierarchy.kind == "path":
        whole = [f"c{i % 3}/r{i % 7}/s{i}" for i in range(n)]
        split = lambda a, b: whole[a:b]  # noqa: E731
    elif hierarchy.kind == "pair":
        whole = (rng.integers(0, 2**32, n, dtype=np.uint32), rng.integers(0, 2**32, n, dtype=np.uint32))
        split = lambda a, b: (whole[0][a:b], whole[1][a:b])  # noqa: E731
    else:
        whole = rng.integers(0, 2**32, n, dtype=np.uint32)
        split = lambda a, b: whole[a:b]  # noqa: E731
    cuts = [0, *sorted(rng.choice(np.arange(1, n), 4, replace=False).tolist()), n]
    joined = hierarchy.concat([split(a, b) for a, b in zip(cuts, cuts[1:])])
    assert hierarchy.count(joined) == n
    for level in range(1, hierarchy.h + 1):
        assert hierarchy.keys(joined, level).tolist() == hierarchy.keys(whole, level).tolist()
    empty = hierarchy.concat([])
    assert hierarchy.count(empty) == hierarchy.count(hierarchy.empty()) == 0
    assert hierarchy.keys(empty, hierarchy.h).size == 0


@pytest.mark.parametrize("spec", ["path:4", "path:1", "ipv4:8,16,24,32", "ipv6:32,64", "ipv4:8,16 x path:2"])
@pytest.mark.parametrize("words", [["de", "fr", "a b", "ü", "x"], ["de", "fr", "a b", "x"], ["de", "a\nb", "x"]])
def test_level_keys_are_the_keys_of_every_level_with_the_same_labels(spec: str, words: list[str]) -> None:
    """``level_keys`` (every level at once; paths: each level's distinct prefixes from the level
    below's, each hashed once) gives each level's ``keys`` and leaves the same label tables, on a
    batch with repeats: paths with a non-ASCII component (hashed one by one), ASCII only (hashed
    joined), with a line feed inside a component (parents cut one by one)."""
    from dphhh.sketches.keyed import KeySecret

    rng = np.random.default_rng(11)
    n = 400
    pool = np.array(words, dtype=object)

    def paths(depth: int) -> list[str]:
        return ["/".join(rng.choice(pool, depth)) for _ in range(n)]

    def values_of(h):
        if h.kind == "path":
            return paths(h.depth)
        if h.kind == "ipv4":
            return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        if h.kind == "ipv6":
            return rng.integers(0, 2**63, n).astype(np.uint64), rng.integers(0, 2**63, n).astype(np.uint64)
        return values_of(h.first), values_of(h.second)

    secret = KeySecret(bytes(range(32))).window(3)
    together, alone = parse_hierarchy(spec).keyed(secret), parse_hierarchy(spec).keyed(secret)
    values = values_of(together)
    got = list(together.level_keys(values))
    assert len(got) == together.h
    for level in range(1, together.h + 1):
        expected = alone.keys(values, level)
        assert np.array_equal(got[level - 1], expected), level
        labelled = np.unique(expected)[:20]
        assert [together.label(int(k), level) for k in labelled] == [alone.label(int(k), level) for k in labelled]
    assert together.collisions == alone.collisions


def test_paths_and_ipv4_pairs_pack_their_values_and_refuse_bytes_they_did_not_make() -> None:
    """``pack_values``/``unpack_values`` (the stream ships these bytes instead of h keys) give the
    values back — any UTF-8 path, none at all — and refuse cut, padded or foreign bytes; other
    kinds ship keys (``None``)."""
    paths = PathHierarchy(2)
    for values in (["de/by", "é/中", "a b/\n", "x/y"], []):
        assert paths.unpack_values(paths.pack_values(values)) == values
    packed = paths.pack_values(["de/by", "é/中"])
    for bad in (packed[:-1], packed + b"x", packed[:6], packed[:12] + b"\xff" * (len(packed) - 12)):
        with pytest.raises(UsageError, match="not packed paths"):
            paths.unpack_values(bad)
    pairs = parse_hierarchy("ipv4:8,32 x ipv4:8,32")
    a = np.array([1, 2**32 - 1, 7], dtype=np.uint32)
    b = np.array([9, 0, 2**31], dtype=np.uint32)
    back = pairs.unpack_values(pairs.pack_values((a, b)))
    assert [x.tolist() for x in back] == [a.tolist(), b.tolist()]
    with pytest.raises(UsageError, match="not packed pairs"):
        pairs.unpack_values(pairs.pack_values((a, b))[:-4])
    assert parse_hierarchy("ipv4:8,16").pack_values(a) is None
    assert parse_hierarchy("path:2 x ipv4:8").pack_values((["a/b"], a[:1])) is None
