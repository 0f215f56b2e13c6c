"""The Flink job graph of the stream engine and its submission (embedded MiniCluster by default).

Kafka source (record timestamp = the broker's log-append time in live mode; watermark = the
broker's clock from the job's clock records, or none in a replay) → ``batch`` (Java: consecutive
messages packed into one record, flushed before every watermark and barrier) → ``decode`` → key by
partition → ``sketch`` (epochs in canonical order) → (with one start record) key by one constant →
``release``, which publishes each report itself at its public time — ledger, reports file, and the
reports topic in a Kafka transaction of its own (:mod:`dphhh.stream.publisher`); the dead-letter side
output of ``decode`` → record timestamps (Java) → Kafka dead-letter sink (exactly once,
transactional). Checkpoints make state and Kafka offsets exactly once; the release ledger makes each
window's report computed once and published identically. The release schedule is public
(:mod:`dphhh.stream.schedule`).

PyFlink starts a JVM ("gateway") on first use; :func:`prepare_gateway` must run before any PyFlink
object exists: it points ``FLINK_LIB_DIR`` at a lib folder (:func:`gateway_lib_dir`: PyFlink's
jars, the Prometheus reporter, which a MiniCluster only loads from the gateway's classpath, and the
job's jars, so that every gateway thread finds their classes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from .config import JobConfig
from .ledger import private_dir
from .operators import (
    STEP_IDS,
    CapOperator,
    DecodeOperator,
    ReleaseOperator,
    SketchOperator,
    dead_letter_tag,
    message_decoder_of,
)
from .paths import deploy_dir, jars_dir, script_env

__all__ = [
    "METRIC_INCLUDES",
    "latest_checkpoint",
    "ensure_jars",
    "ensure_operator_jar",
    "gateway_lib_dir",
    "job_jars",
    "prepare_gateway",
    "flink_configuration",
    "build_pipeline",
    "submit",
]

#: Flink's Prometheus reporter exports only these metrics (``filter.includes``; docs/ALGORITHMS.md §0.1 f): dphhh's
#: own operator counters (the public schedule's windows and the dead letters of records that are not
#: elements; :mod:`dphhh.stream.metrics_catalog`) and the job's restart count.
#: Everything else Flink measures — records, bytes, offsets, lag, watermarks, busy and back-pressure
#: time, heap, checkpoint sizes and durations — tracks the data and stays inside.
METRIC_INCLUDES = ("taskmanager.job.task.operator.dphhh.*:*", "jobmanager.job:numRestarts")


def ensure_jars() -> list[Path]:
    """The Kafka connector jar(s); fetched from Maven Central by deploy/fetch-jars.sh if missing
    (into :func:`dphhh.stream.paths.jars_dir`)."""
    jars = jars_dir() / "flink"
    found = sorted(jars.glob("flink-sql-connector-kafka-*.jar"))
    if not found:
        subprocess.run(["bash", str(deploy_dir() / "fetch-jars.sh")], check=True, stdout=sys.stderr, env=script_env())
        found = sorted(jars.glob("flink-sql-connector-kafka-*.jar"))
    if not found:
        raise RuntimeError(f"job: no Kafka connector jar in {jars} after deploy/fetch-jars.sh")
    return found


def ensure_operator_jar() -> Path:
    """dphhh's own Java operators (deploy/java/), compiled once per source version with ``javac``
    against PyFlink's bundled Flink jars, into :func:`dphhh.stream.paths.jars_dir` (a user cache for an
    installed dphhh); returns the jar."""
    import hashlib
    import shutil
    import tempfile

    import pyflink

    sources = sorted((deploy_dir() / "java").rglob("*.java"))
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    jar = jars_dir() / "dphhh" / f"dphhh-operators-{digest}.jar"
    if jar.exists():
        return jar
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar_tool is None:
        raise RuntimeError(
            "job: 'javac' and 'jar' (a JDK 17) are needed to build deploy/java/; "
            "Debian: apt-get install openjdk-17-jdk-headless"
        )
    flink_lib = Path(pyflink.__file__).resolve().parent / "lib"
    classpath = ":".join(str(p) for p in sorted(flink_lib.glob("flink-dist-*.jar")))
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        built = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(classes), *map(str, sources)],
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            raise RuntimeError(f"job: compiling deploy/java/ failed:\n{built.stderr.strip()}")
        staged = Path(tmp) / jar.name
        subprocess.run([jar_tool, "cf", str(staged), "-C", str(classes), "."], check=True)
        for old in jar.parent.glob("dphhh-operators-*.jar"):
            if old != jar:  # (a concurrent build of the same sources replaces it atomically below)
                old.unlink(missing_ok=True)
        staged.replace(jar)
    return jar


def job_jars(*, python_runtime: bool = False) -> list[Path]:
    """The jars the job ships: the Kafka connector and dphhh's operator jar, plus PyFlink's Python
    runtime jar (kept in ``opt/`` of Flink distributions) for a cluster that lacks it."""
    jars = [*ensure_jars(), ensure_operator_jar()]
    if python_runtime:
        import pyflink

        jars += sorted((Path(pyflink.__file__).resolve().parent / "opt").glob("flink-python-*.jar"))
    return jars


def gateway_lib_dir(extra_jars: Iterable[Path] = ()) -> Path:
    """The gateway JVM's lib folder (``FLINK_LIB_DIR``): symlinks to PyFlink's jars, the Prometheus
    reporter (a MiniCluster loads reporters only from the gateway's class path), the job's jars and
    ``extra_jars``, in a folder of the cache named by that list — every run of this installation
    then starts its JVM with the same class path, which a class-data archive requires (tests).

    The job's own jars are on the class path because PyFlink adds ``pipeline.jars`` only to the
    context class loader of the one gateway thread that served that call, and py4j serves a call on
    another gateway thread whenever two Python threads used the gateway at once (a finaliser run by
    another thread's garbage collection is enough): ``io.dphhh.flink.*`` "could not be found" at
    random, a job start that failed with load, not the input."""
    import hashlib
    import shutil
    import tempfile

    import pyflink

    home = Path(pyflink.__file__).resolve().parent
    reporter = sorted(home.glob("plugins/metrics-prometheus/*.jar")) or sorted(
        (jars_dir() / "flink").glob("flink-metrics-prometheus-*.jar")
    )
    jars = [*sorted(home.glob("lib/*.jar")), *reporter[:1], *job_jars(), *extra_jars]
    listing = "\n".join(f"{jar.name} {jar.resolve()}" for jar in jars)
    lib = jars_dir() / "gateway-lib" / hashlib.sha1(listing.encode()).hexdigest()[:12]
    if lib.is_dir():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=lib.parent))
    for jar in jars:
        (staged / jar.name).symlink_to(jar.resolve())
    try:
        staged.rename(lib)  # atomic; a concurrent run may have made the same folder first
    except OSError:
        shutil.rmtree(staged)
    return lib


def prepare_gateway(run_dir: Path, hidden_env: Iterable[str] = (), extra_jars: Iterable[Path] = ()) -> None:
    """Environment for PyFlink's JVM; call before creating any PyFlink object in this process.
    The environment variables ``hidden_env`` (secrets, e.g. ``env:NAME`` Kafka options) are kept
    from the JVM and its Python workers (Beam logs a worker's whole environment); ``extra_jars`` go
    on its class path (:func:`gateway_lib_dir`)."""
    import pyflink

    home = Path(pyflink.__file__).resolve().parent
    lib = gateway_lib_dir(extra_jars)
    os.environ["FLINK_HOME"] = str(home)
    os.environ["FLINK_LIB_DIR"] = str(lib)
    os.environ["FLINK_LOG_DIR"] = str(private_dir(run_dir / "log"))
    # Kafka offsets and state sizes stay out of the log: see deploy/flink/log4j-no-raw-counts.properties
    log4j = run_dir / "log4j.properties"
    log4j.touch(mode=0o600)
    log4j.write_text(
        (home / "conf" / "log4j-cli.properties").read_text()
        + "\n"
        + (deploy_dir() / "flink" / "log4j-no-raw-counts.properties").read_text()
    )
    os.environ["LOG4J_PROPERTIES"] = str(log4j)
    # Python operators run in worker processes started by the task managers, as on a cluster, not
    # in threads of this client process (PyFlink's default on a MiniCluster, "loopback"): the job's
    # Python work then uses more than one core, a worker can fail (and be restarted) on its own, and
    # the terminal's Ctrl-C reaches this process's clean cancel, not the workers' gRPC threads.
    os.environ["_python_worker_execution_mode"] = "process"
    _launch_gateway_logging_to(run_dir / "log" / "gateway.out", hidden_env)


def _launch_gateway_logging_to(path: Path, hidden_env: Iterable[str] = ()) -> None:
    """Start PyFlink's JVM with its stdout/stderr (and so its Python workers') in ``path``: the
    terminal keeps dphhh's own messages only (e.g. no gRPC tracebacks of workers torn down by a
    cancel). Job failures still reach this process through the gateway."""
    from pyflink.java_gateway import get_gateway

    private_dir(path.parent)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    hidden = {name: os.environ.pop(name) for name in hidden_env if name in os.environ}
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        get_gateway()
    finally:
        os.environ.update(hidden)
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def latest_checkpoint(cfg: JobConfig) -> Path | None:
    """The newest complete retained checkpoint of this deployment (``chk-N`` holding ``_metadata``), or
    the final savepoint of a stopped live schedule (``savepoints/savepoint-…``) if that is newer."""
    found = []
    for meta in [
        *cfg.checkpoint_path().glob("*/chk-*/_metadata"),
        *cfg.checkpoint_path().glob("savepoints/*/_metadata"),
    ]:
        try:
            found.append((meta.stat().st_mtime, meta.parent.name, meta.parent))
        except OSError:
            continue
    return max(found)[2] if found else None


def flink_configuration(cfg: JobConfig, run_dir: Path, resume_from: Path | None = None):
    """The Flink configuration (Flink 2.2 keys) of the job; ``resume_from``: a checkpoint to restore."""
    from pyflink.common import Configuration

    f = cfg.flink
    conf = Configuration()
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.execution-mode", "process")
    conf.set_string("pipeline.jars", ";".join("file://" + str(j) for j in job_jars()))
    conf.set_string("pipeline.name", "dphhh")
    conf.set_string("parallelism.default", str(f.parallelism))
    conf.set_string("execution.runtime-mode", "STREAMING")
    conf.set_string("execution.checkpointing.interval", f"{f.checkpoint_interval_ms} ms")
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("execution.checkpointing.dir", "file://" + str(cfg.checkpoint_path()))
    # the newest checkpoint outlives a cancel (Ctrl-C) or a failure, so that the next run resumes from it
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    # a checkpoint that fails for a while (e.g. the broker is away) does not fail the job by itself
    conf.set_string("execution.checkpointing.tolerable-failed-checkpoints", "5")
    if resume_from is not None:
        conf.set_string("execution.state-recovery.path", "file://" + str(resume_from))
    # failures (a worker killed, the broker away) restart from the last checkpoint with growing
    # delays (1 s, 2 s, 4 s … 60 s): no tight crash loop; after restart_attempts failures in a row
    # (without 10 minutes of calm in between) the job gives up
    conf.set_string("restart-strategy.type", "exponential-delay")
    conf.set_string("restart-strategy.exponential-delay.initial-backoff", "1 s")
    conf.set_string("restart-strategy.exponential-delay.max-backoff", "60 s")
    conf.set_string("restart-strategy.exponential-delay.backoff-multiplier", "2.0")
    conf.set_string("restart-strategy.exponential-delay.reset-backoff-threshold", "10 min")
    conf.set_string("restart-strategy.exponential-delay.jitter-factor", "0.1")
    conf.set_string("restart-strategy.exponential-delay.attempts-before-reset-backoff", str(f.restart_attempts))
    conf.set_string(
        "metrics.reporter.prom.factory.class", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
    )
    conf.set_string("metrics.reporter.prom.port", f.prometheus_port)
    # an allow-list: only catalogued, data-independent metrics leave (see METRIC_INCLUDES)
    conf.set_string("metrics.reporter.prom.filter.includes", ";".join(METRIC_INCLUDES))
    conf.set_string("python.fn-execution.bundle.size", "1000")
    conf.set_string("python.fn-execution.bundle.time", "1000")
    if f.remote:
        host, _, port = f.remote.rpartition(":")
        conf.set_string("execution.target", "remote")
        conf.set_string("rest.address", host)
        conf.set_string("rest.port", port)
    else:
        # the embedded MiniCluster's REST endpoint (a random port) shows record counts, offsets and
        # state sizes, which track the data: loopback only (docs/explanation/guarantees.md
        # "Who may read what")
        conf.set_string("rest.bind-address", "127.0.0.1")
        conf.set_string("rest.address", "127.0.0.1")
    return conf


def _kafka_properties(builder, cfg: JobConfig):
    from dphhh.connectors.kafka_io import java_client_properties

    for key, value in java_client_properties(cfg.kafka_client_options()).items():
        builder = builder.set_property(key, value)
    return builder


def source_parallelism(cfg: JobConfig) -> int:
    """The Kafka source's subtasks: ``flink.parallelism``, but no more than the input topic has
    partitions — a live job's watermark is the minimum over its source subtasks, and one without a
    partition never advances (it would hold every release back)."""
    from dphhh.connectors.kafka_io import topic_settings

    found = topic_settings(cfg.kafka_client_options(), cfg.kafka.input_topic, [])["partitions"]
    partitions = int(found) if found else cfg.flink.parallelism
    return max(1, min(cfg.flink.parallelism, partitions))


def replay_clock(cfg: JobConfig) -> bool:
    """Whether a replay's watermark follows its input log's clock records (docs/ALGORITHMS.md §0
    "Canonical order", "When"): only when the input topic stores the broker's log-append times, so
    that a partition's records and clock records are in the order of one public clock (a log a live
    deployment ingested). The replay then applies an epoch once every partition has shown a clock
    record past its end — during the input, not at its end — and still releases every window at the
    end of input. A topic whose producers set the timestamps (CreateTime) has no order a replay may
    rely on: its epochs are applied at the end of input."""
    from dphhh.connectors.kafka_io import topic_settings

    from .schedule import REPLAY

    if cfg.mode != REPLAY:
        return False
    key = "message.timestamp.type"
    return topic_settings(cfg.kafka_client_options(), cfg.kafka.input_topic, [key])[key] == "LogAppendTime"


def _batched(records, cfg: JobConfig):
    """``records`` (message values) packed into batch records by the Java ``MessageBatcher``; with
    ``input.format = "flow-json"`` and ``flink.batch_parse_flows`` (the default) its
    ``FlowRecordParser`` reads the usual flow records into columns (stream/message_batch.py)."""
    from pyflink.common import Types
    from pyflink.datastream.data_stream import DataStream
    from pyflink.java_gateway import get_gateway

    f = cfg.flink
    raw = Types.PRIMITIVE_ARRAY(Types.BYTE()).get_java_type_info()
    gateway = get_gateway()
    parser = None
    settings = message_decoder_of(cfg).jvm_flow_parser() if f.batch_parse_flows else None
    if settings is not None:  # flow records read into columns on the Java side (DPB2 batches)
        schema, addresses, weight, max_counter, max_record_bytes, time_fields = settings
        names = gateway.new_array(gateway.jvm.String, len(time_fields))
        for j, name in enumerate(time_fields):
            names[j] = name
        parser = gateway.jvm.io.dphhh.flink.FlowRecordParser(
            schema, addresses, weight, max_counter, max_record_bytes, names
        )
    batcher = gateway.jvm.io.dphhh.flink.MessageBatcher(
        f.batch_max_messages,
        f.batch_max_bytes,
        f.batch_max_delay_ms,
        cfg.testing.checkpoint_delay_ms,
        parser,
    )
    return DataStream(records._j_data_stream.transform(STEP_IDS["batch"], raw, batcher)).uid(STEP_IDS["batch"])


def _clock_watermarks(live: bool = True):
    """The watermark strategy of a live job (and of a replay of a log with clock records): the
    broker's clock, read from the job's clock records (Java ``ClockWatermarks``, one generator per
    input partition; see :mod:`dphhh.stream.clock`) — emitted at every clock record (live), or the newest
    at each periodic emission (a replay, which reads many a second)."""
    from pyflink.common import WatermarkStrategy
    from pyflink.java_gateway import get_gateway

    return WatermarkStrategy(get_gateway().jvm.io.dphhh.flink.ClockWatermarks(live))


def _with_record_timestamps(stream, step: str):
    """``stream`` of :func:`dphhh.stream.operators.stamp` values → the values, each with its own Kafka
    record timestamp (Java ``ScheduledTimestamps``): a report's is its scheduled release time."""
    from pyflink.common import Types
    from pyflink.datastream.data_stream import DataStream
    from pyflink.java_gateway import get_gateway

    raw = Types.PRIMITIVE_ARRAY(Types.BYTE())
    op = get_gateway().jvm.io.dphhh.flink.ScheduledTimestamps()
    uid = f"{step}-timestamps"
    return DataStream(stream._j_data_stream.transform(uid, raw.get_java_type_info(), op)).uid(uid)


def build_pipeline(env, cfg: JobConfig, run_dir: Path) -> None:
    """Add the job's sources, operators and sinks to ``env`` (the schedule's origin must be stored
    already, see :func:`dphhh.stream.ledger.resolve_origin`)."""
    from pyflink.common import ByteArraySchema, Types, WatermarkStrategy
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import (
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from .ledger import job_schedule
    from .operators import START
    from .schedule import LIVE

    k = cfg.kafka
    schedule = job_schedule(cfg)
    live = schedule.mode == LIVE
    values = {s: dict(v) for s, v in cfg.values.items()}
    # Workers may run elsewhere (a cluster's TaskManagers): relative output paths mean "relative to
    # where dphhh was started". On a multi-host cluster they must be on storage every worker shares.
    for section, key in (("output", "ledger_dir"), ("output", "reports_file"), ("testing", "debug_sketch_dir")):
        if values[section][key]:
            values[section][key] = str(Path(values[section][key]).resolve())
    raw = Types.PRIMITIVE_ARRAY(Types.BYTE())
    starts = {
        # live: the first record appended at or after the schedule's origin; replay: the whole log
        "auto": KafkaOffsetsInitializer.timestamp(schedule.origin_ms) if live else KafkaOffsetsInitializer.earliest(),
        "earliest": KafkaOffsetsInitializer.earliest(),
        "latest": KafkaOffsetsInitializer.latest(),
        "committed": KafkaOffsetsInitializer.committed_offsets(),
    }
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(k.bootstrap)
        .set_topics(k.input_topic)
        .set_group_id(k.group_id)
        .set_starting_offsets(starts[k.start])
        .set_value_only_deserializer(ByteArraySchema())
    )
    if not live:  # a replay reads the log as it is at start, then releases its whole range
        source = source.set_bounded(KafkaOffsetsInitializer.latest())
    source = _kafka_properties(source, cfg).build()
    # no watermark is ever made from the data: the broker's clock (live, and a replay of a log with
    # the broker's times, which still releases at its end) or end of input (other replays)
    watermarks = _clock_watermarks(live) if live or replay_clock(cfg) else WatermarkStrategy.no_watermarks()
    records = env.from_source(source, watermarks, STEP_IDS["source"]).uid(STEP_IDS["source"])
    readers = source_parallelism(cfg)
    if readers < cfg.flink.parallelism:  # a source subtask without a partition would hold the watermark back
        records = records.set_parallelism(readers)

    batched = _batched(records, cfg).set_parallelism(readers)
    # (partition or shard, window, arrival epoch, payload, labels); ticks carry the clock's window
    keyed_batch = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), raw, raw])
    batches = (
        batched.process(DecodeOperator(values, schedule.origin_ms), output_type=keyed_batch)
        .name(STEP_IDS["decode"])
        .uid(STEP_IDS["decode"])
    )
    dead = batches.get_side_output(dead_letter_tag())
    to_sketches = batches
    if cfg.unit.kind == "user":  # the per-unit cap sits between decode and the sketches
        to_sketches = (
            batches.key_by(lambda r: r[0], key_type=Types.INT())
            .process(CapOperator(values, schedule.origin_ms), output_type=keyed_batch)
            .name(STEP_IDS["cap"])
            .uid(STEP_IDS["cap"])
        )
    releases = (
        to_sketches.key_by(lambda r: r[0], key_type=Types.INT())
        .process(SketchOperator(values, schedule.origin_ms), output_type=Types.TUPLE([Types.LONG(), raw]))
        .name(STEP_IDS["sketch"])
        .uid(STEP_IDS["sketch"])
    )
    # one start record arms the release operator's first timer, whether or not any element comes (a
    # parallel source, so that its edges keep the job's parallelism)
    start = (
        env.from_source(NumberSequenceSource(START, START), WatermarkStrategy.no_watermarks(), "start")
        .uid("start")
        .map(lambda n: (n, b""), output_type=Types.TUPLE([Types.LONG(), raw]))
        .uid("start-record")
    )
    reports = (
        releases.union(start)
        .key_by(lambda r: 0, key_type=Types.INT())
        .process(ReleaseOperator(values, schedule.origin_ms, str(run_dir), cfg.kafka_client_options()), output_type=raw)
        .name(STEP_IDS["release"])
        .uid(STEP_IDS["release"])
        .set_parallelism(1)
    )

    def sink(topic: str, step: str):
        builder = (
            KafkaSink.builder()
            .set_bootstrap_servers(k.bootstrap)
            .set_record_serializer(
                KafkaRecordSerializationSchema.builder()
                .set_topic(topic)
                .set_value_serialization_schema(ByteArraySchema())
                .build()
            )
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(f"{k.group_id}-{step}")
            .set_property("transaction.timeout.ms", str(15 * 60 * 1000))
        )
        return _kafka_properties(builder, cfg).build()

    # the release operator publishes its reports itself, at their publication time (stream.publisher):
    # its output stream (the stamped reports) only ends in a discarding sink
    reports.sink_to(_discarding_sink()).name(STEP_IDS["reports"]).uid(STEP_IDS["reports"]).set_parallelism(1)
    _with_record_timestamps(dead, STEP_IDS["dead_letter"]).sink_to(
        sink(k.dead_letter_topic, STEP_IDS["dead_letter"])
    ).name(STEP_IDS["dead_letter"]).uid(STEP_IDS["dead_letter"])


def _discarding_sink():
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    return Sink(get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink())


def submit(cfg: JobConfig, run_dir: Path, resume_from: Path | None = None):
    """Prepare the gateway, build the job and submit it (restoring ``resume_from``, a checkpoint,
    if given); returns the PyFlink JobClient."""
    from pyflink.datastream import StreamExecutionEnvironment

    private_dir(run_dir)
    private_dir(cfg.checkpoint_path())
    prepare_gateway(run_dir, [str(v)[4:] for v in cfg.kafka.extra.values() if str(v).startswith("env:")])
    conf = flink_configuration(cfg, run_dir, resume_from)
    if cfg.flink.remote:
        env = _remote_environment(cfg, conf)
    else:
        env = StreamExecutionEnvironment.get_execution_environment(conf)
    build_pipeline(env, cfg, run_dir)
    return env.execute_async("dphhh")


def _remote_environment(cfg: JobConfig, conf):
    """An environment that submits to the JobManager at ``flink.remote`` (host:port of its REST
    endpoint), shipping the connector, dphhh's operator jar and PyFlink's Python runtime jar."""
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    host, _, port = cfg.flink.remote.rpartition(":")
    jars = job_jars(python_runtime=True)
    gateway = get_gateway()
    j_jars = gateway.new_array(gateway.jvm.String, len(jars))
    for i, jar in enumerate(jars):
        j_jars[i] = str(jar)
    j_env = gateway.jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment.createRemoteEnvironment(
        host, int(port), conf._j_configuration, j_jars
    )
    return StreamExecutionEnvironment(j_env)
