"""Array helpers shared by the engines and the results."""
from __future__ import annotations

import numpy as np

__all__ = ["read_only"]


def read_only(a) -> np.ndarray:
    """A C-contiguous, read-only view or copy of ``a`` (results hold their arrays immutably)."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a
