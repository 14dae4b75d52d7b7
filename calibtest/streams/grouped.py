"""Per-group bin sums of a file or a Dask frame: ``calib_ci(..., by=...)`` out of core.

The automatic B of each group depends on the group's own n
(:func:`calibtest.core.binning.auto_n_bins`), and rows are binned as they
arrive, so the group sizes come first: one cheap pass counts the usable rows
of every group (a file: only the ``by`` columns are read with
``missing="raise"``, the formula's columns too with ``missing="drop"``,
which decides the rows kept; a Dask frame: the same count per partition,
reduced), then one pass bins every chunk (partition) once per group at that
group's B into a :class:`GroupedAccumulator` of additive per-group sums, and
the pooled rows at the pooled B.  A fixed integer ``n_bins`` needs no
counting pass.  Each group's sums are those of its rows in memory (the same
bins, the same conditional-moment sums ``BinStats.null_sums``), so the
grouped result equals the in-memory one up to the order of floating-point
additions; with them a companion sum per bin, sum ||U||^4, gives the
second-order variance of the heterogeneity test, which otherwise needs
the rows.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from math import factorial

import numpy as np
import pandas as pd

from calibtest.inputs.validation import check_memory
from calibtest.streams.accumulator import _prepare_rows
from calibtest.streams.dask_frames import _import_dask, _scheduler_name, _tree, compute, on_partition, partition_sums
from calibtest.streams.files import each_chunk, open_data_file
from calibtest.core.binning import resolve_n_bins
from calibtest.core.binstats import BinStats, bin_sums, merge_stats
from calibtest.core.conditional import conditional_memory, conditional_sum_columns
from calibtest.core.partition import binned_dimension, partition_rows
from calibtest.core.targets import PreparedData, Target
from calibtest.ece.build_result import keeps_null_sums
from calibtest.inputs.formula import check_formula_names, formula_columns, freeze_env, resolve_env, thaw_env
from calibtest.inputs.settings import Settings
from calibtest.ece.group_engine import check_group_labels, group_labels, levels, subset_rows
from calibtest.inputs.rows import read_rows

__all__ = ["GroupSums", "GroupedAccumulator", "stream_file_groups", "dask_groups"]

#: Partial sums kept per group before they are merged into one.
_MERGE_EVERY = 16


@dataclasses.dataclass(frozen=True, eq=False)
class GroupSums:
    """What a streamed ``by=`` pass leaves: every group's bin sums, its counts, the pooled sums.

    Attributes
    ----------
    names : tuple of str
        The grouping columns.
    level_lists : list of list
        The levels of each grouping column, ordered as for rows in memory
        (:func:`calibtest.ece.group_engine.levels`: a categorical column's categories,
        unused ones included; otherwise the sorted distinct labels).
    stats : dict
        Group label -> its merged :class:`~calibtest.core.binstats.BinStats`.
    fourth : dict
        Group label -> per-bin sum of ||U||^4, aligned with ``stats[label]``.
    n_bins : dict
        Group label -> (B, rule).
    counts, events : dict
        Group label -> rows, and rows whose first outcome indicator is 1.
    pooled : BinStats
        The sums of all rows at the pooled B (``pooled_bins``).
    pooled_bins : tuple
        (B, rule) of the pooled rows.
    target : tuple
        (mode, k, n_classes, y_name, prob_names).
    n_dropped : int
        Rows dropped by ``missing="drop"``.
    source : dict
        The data source's description (file name, checksum, passes, ...).
    """

    names: tuple
    level_lists: list
    stats: dict
    fourth: dict
    n_bins: dict
    counts: dict
    events: dict
    pooled: BinStats
    pooled_bins: tuple
    target: tuple
    n_dropped: int
    source: dict


def _label_key(values: list, i: int):
    """Group label of row ``i`` (a level, or a tuple of levels for several columns)."""
    return values[0][i] if len(values) == 1 else tuple(v[i] for v in values)


def _codes(values) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of one grouping column of a chunk and the label of each code."""
    if isinstance(values, pd.Categorical):
        return values.codes.astype(np.int64), np.asarray(values.categories, dtype=object)
    codes, uniques = pd.factorize(np.asarray(values))
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _chunk_codes(names, values) -> tuple[np.ndarray, tuple, list]:
    """(flat group code of each row, the codes' shape, the labels of each column's codes) of a chunk."""
    check_group_labels(names, values)
    coded = [_codes(v) for v in values]
    shape = tuple(max(len(u), 1) for _, u in coded)
    return np.ravel_multi_index(tuple(c for c, _ in coded), shape), shape, [u for _, u in coded]


def _label(code: int, shape: tuple, uniques: list):
    parts = np.unravel_index(int(code), shape)
    levels_ = [u[int(j)] for u, j in zip(uniques, parts)]
    return levels_[0] if len(levels_) == 1 else tuple(levels_)


def _chunk_groups(names, values) -> tuple[np.ndarray, np.ndarray, list]:
    """Rows of a chunk sorted by group: (order, starts, labels), one label per group present."""
    flat, shape, uniques = _chunk_codes(names, values)
    small = flat.astype(np.uint16) if np.prod(shape) <= np.iinfo(np.uint16).max else flat
    order = np.argsort(small, kind="stable")  # a radix sort for 16-bit codes
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    present = np.flatnonzero(counts)
    starts = np.concatenate(([0], np.cumsum(counts[present])))
    return order, starts, [_label(c, shape, uniques) for c in present]


def _categories(values) -> list:
    """Per grouping column: its categories when categorical, else None."""
    return [list(v.categories) if isinstance(v, pd.Categorical) else None for v in values]


def count_groups(chunk, formula: str, by: list, env, missing: str) -> tuple[Counter, list, int]:
    """Usable rows per group of one chunk: (counts by label, categories per column, rows read).

    With ``missing="raise"`` only the ``by`` columns are needed (a missing
    value elsewhere raises in the binning pass); with ``"drop"`` the formula
    decides which rows are kept.
    """
    n_input = len(chunk)
    kept = None
    if missing == "drop":
        kept = read_rows(formula, chunk, None, None, env, missing).kept
    names, values = group_labels(by, chunk, n_input)
    if kept is not None:
        values = [v[kept] for v in values]
    if not len(values[0]):
        return Counter(), _categories(values), n_input
    flat, shape, uniques = _chunk_codes(names, values)
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    present = np.flatnonzero(counts)
    return (Counter({_label(c, shape, uniques): int(counts[c]) for c in present}), _categories(values), n_input)


def _fourth_sums(part, u: np.ndarray) -> BinStats:
    """Per-bin sum of ||U||^4 (in ``sum_u``) with the bin keys of ``part``."""
    q = np.einsum("ij,ij->i", u, u)
    col = (q * q)[:, None]
    return bin_sums(part.inverse, part.keys, col, np.zeros_like(col), count=part.counts)


class GroupedAccumulator:
    """Additive per-group bin sums of a stream of chunks (and of all rows pooled).

    Parameters
    ----------
    formula : str
    by : list of str
        Grouping columns of each chunk.
    group_rows : dict or None
        Group label -> usable rows (from the counting pass), which sets each
        group's B under ``n_bins="auto"``; None with an integer ``n_bins``.
    n_rows : int or None
        All usable rows (the pooled B under ``"auto"``).
    settings : Settings
        ``n_classes``, ``k``, ``n_bins``, ``missing``, ``null`` and ``env``
        (the formula's environment, resolved), as in :class:`~calibtest.BinAccumulator`.
    """

    def __init__(self, formula: str, by: list, settings: Settings, *, group_rows: dict | None,
                 n_rows: int | None):
        self.formula, self.by = formula, list(by)
        self.group_rows, self.n_rows = group_rows, n_rows
        self.n_classes, self.k, self.n_bins = settings.n_classes, settings.k, settings.n_bins
        self.missing, self.null = settings.missing, settings.null
        self._env = resolve_env(settings.env)
        self.target = None
        self.n_dropped = self.n_seen = 0
        self.parts: dict = {}       # label -> list of (BinStats, fourth BinStats)
        self.counts: Counter = Counter()
        self.events: dict = {}
        self.bins: dict = {}
        self.pooled: list = []
        self.categories = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_env"] = ("frozen", freeze_env(self.formula, self._env))
        return state

    def __setstate__(self, state: dict) -> None:
        state["_env"] = thaw_env(state["_env"][1])
        self.__dict__.update(state)

    def spawn(self) -> "GroupedAccumulator":
        """An empty accumulator with the same settings."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.target, new.n_dropped, new.n_seen, new.categories = None, 0, 0, None
        new.parts, new.counts, new.events, new.bins, new.pooled = {}, Counter(), {}, {}, []
        return new

    def _sums(self, sub: PreparedData, n_bins: int) -> tuple[BinStats, BinStats]:
        part = partition_rows(sub, n_bins)
        stats = part.bin_sums(sub)
        d = sub.z.shape[1]
        if keeps_null_sums(self.null, d):
            check_memory(conditional_memory(d, part.m), f"the conditional moments of T for {d} binned "
                         f"coordinates and {part.m} bins", "use fewer coordinates (a smaller k) or fewer bins, "
                         "or null='asymptotic'")
            stats = dataclasses.replace(stats, null_sums=conditional_sum_columns(sub.z, part.inverse, part.m))
        return stats, _fourth_sums(part, sub.u)

    def update(self, chunk) -> "GroupedAccumulator":
        """Bin a chunk of rows into its groups' sums and the pooled sums."""
        n_input = len(chunk)
        rows = read_rows(self.formula, chunk, None, None, self._env, self.missing)
        names, values = group_labels(self.by, chunk, n_input)
        if rows.kept is not None:
            values = [v[rows.kept] for v in values]
        self.n_dropped += rows.n_dropped
        self.n_seen += n_input
        if self.categories is None:
            self.categories = _categories(values)
        if not rows.probs.shape[0]:
            return self
        prepared = _prepare_rows(rows.y, rows.probs, n_classes=self.n_classes, k=self.k,
                                 class_names=rows.class_names, y_name=rows.y_name, prob_names=rows.prob_names)
        target = (prepared.mode, prepared.k, prepared.n_classes, rows.y_name, tuple(rows.prob_names))
        if self.target is None:
            self.target = target
        elif self.target != target:
            raise ValueError(f"rows of a different calibration target or columns cannot be combined: "
                             f"(mode, k, K, outcome, predictors) {target} vs {self.target}")
        pooled_part = partition_rows(prepared, self._pooled_bins()[0])
        pooled = pooled_part.bin_sums(prepared)
        if keeps_null_sums(self.null, prepared.z.shape[1]):
            pooled = dataclasses.replace(pooled, null_sums=conditional_sum_columns(prepared.z, pooled_part.inverse,
                                                                                   pooled_part.m))
        self.pooled = [merge_stats(self.pooled + [pooled])]
        order, starts, labels = _chunk_groups(names, values)
        for label, a, b in zip(labels, starts[:-1], starts[1:]):
            sub = subset_rows(prepared, order[a:b])
            if label not in self.bins:
                n_g = self.group_rows.get(label, 0) if self.group_rows is not None else 2
                self.bins[label] = self._group_bins(label, n_g)
            parts = self.parts.setdefault(label, [])
            parts.append(self._sums(sub, self.bins[label][0]))
            if len(parts) >= _MERGE_EVERY:
                self.parts[label] = [_merge_pairs(parts)]
            self.counts[label] += sub.n
            self.events[label] = self.events.get(label, 0) + int(np.rint(sub.y[:, 0]).sum())
        return self

    def _resolve(self, n: int) -> tuple[int, str]:
        """(B, rule) for n rows of the target, as :func:`calibtest.core.partition.partition_rows` resolves it."""
        mode, k = self.target[0], self.target[1]
        d = binned_dimension(mode, k)
        return resolve_n_bins(self.n_bins, max(int(n), 2), d, factorial(d) if Target(mode).full_calibration else 1)

    def _pooled_bins(self) -> tuple[int, str]:
        return self._resolve(self.n_rows if isinstance(self.n_bins, str) else 2)

    def _group_bins(self, label, n_g: int) -> tuple[int, str]:
        if isinstance(self.n_bins, str) and n_g == 0:
            raise ValueError(f"group {label!r} has rows now but had none in the counting pass: the data "
                             "changed while it was being read")
        return self._resolve(n_g)

    @classmethod
    def merge_all(cls, accs) -> "GroupedAccumulator":
        """Combine accumulators of disjoint rows (a tree-reduction step)."""
        accs = list(accs)
        out = accs[0].spawn()
        for acc in accs:
            if acc.target is not None:
                if out.target is not None and out.target != acc.target:
                    raise ValueError(f"rows of a different calibration target or columns cannot be combined: "
                                     f"{acc.target} vs {out.target}")
                out.target = acc.target
            out.n_dropped += acc.n_dropped
            out.n_seen += acc.n_seen
            if out.categories is None:
                out.categories = acc.categories
            for label, parts in acc.parts.items():
                out.parts.setdefault(label, []).extend(parts)
                out.bins[label] = acc.bins[label]
                out.counts[label] += acc.counts[label]
                out.events[label] = out.events.get(label, 0) + acc.events[label]
            out.pooled += acc.pooled
        out.parts = {label: [_merge_pairs(parts)] for label, parts in out.parts.items()}
        if out.pooled:
            out.pooled = [merge_stats(out.pooled)]
        return out

    def sums(self, source: dict) -> GroupSums:
        """The per-group sums with the group levels (raises when no row was usable)."""
        if self.target is None or not self.pooled:
            raise ValueError("no usable rows: every row was dropped or the data is empty")
        if self.group_rows is not None and dict(self.counts) != {lb: c for lb, c in self.group_rows.items() if c}:
            raise ValueError("the rows per group differ between the counting pass and the binning pass: the "
                             "data changed while it was being read")
        stats, fourth = {}, {}
        for label, parts in self.parts.items():
            merged, quart = _merge_pairs(parts)
            stats[label], fourth[label] = merged, _aligned(merged, quart)
        keys = list(self.counts)
        level_lists = []
        for j in range(len(self.by)):
            cats = (self.categories or [None] * len(self.by))[j]
            if cats is not None:
                level_lists.append(cats)
            else:
                seen = [k if len(self.by) == 1 else k[j] for k in keys]
                level_lists.append(levels(pd.Series(seen))[1])
        return GroupSums(names=tuple(self.by), level_lists=level_lists, stats=stats, fourth=fourth,
                         n_bins=dict(self.bins), counts=dict(self.counts), events=dict(self.events),
                         pooled=self.pooled[0], pooled_bins=self._pooled_bins(), target=self.target,
                         n_dropped=self.n_dropped, source=source)


def _merge_pairs(parts) -> tuple[BinStats, BinStats]:
    """Merge a list of (sums, fourth sums) into one pair."""
    return merge_stats([p for p, _ in parts]), merge_stats([q for _, q in parts])


def _aligned(stats: BinStats, fourth: BinStats) -> np.ndarray:
    """The per-bin sums of ||U||^4 in the order of ``stats``' bins."""
    if np.array_equal(stats.keys, fourth.keys):
        return fourth.sum_u[:, 0].copy()
    where = {tuple(k): i for i, k in enumerate(fourth.keys.tolist())}
    return fourth.sum_u[[where[tuple(k)] for k in stats.keys.tolist()], 0]


def _merge_counts(results) -> tuple[Counter, list | None, int]:
    total, cats, seen = Counter(), None, 0
    for counts, categories, n in results:
        total.update(counts)
        cats = categories if cats is None else cats
        seen += n
    return total, cats, seen


def open_grouped_file(path, formula: str, by: list, env, chunksize) -> tuple:
    """:func:`calibtest.streams.files.open_data_file` for a grouped pass, and the columns it reads: the
    formula's, then the ``by`` columns not among them (a ``by`` column missing from the file is a
    ``ValueError`` naming it).  Returns ``(DataFile, columns)``."""
    file = open_data_file(path, formula, env, chunksize)
    missing_by = [b for b in by if b not in file.columns]
    if missing_by:
        raise ValueError(f"by column {missing_by[0]!r} is not a column of {file.name} (columns: "
                         f"{', '.join(file.columns)})")
    fcols = formula_columns(formula, file.columns)
    return file, fcols + [b for b in by if b not in fcols]


def stream_file_groups(path, formula: str, by: list, settings: Settings) -> GroupSums:
    """Per-group sums of a CSV or Parquet file read in chunks (a counting pass first under ``"auto"``).

    Parameters as in :func:`calibtest.streams.files.stream_file`, with
    ``by`` the grouping columns (read with the formula's columns).
    """
    env, n_bins, missing = settings.env, settings.n_bins, settings.missing
    file, columns = open_grouped_file(path, formula, by, env, settings.chunksize)
    group_rows = n_rows = None
    if isinstance(n_bins, str) and n_bins == "auto":
        count_cols = columns if missing == "drop" else list(dict.fromkeys(by))
        results: list = []
        each_chunk(file, count_cols, lambda chunk: results.append(count_groups(chunk, formula, by, env, missing)))
        group_rows = _merge_counts(results)[0]
        n_rows = int(sum(group_rows.values()))
        if n_rows < 2:
            raise ValueError(f"need at least n = 2 rows, got {n_rows} in {file.name}")
    acc = GroupedAccumulator(formula, by, settings, group_rows=group_rows, n_rows=n_rows)
    each_chunk(file, columns, acc.update, digest=True, progress=settings.progress)
    return acc.sums(file.source(columns))


def _partition_counts(formula, namespace, by, missing, part, index):
    return on_partition(index, count_groups, part, formula, by, thaw_env(namespace), missing)


def _merge_groups(*accs):
    return GroupedAccumulator.merge_all(accs)


def _merge_count_results(*results):
    return _merge_counts(results)


def dask_group_frame(ddf, formula: str, by: list, env):
    """A Dask DataFrame reduced to the formula's and the grouping columns, with the formula's frozen namespace.

    Raises
    ------
    TypeError
        For input other than a ``dask.dataframe.DataFrame``.
    ValueError
        For a formula name or a ``by`` column that is not a column of the frame.
    """
    _, dd = _import_dask()
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"Dask input must be a dask.dataframe.DataFrame, got {type(ddf).__name__}")
    check_formula_names(formula, list(ddf.columns), env, where="the Dask DataFrame")
    missing_by = [b for b in by if b not in ddf.columns]
    if missing_by:
        raise ValueError(f"by column {missing_by[0]!r} is not a column of the Dask DataFrame")
    fcols = formula_columns(formula, list(ddf.columns))
    return ddf[fcols + [b for b in by if b not in fcols]], freeze_env(formula, env, fcols)


def dask_groups(ddf, formula: str, by: list, settings: Settings, *, split_every: int = 8) -> GroupSums:
    """Per-group sums of a Dask DataFrame: a counting reduction (under ``"auto"``), then one binning reduction."""
    dask, _ = _import_dask()
    n_bins, missing = settings.n_bins, settings.missing
    ddf, namespace = dask_group_frame(ddf, formula, by, settings.env)
    group_rows = n_rows = None
    if isinstance(n_bins, str) and n_bins == "auto":
        frame = ddf if missing == "drop" else ddf[list(dict.fromkeys(by))]
        leaves = [dask.delayed(_partition_counts)(formula, namespace, by, missing, part, i)
                  for i, part in enumerate(frame.to_delayed())]
        group_rows = compute(_tree(leaves, _merge_count_results, split_every), desc="Dask: counting groups",
                             progress=settings.progress)[0][0] if leaves else Counter()
        n_rows = int(sum(group_rows.values()))
        if n_rows < 2:
            raise ValueError(f"need at least n = 2 rows, got {n_rows} in the Dask DataFrame")
    template = GroupedAccumulator(formula, by, settings.replace(env=thaw_env(namespace)), group_rows=group_rows,
                                  n_rows=n_rows)
    for b in by:  # a categorical column's categories, unused ones too, as pandas has them in memory
        dtype = ddf[b].dtype
        if isinstance(dtype, pd.CategoricalDtype) and getattr(ddf[b].cat, "known", False):
            template.categories = template.categories or [None] * len(by)
            template.categories[by.index(b)] = list(dtype.categories)
    leaves = [dask.delayed(partition_sums)(template, part, i) for i, part in enumerate(ddf.to_delayed())]
    acc = compute(_tree(leaves, _merge_groups, split_every), desc="Dask: bin sums by group",
                  progress=settings.progress)[0] if leaves else template
    if template.categories is not None:
        acc.categories = template.categories
    source = {"format": "dask", "npartitions": int(ddf.npartitions), "columns": list(ddf.columns),
              "n_rows_read": acc.n_seen, "scheduler": _scheduler_name(),
              "passes": 2 if group_rows is not None else 1}
    return acc.sums(source)
