"""What every message format is: the :class:`MessageFormat` protocol, its outcome types and the registry.

A message format turns Kafka message values (``bytes``) into hierarchy values, message by message:
each message decodes to its values or to a **reason** (a property of the message alone, never its
content), whatever the other messages of its batch hold (docs/ALGORITHMS.md §0.1 e). A format is
one subclass of :class:`MessageFormat` registered by name with :func:`register_message_format`;
the stream job's config (``input.format``), its decoder (:class:`dphhh.connectors.decode.MessageDecoder`),
the dead-letter metrics (every format's :attr:`~MessageFormat.reasons`) and the reference pages
read the registry, so a new format is one class, its registration and its tests.

A format states, as class attributes, what the config checks against: which hierarchy kinds its
values fit (:attr:`~MessageFormat.hierarchy_kinds`), which privacy units it carries
(:attr:`~MessageFormat.unit_keys`), whether it is packed (many elements per message, decoded
whatever the size) and which format-specific options it reads (:attr:`~MessageFormat.reads`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dphhh.sketches.errors import UsageError
from dphhh.sketches.keyed import KeySecret

__all__ = [
    "MESSAGE_FORMATS",
    "TextMessageFormat",
    "Decoded",
    "DecodedBatch",
    "DecoderOptions",
    "MessageFormat",
    "message_format",
    "register_message_format",
]


@dataclass(frozen=True)
class Decoded:
    """A decoded message: ``values`` (uint32 array or list of paths) or a ``reason``; ``event_time``
    (epoch ms) when the message carried its own time (JSON), else ``None``; ``units`` (one per
    value: uint64 IPv4 unit addresses, or 128-bit keys of :data:`~dphhh.privacy.unit_cap.UNIT_KEY_DTYPE`
    for a JSON unit field) when the decoder reads privacy-unit keys, else ``None``."""

    values: Any = None
    reason: str | None = None
    event_time: int | None = None
    units: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class DecodedBatch:
    """Many decoded messages: ``reasons[i]`` is ``None`` for a good message; ``counts[i]`` values
    of message ``i`` (0 when bad) follow each other in ``values`` (uint32 array or list of paths),
    in message order; ``event_times[i]`` is the message's own time or -1 (JSON with a time field);
    ``units`` (aligned with ``values``: uint64 unit addresses, or 128-bit keys of
    :data:`~dphhh.privacy.unit_cap.UNIT_KEY_DTYPE` for a JSON unit field) when the decoder reads
    privacy-unit keys;
    ``weights`` (int64, aligned with ``values``, not yet clipped) for weighted flow records;
    ``ok`` (bool per message: ``reasons[i] is None``) when the decoder has it at hand."""

    reasons: list[str | None]
    counts: np.ndarray
    values: Any
    event_times: np.ndarray | None = None
    units: np.ndarray | None = None
    weights: np.ndarray | None = None
    ok: np.ndarray | None = None


@dataclass(frozen=True)
class DecoderOptions:
    """Every option a message format may read (``input.*`` and the privacy unit); a format reads
    the ones it names in :attr:`MessageFormat.reads` and refuses a privacy-unit option it does not
    carry (:meth:`MessageFormat.check_options`)."""

    max_message_bytes: int = 1 << 20
    json_field: str = "ip"
    json_time_field: str | None = None
    unit_field: str | None = None
    path_depth: int = 4
    flow_schema: str = "pmacct"
    flow_key: str = "src"
    flow_weight: str = "records"
    source_units: bool = False
    unit_secret: KeySecret | None = None


class MessageFormat(ABC):
    """One input format of the stream job (docs/ALGORITHMS.md §0.1 e: a message's outcome is its own).

    Subclasses set the class attributes and implement :meth:`decode_many` and
    :meth:`holds_element`; :meth:`decode` (one message) defaults to a batch of one."""

    #: the ``input.format`` value
    name: ClassVar[str]
    #: one line for the reference pages
    summary: ClassVar[str]
    #: every reason :meth:`decode_many` may give (the dead-letter metrics are made of them)
    reasons: ClassVar[tuple[str, ...]]
    #: the hierarchy kinds (``Hierarchy.kind``) its values fit
    hierarchy_kinds: ClassVar[frozenset[str]]
    #: many elements per message, decoded element by element whatever its size (never ``oversized``)
    packed: ClassVar[bool] = False
    #: the ``privacy.unit_key`` kinds it carries — ``"source-ipv4"``, ``"json"`` — each with what
    #: the unit is, for the config's messages
    unit_keys: ClassVar[dict[str, str]] = {}
    #: the format-specific options (fields of :class:`DecoderOptions`, ``input.*`` keys) it reads
    reads: ClassVar[frozenset[str]] = frozenset()
    #: what one message holds, for messages ("flow records")
    noun: ClassVar[str] = "messages"

    def __init__(self, options: DecoderOptions) -> None:
        self.options = options
        self.max_message_bytes = options.max_message_bytes
        #: whether decoded values come with privacy-unit keys
        self.has_units = False
        #: whether decoded values come with weights
        self.weighted = False

    @classmethod
    def check_options(cls, options: DecoderOptions) -> None:
        """Refuse an option this format does not read (``UsageError`` naming the option)."""
        if options.unit_field is not None and "json" not in cls.unit_keys:
            raise UsageError(f"MessageDecoder: unit_field applies to the json format only, not {cls.name!r}")
        if options.source_units and "source-ipv4" not in cls.unit_keys:
            carriers = " and ".join(n for n, c in MESSAGE_FORMATS.items() if "source-ipv4" in c.unit_keys)
            raise UsageError(f"MessageDecoder: source_units applies to the {carriers} formats only, not {cls.name!r}")

    @abstractmethod
    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        """Decode many message values; message for message the outcome each has alone. Never
        raises for bad content."""

    def decode(self, value: bytes | None) -> Decoded:
        """Decode one message value; never raises for bad content."""
        one = self.decode_many([value])
        if one.reasons[0] is not None:
            return Decoded(reason=one.reasons[0])
        first = int(one.event_times[0]) if one.event_times is not None else -1
        return Decoded(values=one.values, event_time=None if first < 0 else first, units=one.units)

    @abstractmethod
    def holds_element(self, value: bytes | None) -> bool:
        """Whether a message this format refused may still hold an element of the run's kind
        (docs/ALGORITHMS.md §0.1 f: only a refused message that holds none is counted in a public
        metric); when in doubt, True."""

    def size_reason(self, value: bytes | None) -> str | None:
        """``empty``, or ``oversized`` for a one-element format's message over ``max_message_bytes``.
        A packed message is never refused for its size: one more element would otherwise drop
        every other element of the message (docs/ALGORITHMS.md §0.1 e)."""
        if not value:
            return "empty"
        if len(value) > self.max_message_bytes and not self.packed:
            return "oversized"
        return None


class TextMessageFormat(MessageFormat):
    """A format of one UTF-8 text per message: the size and UTF-8 checks and the outline of
    :meth:`holds_element` (an empty message holds nothing; an oversized one, not parsed, may)."""

    def message_text(self, value: bytes | None) -> tuple[str | None, str]:
        """(reason, text) of one message: ``empty`` / ``oversized`` (:meth:`size_reason`), then ``invalid_utf8``."""
        reason = self.size_reason(value)
        if reason is not None:
            return reason, ""
        try:
            return None, bytes(value).decode("utf-8")  # type: ignore[arg-type]
        except UnicodeDecodeError:
            return "invalid_utf8", ""

    def holds_element(self, value: bytes | None) -> bool:
        if not value:
            return False
        if len(value) > self.max_message_bytes:
            return True  # not parsed: it may
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:  # unreadable: it may still be somebody's record with an element
            return self.unreadable_may_hold(value)
        return self.text_holds(value, text)

    @abstractmethod
    def unreadable_may_hold(self, value: bytes) -> bool:
        """Whether a message that is not UTF-8 may hold an element (its bytes could hold one)."""

    @abstractmethod
    def text_holds(self, value: bytes, text: str) -> bool:
        """Whether a readable message's text holds an element."""


#: The registered formats by name, in registration order.
MESSAGE_FORMATS: dict[str, type[MessageFormat]] = {}


def register_message_format(cls: type[MessageFormat]) -> type[MessageFormat]:
    """Register ``cls`` under ``cls.name`` (a class decorator); a name is registered once."""
    for attribute in ("name", "summary", "reasons", "hierarchy_kinds"):
        if not hasattr(cls, attribute):
            raise TypeError(f"register_message_format: {cls.__name__} sets no {attribute}")
    if cls.name in MESSAGE_FORMATS and MESSAGE_FORMATS[cls.name] is not cls:
        raise ValueError(f"register_message_format: format {cls.name!r} is already registered")
    MESSAGE_FORMATS[cls.name] = cls
    return cls


def message_format(name: str) -> type[MessageFormat]:
    """The registered format ``name`` (``UsageError`` listing the formats otherwise)."""
    try:
        return MESSAGE_FORMATS[name]
    except (KeyError, TypeError):
        raise UsageError(f"MessageDecoder: format must be one of {', '.join(MESSAGE_FORMATS)}, got {name!r}") from None


def json_object(text: str) -> tuple[str | None, Any]:
    """(``bad_json`` or ``None``, the parsed value) of one message's text."""
    try:
        return None, json.loads(text)
    except (ValueError, RecursionError):
        return "bad_json", None
