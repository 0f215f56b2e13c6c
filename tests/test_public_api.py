"""The public library API: each package's ``__init__`` maps its modules and re-exports its names.

* the headline names import from the packages and are the objects their modules define;
* every name in every package's ``__all__`` is importable, and no re-export shadows a submodule;
* every module of a package is mapped in the package's docstring;
* the README's "Library use" example runs and finds the heavy prefix it plants;
* importing the packages loads neither PyFlink nor the Kafka client (in a fresh interpreter).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dphhh.sketches", "dphhh.privacy", "dphhh.privacy.offline", "dphhh.connectors", "dphhh.stream")
HEAVY = ("pyflink", "kafka")


def _package_modules(package: str) -> list[str]:
    """The module names (no dots) of ``package``'s own .py files, ``__init__`` excluded."""
    folder = ROOT.joinpath(*package.removeprefix("dphhh.").split("."))
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def test_headline_names_import_from_the_packages() -> None:
    """``from dphhh.sketches import MisraGries; from dphhh.privacy import release_level, release_window, HHHParams``."""
    import dphhh.privacy.params
    import dphhh.privacy.release
    import dphhh.privacy.window
    import dphhh.sketches.misra_gries
    from dphhh.privacy import HHHParams, release_level, release_window
    from dphhh.sketches import MisraGries

    assert MisraGries is dphhh.sketches.misra_gries.MisraGries
    assert release_level is dphhh.privacy.release.release_level
    assert release_window is dphhh.privacy.window.release_window
    assert HHHParams is dphhh.privacy.params.HHHParams
    sketch = MisraGries(4)
    sketch.update([1, 1, 2])
    assert sketch.counters()[1] == 2


def test_required_names_are_exported() -> None:
    """The names the issue asks for are in each package's ``__all__``."""
    required = {
        "sketches": {"MisraGries", "IPv4Hierarchy", "IPv6Hierarchy", "PathHierarchy", "LevelSketches", "exact_hhh"},
        "privacy": {
            "HHHParams",
            "PrivacyBudget",
            "release_level",
            "release_window",
            "extract_hhh",
            "PrivacyUnit",
            "WindowCalibration",
            "make_plan",
            "PlanInputs",
            "RandomSource",
            "SecureRandomSource",
            "SeededRandomSource",
        },
        "privacy.offline": {
            "algorithm1_hhh",
            "stability_histogram_hhh",
            "plan_offline_hhh",
            "inftda_from_counts",
            "ahead_1d",
            "lue_dptree_counts",
        },
        "connectors": {"open_input", "iter_capture_sources", "iter_text_lines", "FlowJsonDecoder", "MessageDecoder"},
    }
    for package, names in required.items():
        missing = names - set(importlib.import_module(f"dphhh.{package}").__all__)
        assert not missing, f"{package}.__all__ lacks {sorted(missing)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_in_all_is_importable(package: str) -> None:
    """Each ``__all__`` entry resolves (``from package import *`` too) and is listed once."""
    module = importlib.import_module(package)
    names = module.__all__
    assert names, f"{package}.__all__ is empty"
    assert len(names) == len(set(names)), f"{package}.__all__ has duplicates"
    for name in names:
        assert getattr(module, name, None) is not None, f"{package}.{name} is not importable"
    namespace: dict = {}
    exec(f"from {package} import *", namespace)
    assert set(names) <= set(namespace)


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "dphhh.stream"])
def test_reexports_do_not_shadow_submodules(package: str) -> None:
    """``package.<module>`` stays the module (e.g. ``privacy.offline.inftda``, ``privacy.noise``)."""
    module = importlib.import_module(package)
    for name in _package_modules(package):
        assert name not in module.__all__, f"{package}.__all__ exports {name!r}, the name of a submodule"
        if name == "kafka_io":
            continue  # imports the Kafka client; not loaded by the package
        sub = importlib.import_module(f"{package}.{name}")
        assert getattr(module, name) is sub, f"{package}.{name} is not the submodule"
        assert isinstance(sub, types.ModuleType)


@pytest.mark.parametrize("package", PACKAGES)
def test_docstring_maps_every_module(package: str) -> None:
    """The package docstring names each of its modules (``:mod:`package.module```)."""
    doc = importlib.import_module(package).__doc__ or ""
    assert "placeholder" not in doc.lower()
    unmapped = [m for m in _package_modules(package) if f":mod:`{package}.{m}`" not in doc]
    assert not unmapped, f"{package} docstring does not map {unmapped}"


def _library_use_code() -> str:
    """The python block of the README's "Library use" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Library use\n(.*?)(?=^## )", readme, re.S | re.M)
    assert section, "README.md has no 'Library use' section"
    block = re.search(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    assert block, "the 'Library use' section has no python code block"
    return block.group(1)


def test_readme_library_use_example_runs_and_finds_the_planted_prefix() -> None:
    """The README example runs as written, and all three of its outputs report the planted host."""
    code = _library_use_code()
    out = io.StringIO()
    namespace: dict = {"__name__": "readme_library_use"}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md#library-use", "exec"), namespace)
    printed = out.getvalue().splitlines()
    assert len(printed) == 3, printed
    assert all("10.1.2.3/32" in line for line in printed), printed
    report = namespace["report"]
    assert report["schema"] == "dphhh.report/2"
    prefixes = [item["prefix"] for item in report["hhh"]]
    assert "10.1.2.3/32" in prefixes
    # only the planted host and the root are heavy (uniform background: every /8 is far below tau)
    assert set(prefixes) == {"10.1.2.3/32", "0.0.0.0/0"}
    assert report["guarantees"]["randomness"].startswith("seeded")  # the example's seeded source says so
    assert "10.1.2.3/32" in {x.prefix for x in namespace["items"]}
    json.dumps(report)  # the report is plain JSON


def test_packages_import_without_pyflink_or_kafka() -> None:
    """``import dphhh.sketches, dphhh.privacy, dphhh.connectors, dphhh.stream`` (and dphhh.privacy.offline) loads no PyFlink, no Kafka client."""
    probe = (
        "import sys\n"
        "import dphhh.sketches, dphhh.privacy, dphhh.privacy.offline, dphhh.connectors, dphhh.stream\n"
        "from dphhh.stream import *\n"
        f"bad = sorted({{k for k in sys.modules if k.split('.')[0] in {HEAVY!r}}})\n"
        "print(bad)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_import_stream_alone_loads_no_submodule() -> None:
    """``import dphhh.stream`` is the docstring only: its re-exports load on first use."""
    probe = (
        "import sys\n"
        "import dphhh.stream\n"
        "before = sorted(k for k in sys.modules if k.startswith('dphhh.stream.'))\n"
        "dphhh.stream.JobFailed\n"
        "print(before, 'dphhh.stream.errors' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] True", result.stdout
