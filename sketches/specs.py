"""Parsing a hierarchy spec of any kind: :func:`parse_hierarchy` (docs/ALGORITHMS.md §1, §11).

One-dimensional specs are parsed by :func:`dphhh.sketches.hierarchy.parse_single_hierarchy`, pairs
``A x B`` by :func:`dphhh.sketches.pairs.parse_pair_hierarchy`; this module sits above both, so that
neither imports the other's parser (no import circle).
"""

from __future__ import annotations

from .hierarchy import Hierarchy, parse_single_hierarchy
from .pairs import is_pair_spec, parse_pair_hierarchy

__all__ = ["parse_hierarchy"]


def parse_hierarchy(text: str) -> Hierarchy:
    """Parse ``ipv4[:8,16,24,32]``, ``ipv6[:16,32,48,64,128]``, ``path[:4]`` or a pair ``A x B`` of
    two of them (:class:`~dphhh.sketches.pairs.PairHierarchy`) into a hierarchy.

    Raises :class:`~dphhh.sketches.errors.UsageError` naming the bad part.
    """
    if is_pair_spec(text):  # "ipv4:8,16 x ipv4:8,16" (docs/ALGORITHMS.md §11)
        return parse_pair_hierarchy(text)
    return parse_single_hierarchy(text)
