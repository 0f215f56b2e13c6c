"""Standard input, pipes and gzip-compressed files as ordinary input files (``--input -``,
``--input /dev/stdin``, ``--input <(zcat …)``, ``FILE.gz``).

The readers of :mod:`dphhh.connectors.files` and :mod:`dphhh.connectors.snapshot` need a regular file (they
detect the format from its first bytes and read captures in one pass). :func:`spooled_input`
copies standard input or any other stream (a named pipe, a process substitution's ``/dev/fd/N``, a
character device), or decompresses a gzip file, into a private temporary folder (mode 0700, removed
when the context ends) and yields that file's path; any other path is yielded unchanged.
The copy keeps the inner suffix (``flows.csv.gz`` → ``….csv``) so that format detection by
extension still works. Errors are :class:`~dphhh.sketches.errors.UsageError` naming the input, never
its contents.
"""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from dphhh.sketches.errors import UsageError

__all__ = ["STDIN", "GZIP_MAGIC", "spooled_input", "is_gzip", "is_stream"]

#: The ``--input`` value that means standard input.
STDIN = "-"
#: The first two bytes of a gzip stream.
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True iff the file at ``path`` starts with the gzip magic (whatever its name)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False  # the reader that opens it next reports the problem with its own message


def is_stream(path: str | os.PathLike[str]) -> bool:
    """True iff ``path`` names something that exists but is neither a regular file nor a folder: a
    pipe, a process substitution (``/dev/fd/N``), ``/dev/stdin``, a character device — read once."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # missing: the reader reports it with its own message
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _copy(source: Any, target: Path, what: str) -> None:
    try:
        with open(target, "wb") as out:
            shutil.copyfileobj(source, out, length=1 << 20)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise UsageError(f"input: cannot read {what} ({reason})") from None


@contextmanager
def spooled_input(path: str, *, stdin: BinaryIO | None = None) -> Iterator[str]:
    """A regular file holding the records of ``path``: standard input for ``-``, a copy of a stream
    (:func:`is_stream`), the decompressed content of a gzip file or stream, else ``path`` itself."""
    streamed = path != STDIN and is_stream(path)  # read once, before anything peeks at its first bytes
    if path != STDIN and not streamed and not is_gzip(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="dphhh-input-") as folder:
        if path == STDIN or streamed:
            target = Path(folder) / "stdin"
            if streamed:
                try:
                    with open(path, "rb") as source:
                        _copy(source, target, path)
                except OSError as exc:
                    raise UsageError(f"input: cannot read {path} ({exc.strerror})") from None
            else:
                _copy(stdin if stdin is not None else sys.stdin.buffer, target, "standard input")
            if is_gzip(target):
                unpacked = Path(folder) / "stdin-unpacked"
                with gzip.open(target, "rb") as source:
                    _copy(source, unpacked, "standard input (gzip)")
                target = unpacked
        else:
            inner = Path(path).name
            inner = inner[: -len(".gz")] if inner.endswith(".gz") else inner
            target = Path(folder) / (inner or "input")
            with gzip.open(path, "rb") as source:
                _copy(source, target, f"{path} (gzip)")
        yield str(target)
