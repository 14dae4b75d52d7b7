"""Every calibration test on the same rows, and one conclusion: :func:`evidence`.

:func:`evidence` computes the adjusted interval of :func:`calibtest.calib_ci`
on the rows and builds the evidence from that result
(:func:`calibtest.verdict.build_evidence`, which
:meth:`calibtest.CalibrationResult.evidence` also calls): the multi-scale test
of :func:`calibtest.calib_test`, the interval, Hosmer-Lemeshow (df = g,
external validation), Spiegelhalter's z, calibration-in-the-large and the
calibration slope (binary and top-1), a bin-sensitivity table and a
conclusion that states whether (the multi-scale test) and how much (the
interval) and explains disagreements.  The rules are in
:mod:`calibtest.verdict`.
"""
from __future__ import annotations

from calibtest._validation import DEFAULT_DRAWS, check_alpha, check_null, is_integer, resolve_seed
from calibtest.estimation import estimate_in_memory
from calibtest.formula import resolve_env
from calibtest.options import check_options
from calibtest.inputs import is_out_of_core
from calibtest.verdict import HL_MIN_EXPECTED, ROWS, SENSITIVITY_BINS, EvidenceResult, build_evidence

__all__ = ["EvidenceResult", "evidence", "SENSITIVITY_BINS", "HL_MIN_EXPECTED", "ROWS"]


def evidence(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None, k=None,
             n_bins="auto", alpha: float = 0.05, null: str = "conditional", rng=None, missing: str = "raise",
             eval_env=0) -> EvidenceResult:
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
    (rules in :mod:`calibtest.verdict`).

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

    Returns
    -------
    EvidenceResult

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
    res = estimate_in_memory(formula, data, y, probs, env=env, n_classes=n_classes, k=k, n_bins=n_bins,
                             alpha=alpha, missing=missing, null=null, rng=sub_rng, call_options=options)
    return build_evidence(res, alpha, rng=sub_rng)
