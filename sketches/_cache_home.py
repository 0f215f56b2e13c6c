"""Where dphhh keeps what it downloads and builds outside a checkout: the one rule, for the lowest
layer (numba's kernel cache in :mod:`dphhh.sketches._mg_kernel`) and for :func:`dphhh.stream.paths.cache_dir`.

``$DPHHH_HOME`` if set, else ``$XDG_CACHE_HOME/dphhh``, else ``~/.cache/dphhh`` (not created here).
"""

from __future__ import annotations

import os

__all__ = ["user_cache_home"]


def user_cache_home() -> str:
    """``$DPHHH_HOME`` (made absolute), else ``$XDG_CACHE_HOME/dphhh``, else ``~/.cache/dphhh``."""
    own = os.environ.get("DPHHH_HOME")
    if own:  # absolute: every process (a job's Python workers run elsewhere) finds the same folder
        return os.path.abspath(os.path.expanduser(own))
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "dphhh")
