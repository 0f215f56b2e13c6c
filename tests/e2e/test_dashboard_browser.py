"""`dphhh dashboard` in headless Chromium (Debian's, driven by Playwright): the page loads the
published reports, draws the hierarchy, updates live when a new report arrives, and a screenshot
is written under test-output/."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privacy.params import HHHParams
from sketches.hierarchy import parse_hierarchy
from stream.batch import batch_report
from stream.paths import DEMO_CAPTURE, capture
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
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("dphhh")), "dashboard", "--file", str(feed), "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    OUTPUT.mkdir(exist_ok=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
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
            page.screenshot(path=str(OUTPUT / "dashboard.png"), full_page=True)
            with open(feed, "a") as fh:  # a new report arrives
                fh.write(json.dumps(reports[2], sort_keys=True) + "\n")
            page.wait_for_selector("body[data-windows='3']", timeout=20_000)
            assert "window-2-start" in page.inner_text("#status")
            page.screenshot(path=str(OUTPUT / "dashboard-updated.png"), full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert (OUTPUT / "dashboard.png").stat().st_size > 10_000
