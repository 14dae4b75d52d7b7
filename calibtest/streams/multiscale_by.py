"""The multi-scale test of :func:`calibtest.calib_test` with ``by=`` on a file or a Dask frame, by group.

Two passes over the rows: the first counts each chunk's (partition's) rows
per group (:func:`calibtest.streams.grouped.count_groups`), which gives
every group's n (so its adaptive grid), the group labels in the order of the
rows in memory (:func:`calibtest.ece.group_engine.grouping_from_counts`) and, per
chunk, the position of its first row of each group among that group's
rows; the second reduces each chunk to per-group, per-draw bin sums
(:class:`calibtest.streams.multiscale.CalibTestAccumulator`, one per
group present), merged in order.  Group number g draws from the counter
stream keyed by ``numpy.random.default_rng([s, g])`` and its rows' positions
within the group, as :func:`calibtest.calib_test` with ``by=`` keys the rows
in memory, so the :class:`~calibtest.ece.group_engine.GroupedResult` has the same
p-values for the seed, whatever the chunk size or the partitioning.
Memory: the sums of the groups present in a chunk (about R x bins floats per
group) plus one chunk.
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pandas as pd

from calibtest.display.format import Call
from calibtest.inputs.validation import resolve_seed
from calibtest.streams.multiscale import CalibTestAccumulator
from calibtest.streams.dask_frames import _import_dask, compute, dask_source, on_partition
from calibtest.streams.files import DataFile, each_chunk
from calibtest.streams.grouped import _chunk_groups, count_groups, dask_group_frame, open_grouped_file
from calibtest.checks.multiscale import MultiScaleOptions, adaptive_grid, check_grid
from calibtest.core.conditional import counter_key
from calibtest.core.counter_draws import DrawSums
from calibtest.core.targets import PreparedData
from calibtest.inputs.formula import thaw_env
from calibtest.inputs.settings import Settings
from calibtest.ece.group_engine import (GroupAnalysis, GroupedResult, GroupOutcomes, analyse_counted_groups, group_labels, grouped_result,
                                grouping_from_counts, label_text, levels)
from calibtest.inputs.rows import read_rows

__all__ = ["stream_calib_test_by"]


class _GroupAccumulator(CalibTestAccumulator):
    """The multi-scale test's sums of one group: its draws keyed by ``default_rng([s, g])``, as in memory."""

    def __init__(self, key: np.ndarray, **options):
        super().__init__(rng=0, **options)
        self.key, self.seed = key, "Generator"  # the rows in memory record a group's Generator so
        self.draws = DrawSums(key, [b + 1 for b in self.grid], self.R, block=self.block)


def _settings(label_counts: Counter, labels: tuple, seed: int, grid, options: dict) -> dict:
    """Group label -> (its key, its accumulator's options), or None for a group of fewer than 2 rows."""
    out = {}
    for g, label in enumerate(labels):
        n_g = int(label_counts.get(label, 0))
        if n_g < 2:  # no rows, or one: listed, not tested
            out[label] = None
            continue
        key = counter_key(np.random.default_rng([seed, g]))[0]
        out[label] = (key, dict(options, n_bins=adaptive_grid(n_g, 1) if grid is None else grid))
    return out


def _chunk_sums(chunk, formula, by, env, missing, settings: dict, offsets: dict) -> tuple[dict, int]:
    """One chunk's per-group accumulators (rows numbered from ``offsets``) and its dropped rows."""
    rows = read_rows(formula, chunk, None, None, env, missing)
    names, values = group_labels(by, chunk, len(chunk))
    if rows.kept is not None:
        values = [v[rows.kept] for v in values]
    if not rows.probs.shape[0]:
        return {}, rows.n_dropped
    order, starts, labels = _chunk_groups(names, values)
    accs = {}
    for label, a, b in zip(labels, starts[:-1], starts[1:]):  # a loop over the groups present
        if label not in settings:
            raise ValueError(f"group {label!r} has more rows now than in the counting pass: the data changed "
                             "while it was being read")
        if settings[label] is None:
            continue
        key, options = settings[label]
        idx = order[a:b]
        acc = _GroupAccumulator(key, start=offsets.get(label, 0), **options)
        accs[label] = acc.update(y=rows.y[idx], probs=rows.probs[idx])
    return accs, rows.n_dropped


def _merge_into(total: dict, part: dict) -> None:
    for label, acc in part.items():
        if label in total:
            total[label].merge(acc)
        else:
            total[label] = acc


def _offsets(per_chunk: list) -> list:
    """Per chunk: each group's rows in the chunks before it."""
    running, out = Counter(), []
    for counts in per_chunk:
        out.append(dict(running))
        running.update(counts)
    return out


def _level_lists(by: list, totals: Counter, categories) -> list:
    """The levels of each grouping column, as for the rows in memory (categories, else the sorted labels)."""
    out = []
    for j in range(len(by)):
        cats = (categories or [None] * len(by))[j]
        if cats is not None:
            out.append(cats)
        else:
            seen = [k if len(by) == 1 else k[j] for k in totals]
            out.append(levels(pd.Series(seen))[1])
    return out


def stream_calib_test_by(data, formula: str, by: list, settings: Settings,
                         test: MultiScaleOptions) -> GroupedResult:
    """:func:`calibtest.calib_test` with ``by=`` on a CSV/Parquet file path or a Dask DataFrame (see the module).

    Parameters
    ----------
    data, formula
        As in :func:`calibtest.streams.multiscale.stream_calib_test`.
    by : list of str
        The grouping columns (several: crossed).
    settings : Settings
        ``env``, ``chunksize``, ``n_bins`` (as given), ``missing``,
        ``n_classes``, ``k`` and ``rng``: the seed s (None: the default seed
        0, recorded); group number g draws from ``default_rng([s, g])``.
    test : MultiScaleOptions
        ``alpha``, ``n_draws``, ``combine`` and ``spiegelhalter`` (its
        ``grid`` is read from ``settings.n_bins``).
    """
    env, chunksize, n_bins, missing, rng = (settings.env, settings.chunksize, settings.n_bins, settings.missing,
                                            settings.rng)
    alpha = test.alpha
    if rng is not None and not (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        raise TypeError(f"rng must be None or an int seed on a file or Dask DataFrame (the label draws are keyed "
                        f"by it), got {type(rng).__name__}")
    seed = resolve_seed(rng)[1]
    grid = check_grid(n_bins)
    options = dict(n_classes=settings.n_classes, k=settings.k, alpha=alpha, n_draws=test.n_draws,
                   combine=test.combine, spiegelhalter=test.spiegelhalter)
    if isinstance(data, (str, os.PathLike, DataFile)):
        run, name, source = _file_runner(data, formula, by, env, chunksize, missing)
    else:
        run, name, source = _dask_runner(data, formula, by, env, missing)
    per_chunk, categories = run("count", None)
    totals = Counter()
    for counts in per_chunk:
        totals.update(counts)
    if sum(totals.values()) < 2:
        raise ValueError(f"need at least n = 2 rows, got {sum(totals.values())} in {name}")
    grouping = grouping_from_counts(tuple(by), _level_lists(by, totals, categories), totals)
    settings = _settings(totals, grouping.labels, seed, grid, options)
    accs, n_dropped = run("sums", (settings, _offsets(per_chunk)))
    target = next((acc.target for acc in accs.values() if acc.target is not None), None)
    if target is None:
        raise ValueError(f"no usable rows in {name}")
    mode, k_, n_classes_, y_name, prob_names = target
    shown = {"n_bins": None if n_bins == "adaptive" else n_bins, "rng": seed, "by": list(by),
             "missing": None if missing == "raise" else missing}
    call = Call("calib_test", (repr(formula), f"data={name!r}"), {k2: v for k2, v in shown.items() if v is not None})
    book = dict(formula=formula, y_name=y_name, prob_names=tuple(prob_names))

    def analyse(g, label):
        return accs[label].result(call_record=call.with_options(group=label_text(grouping.names, label)), **book)

    groups, reasons = analyse_counted_groups(grouping, [None] * len(grouping), mode, analyse, single_class=False)
    shape = PreparedData(np.empty((0, 1)), np.empty((0, 1)), mode, k_, n_classes_)
    return grouped_result(grouping, shape, GroupOutcomes(groups, reasons),
                          GroupAnalysis("calib_test", lambda res: {"statistic": res.statistic, "pvalue": res.pvalue},
                                        ["statistic", "pvalue"], alpha), seed=seed, n_dropped=n_dropped,
                          call_record=call, source=source(), **book)


def _file_runner(path, formula, by, env, chunksize, missing):
    """(run, name, source) of a file: ``run("count", None)`` counts each chunk's rows per group,
    ``run("sums", state)`` reduces the chunks to the groups' sums (reading the file's SHA-256 alongside),
    ``source()`` the file's record; every pass goes through the one reader
    (:func:`calibtest.streams.files.each_chunk`)."""
    file, columns = open_grouped_file(path, formula, by, env, chunksize)

    def run(what, state):
        out = [] if what == "count" else {}
        seen = {"categories": None, "dropped": 0, "index": 0}

        def handle(chunk) -> None:
            if what == "count":
                counts, cats, _ = count_groups(chunk, formula, by, env, missing)
                out.append(counts)
                seen["categories"] = cats if seen["categories"] is None else seen["categories"]
            else:
                settings, offsets = state
                part, n_drop = _chunk_sums(chunk, formula, by, env, missing, settings, offsets[seen["index"]])
                _merge_into(out, part)
                seen["dropped"] += n_drop
            seen["index"] += 1

        each_chunk(file, columns, handle, digest=what == "sums")
        return (out, seen["categories"]) if what == "count" else (out, seen["dropped"])

    return run, file.name, lambda: file.source(columns)


def _partition_count(formula, namespace, by, missing, part, index):
    return on_partition(index, count_groups, part, formula, by, thaw_env(namespace), missing)


def _partition_sums(formula, namespace, by, missing, settings, offsets, part, index):
    return on_partition(index, _chunk_sums, part, formula, by, thaw_env(namespace), missing, settings, offsets)


def _dask_runner(ddf, formula, by, env, missing):
    dask, _ = _import_dask()
    frame, namespace = dask_group_frame(ddf, formula, by, env)
    known = [list(frame[b].dtype.categories) if isinstance(frame[b].dtype, pd.CategoricalDtype)
             and getattr(frame[b].cat, "known", False) else None for b in by]

    n_read = []

    def run(what, state):
        parts = frame.to_delayed()
        if what == "count":
            results = compute(*[dask.delayed(_partition_count)(formula, namespace, by, missing, part, i)
                                for i, part in enumerate(parts)], desc="Dask: counting groups")
            categories = next((c for _, c, _ in results if c is not None), None)
            if any(c is not None for c in known):  # a categorical column's categories, unused ones too
                categories = [kn if kn is not None else (categories or [None] * len(by))[j]
                              for j, kn in enumerate(known)]
            n_read.append(sum(n for _, _, n in results))
            return [c for c, _, _ in results], categories
        settings, offsets = state
        results = compute(*[dask.delayed(_partition_sums)(formula, namespace, by, missing, settings, offsets[i], part, i)
                            for i, part in enumerate(parts)], desc="Dask: label draws by group")
        out, dropped = {}, 0
        for part, n_drop in results:  # in partition order: each group's rows follow the ones merged before
            _merge_into(out, part)
            dropped += n_drop
        return out, dropped

    return run, "<Dask DataFrame>", lambda: dask_source(frame, list(frame.columns), n_read[-1], passes=2)
