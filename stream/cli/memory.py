"""Memory guards: refuse, before any work, a run whose predicted memory does not fit.

Some allocations of the offline modules follow from public parameters alone — AHEAD's dense
grids from each column's ``--domain`` and ``--branching``, LUE-DPTree's interval tree from its
``--domain`` and fan-out, InfTDA's next level from the released previous one — and can be far
larger than the machine (``snapshot ahead`` over two 16-bit columns pads them to a 65536 × 65536
grid: hundreds of GiB). The command predicts them with the pure estimates of
:mod:`dphhh.privacy.offline` (``ahead_memory_bytes``, ``lue_memory_bytes``, ``inftda_level_memory_bytes``)
and calls :func:`check_memory` *before* reading the input, so that a run which cannot finish is
refused at once with the estimate and the option that reduces it, instead of being killed by
the kernel after minutes of swapping.

``--max-memory SIZE`` (:func:`add_max_memory_option`; ``4GiB``, ``500MB``, ``2e9``; units as
``dphhh plan``'s :func:`dphhh.stream.cli.plan.parse_size`) sets the limit. **Default: 80 % of the
memory available when the command starts** (``MemAvailable`` of ``/proc/meminfo``; where that is
missing, the free physical pages of ``os.sysconf``), so that the rest of the machine keeps a
margin. The estimates and the limit are public (parameters and the machine, never the data), so
a refusal reveals nothing about the input (docs/ALGORITHMS.md §0.1).

Usage (a command module)::

    add_max_memory_option(p)                       # in add_parser
    limit = parse_max_memory(args.max_memory)      # in run, before reading the input
    check_memory(estimate, "--domain: AHEAD over 65536 x 65536", "use a coarser --domain", limit)
"""

from __future__ import annotations

import argparse
import os

from dphhh.sketches.errors import UsageError

from .plan import parse_size

__all__ = [
    "DEFAULT_SHARE",
    "available_memory",
    "default_max_memory",
    "parse_max_memory",
    "add_max_memory_option",
    "check_memory",
    "format_bytes",
]

#: Share of the available memory a run may plan to use when ``--max-memory`` is not given.
DEFAULT_SHARE = 0.8
#: Assumed available memory when neither /proc/meminfo nor os.sysconf tells (4 GiB).
_FALLBACK = 4 << 30


def available_memory() -> int:
    """Bytes of memory available to a new process now: ``MemAvailable`` of ``/proc/meminfo``,
    else ``SC_AVPHYS_PAGES × SC_PAGE_SIZE`` of :func:`os.sysconf`, else 4 GiB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    parts = line.split()
                    scale = 1024 if len(parts) > 2 and parts[2].lower() == "kb" else 1
                    return int(parts[1]) * scale
    except (OSError, ValueError, IndexError):
        pass
    try:
        pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and size > 0:
            return int(pages) * int(size)
    except (AttributeError, ValueError, OSError):
        pass
    return _FALLBACK


def default_max_memory() -> int:
    """The default limit: :data:`DEFAULT_SHARE` (80 %) of :func:`available_memory`."""
    return max(1, int(DEFAULT_SHARE * available_memory()))


def parse_max_memory(text: str | None) -> int:
    """``--max-memory`` in bytes: ``"4GiB"``, ``"500MB"``, ``"2e9"`` (:func:`~dphhh.stream.cli.plan.parse_size`);
    ``None`` (the option not given) is :func:`default_max_memory`."""
    if text is None:
        return default_max_memory()
    return parse_size(text, "--max-memory")


def add_max_memory_option(p: argparse.ArgumentParser) -> None:
    """``--max-memory SIZE`` on ``p`` (a string, parsed by :func:`parse_max_memory` at run time, so
    that a malformed size is a usage error naming the option)."""
    p.add_argument(
        "--max-memory",
        default=None,
        metavar="SIZE",
        help="refuse, before reading the input, a run whose predicted memory exceeds SIZE "
        "(e.g. 4GiB, 500MB; default 80%% of the memory available at start)",
    )


def format_bytes(value: float) -> str:
    """``34359738368`` → ``"32 GiB"``: two significant digits, binary units."""
    for unit, size in (
        ("EiB", 1 << 60),
        ("PiB", 1 << 50),
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ):
        if value >= size:
            scaled = value / size
            return f"{scaled:.0f} {unit}" if scaled >= 10 else f"{scaled:.1f} {unit}"
    return f"{int(value)} B"


def check_memory(estimate_bytes: int, what: str, hint: str, limit: int) -> None:
    """Raise :class:`~dphhh.sketches.errors.UsageError` (exit 2) if ``estimate_bytes > limit``.

    ``what`` names the option that drives the estimate and the work, e.g. ``"--domain: AHEAD over
    65536 x 65536"``; ``hint`` says how to reduce it. The message reads ``"<what> needs ~34 GiB
    (limit 19 GiB, --max-memory); <hint>"``. Estimates and limit must be public (parameters, the
    machine): the message names no count of the data.
    """
    if estimate_bytes > limit:
        raise UsageError(
            f"{what} needs ~{format_bytes(estimate_bytes)} (limit {format_bytes(limit)}, --max-memory); {hint}"
        )
