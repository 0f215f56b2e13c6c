"""JSON-lines report file: one line per window, appended once.

The writer remembers which windows the file already holds (read at open), so a window
republished after a failure and restore — byte-identical, from the release ledger — is not
written twice. Each line is flushed and ``fsync``-ed; a write error (disk full, unwritable path)
raises :class:`ReportSinkError` with a clear message, cuts a partly written line off again and
leaves the file's earlier lines intact.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sketches.errors import OperationalError

__all__ = ["JsonLinesReportFile", "ReportSinkError"]


class ReportSinkError(OperationalError, OSError):
    """The report file could not be written."""


def _window_key(report: bytes) -> int:
    return int(json.loads(report)["window"]["start_ms"])


class JsonLinesReportFile:
    """Appends report bytes as lines, at most once per window start."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._seen: set[int] = set()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._drop_torn_tail()
                with open(self.path, "rb") as fh:
                    for line in fh:
                        line = line.strip()
                        if line:
                            try:
                                self._seen.add(_window_key(line))
                            except (ValueError, KeyError, TypeError):
                                continue  # not a report line: ignored
        except OSError as exc:
            raise ReportSinkError(f"report file {self.path}: cannot open: {exc.strerror}") from None

    def _drop_torn_tail(self) -> None:
        """Cut a last line left without its newline by a crash, so appends start on a new line."""
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def write(self, report: bytes) -> bool:
        """Append one report unless its window is already in the file; True if written."""
        key = _window_key(report)
        if key in self._seen:
            return False
        size = None
        try:
            with open(self.path, "ab") as fh:
                size = fh.tell()
                fh.write(report.rstrip(b"\n") + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if size is not None:  # a partial line (disk full mid-write) is cut off again
                try:
                    os.truncate(self.path, size)
                except OSError:
                    pass  # the next open drops a torn last line
            raise ReportSinkError(f"report file {self.path}: cannot write: {exc.strerror}") from None
        self._seen.add(key)
        return True
