"""Cluster deployment files: the Kubernetes manifests, the image and the local cluster's configuration
agree with the job (entry module, versions, metrics filter, configuration keys)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import yaml  # PyYAML, a dependency of apache-flink (via apache-beam)

from dphhh.stream.config import load_config
from dphhh.stream.job import METRIC_INCLUDES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ROOT = DEPLOY.parent


def _flink_version() -> str:
    pin = re.search(r'"apache-flink==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin, "pyproject.toml pins apache-flink"
    return pin.group(1)


def test_flink_deployment_runs_the_entry_module_with_the_pinned_flink(tmp_path: Path) -> None:
    """The FlinkDeployment runs dphhh.stream.flink_entry through PyFlink's driver jar of the pinned version,
    with the job's metrics filter and log filters, its parallelism and the mounted configuration."""
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "flink-deployment.yaml").read_text()))
    assert len(docs) == 1
    dep = docs[0]
    assert dep["apiVersion"] == "flink.apache.org/v1beta1" and dep["kind"] == "FlinkDeployment"
    version = _flink_version()
    spec = dep["spec"]
    assert spec["flinkVersion"] == "v" + "_".join(version.split(".")[:2])
    job = spec["job"]
    assert job["jarURI"] == f"local:///opt/flink/lib/flink-python-{version}.jar"
    assert job["entryClass"] == "org.apache.flink.client.python.PythonDriver"
    args = job["args"]
    module = args[args.index("-pym") + 1]
    assert importlib.util.find_spec(module) is not None, module
    config_path = Path(args[args.index("--config") + 1])
    mounts = {m["name"]: m["mountPath"] for m in spec["podTemplate"]["spec"]["containers"][0]["volumeMounts"]}
    assert str(config_path.parent) == mounts["dphhh-config"]
    assert spec["flinkConfiguration"]["metrics.reporter.prom.filter.includes"] == ";".join(METRIC_INCLUDES)
    assert not any("filter.excludes" in k for k in spec["flinkConfiguration"])
    assert spec["flinkConfiguration"]["python.executable"].startswith("/opt/dphhh/.venv/")
    logging = spec["logConfiguration"]["log4j-console.properties"].splitlines()
    ours = (DEPLOY / "flink" / "log4j-no-raw-counts.properties").read_text().splitlines()
    missing = [ln for ln in ours if ln.strip() and not ln.startswith("#") and ln not in logging]
    assert not missing, missing  # offsets and state sizes stay out of the pods' logs too
    assert "rootLogger.appenderRef.console.ref = ConsoleAppender" in logging

    config_map = yaml.safe_load((DEPLOY / "k8s" / "dphhh-config.yaml").read_text())
    volumes = {v["name"]: v for v in spec["podTemplate"]["spec"]["volumes"]}
    assert volumes["dphhh-config"]["configMap"]["name"] == config_map["metadata"]["name"]
    toml_text = config_map["data"][config_path.name]
    path = tmp_path / config_path.name
    path.write_text(toml_text)
    cfg = load_config(path, environ={})  # every key known and valid
    assert cfg["flink.parallelism"] == job["parallelism"]
    assert cfg["output.ledger_dir"].startswith(mounts["dphhh-ledger"])  # the ledger outlives pods


def test_image_matches_the_pinned_flink_and_installs_dphhh() -> None:
    """The Dockerfile builds on the pinned Flink, installs dphhh into the venv the manifest names, and puts
    PyFlink's runtime, the Kafka connector and dphhh's operator jar on Flink's classpath."""
    text = (DEPLOY / "k8s" / "Dockerfile").read_text()
    assert re.search(rf"^FROM flink:{re.escape(_flink_version())}\b", text, re.M)
    assert "/opt/dphhh/.venv/bin/pip install" in text
    for jar in ("flink-python-*.jar", "flink-sql-connector-kafka-*.jar", "dphhh-operators-*.jar"):
        assert jar in text, jar


def test_local_cluster_configuration_matches_the_job() -> None:
    """The standalone cluster's Flink configuration exports the job's allow-listed metrics only, and its dphhh
    configuration is valid and points the job at that cluster."""
    conf = yaml.safe_load(
        (DEPLOY / "flink-cluster" / "config.yaml")
        .read_text()
        .replace("@PYTHON@", "/x")
        .replace("@CHECKPOINTS@", "file:///x")
    )
    assert conf["metrics"]["reporter"]["prom"]["filter"] == {"includes": ";".join(METRIC_INCLUDES)}
    assert conf["rest"]["port"] == 8081 and conf["taskmanager"]["numberOfTaskSlots"] == 1
    cfg = load_config(DEPLOY / "flink-cluster" / "cluster.toml", environ={})
    assert cfg["flink.remote"] == "127.0.0.1:8081" and cfg["flink.parallelism"] == 2
    assert tomllib.loads((DEPLOY / "flink-cluster" / "cluster.toml").read_text())["privacy"]["partitions"] == 2
