"""The T-Cal test of calibration with a consistency-resampling threshold.

T-Cal (Lee, Huang, Hassani & Dobriban, "T-Cal: an optimal test for the
calibration of predictive models", JMLR 2023) tests H0: the model is
calibrated by comparing a debiased binned estimate of ECE^2 with a threshold
obtained by *consistency resampling* (their Sec. 4.1): draw the predictions
Z*_1..Z*_n with replacement from the observed ones, draw each label from its
own prediction, Y* ~ Categorical(Z*) (so the resampled model is calibrated by
construction), recompute the statistic, and repeat.  Two statistics, on
exactly the bins of :func:`calibtest.calib_ci` (count c_b, S_b = sum of U,
Q_b = sum of ||U||^2 per bin):

* ``statistic="tcal"`` (default), the authors' debiased plug-in estimator
  (``plugin_ece(..., debias=True)`` of github.com/dh7401/T-Cal),

      T = (1/n) sum_{bins} (||S_b||^2 - Q_b) / c_b;

* ``statistic="debiased"``, the unbiased estimator of the binned ECE^2
  (Sun, Chaudhari, Barnett & Dobriban, eq. (6); equal to ``calib_ci(...).estimate``),

      T = (1/n) sum_{bins, c_b >= 2} (||S_b||^2 - Q_b) / (c_b - 1).

Both give valid resampling tests; with many sparse bins the c_b - 1 divisor
gives the noisy pairs of small bins more weight, and the authors' statistic is
the more powerful (``benchmarks/tcal_statistic.py``).

The labels are drawn for any target: with the binned vector z (d coordinates:
p; the top-1 confidence; the sorted top-k vector; the full probability vector)
the label is class j with probability z_j, or "none of them" with probability
1 - sum z (no mass in full mode), and U* = onehot - z*.

Monte Carlo decision (R draws T*_1..T*_R): p-value = (1 + #{T*_r >= T}) / (R + 1);
threshold = the (R - j)-th smallest T*_r with j = floor(alpha (R + 1)) - 1 (infinite
when j < 0); T > threshold if and only if p-value <= alpha.  The default R is
max(3000, smallest R with (R + 1) alpha / L >= 2) (the authors use 3000
draws): every per-scale threshold is then finite and at worst the second
largest draw.  An explicit ``n_draws`` with (n_draws + 1) alpha / L < 1 (a
test that could never reject) raises ``ValueError``.  (The authors' code
compares T with the interpolated ``np.quantile(T*, 1 - alpha / L)``; below
level 1 / (R + 1) that interpolation can exceed the level, so calibtest keeps
the exact Monte Carlo rule and adds draws instead.)

The adaptive test (T-Cal, Sec. 4.2) runs the test at the dyadic bin counts
B = 2, 4, ..., 2^L, L = max(1, floor((2/d) log2(n / sqrt(log n)))), each at level
alpha / L (Bonferroni), and rejects when any scale rejects; its p-value is
min(1, L * min_l p_l).  All scales share the same resampled data sets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calibtest.inputs.front_door import bound_options
from calibtest.display.format import fmt
from calibtest.inputs.validation import check_memory, is_integer, resolve_seed
from calibtest.core.partition import binned_dimension, partition_rows
from calibtest.core.targets import PreparedData, Target
from calibtest.core.tcal import (DrawRun, _mc_decision, adaptive_scales, check_draws, default_draws,
                                 tcal_statistic_threshold)
from calibtest.inputs.formula import resolve_env
from calibtest.ece.group_engine import (GroupAnalysis, GroupedResult, GroupOutcomes, analyse_groups, by_names, group_labels, group_rng, grouped_result,
                                grouping_of, label_text)
from calibtest.inputs.design import Design
from calibtest.inputs.settings import Inputs, Settings
from calibtest.inputs.rows import prepare_input
from calibtest.options import BIN_COUNT, OptionError, check_option
from calibtest.ece.result import TestOfCalibration
from calibtest.display.summary import CalibSummary, model_text

__all__ = ["TCalResult", "tcal_test"]


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False, repr=False)
class TCalResult(TestOfCalibration):
    """T-Cal test of H0: the model is calibrated (threshold by consistency resampling).

    Unpacks as ``statistic, pvalue``.

    Attributes
    ----------
    statistic : float
        The statistic at the reported scale (the only one, or for the adaptive
        test the scale with the smallest p-value).
    threshold : float
        Monte Carlo threshold at that scale (at level ``level``).
    pvalue : float
        Monte Carlo p-value; for the adaptive test the Bonferroni-adjusted
        min(1, L * min_l p_l).
    reject : bool
        H0 rejected at level alpha (T > threshold at some scale; same as pvalue <= alpha).
    alpha : float
        Overall level.
    level : float
        Level of each scale's test, alpha / L.
    n_bins : int
        Bins per dimension B of the reported scale.
    scales, statistics, thresholds, pvalues : tuple
        Per scale: B, T, threshold, unadjusted Monte Carlo p-value.
    adaptive : bool
    n_draws : int
        Monte Carlo resamples R.
    statistic_type : str
        ``"tcal"`` (the authors' statistic, divisor c_b) or ``"debiased"``
        (divisor c_b - 1, equal to ``calib_ci(...).estimate``).
    draws_auto : bool
        R was chosen by ``n_draws=None`` (max(3000, smallest R with
        (R + 1) alpha / L >= 2)).
    seed : int, str or None
        The int seed that reproduces the draws (``rng=seed``; drawn from OS
        entropy and recorded when ``rng=None``), or ``"Generator"`` when a
        ``numpy.random.Generator`` was passed.
    n, k, n_classes, mode : calibration target as in :class:`~calibtest.CalibrationResult`.
    formula, y_name, prob_names, n_dropped, call_record
        Bookkeeping (``call`` renders the call as text).
    null_draws : ndarray, shape (L, R)
        The resampled statistics.
    """

    statistic: float
    threshold: float
    pvalue: float
    reject: bool
    alpha: float
    level: float
    n_bins: int
    scales: tuple
    statistics: tuple
    thresholds: tuple
    pvalues: tuple
    adaptive: bool
    n_draws: int
    seed: int | str | None = None
    null_draws: np.ndarray | None = field(default=None, repr=False)
    statistic_type: str = "tcal"
    draws_auto: bool = False

    def scale_table(self) -> pd.DataFrame:
        """One row per scale: ``n_bins``, ``statistic``, ``threshold``, ``pvalue``, ``reject``."""
        return pd.DataFrame({"n_bins": self.scales, "statistic": self.statistics,
                             "threshold": self.thresholds, "pvalue": self.pvalues,
                             "reject": [t > c for t, c in zip(self.statistics, self.thresholds)]})

    def thresholds_at(self, alpha: float | None = None) -> tuple:
        """Per-scale Monte Carlo thresholds at overall level ``alpha`` (each scale at alpha / L).

        The stored ``thresholds`` at the stored alpha; another alpha is read
        from the stored resampled statistics ``null_draws``.
        """
        if alpha is None or alpha == self.alpha:
            return self.thresholds
        if self.null_draws is None:
            raise ValueError("this result holds no resampled statistics; thresholds exist only at its alpha")
        thr, _ = _mc_decision(np.asarray(self.statistics), np.asarray(self.null_draws),
                              alpha / len(self.scales))
        return tuple(float(v) for v in thr)

    def summary(self, alpha: float | None = None):
        """statsmodels-style summary (``print`` it; ``.as_html()``, ``.as_latex()``).

        ``alpha`` (default: the stored one) sets the level of the thresholds
        and decisions shown (thresholds recomputed from ``null_draws``).
        """
        return super().summary(alpha)

    def _summary(self, alpha: float | None):
        return _build_summary(self, alpha)

    def _dict(self) -> dict:
        return {"statistic": self.statistic, "threshold": self.threshold, "pvalue": self.pvalue,
                "reject": self.reject, "alpha": self.alpha, "level": self.level, "n_bins": self.n_bins,
                "scales": list(self.scales), "statistics": list(self.statistics),
                "thresholds": list(self.thresholds), "pvalues": list(self.pvalues),
                "adaptive": self.adaptive, "n_draws": self.n_draws, "n": self.n, "k": self.k,
                "n_classes": self.n_classes, "mode": self.mode, "formula": self.formula,
                "y_name": self.y_name, "prob_names": list(self.prob_names), "n_dropped": self.n_dropped,
                "seed": None if self.seed is None else str(self.seed), "method": "tcal",
                "statistic_type": self.statistic_type, "draws_auto": self.draws_auto}

    def to_dict(self) -> dict:
        """All scalar results as a JSON-safe dict (infinite thresholds become None)."""
        return super().to_dict()

    def _repr_parts(self) -> list[str]:
        kind = f"adaptive over B in {list(self.scales)}" if self.adaptive else f"B={self.n_bins}"
        return [f"mode={self.mode} n={self.n} {kind} statistic={self.statistic_type}: T={self.statistic:.6g}",
                f"threshold={self.threshold:.6g}", f"p={self.pvalue:.4g}", f"reject={self.reject}"]


_STATISTIC_TEXT = {"tcal": "T-Cal (/ c_b)", "debiased": "debiased (/ (c_b - 1))"}
_STATISTIC_NOTE = {
    "tcal": "Statistic: T-Cal's debiased plug-in estimate T = (1/n) sum_b (||S_b||^2 - Q_b) / c_b "
            "(Lee et al. 2023).",
    "debiased": "Statistic: the unbiased estimate of the binned ECE^2, T = (1/n) sum_b (||S_b||^2 - Q_b) "
                "/ (c_b - 1), as calib_ci's estimate.",
}


def _build_summary(res: TCalResult, alpha: float | None = None):
    alpha = res.alpha if alpha is None else alpha
    level = alpha / len(res.scales)
    thresholds = res.thresholds_at(alpha)
    rejects = [bool(t > c) for t, c in zip(res.statistics, thresholds)]
    smry = CalibSummary()
    smry.add_title("T-Cal test of calibration (consistency resampling)")
    smry.add_settings({"Model:": model_text(res.formula, res.y_name, res.prob_names),
                       "Mode:": Target(res.mode).text(res.k),
                       "Classes (K):": "2" if res.n_classes is None else str(res.n_classes),
                       "No. observations:": str(res.n),
                       "Resamples (R):": f"{res.n_draws} (auto)" if res.draws_auto else str(res.n_draws),
                       "Statistic:": _STATISTIC_TEXT[res.statistic_type],
                       "Test:": "adaptive (Bonferroni)" if res.adaptive else "single scale",
                       "Alpha:": fmt(alpha), "Level per scale:": fmt(level),
                       "Seed:": "Generator" if res.seed == "Generator" else fmt(res.seed)})
    table = pd.DataFrame({"statistic T": list(res.statistics), "threshold": list(thresholds),
                          "p-value": list(res.pvalues), "reject": rejects},
                         index=[f"B = {b}" for b in res.scales], dtype=object)
    smry.add_table(table, {"statistic T": 6, "threshold": 6, "p-value": 4})
    verdict = "rejects" if any(rejects) else "does not reject"
    notes = [f"The test {verdict} H0: calibrated at level {alpha:g} (p-value {fmt(res.pvalue, 4)}"
             + (", Bonferroni-adjusted over the scales)." if res.adaptive else ").")]
    notes.append(_STATISTIC_NOTE[res.statistic_type])
    notes.append("Threshold: the Monte Carlo quantile of T over R resampled data sets (predictions drawn "
                 "with replacement, labels drawn from them); p-value = (1 + #{T* >= T}) / (R + 1).")
    if not np.all(np.isfinite(thresholds)):
        notes.append(f"R = {res.n_draws} resamples are too few for level {level:g}: "
                     "the test cannot reject; increase n_draws.")
    if res.n_dropped:
        notes.append(f"{res.n_dropped} rows with missing values were dropped (missing='drop').")
    notes.append("Reference: Lee, Huang, Hassani & Dobriban, T-Cal: An optimal test for the calibration "
                 "of predictive models, JMLR 24(335), 2023.")
    smry.add_notes(notes)
    return smry


# --------------------------------------------------------------------------- public function
@bound_options("tcal_test", n_bins=None, n_draws=None)
def tcal_test(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None,
              k=None, n_bins="auto", alpha: float = 0.05, n_draws: int | None = None, adaptive: bool = False,
              rng=None, statistic: str = "tcal", missing: str = "raise", eval_env: int = 0, by=None,
              progress: bool | None = None, horizon=None) -> TCalResult | GroupedResult:
    """T-Cal test of H0: calibrated, with the threshold from consistency resampling.

    Inputs and targets are those of :func:`calibtest.calib_ci` (binary, top-1,
    top-1-to-k, and full calibration with ``k="full"``), on the same bins.
    The default statistic is the authors' debiased plug-in estimator
    (1/n) sum_b (||S_b||^2 - Q_b) / c_b; ``statistic="debiased"`` divides by
    c_b - 1 instead and equals ``calib_ci(...).estimate``, an unbiased
    estimator of the binned ECE^2.

    Parameters
    ----------
    formula, data, y, probs, n_classes, k, missing, eval_env
        As in :func:`calibtest.calib_ci` (formulas are trusted input: patsy
        evaluates them as Python expressions).
    n_bins : int, "auto" or sequence of int
        Bins per dimension B.  A sequence runs the test at each B with a
        Bonferroni-split level (as ``adaptive=True`` does on its dyadic grid).
    alpha : float
        Level of the test.
    n_draws : int, optional
        Monte Carlo resamples R.  Default (None): R = max(3000, smallest R with
        (R + 1) * alpha / L >= 2), L the number of scales: the authors' 3000
        draws, raised when the per-scale level alpha / L needs more (e.g.
        alpha = 0.01 over L = 23 scales gives R = 4599), so that every
        per-scale threshold is finite and at worst the second largest draw.
        An explicit R with (R + 1) * alpha / L < 1 raises ``ValueError`` (the
        test could never reject).
    adaptive : bool
        Adaptive T-Cal: B = 2, 4, ..., 2^L (see :func:`adaptive_scales`), each
        at level alpha / L.  Requires ``n_bins="auto"`` or a sequence.
    rng : None, int or numpy.random.Generator
        Seed; the same seed gives identical output.
    statistic : {"tcal", "debiased"}
        ``"tcal"`` (default): T-Cal's statistic as in the authors' code,
        (1/n) sum_b (||S_b||^2 - Q_b) / c_b.  ``"debiased"``: (1/n) sum over
        bins with c_b >= 2 of (||S_b||^2 - Q_b) / (c_b - 1), equal to
        ``calib_ci(...).estimate`` (an unbiased estimator of the binned ECE^2;
        less powerful with many sparse bins).
    progress : bool, optional
        Progress bar (tqdm) over the Monte Carlo resamples, on stderr.  None
        (default): only for long runs (R n >= 5 10^7, e.g. 3000 resamples of
        10^5 rows) in an interactive terminal, never when the ``CI``
        environment variable is set; True: always (a warning if tqdm is not
        installed); False: never.  It does not change the result.
    by : str, list of str or array_like, optional
        Subgroups, as in :func:`calibtest.calib_test`: the test on each
        group's rows, in a :class:`~calibtest.ece.group_engine.GroupedResult`
        (Holm-adjusted p-values, the Bonferroni min-p ``global_pvalue``);
        group g draws from ``numpy.random.default_rng([s, g])``, s the seed.
    horizon : None
        Not taken, as in :func:`calibtest.calib_test` (binary labels are
        resampled); given, an ``OptionError`` names the survival analysis.

    Returns
    -------
    TCalResult
        Or :class:`~calibtest.ece.group_engine.GroupedResult` with ``by=``.

    References
    ----------
    .. [1] Lee, D., Huang, X., Hassani, H. and Dobriban, E. (2023). "T-Cal: An
       optimal test for the calibration of predictive models." *Journal of
       Machine Learning Research* 24(335), 1-72.

    Examples
    --------
    >>> import calibtest as ct
    >>> res = ct.tcal_test("y ~ p", data=ct.load_demo(), rng=1)
    >>> bool(res.reject), round(res.pvalue, 2)
    (False, 0.35)
    """
    Design.resolve("tcal_test", Inputs(formula), Settings(horizon=horizon)).check()
    R = None if n_draws is None else check_option("n_draws", n_draws)  # None: automatic (not in the table)
    gen, seed = resolve_seed(rng)
    env = resolve_env(eval_env)
    if isinstance(n_bins, (list, tuple, np.ndarray)):
        scales = tuple(BIN_COUNT.check(b, "n_bins") for b in n_bins)  # each a bin count of the table
        if not scales:
            raise OptionError("n_bins must list at least one bin count")
        first = scales[0]
        adaptive = adaptive or len(scales) > 1
    else:
        if adaptive and n_bins != "auto":
            raise ValueError("adaptive=True chooses the bin counts itself: use n_bins='auto' or give a "
                             "sequence of bin counts")
        scales, first = None, n_bins
    prepared = prepare_input(
        "tcal_test", Inputs(formula=formula, data=data, y=y, probs=probs, by=by),
        Settings(env=env, missing=missing, n_classes=n_classes, k=k),
        options={"n_classes": n_classes, "k": k, "n_bins": first, "alpha": alpha, "n_draws": R,
                 "statistic": statistic, "missing": missing if missing != "raise" else None,
                 "rng": seed if is_integer(seed) else None,
                 "by": None if by is None else (by if by_names(by) else "<array>")},
        group_labels=group_labels)
    rows, target, call = prepared.rows, prepared.target, prepared.call
    options = TCalOptions(scales=scales, first=first, adaptive=adaptive, alpha=alpha, n_draws=R,
                          statistic=statistic, progress=progress)
    names = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))
    if by is None:
        return tcal_rows(target, options, rng=gen, seed=seed, n_dropped=rows.n_dropped, call_record=call, **names)
    grouping = grouping_of(prepared.group_names, prepared.group_values)

    def analyse(g, label, idx, sub):
        return tcal_rows(sub, options, rng=group_rng(gen, seed, g), seed="Generator", **names,
                         call_record=call.with_options(group=label_text(grouping.names, label)))

    groups, reasons = analyse_groups(grouping, target, analyse, single_class=False)
    return grouped_result(grouping, target, GroupOutcomes(groups, reasons),
                          GroupAnalysis("tcal_test", lambda res: {"statistic": res.statistic, "pvalue": res.pvalue},
                                        ["statistic", "pvalue"], alpha), seed=seed, n_dropped=rows.n_dropped,
                          call_record=call, formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))


@dataclass(frozen=True)
class TCalOptions:
    """The options of the T-Cal test that travel together (validated by :func:`tcal_test`).

    Attributes
    ----------
    scales : tuple of int or None
        The bin counts (None: ``first`` alone, or the adaptive grid).
    first : int or "auto"
        The bin count of the first scale.
    adaptive : bool
    alpha : float
    n_draws : int or None
        R (None: :func:`calibtest.core.tcal.default_draws`).
    statistic : {"tcal", "debiased"}
    progress : bool or None
        As in :func:`tcal_test`.
    """

    scales: tuple | None
    first: object
    adaptive: bool
    alpha: float
    n_draws: int | None
    statistic: str
    progress: bool | None = None


def tcal_rows(target: PreparedData, options: TCalOptions, *, rng, seed, call_record=None,
              **bookkeeping) -> TCalResult:
    """The T-Cal test on prepared rows: the engine of :func:`tcal_test`, one result built once.

    Parameters
    ----------
    target : PreparedData
        Z and U of every row.
    options : TCalOptions
        The scales, level, draws, statistic and progress bar.
    rng : numpy.random.Generator
        The draws' source; ``seed`` is recorded.
    call_record, **bookkeeping
        ``formula``, ``y_name``, ``prob_names``, ``n_dropped``.
    """
    scales, first, adaptive, alpha, n_draws, statistic = (options.scales, options.first, options.adaptive,
                                                          options.alpha, options.n_draws, options.statistic)
    partition = partition_rows(target, first)
    if scales is None:
        scales = adaptive_scales(target.n, binned_dimension(target.mode, target.k)) if adaptive \
            else (partition.n_bins,)
    level = alpha / len(scales)
    draws_auto = n_draws is None
    R = default_draws(alpha, len(scales)) if draws_auto else n_draws
    check_draws(R, level, f" (alpha={alpha:g} over {len(scales)} scale(s), level = alpha / {len(scales)})")
    check_memory(8.0 * len(scales) * R, f"n_draws={R} at {len(scales)} scale(s) (one statistic per draw "
                 "and scale)", "lower n_draws: the Monte Carlo p-value's resolution is 1 / (n_draws + 1)")
    bins = np.stack([(partition if b == partition.n_bins else partition_rows(target, b)).inverse for b in scales])
    core = tcal_statistic_threshold(target.z, target.u, bins, alpha=level, n_draws=R, rng=rng,
                                    full=target.mode.full_calibration, statistic=statistic,
                                    run=DrawRun(progress=options.progress))
    stats = core.statistic
    best = int(np.argmin(core.pvalue))
    reject = bool(np.any(stats > core.threshold))
    pvalue = float(min(1.0, len(scales) * core.pvalue[best]))
    return TCalResult(
        statistic=float(stats[best]), threshold=float(core.threshold[best]), pvalue=pvalue, reject=reject,
        alpha=alpha, level=level, n_bins=int(scales[best]), scales=tuple(int(b) for b in scales),
        statistics=tuple(float(v) for v in stats), thresholds=tuple(float(v) for v in core.threshold),
        pvalues=tuple(float(v) for v in core.pvalue), adaptive=bool(adaptive), n_draws=R, n=target.n,
        k=target.k, n_classes=target.n_classes, mode=target.mode, call_record=call_record, seed=seed,
        null_draws=core.null_draws, statistic_type=statistic, draws_auto=draws_auto, **bookkeeping)
