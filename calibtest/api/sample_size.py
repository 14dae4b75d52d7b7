"""Planning a validation study: power of the calibration test and sample size.

:func:`calib_power` gives the probability that a study of n rows rejects
H0: calibrated (equivalently, that the adjusted interval excludes 0) under an
anticipated miscalibration; :func:`calib_sample_size` gives the smallest n
that reaches a target power or a target expected width of the ECE-scale
interval.  Both take the distribution of the model's predictions as a sample
(``probs``, for example the development set's predictions), treated as the
population the study will draw from.  See ``docs/planning.md``.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calibtest.inputs.front_door import bound_options
from calibtest.inputs.validation import DEFAULT_NULL, NULLS, OptionError, OptionTypeError, check_alpha, check_choice, check_count, \
    resolve_seed, is_bool
from calibtest.core import power as _pw
from calibtest.core.binning import resolve_n_bins
from calibtest.core.intervals import adjusted_interval
from calibtest.core.margin import margin_bound
from calibtest.core.null import bin_volume
from calibtest.core.precision import PRECISION_MEASURES, anticipated_precision, precision_size
from calibtest.core.progress import progress_bar
from calibtest.core.planning import (MAX_SKEWNESS, SMALL_N, SPARSE_LIMIT, AnalyticPlanner, CensoredPlanner,
                                     logistic_recalibration, planned_censoring, planned_null)
from calibtest.core.targets import Target, prepare, top_k_classes
from calibtest.ece.build_result import CONDITIONAL_BY_DEFAULT_MAX_DIM, estimate_in_memory
from calibtest.inputs.settings import Inputs, Settings
from calibtest.options import OPTIONS, check_criteria, check_number, check_option
from calibtest.display.summary import CalibSummary, ResultDisplay

__all__ = ["calib_power", "calib_sample_size", "PowerResult", "SampleSizeResult", "PlanningInputs",
           "MonteCarloPower", "AcceptancePower", "SPARSE_LIMIT", "SMALL_N", "MAX_SKEWNESS", "default_null"]

METHODS = OPTIONS["study_method"].choices

#: The measures of ``precision=`` in words.
_MEASURE_WORDS = {"oe": "ln(O/E)", "citl": "CITL", "slope": "calibration slope", "c": "C statistic"}
#: How the precision sizes are computed (a note of the summary).
PRECISION_NOTE = ("Precision targets (Riley et al. 2021): n = ceil(s1^2 / se^2) with s1^2 = (1 - phi) / phi for "
                  "ln(O/E), 1 / E[p (1 - p)] for CITL and E[w] / (E[w] E[w L^2] - E[w L]^2) for the slope (L the "
                  "linear predictor logit(p), w = p (1 - p) at the anticipated calibration); Newcombe's standard error "
                  "for C; phi the anticipated outcome proportion.")

#: Rows x studies of one simulated n from which a progress bar is shown (the calib_ci studies take about
#: 2 s per 10^6 rows' worth).
SIMULATION_PROGRESS_ROWS = 1e6


def default_null() -> str:
    """The null of :func:`calibtest.calib_ci` when ``null=`` is not given."""
    return DEFAULT_NULL


# ----------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class PlanningInputs:
    """What a power or sample-size calculation assumed (recorded in ``to_dict()``).

    Attributes
    ----------
    mode : str
        ``binary``, ``top1`` or ``topk``.
    k, n_classes : int, int or None
    n_predictions : int
        Size m of the prediction sample that stands for the population.
    prediction_summary : dict
        Mean, standard deviation and 5/25/50/75/95% quantiles of the binned
        prediction (the top-1 confidence for top-k).
    miscalibration : dict
        ``{"form": "logistic", "intercept": a, "slope": b}`` (E[y | p] =
        expit(a + b logit p); for a probability matrix, softmax(b log P)) or
        ``{"form": "callable", "name": ...}``.
    ece_sq_continuous : float
        The unbinned population ECE^2 = mean ||q - z||^2 (for reference; the
        test estimates the binned ECE^2_B, which is smaller).
    alpha : float
    null : str
        The null law whose rejection is counted.
    censoring : dict or None
        A survival study's anticipated censoring (``censored_fraction`` and
        the IPCW variance inflation ``kappa``;
        :class:`calibtest.core.planning.CensoredPlanner`); None without censoring.
    """

    mode: str
    k: int
    n_classes: int | None
    n_predictions: int
    prediction_summary: dict
    miscalibration: dict
    ece_sq_continuous: float
    alpha: float
    null: str
    censoring: dict | None = None

    def as_dict(self) -> dict:
        out = {"mode": self.mode, "k": self.k, "n_classes": self.n_classes, "n_predictions": self.n_predictions,
               "prediction_summary": dict(self.prediction_summary), "miscalibration": dict(self.miscalibration),
               "ece_sq_continuous": self.ece_sq_continuous, "ece_continuous": math.sqrt(self.ece_sq_continuous),
               "alpha": self.alpha, "null": self.null}
        if self.censoring is not None:
            out["censoring"] = dict(self.censoring)
        return out


@dataclass(frozen=True)
class MonteCarloPower:
    """Monte Carlo part of a simulated power calculation.

    Attributes
    ----------
    n_sim : int
        Simulated studies per n.
    power_se : float or ndarray
        sqrt(p (1 - p) / n_sim).
    width_se : float or ndarray
        Standard error of the mean ECE-scale width.
    seed : int or str
        The seed (``rng=seed`` reproduces the run).
    """

    n_sim: int
    power_se: object
    width_se: object
    seed: object


@dataclass(frozen=True)
class AcceptancePower:
    """Simulated power of a plan's acceptance criteria taken together at the planned n.

    Attributes
    ----------
    n : int
        The study size simulated.
    criteria : dict
        The acceptance criteria (canonical form, :func:`calibtest.options.check_criteria`).
    power : float
        P(every criterion met) over the simulated studies.
    power_se : float
        sqrt(power (1 - power) / n_sim).
    met : dict
        Per criterion, the share of studies meeting it.
    n_sim : int
    seed : int or str
        The seed (``rng=seed`` reproduces the run).
    """

    n: int
    criteria: dict
    power: float
    power_se: float
    met: dict
    n_sim: int
    seed: object

    def as_dict(self) -> dict:
        return {"n": self.n, "criteria": {k: list(v) if isinstance(v, tuple) else v for k, v in self.criteria.items()},
                "power": self.power, "power_se": self.power_se, "met": dict(self.met), "n_sim": self.n_sim,
                "seed": self.seed}


def _check_n_array(n, name: str = "n"):
    """``(array of int64, scalar?)``: every n an integer >= 2."""
    if isinstance(n, (numbers.Integral, np.integer)) and not is_bool(n):
        return np.array([check_count(n, name, 2)]), True
    arr = np.asarray(n)
    if arr.ndim != 1 or arr.size == 0:
        raise OptionTypeError(f"{name} must be an integer >= 2 or a non-empty 1-d array of them, got {n!r}")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(np.isfinite(arr))
                                            and np.all(arr == np.round(arr))):
        raise OptionTypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.min() < 2:
        raise OptionError(f"{name} must be >= 2, got {arr.min()}")
    return arr.astype(np.int64), False


_logistic = logistic_recalibration


def _summary_stats(x: np.ndarray) -> dict:
    qs = np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {"mean": float(x.mean()), "sd": float(x.std()), "q05": float(qs[0]), "q25": float(qs[1]),
            "median": float(qs[2]), "q75": float(qs[3]), "q95": float(qs[4])}


@dataclass(frozen=True)
class _Anticipated:
    """The anticipated population of a plan: the predictions, the alternative (``calibration`` or a logistic
    recalibration by ``intercept`` and ``slope``) and the calibration target (``k``, ``n_classes``), as given
    to :func:`calib_power` and :func:`calib_sample_size`."""

    probs: object
    calibration: object
    intercept: object
    slope: object
    k: object
    n_classes: object


def _population(anticipated: _Anticipated):
    """``(z, q, prepared data, miscalibration dict)`` of the prediction sample and the alternative."""
    a = anticipated
    probs, calibration, intercept, slope, k, n_classes = a.probs, a.calibration, a.intercept, a.slope, a.k, a.n_classes
    intercept = check_number(intercept, "intercept")
    slope = check_number(slope, "slope")
    if calibration is not None:
        if not callable(calibration):
            raise OptionTypeError(f"calibration must be a callable E[y | p] or None, got "
                                  f"{type(calibration).__name__}")
        if intercept != 0.0 or slope != 1.0:
            raise ValueError("give either calibration= (a callable) or intercept=/slope= (logistic "
                             "recalibration), not both")
    P = np.asarray(probs)
    if P.ndim == 0:
        raise ValueError("probs must be a sample of predictions (shape (m,) or (m, K)), got a scalar")
    m = P.shape[0]
    data = prepare(np.zeros(m, dtype=np.int64), P, n_classes=n_classes, k=k)
    z = data.z
    if P.ndim == 1 or (P.ndim == 2 and P.shape[1] == 1):
        pz = z[:, 0]
        if calibration is None:
            q = _logistic(pz, intercept, slope)
        else:
            q = np.asarray(calibration(pz.copy()), dtype=np.float64)
            if q.shape != pz.shape:
                raise ValueError(f"calibration(p) must return one value per prediction, shape {pz.shape}, "
                                 f"got shape {q.shape}")
        q = q[:, None]
    else:
        Pm = np.asarray(P, dtype=np.float64)
        if calibration is None:
            if intercept != 0.0:
                raise ValueError("intercept= applies to a single probability column; for a probability matrix "
                                 "the logistic recalibration is softmax(slope * log P): give slope= or a "
                                 "callable calibration(P) returning the true class probabilities")
            with np.errstate(divide="ignore", invalid="ignore"):
                logits = slope * np.log(Pm)
            logits = np.where(Pm == 0.0, -np.inf if slope > 0 else (np.inf if slope < 0 else 0.0), logits)
            logits = logits - logits.max(axis=1, keepdims=True)
            Q = np.exp(logits)
            Q /= Q.sum(axis=1, keepdims=True)
        else:
            Q = np.asarray(calibration(Pm.copy()), dtype=np.float64)
            if Q.shape != Pm.shape:
                raise ValueError(f"calibration(P) must return a matrix of true class probabilities of shape "
                                 f"{Pm.shape}, got shape {Q.shape}")
            if np.all(np.isfinite(Q)) and np.abs(Q.sum(axis=1) - 1.0).max() > 1e-6:
                raise ValueError("calibration(P) must return rows that sum to 1 (true class probabilities)")
        q = np.take_along_axis(Q, top_k_classes(Pm, data.k), axis=1)
    if not np.all(np.isfinite(q)) or q.min() < 0.0 or q.max() > 1.0:
        raise ValueError("calibration must give probabilities in [0, 1] for every prediction "
                         f"(range found [{np.nanmin(q)!r}, {np.nanmax(q)!r}])")
    if calibration is None:
        form = {"form": "logistic", "intercept": intercept, "slope": slope}
    else:
        form = {"form": "callable", "name": getattr(calibration, "__name__", type(calibration).__name__)}
    return z, q, data, form


def _resolve_null(null, d: int) -> str:
    """The null of the planned study: ``"auto"`` is what :func:`calibtest.calib_ci` uses on rows in memory.

    That is the conditional null for a binned vector of at most
    ``CONDITIONAL_BY_DEFAULT_MAX_DIM`` coordinates, the asymptotic one above.
    """
    null = default_null() if null is None else null
    if not isinstance(null, str):
        raise OptionTypeError(f"null must be a string or None, got {type(null).__name__}")
    null = check_choice(null, "null", NULLS)
    if null == "auto":
        return "conditional" if d <= CONDITIONAL_BY_DEFAULT_MAX_DIM else "asymptotic"
    return null


class _Planner(AnalyticPlanner):
    """:class:`~calibtest.core.planning.AnalyticPlanner` with the prepared data and simulated studies."""

    def __init__(self, z, q, data, n_bins, alpha, null, margin=None):
        super().__init__(z, q, data.mode, data.n_classes, data.k, n_bins, alpha, null, margin)
        self.data = data

    def margin_floor(self, n: int, pb) -> float:
        """V0 of the margin test at n: sigma0^2 / (n^2 w) (asymptotic null) or the expected Var(T | Z)."""
        if self.null == "asymptotic":
            return self.s0 / (n * n * bin_volume(pb.n_bins, self.d))
        return _pw.null_variance(int(n), pb)

    def simulate(self, n: int, n_sim: int, gen) -> dict:
        """Power and mean width over ``n_sim`` simulated studies (the package's estimator)."""
        n = int(n)
        res = self.analytic(n)
        pb = self.bins(res["n_bins"])
        with progress_bar(n_sim, f"simulated studies at n = {n}", unit="study", work=float(n) * n_sim,
                          min_work=SIMULATION_PROGRESS_ROWS) as bar:
            return self._simulated(n, n_sim, gen, res, pb, bar)

    def _simulated(self, n: int, n_sim: int, gen, res: dict, pb, bar) -> dict:
        """:meth:`simulate` at one n, advancing ``bar`` by the studies done."""
        if self.null == "asymptotic":
            t, s1 = _pw.simulate_studies(self.z, self.q, pb.inverse, pb.pi.size, n, n_sim, gen)
            thr = res["threshold"]
            ci = adjusted_interval(t, np.sqrt(s1 / n), thr, self.alpha)
            reject = ~np.asarray(ci.contains_zero)
            if self.margin is not None:  # the margin test with the asymptotic floor sigma0^2 / (n^2 w)
                v0 = self.s0 / (n * n * bin_volume(pb.n_bins, self.d))
                reject = np.asarray(margin_bound(t, np.sqrt(s1 / n), v0, self.margin, self.alpha).reject)
            width = np.sqrt(ci.upper) - np.sqrt(np.where(ci.contains_zero, 0.0, ci.lower))
            bar.update(n_sim)
        else:
            reject, width = self._simulate_calib_ci(n, n_sim, gen, res["n_bins"], bar)
        p = float(reject.mean())
        res.update(power=p, expected_width=float(width.mean()), power_se=math.sqrt(p * (1 - p) / n_sim),
                   width_se=float(width.std(ddof=1) / math.sqrt(n_sim)) if n_sim > 1 else float("nan"))
        return res

    def _simulate_calib_ci(self, n, n_sim, gen, B, bar=None):
        """Studies analysed one at a time by calib_ci (the data-dependent nulls)."""
        if self.d != 1:
            raise ValueError(f"method='simulation' with null={self.null!r} supports binary and top-1 targets; "
                             "use null='asymptotic' for top-k planning by simulation")
        m = self.z.shape[0]
        reject = np.empty(n_sim, dtype=bool)
        width = np.empty(n_sim)
        settings = Settings(n_classes=self.data.n_classes, n_bins=B, alpha=self.alpha, null=self.null)
        for s in range(n_sim):  # each study is one calib_ci call (its data-dependent null)
            idx = gen.integers(0, m, size=n)
            y = (gen.random(n) < self.q[idx, 0]).astype(np.int64)
            res = estimate_in_memory(Inputs(y=y, probs=self.z[idx, 0]), settings.replace(rng=gen))
            reject[s] = (not res.contains_zero) if self.margin is None else res.margin_test(self.margin).reject
            width[s] = math.sqrt(res.ci_upper) - math.sqrt(res.ci_lower)
            if bar is not None:
                bar.update()
        return reject, width


def _inputs(data, z, q, form, alpha, null) -> PlanningInputs:
    delta = q - z
    return PlanningInputs(mode=data.mode, k=data.k, n_classes=data.n_classes, n_predictions=int(z.shape[0]),
                          prediction_summary=_summary_stats(z[:, 0]), miscalibration=form,
                          ece_sq_continuous=float(np.mean(np.einsum("ij,ij->i", delta, delta))),
                          alpha=alpha, null=null)


# ----------------------------------------------------------------------------- power
@dataclass(frozen=True, repr=False)
class PowerResult(ResultDisplay):
    """Power of the calibration test of a planned study (:func:`calib_power`).

    Scalars for a scalar ``n``; 1-d arrays (one entry per n) for an array.

    Attributes
    ----------
    power : float or ndarray
        P(the test rejects H0: calibrated) = P(the adjusted interval excludes 0).
    n : int or ndarray
    n_bins : int or ndarray
        B the study will use at n.
    ece_sq_binned : float or ndarray
        ECE^2_B, the binned population calibration error at B (what T estimates).
    sigma1_sq : float or ndarray
        Population sigma1^2 (eq. (8)) at B.
    sigma0_sq : float
        The calibrated-regime constant of eq. (12).
    threshold : float or ndarray
        Critical value of T (z_alpha sigma0 / (n sqrt(w)) for the asymptotic null).
    t_mean, t_sd : float or ndarray
        Mean and standard deviation of T (analytic, exact in the bin counts).
    t_skewness : float or ndarray
        Approximate skewness of T (analytic).
    expected_width : float or ndarray
        Expected width of the ECE-scale interval (analytic: quadrature over T;
        simulation: the mean over studies).
    sparse_share : float or ndarray
        Expected share of the occupied bins holding one row.
    reliable : bool or ndarray
        n >= 100, sparse_share <= :data:`SPARSE_LIMIT` and t_skewness <= :data:`MAX_SKEWNESS`.
    method : str
    alpha : float
    inputs : PlanningInputs
    monte_carlo : MonteCarloPower or None
        Only for ``method="simulation"``.
    """

    power: object
    n: object
    n_bins: object
    ece_sq_binned: object
    sigma1_sq: object
    sigma0_sq: float
    threshold: object
    t_mean: object
    t_sd: object
    t_skewness: object
    expected_width: object
    sparse_share: object
    reliable: object
    method: str
    alpha: float
    inputs: PlanningInputs
    monte_carlo: MonteCarloPower | None = None
    _table: pd.DataFrame = field(default=None, compare=False)
    margin: float | None = None

    def frame(self) -> pd.DataFrame:
        """One row per n: n, n_bins, power (with its MC s.e.), expected width, ECE^2_B, threshold."""
        return self._table.copy()

    def _repr_parts(self):
        if np.ndim(self.n) == 0:
            return [f"n={self.n}", f"power={self.power:.3g}", f"method={self.method!r}"]
        return [f"n=[{len(self.n)} values]", f"method={self.method!r}"]

    def _summary(self, alpha):
        s = CalibSummary()
        s.add_title("Power of the calibration test of a planned study" if self.margin is None else
                    f"Power to show ECE < {self.margin:g} in a planned study")
        s.add_settings(_settings(self.inputs, self.method, self.monte_carlo))
        cols = ["n", "n_bins", "power"] + (["power_se"] if self.monte_carlo else []) + \
            ["expected_width", "ece_binned", "threshold"]
        s.add_table(self._table[cols], formats={"power": 3, "power_se": 2, "expected_width": 3,
                                                 "ece_binned": 3, "threshold": 3}, index=False)
        s.add_notes(_notes(self.inputs, np.atleast_1d(self.reliable), self.method, self.margin))
        return s

    def _dict(self):
        out = {"method": self.method, "alpha": self.alpha, "sigma0_sq": self.sigma0_sq,
               "inputs": self.inputs.as_dict()}
        if self.margin is not None:
            out["margin"] = self.margin
        for col in self._table.columns:
            vals = self._table[col].tolist()
            out[col] = vals[0] if np.ndim(self.n) == 0 else vals
        if self.monte_carlo is not None:
            out["n_sim"] = self.monte_carlo.n_sim
            out["seed"] = self.monte_carlo.seed
        return out


def _settings(inputs: PlanningInputs, method: str, mc) -> dict:
    mis = inputs.miscalibration
    what = (f"logistic: intercept {mis['intercept']:g}, slope {mis['slope']:g}" if mis["form"] == "logistic"
            else f"callable {mis['name']}")
    outcome = inputs.mode + (f" (K = {inputs.n_classes})" if inputs.n_classes else "") + \
        (f", k = {inputs.k}" if Target(inputs.mode).topk else "")
    if inputs.censoring is not None:
        outcome = "survival at a horizon (the risk P(T <= t))"
    ps = inputs.prediction_summary
    out = {"Outcome:": outcome, "Predictions:": f"m = {inputs.n_predictions}, median {ps['median']:.3g}, "
           f"90% range [{ps['q05']:.3g}, {ps['q95']:.3g}]",
           "Miscalibration:": what, "ECE (continuous):": f"{math.sqrt(inputs.ece_sq_continuous):.4g}",
           "Alpha:": f"{inputs.alpha:g}", "Null:": planned_null(inputs.null, inputs.censoring), "Method:": method}
    if inputs.censoring is not None:
        out["Censoring:"] = planned_censoring(inputs.censoring)
    if mc is not None:
        out["Studies per n:"] = str(mc.n_sim)
        out["Seed:"] = str(mc.seed)
    return out


def _notes(inputs, reliable, method, margin=None) -> list[str]:
    if margin is None:
        head = ("Power is the probability that the study's adjusted interval excludes 0 (the test of "
                "H0: calibrated rejects)")
    else:
        head = (f"Power is the probability that the margin test rejects H0: ECE >= {margin:g} (the one-sided "
                f"{100 * (1 - inputs.alpha):g}% upper confidence bound for ECE falls below {margin:g}; analytic: "
                "T ~ shifted gamma, the bound's squared se E sigma1_hat^2 / n + kappa (T - E T), floored at V0)")
    notes = [head + "; widths are of the ECE-scale interval. The test estimates the binned "
             "ECE at the B the study uses, which is smaller than the continuous ECE."]
    if inputs.censoring is not None:
        cens = inputs.censoring
        notes.append(f"Survival study at a horizon with {cens['censored_fraction']:.0%} of the patients censored "
                     "before it (exponential event and censoring times): the IPCW outcomes inflate the label "
                     f"variance by kappa = {cens['kappa']:.4g}, and n rows are planned as an uncensored study of "
                     "n / kappa rows at the bins of n (conservative: the Kaplan-Meier estimate of the censoring "
                     "lowers the variance; docs/survival.md).")
    if method == "analytic":
        notes.append("Analytic: T ~ shifted gamma with its mean and variance exact given the bin counts "
                     "(first-order sigma1^2 / n plus the calibrated-regime second-order term) and its "
                     "approximate skewness.")
        if not np.all(reliable):
            notes.append(f"Sparse bins, n < {SMALL_N} or skewness of T above {MAX_SKEWNESS:g} at some n (more "
                         f"than {SPARSE_LIMIT:.0%} of the occupied bins expected to hold one row): the "
                         "approximation is unreliable there; use method='simulation'.")
    else:
        notes.append("Simulation: studies of n rows drawn from the prediction sample with labels from the "
                     "anticipated calibration, analysed with the package's estimator.")
    return notes


def _frame(rows: list[dict], simulated: bool) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["ece_binned"] = np.sqrt(df["ece_sq_binned"])
    keep = ["n", "n_bins", "power"] + (["power_se"] if simulated else []) + ["expected_width"] + \
        (["width_se"] if simulated else []) + ["ece_sq_binned", "ece_binned", "sigma1_sq", "threshold", "t_mean",
                                                "t_sd", "t_skewness", "sparse_share", "reliable"]
    return df[keep]


def _common(anticipated: _Anticipated, alpha, n_bins, null, method, margin=None, censored_fraction=None):
    alpha = check_alpha(alpha)
    margin = check_option("margin", margin)
    method = check_option("study_method", method, "method")
    censored_fraction = check_option("censored_fraction", censored_fraction)
    if n_bins != "auto":
        resolve_n_bins(n_bins, 100, 1)  # type and range check
    z, q, data, form = _population(anticipated)
    asked, null = null, _resolve_null(null, data.k)
    if censored_fraction is None:
        planner = _Planner(z, q, data, n_bins, alpha, null, margin)
        return planner, _inputs(data, z, q, form, alpha, null), method
    if not data.mode.binary:
        raise ValueError("censored_fraction= plans a survival study at a horizon, whose risk is one probability "
                         f"column (binary), not mode {data.mode!r}")
    if asked not in (None, "auto", "asymptotic"):
        raise OptionError(f"null={asked!r} with censored_fraction= is not available: rows censored before the "
                          "horizon have no binary label, and the survival test is the IPCW asymptotic one "
                          "(null='auto' or 'asymptotic'; docs/survival.md)")
    null = "asymptotic"  # the test calib_ci(..., horizon=) makes with censoring before the horizon
    if method != "analytic":
        raise ValueError("method='simulation' is not available with censored_fraction=; use method='analytic' "
                         "(checked by simulation in docs/survival.md)")
    if q.max() >= 1.0:
        raise ValueError("with censored_fraction= the anticipated risks by the horizon must be below 1 (an "
                         "exponential event time cannot reach a risk of 1)")
    planner = CensoredPlanner(z, q, data.mode, data.n_classes, data.k, n_bins, alpha, censored_fraction, margin)
    inputs = dataclasses.replace(_inputs(data, z, q, form, alpha, null),
                                 censoring={"censored_fraction": censored_fraction, "kappa": planner.kappa,
                                            "model": "exponential event and censoring times, G known"})
    return planner, inputs, method


def _recalibration_population(planner, inputs: PlanningInputs, what: str):
    """``(z, q)`` of one probability column (binary, no censoring): what the CITL, slope, O/E and C plans need."""
    if not Target(inputs.mode).has_recalibration_measures or inputs.censoring is not None:
        outcome = "a survival outcome" if inputs.censoring is not None else f"mode {inputs.mode!r}"
        raise OptionError(f"{what} plans a binary outcome (one probability column, no censoring), not {outcome}")
    return planner.z[:, 0], planner.q[:, 0]


def _precision_table(planner, inputs: PlanningInputs, precision) -> pd.DataFrame:
    """One row per measure of ``precision`` (``{measure: target standard error}``): anticipated value, n, se at n.

    The closed forms of :mod:`calibtest.core.precision` (Riley et al. 2021).
    """
    if not isinstance(precision, dict) or not precision:
        raise OptionTypeError(f"precision must be a non-empty dict {{measure: target standard error}} with measures "
                              f"among {list(PRECISION_MEASURES)}, got {precision!r}")
    unknown = [m for m in precision if m not in PRECISION_MEASURES]
    if unknown:
        raise OptionError(f"precision has unknown measures {unknown}; allowed: {list(PRECISION_MEASURES)}")
    z, q = _recalibration_population(planner, inputs, "precision=")
    rows = []
    for measure in (m for m in PRECISION_MEASURES if m in precision):
        se = check_number(precision[measure], f"precision[{measure!r}]")
        if not se > 0.0:
            raise OptionError(f"precision[{measure!r}] must be a standard error > 0, got {se}")
        if measure in ("citl", "slope") and (z.min() <= 0.0 or z.max() >= 1.0):
            raise OptionError(f"precision[{measure!r}] needs predictions strictly inside (0, 1) (their logit is "
                              "the linear predictor)")
        prec = anticipated_precision(z, q, measure)
        n = precision_size(prec, se)
        rows.append({"measure": measure, "anticipated": prec.value, "target_se": se, "n": n, "se_at_n": prec.se(n),
                     "outcome_proportion": prec.outcome_proportion})
    return pd.DataFrame(rows)


def _acceptance_power(planner, inputs: PlanningInputs, criteria, n: int, n_sim: int, rng) -> AcceptancePower:
    """The share of ``n_sim`` simulated studies of n rows that meet every criterion (each analysed by calib_ci and
    :meth:`~calibtest.ece.result.CalibrationResult.acceptance` at the plan's alpha, null and ``n_bins``)."""
    criteria = check_criteria(criteria, "acceptance")
    z, q = _recalibration_population(planner, inputs, "acceptance=")
    n_sim = check_option("n_sim", n_sim)
    gen, seed = resolve_seed(rng)
    settings = Settings(n_bins=planner.n_bins, alpha=planner.alpha, null=planner.null)
    met = np.zeros((n_sim, len(criteria)), dtype=bool)
    with progress_bar(n_sim, f"acceptance criteria at n = {n}", unit="study", work=float(n) * n_sim,
                      min_work=SIMULATION_PROGRESS_ROWS) as bar:
        for s in range(n_sim):
            idx = gen.integers(0, z.size, size=n)
            y = (gen.random(n) < q[idx]).astype(np.int64)
            res = estimate_in_memory(Inputs(y=y, probs=z[idx]), settings.replace(rng=gen))
            table = res.acceptance(criteria, alpha=planner.alpha).table.set_index("criterion")
            met[s] = (table.loc[list(criteria), "verdict"] == "met").to_numpy()
            bar.update()
    every = met.all(axis=1)
    p = float(every.mean())
    return AcceptancePower(n=int(n), criteria=criteria, power=p, power_se=math.sqrt(p * (1 - p) / n_sim),
                           met={key: float(v) for key, v in zip(criteria, met.mean(axis=0))}, n_sim=n_sim, seed=seed)


@bound_options("calib_power", method="study_method", null=None)
def calib_power(n, *, probs, calibration=None, intercept: float = 0.0, slope: float = 1.0, alpha: float = 0.05,
                n_bins="auto", k: int = 1, n_classes: int | None = None, null: str | None = None,
                method: str = "analytic", n_sim: int = 1000, rng=None, margin: float | None = None,
                censored_fraction: float | None = None) -> PowerResult:
    """Power of the calibration test in a planned validation study of n rows.

    The study draws n predictions from the distribution that ``probs``
    represents and labels from the anticipated calibration curve
    E[y | p] = c(p); it rejects H0: calibrated when T exceeds the upper alpha
    point of the null law (the adjusted interval then excludes 0).  The null
    is that of :func:`calibtest.calib_ci` by default (``null="auto"``): the
    conditional null for binary, top-1 and top-k (k <= 4 binned coordinates)
    targets, the paper's asymptotic null, threshold z_alpha sigma0 /
    (n sqrt(w)) (eq. (7)), above.  The plan records which (``inputs.null``).

    ``method="analytic"``: with the population bins at the B the study uses
    (``auto_n_bins(n, d)`` unless ``n_bins`` is given) -- masses pi_b, means
    mu_b = E[U | bin] and covariances Sigma_b = Cov(U | bin), which include
    the label variance c (1 - c) and the spread of c(p) - p in the bin --
    T is approximated by a shifted gamma law with its mean and variance, exact
    given Multinomial(n, pi) bin counts c_b, and an approximate skewness
    (:func:`calibtest.core.power.t_skewness`)::

        E T   = (1/n) sum_b ||mu_b||^2 E[c_b; c_b >= 2]                     (~ ECE^2_B)
        Var T = sigma1^2 / n + (2/n^2) sum_b E[c_b/(c_b-1); c_b >= 2] tr(Sigma_b^2)

    (sigma1^2 of eq. (8) with population quantities; the second term is the
    calibrated-regime variance, sigma0^2 / (n^2 w) of eq. (12) when every bin
    is occupied), so that power = P(T >= thr) is right in both regimes; the
    skewness (2 sqrt(2) / sqrt(B) for T's degenerate part) corrects the
    normal law's understatement of the size at moderate B.  ``method="simulation"``: ``n_sim`` studies drawn and analysed
    with the package's estimator (vectorised across studies), with the Monte
    Carlo standard error of the power.

    Parameters
    ----------
    n : int or array_like of int
        Planned sample size(s) (>= 2); an array gives a power curve.
    probs : array_like, shape (m,) or (m, K)
        A sample of predictions standing for the population: probabilities
        p = P(y = 1) (binary), top-1 confidences with ``n_classes`` (top-1), or
        a K-column probability matrix (top-k with ``k``).
    calibration : callable, optional
        The anticipated E[y | p] (vectorised; for a matrix, P -> the matrix of
        true class probabilities).  Default: the logistic recalibration.
    intercept, slope : float
        Logistic recalibration E[y | p] = expit(intercept + slope logit p);
        for a probability matrix softmax(slope log P) (temperature 1/slope;
        intercept must be 0).  intercept 0 and slope 1 is a calibrated model.
    alpha : float
        Level of the test / the interval is 1 - alpha.
    n_bins : int or "auto"
        B per dimension; "auto" uses the package's rule at each n.
    k : int
        Top-1-to-k target for a probability matrix.
    n_classes : int, optional
        K for a single confidence column (top-1).
    null : str, optional
        Null law of the test; default (None or ``"auto"``) that of
        :func:`calibtest.calib_ci`: ``"conditional"`` for binary, top-1 and
        top-k targets with k <= 4, ``"asymptotic"`` above.  The analytic power
        uses the paper's threshold for ``"asymptotic"`` and, for the
        data-dependent nulls, the upper alpha point of a shifted gamma with the
        expected conditional-null variance and skewness of T given the
        predictions.  Against studies analysed by ``calib_ci`` with the
        default null (1000-2000 per point, three prediction distributions,
        three miscalibrations) this analytic power at the analytic n for power
        0.8 is within 0.03 of the simulated one; see ``docs/planning.md``.
        ``method="simulation"`` with a data-dependent null runs
        :func:`calibtest.calib_ci`'s estimator once per study (binary and
        top-1 targets; a few ms per study at n = 1000-10000).
    method : {"analytic", "simulation"}
    n_sim : int
        Simulated studies per n (simulation).
    rng : None, int or numpy.random.Generator
        Seed of the simulation (recorded).
    margin : float, optional
        Plan a margin test instead (``res.margin_test(margin)``, H0: ECE >= margin):
        ``power`` is then the probability that the one-sided (1 - alpha) upper
        confidence bound for ECE falls below ``margin``.  Analytic: T follows the
        shifted gamma law above and the bound's squared standard error follows T
        linearly (:func:`calibtest.core.power.margin_power`,
        :func:`calibtest.core.power.plugin_slope`); simulation: each study is
        analysed by the real margin test.  See ``docs/acceptance.md``.

    censored_fraction : float, optional
        Plan a survival study at a horizon (``calib_ci(..., horizon=)``):
        ``probs`` are the risks by the horizon and the calibration curve gives
        the true risks q; a share ``censored_fraction`` of the patients is
        anticipated to be censored before the horizon in the absence of events
        (exponential censoring; exponential event times given the risk).  The
        IPCW outcomes inflate the label variance by kappa
        (:func:`calibtest.core.planning.ipcw_inflation`), and n rows are
        planned as an uncensored study of n / kappa rows at the bins of n
        (analytic method, default null; ``inputs.censoring`` records kappa).

    Returns
    -------
    PowerResult

    Warns
    -----
    UserWarning
        Analytic power at an n where it is unreliable (n < 100, more than
        :data:`SPARSE_LIMIT` of the occupied bins expected to hold one row, or
        skewness of T above 3).

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024.
    .. [2] Hoeffding, "A class of statistics with asymptotically normal
           distribution", Annals of Mathematical Statistics 19:293-325, 1948.

    Examples
    --------
    >>> import numpy as np, calibtest as ct
    >>> p = np.random.default_rng(0).beta(2, 5, 5000)
    >>> ct.calib_power([500, 1000, 2000], probs=p, slope=0.8).power.round(2)
    array([0.13, 0.2 , 0.36])
    """
    ns, scalar = _check_n_array(n)
    planner, inputs, method = _common(_Anticipated(probs, calibration, intercept, slope, k, n_classes), alpha,
                                      n_bins, null, method, margin, censored_fraction)
    mc = None
    if method == "analytic":
        rows = planner.analytic_many(ns)  # every n at once (bins, count laws and quadrature batched)
        bad = [r["n"] for r in rows if not r["reliable"]]
        if bad:
            warnings.warn(f"analytic power is unreliable at n = {bad[:5]} (n < {SMALL_N}, more than "
                          f"{SPARSE_LIMIT:.0%} of the occupied bins expected to hold one row, or skewness "
                          f"of T above {MAX_SKEWNESS:g}); use "
                          "method='simulation'", UserWarning, stacklevel=2)
    else:
        n_sim = check_option("n_sim", n_sim)
        gen, seed = resolve_seed(rng)
        rows = [planner.simulate(v, n_sim, gen) for v in ns]
        mc = MonteCarloPower(n_sim=n_sim, power_se=_pick([r["power_se"] for r in rows], scalar),
                             width_se=_pick([r["width_se"] for r in rows], scalar), seed=seed)
    df = _frame(rows, method == "simulation")
    col = lambda c: _pick(df[c].to_numpy(), scalar)
    return PowerResult(power=col("power"), n=_pick(ns, scalar), n_bins=col("n_bins"),
                       ece_sq_binned=col("ece_sq_binned"), sigma1_sq=col("sigma1_sq"), sigma0_sq=planner.s0,
                       threshold=col("threshold"), t_mean=col("t_mean"), t_sd=col("t_sd"), t_skewness=col("t_skewness"),
                       expected_width=col("expected_width"), sparse_share=col("sparse_share"),
                       reliable=col("reliable"), method=method, alpha=planner.alpha, inputs=inputs,
                       monte_carlo=mc, _table=df, margin=planner.margin)


def _pick(values, scalar: bool):
    arr = np.asarray(values)
    if scalar:
        v = arr[0]
        return v.item() if hasattr(v, "item") else v
    out = arr.copy()
    out.setflags(write=False)
    return out


# ----------------------------------------------------------------------------- sample size
@dataclass(frozen=True, repr=False)
class SampleSizeResult(ResultDisplay):
    """Smallest sample size meeting a power or interval-width target (:func:`calib_sample_size`).

    Attributes
    ----------
    n : int
        The sample size (see ``rule``).
    target : {"power", "ci_width"}
    target_value : float
    achieved_power : float
        Power at n.
    expected_width : float
        Expected width of the ECE-scale interval at n.
    n_bins : int
        B at n.
    ece_sq_binned : float
        ECE^2_B at n.
    method : str
    reliable : bool
        The analytic answer's reliability flag at n (see :func:`calib_power`).
    rule : str
        How n was chosen.
    curve : pandas.DataFrame
        Power and expected width against n on the search grid (column
        ``source``: "analytic" or "simulation").
    inputs : PlanningInputs
    monte_carlo : MonteCarloPower or None
        For ``method="simulation"``: the studies per evaluated n.
    """

    n: int
    target: str
    target_value: float
    achieved_power: float
    expected_width: float
    n_bins: int
    ece_sq_binned: float
    method: str
    reliable: bool
    rule: str
    curve: pd.DataFrame
    inputs: PlanningInputs
    monte_carlo: MonteCarloPower | None = None
    margin: float | None = None
    #: The planning function's inputs an analysis plan keeps to recompute the power at another n
    #: (``calibtest.inputs.plan.sample_size_record``): the ``n_bins`` argument and, for one prediction column
    #: with a logistic anticipated calibration, the binned predictions (read-only); None otherwise.
    n_bins_rule: object = field(default="auto", compare=False)
    predictions: object = field(default=None, compare=False, repr=False)
    #: With ``precision=``: one row per measure (``measure``, ``anticipated`` value, ``target_se``, its ``n``,
    #: ``se_at_n`` (at that n), ``outcome_proportion``); None otherwise.
    precision: pd.DataFrame | None = field(default=None, compare=False)
    #: With ``acceptance=``: the simulated power of the criteria taken together at n.
    acceptance_power: AcceptancePower | None = None

    def _repr_parts(self):
        return [f"n={self.n}", f"target={self.target} {self.target_value:g}",
                f"achieved_power={self.achieved_power:.3g}", f"expected_width={self.expected_width:.3g}"]

    def _summary(self, alpha):
        s = CalibSummary()
        s.add_title("Sample size for a calibration validation study")
        what = ("standard errors of " + ", ".join(_MEASURE_WORDS[m] for m in self.precision["measure"])
                if self.target == "precision" else
                f"expected ECE-scale interval width <= {self.target_value:g}" if self.target != "power" else
                f"power {self.target_value:g} to reject H0: calibrated" if self.margin is None else
                f"power {self.target_value:g} to show ECE < {self.margin:g} (margin test)")
        s.add_settings({"Target:": what, **_settings(self.inputs, self.method, self.monte_carlo)})
        row = pd.DataFrame({"n": [self.n], "n_bins": [self.n_bins], "power": [self.achieved_power],
                            "expected_width": [self.expected_width], "ece_binned": [math.sqrt(self.ece_sq_binned)]})
        s.add_table(row, formats={"power": 3, "expected_width": 3, "ece_binned": 3}, index=False)
        if self.precision is not None:
            table = self.precision.assign(measure=[_MEASURE_WORDS[m] for m in self.precision["measure"]])
            s.add_table(table[["measure", "anticipated", "target_se", "n", "se_at_n"]],
                        formats={"anticipated": 3, "target_se": 3, "se_at_n": 4}, index=False)
        notes = [self.rule] + _notes(self.inputs, np.array([self.reliable]), "analytic" if
                                     self.method == "analytic" else "simulation", self.margin)
        if self.precision is not None:
            notes.append(PRECISION_NOTE)
        if self.acceptance_power is not None:
            ap = self.acceptance_power
            each = ", ".join(f"{key} {share:.3f}" for key, share in ap.met.items())
            notes.append(f"Acceptance criteria taken together at n = {ap.n}: all met in {ap.power:.3f} of {ap.n_sim} "
                         f"simulated studies (Monte Carlo s.e. {ap.power_se:.3f}; seed {ap.seed}); each: {each}.")
        s.add_notes(notes)
        return s

    def _dict(self):
        extra = {} if self.margin is None else {"margin": self.margin}
        return {**extra, "n": self.n, "target": self.target, "target_value": self.target_value,
                "achieved_power": self.achieved_power, "expected_width": self.expected_width,
                "n_bins": self.n_bins, "ece_sq_binned": self.ece_sq_binned,
                "ece_binned": math.sqrt(self.ece_sq_binned), "method": self.method, "reliable": self.reliable,
                "rule": self.rule, "inputs": self.inputs.as_dict(),
                "n_sim": None if self.monte_carlo is None else self.monte_carlo.n_sim,
                "seed": None if self.monte_carlo is None else self.monte_carlo.seed,
                "curve": {c: self.curve[c].tolist() for c in ("n", "n_bins", "power", "expected_width", "source")},
                **({} if self.precision is None else {"precision": self.precision.to_dict(orient="records")}),
                **({} if self.acceptance_power is None else {"acceptance_power": self.acceptance_power.as_dict()})}

    def plot(self, ax=None):
        """Power and expected ECE-scale width against n, the target and the chosen n marked.

        Returns
        -------
        matplotlib.figure.Figure
        """
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(6.4, 4.0))
        else:
            fig = ax.figure
        col = "power" if self.target == "power" else "expected_width"
        for source, style in (("analytic", "-"), ("simulation", "o")):
            part = self.curve[self.curve["source"] == source]
            if len(part):
                ax.plot(part["n"], part[col], style, label=source)
        ax.axhline(self.target_value, color="grey", lw=0.8, ls="--")
        ax.axvline(self.n, color="C3", lw=0.8, ls=":", label=f"n = {self.n}")
        ax.set_xscale("log")
        ax.set_xlabel("sample size n")
        ax.set_ylabel("power" if col == "power" else "expected ECE-scale interval width")
        ax.legend(frameon=False)
        return fig


def _meets(values, target: str, value: float):
    return values >= value if target == "power" else values <= value


@bound_options("calib_sample_size", method="study_method", null=None)
def calib_sample_size(*, probs, calibration=None, intercept: float = 0.0, slope: float = 1.0, power=None,
                      ci_width=None, alpha: float = 0.05, n_bins="auto", k: int = 1, n_classes: int | None = None,
                      null: str | None = None, method: str = "analytic", n_min: int = 50, n_max: int = 10**6,
                      n_grid: int = 200, n_sim: int = 1000, rng=None, margin: float | None = None,
                      censored_fraction: float | None = None, precision: dict | None = None,
                      acceptance: dict | None = None) -> SampleSizeResult:
    """Smallest validation-study size that reaches a target power or expected interval width.

    Exactly one target: ``power`` (probability that the test of H0: calibrated
    rejects under the anticipated miscalibration) or ``ci_width`` (expected
    width of the ECE-scale adjusted interval, sqrt(upper) - sqrt(lower), under
    it: precision-based planning).  The test and interval are those of
    :func:`calibtest.calib_ci` with its default null unless ``null`` is given:
    the conditional null for binary, top-1 and top-k (k <= 4) targets.

    Search rule.  Because B changes with n (a step function), power and width
    are not monotone in n.  The criterion is evaluated on a grid of ``n_grid``
    log-spaced integers in [n_min, n_max]; i* is the first grid point from
    which the target holds at every larger grid point; the integer n is then
    found by bisection between the grid points i* - 1 (fails) and i* (holds),
    so the target holds at n and at every larger grid point, and fails at
    n - 1.  With ``method="simulation"`` the analytic n brackets a bisection on
    the simulated criterion (``n_sim`` studies per evaluation, common seed),
    stopped when the bracket is within 2% of n.

    Expected width (analytic): Gauss-Hermite quadrature of the ECE-scale
    interval of Algorithm 1 over T ~ N(E T, Var T) (see :func:`calib_power`),
    at the standard error sqrt(E sigma1_hat^2 / n), the plug-in's expectation
    (:func:`calibtest.core.power.expected_sigma1_sq`: from the exact moments of
    the bin means for one-column targets).

    Parameters
    ----------
    probs, calibration, intercept, slope, alpha, n_bins, k, n_classes, null, method, n_sim, rng
        As in :func:`calib_power`.
    power : float, optional
        Target power in (0, 1).
    ci_width : float, optional
        Target expected width (> 0) of the ECE-scale interval.
    n_min, n_max : int
        Search range.
    n_grid : int
        Grid points of the search.
    margin : float, optional
        Plan a margin test (H0: ECE >= margin; needs ``power``): n is the
        smallest size at which the one-sided upper confidence bound for ECE falls
        below ``margin`` with probability ``power`` under the anticipated
        calibration (calibrated by default).  See :func:`calib_power` and
        ``docs/acceptance.md``.

    censored_fraction : float, optional
        Plan a survival study at a horizon, as in :func:`calib_power`: n rows
        are planned as an uncensored study of n / kappa rows, kappa the IPCW
        variance inflation (``inputs.censoring`` records it).
        With ``margin`` the survival result's margin test is planned: T and
        the bound's plug-in standard error of the n / kappa uncensored rows,
        its floor the V_0 the survival result estimates from its n IPCW rows.
    precision : dict, optional
        Target standard errors ``{measure: se}`` of ``"oe"`` (ln O/E),
        ``"citl"``, ``"slope"`` and ``"c"`` (binary outcome): each measure's
        size by Riley et al. (2021), n = ceil(s1^2 / se^2) with
        s1^2 = (1 - phi) / phi (O/E), 1 / E[w] (CITL),
        E[w] / (E[w] E[w L^2] - E[w L]^2) (slope; L = logit p, w = p (1 - p)
        at the anticipated calibration) and Newcombe's formula for C
        (:mod:`calibtest.core.precision`).  n is the largest of these and of
        the ECE target's size; ``power``/``ci_width`` may then be omitted.
        The sizes are in ``res.precision``.
    acceptance : dict, optional
        Acceptance criteria as :func:`calibtest.plan` takes them: the share of
        ``n_sim`` studies of the chosen n (seed ``rng``), each analysed by
        :func:`calibtest.calib_ci` and its acceptance criteria, that meets
        them all (``res.acceptance_power``, with its Monte Carlo s.e.).

    Returns
    -------
    SampleSizeResult

    Raises
    ------
    ValueError
        Not exactly one of ``power``/``ci_width``; a target out of range; the
        target not reached at ``n_max``.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024.
    .. [2] Riley et al., "Minimum sample size for external validation of a
           clinical prediction model with a binary outcome", Statistics in
           Medicine 40:4230-4251, 2021.

    Examples
    --------
    The rows needed to detect a calibration slope of 0.8 with power 0.8,
    the development predictions standing for the population:

    >>> import numpy as np, calibtest as ct
    >>> p = np.random.default_rng(0).beta(2, 5, 5000)
    >>> ss = ct.calib_sample_size(probs=p, slope=0.8, power=0.8)
    >>> ss.n, round(ss.achieved_power, 2)
    (5208, 0.8)
    """
    if power is not None and ci_width is not None or (power is None and ci_width is None and precision is None):
        raise OptionError("give exactly one of power= and ci_width=, or precision= (with or without one of them)")
    if margin is not None and power is None:
        raise OptionError("margin= plans a margin test: give power= (the probability that the upper bound falls "
                         "below the margin), not ci_width=")
    if power is not None:
        target, value = "power", check_number(power, "power")
        if not 0.0 < value < 1.0:
            raise OptionError(f"power must be in (0, 1), got {value}")
    elif ci_width is not None:
        target, value = "ci_width", check_number(ci_width, "ci_width")
        if not value > 0.0:
            raise OptionError(f"ci_width must be > 0, got {value}")
    else:
        target, value = "precision", math.nan
    n_min = check_count(n_min, "n_min", 2)
    n_max = check_count(n_max, "n_max", 2)
    if n_max <= n_min:
        raise OptionError(f"n_max must be larger than n_min, got n_min={n_min}, n_max={n_max}")
    n_grid = check_count(n_grid, "n_grid", 3)
    planner, inputs, method = _common(_Anticipated(probs, calibration, intercept, slope, k, n_classes), alpha,
                                      n_bins, null, method, margin, censored_fraction)
    if power is not None and value <= planner.alpha:
        raise OptionError(f"power must exceed alpha = {planner.alpha:g}, got {value}")
    one_column = np.asarray(probs).ndim == 1 or (np.asarray(probs).ndim == 2 and np.asarray(probs).shape[1] == 1)
    table = None if precision is None else _precision_table(planner, inputs, precision)
    if acceptance is not None:
        _recalibration_population(planner, inputs, "acceptance=")
        check_criteria(acceptance, "acceptance")
    if target == "precision":
        n_star = int(table["n"].max())
        at = planner.analytic(n_star)
        curve = pd.DataFrame([{**at, "source": "analytic"}])
        rule = "n is the largest of the precision targets' sizes (one per measure: the precision table)."
        chosen = _Chosen(target, value, method, n_star, at, rule, curve, None, bool(at["reliable"]), table,
                         _acceptance_at(planner, inputs, acceptance, n_star, n_sim, rng))
        return _sample_size_result(planner, inputs, chosen, n_bins, one_column)
    col = "power" if target == "power" else "expected_width"
    grid = np.unique(np.round(np.geomspace(n_min, n_max, n_grid)).astype(np.int64))
    cache: dict[int, dict] = {}

    def analytic(v):
        v = int(v)
        if v not in cache:
            cache[v] = planner.analytic(v)
        return cache[v]

    rows = planner.analytic_many(grid)
    cache.update((r["n"], r) for r in rows)
    ok = _meets(np.array([r[col] for r in rows]), target, value)
    if not ok[-1]:
        raise ValueError(f"the target {target}={value:g} is not reached at n_max={n_max} (there {col} = "
                         f"{rows[-1][col]:.4g}); raise n_max, or the anticipated miscalibration is too small "
                         "to detect")
    fails = np.flatnonzero(~ok)
    i_star = 0 if fails.size == 0 else int(fails[-1]) + 1
    lo, hi = (n_min - 1, int(grid[0])) if i_star == 0 else (int(grid[i_star - 1]), int(grid[i_star]))
    while hi - lo > 1:  # bisection inside the bracket (lo fails, hi holds)
        mid = (lo + hi) // 2
        if _meets(analytic(mid)[col], target, value):
            hi = mid
        else:
            lo = mid
    n_star = max(hi, n_min)
    if i_star == 0:
        rule = f"the target holds at n_min = {n_min} and at every larger grid point ({len(grid)} log-spaced in " \
               f"[{n_min}, {n_max}]); lower n_min to search below it."
    else:
        rule = (f"n is the smallest integer found by bisection between log-spaced grid points ({len(grid)} in "
                f"[{n_min}, {n_max}]) after which the target holds at every larger grid point; it holds at n "
                f"and fails at n - 1.")
    mc = None
    sim_rows = []
    at = analytic(n_star)
    if method == "simulation":
        n_sim = check_option("n_sim", n_sim)
        gen, seed = resolve_seed(rng)
        base = int(gen.integers(2**62))

        def simulated(v):
            return planner.simulate(int(v), n_sim, np.random.default_rng([base, int(v)]))

        lo_s, hi_s = max(n_min, n_star // 2), min(n_max, max(n_star * 2, n_min + 1))
        r_hi = simulated(hi_s)
        sim_rows.append(r_hi)
        while not _meets(r_hi[col], target, value) and hi_s < n_max:
            lo_s, hi_s = hi_s, min(n_max, hi_s * 2)
            r_hi = simulated(hi_s)
            sim_rows.append(r_hi)
        if not _meets(r_hi[col], target, value):
            raise ValueError(f"the target {target}={value:g} is not reached by simulation at n_max={n_max}")
        r_lo = simulated(lo_s)
        sim_rows.append(r_lo)
        while _meets(r_lo[col], target, value) and lo_s > n_min:  # move the bracket down
            hi_s, r_hi = lo_s, r_lo
            lo_s = max(n_min, lo_s // 2)
            r_lo = simulated(lo_s)
            sim_rows.append(r_lo)
        if _meets(r_lo[col], target, value):
            hi_s, r_hi = lo_s, r_lo
        else:
            while hi_s - lo_s > max(1, int(0.02 * hi_s)):
                mid = (lo_s + hi_s) // 2
                r = simulated(mid)
                sim_rows.append(r)
                if _meets(r[col], target, value):
                    hi_s, r_hi = mid, r
                else:
                    lo_s = mid
        n_star, at = hi_s, r_hi
        rule = (f"n found by bisection on the simulated criterion ({n_sim} studies per n, common seed), "
                f"bracketed by the analytic answer {int(hi)}, stopped within 2% of n; the simulated power "
                "carries Monte Carlo error (power_se).")
        mc = MonteCarloPower(n_sim=n_sim, power_se=at["power_se"], width_se=at["width_se"], seed=seed)
    curve = pd.DataFrame([{**analytic(v), "source": "analytic"} for v in sorted(cache)])
    if sim_rows:
        sims = pd.DataFrame(sim_rows)
        sims["source"] = "simulation"
        curve = pd.concat([curve, sims[curve.columns.intersection(sims.columns).tolist() + ["power_se", "width_se"]]],
                          ignore_index=True)
    curve = curve.sort_values(["source", "n"], kind="stable").reset_index(drop=True)
    if table is not None and int(table["n"].max()) > n_star:
        n_star = int(table["n"].max())
        at = analytic(n_star)
        rule += (f" The precision targets need more rows: n = {n_star}, the largest of their sizes (the precision "
                 "table); power and expected width are the analytic ones there.")
    chosen = _Chosen(target, value, method, n_star, at, rule, curve, mc, bool(analytic(n_star)["reliable"]), table,
                     _acceptance_at(planner, inputs, acceptance, n_star, n_sim, rng))
    return _sample_size_result(planner, inputs, chosen, n_bins, one_column)


@dataclass(frozen=True)
class _Chosen:
    """The n a sample-size search chose and how: the target, the power row ``at`` there, the rule, the curve,
    the Monte Carlo part, the reliability flag, the precision table and the simulated acceptance power."""

    target: str
    value: float
    method: str
    n: int
    at: dict
    rule: str
    curve: pd.DataFrame
    mc: MonteCarloPower | None
    reliable: bool
    precision: pd.DataFrame | None
    acceptance_power: AcceptancePower | None


def _acceptance_at(planner, inputs, acceptance, n, n_sim, rng):
    return None if acceptance is None else _acceptance_power(planner, inputs, acceptance, n, n_sim, rng)


def _sample_size_result(planner, inputs: PlanningInputs, chosen: _Chosen, n_bins, one_column: bool) -> SampleSizeResult:
    """The :class:`SampleSizeResult` of a search (``one_column``: the predictions were one column, kept for a plan
    when the anticipated calibration is logistic)."""
    c = chosen
    keep = None
    if one_column and inputs.miscalibration["form"] == "logistic":
        keep = planner.z[:, 0].copy()
        keep.setflags(write=False)
    if c.method == "analytic" and not c.reliable:
        warnings.warn(f"the analytic sample size n = {c.n} is in the range where the analytic approximation is "
                      f"unreliable (n < {SMALL_N} or sparse bins); check it with method='simulation'",
                      UserWarning, stacklevel=3)
    at = c.at
    return SampleSizeResult(n=int(c.n), target=c.target, target_value=c.value, achieved_power=float(at["power"]),
                            expected_width=float(at["expected_width"]), n_bins=int(at["n_bins"]),
                            ece_sq_binned=float(at["ece_sq_binned"]), method=c.method, reliable=c.reliable,
                            rule=c.rule, curve=c.curve, inputs=inputs, monte_carlo=c.mc, margin=planner.margin,
                            n_bins_rule=n_bins, predictions=keep, precision=c.precision,
                            acceptance_power=c.acceptance_power)
