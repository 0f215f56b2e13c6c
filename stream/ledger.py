"""The durable release ledger: a window's report is computed once and published once.

At its publication time a report is written here first (atomically and at most once: a temporary
file of its own, ``fsync``, then a hard link to the window's name, which fails if any attempt —
a zombie task included — stored one first; then a directory ``fsync``), then to the reports file
and the reports topic, and finally the window is marked published. When a window is released
again after a failure and restore, the stored bytes are republished unchanged instead of being
recomputed with fresh noise (docs/ALGORITHMS.md §0 (b)). A disk-full or unwritable ledger raises
:class:`LedgerError` and nothing is published for that window.

The ledger holds private state (the deployment's hash key, :mod:`dphhh.sketches.keyed`): its folder is
created 0700 and its files 0600, whatever the umask (docs/explanation/guarantees.md "Who may read what").
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from dphhh.sketches.errors import OperationalError
from dphhh.sketches.keyed import KeySecret

__all__ = ["ReleaseLedger", "LedgerError", "resolve_origin", "job_schedule", "job_key_secret", "private_dir"]

_NAME = re.compile(r"^window-(-?\d+)\.json$")


class LedgerError(OperationalError, OSError):
    """The ledger could not be read or written."""


PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` created (parents too) and made 0700: job state is as private as raw input."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    os.chmod(folder, PRIVATE_DIR)
    return folder


class ReleaseLedger:
    """Window start (ms) → report bytes, one file per window under ``directory`` (0700, files 0600)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        try:
            private_dir(self.directory)
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

    def _write_durably(self, path: Path, data: bytes, what: str, *, replace: bool = True) -> bool:
        """Write ``data`` to ``path`` durably (a temporary file of this writer's own, 0600, fsync;
        then a rename — or, with ``replace=False``, a hard link that fails when ``path`` exists —
        and a directory fsync). Returns False when ``replace=False`` and another writer stored
        ``path`` first (nothing changed). On failure the temporary file is removed and
        :class:`LedgerError` names ``what``."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        stored = True
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    stored = False
                tmp.unlink(missing_ok=True)
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
        return stored

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
        """Store a window's report durably unless one is stored — atomically against a concurrent
        attempt (of two writers exactly one stores its bytes) — and return the stored bytes."""
        existing = self.get(window_start)
        if existing is not None:
            return existing
        if self._write_durably(self._path(window_start), report, f"window {window_start}", replace=False):
            return report
        stored = self.get(window_start)
        if stored is None:  # pragma: no cover - a stored report is never deleted
            raise LedgerError(f"ReleaseLedger: window {window_start} vanished while it was stored")
        return stored

    def published_through(self) -> int | None:
        """The newest window whose report reached every sink (the reports topic last), or ``None``."""
        path = self.directory / "published"
        try:
            return int(path.read_text().strip())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LedgerError(f"ReleaseLedger: cannot read the published mark: {exc}") from None

    def mark_published(self, window_start: int) -> None:
        """Record that ``window_start``'s report (and every earlier one) reached every sink."""
        self._write_durably(self.directory / "published", str(int(window_start)).encode(), "the published mark")

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


def job_key_secret(cfg) -> KeySecret:
    """The deployment's hash key for hashed sketch keys (:mod:`dphhh.sketches.keyed`) and JSON unit keys
    (:func:`dphhh.privacy.unit_cap.unit_keys_of`): stored in the ledger (0600, created on first use), or
    derived from ``privacy.seed`` in a seeded test run."""
    if cfg.seed is not None:
        return KeySecret.from_seed(cfg.seed)
    try:
        return KeySecret.load_or_create(private_dir(cfg.output.ledger_dir))
    except OSError as exc:
        raise LedgerError(f"ReleaseLedger: cannot keep the hash key in {cfg.output.ledger_dir}: {exc}") from None


def resolve_origin(cfg, now_ms: int) -> int:
    """The schedule origin of ``cfg``'s deployment: ``window.origin`` if configured, else the window
    holding ``now_ms`` on the deployment's first start; stored in the ledger either way (called by
    ``dphhh run`` and ``dphhh.stream.flink_entry`` before the job is submitted)."""
    size = cfg.window.size_ms
    first = cfg.origin_ms if cfg.origin_ms is not None else now_ms - now_ms % size
    origin = ReleaseLedger(cfg.output.ledger_dir).schedule_start(first)
    if cfg.uses_key_secret:
        job_key_secret(cfg)  # created before any worker needs it
    return origin


def job_schedule(cfg):
    """The release schedule of ``cfg``'s deployment: the configured origin, or the one stored in the
    ledger by :func:`resolve_origin` (read where the job is built; the operators get the origin
    with their configuration)."""
    origin = cfg.origin_ms
    if origin is None:
        origin = ReleaseLedger(cfg.output.ledger_dir).stored_schedule_start()
        if origin is None:
            raise LedgerError(
                f"ReleaseLedger: {cfg.output.ledger_dir} holds no schedule origin; start the job with "
                "`dphhh run` or `dphhh.stream.flink_entry`, which store it (or set window.origin)"
            )
    return cfg.schedule(origin)
