"""Calibration-in-the-large, the calibration slope and O/E with cluster-robust intervals.

For rows in G independent clusters (sites), the logistic recalibration fits
of :mod:`calibtest.checks.val_prob` keep their estimates, and their standard errors
become the cluster-robust (sandwich) ones of Liang and Zeger [1]_:
statsmodels' ``GLM.fit(cov_type="cluster")``, with its small-sample factor
G / (G - 1) (n - 1) / (n - p).  The intervals use Student's t with G - 1
degrees of freedom (the sandwich has about G - 1), as Stata and
``sandwich::vcovCL`` users do with few clusters.

* CITL: the intercept a of logit P(y = 1) = a + logit p (logit p an offset).
* Slope: b of logit P(y = 1) = a + b logit p.
* O/E = sum y / sum p, with the delta-method variance of log(O/E) from the
  cluster sums, G / (G - 1) sum_g (O_g / O - E_g / E)^2.

References
----------
.. [1] Liang and Zeger, "Longitudinal data analysis using generalized linear
       models", Biometrika 73 (1986).
.. [2] Cameron and Miller, "A practitioner's guide to cluster-robust
       inference", Journal of Human Resources 50 (2015).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats as _sps

from calibtest.checks.logistic_fits import direction_sentence, fit_logistic_glm

__all__ = ["ClusterRobustMeasures", "cluster_robust_measures", "cluster_robust_glm"]

#: Predictions are clipped to [EPS, 1 - EPS] on the logit scale only (as rms::val.prob and valprob do).
EPS = 1e-12


@dataclass(frozen=True)
class ClusterRobustMeasures:
    """CITL, slope and O/E with cluster-robust standard errors and t_{G-1} intervals.

    Attributes
    ----------
    citl, citl_se : float
        Calibration-in-the-large a and its cluster-robust standard error.
    slope, slope_se : float
        Calibration slope b and its cluster-robust standard error.
    oe : float
        Observed / expected events.
    log_oe_se : float
        Cluster-robust standard error of log(O/E).
    n_clusters : int
        G.
    alpha : float
        Level of the intervals.
    """

    citl: float
    citl_se: float
    slope: float
    slope_se: float
    oe: float
    log_oe_se: float
    n_clusters: int
    alpha: float

    @property
    def df(self) -> int:
        """Degrees of freedom G - 1 of the t quantile."""
        return self.n_clusters - 1

    def _t(self, alpha: float | None) -> float:
        return float(_sps.t.isf((self.alpha if alpha is None else alpha) / 2.0, self.df))

    def citl_ci(self, alpha: float | None = None) -> tuple[float, float]:
        """The interval a -+ t_{G-1} se of CITL."""
        t = self._t(alpha)
        return self.citl - t * self.citl_se, self.citl + t * self.citl_se

    def slope_ci(self, alpha: float | None = None) -> tuple[float, float]:
        """The interval b -+ t_{G-1} se of the slope."""
        t = self._t(alpha)
        return self.slope - t * self.slope_se, self.slope + t * self.slope_se

    def oe_ci(self, alpha: float | None = None) -> tuple[float, float]:
        """The interval exp(log(O/E) -+ t_{G-1} se) of O/E."""
        t = self._t(alpha)
        return self.oe * math.exp(-t * self.log_oe_se), self.oe * math.exp(t * self.log_oe_se)

    def direction(self, alpha: float | None = None) -> str:
        """The direction of a logit-linear miscalibration in words, from CITL and the slope and their
        cluster-robust intervals (the sentence of :meth:`calibtest.checks.val_prob.ValProbResult.direction`)."""
        alpha = self.alpha if alpha is None else alpha
        return direction_sentence(self.citl, self.citl_ci(alpha), self.slope, self.slope_ci(alpha), alpha)

    def to_frame(self, alpha: float | None = None) -> pd.DataFrame:
        """One row per measure: estimate, cluster-robust se, interval, and the value of a calibrated model."""
        rows = [("CITL", self.citl, self.citl_se, *self.citl_ci(alpha), 0.0),
                ("slope", self.slope, self.slope_se, *self.slope_ci(alpha), 1.0),
                ("O/E", self.oe, self.log_oe_se, *self.oe_ci(alpha), 1.0)]
        return pd.DataFrame(rows, columns=["measure", "estimate", "se", "ci_lower", "ci_upper", "calibrated"])

    def to_dict(self) -> dict:
        """The scalar fields and the intervals at the stored level."""
        return {"citl": self.citl, "citl_se": self.citl_se, "citl_ci": list(self.citl_ci()),
                "slope": self.slope, "slope_se": self.slope_se, "slope_ci": list(self.slope_ci()),
                "oe": self.oe, "log_oe_se": self.log_oe_se, "oe_ci": list(self.oe_ci())}


def cluster_robust_glm(y: np.ndarray, X: np.ndarray, offset, codes: np.ndarray, start: np.ndarray):
    """The logistic GLM's estimates (:func:`calibtest.checks.logistic_fits.fit_logistic_glm`) with the cluster covariance.

    The fit is that of the independent rows; statsmodels then refits from
    its estimates with ``cov_type="cluster"`` (groups ``codes``), which
    changes only the covariance.

    Returns
    -------
    statsmodels GLMResults
    """
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools import sm_exceptions

    quiet = [sm_exceptions.ConvergenceWarning, getattr(sm_exceptions, "PerfectSeparationWarning", RuntimeWarning)]
    with warnings.catch_warnings():
        for category in quiet:  # an outcome of one class: the fit says so through its estimates, not warnings
            warnings.simplefilter("ignore", category)
        base = fit_logistic_glm(y, X, offset, start)
        model = GLM(y, X, family=Binomial(), offset=offset)
        return model.fit(start_params=np.asarray(base.params), tol=1e-13, maxiter=100, cov_type="cluster",
                         cov_kwds={"groups": np.asarray(codes)})


def cluster_robust_measures(y: np.ndarray, p: np.ndarray, codes: np.ndarray, alpha: float = 0.05
                            ) -> ClusterRobustMeasures:
    """CITL, slope and O/E of binary outcomes ``y`` against predictions ``p``, clusters ``codes``.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Outcomes 0/1 (for top-1: whether the top prediction was correct).
    p : ndarray, shape (n,)
        Predicted probabilities of y = 1.
    codes : ndarray of int, shape (n,)
        Cluster of each row, 0..G-1 (G >= 2).
    alpha : float
        Level of the intervals.
    """
    y = np.asarray(y, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    codes = np.asarray(codes)
    G = int(np.unique(codes).size)
    lp = special.logit(np.clip(p, EPS, 1.0 - EPS))
    ones = np.ones((y.shape[0], 1))
    citl = cluster_robust_glm(y, ones, lp, codes, np.zeros(1))
    slope = cluster_robust_glm(y, np.column_stack([ones[:, 0], lp]), None, codes, np.array([0.0, 1.0]))
    O, E = float(y.sum()), float(p.sum())
    O_g = np.bincount(codes, weights=y, minlength=G)
    E_g = np.bincount(codes, weights=p, minlength=G)
    resid = O_g / O - E_g / E if O > 0 else np.full(G, np.nan)
    log_oe_se = math.sqrt(G / (G - 1.0) * float(np.sum(resid * resid)))
    return ClusterRobustMeasures(citl=float(citl.params[0]), citl_se=float(citl.bse[0]),
                                 slope=float(slope.params[1]), slope_se=float(slope.bse[1]), oe=O / E,
                                 log_oe_se=log_oe_se, n_clusters=G, alpha=float(alpha))
