"""The error types of dphhh that a user can act on (docs/ALGORITHMS.md §0.1 for what they may say).

Every error that comes from what a user gave — a parameter, an option, a configuration value,
an input file — is a :class:`DphhhError`; the ``dphhh`` command prints such an error as one line
and exits with status 2 (:class:`UsageError`) or 1 (everything else). Any other exception is a bug
and is shown with its traceback.

* :class:`UsageError` — an invalid parameter, option or setting (also a ``ValueError``, so that
  library callers may catch either). Its message starts with the owning object
  (``HHHParams: epsilon must be ...``). An error about one parameter carries it as fields
  (:meth:`UsageError.of_parameter`: ``owner``, ``parameter``), and :meth:`UsageError.about` names it
  as the user typed it — the command line's option (``--epsilon must be ...``), the configuration's
  key (``privacy.epsilon must be ...``) — without reading the message's text.
* :class:`InputError` — an input that cannot be read as asked (no readable record, a corrupt
  serialised state, a malformed batch); also a ``ValueError``.
* :class:`OperationalError` — the run could not go on (a failed job, an unwritable store).

Messages never carry a count of records or any other statistic of the data (§0.1 f).

This module lives in :mod:`dphhh.sketches` because every other package imports that one.
"""

from __future__ import annotations

__all__ = ["DphhhError", "UsageError", "InputError", "OperationalError"]


class DphhhError(Exception):
    """Base of the errors a user can act on; the message is one line and names no data."""

    #: the process exit status the command line uses for this error
    exit_status = 1


class UsageError(DphhhError, ValueError):
    """An invalid parameter, option or setting, found before any work on data.

    ``owner`` and ``parameter`` (both ``None`` for an error about no single parameter) say which
    parameter of which object the error is about; ``detail`` is the rest of the sentence."""

    exit_status = 2

    def __init__(
        self, message: str, *, owner: str | None = None, parameter: str | None = None, detail: str = ""
    ) -> None:
        super().__init__(message)
        self.owner = owner
        self.parameter = parameter
        self.detail = detail

    @classmethod
    def of_parameter(cls, owner: str, parameter: str, detail: str) -> UsageError:
        """The error ``"{owner}: {parameter} {detail}"`` about ``parameter`` of ``owner``."""
        return cls(f"{owner}: {parameter} {detail}", owner=owner, parameter=parameter, detail=detail)

    def about(self, name: str) -> str:
        """The message about the parameter named as the user wrote it (``name``: an option, a config
        key): ``"--epsilon must be …"`` (a ``detail`` that starts with ``":"`` follows the name directly:
        ``"--hierarchy: …"``); an error about no single parameter: ``"{name}: {message}"``."""
        if self.parameter is None:
            return f"{name}: {self}"
        return f"{name}{'' if self.detail.startswith(':') else ' '}{self.detail}"


class InputError(DphhhError, ValueError):
    """An input that cannot be read as asked (the message names the input, never a count)."""


class OperationalError(DphhhError):
    """The run could not go on (a failed job, an unwritable store); the message is its root cause."""
