"""The suite refuses skips (tests/conftest.py): a skipped test fails the run, an xfail does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_case.py"
    test.write_text("import pytest\n\n\n" + body)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider", str(test)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skipped_test_fails_the_run(tmp_path: Path) -> None:
    done = _run(tmp_path, "def test_passes():\n    pass\n\n\ndef test_skips():\n    pytest.skip('no input')\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 test(s) skipped (no test may be skipped)" in done.stdout
    assert "test_case.py::test_skips" in done.stdout


def test_passes_and_expected_failures_do_not(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        "def test_passes():\n    pass\n\n\n@pytest.mark.xfail(reason='known', strict=True)\ndef test_x():\n    assert False\n",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped" not in done.stdout
