"""Throughput of the project's Misra-Gries sketches against two baselines.

What it measures
----------------
One seeded stream of IPv4 addresses (default 10^7 elements, "Zipf-ish": see :func:`zipf_addresses`)
is pushed through sketches for all four byte levels of the IPv4 hierarchy (/8, /16, /24, /32), κ
counters per level (default 1024). For each implementation the timed path is the whole update
path: generalising each address to each level (masking) plus inserting the four keys.

(a) ``project``: :class:`dphhh.sketches.level_sketches.LevelSketches` with P = 1 (one compiled
    Misra-Gries sketch per level), fed in batches of ``--batch`` addresses (default 65536, the pcap
    connector's chunk size). The numba kernel is loaded/compiled before timing.
(b) ``python-dict``: a plain-Python Misra-Gries per level, a ``dict`` key -> count, with exactly
    the semantics of Algorithm 2 (docs/ALGORITHMS.md §2) including the project's tie-break (smallest key among
    the zero counters), so its final {key: counter} content is *identical* to the project's
    (checked after the timed run and printed).
    It is a straightforward dict implementation, not a tuned one (see :class:`DictMisraGries`).
(c) ``datasketches``: Apache DataSketches' ``frequent_items_sketch`` (Python binding of the C++
    library), one per level, with ``lg_max_k`` the smallest size whose capacity (0.75·2^lg_max_k)
    holds κ counters. The binding has no batch update, so it is fed one ``update(int)`` call per
    key. Note that it is a different algorithm (weighted MG with a median purge, a hash map of
    2^lg_max_k slots), so it is a speed reference, not a drop-in equivalent.

(d) ``weighted``: the same addresses as **flow records** with seeded integer weights (packets per
    flow: ``min(zipf(--weight-zipf), W)``, W = ``--weight-cap``, default 64, clipped with
    :func:`dphhh.sketches.misra_gries.clip_weights`) through ``LevelSketches.update(values, weights)``,
    printed as records/s and weight units/s; beside it the same records expanded into
    their weight-many unit inserts through the unit path (``np.repeat``, not timed), timed on a
    prefix (``--expanded-records``), whose final state must equal the weighted one (checked and
    printed). The unweighted row (a) is the unit path, unchanged.

The pure-Python baselines are too slow for the full stream on a small machine, so by default they
are timed on a prefix of the stream (``--dict-elements``, ``--ds-elements``; default 10^6). The
project is timed both on the full stream and on each prefix length; the printed ratios compare
rates measured on the *same* prefix (and the output says so). Rates are addresses per second:
stream elements per second through all four levels (each address = 4 sketch updates).

Run::

    .venv/bin/python benchmarks/sketch_throughput.py            # full size (10^7 elements)
    .venv/bin/python benchmarks/sketch_throughput.py --quick    # smoke run (2·10^5 elements)

Progress goes to stderr, the results table to stdout. Target: project / python-dict >= 10.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

# Make the project importable when run as a script from anywhere.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dphhh.sketches.hierarchy import IPv4Hierarchy  # noqa: E402
from dphhh.sketches.level_sketches import LevelSketches  # noqa: E402
from dphhh.sketches.misra_gries import clip_weights  # noqa: E402
from dphhh.sketches.pairs import PairHierarchy  # noqa: E402

TARGET_RATIO_DICT = 10.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Stream


def _truncated_zipf_octets(rng: np.random.Generator, n: int, s: float) -> np.ndarray:
    """n ranks in 0..255 with P(r) ∝ 1/(r+1)^s (inverse-CDF sampling)."""
    weights = 1.0 / np.arange(1, 257, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.searchsorted(cdf, rng.random(n), side="right").astype(np.uint32)


def zipf_addresses(n: int, *, seed: int, s: float = 1.1) -> np.ndarray:
    """A seeded stream of ``n`` IPv4 addresses (uint32) with hierarchical Zipf structure.

    Each of the four octets is an independent truncated-Zipf rank (exponent ``s`` over 256 ranks)
    mapped to an octet value through a fixed permutation that is shifted by a hash of the parent
    prefix, so different /8s have different popular /16s, and so on. The result has heavy
    hitters at every level (the most popular /8 carries ~1/6 of the stream at s = 1.1) and a long
    tail of distinct addresses, which exercises hits, replacements and decrement-all steps.
    """
    rng = np.random.default_rng(seed)
    perm = rng.permutation(256).astype(np.uint32)
    addr = np.zeros(n, dtype=np.uint32)
    for _ in range(4):
        rank = _truncated_zipf_octets(rng, n, s)
        with np.errstate(over="ignore"):
            shift = ((addr * np.uint32(0x9E3779B1)) >> np.uint32(24)) & np.uint32(0xFF)
        octet = (perm[rank] + shift) & np.uint32(0xFF)
        addr = (addr << np.uint32(8)) | octet
    return addr


# ------------------------------------------------------------------------------------------------
# Baseline (b): a plain-Python dict Misra-Gries


class DictMisraGries:
    """Algorithm 2 (docs/ALGORITHMS.md §2) with a Python dict; unit weights.

    A straightforward baseline, as one would write it without a compiled kernel: ``counts`` maps
    each real key to its counter. The data-independent tie-break of step 3 is the project's
    (among zero counters, replace the **smallest key**; dummy keys are negative, so they go
    first), which makes the final ``{key: counter}`` content identical to the project's sketch and
    the comparison fair. Dummies are not stored: while fewer than κ real keys are held a dummy
    with count 0 exists and is the smallest key, and every real key then has count >= 1 (counters
    drop only in a decrement-all, which cannot happen while a zero counter exists), so step 3
    just adds the new key. Once κ real keys are held there are no dummies left, for good. Zero
    counters are found through the keys that were zero after the last decrement-all, sorted,
    skipped lazily once hit (the same amortisation as the project; a scan over the κ counters per
    insert would be far slower still). The decrement-all is a Python loop over the κ counters.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.counts: dict[int, int] = {}
        self.zeros: list[int] = []
        self.zptr = 0
        self.decrements = 0
        self.total = 0

    def update(self, items: list[int]) -> None:
        counts, k = self.counts, self.k
        get = counts.get
        zeros, zptr, decrements = self.zeros, self.zptr, self.decrements
        zlen = len(zeros)
        for x in items:
            c = get(x)
            if c is not None:  # step 1: x is a key
                counts[x] = c + 1
                continue
            if len(counts) < k:  # step 3, the smallest zero-counter key is a dummy
                counts[x] = 1
                continue
            # Keys after zptr are still held (only the one at zptr is ever replaced); skip hit ones.
            while zptr < zlen and counts[zeros[zptr]] != 0:
                zptr += 1
            if zptr == zlen:  # step 2: every counter >= 1: decrement all, x is dropped
                for key in counts:
                    counts[key] -= 1
                zeros = sorted([key for key, c in counts.items() if c == 0])
                zlen = len(zeros)
                zptr = 0
                decrements += 1
                continue
            del counts[zeros[zptr]]  # step 3: replace the smallest zero-counter key
            zptr += 1
            counts[x] = 1
        self.zeros, self.zptr, self.decrements = zeros, zptr, decrements
        self.total += len(items)


def flow_weights(n: int, *, seed: int, s: float, cap: int) -> np.ndarray:
    """``n`` seeded weights (packets per flow), ``min(zipf(s), cap)``, int64, each in 1..cap."""
    rng = np.random.default_rng(seed + 1)
    return clip_weights(rng.zipf(s, n), cap, owner="flow_weights")


# ------------------------------------------------------------------------------------------------
# Runners: each returns (seconds, object holding the final state)


def chunks(stream: np.ndarray, batch: int):
    for start in range(0, stream.shape[0], batch):
        yield stream[start : start + batch]


def run_project(stream: np.ndarray, kappa: int, batch: int) -> tuple[float, LevelSketches]:
    sk = LevelSketches(IPv4Hierarchy(), kappa, 1)
    t0 = time.perf_counter()
    for chunk in chunks(stream, batch):
        sk.update(chunk)
    return time.perf_counter() - t0, sk


def run_project_weighted(
    stream: np.ndarray, weights: np.ndarray, kappa: int, batch: int
) -> tuple[float, LevelSketches]:
    sk = LevelSketches(IPv4Hierarchy(), kappa, 1)
    t0 = time.perf_counter()
    for chunk, w in zip(chunks(stream, batch), chunks(weights, batch)):
        sk.update(chunk, w)
    return time.perf_counter() - t0, sk


def run_project_pairs(
    sources: np.ndarray, destinations: np.ndarray, kappa: int, batch: int
) -> tuple[float, LevelSketches]:
    sk = LevelSketches(PairHierarchy(IPv4Hierarchy(), IPv4Hierarchy()), kappa, 1)
    t0 = time.perf_counter()
    for a, b in zip(chunks(sources, batch), chunks(destinations, batch)):
        sk.update((a, b))
    return time.perf_counter() - t0, sk


def run_dict(stream: np.ndarray, kappa: int, batch: int, masks: list[np.uint32]) -> tuple[float, list[DictMisraGries]]:
    sketches = [DictMisraGries(kappa) for _ in masks]
    t0 = time.perf_counter()
    for chunk in chunks(stream, batch):
        for mask, sk in zip(masks, sketches):
            sk.update((chunk & mask).tolist())
    return time.perf_counter() - t0, sketches


def lg_for_kappa(kappa: int) -> int:
    """Smallest lg_max_k whose DataSketches capacity 0.75·2^lg holds kappa counters."""
    lg = 3
    while 0.75 * (1 << lg) < kappa:
        lg += 1
    return lg


def run_datasketches(stream: np.ndarray, kappa: int, batch: int, masks: list[np.uint32]):
    import datasketches as ds

    lg = lg_for_kappa(kappa)
    sketches = [ds.frequent_items_sketch(lg) for _ in masks]
    t0 = time.perf_counter()
    for chunk in chunks(stream, batch):
        for mask, sk in zip(masks, sketches):
            upd = sk.update
            for x in (chunk & mask).tolist():
                upd(x)
    return time.perf_counter() - t0, sketches


# ------------------------------------------------------------------------------------------------


def best_of(repeat: int, fn, *a):
    """Run ``fn(*a)`` ``repeat`` times; return (best seconds, result of the last run)."""
    best, result = None, None
    for _ in range(max(1, repeat)):
        secs, result = fn(*a)
        best = secs if best is None else min(best, secs)
    return best, result


def sweep(args, masks) -> None:
    """Second table: how the ratios move with the stream's skew (shorter streams)."""
    m = args.sweep_elements
    print()
    print(f"# skew sensitivity: {m:,}-element streams, everything timed on the whole stream, best of {args.repeat}")
    print(
        f"{'zipf s':>6} {'distinct /32':>13} {'dec/level(/32)':>14} {'project addr/s':>15} {'dict addr/s':>12} "
        f"{'ds addr/s':>12} {'proj/dict':>9} {'proj/ds':>8}"
    )
    for s in args.zipf_sweep:
        log(f"sweep: s={s} ...")
        x = zipf_addresses(m, seed=args.seed, s=s)
        tp, sk = best_of(args.repeat, run_project, x, args.kappa, args.batch)
        td, _ = best_of(args.repeat, run_dict, x, args.kappa, args.batch, masks)
        if args.no_datasketches:
            ts = float("nan")
        else:
            ts, _ = best_of(args.repeat, run_datasketches, x, args.kappa, args.batch, masks)
        print(
            f"{s:>6.2f} {np.unique(x).size:>13,} {sk.sketch(4).decrements:>14,} {m / tp:>15,.0f} {m / td:>12,.0f} "
            f"{m / ts:>12,.0f} {td / tp:>8.1f}x {ts / tp:>7.1f}x"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--elements", type=int, default=10_000_000, help="stream length (default 10^7)")
    ap.add_argument("--counters", "--kappa", dest="kappa", type=int, default=1024, help="κ per level (default 1024)")
    ap.add_argument(
        "--dict-elements",
        type=int,
        default=1_000_000,
        help="prefix timed for the dict baseline (default 10^6; 0 = whole stream)",
    )
    ap.add_argument(
        "--ds-elements",
        type=int,
        default=1_000_000,
        help="prefix timed for DataSketches (default 10^6; 0 = whole stream)",
    )
    ap.add_argument("--batch", type=int, default=65536, help="addresses per update batch (default 65536)")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent per octet (default 1.1)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument(
        "--repeat", type=int, default=3, help="time every implementation this many times, keep the best (default 3)"
    )
    ap.add_argument("--no-datasketches", action="store_true", help="skip baseline (c)")
    ap.add_argument(
        "--zipf-sweep",
        type=lambda t: [float(v) for v in t.split(",")],
        default=None,
        metavar="S1,S2,...",
        help="also print a table of rates/ratios for these Zipf exponents (e.g. 1.1,1.3,1.5)",
    )
    ap.add_argument(
        "--sweep-elements", type=int, default=1_000_000, help="stream length per sweep point (default 10^6)"
    )
    ap.add_argument(
        "--weight-cap", type=int, default=64, help="public weight cap W of the weighted records (default 64)"
    )
    ap.add_argument("--weight-zipf", type=float, default=1.5, help="Zipf exponent of the record weights (default 1.5)")
    ap.add_argument(
        "--expanded-records",
        type=int,
        default=1_000_000,
        help="records expanded into unit inserts for the comparison (default 10^6; 0 = all)",
    )
    ap.add_argument(
        "--pair-elements",
        type=int,
        default=0,
        help="pairs timed in table (e): the first this many elements as sources (default 0 = whole stream)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: 2·10^5 elements, 10^5-element prefixes, 1 repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.elements = min(args.elements, 200_000)
        args.dict_elements = min(args.dict_elements or 100_000, 100_000)
        args.ds_elements = min(args.ds_elements or 100_000, 100_000)
        args.sweep_elements = min(args.sweep_elements, 100_000)
        args.expanded_records = min(args.expanded_records or 100_000, 100_000)
        args.repeat = 1
    n = args.elements
    dict_n = min(args.dict_elements or n, n)
    ds_n = min(args.ds_elements or n, n)

    hierarchy = IPv4Hierarchy()
    masks = [np.uint32(hierarchy.mask(level)) for level in range(1, hierarchy.h + 1)]

    log(f"generating {n:,} Zipf-ish addresses (seed {args.seed}, s={args.zipf}) ...")
    t0 = time.perf_counter()
    stream = zipf_addresses(n, seed=args.seed, s=args.zipf)
    distinct = [np.unique(stream & m).size for m in masks]
    log(
        f"  done in {time.perf_counter() - t0:.1f}s; distinct per level: "
        + ", ".join(f"/{L}: {d:,}" for L, d in zip(hierarchy.prefix_lengths, distinct))
    )

    log("warming up the compiled kernel ...")
    t0 = time.perf_counter()
    LevelSketches(hierarchy, args.kappa, 1).update(stream[:1000])
    log(f"  kernel ready in {time.perf_counter() - t0:.2f}s (excluded from timings)")

    rows = []  # (name, elements, seconds, note)

    log(f"(a) project LevelSketches (κ={args.kappa}, P=1) on {n:,} elements, best of {args.repeat} ...")
    best, project_full = best_of(args.repeat, run_project, stream, args.kappa, args.batch)
    rows.append(("project LevelSketches (full stream)", n, best, ""))
    log(
        f"  {best:.2f}s, {n / best:,.0f} addresses/s, decrement-all steps per level: "
        + ", ".join(str(project_full.sketch(level).decrements) for level in range(1, hierarchy.h + 1))
    )

    prefix_rate: dict[int, float] = {n: n / best}
    for m in sorted({dict_n, ds_n} - {n}):
        secs, _ = best_of(max(args.repeat, 3), run_project, stream[:m], args.kappa, args.batch)
        prefix_rate[m] = m / secs
        rows.append(("project LevelSketches (prefix)", m, secs, ""))
        log(f"  prefix {m:,}: {secs:.3f}s, {m / secs:,.0f} addresses/s")

    log(f"(b) python dict Misra-Gries on {dict_n:,} elements, best of {args.repeat} ...")
    secs, dict_sketches = best_of(args.repeat, run_dict, stream[:dict_n], args.kappa, args.batch, masks)
    log(f"  {secs:.2f}s, {dict_n / secs:,.0f} addresses/s")
    _, reference = run_project(stream[:dict_n], args.kappa, args.batch)
    # The sketch content is its {key: counter} map (zero counters included) and decrement count.
    identical = all(
        dsk.counts == reference.sketch(level).counters() and dsk.decrements == reference.sketch(level).decrements
        for level, dsk in enumerate(dict_sketches, start=1)
    )
    log(f"  dict state identical to the project's sketch state on that prefix: {identical}")
    rows.append(
        ("python dict Misra-Gries", dict_n, secs, "final state == project's: " + ("yes" if identical else "NO"))
    )
    dict_rate = dict_n / secs

    ds_rate = None
    if not args.no_datasketches:
        try:
            import datasketches  # noqa: F401
        except ImportError:
            log("  datasketches is not installed: .venv/bin/pip install -e '.[bench]'  (skipping (c))")
        else:
            lg = lg_for_kappa(args.kappa)
            log(
                f"(c) DataSketches frequent_items_sketch(lg_max_k={lg}) on {ds_n:,} elements, best of {args.repeat} ..."
            )
            secs, _ = best_of(args.repeat, run_datasketches, stream[:ds_n], args.kappa, args.batch, masks)
            log(f"  {secs:.2f}s, {ds_n / secs:,.0f} addresses/s")
            rows.append((f"datasketches frequent_items (lg_max_k={lg})", ds_n, secs, "one update() call per key"))
            ds_rate = ds_n / secs

    print(
        f"# sketch throughput: IPv4 levels /8,/16,/24,/32, κ={args.kappa}, stream {n:,} Zipf-ish addresses "
        f"(seed {args.seed}, s={args.zipf}; distinct /8,/16,/24,/32: {', '.join(f'{d:,}' for d in distinct)}), "
        f"batch {args.batch}, best of {args.repeat}; {platform.python_implementation()} {platform.python_version()}, "
        f"numpy {np.__version__}"
    )
    print(f"{'implementation':<46} {'elements':>12} {'seconds':>9} {'addresses/s':>14}  note")
    for name, m, secs, note in rows:
        if m < n:
            note = "prefix of the stream" + ("; " + note if note else "")
        print(f"{name:<46} {m:>12,} {secs:>9.3f} {m / secs:>14,.0f}  {note}")
    r_dict = prefix_rate[dict_n] / dict_rate
    verdict = "met" if r_dict >= TARGET_RATIO_DICT else "NOT met"
    print(
        f"ratio project/python-dict  = {r_dict:6.1f}x   target >= {TARGET_RATIO_DICT:.0f}x: {verdict}  "
        f"(rates on the same first {dict_n:,} elements; full-stream project rate / dict rate = {n / best / dict_rate:.1f}x)"
    )
    if ds_rate is not None:
        print(
            f"ratio project/datasketches = {prefix_rate[ds_n] / ds_rate:6.1f}x   "
            f"(rates on the same first {ds_n:,} elements; full-stream project rate / datasketches rate = {n / best / ds_rate:.1f}x)"
        )
    if dict_n < n or ds_n < n:
        print(
            f"note: the Python-driven baselines were timed on a prefix of the {n:,}-element stream because full runs "
            "take too long; the stream is stationary, so per-element rates are comparable."
        )
    pairs(args, stream, prefix_rate)
    weighted(args, stream)
    if args.zipf_sweep:
        sweep(args, masks)
    return 0


def pairs(args, stream: np.ndarray, prefix_rate: dict[int, float]) -> None:
    """Table (e): (source, destination) pairs through the 24 sketches of the byte x byte lattice,
    beside the 1-D addresses/s on the same number of elements."""
    n = stream.shape[0]
    m = min(args.pair_elements or n, n)
    sources = stream[:m]
    destinations = zipf_addresses(m, seed=args.seed + 2, s=args.zipf)
    h = PairHierarchy(IPv4Hierarchy(), IPv4Hierarchy()).h
    distinct = np.unique((sources.astype(np.uint64) << np.uint64(32)) | destinations).size
    log(f"(e) pairs: {m:,} (source, destination) pairs, H = {h} nodes, {distinct:,} distinct host pairs ...")
    if m not in prefix_rate:
        secs, _ = best_of(args.repeat, run_project, sources, args.kappa, args.batch)
        prefix_rate[m] = m / secs
    addr_rate = prefix_rate[m]
    best, sk = best_of(args.repeat, run_project_pairs, sources, destinations, args.kappa, args.batch)
    pair_rate = m / best
    log(f"  {best:.2f}s, {pair_rate:,.0f} pairs/s ({pair_rate * h:,.0f} sketch updates/s)")
    print()
    print(
        f"# pairs (2-D HHH): LevelSketches over {sk.hierarchy.spec()} (H = {h} sketched nodes, each pair = {h} "
        f"sketch updates), κ={args.kappa}, P=1, batch {args.batch} pairs, best of {args.repeat}; sources = the first "
        f"{m:,} addresses of the stream above, destinations an independent Zipf-ish stream (seed {args.seed + 2}, "
        f"s={args.zipf}); {distinct:,} distinct (/32, /32) pairs"
    )
    print(f"{'implementation':<46} {'elements':>12} {'seconds':>9} {'elements/s':>14} {'sketch updates/s':>17}")
    print(
        f"{'project LevelSketches 1-D addresses':<46} {m:>12,} {m / addr_rate:>9.3f} {addr_rate:>14,.0f} "
        f"{addr_rate * 4:>17,.0f}  (x 4 levels)"
    )
    print(
        f"{'project LevelSketches pairs':<46} {m:>12,} {best:>9.3f} {pair_rate:>14,.0f} {pair_rate * h:>17,.0f}  "
        f"(x {h} nodes)"
    )
    print(
        f"ratio addresses/s / pairs/s = {addr_rate / pair_rate:.1f}x; per sketch update (1-D / pairs) = "
        f"{addr_rate * 4 / (pair_rate * h):.2f}x  (same run, same {m:,} elements)"
    )


def weighted(args, stream: np.ndarray) -> None:
    """Table (d): the stream as weighted flow records, against expanding them into unit inserts."""
    n = stream.shape[0]
    exp_n = min(args.expanded_records or n, n)
    weights = flow_weights(n, seed=args.seed, s=args.weight_zipf, cap=args.weight_cap)
    units = int(weights.sum())
    log(f"(d) weighted records (W={args.weight_cap}, {units:,} weight units), best of {args.repeat} ...")
    run_project_weighted(stream[:1000], weights[:1000], args.kappa, args.batch)  # compile outside the timing
    rows = []  # (name, records, units, seconds, note)
    best, full = best_of(args.repeat, run_project_weighted, stream, weights, args.kappa, args.batch)
    rows.append(("project LevelSketches weighted (full stream)", n, units, best, ""))
    exp_units = int(weights[:exp_n].sum())
    if exp_n < n:
        secs, _ = best_of(args.repeat, run_project_weighted, stream[:exp_n], weights[:exp_n], args.kappa, args.batch)
        rows.append(("project LevelSketches weighted (prefix)", exp_n, exp_units, secs, "prefix of the stream"))
    expanded = np.repeat(stream[:exp_n], weights[:exp_n])
    secs, unit_sk = best_of(args.repeat, run_project, expanded, args.kappa, args.batch)
    _, weighted_sk = run_project_weighted(stream[:exp_n], weights[:exp_n], args.kappa, args.batch)
    same = all(
        unit_sk.sketch(level).to_bytes() == weighted_sk.sketch(level).to_bytes()
        for level in range(1, weighted_sk.hierarchy.h + 1)
    )
    rows.append(
        (
            "same records as unit inserts (np.repeat)",
            exp_n,
            exp_units,
            secs,
            ("prefix of the stream; " if exp_n < n else "") + "final state == weighted: " + ("yes" if same else "NO"),
        )
    )
    log(f"  weighted {n / best:,.0f} records/s; expanded state identical: {same}")
    print()
    print(
        f"# weighted records: the same addresses as flow records, weights min(zipf({args.weight_zipf}), W={args.weight_cap}) "
        f"(mean {units / n:.2f}), κ={args.kappa}, batch {args.batch} records, best of {args.repeat}"
    )
    print(
        f"{'implementation':<46} {'records':>12} {'weight units':>13} {'seconds':>9} {'records/s':>12} {'units/s':>13}  note"
    )
    for name, m, u, secs, note in rows:
        print(f"{name:<46} {m:>12,} {u:>13,} {secs:>9.3f} {m / secs:>12,.0f} {u / secs:>13,.0f}  {note}")
    print(
        "decrement-all steps per level (full weighted stream): "
        + ", ".join(f"{full.sketch(level).decrements:,}" for level in range(1, full.hierarchy.h + 1))
    )


if __name__ == "__main__":
    sys.exit(main())
