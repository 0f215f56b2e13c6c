"""The durable release ledger: a window's report is computed once and published once.

Before a report leaves the release operator it is written here (atomically: temporary file,
``fsync``, rename, directory ``fsync``). When a window is released again after a failure and
restore, the stored bytes are republished unchanged instead of being recomputed with fresh noise
(docs/ALGORITHMS.md §0 (b)). A disk-full or unwritable ledger raises :class:`LedgerError` and nothing is
published for that window.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sketches.errors import OperationalError

__all__ = ["ReleaseLedger", "LedgerError", "resolve_origin", "job_schedule"]

_NAME = re.compile(r"^window-(-?\d+)\.json$")


class LedgerError(OperationalError, OSError):
    """The ledger could not be read or written."""


class ReleaseLedger:
    """Window start (ms) → report bytes, one file per window under ``directory``."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"ReleaseLedger: cannot create {self.directory}: {exc.strerror}") from None

    def claim(self, fingerprint: str) -> None:
        """Bind the ledger to one deployment (its configuration fingerprint) on first use; a ledger
        of another deployment is refused with :class:`LedgerError` (it would republish that
        deployment's reports for this one's windows)."""
        path = self.directory / "deployment"
        try:
            held = path.read_text().strip()
        except FileNotFoundError:
            held = None
        except OSError as exc:
            raise LedgerError(f"ReleaseLedger: cannot read {path}: {exc.strerror}") from None
        if held is None:
            self._write_durably(path, fingerprint.encode(), str(path))
        elif held != fingerprint:
            raise LedgerError(
                f"ReleaseLedger: {self.directory} belongs to another deployment (configuration fingerprint {held}, "
                f"this one is {fingerprint}): its reports must not be republished for this configuration; "
                "use another output.ledger_dir (or restore the configuration that wrote it)"
            )

    def _write_durably(self, path: Path, data: bytes, what: str) -> None:
        """Write ``data`` to ``path`` atomically and durably (temporary file, fsync, rename, directory
        fsync); on failure remove the temporary file and raise :class:`LedgerError` naming ``what``."""
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            raise LedgerError(f"ReleaseLedger: cannot write {what}: {exc.strerror}") from None

    def _path(self, window_start: int) -> Path:
        return self.directory / f"window-{int(window_start)}.json"

    def get(self, window_start: int) -> bytes | None:
        """The stored report of a window, or ``None``."""
        try:
            return self._path(window_start).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError(f"ReleaseLedger: cannot read window {window_start}: {exc.strerror}") from None

    def put(self, window_start: int, report: bytes) -> bytes:
        """Store a window's report durably unless one is stored; return the stored bytes."""
        existing = self.get(window_start)
        if existing is not None:
            return existing
        self._write_durably(self._path(window_start), report, f"window {window_start}")
        return report

    def schedule_start(self, first_window: int) -> int:
        """The deployment's schedule origin (its first window): stored durably on first call,
        returned ever after (``first_window`` is then ignored).

        Every window from this one on gets exactly one report (docs/ALGORITHMS.md §0.1 d). It is
        public: the configured ``window.origin`` or the window of the deployment's first start —
        never the time of an element — and it lives here, not in Flink state, so that it survives
        restores from any checkpoint and is the same for every operator of the job.
        """
        stored = self.stored_schedule_start()
        if stored is not None:
            return stored
        self._write_durably(self.directory / "schedule-start", str(int(first_window)).encode(), "the schedule start")
        return int(first_window)

    def stored_schedule_start(self) -> int | None:
        """The stored schedule origin, or ``None`` before the deployment's first start."""
        path = self.directory / "schedule-start"
        try:
            return int(path.read_text().strip())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LedgerError(f"ReleaseLedger: cannot read the schedule start: {exc}") from None

    def windows(self) -> list[int]:
        """Window starts with a stored report, ascending."""
        found = [int(m.group(1)) for p in self.directory.iterdir() if (m := _NAME.match(p.name))]
        return sorted(found)


def resolve_origin(cfg, now_ms: int) -> int:
    """The schedule origin of ``cfg``'s deployment: ``window.origin`` if configured, else the window
    holding ``now_ms`` on the deployment's first start; stored in the ledger either way (called by
    ``dphhh run`` and ``stream.flink_entry`` before the job is submitted)."""
    size = cfg["window.size_ms"]
    first = cfg.origin_ms if cfg.origin_ms is not None else now_ms - now_ms % size
    return ReleaseLedger(cfg["output.ledger_dir"]).schedule_start(first)


def job_schedule(cfg):
    """The release schedule of ``cfg``'s deployment: the configured origin, or the one stored in the
    ledger by :func:`resolve_origin` (read where the job is built; the operators get the origin
    with their configuration)."""
    origin = cfg.origin_ms
    if origin is None:
        origin = ReleaseLedger(cfg["output.ledger_dir"]).stored_schedule_start()
        if origin is None:
            raise LedgerError(
                f"ReleaseLedger: {cfg['output.ledger_dir']} holds no schedule origin; start the job with "
                "`dphhh run` or `stream.flink_entry`, which store it (or set window.origin)"
            )
    return cfg.schedule(origin)
