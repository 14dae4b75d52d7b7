"""Monte Carlo coverage of the adjusted interval on the paper's Settings 1 and 3.

n = 1000, B = 50 (Setting 1, top-1) and B = 20 (Setting 3, top-1-to-2), alpha = 0.1,
300 data sets per beta.  Coverage of the true ECE^2 (numerical integration for
Setting 1, 2 beta^2 for Setting 3) must be at least 1 - alpha - 3 s.e. with
s.e. = sqrt(alpha (1 - alpha) / 300) = 0.0173, i.e. at least 0.848.
"""
import numpy as np
import pytest

import calibtest as ct
from calibtest import simulation as sim

N, REPS, ALPHA = 1000, 300, 0.1
SE = np.sqrt(ALPHA * (1 - ALPHA) / REPS)


def coverage(make, truth, **kwargs):
    rng = np.random.default_rng(20261122)
    hits = 0
    for _ in range(REPS):
        d = make(rng)
        res = ct.calib_ci(alpha=ALPHA, **kwargs, **d)
        ci = res.conf_int()
        lower_ok = truth > ci.lower or (truth == ci.lower and not ci.lower_open)
        hits += lower_ok and truth <= ci.upper
    return hits / REPS


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.0, 0.5, 0.8, 1.0])
def test_setting1_top1(beta):
    truth = sim.true_ece_sq(1, beta, "top1")

    def make(rng):
        d = sim.setting1(N, beta, rng=rng)
        return {"y": d.correct, "probs": d.confidence}

    cov = coverage(make, truth, n_classes=2, n_bins=50)
    assert cov >= 1 - ALPHA - 3 * SE, f"coverage {cov:.3f} at beta={beta} (truth {truth:.5f})"


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.0, 0.05, 0.1])
def test_setting3_top2(beta):
    truth = 2 * beta**2

    def make(rng):
        d = sim.setting3(N, beta, rng=rng)
        return {"y": d.labels, "probs": d.probs}

    cov = coverage(make, truth, k=2, n_bins=20)
    assert cov >= 1 - ALPHA - 3 * SE, f"coverage {cov:.3f} at beta={beta}"
