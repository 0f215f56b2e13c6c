"""The local development broker (deploy/kafka-start.sh) as seen from the CLI and the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ["LocalBroker", "reachable"]

ROOT = Path(__file__).resolve().parents[1]


def reachable(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """True if the first bootstrap address accepts TCP connections."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


class LocalBroker:
    """Starts (and later stops) this checkout's single-node KRaft broker on a loopback port."""

    def __init__(self, port: int = 9092, controller_port: int | None = None) -> None:
        self.port = port
        self.controller_port = controller_port or port + 1
        self.started = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "DPHHH_KAFKA_PORT": str(self.port), "DPHHH_KAFKA_CONTROLLER_PORT": str(self.controller_port)}

    def start(self) -> None:
        """Start the broker unless one already answers on the port (then it is left alone)."""
        if reachable(self.bootstrap):
            return
        subprocess.run(["bash", str(ROOT / "deploy" / "kafka-start.sh")], check=True, env=self._env(),
                       stdout=sys.stderr)
        self.started = True

    def stop(self) -> None:
        """Stop the broker if this object started it."""
        if self.started:
            subprocess.run(["bash", str(ROOT / "deploy" / "kafka-stop.sh")], check=False, env=self._env(),
                           stdout=sys.stderr)
            self.started = False

    @staticmethod
    def for_bootstrap(bootstrap: str) -> "LocalBroker | None":
        """A LocalBroker for a loopback bootstrap address, else None (a remote cluster)."""
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port.isdigit():
            return None
        return LocalBroker(int(port))
