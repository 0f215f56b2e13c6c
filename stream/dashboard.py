"""``dphhh dashboard``: a small built-in web page of the latest private reports, updated live.

The server reads published reports (read-committed) from the reports topic — or a reports
JSON-lines file — keeps the most recent ones, and serves:

* ``/``: one self-contained page (no external scripts: works offline) that polls ``/api/state``
  every two seconds and draws the latest window's HHH as an icicle picture of the hierarchy (each
  prefix under its nearest reported ancestor, width by noisy count, with the ±α1 interval and the
  verdict in its tooltip), the noisy window totals and the top prefixes across windows as time
  series, and the privacy ledger (budget per mechanism, ε spent over the windows shown);
* ``/api/state``: the same data as JSON (windows in order, the latest with its tree).

A report of a pair hierarchy (docs/ALGORITHMS.md §11, ``"A x B"``) has no containment nesting an
icicle could show: its latest window is drawn as a table of the pairs instead (source prefix →
destination prefix, lattice node, verdict, noisy count with its interval, a bar of the count's
share of the window's noisy size), largest count first, with the report's coverage statement
(not claimed in 2-D); ``/api/state`` then carries them as ``latest.pairs`` (:func:`report_pairs`).

Everything shown comes from published reports: nothing un-noised ever reaches the page.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["DashboardState", "report_tree", "report_pairs", "is_pair_report", "serve_dashboard", "PAGE"]

# As sketches.pairs (PAIR_SEPARATOR / is_pair_spec, ARROW), kept here so that the dashboard's server
# imports no numerical code; tests/stream/test_dashboard_state.py checks that they agree.
#: How a pair prefix is written: ``"10.0.0.0/8 → 198.51.100.0/24"``.
ARROW = " → "


def _contains(ancestor: str, prefix: str, kind: str) -> bool:
    """Whether prefix label ``ancestor`` contains ``prefix`` (IPv4/IPv6 networks or ``/``-paths)."""
    if kind == "path":
        return prefix.startswith(ancestor + "/")
    try:
        return ipaddress.ip_network(prefix).subnet_of(ipaddress.ip_network(ancestor))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False


def is_pair_report(report: dict[str, Any]) -> bool:
    """Whether ``report`` is of a pair hierarchy (``params.hierarchy`` like ``"ipv4:8,16 x ipv4:8,16"``)."""
    spec = report.get("params", {}).get("hierarchy")
    return isinstance(spec, str) and (" x " in spec or "×" in spec)


def report_pairs(report: dict[str, Any]) -> list[dict[str, Any]]:
    """A pair report's HHH as a flat list, largest noisy count first: each pair's prefix and its two
    sides (split at the arrow), level index, lattice node [ℓ1, ℓ2], verdict, noisy count with its
    interval, residual and the residual's lower bound — all as the report has them."""
    rows = []
    for item in report.get("hhh", []):
        prefix = str(item.get("prefix"))
        source, arrow, destination = prefix.partition(ARROW)
        rows.append(
            {
                "prefix": prefix,
                "source": source,
                "destination": destination if arrow else "",
                "level": item.get("level"),
                "node": item.get("node"),
                "verdict": item.get("verdict"),
                "count": item.get("count"),
                "lower": item.get("lower"),
                "upper": item.get("upper"),
                "residual": item.get("residual", item.get("estimate")),
                "residual_lower": item.get("residual_lower"),
            }
        )
    rows.sort(key=lambda r: (-float(r["count"] or 0), r["prefix"]))
    return rows


def report_tree(report: dict[str, Any]) -> dict[str, Any]:
    """The report's HHH as a tree: root = the window (its noisy size), each prefix under its nearest
    reported ancestor (levels ascending). A pair report's tree is flat: every pair is a child of the
    root (largest count first; a reported root pair (0, 0) is the root), since pairs do not nest
    as one chain of containing prefixes."""
    spec = str(report.get("params", {}).get("hierarchy", "ipv4"))
    kind = spec.split(":", 1)[0]
    if is_pair_report(report):
        root: dict[str, Any] = {
            "prefix": "*",
            "level": 0,
            "count": report.get("window", {}).get("n_noisy", 0),
            "children": [],
        }
        for row in report_pairs(report):
            node = {**row, "children": []}
            if node["level"] == 0:
                root.update(row)
            else:
                root["children"].append(node)
        return root
    root = {
        "prefix": "*",
        "level": 0,
        "count": report.get("window", {}).get("n_noisy", 0),
        "children": [],
    }
    placed: list[dict[str, Any]] = []
    for item in sorted(report.get("hhh", []), key=lambda x: (x.get("level", 0), str(x.get("prefix")))):
        node = {
            "prefix": item.get("prefix"),
            "level": item.get("level"),
            "count": item.get("count"),
            "residual": item.get("residual", item.get("estimate")),  # report/1 called it estimate
            "verdict": item.get("verdict"),
            "lower": item.get("lower"),
            "upper": item.get("upper"),
            "children": [],
        }
        if node["level"] == 0:  # the root prefix itself is reported: it is the tree's root
            root.update({k: v for k, v in node.items() if k != "children"})
            continue
        parent = root
        for candidate in reversed(placed):
            if candidate["level"] < node["level"] and _contains(candidate["prefix"], node["prefix"], kind):
                parent = candidate
                break
        parent["children"].append(node)
        placed.append(node)
    return root


class DashboardState:
    """The most recent reports (at most ``keep``), thread-safe."""

    def __init__(self, keep: int = 120) -> None:
        self.reports: deque[dict[str, Any]] = deque(maxlen=keep)
        self.lock = threading.Lock()
        self.version = 0

    def add(self, report: dict[str, Any]) -> None:
        with self.lock:
            start = report.get("window", {}).get("start_ms")
            if any(r.get("window", {}).get("start_ms") == start for r in self.reports):
                return  # a republished window (identical by the ledger)
            self.reports.append(report)
            ordered = sorted(self.reports, key=lambda r: r.get("window", {}).get("start_ms") or 0)
            self.reports.clear()
            self.reports.extend(ordered)
            self.version += 1

    def snapshot(self) -> dict[str, Any]:
        """The page's data: every kept window (time, noisy size, HHH, budget) and the latest tree
        (and, for a pair report, its pairs; ``None`` otherwise)."""
        with self.lock:
            reports = list(self.reports)
            version = self.version
        windows = []
        for r in reports:
            w, b = r.get("window", {}), r.get("budget", {})
            windows.append(
                {
                    "start_ms": w.get("start_ms"),
                    "end_ms": w.get("end_ms"),
                    "start": w.get("start"),
                    "n_noisy": w.get("n_noisy"),
                    "epsilon": b.get("epsilon"),
                    "delta": b.get("delta"),
                    "hhh": [
                        {"prefix": x.get("prefix"), "level": x.get("level"), "count": x.get("count")}
                        for x in r.get("hhh", [])
                    ],
                }
            )
        latest = reports[-1] if reports else None
        return {
            "version": version,
            "windows": windows,
            "latest": None
            if latest is None
            else {
                "window": latest.get("window"),
                "params": latest.get("params"),
                "guarantees": latest.get("guarantees"),
                "budget": latest.get("budget"),
                "tree": report_tree(latest),
                "pairs": report_pairs(latest) if is_pair_report(latest) else None,
            },
        }


def _reader_kafka(state: DashboardState, options: dict[str, Any], topic: str, stop: threading.Event) -> None:
    from dphhh.connectors.kafka_io import iter_committed_values

    for _, value in iter_committed_values(options, topic, follow=True, stop=stop):
        state.add(json.loads(value))


def _reader_file(state: DashboardState, path: Path, stop: threading.Event) -> None:
    """Follow a reports JSON-lines file (one report per line, appended as windows are released)."""
    offset = 0
    while not stop.is_set():
        if path.exists():
            with open(path, "rb") as fh:
                fh.seek(offset)
                for line in fh:
                    if not line.endswith(b"\n"):
                        break
                    offset += len(line)
                    if line.strip():
                        state.add(json.loads(line))
        stop.wait(0.5)


class _Handler(BaseHTTPRequestHandler):
    state: DashboardState

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path in ("/", "/index.html"):
            body, kind = PAGE.encode("utf-8"), "text/html; charset=utf-8"
        elif self.path.startswith("/api/state"):
            body, kind = json.dumps(self.state.snapshot()).encode("utf-8"), "application/json"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: no request log lines
        pass


def serve_dashboard(
    state: DashboardState, port: int, host: str = "127.0.0.1", sources: Iterable[threading.Thread] = ()
) -> ThreadingHTTPServer:
    """Start the HTTP server (daemon thread) and the report readers; returns the server."""
    handler = type("DashboardHandler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for thread in sources:
        thread.start()
    return server


def kafka_source(state: DashboardState, options: dict[str, Any], topic: str, stop: threading.Event) -> threading.Thread:
    """A reader thread of a reports topic (read-committed, from the beginning)."""
    return threading.Thread(target=_reader_kafka, args=(state, options, topic, stop), daemon=True)


def file_source(state: DashboardState, path: Path, stop: threading.Event) -> threading.Thread:
    """A reader thread following a reports JSON-lines file."""
    return threading.Thread(target=_reader_file, args=(state, path, stop), daemon=True)


PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dphhh — private HHH</title>
<style>
 body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; background: #fafafa; }
 h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
 .sub { color: #666; } .card { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px; }
 .grid { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
 table { border-collapse: collapse; width: 100%; } td, th { padding: 3px 6px; border-bottom: 1px solid #eee; text-align: left; }
 svg text { font-size: 11px; } .note { color: #666; font-size: 12px; }
 table.pairs { table-layout: fixed; } table.pairs td, table.pairs th { overflow-wrap: anywhere; vertical-align: middle; }
 table.pairs td.prefix { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
 table.pairs .arrow { text-align: center; color: #888; padding: 3px 0; }
 table.pairs .num { text-align: right; color: #888; padding: 3px 4px 3px 0; }
 table.pairs td.verdict-heavy { font-weight: 600; color: #1b5e20; } table.pairs td.verdict-possible { color: #777; }
 .track { position: relative; height: 14px; background: #eee; border-radius: 2px; }
 .track .bar { position: absolute; left: 0; top: 0; bottom: 0; background: #4e79a7; border-radius: 2px; }
 .track .bar.possible { background: #9bb5d3; }
 .track .interval { position: absolute; top: 6px; height: 2px; background: #333; }
 .share { font-size: 11px; color: #666; }
</style></head>
<body>
<h1>dphhh — private hierarchical heavy hitters</h1>
<div class="sub" id="status">waiting for reports …</div>
<div class="card"><h2 id="latest-title">Latest window: the HHH as a hierarchy (width = noisy count; hover for the ±α1 interval)</h2>
 <svg id="icicle" width="100%" height="230" viewBox="0 0 1000 230" preserveAspectRatio="none"></svg>
 <div id="pairs" style="display: none"></div>
 <div class="note" id="coverage" style="display: none"></div>
 <div class="note" id="guarantee"></div></div>
<div class="grid">
 <div class="card"><h2>Noisy window totals</h2><svg id="totals" width="100%" height="180" viewBox="0 0 480 180"></svg></div>
 <div class="card"><h2>Top prefixes across windows (noisy counts)</h2><svg id="top" width="100%" height="180" viewBox="0 0 480 180"></svg>
  <div class="note" id="toplegend"></div></div>
</div>
<div class="card"><h2>Privacy ledger</h2><table id="ledger"></table><div class="note" id="spent"></div></div>
<script>
const COLORS = ["#4e79a7","#f28e2b","#e15759","#76b7b2","#59a14f","#edc948","#b07aa1","#ff9da7"];
let version = -1;
function el(tag, attrs, text) { const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
function fmt(x) { return (x === null || x === undefined) ? "–" : Number(x).toLocaleString(undefined, {maximumFractionDigits: 1}); }
function icicle(tree) {
  const svg = document.getElementById("icicle"); svg.innerHTML = "";
  const rowH = 44, W = 1000;
  function draw(node, x0, width, depth) {
    const g = el("g", {"class": "node", "data-prefix": node.prefix, "data-verdict": node.verdict || ""});
    const r = el("rect", {x: x0, y: depth * rowH, width: Math.max(width - 1, 1), height: rowH - 3,
                          fill: COLORS[depth % COLORS.length], opacity: 0.85});
    const tip = node.level === 0 && node.lower === undefined ? "window: noisy size " + fmt(node.count)
              : node.prefix + ": noisy count " + fmt(node.count) + "  [" + fmt(node.lower) + ", " + fmt(node.upper) + "]"
                + (node.verdict ? "  " + node.verdict : "");
    r.appendChild(el("title", {}, tip)); g.appendChild(r);
    const label = node.prefix === "*" ? "window (all)" : node.prefix;
    if (width > 7 * label.length + 8) {  // labels only where they fit; the tooltip has them all
      g.appendChild(el("text", {x: x0 + 4, y: depth * rowH + 16}, label));
      g.appendChild(el("text", {x: x0 + 4, y: depth * rowH + 31}, fmt(node.count)));
    }
    svg.appendChild(g);
    const kids = node.children || [];
    const total = Math.max(node.count || 0, kids.reduce((s, c) => s + Math.max(c.count || 0, 0), 0), 1);
    let x = x0;
    for (const c of kids) { const w = width * Math.max(c.count || 0, 0) / total; draw(c, x, w, depth + 1); x += w; }
  }
  draw(tree, 0, W, 0);
}
const ICICLE_TITLE = "Latest window: the HHH as a hierarchy (width = noisy count; hover for the ±α1 interval)";
const PAIRS_TITLE = "Latest window: the HHH pairs, source prefix → destination prefix, largest noisy count first "
  + "(bar = share of the window's noisy size, line = the count's interval; hover for the residual)";
function cell(tr, tag, text, cls) { const c = document.createElement(tag); c.textContent = text;
  if (cls) c.className = cls; tr.appendChild(c); return c; }
function pairTable(rows, size, guarantees) {  // a pair report: no nesting to draw, a table of the pairs
  const box = document.getElementById("pairs"); box.innerHTML = "";
  if (!rows.length) { box.textContent = "no pair reported in this window"; return; }
  const verdicts = (guarantees || {}).verdicts || {};
  // shares of the window's noisy size (clipped at 100 %: a noisy count may exceed it)
  const total = size > 0 ? size : Math.max(...rows.map(r => r.count || 0), 1);
  const pct = v => 100 * Math.min(Math.max((v || 0) / total, 0), 1);
  const table = document.createElement("table"); table.className = "pairs";
  const cols = document.createElement("colgroup");
  for (const w of ["4%", "21%", "3%", "21%", "6%", "8%", "18%", "19%"]) {
    const c = document.createElement("col"); c.style.width = w; cols.appendChild(c); }
  table.appendChild(cols);
  const head = document.createElement("tr");
  ["#", "source prefix", "", "destination prefix", "node", "verdict", "noisy count [lower, upper]",
   "share of the window"].forEach((h, i) => cell(head, "th", h, i === 0 ? "num" : (i === 2 ? "arrow" : "")));
  table.appendChild(head);
  rows.forEach((r, i) => {
    const tr = document.createElement("tr"); tr.className = "pair";
    tr.dataset.prefix = r.prefix; tr.dataset.verdict = r.verdict || ""; tr.dataset.count = String(r.count);
    tr.title = r.prefix + ": noisy count " + fmt(r.count) + "  [" + fmt(r.lower) + ", " + fmt(r.upper) + "]; residual "
      + fmt(r.residual) + " (lower bound " + fmt(r.residual_lower) + ")" + (r.verdict ? "  " + r.verdict : "");
    cell(tr, "td", String(i + 1), "num");
    cell(tr, "td", r.source, "prefix source");
    cell(tr, "td", "→", "arrow");
    cell(tr, "td", r.destination, "prefix destination");
    cell(tr, "td", Array.isArray(r.node) ? "(" + r.node.join(", ") + ")" : "–", "node");
    const v = cell(tr, "td", r.verdict || "–", "verdict verdict-" + (r.verdict || "none"));
    if (verdicts[r.verdict]) v.title = r.verdict + ": " + verdicts[r.verdict];
    cell(tr, "td", fmt(r.count) + " [" + fmt(r.lower) + ", " + fmt(r.upper) + "]", "count");
    const b = cell(tr, "td", "", "barcell");
    const track = document.createElement("div"); track.className = "track";
    const bar = document.createElement("div"); bar.className = "bar " + (r.verdict || "");
    bar.style.width = pct(r.count) + "%"; track.appendChild(bar);
    const iv = document.createElement("div"); iv.className = "interval";
    iv.style.left = pct(r.lower) + "%"; iv.style.width = Math.max(pct(r.upper) - pct(r.lower), 0) + "%";
    track.appendChild(iv); b.appendChild(track);
    const share = document.createElement("div"); share.className = "share";
    share.textContent = (100 * (r.count || 0) / total).toFixed(1) + " % of " + (size > 0 ? fmt(size) : "the largest count");
    b.appendChild(share);
    table.appendChild(tr);
  });
  box.appendChild(table);
}
function lines(svgId, series, labels) {
  const svg = document.getElementById(svgId); svg.innerHTML = "";
  const W = 480, H = 180, L = 50, B = 20;
  const all = series.flatMap(s => s.filter(v => v !== null)); const max = Math.max(1, ...all);
  const n = Math.max(...series.map(s => s.length), 2);
  svg.appendChild(el("line", {x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#999"}));
  svg.appendChild(el("text", {x: 2, y: 12}, fmt(max))); svg.appendChild(el("text", {x: 2, y: H - B}, "0"));
  series.forEach((s, i) => {
    const pts = s.map((v, j) => v === null ? null : [L + (W - L) * j / (n - 1), (H - B) - (H - B - 10) * v / max])
                 .filter(p => p !== null).map(p => p.join(",")).join(" ");
    svg.appendChild(el("polyline", {points: pts, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2,
                                    "class": "series", "data-label": labels ? labels[i] : "total"}));
  });
}
function render(state) {
  const w = state.windows;
  const paired = !!(state.latest && state.latest.pairs);
  document.getElementById("status").textContent = w.length
    ? w.length + " window(s); latest " + state.latest.window.start + " .. " + state.latest.window.end
      + " — noisy size " + fmt(state.latest.window.n_noisy) + ", " + (w[w.length - 1].hhh.length)
      + (paired ? " pair(s)" : " prefix(es)")
    : "waiting for reports …";
  document.body.setAttribute("data-windows", String(w.length));
  if (!state.latest) return;
  document.body.setAttribute("data-view", paired ? "pairs" : "hierarchy");
  document.getElementById("latest-title").textContent = paired ? PAIRS_TITLE : ICICLE_TITLE;
  document.getElementById("icicle").style.display = paired ? "none" : "";
  document.getElementById("pairs").style.display = paired ? "" : "none";
  const coverage = document.getElementById("coverage");
  coverage.style.display = paired ? "" : "none";
  if (paired) {
    pairTable(state.latest.pairs, state.latest.window.n_noisy, state.latest.guarantees);
    const said = (state.latest.guarantees || {}).coverage;
    coverage.textContent = "Coverage: " + (said || "not claimed in 2-D");
  } else {
    document.getElementById("pairs").innerHTML = ""; coverage.textContent = "";
    icicle(state.latest.tree);
  }
  document.getElementById("guarantee").textContent = (state.latest.guarantees || {}).randomness
    ? state.latest.budget.guarantee + " — randomness: " + state.latest.guarantees.randomness : state.latest.budget.guarantee;
  lines("totals", [w.map(x => x.n_noisy)]);
  const latestTop = w[w.length - 1].hhh.filter(x => x.level > 0).sort((a, b) => b.count - a.count)
                     .slice(0, 5).map(x => x.prefix);
  lines("top", latestTop.map(p => w.map(x => { const h = x.hhh.find(y => y.prefix === p); return h ? h.count : null; })), latestTop);
  // labels are data (a path's prefix is the input's own text): text nodes only, never markup
  const legend = document.getElementById("toplegend"); legend.replaceChildren();
  latestTop.forEach((p, i) => {
    if (i) legend.appendChild(document.createTextNode("\u00a0\u00a0 "));
    const mark = document.createElement("span"); mark.style.color = COLORS[i % COLORS.length]; mark.textContent = "■";
    legend.append(mark, document.createTextNode(" " + p));
  });
  const t = document.getElementById("ledger"); t.replaceChildren();
  const head = document.createElement("tr"); ["mechanism", "ε", "δ", "noise"].forEach(h => cell(head, "th", h));
  t.appendChild(head);
  for (const e of state.latest.budget.entries || []) {
    const tr = document.createElement("tr");
    [e.mechanism, e.epsilon, e.delta, e.noise || ""].forEach(v => cell(tr, "td", String(v)));
    t.appendChild(tr);
  }
  const spent = w.reduce((s, x) => s + (x.epsilon || 0), 0);
  document.getElementById("spent").textContent = "Each window: (" + state.latest.budget.epsilon + ", " + state.latest.budget.delta
    + ")-DP (" + state.latest.budget.unit + " level); windows are disjoint (parallel composition). ε summed over the "
    + w.length + " window(s) shown: " + spent.toFixed(2) + ".";
}
async function poll() {
  try { const r = await fetch("/api/state", {cache: "no-store"}); const s = await r.json();
        if (s.version !== version) { version = s.version; render(s); } } catch (e) {}
  setTimeout(poll, 2000);
}
poll();
</script></body></html>
"""
