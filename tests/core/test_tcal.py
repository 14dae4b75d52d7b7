"""core.tcal.tcal_reject: the decision of the full Monte Carlo test, drawing only until it is known.

Reference: ``tcal_statistic_threshold`` with the same arguments draws all R
resamples and decides ``any(statistic > threshold)``; the number of draws
tcal_reject needs is counted by hand from those same draws.
"""
from __future__ import annotations

import numpy as np
import pytest

from calibtest.core import tcal


def _data(seed, n=150, shift=0.0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < np.clip(p + shift, 0.0, 1.0)).astype(float)
    z = np.column_stack([p, 1.0 - p])
    u = np.column_stack([y, 1.0 - y]) - z
    bins = np.stack([np.minimum((p * b).astype(int), b - 1) for b in (4, 10)])
    return z, u, bins


def _needed(statistic, draws, alpha):
    """Draws after which the decision is known, by hand from all R draws (one scale at a time, then combined)."""
    L, R = draws.shape
    k = np.floor(np.broadcast_to(alpha, (L,)) * (R + 1) + 1e-9).astype(int)
    hits = np.cumsum(draws >= statistic[:, None], axis=1)   # e_l(r) for r = 1..R
    r = np.arange(1, R + 1)
    sure_yes = hits + (R - r) < k[:, None]
    sure_no = hits >= k[:, None]
    yes = np.flatnonzero(sure_yes.any(axis=0))
    no = np.flatnonzero(sure_no.all(axis=0))
    first = min(yes[0] if yes.size else R, no[0] if no.size else R) + 1
    return min(first, R)


@pytest.mark.parametrize("shift", [0.0, 0.08, 0.3])
@pytest.mark.parametrize("statistic", ["debiased", "tcal"])
@pytest.mark.parametrize("scales", [1, 2])
def test_decision_equals_the_full_test(shift, statistic, scales):
    for seed in range(6):
        z, u, bins = _data(seed, shift=shift)
        alpha = 0.1 if scales == 1 else np.array([0.05, 0.05])
        kw = dict(alpha=alpha, n_draws=199, full=True, statistic=statistic)
        full = tcal.tcal_statistic_threshold(z, u, bins[:scales], rng=seed, **kw)
        reject, used = tcal.tcal_reject(z, u, bins[:scales], rng=seed, **kw)
        assert reject == bool(np.any(full.statistic > full.threshold))
        # the draws stop at the first block after which the decision is known, and blocks never overshoot it
        assert used == _needed(full.statistic, full.null_draws, alpha)


def test_generator_is_left_after_the_draws_made():
    z, u, bins = _data(3, shift=0.3)   # far from calibrated: no draw reaches T
    gen = np.random.default_rng(11)
    reject, used = tcal.tcal_reject(z, u, bins[0], alpha=0.05, n_draws=199, rng=gen, full=True,
                                    statistic="debiased", block_size=16)
    # k = floor(0.05 * 200) = 10: sure to reject once fewer than 10 draws remain, after 199 - 9 = 190 draws
    assert reject and used == 190
    fresh = np.random.default_rng(11)
    fresh.random(used * z.shape[0])   # one double per copy of each resample
    assert gen.random() == fresh.random()


def test_calibrated_data_stop_early_and_block_size_does_not_matter():
    z, u, bins = _data(5)
    out = {b: tcal.tcal_reject(z, u, bins[0], alpha=0.1, n_draws=999, rng=2, full=True, block_size=b)
           for b in (1, 7, 64, None)}
    assert len(set(out.values())) == 1
    reject, used = out[None]
    assert not reject and used < 999


def test_checks_as_the_full_test():
    z, u, bins = _data(1)
    with pytest.raises(ValueError, match="n_draws=5 is too small"):
        tcal.tcal_reject(z, u, bins[0], alpha=0.05, n_draws=5, rng=0)
    with pytest.raises(ValueError, match="same shape"):
        tcal.tcal_reject(z[:, :1], u, bins[0], n_draws=99, rng=0)
