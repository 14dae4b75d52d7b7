"""Shared fixtures and slow reference implementations for the tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
TCAL = SHARED / "data" / "tcal"


def tcal_file(name: str) -> Path:
    """Path of a T-Cal prediction file; skip the test when ../shared is absent."""
    path = TCAL / f"{name}.csv"
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def slow_estimates(z: np.ndarray, u: np.ndarray, B: int):
    """T, plug-in T_m and sigma1^2 by explicit loops over bins and pairs of rows.

    An obviously-correct transcription of the paper's eqs. (6),
    (2) and (8); z, u of shape (n, d).
    """
    n = z.shape[0]
    bins: dict = {}
    for i in range(n):
        key = tuple(int(np.floor(v * B)) for v in z[i])
        bins.setdefault(key, []).append(i)
    t = 0.0
    t_m = 0.0
    first = second = cross = 0.0
    for rows in bins.values():
        c = len(rows)
        if c >= 2:
            pair_sum = sum(float(u[a] @ u[b]) for a in rows for b in rows if a != b)
            t += pair_sum / (c - 1) / n
        mu = u[rows].mean(axis=0)
        t_m += c / n * float(mu @ mu)
        cov = sum(np.outer(u[j], u[j]) for j in rows) / c - np.outer(mu, mu)
        first += c / n * float(mu @ mu) ** 2
        second += c / n * float(mu @ mu)
        cross += c / n * float(mu @ cov @ mu)
    return t, t_m, first - second**2 + 4 * cross, len(bins)


@pytest.fixture(scope="session")
def dd():
    """``dask.dataframe``, imported by the tests that ask for it (so collecting the suite does not import Dask);
    they are skipped where Dask is not installed."""
    return pytest.importorskip("dask.dataframe")
