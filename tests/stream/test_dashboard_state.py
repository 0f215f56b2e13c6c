"""The dashboard's data: report trees, the pairs of a pair report and the kept windows."""

from __future__ import annotations

import json

import numpy as np

from dphhh.privacy.params import HHHParams
from dphhh.privacy.window import release_window
from dphhh.sketches import pairs
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.specs import parse_hierarchy
from dphhh.stream.dashboard import ARROW, DashboardState, is_pair_report, report_tree


def _report(start: int, hhh: list[tuple[int, str, float]], spec: str = "ipv4:8,16,24,32") -> dict:
    return {
        "params": {"hierarchy": spec},
        "window": {"start_ms": start, "end_ms": start + 10, "n_noisy": 1000},
        "budget": {"epsilon": 1.0, "delta": 1e-6},
        "hhh": [
            {"level": lv, "prefix": p, "count": c, "estimate": c, "lower": c - 5, "upper": c + 5} for lv, p, c in hhh
        ],
    }


def test_tree_puts_each_prefix_under_its_nearest_reported_ancestor() -> None:
    """A /24 goes under its reported /8 when its /16 is not reported; a foreign /16 goes under the root."""
    tree = report_tree(
        _report(
            0, [(0, "0.0.0.0/0", 990.0), (1, "10.0.0.0/8", 600.0), (3, "10.1.2.0/24", 300.0), (2, "20.1.0.0/16", 200.0)]
        )
    )
    assert tree["prefix"] == "0.0.0.0/0" and tree["count"] == 990.0 and tree["lower"] == 985.0
    assert [c["prefix"] for c in tree["children"]] == ["10.0.0.0/8", "20.1.0.0/16"]
    assert [c["prefix"] for c in tree["children"][0]["children"]] == ["10.1.2.0/24"]


def test_tree_of_paths_uses_component_prefixes() -> None:
    """Path prefixes nest by whole components (de/by is not under d)."""
    tree = report_tree(_report(0, [(1, "de", 50.0), (1, "d", 9.0), (2, "de/by", 40.0)], spec="path:3"))
    assert tree["prefix"] == "*" and tree["count"] == 1000
    kids = {c["prefix"]: [g["prefix"] for g in c["children"]] for c in tree["children"]}
    assert kids == {"d": [], "de": ["de/by"]}


def test_state_keeps_windows_in_order_once_and_bounded() -> None:
    """Windows are kept in start order, a republished window is kept once, and only the newest `keep` stay."""
    state = DashboardState(keep=3)
    for start in (20, 0, 10, 10, 30):
        state.add(_report(start, [(1, "10.0.0.0/8", float(start))]))
    snap = state.snapshot()
    assert [w["start_ms"] for w in snap["windows"]] == [10, 20, 30]
    assert snap["latest"]["window"]["start_ms"] == 30 and snap["version"] == 4


def _ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def _pair_report() -> dict:
    """A real report of a pair hierarchy: 20,000 random (source, destination) pairs, 30 % of them in
    the planted pair 10.20.0.0/16 → 198.51.0.0/16, released at a generous ε with seeded randomness."""
    h = parse_hierarchy("ipv4:8,16 x ipv4:8,16")
    rng = np.random.default_rng(4)
    n = 20_000
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    planted = rng.random(n) < 0.3
    a[planted] = np.uint32(_ip("10.20.0.0")) | rng.integers(0, 1 << 16, planted.sum()).astype(np.uint32)
    b[planted] = np.uint32(_ip("198.51.0.0")) | rng.integers(0, 1 << 16, planted.sum()).astype(np.uint32)
    sketches = LevelSketches(h, 256, 1)
    sketches.update((a, b))
    window = {"start_ms": 0, "end_ms": 10_000, "start": "w0", "end": "w1"}
    return release_window(sketches, HHHParams(epsilon=8, delta=1e-6, tau=0.1 * n, counters=256), window=window, rng=9)


def test_pair_report_is_served_as_a_flat_list_of_pairs_largest_count_first() -> None:
    """The page's JSON of a pair report: ``latest.pairs`` holds every reported pair with its two
    sides, node, verdict and interval as the report has them, largest noisy count first; the tree is
    flat (pairs do not nest by containment) and the report's no-coverage statement is passed on."""
    report = _pair_report()
    state = DashboardState()
    state.add(report)
    latest = json.loads(json.dumps(state.snapshot()))["latest"]  # what the page receives
    pairs = latest["pairs"]
    assert len(pairs) == len(report["hhh"]) >= 2
    assert [p["count"] for p in pairs] == sorted((x["count"] for x in report["hhh"]), reverse=True)
    by_prefix = {x["prefix"]: x for x in report["hhh"]}
    for row in pairs:
        item = by_prefix[row["prefix"]]
        assert row["source"] + ARROW + row["destination"] == row["prefix"]
        for key in ("level", "node", "verdict", "count", "lower", "upper", "residual", "residual_lower"):
            assert row[key] == item[key], key
        assert row["verdict"] in ("heavy", "possible") and row["lower"] <= row["count"] <= row["upper"]
    planted = next(p for p in pairs if p["prefix"] == "10.20.0.0/16 → 198.51.0.0/16")
    assert (planted["source"], planted["destination"], planted["node"]) == ("10.20.0.0/16", "198.51.0.0/16", [2, 2])
    assert latest["guarantees"]["coverage_holds"] is False
    assert "not claimed in 2-D" in latest["guarantees"]["coverage"]
    tree = latest["tree"]
    assert all(c["children"] == [] for c in tree["children"])
    assert {c["prefix"] for c in tree["children"]} == {x["prefix"] for x in report["hhh"] if x["level"] != 0}
    assert [c["count"] for c in tree["children"]] == sorted((c["count"] for c in tree["children"]), reverse=True)


def test_one_dimensional_reports_have_no_pairs_and_the_pair_constants_match_sketches() -> None:
    """A 1-D report keeps its tree and has ``pairs: None``; the dashboard's own arrow and pair test
    (kept free of numerical imports) agree with sketches.pairs."""
    state = DashboardState()
    state.add(_report(0, [(1, "10.0.0.0/8", 600.0)]))
    latest = state.snapshot()["latest"]
    assert latest["pairs"] is None and [c["prefix"] for c in latest["tree"]["children"]] == ["10.0.0.0/8"]
    assert ARROW == pairs.ARROW
    for spec in ("ipv4", "ipv4:8,16 x ipv4:8,16", "path:3 × ipv6", "ipv6:16,32"):
        assert is_pair_report({"params": {"hierarchy": spec}}) == pairs.is_pair_spec(spec), spec


def test_the_page_never_parses_data_as_markup() -> None:
    """Report labels are data — a path hierarchy's prefix is the input's own text — so the page
    puts them into text nodes only: no ``innerHTML``/``outerHTML``/``insertAdjacentHTML``/
    ``document.write`` receives anything but the empty string (a heavy path ``<img onerror=…>``
    would otherwise run script in every viewer's browser)."""
    import re

    from dphhh.stream.dashboard import PAGE

    sinks = re.findall(r"(?:innerHTML|outerHTML)\s*=\s*([^;]*);", PAGE)
    assert sinks and all(value.strip() == '""' for value in sinks), sinks
    assert "insertAdjacentHTML" not in PAGE and "document.write" not in PAGE
    broken = PAGE.replace("legend.replaceChildren();", 'legend.innerHTML = latestTop.join(" ");')
    assert [v for v in re.findall(r"(?:innerHTML|outerHTML)\s*=\s*([^;]*);", broken) if v.strip() != '""']
