"""Time of the exact discrete Laplace sampler versus the inversion sampler it replaced (docs/ALGORITHMS.md §3),
and of the exact discrete Gaussian on words versus its Python-integer loop.

What it measures
----------------
Both samplers run in this one process, interleaved (old, new, old, new, ...), and each figure is
the median over ``--repeats`` runs (after one warm-up run, which also builds the new sampler's
per-scale tables; the cold first call is printed separately):

* **window**: the noise one release window draws at the defaults, h·P = 4 sketch releases of
  γ and γ' (one draw each) and w, w' (κ = 1024 draws each) at b = 2h/ε_release = 2·4/0.9, plus
  one window-size draw at b = 1/0.1 — 17 calls, as :func:`dphhh.privacy.release.release_arrays`
  makes them. Timed with the seeded source (tests) and with the secure source (production).
* **bulk**: one call of 2·10^6 draws at b = 9 and b = 36 (the size of the statistical audits'
  calls in tests/audit/) and at b = 10^6 (group scales).

The old sampler is ``privacy.noise._discrete_laplace_inversion`` (floor(log1p(-u)/log1p(-p)) from
53-bit uniforms, kept as a reference; ``old_elementwise`` below is the replaced elementwise
function); the new ones are ``privacy.noise.discrete_laplace`` and
``privacy.noise.discrete_laplace_elementwise``. **elementwise** rows: 2·10^6 draws over three
scales (each shared by many elements: the table path) and 2·10^4 draws with 2·10^4 distinct
scales (the per-element Canonne-Kamath-Steinke path, the slow case).

**gaussian** rows: 2·10^4 exact discrete Gaussian draws, the Python-integer loop
(``privacy.noise._discrete_gaussian_python``, the only sampler before 2026-12-07) versus
``privacy.noise.discrete_gaussian`` (the same CKS algorithm on 64-bit words when its exponents fit).

Run: ``.venv/bin/python benchmarks/noise_sampler.py [--repeats 31]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dphhh.privacy import noise
from dphhh.privacy.randomness import RandomSource, SecureRandomSource, SeededRandomSource

Sampler = Callable[[float, int, RandomSource], np.ndarray]

H, P, KAPPA = 4, 1, 1024
EPSILON_RELEASE = 0.9
B_RELEASE = 2 * H / EPSILON_RELEASE
B_SIZE = 1 / 0.1


def old(scale: float, size: int, source: RandomSource) -> np.ndarray:
    return noise._discrete_laplace_inversion(scale, size, source)


def new(scale: float, size: int, source: RandomSource) -> np.ndarray:
    return noise.discrete_laplace(scale, size, source)


def old_elementwise(scales: np.ndarray, source: RandomSource) -> np.ndarray:
    """The replaced discrete_laplace_elementwise (the same inversion with one scale per element)."""
    scale_arr = np.asarray(scales, dtype=np.float64)
    n = scale_arr.size
    with np.errstate(over="ignore", divide="ignore"):
        inv = 1.0 / scale_arr.ravel()
    zero = np.isinf(inv) | (-np.expm1(-inv) == 1.0)
    log1m_p = np.where(zero, -1.0, -inv)
    u = noise.uniform01(source, 2 * n)
    g_pos = noise._geometric_from_uniforms(u[:n], log1m_p)
    g_neg = noise._geometric_from_uniforms(u[n:], log1m_p)
    return np.where(zero, 0, g_pos - g_neg).astype(np.int64).reshape(scale_arr.shape)


def window(sample: Sampler, source: RandomSource) -> None:
    """The draws of one release window at the defaults (see the module docstring)."""
    for _ in range(H * P):
        sample(B_RELEASE, 1, source)  # γ
        sample(B_RELEASE, KAPPA, source)  # w
        sample(B_RELEASE, KAPPA, source)  # w'
        sample(B_RELEASE, 1, source)  # γ'
    sample(B_SIZE, 1, source)  # window size


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def compare(label: str, work_old: Callable[[], object], work_new: Callable[[], object], repeats: int) -> None:
    work_old(), work_new()  # warm-up (numpy paths, the new sampler's tables)
    t_old, t_new = [], []
    for _ in range(repeats):
        t_old.append(timed(work_old))
        t_new.append(timed(work_new))
    m_old, m_new = statistics.median(t_old), statistics.median(t_new)
    print(f"{label:<44} old {m_old * 1e3:9.3f} ms   new {m_new * 1e3:9.3f} ms   new/old {m_new / m_old:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=31, help="timed runs per figure (median reported)")
    args = parser.parse_args()
    seeded, secure = SeededRandomSource(1), SecureRandomSource()

    noise._plan.cache_clear()
    cold = timed(lambda: new(B_RELEASE, 1, seeded)) + timed(lambda: new(B_SIZE, 1, seeded))
    print(f"new sampler, first calls (build the tables for b = {B_RELEASE:.4g} and {B_SIZE:g}): {cold * 1e3:.2f} ms")
    print(
        f"window at the defaults ({H * P} sketch releases, kappa = {KAPPA}, b = {B_RELEASE:.4g}; size at b = {B_SIZE:g}):"
    )
    compare("  window, seeded source", lambda: window(old, seeded), lambda: window(new, seeded), args.repeats)
    compare("  window, secure source", lambda: window(old, secure), lambda: window(new, secure), args.repeats)
    print("bulk draws (one call):")
    bulk_repeats = max(3, args.repeats // 4)
    for b in (9.0, 36.0, 1e6):
        compare(
            f"  2e6 draws at b = {b:g}",
            lambda b=b: old(b, 2_000_000, seeded),
            lambda b=b: new(b, 2_000_000, seeded),
            bulk_repeats,
        )
    scales = np.broadcast_to(np.array([0.5, 3.0, 40.0]), (2_000_000 // 3, 3))
    compare(
        "  elementwise, 2e6 draws, 3 scales",
        lambda: old_elementwise(scales, seeded),
        lambda: noise.discrete_laplace_elementwise(scales, seeded),
        bulk_repeats,
    )
    distinct = np.linspace(0.5, 50.0, 20_000)
    compare(
        "  elementwise, 2e4 draws, 2e4 distinct scales",
        lambda: old_elementwise(distinct, seeded),
        lambda: noise.discrete_laplace_elementwise(distinct, seeded),
        bulk_repeats,
    )
    print("exact discrete Gaussian (old: the Python-integer CKS loop; new: the same algorithm on words):")
    for sigma2 in (Fraction(58619, 1024), Fraction(10**6)):  # InfTDA's at eps = 1, delta = 1e-6, h = 1; a wide one
        compare(
            f"  2e4 draws at sigma2 = {float(sigma2):.6g}",
            lambda sigma2=sigma2: noise._discrete_gaussian_python(sigma2, 20_000, seeded),
            lambda sigma2=sigma2: noise.discrete_gaussian(sigma2, 20_000, seeded),
            bulk_repeats,
        )


if __name__ == "__main__":
    main()
