"""A mergeable accumulator of the per-bin sums: the streaming form of :func:`calibtest.calib_ci`.

T, sigma1^2 and the bin table depend on the rows only through additive
per-bin sums (``docs/conventions.md``, "The estimator and its variances"): for bin b the
count c_b, S_b = sum U, M_b = sum U U^T (whose trace is Q_b = sum ||U||^2) and
sum z.  The sums of the union of disjoint row sets are the sums of the sums,
so data of any size can be fed chunk by chunk (``update``), accumulated on
several workers and combined (``merge``), and the adjusted interval
(Algorithm 1 of the paper) computed at the end from the sums alone
(``result``).  The conditional null's exact moments of T given the
predictions are additive per-bin sums too
(:func:`calibtest.core.conditional.conditional_sum_columns`), kept alongside
under the same rule as for rows in memory, so the null (``null="auto"``
included) and its p-value are those of the rows in memory.  The answer
equals the in-memory one up to the order of the floating-point additions
(about 1e-16 relative per sum).

The only thing the sums cannot recover is the bin count B of ``n_bins="auto"``,
``max(2, round(6 / (d + 1) * n ** (2 / (4 + d))))``, which depends on n: the
rows must be binned before n is known.  A stream therefore needs an integer
``n_bins``, or ``"auto"`` together with the number of rows it will deliver
(``n_rows=``; for a Parquet file the row count in its metadata, for a CSV file
a counting pass); ``result`` checks that hint against the rows accumulated.
"""
from __future__ import annotations

import numpy as np

from calibtest.display.format import Call
import dataclasses

from calibtest.inputs.validation import (DEFAULT_NULL, NULLS, check_alpha, check_choice, check_memory, check_missing,
                                   is_integer)
from calibtest.core.binning import resolve_n_bins
from calibtest.core.binstats import BinStats, merge_stats
from calibtest.core.conditional import conditional_memory, conditional_sum_columns
from calibtest.core.partition import binned_dimension, partition_rows
from calibtest.core.targets import PreparedData, prepare_target
from calibtest.ece.build_result import keeps_null_sums, result_from_stream
from calibtest.checks.evidence_table import impossible_counts
from calibtest.inputs.formula import freeze_env, resolve_env, thaw_env
from calibtest.inputs.rows import read_rows
from calibtest.ece.result import CalibrationResult
from calibtest.ece.result_parts import BinChoice, CalibrationTarget

__all__ = ["BinAccumulator"]

def _prepare_rows(y, p, **options) -> PreparedData:
    """:func:`calibtest.core.targets.prepare_target` for a chunk of any size >= 1.

    Both insist on n >= 2 (a whole data set needs it); a one-row chunk is
    validated and transformed as the first row of itself doubled, since Z and
    U are computed row by row.
    """
    if p.shape[0] != 1:
        return prepare_target(y, p, **options)
    twice = prepare_target(np.concatenate([y, y]), np.concatenate([p, p]), **options)
    return PreparedData(z=twice.z[:1], u=twice.u[:1], mode=twice.mode, k=twice.k, n_classes=twice.n_classes)


class BinAccumulator:
    """Per-bin sums of a stream of rows, mergeable across chunks and workers.

    ``BinAccumulator(formula, n_bins=...)`` followed by ``update(chunk)`` for
    every chunk of the data and ``result()`` gives the same
    :class:`~calibtest.ece.result.CalibrationResult` as
    ``calib_ci(formula, data=all_chunks)`` (Algorithm 1 of Sun, Chaudhari,
    Barnett & Dobriban [1]_ from the additive sums c_b, S_b, M_b, sum z, and
    the conditional null from the additive sums of its moments), up to the
    order of floating-point additions.  Accumulators of disjoint rows built
    with the same settings combine with :meth:`merge`.

    Parameters
    ----------
    formula : str, optional
        As in :func:`calibtest.calib_ci` (``"correct ~ confidence"``,
        ``"label ~ p0 + p1 + p2"``); each chunk is then a DataFrame (or dict of
        columns).  Without a formula, chunks are given as ``update(y=, probs=)``.
        Formulas are evaluated by patsy and can run any Python expression:
        trusted input only.
    n_classes, k : int or "full", optional
        The calibration target, as in :func:`calibtest.calib_ci` (``k="full"``
        or ``k=K``: full calibration on the equal-volume simplex bins).
    n_bins : int or "auto"
        Bins per dimension B.  Rows are binned as they arrive, so ``"auto"``
        (which depends on n) needs ``n_rows``; it is resolved with the
        dimension of the target when the first rows arrive.
    n_rows : int, optional
        The number of rows the stream will contribute (after dropping missing
        values), used only to resolve ``n_bins="auto"``; :meth:`result` raises
        if the rows accumulated differ.
    alpha : float
        Default significance level of :meth:`result`.
    null : {"auto", "asymptotic", "conditional"}
        Default null of :meth:`result`, as in :func:`calibtest.calib_ci`:
        ``"auto"`` is the conditional null for binned vectors of at most 4
        coordinates, as for rows in memory.  The per-bin sums of the
        conditional moments (O(d^3) floats per bin) are kept for such vectors
        under any null, and for more coordinates only with
        ``null="conditional"``.  ``"monte-carlo"`` needs the rows and is
        refused.  Where rows in memory would fall back to the Monte Carlo test
        (conditional skewness above 3) :meth:`result` uses the asymptotic
        null under ``"auto"`` and raises a ValueError naming the skewness
        under ``"conditional"`` (see :func:`calibtest.ece.build_result.streamed_null`).
    missing : {"raise", "drop"}
        As in :func:`calibtest.calib_ci`; dropped rows are counted across chunks.
    eval_env : int or patsy.EvalEnvironment
        Where formula names that are not columns are looked up (frames above
        the caller, patsy semantics).  When the accumulator is pickled (sent
        to a worker) only the variables the formula uses travel with it.

    Attributes
    ----------
    n : int
        Rows accumulated.
    n_dropped : int
        Rows dropped for missing values.
    n_seen : int
        Rows received (used plus dropped).
    n_bins : int or None
        B (None until the first rows when ``n_bins="auto"``).
    n_bins_rule : str
        ``"user"`` or ``"auto"``.

    Notes
    -----
    Chunks are binned immediately and their sums kept in a binary counter of
    partial :class:`~calibtest.core.binstats.BinStats` (two partials of the same
    level are merged), so p chunks cost O(M log p) merge work for M bins and
    memory holds O(log p) partials, not the rows.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024.

    Examples
    --------
    Chunks of any source (``pd.read_csv("preds.csv", chunksize=100_000)``,
    a database cursor, ...) give the in-memory estimate:

    >>> import pandas as pd, calibtest as ct
    >>> sim = ct.simulation.setting3(n=3000, beta=0.05, rng=1)
    >>> df = pd.DataFrame({"correct": sim.correct, "confidence": sim.confidence})
    >>> acc = ct.BinAccumulator("correct ~ confidence", n_classes=10, n_bins=15)
    >>> for start in range(0, len(df), 1000):
    ...     _ = acc.update(df.iloc[start:start + 1000])  # returns acc, for chaining
    >>> res = acc.result()
    >>> res.n, res.estimate == ct.calib_ci("correct ~ confidence", data=df, n_classes=10, n_bins=15).estimate
    (3000, True)
    """

    def __init__(self, formula: str | None = None, *, n_classes: int | None = None, k: int | None = None,
                 n_bins=None, n_rows: int | None = None, alpha: float = 0.05, missing: str = "raise",
                 eval_env=0, null: str = DEFAULT_NULL):
        if formula is not None and not isinstance(formula, str):
            raise TypeError(f"formula must be a string such as 'y ~ p', got {type(formula).__name__}")
        check_missing(missing)
        check_choice(null, "null", NULLS)
        if null == "monte-carlo":
            raise ValueError("null='monte-carlo' draws labels for every row and needs the rows in memory (a "
                             "DataFrame or arrays); a BinAccumulator supports null='auto', 'conditional' and "
                             "'asymptotic'")
        if n_rows is not None:
            if not is_integer(n_rows):
                raise TypeError(f"n_rows must be an integer, got {type(n_rows).__name__}")
            if n_rows < 2:
                raise ValueError(f"n_rows must be >= 2, got {n_rows}")
            n_rows = int(n_rows)
        if n_bins is None:
            raise TypeError("n_bins is required: an integer B, or 'auto' with n_rows= (the rows are "
                            "binned as they arrive, and the automatic B depends on the total n)")
        if isinstance(n_bins, str) and n_bins == "auto" and n_rows is None:
            raise ValueError("n_bins='auto' depends on the number of rows n, unknown for a stream: "
                             "give an integer n_bins or the row count n_rows=")
        if not (k is None or k == "full" or (is_integer(k) and k >= 1)):
            raise TypeError(f"k must be a positive integer or 'full', got {k!r}")
        if isinstance(n_bins, str) and n_bins == "auto":
            self.n_bins, self.n_bins_rule = None, "auto"  # resolved from n_rows and d with the first rows
        else:
            self.n_bins, self.n_bins_rule = resolve_n_bins(n_bins, 2, 1)
        self.formula = formula
        self.n_classes = n_classes
        self.k = k
        self.n_rows = n_rows
        self.alpha = check_alpha(alpha)
        self.missing = missing
        self.null = null
        self._env = None if formula is None else resolve_env(eval_env)
        self.n_dropped = 0
        self.n_seen = 0
        self.impossible = (0, 0, 0)  # events at Z_j = 0, non-events at Z_j = 1, rows with either (exact)
        self._target = None  # (mode, k, n_classes, y_name, prob_names), fixed by the first rows
        self._parts: list[tuple[int, BinStats]] = []

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if state["_env"] is not None:  # patsy environments do not pickle; ship the names used
            state["_env"] = ("frozen", freeze_env(self.formula, self._env))
        return state

    def __setstate__(self, state: dict) -> None:
        env = state.get("_env")
        if isinstance(env, tuple) and env and env[0] == "frozen":
            state["_env"] = thaw_env(env[1])
        self.__dict__.update(state)

    # ------------------------------------------------------------------ settings
    def _settings(self) -> tuple:
        return (self.formula, self.n_bins_rule, self.n_rows, self.n_classes, self.k, self.missing,
                self.n_bins if self.n_bins_rule == "user" else None, self.null)

    def spawn(self) -> "BinAccumulator":
        """An empty accumulator with the same settings and environment."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.n_dropped = 0
        new.n_seen = 0
        new.impossible = (0, 0, 0)
        new._target = None
        new._parts = []
        if new.n_bins_rule == "auto":
            new.n_bins = None
        return new

    # ------------------------------------------------------------------ feeding
    def update(self, data=None, *, y=None, probs=None) -> "BinAccumulator":
        """Bin a chunk of rows and add its sums.

        Parameters
        ----------
        data : pandas.DataFrame or dict
            A chunk for the formula (any number of rows, including 0).
        y, probs : array_like
            A chunk of arrays, when the accumulator has no formula.

        Returns
        -------
        BinAccumulator
            ``self`` (updated in place).
        """
        if self.formula is not None:
            if y is not None or probs is not None:
                raise ValueError("this accumulator has a formula: pass each chunk as data, not y=/probs=")
            if data is None:
                raise ValueError("update needs a chunk: data=<DataFrame>")
        else:
            if data is not None:
                raise ValueError("this accumulator has no formula: pass each chunk as y= and probs=")
            if y is None or probs is None:
                raise ValueError("update needs both y= and probs=")
        rows = read_rows(self.formula, data, y, probs, self._env, self.missing)
        if rows.probs.shape[0]:
            prepared = _prepare_rows(rows.y, rows.probs, n_classes=self.n_classes, k=self.k,
                                     class_names=rows.class_names, y_name=rows.y_name, prob_names=rows.prob_names)
            self._check_target((prepared.mode, prepared.k, prepared.n_classes, rows.y_name,
                                tuple(rows.prob_names)))
            if self.n_bins is None:
                self.n_bins = resolve_n_bins("auto", self.n_rows, binned_dimension(prepared.mode, prepared.k))[0]
            self._push(0, self._chunk_sums(prepared))
            self.impossible = tuple(a + b for a, b in zip(self._impossible(), impossible_counts(prepared)))
        self.n_dropped += rows.n_dropped
        self.n_seen += int(rows.probs.shape[0]) + rows.n_dropped
        return self

    def _chunk_sums(self, prepared: PreparedData) -> BinStats:
        """Bin a prepared chunk: its bin sums, with those of the conditional moments when they are kept."""
        part = partition_rows(prepared, self.n_bins)
        stats = part.bin_sums(prepared)
        d = prepared.z.shape[1]
        if not keeps_null_sums(self.null, d):
            return stats
        check_memory(conditional_memory(d, part.m), f"the conditional moments of T for {d} binned coordinates "
                     f"and {part.m} bins", "use fewer coordinates (a smaller k) or fewer bins, or null='asymptotic'")
        return dataclasses.replace(stats, null_sums=conditional_sum_columns(prepared.z, part.inverse, part.m))

    def _impossible(self) -> tuple:
        """The counts of impossible rows so far (an accumulator pickled before they were kept has none)."""
        return getattr(self, "impossible", (0, 0, 0))

    def _check_target(self, target: tuple) -> None:
        if self._target is None:
            self._target = target
        elif self._target != target:
            raise ValueError(f"rows of a different calibration target or columns cannot be combined: "
                             f"(mode, k, K, outcome, predictors) {target} vs {self._target}")

    def _push(self, level: int, stats: BinStats) -> None:
        """Binary-counter merging: partials of equal level merge into one of the next level."""
        parts = self._parts
        parts.append((level, stats))
        while len(parts) >= 2 and parts[-1][0] == parts[-2][0]:
            (lev, b), (_, a) = parts.pop(), parts.pop()
            parts.append((lev + 1, merge_stats([a, b])))

    # ------------------------------------------------------------------ combining
    def merge(self, other: "BinAccumulator") -> "BinAccumulator":
        """A new accumulator holding the rows of ``self`` and ``other`` (both left unchanged).

        Raises
        ------
        ValueError
            The two were built with different settings (formula, B, target).
        """
        return type(self).merge_all([self, other])

    @classmethod
    def merge_all(cls, accumulators) -> "BinAccumulator":
        """Combine any number of accumulators of disjoint rows in one pass (a tree-reduction step)."""
        accs = list(accumulators)
        if not accs:
            raise ValueError("merge_all needs at least one accumulator")
        first = accs[0]
        if len({id(acc) for acc in accs}) < len(accs):
            raise ValueError("an accumulator appears more than once among those merged; its rows would be "
                             "counted twice (merge accumulators of disjoint rows)")
        for other in accs[1:]:
            if not isinstance(other, BinAccumulator):
                raise TypeError(f"can only merge BinAccumulator objects, got {type(other).__name__}")
            if other._settings() != first._settings():
                raise ValueError("cannot merge accumulators with different settings "
                                 "(formula, n_bins, n_rows, n_classes, k, missing, null): "
                                 f"{other._settings()} vs {first._settings()}")
        out = first.spawn()
        for acc in accs:
            if acc._target is not None:
                out._check_target(acc._target)
                out.n_bins = acc.n_bins
            out.n_dropped += acc.n_dropped
            out.n_seen += acc.n_seen
            out.impossible = tuple(a + b for a, b in zip(out._impossible(), acc._impossible()))
        stats = [s for acc in accs for _, s in acc._parts]
        if stats:
            out._parts = [(max(lev for acc in accs for lev, _ in acc._parts), merge_stats(stats))]
        return out

    # ------------------------------------------------------------------ reading
    @property
    def bin_stats(self) -> BinStats | None:
        """The per-bin sums of all rows so far (None before the first row)."""
        if not self._parts:
            return None
        if len(self._parts) > 1:
            self._parts = [(self._parts[0][0], merge_stats([s for _, s in self._parts]))]
        return self._parts[0][1]

    @property
    def n(self) -> int:
        """Rows accumulated (after dropping missing values)."""
        return self.n_seen - self.n_dropped

    def result(self, alpha: float | None = None, *, null: str | None = None, call: Call | None = None,
               source: dict | None = None) -> CalibrationResult:
        """The calibration result from the accumulated sums.

        Parameters
        ----------
        alpha : float, optional
            Significance level (default: the accumulator's ``alpha``).
        null : {"auto", "asymptotic", "conditional"}, optional
            Null of the test of H0: calibrated (default: the accumulator's
            ``null``); see :func:`calibtest.ece.build_result.streamed_null`.
        call, source : optional
            Provenance stored on the result (the call that produced it; a
            description of the data source such as a file name and checksum).

        Returns
        -------
        CalibrationResult
            With ``data=None``: the rows are not kept, so methods that need
            them (``hosmer_lemeshow``) raise.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        requested = self.null if null is None else null
        check_choice(requested, "null", NULLS)
        stats = self.bin_stats
        if stats is None or self.n < 2:
            raise ValueError(f"need at least n = 2 rows, got {self.n}")
        if self.n_rows is not None and self.n != self.n_rows:
            raise ValueError(f"n_rows={self.n_rows} was given (it resolved n_bins='auto' to B = {self.n_bins}) "
                             f"but {self.n} rows were accumulated; give the true row count or an integer n_bins")
        mode, k, n_classes, y_name, prob_names = self._target
        if call is None:
            options = {"n_classes": self.n_classes, "k": self.k,
                       "n_bins": self.n_bins if self.n_bins_rule == "user" else "auto", "n_rows": self.n_rows,
                       "alpha": alpha, "missing": self.missing if self.missing != "raise" else None,
                       "null": None if requested == "auto" else requested}
            call = Call("BinAccumulator", (repr(self.formula),) if self.formula else (), options)
        return result_from_stream(
            stats, CalibrationTarget(mode, k, n_classes), BinChoice(self.n_bins, self.n_bins_rule),
            alpha=alpha, null=requested, call=call, formula=self.formula, y_name=y_name, prob_names=prob_names,
            n_dropped=self.n_dropped, source=source, impossible=self._impossible())

    def __repr__(self) -> str:
        target = "no rows yet" if self._target is None else f"mode={self._target[0]} k={self._target[1]}"
        return (f"<BinAccumulator {self.formula or 'y, probs'}: {target}, n={self.n}, "
                f"n_dropped={self.n_dropped}, B={self.n_bins}>")
