"""One namespace and its layers: everything is imported as ``dphhh.<package>``, each package uses
only the ones below it — ``sketches`` ← ``privacy`` ← ``connectors`` ← ``stream`` (the CLI is
``dphhh.stream.cli``) — and no module imports itself through others (no import circle, lazy
imports inside functions included).

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


def import_graph(root: Path, packages: tuple[str, ...] = LAYERS, namespace: str = "dphhh") -> dict[str, set[str]]:
    """{module: the project's modules it imports} of every module under ``root/<package>``, read from
    the source (imports inside functions included). ``from package import submodule`` is an edge to
    the submodule, not to the package's ``__init__``."""
    files = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join([namespace, *parts])] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in files)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = {f"{target}.{a.name}" for a in node.names} & set(files)
                edges.update(subs or ({target} & set(files)))
        edges.discard(module)
        graph[module] = edges
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle() -> None:
    assert import_circles(import_graph(ROOT)) == []


def test_the_circle_check_finds_a_lazy_circle_and_ignores_a_submodule_import(tmp_path: Path) -> None:
    """Negative control: a module importing another at the top while that one imports it back inside a
    function is a circle; ``from . import sub`` in a package's ``__init__`` and in a sibling is not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import a, b\n")
    (pkg / "a.py").write_text("from .b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("from . import c\n\ndef g():\n    from .a import f\n    return f\n")
    (pkg / "c.py").write_text("X = 1\n")
    graph = import_graph(tmp_path, ("pkg",), namespace="ns")
    assert graph["ns.pkg.b"] == {"ns.pkg.c", "ns.pkg.a"} and graph["ns.pkg"] == {"ns.pkg.a", "ns.pkg.b"}
    assert import_circles(graph) == [["ns.pkg.a", "ns.pkg.b"]]
    (pkg / "b.py").write_text("from . import c\n\ndef g():\n    return c.X\n")
    assert import_circles(import_graph(tmp_path, ("pkg",), namespace="ns")) == []
