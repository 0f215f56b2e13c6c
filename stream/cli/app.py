"""The ``dphhh`` parser, the dispatch to one module per command, and how errors are shown.

Errors: a :class:`~dphhh.sketches.errors.DphhhError` (a usage error, an unreadable input, a failed job)
prints ``dphhh <command>: error: <message>`` on one line and exits with its status (2 for usage
errors, 1 otherwise); the owner prefix of library messages (``HHHParams: epsilon must …``) is
rewritten into the option the user typed (``--epsilon must …``, :func:`user_message`). Kafka
errors and timeouts exit 1 on one line. Anything else is a bug: it is shown with its traceback,
under a line that says so, and exits 70 (``EX_SOFTWARE``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from kafka.errors import KafkaError

from dphhh.sketches.errors import DphhhError, UsageError

from . import dashboard, demo, exact, hhh, plan, produce, reports, run, snapshot

__all__ = ["main", "build_parser", "COMMANDS", "user_message", "INTERNAL_ERROR_STATUS"]

#: Each command's module (``add_parser(sub)`` and ``run(args) -> int``), in ``--help`` order.
COMMANDS: dict[str, ModuleType] = {
    "hhh": hhh,
    "exact": exact,
    "demo": demo,
    "snapshot": snapshot,
    "plan": plan,
    "dashboard": dashboard,
    "run": run,
    "produce": produce,
    "reports": reports,
}
#: Commands that run until stopped: SIGTERM stops them as Ctrl-C does.
LONG_RUNNING = ("run", "demo", "reports", "produce", "dashboard")
#: Commands that keep job state on disk (created private: umask 077).
PRIVATE_STATE = ("run", "demo")
#: Exit status of an internal error (a bug), as sysexits.h's EX_SOFTWARE.
INTERNAL_ERROR_STATUS = 70

#: Library parameter names → the option a user types (docs/reference/cli.md "Vocabulary").
OPTION_OF = {
    "domain": "--domain",
    "hierarchy": "--hierarchy",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "beta": "--beta",
    "tau": "--tau",
    "counters": "--counters",
    "k": "--counters",
    "kappa": "--counters",
    "partitions": "--partitions",
    "variant": "--variant",
    "mode": "--mode",
    "calibration": "--calibration",
    "rho": "--rho",
    "contribution": "--contribution",
    "branching": "--branching",
    "oracle": "--oracle",
    "fanout": "--fanout",
    "weight_cap": "--weight-cap",
    "unit_cap": "--unit-cap",
    "max_memory": "--max-memory",
    "n": "--n",
    "h": "--hierarchy",
}
#: Library owners whose every message is about one option.
OWNER_OPTION = {
    "IPv4Hierarchy": "--hierarchy",
    "IPv6Hierarchy": "--hierarchy",
    "PathHierarchy": "--hierarchy",
    "parse_hierarchy": "--hierarchy",
    "hierarchy": "--hierarchy",
}
_OWNED = re.compile(r"^(?P<owner>[A-Za-z_][\w. ]*?): (?P<rest>.*)$", re.S)
_NAMED = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*)(?P<tail>\b.*)$", re.S)


def user_message(error: str | BaseException) -> str:
    """The error's message with a library owner prefix replaced by the option it is about, when known:
    ``"HHHParams: epsilon must be > 0"`` → ``"--epsilon must be > 0"``; ``"MisraGries: k must …"`` →
    ``"--counters must …"``; ``"IPv4Hierarchy: …"`` → ``"--hierarchy: …"``. An error that carries its
    parameter (:meth:`UsageError.of_parameter`) is renamed by that field; the others (older raise
    sites) by their message's ``Owner: name`` prefix. Other messages are kept."""
    if isinstance(error, UsageError) and error.parameter in OPTION_OF:
        return error.about(OPTION_OF[error.parameter])
    message = str(error)
    m = _OWNED.match(message)
    if not m or m.group("owner").startswith("-"):
        return message
    owner, rest = m.group("owner"), m.group("rest")
    if owner in OWNER_OPTION:
        return f"{OWNER_OPTION[owner]}: {rest}"
    named = _NAMED.match(rest)
    if named and named.group("name") in OPTION_OF:
        return f"{OPTION_OF[named.group('name')]}{named.group('tail')}"
    return message


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dphhh")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of ``dphhh``
    (``dphhh hhh: error: …``), pointing to ``--help`` instead of printing the usage; exit status 2.
    The sub-commands' parsers are of this class too (argparse makes them of their parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dphhh``."""
    parser = _Parser(prog="dphhh", description="Hierarchical heavy hitters under differential privacy.")
    parser.add_argument("--version", action="version", version=f"dphhh {_version()}")
    parser.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="run state (local broker, run folders, logs); default $DPHHH_STATE_DIR, else var/ of "
        "the checkout, else ./var. Downloaded jars go to $DPHHH_HOME (default ~/.cache/dphhh)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def _stop_on_sigterm() -> None:
    """SIGTERM (``kill``, service managers) stops a long-running command as Ctrl-C does: cleanly."""
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    # Ctrl-C too, even when started with SIGINT ignored (a background job of a non-interactive
    # shell, `nohup ... &`): Python then installs no handler of its own
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dphhh`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.state_dir:  # read by stream.paths.state_dir, here and in the deploy/ scripts
        os.environ["DPHHH_STATE_DIR"] = str(Path(args.state_dir).expanduser().resolve())
    if args.command in LONG_RUNNING:
        _stop_on_sigterm()
    if args.command in PRIVATE_STATE:
        # checkpoints, the ledger, run folders and logs hold raw data: 0700/0600, whatever the
        # caller's umask (the JVM and its Python workers inherit it; docs/explanation/guarantees.md
        # "Who may read what")
        os.umask(0o077)
    name = f"dphhh {args.command}" + (f" {args.module}" if args.command == "snapshot" else "")
    try:
        return COMMANDS[args.command].run(args)
    except KeyboardInterrupt:  # a second Ctrl-C during a clean stop, or Ctrl-C outside a job
        print(f"\n{name}: interrupted", file=sys.stderr)
        return 130
    except DphhhError as exc:
        print(f"{name}: error: {user_message(exc)}", file=sys.stderr)
        return exc.exit_status
    except KafkaError as exc:  # broker unreachable, topic errors, …
        print(f"{name}: error: kafka: {exc}", file=sys.stderr)
        return 1
    except TimeoutError as exc:  # the broker did not answer within kafka.wait_s
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `dphhh ... | head`
        return 0
    except Exception:
        print(
            f"{name}: internal error (a bug in dphhh, not in your input or options; please report it with "
            "the traceback below)",
            file=sys.stderr,
        )
        traceback.print_exc()
        return INTERNAL_ERROR_STATUS


if __name__ == "__main__":
    sys.exit(main())
