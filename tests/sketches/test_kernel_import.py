"""The compiled kernel's import guard for PyFlink's process-mode Python worker."""

from __future__ import annotations

import builtins
import sys
import types

from dphhh.sketches._mg_kernel import _make_print_findable


def _worker_print(module_name: str):
    """A bound ``print`` method defined in ``module_name``, like PyFlink's ``CustomPrint.print``."""
    namespace: dict = {"__name__": module_name}
    exec("class CustomPrint:\n    def print(self, *args, **kwargs):\n        pass\n", namespace)
    return namespace["CustomPrint"]().print


def test_print_replaced_by_a_bound_method_becomes_findable_in_its_module() -> None:
    """After the guard, print's module names the very object that builtins.print is (numba's check)."""
    module = types.ModuleType("fake_worker_main")
    replacement = _worker_print(module.__name__)
    assert replacement.__module__ == module.__name__
    original = builtins.print
    sys.modules[module.__name__] = module
    builtins.print = replacement
    try:
        assert getattr(module, "print", None) is not replacement
        _make_print_findable()
        assert module.print is builtins.print
    finally:
        builtins.print = original
        del sys.modules[module.__name__]


def test_guard_leaves_the_normal_print_alone() -> None:
    """With the built-in print in place the guard changes nothing: print is still the built-in
    function, the builtins module still names it, and no module gains a ``print``."""
    before = builtins.print
    assert before.__module__ == "builtins"
    namespaces = {name: dict(vars(m)) for name, m in list(sys.modules.items()) if m is not None}
    _make_print_findable()
    assert builtins.print is before
    assert vars(builtins)["print"] is before
    assert "print" not in vars(sys.modules[__name__])
    gained = [
        name
        for name, m in list(sys.modules.items())
        if name in namespaces and m is not None and "print" in vars(m) and "print" not in namespaces[name]
    ]
    assert gained == []
