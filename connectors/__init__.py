"""Input and output connectors: file readers, message decoders, Kafka helpers, the report file.

Readers and decoders never raise on a bad record: they skip it and count the skip by reason in a
:class:`SkipCounter` (never its content). Addresses come out as numpy ``uint32`` host integers
(``1.2.3.4`` → ``0x01020304``), in input order, in chunks.

Modules:

* :mod:`dphhh.connectors.files` — input files of the batch command: :func:`open_input` checks a file
  and its format once and returns an :class:`InputFile` whose iterators stream the records
  (:func:`detect_format` tells a capture from text by its magic number);
* :mod:`dphhh.connectors.pcap` — source IPv4 addresses from classic pcap and pcapng captures, pure
  Python + numpy (:func:`iter_capture_sources`, :func:`read_capture_sources`, …);
* :mod:`dphhh.connectors.spool` — standard input (``--input -``) and gzip files as ordinary input files
  (:func:`spooled_input`);
* :mod:`dphhh.connectors.text` — text input, one record per line (:func:`iter_text_lines`), and the
  vectorised parsers :func:`parse_ipv4`, :func:`parse_ipv6`, :func:`parse_paths`;
* :mod:`dphhh.connectors.flow_json` — flow records as collectors publish them (pmacct, goflow2),
  decoded in batches (:class:`FlowJsonDecoder`, :func:`iter_flow_file`);
* :mod:`dphhh.connectors.messages` — the stream job's input formats, one class each, registered by
  name (:data:`MESSAGE_FORMATS`, :func:`register_message_format`);
* :mod:`dphhh.connectors.decode` — :class:`MessageDecoder`, the decoder of Kafka message values of
  one registered format;
* :mod:`dphhh.connectors.text_records` — how a text line becomes a value of each hierarchy kind
  (:class:`TextRecords`, registered by kind: the batch commands' text files);
* :mod:`dphhh.connectors.snapshot` — snapshot inputs of the offline modules, read whole into arrays
  (:func:`read_snapshot`: text, pcap/pcapng, csv, JSON lines);
* :mod:`dphhh.connectors.skips` — counting skipped records by reason, and which counts may be shown;
* :mod:`dphhh.connectors.report_sink` — the JSON-lines report file, one line per window, written once;
* :mod:`dphhh.connectors.synthetic` — seeded synthetic address streams with planted heavy prefixes;
* :mod:`dphhh.connectors.kafka_io` — Kafka helpers on kafka-python (topic admin, a packed-batch
  producer, report readers). **Not** re-exported: it imports the Kafka client, so
  ``import dphhh.connectors`` stays free of it; import ``dphhh.connectors.kafka_io`` explicitly.
"""

from .decode import FORMATS, Decoded, DecodedBatch, MessageDecoder
from .files import INPUT_FORMATS, InputFile, detect_format, open_input
from .flow_json import FlowBatch, FlowColumns, FlowJsonDecoder, iter_flow_file, split_json_lines
from .messages import MESSAGE_FORMATS, MessageFormat, register_message_format
from .pcap import (
    capture_format,
    iter_capture_sources,
    iter_capture_sources_with_lengths,
    read_capture_sources,
    read_pcap_sources,
    read_pcapng_sources,
)
from .report_sink import JsonLinesReportFile, ReportSinkError
from .skips import NoReadableInput, SkipCounter
from .snapshot import SNAPSHOT_FORMATS, SnapshotValues, read_snapshot, snapshot_format
from .spool import STDIN, spooled_input
from .synthetic import HEAVY_PREFIXES, synthetic_addresses
from .text import MAX_LINE_BYTES, iter_text_lines, parse_ipv4, parse_ipv4_each, parse_ipv6, parse_paths

__all__ = [
    # batch-command input files
    "INPUT_FORMATS",
    "InputFile",
    "detect_format",
    "open_input",
    "STDIN",
    "spooled_input",
    # packet captures
    "capture_format",
    "iter_capture_sources",
    "iter_capture_sources_with_lengths",
    "read_capture_sources",
    "read_pcap_sources",
    "read_pcapng_sources",
    # text
    "MAX_LINE_BYTES",
    "iter_text_lines",
    "parse_ipv4",
    "parse_ipv4_each",
    "parse_ipv6",
    "parse_paths",
    # flow records
    "FlowJsonDecoder",
    "FlowBatch",
    "FlowColumns",
    "iter_flow_file",
    "split_json_lines",
    # Kafka message decoders
    "FORMATS",
    "MESSAGE_FORMATS",
    "MessageFormat",
    "register_message_format",
    "MessageDecoder",
    "Decoded",
    "DecodedBatch",
    # snapshots
    "SNAPSHOT_FORMATS",
    "SnapshotValues",
    "read_snapshot",
    "snapshot_format",
    # skips, report file, synthetic data
    "SkipCounter",
    "NoReadableInput",
    "JsonLinesReportFile",
    "ReportSinkError",
    "synthetic_addresses",
    "HEAVY_PREFIXES",
]
