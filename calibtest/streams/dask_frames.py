"""Per-bin sums of a Dask DataFrame: map over partitions, then a tree reduction of merges.

``calib_ci(formula, data=ddf)`` with a ``dask.dataframe.DataFrame`` lands
here (``dask[dataframe,distributed]`` is the optional extra
``calibtest[dask]``).  Each partition is turned into a
:class:`~calibtest.streams.accumulator.BinAccumulator` where it lives (only the
formula's columns are loaded), the accumulators, a few kilobytes each, are
merged ``split_every`` at a time in a tree of ``dask.delayed`` tasks, and the
client computes the interval from the final sums.  The graph runs on
whatever scheduler is active: the local threads by default, or a
``dask.distributed`` cluster once a ``Client`` exists::

    from dask.distributed import Client
    import dask.dataframe as dd
    import calibtest as ct

    client = Client("tcp://scheduler:8786")        # an existing multi-machine cluster
    ddf = dd.read_parquet("s3://bucket/preds/")     # paths the workers can read
    res = ct.calib_ci("correct ~ confidence", data=ddf, n_classes=1000)

The workers need calibtest (same version) and pyarrow installed; the
formula's non-column variables (e.g. ``np`` in ``np.exp(logit)``) are shipped
with the tasks.
"""
from __future__ import annotations

import os
import sys
import warnings

from calibtest.core.progress import in_notebook, make_bar, want_progress
from calibtest.display.format import Call
from calibtest.streams.accumulator import BinAccumulator
from calibtest.inputs.formula import check_formula_names, formula_columns, freeze_env, thaw_env
from calibtest.inputs.settings import Settings
from calibtest.inputs.rows import read_rows
from calibtest.options import DEFAULT_CHUNKSIZE
from calibtest.ece.result import CalibrationResult

__all__ = ["dask_bin_accumulator", "dask_calib_ci"]

#: Accumulators merged per task of the reduction tree.
SPLIT_EVERY = 8

#: A frame of one partition holding more rows than this gets a warning (:func:`warn_one_partition`): the
#: rows a streamed file holds in memory at once by default.
ONE_PARTITION_ROWS = DEFAULT_CHUNKSIZE


def _outside_package() -> int:
    """The ``stacklevel`` of :func:`warnings.warn`, called from this module's function, that points at the first
    frame outside the calibtest package (the user's call)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(2), 2  # the caller of the function that calls warnings.warn
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def warn_one_partition(npartitions: int, n_rows: int) -> None:
    """Warn that a Dask frame of one partition was read and binned by one task.

    calibtest does not repartition it: splitting the one partition would
    first load it whole into one worker (the cost the user would avoid), and
    the partitioning is the user's (it decides where the rows are read).  A
    UserWarning names ``npartitions`` and the remedy when the one partition
    holds more than :data:`ONE_PARTITION_ROWS` rows; smaller frames are fast
    either way.
    """
    if npartitions == 1 and n_rows > ONE_PARTITION_ROWS:
        warnings.warn(f"the Dask DataFrame has npartitions=1: its {n_rows:,} rows were read and binned by one "
                      "task, on one worker, held in its memory at once (no parallelism, memory growing with the "
                      "data); split it where it is read, e.g. dd.read_parquet(..., split_row_groups=True) or "
                      "dd.read_csv(..., blocksize='64MB'), or ddf.repartition(npartitions=...) for the next "
                      "computations", UserWarning, stacklevel=_outside_package())


def _import_dask():
    try:
        import dask
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Dask input needs dask: pip install 'calibtest[dask]'") from exc
    return dask, dd


def in_partition(exc: Exception, index: int) -> Exception:
    """The error a worker raises for Dask partition ``index``: the same kind (TypeError or ValueError), naming it."""
    kind = TypeError if isinstance(exc, TypeError) else ValueError
    return kind(f"Dask partition {index}: {exc}")


def on_partition(index: int, fn, *args):
    """``fn(*args)`` on Dask partition number ``index`` (on a worker): a ValueError or TypeError names it."""
    try:
        return fn(*args)
    except (ValueError, TypeError) as exc:
        raise in_partition(exc, index) from exc


def partition_sums(template, part, index: int):
    """The sums of one partition: an empty copy of the accumulator ``template`` (a :class:`BinAccumulator` or
    a grouped one) updated with the partition's rows (runs on a worker)."""
    acc = template.spawn()
    on_partition(index, acc.update, part)
    return acc


def _merge(*accs: BinAccumulator) -> BinAccumulator:
    return BinAccumulator.merge_all(accs)


def _partition_usable(formula: str, namespace: dict, missing: str, part, index: int) -> int:
    """Rows of one partition that survive the missing-value rule."""
    rows = on_partition(index, read_rows, formula, part, None, None, thaw_env(namespace), missing)
    return int(rows.probs.shape[0])


def _tree(nodes: list, combine, split_every: int):
    """Reduce delayed ``nodes`` with ``combine`` in a tree of fan-in ``split_every``."""
    from dask import delayed
    while len(nodes) > 1:
        nodes = [delayed(combine)(*nodes[i:i + split_every]) if len(nodes[i:i + split_every]) > 1
                 else nodes[i] for i in range(0, len(nodes), split_every)]
    return nodes[0]


def _add(*counts: int) -> int:
    return sum(counts)


def dask_bin_accumulator(ddf, formula: str, settings: Settings, *,
                         split_every: int = SPLIT_EVERY) -> BinAccumulator:
    """Per-bin sums of a Dask DataFrame, computed on its scheduler.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
    formula : str
        Only the columns it names are loaded.
    settings : Settings
        The call's options: ``env`` (the caller's environment; the variables
        the formula uses travel to the workers,
        :func:`calibtest.inputs.formula.freeze_env`), ``n_classes``, ``k``,
        ``n_bins``, ``alpha``, ``missing`` as in :func:`calibtest.calib_ci`
        (``n_bins="auto"`` first computes n: ``len(ddf)`` with
        ``missing="raise"``, Dask reading Parquet row counts from metadata, or
        a counting pass over the partitions with ``missing="drop"``), and
        ``null``, which decides (with the target) whether the per-bin sums of
        the conditional moments are accumulated (:class:`~calibtest.BinAccumulator`).
    split_every : int
        Fan-in of the reduction tree.

    Returns
    -------
    BinAccumulator
        Holding the merged sums of all partitions.

    Warns
    -----
    UserWarning
        A frame of one partition holding more than :data:`ONE_PARTITION_ROWS`
        rows (:func:`warn_one_partition`): it is read by one task.
    """
    dask, dd = _import_dask()
    env, n_bins, missing = settings.env, settings.n_bins, settings.missing
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"Dask input must be a dask.dataframe.DataFrame, got {type(ddf).__name__}")
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}")
    check_formula_names(formula, list(ddf.columns), env, where="the Dask DataFrame")
    columns = formula_columns(formula, list(ddf.columns))
    ddf = ddf[columns]
    namespace = freeze_env(formula, env, columns)
    n_rows = None
    if isinstance(n_bins, str) and n_bins == "auto":
        if missing == "raise":
            n_rows = int(len(ddf))
        else:
            counts = [dask.delayed(_partition_usable)(formula, namespace, missing, part, i)
                      for i, part in enumerate(ddf.to_delayed())]
            n_rows = int(compute(_tree(counts, _add, split_every), desc="Dask: counting rows",
                                 progress=settings.progress)[0])
        if n_rows < 2:
            raise ValueError(f"need at least n = 2 rows, got {n_rows} in the Dask DataFrame")
    template = BinAccumulator(formula, n_classes=settings.n_classes, k=settings.k, n_bins=n_bins, n_rows=n_rows,
                              alpha=settings.alpha, missing=missing, eval_env=thaw_env(namespace), null=settings.null)
    leaves = [dask.delayed(partition_sums)(template, part, i) for i, part in enumerate(ddf.to_delayed())]
    if not leaves:
        return template
    acc = compute(_tree(leaves, _merge, split_every), desc="Dask: bin sums", progress=settings.progress)[0]
    warn_one_partition(len(leaves), acc.n_seen)
    return acc


def _default_client():
    """The distributed client in use, or None (a local scheduler, or distributed not installed)."""
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


def compute(*graphs, desc: str, progress=None) -> tuple:
    """``dask.compute(*graphs)``: one pass over a frame, with a progress bar over its tasks.

    The bar follows the rule of :mod:`calibtest.core.progress` (``progress=None``: only on an interactive
    terminal or in a notebook, never under ``CI``).  A local scheduler drives tqdm's Dask callback; with a
    distributed client the bar counts the pass's futures as they complete.  The results are those of
    ``dask.compute``.
    """
    import dask

    if not want_progress(progress):
        return dask.compute(*graphs)
    client = _default_client()
    if client is None:
        from tqdm.auto import tqdm as notebook_tqdm
        from tqdm.dask import TqdmCallback

        with TqdmCallback(desc=desc, file=sys.stderr, **({"tqdm_class": notebook_tqdm} if in_notebook() else {})):
            return dask.compute(*graphs)
    from distributed import as_completed

    futures = client.compute(list(graphs))
    with make_bar(len(futures), desc, unit="task") as bar:
        for _ in as_completed(futures):
            bar.update()
    return tuple(client.gather(futures))


def _scheduler_name() -> str:
    try:
        from distributed import default_client
        return f"distributed {default_client().scheduler.address}"
    except (ImportError, ValueError):
        import dask
        return f"dask local ({dask.config.get('scheduler', 'threads')})"


def dask_source(ddf, columns, n_rows_read: int, passes: int | None = None) -> dict:
    """The ``source`` record of a result computed from a Dask frame: ``format="dask"``, ``npartitions``, the
    ``columns`` read, ``n_rows_read``, the ``scheduler`` and (when given) the ``passes`` over the frame."""
    source = {"format": "dask", "npartitions": int(ddf.npartitions), "columns": list(columns),
              "n_rows_read": int(n_rows_read), "scheduler": _scheduler_name()}
    if passes is not None:
        source["passes"] = int(passes)
    return source


def dask_calib_ci(ddf, formula: str, settings: Settings) -> CalibrationResult:
    """:func:`calibtest.calib_ci` on a Dask DataFrame (see :func:`dask_bin_accumulator`).

    The null (``null="auto"`` included) and its p-value are those of the rows
    in memory: the conditional moments are reduced with the bin sums.
    ``result.source`` records ``format="dask"``, the number of partitions, the
    columns read and the scheduler used.
    """
    acc = dask_bin_accumulator(ddf, formula, settings)
    source = dask_source(ddf, formula_columns(formula, list(ddf.columns)), acc.n_seen)
    s = settings
    options = {"n_classes": s.n_classes, "k": s.k, "n_bins": s.n_bins, "alpha": s.alpha,
               "missing": s.missing if s.missing != "raise" else None, "null": s.null if s.null != "auto" else None}
    call = Call("calib_ci", (repr(formula), f"data=<dask DataFrame npartitions={ddf.npartitions}>"), options)
    return acc.result(call=call, source=source)
