"""Per-bin table of a result (pandas DataFrame)."""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["bin_table"]


def bin_table(result) -> pd.DataFrame:
    """One row per non-empty bin of ``result`` (see ``CalibrationResult.bin_table``).

    For the cube partition, bin key ``i`` covers ``[i/B, (i+1)/B)`` on each
    coordinate; the key ``B`` (a coordinate exactly 1.0) covers the point 1.
    ``mean_outcome_j`` is the mean of the label indicator Y_j = U_j + Z_j.
    """
    stats = result.bin_stats
    if stats is None:
        raise ValueError("this result holds no bin sums")
    B = result.n_bins
    c = stats.count
    d = stats.dim
    keys = stats.keys
    table = {"bin": [tuple(int(v) for v in row) for row in keys]}
    for j in range(d):
        suffix = "" if d == 1 else f"_{j + 1}"
        table[f"lower{suffix}"] = keys[:, j] / B
        table[f"upper{suffix}"] = np.minimum(keys[:, j] + 1, B) / B
    table["count"] = c.astype(np.int64)
    for j in range(d):
        suffix = "" if d == 1 else f"_{j + 1}"
        mean_pred = stats.sum_z[:, j] / c
        table[f"mean_pred{suffix}"] = mean_pred
        table[f"mean_outcome{suffix}"] = mean_pred + stats.sum_u[:, j] / c
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    with np.errstate(divide="ignore", invalid="ignore"):
        contrib = np.where(c >= 2, num / (result.n * (c - 1.0)), 0.0)
    table["contribution"] = contrib
    df = pd.DataFrame(table)
    return df.sort_values("bin", kind="stable").reset_index(drop=True)
