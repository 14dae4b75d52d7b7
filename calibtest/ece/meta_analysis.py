r"""Calibration across sites: random-effects meta-analysis of the per-group calibration measures.

A grouped result of :func:`calibtest.calib_ci` with ``by=`` (one group per
site, hospital or centre) holds per group the calibration-in-the-large
(CITL), the calibration slope, the observed/expected ratio O/E and the
debiased ECE^2 estimate T, each with its standard error.
:func:`meta_analysis` pools them across the groups with the random-effects
model (TRIPOD-Cluster; Riley et al. 2011 [1]; Debray et al. 2017 [2])

    y_g = mu + u_g + e_g,   u_g ~ N(0, tau^2),   e_g ~ N(0, v_g),

with y_g the site's estimate on the scale below and v_g its squared
standard error, taken as known:

========= ================================= ===========================================
measure   y_g                               v_g
========= ================================= ===========================================
log_oe    log(O/E)                          (1 - O/n) / O (Debray et al. 2017, Table 1)
citl      the intercept a of logit P(y) =   its Wald variance (logistic fit)
          a + logit p
slope     the slope b of logit P(y) =       its Wald variance (logistic fit)
          a + b logit p
ece       T_g, the debiased estimate of     the first- plus second-order variance of T_g
          ECE^2 on the site's own bins      (the heterogeneity test's, ``calibtest.ece.grouped_interval``)
========= ================================= ===========================================

Survival sites (``calib_ci(..., horizon=t, by=)``) pool the measures at the
horizon their kind supplies: log(O/E) with O the Kaplan-Meier 1 - S(t) and
v_g = Var_Greenwood(S(t)) / (1 - S(t))^2, Crowson et al.'s CITL log H_0(t)
(log cumulative hazard scale, ``citl_scale``) with Breslow's variance and
the Cox slope on cloglog(risk) with its Wald variance.

The ECE is pooled on the ECE^2 scale: T_g is unbiased for the site's binned
ECE^2 and approximately normal when the site is miscalibrated, while
sqrt(T_g+) is neither (it is biased and piles up at 0).  The pooled ECE^2,
its interval and the prediction interval are reported on that scale and as
ECE = sqrt(max(., 0)).  A calibrated site's T_g is not normal (its law is a
centred weighted chi-square), so read the pooled ECE^2 of nearly calibrated
sites with care.  O/E is pooled on the log scale and reported as O/E.

Estimators of tau^2 (``method``):

* ``"REML"`` (default): restricted maximum likelihood by Fisher scoring as
  R's ``metafor::rma`` [3], tau^2 kept >= 0 by step halving, started at the
  Hedges estimator, iterated until the step is below 1e-12;
* ``"DL"``: DerSimonian and Laird's moment estimator max(0, (Q - (k - 1)) / C);
* ``"PM"``: Paule and Mandel's estimator (the root of the generalised Q
  statistic equal to k - 1, 0 when Q < k - 1; should statsmodels' iteration
  stop at 0 while Q > k - 1, the root is found by bracketing instead).

DL and PM are statsmodels' (``statsmodels.stats.meta_analysis.combine_effects``,
with DL truncated at 0 as every reference does).  Given tau^2, with
w_g = 1 / (v_g + tau^2):

* pooled mu = sum w_g y_g / sum w_g with s.e. (sum w_g)^(-1/2) and the Wald
  interval mu +- z_(1-alpha/2) s.e.; with ``hartung_knapp=True`` the
  Hartung-Knapp(-Sidik-Jonkman) s.e. (q / sum w_g)^(1/2),
  q = sum w_g (y_g - mu)^2 / (k - 1), and t on k - 1 degrees of freedom
  (metafor's ``test="knha"``);
* the 95% (1 - alpha) prediction interval for the measure in a new site,
  mu +- t_(k-2, 1-alpha/2) (tau^2 + s.e.^2)^(1/2) (Riley et al. 2011 [1]),
  defined for k >= 3 sites; for the ECE^2 the gamma predictive interval
  below instead;
* Cochran's Q = sum (y_g - y_FE)^2 / v_g on k - 1 degrees of freedom, and
  I^2 = tau^2 / (tau^2 + s^2), H^2 = (tau^2 + s^2) / s^2 with the typical
  within-site variance s^2 = (k - 1) sum w / ((sum w)^2 - sum w^2),
  w = 1 / v_g (metafor's definitions, which are Higgins and Thompson's
  (Q - (k - 1)) / Q for DL).

``tests/reference/meta_metafor.R`` checks every number against
``metafor::rma`` to 1e-6.

**Prediction interval of a new site's ECE^2.**  A site's ECE^2 is
non-negative and, across sites that differ by a random effect on the logit
scale, skewed (about a scaled chi-square on 1 df when the sites scatter
around calibration): the symmetric interval above misses the high sites
(90% intervals covered 0.78-0.83 with 8 sites, tau = 0.4 on the logit
scale), and REML's tau^2 of the skewed ECE^2 is low.  The interval is
therefore that of the gamma random-effects model

    theta_g ~ Gamma(mean m, shape kappa),   T_g | theta_g ~ N(theta_g, V_2,g + r_g theta_g),

whose within-site variance follows theta_g as the variance of T_g does (V_2,g
the second-order variance of the site's T, r_g its first-order variance per
unit of ECE^2, sigma_1^2 / (n plug-in estimate); with only the table of a
grouped result, V_2,g = v_g and r_g = 0): the sites' own estimated
variances, which grow with their own T_g, would pull the fit down.  The
prior is flat on log m and proportional to kappa^(-1/4) on log kappa, over a
grid (kappa from 0.03, a very skewed law, to 1000, nearly a common value):
uniform on the square root of the coefficient of variation c = 1 / sqrt(kappa)
of the sites' ECE^2.  A flat prior on log kappa puts most of its mass on
nearly common values, which a few noisy sites cannot rule out: its 90%
interval covered 0.84-0.86 of new sites at 8 sites with tau = 0.4 on the logit
scale.  The power 1/4 is chosen by measurement, between that prior and the
one uniform on c itself (power 1/2, the analogue of a uniform prior on a
between-groups standard deviation for few groups, Gelman [6]), which covered
0.91 there but made the interval 1.6 times as wide when every site has the
same ECE^2 (``vignettes/site_prediction.md``).  the marginal likelihood of each site
integrated over theta by the midpoint rule on 128 quantiles of the gamma,
the predictive law of a new site's ECE^2 is the posterior mixture of the
gammas, and the interval its alpha/2 and 1 - alpha/2 quantiles
(:func:`gamma_prediction_interval`).  Its lower end is 0 when the pooled
ECE^2's interval reaches 0 (sites that may all be calibrated), as 0 joins a
site's interval when its test does not reject.  Measured in
``vignettes/site_prediction.md``.

References
----------
.. [1] Riley, Higgins and Deeks, "Interpretation of random effects
       meta-analyses", BMJ 342 (2011) d549.
.. [2] Debray, Damen, Snell et al., "A guide to systematic review and
       meta-analysis of prediction model performance", BMJ 356 (2017) i6460.
.. [3] Viechtbauer, "Conducting meta-analyses in R with the metafor
       package", Journal of Statistical Software 36 (2010) 1-48;
       Viechtbauer, "Bias and efficiency of meta-analytic variance
       estimators in the random-effects model", Journal of Educational and
       Behavioral Statistics 30 (2005) 261-293.
.. [4] Hartung and Knapp, "A refined method for the meta-analysis of
       controlled clinical trials with binary outcome", Statistics in
       Medicine 20 (2001) 3875-3889.
.. [5] DerSimonian and Laird, "Meta-analysis in clinical trials",
       Controlled Clinical Trials 7 (1986) 177-188; Paule and Mandel,
       "Consensus values and weighting factors", Journal of Research of the
       National Bureau of Standards 87 (1982) 377-385.
.. [6] Gelman, "Prior distributions for variance parameters in hierarchical
       models", Bayesian Analysis 1 (2006) 515-534.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as _sps
from scipy.optimize import brentq as _brentq
from statsmodels.stats.meta_analysis import combine_effects

from calibtest.checks.evidence_table import kind_flag
from calibtest.display.format import fmt
from calibtest.options import OptionError, check_alpha, check_option
from calibtest.display.summary import CalibSummary, ResultDisplay

__all__ = ["MEASURES", "META_METHODS", "RandomEffects", "MetaAnalysisResult", "random_effects", "meta_analysis", "pool_sites", "Sites",
           "site_estimates", "gamma_prediction_interval", "ece_site_variances"]

#: The measures pooled across sites: name -> (label, scale pooled, label on the reported scale, null value
#: on the reported scale).
MEASURES = {
    "log_oe": ("O/E", "log(O/E)", "O/E", 1.0),
    "citl": ("CITL", "CITL (logit scale)", "CITL", 0.0),
    "slope": ("calibration slope", "slope", "slope", 1.0),
    "ece": ("ECE", "ECE^2", "ECE", 0.0),
}

#: The estimators of tau^2 (module docstring).
META_METHODS = ("REML", "DL", "PM")

_REML_TOL = 1e-12
_MAX_ITER = 1000


# --------------------------------------------------------------------------- the random-effects model
def _reml_tau2(y: np.ndarray, v: np.ndarray) -> tuple[float, int]:
    """REML tau^2 by Fisher scoring (metafor's ``rma(method="REML")``) and the iterations used.

    With W = diag(w), w = 1 / (v + tau^2), and P = W - w w^T / sum w, the step
    is (y^T P P y - tr P) / tr(P P); a step that would make tau^2 negative is
    halved until it does not.  P is never formed: P y, tr P and tr(P P) are
    sums over the k sites.
    """
    k = y.size
    tau2 = max(0.0, float(np.var(y, ddof=1)) - float(np.mean(v)))  # Hedges' estimator, metafor's start
    for it in range(1, _MAX_ITER + 1):
        w = 1.0 / (v + tau2)
        sw, sw2 = w.sum(), np.sum(w * w)
        py = w * y - w * np.dot(w, y) / sw
        tr_p = sw - sw2 / sw
        tr_pp = sw2 - 2.0 * np.sum(w ** 3) / sw + (sw2 / sw) ** 2
        step = (np.dot(py, py) - tr_p) / tr_pp
        while tau2 + step < 0.0 and abs(step) > _REML_TOL * 1e-3:
            step /= 2.0
        new = max(tau2 + step, 0.0)
        if abs(new - tau2) < _REML_TOL * max(1.0, tau2):
            return new, it
        tau2 = new
    raise ValueError(f"the REML estimate of tau^2 did not converge in {_MAX_ITER} Fisher-scoring steps over "
                     f"{k} sites; use method='PM' or 'DL'")


def _tau2(y: np.ndarray, v: np.ndarray, method: str) -> tuple[float, int]:
    if method == "REML":
        return _reml_tau2(y, v)
    with np.errstate(invalid="ignore"):  # statsmodels' DL is not truncated: its random-effects s.e. can be NaN
        if method == "DL":
            return max(float(combine_effects(y, v, method_re="dl").tau2), 0.0), 1
        tau2 = max(float(combine_effects(y, v, method_re="pm", atol=1e-9, maxiter=_MAX_ITER).tau2), 0.0)
    k = y.size

    def excess(t: float) -> float:  # the generalised Q minus its expectation k - 1, decreasing in t
        w = 1.0 / (v + t)
        return float(np.dot(w, (y - np.dot(w, y) / w.sum()) ** 2)) - (k - 1)

    if tau2 == 0.0 and excess(0.0) > 0.0:
        # statsmodels' iteration returns 0 when a step lands past the root (rounding near it): solve by bracketing
        hi = max(float(np.var(y)), 1e-300)
        while excess(hi) > 0.0:
            hi *= 2.0
        tau2 = float(_brentq(excess, 0.0, hi, xtol=1e-15 * hi, rtol=4 * np.finfo(float).eps))
    return tau2, 1


@dataclass(frozen=True, eq=False)
class RandomEffects:
    """The random-effects pooling of one measure across sites (see the module docstring).

    Numbers are on the scale pooled (``scale``): log(O/E), CITL, slope or
    ECE^2; :meth:`natural` gives them as O/E or ECE.

    Attributes
    ----------
    measure, scale : str
    labels : tuple
        The sites pooled (group labels), in the order of ``y``.
    y, v : ndarray
        Each site's estimate and its variance (squared standard error).
    k : int
        Sites pooled.
    method : {"REML", "DL", "PM"}
    hartung_knapp : bool
    alpha : float
    tau2 : float
        Between-site variance tau^2 (>= 0).
    estimate, se : float
        Pooled (random-effects) estimate mu and its standard error (the
        Hartung-Knapp one with ``hartung_knapp``).
    statistic, pvalue : float
        (mu - null) / se and its two-sided p-value (normal, or t on k - 1 df); the null is
        O/E = 1, CITL = 0, slope = 1, ECE^2 = 0.
    ci_lower, ci_upper : float
        The 1 - alpha interval of mu.
    pi_lower, pi_upper : float
        The 1 - alpha prediction interval for a new site (NaN for k < 3).
    q, q_df, q_pvalue : float, int, float
        Cochran's Q of homogeneity, k - 1 and the chi-square p-value.
    i2, h2 : float
        I^2 (a fraction, not a percentage) and H^2.
    fixed_estimate, fixed_se : float
        The common-effect (inverse-variance) estimate and its s.e.
    weights : ndarray
        Each site's share sum w_g / sum w of the pooled estimate.
    iterations : int
        Fisher-scoring steps of REML (1 for DL and PM).
    pi_method : {"normal", "gamma"}
        How the prediction interval was built: mu +- t sqrt(tau^2 + se^2), or
        the gamma predictive of the ECE^2 (module docstring).
    """

    measure: str
    scale: str
    labels: tuple
    y: np.ndarray = field(repr=False)
    v: np.ndarray = field(repr=False)
    k: int
    method: str
    hartung_knapp: bool
    alpha: float
    tau2: float
    estimate: float
    se: float
    statistic: float
    pvalue: float
    ci_lower: float
    ci_upper: float
    pi_lower: float
    pi_upper: float
    q: float
    q_df: int
    q_pvalue: float
    i2: float
    h2: float
    fixed_estimate: float
    fixed_se: float
    weights: np.ndarray = field(repr=False)
    iterations: int = 1
    pi_method: str = "normal"

    @property
    def tau(self) -> float:
        """Between-site standard deviation tau."""
        return math.sqrt(self.tau2)

    def natural(self, value: float) -> float:
        """``value`` (on the pooled scale) on the reported scale: exp for log(O/E), sqrt(max(., 0)) for ECE^2."""
        if self.measure == "log_oe":
            return math.exp(value) if np.isfinite(value) else value
        if self.measure == "ece":
            return math.sqrt(max(value, 0.0)) if np.isfinite(value) else value
        return value

    def row(self, natural: bool = False) -> dict:
        """The pooled numbers as a dict (``natural``: estimate and intervals on the reported scale)."""
        f = self.natural if natural else float
        return {"k": self.k, "estimate": f(self.estimate), "se": self.se, "ci_lower": f(self.ci_lower),
                "ci_upper": f(self.ci_upper), "pi_lower": f(self.pi_lower), "pi_upper": f(self.pi_upper),
                "statistic": self.statistic, "pvalue": self.pvalue, "tau2": self.tau2, "tau": self.tau,
                "i2": self.i2, "h2": self.h2, "q": self.q, "q_df": self.q_df, "q_pvalue": self.q_pvalue,
                "fixed_estimate": f(self.fixed_estimate), "fixed_se": self.fixed_se}

    def site_interval(self, alpha: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each site's Wald interval y_g -+ z sqrt(v_g) on the pooled scale."""
        z = _sps.norm.isf((self.alpha if alpha is None else alpha) / 2.0)
        half = z * np.sqrt(self.v)
        return self.y - half, self.y + half


_GAMMA_NODES = (np.arange(128) + 0.5) / 128
_LOG_SHAPES = np.linspace(math.log(0.03), math.log(1000.0), 33)
_N_LOG_MEANS = 41
#: The prior on the gamma shape kappa: density proportional to kappa^(-SHAPE_PRIOR_POWER) on log kappa
#: (0: flat on log kappa; 1/2: uniform on the coefficient of variation 1 / sqrt(kappa); module docstring).
SHAPE_PRIOR_POWER = 0.25


def _gamma_quantile_table() -> np.ndarray:
    """Quantiles of Gamma(shape kappa, mean 1) at the midpoints of 128 equal-probability cells, per shape."""
    from scipy import special
    kappa = np.exp(_LOG_SHAPES)
    return special.gammaincinv(kappa[:, None], _GAMMA_NODES[None, :]) / kappa[:, None]


def _gamma_log_posterior(y, second_order, rate, log_means):
    """log posterior (flat prior) of (log m, log kappa) on the grid: sum over sites of the log of the
    midpoint-rule marginal likelihood int N(y_g; theta, V_2,g + r_g theta) dGamma(theta)."""
    table = _gamma_quantile_table()
    out = np.empty((log_means.size, _LOG_SHAPES.size))
    means = np.exp(log_means)
    for j in range(_LOG_SHAPES.size):
        theta = means[:, None, None] * table[j][None, :, None]            # (means, nodes, 1)
        var = second_order[None, None, :] + theta * rate[None, None, :]   # (means, nodes, sites)
        dens = np.exp(-0.5 * (y[None, None, :] - theta) ** 2 / var) / np.sqrt(2.0 * np.pi * var)
        out[:, j] = np.sum(np.log(np.maximum(dens.mean(axis=1), 1e-300)), axis=1)
    return out


def gamma_prediction_interval(y, second_order, rate, alpha: float, *,
                              shape_prior_power: float = SHAPE_PRIOR_POWER) -> tuple[float, float]:
    """The 1 - alpha prediction interval of a new site's ECE^2 under the gamma random-effects model.

    theta_g ~ Gamma(mean m, shape kappa) and T_g | theta_g ~ N(theta_g,
    V_2,g + r_g theta_g); over a grid of (log m, log kappa), a prior flat on
    log m and proportional to kappa^(-shape_prior_power) on log kappa
    (uniform on the square root of the coefficient of variation
    1 / sqrt(kappa) at the default 1/4); the predictive law is the posterior mixture of the gammas (module
    docstring).

    Parameters
    ----------
    y : array_like
        The sites' estimates T_g.
    second_order, rate : array_like
        V_2,g (> 0) and r_g (>= 0) of each site.
    alpha : float
    shape_prior_power : float
        The power p of the prior kappa^(-p) on log kappa (0: flat on log
        kappa, the interval before the coefficient-of-variation prior).

    Returns
    -------
    lower, upper : float
        The alpha/2 and 1 - alpha/2 quantiles of the predictive law.
    """
    from scipy import special
    y, v2, r = (np.asarray(a, dtype=float).ravel() for a in (y, second_order, rate))
    m0 = max(float(np.mean(y)), float(np.sqrt(np.mean(v2))), 1e-300)
    log_means = np.linspace(math.log(m0) - 5.0, math.log(m0) + 2.5, _N_LOG_MEANS)
    logpost = _gamma_log_posterior(y, v2, r, log_means) - shape_prior_power * _LOG_SHAPES[None, :]
    post = np.exp(logpost - logpost.max())
    keep = post > 1e-10
    weight = post[keep] / post[keep].sum()
    means = np.broadcast_to(np.exp(log_means)[:, None], post.shape)[keep]
    shapes = np.broadcast_to(np.exp(_LOG_SHAPES)[None, :], post.shape)[keep]

    def cdf(x: float) -> float:
        return float(np.dot(weight, special.gammainc(shapes, x * shapes / means)))

    top = 2.0 * float(np.max(special.gammaincinv(shapes, 1.0 - alpha / 4.0) * means / shapes))
    lower = _brentq(lambda x: cdf(x) - alpha / 2.0, 0.0, top, xtol=1e-15 * top, rtol=1e-12)
    upper = _brentq(lambda x: cdf(x) - (1.0 - alpha / 2.0), 0.0, top, xtol=1e-15 * top, rtol=1e-12)
    return float(lower), float(upper)


def ece_site_variances(groups: dict, labels) -> tuple[np.ndarray, np.ndarray] | None:
    """(V_2,g, r_g) of the sites ``labels`` from their results, or None when one is weighted or clustered.

    V_2,g is the second-order variance of the site's T and r_g = sigma_1^2 / (n T_plugin) its first-order
    variance per unit of ECE^2 (0 when the plug-in estimate is 0): the parts of
    :func:`calibtest.ece.grouped_interval.estimate_variance` for unweighted rows.
    """
    from calibtest.core.difference_variance import first_order_var_single, second_order_var_single
    second: list[float] = []
    rate: list[float] = []
    for label in labels:
        res = groups.get(label)
        if res is None or kind_flag(res, "weighted") or kind_flag(res, "clustered") \
                or getattr(res, "data", None) is None or getattr(res, "partition", None) is None:
            return None
        inverse, u = res.partition.inverse, res.data.u
        second.append(second_order_var_single(inverse, u))
        plugin = res.plugin_estimate
        rate.append(first_order_var_single(inverse, u) / plugin if plugin > 0 else 0.0)
    v2 = np.array(second)
    return (v2, np.array(rate)) if np.all(v2 > 0) else None


def random_effects(y, v, *, method: str = "REML", hartung_knapp: bool = False, alpha: float = 0.05,
                   null: float = 0.0, measure: str = "", scale: str = "", labels=None) -> RandomEffects:
    """Random-effects pooling of estimates ``y`` with known variances ``v`` (module docstring).

    Parameters
    ----------
    y, v : array_like
        The sites' estimates and their variances (finite, ``v`` > 0).
    method : {"REML", "DL", "PM"}
    hartung_knapp : bool
        The Hartung-Knapp interval (t on k - 1 df) instead of the Wald one.
    alpha : float
        1 - alpha intervals.
    null : float
        The value of mu under the null hypothesis of ``statistic`` and
        ``pvalue`` (on the scale pooled: 1 for a slope, 0 otherwise).
    measure, scale, labels
        Bookkeeping of the result.

    Raises
    ------
    ValueError
        Fewer than two sites, a non-finite value, a variance <= 0.
    """
    method = check_option("meta_method", method, "method")
    hartung_knapp = check_option("hartung_knapp", hartung_knapp)
    alpha = check_alpha(alpha)
    y = np.asarray(y, dtype=float).ravel()
    v = np.asarray(v, dtype=float).ravel()
    if y.shape != v.shape:
        raise ValueError(f"y and v must have the same length, got {y.size} and {v.size}")
    if y.size < 2:
        raise ValueError(f"a meta-analysis needs at least two sites with an estimate, got {y.size}")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(v))):
        raise ValueError("y and v must be finite (a site without an estimate is left out before pooling)")
    if np.any(v <= 0):
        raise ValueError("every variance v must be > 0")
    k = y.size
    tau2, iterations = _tau2(y, v, method)
    w_fe = 1.0 / v
    fixed = float(np.dot(w_fe, y) / w_fe.sum())
    q = float(np.dot(w_fe, (y - fixed) ** 2))
    s2 = (k - 1) * w_fe.sum() / (w_fe.sum() ** 2 - np.sum(w_fe ** 2))
    w = 1.0 / (v + tau2)
    mu = float(np.dot(w, y) / w.sum())
    if hartung_knapp:
        se = math.sqrt(float(np.dot(w, (y - mu) ** 2)) / (k - 1) / w.sum())
        dist = _sps.t(k - 1)
    else:
        se = math.sqrt(1.0 / w.sum())
        dist = _sps.norm
    crit = float(dist.isf(alpha / 2.0))
    stat = (mu - null) / se if se > 0 else math.nan
    if k >= 3:
        half = float(_sps.t(k - 2).isf(alpha / 2.0)) * math.sqrt(tau2 + se ** 2)
        pi = (mu - half, mu + half)
    else:
        pi = (math.nan, math.nan)
    return RandomEffects(
        measure=measure, scale=scale, labels=tuple(range(k)) if labels is None else tuple(labels), y=y, v=v, k=k,
        method=method, hartung_knapp=hartung_knapp, alpha=alpha, tau2=tau2, estimate=mu, se=se, statistic=stat,
        pvalue=float(2.0 * dist.sf(abs(stat))) if se > 0 else math.nan, ci_lower=mu - crit * se,
        ci_upper=mu + crit * se, pi_lower=pi[0], pi_upper=pi[1], q=q, q_df=k - 1,
        q_pvalue=float(_sps.chi2.sf(q, k - 1)), i2=float(tau2 / (tau2 + s2)), h2=float((tau2 + s2) / s2),
        fixed_estimate=fixed, fixed_se=math.sqrt(1.0 / w_fe.sum()), weights=w / w.sum(), iterations=iterations)


# --------------------------------------------------------------------------- the sites of a grouped result
def site_estimates(table: pd.DataFrame, measure: str, reasons: dict | None = None
                   ) -> tuple[pd.Series, pd.Series, dict]:
    """Each group's estimate and variance of ``measure`` from a grouped result's table, and the groups left out.

    ``table`` is :meth:`calibtest.ece.grouped_interval.GroupedCalibrationResult.to_frame`.
    Returns (y, v, left_out) with ``left_out`` mapping a group label to why
    it has no estimate (not analysed, no events, a zero variance, or the
    reason in ``reasons``, group label -> why an analysed group has no
    estimate of the measure).
    """
    if measure == "log_oe":
        with np.errstate(divide="ignore"):
            y = np.log(table["oe"].astype(float))
        se = table["log_oe_se"].astype(float)
    elif measure == "ece":
        y, se = table["estimate"].astype(float), table["estimate_se"].astype(float)
    else:
        y, se = table[measure].astype(float), table[f"{measure}_se"].astype(float)
    v = se ** 2
    left_out = {}
    for label, yi, vi, analysed in zip(table.index, y, v, table["estimate"].notna()):
        if not analysed:
            left_out[label] = "not analysed"
        elif not (np.isfinite(yi) and np.isfinite(vi)):
            left_out[label] = ((reasons or {}).get(label) or
                               ("no events, so log(O/E) is not finite" if measure == "log_oe" else
                                f"no estimate of the {MEASURES[measure][0]}"))
        elif vi <= 0:
            left_out[label] = f"its {MEASURES[measure][0]} estimate has zero variance"
    keep = [label not in left_out for label in table.index]
    return y[keep], v[keep], left_out


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class MetaAnalysisResult(ResultDisplay):
    """Calibration across sites: the random-effects pooling of each measure (see the module docstring).

    Attributes
    ----------
    by : tuple of str
        The grouping variables (the sites).
    pooled : dict
        Measure -> :class:`RandomEffects` (measures with fewer than two sites
        that have an estimate are absent; ``left_out_measures`` says why).
    left_out : dict
        Measure -> {group label: why the group is not pooled}.
    left_out_measures : dict
        Measure -> why it was not pooled.
    method : {"REML", "DL", "PM"}
    hartung_knapp : bool
    alpha : float
    n_sites : int
        Groups of the grouped result (analysed or not).
    clustered : bool
        The sites' estimates are clustered ones (``calib_ci(by=, cluster=)``):
        cluster-robust variances, T_cl for the ECE.
    citl_scale : str
        The scale of the sites' CITL: ``"logit"``, or ``"log cumulative
        hazard"`` for survival sites at a horizon (Crowson et al.'s intercept).
    measures_text : str or None
        How the sites' O/E, CITL and slope were estimated and are pooled, in
        words, supplied by the kind of the analysis (None: binary rows, Wald
        or cluster-robust).
    """

    by: tuple
    pooled: dict
    left_out: dict
    left_out_measures: dict
    method: str
    hartung_knapp: bool
    alpha: float
    n_sites: int
    clustered: bool = False
    citl_scale: str = "logit"
    measures_text: str | None = None

    @property
    def measures(self) -> tuple:
        """The measures pooled, in the order of :data:`MEASURES`."""
        return tuple(m for m in MEASURES if m in self.pooled)

    def __getitem__(self, measure: str) -> RandomEffects:
        return self.pooled[measure]

    def to_frame(self, natural: bool = False) -> pd.DataFrame:
        """One row per measure pooled (index ``measure``): the numbers of :meth:`RandomEffects.row`.

        On the scale pooled (log(O/E), CITL, slope, ECE^2), or with
        ``natural`` the estimates and intervals as O/E and ECE (``se``,
        ``statistic``, ``tau2`` and the rest stay on the scale pooled).
        """
        rows = [self.pooled[m].row(natural) for m in self.measures]
        frame = pd.DataFrame(rows, index=pd.Index(self.measures, name="measure"))
        frame.insert(0, "scale", [MEASURES[m][2] if natural else self.pooled[m].scale for m in self.measures])
        return frame

    def summary_frame(self) -> pd.DataFrame:
        """The table of :meth:`to_frame` (statsmodels' name)."""
        return self.to_frame()

    def site_frame(self, measure: str) -> pd.DataFrame:
        """The sites of one measure: estimate, s.e., Wald interval (scale pooled) and weight (%)."""
        re = self.pooled[measure]
        lower, upper = re.site_interval()
        return pd.DataFrame({"estimate": re.y, "se": np.sqrt(re.v), "ci_lower": lower, "ci_upper": upper,
                             "weight_pct": 100.0 * re.weights}, index=pd.Index(re.labels, name=" x ".join(self.by)))

    def interval_text(self) -> str:
        """How the pooled interval is computed, in words."""
        return ("Hartung-Knapp interval (t on k - 1 df)" if self.hartung_knapp else "Wald interval (normal)")

    def notes(self) -> list[str]:
        """Notes of the summary footer (and the report)."""
        level = f"{100 * (1 - self.alpha):g}%"
        ece_pi = ("; for the ECE^2 the quantiles of the gamma random-effects predictive law (a non-negative, "
                  "skewed ECE^2 across sites; 0 as its lower end when the pooled ECE^2's interval reaches 0)"
                  if "ece" in self.pooled and self.pooled["ece"].pi_method == "gamma" else "")
        notes = [f"Random-effects model, tau^2 by {_METHOD_TEXT[self.method]}; pooled estimate with its {level} "
                 f"{self.interval_text()}; {level} prediction interval for a new site mu +- t(k-2) "
                 f"sqrt(tau^2 + se^2) (Riley et al. 2011){ece_pi}, not defined for fewer than 3 sites.",
                 ("O/E is pooled as log(O/E), CITL and slope as they are, each with its cluster-robust s.e. (the "
                  "rows of each site are clustered); the ECE as the clustered debiased ECE^2 estimate T_cl of each "
                  "site (its own bins) with its cluster-robust variance, reported as ECE = sqrt(max(ECE^2, 0)). "
                  if self.clustered else
                  (self.measures_text or "O/E is pooled as log(O/E) with s.e. sqrt((1 - O/n) / O); CITL and slope "
                                         "with their Wald s.e.; ")
                  + "the ECE as the debiased ECE^2 estimate T of each site (its own bins) with its first- plus "
                  "second-order variance, reported as ECE = sqrt(max(ECE^2, 0)). ")
                 + "The pooled ECE is the typical site's calibration error, not the ECE of the pooled rows.",
                 "I^2: share of the variance of the site estimates due to between-site heterogeneity "
                 "(tau^2 / (tau^2 + typical within-site variance)); Q: Cochran's test of homogeneity."]
        for m, why in self.left_out_measures.items():
            notes.append(f"{MEASURES[m][0]}: not pooled, {why}.")
        for m, left in self.left_out.items():
            if left and m in self.pooled:
                sites = "; ".join(f"{_label(lb)} ({why})" for lb, why in left.items())
                notes.append(f"{MEASURES[m][0]}: sites left out: {sites}.")
        return notes

    def _summary(self, alpha: float | None) -> CalibSummary:
        smry = CalibSummary()
        smry.add_title("Calibration across sites: random-effects meta-analysis")
        smry.add_settings({"Sites by:": " x ".join(self.by), "Sites:": str(self.n_sites),
                           "tau^2:": self.method, "Interval:": "Hartung-Knapp" if self.hartung_knapp else "Wald",
                           "Alpha:": fmt(self.alpha)})
        rows = []
        for m in self.measures:
            re = self.pooled[m]
            r = re.row(natural=True)
            rows.append([MEASURES[m][2], re.k, r["estimate"], r["ci_lower"], r["ci_upper"], r["pi_lower"],
                         r["pi_upper"], re.tau2, 100.0 * re.i2, re.q_pvalue])
        tab = pd.DataFrame(rows, columns=["measure", "k", "pooled", "lower", "upper", "PI lower", "PI upper",
                                          "tau^2", "I^2 %", "p (Q)"], dtype=object).set_index("measure")
        tab = tab.where(tab.notna(), None)
        smry.add_table(tab, {"k": 4, "pooled": 4, "lower": 4, "upper": 4, "PI lower": 4, "PI upper": 4,
                             "tau^2": 3, "I^2 %": 3, "p (Q)": 3})
        smry.add_notes(self.notes())
        return smry

    def _dict(self) -> dict:
        return {"by": list(self.by), "method": self.method, "hartung_knapp": self.hartung_knapp,
                "alpha": self.alpha, "n_sites": self.n_sites,
                "measures": {m: {"scale": self.pooled[m].scale, **self.pooled[m].row(),
                                 "natural": self.pooled[m].row(natural=True),
                                 "sites": [_label(lb) for lb in self.pooled[m].labels]}
                             for m in self.measures},
                "left_out": {m: {_label(lb): why for lb, why in left.items()} for m, left in self.left_out.items()},
                "left_out_measures": dict(self.left_out_measures), "notes": self.notes()}

    def _repr_parts(self) -> list[str]:
        parts = [f"by={'*'.join(self.by)} sites={self.n_sites}", f"method={self.method}"]
        for m in self.measures:
            parts.append(f"{m}={self.pooled[m].natural(self.pooled[m].estimate):.4g}")
        return parts

    def plot_forest(self, measure: str = "log_oe", ax=None, **kwargs):
        """Forest plot of one measure: the sites, the pooled diamond and the prediction interval.

        See :func:`calibtest.reporting.forest.plot_meta_forest`.
        """
        from calibtest.reporting.forest import plot_meta_forest
        return plot_meta_forest(self, measure, ax=ax, **kwargs)


_METHOD_TEXT = {"REML": "restricted maximum likelihood (REML)", "DL": "DerSimonian-Laird",
                "PM": "Paule-Mandel"}


def _label(label) -> str:
    return ", ".join(map(str, label)) if isinstance(label, tuple) else str(label)


def _with_gamma_interval(re: RandomEffects, groups: dict | None) -> RandomEffects:
    """``re`` (the ECE^2) with the gamma predictive interval (module docstring) in place of the normal one."""
    from dataclasses import replace
    parts = None if groups is None else ece_site_variances(groups, re.labels)
    v2, rate = (re.v, np.zeros(re.k)) if parts is None else parts
    lower, upper = gamma_prediction_interval(re.y, v2, rate, re.alpha)
    if re.ci_lower <= 0.0:
        lower = 0.0
    return replace(re, pi_lower=lower, pi_upper=upper, pi_method="gamma")


def meta_analysis(grouped, measures=None, *, method: str = "REML", hartung_knapp: bool = False,
                  alpha: float | None = None) -> MetaAnalysisResult:
    """Random-effects meta-analysis of the per-group calibration measures of a grouped result.

    Parameters
    ----------
    grouped : calibtest.ece.grouped_interval.GroupedCalibrationResult
        ``calib_ci(..., by=site)``: each group is a site.
    measures : str or list of str, optional
        Among ``"log_oe"``, ``"citl"``, ``"slope"``, ``"ece"`` (None: all of
        them).  CITL, slope and O/E need one probability column and the
        rows (they are missing for streamed data, where only O/E is kept).
    method : {"REML", "DL", "PM"}
        Estimator of the between-site variance tau^2.
    hartung_knapp : bool
        The Hartung-Knapp interval of the pooled estimate.
    alpha : float, optional
        1 - alpha intervals (default: the grouped result's alpha).

    Returns
    -------
    MetaAnalysisResult
        A measure with fewer than two sites that have an estimate is not
        pooled; the result says why.
    """
    sites = Sites.of(grouped.to_frame(), grouped.by, grouped.pooled, getattr(grouped, "groups", None),
                     getattr(grouped, "measure_reasons", None))
    return pool_sites(sites, measures, method=method, hartung_knapp=hartung_knapp,
                      alpha=grouped.alpha if alpha is None else alpha)


@dataclass(frozen=True)
class Sites:
    """The sites a meta-analysis pools.

    Attributes
    ----------
    table : pandas.DataFrame
        A grouped result's table (``to_frame()``), a row per site.
    by : tuple
        The grouping variables.
    groups : dict, optional
        The sites' results (label -> result), whose variance parts give the ECE^2's prediction interval its
        within-site variances V_2,g + r_g theta (:func:`ece_site_variances`); without them (or for weighted or
        clustered sites) V_2,g = v_g and r_g = 0.
    clustered : bool
        The table's estimates and standard errors are the clustered ones (said in the notes).
    words : dict, optional
        How the sites' CITL, slope and O/E are defined, from the kind of the analysis
        (:meth:`calibtest.ece.kinds.AnalysisKind.recalibration_words`: the scale of CITL and the notes'
        sentence; None: binary rows).
    reasons : dict, optional
        Measure (``"log_oe"``, ``"citl"``, ``"slope"``) -> {group label: why the analysed group has no
        estimate}, said where the group is left out.
    """

    table: pd.DataFrame
    by: tuple
    groups: dict | None = None
    clustered: bool = False
    words: dict | None = None
    reasons: dict | None = None

    @classmethod
    def of(cls, table: pd.DataFrame, by, pooled, groups: dict | None = None, reasons: dict | None = None) -> "Sites":
        """The sites of a grouped result's ``table``, their clustering and words read from the kind of the pooled
        result ``pooled``."""
        return cls(table, by, groups, kind_flag(pooled, "clustered"), pooled.kind.recalibration_words(), reasons)


def pool_sites(sites: Sites, measures=None, *, method: str = "REML", hartung_knapp: bool = False,
               alpha: float = 0.05) -> MetaAnalysisResult:
    """:func:`meta_analysis` of the ``sites`` (:class:`Sites`).

    A measure whose pooling fails (REML not converging) is left out with the reason.
    """
    table, by, clustered, groups, words = sites.table, sites.by, sites.clustered, sites.groups, sites.words
    site_reasons = sites.reasons
    if measures is None:
        measures = tuple(MEASURES)
    elif isinstance(measures, str):
        measures = (measures,)
    measures = check_option("meta_measures", measures, "measures")
    if not measures:
        raise OptionError("measures must name at least one of " + ", ".join(MEASURES))
    method = check_option("meta_method", method, "method")
    hartung_knapp = check_option("hartung_knapp", hartung_knapp)
    alpha = check_alpha(alpha)
    pooled, left_out, left_measures = {}, {}, {}
    citl_scale = "logit" if words is None else words["citl_scale"]
    for m in MEASURES:
        if m not in measures:
            continue
        y, v, left = site_estimates(table, m, (site_reasons or {}).get(m))
        left_out[m] = left
        if y.size < 2:
            left_measures[m] = (f"it needs at least two sites with an estimate and {y.size} of the "
                                f"{len(table)} sites has one"
                                + (_common_reason(left, (site_reasons or {}).get(m)) if y.size == 0 else ""))
            continue
        try:
            pooled[m] = random_effects(y.to_numpy(), v.to_numpy(), method=method, hartung_knapp=hartung_knapp,
                                       alpha=alpha, null=1.0 if m == "slope" else 0.0, measure=m,
                                       scale=_scale(m, citl_scale), labels=list(y.index))
        except ValueError as exc:
            left_measures[m] = str(exc)
            continue
        if m == "ece" and pooled[m].k >= 3:
            pooled[m] = _with_gamma_interval(pooled[m], groups)
    return MetaAnalysisResult(by=tuple(by), pooled=pooled, left_out=left_out,
                              left_out_measures=left_measures, method=method, hartung_knapp=hartung_knapp,
                              alpha=alpha, n_sites=len(table), clustered=clustered, citl_scale=citl_scale,
                              measures_text=None if words is None else words["pooling"])


def _scale(measure: str, citl_scale: str) -> str:
    """The scale a measure is pooled on, in words (CITL on its own scale: logit, or log cumulative hazard)."""
    return f"CITL ({citl_scale} scale)" if measure == "citl" else MEASURES[measure][1]


def _common_reason(left: dict, reasons: dict | None) -> str:
    """``" (every analysed site: why)"`` when every analysed site left out has the one reason ``reasons`` gives it,
    else ''."""
    given = {why for label, why in left.items() if why != "not analysed"}
    if len(given) != 1 or not reasons or not given <= set(reasons.values()):
        return ""
    return f" (every analysed site: {given.pop()})"
