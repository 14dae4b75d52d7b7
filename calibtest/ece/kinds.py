"""The kind of an analysis, one object per result: what every consumer reads of it.

A :class:`~calibtest.ece.result.CalibrationResult` is one of four kinds,
decided once, here, from the parts it holds (:func:`kind_of`):

* :class:`RowsKind`: independent, unweighted rows (binary, top-1, top-k, full);
* :class:`WeightedKind`: case weights or a prevalence adjustment (``weighting``);
* :class:`ClusteredKind`: rows correlated within clusters (``clustering``);
* :class:`SurvivalKind`: a survival outcome at a horizon (``survival``),
  around the kind of its rows (weighted or not).

Each kind supplies, through one protocol (the methods of
:class:`AnalysisKind`), what the consumers need: the target in words
(:meth:`~AnalysisKind.target_text`), its events
(:meth:`~AnalysisKind.events`), its O/E, CITL and slope with intervals
(:meth:`~AnalysisKind.recalibration`; as one site of ``calib_ci(by=)``,
:meth:`~AnalysisKind.site_recalibration`, in words
:meth:`~AnalysisKind.recalibration_words`), the null it used in words and its
seed (:meth:`~AnalysisKind.null_text`, :meth:`~AnalysisKind.null_name`,
:meth:`~AnalysisKind.null_seed`), its summary notes and rows
(:meth:`~AnalysisKind.notes`, :meth:`~AnalysisKind.settings`), its report
prose (:meth:`~AnalysisKind.report_prose`), what a plan compares and
recomputes (:meth:`~AnalysisKind.planning_inputs`) and what acceptance
criteria read (:meth:`~AnalysisKind.acceptance_measures`).  The summary,
the report, the plan, acceptance criteria, ``to_dict()`` and the CLI's JSON
read the kind and never test it; each text about a kind is written once,
in its class.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from calibtest.checks.acceptance import (OE_NEEDS, RecalibrationMeasure, applicability_reason, clustered_measure,
                                         join_words, paper_null_variance, rows_oe_measure, rows_valprob, survival_measure,
                                         valprob_measure, valprob_needs)
from calibtest.checks.evidence_clustered import clustered_evidence_parts
from calibtest.checks.evidence_table import (SENSITIVITY_BINS, assemble_clustered_evidence, build_evidence,
                                             build_survival_evidence, evidence_seed)
from calibtest.checks.survival_calibration import result_survival_evidence
from calibtest.core.clustered import MIN_CLUSTERS, t_adjusted_interval
from calibtest.core.intervals import adjusted_interval
from calibtest.inputs.validation import OptionError, check_alpha, check_seed
from calibtest.display.format import fmt, fmt_p, p_equals

__all__ = ["AnalysisKind", "RowsKind", "WeightedKind", "ClusteredKind", "SurvivalKind", "kind_of",
           "RECALIBRATION_MEASURES"]

#: The recalibration measures a kind supplies, in the order consumers show them.
RECALIBRATION_MEASURES = ("citl", "slope", "oe")

#: The acceptance criterion of each recalibration measure.
_CRITERIA = {"citl": "citl_within", "slope": "slope_within", "oe": "oe_within"}


def kind_of(res) -> "AnalysisKind":
    """The kind of ``res`` (a CalibrationResult): the one place that decides it from the parts the result holds."""
    if res.clustering is not None:  # the front doors refuse cluster= with weights or a survival outcome
        return ClusteredKind(res)
    rows = WeightedKind(res) if res.weighting is not None else RowsKind(res)
    return rows if res.survival is None else SurvivalKind(res, rows)


def _level(alpha: float) -> str:
    return f"{100 * (1 - alpha):g}%"


class AnalysisKind:
    """The protocol every kind of analysis implements (the defaults are those of independent, unweighted rows).

    Parameters
    ----------
    res : CalibrationResult
        The result whose kind this is.
    """

    #: A short name of the kind ("rows", "weighted", "clustered", "survival").
    name = "rows"
    #: Rows weighted by case weights or a prevalence (``weights=``, ``prevalence=``).
    weighted = False
    #: Rows correlated within clusters (``cluster=``).
    clustered = False
    #: A survival outcome at a horizon (``horizon=``).
    survival_outcome = False
    #: Rows censored before the horizon (IPCW outcomes).
    censored = False

    def __init__(self, res) -> None:
        self.res = res

    # ------------------------------------------------------------------ the interval and the evidence
    def interval(self, threshold: float, alpha: float):
        """The adjusted interval of the result's T and se at level ``alpha`` with the zero rule's ``threshold``."""
        return adjusted_interval(self.res.estimate, self.res.se, threshold, alpha)

    def evidence(self, alpha: float | None, rng):
        """The evidence table of the result's rows (see ``CalibrationResult.evidence``)."""
        return build_evidence(self.res, alpha, rng)

    def summary_evidence(self, alpha: float | None) -> tuple:
        """(the evidence the summary shows, or None and the reason it is not shown)."""
        res = self.res
        if res.data is None and res.stream is None:
            return None, ("The evidence table (multi-scale test, Hosmer-Lemeshow, val_prob) needs the rows; this "
                          "result holds only bin sums (a BinAccumulator, or a top-k or full target from a file "
                          "or a Dask DataFrame), so the summary shows the interval and its test only.")
        try:
            return build_evidence(res, alpha), None
        except OptionError as exc:  # a step over the memory limit (many classes and bins): said, not hidden
            return None, f"The evidence table was not computed: {exc}."
        except (ValueError, OSError) as exc:
            if res.data is not None:
                raise
            # the file was moved or changed since the interval was computed: said, not hidden
            return None, f"The evidence table was not computed from the file or Dask DataFrame: {exc}."

    def refuse_reliability_plot(self) -> None:
        """Raise ValueError where the reliability diagram (counts of rows, Wilson intervals) does not apply."""

    def repr_head(self) -> str:
        """The first part of the result's repr: the target, n, B and the estimate."""
        res = self.res
        return f"mode={res.mode} k={res.k} n={res.n} B={res.n_bins}: ECE^2={res.estimate:.6g}"

    # ------------------------------------------------------------------ comparing two results
    def comparison_refusal(self, other: "AnalysisKind") -> str | None:
        """Why this result cannot be compared with ``other`` (calib_compare), or None."""
        a, b = self.res, other.res
        if self.survival_outcome != other.survival_outcome:
            return ("compare two survival results (calib_ci(..., horizon=)) or two results without one, not one of "
                    "each")
        if self.survival_outcome and (a.survival.horizon != b.survival.horizon or a.survival.cause != b.survival.cause):
            return (f"the two survival results have different horizons or causes (t = {a.survival.horizon:g} and "
                    f"{b.survival.horizon:g}); compare risks by the same horizon of the same event")
        if self.weighted or other.weighted:
            return ("calib_compare takes unweighted results: the difference variance of weighted estimates "
                    "(weights=, prevalence=) is not implemented")
        if self.clustered != other.clustered:
            return ("compare two clustered results (calib_ci(..., cluster=)) or two unclustered ones, not one of "
                    "each")
        if a.mode is not b.mode:
            return (f"the two results have different modes ({a.mode!r} and {b.mode!r}); compare calibration errors "
                    "of the same target")
        if a.k != b.k:
            return f"the two results have different k ({a.k} and {b.k}); compare the same top-k target"
        if a.n_classes != b.n_classes:
            return (f"the two results have different numbers of classes (n_classes = {a.n_classes} and "
                    f"{b.n_classes})")
        return None

    def shares_rows(self, other: "AnalysisKind", identical: bool | None = None) -> tuple[bool, str]:
        """(paired, reason): whether two results of equal n hold the same rows, as calib_compare decides it.

        ``identical``: whether the outcomes y = U + Z agree row by row, found by
        a pass over a file both results were streamed from (None: compared on
        the rows the results hold).

        Raises
        ------
        ValueError
            Where the results cannot tell (top-1, top-k, full: each holds its own correctness indicators).
        """
        a, b = self.res, other.res
        if a.mode.binary:
            if identical is None:
                identical = np.array_equal(np.rint(a.data.u[:, 0] + a.data.z[:, 0]),
                                           np.rint(b.data.u[:, 0] + b.data.z[:, 0]))
            return (True, "identical outcomes") if identical else (False, "outcomes differ")
        raise ValueError(
            f"cannot tell whether two {a.mode} results with the same n = {a.n} share their rows: they hold only "
            "each model's own correctness indicators, which differ between models on the same rows. Pass "
            "paired=True (same rows, same order) or paired=False (independent evaluation sets), or use the "
            "formula form calib_compare('y ~ p_a', 'y ~ p_b', data=df), which is paired")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.res.mode} target, n={self.res.n}>"

    # ------------------------------------------------------------------ what is assessed
    @property
    def one_column(self) -> bool:
        """One probability column is assessed (a binary or top-1 target): the tests of binary outcomes apply."""
        return self.res.mode.one_dimensional and self.res.k == 1

    @property
    def full_calibration(self) -> bool:
        """The whole probability vector is assessed (the simplex partition)."""
        return self.res.mode.full_calibration

    def target_text(self) -> str:
        """The calibration target in a few words (the summary's "Mode:")."""
        return self.res.mode.text(self.res.k)

    def stated_target(self) -> str | None:
        """The target in words where the mode does not name it (None: the mode names it)."""
        return None

    def target_description(self) -> str:
        """The target in a sentence (the report's settings)."""
        return f"{self.res.mode}: {self.res.mode.description}"

    def events(self) -> int | None:
        """Rows with the event, counted (never a sum of weights): y = 1, or a correct top-1 prediction.

        None where the rows are not held (bin sums) or the target has no
        single event (top-k, full).
        """
        res = self.res
        if not res.mode.one_dimensional or res.data is None:
            return None
        return int(np.count_nonzero(np.rint(res.data.y[:, 0]) == 1.0))

    def event_rows(self) -> list[tuple[str, str]]:
        """The report's first "Model and data" row: n, the events and the event rate."""
        res = self.res
        n = int(res.n)
        if res.mode.one_dimensional and res.data is not None:
            events = self.events()
            return [("Rows analysed n; " + res.mode.event_words + "; event rate",
                     f"{fmt(n)}; {fmt(events)}; {fmt(events / n, 4)}")]
        return [("Rows analysed n", fmt(n) + ("" if res.data is not None or not res.mode.one_dimensional
                                              else " (events not available: the result holds bin sums only)"))]

    # ------------------------------------------------------------------ recalibration: O/E, CITL, slope
    def recalibration_measure(self, measure: str) -> RecalibrationMeasure:
        """CITL, the slope or O/E (``measure``) of the rows, with its standard error.

        Raises
        ------
        ValueError, OptionTypeError
            Where the kind has no such measure, with the reason.
        """
        res = self.res
        if measure == "oe":
            if res.data is None or not res.mode.one_dimensional:
                raise ValueError(OE_NEEDS)
            self._refuse_unweighted("oe_test is for unweighted rows; this result is weighted")
            return self._oe(res.data.z[:, 0], np.rint(res.data.y[:, 0]))
        if res.mode.has_recalibration_measures and res.data is not None:
            self._refuse_unweighted("CITL and slope tests are for unweighted rows; this result is weighted")
            return valprob_measure(measure, rows_valprob(res.data.y[:, 0], res.data.z[:, 0], res.alpha))
        raise valprob_needs(res)

    def _refuse_unweighted(self, message: str) -> None:
        """Raise ``message`` where the rows are weighted (the tests of CITL, slope and O/E count rows)."""

    def _oe(self, p: np.ndarray, y: np.ndarray) -> RecalibrationMeasure:
        return rows_oe_measure(p, y, self.res.alpha)

    def recalibration(self) -> dict:
        """O/E, CITL and slope, each a :class:`~calibtest.checks.acceptance.RecalibrationMeasure` or the reason
        (a string) it does not exist for this kind; ``measure.interval(alpha)`` gives its interval."""
        return self._measures(self.recalibration_measure)

    def _measures(self, one) -> dict:
        """:meth:`recalibration` with ``one(measure)`` giving each measure (the acceptance reasons first)."""
        out = {}
        for measure in RECALIBRATION_MEASURES:
            reason = self.acceptance_reason(_CRITERIA[measure])
            if reason:
                out[measure] = reason
                continue
            try:
                out[measure] = one(measure)
            except (ValueError, TypeError) as exc:
                out[measure] = str(exc)
        return out

    # ------------------------------------------------------------------ sites: calib_ci(by=) and its meta-analysis
    def site_recalibration(self, together: "AnalysisKind") -> dict:
        """O/E, CITL and slope of this result as one site (group) of ``calib_ci(by=)``, as :meth:`recalibration`.

        ``together`` is the kind of all the sites' rows together (the grouped
        result's pooled result): every site's measures are then one estimand,
        which the meta-analysis across the sites can pool.
        """
        return self.recalibration()

    def recalibration_words(self) -> dict:
        """How this kind's CITL, slope and O/E are defined, in words, for the tables of sites and their pooling.

        Keys: ``citl_scale`` (the scale of CITL, "logit"), ``summary`` (the
        three measures in one clause of the grouped summary), ``report`` (the
        same in the report's caption) and ``pooling`` (how the meta-analysis
        pools them, a sentence; None: its own words for rows, Wald or
        cluster-robust).
        """
        return {"citl_scale": "logit",
                "summary": ("CITL (intercept with logit p as offset; 0 when calibrated in the large), calibration "
                            "slope (1) and O/E (observed / expected events, 1)"),
                "report": ("the calibration-in-the-large (CITL: the intercept with logit p as offset; 0 when the "
                           "mean risk is right), the calibration slope (1 when the risks are neither too extreme "
                           "nor too modest) and O/E (observed over expected events; 1)"),
                "pooling": None}

    # ------------------------------------------------------------------ acceptance
    def acceptance_reason(self, key: str) -> str:
        """Why criterion ``key`` (``citl_within``, ``slope_within``, ``oe_within``) cannot be evaluated ('' if it can)."""
        res = self.res
        return applicability_reason(key, res.mode, res.data is not None)

    def acceptance_measures(self) -> dict:
        """What acceptance criteria read: criterion -> the measure it tests, or the reason it cannot."""
        return {_CRITERIA[m]: value for m, value in self.recalibration().items()}

    def acceptance_quantity(self, key: str) -> str:
        """The measure an acceptance criterion (``key`` of ``ACCEPTANCE_CRITERIA``) limits, named with its scale."""
        return {"ece_below": "ECE (probability units)",
                "citl_within": "CITL (logit scale: intercept of the logistic model with offset logit(p))",
                "slope_within": "Calibration slope (coefficient of logit(p) in the logistic model)",
                "oe_within": "O/E (observed over expected events, a ratio)"}[key]

    def margin_null_variance(self) -> tuple[float, str]:
        """``(V0, source)``: the calibrated-regime variance of T the margin test uses as its floor."""
        return paper_null_variance(self.res)

    def acceptance_interval_words(self) -> str:
        """The word the acceptance table puts before "interval" ("cluster-robust " or '')."""
        return ""

    def acceptance_sentence(self, tested: list) -> str:
        """What the acceptance sentence adds about the measures ``tested`` ('' for most kinds)."""
        return ""

    # ------------------------------------------------------------------ the null and its seed
    def null_text(self) -> str:
        """The null law that decided the interval's test, in words.

        "exact" only where it is: the conditional Monte Carlo test of
        unweighted rows has exact size given the predictions; a weighted
        result's asymptotic test uses the estimated variance V_0.
        """
        res = self.res
        if res.null == "asymptotic":
            return self._asymptotic_text()
        if res.null == "conditional":
            return {"shifted gamma": "conditional (shifted gamma)",
                    "point mass": "conditional (exact: a point mass at T = 0, every prediction 0 or 1 in its bin)"}.get(
                res.null_method, "conditional (exact Monte Carlo: the shifted gamma is unreliable here)")
        return self._monte_carlo_text()

    def _asymptotic_text(self) -> str:
        return "asymptotic (the paper's normal limit)"

    def _monte_carlo_text(self) -> str:
        return "Monte Carlo (exact conditional)"

    def null_name(self) -> str:
        """The null that decided the interval's test, in a few words (for sentences such as the conclusion)."""
        res = self.res
        if res.null == "asymptotic":
            return "asymptotic"
        if res.null == "conditional":
            return {"shifted gamma": "conditional (shifted gamma)", "point mass": "conditional (point mass)"}.get(
                res.null_method, "conditional (exact Monte Carlo)")
        return f"Monte Carlo ({res.monte_carlo.n_draws} label draws)"

    def null_word(self) -> str:
        """The null as the summary's note on a test that keeps 0 in the interval names it."""
        return self.res.null

    def null_setting_text(self) -> str:
        """The report's setting "Null distribution of the test of ECE = 0": the law and the option's value."""
        return f"{self.null_text()} (null='{self.res.null}')"

    def asymptotic_name(self) -> str:
        """The asymptotic test kept next to a finite-sample null, named (the summary's verdict note)."""
        return "The paper's asymptotic test"

    def null_seed(self):
        """The seed of the null's draws (label draws or sign patterns), or None when nothing was drawn."""
        mc = self.res.monte_carlo
        return None if mc is None else mc.seed

    def draws_label(self, mc) -> str:
        """The tests table's row of the Monte Carlo null."""
        return f"Monte Carlo: {mc.n_draws} label draws"

    def seed_notes(self) -> list[str]:
        """The summary note saying how to reproduce the null's draws (none when nothing was drawn)."""
        mc = self.res.monte_carlo
        if mc is None or mc.seed is None:
            return []
        return [f"Monte Carlo null: {mc.n_draws} label draws, seed {mc.seed} (rng=) reproduces them."]

    def draw_rows(self, d: dict, mc) -> list[tuple[str, str]]:
        """The report's rows of the drawn null: the statistic against its draws and the p-value."""
        return [("Statistic", f"T = {fmt(d['estimate'])}, against {mc.n_draws} Monte Carlo draws of T under "
                              "H0" + ("" if mc.seed is None else f" (seed {mc.seed})")),
                ("p-value of H0: ECE = 0", f"{fmt_p(d['null_pvalue'])} ((1 + #draws ≥ T) / (1 + "
                                           f"{mc.n_draws}))")]

    # ------------------------------------------------------------------ the summary
    def notes(self) -> list[str]:
        """The summary notes about the kind (its weights, clusters or censoring), first among the notes."""
        return []

    def closing_notes(self) -> list[str]:
        """The summary notes about the target, last among the notes."""
        res = self.res
        if res.mode.binary:
            return ["Binary mode measures calibration of p itself; it equals the paper's K = 2 full "
                    "calibration error divided by 2."]
        if res.mode.full_calibration:
            return [f"Full calibration: the simplex is cut into B^(K-1) = {res.n_bins}^{res.n_classes - 1} "
                    "equal-volume simplices (edgewise subdivision); only non-empty cells are stored."]
        return []

    def settings(self, rows: dict) -> dict:
        """The summary's settings rows, with the kind's own (``rows`` as the summary builds them)."""
        return rows

    def summary_tables(self, alpha: float) -> list[tuple[pd.DataFrame, dict]]:
        """Tables the kind adds to the summary (a frame and its formats)."""
        return []

    def se_words(self) -> str:
        """The standard error of T the adjusted interval uses, in the report's symbols."""
        return "se = σ₁/√n"

    def tests_note(self, alpha: float) -> str:
        """The summary note defining the two tests of the tests table."""
        note = ("Tests of ECE = 0: calibrated regime z0 = n sqrt(w) T / sigma0 (variance sigma0^2; "
                f"threshold: the critical value of T at level {alpha:g}); miscalibrated regime "
                "T / se with se = sigma1 / sqrt(n) (variance sigma1^2).")
        approx = self.res.approximation
        if approx is not None and approx.second_order_variance is not None:
            note = note.replace("se = sigma1 / sqrt(n) (variance sigma1^2)",
                                "se = sqrt(sigma1^2 / n + V2) (V2: the second-order variance of T)")
        return note

    def evidence_size(self) -> str:
        """How the multi-scale test of the evidence holds its size, in a few words."""
        return "exact size"

    def evidence_opening(self) -> str:
        """The summary's note on the evidence table it opens with."""
        return ("The summary opens with the evidence on calibration from every test on these rows; the "
                f"conclusion states whether (the multi-scale test, {self.evidence_size()}) and how much "
                "(the interval).")

    def to_dict(self) -> dict:
        """The kind's keys of ``to_dict()`` (flat scalars)."""
        return {}

    # ------------------------------------------------------------------ the report
    def regime_texts(self, d: dict, se: float, role1: str) -> tuple[str, str, str, str, str]:
        """The report's table of the two regimes: (law of T, sigma0^2, sigma1^2, se of T, role in the interval)."""
        approx = self.res.approximation
        se1 = (f"se = √(σ₁² / n + V₂) = {fmt(se)} (V₂ = {fmt(approx.second_order_variance)}, the second-order "
               "variance of T)" if approx is not None and approx.second_order_variance is not None
               else f"se = σ₁ / √n = {fmt(se)}")
        return ("√n·(T − ECE²) / σ₁ → N(0, 1)", f"σ₀² = {fmt(d['sigma0_sq'])} (exact)",
                f"σ₁² = {fmt(d['sigma1_sq'])} (plug-in)", se1, role1)

    def report_prose(self) -> dict:
        """The report's paragraphs about the kind: ``weighting`` and ``clustering`` (a paragraph each, or None)
        and their one-clause versions for the summary of findings (``weighting_short``, ``clustering_short``)."""
        return {"weighting": None, "weighting_short": None, "clustering": None, "clustering_short": None}

    def report_omissions(self, name: str) -> dict:
        """Parts of the report left out for this kind, each with the reason (None: left out without a note):
        keys ``evidence`` (the evidence table), ``hl`` (Hosmer–Lemeshow), ``vp`` (val.prob)."""
        return {}

    def report_figures(self) -> str:
        """Which figures the report draws: ``"rows"``, ``"weighted"`` or ``"survival"``."""
        return "rows"

    def report_references(self) -> tuple[str, ...]:
        """The keys of the references the report's Methods cite for this result (``reporting.html.REFERENCES``):
        the interval, T-Cal and the HulC, and for binary outcomes Hosmer–Lemeshow, val.prob, Spiegelhalter,
        the ICI, Wilson's interval of the display-bin reliability diagram and the calibration hierarchy."""
        return ("sun", "lee", "kuchibhotla", "hosmer", "harrell", "spiegelhalter", "austin_steyerberg", "wilson",
                "van_calster")

    def substitute_evidence_rows(self, d: dict) -> list | None:
        """Rows the report shows in place of an evidence table the kind does not have (None: no such table)."""
        return None

    def evidence_scope_shown(self) -> bool:
        """The report states the evidence's scope (what it could not compute)."""
        return self.res.data is None

    def bins_sum_text(self, d: dict) -> str | None:
        """What the sum of the bins' terms is, where it is not the estimate (None: it is the estimate)."""
        return None

    def recalibration_interval_words(self) -> str:
        """How the intervals of CITL and slope printed in the flexible-curve panel are made."""
        return "Wald intervals"

    def censoring_rows(self) -> list[tuple[str, str]] | None:
        """The report's follow-up and censoring rows (None: no survival outcome)."""
        return None

    # ------------------------------------------------------------------ the plan
    def planning_inputs(self) -> dict:
        """What a plan compares and recomputes for this result.

        ``n`` and ``events`` (the events of a binary outcome, for the
        sentence beside the recomputed power), ``k`` in the plan's notation
        (``"full"``, None for binary and top-1, else k), ``n_classes_stated``
        (a single top-1 column whose K was stated), ``cluster`` (the cluster
        column, ``"given as an array"``, or None) and ``censored_fraction``
        (rows censored before the horizon over n; None without a survival
        outcome).
        """
        res = self.res
        return {"n": int(res.n), "events": self.events() if res.mode.binary else None,
                "k": "full" if res.mode.full_calibration else (None if res.mode.one_dimensional else res.k),
                "n_classes_stated": res.mode.top1 and len(res.prob_names) == 1,
                "cluster": None, "censored_fraction": None}


class RowsKind(AnalysisKind):
    """Independent, unweighted rows: binary, top-1, top-k or full calibration."""

    name = "rows"


class WeightedKind(AnalysisKind):
    """Rows weighted by case weights or re-weighted to a prevalence (``weights=``, ``prevalence=``)."""

    name = "weighted"
    weighted = True

    def evidence(self, alpha: float | None, rng):
        raise ValueError("the evidence tests the unweighted rows; this result is weighted (weights= or "
                         "prevalence=): its interval and test are the weighted ones in summary()")

    def summary_evidence(self, alpha: float | None) -> tuple:
        return None, ("The evidence table (multi-scale test, Hosmer-Lemeshow, val_prob) tests the unweighted "
                      "rows; this result is weighted (weights= or prevalence=), so the summary shows the "
                      "weighted interval and its test only.")

    def refuse_reliability_plot(self) -> None:
        raise ValueError("the reliability diagram shows counts of rows and Wilson intervals, which do not "
                         "apply to weighted rows; bin_table() lists the weighted mean prediction and outcome "
                         "of each bin (mean_pred_weighted, mean_outcome_weighted)")

    def _refuse_unweighted(self, message: str) -> None:
        raise ValueError(message)

    def acceptance_reason(self, key: str) -> str:
        res = self.res
        return applicability_reason(key, res.mode, res.data is not None, weighted=True)

    def margin_null_variance(self) -> tuple[float, str]:
        return float(self.res.weighting.null_variance), "weighted V_0"

    def _asymptotic_text(self) -> str:
        return "asymptotic (normal limit of T_w / sqrt(V_0), V_0 estimated from the weighted rows)"

    def _monte_carlo_text(self) -> str:
        if self.res.weighting.reweighted:
            return "Monte Carlo (outcomes redrawn given the predictions, the weights following them)"
        return "Monte Carlo (outcomes redrawn given the predictions, the case weights fixed)"

    def asymptotic_name(self) -> str:
        return "The asymptotic test (V_0 estimated)"

    def notes(self) -> list[str]:
        return self.res.weighting.notes(self.res.n)

    def to_dict(self) -> dict:
        return self.res.weighting.to_dict()

    def regime_texts(self, d: dict, se: float, role1: str) -> tuple[str, str, str, str, str]:
        prevalence = self.res.weighting.reweighted
        return ("√n·(T − ECE²) / σ₁ → N(0, 1)",
                f"σ₀² = n²·w·V₀ = {fmt(d['sigma0_sq'])} (V₀ estimated from the weighted rows)",
                f"σ₁² = {fmt(d['sigma1_sq'])} (influence function of T_w)",
                f"se = {fmt(se)} (jackknife)" if prevalence else f"se = σ₁ / √n = {fmt(se)}", role1)

    def report_prose(self) -> dict:
        return {**super().report_prose(), "weighting": self._weighting_paragraph(),
                "weighting_short": self._weighting_clause()}

    def _weighting_paragraph(self) -> str:
        """How the rows were re-weighted (kind, pi and pi_hat, n_eff), and for which population the numbers hold:
        the summary's note (:meth:`~calibtest.ece.result.Weighting.description`), one wording for both."""
        return self.res.weighting.description(self.res.n)

    def _weighting_clause(self) -> str:
        """One clause for the summary of findings: the re-weighting and the effective sample size."""
        w = self.res.weighting
        how = (f"re-weighted to the population prevalence π = {fmt(w.prevalence, 4)} (sample π̂ = "
               f"{fmt(w.sample_prevalence, 4)})" if w.reweighted else "weighted by case weights")
        if w.reweighted and w.kind != "prevalence":
            how = "weighted by case weights and " + how
        return f"Weighted analysis: {how}, effective sample size {fmt(w.n_eff, 4)} of {self.res.n} rows."

    def report_omissions(self, name: str) -> dict:
        """The parts of a report that count unweighted rows, each with the reason it is left out."""
        evidence = (f"The evidence table (multi-scale test, Hosmer–Lemeshow, Spiegelhalter's z, calibration "
                    f"intercept and slope) is not shown for {name}: those tests treat every row as one observation, "
                    "and this analysis is weighted; the weighted interval and test are the result.")
        hl = (f"The Hosmer–Lemeshow test is not shown for {name}: the analysis is weighted"
              + (", and with prevalence weights its statistic has no chi-squared reference." if
                 self.res.weighting.reweighted else
                 "; its case-weighted version is in the evidence table.")) if self.one_column else None
        vp = (f"Validation metrics (R's rms::val.prob) are not shown for {name}: their definitions (deviance-based "
              "D, U and Q, the C statistic, the lowess curve) are for unweighted rows.") if self.one_column else None
        return {"evidence": evidence, "hl": hl, "vp": vp}

    def report_figures(self) -> str:
        return "weighted"

    def substitute_evidence_rows(self, d: dict) -> list:
        """The evidence rows of a weighted result: its interval and its test, and why the others are left out."""
        res, alpha = self.res, d["alpha"]
        left, right = ("(" if d["ci_lower_open"] else "["), "]"
        iv = f"{left}{fmt(d['ci_lower'], 4)}, {fmt(d['ci_upper'], 4)}{right}"
        rows = [(f"Weighted interval for ECE² (B = {d['n_bins']}, {d['method']})", "ECE = 0", fmt(d["estimate"], 4),
                 f"{iv} (squared probability units)", "includes 0" if d["contains_zero"] else "excludes 0"),
                (f"Weighted test of ECE = 0 ({self.null_name()} null)", "ECE = 0", fmt(d["estimate"], 4),
                 p_equals(d['null_pvalue']), "rejects" if d["null_pvalue"] <= alpha else "does not reject")]
        if self.one_column and res.weighting.reweighted:
            rows.append(("Hosmer–Lemeshow, case-weighted", "calibrated", "—", "not computed",
                         "no chi-squared reference: prevalence weights depend on the outcome"))
        elif self.one_column:
            hl = res.hosmer_lemeshow()  # the result's own, computed once
            rows.append((f"Hosmer–Lemeshow, case-weighted ({hl.groups} groups, df = {hl.df})", "calibrated",
                         fmt(hl.statistic, 4), p_equals(hl.pvalue), "rejects" if hl.pvalue <= alpha else
                         "does not reject"))
        rows.append(("Multi-scale test, Spiegelhalter's z, CITL, slope", "—", "—", "not computed",
                     "each treats every row as one observation (unweighted)"))
        return rows


class ClusteredKind(AnalysisKind):
    """Rows correlated within clusters (``cluster=``): T_cl, cluster-robust errors, the sign-flip null."""

    name = "clustered"
    clustered = True

    @property
    def clustering(self):
        return self.res.clustering

    def interval(self, threshold: float, alpha: float):
        """The interval with t quantiles on G - 1 degrees of freedom."""
        return t_adjusted_interval(self.res.estimate, self.res.se, threshold, alpha, self.clustering.n_clusters)

    def evidence(self, alpha: float | None, rng):
        """Every row of the evidence in its clustered version (:mod:`calibtest.checks.evidence_clustered`), kept
        per level and integer seed.

        As :func:`calibtest.checks.evidence_table.build_evidence` for independent rows: ``rng=None`` is the
        result's recorded seed, so the summary, the notebook display and the report share one object; a
        ``numpy.random.Generator`` draws anew at every call.
        """
        res = self.res
        alpha = res.alpha if alpha is None else check_alpha(alpha)
        rng = evidence_seed(res) if rng is None else check_seed(rng)

        def build(seed):
            return assemble_clustered_evidence(res, alpha, clustered_evidence_parts(res, alpha, seed,
                                                                                    SENSITIVITY_BINS))

        if isinstance(rng, np.random.Generator):
            return build(rng)
        return res._memo(("evidence", alpha, int(rng)), lambda: build(int(rng)))

    def summary_evidence(self, alpha: float | None) -> tuple:
        return self.evidence(alpha, None), None

    def recalibration_measure(self, measure: str) -> RecalibrationMeasure:
        """The cluster-robust CITL, slope and O/E (``clustering.measures``: t with G - 1 degrees of freedom)."""
        res = self.res
        if measure == "oe" and (res.data is None or not res.mode.one_dimensional):
            raise ValueError(OE_NEEDS)
        return clustered_measure(measure, res)

    def acceptance_interval_words(self) -> str:
        return "cluster-robust "

    def acceptance_sentence(self, tested: list) -> str:
        """That the CITL, slope or O/E tested are the cluster-robust ones."""
        g = self.clustering.n_clusters
        text = join_words(tested)
        return (f" {text[0].upper()}{text[1:]} {'is' if len(tested) == 1 else 'are'} cluster-robust "
                f"({g} clusters, t with {g - 1} degrees of freedom).")

    def planning_inputs(self) -> dict:
        c = self.clustering
        return {**super().planning_inputs(), "cluster": c.name or "given as an array"}

    # the null
    def null_text(self) -> str:
        c = self.clustering
        if self.res.null == "asymptotic":
            return "clustered asymptotic (normal limit of T_cl / sqrt(V_0), V_0 from the between-cluster pairs)"
        return (f"cluster sign-flip ({'all ' if c.exact else ''}{c.n_patterns} "
                f"{'' if c.exact else 'random '}sign patterns of the {c.n_clusters} clusters"
                f"{', exact' if c.exact else ''})")

    def null_name(self) -> str:
        return ("clustered asymptotic" if self.res.null == "asymptotic" else
                f"cluster sign-flip ({self.clustering.n_patterns} sign patterns)")

    def null_word(self) -> str:
        return self.null_name()

    def null_setting_text(self) -> str:
        return self.null_text()  # no option names the sign-flip test

    def asymptotic_name(self) -> str:
        return "The clustered asymptotic test z = T_cl / sqrt(V_0)"

    def draws_label(self, mc) -> str:
        return f"cluster sign-flip: {self.clustering.n_patterns} patterns"

    def seed_notes(self) -> list[str]:
        mc = self.res.monte_carlo
        if self.clustering.exact or mc is None or mc.seed is None:  # every sign pattern: nothing to reproduce
            return []
        return [f"Cluster sign-flip null: {mc.n_draws} random sign patterns, seed {mc.seed} (rng=) "
                "reproduces them."]

    def draw_rows(self, d: dict, mc) -> list[tuple[str, str]]:
        c = self.clustering
        patterns = ("every sign pattern of the clusters but the identity" if c.exact else
                    f"random sign patterns of the {c.n_clusters} clusters")
        return [("Statistic", f"T_cl = {fmt(d['estimate'])}, against its values T* under {mc.n_draws} "
                              f"{patterns}" + ("" if mc.seed is None else f" (seed {mc.seed})")),
                ("p-value of H0: ECE = 0", f"{fmt_p(d['null_pvalue'])} ((1 + #T* ≥ T_cl) / (1 + "
                                           f"{mc.n_draws}))")]

    # the summary
    def notes(self) -> list[str]:
        return self.clustering.notes()

    def to_dict(self) -> dict:
        return self.clustering.to_dict()

    def summary_tables(self, alpha: float) -> list[tuple[pd.DataFrame, dict]]:
        """The cluster-robust CITL, slope and O/E (binary and top-1)."""
        measures = self.clustering.measures
        if measures is None:
            return []
        frame = measures.to_frame(alpha)
        table = pd.DataFrame({"estimate": frame["estimate"].to_numpy(), "std err": frame["se"].to_numpy(),
                              "ci lower": frame["ci_lower"].to_numpy(), "ci upper": frame["ci_upper"].to_numpy()},
                             index=["CITL (cluster-robust)", "slope (cluster-robust)", "O/E (cluster-robust)"],
                             dtype=object)
        return [(table, {"estimate": 4, "std err": 4, "ci lower": 4, "ci upper": 4})]

    def tests_note(self, alpha: float) -> str:
        return ("Tests of ECE = 0 (clustered): calibrated regime z0 = T_cl / sqrt(V_0) (the table's "
                "sigma0^2 is n^2 w V_0); miscalibrated regime T_cl / se with se = sqrt(V_1 + V_0) (the "
                "table's sigma1^2 is n V_1). CITL, slope and O/E: cluster-robust (sandwich) standard errors, "
                f"intervals with t quantiles on {self.clustering.n_clusters - 1} degrees of freedom (O/E: on "
                "the log scale; the std err is that of log O/E).")

    def evidence_size(self) -> str:
        return "sign flips of whole clusters"

    # the report
    def regime_texts(self, d: dict, se: float, role1: str) -> tuple[str, str, str, str, str]:
        g = self.clustering.n_clusters
        if self.res.method == "adjusted":
            role1 = role1.replace("z(", f"t_{g - 1}(")
        return (f"(T_cl − ECE²) / se referred to Student's t with G − 1 = {g - 1} df",
                f"σ₀² = n²·w·V₀ = {fmt(d['sigma0_sq'])} (V₀ from the pairs of rows of different clusters)",
                f"σ₁² = n·V₁ = {fmt(d['sigma1_sq'])} (influence values summed per cluster)",
                f"se = √(V₁ + V₀) = {fmt(se)} (cluster-robust)", role1)

    def report_prose(self) -> dict:
        return {**super().report_prose(), "clustering": self._clustering_paragraph(),
                "clustering_short": self._clustering_clause()}

    def _clustering_paragraph(self) -> str:
        """How the clusters were allowed for: the summary's notes (:meth:`~calibtest.ece.result.Clustering.notes`,
        one wording for both), with the cluster-robust CITL, slope and O/E and what the evidence table allows for."""
        res, c = self.res, self.clustering
        notes = c.notes()
        text = notes[0]
        m = c.measures
        if m is not None:
            lo_c, hi_c = m.citl_ci()
            lo_s, hi_s = m.slope_ci()
            lo_o, hi_o = m.oe_ci()
            text += (f" Cluster-robust CITL {fmt(m.citl, 3)} ({_level(res.alpha)} CI {fmt(lo_c, 3)} to "
                     f"{fmt(hi_c, 3)}), slope {fmt(m.slope, 3)} ({fmt(lo_s, 3)} to {fmt(hi_s, 3)}), O/E "
                     f"{fmt(m.oe, 3)} ({fmt(lo_o, 3)} to {fmt(hi_o, 3)}).")
        text = " ".join([text, *notes[1:]])  # the warning below the minimum number of clusters
        return text + (" Every row of the evidence table below allows for the clusters (sign flips of whole "
                       "clusters, cluster-robust intervals, the design-based Hosmer–Lemeshow test); the "
                       "Hosmer–Lemeshow and val.prob tables of independent rows are left out, because they would "
                       "overstate the evidence for clustered rows.")

    def _clustering_clause(self) -> str:
        """One clause for the summary of findings: the number of clusters, and the warning below the minimum."""
        c = self.clustering
        return (f"Clustered analysis: {c.n_clusters} clusters."
                + (f" Fewer than {MIN_CLUSTERS} clusters: the clustered interval and test are unreliable." if c.few
                   else ""))

    def report_omissions(self, name: str) -> dict:
        """The tables of independent rows (Hosmer–Lemeshow, val.prob), which would overstate the evidence."""
        if not self.one_column:
            return {}
        return {"hl": ("The Hosmer–Lemeshow test of independent rows is not shown: these rows are clustered, and "
                       "the evidence table gives its design-based version (the F-adjusted test of Archer, Lemeshow "
                       "and Hosmer 2007) when there are more clusters than groups."),
                "vp": ("The validation metrics of independent rows (rms::val.prob: Wald intervals, Spiegelhalter's "
                       "z) are not shown: these rows are clustered, and the evidence table gives Spiegelhalter's z "
                       "from cluster sums and CITL, the slope and O/E with cluster-robust intervals.")}

    def evidence_scope_shown(self) -> bool:
        return True

    def bins_sum_text(self, d: dict) -> str:
        """The bins' terms sum to the paper's T, not to the clustered T_cl."""
        return (f"the paper's T on these bins, which counts pairs of rows of one cluster; the clustered estimate "
                f"T_cl = {fmt(d['estimate'])} leaves them out")

    def recalibration_interval_words(self) -> str:
        return ("cluster-robust intervals (t on G − 1 df, as in the evidence table; the band takes the rows as "
                "independent)")


#: Why the sites of a weighted survival analysis have no O/E, CITL or slope.
_WEIGHTED_SITES = ("the rows are weighted (weights=), and the Kaplan-Meier O/E and the Cox and logistic fits of "
                   "CITL and slope count each row once (the weighted interval and test of the ECE at t are the "
                   "analysis)")


class SurvivalKind(AnalysisKind):
    """A survival outcome at a horizon (``horizon=``), around the kind of its rows (weighted or not).

    What does not concern the survival outcome (the weights, the tests of
    the rows when nothing is censored before the horizon) is the rows'
    kind's (``rows``).
    """

    name = "survival"
    survival_outcome = True

    def __init__(self, res, rows: AnalysisKind) -> None:
        super().__init__(res)
        self.rows = rows
        self.weighted = rows.weighted

    def evidence(self, alpha: float | None, rng):
        """With censoring before the horizon, the IPCW interval and the survival rows (no label draws: ``rng`` is
        not used); without, the rows' evidence (the outcome 1{T <= t} is binary)."""
        if self.censored and not self.weighted:
            return build_survival_evidence(self.res, alpha)
        return self.rows.evidence(alpha, rng)

    def summary_evidence(self, alpha: float | None) -> tuple:
        if self.censored and not self.weighted:
            return build_survival_evidence(self.res, alpha), None
        return self.rows.summary_evidence(alpha)

    def _unbiased_se(self) -> bool:
        """Whether se = sqrt(sigma1_U^2 / n + V_0) (unweighted IPCW rows, Kaplan-Meier censoring weights)."""
        return self.censored and getattr(self.res.survival, "second_order_variance", None) is not None

    def se_words(self) -> str:
        if self._unbiased_se():
            return ("se = √(σ₁,U²/n + V₀), with σ₁,U² the first-order variance of the IPCW rows from unbiased "
                    "bin sums and V₀ the second-order variance of T")
        return self.rows.se_words()

    def tests_note(self, alpha: float) -> str:
        note = self.rows.tests_note(alpha)
        if self._unbiased_se():
            note = note.replace("se = sigma1 / sqrt(n) (variance sigma1^2)",
                                "se = sqrt(sigma1_U^2 / n + V0) (sigma1_U^2: the first-order variance of the IPCW "
                                "rows from unbiased bin sums; V0: the second-order variance of T)")
        return note

    def refuse_reliability_plot(self) -> None:
        self.rows.refuse_reliability_plot()
        if self.censored:
            raise ValueError("the reliability diagram's Wilson intervals assume binary outcomes; rows of this "
                             "survival result are censored before the horizon: the Kaplan-Meier reliability "
                             "diagram at the horizon is calibtest.reporting.survival_plot.plot_survival_calibration("
                             "res.evidence().survival), and bin_table() lists each bin's IPCW estimate of P(T <= t) "
                             "(mean_outcome)")

    def repr_head(self) -> str:
        res = self.res
        return f"survival at t={self.survival.horizon:g} n={res.n} B={res.n_bins}: ECE^2(t)={res.estimate:.6g}"

    def shares_rows(self, other: AnalysisKind, identical: bool | None = None) -> tuple[bool, str]:
        """Paired when the two results hold the same times and events, row by row."""
        if self.same_follow_up(other):
            return True, "identical times and events"
        return False, "times or events differ"

    def same_follow_up(self, other: AnalysisKind) -> bool:
        """Whether two survival results hold the same times and events, row by row."""
        a, b = self.survival, other.res.survival
        return bool(np.array_equal(a.time, b.time) and np.array_equal(a.event, b.event))

    @property
    def survival(self):
        return self.res.survival

    @property
    def censored(self) -> bool:  # type: ignore[override]
        """Rows censored before the horizon (the outcomes are IPCW-weighted)."""
        return self.survival.n_censored > 0

    def target_text(self) -> str:
        return self.survival.target

    def stated_target(self) -> str:
        return self.survival.target

    def target_description(self) -> str:
        return (f"survival at the horizon t = {fmt(self.survival.horizon)}: calibration of the risk r = P(T ≤ t), "
                "E[1{T ≤ t} | r] = r")

    def events(self) -> int:
        """The events (of the cause) at or before the horizon, counted; never the sum of the IPCW outcomes."""
        return int(self.survival.n_events)

    def event_rows(self) -> list[tuple[str, str]]:
        surv = self.survival
        return [("Rows analysed n; events by the horizon t; censored before t",
                 f"{fmt(int(self.res.n))}; {fmt(surv.n_events)}; {fmt(surv.n_censored)}")]

    def recalibration_measure(self, measure: str) -> RecalibrationMeasure:
        """With censoring before the horizon, the survival evidence's CITL, slope and Kaplan–Meier O/E at t;
        without, the outcome 1{T <= t} is binary and the rows' measures apply."""
        if self.censored:
            return self._horizon_measure(measure)
        return self.rows.recalibration_measure(measure)

    def _horizon_measure(self, measure: str) -> RecalibrationMeasure:
        """CITL, the slope or the Kaplan–Meier O/E at t of the survival evidence (``survival_calibration``).

        Raises
        ------
        ValueError
            With competing risks (the Kaplan–Meier and Cox fits would count the competing events as
            censorings), or where the survival evidence has no such measure, with the reason.
        """
        cause = self.survival.cause
        if cause is not None:
            raise ValueError(f"with competing risks (cause={cause!r}) the Kaplan-Meier O/E and Crowson et al.'s "
                             "Cox CITL and slope at t would count the competing events as censorings, so they do "
                             f"not estimate the cumulative incidence of cause {cause!r} (the ECE at t, with "
                             "Aalen-Johansen weights, does)")
        return survival_measure(measure, result_survival_evidence(self.res))

    def site_recalibration(self, together: AnalysisKind) -> dict:
        """The measures at the horizon (:meth:`recalibration_measure` with censoring) when the sites together are
        censored before t, for every site, censored or not, so that every site's CITL and slope are Crowson et
        al.'s (a site without censoring has the binary O/E exactly); the rows' measures when no site is."""
        if self.weighted:  # one reason for the three, said once
            return dict.fromkeys(RECALIBRATION_MEASURES, _WEIGHTED_SITES)
        if together.censored:
            return self._measures(self._horizon_measure)
        return self.recalibration()

    def recalibration_words(self) -> dict:
        if not self.censored:
            return self.rows.recalibration_words()
        return {"citl_scale": "log cumulative hazard",
                "summary": ("CITL at t (log of the events by t over the predicted cumulative hazards, Crowson et "
                            "al. 2016; 0 when calibrated in the large), calibration slope at t (Cox, on cloglog "
                            "risk; 1) and O/E at t (Kaplan-Meier 1 - S(t) over the mean risk; 1)"),
                "report": ("the calibration-in-the-large at t (CITL: the log of the events by t over the "
                           "predicted cumulative hazards, Crowson et al. 2016; 0 when the mean risk is right), the "
                           "calibration slope at t (the Cox slope on cloglog risk; 1 when the risks are neither too "
                           "extreme nor too modest) and O/E at t (the Kaplan–Meier risk 1 − S(t) over the mean "
                           "predicted risk; 1)"),
                "pooling": ("O/E at t is pooled as log(O/E) with s.e. Greenwood se of S(t) / (1 - S(t)) (the "
                            "Kaplan-Meier O/E); CITL at t (Crowson et al.'s intercept, log cumulative hazard "
                            "scale) with Breslow's s.e. and the Cox slope on cloglog risk with its Wald s.e.; ")}

    def acceptance_reason(self, key: str) -> str:
        return self.rows.acceptance_reason(key)

    def acceptance_quantity(self, key: str) -> str:
        """With censoring before the horizon the measures at t of the survival evidence, each with its scale (CITL
        is log(O/E) of the cumulative hazard); without, the rows' measures of the outcome 1{T ≤ t}."""
        t = f"t = {fmt(self.survival.horizon)}"
        if not self.censored:
            return f"{self.rows.acceptance_quantity(key)} of 1{{T ≤ t}} at {t}"
        return {"ece_below": f"ECE(t) at {t} (probability units, IPCW)",
                "citl_within": (f"CITL at {t} (log(O/E) of the cumulative hazard: log of the events by t over the "
                                "expected, the Poisson intercept of Crowson et al.)"),
                "slope_within": f"Calibration slope at {t} (Cox coefficient of cloglog(risk))",
                "oe_within": f"O/E at {t} (Kaplan–Meier risk by t over the mean predicted risk, a ratio)"}[key]

    def margin_null_variance(self) -> tuple[float, str]:
        res = self.res
        if self.censored and not self.weighted:  # sigma0_sq = n^2 w V_0 of the IPCW rows
            return float(res.sigma0_sq / (res.n ** 2 * res.bin_volume)), "V_0 of the IPCW rows"
        return self.rows.margin_null_variance()

    def evidence_opening(self) -> str:
        if not self.censored:
            return self.rows.evidence_opening()
        return ("The summary opens with the evidence on calibration at the horizon; the conclusion states "
                "whether (the IPCW test of ECE(t) = 0) and how much (the IPCW interval).")

    def null_text(self) -> str:
        if self.res.null == "asymptotic" and self.censored:
            return "asymptotic (normal limit of T / sqrt(V_0), V_0 estimated from the IPCW rows)"
        return self.rows.null_text()

    def null_name(self) -> str:
        if self.res.null == "asymptotic" and self.censored:  # T of the IPCW outcomes
            return "IPCW asymptotic"
        return self.rows.null_name()

    def asymptotic_name(self) -> str:
        return self.rows.asymptotic_name()

    def notes(self) -> list[str]:
        return self.rows.notes() + self.survival.notes()

    def closing_notes(self) -> list[str]:
        return []  # the estimand and the horizon are in the survival note

    def settings(self, rows: dict) -> dict:
        """The survival rows: the estimand, the censoring before the horizon and the events by it."""
        surv = self.survival
        out = {key: value for key, value in self.rows.settings(rows).items() if key != "Classes (K):"}
        out["Estimand:"] = surv.estimand  # one risk column P(T <= t): no "Classes (K):"
        out["Censored before t:"] = (f"{surv.n_censored} (IPCW, {'Kaplan-Meier' if surv.censoring == 'km' else 'Cox'}"
                                     " censoring model)" if surv.n_censored else "0 (none: binary 1{T <= t})")
        out["Events by t:"] = str(surv.n_events)
        return out

    def to_dict(self) -> dict:
        return {**self.rows.to_dict(), **self.survival.to_dict()}

    def regime_texts(self, d: dict, se: float, role1: str) -> tuple[str, str, str, str, str]:
        law, s0, s1, se1, role = self.rows.regime_texts(d, se, role1)
        if self._unbiased_se():  # the standard error the interval uses, with its own parts' values
            surv = self.survival
            se1 = (f"se = √(σ₁,U² / n + V₀) = {fmt(se)} (σ₁,U² = {fmt(surv.sigma1_sq_unbiased)} from unbiased "
                   f"bin sums of the IPCW rows; V₀ = {fmt(surv.second_order_variance)}, the second-order "
                   "variance of T)")
        return law, s0, s1, se1, role

    def report_prose(self) -> dict:
        return self.rows.report_prose()

    def report_omissions(self, name: str) -> dict:
        return self.rows.report_omissions(name)

    def report_figures(self) -> str:
        rows = self.rows.report_figures()
        return "survival" if rows == "rows" and self.censored else rows

    def substitute_evidence_rows(self, d: dict) -> list | None:
        return self.rows.substitute_evidence_rows(d)

    def report_references(self) -> tuple[str, ...]:
        """With censoring before the horizon: the interval's sources, the IPCW weights (Gerds & Schumacher) and
        those of the survival evidence (Crowson et al.'s intercept and slope, Austin et al.'s flexible curve,
        D'Agostino & Nam's and Demler et al.'s GND with Greenwood's variance, Uno et al.'s AUC with Blanche et
        al.'s standard error), not the binary tests' nor Wilson's interval (the evidence and the reliability
        diagram are those at the horizon); weighted rows keep their own evidence and add the IPCW source;
        without censoring before t the outcome is binary and the rows' references apply."""
        if not self.censored:
            return self.rows.report_references()
        if self.weighted:
            return (*self.rows.report_references(), "gerds")
        return ("sun", "lee", "kuchibhotla", "gerds", "crowson", "austin_harrell", "dagostino", "demler", "greenwood",
                "uno", "blanche")

    def censoring_rows(self) -> list[tuple[str, str]]:
        """The follow-up and censoring of the rows at the horizon: what ``res.survival`` holds, formatted."""
        surv = self.survival
        model = ("Kaplan–Meier of the censoring times" if surv.censoring == "km" else
                 f"Cox model of the censoring on {', '.join(surv.covariates)} (Breslow baseline)")
        follow = (fmt(surv.median_followup, 4) if math.isfinite(surv.median_followup) else
                  "not reached (fewer than half of the rows censored by the end of follow-up)")
        rows = [("Horizon t (the risk is P(T ≤ t))", fmt(surv.horizon)),
                (f"Events at or before t ({surv.event_name} = 1, {surv.time_name} ≤ t)", fmt(surv.n_events)),
                ("Censored before t (outcome at t unknown)", fmt(surv.n_censored)),
                ("Known event-free at t", fmt(surv.n_event_free)),
                ("Median follow-up (reverse Kaplan–Meier)", follow),
                ("Kaplan–Meier risk by t, 1 − S(t)", fmt(surv.km_risk, 4))]
        if surv.n_censored:
            rows += [("Censoring model of the IPCW weights", model),
                     ("Largest weight 1 / G(time−) of an event before t", fmt(surv.max_weight, 4)),
                     ("Standard error", f"{surv.variance}")]
        else:
            rows.append(("Censoring before t", "none: the outcome 1{T ≤ t} is binary and every number is that of "
                                              "the binary analysis"))
        return rows

    def planning_inputs(self) -> dict:
        """The rows' inputs, with the events by the horizon and the observed censored fraction before it."""
        return {**self.rows.planning_inputs(), "events": self.events(),
                "censored_fraction": self.survival.n_censored / self.res.n}
