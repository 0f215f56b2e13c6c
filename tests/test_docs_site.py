"""The documentation site and its generated reference pages (``dphhh.stream.reference``).

* the committed ``docs/reference/config.md`` and ``metrics.md`` are exactly what the code generates
  now — a key or metric added, removed or re-described without regenerating fails here;
* every configuration key (``DEFAULTS``) and every exported metric (both endpoints) has its row with
  a description, checked against the code's own lists, not against the generator's output;
* the site builds with MkDocs in strict mode; the negative controls show that strict mode does fail
  the build on a page left out of the navigation and on a link to a missing page.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dphhh.connectors.messages import MESSAGE_FORMATS
from dphhh.stream.config import DEFAULTS
from dphhh.stream.metrics_catalog import JOB_METRICS, REPORT_METRICS
from dphhh.stream.reference import UNDOCUMENTED, build_site, config_reference, formats_reference, metrics_reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_committed_reference_pages_are_what_the_code_generates() -> None:
    pages = {"config.md": config_reference(), "formats.md": formats_reference(), "metrics.md": metrics_reference()}
    for name, text in pages.items():
        committed = (DOCS / "reference" / name).read_text(encoding="utf-8")
        assert committed == text, (
            f"docs/reference/{name} is stale: .venv/bin/python -m dphhh.stream.reference docs/reference"
        )


def missing_config_keys(page: str) -> list[str]:
    """``section.key`` of every key of DEFAULTS without a described row in its section of ``page``."""
    sections = dict(re.findall(r"^## \[(\w+)\]\n(.*?)(?=^## |\Z)", page, re.S | re.M))
    missing = []
    for section, keys in DEFAULTS.items():
        rows = {
            m.group(1): m.group(2)
            for m in re.finditer(r"^\| `(\w+)` \|[^|]*\|[^|]*\| (.*) \|$", sections.get(section, ""), re.M)
        }
        missing += [f"{section}.{k}" for k in keys if k not in rows or rows[k].strip() in ("", UNDOCUMENTED)]
    return missing


def missing_metrics(page: str) -> list[str]:
    rows = set(re.findall(r"^\| `([\w]+)` \|", page, re.M))
    return [name for name in (*JOB_METRICS, *REPORT_METRICS) if name not in rows]


def test_every_config_key_and_every_metric_has_a_described_row() -> None:
    assert missing_config_keys((DOCS / "reference" / "config.md").read_text(encoding="utf-8")) == []
    page = (DOCS / "reference" / "metrics.md").read_text(encoding="utf-8")
    assert missing_metrics(page) == []
    # and no row for a metric the catalogue does not list (the report endpoint's rows come from its registry)
    assert set(re.findall(r"^\| `([\w]+)` \|", page, re.M)) == {*JOB_METRICS, *REPORT_METRICS}


def test_every_input_format_has_its_row_with_every_reason() -> None:
    """The formats page has one row per registered format, each listing exactly the format's
    reasons — a format registered, or a reason added to one, without regenerating fails here."""
    page = (DOCS / "reference" / "formats.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w-]+)` \|(.*)\|$", page, re.M)}
    assert set(rows) == set(MESSAGE_FORMATS)
    for name, cls in MESSAGE_FORMATS.items():
        listed = re.findall(r"`(\w+)`", rows[name].rsplit("|", 1)[-1])
        assert listed == list(cls.reasons), name


def test_the_checks_see_a_missing_or_undescribed_key_and_a_missing_metric() -> None:
    """Negative controls: the sample without one key's comment, a page without one row."""
    sample = (ROOT / "deploy" / "dphhh.toml").read_text(encoding="utf-8")
    undescribed = re.sub(r"^(tau = \S+)\s+#.*$", r"\1", sample, flags=re.M)
    assert missing_config_keys(config_reference(undescribed)) == ["privacy.tau"]
    page = config_reference()
    assert missing_config_keys(re.sub(r"^\| `grace_ms` .*\n", "", page, flags=re.M)) == ["window.grace_ms"]
    metrics = metrics_reference()
    name = "dphhh_reports_topic_stalled"
    assert missing_metrics(re.sub(rf"^\| `{name}` .*\n", "", metrics, flags=re.M)) == [name]


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    build_site(DOCS, tmp_path / "site")
    config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "publish_delay_ms" in config
    assert (tmp_path / "site" / "ALGORITHMS" / "index.html").is_file()


@pytest.mark.parametrize(
    "breakage",
    [
        ("orphan.md", "# A page no one links\n"),  # left out of the navigation
        ("index.md", "\n[broken](no-such-page.md)\n"),  # a link to a missing page
    ],
)
def test_strict_mode_fails_the_build_on_a_warning(tmp_path: Path, breakage: tuple[str, str]) -> None:
    from mkdocs.exceptions import Abort

    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    name, text = breakage
    with open(docs / name, "a", encoding="utf-8") as page:
        page.write(text)
    with pytest.raises(Abort):
        build_site(docs, tmp_path / "site")
