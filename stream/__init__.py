"""The stream engine, the batch job and the ``dphhh`` command line.

``import dphhh.stream`` imports nothing else: the few names re-exported here are resolved lazily, on
first use (PEP 562), and none of them pulls in PyFlink or the Kafka client. The Flink job itself
(:mod:`dphhh.stream.job`, :mod:`dphhh.stream.operators`) needs PyFlink and is imported only by whoever runs it.

Modules:

* :mod:`dphhh.stream.cli` — the ``dphhh`` command line, one module per command (``stream.cli.hhh``,
  ``stream.cli.exact``, ``stream.cli.snapshot``, ``stream.cli.plan``, ``stream.cli.run`` …) and
  the one formatter of results (``stream.cli.output``);
* :mod:`dphhh.stream.batch` — the batch job: one window = the whole input file (``dphhh hhh`` and
  ``dphhh exact``; :func:`batch_report`, :func:`exact_report`);
* :mod:`dphhh.stream.config` — the job's configuration: one TOML file, environment and flag overrides
  (:func:`load_config`, :class:`JobConfig`);
* :mod:`dphhh.stream.console` — status lines for the person running ``dphhh`` (standard error, public facts only);
* :mod:`dphhh.stream.config_sections` — one frozen dataclass per configuration section, each checking
  its keys and building what it configures (the schedule, the privacy unit, the parameters, the guard);
* :mod:`dphhh.stream.job` — the Flink job graph and its submission (embedded MiniCluster by default;
  imports PyFlink);
* :mod:`dphhh.stream.operators` — the job's operators: thin PyFlink adapters around plain logic;
* :mod:`dphhh.stream.wire` — the wire formats between operators: sketch and unit payloads, sketch state,
  dead-letter records, stamped values (plain logic, no Flink);
* :mod:`dphhh.stream.flink_entry` — the job's entry point for ``flink run`` (session or application
  cluster);
* :mod:`dphhh.stream.decode_batch` — what the ``decode`` operator does with one batch of messages (no
  Flink);
* :mod:`dphhh.stream.message_batch` — the batch records of the Java ``MessageBatcher`` operator, read in
  Python;
* :mod:`dphhh.stream.assembler` — the release operator's logic: one window's sketch releases → one
  report, exactly once;
* :mod:`dphhh.stream.publisher` — publishing each report at its public publication time, on every
  surface at once (docs/ALGORITHMS.md §0.1 g);
* :mod:`dphhh.stream.epochs` — what the sketch and cap operators hold per window: arrival epochs applied
  in canonical order (docs/ALGORITHMS.md §0 "Canonical order");
* :mod:`dphhh.stream.schedule` — the public release schedule and the per-element acceptance rule
  (:class:`ReleaseSchedule`);
* :mod:`dphhh.stream.clock` — the live job's clock records on its own input partitions;
* :mod:`dphhh.stream.ledger` — the durable release ledger: a window's report is computed and published
  once;
* :mod:`dphhh.stream.runner` — the job's life from the CLI (``dphhh run``): start, watch, print its
  reports, stop;
* :mod:`dphhh.stream.kafka_setup` — the broker reachable (or started locally) and the job's topics
  created and checked before a start;
* :mod:`dphhh.stream.demo` — ``dphhh demo``: the sample stream replayed on the embedded MiniCluster;
* :mod:`dphhh.stream.sample_traffic` — the demo's sample stream and ``dphhh run --feed``'s feeder;
* :mod:`dphhh.stream.broker` — the local development broker as the CLI and the tests see it;
* :mod:`dphhh.stream.reports_stall` — noticing readers of the reports topic held back by an open
  transaction;
* :mod:`dphhh.stream.report_metrics` — Prometheus metrics of the published reports;
* :mod:`dphhh.stream.reference` — the configuration and metrics reference pages and the docs site, generated from the code;
* :mod:`dphhh.stream.metrics_catalog` — the catalogue of exported metrics (dashboards and their tests);
* :mod:`dphhh.stream.dashboard` — ``dphhh dashboard``, a small live web page of the latest reports;
* :mod:`dphhh.stream.errors` — errors the stream commands report to the user (:class:`JobFailed`).
* :mod:`dphhh.stream.paths` — where the project's files are: the checkout, the bundled captures
  (``$DPHHH_DATA`` overrides), a capture by name.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule it is re-exported from (imported on first access only)
_LAZY = {
    "batch_report": "batch",
    "exact_report": "batch",
    "Weighting": "batch",
    "JobConfig": "config",
    "ConfigError": "config",
    "load_config": "config",
    "ReleaseSchedule": "schedule",
    "JobFailed": "errors",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
