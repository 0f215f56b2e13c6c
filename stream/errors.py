"""Errors the stream commands report to the user (kept free of PyFlink imports for the CLI)."""

from __future__ import annotations

from dphhh.sketches.errors import OperationalError

__all__ = ["JobFailed"]


class JobFailed(OperationalError, RuntimeError):
    """The job ended with a failure (after its restarts), or was stopped because of one; the message
    is one line (its root cause), never data."""
