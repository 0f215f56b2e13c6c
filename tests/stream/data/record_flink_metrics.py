"""Record the identifiers of every metric a real dphhh job registers in Flink (a developer tool).

Runs the live job in this process (embedded MiniCluster) with Flink's JMX reporter and no filter,
feeds it one address per message (text-ipv4) and a bad record for a while, then lists every metric
the MiniCluster registered — its logical scope, name and type, read from the JMX domains
``org.apache.flink.<scope>.<name>`` — into ``flink_metric_identifiers.txt`` beside this script.
``tests/stream/test_metric_filter.py`` applies Flink's own reporter filter to that list.

    .venv/bin/python tests/stream/data/record_flink_metrics.py      # needs the local broker (started if down)

Re-record after a Flink upgrade or a change to the job graph.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

TYPES = {"JmxCounter": "counter", "JmxGauge": "gauge", "JmxMeter": "meter", "JmxHistogram": "histogram"}


def main() -> None:
    import pyflink

    from dphhh.connectors.kafka_io import PackedProducer
    from dphhh.stream.config import load_config
    from dphhh.stream.job import build_pipeline, flink_configuration, prepare_gateway
    from dphhh.stream.kafka_setup import prepare_kafka
    from dphhh.stream.ledger import resolve_origin

    name = f"record-metrics-{uuid.uuid4().hex[:6]}"
    work = ROOT / "var" / "runs" / name
    cfg = load_config(
        None,
        overrides=[
            f"kafka.input_topic={name}-in",
            f"kafka.reports_topic={name}-reports",
            f"kafka.dead_letter_topic={name}-dead",
            f"kafka.group_id={name}",
            "input.format=text-ipv4",
            "window.size_ms=2000",
            "privacy.partitions=2",
            "privacy.unit_key=",
            f"output.ledger_dir={work / 'ledger'}",
            f"output.reports_file={work / 'reports.jsonl'}",
            f"flink.checkpoint_dir={work / 'checkpoints'}",
            "flink.checkpoint_interval_ms=1000",
        ],
    )
    broker = prepare_kafka(cfg)
    try:
        resolve_origin(cfg, int(time.time() * 1000))
        prepare_gateway(
            work, extra_jars=sorted((Path(pyflink.__file__).parent / "plugins" / "metrics-jmx").glob("*.jar"))
        )
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.java_gateway import get_gateway

        conf = flink_configuration(cfg, work)
        conf.set_string("metrics.reporter.jmx.factory.class", "org.apache.flink.metrics.jmx.JMXReporterFactory")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        build_pipeline(env, cfg, work)
        client = env.execute_async("dphhh")
        producer = PackedProducer(cfg.kafka_client_options(), cfg["kafka.input_topic"])
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for i in range(200):
                producer.send_value(f"10.0.{i % 50}.{i % 7}".encode())
            producer.send_value(b"not an address")
            producer.flush()
            time.sleep(0.2)
        gateway = get_gateway()
        jvm = gateway.jvm
        server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
        api = jvm.java.lang.Class.forName("javax.management.MBeanServer")  # the server's class is not public

        def call(method: str, *args):
            types = gateway.new_array(jvm.java.lang.Class, len(args))
            values = gateway.new_array(jvm.java.lang.Object, len(args))
            for i, (kind, value) in enumerate(args):
                types[i], values[i] = jvm.java.lang.Class.forName(kind), value
            return api.getMethod(method, types).invoke(server, values)

        found = set()
        pattern = jvm.javax.management.ObjectName("org.apache.flink.*:*")  # also a QueryExp (py4j cannot pass null)
        for object_name in call(
            "queryNames", ("javax.management.ObjectName", pattern), ("javax.management.QueryExp", pattern)
        ):
            domain = object_name.getDomain()[len("org.apache.flink.") :]
            scope, _, metric = domain.rpartition(".")
            info = call("getMBeanInfo", ("javax.management.ObjectName", object_name))
            kind = TYPES.get(str(info.getClassName()).rsplit("$", 1)[-1], "unknown")
            found.add(f"{scope}\t{metric}\t{kind}")
        client.cancel()
        producer.close()
    finally:
        if broker is not None:
            broker.stop()
    out = HERE / "flink_metric_identifiers.txt"
    out.write_text(
        "# logical scope\tname\ttype — recorded by record_flink_metrics.py from a live dphhh job "
        f"(Flink {pyflink.version.__version__})\n" + "\n".join(sorted(found)) + "\n"
    )
    print(f"{len(found)} metric identifiers written to {out}")


if __name__ == "__main__":
    main()
