"""Every calibration test on the same rows, and one conclusion: :func:`evidence` (rows in; the table and
its conclusion are built from the result by :mod:`calibtest.evidence_table`).

:func:`evidence` computes the adjusted interval of :func:`calibtest.calib_ci`
on the rows and builds the evidence from that result
(:func:`calibtest.evidence_table.build_evidence`, which
:meth:`calibtest.CalibrationResult.evidence` also calls): the multi-scale test
of :func:`calibtest.calib_test`, the interval, Hosmer-Lemeshow (df = g,
external validation), Spiegelhalter's z, calibration-in-the-large and the
calibration slope (binary and top-1), a bin-sensitivity table and a
conclusion that states whether (the multi-scale test) and how much (the
interval) and explains disagreements.  The rules are in
:mod:`calibtest.evidence_table`.
"""
from __future__ import annotations

from calibtest._validation import DEFAULT_DRAWS, check_alpha, check_null, is_integer, resolve_seed
from calibtest.core.partition import partition_rows
from calibtest.estimation import estimate_in_memory, estimate_rows
from calibtest.formula import resolve_env
from calibtest.grouping import (GroupedResult, analyse_groups, by_names, group_labels, group_rng, grouped_result,
                                grouping_of, label_text)
from calibtest.inputs import is_out_of_core, prepare_input
from calibtest.options import check_options
from calibtest.evidence_table import HL_MIN_EXPECTED, ROWS, SENSITIVITY_BINS, EvidenceResult, build_evidence

__all__ = ["EvidenceResult", "evidence", "SENSITIVITY_BINS", "HL_MIN_EXPECTED", "ROWS"]


def evidence(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None, k=None,
             n_bins="auto", alpha: float = 0.05, null: str = "conditional", rng=None, missing: str = "raise",
             eval_env=0, by=None) -> EvidenceResult | GroupedResult:
    """Every calibration test of a model on the same rows, and a conclusion from all of them.

    Equivalent to ``calib_ci(..., null=null, rng=rng).evidence()``: the
    interval for ECE^2 (at ``n_bins``, with ``null``), the multi-scale test of
    :func:`calibtest.calib_test` (``rng=`` seeds its label draws), and for one
    probability column (binary, or top-1 with ``n_classes``)
    :func:`calibtest.hosmer_lemeshow` (g = 10, ``validation="external"``,
    df = g) and :func:`calibtest.val_prob` (Spiegelhalter's z, CITL and the
    calibration slope with their Wald intervals); then the single-scale test
    and interval at B = 5, 10, 20, 35 (those below the interval's B) and the
    interval's B.  The multi-scale test answers *whether* there is
    miscalibration, the interval *how much*; disagreements are explained
    (rules in :mod:`calibtest.evidence_table`).

    Parameters
    ----------
    formula, data, y, probs, n_classes, k, n_bins, missing, eval_env
        As in :func:`calibtest.calib_ci`; the rows must be in memory.  For
        top-1, val_prob and Hosmer-Lemeshow treat (correct, confidence) as a
        binary outcome and its probability; for top-k (k >= 2) and full
        calibration the evidence is the multi-scale test and the interval.
    alpha : float
        Level of every test and interval.
    null : {"conditional", "asymptotic", "monte-carlo"}
        The null of the interval's test (default ``"conditional"``: its size
        holds in finite samples).
    rng : None, int or numpy.random.Generator
        Seed of the Monte Carlo draws (multi-scale test; the interval's null
        when it draws).  An int s is passed as ``rng=s`` to every part, so
        direct calls with ``rng=s`` give the same numbers.
    by : str, list of str or array_like, optional
        Subgroups (a column of ``data``, several columns crossed, or one label
        per row): the evidence of each group's rows (after ``missing="drop"``)
        in a :class:`~calibtest.grouping.GroupedResult`: ``groups`` (label ->
        :class:`EvidenceResult`), ``to_frame()`` (indexed by the labels:
        ``n``, ``ece`` with ``ece_ci_lower``/``ece_ci_upper`` (the adjusted
        interval), ``pvalue`` (the multi-scale test), ``pvalue_holm``,
        ``verdict``, ``note``), ``summary()``, ``global_pvalue`` (Bonferroni
        min-p of the multi-scale tests) and ``plot_forest()``.  Group number g
        (in the table's order, empty groups counted) uses
        ``rng=numpy.random.default_rng([s, g])``, s the seed; a group with a
        single outcome class is listed, not analysed.

    Returns
    -------
    EvidenceResult
        Or :class:`~calibtest.grouping.GroupedResult` with ``by=``.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for
           the l2 Expected Calibration Error", arXiv:2408.08998, 2024.

    Examples
    --------
    >>> ev = ct.evidence("y ~ p", data=df, rng=1)     # doctest: +SKIP
    >>> print(ev.summary())                           # doctest: +SKIP
    """
    alpha = check_alpha(alpha)
    check_null(null, DEFAULT_DRAWS, rng)
    check_options(k=k, n_classes=n_classes, missing=missing)
    if is_out_of_core(data):
        raise TypeError("evidence needs the rows in memory (the multi-scale test and val_prob use every row): a "
                        "file path or Dask DataFrame is not supported; load the columns into a pandas DataFrame")
    env = resolve_env(eval_env)
    gen, seed = resolve_seed(rng)
    sub_rng = gen if seed == "Generator" else seed
    options = {"n_classes": n_classes, "k": k, "n_bins": n_bins, "alpha": alpha,
               "missing": missing if missing != "raise" else None, "null": null,
               "rng": sub_rng if is_integer(sub_rng) else None}
    if by is not None:
        return _evidence_by(formula, data, y, probs, by=by, env=env, n_classes=n_classes, k=k, n_bins=n_bins,
                            alpha=alpha, missing=missing, null=null, rng=rng, options=options)
    res = estimate_in_memory(formula, data, y, probs, env=env, n_classes=n_classes, k=k, n_bins=n_bins,
                             alpha=alpha, missing=missing, null=null, rng=sub_rng, call_options=options)
    return build_evidence(res, alpha, rng=sub_rng)


def _evidence_by(formula, data, y, probs, *, by, env, n_classes, k, n_bins, alpha, missing, null, rng,
                 options) -> GroupedResult:
    """:func:`evidence` with ``by=``: the interval and its evidence on each group's rows (:mod:`calibtest.grouping`)."""
    gen, seed = resolve_seed(rng)
    options = {**options, "rng": seed if is_integer(seed) else None, "by": by if by_names(by) else "<array>"}
    prepared = prepare_input("evidence", formula, data, y, probs, eval_env=env, missing=missing,
                             n_classes=n_classes, k=k, options=options, by=by, group_labels=group_labels)
    rows, target, call = prepared.rows, prepared.target, prepared.call
    grouping = grouping_of(prepared.group_names, prepared.group_values)
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))

    def analyse(g, label, idx, sub):
        group_gen = group_rng(gen, seed, g)
        res = estimate_rows(sub, partition_rows(sub, n_bins), alpha=alpha, null=null, rng=group_gen,
                            call=call.with_options(group=label_text(grouping.names, label)), **bookkeeping)
        return build_evidence(res, alpha, rng=group_gen)

    def row(ev):
        ci = ev.interval.conf_int(scale="ece")
        return {"ece": ev.interval.ece, "ece_ci_lower": ci.lower, "ece_ci_upper": ci.upper,
                "pvalue": ev.test.pvalue, "verdict": ev.verdict}

    groups, reasons = analyse_groups(grouping, target, analyse)
    return grouped_result(grouping, target, groups, reasons, kind="evidence", row=row,
                          columns=["ece", "ece_ci_lower", "ece_ci_upper", "pvalue", "verdict"], alpha=alpha,
                          seed=seed, n_dropped=rows.n_dropped, call_record=call, **bookkeeping)
