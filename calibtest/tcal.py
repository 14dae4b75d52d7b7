"""The T-Cal test of calibration with a consistency-resampling threshold.

T-Cal (Lee, Huang, Hassani & Dobriban, "T-Cal: an optimal test for the
calibration of predictive models", JMLR 2023) tests H0: the model is
calibrated by comparing a debiased binned estimate of ECE^2 with a threshold
obtained by *consistency resampling* (their Sec. 4.1): draw the predictions
Z*_1..Z*_n with replacement from the observed ones, draw each label from its
own prediction, Y* ~ Categorical(Z*) (so the resampled model is calibrated by
construction), recompute the statistic, and repeat.  The statistic here is the
paper's debiased T (Sun, Chaudhari, Barnett & Dobriban, eq.
(debiased_estimator)),

    T = (1/n) sum_{bins, c_b >= 2} (||S_b||^2 - Q_b) / (c_b - 1),

on exactly the bins of :func:`calibtest.calib_ci`, so ``statistic`` equals
``calib_ci(...).estimate``.  (T-Cal's own statistic divides by c_b instead of
c_b - 1; either gives a valid resampling test, and T has the smaller bias.)

The labels are drawn for any target: with the binned vector z (d coordinates:
p; the top-1 confidence; the sorted top-k vector; the full probability vector)
the label is class j with probability z_j, or "none of them" with probability
1 - sum z (no mass in full mode), and U* = onehot - z*.

Monte Carlo decision (R draws T*_1..T*_R): p-value = (1 + #{T*_r >= T}) / (R + 1);
threshold = the (R - j)-th smallest T*_r with j = floor(alpha (R + 1)) - 1 (infinite
when j < 0); T > threshold if and only if p-value <= alpha.

The adaptive test (T-Cal, Sec. 4.2) runs the test at the dyadic bin counts
B = 2, 4, ..., 2^L, L = max(1, floor((2/d) log2(n / sqrt(log n)))), each at level
alpha / L (Bonferroni), and rejects when any scale rejects; its p-value is
min(1, L * min_l p_l).  All scales share the same resampled data sets.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .binning import cube_indices, group_keys
from .inputs import check_count, check_seed
from .intervals import check_alpha
from .resampling import BLOCK_ELEMENTS, multiset_statistics
from .stats import bin_sums, debiased_statistic

__all__ = ["TCalCore", "TCalResult", "tcal_statistic_threshold", "tcal_test", "adaptive_scales", "row_bins"]



# --------------------------------------------------------------------------- array core
@dataclass(frozen=True, eq=False)
class TCalCore:
    """Per-scale output of :func:`tcal_statistic_threshold` (arrays of length L = number of scales).

    Attributes
    ----------
    statistic : ndarray, shape (L,)
        Debiased T on the observed data at each scale.
    threshold : ndarray, shape (L,)
        Monte Carlo threshold at the given level (``inf`` if R is too small).
    pvalue : ndarray, shape (L,)
        Monte Carlo p-value (1 + #{T* >= T}) / (R + 1).
    null_draws : ndarray, shape (L, R)
        The resampled statistics T*.
    """

    statistic: np.ndarray
    threshold: np.ndarray
    pvalue: np.ndarray
    null_draws: np.ndarray = field(repr=False)


def _as_rng(rng) -> np.random.Generator:
    rng = check_seed(rng)
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _category_probs(z: np.ndarray, full: bool) -> np.ndarray:
    """Label distribution of each row: classes 1..d with probability z_j, plus "none" unless ``full``.

    Rows are renormalised to sum to 1 (they do within ``ROW_SUM_TOL``); the
    "none" mass 1 - sum z is clipped at 0.
    """
    p = z if full else np.column_stack([z, np.maximum(1.0 - z.sum(axis=1), 0.0)])
    return p / p.sum(axis=1, keepdims=True)


def _alias_tables(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias tables of the categorical rows of ``p`` (n, c), vectorised over rows.

    Drawing J uniform on 0..c-1 and V ~ U(0, 1), the label is J if V < prob[J]
    and alias[J] otherwise; label l then has probability
    (prob[l] + sum_{j: alias[j] = l} (1 - prob[j])) / c = p[l].  Each of the c - 1
    steps pairs the smallest remaining scaled mass (<= 1) with the largest (>= 1).
    Returns ``prob`` and ``alias`` flattened row by row (entry i * c + j).
    """
    n, c = p.shape
    scaled = p * c
    prob = np.ones((n, c))
    alias = np.tile(np.arange(c), (n, 1))
    active = np.ones((n, c), dtype=bool)
    rows = np.arange(n)
    for _ in range(c - 1):  # loop over the c categories, vectorised over rows
        small = np.where(active, scaled, np.inf).argmin(axis=1)
        large = np.where(active, scaled, -np.inf).argmax(axis=1)
        prob[rows, small] = scaled[rows, small]
        alias[rows, small] = large
        scaled[rows, large] -= 1.0 - scaled[rows, small]
        active[rows, small] = False
    return prob.ravel(), alias.ravel()


def _helmert(d: int) -> np.ndarray:
    """Orthonormal basis (d, d - 1) of the vectors whose coordinates sum to zero (Helmert contrasts)."""
    h = np.zeros((d, d - 1))
    for j in range(1, d):  # loop over the d - 1 basis vectors
        h[:j, j - 1] = 1.0 / math.sqrt(j * (j + 1))
        h[j, j - 1] = -j / math.sqrt(j * (j + 1))
    return h


@dataclass(frozen=True, eq=False)
class _PairTables:
    """Everything a consistency resample needs, per (row, label) pair p = row * c + label.

    Attributes
    ----------
    prob, alias : ndarray, shape (n * c,)
        Alias tables: pair p is kept with probability prob[p], else replaced by alias[p].
    cols : tuple of ndarray, shape (n * c,)
        Coordinates of U* = onehot(label) - z_row; in full mode expressed in an
        orthonormal basis of the sum-zero hyperplane (K - 1 coordinates, the
        same norms and inner products since U* sums to 0).
    sq : ndarray, shape (n * c,)
        ||U*||^2 in the same coordinates.
    c : int
        Categories per row (d + 1 with "none", or K in full mode).
    bins : tuple of ndarray, shape (n * c,)
        Bin number of each pair at each scale: a copy keeps its row's bin.
    sizes : tuple of int
        Number of bins m at each scale.
    """

    prob: np.ndarray
    alias: np.ndarray
    cols: tuple
    sq: np.ndarray
    c: int
    bins: tuple
    sizes: tuple


def _pair_tables(z: np.ndarray, full: bool, bins, sizes) -> _PairTables:
    """Alias tables, U* coordinates and bins of every (row, label) pair (``bins``: per scale, per row)."""
    p = _category_probs(z, full)
    n, c = p.shape
    prob, alias = _alias_tables(p)
    alias_pair = np.repeat(np.arange(n) * c, c) + alias
    d = z.shape[1]
    onehot = np.vstack([np.eye(d), np.zeros((1, d))])[:c] if not full else np.eye(d)
    u = (onehot[None, :, :] - z[:, None, :]).reshape(n * c, d)
    if full and d > 1:
        u = u @ _helmert(d)
    cols = tuple(np.ascontiguousarray(u[:, j]) for j in range(u.shape[1]))
    pair_bins = [np.repeat(np.asarray(b, dtype=np.intp), c) for b in bins]  # loop over the few scales
    return _PairTables(prob=prob, alias=alias_pair, cols=cols, sq=np.einsum("ij,ij->i", u, u), c=c,
                       bins=tuple(pair_bins), sizes=tuple(sizes))


def _draw_pairs(gen: np.random.Generator, size: int, n: int, tables: _PairTables) -> np.ndarray:
    """One block of consistency resamples as (row, label) pair numbers, shape (size, n).

    One uniform u per copy gives both the row and the label: x = u * n * c,
    f = floor(x) is a uniform (row, column) cell of the alias table and
    V = x - f its uniform coin (exact up to a relative error n c / 2^53); the
    pair is f if V < prob[f], else alias[f].  Copy r of a block always uses
    the r-th run of n doubles of the stream, so the draws do not depend on the
    block size.
    """
    x = gen.random((size, n))
    x *= n * tables.c
    f = x.astype(np.intp)
    x -= f
    return np.where(x < tables.prob[f], f, tables.alias[f])


def _pair_rows(pairs: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and label of pair numbers (the inverse of p = row * c + label)."""
    return np.divmod(pairs, c)


def _block_statistics(pairs: np.ndarray, tables: _PairTables) -> np.ndarray:
    """Debiased T of each resampled data set in a block, at each scale: shape (L, D).

    Parameters
    ----------
    pairs : ndarray of int, shape (D, n)
        (row, label) pair number of each copy (from :func:`_draw_pairs`).
    tables : _PairTables
        With the bin of every pair at each scale.

    Notes
    -----
    A copy keeps its row's bin, so pair p = row * c + label lies in bin
    bins[row]; :func:`calibtest.resampling.multiset_statistics` then gives
    T = (1/n) sum_{c_b >= 2} (||S_b||^2 - Q_b) / (c_b - 1) of every data set with
    one key and d + 2 bincounts per scale.  No loop over data sets, rows or bins.
    """
    return multiset_statistics(tables.bins, tables.sizes, tables.cols, tables.sq, pairs)


def _mc_decision(statistic: np.ndarray, draws: np.ndarray, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Threshold and p-value of the Monte Carlo test, per scale (rows of ``draws``)."""
    L, R = draws.shape
    alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (L,))
    pvalue = (1.0 + (draws >= statistic[:, None]).sum(axis=1)) / (R + 1.0)
    j = np.floor(alpha * (R + 1) + 1e-9).astype(np.int64) - 1
    ordered = np.sort(draws, axis=1)
    threshold = np.where(j >= 0, ordered[np.arange(L), np.clip(R - 1 - j, 0, R - 1)], np.inf)
    return threshold, pvalue


def tcal_statistic_threshold(z, u, bins, *, alpha=0.05, n_draws: int = 1000, rng=None,
                             full: bool = False, block_size: int | None = None) -> TCalCore:
    """Debiased statistic and consistency-resampling threshold (array-level T-Cal core).

    Parameters
    ----------
    z : ndarray, shape (n, d)
        Binned prediction vector of each row: p (binary), the top-1 confidence,
        the sorted top-k vector, or the full probability vector (``full=True``).
        A resampled label is class j with probability z_j, otherwise "none".
    u : ndarray, shape (n, d)
        Observed U = Y - Z (gives the observed statistic).
    bins : ndarray of int, shape (n,) or (L, n)
        Bin number (0..m-1) of each row, at one or at L scales.  Bins are a
        function of z, so a resampled row keeps its bin.
    alpha : float or array_like of shape (L,)
        Level of each scale's test (pass alpha / L for a Bonferroni split).
    n_draws : int
        Monte Carlo resamples R.
    rng : None, int or numpy.random.Generator
        Seed or generator; the same seed gives the same output.
    full : bool
        ``z`` rows are complete probability vectors (no "none" outcome; rows
        are renormalised to sum to 1 for the label draws).
    block_size : int, optional
        Resamples processed together (default: about 2^15 / n); it changes
        memory use only, not the output.

    Returns
    -------
    TCalCore
        ``statistic``, ``threshold``, ``pvalue`` (arrays of length L) and
        ``null_draws`` (L, R).
    """
    z = np.asarray(z, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    if z.ndim != 2 or u.shape != z.shape:
        raise ValueError(f"z and u must be arrays of the same shape (n, d), got {z.shape} and {u.shape}")
    n = z.shape[0]
    bins = np.atleast_2d(np.asarray(bins))
    if bins.shape[1] != n or bins.dtype.kind not in "iu":
        raise ValueError(f"bins must be integer bin numbers of shape (n,) or (L, n) with n = {n}")
    if bins.min() < 0:
        raise ValueError("bins must be non-negative bin numbers")
    R = check_count(n_draws, "n_draws")
    gen = _as_rng(rng)
    bins = [np.unique(b, return_inverse=True)[1].ravel() for b in bins]  # dense 0..m-1
    sizes = [int(b.max()) + 1 for b in bins]
    # the observed statistic exactly as calib_ci computes it
    observed = np.array([debiased_statistic(bin_sums(b, np.arange(m)[:, None], u, z), n)
                         for b, m in zip(bins, sizes)])
    tables = _pair_tables(z, full, bins, sizes)
    D = block_size or max(1, min(R, BLOCK_ELEMENTS // max(n, 1)))
    draws = np.empty((len(sizes), R))
    for start in range(0, R, D):  # loop over blocks of resamples, not single resamples
        size = min(D, R - start)
        draws[:, start:start + size] = _block_statistics(_draw_pairs(gen, size, n, tables), tables)
    threshold, pvalue = _mc_decision(observed, draws, alpha)
    return TCalCore(statistic=observed, threshold=threshold, pvalue=pvalue, null_draws=draws)


# --------------------------------------------------------------------------- scales
def adaptive_scales(n: int, d: int) -> tuple[int, ...]:
    """Dyadic bin counts 2, 4, ..., 2^L of the adaptive T-Cal test.

    L = max(1, floor((2/d) log2(n / sqrt(log n)))), the end of T-Cal's adaptive
    range m <= (n / sqrt(log n))^(2/d) (d = 1: the reference code's
    ``int(2 * log2(n / sqrt(log n)))``).
    """
    n = max(int(n), 3)
    top = int(math.floor(2.0 / d * math.log2(n / math.sqrt(math.log(n)))))
    return tuple(2 ** b for b in range(1, max(1, top) + 1))


def row_bins(data, n_bins: int) -> np.ndarray:
    """Bin number of each row of prepared data (cube or simplex partition)."""
    if data.mode == "full":
        from .simplex import simplex_groups
        return simplex_groups(data.z, n_bins)[0]
    return group_keys(cube_indices(data.z, n_bins), n_bins + 1)[0]


def _check_scales(n_bins) -> tuple[int, ...]:
    scales = tuple(n_bins)
    if not scales:
        raise ValueError("n_bins must list at least one bin count")
    for b in scales:
        if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)):
            raise TypeError(f"n_bins must hold positive integers, got {b!r}")
        if b < 1:
            raise ValueError(f"n_bins must hold integers >= 1, got {b}")
    return tuple(int(b) for b in scales)


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class TCalResult:
    """T-Cal test of H0: the model is calibrated (threshold by consistency resampling).

    Unpacks as ``statistic, pvalue``.

    Attributes
    ----------
    statistic : float
        Debiased T at the reported scale (the only one, or for the adaptive
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
    n, k, n_classes, mode : calibration target as in :class:`~calibtest.CalibrationResult`.
    formula, y_name, prob_names, n_dropped, call
        Bookkeeping.
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
    n: int
    k: int
    n_classes: int | None
    mode: str
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    call: str | None = None
    null_draws: np.ndarray | None = field(default=None, repr=False)

    def __iter__(self):
        return iter((self.statistic, self.pvalue))

    def scale_table(self) -> pd.DataFrame:
        """One row per scale: ``n_bins``, ``statistic``, ``threshold``, ``pvalue``, ``reject``."""
        return pd.DataFrame({"n_bins": self.scales, "statistic": self.statistics,
                             "threshold": self.thresholds, "pvalue": self.pvalues,
                             "reject": [t > c for t, c in zip(self.statistics, self.thresholds)]})

    def summary(self):
        """statsmodels-style summary (``print`` it; ``.as_html()``, ``.as_latex()``)."""
        return _build_summary(self)

    def to_dict(self) -> dict:
        """All scalar results as a JSON-safe dict (infinite thresholds become None)."""
        from .summary import _json_safe
        out = {"statistic": self.statistic, "threshold": self.threshold, "pvalue": self.pvalue,
               "reject": self.reject, "alpha": self.alpha, "level": self.level, "n_bins": self.n_bins,
               "scales": list(self.scales), "statistics": list(self.statistics),
               "thresholds": list(self.thresholds), "pvalues": list(self.pvalues),
               "adaptive": self.adaptive, "n_draws": self.n_draws, "n": self.n, "k": self.k,
               "n_classes": self.n_classes, "mode": self.mode, "formula": self.formula,
               "y_name": self.y_name, "prob_names": list(self.prob_names), "n_dropped": self.n_dropped,
               "method": "tcal"}
        return _json_safe(out)

    def __repr__(self) -> str:
        kind = f"adaptive over B in {list(self.scales)}" if self.adaptive else f"B={self.n_bins}"
        return (f"<TCalResult mode={self.mode} n={self.n} {kind}: T={self.statistic:.6g}, "
                f"threshold={self.threshold:.6g}, p={self.pvalue:.4g}, reject={self.reject}>")


def _build_summary(res: TCalResult):
    from .summary import CalibSummary, _MODE_TEXT, fmt
    smry = CalibSummary()
    smry.add_title("T-Cal test of calibration (consistency resampling)")
    model = res.formula if res.formula else f"{res.y_name} ~ {' + '.join(map(str, res.prob_names)) or 'probs'}"
    mode = _MODE_TEXT.get(res.mode, res.mode) + (f" (k = {res.k})" if res.mode == "topk" else "")
    smry.add_dict({"Model:": model, "Mode:": mode,
                   "Classes (K):": "2" if res.n_classes is None else str(res.n_classes),
                   "No. observations:": str(res.n), "Resamples (R):": str(res.n_draws),
                   "Test:": "adaptive (Bonferroni)" if res.adaptive else "single scale",
                   "Alpha:": fmt(res.alpha), "Level per scale:": fmt(res.level)}, ncols=2)
    table = pd.DataFrame({"statistic T": [fmt(v) for v in res.statistics],
                          "threshold": [fmt(v) for v in res.thresholds],
                          "p-value": [fmt(v, 4) for v in res.pvalues],
                          "reject": [fmt(bool(t > c)) for t, c in zip(res.statistics, res.thresholds)]},
                         index=[f"B = {b}" for b in res.scales])
    smry.add_df(table)
    verdict = "rejects" if res.reject else "does not reject"
    notes = [f"The test {verdict} H0: calibrated at level {res.alpha:g} (p-value {fmt(res.pvalue, 4)}"
             + (", Bonferroni-adjusted over the scales)." if res.adaptive else ").")]
    notes.append("Threshold: the Monte Carlo quantile of T over R resampled data sets (predictions drawn "
                 "with replacement, labels drawn from them); p-value = (1 + #{T* >= T}) / (R + 1).")
    if not np.all(np.isfinite(res.thresholds)):
        notes.append(f"R = {res.n_draws} resamples are too few for level {res.level:g}: "
                     "the test cannot reject; increase n_draws.")
    if res.n_dropped:
        notes.append(f"{res.n_dropped} rows with missing values were dropped (missing='drop').")
    smry.add_text("Notes:")
    for i, note in enumerate(notes, 1):
        smry.add_text(f"[{i}] {note}")
    return smry


# --------------------------------------------------------------------------- public function
def tcal_test(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None,
              k=None, n_bins="auto", alpha: float = 0.05, n_draws: int = 1000, adaptive: bool = False,
              rng=None, missing: str = "raise", eval_env: int = 0) -> TCalResult:
    """T-Cal test of H0: calibrated, with the threshold from consistency resampling.

    Inputs and targets are those of :func:`calibtest.calib_ci` (binary, top-1,
    top-1-to-k, and full calibration with ``k="full"``); the statistic is the
    debiased T on the same bins (so it equals ``calib_ci(...).estimate``).

    Parameters
    ----------
    formula, data, y, probs, n_classes, k, missing, eval_env
        As in :func:`calibtest.calib_ci`.
    n_bins : int, "auto" or sequence of int
        Bins per dimension B.  A sequence runs the test at each B with a
        Bonferroni-split level (as ``adaptive=True`` does on its dyadic grid).
    alpha : float
        Level of the test.
    n_draws : int
        Monte Carlo resamples (default 1000, as in the paper and T-Cal).
    adaptive : bool
        Adaptive T-Cal: B = 2, 4, ..., 2^L (see :func:`adaptive_scales`), each
        at level alpha / L.  Requires ``n_bins="auto"`` or a sequence.
    rng : None, int or numpy.random.Generator
        Seed; the same seed gives identical output.

    Returns
    -------
    TCalResult

    Examples
    --------
    >>> res = ct.tcal_test("y ~ p", data=df, rng=1)            # doctest: +SKIP
    >>> res.reject, res.pvalue                                  # doctest: +SKIP
    """
    from .api import calib_ci
    alpha = check_alpha(alpha)
    R = check_count(n_draws, "n_draws")
    gen = _as_rng(rng)
    if isinstance(n_bins, (list, tuple, np.ndarray)):
        scales = _check_scales(n_bins)
        first = scales[0]
        adaptive = adaptive or len(scales) > 1
    else:
        if adaptive and n_bins != "auto":
            raise ValueError("adaptive=True chooses the bin counts itself: use n_bins='auto' or give a "
                             "sequence of bin counts")
        scales, first = None, n_bins
    res = calib_ci(formula, data, y=y, probs=probs, n_classes=n_classes, k=k, n_bins=first, alpha=alpha,
                   missing=missing, eval_env=eval_env + 1)
    prepared = res.data
    d = prepared.k - 1 if prepared.mode == "full" else prepared.k
    if scales is None:
        scales = adaptive_scales(res.n, d) if adaptive else (res.n_bins,)
    level = alpha / len(scales)
    bins = np.stack([row_bins(prepared, b) for b in scales])
    core = tcal_statistic_threshold(prepared.z, prepared.u, bins, alpha=level, n_draws=R, rng=gen,
                                    full=prepared.mode == "full")
    stats = core.statistic
    best = int(np.argmin(core.pvalue))
    reject = bool(np.any(stats > core.threshold))
    pvalue = float(min(1.0, len(scales) * core.pvalue[best]))
    call = (res.call or "").replace("calib_ci(", "tcal_test(", 1)
    return TCalResult(
        statistic=float(stats[best]), threshold=float(core.threshold[best]), pvalue=pvalue, reject=reject,
        alpha=alpha, level=level, n_bins=int(scales[best]), scales=tuple(int(b) for b in scales),
        statistics=tuple(float(v) for v in stats), thresholds=tuple(float(v) for v in core.threshold),
        pvalues=tuple(float(v) for v in core.pvalue), adaptive=bool(adaptive), n_draws=R, n=res.n,
        k=res.k, n_classes=res.n_classes, mode=res.mode, formula=res.formula, y_name=res.y_name,
        prob_names=res.prob_names, n_dropped=res.n_dropped, call=call, null_draws=core.null_draws)
