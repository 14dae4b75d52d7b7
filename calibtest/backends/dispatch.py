"""Dispatch of :func:`calibtest.calib_ci` for data that is not in memory: files and Dask frames.

The adjusted interval (Algorithm 1) needs only additive per-bin sums, so it
is exact on data of any size: a CSV/Parquet file is streamed in chunks
(:mod:`calibtest.backends.files`), a Dask DataFrame is reduced partition by
partition on its cluster (:mod:`calibtest.backends.dask_frames`).  Resampling methods
(bootstrap, subsampling, HulC) draw rows at random and need the rows in memory;
they are refused here with a clear error.
"""
from __future__ import annotations

import os

from calibtest.backends.dask_frames import dask_calib_ci
from calibtest.backends.files import stream_file

__all__ = ["is_out_of_core", "check_in_memory_method", "calib_ci_out_of_core"]

def _is_dask(data) -> bool:
    return type(data).__module__.split(".")[0] == "dask"


def is_out_of_core(data) -> bool:
    """True for a file path (``str`` or ``os.PathLike``) or a Dask collection."""
    return isinstance(data, (str, os.PathLike)) or _is_dask(data)


def check_in_memory_method(method, what: str) -> None:
    """Refuse interval methods other than ``"adjusted"`` for data that is not in memory.

    Raises
    ------
    ValueError
        For ``method="bootstrap"``, ``"subsampling"``, ``"hulc"`` or any other
        value: they resample rows and need the data in memory.
    """
    if method == "adjusted":
        return
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, got {type(method).__name__}")
    raise ValueError(f"method={method!r} resamples rows and needs in-memory data (a pandas DataFrame or "
                     f"arrays), but data is {what}; use method='adjusted' (Algorithm 1, exact from per-bin "
                     "sums on data of any size), or load the rows into memory (e.g. a random sample)")


def calib_ci_out_of_core(formula, data, *, env, y=None, probs=None, n_classes=None, k=None, n_bins="auto",
                         alpha: float = 0.05, missing: str = "raise", chunksize=None, progress=None,
                         method: str = "adjusted"):
    """:func:`calibtest.calib_ci` for a file path or a Dask DataFrame.

    Parameters
    ----------
    formula : str
        Required: it names the columns to read.
    data : str, os.PathLike or dask.dataframe.DataFrame
        A ``.csv`` (optionally compressed) or ``.parquet`` file, streamed in
        chunks of ``chunksize`` rows; or a Dask DataFrame, reduced with Dask.
    env : patsy.EvalEnvironment
        The caller's environment for names that are not columns.
    method : str
        Only ``"adjusted"``; resampling methods raise a ValueError.
    Other parameters as in :func:`calibtest.calib_ci`.
    """
    dask = _is_dask(data)
    what = f"a Dask {type(data).__name__}" if dask else f"the file {os.fspath(data)!r}"
    check_in_memory_method(method, what)
    if y is not None or probs is not None:
        raise ValueError(f"y= and probs= cannot be combined with data={what}; name the columns in a formula")
    if formula is None:
        raise ValueError(f"data={what} needs a formula naming its columns, e.g. 'correct ~ confidence'")
    if dask:
        if chunksize is not None:
            raise ValueError("chunksize= applies to files; a Dask DataFrame is processed by partition "
                             "(use ddf.repartition to change their size)")
        return dask_calib_ci(data, formula, env=env, n_classes=n_classes, k=k, n_bins=n_bins, alpha=alpha,
                             missing=missing)
    return stream_file(data, formula, env=env, n_classes=n_classes, k=k, n_bins=n_bins, alpha=alpha,
                       missing=missing, chunksize=chunksize, progress=progress)
