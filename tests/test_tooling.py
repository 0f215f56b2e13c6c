"""Lint, format and type checks of the checkout, configured in pyproject.toml (``[tool.ruff]``,
``[tool.mypy]``): part of the suite, so ``./dphhh test`` (and CI, ``.ci/run``) fails on a finding.

* ``ruff check``: pyflakes, bugbear, import order, pyupgrade and pycodestyle's import, statement
  and syntax rules over the whole checkout (tests, benchmarks and deploy scripts included);
* ``ruff format --check``: the code is as ``ruff format`` writes it (run ``ruff format`` to fix);
* ``mypy``: the four packages (``dphhh.sketches``, ``.privacy``, ``.connectors``, ``.stream``), untyped functions included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.test_layering import LAYERS as PACKAGES  # the four packages, in layer order

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def _report(done: subprocess.CompletedProcess[str]) -> str:
    return f"{' '.join(map(str, done.args[2:]))} exited with {done.returncode}:\n{done.stdout}{done.stderr}"


def test_ruff_check() -> None:
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise")
    assert done.returncode == 0, _report(done)


def test_ruff_format_check() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", "--output-format", "concise")
    assert done.returncode == 0, _report(done) + "(`.venv/bin/python -m ruff format` rewrites them)"


def test_mypy(tmp_path: Path) -> None:
    """mypy over the four packages as they are installed, ``dphhh.sketches`` … ``dphhh.stream``: mypy
    cannot follow setuptools' package-dir mapping, so the ``dphhh`` namespace is laid out for it as
    links to the checkout's folders."""
    (tmp_path / "dphhh").mkdir()
    for package in PACKAGES:
        (tmp_path / "dphhh" / package).symlink_to(ROOT / package, target_is_directory=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        + [arg for package in PACKAGES for arg in ("-p", f"dphhh.{package}")],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, _report(done)
    assert "no issues found in" in done.stdout and " 0 source files" not in done.stdout, done.stdout
