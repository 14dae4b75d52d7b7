"""The multi-scale test of :func:`calibtest.calib_test` on a stream of rows: files, Dask frames, chunks.

The label draws come from the counter-based stream of
:func:`calibtest.core.counter_draws.counter_labels`, keyed by the seed and each
row's position among the usable rows (0, 1, ... in reading order), and are
reduced chunk by chunk to additive per-draw bin sums
(:class:`calibtest.core.counter_draws.DrawSums`); the conditional sd of each
scale comes from the additive per-bin sums of the conditional moments.  So
the p-value for a seed does not depend on the chunk size or the partitioning
(the float sums agree to rounding, about 1e-16 relative), and the test keeps
its exact size: the observed labels and the R draws are exchangeable given
the predictions.

Limits.  Binary and top-1 targets with the equal-width scales (the default
``partitions``); equal-mass scales need the quantiles of every prediction
before the first chunk and top-k / full calibration have no 1-dim label
draws, so both are refused with a ValueError.  The bin counts are fixed
before reading: ``n_bins="adaptive"`` needs n (``n_rows=``; the file front
door takes it from Parquet metadata or a counting pass; on a Dask frame the
pass that counts each partition's usable rows, which numbers its rows, gives
it), an int or a sequence of ints needs nothing.  On a scale where
sd(T | Z) = 0 (the point-mass null) the sign of T is read from the sums
(|T| <= 1e-9 / n is 0), where the rows in memory use the rows themselves.

Memory: O(R x bins) for the sums plus about 100 bytes per row of a group of
chunks (:class:`calibtest.core.counter_draws.DrawSums`).
"""
from __future__ import annotations

import math
import os

import numpy as np

from calibtest.display.format import Call
from calibtest.inputs.validation import DEFAULT_DRAWS
from calibtest.streams.accumulator import _prepare_rows
from calibtest.streams.dask_frames import _import_dask, _partition_usable, _tree, compute, dask_source, in_partition
from calibtest.streams.files import DataFile, _count_usable, each_chunk, open_data_file
from calibtest.checks.multiscale import (CalibrationTestResult, MultiScaleOptions, ScaleDraws, adaptive_grid, assemble_result,
                                         check_grid, check_test_null)
from calibtest.core.binning import cube_indices
from calibtest.core.counter_draws import DrawSums
from calibtest.core.gaussian_null import MAX_THIN_ROWS, CellSums, choose_null, gaussian_draws
from calibtest.core import gaussian_null
from calibtest.core.progress import progress_bar
from calibtest.core.conditional import (conditional_moments, conditional_sum_columns,
                                        conditional_sums_from_columns, counter_key, label_classes)
from calibtest.inputs.formula import check_formula_names, formula_columns, freeze_env, resolve_env, thaw_env
from calibtest.inputs.rows import read_rows
from calibtest.options import check_option

__all__ = ["CalibTestAccumulator", "stream_calib_test"]



class CalibTestAccumulator:
    """The multi-scale test's sums over a stream of chunks (binary and top-1 targets, equal-width scales).

    Parameters
    ----------
    formula : str, optional
        As in :func:`calibtest.calib_test`; without it each chunk is given as ``y=``, ``probs=``.
    n_classes, k, alpha, n_draws, combine, spiegelhalter, missing
        As in :func:`calibtest.calib_test`.
    n_bins : "adaptive", int or sequence of int
        The grid.  ``"adaptive"`` needs ``n_rows``.
    n_rows : int, optional
        The number of usable rows of the whole stream (for ``n_bins="adaptive"``, and for ``null="auto"``,
        which takes the Gaussian null only when it says n >= 10^6).
    null : {"auto", "monte-carlo", "gaussian"}
        As in :func:`calibtest.calib_test`; the Gaussian null keeps the cell sums of
        :mod:`calibtest.core.gaussian_null` instead of the draws' sums.
    rng : None or int
        The seed of the counter-based label stream (None: the default seed 0, recorded).
    eval_env : int or patsy.EvalEnvironment
        Where the formula's names that are not columns are looked up.
    block : int
        Draws per run of the engine (:class:`calibtest.core.counter_draws.DrawSums`); the p-value does
        not depend on it.

    Notes
    -----
    Rows are numbered 0, 1, ... in the order :meth:`update` sees them (after ``missing="drop"``); the
    label of row i in draw r depends on (seed, i, r) only.  :meth:`update` may be called with chunks of
    any size; two accumulators over consecutive row ranges merge with :meth:`merge` when the second was
    created with ``start=`` the first's row count.
    """

    def __init__(self, formula: str | None = None, *, n_classes: int | None = None, k=None, n_bins="adaptive",
                 n_rows: int | None = None, alpha: float = 0.05, n_draws: int = DEFAULT_DRAWS, rng=None,
                 combine: str = "max-z", spiegelhalter: bool | None = None, missing: str = "raise",
                 eval_env=0, block: int = 128, start: int = 0, null: str = "auto"):
        self.formula, self.n_classes, self.k, self.alpha, self.missing = formula, n_classes, k, alpha, missing
        self.R = check_option("n_draws", n_draws)
        self.combine = check_option("combine", combine)
        self.spiegelhalter = check_option("spiegelhalter", spiegelhalter)
        grid = check_grid(n_bins)
        if grid is None:
            if n_rows is None:
                raise ValueError("n_bins='adaptive' on a stream needs the number of rows first: pass n_rows= "
                                 "(or an int or a list of bin counts as n_bins)")
            if int(n_rows) < 2:
                raise ValueError(f"n_rows must be at least 2, got {n_rows}")
            grid = adaptive_grid(int(n_rows), 1)
        self.grid = grid
        if rng is not None and not (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
            raise TypeError(f"rng must be None or an int seed on a stream (the counter-based draws are keyed "
                            f"by it), got {type(rng).__name__}")
        self.key, self.seed = counter_key(rng)
        self._env = resolve_env(eval_env) if isinstance(eval_env, int) else eval_env
        self.block = block
        self.start = int(start)
        self.widths = self._widths()
        self.null = check_test_null(null, "binary")
        gaussian = null == "gaussian" or (null == "auto" and n_rows is not None and int(n_rows) >= gaussian_null.GAUSSIAN_MIN_ROWS)
        self.cells = CellSums(self.widths) if gaussian else None  # the Gaussian null's sums instead of draws
        self.draws = DrawSums(self.key, self.widths, self.R if self.cells is None else 1, block=block)
        self.null_cols = [np.zeros((w, 4)) for w in self.widths]
        self.sp = np.zeros(2)  # sum p (1 - 2p), sum (1 - 2p)^2 p (1 - p)
        self.target = None
        self.n_dropped = 0

    def _widths(self) -> list:
        """Bin ids of each scale's partition: 0..B on the equal-width grid (a prediction of 1 is in bin B)."""
        return [b + 1 for b in self.grid]

    def _inverses(self, p: np.ndarray, z: np.ndarray) -> list:
        """Each row's bin on each scale."""
        return [cube_indices(z, b)[:, 0] for b in self.grid]  # a loop over the few scales

    def update(self, data=None, *, y=None, probs=None) -> "CalibTestAccumulator":
        """Add a chunk of rows (``data`` for a formula, else ``y=`` and ``probs=``); returns ``self``."""
        rows = read_rows(self.formula, data, y, probs, self._env, self.missing)
        self.n_dropped += rows.n_dropped
        if not rows.probs.shape[0]:
            return self
        prepared = _prepare_rows(rows.y, rows.probs, n_classes=self.n_classes, k=self.k,
                                 class_names=rows.class_names, y_name=rows.y_name, prob_names=rows.prob_names)
        target = (prepared.mode, prepared.k, prepared.n_classes, rows.y_name, tuple(rows.prob_names))
        if not prepared.mode.one_dimensional:
            raise ValueError(f"calib_test on a stream supports binary and top-1 targets; the {prepared.mode} "
                             "target has no 1-dim label draws: read the rows into memory")
        if self.target is None:
            self.target = target
        elif self.target != target:
            raise ValueError(f"chunk target {target} differs from the stream's {self.target}")
        z = prepared.z
        p = z[:, 0]
        inverses = self._inverses(p, z)
        if self.cells is not None:  # the Gaussian null: the cell sums hold T, sd and Spiegelhalter's z
            self.cells.add(self.start + self.cells.n, p, inverses, label_classes(prepared) == 0)
            self.draws.n += p.size
            return self
        for cols, inv, w in zip(self.null_cols, inverses, self.widths):  # a loop over the few scales
            cols += conditional_sum_columns(z, inv, w)
        q = 1.0 - 2.0 * p
        self.sp += (float(p @ q), float((q * q) @ (p * (1.0 - p))))
        # chunks of draw_chunk_rows(bins) rows from the chunk's first row, in groups (bounded memory)
        self.draws.add(self.start + self.draws.n, p, inverses, label_classes(prepared) == 0)
        return self

    def merge(self, other: "CalibTestAccumulator") -> "CalibTestAccumulator":
        """Add the sums of an accumulator over the rows that follow this one's (``other.start`` = this one's end)."""
        if (other.grid, other.R, other.seed) != (self.grid, self.R, self.seed) or \
                not np.array_equal(other.key, self.key):
            raise ValueError("merge needs accumulators with the same grid, n_draws and seed")
        if other.start != self.start + self.draws.n:
            raise ValueError(f"the merged rows must follow this accumulator's: other.start = {other.start}, "
                             f"expected {self.start + self.draws.n}")
        if self.target is None:
            self.target = other.target
        elif other.target is not None and other.target != self.target:
            raise ValueError(f"chunk target {other.target} differs from the stream's {self.target}")
        if (self.cells is None) != (other.cells is None):
            raise ValueError("merge needs accumulators with the same null")
        if self.cells is not None:
            self.cells.merge(other.cells)
            self.draws.n += other.draws.n
        else:
            self.draws.merge(other.draws)
        for mine, theirs in zip(self.null_cols, other.null_cols):
            mine += theirs
        self.sp += other.sp
        self.n_dropped += other.n_dropped
        return self

    @property
    def n(self) -> int:
        return self.draws.n

    def result(self, **bookkeeping) -> CalibrationTestResult:
        """The test from the sums: the result of :func:`calibtest.calib_test` on the same rows and seed."""
        n = self.n
        if n < 2 or self.target is None:
            raise ValueError(f"need at least n = 2 rows, got {n}")
        mode, k, n_classes, y_name, prob_names = self.target
        bookkeeping.setdefault("y_name", y_name)
        bookkeeping.setdefault("prob_names", prob_names)
        bookkeeping.setdefault("n_dropped", self.n_dropped)
        bookkeeping.setdefault("formula", self.formula)
        options = MultiScaleOptions(grid=self.grid, alpha=self.alpha, combine=self.combine,
                                    partitions=self._partitions_name())
        if self.cells is not None:
            scales = self._gaussian_scales()
            return assemble_result(scales, options, n=n, k=k, n_classes=n_classes, mode=mode, **bookkeeping)
        t_obs, t_draws, wq_obs, wq_draws = self.draws.statistics(n)
        sd = np.empty(len(self.null_cols))
        offsets = self.draws.offsets
        for i, cols in enumerate(self.null_cols):  # a loop over the few scales
            count = self.draws.count[offsets[i]:offsets[i + 1]]
            kept = count > 0
            sums = conditional_sums_from_columns(count[kept], cols[kept])
            sd[i] = math.sqrt(conditional_moments(sums, n).variance)
        tol = 1e-9 / n

        def sign_of(i: int) -> int:
            return 1 if t_obs[i] > tol else (-1 if t_obs[i] < -tol else 0)

        sp_z = sp_draws = None
        spiegelhalter = self.spiegelhalter is not False
        if spiegelhalter:
            center, var = self.sp
            if var > 0:
                sp_z, sp_draws = (wq_obs - center) / math.sqrt(var), (wq_draws - center) / math.sqrt(var)
            else:  # every p in {0, 1/2, 1}: the numerator counts labels of probability 0
                num = wq_obs - center
                sp_z, sp_draws = (math.inf if num > 0.5 else 0.0), np.zeros(self.R)
        scales = ScaleDraws(self._scale_labels(), t_obs, t_draws, sd, sign_of, sp_z, sp_draws, self.R, self.seed)
        return assemble_result(scales, options, n=n, k=k, n_classes=n_classes, mode=mode, **bookkeeping)

    @property
    def gaussian_usable(self) -> bool:
        """False when ``null="auto"`` took the Gaussian sums but too many rows sit in thin cells (the Monte
        Carlo null is then needed: :func:`stream_calib_test` reads the file again)."""
        return self.cells is None or self.null == "gaussian" or \
            choose_null(self.cells.n, self.cells.thin_rows) == "gaussian"

    def _gaussian_scales(self) -> ScaleDraws:
        """T, sd and the draws of the Gaussian null (:mod:`calibtest.core.gaussian_null`)."""
        if not self.gaussian_usable:
            raise ValueError(f"{self.cells.thin_rows} rows sit in thin cells, more than the Gaussian null's "
                             f"{MAX_THIN_ROWS}: use null='monte-carlo'")
        with progress_bar(self.R, "Gaussian null (thin cells)", unit="draw",
                          work=float(self.cells.thin_rows) * self.R, min_work=gaussian_null.PROGRESS_MIN_DRAWS) as bar:
            g = gaussian_draws(self.cells, self.key, self.R, bar)
        tol = 1e-9 / self.n
        spiegelhalter = self.spiegelhalter is not False

        def sign_of(i: int) -> int:
            return 1 if g.statistic[i] > tol else (-1 if g.statistic[i] < -tol else 0)

        return ScaleDraws(self._scale_labels(), g.statistic, g.null_draws, g.sd, sign_of,
                          g.spiegelhalter if spiegelhalter else None, g.spiegelhalter_draws if spiegelhalter else None,
                          self.R, self.seed, null="gaussian")

    def _scale_labels(self) -> list:
        """(family, B) of each scale, in the order of the draws' partitions."""
        return [("equal-width", b) for b in self.grid]

    def _partitions_name(self) -> str:
        """The ``partitions`` option the scales come from."""
        return "equal-width"


def _stream_call(formula, name: str, options: dict) -> Call:
    shown = {key: value for key, value in options.items() if value is not None}
    return Call("calib_test", (repr(formula), f"data={name!r}"), shown)


def stream_calib_test(data, formula: str, *, env, chunksize: int | None = None, n_bins="adaptive",
                      missing: str = "raise", **options) -> CalibrationTestResult:
    """:func:`calibtest.calib_test` on a CSV/Parquet file path or a Dask DataFrame, chunk by chunk.

    ``n_bins="adaptive"`` first takes n from the Parquet metadata (``missing="raise"``) or a counting
    pass.  A Dask frame is reduced partition by partition on its scheduler: a first pass counts each
    partition's usable rows (so its rows are numbered from its first row's position, and n is known),
    then each partition's sums are computed and adjacent partitions' sums merged in order.  The p-value for a seed equals the one
    of the same rows in memory read in any chunks (to the rounding of the float sums).
    """
    if isinstance(data, (str, os.PathLike, DataFile)):
        return _file_test(data, formula, env=env, chunksize=chunksize, n_bins=n_bins,
                          missing=missing, **options)
    return _dask_test(data, formula, env=env, n_bins=n_bins, missing=missing, **options)


def _file_test(path, formula, *, env, chunksize, n_bins, missing, **options):
    file = open_data_file(path, formula, env, chunksize)
    columns = formula_columns(formula, file.columns)
    n_rows = None
    metadata = file.fmt == "parquet" and missing == "raise"  # n without a pass
    if check_grid(n_bins) is None:
        n_rows = file.reader.num_rows if metadata else _count_usable(file, columns, formula, env, missing)
        if n_rows < 2:
            raise ValueError(f"need at least n = 2 rows, got {n_rows} in {file.name}")
    elif metadata and options.get("null", "auto") == "auto":  # null="auto" chooses by n (a CSV keeps the draws)
        n_rows = file.reader.num_rows
    acc = CalibTestAccumulator(formula, n_bins=n_bins, n_rows=n_rows, missing=missing, eval_env=env, **options)
    each_chunk(file, columns, acc.update, digest=True, progress=None)
    if not acc.gaussian_usable:  # too many rows in thin cells for the Gaussian null: the label draws
        options["null"] = "monte-carlo"
        acc = CalibTestAccumulator(formula, n_bins=n_bins, n_rows=n_rows, missing=missing, eval_env=env, **options)
        each_chunk(file, columns, acc.update, digest=True, progress=None)
    null = options.get("null", "auto")
    return acc.result(call_record=_stream_call(formula, file.name, {"n_bins": None if n_bins == "adaptive"
                                                                     else n_bins, "rng": acc.seed,
                                                                     "null": None if null == "auto" else null}),
                      source=file.source(columns))


def _partition_test(formula, namespace, missing, settings: dict, index: int, start: int, *parts):
    """The sums of consecutive Dask partitions (the first is partition ``index``), their rows numbered from
    ``start``, in one accumulator (runs on a worker)."""
    acc = CalibTestAccumulator(formula, missing=missing, eval_env=thaw_env(namespace), start=start, **settings)
    acc.draws.threads = 1  # a worker's thread budget is the cluster's to set
    for i, part in enumerate(parts):  # a loop over the few partitions of one task
        try:
            acc.update(part)
        except (ValueError, TypeError) as exc:
            raise in_partition(exc, index + i) from exc
    acc._env = None  # patsy's environment does not pickle, and merging and the result need only the sums
    return acc


def _merge_in_order(*accs: CalibTestAccumulator) -> CalibTestAccumulator:
    first = accs[0]
    for acc in accs[1:]:  # adjacent partitions, in order
        first.merge(acc)
    return first


def _dask_test(ddf, formula, *, env, n_bins, missing, split_every: int = 8, **options):
    dask, dd = _import_dask()
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"Dask input must be a dask.dataframe.DataFrame, got {type(ddf).__name__}")
    check_formula_names(formula, list(ddf.columns), env, where="the Dask DataFrame")
    columns = formula_columns(formula, list(ddf.columns))
    ddf = ddf[columns]
    namespace = freeze_env(formula, env, columns)
    parts = ddf.to_delayed()
    counts = compute(*[dask.delayed(_partition_usable)(formula, namespace, missing, part, i)
                       for i, part in enumerate(parts)], desc="Dask: counting rows")
    n_rows = int(sum(counts))
    if n_rows < 2:
        raise ValueError(f"need at least n = 2 rows, got {n_rows} in the Dask DataFrame")
    rng = options.pop("rng", None)
    seed = counter_key(rng)[1] if rng is None else rng  # one seed for every partition
    grid = check_grid(n_bins)
    settings = dict(options, rng=seed, n_bins=adaptive_grid(n_rows, 1) if grid is None else grid, n_rows=n_rows)
    starts = np.concatenate(([0], np.cumsum(counts)))[:-1]

    def reduce(settings):
        # a task per run of split_every consecutive partitions: an accumulator holds R x bins sums (about 200 MB
        # at n = 10^8), so fewer of them are built, shipped and merged, two at a time
        leaves = [dask.delayed(_partition_test)(formula, namespace, missing, settings, i, int(starts[i]),
                                                *parts[i:i + split_every])
                  for i in range(0, len(parts), split_every)]
        return compute(_tree(leaves, _merge_in_order, 2), desc="Dask: label draws")[0]

    acc = reduce(settings)
    if not acc.gaussian_usable:  # too many rows in thin cells for the Gaussian null: the label draws
        acc = reduce(dict(settings, null="monte-carlo"))
    return acc.result(call_record=_stream_call(formula, "<Dask DataFrame>", {"n_bins": None if n_bins == "adaptive"
                                                                              else n_bins, "rng": seed}),
                      source=dask_source(ddf, columns, acc.n + acc.n_dropped, passes=2))
