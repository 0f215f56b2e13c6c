"""The ``dphhh`` command line: one module per command (docs/ALGORITHMS.md §0.1 for what each may print).

* :mod:`dphhh.stream.cli.app` — the parser, the dispatch and how errors are shown (:func:`main`);
* :mod:`dphhh.stream.cli.options` — option groups shared by several commands (input, privacy, Kafka),
  ``--tau`` as a count or a share;
* :mod:`dphhh.stream.cli.output` — the one formatter: ``--format text|json|csv`` for reports, exact
  results, snapshots and plans (:func:`format_report`);
* :mod:`dphhh.stream.cli.memory` — memory guards: work whose allocation follows from public parameters
  is refused before it starts when it does not fit ``--max-memory``;

Batch commands (over a file, no Kafka, no Flink):

* :mod:`dphhh.stream.cli.hhh` — ``dphhh hhh``: one private report over a whole file;
* :mod:`dphhh.stream.cli.exact` — ``dphhh exact``: the exact, NON-PRIVATE HHH, for evaluation;
* :mod:`dphhh.stream.cli.snapshot` — ``dphhh snapshot hhh|inftda|ahead|lue``: the offline modules;
* :mod:`dphhh.stream.cli.plan` — ``dphhh plan``: what a setting can detect, from public inputs only;

Stream commands:

* :mod:`dphhh.stream.cli.demo` — ``dphhh demo``: the stream job on a sample stream (``--batch``: ``hhh``
  on the bundled capture);
* :mod:`dphhh.stream.cli.run` — ``dphhh run``: the stream job until Ctrl-C;
* :mod:`dphhh.stream.cli.produce` — ``dphhh produce``: publish addresses to a topic;
* :mod:`dphhh.stream.cli.reports` — ``dphhh reports``: print published reports;
* :mod:`dphhh.stream.cli.dashboard` — ``dphhh dashboard``: a live web page of the reports.
"""

from .app import COMMANDS, build_parser, main, user_message
from .output import FORMATS, format_exact, format_report, render

__all__ = ["main", "build_parser", "COMMANDS", "user_message", "FORMATS", "format_report", "format_exact", "render"]
