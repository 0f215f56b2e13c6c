"""The sizing formulas equal what real sketches hold (sketches/sizing.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dphhh.sketches.misra_gries import MisraGries
from dphhh.sketches.sizing import sketch_memory_bytes, sketch_state_bytes


@pytest.mark.parametrize("kappa", [1, 5, 64, 1000, 1024, 4096])
def test_sizes_match_a_real_sketch(kappa: int) -> None:
    """Memory = the nbytes of the sketch's arrays; state = len(to_bytes()), after real updates."""
    sketch = MisraGries(kappa)
    sketch.update(np.arange(5000, dtype=np.int64) % (kappa + 3))
    arrays = [v for v in (getattr(sketch, name) for name in MisraGries.__slots__) if isinstance(v, np.ndarray)]
    assert sum(a.nbytes for a in arrays) == sketch_memory_bytes(kappa)
    assert len(sketch.to_bytes()) == sketch_state_bytes(kappa)
