"""The evidence of :func:`calibtest.evidence` on a stream of rows: a CSV/Parquet file or a Dask frame, in passes.

Every row of the evidence table that needs only sums, or a few passes over
the rows, is computed from the stream and equals the in-memory number for the
same rows (to the rounding of the float sums; the tests compare at 1e-8):

* the interval: the streamed :func:`calibtest.calib_ci` result itself;
* the multi-scale test: :func:`calibtest.streams.multiscale.stream_calib_test`
  (counter-based label draws keyed by the seed and each row's position);
* Hosmer-Lemeshow: the g = 10 groups of the stably sorted predictions are
  found exactly.  A radix selection on the bits of the float64 predictions
  (a 2^16-cell histogram per pass, the cell holding a group's first rank
  refined by the next 16 bits, or its values collected and sorted once at most
  :data:`COLLECT_MAX` rows are left) gives the value of each group's first
  row, the rows below it and the rows tied with it; a group boundary inside a
  run of tied predictions is placed by the rows' positions (one more pass
  counts each chunk's tied rows), as the stable sort of the rows in memory
  places it; then one pass sums each group;
* Spiegelhalter's z, O/E and Brier: per-row sums;
* CITL and the calibration slope: Newton-Raphson (IRLS) on the logistic
  likelihood, one pass per step accumulating X'WX, X'(y - mu) and the
  deviance over the chunks (a step that raises the deviance is halved), until
  the step is below 1e-10; the Wald intervals use the information at the
  estimate.  The steps start from the same fits to the rows binned on
  logit(p) (:func:`calibtest.checks.logistic_fits.binned_starts`, from the
  cell sums of the first pass), within about 1e-6 of the estimates, so two
  passes of steps suffice (the second confirms the estimate), run with the
  passes of the Hosmer-Lemeshow selection;
* the bin-sensitivity rows: one :class:`~calibtest.BinAccumulator` per B, in
  the first pass.

Not streamed, and said in one sentence in the result (:data:`NOT_STREAMED`):
val_prob's C index (exact and val.prob's), DeLong's interval, the flexible
(spline), lowess and loess calibration curves with their errors (Emax, E90,
Eavg, E50, ICI) and the report's figures drawn from the rows, which need
every row at once; the statistics are NaN on a streamed
:class:`~calibtest.checks.val_prob.ValProbResult`.  The memory is that of one chunk
plus O(groups + 2^16) numbers per pass.
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from calibtest.inputs.validation import DEFAULT_DRAWS, is_integer
from calibtest.streams.accumulator import BinAccumulator, _prepare_rows
from calibtest.streams.multiscale import stream_calib_test
from calibtest.streams.dask_frames import _import_dask, _partition_usable, compute, dask_source, in_partition
from calibtest.streams.files import DataFile, each_chunk, open_data_file
from calibtest.core.binstats import bin_sums, debiased_statistic, merge_stats, plugin_statistic
from calibtest.checks.evidence_table import _VALPROB_MISSING, SENSITIVITY_BINS, assemble_evidence, evidence_seed
from calibtest.checks.logistic_fits import binned_starts, logit_cell_sums
from calibtest.inputs.formula import formula_columns, freeze_env, thaw_env
from calibtest.checks.hosmer_lemeshow import HosmerLemeshowResult
from calibtest.inputs.rows import read_rows
from calibtest.checks.val_prob import ValProbResult, _LazyParts, _observed_expected_part

__all__ = ["StreamedRows", "with_stream", "streamed_evidence", "streamed_hosmer_lemeshow", "NOT_STREAMED", "COLLECT_MAX", "HL_GROUPS"]

#: Chunks whose step of a pass runs at once (threads; 2 on the 2-core machines the figures were measured on).
PASS_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
                          (os.cpu_count() or 1)))

#: The one sentence a streamed evidence result, its summary and docs/scale.md give for what is not computed.
NOT_STREAMED = ("Computed from the stream in passes over the rows (file or Dask frame): every row of the table "
                "and the bin-sensitivity table; not computed, as they need every row at once: val_prob's C "
                "index with DeLong's interval, the flexible (spline), lowess and loess calibration curves with "
                "their errors (Emax, E90, Eavg, E50, ICI) and the figures drawn from the rows -- load the "
                "formula's columns into a DataFrame for them.")

#: A radix cell holding at most this many rows is collected and sorted instead of refined by 16 more bits.
COLLECT_MAX = 1 << 20

#: Hosmer-Lemeshow groups of the evidence (deciles of the predictions).
HL_GROUPS = 10

_MAX_PASSES = 60  # Newton steps and halvings of the logistic fits
_STEP_TOL = 1e-10


# --------------------------------------------------------------------------- the rows, re-readable
@dataclass(eq=False)
class StreamedRows:
    """The rows of a streamed result, read again chunk by chunk (a file) or partition by partition (Dask).

    Held by a :class:`~calibtest.CalibrationResult` computed from a file or a
    Dask frame (``res.stream``), so that ``res.evidence()`` and its summary
    can test the same rows.  A file is read through its
    :class:`~calibtest.streams.files.DataFile` (the one reader of the
    streamed passes), which refuses a file changed since its first read.

    Attributes
    ----------
    data : DataFile or dask.dataframe.DataFrame
        A file path given is opened (:func:`~calibtest.streams.files.open_data_file`).
    formula : str
    env : patsy.EvalEnvironment
    missing : {"raise", "drop"}
    n_classes, k
        The target, as given to :func:`calibtest.calib_ci`.
    chunksize : int, optional
        Rows per chunk of a file (when given a path).
    columns : list of str
        The columns read: the formula's.
    """

    data: object
    formula: str
    env: object = field(repr=False)
    missing: str = "raise"
    n_classes: int | None = None
    k: object = None
    chunksize: int | None = None
    columns: list = field(default_factory=list, repr=False)
    _starts: list | None = field(default=None, repr=False)
    #: (outcome name, prediction names) of the rows, once a pass has read them
    names: tuple | None = field(default=None, repr=False)
    #: rows dropped by ``missing="drop"`` in the last pass
    n_dropped: int = field(default=0, repr=False)
    #: passes over a Dask frame, and its usable rows
    passes: int = field(default=0, repr=False)
    n_usable: int = field(default=0, repr=False)

    def __post_init__(self):
        if isinstance(self.data, (str, os.PathLike)):
            self.data = open_data_file(self.data, self.formula, self.env, self.chunksize)
        names = self.data.columns if self.is_file else list(self.data.columns)
        self.columns = formula_columns(self.formula, names)

    def evidence(self, res, alpha: float, rng):
        """:func:`streamed_evidence` of ``res`` on these rows (what ``res.evidence()`` calls)."""
        return streamed_evidence(self, res, alpha, rng)

    def hosmer_lemeshow(self, res, groups: int, validation: str):
        """:func:`streamed_hosmer_lemeshow` of ``res`` on these rows (what ``res.hosmer_lemeshow()`` calls)."""
        return streamed_hosmer_lemeshow(self, res, groups, validation)

    @property
    def is_file(self) -> bool:
        return isinstance(self.data, DataFile)

    def stream_options(self) -> dict:
        """The options that name these rows to the other streamed front doors."""
        return {"env": self.env, "missing": self.missing, "n_classes": self.n_classes, "k": self.k}

    def again(self):
        """The data for another analysis of these rows: a file's :meth:`DataFile.again` (the same first read,
        its own passes), or the Dask frame."""
        return self.data.again() if self.is_file else self.data

    def run(self, step, combine, digest: bool = False):
        """``combine`` of ``step(p, y, start, index)`` over every chunk or partition, in order.

        ``p`` and ``y`` are the prediction and the 0/1 outcome of the usable
        rows (binary or top-1), ``start`` the position of the first of them
        among all usable rows, ``index`` the chunk's number.  ``digest``: a
        file's SHA-256 is read during the pass (for :meth:`source`).
        """
        if self.is_file:
            return self._run_file(step, combine, digest)
        return self._run_dask(step, combine)

    def source(self) -> dict:
        """The ``source`` record of a result computed from these rows (as ``CalibrationResult.source``)."""
        if self.is_file:
            return self.data.source(self.columns)
        return dask_source(self.data, self.columns, self.n_usable + self.n_dropped, passes=self.passes)

    def _run_file(self, step, combine, digest: bool = False):
        """The pass over a file: chunks read and parsed in order on this thread, ``step`` run on up to
        :data:`PASS_THREADS` chunks at once (numpy releases the GIL), the parts combined in chunk order (the
        Dask passes run the same pure steps on workers), so the sums are those of one thread."""
        walk = {"out": None, "start": 0, "index": 0, "dropped": 0}
        pending: deque = deque()

        def collect(limit: int) -> None:  # combine the oldest parts, in order, until ``limit`` are pending
            while len(pending) > limit:
                part = pending.popleft().result()
                walk["out"] = part if walk["out"] is None else combine(walk["out"], part)

        with ThreadPoolExecutor(max_workers=PASS_THREADS) as pool:
            def handle(chunk) -> None:  # the usable rows of a chunk are numbered after the previous chunks'
                p, y, names, n_drop = _chunk_rows(self.formula, chunk, self.env, self.missing, self.n_classes,
                                                  self.k)
                walk["dropped"] += n_drop
                self.names = names or self.names
                if p.size:
                    pending.append(pool.submit(step, p, y, walk["start"], walk["index"]))
                    walk["start"] += p.size
                    walk["index"] += 1
                    collect(PASS_THREADS)

            try:
                each_chunk(self.data, self.columns, handle, digest=digest, progress=None)
                collect(0)
            finally:
                for fut in pending:
                    fut.cancel()
        self.n_dropped = walk["dropped"]
        return walk["out"]

    def _run_dask(self, step, combine):
        dask, _ = _import_dask()
        namespace = freeze_env(self.formula, self.env, self.columns)
        parts = self.data[self.columns].to_delayed()
        if self._starts is None:
            counts = compute(*[dask.delayed(_partition_usable)(self.formula, namespace, self.missing, part, i)
                               for i, part in enumerate(parts)], desc="Dask: counting rows")
            self._starts = [int(s) for s in np.concatenate(([0], np.cumsum(counts)))[:-1]]
            self.n_usable, self.passes = int(np.sum(counts)), self.passes + 1
        self.passes += 1
        tasks = [dask.delayed(_partition_step)(self.formula, namespace, self.missing, self.n_classes, self.k,
                                               step, part, i, start)
                 for i, (part, start) in enumerate(zip(parts, self._starts))]
        out, self.n_dropped = None, 0
        for names, n_drop, part in compute(*tasks, desc=f"Dask: evidence pass {self.passes}"):  # combined in order
            self.names, self.n_dropped = names or self.names, self.n_dropped + n_drop
            if part is not None:
                out = part if out is None else combine(out, part)
        return out


def with_stream(res, data, formula: str, settings):
    """``res`` holding its rows as :class:`StreamedRows` (binary and top-1 targets; others unchanged).

    ``data`` is the :class:`~calibtest.streams.files.DataFile` the interval was read from (its later passes
    refuse a file changed since that first read), a file path (opened now) or a Dask frame; ``settings``
    (:class:`~calibtest.inputs.settings.Settings`) gives the environment, ``missing``, the target and the
    chunk size of those passes.
    """
    if not res.mode.one_dimensional:
        return res
    s = settings
    return res.with_parts(stream=StreamedRows(data, formula, s.env, s.missing, s.n_classes, s.k, s.chunksize))


def _chunk_rows(formula, chunk, env, missing, n_classes, k) -> tuple:
    """(p, y, names, dropped) of a chunk: the usable rows' one probability column and 0/1 outcome, the names
    and the rows dropped by ``missing="drop"``."""
    rows = read_rows(formula, chunk, None, None, env, missing)
    if not rows.probs.shape[0]:
        return np.empty(0), np.empty(0), None, rows.n_dropped
    prepared = _prepare_rows(rows.y, rows.probs, n_classes=n_classes, k=k, class_names=rows.class_names,
                             y_name=rows.y_name, prob_names=rows.prob_names)
    if prepared.z.shape[1] != 1:
        raise ValueError(f"on a file or Dask DataFrame this needs a binary or top-1 target (one probability "
                         f"column); the {prepared.mode} target has {prepared.z.shape[1]}: read the formula's "
                         "columns into a pandas DataFrame")
    p = prepared.z[:, 0] + 0.0  # -0.0 -> 0.0 for the bit keys
    return p, p + prepared.u[:, 0], (rows.y_name, tuple(rows.prob_names)), rows.n_dropped


def _partition_step(formula, namespace, missing, n_classes, k, step, part, index: int, start: int):
    """One Dask partition's part of a pass (runs on a worker)."""
    try:
        p, y, names, n_drop = _chunk_rows(formula, part, thaw_env(namespace), missing, n_classes, k)
    except (ValueError, TypeError) as exc:
        raise in_partition(exc, index) from exc
    return names, n_drop, (step(p, np.rint(y), start, index) if p.size else None)


def _add(a: dict, b: dict) -> dict:
    """Combine two chunks' sums: ``min_``/``max_`` keys by min/max, ``list_`` keys concatenated, ``stats_`` and
    ``accs_`` (bin accumulators) merged, else added."""
    out = {}
    for key, value in a.items():
        other = b[key]
        if key.startswith("min_"):
            out[key] = min(value, other)
        elif key.startswith("max_"):
            out[key] = max(value, other)
        elif key.startswith("list_"):
            out[key] = value + other
        elif key.startswith("stats_"):
            out[key] = merge_stats([value, other])
        elif key.startswith("accs_"):
            out[key] = _merge_accs(value, other)
        else:
            out[key] = value + other
    return out


# --------------------------------------------------------------------------- per-row sums
def _row_sums(p: np.ndarray, y: np.ndarray) -> dict:
    """The sums of Spiegelhalter's z, O/E, Brier and the checks val_prob makes on its rows."""
    y = np.rint(y)
    q = 1.0 - 2.0 * p
    fin = (p > 0.0) & (p < 1.0)
    pf, yf = p[fin], y[fin]
    p1, p0 = pf[yf == 1], pf[yf == 0]
    inf = math.inf
    with np.errstate(divide="ignore"):
        loglike = float(np.sum(yf * np.log(pf) + (1.0 - yf) * np.log1p(-pf)))
    return {"n": p.size, "n1": int(np.count_nonzero(y)), "sum_y": float(y.sum()), "sum_p": float(p.sum()),
            "brier": float(np.sum((p - y) ** 2)), "sp_num": float(np.sum((y - p) * q)),
            "sp_var": float(np.sum(q * q * p * (1.0 - p))), "min_p": float(p.min()), "max_p": float(p.max()),
            "nf": pf.size, "n1f": int(np.count_nonzero(yf)), "loglike_f": loglike,
            "min_pf": float(pf.min()) if pf.size else inf, "max_pf": float(pf.max()) if pf.size else -inf,
            "min_p1": float(p1.min()) if p1.size else inf, "max_p1": float(p1.max()) if p1.size else -inf,
            "min_p0": float(p0.min()) if p0.size else inf, "max_p0": float(p0.max()) if p0.size else -inf}


def _val_prob_problem(s: dict) -> str | None:
    """The ValueError message val_prob gives for these rows (its checks on sums), or None."""
    n, n1 = s["n"], s["n1"]
    if n < 3:
        return f"p and y need at least 3 rows, got {n}"
    if n1 == 0 or n1 == n:
        return "y must contain both 0 and 1: the C index and the calibration fits are undefined"
    if s["min_p"] == s["max_p"]:
        return "p has a single distinct value: the calibration slope is not identifiable"
    nf, n1f = s["nf"], s["n1f"]
    k = n - nf
    where = (f" among the {nf} rows with 0 < p < 1 (the {k} rows with p exactly 0 or 1 have an infinite logit "
             "and are left out of the logistic fits)") if k else ""
    if nf == 0 or n1f in (0, nf):
        return "y must contain both 0 and 1" + where + ": the calibration intercept and slope are undefined"
    if s["min_pf"] == s["max_pf"]:
        return "p has a single distinct value" + where + ": the calibration slope is not identifiable"
    if s["min_p1"] >= s["max_p0"] or s["max_p1"] <= s["min_p0"]:
        return ("p separates y" + where + " (completely or quasi-completely: every event has p >= every "
                "non-event, or <=): the calibration intercept and slope have no finite maximum-likelihood "
                "estimate")
    return None


# --------------------------------------------------------------------------- the logistic fits
def _cell_sums(p: np.ndarray, y: np.ndarray) -> dict:
    """The first pass's sums for the fits' starting values: rows, events and logit(p) per cell of logit(p).

    :func:`calibtest.checks.logistic_fits.logit_cell_sums` of the rows with
    0 < p < 1, keys prefixed ``cells_``.
    """
    fin = (p > 0.0) & (p < 1.0)
    pf = p[fin]
    cells = logit_cell_sums(np.rint(y[fin]), np.log(pf / (1.0 - pf)))
    return {f"cells_{key}": value for key, value in cells.items()}


def _fit_sums(p: np.ndarray, y: np.ndarray, joint: np.ndarray, citl: float) -> dict:
    """X'WX, X'(y - mu) and the log-likelihood of the joint fit a + b L and of CITL a0 + L at the given values."""
    fin = (p > 0.0) & (p < 1.0)
    pf, yf = p[fin], np.rint(y[fin])
    logit = np.log(pf / (1.0 - pf))
    out = {}
    for name, eta in (("j", joint[0] + joint[1] * logit), ("c", citl + logit)):
        mu = 1.0 / (1.0 + np.exp(-eta))
        w = mu * (1.0 - mu)
        r = yf - mu
        out[f"{name}_ll"] = float(np.sum(yf * eta - np.logaddexp(0.0, eta)))
        if name == "j":
            out["j_info"] = np.array([[w.sum(), w @ logit], [w @ logit, w @ (logit * logit)]])
            out["j_score"] = np.array([r.sum(), r @ logit])
        else:
            out["c_info"] = np.array([[w.sum()]])
            out["c_score"] = np.array([r.sum()])
    return out


class _Newton:
    """Newton-Raphson on a logistic log-likelihood from sums, with step halving."""

    def __init__(self, start):
        self.point = None  # the accepted point, its log-likelihood, information and step
        self.candidate = np.asarray(start, dtype=float)
        self.done = False
        self.failed = False
        self.halvings = 0

    def update(self, ll: float, info: np.ndarray, score: np.ndarray) -> None:
        if self.point is not None and not (ll >= self.point[1] - 1e-12 * abs(self.point[1])):
            self.halvings += 1  # the step raised the deviance: halve it
            if self.halvings > 40:
                self.failed = True
                return
            beta, _, _, step = self.point
            self.candidate = beta + step * 0.5 ** self.halvings
            return
        self.halvings = 0
        try:
            step = np.linalg.solve(info, score)
        except np.linalg.LinAlgError:
            self.failed = True
            return
        self.point = (self.candidate, ll, info, step)
        if np.all(np.abs(step) <= _STEP_TOL * (1.0 + np.abs(self.candidate))) or not np.all(np.isfinite(step)):
            self.done = bool(np.all(np.isfinite(step)))
            self.failed = not self.done
            self.estimate = self.candidate + step
            return
        self.candidate = self.candidate + step

    def result(self, alpha: float):
        beta, ll, info, _ = self.point
        cov = np.linalg.inv(info)
        se = np.sqrt(np.diag(cov))
        q = float(sps.norm.ppf(1.0 - alpha / 2.0))
        return self.estimate, se, [(float(b - q * s), float(b + q * s)) for b, s in zip(self.estimate, se)], ll


# --------------------------------------------------------------------------- Hosmer-Lemeshow groups
def _group_starts(n: int, groups: int) -> np.ndarray:
    """First rank of each group of ``numpy.array_split`` (the first n mod g groups one row longer)."""
    sizes = np.full(groups, n // groups)
    sizes[: n % groups] += 1
    return np.concatenate(([0], np.cumsum(sizes)))[:-1]


def _keys(p: np.ndarray) -> np.ndarray:
    return p.view(np.uint64)  # monotone in p for non-negative floats (-0.0 was made +0.0)


class _Select:
    """Exact order statistics of the predictions by radix selection over passes (see the module docstring)."""

    def __init__(self, ranks):
        # per wanted rank: [rank left within the cell, cell prefix, bits of the prefix, rows below the cell]
        self.todo = {int(r): [int(r), 0, 0, 0] for r in ranks}
        self.found = {}  # rank -> (value, rows below it, rows equal to it)

    @property
    def done(self) -> bool:
        return not self.todo

    def _cells(self):
        return sorted({(prefix, bits) for _, prefix, bits, _ in self.todo.values()})

    def plan(self, counts: dict | None = None):
        """What the next pass does per cell: ``("hist", prefix, bits)`` or ``("collect", prefix, bits)``."""
        return [("collect" if counts is not None and counts.get(cell, math.inf) <= COLLECT_MAX else "hist",)
                + cell for cell in self._cells()]

    @staticmethod
    def step(plan, p: np.ndarray) -> dict:
        keys = _keys(p)
        out = {}
        for what, prefix, bits in plan:  # a loop over the few cells (at most the groups)
            sub = keys if bits == 0 else keys[(keys >> np.uint64(64 - bits)) == np.uint64(prefix)]
            if what == "collect":
                out[f"list_{prefix}_{bits}"] = [sub]
            else:
                digit = (sub >> np.uint64(48 - bits)) & np.uint64(0xFFFF)
                out[f"hist_{prefix}_{bits}"] = np.bincount(digit.astype(np.intp), minlength=1 << 16)
        return out

    def advance(self, plan, sums: dict) -> dict:
        """Use a pass's sums; return the row count of each cell the next pass looks at."""
        counts = {}
        for what, prefix, bits in plan:
            wanted = [r for r, st in self.todo.items() if (st[1], st[2]) == (prefix, bits)]
            if what == "collect":
                values = np.sort(np.concatenate(sums[f"list_{prefix}_{bits}"]))
                for r in wanted:
                    left, _, _, below = self.todo.pop(r)
                    key = values[left]
                    lo, hi = np.searchsorted(values, key, "left"), np.searchsorted(values, key, "right")
                    self.found[r] = (float(key.view(np.float64)), below + int(lo), int(hi - lo))
                continue
            hist = sums[f"hist_{prefix}_{bits}"]
            cum = np.cumsum(hist)
            for r in wanted:
                left, _, _, below = self.todo[r]
                digit = int(np.searchsorted(cum, left, side="right"))
                before = int(cum[digit - 1]) if digit else 0
                cell = (prefix << 16) | digit
                if bits + 16 == 64:  # a single key: the value itself
                    self.todo.pop(r)
                    self.found[r] = (float(np.uint64(cell).view(np.float64)), below + before, int(hist[digit]))
                else:
                    self.todo[r] = [left - before, cell, bits + 16, below + before]
                    counts[(cell, bits + 16)] = int(hist[digit])
        return counts


@dataclass
class _Groups:
    """How each row's HL group is found from its prediction (and, inside a split tie, its position).

    A prediction equal to no group's first value is in group #{first values below it}; one equal to a
    first value v has rank ``below(v) + (its rank among the rows tied at v)``, constant over the tie
    unless a group starts inside it (``split``), where the rows' positions order the tie.
    """

    values: np.ndarray  # the value of each group's first row, groups 1..g-1
    starts: np.ndarray  # the first rank of groups 1..g-1
    below: dict  # each distinct first value -> rows below it
    split: set  # the first values whose tie a group boundary splits
    offsets: dict | None = None  # chunk index -> {split value: its tied rows in the chunks before}

    def of(self, p: np.ndarray, index: int) -> np.ndarray:
        group = np.searchsorted(self.values, p, side="left")
        for value, below in self.below.items():  # a loop over the few first values
            tied = p == value
            if value in self.split:
                rank = below + self.offsets[index][value] + np.cumsum(tied)[tied] - 1
                group[tied] = np.searchsorted(self.starts, rank, side="right")
            else:
                group[tied] = np.searchsorted(self.starts, below, side="right")
        return group


def _tie_counts(split, p, y, start, index) -> dict:
    return {"list_ties": [(index, {v: int(np.count_nonzero(p == v)) for v in split})]}


def _group_step(groups: _Groups, n_groups: int, p, y, start, index) -> dict:
    g = groups.of(p, index)
    u = (y - p)[:, None]
    return {"count": np.bincount(g, minlength=n_groups).astype(float),
            "obs": np.bincount(g, weights=y, minlength=n_groups),
            "exp": np.bincount(g, weights=p, minlength=n_groups),
            "exp_non": np.bincount(g, weights=1.0 - p, minlength=n_groups),
            "stats_g": bin_sums(g, np.arange(n_groups)[:, None], u, p[:, None])}


def _hl_result(sums: dict, res, groups: int) -> HosmerLemeshowResult:
    """The HL result of :func:`calibtest.checks.hosmer_lemeshow.hosmer_lemeshow` from the group sums (external)."""
    obs, exp_, exp_non, sizes = sums["obs"], sums["exp"], sums["exp_non"], sums["count"]
    freqs = np.column_stack([obs, sizes - obs])
    probs = np.column_stack([exp_, exp_non])
    with np.errstate(divide="ignore", invalid="ignore"):
        cells = (freqs - probs) ** 2 / probs
    zero = probs == 0
    cells[zero] = 0.0
    cells[zero & (freqs != probs)] = np.inf
    chi2 = cells.sum(axis=1)
    statistic = float(chi2.sum())
    p_dev, p_ext = float(sps.chi2.sf(statistic, groups - 2)), float(sps.chi2.sf(statistic, groups))
    gstats = sums["stats_g"]
    n = res.n
    table = pd.DataFrame({"group": np.arange(1, groups + 1), "n": sizes.astype(np.int64),
                          "mean_pred": exp_ / sizes, "observed": obs, "expected": exp_,
                          "observed_rate": obs / sizes, "chi2": chi2})
    return HosmerLemeshowResult(
        statistic=statistic, pvalue=p_ext, df=groups, pvalue_df_groups=p_ext, pvalue_df_groups_minus_2=p_dev,
        validation="external", groups=groups, table=table,
        plugin_estimate=plugin_statistic(res.bin_stats, n), debiased_estimate=debiased_statistic(res.bin_stats, n),
        plugin_estimate_groups=plugin_statistic(gstats, n), debiased_estimate_groups=debiased_statistic(gstats, n),
        n=n, n_bins=res.n_bins, mode=res.mode, formula=res.formula, y_name=res.y_name,
        prob_names=tuple(res.prob_names), n_dropped=res.n_dropped)


# --------------------------------------------------------------------------- val_prob from sums
def _val_prob_result(s: dict, joint, citl, alpha: float, res) -> ValProbResult:
    (ab, ab_se, ab_ci, ll_joint), (a0, a0_se, a0_ci, _) = joint, citl
    n, nf, n1f = s["n"], s["nf"], s["n1f"]
    z = s["sp_num"] / math.sqrt(s["sp_var"])
    dev_null = -2.0 * (n1f * math.log(n1f / nf) + (nf - n1f) * math.log((nf - n1f) / nf))
    dev_p, dev_recal = -2.0 * s["loglike_f"], -2.0 * ll_joint
    d_chisq, u_chisq = dev_null - dev_p, dev_p - dev_recal
    d_index, u_index = (d_chisq - 1.0) / nf, (u_chisq - 2.0) / nf
    nan = math.nan
    parts = _LazyParts({
        "likelihood": lambda: {"r2": float(-math.expm1(-d_chisq / nf) / -math.expm1(-dev_null / nf)),
                               "d": float(d_index), "d_chisq": float(d_chisq),
                               "d_p": float(sps.chi2.sf(d_chisq, 1)), "u": float(u_index),
                               "u_chisq": float(u_chisq), "u_p": float(sps.chi2.sf(u_chisq, 2)),
                               "q": float(d_index - u_index)},
        "discrimination": lambda: {"auc": nan, "c_statistic": nan, "dxy": nan},
        "smooth": lambda: {"emax": nan, "e90": nan, "eavg": nan},
        "auc_interval": lambda: {"auc_se": nan, "auc_ci": (nan, nan)},
        "observed_expected": lambda: _observed_expected_part(s["sum_y"], s["sum_p"], n, alpha),
        "loess": lambda: {"loess_e50": nan, "loess_e90": nan, "loess_ici": nan, "loess_emax": nan}})
    return ValProbResult(
        n=int(n), n_events=int(s["n1"]), n_infinite_logit=int(n - nf), alpha=alpha, brier=s["brier"] / n,
        intercept=float(ab[0]), slope=float(ab[1]), intercept_se=float(ab_se[0]), slope_se=float(ab_se[1]),
        intercept_ci=ab_ci[0], slope_ci=ab_ci[1], citl=float(a0[0]), citl_se=float(a0_se[0]), citl_ci=a0_ci[0],
        spiegelhalter_z=z, spiegelhalter_p=float(2.0 * sps.norm.sf(abs(z))), formula=res.formula,
        y_name=res.y_name, prob_names=tuple(res.prob_names), n_dropped=res.n_dropped, _parts=parts)


# --------------------------------------------------------------------------- the passes
def _first_step(plan, sensitivity: tuple, p, y, start, index) -> dict:
    """The first pass: the per-row sums, the selection's first histogram, the cell sums of the fits' starting
    values and the bin accumulators of the bin-sensitivity rows (``sensitivity``: the bin counts and K)."""
    y = np.rint(y)
    return {**_row_sums(p, y), **_Select.step(plan, p), **_cell_sums(p, y),
            "accs_sensitivity": _bin_step(*sensitivity, p, y)}


def _next_step(plan, joint, citl, fits: bool, p, y, start, index) -> dict:
    out = _Select.step(plan, p) if plan else {}
    if fits:
        out.update(_fit_sums(p, np.rint(y), joint, citl))
    return out


@dataclass
class _Passes:
    """What :func:`_sums_and_fits` finds: the per-row sums, the two logistic fits (``(estimate, se, intervals,
    log-likelihood)`` or None), the HL order statistics, val_prob's and HL's problems (None: computed), the
    number of passes and the bin accumulators of the bin-sensitivity rows."""

    sums: dict
    joint: tuple | None
    citl: tuple | None
    found: dict
    vp_problem: str | None
    hl_problem: str | None
    passes: int
    sensitivity: list


def _sums_and_fits(rows: StreamedRows, res, alpha: float) -> _Passes:
    """The per-row sums, the two logistic fits, the exact HL cut points and the bin-sensitivity accumulators of
    the rows of ``res``, over as few passes as they need (the fits from the first pass's binned fits)."""
    n = res.n
    hl_problem = None if 3 <= HL_GROUPS <= n else f"groups must be between 3 and n = {n}, got {HL_GROUPS}"
    select = _Select(_group_starts(n, HL_GROUPS)[1:] if hl_problem is None else [])
    plan = select.plan()
    sensitivity = (_sensitivity_bins(res), res.n_classes)
    first = rows.run(lambda p, y, s, i: _first_step(plan, sensitivity, p, y, s, i), _add)
    sums = {k: v for k, v in first.items() if not (k.startswith(("hist_", "list_", "cells_", "accs_")))}
    vp_problem = _val_prob_problem(sums)
    fits = vp_problem is None
    passes = 1
    counts = select.advance(plan, first)
    joint, citl = (_Newton(start) for start in
                   (binned_starts({k[6:]: v for k, v in first.items() if k.startswith("cells_")}) if fits
                    else ([0.0, 1.0], [0.0])))
    while not select.done or (fits and not (joint.done and citl.done)):
        if fits and (joint.failed or citl.failed or passes >= _MAX_PASSES):
            vp_problem, fits = "the logistic calibration fit did not converge", False
            continue
        plan = select.plan(counts)
        jc, cc = joint.candidate, citl.candidate[0]
        part = rows.run(lambda p, y, s, i: _next_step(plan, jc, cc, fits, p, y, s, i), _add) or {}
        passes += 1
        counts = select.advance(plan, part) if plan else {}
        if fits:
            if not joint.done:
                joint.update(part["j_ll"], part["j_info"], part["j_score"])
            if not citl.done:
                citl.update(part["c_ll"], part["c_info"], part["c_score"])
    fitted = (joint.result(alpha), citl.result(alpha)) if fits else (None, None)
    return _Passes(sums, fitted[0], fitted[1], select.found, vp_problem, hl_problem, passes,
                   first["accs_sensitivity"])


def _hl_groups(rows: StreamedRows, found: dict, n: int, res, groups_: int = HL_GROUPS
               ) -> tuple[HosmerLemeshowResult, int]:
    """The HL result from the exact cut points: a pass counting split ties if any, then the group sums."""
    starts = _group_starts(n, groups_)[1:]
    values = np.array([found[int(r)][0] for r in starts])
    below = {found[int(r)][0]: found[int(r)][1] for r in starts}
    split = {found[int(r)][0] for r in starts
             if any(found[int(r)][1] < s < found[int(r)][1] + found[int(r)][2] for s in starts)}
    groups = _Groups(values, starts, below, split)
    passes = 0
    if split:
        ties = rows.run(lambda p, y, s, i: _tie_counts(split, p, y, s, i), _add)["list_ties"]
        passes += 1
        running = dict.fromkeys(split, 0)
        groups.offsets = {}
        for index, counts in sorted(ties, key=lambda t: t[0]):
            groups.offsets[index] = dict(running)
            for v in split:
                running[v] += counts[v]
    sums = rows.run(lambda p, y, s, i: _group_step(groups, groups_, p, np.rint(y), s, i), _add)
    return _hl_result(sums, res, groups_), passes + 1


def streamed_hosmer_lemeshow(rows: StreamedRows, res, groups: int = HL_GROUPS,
                             validation: str = "external") -> HosmerLemeshowResult:
    """Hosmer-Lemeshow with ``groups`` groups on the rows of a streamed result (``res.hosmer_lemeshow()``).

    The exact group boundaries by radix selection (a few passes), then the
    group sums: the result of :func:`calibtest.hosmer_lemeshow` on the same rows.
    """
    if not (is_integer(groups) and not isinstance(groups, bool)):
        raise TypeError(f"groups must be an integer, got {groups!r}")
    if validation not in ("external", "development"):
        raise ValueError(f"validation must be 'external' or 'development', got {validation!r}")
    n = res.n
    if not 3 <= groups <= n:
        raise ValueError(f"groups must be between 3 and n = {n}, got {groups}")
    select = _Select(_group_starts(n, groups)[1:])
    counts = None
    while not select.done:
        plan = select.plan(counts)
        counts = select.advance(plan, rows.run(lambda p, y, s, i: _Select.step(plan, p), _add))
    hl, _ = _hl_groups(rows, select.found, n, res, int(groups))
    if validation == "development":
        hl = dataclasses.replace(hl, validation="development", df=hl.groups - 2, pvalue=hl.pvalue_df_groups_minus_2)
    return hl


def _sensitivity_bins(res) -> list:
    """The bin counts of the bin-sensitivity rows below the interval's own B."""
    return [b for b in SENSITIVITY_BINS if b < res.n_bins]


def _sensitivity_rows(accs: list, res, alpha: float) -> tuple[pd.DataFrame, list]:
    """The bin-sensitivity table from the per-B bin sums ``accs`` of the first pass (the interval's null, from
    the sums)."""
    bins = _sensitivity_bins(res)
    null = "auto" if res.null == "conditional" else res.null
    notes = []
    out = []
    for b, acc in zip(bins, accs):
        r = acc.result(alpha, null=null)
        if r.null != res.null:
            notes.append(b)
        iv = r.conf_int(alpha)
        out.append({"n_bins": int(r.n_bins), "T": float(r.estimate), "lower": float(iv.lower),
                    "upper": float(iv.upper), "lower_open": bool(iv.lower_open), "pvalue": float(r.null_pvalue),
                    "reject": bool(not iv.contains_zero)})
    iv = res.conf_int(alpha)
    out.append({"n_bins": int(res.n_bins), "T": float(res.estimate), "lower": float(iv.lower),
                "upper": float(iv.upper), "lower_open": bool(iv.lower_open), "pvalue": float(res.null_pvalue),
                "reject": bool(not iv.contains_zero)})
    return pd.DataFrame(out), notes


def _bin_step(bins, n_classes, p, y):
    accs = []
    for b in bins:  # a loop over the few bin counts
        acc = BinAccumulator(n_bins=b, n_classes=n_classes, null="conditional")
        acc.update(y=np.rint(y), probs=p)
        accs.append(acc)
    return accs


def _merge_accs(a, b):
    return [x.merge(y) for x, y in zip(a, b)]


def streamed_evidence(rows: StreamedRows, res, alpha: float, rng):
    """The evidence of a streamed result (see the module docstring): :class:`~calibtest.EvidenceResult`.

    Parameters
    ----------
    rows : StreamedRows
        The rows of ``res``, to be read again.
    res : CalibrationResult
        The streamed interval (binary or top-1).
    alpha : float
    rng : None or int
        Seed of the multi-scale test's label draws (None: :func:`~calibtest.checks.evidence_table.evidence_seed`).
    """
    if not res.mode.one_dimensional:
        raise ValueError(f"the evidence on a file or Dask DataFrame needs a binary or top-1 target; for "
                         f"{res.mode} the multi-scale test needs the rows in memory: read the columns into a "
                         "pandas DataFrame")
    if rng is not None and not is_integer(rng):
        raise TypeError(f"rng must be None or an int seed on a file or Dask DataFrame (the label draws are keyed "
                        f"by it), got {type(rng).__name__}")
    seed = evidence_seed(res) if rng is None else int(rng)
    test = stream_calib_test(rows.again(), rows.formula, n_bins="adaptive", alpha=alpha, n_draws=DEFAULT_DRAWS,
                             rng=seed, combine="max-z", spiegelhalter=None, **rows.stream_options())
    found = _sums_and_fits(rows, res, alpha)
    missing = []
    hl = None
    if found.hl_problem is None:
        hl, _ = _hl_groups(rows, found.found, res.n, res)
    else:
        missing.append(f"Hosmer-Lemeshow was not computed: {found.hl_problem}.")
    vp = None
    if found.vp_problem is None:
        vp = _val_prob_result(found.sums, found.joint, found.citl, alpha, res)
    else:
        missing.append(f"{_VALPROB_MISSING}{found.vp_problem}.")
    sens, fallback = _sensitivity_rows(found.sensitivity, res, alpha)
    if fallback:
        missing.append(f"Bin sensitivity at B = {', '.join(map(str, fallback))}: the conditional null's skewness "
                       "exceeds 3 there, where rows in memory draw the Monte Carlo null; a stream uses the "
                       "asymptotic one.")
    missing.append(NOT_STREAMED)
    return assemble_evidence(res, alpha, seed, test=test, hl=hl, vp=vp, sens=sens, scope=" ".join(missing))

