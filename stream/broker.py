"""The local development broker (deploy/kafka-start.sh) as seen from the CLI and the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from dphhh.sketches.errors import UsageError

from .paths import deploy_dir, script_env, state_dir

__all__ = ["LocalBroker", "reachable"]


def reachable(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """True if the first bootstrap address accepts TCP connections."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


class LocalBroker:
    """Starts (and later stops) one of this checkout's single-node KRaft brokers on a loopback port.

    Parameters: ``port`` (client listener) and ``controller_port`` (default ``port + 1``);
    ``var_dir``, the broker's own folder (data, logs, pid; default: the scripts' ``var/kafka``), so a second,
    independent broker can run beside the main one; ``security``, ``"plaintext"`` or
    ``"sasl_ssl"`` (a SASL_SSL client listener with mechanism PLAIN, user ``dphhh``: see
    deploy/kafka-start.sh). The secured broker's CA certificate and client password are
    :attr:`ca_file` and :attr:`client_password_file` once it has started.
    """

    SECURITY = ("plaintext", "sasl_ssl")

    def __init__(
        self,
        port: int = 9092,
        controller_port: int | None = None,
        *,
        var_dir: str | Path | None = None,
        security: str = "plaintext",
    ) -> None:
        if security not in self.SECURITY:
            raise UsageError(f"LocalBroker: security must be one of {', '.join(self.SECURITY)}, got {security!r}")
        self.port = port
        self.controller_port = controller_port or port + 1
        self.var_dir = Path(var_dir).resolve() if var_dir is not None else None
        self.security = security
        self.started = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def secrets_dir(self) -> Path:
        """Where a ``sasl_ssl`` broker keeps its CA, keystore and passwords."""
        if self.var_dir is not None:
            return self.var_dir / "secrets"
        own = os.environ.get("DPHHH_KAFKA_VAR")
        if own:  # relative: from the state folder's parent, as the scripts read it
            return (Path(own) if Path(own).is_absolute() else state_dir().parent / own) / "secrets"
        return state_dir() / "kafka" / "secrets"

    @property
    def ca_file(self) -> Path:
        """The PEM certificate of the CA that signed a ``sasl_ssl`` broker's certificate."""
        return self.secrets_dir / "ca.pem"

    @property
    def client_password_file(self) -> Path:
        """The file (mode 600) holding the password of the ``sasl_ssl`` broker's user ``dphhh``."""
        return self.secrets_dir / "client.password"

    def scripts_environment(self) -> dict[str, str]:
        """The environment under which the deploy/kafka-*.sh scripts address this broker."""
        env = {
            **script_env(),
            "DPHHH_KAFKA_PORT": str(self.port),
            "DPHHH_KAFKA_CONTROLLER_PORT": str(self.controller_port),
        }
        if self.var_dir is not None:  # else the scripts' default (or the caller's DPHHH_KAFKA_VAR)
            env["DPHHH_KAFKA_VAR"] = str(self.var_dir)
        if self.security != "plaintext":
            env["DPHHH_KAFKA_SECURITY"] = self.security
        return env

    def start(self) -> None:
        """Start the broker unless one already answers on the port (then it is left alone)."""
        if reachable(self.bootstrap):
            return
        subprocess.run(
            ["bash", str(deploy_dir() / "kafka-start.sh")],
            check=True,
            env=self.scripts_environment(),
            stdout=sys.stderr,
        )
        self.started = True

    def stop(self) -> None:
        """Stop the broker if this object started it."""
        if self.started:
            subprocess.run(
                ["bash", str(deploy_dir() / "kafka-stop.sh")],
                check=False,
                env=self.scripts_environment(),
                stdout=sys.stderr,
            )
            self.started = False

    @staticmethod
    def for_bootstrap(bootstrap: str) -> LocalBroker | None:
        """A LocalBroker for a loopback bootstrap address, else None (a remote cluster)."""
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port.isdigit():
            return None
        return LocalBroker(int(port))
