"""The job's Java classes are found on every thread of PyFlink's gateway JVM.

PyFlink makes the jars of ``pipeline.jars`` visible to the gateway by swapping the context class
loader of the one gateway thread that served that call; py4j serves a Python call on another
gateway thread (a new connection) whenever two Python threads used the gateway at the same time, and
a garbage-collection finaliser run by any thread of ``dphhh run`` is such a use. A later lookup of
``io.dphhh.flink.MessageBatcher`` then failed with "Could not found the Java class" — a job start
that failed at random under load (seen once in CI: the publication-time test's job never started).
:func:`dphhh.stream.job.prepare_gateway` now puts the job's jars on the gateway's class path.

The test provokes the second connection on purpose and checks it did (the lookup runs on a gateway
thread whose context class loader lacks the jars), then looks the classes up there. On the engine
before the fix it fails with the error above.
"""

from __future__ import annotations

from pathlib import Path

from tests.fresh_interpreter import run_json

SCRIPT = r"""
import json, sys, threading
from pathlib import Path
from dphhh.stream.job import job_jars, prepare_gateway

prepare_gateway(Path(sys.argv[1]))
from pyflink.common import Configuration
from pyflink.java_gateway import get_gateway

gateway = get_gateway()
conf = Configuration()
conf.set_string("pipeline.jars", ";".join("file://" + str(j) for j in job_jars()))  # as flink_configuration
jvm = gateway.jvm

def loader_has_jars() -> bool:
    loader = jvm.Thread.currentThread().getContextClassLoader()
    urls = loader.getURLs() if loader.getClass().getName() == "java.net.URLClassLoader" else []
    return any("dphhh-operators-" in url.toString() for url in urls)

first = loader_has_jars()  # the thread that served set_string (py4j gives back the last connection used)
# a second Python thread holds that connection while this one calls: py4j opens a second one, on a
# fresh gateway thread; this call returns last, so its connection is the one used next
holding = threading.Event()
def hold():
    holding.set()
    jvm.java.lang.Thread.sleep(400)
other = threading.Thread(target=hold)
other.start()
holding.wait()
jvm.java.lang.Thread.sleep(1200)
other.join()
second = loader_has_jars()
found = {}
for name in ("io.dphhh.flink.MessageBatcher", "io.dphhh.flink.ClockWatermarks",
             "org.apache.flink.connector.kafka.source.KafkaSource"):
    try:
        found[name] = str(jvm.Class.forName(name, False, jvm.Thread.currentThread().getContextClassLoader()).getName())
    except Exception as e:
        found[name] = "missing: " + str(e).splitlines()[0]
# the lookup build_pipeline makes: py4j answers a JavaClass, or a JavaPackage for a name it cannot load
found["py4j lookup"] = type(gateway.jvm.io.dphhh.flink.MessageBatcher).__name__
print(json.dumps({"first": first, "second": second, "found": found}))
"""


def test_job_classes_are_found_on_a_second_gateway_thread(tmp_path: Path) -> None:
    result = run_json(SCRIPT, str(tmp_path / "run"))
    # the scenario happened: the pipeline.jars call's thread had the jars in its context loader, the
    # later lookup ran on a thread without them
    assert result["first"] is True, result
    assert result["second"] is False, result
    assert result["found"] == {
        "io.dphhh.flink.MessageBatcher": "io.dphhh.flink.MessageBatcher",
        "io.dphhh.flink.ClockWatermarks": "io.dphhh.flink.ClockWatermarks",
        "org.apache.flink.connector.kafka.source.KafkaSource": "org.apache.flink.connector.kafka.source.KafkaSource",
        "py4j lookup": "JavaClass",
    }
