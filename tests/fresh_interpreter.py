"""Run a test's script in a fresh Python interpreter of the checkout and read its answer.

Some properties hold only for a new process: which kernels an element makes load
(tests/stream/test_warm_up.py), or how PyFlink's gateway JVM finds the job's classes
(tests/e2e/test_gateway_classes.py). The script prints its answer as JSON on its last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_json(script: str, *args: str, timeout_s: float = 300) -> Any:
    """``python -c script *args`` in the checkout (the project importable); fails the test with its
    stderr's tail when it exits non-zero; returns the JSON of its last line of output."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
