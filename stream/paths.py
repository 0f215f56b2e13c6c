"""Where the project's files are: the checkout, the bundled data, the run state.

One place for every path the code uses, so that a checkout, an editable install and an installed
wheel find the same things:

* :data:`ROOT` — the checkout (the folder holding ``pyproject.toml``) when the code runs from one,
  else ``None`` (an installed wheel);
* :func:`data_dir` — the real captures bundled with the project (``data/`` in the checkout, the
  ``dphhh.data`` package data in a wheel); ``$DPHHH_DATA`` overrides it;
* :func:`capture` — one of those captures by file name, with an error naming what is missing;
* :func:`deploy_dir` — the scripts and configuration files the job runs with (``deploy/`` in the
  checkout, the ``dphhh.deploy`` package data in a wheel: Kafka scripts and configuration, the
  Maven list of jars, the Java operators' sources, the log4j filter);
* :func:`cache_dir` — where downloaded jars and the compiled operator jar go: the checkout's
  ``deploy/jars``, else ``$DPHHH_HOME`` or ``~/.cache/dphhh`` (never site-packages);
* :func:`state_dir` — run state (broker data, run folders, logs): ``$DPHHH_STATE_DIR`` (the CLI's
  ``--state-dir``), else the checkout's ``var/``, else ``./var`` in the current folder;
* :func:`script_env` — the environment the ``deploy/`` scripts need to use those folders.

Nothing here reads outside the project: the data the demo, tests and benchmarks use ships with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from dphhh.sketches._cache_home import user_cache_home
from dphhh.sketches.errors import DphhhError

__all__ = [
    "ROOT",
    "DEMO_CAPTURE",
    "CAPTURES",
    "data_dir",
    "capture",
    "MissingData",
    "deploy_dir",
    "cache_dir",
    "jars_dir",
    "state_dir",
    "script_env",
]

_HERE = Path(__file__).resolve().parent
ROOT: Path | None = _HERE.parent if (_HERE.parent / "pyproject.toml").is_file() else None

DEMO_CAPTURE = "amp.TCP.reflection.SYNACK.pcap"
"""The capture the demo, the dashboard test and the file tutorial's example (docs/tutorials/file.md) use."""

CAPTURES = (
    "amp.TCP.reflection.SYNACK.pcap",
    "amp.UDP.isakmp.pcap",
    "amp.UDP.snmp.src161.pcapng",
    "pkt.TCP.synflood.spoofed.pcap",
)
"""The four real DDoS captures (StopDDoS packet-captures; credited in ``data/README.md``)."""


class MissingData(DphhhError, FileNotFoundError):
    """A bundled data file is not where the project keeps it (a partial checkout or wheel)."""


def data_dir() -> Path:
    """The folder holding ``pcaps/``: ``$DPHHH_DATA``, else the checkout's ``data/``, else the
    installed ``dphhh.data`` package."""
    env = os.environ.get("DPHHH_DATA")
    if env:
        return Path(env)
    if ROOT is not None and (ROOT / "data" / "pcaps").is_dir():
        return ROOT / "data"
    return _package_dir("dphhh.data") or (ROOT or _HERE.parent) / "data"


def _package_dir(name: str) -> Path | None:
    """The folder of an installed data package (a namespace package: no ``__init__.py``)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def capture(name: str = DEMO_CAPTURE) -> Path:
    """The path of a bundled capture; :class:`MissingData` names the file and folder if absent."""
    path = data_dir() / "pcaps" / name
    if not path.is_file():
        raise MissingData(
            f"dphhh: bundled capture {name} not found in {path.parent} (set DPHHH_DATA to the folder holding pcaps/)"
        )
    return path


def deploy_dir() -> Path:
    """The folder holding ``kafka-start.sh``, ``fetch-jars.sh``, ``kafka/``, ``flink/``, ``java/``."""
    if ROOT is not None and (ROOT / "deploy" / "kafka-start.sh").is_file():
        return ROOT / "deploy"
    found = _package_dir("dphhh.deploy")
    if found is None:
        raise MissingData(
            "dphhh: the deploy files (Kafka scripts, Java operator sources) are not installed "
            "with this copy of dphhh; reinstall the package"
        )
    return found


def cache_dir() -> Path:
    """Downloaded and built artefacts: the checkout's ``deploy/jars``; else ``$DPHHH_HOME`` or
    ``~/.cache/dphhh`` (created on first use)."""
    if not os.environ.get("DPHHH_HOME") and ROOT is not None and (ROOT / "deploy" / "kafka-start.sh").is_file():
        return ROOT / "deploy"
    return Path(user_cache_home()).resolve()  # the same rule as numba's kernel cache (sketches._cache_home)


def jars_dir() -> Path:
    """``kafka/`` (broker and tools), ``flink/`` (connector, reporter) and ``dphhh/`` (operators)."""
    return cache_dir() / "jars"


def state_dir() -> Path:
    """Run state: ``$DPHHH_STATE_DIR``, else the checkout's ``var/``, else ``./var``."""
    env = os.environ.get("DPHHH_STATE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    if ROOT is not None:
        return ROOT / "var"
    return Path.cwd().resolve() / "var"


def script_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default the process environment) with ``DPHHH_JARS`` and ``DPHHH_STATE_DIR`` set
    for the ``deploy/`` scripts (jars and their state outside the installed package)."""
    env = dict(os.environ if base is None else base)
    env["DPHHH_JARS"] = str(jars_dir())
    env["DPHHH_STATE_DIR"] = str(state_dir())
    return env
