"""calib_test: the multi-scale conditional Monte Carlo test, checked against slow explicit code."""
import math

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.checks.multiscale import adaptive_grid


def _data(n, seed, power=1.0):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    return (g.random(n) < p).astype(int), p ** power


def _t_explicit(y, p, B):
    """Debiased T with explicit bins [i/B, (i+1)/B) and loops (independent of the package's binning)."""
    n = len(y)
    total = 0.0
    for b in range(B + 1):
        idx = [a for a in range(n) if min(int(p[a] * B), B) == b]
        c = len(idx)
        if c < 2:
            continue
        u = [y[a] - p[a] for a in idx]
        pairs = sum(u[i] * u[j] for i in range(c) for j in range(c) if i != j)
        total += pairs / (c - 1)
    return total / n


def _var_explicit(p, B):
    """Var(T | p) = (2/n^2) sum_b sum_{a != a'} v_a v_a' / (c_b - 1)^2, v = p (1 - p)."""
    n = len(p)
    total = 0.0
    for b in range(B + 1):
        v = [p[a] * (1 - p[a]) for a in range(n) if min(int(p[a] * B), B) == b]
        c = len(v)
        if c < 2:
            continue
        total += 2 * (sum(v) ** 2 - sum(x * x for x in v)) / (c - 1) ** 2
    return total / n ** 2


_MASK = (1 << 64) - 1


def _splitmix(x: int) -> int:
    """splitmix64's finalizer in Python integers."""
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _explicit_draws(p, R, seed):
    """Label draws of the 1-dim Monte Carlo null, one byte and one comparison at a time (slow, explicit).

    The counter-based stream: key = the first four raw words of default_rng(seed); row a in draw r uses byte
    r mod 8 (little-endian) of output a of the PCG64DXSM stream seeded by SeedSequence(entropy=(k0, k1),
    spawn_key=(r // 8,)); y = 1 iff byte < floor(256 p), and on byte == floor(256 p) iff the uniform
    (h >> 11) 2^-53 of the hash h = mix(mix(k2 ^ a G) ^ (k3 + r D)) (splitmix64's finalizer) is below
    256 p - floor(256 p).
    """
    key = [int(k) for k in np.random.default_rng(seed).bit_generator.random_raw(4)]
    n = len(p)
    out = []
    for r in range(R):  # slow loop over draws
        gen = np.random.PCG64DXSM(np.random.SeedSequence(entropy=key[:2], spawn_key=(r // 8,)))
        words = [int(w) for w in gen.random_raw(n)]  # output a: row a's word
        y = np.zeros(n, dtype=int)
        for a in range(n):  # slow loop over rows
            b = words[a] >> (8 * (r % 8)) & 255  # little-endian bytes of the words
            t = math.floor(256 * p[a])
            if b != t or t == 256:
                y[a] = int(b < t)
                continue
            h = _splitmix(_splitmix(key[2] ^ ((a * 0x9E3779B97F4A7C15) & _MASK))
                          ^ ((key[3] + r * 0xD1B54A32D192ED03) & _MASK))
            y[a] = int((h >> 11) * 2.0 ** -53 < 256 * p[a] - t)
        out.append(y)
    return out


def test_pvalue_equals_slow_explicit_implementation():
    y, p = _data(60, 1, power=1.5)
    grid, R, seed = (2, 4, 7), 300, 11
    res = ct.calib_test(y=y, probs=p, n_bins=list(grid), n_draws=R, rng=seed, partitions="equal-width",
                        spiegelhalter=False)
    sd = [math.sqrt(_var_explicit(p, B)) for B in grid]
    z_obs = max(_t_explicit(y, p, B) / s for B, s in zip(grid, sd))
    # every row is in a bin of >= 2 rows at some scale here, so every row is drawn
    zstars = [max(_t_explicit(ystar, p, B) / s for B, s in zip(grid, sd)) for ystar in _explicit_draws(p, R, seed)]
    np.testing.assert_allclose(np.sort(res.null_draws.max(axis=0)), np.sort(zstars), rtol=1e-9, atol=1e-12)
    count = sum(z >= z_obs - 1e-12 for z in zstars)
    assert res.pvalue == pytest.approx((1 + count) / (R + 1), abs=1e-12)
    assert res.statistic == pytest.approx(z_obs, rel=1e-10)
    assert np.allclose(res.scales["sd"], sd, rtol=1e-10)


def test_label_draws_are_exact_bernoulli():
    """P(y = 1) = p, including p on the byte grid, just off it, 0 and 1 (the tie rule is exercised)."""
    from calibtest.core.conditional import counter_key
    from calibtest.core.counter_draws import counter_labels
    p = np.array([0.0, 1.0, 3 / 256, 3 / 256 + 1e-3, 0.5 - 1e-9, 0.999, 0.0005, 0.3])
    R = 200_000
    key = counter_key(5)[0]
    y = counter_labels(key, p, 0, 0, R)
    freq = y.mean(axis=0)
    se = np.sqrt(p * (1 - p) / R)
    assert freq[0] == 0.0 and freq[1] == 1.0
    assert np.all(np.abs(freq - p) <= 4.5 * se + 1e-12)
    # ties resolve to p's fractional part of the byte grid: rows at 0.0005 are drawn only through ties
    assert 0 < y[:, 6].sum()
    # the labels do not depend on how the draws are split into blocks
    split = np.vstack([counter_labels(key, p, 0, 0, 3), counter_labels(key, p, 0, 3, 5),
                       counter_labels(key, p, 0, 8, 1)])
    np.testing.assert_array_equal(split, y[:9])


def test_fast_path_equals_general_path():
    """The 1-dim draws' per-draw sums give the T* of the general per-partition path on the same labels."""
    from calibtest.core.conditional import _DrawPlan, counter_key, monte_carlo_draws
    from calibtest.core.counter_draws import counter_labels
    y, p = _data(150, 2)
    obs = np.where(y == 1, 0, 1)
    invs = [np.unique(np.floor(p * b), return_inverse=True)[1].ravel() for b in (2, 5, 13)]
    fast = monte_carlo_draws(p, invs, obs, n_draws=50, rng=4)
    ystar = counter_labels(counter_key(4)[0], p, 0, 0, 50)  # the same stream, row by row in row order
    cls = np.where(ystar, 0, 1).astype(np.int8)  # class 0: y = 1
    for i, inv in enumerate(invs):
        plan = _DrawPlan(p[:, None], inv, 150, False)
        slow = plan.statistics(cls[:, plan.rows])
        assert np.allclose(fast.null_draws[i], slow, rtol=1e-12, atol=1e-15)
        assert fast.statistic[i] == pytest.approx(plan.statistics(obs[plan.rows][None, :])[0], rel=1e-12)


@pytest.mark.parametrize("B", [5, 20])
def test_single_scale_equals_calib_ci_monte_carlo(B):
    y, p = _data(300, 3, power=1.3)
    res = ct.calib_test(y=y, probs=p, n_bins=B, n_draws=999, rng=5)
    ci = ct.calib_ci(y=y, probs=p, n_bins=B, null="monte-carlo", n_null_draws=999, rng=5)
    assert res.pvalue == ci.null_pvalue
    assert res.scales["T"][0] == pytest.approx(ci.estimate, rel=1e-10, abs=1e-15)
    assert res.n_bins == (B,)


def test_default_draws_are_shared_with_the_monte_carlo_null_of_calib_ci():
    # one default R for both: the single-B test and calib_ci's Monte Carlo null agree for a seed
    y, p = _data(300, 3, power=1.3)
    res = ct.calib_test(y=y, probs=p, n_bins=10, rng=5)
    ci = ct.calib_ci(y=y, probs=p, n_bins=10, null="monte-carlo", rng=5)
    assert res.n_draws == ci.monte_carlo.n_draws == 999
    assert res.pvalue == ci.null_pvalue
    # (R + 1) alpha is an integer at the usual levels, so the p-value grid holds alpha itself
    for alpha in (0.01, 0.05, 0.10):
        assert math.isclose((res.n_draws + 1) * alpha, round((res.n_draws + 1) * alpha))
    text = str(res.summary())
    assert "Label draws (R):" in text and "999" in text


def test_seed_reproduces_and_is_recorded():
    y, p = _data(200, 4, power=1.2)
    a = ct.calib_test(y=y, probs=p, rng=9, n_draws=300)
    b = ct.calib_test(y=y, probs=p, rng=9, n_draws=300)
    assert a.pvalue == b.pvalue and np.array_equal(a.null_draws, b.null_draws)
    c = ct.calib_test(y=y, probs=p, n_draws=300)
    assert isinstance(c.seed, int)
    d = ct.calib_test(y=y, probs=p, n_draws=300, rng=c.seed)
    assert d.pvalue == c.pvalue


def test_adaptive_grid_doubles_up_to_auto():
    assert adaptive_grid(472, 1) == (2, 4, 8, 16, 32, ct.auto_n_bins(472, 1))
    assert adaptive_grid(10, 1)[-1] == ct.auto_n_bins(10, 1)
    y, p = _data(472, 5)
    assert ct.calib_test(y=y, probs=p, n_draws=99, rng=1).n_bins == adaptive_grid(472, 1)


def test_size_smoke():
    """200 calibrated data sets: rejection rate within alpha + 3 s.e."""
    g = np.random.default_rng(123)
    N, rej = 200, 0
    for _ in range(N):
        p = g.beta(2, 5, 100)
        y = (g.random(100) < p).astype(int)
        rej += ct.calib_test(y=y, probs=p, n_draws=99, rng=int(g.integers(2**31))).reject
    assert rej / N <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / N)


def test_power_on_squared_predictions():
    y, p = _data(472, 6, power=1.25)
    res = ct.calib_test(y=y, probs=p, rng=2)
    assert res.pvalue_max_z <= res.pvalue_bonferroni + 1e-12 or res.pvalue < 0.05


@pytest.mark.parametrize("k", [1, 2, "full"])
def test_multiclass_targets(k):
    g = np.random.default_rng(7)
    P = g.dirichlet([2, 1, 1], 200)
    y = np.array([g.choice(3, p=row) for row in P])
    res = ct.calib_test(y=y, probs=P, k=k, n_draws=199, rng=1)
    assert 0 < res.pvalue <= 1 and res.null_draws.shape == (len(res.scales), 199)
    one = ct.calib_test(y=y, probs=P, k=k, n_bins=res.n_bins[-1], n_draws=199, rng=1)
    ci = ct.calib_ci(y=y, probs=P, k=k, n_bins=res.n_bins[-1], null="monte-carlo", n_null_draws=199, rng=1)
    assert one.pvalue == ci.null_pvalue


def test_formula_and_display():
    y, p = _data(200, 8)
    df = pd.DataFrame({"y": y, "p": p})
    res = ct.calib_test("y ~ p", data=df, rng=3, n_draws=199)
    text = str(res.summary())
    widths = {len(line) for line in text.splitlines()}
    assert len(widths) == 1 and max(widths) <= 80
    assert "\n" not in repr(res) and repr(res).startswith("<CalibrationTestResult")
    assert "<table" in res._repr_html_()
    d = res.to_dict()
    assert d["pvalue"] == res.pvalue and d["n_bins"] == list(res.n_bins)
    stat, pval = res
    assert pval == res.pvalue
    assert "calib_test(" in res.call


@pytest.mark.parametrize("option,error", [
    (dict(n_bins="auto"), ValueError), (dict(n_bins=0), ValueError), (dict(n_bins=2.5), TypeError),
    (dict(null="conditional"), ValueError), (dict(alpha=1.5), ValueError), (dict(n_draws=0), ValueError),
    (dict(combine="fisher"), ValueError), (dict(partitions="quantile"), ValueError),
    (dict(partitions=None), ValueError), (dict(spiegelhalter="yes"), TypeError),
])
def test_bad_arguments(option, error):
    y, p = _data(50, 9)
    with pytest.raises(error):
        ct.calib_test(y=y, probs=p, **option)


def test_files_are_read_in_chunks(tmp_path):
    """A file is tested chunk by chunk (tests/streams/test_multiscale.py); arrays without a formula are not."""
    y, p = _data(50, 9)
    path = tmp_path / "d.csv"
    pd.DataFrame({"y": y, "p": p}).to_csv(path, index=False)
    res = ct.calib_test("y ~ p", data=str(path), rng=1, n_draws=99)
    assert res.n == 50 and res.n_bins == ct.calib_test(y=y, probs=p, rng=1, n_draws=99).n_bins
    with pytest.raises(TypeError, match="formula"):
        ct.calib_test(data=str(path))


def test_study_smoke(tmp_path):
    """The study script end to end on 3 data sets per row of two designs."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = root / "vignettes" / "calib_test_study.py"
    if not script.exists():
        pytest.skip("vignettes/ not present")
    out = tmp_path / "study.md"
    env = dict(os.environ, PYTHONPATH=str(root))
    subprocess.run([sys.executable, str(script), "--reps", "3", "--draws", "49", "--n", "100",
                    "--designs", "calibrated Beta(2,5);slope 0.7", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300, env=env)
    text = out.read_text()
    assert "| calibrated Beta(2,5) | size | 100 |" in text and "| slope 0.7 | power | 100 |" in text


# --------------------------------------------------------------------------- equal-mass scales
def _quantile_slow(values, q):
    """Linear-interpolation quantile (numpy's default) by hand: position q (n - 1) in the sorted values."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def _equal_mass_slow(p, B):
    """Bin = #{edges <= p}, edges at the j/B quantiles; empty bins dropped, the others renumbered (loops)."""
    edges = [_quantile_slow(list(p), j / B) for j in range(1, B)]
    raw = [sum(e <= x for e in edges) for x in p]
    used = sorted(set(raw))
    return [used.index(r) for r in raw]


def test_equal_mass_bins_hand_computed_with_ties():
    from calibtest.checks.multiscale import equal_mass_bins
    # sorted: .1 .2 .2 .2 .3 .5 .9 .9; quartile positions 1.75, 3.5, 5.25 -> edges .2, .25, .6;
    # a row on an edge goes above it: .1 -> 0, .2 -> 1, .3 and .5 -> 2, .9 -> 3
    p = np.array([0.3, 0.1, 0.2, 0.2, 0.2, 0.5, 0.9, 0.9])
    inv, m = equal_mass_bins(p, 4)
    assert inv.tolist() == [2, 0, 1, 1, 1, 2, 3, 3] and m == 4
    # five tied rows out of eight: edges .2, .2, .475; the tie and .4 share bin 2, .7 and .8 bin 3,
    # bins 0 and 1 are empty and dropped
    p = np.array([0.2, 0.2, 0.7, 0.2, 0.2, 0.2, 0.4, 0.8])
    inv, m = equal_mass_bins(p, 4)
    assert inv.tolist() == [0, 0, 1, 0, 0, 0, 0, 1] and m == 2
    # random data with ties against the slow rule, and the bins depend on p only (row order irrelevant)
    g = np.random.default_rng(0)
    p = np.round(g.beta(0.5, 10, 300), 3)
    for B in (2, 4, 8, 16, 37):
        inv, m = equal_mass_bins(p, B)
        assert inv.tolist() == _equal_mass_slow(p, B) and m == inv.max() + 1
        perm = g.permutation(p.size)
        assert np.array_equal(equal_mass_bins(p[perm], B)[0], inv[perm])
        # equal predictions share a bin, bins are intervals of p
        order = np.argsort(p, kind="stable")
        assert np.all(np.diff(inv[order]) >= 0)
        assert np.all(np.diff(inv[order])[np.diff(p[order]) == 0] == 0)


def _t_groups(y, p, groups):
    """Debiased T on an arbitrary row-to-bin assignment (loops)."""
    n, total = len(y), 0.0
    for b in set(groups):
        u = [y[a] - p[a] for a in range(n) if groups[a] == b]
        c = len(u)
        if c >= 2:
            total += (sum(u) ** 2 - sum(x * x for x in u)) / (c - 1)
    return total / n


def _var_groups(p, groups):
    n, total = len(p), 0.0
    for b in set(groups):
        v = [p[a] * (1 - p[a]) for a in range(n) if groups[a] == b]
        c = len(v)
        if c >= 2:
            total += 2 * (sum(v) ** 2 - sum(x * x for x in v)) / (c - 1) ** 2
    return total / n ** 2


def test_both_families_pvalue_equals_slow_reference():
    """Max-z over equal-width and equal-mass scales, the same draws scored by a per-scale loop."""
    g = np.random.default_rng(21)
    p = g.beta(0.5, 10, 60)
    y = (g.random(60) < np.sqrt(p)).astype(int)
    grid, R, seed = (2, 4, 7), 300, 13
    res = ct.calib_test(y=y, probs=p, n_bins=list(grid), n_draws=R, rng=seed, partitions="both",
                        spiegelhalter=False)
    groups = [[min(int(x * B), B) for x in p] for B in grid] + [_equal_mass_slow(p, B) for B in grid]
    assert res.scales["partition"].tolist() == ["equal-width"] * 3 + ["equal-mass"] * 3
    assert res.scales["n_bins"].tolist() == list(grid) * 2
    sd = [math.sqrt(_var_groups(p, gr)) for gr in groups]
    z_obs = [_t_groups(y, p, gr) / s for gr, s in zip(groups, sd)]
    # equal-mass B = 2 splits 30/30, so every row is drawn
    zstars = [max(_t_groups(ys, p, gr) / s for gr, s in zip(groups, sd)) for ys in _explicit_draws(p, R, seed)]
    np.testing.assert_allclose(res.scales["sd"], sd, rtol=1e-10)
    np.testing.assert_allclose(res.scales["z"], z_obs, rtol=1e-9)
    np.testing.assert_allclose(res.null_draws.max(axis=0), zstars, rtol=1e-9, atol=1e-12)
    count = sum(z >= max(z_obs) - 1e-12 for z in zstars)
    assert res.pvalue == pytest.approx((1 + count) / (R + 1), abs=1e-12)
    # the equal-mass-only test scores the same rows' draws on its own scales
    mass = ct.calib_test(y=y, probs=p, n_bins=list(grid), n_draws=R, rng=seed, partitions="equal-mass",
                         spiegelhalter=False)
    zm = [max(_t_groups(ys, p, gr) / s for gr, s in zip(groups[3:], sd[3:])) for ys in _explicit_draws(p, R, seed)]
    assert mass.pvalue == pytest.approx((1 + sum(z >= max(z_obs[3:]) - 1e-12 for z in zm)) / (R + 1), abs=1e-12)


@pytest.mark.parametrize("partitions", ["equal-mass", "both"])
def test_size_smoke_equal_mass_rare_events(partitions):
    """200 calibrated rare-event data sets (p ~ Beta(0.5, 10), n = 100): rejection within alpha + 3 s.e."""
    g = np.random.default_rng(321)
    N, rej = 200, 0
    for _ in range(N):
        p = g.beta(0.5, 10, 100)
        y = (g.random(100) < p).astype(int)
        rej += ct.calib_test(y=y, probs=p, n_draws=99, rng=int(g.integers(2**31)), partitions=partitions).reject
    # exact level: P(p <= 0.05) = floor(0.05 * 100) / 100 = 0.05
    assert rej / N <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / N)


def test_partitions_default_and_display():
    y, p = _data(300, 12)
    default = ct.calib_test(y=y, probs=p, n_draws=99, rng=1)
    assert default.partitions == "equal-width" and set(default.scales["partition"]) == {"equal-width"}
    assert default.to_dict()["partitions"] == "equal-width"
    both = ct.calib_test(y=y, probs=p, n_draws=99, rng=1, partitions="both")
    L = len(adaptive_grid(300, 1))
    assert both.scales["partition"].tolist() == ["equal-width"] * L + ["equal-mass"] * L
    d = both.to_dict()
    assert d["partitions"] == "both" and d["partition"] == both.scales["partition"].tolist()
    text = str(both.summary())
    assert "equal-mass B = 2" in text and "Partitions:" in text
    assert "partitions='equal-mass'" in ct.calib_test(y=y, probs=p, n_draws=99, rng=1,
                                                       partitions="equal-mass").call


@pytest.mark.parametrize("k,partitions", [(2, "both"), (2, "equal-mass"), ("full", "equal-mass")])
def test_equal_mass_refused_in_dimension_two(k, partitions):
    g = np.random.default_rng(7)
    P = g.dirichlet([2, 1, 1], 100)
    y = (P.cumsum(axis=1) < g.random((100, 1))).sum(axis=1)
    with pytest.raises(ValueError, match="partitions"):
        ct.calib_test(y=y, probs=P, k=k, n_draws=99, rng=1, partitions=partitions)
    res = ct.calib_test(y=y, probs=P, k=k, n_draws=99, rng=1)  # the default: equal-width
    assert res.partitions == "equal-width" and set(res.scales["partition"]) == {"equal-width"}


def _run_vignette(name: str, args: list) -> tuple:
    """(stdout, path) of ``vignettes/NAME.py`` run with ``args`` in a subprocess (skips without vignettes/)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = root / "vignettes" / f"{name}.py"
    if not script.exists():
        pytest.skip("vignettes/ not present")
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, str(script)] + args, check=True, capture_output=True, text=True,
                         timeout=300, env=env).stdout
    return out, script


def test_equal_mass_study_smoke(tmp_path):
    """The equal-mass study script end to end on 3 data sets per cell, and its variant p-values."""
    import sys

    out, script = _run_vignette("equal_mass_scales", ["--reps", "3", "--draws", "49", "--n", "100", "--designs",
                                                      "calibrated Beta(2,5);rare: slope 0.7",
                                                      "--prefix", str(tmp_path / "s")])
    assert "| calibrated Beta(2,5) | 100 | 3 |" in out and "| rare: slope 0.7 | 100 | 3 |" in out
    # the per-family p-values read off one "both" result are the max-z tests over that family's rows
    sys.path.insert(0, str(script.parent))
    try:
        import equal_mass_scales as study
    finally:
        sys.path.remove(str(script.parent))
    y, p = _data(200, 30, power=1.4)
    res = ct.calib_test(y=y, probs=p, n_draws=99, rng=3, partitions="both", spiegelhalter=False)
    pv = study.variant_pvalues(res)
    fam = res.scales["partition"].to_numpy()
    for v in ("equal-width", "equal-mass"):
        zo, zn = res.scales["z"].to_numpy()[fam == v].max(), res.null_draws[fam == v].max(axis=0)
        assert pv[v] == pytest.approx((1 + sum(x >= zo - 1e-12 for x in zn)) / 100, abs=1e-12)


# --------------------------------------------------------------------------- Spiegelhalter's z as a component
def _spiegelhalter_slow(y, p):
    """z_S = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)), term by term."""
    num = sum((y[a] - p[a]) * (1 - 2 * p[a]) for a in range(len(p)))
    var = sum((1 - 2 * p[a]) ** 2 * p[a] * (1 - p[a]) for a in range(len(p)))
    return num / math.sqrt(var)


def test_spiegelhalter_component_equals_slow_explicit_implementation():
    """Observed z_S, every drawn z*_S and the combined p-value, from labels rebuilt one byte at a time."""
    y, p = _data(60, 1, power=1.5)
    grid, R, seed = (2, 4, 7), 300, 11
    res = ct.calib_test(y=y, probs=p, n_bins=list(grid), n_draws=R, rng=seed)  # default: z_S included
    zs = _spiegelhalter_slow(y, p)
    assert res.spiegelhalter_z == pytest.approx(zs, rel=1e-10)
    assert res.spiegelhalter_z == pytest.approx(ct.val_prob(y=y, probs=p).spiegelhalter_z, rel=1e-10)
    ystars = _explicit_draws(p, R, seed)
    zs_star = np.array([_spiegelhalter_slow(ys, p) for ys in ystars])
    np.testing.assert_allclose(res.spiegelhalter_draws, zs_star, rtol=1e-9, atol=1e-12)
    sd = [math.sqrt(_var_explicit(p, B)) for B in grid]
    zb_star = np.array([[_t_explicit(ys, p, B) / s for B, s in zip(grid, sd)] for ys in ystars])
    np.testing.assert_allclose(res.null_draws.T, zb_star, rtol=1e-9, atol=1e-12)
    obs = max(max(_t_explicit(y, p, B) / s for B, s in zip(grid, sd)), abs(zs))
    star = np.maximum(zb_star.max(axis=1), np.abs(zs_star))
    assert res.statistic == pytest.approx(obs, rel=1e-10)
    assert res.pvalue == pytest.approx((1 + np.sum(star >= obs - 1e-12)) / (R + 1), abs=1e-12)
    assert res.pvalue_spiegelhalter == pytest.approx((1 + np.sum(np.abs(zs_star) >= abs(zs) - 1e-12)) / (R + 1),
                                                     abs=1e-12)
    # Bonferroni has one more component: the L scales and z_S
    p_comp = list(res.scales["pvalue"]) + [res.pvalue_spiegelhalter]
    assert res.pvalue_bonferroni == pytest.approx(min(1.0, 4 * min(p_comp)), abs=1e-12)
    # every row is drawn either way here, so spiegelhalter=False scores the same draws on the scales alone
    off = ct.calib_test(y=y, probs=p, n_bins=list(grid), n_draws=R, rng=seed, spiegelhalter=False)
    np.testing.assert_array_equal(off.null_draws, res.null_draws)
    zb_obs = max(_t_explicit(y, p, B) / s for B, s in zip(grid, sd))
    assert off.pvalue == pytest.approx((1 + np.sum(zb_star.max(axis=1) >= zb_obs - 1e-12)) / (R + 1), abs=1e-12)
    assert off.spiegelhalter_z is None and off.pvalue_spiegelhalter is None and off.spiegelhalter_draws is None


def test_spiegelhalter_draws_on_the_general_path_and_segment_identity():
    """Bins that are not intervals of p draw z*_S from the same counter stream (the slow explicit draws);
    the fast path's z_S is the sum of the segments' W_s; z*_S has mean 0 and sd 1 given p (within Monte
    Carlo error)."""
    from calibtest.core.conditional import monte_carlo_draws
    g = np.random.default_rng(3)
    n, R = 80, 4000
    p = g.beta(2, 5, n)
    y = (g.random(n) < p).astype(int)
    obs = np.where(y == 1, 0, 1)
    scrambled = g.integers(0, 5, n)  # bins that are not intervals of p: the general path
    slow = monte_carlo_draws(p, [scrambled], obs, n_draws=50, rng=8, spiegelhalter=True)
    expected = [_spiegelhalter_slow(row, p) for row in _explicit_draws(p, 50, 8)]
    np.testing.assert_allclose(slow.spiegelhalter_draws, expected, rtol=1e-10, atol=1e-12)
    assert slow.spiegelhalter == pytest.approx(_spiegelhalter_slow(y, p), rel=1e-10)
    fast = monte_carlo_draws(p, [np.minimum((p * 4).astype(int), 3)], obs, n_draws=R, rng=8, spiegelhalter=True)
    assert fast.spiegelhalter == pytest.approx(_spiegelhalter_slow(y, p), rel=1e-10)
    se = 1 / math.sqrt(R)
    assert abs(fast.spiegelhalter_draws.mean()) < 4 * se
    assert abs(fast.spiegelhalter_draws.std() - 1) < 4 * se * math.sqrt(1.5)  # sd of a sample sd ~ sqrt(kurt/4R)
    without = monte_carlo_draws(p, [np.minimum((p * 4).astype(int), 3)], obs, n_draws=R, rng=8)
    assert without.spiegelhalter is None and without.spiegelhalter_draws is None
    with pytest.raises(ValueError, match="spiegelhalter"):
        monte_carlo_draws(np.column_stack([p, 1 - p]), [scrambled], obs, rng=1, spiegelhalter=True)


def test_spiegelhalter_default_per_target_and_refusal():
    g = np.random.default_rng(7)
    P = g.dirichlet([2, 1, 1], 200)
    y = (P.cumsum(axis=1) < g.random((200, 1))).sum(axis=1)
    top1 = ct.calib_test(y=y, probs=P, k=1, n_draws=99, rng=1)
    conf, correct = P.max(axis=1), (y == P.argmax(axis=1)).astype(int)
    assert top1.spiegelhalter_z == pytest.approx(_spiegelhalter_slow(correct, conf), rel=1e-10)
    for k in (2, "full"):
        res = ct.calib_test(y=y, probs=P, k=k, n_draws=99, rng=1)
        assert res.spiegelhalter_z is None and res.pvalue_spiegelhalter is None
        assert res.pvalue == ct.calib_test(y=y, probs=P, k=k, n_draws=99, rng=1, spiegelhalter=False).pvalue
        with pytest.raises(ValueError, match="spiegelhalter"):
            ct.calib_test(y=y, probs=P, k=k, n_draws=99, rng=1, spiegelhalter=True)
    # an int n_bins is the single-scale test unless asked
    yb, p = _data(200, 4)
    single = ct.calib_test(y=yb, probs=p, n_bins=10, n_draws=99, rng=1)
    assert single.spiegelhalter_z is None
    both = ct.calib_test(y=yb, probs=p, n_bins=10, n_draws=99, rng=1, spiegelhalter=True)
    assert both.spiegelhalter_z == pytest.approx(_spiegelhalter_slow(yb, p), rel=1e-10)
    assert both.statistic == pytest.approx(max(both.scales["z"][0], abs(both.spiegelhalter_z)), rel=1e-12)


def test_spiegelhalter_display_dict_and_call():
    y, p = _data(300, 12, power=1.3)
    res = ct.calib_test(y=y, probs=p, n_draws=99, rng=1)
    d = res.to_dict()
    assert d["spiegelhalter_z"] == res.spiegelhalter_z and d["pvalue_spiegelhalter"] == res.pvalue_spiegelhalter
    assert len(res.scales) == len(res.n_bins)  # the scales table holds the binned scales only
    text = str(res.summary())
    assert "Spiegelhalter z_S" in text and "max over both" in text
    assert "spiegelhalter" not in res.call
    off = ct.calib_test(y=y, probs=p, n_draws=99, rng=1, spiegelhalter=False)
    assert "spiegelhalter=False" in off.call and "Spiegelhalter z_S" not in str(off.summary())
    assert off.to_dict()["spiegelhalter_z"] is None


def test_spiegelhalter_study_smoke(tmp_path):
    """The Spiegelhalter-component study script end to end on 3 data sets per cell."""
    out, _ = _run_vignette("spiegelhalter_component", ["--size-reps", "3", "--power-reps", "3", "--draws", "49",
                                                       "--n", "100", "--prefix", str(tmp_path / "s")])
    assert "| calibrated Beta(2,5) | 100 | 3 | 49 |" in out and "| slope 0.7 | 100 | 3 | 49 |" in out


def test_smallest_possible_pvalue_is_named():
    # strongly miscalibrated: no draw reaches the observed statistic, so p = 1 / (R + 1)
    y, p = _data(472, 0)
    res = ct.calib_test(y=y, probs=p ** 2, rng=1, n_draws=199)
    assert res.pvalue == 1 / 200 and int(np.sum(res.null_draws.max(axis=0) >= res.statistic)) == 0
    assert "the smallest p-value 199 label draws can give" in " ".join(str(res.summary()).split())
    ev = ct.evidence(y=y, probs=p ** 2, rng=1)
    assert ev.test.pvalue == 1 / (ev.test.n_draws + 1)
    assert f"the smallest p-value {ev.test.n_draws} label draws can give" in ev.conclusion()
    # a p-value above the floor says nothing of the kind
    calm = ct.calib_test(y=y, probs=p, rng=1, n_draws=199)
    assert calm.pvalue > 1 / 200 and "smallest p-value" not in " ".join(str(calm.summary()).split())


def test_a_streamed_test_sees_the_callers_functions(tmp_path):
    # The formula's names are looked up where the user called calib_test, for every streamed pass (the equal-mass
    # scales and by= had looked one frame too low and refused a local function as a missing column).
    rng = np.random.default_rng(5)
    p = rng.uniform(0.05, 0.95, 2000)
    path = tmp_path / "rows.csv"
    pd.DataFrame({"y": rng.binomial(1, p), "p": p, "g": rng.integers(0, 2, 2000)}).to_csv(path, index=False)

    def same(x):
        return x

    for options in ({}, {"partitions": "both"}, {"by": "g"}):
        local = ct.calib_test("y ~ same(p)", data=path, rng=1, **options)
        plain = ct.calib_test("y ~ p", data=path, rng=1, **options)
        assert local.to_frame().equals(plain.to_frame()) if options.get("by") else local.pvalue == plain.pvalue
