"""Reference pages generated from the code: every configuration key, input format and exported metric.

The pages ``docs/reference/config.md``, ``formats.md`` and ``metrics.md`` are this module's output,
committed so they read on any Git host; ``tests/test_docs_site.py`` fails when a committed page differs
from what the code generates now (a key or metric added, removed or re-described) and builds the
documentation site with MkDocs in strict mode (warnings are errors). Regenerate with::

    .venv/bin/python -m dphhh.stream.reference docs/reference

* configuration: :data:`dphhh.stream.config.DEFAULTS` gives the keys, their types and defaults; the
  descriptions are the comments of the annotated sample ``deploy/dphhh.toml`` (a key it does not
  describe is listed as undocumented — the test refuses that);
* input formats: the registry of :mod:`dphhh.connectors.messages` (each format's summary, the
  hierarchy kinds it reads, the privacy units it carries, the options it reads and its reasons);
* metrics: Flink's reporter exports the allow-list of :mod:`dphhh.stream.metrics_catalog`
  (``job_metric_help`` describes each); ``dphhh run``'s endpoint exports
  :class:`dphhh.stream.report_metrics.ReportMetrics`, whose help strings are read from a fresh registry.

Nothing here reads data: the pages are the same for every deployment (docs/ALGORITHMS.md §0.1 f —
every exported metric is public or computed from published reports).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from dphhh.connectors.messages import MESSAGE_FORMATS

from .config import DEFAULTS, TESTING_ENV
from .metrics_catalog import JOB_METRICS, job_metric_help
from .paths import deploy_dir
from .report_metrics import ReportMetrics

__all__ = [
    "config_reference",
    "formats_reference",
    "metrics_reference",
    "sample_descriptions",
    "write_pages",
    "UNDOCUMENTED",
]

UNDOCUMENTED = "(undocumented)"
_ASSIGNMENT = re.compile(r"^([A-Za-z_][\w]*)\s*=\s*(.*)$")


def _comment(value_and_comment: str) -> str:
    """The comment after a TOML value (a ``#`` outside a string)."""
    quoted = False
    for i, ch in enumerate(value_and_comment):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return value_and_comment[i + 1 :].strip()
    return ""


def sample_descriptions(text: str) -> dict[str, str]:
    """``{"section.key": description}`` from an annotated TOML sample: a key's trailing comment,
    continued by comment-only lines indented under it, or else the comment lines just above it."""
    out: dict[str, str] = {}
    section, last = "", ""
    above: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section, above, last = line[1:-1], [], ""
            continue
        if line.startswith("#"):
            if last and raw.startswith(" "):  # an indented continuation of the key above's comment
                out[last] = f"{out[last]} {line.lstrip('#').strip()}".strip()
            else:
                above.append(line.lstrip("#").strip())
                last = ""
            continue
        match = _ASSIGNMENT.match(line)
        if not match or not section:
            above, last = [], ""
            continue
        key = f"{section}.{match.group(1)}"
        out[key] = _comment(match.group(2)) or " ".join(above)
        above, last = [], key
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{}" if not value else json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def config_reference(sample: str | None = None) -> str:
    """The configuration reference page (Markdown): one table per section of
    :data:`~dphhh.stream.config.DEFAULTS`, each key with its type, default and description."""
    sample = sample if sample is not None else (deploy_dir() / "dphhh.toml").read_text(encoding="utf-8")
    described = sample_descriptions(sample)
    lines = [
        "# Configuration reference",
        "",
        "Every key of the stream job's configuration with its default (generated from the code by",
        "`python -m dphhh.stream.reference`; the descriptions are those of the annotated sample",
        "`deploy/dphhh.toml`). Precedence: defaults < the config file < environment",
        "`DPHHH_<SECTION>_<KEY>` < `--set section.key=value`. Unknown keys and invalid values stop the",
        "job at start with a message naming the key.",
        "",
    ]
    for section, keys in DEFAULTS.items():
        lines += [f"## [{section}]", ""]
        if section == "testing":
            lines += [
                "The test suite's hooks: a value other than the default is refused unless the environment has",
                f"`{TESTING_ENV}=1` (the test suite sets it).",
                "",
            ]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for key, default in keys.items():
            text = described.get(f"{section}.{key}", "") or UNDOCUMENTED
            text = text.replace("|", "\\|")
            lines.append(f"| `{key}` | {type(default).__name__} | `{_toml_value(default)}` | {text} |")
        lines.append("")
    return "\n".join(lines)


def _report_metrics() -> list[tuple[str, str, str]]:
    """(name, type, help) of every metric of ``dphhh run``'s endpoint, from a fresh registry."""
    metrics = ReportMetrics()
    out = []
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        out.append((name, family.type, family.documentation))
    return sorted(out)


def metrics_reference() -> str:
    """The metrics reference page (Markdown): both endpoints, every metric with its type and meaning."""
    lines = [
        "# Metrics reference",
        "",
        "Every metric dphhh exports (generated from the code by `python -m dphhh.stream.reference`).",
        "Each is public or computed from published reports (ALGORITHMS.md §0.1 f); nothing else is",
        "exported.",
        "",
        "## Flink's reporter (`flink.prometheus_port`)",
        "",
        "An allow-list: dphhh's operator counters and the job's restart count. A counter's series",
        "appears with its first increment (dashboards use `or vector(0)`).",
        "",
        "| metric | meaning |",
        "|---|---|",
    ]
    for name in JOB_METRICS:
        lines.append(f"| `{name}` | {job_metric_help(name)} |")
    lines += [
        "",
        "## `dphhh run`'s endpoint (`output.metrics_port`)",
        "",
        "Computed from the published reports (a `read_committed` reader) and the broker's reachability.",
        "",
        "| metric | type | meaning |",
        "|---|---|---|",
    ]
    for name, kind, text in _report_metrics():
        lines.append(f"| `{name}` | {kind} | {text} |")
    lines.append("")
    return "\n".join(lines)


#: where a format's option that is no ``input.*`` key comes from
_OPTION_SOURCES = {"path_depth": "the depth of `hierarchy.spec`"}


def formats_reference() -> str:
    """The input formats page (Markdown): every registered message format (``input.format``)."""
    lines = [
        "# Input formats reference",
        "",
        "Every value of `input.format` (generated from the format registry, `dphhh.connectors.messages`,",
        "by `python -m dphhh.stream.reference`). A message that does not decode is dead-lettered with one",
        "of its format's reasons, a property of the message alone (ALGORITHMS.md §0.1 e); a packed",
        "format's message is decoded element by element whatever its size.",
        "",
        "| format | what a message holds | hierarchies | privacy units | options read | reasons |",
        "|---|---|---|---|---|---|",
    ]
    for name, cls in MESSAGE_FORMATS.items():
        kinds = ", ".join(sorted(cls.hierarchy_kinds))
        units = "; ".join(f"`{key}`: {what}" for key, what in cls.unit_keys.items()) or "—"
        # the privacy unit's options come from privacy.unit_key (the units column); the others are input.* keys
        read = sorted(cls.reads - {"unit_field", "source_units"})
        options = (
            ", ".join(f"`input.{o}`" if o in DEFAULTS["input"] else _OPTION_SOURCES.get(o, f"`{o}`") for o in read)
            or "—"
        )
        reasons = ", ".join(f"`{r}`" for r in cls.reasons)
        lines.append(f"| `{name}` | {cls.summary} | {kinds} | {units} | {options} | {reasons} |")
    lines.append("")
    return "\n".join(lines)


def write_pages(folder: Path) -> list[Path]:
    """Write ``config.md``, ``formats.md`` and ``metrics.md`` into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = {"config.md": config_reference(), "formats.md": formats_reference(), "metrics.md": metrics_reference()}
    for name, text in pages.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in pages]


#: the documentation site's pages, in order (paths under ``docs/``)
SITE_NAV: list[dict[str, Any]] = [
    {"Home": "index.md"},
    {
        "Tutorials": [
            {"HHH of a file": "tutorials/file.md"},
            {"Two-dimensional HHH": "tutorials/pairs.md"},
            {"Offline snapshot modules": "tutorials/snapshot.md"},
            {"The stream demo": "tutorials/stream.md"},
            {"Flows from a collector": "tutorials/flows.md"},
        ]
    },
    {
        "How-to": [
            {"Set up, test and install": "howto/install.md"},
            {"Plan a deployment": "howto/plan.md"},
            {"Deploy on a Flink cluster or Kubernetes": "howto/deploy.md"},
            {"Connect to a secured Kafka": "howto/kafka-security.md"},
            {"Monitor": "howto/monitor.md"},
            {"Alert": "alerting.md"},
            {"Troubleshoot": "howto/troubleshoot.md"},
            {"Extend: a hierarchy kind, an input format, a config key": "howto/extend.md"},
        ]
    },
    {
        "Reference": [
            {"Command line": "reference/cli.md"},
            {"The report": "reference/report.md"},
            {"Configuration": "reference/config.md"},
            {"Input formats": "reference/formats.md"},
            {"Metrics": "reference/metrics.md"},
            {"Repository layout": "reference/layout.md"},
        ]
    },
    {
        "Explanation": [
            {"Guarantees, and who may read what": "explanation/guarantees.md"},
            {"How the stream job works": "explanation/stream-job.md"},
            {"Guarantees and failure behaviour": "explanation/failures.md"},
            {"Departures from the papers": "explanation/departures.md"},
            {"Algorithms and guarantees (the normative spec)": "ALGORITHMS.md"},
            {"Calibration": "calibration.md"},
            {"Performance": "explanation/performance.md"},
        ]
    },
]


def build_site(docs: Path, out: Path, *, strict: bool = True) -> None:
    """Build the documentation site from ``docs`` into ``out`` with MkDocs (a test dependency), in
    strict mode by default: any warning — a page missing from the navigation, a link to a missing
    page — fails the build (``mkdocs.exceptions.Abort``)."""
    import tempfile

    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "mkdocs.yml"  # outside docs/: MkDocs refuses a config inside docs_dir
        config.write_text(
            json.dumps(
                {
                    "site_name": "dphhh",
                    "docs_dir": str(docs.resolve()),
                    "site_dir": str(out.resolve()),
                    "nav": SITE_NAV,
                    "strict": strict,
                    "theme": {"name": "mkdocs"},
                    "not_in_nav": "",
                    "validation": {"nav": {"omitted_files": "warn"}, "links": {"not_found": "warn"}},
                }
            ),
            encoding="utf-8",
        )
        build(load_config(str(config)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--site"]:  # python -m dphhh.stream.reference --site OUT: build the whole site
        build_site(deploy_dir().parent / "docs", Path(sys.argv[2] if len(sys.argv) > 2 else "site"))
    else:
        for page in write_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference")):
            print(page)
