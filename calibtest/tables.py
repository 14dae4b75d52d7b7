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
    if result.mode == "full":
        return _simplex_bin_table(result)
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


def _simplex_bin_table(result) -> pd.DataFrame:
    """Bin table of full calibration: one row per non-empty simplex cell.

    Columns: ``bin`` (the cell key ``(a_1, ..., a_{K-1}, code)`` of
    :func:`calibtest.simplex.simplex_cells`), ``floor`` (the integer parts
    a = floor(s)), ``order`` (the ranks of the fractional parts of s),
    ``barycentre_j`` (the barycentre of the cell's part of the simplex, per
    class), ``count``, ``mean_pred_j``, ``mean_outcome_j`` and ``contribution``
    (the cell's term of T; the column sums to ``estimate``).
    """
    from .simplex import cell_barycentres, decode_order
    stats = result.bin_stats
    keys = stats.keys
    c = stats.count
    K = stats.dim
    d = keys.shape[1] - 1
    ranks = decode_order(keys[:, d], d)
    bary = cell_barycentres(keys, result.n_bins)
    table = {"bin": [tuple(int(v) for v in row) for row in keys],
             "floor": [tuple(int(v) for v in row) for row in keys[:, :d]],
             "order": [tuple(int(v) for v in row) for row in ranks]}
    for j in range(K):
        table[f"barycentre_{j + 1}"] = bary[:, j]
    table["count"] = c.astype(np.int64)
    for j in range(K):
        mean_pred = stats.sum_z[:, j] / c
        table[f"mean_pred_{j + 1}"] = mean_pred
        table[f"mean_outcome_{j + 1}"] = mean_pred + stats.sum_u[:, j] / c
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    with np.errstate(divide="ignore", invalid="ignore"):
        table["contribution"] = np.where(c >= 2, num / (result.n * (c - 1.0)), 0.0)
    df = pd.DataFrame(table)
    return df.sort_values("bin", kind="stable").reset_index(drop=True)
