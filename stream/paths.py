"""Where the project's files are: the checkout, the bundled data, the run state.

One place for every path the code uses, so that a checkout, an editable install and an installed
wheel find the same things:

* :data:`ROOT` — the checkout (the folder holding ``pyproject.toml``) when the code runs from one,
  else ``None`` (an installed wheel);
* :func:`data_dir` — the real captures bundled with the project (``data/`` in the checkout, the
  ``dphhh_data`` package data in a wheel); ``$DPHHH_DATA`` overrides it;
* :func:`capture` — one of those captures by file name, with an error naming what is missing.

Nothing here reads outside the project: the data the demo, tests and benchmarks use ships with it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "DEMO_CAPTURE", "CAPTURES", "data_dir", "capture", "MissingData"]

_HERE = Path(__file__).resolve().parent
ROOT: Path | None = _HERE.parent if (_HERE.parent / "pyproject.toml").is_file() else None

DEMO_CAPTURE = "amp.TCP.reflection.SYNACK.pcap"
"""The capture the demo, the dashboard test and the README's batch example use."""

CAPTURES = (
    "amp.TCP.reflection.SYNACK.pcap",
    "amp.UDP.isakmp.pcap",
    "amp.UDP.snmp.src161.pcapng",
    "pkt.TCP.synflood.spoofed.pcap",
)
"""The four real DDoS captures (StopDDoS packet-captures; credited in ``data/README.md``)."""


class MissingData(FileNotFoundError):
    """A bundled data file is not where the project keeps it (a partial checkout or wheel)."""


def data_dir() -> Path:
    """The folder holding ``pcaps/``: ``$DPHHH_DATA``, else the checkout's ``data/``, else the
    installed ``dphhh_data`` package."""
    env = os.environ.get("DPHHH_DATA")
    if env:
        return Path(env)
    if ROOT is not None and (ROOT / "data" / "pcaps").is_dir():
        return ROOT / "data"
    try:
        from importlib.resources import files

        return Path(str(files("dphhh_data")))
    except ModuleNotFoundError:
        return (ROOT or _HERE.parent) / "data"


def capture(name: str = DEMO_CAPTURE) -> Path:
    """The path of a bundled capture; :class:`MissingData` names the file and folder if absent."""
    path = data_dir() / "pcaps" / name
    if not path.is_file():
        raise MissingData(f"dphhh: bundled capture {name} not found in {path.parent} "
                          f"(set DPHHH_DATA to the folder holding pcaps/)")
    return path
