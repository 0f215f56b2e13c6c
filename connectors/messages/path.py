"""The ``path`` format: one ``/``-path per message (UTF-8), e.g. ``de/bavaria/munich/leopoldstr``.

The path is normalised as :func:`dphhh.connectors.text.parse_paths` does and must have exactly the
hierarchy's depth (``path_depth``): ``bad_path_depth`` otherwise; ``bad_path_empty_component``,
``bad_path_too_long`` and ``bad_path_too_deep`` as the parser says.
"""

from __future__ import annotations

import re

import numpy as np

from ..skips import SkipCounter
from ..text import MAX_PATH_LENGTH, is_normal_path, normal_path_lines, normalise_path, parse_paths
from .base import Decoded, DecodedBatch, DecoderOptions, TextMessageFormat

__all__ = ["PathMessages"]


class PathMessages(TextMessageFormat):
    """``path``: one ``/``-path of the hierarchy's depth per message."""

    name = "path"
    summary = "one /-path per message (UTF-8) of exactly the hierarchy's depth, e.g. de/bavaria/munich/leopoldstr"
    reasons = (
        "empty",
        "oversized",
        "invalid_utf8",
        "bad_path_empty_component",
        "bad_path_too_long",
        "bad_path_too_deep",
        "bad_path_depth",
    )
    hierarchy_kinds = frozenset({"path"})
    reads = frozenset({"path_depth"})

    def __init__(self, options: DecoderOptions) -> None:
        super().__init__(options)
        self.path_depth = options.path_depth
        self._lines: re.Pattern[str] | None = None

    def decode(self, value: bytes | None) -> Decoded:
        reason, text = self.message_text(value)
        if reason is not None:
            return Decoded(reason=reason)
        skips = SkipCounter()
        paths = parse_paths([text], skips, max_depth=max(self.path_depth, 1), max_length=MAX_PATH_LENGTH)
        if not paths:
            return Decoded(reason=next(iter(skips.as_dict()), "bad_path_empty_component"))
        if paths[0].count("/") + 1 != self.path_depth:
            return Decoded(reason="bad_path_depth")
        return Decoded(values=paths)

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        """One loop over the batch, each path normalised and checked as
        :func:`~dphhh.connectors.text.parse_paths` does for :meth:`decode` (the reference), without an
        outcome object or a skip counter per message — or none (:meth:`_all_normal`) when every
        message already is a normal path of the right depth."""
        whole = self._all_normal(values)
        if whole is not None:
            return DecodedBatch([None] * len(whole), np.ones(len(whole), dtype=np.int64), whole)
        reasons: list[str | None] = []
        paths: list[str] = []
        depth = self.path_depth
        for value in values:
            reason, text = self.message_text(value)
            if (
                reason is None
                and len(text) <= MAX_PATH_LENGTH
                and text.count("/") + 1 == depth
                and is_normal_path(text)
            ):
                paths.append(text)  # normalise_path would return it unchanged and its depth is right
            elif reason is None:
                reason, path = normalise_path(text, depth, MAX_PATH_LENGTH)
                if reason is None:
                    if path.count("/") + 1 != depth:
                        reason = "bad_path_depth"
                    else:
                        paths.append(path)
            reasons.append(reason)
        counts = np.fromiter((r is None for r in reasons), dtype=np.int64, count=len(reasons))
        return DecodedBatch(reasons, counts, paths)

    def _all_normal(self, values: list[bytes | None]) -> list[str] | None:
        """The batch's paths when every message is a path :func:`normalise_path` returns unchanged,
        of ``path_depth`` components, within the size limits (what the loop of :meth:`decode_many`
        would find, in a few calls over the joined batch); ``None`` otherwise (the loop decides)."""
        if not values or None in values:
            return None
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))  # type: ignore[arg-type]
        if lengths.min() < 1 or lengths.max() > min(MAX_PATH_LENGTH, self.max_message_bytes):
            return None  # bytes bound characters: within both limits (empty and oversized go to the loop)
        joined = b"\n".join(values)  # type: ignore[arg-type]
        if joined.count(b"\n") != len(values) - 1:
            return None  # a message holds a line break
        try:  # valid as a whole iff each message is (a line break never splits a character)
            text = joined.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if self._lines is None:
            self._lines = normal_path_lines(self.path_depth)
        return text.split("\n") if self._lines.fullmatch(text) else None

    def unreadable_may_hold(self, value: bytes) -> bool:
        return b"/" in value

    def text_holds(self, value: bytes, text: str) -> bool:
        return bool(parse_paths([text], SkipCounter(), max_depth=len(text) + 1, max_length=len(text) + 1))
