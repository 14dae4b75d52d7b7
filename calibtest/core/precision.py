"""Sample sizes for precise O/E, calibration-in-the-large, calibration slope and C (Riley et al. 2021).

Closed forms for the external validation of a model with a binary outcome,
evaluated on a population: a sample of predictions z (each of mass 1/m) and
their anticipated true probabilities q = E[y | z] (the anticipated
calibration).  With phi = mean(q) the outcome proportion and
L = logit(z) the linear predictor, each measure's standard error at n rows
is s_1 / sqrt(n) (C: Newcombe's formula), and the smallest n whose
anticipated standard error is at most the target se* is

    n = ceil(s_1^2 / se*^2).

* **O/E** (observed over expected events), on the log scale:
  Var(ln O/E) = (1 - phi) / (n phi) (O ~ Binomial(n, phi), E fixed; Riley et
  al. 2021, criterion 1; the standard error the O/E test of
  :mod:`calibtest.checks.acceptance` uses), so s_1^2 = (1 - phi) / phi.
* **CITL**, the intercept a0 of logit E[y] = a0 + L (offset L): the
  model-based variance of the logistic fit at its population value a0*,
  mean(expit(a0* + L)) = phi, is 1 / (n E[w]) with w = p (1 - p),
  p = expit(a0* + L): s_1^2 = 1 / E[w].
* **Calibration slope**, b of logit E[y] = a + b L: at the population fit
  (a*, b*) (the logistic regression of q on L; the anticipated intercept and
  slope themselves for a logistic anticipated calibration), with
  w = p (1 - p), p = expit(a* + b* L), the information per row is
  [[E w, E w L], [E w L, E w L^2]] and (Riley et al. 2021, criterion 2)

      s_1^2 = E[w] / (E[w] E[w L^2] - E[w L]^2).

* **C** (the concordance statistic): Newcombe's standard error (Riley et
  al. 2021, criterion 3),

      SE(C)^2 = C (1 - C) [1 + (n/2 - 1)(1 - C)/(2 - C) + (n/2 - 1) C/(1 + C)] / (n^2 phi (1 - phi)),

  with C the population concordance P(z_i > z_j | y_i = 1, y_j = 0) (ties
  count 1/2), solved for n as a quadratic.

References
----------
Riley RD, Debray TPA, Collins GS, et al. Minimum sample size for external
validation of a clinical prediction model with a binary outcome. Statistics
in Medicine 40:4230-4251, 2021.
Newcombe RG. Confidence intervals for an effect size measure based on the
Mann-Whitney statistic. Part 2. Statistics in Medicine 25:559-573, 2006.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

__all__ = ["PRECISION_MEASURES", "MeasurePrecision", "anticipated_precision", "precision_size", "concordance",
           "c_statistic_se"]

#: The measures with a precision target, in the order of a table.
PRECISION_MEASURES = ("oe", "citl", "slope", "c")


@dataclass(frozen=True)
class MeasurePrecision:
    """A measure's anticipated value and the per-row part of its standard error.

    Attributes
    ----------
    measure : str
        One of :data:`PRECISION_MEASURES`.
    value : float
        The anticipated value (O/E, CITL a0*, slope b*, C).
    s1 : float
        sqrt(n) times the standard error (O/E on the log scale); for C the
        large-n limit of sqrt(n) SE(C).
    outcome_proportion : float
        phi = mean(q).
    """

    measure: str
    value: float
    s1: float
    outcome_proportion: float

    def se(self, n) -> np.ndarray | float:
        """The anticipated standard error at n rows (Newcombe's formula for C)."""
        if self.measure == "c":
            return c_statistic_se(self.value, self.outcome_proportion, n)
        return self.s1 / np.sqrt(n)


def concordance(z: np.ndarray, q: np.ndarray) -> float:
    """C = P(z_i > z_j | y_i = 1, y_j = 0) over pairs i != j of the population, ties counting 1/2.

    With y_i ~ Bernoulli(q_i) independently: numerator sum_{i != j} q_i (1 - q_j) (1{z_i > z_j} + 1{z_i = z_j}/2),
    denominator sum_{i != j} q_i (1 - q_j); by sorting (O(m log m)).
    """
    keys, inverse = np.unique(z, return_inverse=True)
    ones = np.bincount(inverse, weights=q, minlength=keys.size)
    zeros = np.bincount(inverse, weights=1.0 - q, minlength=keys.size)
    below = np.concatenate(([0.0], np.cumsum(zeros)[:-1]))  # sum of (1 - q_j) over z_j < z
    diag = float(np.sum(q * (1.0 - q)))
    num = float(np.sum(ones * (below + 0.5 * zeros))) - 0.5 * diag
    den = float(ones.sum() * zeros.sum()) - diag
    return num / den


def c_statistic_se(c: float, phi: float, n) -> np.ndarray | float:
    """Newcombe's SE(C) at n rows with outcome proportion phi (module docstring)."""
    n = np.asarray(n, dtype=float)
    h = n / 2.0 - 1.0
    var = c * (1 - c) * (1 + h * (1 - c) / (2 - c) + h * c / (1 + c)) / (n * n * phi * (1 - phi))
    out = np.sqrt(var)
    return float(out) if out.ndim == 0 else out


def _fit(lp: np.ndarray, q: np.ndarray, slope_free: bool) -> np.ndarray:
    """The population logistic fit of q on (1, L) (or 1 with offset L): Newton's method on E[(q - p) x] = 0."""
    x = np.column_stack([np.ones_like(lp), lp]) if slope_free else np.ones((lp.size, 1))
    offset = 0.0 if slope_free else lp
    beta = np.zeros(x.shape[1]) if not slope_free else np.array([0.0, 1.0])
    for _ in range(100):
        p = expit(offset + x @ beta)
        w = p * (1 - p)
        step = np.linalg.solve((x * w[:, None]).T @ x, x.T @ (q - p))
        beta = beta + step
        if np.max(np.abs(step)) < 1e-12:
            break
    return beta


def anticipated_precision(z: np.ndarray, q: np.ndarray, measure: str) -> MeasurePrecision:
    """The measure's anticipated value and per-row standard error part over the population (z, q).

    Parameters
    ----------
    z, q : ndarray, shape (m,)
        Predictions in (0, 1) and their anticipated true probabilities.
    measure : str
        One of :data:`PRECISION_MEASURES`.
    """
    z = np.asarray(z, dtype=float)
    q = np.asarray(q, dtype=float)
    phi = float(q.mean())
    if measure == "oe":
        return MeasurePrecision("oe", phi / float(z.mean()), math.sqrt((1 - phi) / phi), phi)
    if measure == "c":
        c = concordance(z, q)
        h = (1 - c) / (2 - c) + c / (1 + c)  # n SE(C)^2 -> C (1 - C) h / (2 phi (1 - phi))
        return MeasurePrecision("c", c, math.sqrt(c * (1 - c) * h / (2 * phi * (1 - phi))), phi)
    lp = logit(z)
    if measure == "citl":
        a0 = float(_fit(lp, q, False)[0])
        p = expit(a0 + lp)
        return MeasurePrecision("citl", a0, 1.0 / math.sqrt(float(np.mean(p * (1 - p)))), phi)
    a, b = _fit(lp, q, True)
    p = expit(a + b * lp)
    w = p * (1 - p)
    e_w, e_wl, e_wll = float(w.mean()), float(np.mean(w * lp)), float(np.mean(w * lp * lp))
    return MeasurePrecision("slope", float(b), math.sqrt(e_w / (e_w * e_wll - e_wl * e_wl)), phi)


def precision_size(prec: MeasurePrecision, se_target: float) -> int:
    """The smallest n whose anticipated standard error is at most ``se_target``.

    n = ceil(s_1^2 / se*^2) for O/E, CITL and the slope; for C the root of
    the quadratic A n^2 - B n - K = 0 of Newcombe's formula, A = phi (1 - phi) se*^2,
    B = C (1 - C) [(1 - C)/(2 - C) + C/(1 + C)] / 2, K = C (1 - C) [1 - (1 - C)/(2 - C) - C/(1 + C)],
    rounded up; the result is checked against the formula (SE at n at most se*, at n - 1 above).
    """
    if prec.measure != "c":
        n = math.ceil(prec.s1 ** 2 / se_target ** 2)
    else:
        c, phi = prec.value, prec.outcome_proportion
        a_ = phi * (1 - phi) * se_target ** 2
        b_ = c * (1 - c) * ((1 - c) / (2 - c) + c / (1 + c)) / 2
        k_ = c * (1 - c) * (1 - (1 - c) / (2 - c) - c / (1 + c))
        n = math.ceil((b_ + math.sqrt(b_ * b_ + 4 * a_ * k_)) / (2 * a_))
    while n > 2 and prec.se(n - 1) <= se_target:  # the rounding of the root (one step at most)
        n -= 1
    while prec.se(n) > se_target:
        n += 1
    return max(int(n), 2)
