"""The job's entry point for ``flink run`` (a session or application cluster, e.g. Kubernetes).

    flink run -m HOST:8081 -pyexec PYTHON -pym dphhh.stream.flink_entry --config dphhh.toml [--set k=v ...]

It builds the same pipeline as ``dphhh run`` (:func:`dphhh.stream.job.build_pipeline`) in the
environment ``flink run`` provides, adds the job's settings (checkpoints, Python executable,
metrics filter) and its jars (Kafka connector, dphhh's operator jar, and PyFlink's Python runtime
jar, which Flink distributions keep in ``opt/``), and executes it. Paths in
the configuration are as the cluster's workers see them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .config import load_config
from .job import build_pipeline, flink_configuration, job_jars

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Build and execute the job (blocks until a bounded job ends; ``flink run -d`` detaches)."""
    from pyflink.datastream import StreamExecutionEnvironment

    parser = argparse.ArgumentParser(prog="dphhh.stream.flink_entry", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="TOML configuration (see deploy/dphhh.toml)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--run-dir", default="var/runs/flink-run", help="folder for the job's run files")
    args = parser.parse_args(argv)
    os.umask(0o077)  # job state holds raw data (docs/explanation/guarantees.md "Who may read what")
    cfg = load_config(args.config, overrides=args.set)
    if cfg.flink.remote:
        raise SystemExit(
            "dphhh.stream.flink_entry: flink.remote is for `dphhh run`; `flink run -m` chooses the cluster"
        )
    import time

    from .kafka_setup import ensure_job_topics
    from .ledger import private_dir, resolve_origin

    ensure_job_topics(cfg)  # the job's sinks need their topics to exist; a live input records arrival times
    resolve_origin(cfg, int(time.time() * 1000))  # the public schedule's origin, stored in the ledger
    run_dir = private_dir(Path(args.run_dir).resolve())
    private_dir(cfg.checkpoint_path())  # exact sketches, buffered elements and unit counts
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = flink_configuration(cfg, run_dir)
    conf.set_string("python.executable", sys.executable)
    env.configure(conf)
    env.add_jars(*("file://" + str(j) for j in job_jars(python_runtime=True)))
    build_pipeline(env, cfg, run_dir)
    env.execute("dphhh")


if __name__ == "__main__":
    main()
