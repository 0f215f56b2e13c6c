"""The dashboard's data: report trees and the kept windows."""

from __future__ import annotations

from stream.dashboard import DashboardState, report_tree


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
