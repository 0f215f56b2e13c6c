"""The stream job's message formats: one class per format, registered by name (docs/ALGORITHMS.md §0.1 e).

* :mod:`.base` — the :class:`MessageFormat` protocol, its outcomes (:class:`Decoded`,
  :class:`DecodedBatch`), the options (:class:`DecoderOptions`) and the registry
  (:data:`MESSAGE_FORMATS`, :func:`register_message_format`, :func:`message_format`);
* :mod:`.packed` — ``packed-ipv4``, ``packed-ipv4-pairs``;
* :mod:`.address` — ``text-ipv4``, ``json``;
* :mod:`.path` — ``path``;
* :mod:`.flow` — ``flow-json``.

A new format: a module with one :class:`MessageFormat` subclass, its entry in :data:`BUILT_IN`
below (or a call of :func:`register_message_format` where it is defined, outside this package),
and its tests (the fuzz and batch-equivalence tests run over every registered format).
"""

from .address import JsonAddress, TextIPv4
from .base import (
    MESSAGE_FORMATS,
    Decoded,
    DecodedBatch,
    DecoderOptions,
    MessageFormat,
    message_format,
    register_message_format,
)
from .flow import FlowJsonMessages
from .packed import PackedIPv4, PackedIPv4Pairs
from .path import PathMessages

#: The formats this package registers, in the order the reference pages and messages list them.
BUILT_IN: tuple[type[MessageFormat], ...] = (
    PackedIPv4,
    PackedIPv4Pairs,
    TextIPv4,
    JsonAddress,
    PathMessages,
    FlowJsonMessages,
)
for _format in BUILT_IN:
    register_message_format(_format)

__all__ = [
    "BUILT_IN",
    "MESSAGE_FORMATS",
    "Decoded",
    "DecodedBatch",
    "DecoderOptions",
    "FlowJsonMessages",
    "JsonAddress",
    "MessageFormat",
    "PackedIPv4",
    "PackedIPv4Pairs",
    "PathMessages",
    "TextIPv4",
    "message_format",
    "register_message_format",
]
