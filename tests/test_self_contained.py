"""The repository stands on its own: nothing outside it is read, and every spec citation resolves.

* no code, test, benchmark, script or document refers to a folder beside the checkout;
* every ``docs/ALGORITHMS.md §N`` cited anywhere (with its quoted subsection, if any) is a
  heading of ``docs/ALGORITHMS.md``;
* the bundled captures are the files ``data/README.md`` credits (same SHA-256).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from dphhh.stream.paths import CAPTURES, ROOT, data_dir

assert ROOT is not None, "these checks run from a checkout"
SOURCES = [
    p
    for top in ("sketches", "privacy", "connectors", "stream", "tests", "benchmarks", "deploy", "docs", ".ci")
    for p in (ROOT / top).rglob("*")
    if p.is_file()
    and p.suffix in {".py", ".sh", ".md", ".java", ".toml", ".properties", ".yml", ".yaml", ""}
    and "__pycache__" not in p.parts
    and "jars" not in p.parts
]
SOURCES += [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "dphhh"]
THIS = Path(__file__).resolve()
CITATION = re.compile(r'ALGORITHMS\.md §(\d+(?:\.\d+)?)(?: "([^"]+)")?')


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def test_nothing_refers_outside_the_checkout() -> None:
    outside = re.compile(r"\.\./shared|shared/design|shared/data|DPHHH_SHARED|parents\[[3-9]\]")
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in SOURCES
        if p.resolve() != THIS
        for n, line in enumerate(_text(p).splitlines(), start=1)
        if outside.search(line)
    ]
    assert not found, "references outside the repository:\n" + "\n".join(found)


def test_every_cited_section_exists() -> None:
    spec = _text(ROOT / "docs" / "ALGORITHMS.md")
    sections = set(re.findall(r"^#+ §(\d+(?:\.\d+)?)\b", spec, re.M))
    headings = {h.strip().lower() for h in re.findall(r"^#+ (.+)$", spec, re.M)}
    assert {"0", "0.1", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"} <= sections
    missing = []
    cited = 0
    for p in SOURCES:
        for n, line in enumerate(_text(p).splitlines(), start=1):
            for number, sub in CITATION.findall(line):
                cited += 1
                if number not in sections:
                    missing.append(f"{p.relative_to(ROOT)}:{n}: §{number}")
                elif sub and sub.lower() not in headings:
                    missing.append(f'{p.relative_to(ROOT)}:{n}: §{number} "{sub}"')
    assert cited > 100  # the code cites the spec throughout; a broken pattern would find none
    assert not missing, "citations of sections docs/ALGORITHMS.md does not have:\n" + "\n".join(missing)


@pytest.mark.parametrize("name", CAPTURES)
def test_bundled_captures_are_the_credited_files(name: str) -> None:
    credited = dict(
        reversed(line.split())
        for line in _text(ROOT / "data" / "README.md").splitlines()
        if re.fullmatch(r"[0-9a-f]{64}  pcaps/\S+", line)
    )
    path = data_dir() / "pcaps" / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == credited[f"pcaps/{name}"]
