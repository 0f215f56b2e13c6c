"""The one formatter of everything ``dphhh`` prints as a result: text, JSON or CSV.

``--format text|json|csv`` (:func:`add_format_option`) is offered by every command that prints
results; :func:`render` picks the renderer by the document's ``schema``:

* ``dphhh.report/*`` — a private HHH report (``hhh``, ``demo``, ``run``, ``reports``);
* ``dphhh.exact/*`` — the exact, NON-PRIVATE HHH (``exact``);
* ``dphhh.snapshot/*`` — an offline module's answer (``snapshot``);
* ``dphhh.plan/*`` — a plan (``plan``).

Text output *decides*: a report's first lines say what is guaranteed (the privacy statement, then
the coverage line: holds, or void and why), each prefix carries its verdict (``heavy`` with
probability >= 1 − β, or ``possible``), intervals are clipped at 0, and one legend under the table
explains verdict, count, residual and interval. Lines fit 100 columns for IPv4 prefixes.

CSV output is one header row and one row per result item (prefixes, range answers, levels), so
that spreadsheets and ``awk`` can take it; JSON is the document itself.

Everything rendered is already in the document: formatting adds no value computed from data.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import unicodedata
from collections.abc import Callable
from typing import Any

from dphhh.privacy.report import ranked

from .options import positive_count

__all__ = [
    "FORMATS",
    "WIDTH",
    "add_format_option",
    "output_format",
    "render",
    "format_report",
    "stream_report_text",
    "format_exact",
    "format_snapshot",
    "rows",
    "add_top_option",
    "top_rows",
]

FORMATS = ("text", "json", "csv")


def printable(label: object) -> str:
    """``label`` as text safe for a terminal: control and format characters (an ANSI escape, a
    carriage return, a bidirectional override — a path label is the input's own text) shown as
    ``\\xNN`` / ``\\uNNNN`` escapes; every other character, non-ASCII letters included, as it is."""
    text = str(label)
    if all(unicodedata.category(c)[0] != "C" for c in text):
        return text
    return "".join(c if unicodedata.category(c)[0] != "C" else c.encode("unicode_escape").decode("ascii") for c in text)


#: Text output fits this many columns (for IPv4 prefixes; longer labels widen the prefix column).
WIDTH = 100


def add_format_option(p: argparse.ArgumentParser, default: str) -> None:
    """``--format`` (and the older spellings ``--pretty`` = text, ``--json`` = json, kept hidden)."""
    p.add_argument(
        "--format", choices=FORMATS, default=None, help=f"output: text (readable), json or csv (default {default})"
    )
    p.add_argument("--pretty", dest="format", action="store_const", const="text", help=argparse.SUPPRESS)
    p.add_argument("--json", dest="format", action="store_const", const="json", help=argparse.SUPPRESS)
    p.set_defaults(format_default=default)


def output_format(args: argparse.Namespace) -> str:
    """The ``--format`` the user chose, else the command's default."""
    return str(getattr(args, "format", None) or getattr(args, "format_default", "json"))


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if abs(value) >= 100:  # counts of this size: a decimal adds nothing but width
        return f"{round(value):,}"
    return f"{value:,.{digits}f}"


def _wrap(text: str, indent: str = "  ", width: int = WIDTH) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ") or [indent]


# --------------------------------------------------------------------------------------------- reports

REPORT_LEGEND = (
    "heavy: its count, less its listed sub-prefixes' counts, is at least tau with probability >= 1 - beta. "
    "possible: listed because its residual may reach tau; the interval does not prove it. "
    "count: the prefix's noisy count; residual: the count less its listed sub-prefixes' (an estimate, "
    "at most count); true count: holds the prefix's exact count with probability >= 1 - beta (clipped at 0)."
)


def _report_items(report: dict[str, Any]) -> list[dict[str, Any]]:
    """A report's items with ``residual`` (schema version 1 called it ``estimate``)."""
    return [dict(it, residual=it.get("residual", it.get("estimate"))) for it in report.get("hhh", [])]


def _coverage_line(report: dict[str, Any]) -> str:
    g, p = report["guarantees"], report["params"]
    if str(g.get("coverage", "")).startswith("not claimed"):
        return f"coverage: {g['coverage']}"
    if p.get("mode") == "point":
        return "coverage: not claimed (point mode: a prefix that is not listed may still be heavy)"
    if g.get("coverage_holds"):
        return (
            f"coverage: HOLDS - with probability >= 1 - beta every prefix that is not listed has "
            f"residual below tau - alpha1 = {p['tau'] - g['alpha1']:,.0f}"
        )
    return (
        f"coverage: VOID - tau {p['tau']:,.0f} < 2*alpha1 = {2 * g['alpha1']:,.0f}: a prefix that is not listed "
        f"may still be heavy (raise --tau or --epsilon; see dphhh plan)"
    )


def _items_table(items: list[dict[str, Any]], columns: list[tuple[str, str, int, Callable[[dict], str]]]) -> list[str]:
    header = "  " + "  ".join(
        f"{title:<{w}}" if i < 3 else f"{title:>{w}}" for i, (_, title, w, _f) in enumerate(columns)
    )
    out = [header.rstrip()]
    for item in items:
        cells = [fmt(item) for _, _, _, fmt in columns]
        out.append(
            "  "
            + "  ".join(
                f"{c:<{w}}" if i < 3 else f"{c:>{w}}" for i, (c, (_, _, w, _f)) in enumerate(zip(cells, columns))
            )
        )
    return out


def _level_cell(item: dict[str, Any]) -> str:
    """The level, or a pair's lattice node ``ℓ1,ℓ2``."""
    node = item.get("node")
    return f"{node[0]},{node[1]}" if node else str(item["level"])


def add_top_option(p: argparse.ArgumentParser) -> None:
    """``--top N``: print only the first N rows of the ranked list (:func:`dphhh.privacy.report.ranked`)."""
    p.add_argument(
        "--top",
        type=positive_count,
        default=None,
        metavar="N",
        help="print only the N rows with the largest residual (every format; the rest is counted in 'shown')",
    )


def top_rows(doc: dict[str, Any], top: int | None) -> dict[str, Any]:
    """``doc`` (a report or an ``exact`` document) with its HHH rows ranked and, with ``top``, only
    the first ``top`` of them; ``shown`` says how many of how many. Post-processing of released values."""
    if "hhh" not in doc:
        return doc
    items = ranked(doc["hhh"])
    if top is None or len(items) <= top:
        return {**doc, "hhh": items}
    return {**doc, "hhh": items[:top], "shown": {"top": top, "of": len(items)}}


def _shown_line(doc: dict[str, Any]) -> list[str]:
    shown = doc.get("shown")
    return [f"  (the {shown['top']:,} rows with the largest residual of {shown['of']:,}: --top)"] if shown else []


#: The one-line legend of reports printed one after another (``demo``, ``run``, ``reports``).
SHORT_LEGEND = "heavy: proven at 1 - beta; possible: a candidate; true count: holds the exact count at 1 - beta"


def format_report(report: dict[str, Any], legend: str = "full") -> str:
    """A readable rendering of a ``dphhh.report/*`` report (also reads version 1: ``estimate``);
    ``legend``: ``full`` (one paragraph under the table), ``short`` (one line, for reports printed
    one after another) or ``none``."""
    p, g = report["params"], report["guarantees"]
    window = report.get("window", {})
    when = f"window {window['start']} .. {window['end']}" if window.get("start") else "window: the whole input"
    if "refused" in report:
        return "\n".join([f"dphhh HHH report REFUSED  ({report['refused']})", f"  {when}", "  nothing released"])
    privacy = g.get("privacy", report.get("budget", {}).get("guarantee", ""))
    tau = f"{p['tau']:,.0f}" + (f" ({100 * p['tau_share']:g}% of the noisy size)" if p.get("tau_share") else "")
    lines = ["dphhh private HHH report", *_wrap(f"privacy: {privacy}")]
    for line in (
        f"{when}   ~{_num(window.get('n_noisy'))} elements (noisy)",
        f"hierarchy {p['hierarchy']}   tau {tau}   counters {p['counters']}   partitions {p['partitions']}",
        f"{p['variant']}/{p['mode']}/{p.get('calibration', 'paper')}   alpha1 {g['alpha1']:,.1f}   "
        f"alpha2 {g['alpha2']:,.1f}   beta {g['beta']:g}   noise: {g['randomness']}",
        _coverage_line(report),
    ):
        lines += _wrap(line)
    lines.append("")
    items = _report_items(report)
    if not items:
        lines.append("  (no prefix reported: no prefix's noisy count reached the release threshold and tau)")
        return "\n".join(lines)
    width = max(18, *(len(printable(it["prefix"])) for it in items))
    n_noisy = max(float(window.get("n_noisy") or 0), 1.0)
    columns: list[tuple[str, str, int, Callable[[dict], str]]] = [
        ("verdict", "verdict", 8, lambda it: it.get("verdict", "-")),
        ("level", "lvl", 5 if any("node" in it for it in items) else 3, _level_cell),
        ("prefix", "prefix", width, lambda it: printable(it["prefix"])),
        ("count", "count", 10, lambda it: _num(it["count"])),
        ("residual", "residual", 10, lambda it: _num(it["residual"])),
        ("fraction", "fraction", 8, lambda it: f"{100 * max(0.0, it['count']) / n_noisy:.1f}%"),
        ("interval", "true count (1 - beta)", 23, lambda it: f"[{_num(max(0.0, it['lower']))}, {_num(it['upper'])}]"),
    ]
    lines += _items_table(ranked(items), columns)
    lines += _shown_line(report)
    if legend == "full":
        lines.append("")
        lines += _wrap(REPORT_LEGEND)
    elif legend == "short":
        lines.append(f"  ({SHORT_LEGEND})")
    return "\n".join(lines)


def stream_report_text(report: dict[str, Any]) -> str:
    """A report as the stream commands print them, one after another (a one-line legend)."""
    return format_report(report, legend="short")


# --------------------------------------------------------------------------------------------- exact


def format_exact(doc: dict[str, Any]) -> str:
    """A readable rendering of a ``dphhh.exact/*`` document (exact, NON-PRIVATE)."""
    p = doc["params"]
    lines = [
        "dphhh exact HHH  -- NON-PRIVATE: exact counts of your input, for evaluation only; do not publish",
        f"  n {_num(doc['n'])} elements   hierarchy {p['hierarchy']}   tau {p['tau']:,.0f}"
        + (f" ({100 * p['tau_share']:g}% of n)" if p.get("tau_share") else "")
        + (f"   weight {p['weight']} (cap {p['weight_cap']})" if p.get("weight") else ""),
        "",
    ]
    items = doc["hhh"]
    if not items:
        lines.append("  (no prefix has residual count >= tau)")
    else:
        width = max(18, *(len(printable(it["prefix"])) for it in items))
        columns: list[tuple[str, str, int, Callable[[dict], str]]] = [
            ("verdict", "verdict", 8, lambda it: "heavy"),
            ("level", "lvl", 5 if any("node" in it for it in items) else 3, _level_cell),
            ("prefix", "prefix", width, lambda it: printable(it["prefix"])),
            ("count", "count", 10, lambda it: _num(it["count"])),
            ("residual", "residual", 10, lambda it: _num(it["residual"])),
            ("fraction", "fraction", 9, lambda it: f"{100 * it['count'] / max(doc['n'], 1):.2f}%"),
        ]
        lines += _items_table(ranked(items), columns)
        lines += _shown_line(doc)
    skipped = doc.get("diagnostics", {}).get("skipped") or {}
    if skipped:
        lines.append("")
        lines.append("  skipped records: " + ", ".join(f"{k} {v:,}" for k, v in sorted(skipped.items())))
    lines.append("")
    lines += _wrap(
        "exact: count = the prefix's exact count; residual = count less its heavy sub-prefixes' counts "
        "(every listed prefix has residual >= tau); fraction = count / n."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- snapshots


def _snapshot_items(doc: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The result rows of a snapshot document and what they are: ``answers`` (lue, ahead: range
    and count or fraction), ``hhh`` (prefix, level, verdict, count, lower, upper) or ``levels``
    (inftda: one row per listed prefix, with its level's ``error_bound`` when there is one)."""
    result = doc.get("result", {})
    if doc.get("answers"):
        return "answers", doc["answers"]
    if "hhh" in result:
        return "hhh", result["hhh"]
    if "levels" in result:
        flat = [
            {"level": lv["level"], "prefix": c["prefix"], "count": c["count"]}
            | ({"error_bound": lv["error_bound"]} if "error_bound" in lv else {})
            for lv in result["levels"]
            for c in lv.get("counts", [])
        ]
        return "levels", flat
    return "none", []


#: At most this many counts per level in the text rendering of an InfTDA release.
SNAPSHOT_TOP = 20


def format_snapshot(doc: dict[str, Any]) -> str:
    """A readable rendering of a ``dphhh.snapshot/*`` document.

    ``hhh``: the parameters, one row per reported prefix (verdict, level, prefix, count and the
    interval of its conditioned count) and the intervals' legend; ``inftda``: per level its error
    bound and its :data:`SNAPSHOT_TOP` largest counts (csv or json list them all); ``lue`` and
    ``ahead``: one row per range with its count (and the expected error) or fraction."""
    g = doc.get("guarantees") or {}
    statement = g.get("text") or (
        f"epsilon = {g['epsilon']:g}, {g['model']}"
        if g.get("model") and g.get("epsilon") is not None
        else json.dumps(g)
    )
    lines = [
        f"dphhh snapshot {doc['module']}  ({doc['budget'].get('mechanism', '')})",
        *_wrap(f"privacy: {statement}"),
        f"  input {doc['input']['path']} ({doc['input']['format']})   noise: {doc.get('randomness', '')}",
        *_wrap(f"out of domain: {doc['input']['out_of_domain']}"),
    ]
    for note in doc.get("notes", []) or []:
        lines += _wrap(f"note: {note}")
    result = doc.get("result", {})
    kind, items = _snapshot_items(doc)

    def table(rows_: list[dict[str, Any]], columns: list[tuple[str, str, Callable[[dict], str]]], indent: str) -> None:
        """Rows under a header; a title ending in ">" is right-aligned (numbers)."""
        cells = [[fmt(r) for _, _, fmt in columns] for r in rows_]
        titles = [title.rstrip(">") for _, title, _ in columns]
        widths = [max(len(t), *(len(c[i]) for c in cells)) if cells else len(t) for i, t in enumerate(titles)]
        right = [title.endswith(">") for _, title, _ in columns]

        def line(values: list[str]) -> str:
            return (
                indent + "  ".join(f"{v:>{w}}" if r else f"{v:<{w}}" for v, w, r in zip(values, widths, right)).rstrip()
            )

        lines.append(line(titles))
        lines.extend(line(c) for c in cells)

    if kind == "hhh" or doc.get("module") == "hhh":
        p = result.get("params", {})
        lines.append(
            f"  hierarchy {result.get('hierarchy', '-')}   tau {_num(p.get('tau'))}   beta {p.get('beta', '-')}   "
            f"algorithm {result.get('algorithm', '-')}"
        )
        lines.append("")
        if not items:
            lines.append("  (no prefix reported: no prefix's noisy conditioned count reached tau)")
            return "\n".join(lines)
        table(
            items,
            [
                ("verdict", "verdict", lambda it: str(it.get("verdict", "-"))),
                ("level", "lvl>", lambda it: str(it["level"])),
                ("prefix", "prefix", lambda it: printable(it["prefix"])),
                ("count", "count>", lambda it: _num(it["count"])),
                ("lower", "lower>", lambda it: _num(it.get("lower"))),
                ("upper", "upper>", lambda it: _num(it.get("upper"))),
            ],
            "  ",
        )
        legend = (result.get("intervals") or {}).get("text")
        if legend:
            lines.append("")
            lines += _wrap(legend)
        return "\n".join(lines)

    if kind == "levels":
        bounds = result.get("error_bounds") or {}
        for lv in result["levels"]:
            counts = sorted(lv.get("counts", []), key=lambda c: -int(c["count"]))
            shown = counts[:SNAPSHOT_TOP]
            listed = f"{len(counts):,} prefix{'es' if len(counts) != 1 else ''} listed"
            if len(counts) > len(shown):
                listed += f" (the {len(shown)} largest shown)"
            bound = f"   error bound +-{_num(lv['error_bound'])}" if "error_bound" in lv else ""
            lines.append("")
            lines.append(f"  level {lv['level']}   {listed}{bound}")
            table(
                shown,
                [("prefix", "prefix", lambda c: str(c["prefix"])), ("count", "count>", lambda c: _num(c["count"]))],
                "    ",
            )
            if len(counts) > len(shown):
                lines.append(
                    f"    ... {len(counts) - len(shown):,} more: --format csv or --format json lists every count"
                )
        if bounds.get("text"):
            lines.append("")
            lines += _wrap(f"error bound: {bounds['text']}")
        return "\n".join(lines)

    lines.append("")
    if not items:
        lines.append("  (nothing to show: no query was answered)")
        return "\n".join(lines)
    if any("fraction" in it for it in items):
        table(
            items,
            [
                ("range", "range", lambda it: str(it["range"])),
                ("fraction", "fraction>", lambda it: f"{float(it['fraction']):.4f}"),
                ("percent", "percent>", lambda it: f"{100 * float(it['fraction']):.2f} %"),
            ],
            "  ",
        )
        lines.append("")
        lines += _wrap("fraction: the estimated share of all records inside the range (local DP noise included).")
        return "\n".join(lines)
    table(
        items,
        [("range", "range", lambda it: str(it["range"])), ("count", "count>", lambda it: _cell(it.get("count")))],
        "  ",
    )
    err = result.get("expected_squared_error") or {}
    if isinstance(err.get("value"), (int, float)):
        lines.append("")
        lines += _wrap(
            f"count: the noisy number of records inside the range. Expected squared error over "
            f"{err.get('workload', 'the workload')}: {_num(float(err['value']))} (root mean square "
            f"{_num(float(err['value']) ** 0.5)}; {err.get('kind', '')})."
        )
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """A number of a snapshot table: four decimals below 1, one above (thousands separated)."""
    if isinstance(value, float):
        return _num(value, 4 if abs(value) < 1 else 1)
    return "" if value is None else str(value)


# --------------------------------------------------------------------------------------------- csv


#: The leading CSV columns of each snapshot module (printed even when there is no row).
SNAPSHOT_COLUMNS = {
    "hhh": ("prefix", "level", "verdict", "count", "lower", "upper"),
    "inftda": ("level", "prefix", "count"),
    "lue": ("range", "count"),
    "ahead": ("range", "fraction"),
}


def rows(doc: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The header and rows of ``doc`` for CSV output."""
    schema = str(doc.get("schema", ""))
    if schema.startswith("dphhh.report/"):
        n_noisy = max(float(doc.get("window", {}).get("n_noisy") or 0), 1.0)
        items = [dict(it, fraction=round(max(0.0, it["count"]) / n_noisy, 6)) for it in ranked(_report_items(doc))]
        columns = ["verdict", "level", "prefix", "count", "residual", "fraction", "lower", "upper", "residual_lower"]
        if any("node" in it for it in items):
            items = [dict(it, node=_level_cell(it)) for it in items]
            columns.insert(2, "node")
        return columns, items
    if schema.startswith("dphhh.exact/"):
        n = max(int(doc["n"]), 1)
        items = [dict(it, fraction=round(it["count"] / n, 6)) for it in ranked(doc["hhh"])]
        if any("node" in it for it in items):
            items = [dict(it, node=_level_cell(it)) for it in items]
            return ["level", "node", "prefix", "count", "residual", "fraction"], items
        return ["level", "prefix", "count", "residual", "fraction"], items
    if schema.startswith("dphhh.snapshot/"):
        kind, items = _snapshot_items(doc)
        header: list[str] = list(SNAPSHOT_COLUMNS.get(doc.get("module", ""), ()))
        for it in items:
            header += [k for k in it if k not in header]
        return header, items
    if schema.startswith("dphhh.plan/"):
        flat = {k: v for k, v in doc.items() if not isinstance(v, (dict, list))}
        flat.update({f"input_{k}": v for k, v in doc.get("inputs", {}).items()})
        return list(flat), [flat]
    if isinstance(doc.get("rows"), list):
        header = list(doc["rows"][0]) if doc["rows"] else []
        return header, doc["rows"]
    raise ValueError(f"rows: no CSV layout for schema {schema!r}")


def _csv(doc: dict[str, Any]) -> str:
    header, items = rows(doc)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for it in items:
        writer.writerow({k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in it.items()})
    return buf.getvalue().rstrip("\n")


def render(doc: dict[str, Any], fmt: str, *, text: Callable[[dict[str, Any]], str] | None = None) -> str:
    """``doc`` as ``fmt`` (text, json or csv); ``text`` overrides the text renderer."""
    if fmt == "json":
        return json.dumps(doc, indent=2)
    if fmt == "csv":
        return _csv(doc)
    if text is not None:
        return text(doc)
    schema = str(doc.get("schema", ""))
    if schema.startswith("dphhh.report/"):
        return format_report(doc)
    if schema.startswith("dphhh.exact/"):
        return format_exact(doc)
    if schema.startswith("dphhh.snapshot/"):
        return format_snapshot(doc)
    return json.dumps(doc, indent=2)
