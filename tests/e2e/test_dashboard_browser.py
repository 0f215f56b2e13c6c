"""`dphhh dashboard` in headless Chromium (Debian's, driven by Playwright): the page loads the
published reports, draws the hierarchy, updates live when a new report arrives, shows a pair
report (docs/ALGORITHMS.md §11) as a table of pairs that 30 pairs fit, and screenshots are written
under test-output/."""

from __future__ import annotations

import copy
import json
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dphhh.privacy.params import HHHParams
from dphhh.sketches.specs import parse_hierarchy
from dphhh.stream.batch import batch_report
from dphhh.stream.paths import DEMO_CAPTURE, capture
from tests.e2e.net import free_port

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = capture(DEMO_CAPTURE)
OUTPUT = ROOT / "test-output"


def _reports(count: int) -> list[dict]:
    """Window reports of the shared capture (the batch command's reports, placed in consecutive windows)."""
    out = []
    for i in range(count):
        report = batch_report(
            str(CAPTURE),
            input_format="auto",
            hierarchy=parse_hierarchy("ipv4:8,16,24,32"),
            params=HHHParams(epsilon=2.0, delta=1e-6, tau=600.0),
            seed=i,
        )
        start = 1_796_000_000_000 + 10_000 * i
        report["window"].update(
            {"start_ms": start, "end_ms": start + 10_000, "start": f"window-{i}-start", "end": f"window-{i}-end"}
        )
        out.append(report)
    return out


def _pair_report() -> dict:
    """The capture's report over source × destination prefixes (the batch command's, one window)."""
    report = batch_report(
        str(CAPTURE),
        input_format="auto",
        hierarchy=parse_hierarchy("ipv4:8,16,24,32 x ipv4:8,16,24,32"),
        params=HHHParams(epsilon=4.0, delta=1e-6, tau=300.0),
        seed=0,
    )
    start = 1_796_000_000_000
    report["window"].update(
        {"start_ms": start, "end_ms": start + 10_000, "start": "pairs-0-start", "end": "pairs-0-end"}
    )
    return report


def _thirty_pairs(real: dict) -> dict:
    """A synthetic pair report of 30 pairs with the longest labels there are (IPv6 /128 × IPv6 /128
    and shorter), in no particular order, otherwise shaped like ``real`` (its guarantees and budget)."""
    report = copy.deepcopy(real)
    report["params"]["hierarchy"] = "ipv6:32,64,128 x ipv6:32,64,128"
    start = real["window"]["start_ms"] + 10_000
    report["window"].update(
        {"start_ms": start, "end_ms": start + 10_000, "start": "pairs-1-start", "end": "pairs-1-end", "n_noisy": 60_000}
    )
    shuffled = random.Random(3).sample(range(30), 30)
    items = []
    for i in range(30):
        source = f"2001:db8:{i:x}a5:7f3e:c0de:beef:1234:{i:04x}/128" if i % 3 else f"2001:db8:{i:x}a5::/32"
        destination = f"2a02:ffff:ee{i:02x}:abcd:9876:5432:10fe:dcba/128" if i % 2 else f"2a02:ffff:ee{i:02x}::/64"
        count = 500.0 + 400.0 * shuffled[i]
        items.append(
            {
                "prefix": f"{source} → {destination}",
                "level": 1 + i % 15,
                "node": [3 if i % 3 else 1, 3 if i % 2 else 2],
                "verdict": "heavy" if i % 4 == 0 else "possible",
                "count": count,
                "residual": count - 100.0,
                "lower": count - 215.0,
                "upper": count + 273.2,
                "residual_lower": count - 315.0,
            }
        )
    report["hhh"] = items
    return report


@contextmanager
def _dashboard(feed: Path) -> Iterator[int]:
    """`dphhh dashboard --file feed` on a free port, until the block ends; yields the port."""
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("dphhh")), "dashboard", "--file", str(feed), "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def chromium() -> str:
    subprocess.run(
        ["bash", str(ROOT / "deploy" / "install-debian.sh"), "chromium"], check=True, capture_output=True, timeout=900
    )
    return "/usr/bin/chromium"


def test_dashboard_page_shows_reports_and_updates_live(chromium: str, tmp_path: Path) -> None:
    """The page shows both reported windows and the capture's heavy /8 prefixes, then shows a third
    window appended to the reports file without a reload; screenshots go to test-output/."""
    from playwright.sync_api import sync_playwright

    reports = _reports(3)
    feed = tmp_path / "reports.jsonl"
    feed.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in reports[:2]))
    OUTPUT.mkdir(exist_ok=True)
    with _dashboard(feed) as port:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("body[data-windows='2']", timeout=20_000)
            prefixes = page.eval_on_selector_all("#icicle g.node", "gs => gs.map(g => g.dataset.prefix)")
            # the latest window's reported prefixes, among them the capture's heavy /16s and /8s
            shown = {x["prefix"] for x in reports[1]["hhh"]}
            assert {"107.164.0.0/16", "172.0.0.0/8"} <= shown and shown <= set(prefixes)
            assert page.locator("#totals polyline.series").count() == 1
            assert page.locator("#ledger tr").count() >= 2  # header + the budget entries
            assert "window-1-start" in page.inner_text("#status")
            # 1-D: the icicle, no table of pairs and no 2-D coverage line
            assert page.get_attribute("body", "data-view") == "hierarchy" and page.locator("#icicle").is_visible()
            assert page.locator("#pairs tr.pair").count() == 0 and not page.locator("#coverage").is_visible()
            page.screenshot(path=str(OUTPUT / "dashboard.png"), full_page=True)
            with open(feed, "a") as fh:  # a new report arrives
                fh.write(json.dumps(reports[2], sort_keys=True) + "\n")
            page.wait_for_selector("body[data-windows='3']", timeout=20_000)
            assert "window-2-start" in page.inner_text("#status")
            page.screenshot(path=str(OUTPUT / "dashboard-updated.png"), full_page=True)
            browser.close()
    assert (OUTPUT / "dashboard.png").stat().st_size > 10_000


_ROWS = """rows => rows.map(r => ({prefix: r.dataset.prefix, count: Number(r.dataset.count), text: r.innerText,
    left: r.getBoundingClientRect().left, right: r.getBoundingClientRect().right,
    overflowing: [...r.cells].filter(c => c.scrollWidth > c.clientWidth + 1).length}))"""
_WIDTH = "() => [document.documentElement.clientWidth, document.documentElement.scrollWidth]"


def _by_count(report: dict) -> list[str]:
    """The report's prefixes, largest noisy count first (ties by prefix), as the page lists them."""
    return [x["prefix"] for x in sorted(report["hhh"], key=lambda x: (-x["count"], x["prefix"]))]


def _check_rows(page: Any, expected: list[str]) -> None:
    """The pair rows are ``expected`` (largest count first), each with its arrow, inside the page's
    width, no cell's text overflowing its cell."""
    rows = page.eval_on_selector_all("#pairs tr.pair", _ROWS)
    width, _ = page.evaluate(_WIDTH)
    assert [r["prefix"] for r in rows] == expected
    assert [r["count"] for r in rows] == sorted((r["count"] for r in rows), reverse=True)
    for r in rows:
        assert "→" in r["text"], r
        assert 0 <= r["left"] and r["right"] <= width + 0.5, (r, width)
        assert r["overflowing"] == 0, r


def test_dashboard_page_shows_a_pair_report_as_a_table_of_pairs(chromium: str, tmp_path: Path) -> None:
    """A pair report is shown as rows of pairs (source → destination, node, verdict, count with its
    interval, a bar) with the report's no-coverage line instead of the icicle; then a report of 30
    long-labelled pairs arrives and all 30 rows fit the page's width (at 1200 px and at 720 px);
    screenshots of both go to test-output/."""
    from playwright.sync_api import sync_playwright

    real = _pair_report()
    thirty = _thirty_pairs(real)
    feed = tmp_path / "reports.jsonl"
    feed.write_text(json.dumps(real, sort_keys=True) + "\n")
    OUTPUT.mkdir(exist_ok=True)
    with _dashboard(feed) as port:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("body[data-windows='1'][data-view='pairs']", timeout=20_000)
            assert len(real["hhh"]) >= 1
            _check_rows(page, _by_count(real))
            top = next(x for x in real["hhh"] if x["prefix"] == _by_count(real)[0])
            first = page.locator("#pairs tr.pair").first
            source, destination = top["prefix"].split(" → ")
            assert first.locator("td.source").inner_text() == source
            assert first.locator("td.destination").inner_text() == destination
            assert first.locator("td.node").inner_text() == "({}, {})".format(*top["node"])
            assert first.locator("td.verdict").inner_text() == top["verdict"]
            verdicts = page.eval_on_selector_all("#pairs td.verdict", "cs => cs.map(c => c.innerText)")
            assert set(verdicts) <= {"heavy", "possible"}
            assert page.locator("#coverage").is_visible() and not page.locator("#icicle").is_visible()
            assert page.inner_text("#coverage") == "Coverage: " + real["guarantees"]["coverage"]
            assert "not claimed in 2-D" in page.inner_text("#coverage")
            assert "1 window(s)" in page.inner_text("#status") and "pair(s)" in page.inner_text("#status")
            page.screenshot(path=str(OUTPUT / "dashboard-pairs.png"), full_page=True)
            with open(feed, "a") as fh:  # a report of 30 pairs arrives
                fh.write(json.dumps(thirty, sort_keys=True) + "\n")
            page.wait_for_selector("body[data-windows='2']", timeout=20_000)
            assert page.locator("#pairs tr.pair").count() == 30
            _check_rows(page, _by_count(thirty))
            width, scroll = page.evaluate(_WIDTH)
            assert scroll <= width, (scroll, width)  # no sideways scrolling: the table fits
            page.screenshot(path=str(OUTPUT / "dashboard-pairs-30.png"), full_page=True)
            page.set_viewport_size({"width": 720, "height": 900})
            _check_rows(page, _by_count(thirty))
            browser.close()
    assert (OUTPUT / "dashboard-pairs.png").stat().st_size > 10_000
