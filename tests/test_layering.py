"""One namespace and its layers: everything is imported as ``dphhh.<package>``, and each package uses
only the ones below it — ``sketches`` ← ``privacy`` ← ``connectors`` ← ``stream`` (the CLI is
``dphhh.stream.cli``).

In the checkout the packages live in top-level folders (``sketches/``, …), so with the checkout on
``sys.path`` (as pytest puts it) ``import sketches`` would still work here — and load a second copy
of every module it touches — while failing in the installed wheel, where only ``dphhh`` exists.
The first test reads every Python source of the project for such imports (statements, and the
``python -c`` snippets in strings and in the launcher); the second imports each package's modules
in a fresh interpreter *outside* the checkout and checks which packages they loaded.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("sketches", "privacy", "connectors", "stream")
OLD_TOP_LEVEL = (*LAYERS, "dphhh_data", "dphhh_deploy")
_SNIPPET = re.compile(rf"\b(?:from|import) ({'|'.join(OLD_TOP_LEVEL)})(?:[. ]|$)", re.M)


def _tracked(pattern: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.split()]


def top_level_imports(source: str) -> list[str]:
    """The import statements of ``source`` (and of the code in its string literals) that name one of
    :data:`OLD_TOP_LEVEL` as a top-level package."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in OLD_TOP_LEVEL]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in OLD_TOP_LEVEL:
                found.append(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [m.group(0) for m in _SNIPPET.finditer(node.value) if "\n" in node.value or "; " in node.value]
    return found


def test_the_scan_finds_each_form_of_an_old_import() -> None:
    """Negative control: each way the old names could still be imported is found."""
    for source in (
        "import stream\n",
        "import sketches.keyed as keyed\n",
        "from privacy.release import release_level\n",
        "def f():\n    from connectors import open_input\n",
        "CODE = 'import sys\\nfrom stream.job import gateway_lib_dir'\n",
        "CODE = 'from dphhh_data import x; print(x)'\n",
    ):
        assert top_level_imports(source), source
    for source in ("import dphhh.stream\n", "from dphhh.sketches import MisraGries\n", "from . import stream\n"):
        assert not top_level_imports(source), source


def test_nothing_imports_a_package_outside_the_dphhh_namespace() -> None:
    offenders = {}
    for path in _tracked("*.py"):
        if path == Path(__file__).resolve():
            continue  # this file's negative controls hold the old forms on purpose
        found = top_level_imports(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    launcher = (ROOT / "dphhh").read_text()
    if _SNIPPET.search(launcher):
        offenders["dphhh"] = _SNIPPET.findall(launcher)
    assert not offenders, offenders


_PROBE = """
import importlib, json, pkgutil, sys
layer = sys.argv[1]
package = importlib.import_module("dphhh." + layer)
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    if info.name.rsplit(".", 1)[-1] != "__main__":
        importlib.import_module(info.name)
loaded = sorted({name.split(".")[1] for name in sys.modules if name.startswith("dphhh.") and name.count(".") >= 1})
tops = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.argv[2])))
print(json.dumps({"loaded": loaded, "tops": tops, "file": package.__file__}))
"""


def test_each_package_loads_only_the_layers_below_it(tmp_path: Path) -> None:
    for i, layer in enumerate(LAYERS):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, layer, json.dumps(OLD_TOP_LEVEL)],
            cwd=tmp_path,  # outside the checkout: only the installed dphhh namespace is importable
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["file"].startswith(str(ROOT / layer)), seen["file"]  # the checkout's code, by its new name
        above = set(LAYERS[i + 1 :])
        assert layer in seen["loaded"] and not above & set(seen["loaded"]), (layer, seen["loaded"])
        assert seen["tops"] == [], (layer, seen["tops"])  # no module loaded under an old top-level name
