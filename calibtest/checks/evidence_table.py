"""The evidence on calibration built from one interval result and its rows, and one conclusion.

A single test can mislead: the single-B interval of :func:`calibtest.calib_ci`
bins at the automatic B, tuned to *estimate* the ECE, and can miss smooth
miscalibration that Hosmer-Lemeshow, the calibration slope or Spiegelhalter's
test see.  :func:`build_evidence` takes a
:class:`~calibtest.CalibrationResult` that holds its rows (``res.data``) and
runs, on the same rows,

* the multi-scale test of :func:`calibtest.calib_test` (exact size given the
  predictions; answers *is there miscalibration?*), its label draws seeded
  by the result's recorded seed; on binary and top-1 targets its statistic
  is the max of the binned scales' z_B and of |z_S|, Spiegelhalter's z, on
  the same draws (the ``spiegelhalter`` row is the classical normal test);
* the adjusted interval for ECE^2 of the result itself, at its B and with
  its null (answers *how much?*);
* binary and top-1 only (one probability column):
  :func:`calibtest.hosmer_lemeshow` with ``validation="external"`` (g = 10,
  chi-squared with df = g: the predictions were not fitted on these rows;
  g - 2 holds for development data), and :func:`calibtest.val_prob` --
  Spiegelhalter's z test, calibration-in-the-large (CITL, test of a0 = 0 by
  its Wald interval) and the calibration slope (test of b = 1 by its Wald
  interval);

and lays them out as one table (null hypothesis in words, statistic, p-value,
interval, verdict at ``alpha``), followed by a bin-sensitivity table (the
single-scale test and interval at B = 5, 10, 20, 35 below the result's B, and
its B, with the result's null) and a conclusion.  For top-k and full
calibration the table has the two rows that apply (multi-scale test and
interval); Hosmer-Lemeshow and val_prob need one probability column.
Rows in independent clusters (``cluster=``) get the same table with every
row in its clustered version, built by :mod:`calibtest.checks.evidence_clustered`
and concluded by :func:`conclude`.

Conclusion rules (:meth:`EvidenceResult.conclusion`)
-----------------------------------------------------
1. *Whether*: from the multi-scale test (exact size given the predictions).
   It rejects -> "evidence of miscalibration".  It does not reject and no
   other row rejects -> "no evidence of miscalibration" (never "calibrated").
   It does not reject but another row does -> "mixed evidence", naming the
   rows that reject.
2. *How much*: always the adjusted interval for ECE^2 (and for ECE) at the
   result's B, with its upper bound; the whether and the how much open the
   conclusion in one sentence.
3. Disagreements (each adds one plain-words sentence when it fires;
   :attr:`EvidenceResult.reasons` holds their keys):

   * ``"smooth"``: the interval contains 0 while the multi-scale test rejects,
     and its strongest component is a scale B below the interval's B or
     Spiegelhalter's z (|z_S| above every z_B) -> "the
     miscalibration is smooth and the interval's B is large for n" (the
     squared-prediction case: at n = 472 the test rejects at B = 4 while the
     interval at B = 35 contains 0).
   * ``"hl_sparse"``: Hosmer-Lemeshow rejects, the multi-scale test, the
     interval, Spiegelhalter, CITL and the slope do not, and some HL group has an
     expected count (events or non-events) below 5 -> "the HL statistic is
     driven by groups with tiny expected counts".
   * ``"spread"``: the slope rejects (its interval excludes 1) while CITL does
     not (its interval contains 0) -> "the slope detects spread (slope < 1:
     over-confidence; > 1: under-confidence), not level".
   * ``"level"``: CITL rejects while the slope does not -> "the predictions
     are off in level (too high or too low on average), not in spread".
   * ``"logit_linear"``: CITL or the slope rejects while the multi-scale
     test does not -> "CITL and the slope test one logit-linear departure,
     where they are more powerful than a test against departures of every
     shape".
   * ``"bins"``: the single-scale verdict changes with B in the
     bin-sensitivity table -> "the single-B verdict depends on the bin count".
   * ``"impossible"``: some rows are impossible under calibration (an event
     at a stated risk of 0, a non-event at a stated risk of 1, a wrong answer
     at a top-1 confidence of 1.0, a class of probability 0 that occurs;
     :func:`impossible_outcomes`) -> the conclusion opens "Calibration is
     refuted", with their count, and the verdict is "evidence" whatever the
     tests say; the interval and the tests are unchanged.  With it an
     infinite Hosmer-Lemeshow statistic is explained by those rows
     (``"hl_impossible"``), not dismissed as ``"hl_sparse"``.
   * ``"point_mass"``: the multi-scale statistic is +inf (a component whose
     null law is a point mass, predictions exactly 0 or 1, and labels that
     contradict them; its p-value is then 1/(R + 1)) -> says so; the
     ``"smooth"`` rule is then not applied.

   Any remaining disagreement between the rows is reported as a list of the
   rows that reject and those that do not.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
.. [2] Hosmer and Lemeshow, "Goodness of fit tests for the multiple logistic
       regression model", Communications in Statistics 9:1043-1069, 1980.
.. [3] Spiegelhalter, "Probabilistic prediction in patient management and
       clinical trials", Statistics in Medicine 5:421-433, 1986.
.. [4] Van Calster et al., "Calibration: the Achilles heel of predictive
       analytics", BMC Medicine 17:230, 2019.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import ndtri

from calibtest.display.format import ConclusionText, fmt, fmt_interval, fmt_p, p_equals
from calibtest.inputs.validation import DEFAULT_DRAWS, DEFAULT_SEED, check_alpha, check_seed, is_integer
from calibtest.checks.multiscale import CalibrationTestResult, MultiScaleOptions, calib_test_rows, smallest_pvalue_text
from calibtest.core.binstats import debiased_statistic, sigma1_sq, sigma1_sq_quadratic
from calibtest.core.conditional import (conditional_bin_sums, conditional_moments, conditional_test, label_classes,
                                        monte_carlo_test)
from calibtest.core.intervals import adjusted_interval
from calibtest.core.null import null_test, threshold as null_threshold
from calibtest.core.partition import cell_geometry, partition_rows
from calibtest.core.targets import Target
from calibtest.checks.hosmer_lemeshow import HosmerLemeshowResult, _from_result
from calibtest.display.summary import CalibSummary, ResultDisplay, model_text, null_name, null_text, part
from calibtest.checks.survival_calibration import SURVIVAL_ROWS, SurvivalEvidence, result_survival_evidence
from calibtest.checks.val_prob import ValProbResult, val_prob

__all__ = ["ImpossibleOutcomes", "impossible_outcomes",
           "EvidenceResult", "kind_flag", "build_evidence", "assemble_evidence", "assemble_clustered_evidence", "evidence_seed",
           "conclude", "result_conclusion", "ConfidenceDirection", "confidence_direction", "short_verdict",
           "figure_verdict", "result_hosmer_lemeshow", "result_val_prob", "build_survival_evidence",
           "SENSITIVITY_BINS", "HL_MIN_EXPECTED", "ROWS", "SURVIVAL_EVIDENCE_ROWS", "EVIDENCE_SEED"]

#: Bin counts of the bin-sensitivity table (those below the result's B), then the result's B.
SENSITIVITY_BINS = (5, 10, 20, 35)

#: Expected count below which an HL group is "tiny" (the chi-squared approximation's usual rule).
HL_MIN_EXPECTED = 5.0

#: Row keys of the evidence table, in order (binary and top-1; top-k and full have the first two).
ROWS = ("calib_test", "calib_ci", "hosmer_lemeshow", "spiegelhalter", "citl", "slope")

#: Row keys of the evidence table of a survival result with rows censored before the horizon, in order.
SURVIVAL_EVIDENCE_ROWS = ("calib_ci", *SURVIVAL_ROWS)

#: How the scope of the evidence opens the reason val_prob was not computed.
_VALPROB_MISSING = "val_prob (Spiegelhalter, CITL, slope) was not computed: "

#: Seed of the multi-scale test's label draws when the result recorded none (the asymptotic and the
#: shifted-gamma nulls draw nothing): the default seed of every call, so that the evidence of a result is
#: reproducible.
EVIDENCE_SEED = DEFAULT_SEED


def _verdict(reject: bool, interval: bool = False) -> str:
    if interval:
        return "excludes 0" if reject else "contains 0"
    return "rejects" if reject else "does not reject"


def _iv(lo, hi, digits: int = 4, lower_open: bool = False) -> str:
    """``[lo, hi]``, or ``(0, hi]`` when 0 is excluded but the lower bound reaches it (:func:`fmt_interval`)."""
    return fmt_interval(lo, hi, lower_open, digits)


@dataclass(frozen=True)
class ImpossibleOutcomes:
    """Outcomes of stated probability 0: each is impossible under calibration, so one refutes it outright.

    Under calibration P(Y_j = 1 | Z) = Z_j, so an outcome whose stated
    probability is 0 never occurs: an event at a stated risk of 0, a
    non-event at a stated risk of 1, a wrong answer at a top-1 confidence of
    1.0, a class of probability 0 that occurs.  One such row refutes
    calibration whatever the bins, the level or n; the interval and the
    tests, which average over bins, are not changed by this rule.

    Attributes
    ----------
    mode : str
        The target (``"binary"``, ``"top1"``, ``"topk"``, ``"full"``).
    at_zero : int
        Rows whose outcome had stated probability 0 in some coordinate
        (binary: events at p = 0; top-k and full: a class of probability 0
        that occurs).
    at_one : int
        Rows with a coordinate of stated probability 1 whose outcome did not
        occur (binary: non-events at p = 1; top-1: wrong answers at
        confidence 1.0).
    rows : ndarray of int or None
        Their row numbers (0-based, in the analysed rows); None for a file or
        a Dask frame, counted as it went by.
    n_rows : int or None
        How many rows, when their numbers are not kept.
    """

    mode: str
    at_zero: int
    at_one: int
    rows: np.ndarray | None = field(repr=False)
    n_rows: int | None = None

    @property
    def count(self) -> int:
        """Rows impossible under calibration."""
        return int(self.rows.size) if self.rows is not None else int(self.n_rows or 0)

    def description(self) -> str:
        """What was counted, in words: ``"2 wrong answers at stated confidence 1.0"``."""
        def n_of(k, one, many):
            return f"{k} {one if k == 1 else many}"
        target = Target(self.mode)
        if target.top1:
            parts = [n_of(self.at_one, "wrong answer", "wrong answers") + " at stated confidence 1.0"]
        elif target.binary:
            parts = [n_of(self.at_zero, "event", "events") + " at a stated risk of 0",
                     n_of(self.at_one, "non-event", "non-events") + " at a stated risk of 1"]
            parts = [t for t, k in zip(parts, (self.at_zero, self.at_one)) if k]
        else:
            parts = [n_of(self.count, "row whose class", "rows whose class") + " had stated probability 0"]
        return " and ".join(parts)

    def sentence(self) -> str:
        """``"2 wrong answers at stated confidence 1.0: impossible under calibration"``."""
        return f"{self.description()}: impossible under calibration"


def impossible_counts(data) -> tuple[int, int, int]:
    """(events at a stated probability 0, non-events at 1, rows with either) of prepared rows (exact comparisons).

    Additive over chunks of rows: a stream adds the counts of its chunks
    (:class:`calibtest.streams.accumulator.BinAccumulator`).
    """
    at_zero, at_one = _impossible_masks(data)
    return int(at_zero.sum()), int(at_one.sum()), int((at_zero | at_one).sum())


def _impossible_masks(data) -> tuple[np.ndarray, np.ndarray]:
    """Per row: an outcome of stated probability 0 occurred; an outcome of stated probability 1 did not."""
    z = np.asarray(data.z, dtype=np.float64)
    event = np.asarray(data.y, dtype=np.float64) > 0.5  # y = u + z, 0/1 up to rounding
    return (event & (z == 0.0)).any(axis=1), (~event & (z == 1.0)).any(axis=1)


def impossible_outcomes(res) -> ImpossibleOutcomes | None:
    """Count the rows of ``res`` that are impossible under calibration (:class:`ImpossibleOutcomes`).

    A row is impossible when, in some coordinate j of its prediction vector,
    the outcome indicator is 1 where Z_j = 0, or 0 where Z_j = 1 (exact
    comparisons: a stated probability of 0.999 is not 1).  Top-1: the
    indicator of a correct answer at confidence 1.0.  Rows in memory are
    counted here; a file or a Dask frame was counted as its chunks went by
    (the result's ``rows.impossible``; the row numbers are then not known).

    A survival outcome at horizon t counts the rows whose outcome by t is
    known: an event (of the cause) by t at a stated risk of 0, and a row
    known to be free of it by t (followed beyond t, or a competing event by
    t) at a stated risk of 1; a row censored before t is not counted.

    Returns
    -------
    ImpossibleOutcomes or None
        None when there is none.
    """
    data = getattr(res, "data", None)
    if kind_flag(res, "survival_outcome"):
        return _impossible_survival(res, data)
    if data is None:
        counts = getattr(getattr(res, "rows", None), "impossible", None)
        if not counts or not counts[2]:
            return None
        return ImpossibleOutcomes(mode=res.mode, at_zero=counts[0], at_one=counts[1], rows=None, n_rows=counts[2])
    at_zero, at_one = _impossible_masks(data)
    rows = np.flatnonzero(at_zero | at_one)
    if rows.size == 0:
        return None
    return ImpossibleOutcomes(mode=res.mode, at_zero=int(at_zero.sum()), at_one=int(at_one.sum()), rows=rows)


def _impossible_survival(res, data) -> ImpossibleOutcomes | None:
    """The impossible rows of a survival result whose outcome by the horizon is known (see
    :func:`impossible_outcomes`)."""
    surv = getattr(res, "survival", None)
    if surv is None or data is None:
        return None
    time, event, t = np.asarray(surv.time), np.asarray(surv.event), surv.horizon
    cause = 1 if surv.cause is None else surv.cause
    risk = np.asarray(data.z, dtype=np.float64)[:, 0]
    by_t = time <= t
    at_zero = by_t & (event == cause) & (risk == 0.0)
    free = (~by_t) | (by_t & (event != 0) & (event != cause))  # followed beyond t, or a competing event by t
    at_one = free & (risk == 1.0)
    rows = np.flatnonzero(at_zero | at_one)
    if rows.size == 0:
        return None
    return ImpossibleOutcomes(mode=res.mode, at_zero=int(at_zero.sum()), at_one=int(at_one.sum()), rows=rows)


def _refutation(res, impossible: ImpossibleOutcomes) -> str:
    """The sentence that opens a conclusion when some rows are impossible under calibration."""
    return (f"Calibration is refuted: {impossible.sentence()} (an outcome of stated probability 0 never occurs "
            "under calibration, whatever the bins, the level or n). The interval and the tests are computed as "
            "usual and are unchanged by this: they measure the miscalibration averaged over bins.")


def evidence_seed(res):
    """The seed of the evidence's label draws: the result's recorded seed, else :data:`EVIDENCE_SEED`.

    In order: the Monte Carlo null's seed, the resampling interval's seed and
    the integer ``rng=`` of the call.
    """
    recorded = None if res.call_record is None else res.call_record.options.get("rng")
    for seed in (part(res, "monte_carlo", "seed"), part(res, "resampling", "seed"), recorded):
        if seed is not None and is_integer(seed) and not isinstance(seed, bool):
            return int(seed)
    return EVIDENCE_SEED


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False, repr=False)
class EvidenceResult(ResultDisplay):
    """All the evidence on the calibration of a model on one set of rows, and a conclusion from it.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per test or measure (index: ``calib_test``, ``calib_ci`` and,
        for binary and top-1, ``hosmer_lemeshow``, ``spiegelhalter``, ``citl``,
        ``slope``); columns ``name``, ``null`` (the null hypothesis in words),
        ``statistic``, ``pvalue`` (None for CITL and the slope, tested by
        their intervals), ``lower``, ``upper`` (None for tests without an
        interval), ``reject`` (bool) and ``verdict``.
    sensitivity : pandas.DataFrame
        One row per B: ``n_bins``, ``T``, ``lower``, ``upper``, ``lower_open``
        (the adjusted interval for ECE^2), ``pvalue`` (the single-scale test
        with the interval's null), ``reject``.
    sensitivity_flag : bool
        ``reject`` varies with B.
    verdict : str
        ``"evidence"``, ``"mixed"`` or ``"no evidence"`` (rule 1 of :mod:`calibtest.checks.evidence_table`).
    conclusion : ConclusionText
        Call it, ``ev.conclusion()``, for the conclusion in plain words:
        whether (the multi-scale test) and how much (the interval) in its
        first sentence, then the disagreements (a method, as on every result;
        reading it as a string still works, with a ``FutureWarning``).
    reasons : tuple of str
        Keys of the disagreement rules that fired (``"smooth"``, ``"hl_sparse"``,
        ``"spread"``, ``"level"``, ``"logit_linear"``, ``"bins"``, ``"point_mass"``, ``"impossible"``,
        ``"hl_impossible"``).
    impossible : ImpossibleOutcomes or None
        The rows impossible under calibration (a property, counted from the
        interval's rows), shown in the summary; None when there is none.
    alpha : float
    n, k, n_classes, mode, formula, y_name, prob_names, n_dropped
        The data (as in :class:`~calibtest.CalibrationResult`).
    null : str
        The interval's null (``"asymptotic"``, ``"conditional"`` or ``"monte-carlo"``).
    seed : int or str
        Seed of the multi-scale test's label draws (``"Generator"`` for a Generator).
    scope : str
        Which rows apply to the target or could not be computed, in words.
    test, interval, hl, valprob
        The underlying results of :func:`~calibtest.calib_test`,
        :func:`~calibtest.calib_ci`, :func:`~calibtest.hosmer_lemeshow` and
        :func:`~calibtest.val_prob` (the last two None for top-k and full,
        and for clustered rows; ``test``, ``hl`` and ``valprob`` None for a
        survival result with rows censored before the horizon).
    design_hl : DesignHosmerLemeshow or None
        Clustered rows (``cluster=``): the design-based Hosmer-Lemeshow test
        of :mod:`calibtest.checks.evidence_clustered` (None otherwise, or when not
        computed).
    survival : SurvivalEvidence or None
        The classical survival evidence at the horizon
        (:func:`calibtest.survival_calibration`) of a survival result with rows
        censored before the horizon; its rows follow the IPCW interval's in
        ``table`` (keys :data:`SURVIVAL_EVIDENCE_ROWS`) and ``sensitivity`` is
        empty (:func:`build_survival_evidence`).
    """

    table: pd.DataFrame = field(repr=False)
    sensitivity: pd.DataFrame = field(repr=False)
    sensitivity_flag: bool
    verdict: str
    conclusion: str
    reasons: tuple
    alpha: float
    n: int
    k: int
    n_classes: int | None
    mode: str
    null: str
    seed: int | str | None
    scope: str = ""
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    test: CalibrationTestResult | None = field(default=None, repr=False)
    interval: ResultDisplay | None = field(default=None, repr=False)  # the CalibrationResult
    hl: HosmerLemeshowResult | None = field(default=None, repr=False)
    valprob: ValProbResult | None = field(default=None, repr=False)
    survival: SurvivalEvidence | None = field(default=None, repr=False)
    design_hl: object | None = field(default=None, repr=False)  # clustered rows: the design-based HL test

    @property
    def at_horizon(self) -> bool:
        """The evidence on a survival outcome at a horizon (its ``survival`` part): no label draws, the horizon in
        place of the classes, the survival notes."""
        return self.survival is not None

    @property
    def impossible(self) -> ImpossibleOutcomes | None:
        """The rows impossible under calibration (:func:`impossible_outcomes` of the interval's rows), or None."""
        return None if self.interval is None else impossible_outcomes(self.interval)

    def __post_init__(self):
        # conclusion is a method on every result: the text is kept as a callable string (ConclusionText), so
        # ev.conclusion() gives it and the former string attribute still reads, with a FutureWarning
        object.__setattr__(self, "conclusion", ConclusionText(str.__str__(self.conclusion)))

    @property
    def source(self) -> dict | None:
        """The data source of the interval (``interval.source``): for a file or a Dask frame, as in
        ``CalibrationResult.source``; None for rows in memory."""
        return getattr(self.interval, "source", None)

    def summary(self, alpha: float | None = None) -> CalibSummary:
        """The evidence table, the bin-sensitivity table and the conclusion (at the stored alpha).

        The verdicts are those at the stored ``alpha``; another ``alpha``
        raises ``ValueError`` (build the evidence again at that level).
        """
        if alpha is not None and check_alpha(alpha) != self.alpha:
            raise ValueError(f"this evidence table was computed at alpha = {self.alpha:g}; "
                             "call res.evidence(alpha=...) or calibtest.evidence(..., alpha=...) for another level")
        return self._summary(None)

    def _summary(self, alpha):
        smry = CalibSummary()
        smry.add_title("Evidence on calibration: all tests on the same rows")
        settings = {"Model:": model_text(self.formula, self.y_name, self.prob_names),
                    "Mode:": Target(self.mode).text(self.k), "No. observations:": str(self.n),
                    "Classes (K):": "2" if self.n_classes is None else str(self.n_classes),
                    "Alpha:": fmt(self.alpha),
                    "Seed:": "Generator" if self.seed == "Generator" else fmt(self.seed),
                    "Verdict:": self.verdict}
        if self.impossible is not None:
            settings["Impossible rows:"] = self.impossible.sentence()
        if self.at_horizon:  # no label draws; the horizon instead of the classes
            del settings["Seed:"], settings["Classes (K):"]
            settings["Mode:"] = f"survival at the horizon t = {fmt(self.survival.horizon)}"
        smry.add_settings(settings)
        self.add_tables(smry)
        if len(self.sensitivity):
            smry.add_table(self.sensitivity_table(), {"T": 4, "p-value": fmt_p})
        smry.add_notes(self.notes())
        return smry

    # ----------------------------------------------------------------- pieces shown by other summaries
    def evidence_table(self) -> pd.DataFrame:
        """The evidence table as shown: statistic, p-value, interval and verdict per row (numbers exact)."""
        t = self.table
        lower_open = {"calib_ci": self.interval is not None and self.interval.conf_int(self.alpha).lower_open}
        ivs = ["" if t.loc[k, "lower"] is None else _iv(t.loc[k, "lower"], t.loc[k, "upper"], 3,
                                                       lower_open.get(k, False)) for k in t.index]
        return pd.DataFrame({"statistic": list(t["statistic"]), "p-value": list(t["pvalue"]), "interval": ivs,
                             "verdict": list(t["verdict"])}, index=list(t["name"]), dtype=object)

    def sensitivity_table(self) -> pd.DataFrame:
        """The bin-sensitivity table as shown (one row per B)."""
        s = self.sensitivity
        b_res = None if self.interval is None else self.interval.n_bins
        return pd.DataFrame({"T": s["T"].tolist(),
                             "interval ECE^2": [_iv(lo, hi, 3, op)
                                                for lo, hi, op in zip(s["lower"], s["upper"], s["lower_open"])],
                             "p-value": s["pvalue"].tolist(),
                             "verdict": ["rejects" if r else "does not reject" for r in s["reject"]]},
                            index=[f"B = {b}" + (" (result)" if b == b_res else "") for b in s["n_bins"]],
                            dtype=object)

    def add_tables(self, smry: CalibSummary) -> None:
        """Add the evidence table and the conclusion to ``smry`` (a result's summary opens with them)."""
        smry.add_table(self.evidence_table(), {"statistic": 4, "p-value": fmt_p})
        smry.add_settings({"Conclusion:": self.conclusion()})

    def notes(self) -> list[str]:
        """The footer notes: the null hypothesis of each row, the scope, the bin-sensitivity table."""
        t = self.table
        notes = ["H0 of each row: " + "; ".join(f"{t.loc[k, 'name']}: {t.loc[k, 'null']}" for k in t.index) + "."]
        if self.scope:
            notes.append(self.scope)
        if self.test is None:  # a survival result with rows censored before the horizon
            return notes + (self.survival.notes() if self.at_horizon else []) + (
                [f"{self.n_dropped} rows with missing values were dropped (missing='drop')."] if self.n_dropped
                else [])
        if self.test.n_clusters is not None:
            notes.append(f"Multi-scale test: {self.test.n_draws} sign patterns of whole clusters"
                         + (" (every one)" if self.test.cluster_exact else f", seed {self.seed}") + ".")
        else:
            draws = (f"{self.test.n_draws} draws of the Gaussian null of the cell sums (null='gaussian', chosen "
                     "at n >= 10^6 with filled cells)" if self.test.null == "gaussian" else
                     f"{self.test.n_draws} label draws")
            notes.append(f"Multi-scale test: {draws}, seed {self.seed}; Hosmer-Lemeshow "
                         "is referred to chi2 with df = g (external validation: the predictions were not fitted "
                         "on these rows; df = g - 2 holds for development data)." if self.hl is not None else
                         f"Multi-scale test: {draws}, seed {self.seed}.")
        notes.append(f"Bin sensitivity: the single-scale test and adjusted interval at each B with the "
                     f"interval's null ({self.null}"
                     + (", sign flips of whole clusters"
                        if self.test.n_clusters is not None and self.null != "asymptotic" else "")
                     + "); T is the debiased ECE^2 estimate"
                     + (" over pairs of rows of different clusters (T_cl)." if self.test.n_clusters is not None
                        else ".")
                     + (" The verdict changes with B." if self.sensitivity_flag else " Same verdict at every B."))
        if self.n_dropped:
            notes.append(f"{self.n_dropped} rows with missing values were dropped (missing='drop').")
        return notes

    def _dict(self) -> dict:
        impossible = self.impossible
        out = {"verdict": self.verdict, "conclusion": self.conclusion(), "reasons": list(self.reasons),
               "impossible_rows": 0 if impossible is None else impossible.count,
               "alpha": self.alpha, "n": self.n, "k": self.k, "n_classes": self.n_classes, "mode": self.mode,
               "null": self.null, "seed": None if self.seed is None else str(self.seed), "formula": self.formula,
               "y_name": self.y_name, "prob_names": list(self.prob_names), "n_dropped": self.n_dropped,
               "sensitivity_flag": self.sensitivity_flag, "rows": list(self.table.index), "method": "evidence"}
        for key, row in self.table.iterrows():
            for col in ("statistic", "pvalue", "lower", "upper", "reject", "verdict"):
                out[f"{key}_{col}"] = row[col]
        for col in self.sensitivity.columns:
            out[f"sensitivity_{col}"] = self.sensitivity[col].tolist()
        if self.at_horizon:
            out["horizon"] = self.survival.horizon
            out["survival"] = self.survival.to_dict()  # every survival measure: E50, E90, Emax, AUC, the groups
        return out

    def _repr_parts(self) -> list[str]:
        if self.test is None:  # survival: the IPCW interval and the rows that reject
            ci = self.table.loc["calib_ci"]
            return [f"survival n={self.n}: {self.verdict}", f"ECE^2(t) in [{ci['lower']:.4g}, {ci['upper']:.4g}]",
                    f"rejecting={sum(bool(r) for r in self.table['reject'])}/{len(self.table)}"]
        t = self.table.loc["calib_test"]
        ci = self.table.loc["calib_ci"]
        return [f"mode={self.mode} n={self.n}: {self.verdict}", f"calib_test p={t['pvalue']:.4g}",
                f"ECE^2 in [{ci['lower']:.4g}, {ci['upper']:.4g}]",
                f"rejecting={sum(bool(r) for r in self.table['reject'])}/{len(self.table)}"]


# --------------------------------------------------------------------------- rules
def _hl_sparse(hl: HosmerLemeshowResult) -> tuple[int, float]:
    """(groups with an expected count of events or non-events below 5, their share of the HL statistic).

    An infinite HL (a group expecting 0 events or non-events observes some) is all in those groups: share 1.
    """
    t = hl.table
    small = np.minimum(t["expected"].to_numpy(float), t["n"].to_numpy(float) - t["expected"].to_numpy(float))
    mask = small < HL_MIN_EXPECTED
    part = float(t["chi2"].to_numpy(float)[mask].sum())
    if not math.isfinite(hl.statistic):
        share = 1.0 if math.isinf(part) else 0.0
    else:
        share = part / hl.statistic if hl.statistic > 0 else 0.0
    return int(mask.sum()), share


def upper_bound_words(alpha: float) -> str:
    """How the upper end of the (1 - alpha) interval is named: a bound, not a certainty, at its true level.

    The upper end of a two-sided 95% interval is a one-sided 97.5% upper
    confidence bound: "upper confidence limit (one-sided 97.5%)".
    """
    return f"upper confidence limit (one-sided {100 * (1 - alpha / 2):g}%)"


def _how_much(res, alpha: float) -> str:
    """The "how much" clause: the interval for ECE^2 (and ECE) at the result's B and its upper bound."""
    level = f"{100 * (1 - alpha):g}%"
    iv = res.conf_int(alpha)
    lo_ece, hi_ece = math.sqrt(iv.lower), math.sqrt(iv.upper)
    return (f"the {level} interval for ECE^2 at B = {res.n_bins} is {_iv(iv.lower, iv.upper, 4, iv.lower_open)} "
            f"(ECE {_iv(lo_ece, hi_ece, 3, iv.lower_open)}): the {upper_bound_words(alpha)} for ECE^2 is "
            f"{fmt(iv.upper, 4)} (for ECE, {fmt(hi_ece, 3)})")


@dataclass(frozen=True)
class ConfidenceDirection:
    """Accuracy against mean confidence of a top-1 result, with its Wald interval and the word it earns.

    Attributes
    ----------
    accuracy, mean_confidence : float
        The share of correct top-1 predictions and the mean top-1 confidence.
    difference : float
        ``accuracy - mean_confidence`` (the mean of U = correct - confidence).
    lower, upper : float
        Its Wald ``1 - alpha`` interval, ``difference -/+ z_{1-alpha/2} s / sqrt(n)``
        with ``s^2`` the plug-in variance of U.
    word : str or None
        ``"overconfident"`` when the interval lies below 0 (the confidences
        exceed the accuracy), ``"underconfident"`` when it lies above 0, None
        when it contains 0 (no direction shown).
    alpha : float
    """

    accuracy: float
    mean_confidence: float
    difference: float
    lower: float
    upper: float
    word: str | None
    alpha: float

    def level_sentence(self) -> str:
        """The difference without a direction word, for a conclusion of no evidence (a word would read as a verdict)."""
        level = f"{100 * (1 - self.alpha):g}%"
        side = "below" if self.difference < 0 else "above"
        return (f"The accuracy {fmt(self.accuracy, 3)} is {side} the mean confidence {fmt(self.mean_confidence, 3)} "
                f"(difference {fmt(self.difference, 3)}, {level} CI [{fmt(self.lower, 3)}, {fmt(self.upper, 3)}], "
                "excludes 0): a shift in level that the test of ECE = 0 above does not confirm at this B.")

    def sentence(self) -> str:
        """The direction in one sentence (the summary's conclusion and the display show it)."""
        level = f"{100 * (1 - self.alpha):g}%"
        ci = f"difference {fmt(self.difference, 3)}, {level} CI [{fmt(self.lower, 3)}, {fmt(self.upper, 3)}]"
        if self.word is None:
            return (f"Neither overconfidence nor underconfidence is shown: accuracy {fmt(self.accuracy, 3)}, mean "
                    f"confidence {fmt(self.mean_confidence, 3)} ({ci}, includes 0).")
        side = "below" if self.word == "overconfident" else "above"
        return (f"The model is {self.word}: its accuracy {fmt(self.accuracy, 3)} is {side} its mean confidence "
                f"{fmt(self.mean_confidence, 3)} ({ci}, excludes 0).")


def kind_flag(res, flag: str) -> bool:
    """A flag of the kind of ``res`` (``"weighted"``, ``"clustered"``, ``"survival_outcome"``, ``"censored"``,
    :class:`calibtest.ece.kinds.AnalysisKind`), False for an object without a kind (not a CalibrationResult)."""
    return bool(getattr(getattr(res, "kind", None), flag, False))


def confidence_direction(res, alpha: float | None = None) -> ConfidenceDirection | None:
    """Whether a top-1 result is overconfident or underconfident: the one function that writes those words.

    From the result's bin sums (so for rows in memory, files and Dask frames
    alike): with U = correct - confidence, the mean of U is the accuracy
    minus the mean confidence; its Wald interval uses the plug-in variance
    ``sum(U^2)/n - mean(U)^2``.  Calibration implies E[U] = 0; an interval
    below 0 says the model is overconfident, above 0 underconfident.

    Parameters
    ----------
    res : CalibrationResult
    alpha : float, optional
        Level of the interval (default: ``res.alpha``).

    Returns
    -------
    ConfidenceDirection or None
        None for results other than unweighted top-1 ones (binary results
        have CITL and the slope; top-k and full calibration have no single
        confidence).
    """
    if not Target(res.mode).top1 or res.k != 1 or res.bin_stats is None or kind_flag(res, "weighted"):
        return None
    alpha = res.alpha if alpha is None else alpha
    stats = res.bin_stats
    n = float(stats.count.sum())
    mean_u = float(stats.sum_u[:, 0].sum()) / n
    mean_z = float(stats.sum_z[:, 0].sum()) / n
    var_u = max(float(stats.sum_uu[:, 0, 0].sum()) / n - mean_u ** 2, 0.0)
    half = float(ndtri(1.0 - alpha / 2)) * math.sqrt(var_u / n)
    lower, upper = mean_u - half, mean_u + half
    word = "overconfident" if upper < 0 else "underconfident" if lower > 0 else None
    return ConfidenceDirection(accuracy=mean_u + mean_z, mean_confidence=mean_z, difference=mean_u, lower=lower,
                               upper=upper, word=word, alpha=alpha)


def short_verdict(res, alpha: float | None = None) -> str:
    """A few words for a figure: the interval's verdict and, for a top-1 result, its direction.

    ``"evidence of miscalibration (overconfident)"``, ``"no evidence of
    miscalibration"``: the verdict of :func:`conclude` without the evidence
    (the interval and its own test) and the word of :func:`confidence_direction`.
    """
    impossible = impossible_outcomes(res)
    if impossible is not None:
        return f"calibration refuted: {impossible.description()}"
    verdict = conclude(res, alpha)[0]
    direction = confidence_direction(res, alpha)
    if verdict != "evidence":  # a direction word beside "no evidence" would read as a finding
        return "no evidence of miscalibration"
    return "evidence of miscalibration" + (f" ({direction.word})" if direction is not None and direction.word else "")


def figure_verdict(res, alpha: float | None = None, sep: str = "\n") -> str:
    """What a figure of one result says: the ECE with its interval, ``sep``, and :func:`short_verdict`.

    ``"ECE 0.0457, 95% CI (0, 0.073]\nevidence of miscalibration (overconfident)"`` (an interval
    open at 0 is written ``(0, ...]``).
    """
    alpha = res.alpha if alpha is None else alpha
    iv = res.conf_int(alpha, scale="ece")
    shown = fmt_interval(iv.lower, iv.upper, iv.lower_open, 3)
    return (f"ECE {fmt(res.ece, 3)}, {100 * (1 - alpha):g}% CI {shown}{sep}"
            f"{short_verdict(res, alpha)}")


def _p_text(pvalue: float, n_draws: int | None, draws: str = "label draws") -> str:
    floor = smallest_pvalue_text(pvalue, n_draws, draws) if n_draws else ""  # no draw reached the observed statistic
    return p_equals(pvalue, 3) + (f", {floor}" if floor else "")


def conclude(res, alpha: float | None = None, evidence: dict | None = None) -> tuple[str, str, tuple]:
    """(verdict, conclusion, reasons): the one function that writes the conclusion of a result.

    The summary, :meth:`EvidenceResult.conclusion` and the report all show
    what it writes.

    Parameters
    ----------
    res : CalibrationResult
    alpha : float, optional
        Level (default: ``res.alpha``).
    evidence : dict, optional
        The rows of the evidence (keys ``table``, ``sens``, ``flag``,
        ``test``, ``hl``, ``vp``, as :func:`build_evidence` computes them):
        the conclusion then follows the rules of this module (whether from the
        multi-scale test, how much from the interval, then the
        disagreements).  For a survival result with rows censored before the
        horizon (keys ``table`` and ``survival``, as
        :func:`build_survival_evidence` computes them) whether comes from the
        IPCW test of ECE(t) = 0, how much from its interval, then the
        survival rules (see :func:`build_survival_evidence`).  Without it (weighted rows, rows not in memory,
        ``summary(evidence=False)``, the report's section on the interval),
        whether comes from the interval's own test, named by the null it
        used, and how much from the interval.

    Returns
    -------
    verdict : {"evidence", "mixed", "no evidence"}
    conclusion : str
    reasons : tuple of str
        Keys of the disagreement rules that fired (empty without ``evidence``).
    """
    alpha = res.alpha if alpha is None else alpha
    if evidence is None:
        verdict, text, reasons = _conclude_interval(res, alpha)
    elif "survival" in evidence:
        verdict, text, reasons = _conclude_survival(evidence["table"], res, evidence["survival"], alpha)
    else:
        verdict, text, reasons = _conclude(evidence["table"], evidence["sens"], evidence["flag"], evidence["test"],
                                           res, evidence["hl"], evidence["vp"], alpha)
    direction = confidence_direction(res, alpha)
    if direction is not None and direction.word is not None:  # a top-1 result whose evidence shows a direction
        text = f"{text} {direction.sentence() if verdict != 'no evidence' else direction.level_sentence()}"
    impossible = impossible_outcomes(res)
    if impossible is not None:  # certain: it decides the verdict, whatever the tests say
        verdict, text, reasons = "evidence", f"{_refutation(res, impossible)} {text}", (*reasons, "impossible")
    if kind_flag(res, "clustered"):  # the clustered evidence (calibtest.checks.evidence_clustered): say what it allows for
        clustering = res.clustering
        text += (f" Every test and interval here allows for correlation of the rows within each of the "
                 f"{clustering.n_clusters} clusters (clusters independent)"
                 + (f"; with only {clustering.n_clusters} clusters read them as exploratory." if clustering.few
                    else "."))
    return verdict, text, reasons


def result_conclusion(res, alpha: float | None = None, evidence: EvidenceResult | None = None) -> str:
    """The conclusion a summary of ``res`` shows: the evidence's, else that of the interval and its test."""
    return evidence.conclusion() if evidence is not None else conclude(res, alpha)[1]


def _conclude_interval(res, alpha: float) -> tuple[str, str, tuple]:
    """(verdict, conclusion, ()) from the interval and the test of its own null (see :func:`conclude`)."""
    level = f"{100 * (1 - alpha):g}%"
    iv = res.conf_int(alpha)
    draws = part(res, "monte_carlo", "n_draws") if res.null_method == "monte carlo" else None
    test = f"the {null_name(res)} test of ECE = 0 at B = {res.n_bins}"
    p_text = _p_text(res.null_pvalue, draws)
    rejects = res.null_pvalue <= alpha
    if res.method == "adjusted":  # the test decides whether 0 joins the interval
        if not iv.contains_zero:
            return "evidence", (f"Evidence of miscalibration at level {alpha:g}: {test} rejects ({p_text}); "
                                f"how much: {_how_much(res, alpha)}."), ()
        return "no evidence", (f"No evidence of miscalibration at level {alpha:g}: {test} does not reject "
                               f"({p_text}), and {_how_much(res, alpha)}; this does not show that the model "
                               "is calibrated."), ()
    # a resampling interval decides by itself; the test is quoted, and a disagreement said
    lo_ece, hi_ece = math.sqrt(iv.lower), math.sqrt(iv.upper)
    shown = f"{_iv(iv.lower, iv.upper, 4)} (ECE {_iv(lo_ece, hi_ece, 3)})"
    name = f"the {level} {res.method} interval for ECE^2 at B = {res.n_bins}"
    if iv.contains_zero:
        clash = (f"; note that {test} rejects ({p_text})" if rejects else f" ({test}: {p_text})")
        return "no evidence", (f"No evidence of miscalibration at level {alpha:g}: {name}, {shown}, includes "
                               f"0{clash}; the {upper_bound_words(alpha)} for ECE^2 is {fmt(iv.upper, 4)} "
                               f"(for ECE, {fmt(hi_ece, 3)}), and this does not show that the model is calibrated."), ()
    clash = (f"; note that {test} does not reject ({p_text})" if not rejects else f" ({test}: {p_text})")
    return "evidence", (f"Evidence of miscalibration at level {alpha:g}: {name}, {shown}, excludes 0{clash}."), ()


def _conclude(table: pd.DataFrame, sens: pd.DataFrame, flag: bool, test, ci, hl, vp, alpha: float):
    """(verdict, conclusion text, reasons) from all rows (see the module docstring)."""
    keys = list(table.index)
    rej = {k: bool(table.loc[k, "reject"]) for k in keys}
    said = dict.fromkeys(ROWS, False) | rej  # rows not computed count as not rejecting
    names = {k: table.loc[k, "name"] for k in keys}
    others = [k for k in keys if k != "calib_test" and rej[k]]
    sentences, reasons = [], []
    p_test = _p_text(test.pvalue, test.n_draws, "label draws" if test.n_clusters is None else "sign patterns")
    how_much = _how_much(ci, alpha)
    if rej["calib_test"]:
        verdict = "evidence"
        sentences.append(f"Evidence of miscalibration at level {alpha:g}: the multi-scale test rejects "
                         f"({p_test}); how much: {how_much}.")
    elif others:
        verdict = "mixed"
        sentences.append(f"Mixed evidence at level {alpha:g}: the multi-scale test does not reject "
                         f"({p_test}), but {', '.join(names[k] for k in others)} "
                         f"{'rejects' if len(others) == 1 else 'reject'}; how much: {how_much}.")
    else:
        verdict = "no evidence"
        sentences.append(f"No evidence of miscalibration at level {alpha:g}: no test rejects (multi-scale "
                         f"test {p_test}), and {how_much}; this does not show that the model is "
                         "calibrated.")
    # -- disagreement rules
    sc = test.scales
    best = int(np.argmax(sc["z"].to_numpy()))
    b_best = int(sc["n_bins"].iloc[best])
    # Spiegelhalter's z, when a component, is the strongest one if |z_S| exceeds every z_B: one global
    # contrast over all rows, coarser than any binned scale
    sp_best = test.spiegelhalter_z is not None and abs(test.spiegelhalter_z) > float(sc["z"].iloc[best])
    if math.isinf(test.statistic) and test.statistic > 0 and test.combine == "max-z":
        reasons.append("point_mass")
        sentences.append("The multi-scale statistic is +inf: some predictions are exactly 0 or 1 (the label "
                         "draws reproduce them, so the null law of a component is a point mass) and some labels "
                         "contradict them (y = 1 at p = 0 or y = 0 at p = 1, which a calibrated model never "
                         "gives).")
    elif rej["calib_test"] and not rej["calib_ci"] and (sp_best or b_best < ci.n_bins):
        reasons.append("smooth")
        strongest = (f"Spiegelhalter's z, |z_S| = {fmt(abs(test.spiegelhalter_z), 3)}, its own "
                     f"{p_equals(test.pvalue_spiegelhalter, 3)}" if sp_best else
                     f"the scale B = {b_best}, z = {fmt(sc['z'].iloc[best], 3)}, per-scale "
                     f"{p_equals(sc['pvalue'].iloc[best], 3)}")
        sentences.append(f"The interval contains 0 while the multi-scale test rejects: the miscalibration is "
                         f"smooth and the interval's B = {ci.n_bins} is large for n = {ci.n} (the test's "
                         f"strongest component is {strongest}); the interval's upper bound is the "
                         f"answer to how much, at B = {ci.n_bins}.")
    impossible = impossible_outcomes(ci)
    if hl is not None and impossible is not None and math.isinf(hl.statistic):
        reasons.append("hl_impossible")
        n_zero = int(np.count_nonzero(np.isinf(hl.table["chi2"].to_numpy(float))))
        sentences.append(f"Hosmer-Lemeshow is infinite because of the impossible rows: {n_zero} of its "
                         f"{hl.groups} groups expect{'s' if n_zero == 1 else ''} no events or no non-events and "
                         f"observe{'s' if n_zero == 1 else ''} some, which a calibrated model never gives; its "
                         "rejection is certain, not an artefact of its chi-squared reference.")
    elif hl is not None:
        n_small, share = _hl_sparse(hl)
        if (rej["hosmer_lemeshow"] and n_small
                and not any(said[k] for k in ("calib_test", "calib_ci", "spiegelhalter", "citl", "slope"))):
            reasons.append("hl_sparse")
            n_zero = int(np.count_nonzero(np.isinf(hl.table["chi2"].to_numpy(float))))
            part = (f"and give {100 * share:.0f}% of HL = {fmt(hl.statistic, 4)}" if math.isfinite(hl.statistic)
                    else f"and HL is infinite: {n_zero} of them expect no events or no non-events and observe "
                         "some")
            sentences.append(f"Hosmer-Lemeshow rejects but the other tests do not: the HL statistic is driven "
                             f"by groups with tiny expected counts ({n_small} of {hl.groups} groups expect fewer "
                             f"than {HL_MIN_EXPECTED:g} events or non-events {part}); its chi-squared reference "
                             "is unreliable there.")
    if vp is not None:
        if rej["slope"] and not rej["citl"]:
            reasons.append("spread")
            sentences.append("The slope rejects but CITL does not: the slope detects spread "
                             f"({'over' if vp.slope < 1 else 'under'}-confidence), not level.")
        if rej["citl"] and not rej["slope"]:
            reasons.append("level")
            sentences.append("CITL rejects but the slope does not: the predictions are off in level, not in "
                             "spread.")
        sentences.append(vp.direction(alpha))
    if vp is not None and not rej["calib_test"] and (rej["citl"] or rej["slope"]):
        reasons.append("logit_linear")
        sentences.append(_one_departure("multi-scale test", [names[k] for k in ("citl", "slope") if rej[k]],
                                        f"logit-linear departure (level a0 = {fmt(vp.citl, 3)}, slope b = "
                                        f"{fmt(vp.slope, 3)})"))
    if flag:
        reasons.append("bins")
        at = sens.loc[sens["reject"], "n_bins"].tolist()
        sentences.append(f"The single-B verdict depends on the bin count: the single-scale test rejects at "
                         f"B = {', '.join(map(str, at))} only (bin-sensitivity table).")
    sentences += _split(rej, keys, names)
    return verdict, " ".join(sentences), tuple(reasons)


def _one_departure(test: str, which: list, departure: str) -> str:
    """The sentence when ``test`` does not reject while CITL and/or the slope (``which``) do."""
    return (f"The {test} does not reject while {' and '.join(which)} {'does' if len(which) == 1 else 'do'}: "
            f"CITL and the slope test one {departure}, where they are more powerful than a test against "
            "departures of every shape; take their intervals as the size of that departure.")


def _split(rej: dict, keys, names: dict) -> list[str]:
    """The sentence naming the rows that reject (or exclude) the null and those that do not, when they differ."""
    if len(set(rej.values())) <= 1:
        return []
    yes = [names[k] for k in keys if rej[k]]
    no = [names[k] for k in keys if not rej[k]]
    return [f"Rejecting or excluding the null: {', '.join(yes)}; not: {', '.join(no)}."]


def _conclude_survival(table: pd.DataFrame, ci, sev: SurvivalEvidence | None, alpha: float):
    """(verdict, conclusion, reasons) of a survival result censored before t (:func:`build_survival_evidence`)."""
    shown = list(table.index)
    # the rows the conclusion may rest on: not AUC (no test), not an unreliable GND (its size under censoring)
    decisive = ("calib_ci", *sev.decisive_rows()) if sev is not None else ("calib_ci",)
    keys = [k for k in shown if k in decisive]
    rej = {k: bool(table.loc[k, "reject"]) for k in keys}
    said = dict.fromkeys(SURVIVAL_EVIDENCE_ROWS, False) | rej  # rows not computed count as not rejecting
    names = {k: table.loc[k, "name"] for k in shown}
    others = [k for k in keys if k != "calib_ci" and rej[k]]
    ignored = sev is not None and "gnd" in shown and "gnd" not in keys and sev.gnd_pvalue <= alpha
    test = f"the IPCW test of ECE(t) = 0 at t = {fmt(sev.horizon if sev else ci.survival.horizon)}"
    p_test = _p_text(ci.null_pvalue, None)
    how_much = _how_much(ci, alpha)
    if rej["calib_ci"]:
        verdict = "evidence"
        first = f"Evidence of miscalibration at level {alpha:g}: {test} rejects ({p_test}); how much: {how_much}."
    elif others:
        verdict = "mixed"
        first = (f"Mixed evidence at level {alpha:g}: {test} does not reject ({p_test}), but "
                 f"{', '.join(names[k] for k in others)} {'rejects' if len(others) == 1 else 'reject'}; "
                 f"how much: {how_much}.")
    else:
        verdict = "no evidence"
        first = (f"No evidence of miscalibration at level {alpha:g}: no test {'counted ' if ignored else ''}rejects "
                 f"({test}: {p_test}), and "
                 f"{how_much}; this does not show that the model is calibrated.")
    sentences, reasons = [first], []
    if said["slope"] and not said["citl"] and "citl" in keys:
        reasons.append("spread")
        sentences.append("The slope rejects but CITL does not: the slope detects spread (risks too "
                         f"{'extreme' if sev.slope < 1 else 'moderate'}), not level.")
    if said["citl"] and not said["slope"] and "slope" in keys:
        reasons.append("level")
        sentences.append("CITL rejects but the slope does not: the risks by t are off in level, not in spread.")
    if sev is not None:
        sentences.append(sev.direction(alpha))
    if not rej["calib_ci"] and (said["citl"] or said["slope"]):
        reasons.append("cloglog_linear")
        sentences.append(_one_departure("IPCW test", [names[k] for k in ("citl", "slope") if said[k]],
                                        "departure linear in cloglog(risk)"))
    if ignored:
        sentences.append(f"The Greenwood-Nam-D'Agostino test has p = {fmt_p(sev.gnd_pvalue)} but is not counted: "
                         f"it is unreliable here ({sev.gnd_unreliable}).")
    sentences += _split(rej, keys, names)
    return verdict, " ".join(sentences), tuple(reasons)


# --------------------------------------------------------------------------- the single-scale rows
def _single_scale(data, n_bins: int, alpha: float, null: str, rng, n_draws: int) -> dict:
    """T, the adjusted interval and the test's p-value at ``n_bins`` with ``null`` (as calib_ci computes them).

    The null's p-value decides whether 0 joins the interval (the paper's
    threshold z_alpha sigma0 / (n sqrt(w)) for the asymptotic null).
    """
    part = partition_rows(data, n_bins)
    stats = part.bin_sums(data)
    n = stats.n
    t = debiased_statistic(stats, n)
    s1 = sigma1_sq_quadratic(stats) if data.mode.full_calibration else sigma1_sq(stats, n)
    volume, sigma0_sq = cell_geometry(data.mode, data.k, data.n_classes, part.n_bins)
    _, pvalue = null_test(t, n, volume, sigma0_sq)
    threshold = null_threshold(alpha, sigma0_sq, n, volume)
    if null != "asymptotic":
        cond = conditional_test(t, conditional_moments(conditional_bin_sums(data.z, part.inverse), data.n), alpha)
        if null == "conditional" and cond.reliable:
            pvalue = cond.pvalue
        else:
            pvalue = monte_carlo_test(data.z, part.inverse, label_classes(data), n=data.n, n_draws=n_draws,
                                      rng=rng, complete=data.mode.full_calibration).pvalue
        threshold = math.inf if pvalue > alpha else -math.inf
    iv = adjusted_interval(t, math.sqrt(s1 / n), threshold, alpha)
    return {"n_bins": int(part.n_bins), "T": float(t), "lower": float(iv.lower), "upper": float(iv.upper),
            "lower_open": bool(iv.lower_open), "pvalue": float(pvalue), "reject": bool(not iv.contains_zero)}


def _sensitivity(res, alpha: float, seed) -> pd.DataFrame:
    rows = []
    for b in tuple(b for b in SENSITIVITY_BINS if b < res.n_bins):  # a loop over the few bin counts
        draws = part(res, "monte_carlo", "n_draws") or DEFAULT_DRAWS
        rows.append(_single_scale(res.data, b, alpha, res.null, seed, draws))
    iv = res.conf_int(alpha) if res.method == "adjusted" else res._interval(alpha)
    rows.append({"n_bins": int(res.n_bins), "T": float(res.estimate), "lower": float(iv.lower),
                 "upper": float(iv.upper), "lower_open": bool(iv.lower_open), "pvalue": float(res.null_pvalue),
                 "reject": bool(not iv.contains_zero)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the builder
def build_evidence(res, alpha: float | None = None, rng=None) -> EvidenceResult:
    """The evidence table and conclusion for the rows of an interval result.

    Parameters
    ----------
    res : CalibrationResult
        A result of :func:`calibtest.calib_ci` on rows in memory (``res.data``
        holds them); it is the interval row, at its B and with its null.
    alpha : float, optional
        Level of every test and interval (default: ``res.alpha``).
    rng : None, int or numpy.random.Generator
        Seed of the multi-scale test's label draws (and of the Monte Carlo
        null of the bin-sensitivity rows).  None: the result's recorded seed
        (:func:`evidence_seed`), so the evidence of a result is the same at
        every call; an int s gives the draws of ``calib_test(..., rng=s)``.

    Returns
    -------
    EvidenceResult
        Computed once per result, level and integer seed, and kept with the
        result (a second call, the result's summary, its notebook display and
        its report return the same object); with a ``numpy.random.Generator``
        it is computed at every call.  Hosmer-Lemeshow and val_prob come from
        :func:`result_hosmer_lemeshow` and :func:`result_val_prob`, kept the
        same way, and the conclusion from :func:`conclude`.

    Raises
    ------
    ValueError
        When the result holds neither rows nor a way to read them again
        (``res.stream``: a result of a file or a Dask frame holds one and
        its evidence is computed in passes over the rows,
        :mod:`calibtest.streams.evidence`).

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for
           the l2 Expected Calibration Error", arXiv:2408.08998, 2024
           (the interval, eq. (10), and T, eq. (6)).
    .. [2] Hosmer and Lemeshow, "Goodness of fit tests for the multiple
           logistic regression model", Communications in Statistics
           9:1043-1069, 1980.
    .. [3] Spiegelhalter, "Probabilistic prediction in patient management
           and clinical trials", Statistics in Medicine 5:421-433, 1986.
    """
    stream = getattr(res, "stream", None)
    if res.data is None and stream is None:
        raise ValueError("the evidence table needs the rows: this result holds only bin sums (a BinAccumulator); "
                         "call calibtest.evidence on the file, the Dask DataFrame or the rows in memory")
    alpha = res.alpha if alpha is None else check_alpha(alpha)
    rng = evidence_seed(res) if rng is None else check_seed(rng)
    if res.data is None:  # a file or a Dask frame, read again in passes (backends.evidence_stream)
        if isinstance(rng, np.random.Generator):
            raise TypeError("rng must be None or an int seed for a result computed from a file or a Dask "
                            "DataFrame (the label draws are keyed by the seed and each row's position)")
        return res._memo(("evidence", alpha, int(rng)), lambda: stream.evidence(res, alpha, int(rng)))
    if isinstance(rng, np.random.Generator):  # a Generator's draws differ at every call: nothing to keep
        return _build_evidence(res, alpha, rng)
    return res._memo(("evidence", alpha, int(rng)), lambda: _build_evidence(res, alpha, int(rng)))


def result_hosmer_lemeshow(res, groups: int = 10, validation: str = "external") -> HosmerLemeshowResult:
    """Hosmer-Lemeshow on the rows of ``res``, computed once per result, ``groups`` and ``validation``.

    The evidence table (g = 10, external validation), ``res.hosmer_lemeshow()``
    and the report share it.  A result of a file or a Dask frame (``res.stream``)
    finds the exact groups in passes over its rows
    (:func:`calibtest.streams.evidence.streamed_hosmer_lemeshow`).
    """
    if not (is_integer(groups) and not isinstance(groups, bool) and isinstance(validation, str)):
        return _from_result(res, groups, validation)  # raises the argument's error
    stream = getattr(res, "stream", None)
    if res.data is None and stream is not None:  # a file or a Dask frame: exact groups in passes over the rows
        return res._memo(("hosmer_lemeshow", int(groups), validation),
                         lambda: stream.hosmer_lemeshow(res, int(groups), validation))
    return res._memo(("hosmer_lemeshow", int(groups), validation), lambda: _from_result(res, groups, validation))


def result_val_prob(res, alpha: float | None = None) -> ValProbResult:
    """:func:`calibtest.val_prob` on the rows of a one-column result, computed once per result and level.

    The evidence table (Spiegelhalter's z, CITL, the slope) and the report's
    validation metrics share it.  A result of a file or a Dask frame
    (``res.stream``) gives the one its streamed evidence computed, whose C
    index and lowess and loess errors are NaN (they need every row at once).
    """
    alpha = res.alpha if alpha is None else check_alpha(alpha)
    if res.data is None and getattr(res, "stream", None) is not None:  # a file or a Dask frame: the evidence's
        ev = build_evidence(res, alpha)
        if ev.valprob is None:  # the reason, as the evidence's scope says it
            said = ev.scope.partition(_VALPROB_MISSING)[2]
            raise ValueError(said[:said.find(". ") if ". " in said else None].rstrip(".") or
                             "val_prob was not computed on these rows")
        return ev.valprob
    if res.data is None or res.data.z.shape[1] != 1:
        raise ValueError("val_prob needs the rows of one probability column (binary or top-1)")
    return res._memo(("val_prob", alpha), lambda: val_prob(y=np.rint(res.data.y[:, 0]), probs=res.data.z[:, 0],
                                                          alpha=alpha))


def _build_evidence(res, alpha: float, rng) -> EvidenceResult:
    """The evidence of ``res`` at ``alpha`` with the label draws of ``rng`` (see :func:`build_evidence`)."""
    seed = "Generator" if isinstance(rng, np.random.Generator) else int(rng)
    data = res.data
    book = {"formula": res.formula, "y_name": res.y_name, "prob_names": tuple(res.prob_names),
            "n_dropped": res.n_dropped}
    test = calib_test_rows(data, MultiScaleOptions(alpha=alpha), rng=rng, **book)
    hl = vp = None
    if data.z.shape[1] == 1:
        missing = []
        try:
            hl = result_hosmer_lemeshow(res, 10, "external")
        except ValueError as exc:  # e.g. fewer distinct predictions than groups: said in the notes
            missing.append(f"Hosmer-Lemeshow was not computed: {exc}.")
        try:
            vp = result_val_prob(res, alpha)
        except ValueError as exc:  # e.g. y with one class: the logistic fits are undefined
            missing.append(f"{_VALPROB_MISSING}{exc}.")
        scope = " ".join(missing)
    else:
        scope = (f"Hosmer-Lemeshow, Spiegelhalter's z, CITL and the calibration slope apply to one probability "
                 f"column (binary or top-1); for {Target(res.mode).text(res.k)} the evidence is the multi-scale "
                 "test and the interval.")
    return assemble_evidence(res, alpha, seed, test=test, hl=hl, vp=vp, sens=_sensitivity(res, alpha, rng),
                             scope=scope)


def assemble_evidence(res, alpha: float, seed, *, test: CalibrationTestResult, hl, vp, sens: pd.DataFrame,
                      scope: str) -> EvidenceResult:
    """The evidence table, the conclusion and the :class:`EvidenceResult` from the computed parts.

    Used for rows in memory (:func:`build_evidence`) and for rows streamed
    from a file or a Dask frame (:mod:`calibtest.streams.evidence`),
    so that the same numbers give the same table and conclusion.

    Parameters
    ----------
    res : CalibrationResult
        The interval row.
    alpha : float
    seed : int or str
        The multi-scale test's seed (``"Generator"`` for a Generator).
    test : CalibrationTestResult
    hl, vp : HosmerLemeshowResult, ValProbResult or None
        None when not computed (``scope`` says why) or not applicable.
    sens : pandas.DataFrame
        The bin-sensitivity rows.
    scope : str
        What was not computed or does not apply, in words.
    """
    book = {"formula": res.formula, "y_name": res.y_name, "prob_names": tuple(res.prob_names),
            "n_dropped": res.n_dropped}
    iv = res.conf_int(alpha)
    level = f"{100 * (1 - alpha):g}%"
    # a resampling interval (bootstrap, subsampling, HulC) is not a test of ECE = 0: the null's test decides
    decided = (f"; the {res.method} interval does not decide it" if res.method != "adjusted" else "")
    records = {
        "calib_test": ("multi-scale test", "E[Y | Z] = Z (calibrated), at every B of the grid "
                       f"{list(test.n_bins)}"
                       + (" and by Spiegelhalter's z (statistic: max of z_B and |z_S|)"
                          if test.spiegelhalter_z is not None else " (statistic: max of z_B)"),
                       test.statistic, test.pvalue, None, None, test.reject),
        "calib_ci": (f"ECE^2 {level} CI, B = {res.n_bins}",
                     f"ECE^2 = 0 at B = {res.n_bins}, tested with the {null_text(res)} null (statistic: "
                     f"the debiased T){decided}", res.estimate, res.null_pvalue, iv.lower, iv.upper,
                     not iv.contains_zero if res.method == "adjusted" else res.null_pvalue <= alpha),
    }
    if hl is not None:
        records["hosmer_lemeshow"] = ("Hosmer-Lemeshow", f"observed = expected events in each of the "
                                      f"{hl.groups} groups (chi2, df = {hl.df})", hl.statistic, hl.pvalue,
                                      None, None, hl.pvalue <= alpha)
    if vp is not None:
        cis = vp.conf_int(alpha)
        s_lo, s_hi = cis.loc["slope", "lower"], cis.loc["slope", "upper"]
        c_lo, c_hi = cis.loc["citl", "lower"], cis.loc["citl", "upper"]
        records.update({
            "spiegelhalter": ("Spiegelhalter z", "the squared errors (y - p)^2 have the mean implied by p "
                              "(standard normal z)", vp.spiegelhalter_z, vp.spiegelhalter_p, None, None,
                              vp.spiegelhalter_p <= alpha),
            "citl": (f"CITL {level} CI", "calibration-in-the-large a0 = 0 in logit P(y=1) = a0 + logit(p)",
                     vp.citl, None, c_lo, c_hi, not (c_lo <= 0.0 <= c_hi)),
            "slope": (f"slope {level} CI", "calibration slope b = 1 in logit P(y=1) = a + b logit(p)",
                      vp.slope, None, s_lo, s_hi, not (s_lo <= 1.0 <= s_hi)),
        })
    table = pd.DataFrame(
        [{"name": nm, "null": null, "statistic": float(stat), "pvalue": None if pv is None else float(pv),
          "lower": None if lo is None else float(lo), "upper": None if hi is None else float(hi),
          "reject": bool(r), "verdict": _verdict(bool(r), interval=key == "calib_ci" and res.method == "adjusted")}
         for key, (nm, null, stat, pv, lo, hi, r) in records.items()], index=list(records), dtype=object)
    flag = bool(sens["reject"].nunique() > 1)
    verdict, conclusion, reasons = conclude(res, alpha, {"table": table, "sens": sens, "flag": flag, "test": test,
                                                         "hl": hl, "vp": vp})
    return EvidenceResult(
        table=table, sensitivity=sens, sensitivity_flag=flag, verdict=verdict, conclusion=conclusion,
        reasons=reasons, alpha=alpha, n=res.n, k=res.k, n_classes=res.n_classes, mode=res.mode, null=res.null,
        seed=seed, scope=scope, test=test, interval=res, hl=hl, valprob=vp, **book)


# --------------------------------------------------------------------------- survival outcomes censored before t
def build_survival_evidence(res, alpha: float | None = None) -> EvidenceResult:
    """The evidence table and conclusion of a survival result with rows censored before the horizon.

    The rows are the IPCW interval for ECE^2(t) and its test (``calib_ci``)
    and the classical survival evidence of :func:`result_survival_evidence`
    (O/E, CITL, slope, flexible curve, Greenwood-Nam-D'Agostino; keys of
    :data:`calibtest.checks.survival_calibration.SURVIVAL_ROWS`).  The multi-scale test,
    Hosmer-Lemeshow, val_prob and the bin-sensitivity table draw or test
    Bernoulli outcomes, which rows censored before the horizon do not have:
    they are left out (the scope says so).

    Conclusion rules (written by :func:`conclude`): *whether* from the IPCW
    test of ECE(t) = 0 (it rejects: "evidence"; it does not but another row
    does: "mixed", naming them; none rejects: "no evidence"); *how much* from
    its interval; then ``"spread"`` (the slope rejects, CITL does not),
    ``"level"`` (CITL rejects, the slope does not), the direction sentence of
    :meth:`calibtest.checks.survival_calibration.SurvivalEvidence.direction`,
    ``"cloglog_linear"`` (CITL or the slope rejects while the IPCW test does
    not) and the list of the rows that reject and those that do not.

    Computed once per result and level and kept with the result.
    """
    alpha = res.alpha if alpha is None else check_alpha(alpha)
    return res._memo(("evidence", alpha, "survival"), lambda: _build_survival_evidence(res, alpha))


def _build_survival_evidence(res, alpha: float) -> EvidenceResult:
    book = {"formula": res.formula, "y_name": res.y_name, "prob_names": tuple(res.prob_names),
            "n_dropped": res.n_dropped}
    level = f"{100 * (1 - alpha):g}%"
    iv = res.conf_int(alpha)
    scope = ("The multi-scale test, Hosmer-Lemeshow, val_prob (Spiegelhalter, CITL and slope on the logit scale) "
             "and the bin-sensitivity table draw or test Bernoulli outcomes, which rows censored before the "
             "horizon do not have: the evidence is the IPCW interval and the survival rows.")
    try:
        sev = result_survival_evidence(res, alpha)
    except ValueError as exc:  # e.g. fewer rows than risk groups: said in the scope
        sev = None
        scope += f" The survival evidence (O/E, CITL, slope, flexible curve, GND, AUC) was not computed: {exc}."
    records = [{"name": f"ECE^2(t) {level} CI, B = {res.n_bins}",
                "null": f"ECE^2(t) = 0 at B = {res.n_bins}, tested with the {null_text(res)} null (statistic: the "
                        "debiased T of the IPCW rows)", "statistic": float(res.estimate),
                "pvalue": float(res.null_pvalue), "lower": float(iv.lower), "upper": float(iv.upper),
                "reject": bool(not iv.contains_zero), "verdict": _verdict(bool(not iv.contains_zero), True)}]
    index = ["calib_ci"]
    if sev is not None:
        rows = sev.rows()
        records += rows.to_dict(orient="records")
        index += list(rows.index)
    table = pd.DataFrame(records, index=index, dtype=object)
    sens = pd.DataFrame({"n_bins": [], "T": [], "lower": [], "upper": [], "lower_open": [], "pvalue": [],
                         "reject": []})
    verdict, conclusion, reasons = conclude(res, alpha, {"table": table, "survival": sev})
    return EvidenceResult(
        table=table, sensitivity=sens, sensitivity_flag=False, verdict=verdict, conclusion=conclusion,
        reasons=reasons, alpha=alpha, n=res.n, k=res.k, n_classes=res.n_classes, mode=res.mode, null=res.null,
        seed=None, scope=scope, test=None, interval=res, hl=None, valprob=None, survival=sev, **book)


def assemble_clustered_evidence(res, alpha: float, parts: dict) -> EvidenceResult:
    """The :class:`EvidenceResult` of a clustered result from its clustered rows and the conclusion.

    ``parts`` is what :func:`calibtest.checks.evidence_clustered.clustered_evidence_parts`
    computes (``table``, ``sens``, ``flag``, ``test``, ``measures``,
    ``design_hl``, ``scope``, ``seed``); the conclusion follows the rules of
    this module (:func:`conclude`), with the cluster-robust CITL and slope in
    the place of val_prob's and no rule on the i.i.d. Hosmer-Lemeshow groups.
    """
    book = {"formula": res.formula, "y_name": res.y_name, "prob_names": tuple(res.prob_names),
            "n_dropped": res.n_dropped}
    table, sens, flag = parts["table"], parts["sens"], parts["flag"]
    verdict, conclusion, reasons = conclude(res, alpha, {"table": table, "sens": sens, "flag": flag,
                                                         "test": parts["test"], "hl": None, "vp": parts["measures"]})
    return EvidenceResult(
        table=table, sensitivity=sens, sensitivity_flag=flag, verdict=verdict, conclusion=conclusion,
        reasons=reasons, alpha=alpha, n=res.n, k=res.k, n_classes=res.n_classes, mode=res.mode, null=res.null,
        seed=parts["seed"], scope=parts["scope"], test=parts["test"], interval=res, hl=None, valprob=None,
        design_hl=parts["design_hl"], **book)
