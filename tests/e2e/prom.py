"""A real Prometheus server in the end-to-end tests: Debian's package, its HTTP API."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def install_prometheus() -> None:
    """Debian's prometheus (server and promtool), if missing (``deploy/install-debian.sh prometheus``)."""
    subprocess.run(
        ["bash", str(ROOT / "deploy" / "install-debian.sh"), "prometheus"], check=True, capture_output=True, timeout=600
    )


def start_prometheus(config: Path, tsdb: Path, port: int) -> subprocess.Popen:
    """``prometheus`` with ``config`` on 127.0.0.1:``port`` (the caller terminates it)."""
    return subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _get(port: int, path: str, **params: str) -> dict | None:
    url = f"http://127.0.0.1:{port}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]
    except OSError:
        return None


def prometheus_query(port: int, expr: str) -> list | None:
    """The result vector of an instant query; None if the server refused it (or did not answer)."""
    data = _get(port, "/api/v1/query", query=expr)
    return None if data is None else data["result"]


def prometheus_alerts(port: int) -> list[dict] | None:
    """Active alerts (pending and firing: ``labels``, ``annotations``, ``state``); None if no answer."""
    data = _get(port, "/api/v1/alerts")
    return None if data is None else data["alerts"]


def prometheus_rules(port: int) -> list[dict] | None:
    """Every loaded rule (``name``, ``type``, ``health``, ``lastError``); None if no answer."""
    data = _get(port, "/api/v1/rules")
    return None if data is None else [rule for group in data["groups"] for rule in group["rules"]]
