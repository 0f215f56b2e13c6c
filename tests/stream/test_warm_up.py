"""No compiled kernel is loaded by an element (docs/ALGORITHMS.md §0.1 h).

A numba kernel is compiled, or loaded from its cache, the first time it is called with a new type
signature: a CPU burst of tenths of a second. If the first element of a worker's life (or the first
of some kind, or the first batch that makes a table grow) paid it, when that burst happens — and a
report it makes late — would follow the data. Every operator therefore runs its kernels on
throwaway values at open. The check: in a fresh interpreter (so that no earlier test has loaded
anything), the job's operators are opened and their warm-ups awaited; then a window of elements
goes through decode, the cap, the sketches and the release, and no kernel of the project may have
gained a signature. Shown to fail without the decode warm-up (``test_the_check_sees_a_missing_warm_up``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fresh_interpreter import run_json

SCRIPT = r"""
import json, sys
from operator import itemgetter
from pathlib import Path

import numpy as np
from pyflink.common import Types

import dphhh.stream.operators as ops
from dphhh.stream.message_batch import pack_batch
from tests.harness import Chain, KeyedHarness, ProcessHarness
from tests.stream.test_neighbour_failures import KINDS, ORIGIN, RAW, TO_SKETCH, _cfg, _element

kind, tmp, broken = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
if broken:  # the control: the decode step's warm-up left out
    ops.warm_key_kernels = lambda: None
cfg = _cfg(tmp, kind)
values = {s: dict(v) for s, v in cfg.values.items()}
stages = [ProcessHarness(ops.DecodeOperator(values, ORIGIN), output_type=TO_SKETCH)]
if cfg.unit.kind == "user":
    stages.append(KeyedHarness(ops.CapOperator(values, ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=TO_SKETCH))
stages.append(
    KeyedHarness(ops.SketchOperator(values, ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=Types.TUPLE([Types.LONG(), RAW]))
)
stages.append(KeyedHarness(ops.ReleaseOperator(values, ORIGIN, str(tmp / "run"), None), lambda r: 0, key_type=Types.INT(), output_type=RAW))
chain = Chain(*stages).open()
for stage in chain.stages:
    warm = getattr(stage.operator, "warm", None)
    if warm is not None:
        warm.ready()


def signatures():
    import numba
    import dphhh.privacy.unit_cap, dphhh.sketches._mg_kernel, dphhh.sketches._pair_table, dphhh.sketches.keyed
    out = {}
    for module in (dphhh.privacy.unit_cap, dphhh.sketches._mg_kernel, dphhh.sketches._pair_table, dphhh.sketches.keyed):
        for name, obj in vars(module).items():
            if isinstance(obj, numba.core.dispatcher.Dispatcher):
                out[f"{module.__name__}.{name}"] = sorted(map(str, obj.signatures))
    return out


before = signatures()
chain.send((ops.START, b""), at=len(stages) - 1)
rng = np.random.default_rng(0)
pool = rng.integers(0, 2**32, 3000, dtype=np.uint64)
paths = [f"c{a}/r{b}/s{c}" for a in range(4) for b in range(30) for c in range(30)]
messages = [(ORIGIN + 1 + i % 900, _element(kind, rng, pool, paths)) for i in range(4000)]
for i in range(0, len(messages), 500):
    chunk = messages[i : i + 500]
    chain.send(pack_batch([t for t, _ in chunk], [m for _, m in chunk]))
chain.end_of_input()
assert len(chain.outputs) == 2, len(chain.outputs)
after = signatures()
print(json.dumps({"before": before, "gained": {k: v for k, v in after.items() if v != before.get(k, [])}}))
"""


def _gained(kind: str, tmp: Path, broken: bool = False) -> tuple[dict, dict]:
    found = run_json(SCRIPT, kind, str(tmp), "1" if broken else "0")
    return found["before"], found["gained"]


@pytest.mark.parametrize("kind", ["ipv4", "pairs-user", "path"])  # pairs-user: the pair keys and the cap
def test_no_element_loads_a_kernel(tmp_path: Path, kind: str) -> None:
    before, gained = _gained(kind, tmp_path)
    assert gained == {}, f"kernels first loaded by an element: {gained}"
    assert any(before.values())  # the warm-ups did load kernels (the check is not vacuous)


def test_the_check_sees_a_missing_warm_up(tmp_path: Path) -> None:
    """Without the decode step's warm-up, the pair hierarchy's first batch loads its key kernels."""
    _, gained = _gained("pairs", tmp_path, broken=True)
    assert any("siphash" in name or "_pair_table" in name for name in gained), gained
