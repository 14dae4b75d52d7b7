"""Stream a CSV or Parquet file through a :class:`~calibtest.BinAccumulator`.

``calib_ci(formula, data="big.parquet")`` lands here.  Only the columns the
formula uses are read (CSV: ``pandas.read_csv(usecols=..., chunksize=...)``;
Parquet: ``pyarrow.parquet.ParquetFile.iter_batches``, pyarrow being the
optional extra ``calibtest[parquet]``), each chunk is binned and reduced to
its per-bin sums and then dropped, so memory is bounded by the chunk size
(for Parquet by the larger of the chunk and a row group), not the file.  The
file's SHA-256 is computed in a background thread during the same pass and
stored with its name, size and modification time in ``result.source``.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import re
import sys  # noqa: F401  (the bar writes to sys.stderr; tests replace it through this module)
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


from calibtest.display.format import Call, sha256_file
from calibtest.core.progress import make_bar, want_progress
from calibtest.options import DEFAULT_CHUNKSIZE, DataError, check_option
from calibtest.streams.accumulator import BinAccumulator
from calibtest.inputs.formula import check_formula_names, formula_columns
from calibtest.inputs.settings import Settings
from calibtest.inputs.rows import read_rows
from calibtest.ece.result import CalibrationResult

__all__ = ["DEFAULT_CHUNKSIZE", "file_format", "check_csv_fields", "read_csv_file", "read_parquet_file",
           "read_data_file", "DataFile", "open_data_file", "each_chunk", "stream_file"]

_CSV_COMPRESSION = (".gz", ".bz2", ".zip", ".xz", ".zst")
_PARQUET = (".parquet", ".pq")


def file_format(path, argument: str | None = "data") -> str:
    """``"csv"`` or ``"parquet"`` from the file name (``.csv`` possibly compressed, ``.parquet``, ``.pq``).

    Raises
    ------
    ValueError
        Any other name, naming ``argument`` (``data='x.txt'``) or, for
        ``argument=None`` (the command line), the file itself.
    """
    path = Path(os.fspath(path))
    where = f"data={str(path)!r}" if argument == "data" else (str(path) if argument is None
                                                               else f"{argument} {str(path)!r}")
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _PARQUET:
        return "parquet"
    if suffixes and (suffixes[-1] == ".csv" or (len(suffixes) >= 2 and suffixes[-2] == ".csv"
                                                 and suffixes[-1] in _CSV_COMPRESSION)):
        return "csv"
    raise ValueError(f"{where}: cannot tell the file format from its name; supported are "
                     ".csv (also .csv.gz, .csv.bz2, .csv.zip, .csv.xz, .csv.zst), .parquet and .pq")


#: Bytes of (decompressed) CSV text examined at once by :func:`check_csv_fields`.  The check's working
#: arrays take about 18 bytes per byte of text (two masks, a cumulative count and its shifted copy), so
#: 4 MiB keeps them near 75 MB, below the default chunk's (16 MiB blocks took the peak of ``calibtest ci``
#: on a 10^7-row CSV from 305 MB to 697 MB).
_FIELD_CHECK_BLOCK = 1 << 22


def _malformed_line(counts: np.ndarray, blank: np.ndarray, width: int) -> int | None:
    """Index of the first non-blank line whose number of separators is not ``width - 1`` (None if none)."""
    bad = np.flatnonzero((counts != width - 1) & ~blank)
    return int(bad[0]) if bad.size else None


def _check_fields_with_csv_module(path: Path, width: int) -> None:
    """Exact field counts with Python's csv module (quoted fields, separators inside quotes)."""
    import csv
    import io
    from pandas.io.common import get_handle
    with get_handle(path, "rb", compression="infer", is_text=False) as handles:
        reader = csv.reader(io.TextIOWrapper(handles.handle, encoding="utf-8", newline=""))
        next(reader, None)
        for record in reader:
            if record and len(record) != width:
                raise ValueError(f"{path.name}, line {reader.line_num}: {len(record)} fields, but the header "
                                 f"has {width}; the file is malformed (an extra or missing separator)")


def check_csv_fields(path, width: int) -> None:
    """Raise a ValueError naming the first line of a CSV file whose field count differs from the header's.

    pandas reads only the formula's columns (``usecols``), which silently
    accepts a row with an extra field (``1,0,7`` read as y = 1, p = 0) and
    pads a short row with NaN.  This pass counts the separators of every
    line, vectorised over blocks of bytes with numpy; a file holding a quote
    character is checked field by field with the csv module instead (a quoted
    field may hold separators and line breaks).  Blank lines are skipped, as
    pandas skips them.  Line numbers are 1-based and count the header.

    Parameters
    ----------
    path : pathlib.Path
        The CSV file (possibly compressed; compression inferred from the name).
    width : int
        Fields of the header.
    """
    from pandas.io.common import get_handle
    line = 0       # physical lines completed so far
    tail = b""
    with get_handle(path, "rb", compression="infer", is_text=False) as handles:
        fh = handles.handle
        while True:
            block = fh.read(_FIELD_CHECK_BLOCK)
            data = tail + block
            if b'"' in data:
                return _check_fields_with_csv_module(path, width)
            if not block:
                lines = [data] if data else []
                tail = b""
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    tail = data
                    continue
                lines, tail = data[:cut + 1], data[cut + 1:]
                lines = [lines]
            for chunk in lines:
                a = np.frombuffer(chunk, dtype=np.uint8)
                ends = np.flatnonzero(a == 10)
                if not chunk.endswith(b"\n"):
                    ends = np.append(ends, a.size)
                starts = np.concatenate(([0], ends[:-1] + 1))
                commas = np.concatenate(([0], np.cumsum(a == 44)))
                counts = commas[ends] - commas[starts]
                length = ends - starts - (a[np.maximum(ends - 1, 0)] == 13) * (ends > starts)
                first = 1 if line == 0 else 0  # the header
                bad = _malformed_line(counts[first:], length[first:] == 0, width)
                if bad is not None:
                    number = line + first + bad + 1
                    raise ValueError(f"{path.name}, line {number}: {int(counts[first + bad]) + 1} fields, but "
                                     f"the header has {width}; the file is malformed (an extra or missing "
                                     "separator)")
                line += ends.size
            if not block:
                return None


def read_csv_file(path):
    """A whole CSV file as a DataFrame, after checking that every line has the header's number of fields.

    Raises
    ------
    ValueError
        A malformed line (named with its 1-based line number), or a file with no header.
    """
    import pandas as pd
    path = Path(os.fspath(path))
    with reading(path):
        try:
            header = pd.read_csv(path, nrows=0).columns
        except pd.errors.EmptyDataError:
            raise ValueError(f"{path.name} is empty: no header line") from None
        check_csv_fields(path, len(header))
        df = pd.read_csv(path)
    if df.shape[0] == 0:
        raise ValueError(f"{path.name} has a header but no data rows")
    return df


def read_parquet_file(path):
    """A whole Parquet file as a DataFrame (pyarrow, the optional extra ``calibtest[parquet]``).

    Raises
    ------
    ImportError
        pyarrow is not installed.
    ValueError
        A damaged file, or a file with no rows.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading Parquet files needs pyarrow: pip install 'calibtest[parquet]'") from exc
    path = Path(os.fspath(path))
    with reading(path):
        df = pq.read_table(path).to_pandas()
    if df.shape[0] == 0:
        raise ValueError(f"{path.name} has no data rows")
    return df


def read_data_file(path, argument: str | None = "data"):
    """A whole CSV or Parquet file as a DataFrame, the format told by the name (:func:`file_format`).

    The one reader of whole files: every subcommand of the command line that
    needs the rows in memory reads its file with it.

    Parameters
    ----------
    path : str or os.PathLike
    argument : str or None
        How an error names the file (see :func:`file_format`).

    Raises
    ------
    ValueError
        An unknown extension, a malformed or damaged file, or no data rows.
    """
    path = Path(os.fspath(path))
    return read_csv_file(path) if file_format(path, argument) == "csv" else read_parquet_file(path)


class _CsvReader:
    def __init__(self, path: Path):
        import pandas as pd
        self._pd = pd
        self.path = path
        with reading(path):
            try:
                self.columns = [str(c) for c in pd.read_csv(path, nrows=0).columns]
            except pd.errors.EmptyDataError:
                raise ValueError(f"{path.name} is empty: no header line") from None
            check_csv_fields(path, len(self.columns))
        self.num_rows = None

    def chunks(self, columns, chunksize: int):
        with reading(self.path), self._pd.read_csv(self.path, usecols=columns, chunksize=chunksize) as reader:
            yield from reader


class _ParquetReader:
    def __init__(self, path: Path):
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("reading Parquet files needs pyarrow: pip install 'calibtest[parquet]'") from exc
        self.path = path
        # pre_buffer=False: with read-ahead buffering pyarrow keeps the column chunks of the row
        # groups already read, so memory grows with the file instead of the chunk.
        with reading(path):
            self._file = pq.ParquetFile(path, pre_buffer=False)
        self.columns = list(self._file.schema_arrow.names)
        self.num_rows = int(self._file.metadata.num_rows)

    def chunks(self, columns, chunksize: int):
        with reading(self.path):
            for batch in self._file.iter_batches(batch_size=chunksize, columns=list(columns)):
                yield batch.to_pandas()


def _progress_bar(progress, total, desc: str):
    """A tqdm bar on stderr over the rows of a pass, or None (the rule of :func:`calibtest.core.progress.want_progress`).

    ``progress=None`` (default): only on a terminal or in a notebook, outside CI, with tqdm installed;
    ``True``: always (tqdm required); ``False``: never.
    """
    if progress is True:
        try:
            import tqdm  # noqa: F401
        except ImportError as exc:
            raise ImportError("progress=True needs tqdm: pip install 'calibtest[progress]'") from exc
    if not want_progress(progress):
        return None
    return make_bar(total, desc, unit="rows", unit_scale=True)


def _with_rows(exc: Exception, name: str, start: int, stop: int) -> Exception:
    """The same kind of error, saying where in the file it happened.

    A row number in the message (counted within the chunk) becomes the row of
    the file and its 1-based line number (the header is line 1).
    """
    kind = TypeError if isinstance(exc, TypeError) else ValueError
    text = re.sub(r"\brow (\d+)", lambda m: f"data row {start + int(m.group(1))} (line "
                  f"{start + int(m.group(1)) + 2} of {name})", str(exc))
    return kind(f"{name}, data rows {start}..{stop - 1} (0-based; lines {start + 2}..{stop + 1}): {text}")


@contextmanager
def reading(path: Path):
    """Turn the errors of a damaged file (bad compression, bytes that are not text, a corrupt
    Parquet body) into a ValueError that names the file."""
    import zlib

    import pandas as pd
    try:
        yield
    except (EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ValueError(f"cannot read {path.name}: {' '.join(str(exc).split())}") from exc
    except OSError as exc:
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise ValueError(f"cannot read {path.name}: {' '.join(str(exc).split()) or type(exc).__name__}") from exc


@dataclass(eq=False)
class DataFile:
    """A CSV or Parquet file opened for streamed passes: the one reader of every streamed analysis.

    Made by :func:`open_data_file`; every pass over its rows goes through
    :func:`each_chunk`, which refuses a file whose size or modification time
    differ from ``stat0`` (taken before the first read), so no pass can mix
    two versions of the data.

    Attributes
    ----------
    path : pathlib.Path
    chunksize : int
        Rows per chunk.
    fmt : {"csv", "parquet"}
    stat0 : os.stat_result
        The file's status before it was first read.
    reader : object
        ``_CsvReader`` or ``_ParquetReader``: ``columns``, ``num_rows`` and ``chunks(columns, chunksize)``.
    passes : int
        Passes made so far.
    n_rows_read, n_chunks : int
        Rows and non-empty chunks of the last pass.
    sha256 : str or None
        The file's SHA-256, from the last pass that computed it (``digest=True``).
    """

    path: Path
    chunksize: int
    fmt: str
    stat0: os.stat_result = field(repr=False)
    reader: object = field(repr=False)
    passes: int = 0
    n_rows_read: int = 0
    n_chunks: int = 0
    sha256: str | None = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def columns(self) -> list:
        """The file's columns."""
        return self.reader.columns

    def changed(self) -> bool:
        """Whether the file's size or modification time differ from ``stat0`` (a file gone has changed)."""
        try:
            stat1 = self.path.stat()
        except OSError:
            return True
        return (stat1.st_size, stat1.st_mtime_ns) != (self.stat0.st_size, self.stat0.st_mtime_ns)

    def refuse_changed(self) -> None:
        """Raise a :class:`~calibtest.options.DataError` when the file changed since ``stat0``: the result
        would mix two versions of the data."""
        if self.changed():
            raise DataError(f"{self.name} changed while it was being read; the result would mix two versions")

    def again(self) -> "DataFile":
        """The same opened file for another analysis of it: the same ``stat0`` (a change since the first
        read is refused), its own count of passes."""
        return dataclasses.replace(self, passes=0, n_rows_read=0, n_chunks=0, sha256=None)

    def source(self, columns) -> dict:
        """The ``source`` record of a result: ``path``, ``name``, ``format``, ``size_bytes``, ``modified``,
        ``sha256``, ``columns``, ``chunksize``, ``n_chunks``, ``n_rows_read`` (of the last pass) and
        ``passes`` (how many times the file was read)."""
        return {
            "path": str(self.path.resolve()), "name": self.name, "format": self.fmt,
            "size_bytes": int(self.stat0.st_size),
            "modified": _dt.datetime.fromtimestamp(self.stat0.st_mtime, tz=_dt.timezone.utc).isoformat(),
            "sha256": self.sha256, "columns": list(columns), "chunksize": self.chunksize,
            "n_chunks": self.n_chunks, "n_rows_read": self.n_rows_read, "passes": self.passes,
        }


def _walk(file: DataFile, columns, handle, bar) -> tuple[int, int]:
    """(rows, chunks) of one pass: ``handle`` of each non-empty chunk, stopping early when the file changed."""
    start = n_chunks = 0
    for chunk in file.reader.chunks(columns, file.chunksize):
        if len(chunk) == 0:
            continue
        stop = start + len(chunk)
        try:
            handle(chunk)
        except (ValueError, TypeError) as exc:
            raise _with_rows(exc, file.name, start, stop) from exc
        start, n_chunks = stop, n_chunks + 1
        if bar is not None:
            bar.update(len(chunk))
        if file.changed():  # the pass is refused after the loop
            break
    return start, n_chunks


def each_chunk(file: DataFile, columns, handle, *, digest: bool = False, progress=False) -> tuple[int, int]:
    """Call ``handle(chunk)`` on each chunk of ``file.chunksize`` rows of a data file, in order: the one walk
    of every streamed pass over a file.

    Empty chunks are skipped (a header-only file gives one); a ``ValueError`` or ``TypeError`` raised by
    ``handle`` is raised again naming the file and the chunk's rows (:func:`_with_rows`).  The file must
    not change from ``file.stat0`` (before its first read) to the end of the pass: a change (before
    the pass, or while it reads) is a :class:`~calibtest.options.DataError` saying the result would mix
    two versions, and it is the error raised when a changed file also made the pass fail.

    Parameters
    ----------
    file : DataFile
    columns : list of str
        The columns read.
    handle : callable
        Called with each chunk (a pandas DataFrame).
    digest : bool
        Compute the file's SHA-256 in a second thread during the pass (``file.sha256``).
    progress : bool or None
        A progress bar (see :func:`_progress_bar`).

    Returns
    -------
    tuple of int
        The rows read and the chunks handled (also ``file.n_rows_read`` and ``file.n_chunks``).

    Raises
    ------
    DataError
        The file changed.
    ValueError
        The file has a header but no data rows, or ``handle`` refused a chunk.
    """
    if file.changed():  # between two passes (e.g. an interval and, later, its evidence)
        raise DataError(f"{file.name} changed since it was first read; the result would mix two versions")
    file.passes += 1
    bar = _progress_bar(progress, file.reader.num_rows, file.name)
    try:
        with _digest(file, digest):
            rows, n_chunks = _walk(file, columns, handle, bar)
    except Exception:
        file.refuse_changed()  # the changed file is the cause
        raise
    finally:
        if bar is not None:
            bar.close()
    file.refuse_changed()
    if rows == 0:
        raise ValueError(f"{file.name} has a header but no data rows")
    file.n_rows_read, file.n_chunks = rows, n_chunks
    return rows, n_chunks


@contextmanager
def _digest(file: DataFile, digest: bool):
    """With ``digest``, the file's SHA-256 read in a second thread while the body reads the chunks, stored in
    ``file.sha256`` (the thread is stopped when the body raises)."""
    if not digest:
        yield
        return
    stop_hash = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(sha256_file, file.path, stop_hash)
        try:
            yield
        except BaseException:
            stop_hash.set()
            raise
        file.sha256 = future.result()


def _count_usable(file: DataFile, columns, formula: str, env, missing: str) -> int:
    """Rows that survive the missing-value rule (first pass for ``n_bins="auto"``).

    Raises
    ------
    ValueError
        The file has a header but no data rows.
    """
    usable = []
    each_chunk(file, columns,
               lambda chunk: usable.append(int(read_rows(formula, chunk, None, None, env, missing).probs.shape[0])))
    return sum(usable)


def open_data_file(path, formula: str, env, chunksize) -> DataFile:
    """A data file about to be streamed: the one opening step of every streamed analysis of a file.

    ``chunksize`` is checked against the table (None: :data:`DEFAULT_CHUNKSIZE`); the format comes from the
    name; the file must exist; its ``os.stat`` is taken before reading (to detect a change while it is read);
    and the formula's names must be columns of the file.  A :class:`DataFile` given as ``path`` is returned
    as it is (already opened by the caller, e.g. for an interval and then its evidence).
    """
    if isinstance(path, DataFile):
        return path
    path = Path(os.fspath(path))
    chunksize = check_option("chunksize", chunksize)
    chunksize = DEFAULT_CHUNKSIZE if chunksize is None else chunksize
    fmt = file_format(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {str(path)!r}")
    stat0 = path.stat()
    reader = _CsvReader(path) if fmt == "csv" else _ParquetReader(path)
    check_formula_names(formula, reader.columns, env, where=f"file {path.name!r}")
    return DataFile(path, chunksize, fmt, stat0, reader)


def stream_file(path, formula: str, settings: Settings) -> CalibrationResult:
    """:func:`calibtest.calib_ci` on a CSV or Parquet file, read in chunks.

    Parameters
    ----------
    path : str, os.PathLike or DataFile
        The file; its format comes from the name (see :func:`file_format`);
        or the file already opened by :func:`open_data_file`.
    formula : str
        As in :func:`calibtest.calib_ci`; only the columns it names are read.
    settings : Settings
        The call's options.  ``env``: where names that are not columns are
        looked up.  ``n_classes``, ``k``, ``n_bins``, ``alpha``, ``missing``
        as in :func:`calibtest.calib_ci`; ``n_bins="auto"`` needs the number
        of usable rows n before binning: a Parquet file with
        ``missing="raise"`` gives it in its metadata (one pass); otherwise a
        first pass counts the rows (two passes; an integer ``n_bins`` avoids
        it).  ``chunksize``: rows per chunk (default
        :data:`DEFAULT_CHUNKSIZE`; working memory is proportional to it).
        ``progress``: a progress bar (tqdm) on stderr: None shows it only in
        an interactive terminal outside CI, False never, True always.
        ``null`` as in :func:`calibtest.calib_ci`: the same null and p-value
        as the rows in memory, from the per-bin sums of the conditional
        moments accumulated in the same pass (see :class:`~calibtest.BinAccumulator`).

    Returns
    -------
    CalibrationResult
        Equal to the in-memory result up to floating-point summation order,
        with ``data=None`` and ``source`` = {``path``, ``name``, ``format``,
        ``size_bytes``, ``modified``, ``sha256``, ``columns``, ``chunksize``,
        ``n_chunks``, ``n_rows_read``, ``passes``}.
    """
    s = settings
    env, n_bins, missing = s.env, s.n_bins, s.missing
    file = open_data_file(path, formula, env, s.chunksize)
    columns = formula_columns(formula, file.columns)
    n_rows = None
    if isinstance(n_bins, str) and n_bins == "auto":
        if file.fmt == "parquet" and missing == "raise":
            n_rows = file.reader.num_rows  # a missing value would raise anyway
        else:
            n_rows = _count_usable(file, columns, formula, env, missing)
        if n_rows < 2:
            raise ValueError(f"need at least n = 2 rows, got {n_rows} in {file.name}")
    acc = BinAccumulator(formula, n_classes=s.n_classes, k=s.k, n_bins=n_bins, n_rows=n_rows, alpha=s.alpha,
                         missing=missing, eval_env=env, null=s.null)
    each_chunk(file, columns, acc.update, digest=True, progress=s.progress)
    call = Call("calib_ci", (repr(formula), f"data={file.name!r}"),
                {"n_classes": s.n_classes, "k": s.k, "n_bins": n_bins, "alpha": s.alpha,
                 "missing": missing if missing != "raise" else None,
                 "chunksize": file.chunksize if file.chunksize != DEFAULT_CHUNKSIZE else None,
                 "null": s.null if s.null != "auto" else None})
    return acc.result(call=call, source=file.source(columns))
