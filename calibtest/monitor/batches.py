"""A batch's rows from memory, a CSV/Parquet file or a Dask frame, reduced to the monitor's additive sums.

Files are streamed in chunks (:func:`calibtest.streams.files.each_chunk`) and
Dask frames reduced partition by partition, so memory is bounded by a chunk;
each chunk's sums add (:func:`calibtest.monitor.state.add_stats`).  Every chunk
is checked against the monitor's target (binary or top-1, the classes) before
anything is kept.
"""
from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibtest.inputs.formula import thaw_env
from calibtest.inputs.rows import is_dask, read_rows
from calibtest.monitor.state import MonitorSettings, add_stats, batch_stats
from calibtest.options import DataError, OptionError, OptionTypeError
from calibtest.streams.accumulator import _prepare_rows
from calibtest.streams.dask_frames import compute

__all__ = ["Target", "Reader", "read_batch", "time_value", "check_time_order"]


@dataclass(frozen=True)
class Target:
    """What a batch's rows are: ``mode`` (binary or top1), ``n_classes`` and the probability columns' names."""

    mode: str
    n_classes: int | None
    classes: tuple | None

    def check(self, other: "Target | None") -> None:
        """Refuse this batch (a :class:`DataError`) when it is another target or set of classes than ``other``."""
        if other is not None and self != other:
            raise DataError(f"this batch is {self.describe()}, but the monitor follows {other.describe()}: a "
                            "monitor follows one target and one set of classes")

    def describe(self) -> str:
        """The target in words: its mode, K and the probability columns' names."""
        return (f"a {self.mode} target" + (f", K = {self.n_classes}" if self.n_classes is not None else "")
                + (f", columns {list(self.classes)}" if self.classes else ""))


@dataclass(frozen=True)
class Reader:
    """How rows are read and checked (picklable: it travels to Dask workers)."""

    settings: MonitorSettings
    namespace: dict
    missing: str

    def rows(self, data, y=None, probs=None) -> tuple[np.ndarray, np.ndarray, Target]:
        """``(p, y, target)`` of a DataFrame (with the formula) or of arrays; p in [0, 1] checked."""
        formula = self.settings.formula
        if formula is None and data is not None:
            raise OptionError("this monitor was made without a formula: give y= and probs=, or make it with "
                              "CalibrationMonitor('y ~ p', ...) to read data frames and files")
        rows = read_rows(formula, data, y, probs, thaw_env(self.namespace), self.missing)
        n = rows.probs.shape[0]
        if n == 0:
            return np.empty(0), np.empty(0), None
        try:
            prep = _prepare_rows(rows.y, rows.probs, n_classes=self.settings.n_classes, k=None,
                                 class_names=rows.class_names, y_name=rows.y_name, prob_names=rows.prob_names)
        except ValueError as exc:
            raise DataError(str(exc)) from None
        if prep.mode.topk:  # pragma: no cover - k is fixed to 1 above
            raise OptionError("top-k monitoring (k > 1) is not supported")
        classes = tuple(map(str, rows.prob_names)) if rows.probs.ndim == 2 else None
        target = Target(prep.mode, prep.n_classes, classes)
        p = prep.z[:, 0]
        return p, np.rint(prep.u[:, 0] + p), target


def _combine(parts: list, empty_message: str):
    """Sums and target of a batch from its parts ``(stats, n, target)``: targets must agree; rows must exist."""
    total, target = None, None
    for stats, n, part_target in parts:
        if not n:
            continue
        if part_target is not None:
            part_target.check(target)
            target = target or part_target
        total = stats if total is None else add_stats(total, stats)
    if total is None:
        raise DataError(empty_message)
    return total, target


def _part(reader: Reader, state: dict, data, y=None, probs=None):
    p, yy, target = reader.rows(data, y, probs)
    if p.size == 0:
        return None, 0, None
    return batch_stats(reader.settings, state, p, yy), p.size, target


def _file_parts(reader: Reader, state: dict, path, chunksize) -> list:
    from calibtest.streams.files import each_chunk, open_data_file
    from calibtest.inputs.formula import formula_columns

    if reader.settings.formula is None:
        raise OptionError("a file needs a formula: make the monitor with CalibrationMonitor('y ~ p', ...)")
    file = open_data_file(path, reader.settings.formula, thaw_env(reader.namespace), chunksize)
    parts = []
    each_chunk(file, formula_columns(reader.settings.formula, file.columns),
               lambda chunk: parts.append(_part(reader, state, chunk)))
    file.refuse_changed()
    return parts


def _dask_parts(reader: Reader, state: dict, ddf) -> list:
    import dask

    if reader.settings.formula is None:
        raise OptionError("a Dask frame needs a formula: make the monitor with CalibrationMonitor('y ~ p', ...)")
    tasks = [dask.delayed(_part)(reader, state, part) for part in ddf.to_delayed()]
    return list(compute(*tasks, desc="Dask: batch sums"))


def read_batch(reader: Reader, state: dict, data=None, y=None, probs=None, chunksize=None):
    """``(stats, target)`` of one batch from a DataFrame, a file path, a Dask frame or arrays.

    Raises
    ------
    DataError
        An empty batch, predictions outside [0, 1], labels that are not 0/1,
        chunks with different targets or classes.
    """
    if isinstance(data, (str, os.PathLike)):
        parts, where = _file_parts(reader, state, data, chunksize), f"the file {os.fspath(data)!r}"
    elif data is not None and is_dask(data):
        parts, where = _dask_parts(reader, state, data), "the Dask frame"
    else:
        parts, where = [_part(reader, state, data, y, probs)], "the batch"
    return _combine(parts, f"empty batch: {where} has no rows; a monitor takes batches of at least one row")


# ----------------------------------------------------------------------------- time stamps
def time_value(time):
    """A batch's time stamp as stored: a number (int or float) or an ISO 8601 date-time string (None: none).

    Raises
    ------
    OptionTypeError
        Neither a number nor a date-time (``datetime``, ``numpy.datetime64``, ``pandas.Timestamp``, an
        ISO string).
    OptionError
        A number that is not finite, or NaT.
    """
    if time is None:
        return None
    if isinstance(time, (bool, np.bool_)):
        raise OptionTypeError(f"time must be a number or a date-time, got {time!r}")
    if isinstance(time, numbers.Real):
        if not math.isfinite(float(time)):
            raise OptionError(f"time must be finite, got {time!r}")
        return int(time) if isinstance(time, numbers.Integral) else float(time)
    try:
        stamp = pd.Timestamp(time)
    except (TypeError, ValueError):
        raise OptionTypeError(f"time must be a number or a date-time (ISO 8601 text, datetime, Timestamp), "
                              f"got {time!r}") from None
    if pd.isna(stamp):
        raise OptionError("time must be a date-time, got NaT")
    return stamp.isoformat()


def _comparable(value):
    return ("number", value) if isinstance(value, (int, float)) else ("date-time", pd.Timestamp(value))


def check_time_order(time, last, looks: int) -> None:
    """Refuse a time stamp that is not after the last batch's (or a batch with or without one unlike the others).

    Raises
    ------
    OptionError
        Out of time order, of another kind (number against date-time), or missing where the earlier batches
        had one (or the reverse).
    """
    if looks == 0:
        return
    if (time is None) != (last is None):
        raise OptionError("time: give every batch a time stamp or none; the earlier batches "
                          + ("had one" if last is not None else "had none"))
    if time is None:
        return
    (kind, value), (last_kind, last_value) = _comparable(time), _comparable(last)
    if kind != last_kind:
        raise OptionError(f"time: this batch's time stamp is a {kind}, the earlier ones are {last_kind}s")
    try:
        later = value > last_value
    except TypeError as exc:  # time zone aware against naive
        raise OptionError(f"time: cannot compare {time!r} with the last time stamp {last!r}: {exc}") from None
    if not later:
        raise OptionError(f"batch out of time order: time {time!r} is not after the last batch's {last!r}")
