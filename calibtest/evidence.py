"""Evidence table: every calibration test of a 1-dim target on the same rows, and one conclusion.

A single test can mislead: the single-B interval of :func:`calibtest.calib_ci`
bins at the automatic B, tuned to *estimate* the ECE, and can miss smooth
miscalibration that Hosmer-Lemeshow, the calibration slope or Spiegelhalter's
test see.  :func:`evidence` runs, on the same rows,

* :func:`calibtest.calib_test` -- the multi-scale test with exact size
  (answers *is there miscalibration?*);
* :func:`calibtest.calib_ci` with ``null="conditional"`` at its automatic B --
  the adjusted interval for ECE^2 (answers *how much?*);
* :func:`calibtest.hosmer_lemeshow` with ``validation="external"`` (g = 10, df = g);
* :func:`calibtest.val_prob` -- Spiegelhalter's z test, calibration-in-the-large
  (CITL, test of a0 = 0 by its Wald interval) and the calibration slope (test of
  b = 1 by its Wald interval);

and lays them out as one table (null hypothesis in words, statistic, p-value
or interval, verdict at ``alpha``), followed by a bin-sensitivity table
(``calib_ci(..., n_bins=B, null="conditional")`` for B in 5, 10, 20, 35 below
the automatic B, and the automatic B) and a conclusion.

Conclusion rules (:attr:`EvidenceResult.conclusion`)
-----------------------------------------------------
1. *Whether*: from the multi-scale test (exact size given the predictions).
   It rejects -> "evidence of miscalibration".  It does not reject and no
   other row rejects -> "no evidence of miscalibration" (never "calibrated").
   It does not reject but another row does -> "mixed evidence", naming the
   rows that reject.
2. *How much*: always the adjusted interval for ECE^2 (and for ECE) at the
   automatic B, with its upper bound.
3. Disagreements (each adds one plain-words sentence when it fires;
   :attr:`EvidenceResult.reasons` holds their keys):

   * ``"smooth"``: the interval contains 0 while the multi-scale test rejects,
     and the scale with the largest z is a B below the interval's B -> "the
     miscalibration is smooth and the interval's B is large for n".
   * ``"hl_sparse"``: Hosmer-Lemeshow rejects, the multi-scale test,
     Spiegelhalter, CITL and the slope do not, and some HL group has an
     expected count (events or non-events) below 5 -> "the HL statistic is
     driven by groups with tiny expected counts".
   * ``"spread"``: the slope rejects (its interval excludes 1) while CITL does
     not (its interval contains 0) -> "the slope detects spread (slope < 1:
     over-confidence; > 1: under-confidence), not level".
   * ``"level"``: CITL rejects while the slope does not -> "the predictions
     are off in level (too high or too low on average), not in spread".
   * ``"bins"``: the single-scale verdict changes with B in the
     bin-sensitivity table -> "the single-B verdict depends on the bin count".

   Any remaining disagreement between the rows is reported as a list of the
   rows that reject and those that do not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calibtest._format import fmt, fmt_p
from calibtest._validation import check_alpha, check_missing, resolve_seed
from calibtest.calibration_test import CalibrationTestResult, calib_test
from calibtest.estimation import estimate_in_memory
from calibtest.formula import resolve_env
from calibtest.hosmer_lemeshow import HosmerLemeshowResult, hosmer_lemeshow
from calibtest.inputs import read_rows
from calibtest.results import CalibrationResult
from calibtest.summary import CalibSummary, ResultDisplay, model_text
from calibtest.valprob import ValProbResult, val_prob

__all__ = ["EvidenceResult", "evidence", "SENSITIVITY_BINS", "HL_MIN_EXPECTED"]

#: Bin counts of the bin-sensitivity table (those below the automatic B), then the automatic B.
SENSITIVITY_BINS = (5, 10, 20, 35)

#: Expected count below which an HL group is "tiny" (the chi-squared approximation's usual rule).
HL_MIN_EXPECTED = 5.0

#: Row keys of the evidence table, in order.
ROWS = ("calib_test", "calib_ci", "hosmer_lemeshow", "spiegelhalter", "citl", "slope")


def _verdict(reject: bool, interval: bool = False) -> str:
    if interval:
        return "excludes 0" if reject else "contains 0"
    return "rejects" if reject else "does not reject"


def _iv(lo, hi, digits: int = 4, lower_open: bool = False) -> str:
    """``[lo, hi]``, or ``(0, hi]`` when 0 is excluded but the lower bound reaches it."""
    return f"{'(' if lower_open else '['}{fmt(lo, digits)}, {fmt(hi, digits)}]"


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False, repr=False)
class EvidenceResult(ResultDisplay):
    """All the evidence on the calibration of a 1-dim target, and a conclusion from it.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per test or measure (index: ``calib_test``, ``calib_ci``,
        ``hosmer_lemeshow``, ``spiegelhalter``, ``citl``, ``slope``); columns
        ``name``, ``null`` (the null hypothesis in words), ``statistic``,
        ``pvalue`` (None for intervals), ``lower``, ``upper`` (None for tests
        without an interval), ``reject`` (bool) and ``verdict``.
    sensitivity : pandas.DataFrame
        One row per B: ``n_bins``, ``T``, ``lower``, ``upper`` (the adjusted
        interval for ECE^2), ``pvalue`` (the single-scale conditional test),
        ``reject``; ``sensitivity_flag`` says whether ``reject`` varies.
    sensitivity_flag : bool
    verdict : str
        ``"evidence"``, ``"mixed"`` or ``"no evidence"`` (rule 1 of :mod:`calibtest.evidence`).
    conclusion : str
        The conclusion in plain words.
    reasons : tuple of str
        Keys of the disagreement rules that fired (``"smooth"``, ``"hl_sparse"``,
        ``"spread"``, ``"level"``, ``"bins"``).
    alpha : float
    n, n_classes, mode, formula, y_name, prob_names, n_dropped
        The data (as in :class:`~calibtest.CalibrationResult`).
    seed : int or str
        Seed of the Monte Carlo draws (``rng=``), ``"Generator"`` for a Generator.
    test, interval, hl, valprob
        The underlying results of :func:`calib_test`, :func:`calib_ci`,
        :func:`hosmer_lemeshow` and :func:`val_prob`.
    """

    table: pd.DataFrame = field(repr=False)
    sensitivity: pd.DataFrame = field(repr=False)
    sensitivity_flag: bool
    verdict: str
    conclusion: str
    reasons: tuple
    alpha: float
    n: int
    n_classes: int | None
    mode: str
    seed: int | str | None
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    test: CalibrationTestResult | None = field(default=None, repr=False)
    interval: CalibrationResult | None = field(default=None, repr=False)
    hl: HosmerLemeshowResult | None = field(default=None, repr=False)
    valprob: ValProbResult | None = field(default=None, repr=False)

    def summary(self, alpha: float | None = None) -> CalibSummary:
        """The evidence table, the bin-sensitivity table and the conclusion (at the stored alpha).

        The verdicts are those at the stored ``alpha``; another ``alpha``
        raises ``ValueError`` (call :func:`evidence` again).
        """
        if alpha is not None and check_alpha(alpha) != self.alpha:
            raise ValueError(f"this evidence table was computed at alpha = {self.alpha:g}; "
                             "call calibtest.evidence(..., alpha=...) for another level")
        return self._summary(None)

    def _summary(self, alpha):
        return _build_summary(self)

    def _dict(self) -> dict:
        out = {"verdict": self.verdict, "conclusion": self.conclusion, "reasons": list(self.reasons),
               "alpha": self.alpha, "n": self.n, "n_classes": self.n_classes, "mode": self.mode,
               "seed": None if self.seed is None else str(self.seed), "formula": self.formula,
               "y_name": self.y_name, "prob_names": list(self.prob_names), "n_dropped": self.n_dropped,
               "sensitivity_flag": self.sensitivity_flag, "method": "evidence"}
        for key, row in self.table.iterrows():
            for col in ("statistic", "pvalue", "lower", "upper", "reject", "verdict"):
                out[f"{key}_{col}"] = row[col]
        for col in self.sensitivity.columns:
            out[f"sensitivity_{col}"] = self.sensitivity[col].tolist()
        return out

    def _repr_parts(self) -> list[str]:
        t = self.table.loc["calib_test"]
        ci = self.table.loc["calib_ci"]
        return [f"mode={self.mode} n={self.n}: {self.verdict}", f"calib_test p={t['pvalue']:.4g}",
                f"ECE^2 in [{ci['lower']:.4g}, {ci['upper']:.4g}]",
                f"rejecting={sum(bool(r) for r in self.table['reject'])}/{len(self.table)}"]


# --------------------------------------------------------------------------- rules
def _hl_sparse(hl: HosmerLemeshowResult) -> tuple[int, float]:
    """(groups with an expected count of events or non-events below 5, their share of the HL statistic)."""
    t = hl.table
    small = np.minimum(t["expected"].to_numpy(float), t["n"].to_numpy(float) - t["expected"].to_numpy(float))
    mask = small < HL_MIN_EXPECTED
    share = float(t["chi2"].to_numpy(float)[mask].sum() / hl.statistic) if hl.statistic > 0 else 0.0
    return int(mask.sum()), share


def _conclude(table: pd.DataFrame, sens: pd.DataFrame, flag: bool, test, ci, hl, vp, alpha: float):
    """(verdict, conclusion text, reasons) from all rows (see the module docstring)."""
    rej = {k: bool(table.loc[k, "reject"]) for k in ROWS}
    names = {k: table.loc[k, "name"] for k in ROWS}
    others = [k for k in ROWS if k != "calib_test" and rej[k]]
    sentences, reasons = [], []
    p_test = fmt_p(test.pvalue, 3)
    if rej["calib_test"]:
        verdict = "evidence"
        sentences.append(f"Evidence of miscalibration at level {alpha:g}: the multi-scale test rejects "
                         f"(p = {p_test}).")
    elif others:
        verdict = "mixed"
        sentences.append(f"Mixed evidence at level {alpha:g}: the multi-scale test does not reject "
                         f"(p = {p_test}), but {', '.join(names[k] for k in others)} "
                         f"{'rejects' if len(others) == 1 else 'reject'}.")
    else:
        verdict = "no evidence"
        sentences.append(f"No evidence of miscalibration at level {alpha:g}: no test rejects (multi-scale "
                         f"test p = {p_test}); this does not show that the model is calibrated.")
    level = f"{100 * (1 - alpha):g}%"
    iv = ci.conf_int()
    sentences.append(f"How much: the {level} interval for ECE^2 at B = {ci.n_bins} is "
                     f"{_iv(iv.lower, iv.upper, 4, iv.lower_open)} (ECE "
                     f"{_iv(math.sqrt(iv.lower), math.sqrt(iv.upper), 3, iv.lower_open)}); "
                     f"ECE^2 is at most {fmt(iv.upper, 4)} (ECE at most {fmt(math.sqrt(iv.upper), 3)}).")
    # -- disagreement rules
    sc = test.scales
    best = int(np.argmax(sc["z"].to_numpy()))
    b_best = int(sc["n_bins"].iloc[best])
    if rej["calib_test"] and not rej["calib_ci"] and b_best < ci.n_bins:
        reasons.append("smooth")
        sentences.append(f"The interval contains 0 while the multi-scale test rejects: the miscalibration is "
                         f"smooth and the interval's B = {ci.n_bins} is large for n = {ci.n} (the test's "
                         f"strongest scale is B = {b_best}, z = {fmt(sc['z'].iloc[best], 3)}, per-scale "
                         f"p = {fmt_p(sc['pvalue'].iloc[best], 3)}).")
    n_small, share = _hl_sparse(hl)
    if (rej["hosmer_lemeshow"] and n_small
            and not any(rej[k] for k in ("calib_test", "spiegelhalter", "citl", "slope"))):
        reasons.append("hl_sparse")
        sentences.append(f"Hosmer-Lemeshow rejects but the other tests do not: the HL statistic is driven by "
                         f"groups with tiny expected counts ({n_small} of {hl.groups} groups expect fewer "
                         f"than {HL_MIN_EXPECTED:g} events or non-events and give {100 * share:.0f}% of "
                         f"HL = {fmt(hl.statistic, 4)}); its chi-squared reference is unreliable there.")
    if rej["slope"] and not rej["citl"]:
        reasons.append("spread")
        kind = "over-confidence" if vp.slope < 1 else "under-confidence"
        sentences.append(f"The slope rejects but CITL does not: the slope detects spread ({kind}: slope "
                         f"{fmt(vp.slope, 3)}; predictions too {'extreme' if vp.slope < 1 else 'timid'}), "
                         f"not level.")
    if rej["citl"] and not rej["slope"]:
        reasons.append("level")
        sentences.append(f"CITL rejects but the slope does not: the predictions are off in level (too "
                         f"{'low' if vp.citl > 0 else 'high'} on average, CITL = {fmt(vp.citl, 3)}), "
                         f"not in spread.")
    if flag:
        reasons.append("bins")
        at = sens.loc[sens["reject"], "n_bins"].tolist()
        sentences.append(f"The single-B verdict depends on the bin count: the single-scale test rejects at "
                         f"B = {', '.join(map(str, at))} only (bin-sensitivity table).")
    if len(set(rej.values())) > 1:
        yes = [names[k] for k in ROWS if rej[k]]
        no = [names[k] for k in ROWS if not rej[k]]
        sentences.append(f"Rejecting or excluding the null: {', '.join(yes)}; not: {', '.join(no)}.")
    return verdict, " ".join(sentences), tuple(reasons)


# --------------------------------------------------------------------------- summary
def _build_summary(res: EvidenceResult) -> CalibSummary:
    smry = CalibSummary()
    smry.add_title("Evidence on calibration: all tests on the same rows")
    smry.add_settings({"Model:": model_text(res.formula, res.y_name, res.prob_names),
                       "Mode:": res.mode, "No. observations:": str(res.n),
                       "Classes (K):": "2" if res.n_classes is None else str(res.n_classes),
                       "Alpha:": fmt(res.alpha),
                       "Seed:": "Generator" if res.seed == "Generator" else fmt(res.seed),
                       "Verdict:": res.verdict})
    t = res.table

    def p_or_iv(key):
        row = t.loc[key]
        if row["pvalue"] is not None and not (isinstance(row["pvalue"], float) and math.isnan(row["pvalue"])):
            return "p = " + fmt_p(row["pvalue"], 3)
        return _iv(row["lower"], row["upper"], 3, key == "calib_ci" and res.interval.conf_int().lower_open)

    shown = pd.DataFrame({"statistic": [t.loc[k, "statistic"] for k in ROWS],
                          "p / interval": [p_or_iv(k) for k in ROWS],
                          "verdict": [t.loc[k, "verdict"] for k in ROWS]},
                         index=[t.loc[k, "name"] for k in ROWS], dtype=object)
    smry.add_table(shown, {"statistic": 4})
    s = res.sensitivity
    sens = pd.DataFrame({"T": s["T"].tolist(),
                         "interval ECE^2": [_iv(lo, hi, 3, op)
                                            for lo, hi, op in zip(s["lower"], s["upper"], s["lower_open"])],
                         "p-value": s["pvalue"].tolist(),
                         "verdict": ["rejects" if r else "does not reject" for r in s["reject"]]},
                        index=[f"B = {b}" + (" (auto)" if b == res.interval.n_bins else "")
                               for b in s["n_bins"]], dtype=object)
    smry.add_table(sens, {"T": 4, "p-value": fmt_p})
    notes = [f"Conclusion: {res.conclusion}"]
    notes += [f"H0 of each row: {t.loc[k, 'name']}: {t.loc[k, 'null']}." for k in ROWS]
    notes.append("Bin sensitivity: calib_ci(null='conditional') at each B; T is the debiased ECE^2 "
                 "estimate, the interval the adjusted one, the p-value the single-scale conditional test."
                 + (" The verdict changes with B." if res.sensitivity_flag else " Same verdict at every B."))
    if res.n_dropped:
        notes.append(f"{res.n_dropped} rows with missing values were dropped (missing='drop').")
    smry.add_notes(notes)
    return smry


# --------------------------------------------------------------------------- public function
def _sensitivity_bins(b_auto: int) -> tuple[int, ...]:
    return tuple(b for b in SENSITIVITY_BINS if b < b_auto) + (b_auto,)


def evidence(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None,
             alpha: float = 0.05, rng=None, missing: str = "raise", eval_env=0) -> EvidenceResult:
    """Every calibration test of a binary or top-1 model on the same rows, and a conclusion from all of them.

    Runs :func:`calibtest.calib_test` (multi-scale, exact size),
    :func:`calibtest.calib_ci` (``null="conditional"``, automatic B),
    :func:`calibtest.hosmer_lemeshow` (g = 10, ``validation="external"``,
    df = g) and :func:`calibtest.val_prob` (Spiegelhalter's z, CITL and the
    calibration slope with their Wald intervals), and the single-scale test
    and interval at B = 5, 10, 20, 35 (those below the automatic B) and the
    automatic B.  The rules that turn the rows into a conclusion are in
    :mod:`calibtest.evidence`: the multi-scale test answers *whether* there is
    miscalibration, the interval *how much*; disagreements are explained.

    Parameters
    ----------
    formula, data, y, probs, n_classes, missing, eval_env
        As in :func:`calibtest.calib_ci`, for one probability column: binary
        (``"y ~ p"``) or top-1 (``"correct ~ confidence"`` with ``n_classes``).
        For top-1, val_prob and Hosmer-Lemeshow treat (correct, confidence) as
        a binary outcome and its probability.
    alpha : float
        Level of every test and interval.
    rng : None, int or numpy.random.Generator
        Seed of the Monte Carlo draws (multi-scale test; conditional null
        when it falls back to Monte Carlo).  An int s is passed as ``rng=s``
        to every call, so direct calls with ``rng=s`` give the same numbers.

    Returns
    -------
    EvidenceResult

    Examples
    --------
    >>> ev = ct.evidence("y ~ p", data=df, rng=1)     # doctest: +SKIP
    >>> print(ev.summary())                           # doctest: +SKIP
    """
    alpha = check_alpha(alpha)
    check_missing(missing)
    env = resolve_env(eval_env)
    gen, seed = resolve_seed(rng)
    sub_rng = gen if seed == "Generator" else seed
    rows = read_rows(formula, data, y, probs, env, missing)
    p = rows.probs
    if p.ndim == 2:
        if p.shape[1] != 1:
            raise ValueError("evidence needs one probability column (binary, or top-1 with n_classes); "
                             f"got {p.shape[1]} columns")
        p = p[:, 0]
    yv = rows.y
    kw = {"y": yv, "probs": p, "n_classes": n_classes}

    def interval(n_bins="auto"):
        """calib_ci(y=, probs=, n_classes=, n_bins=, alpha=, null="conditional", rng=) on these rows."""
        options = {"n_classes": n_classes, "n_bins": n_bins, "alpha": alpha, "null": "conditional"}
        return estimate_in_memory(None, None, yv, p, env=env, n_classes=n_classes, n_bins=n_bins, alpha=alpha,
                                  null="conditional", rng=sub_rng, call_options=options)

    test = calib_test(**kw, alpha=alpha, rng=sub_rng)
    ci = interval()
    hl = hosmer_lemeshow(**kw, groups=10, validation="external")
    vp = val_prob(y=np.asarray(yv, dtype=float), probs=p, alpha=alpha)

    iv = ci.conf_int()
    cis = vp.conf_int(alpha)
    s_lo, s_hi = cis.loc["slope", "lower"], cis.loc["slope", "upper"]
    c_lo, c_hi = cis.loc["citl", "lower"], cis.loc["citl", "upper"]
    level = f"{100 * (1 - alpha):g}%"
    records = {
        "calib_test": ("multi-scale test", "E[Y | p] = p (calibrated), at every B of the grid "
                       f"{list(test.n_bins)}", test.statistic, test.pvalue, None, None, test.reject),
        "calib_ci": (f"ECE^2 {level} CI, B = {ci.n_bins}", f"ECE^2 = 0; the interval bounds the binned ECE^2 "
                     f"at B = {ci.n_bins} (statistic: debiased T)", ci.estimate, None, iv.lower, iv.upper,
                     not iv.contains_zero),
        "hosmer_lemeshow": ("Hosmer-Lemeshow", f"observed = expected events in each of the {hl.groups} "
                            f"groups (chi2, df = {hl.df})", hl.statistic, hl.pvalue, None, None,
                            hl.pvalue <= alpha),
        "spiegelhalter": ("Spiegelhalter z", "the squared errors (y - p)^2 have the mean implied by p "
                          "(standard normal z)", vp.spiegelhalter_z, vp.spiegelhalter_p, None, None,
                          vp.spiegelhalter_p <= alpha),
        "citl": (f"CITL {level} CI", "calibration-in-the-large a0 = 0 in logit P(y=1) = a0 + logit(p)",
                 vp.citl, None, c_lo, c_hi, not (c_lo <= 0.0 <= c_hi)),
        "slope": (f"slope {level} CI", "calibration slope b = 1 in logit P(y=1) = a + b logit(p)",
                  vp.slope, None, s_lo, s_hi, not (s_lo <= 1.0 <= s_hi)),
    }
    table = pd.DataFrame(
        [{"name": nm, "null": null, "statistic": float(stat), "pvalue": None if pv is None else float(pv),
          "lower": None if lo is None else float(lo), "upper": None if hi is None else float(hi),
          "reject": bool(r),
          "verdict": _verdict(bool(r), interval=key == "calib_ci")}  # CITL, slope: tests by their intervals
         for key, (nm, null, stat, pv, lo, hi, r) in records.items()], index=list(ROWS), dtype=object)
    sens_rows = []
    for b in _sensitivity_bins(ci.n_bins):
        r = ci if b == ci.n_bins else interval(b)
        civ = r.conf_int()
        sens_rows.append({"n_bins": int(b), "T": float(r.estimate), "lower": float(civ.lower),
                          "upper": float(civ.upper), "lower_open": bool(civ.lower_open),
                          "pvalue": float(r.null_pvalue),
                          "reject": bool(r.null_pvalue <= alpha)})
    sens = pd.DataFrame(sens_rows)
    flag = bool(sens["reject"].nunique() > 1)
    verdict, conclusion, reasons = _conclude(table, sens, flag, test, ci, hl, vp, alpha)
    return EvidenceResult(
        table=table, sensitivity=sens, sensitivity_flag=flag, verdict=verdict, conclusion=conclusion,
        reasons=reasons, alpha=alpha, n=ci.n, n_classes=ci.n_classes, mode=ci.mode, seed=seed,
        formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names), n_dropped=rows.n_dropped,
        test=test, interval=ci, hl=hl, valprob=vp)
