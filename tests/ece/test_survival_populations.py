"""Survival outcomes beyond one model on one population: by= (censoring within each group), competing risks
(cause=, Aalen-Johansen weights), calib_compare of two risks at a horizon, and planning with censoring."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import calibtest as ct
from calibtest.api.calib_compare import survival_influence
from calibtest.core.censoring import aalen_johansen_cif
from calibtest.core.planning import ipcw_inflation, ipcw_second_moment

H = 5.0


def simulate(n, seed, *, censoring_rate=0.08, scale=1.0, causes=False):
    """Exponential event times with a covariate and independent exponential censoring (continuous times, no
    ties); with ``causes`` a competing cause 2 of constant hazard 0.05.  The risk is the model's risk by H
    (cause 1's cumulative incidence with ``causes``), off by ``scale`` in the cumulative hazard."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, n)
    lam1 = 0.1 * np.exp(x)
    lam2 = 0.05 if causes else 0.0
    total = lam1 + lam2
    t_event = rng.exponential(1 / total)
    cause = np.where(rng.random(n) < lam1 / total, 1, 2)
    t_cens = rng.exponential(1 / censoring_rate, n) if censoring_rate else np.full(n, np.inf)
    time = np.minimum(t_event, t_cens)
    event = np.where(t_event <= t_cens, cause, 0).astype(float)
    risk = np.clip(lam1 / total * (1 - np.exp(-total * H * scale)), 0.01, 0.99)
    return time, event, risk, x


# --------------------------------------------------------------------------- slow, obviously correct versions
def slow_g_before(time, observed):
    """G(X_i-) by the product-limit formula over the censorings (observed == 0), one row at a time."""
    out = np.empty(time.size)
    cens_times = np.unique(time[observed == 0])
    for i, s in enumerate(time):
        g = 1.0
        for u in cens_times:
            if u < s:
                g *= 1.0 - np.sum((time == u) & (observed == 0)) / np.sum(time >= u)
        out[i] = g
    return out


def slow_ipcw(time, event, horizon, cause=1):
    """Y~_i = 1{X_i <= t, cause} / G(X_i-), G the Kaplan-Meier of the censorings (code 0) only."""
    g = slow_g_before(time, (event != 0).astype(float))
    return np.array([1.0 / g[i] if event[i] == cause and time[i] <= horizon else 0.0 for i in range(time.size)])


def slow_t(u, bins):
    """(1/n) sum over bins of sum_{i != j} U_i U_j / (c_b - 1), with explicit outer products."""
    total = 0.0
    for b in np.unique(bins):
        v = u[bins == b]
        if v.size >= 2:
            total += (np.sum(np.outer(v, v)) - np.sum(v * v)) / (v.size - 1)
    return total / u.size


def slow_km_influence(time, observed, a):
    """phi_j = (1 - obs_j) A(X_j) / R(X_j) - sum_{u <= X_j} A(u) dC(u) / R(u)^2, one row and time at a time."""
    n = time.size
    times = np.unique(time)
    A = {u: np.sum(a[time > u]) for u in times}
    R = {u: np.sum(time >= u) for u in times}
    dC = {u: np.sum((time == u) & (observed == 0)) for u in times}
    phi = np.empty(n)
    for j in range(n):
        comp = sum(A[u] * dC[u] / R[u] ** 2 for u in times if u <= time[j])
        phi[j] = (1 - observed[j]) * A[time[j]] / R[time[j]] - comp
    return phi


def slow_influence(time, event, risk, bins, horizon):
    """IF_i = psi_i - mean(psi) + phi_i of the Kaplan-Meier IPCW T on fixed bins, with loops."""
    y = slow_ipcw(time, event, horizon)
    u = y - risk
    mu = np.array([u[bins == bins[i]].mean() for i in range(u.size)])
    psi = 2 * mu * u - mu * mu
    return psi - psi.mean() + slow_km_influence(time, (event != 0).astype(float), 2 * mu * y)


# --------------------------------------------------------------------------- by=
def _frame(n=900, seed=11):
    time, event, risk, x = simulate(n, seed)
    g = np.where(x < -0.5, "low", np.where(x < 0.5, "mid", "high"))
    return pd.DataFrame({"time": time, "event": event, "risk": risk, "g": g})


def test_by_gives_each_group_its_own_survival_result_with_censoring_estimated_within_it():
    df = _frame()
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, by="g")
    assert isinstance(res, ct.GroupedCalibrationResult)
    for level in ("low", "mid", "high"):
        sub = df[df.g == level].reset_index(drop=True)
        alone = ct.calib_ci("Surv(time, event) ~ risk", data=sub, horizon=H)
        got = res.groups[level]
        assert got.survival.n_censored == alone.survival.n_censored > 0
        assert (got.estimate, got.se, got.ci_lower, got.ci_upper, got.null_pvalue) == (
            alone.estimate, alone.se, alone.ci_lower, alone.ci_upper, alone.null_pvalue)
        # the group's G is its own rows' Kaplan-Meier, not the pooled one: the estimate is the loop's
        bins = got.partition.inverse
        u = slow_ipcw(sub.time.to_numpy(), sub.event.to_numpy(), H) - sub.risk.to_numpy()
        assert got.estimate == pytest.approx(slow_t(u, bins), rel=1e-10)
    pooled = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H)
    assert res.pooled.estimate == pooled.estimate and res.pooled.se == pooled.se


def test_by_protocol_global_and_heterogeneity_tests():
    df = _frame()
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, by="g")
    frame = res.to_frame()
    assert list(frame.index) == ["high", "low", "mid"] or set(frame.index) == {"high", "low", "mid"}
    events = df.assign(e=(df.event == 1) & (df.time <= H)).groupby("g").e.sum()
    assert all(frame.loc[lv, "events"] == events[lv] for lv in events.index)
    p = frame["pvalue"].to_numpy(dtype=float)
    assert res.global_pvalue == pytest.approx(min(1.0, 3 * p.min()), rel=1e-12)
    # Cochran's Q by hand, with each group's variance restricted to H0 (a common ECE^2 theta):
    # v_g(theta) = V2_g + F_g max(theta, 0) / P_g, theta the inverse-variance mean, found by fixed point
    from calibtest.ece.grouped_interval import survival_variance
    labels = list(frame.index)
    parts = [survival_variance(res.groups[lv]) for lv in labels]
    t = np.array([res.groups[lv].estimate for lv in labels])
    v2 = np.array([vp.second_order for vp in parts])
    slope = np.array([vp.first_order / vp.plugin if vp.plugin > 0 and vp.first_order > 0 else 0.0 for vp in parts])
    theta = float(np.sum(t / v2) / np.sum(1 / v2))
    for _ in range(500):
        w = 1 / (v2 + slope * max(theta, 0.0))
        theta = float(np.sum(w * t) / np.sum(w))
    w = 1 / (v2 + slope * max(theta, 0.0))
    q = float(np.sum(w * (t - theta) ** 2))
    assert res.heterogeneity_statistic == pytest.approx(q, rel=1e-8)
    # the table's standard errors are each group's own (unrestricted) variance
    assert frame["estimate_se"].to_numpy(dtype=float) == pytest.approx(
        np.sqrt([vp.unrestricted for vp in parts]), rel=1e-12)
    assert res.heterogeneity_df == 2
    text = str(res.summary())
    assert "censoring" in text and "estimated from its own rows" in text
    # the measures at the horizon (Crowson et al.'s CITL, the Kaplan-Meier O/E), not those of 0/1 outcomes
    for lv in labels:
        sub = df[df.g == lv]
        sev = ct.survival_calibration(sub.time.to_numpy(), sub.event.to_numpy(), sub.risk.to_numpy(), H)
        assert (frame.loc[lv, "citl"], frame.loc[lv, "oe"]) == (sev.citl, sev.oe)
    res.to_dict()
    import matplotlib
    matplotlib.use("Agg")
    res.plot_forest()


def test_heterogeneity_variance_includes_the_censoring_influence():
    """The group variance is the weighted formula with unit weights on the IPCW rows: sigma1^2 / n (which
    holds the Kaplan-Meier term) less the plug-in bias, plus V_0, computed here with explicit pairs."""
    from calibtest.ece.grouped_interval import survival_variance
    df = _frame(600, 5)
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, by="g", n_bins=4)
    for level, r in res.groups.items():
        u, bins, n = r.data.u[:, 0], r.partition.inverse, r.n
        v0 = bias = 0.0
        for b in np.unique(bins):
            x = u[bins == b]
            c = x.size
            if c < 2:
                continue
            pairs = np.sum(np.outer(x * x, x * x)) - np.sum(x ** 4)
            v0 += 2 * pairs / (n * (c - 1)) ** 2
            bias += 2 * 2 * pairs / (n * c) ** 2
        parts = survival_variance(r)
        assert (parts.second_order, parts.first_order, parts.bias) == pytest.approx((v0, r.sigma1_sq / n, bias), rel=1e-9)
        assert parts.unrestricted == pytest.approx(max(r.sigma1_sq / n - bias, 0) + v0, rel=1e-9)


def test_by_lists_a_group_without_events_by_the_horizon():
    df = _frame()
    df.loc[df.g == "low", "event"] = 0
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, by="g")
    assert res.groups["low"] is None
    assert "single outcome class" in res.reasons["low"]
    assert res.n_analysed == 2


# --------------------------------------------------------------------------- competing risks
def test_competing_risks_ipcw_mean_is_the_aalen_johansen_cif():
    from statsmodels.duration.survfunc import CumIncidenceRight
    time, event, risk, _ = simulate(600, 21, causes=True)
    assert np.unique(time).size == time.size  # continuous times: the identity is exact
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, cause=1, n_bins=1)
    ci = CumIncidenceRight(time, event.astype(int))
    at = np.searchsorted(ci.times, H, side="right") - 1
    sm_cif = ci.cinc[0][at]
    assert res.bin_table()["mean_outcome"].iloc[0] == pytest.approx(sm_cif, abs=1e-12)
    assert res.survival.km_risk == pytest.approx(sm_cif, abs=1e-12)
    assert aalen_johansen_cif(time, event, 1, H) == pytest.approx(sm_cif, abs=1e-12)
    # the IPCW outcomes are the loop's (competing events are not censorings of G)
    np.testing.assert_allclose(res.data.u[:, 0] + res.data.z[:, 0], slow_ipcw(time, event, H), atol=1e-12)
    assert "Competing risks" in str(res.summary()) and res.to_dict()["cause"] == 1


def test_competing_risks_limits():
    time, event, risk, _ = simulate(400, 22, causes=True)
    one = (event == 1).astype(float)
    # codes 0/1 only: cause=1 is the ordinary survival result, every number
    a = ct.calib_ci(time=time, event=one, probs=risk, horizon=H)
    b = ct.calib_ci(time=time, event=one, probs=risk, horizon=H, cause=1)
    assert (a.estimate, a.se, a.ci_lower, a.ci_upper, a.null_pvalue) == (b.estimate, b.se, b.ci_lower, b.ci_upper,
                                                                         b.null_pvalue)
    # nothing censored: the binary result of 1{T <= t, cause 1}
    time, event, risk, _ = simulate(400, 23, causes=True, censoring_rate=0)
    c = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, cause=1)
    d = ct.calib_ci(y=((event == 1) & (time <= H)).astype(int), probs=risk)
    assert (c.estimate, c.ci_lower, c.ci_upper, c.null_pvalue) == (d.estimate, d.ci_lower, d.ci_upper, d.null_pvalue)
    # treating the competing events as censorings is a different (biased) analysis
    time, event, risk, _ = simulate(400, 24, causes=True)
    e = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, cause=1)
    f = ct.calib_ci(time=time, event=(event == 1).astype(float), probs=risk, horizon=H)
    assert e.estimate != f.estimate


@pytest.mark.parametrize("kwargs, message", [
    ({"cause": 3}, "cause=3 is not an event code"),
    ({"cause": 0}, "cause must be"),
    ({}, r"coded 0 \(censored\) / 1 \(event\).*give cause= for competing risks"),
])
def test_competing_risks_input_errors(kwargs, message):
    time, event, risk, _ = simulate(200, 25, causes=True)
    with pytest.raises(ValueError, match=message):
        ct.calib_ci(time=time, event=event, probs=risk, horizon=H, **kwargs)
    with pytest.raises(ValueError, match="competing-risks codes"):
        ct.calib_ci(time=time, event=event + 0.5, probs=risk, horizon=H, cause=1)


def test_competing_risks_coverage_smoke():
    """A calibrated cumulative-incidence model (ECE^2(t) = 0): the 95% interval contains 0 in most studies."""
    hits = [ct.calib_ci(time=t, event=e, probs=r, horizon=H, cause=1).contains_zero
            for t, e, r, _ in (simulate(400, 100 + s, causes=True) for s in range(60))]
    assert np.mean(hits) >= 0.85  # 60 studies: 0.95 - 0.85 is 3.5 standard errors


# --------------------------------------------------------------------------- calib_compare
def test_survival_influence_is_the_result_sigma1_and_the_loop():
    time, event, risk, _ = simulate(150, 31)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, n_bins=4)
    infl = survival_influence(res)
    assert float(np.mean(infl ** 2)) == pytest.approx(res.sigma1_sq, rel=1e-12)
    np.testing.assert_allclose(infl, slow_influence(time, event, risk, res.partition.inverse, H), atol=1e-10)


def test_paired_comparison_variance_matches_loops_and_the_jackknife():
    time, event, risk_a, _ = simulate(300, 32)
    risk_b = np.clip(risk_a * 1.3, 0.01, 0.99)
    df = pd.DataFrame({"time": time, "event": event, "a": risk_a, "b": risk_b})
    cmp = ct.calib_compare("Surv(time, event) ~ a", "Surv(time, event) ~ b", data=df, horizon=H, n_bins=5,
                           variance="plugin")
    assert cmp.paired and cmp.result_a.survival.n_censored > 20
    bins_a = np.floor(risk_a * 5).astype(int)
    bins_b = np.floor(risk_b * 5).astype(int)
    d = slow_influence(time, event, risk_a, bins_a, H) - slow_influence(time, event, risk_b, bins_b, H)
    assert cmp.se_first_order ** 2 == pytest.approx(np.mean(d * d) / time.size, rel=1e-9)
    # the leave-one-out difference (Kaplan-Meier recomputed) follows the paired influence row by row
    n = time.size

    def diff(keep):
        t, e = time[keep], event[keep]
        y = slow_ipcw_fast(t, e)
        return slow_t(y - risk_a[keep], bins_a[keep]) - slow_t(y - risk_b[keep], bins_b[keep])

    full = diff(np.ones(n, bool))
    loo = np.array([diff(np.arange(n) != j) for j in range(n)])
    assert np.corrcoef((n - 1) * (full - loo), d)[0, 1] > 0.99
    assert cmp.estimate == pytest.approx(full, rel=1e-10)


def slow_ipcw_fast(time, event):
    """The IPCW outcomes with the package's Kaplan-Meier (checked against the loop above)."""
    from calibtest.core.censoring import censoring_km
    g = censoring_km(time, (event != 0).astype(float)).before(time)
    return np.where((event == 1) & (time <= H), 1.0 / g, 0.0)


def test_compare_survival_results_pairing_and_errors():
    time, event, risk, _ = simulate(300, 33)
    a = ct.calib_ci(time=time, event=event, probs=risk, horizon=H)
    b = ct.calib_ci(time=time, event=event, probs=np.clip(risk * 1.2, 0, 1), horizon=H)
    cmp = ct.calib_compare(a, b)
    assert cmp.paired and cmp.pairing == "identical times and events"
    assert "shared, when paired" in str(cmp.summary())
    time2, event2, risk2, _ = simulate(300, 34)
    c = ct.calib_ci(time=time2, event=event2, probs=risk2, horizon=H)
    cmp = ct.calib_compare(a, c)
    assert not cmp.paired
    assert cmp.se_first_order_plugin ** 2 == pytest.approx(a.sigma1_sq / a.n + c.sigma1_sq / c.n, rel=1e-12)
    with pytest.raises(ValueError, match="different horizons"):
        ct.calib_compare(a, ct.calib_ci(time=time, event=event, probs=risk, horizon=4.0))
    with pytest.raises(ValueError, match="survival results"):
        ct.calib_compare(a, ct.calib_ci(y=(event == 1).astype(int), probs=risk))
    with pytest.raises(ValueError, match="same times and events"):
        ct.calib_compare(a, c, paired=True)


def test_compare_without_censoring_is_the_binary_comparison():
    time, event, risk, _ = simulate(300, 35, censoring_rate=0)
    risk_b = np.clip(risk * 1.2, 0, 1)
    df = pd.DataFrame({"time": time, "event": event, "a": risk, "b": risk_b, "y": (time <= H).astype(int)})
    s = ct.calib_compare("Surv(time, event) ~ a", "Surv(time, event) ~ b", data=df, horizon=H)
    y = ct.calib_compare("y ~ a", "y ~ b", data=df)
    assert (s.estimate, s.se, s.pvalue) == (y.estimate, y.se, y.pvalue)


# --------------------------------------------------------------------------- planning
def test_ipcw_second_moment_matches_quadrature():
    from scipy.integrate import quad
    for q, f in [(0.2, 0.3), (0.5, 0.6), (0.05, 0.1), (0.4, 0.3296799539643607)]:
        a, b = -math.log1p(-q), -math.log1p(-f)
        value = quad(lambda s: a * math.exp(-a * s) / math.exp(-b * s), 0, 1)[0]
        assert ipcw_second_moment(np.array([q]), f)[0] == pytest.approx(value, rel=1e-9)
    q = np.array([0.1, 0.3, 0.6])
    assert ipcw_inflation(q, 1e-12) == pytest.approx(1.0, abs=1e-9)
    assert ipcw_inflation(q, 0.5) > 1


def test_planning_with_censoring():
    p = np.random.default_rng(0).beta(2, 5, 5000)
    plain = ct.calib_power(1500, probs=p, slope=0.7)
    cens = ct.calib_power(1500, probs=p, slope=0.7, censored_fraction=0.4)
    kappa = cens.inputs.censoring["kappa"]
    assert kappa == pytest.approx(ipcw_inflation(1 / (1 + np.exp(-0.7 * np.log(p / (1 - p)))), 0.4), rel=1e-12)
    assert cens.power < plain.power
    assert cens.n_bins == plain.n_bins  # the bins of the n rows analysed
    assert "kappa" in str(cens.summary()) and cens.to_dict()["inputs"]["censoring"]["censored_fraction"] == 0.4
    ss = ct.calib_sample_size(probs=p, slope=0.7, power=0.8, censored_fraction=0.4)
    ss0 = ct.calib_sample_size(probs=p, slope=0.7, power=0.8)
    assert ss.n > ss0.n
    with pytest.raises(ValueError, match="method='simulation'"):
        ct.calib_power(1500, probs=p, slope=0.7, censored_fraction=0.4, method="simulation")
    with pytest.raises(ValueError, match="censored_fraction"):
        ct.calib_power(1500, probs=p, slope=0.7, censored_fraction=1.2)


def test_planned_power_with_censoring_against_a_small_simulation():
    """The analytic power of a censored study against studies analysed by calib_ci (vignette-size runs in
    docs/survival.md: within 1.1 s.e. at 5% to 60% censoring)."""
    from scipy.special import expit, logit
    rng = np.random.default_rng(3)
    p = rng.beta(2, 5, 20000)
    n, f, reps = 1500, 0.4, 120
    planned = ct.calib_power(n, probs=p, slope=0.7, censored_fraction=f).power
    b = -math.log1p(-f)
    reject = 0
    for _ in range(reps):
        z = rng.choice(p, n)
        a = -np.log1p(-expit(0.7 * logit(z)))
        t, c = rng.exponential(1 / a), rng.exponential(1 / b, n)
        reject += not ct.calib_ci(time=np.minimum(t, c), event=(t <= c).astype(int), probs=z,
                                  horizon=1.0).contains_zero
    se = math.sqrt(planned * (1 - planned) / reps)
    assert abs(reject / reps - planned) < 3.5 * se


# --------------------------------------------------------------------------- weights=
def slow_weighted_g_before(time, observed, w):
    """The weighted product-limit G(X_i-): weights of the censorings over those at risk, one row at a time."""
    out = np.empty(time.size)
    cens_times = np.unique(time[observed == 0])
    for i, s in enumerate(time):
        g = 1.0
        for u in cens_times:
            if u < s:
                g *= 1.0 - np.sum(w[(time == u) & (observed == 0)]) / np.sum(w[time >= u])
        out[i] = g
    return out


def slow_weighted_t(u, bins, w):
    """T_w = sum_b (W_b / W) sum_{i != j} w_i w_j U_i U_j / sum_{i != j} w_i w_j, with explicit outer products."""
    total = 0.0
    for b in np.unique(bins):
        x, v = u[bins == b], w[bins == b]
        if x.size >= 2:
            num = np.sum(np.outer(v * x, v * x)) - np.sum((v * x) ** 2)
            den = np.sum(np.outer(v, v)) - np.sum(v * v)
            total += v.sum() / w.sum() * num / den
    return total


def test_weighted_km_is_the_km_of_repeated_rows():
    from calibtest.core.censoring import censoring_km
    time, event, _, _ = simulate(120, 41)
    time = np.round(time, 1)  # ties of events and censorings
    w = np.random.default_rng(0).integers(1, 4, time.size)
    weighted = censoring_km(time, event, w.astype(float)).before(time)
    repeated = censoring_km(np.repeat(time, w), np.repeat(event, w)).before(time)
    np.testing.assert_allclose(weighted, repeated, rtol=0, atol=1e-14)
    np.testing.assert_allclose(weighted, slow_weighted_g_before(time, event, w.astype(float)), rtol=0, atol=1e-14)


def test_case_weights_with_censoring_match_loops_and_the_jackknife():
    from calibtest.core.censoring import censoring_km, weighted_km_influence
    from calibtest.core.weighted import weighted_influence
    time, event, risk, _ = simulate(300, 42, scale=1.6, censoring_rate=0.15)
    w = np.random.default_rng(1).uniform(0.3, 3.0, time.size)
    B = 5
    bins = np.floor(risk * B).astype(int)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, weights=w, n_bins=B)
    assert res.survival.n_censored > 30 and res.weighting is not None

    def t_w(keep):
        t, e, ww = time[keep], event[keep], w[keep]
        g = slow_weighted_g_before(t, e, ww) if keep.all() else None
        if g is None:
            from calibtest.core.censoring import censoring_km
            g = censoring_km(t, e, ww).before(t)
        y = np.where((e == 1) & (t <= H), 1.0 / g, 0.0)
        return slow_weighted_t(y - risk[keep], bins[keep], ww)

    n = time.size
    full = t_w(np.ones(n, bool))
    assert res.estimate == pytest.approx(full, rel=1e-10)
    loo = np.array([t_w(np.arange(n) != j) for j in range(n)])
    empirical = (n - 1) * (full - loo)
    # the analytic influence: T_w's plus the weighted Kaplan-Meier term; its mean square is the result's sigma1^2
    inv, m, u = res.partition.inverse, res.partition.m, res.data.u[:, 0]
    km = censoring_km(time, event, w)
    y = np.where((event == 1) & (time <= H), 1.0 / km.before(time), 0.0)
    w_b = np.bincount(inv, weights=w, minlength=m)
    mu = np.bincount(inv, weights=w * u, minlength=m) / np.maximum(w_b, 1e-300)
    phi = weighted_km_influence(km, event, w, 2 * mu[inv] * (n * w / w_b.sum()) * y)
    psi = weighted_influence(inv, res.data.u, w, m)
    assert float(np.mean((psi + phi) ** 2)) == pytest.approx(res.sigma1_sq, rel=1e-12)
    assert np.corrcoef(empirical, psi + phi)[0, 1] > 0.99  # measured 0.995
    assert np.corrcoef(empirical, psi)[0, 1] < 0.98  # weights as known: 0.963
    # unit weights: the unweighted estimate (the weighted path, with the same G)
    unit = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, weights=np.ones(n), n_bins=B)
    plain = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, n_bins=B)
    assert unit.estimate == pytest.approx(plain.estimate, rel=1e-10)
    # the plug-in sigma1^2 agrees; the unweighted se (Kaplan-Meier G) takes unbiased bin moments plus V_0, which
    # the weighted path does not (yet): its se stays the plug-in one
    assert unit.sigma1_sq == pytest.approx(plain.sigma1_sq, rel=1e-8)
    assert unit.se == pytest.approx(math.sqrt(plain.sigma1_sq / n), rel=1e-8)
    assert plain.se ** 2 == pytest.approx(plain.survival.sigma1_sq_unbiased / n
                                          + plain.survival.second_order_variance, rel=1e-12)


def test_case_weights_without_censoring_are_the_weighted_binary_result_and_work_with_by():
    time, event, risk, x = simulate(400, 43, censoring_rate=0)
    w = np.random.default_rng(2).uniform(0.5, 2.0, time.size)
    s = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, weights=w)
    b = ct.calib_ci(y=(time <= H).astype(int), probs=risk, weights=w)
    assert (s.estimate, s.se, s.ci_lower, s.ci_upper) == (b.estimate, b.se, b.ci_lower, b.ci_upper)
    df = _frame()
    df["w"] = np.random.default_rng(3).uniform(0.5, 2.0, len(df))
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, by="g", weights="w")
    sub = df[df.g == "mid"].reset_index(drop=True)
    alone = ct.calib_ci("Surv(time, event) ~ risk", data=sub, horizon=H, weights="w")
    assert res.groups["mid"].estimate == alone.estimate and res.groups["mid"].se == alone.se
    with pytest.raises(ValueError, match="prevalence= cannot"):
        ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, prevalence=0.3)
    with pytest.raises(ValueError, match="weighted Cox"):
        ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, weights="w", censoring="cox",
                    censoring_covariates=["risk"])


def test_weighted_survival_without_censoring_before_the_horizon_uses_the_weighted_binary_null():
    """Every censoring after t: the default null, its p-value and the interval are the weighted binary call's
    (docs/survival.md), the Monte Carlo null given the predictions and the weights, not the asymptotic one."""
    rng = np.random.default_rng(7)
    n = 500
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(H / -np.log1p(-risk))
    c = H + rng.uniform(0.1, 5.0, n)  # every censoring after the horizon
    time, event, w = np.minimum(t, c), (t <= c).astype(int), rng.uniform(0.5, 2.0, n)
    assert not np.any((event == 0) & (time < H))
    y = ((time <= H) & (event == 1)).astype(int)
    for null in ("auto", "monte-carlo", "asymptotic"):
        s = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, weights=w, rng=1, null=null)
        b = ct.calib_ci(y=y, probs=risk, weights=w, rng=1, null=null)
        assert (s.estimate, s.se, s.ci_lower, s.ci_upper, s.null, s.null_pvalue) == (
            b.estimate, b.se, b.ci_lower, b.ci_upper, b.null, b.null_pvalue), null
    assert s.null == "asymptotic"
    default = ct.calib_ci(time=time, event=event, probs=risk, horizon=H, weights=w, rng=1)
    assert default.null == "monte-carlo"
    # with censoring before t the default stays the asymptotic test (no Bernoulli labels to draw)
    early = np.where(np.arange(n) % 5 == 0, H / 2, c)  # a fifth of the rows censored at t / 2
    cens = ct.calib_ci(time=np.minimum(t, early), event=(t <= early).astype(int), probs=risk, horizon=H, weights=w,
                       rng=1)
    assert cens.null == "asymptotic"


def test_competing_risks_carry_over_to_compare_and_by():
    time, event, risk, x = simulate(500, 44, causes=True)
    df = pd.DataFrame({"time": time, "status": event, "a": risk, "b": np.clip(risk * 1.3, 0, 1),
                       "g": np.where(x < 0, "low", "high")})
    cmp = ct.calib_compare("Surv(time, status) ~ a", "Surv(time, status) ~ b", data=df, horizon=H, cause=1)
    assert cmp.paired and cmp.result_a.survival.cause == 1
    d = survival_influence(cmp.result_a) - survival_influence(cmp.result_b)
    assert cmp.se_first_order_plugin ** 2 == pytest.approx(np.mean(d * d) / len(df), rel=1e-12)
    grouped = ct.calib_ci("Surv(time, status) ~ a", data=df, horizon=H, cause=1, by="g")
    alone = ct.calib_ci("Surv(time, status) ~ a", data=df[df.g == "low"].reset_index(drop=True), horizon=H,
                        cause=1)
    assert grouped.groups["low"].estimate == alone.estimate
    assert "cumulative incidence of cause 1" in str(grouped.summary())


# --------------------------------------------------------------------------- survival sites: O/E, CITL and slope
GBSG_T = 1826.25  # five years, in days
GBSG = pd.read_csv(Path(__file__).resolve().parents[1] / "reference" / "gbsg_sites.csv")

# Written by tests/reference/gbsg_sites.R (R 4.2.2, survival 3.5.3, metafor 3.8.1): each grade's O/E at t
# (Kaplan-Meier, Greenwood se of log O/E), CITL (log H_0(t) of coxph(Surv(th, dh) ~ offset(cll)), its se) and
# slope (coxph(Surv(th, dh) ~ cll), ties = "breslow"), and for each measure
#   m <- rma(yi, sei = se, method = "REML", control = list(threshold = 1e-12, maxiter = 1000))
#   half <- qt(0.975, m$k - 2) * sqrt(m$tau2 + m$se^2)   # Riley et al.'s prediction interval
R_SITES = {"I": dict(oe=0.62063910549530821, log_oe_se=0.220017580120512063, citl=-0.639912431459463638,
                     citl_se=0.257577314164383953, slope=0.42398846224377013, slope_se=0.56193706459960624),
           "II": dict(oe=1.04158576094787625, log_oe_se=0.053718731045914930, citl=0.072769890979568014,
                      citl_se=0.083419491886325678, slope=0.89377306779495025, slope_se=0.11783606624801178),
           "III": dict(oe=0.96441498217076416, log_oe_se=0.085663037945125448, citl=-0.033513679588276266,
                       citl_se=0.143747711172485360, slope=1.17585203331958366, slope_se=0.22805375139686418)}
# (estimate, se, ci.lb, ci.ub, tau2, pi lower, pi upper) of rma
R_POOLED = {"log_oe": (-0.072911643225632622, 0.10730295483628778, -0.28322157013948468, 0.13739828368821941,
                       0.022555036652901029, -2.4181948398829896, 2.2723715534317241),
            "citl": (-0.1378264501758624, 0.1898486011152179, -0.50992287087700017, 0.2342699705252754,
                     0.081916415211705951, -4.5017910397195182, 4.2261381393677935),
            "slope": (0.93546209070802677, 0.10291636116331745, 0.73374972940800787, 1.1371744520080458,
                      2.5026178268221118e-13, -0.37221426495063159, 2.243138446366685)}


@pytest.fixture(scope="module")
def gbsg_sites():
    return ct.calib_ci("Surv(time, cens) ~ risk", data=GBSG, horizon=GBSG_T, by="tgrade")


def test_each_survival_site_has_the_measures_of_its_rows_alone(gbsg_sites):
    """Each grade's O/E, CITL and slope at t (and their intervals) are those of the ungrouped survival call on the
    grade's rows alone, of survival_calibration on them, and of R's survival package."""
    frame = gbsg_sites.to_frame()
    z = float(sps.norm.isf(0.025))
    for site, ref in R_SITES.items():
        rows = GBSG[GBSG.tgrade == site].reset_index(drop=True)
        alone = ct.calib_ci("Surv(time, cens) ~ risk", data=rows, horizon=GBSG_T).kind.recalibration()
        sev = ct.survival_calibration(rows.time.to_numpy(), rows.cens.to_numpy(), rows.risk.to_numpy(), GBSG_T)
        r = frame.loc[site]
        assert (r["oe"], r["log_oe_se"]) == (alone["oe"].estimate, alone["oe"].se) == (sev.oe, sev.oe_se)
        assert (r["citl"], r["citl_se"]) == (alone["citl"].estimate, alone["citl"].se) == (sev.citl, sev.citl_se)
        assert (r["slope"], r["slope_se"]) == (alone["slope"].estimate, alone["slope"].se) == (sev.slope,
                                                                                               sev.slope_se)
        assert (r["oe_ci_lower"], r["oe_ci_upper"]) == pytest.approx(
            (ref["oe"] * math.exp(-z * ref["log_oe_se"]), ref["oe"] * math.exp(z * ref["log_oe_se"])), rel=1e-9)
        assert (r["citl_ci_lower"], r["slope_ci_upper"]) == pytest.approx(
            (ref["citl"] - z * ref["citl_se"], ref["slope"] + z * ref["slope_se"]), rel=1e-9)
        for col, value in ref.items():
            assert r[col] == pytest.approx(value, rel=1e-9), (site, col)
    pooled = ct.survival_calibration(GBSG.time.to_numpy(), GBSG.cens.to_numpy(), GBSG.risk.to_numpy(), GBSG_T)
    assert (gbsg_sites.pooled_measures["oe"], gbsg_sites.pooled_measures["citl"]) == (pooled.oe, pooled.citl)


def test_survival_sites_are_pooled_as_metafor_pools_them(gbsg_sites):
    meta = gbsg_sites.meta
    assert meta is gbsg_sites.meta_analysis() and meta.method == "REML"
    for m, (b, se, lo, hi, tau2, pi_lo, pi_hi) in R_POOLED.items():
        re = meta[m]
        assert re.k == 3
        assert (re.estimate, re.se, re.ci_lower, re.ci_upper, re.pi_lower, re.pi_upper) == pytest.approx(
            (b, se, lo, hi, pi_lo, pi_hi), abs=1e-8), m
        assert re.tau2 == pytest.approx(tau2, abs=1e-8), m
    # the sites' inputs are the table's, on the pooled scales
    frame = gbsg_sites.to_frame()
    assert meta["log_oe"].y == pytest.approx(np.log(frame["oe"].to_numpy(float)), rel=1e-15)
    assert meta["citl"].scale == "CITL (log cumulative hazard scale)"
    assert meta.to_frame(natural=True).loc["log_oe", "estimate"] == pytest.approx(math.exp(R_POOLED["log_oe"][0]),
                                                                                  rel=1e-8)
    text = str(gbsg_sites.summary()) + str(meta.summary())
    assert "not pooled" not in text and "0 of the 3 sites" not in text
    assert "Kaplan-Meier" in text and "Crowson" in text


def test_a_site_without_censoring_before_t_is_measured_at_the_horizon_like_the_others():
    """Every site's CITL and slope are one estimand (Crowson et al.'s, at t) when the sites together are censored
    before t; a site without censoring has them too, and its Kaplan-Meier O/E is the binary O/E exactly."""
    df = _frame()
    full = df.g == "mid"
    df.loc[full & (df.event == 0) & (df.time < H), "time"] = H + 1.0  # the mid site followed to beyond t
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=H, by="g")
    mid = df[full]
    assert not res.groups["mid"].kind.censored and res.groups["low"].kind.censored
    sev = ct.survival_calibration(mid.time.to_numpy(), mid.event.to_numpy(), mid.risk.to_numpy(), H)
    r = res.to_frame().loc["mid"]
    assert (r["citl"], r["slope"], r["oe"], r["log_oe_se"]) == (sev.citl, sev.slope, sev.oe, sev.oe_se)
    y = ((mid.event == 1) & (mid.time <= H)).to_numpy(float)
    o, n = y.sum(), y.size
    assert r["oe"] == pytest.approx(o / mid.risk.sum(), rel=1e-12)
    assert r["log_oe_se"] == pytest.approx(math.sqrt((1 - o / n) / o), rel=1e-12)  # Greenwood = binomial here
    assert res.meta["citl"].k == 3


def test_competing_risk_and_weighted_sites_say_why_they_have_no_measures():
    time, event, risk, x = simulate(600, 44, causes=True)
    df = pd.DataFrame({"time": time, "status": event, "a": risk, "w": np.random.default_rng(1).uniform(.5, 2, 600),
                       "g": np.where(x < -0.5, "low", np.where(x < 0.5, "mid", "high"))})
    competing = ct.calib_ci("Surv(time, status) ~ a", data=df, horizon=H, cause=1, by="g")
    weighted = ct.calib_ci("Surv(time, status) ~ a", data=df.assign(status=(df.status > 0).astype(int)),
                           horizon=H, weights="w", by="g")
    for res, words in ((competing, "competing risks (cause=1)"), (weighted, "the rows are weighted")):
        frame = res.to_frame()
        assert res.n_analysed == 3 and np.isfinite(frame["estimate"]).all()  # the ECE at t of every group
        assert frame[["oe", "citl", "slope"]].isna().all().all()
        assert set(res.measure_reasons) == {"log_oe", "citl", "slope"}
        notes = [n for n in res.notes() if words in n]
        assert len(notes) == 1 and notes[0].startswith("CITL, calibration slope and O/E of every analysed group")
        assert words in res.meta.left_out_measures["log_oe"] and "ece" in res.meta.pooled
    # the ungrouped competing-risk result gives the same reason to its acceptance criteria
    alone = ct.calib_ci("Surv(time, status) ~ a", data=df, horizon=H, cause=1)
    assert "competing risks (cause=1)" in alone.kind.recalibration()["oe"]
