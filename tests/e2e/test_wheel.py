"""The built wheel runs anywhere: ``pip install dist/*.whl`` in a clean virtual environment, then
``dphhh demo`` from an empty folder outside the checkout; everything under the one ``dphhh`` namespace.

The environment reuses the project's installed dependencies (a ``.pth`` line naming the checkout
venv's site-packages: its own ``.pth`` files — among them the checkout's editable install — are not
processed from there), but dphhh itself comes only from the wheel. The demo then starts its own
broker on free ports from the wheel's scripts, with the jars fetched by Maven into a fresh
``$DPHHH_HOME`` and its state in ``./var``; afterwards site-packages holds exactly the files pip
installed.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

from dphhh.stream.paths import ROOT


def _free_port_pair() -> int:
    """A port p with p and p + 1 free (the demo's broker takes its controller port at p + 1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as t:
            try:
                t.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_wheel_installs_and_runs_the_demo_outside_the_checkout(tmp_path: Path) -> None:
    assert ROOT is not None
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = list(dist.glob("dphhh-*.whl"))
    assert len(wheels) == 1, wheels

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "dphhh-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheels[0])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    before = _files(site)
    # one namespace: the wheel installs `dphhh` (and its scripts and metadata), no other top-level name
    record = next(site.glob("dphhh-*.dist-info")) / "RECORD"
    tops = {line.split("/", 1)[0].split(",", 1)[0] for line in record.read_text().splitlines()}
    assert {t for t in tops if not t.endswith(".dist-info") and t != ".."} == {"dphhh"}, sorted(tops)
    for name in ("sketches", "privacy", "connectors", "stream", "dphhh_data", "dphhh_deploy"):
        assert not (site / name).exists(), name

    work = tmp_path / "empty folder"
    work.mkdir()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPHHH_") and k != "PYTHONPATH"}
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import dphhh, dphhh.sketches, dphhh.privacy, dphhh.stream; print(dphhh.stream.__file__, dphhh.privacy.__file__)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=work,
        env=env,
    ).stdout
    assert str(ROOT) not in where and str(site) in where, where  # the wheel's copy, not the checkout
    env.update(DPHHH_HOME=str(home), DPHHH_KAFKA_BOOTSTRAP=f"127.0.0.1:{_free_port_pair()}")
    demo = subprocess.run(
        [str(venv / "bin" / "dphhh"), "demo"], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    out = demo.stdout + demo.stderr
    assert demo.returncode == 0, out[-5000:]

    # the bundled capture's window (7,996 IPv4 packets) was reported, with its heavy prefixes
    blocks = out.split("dphhh private HHH report")[1:]
    assert len(blocks) == 6, out[-5000:]
    sizes = [
        int(m.group(1).replace(",", "")) for m in (re.search(r"~(-?[\d,]+) elements \(noisy\)", b) for b in blocks) if m
    ]
    capture = [b for b, n in zip(blocks, sizes) if abs(n - 7996) < 300]
    assert len(capture) == 1, sizes
    assert re.search(r"\s(104|107|172)\.\d+\.\d+\.\d+/(8|16)\s", capture[0]), capture[0]

    # state in ./var of the folder it ran in, downloads in $DPHHH_HOME, nothing new in site-packages
    assert (work / "var" / "runs").is_dir() and (work / "var" / "kafka").is_dir()
    assert list((home / "jars" / "kafka").glob("kafka_2.13-*.jar"))
    assert list((home / "jars" / "flink").glob("flink-sql-connector-kafka-*.jar"))
    assert list((home / "jars" / "dphhh").glob("dphhh-operators-*.jar"))
    assert _files(site) == before, sorted(_files(site) ^ before)[:20]
