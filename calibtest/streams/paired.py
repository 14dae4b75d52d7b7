r"""Streamed comparison of calibration errors: :func:`calibtest.calib_compare` on a CSV or Parquet file.

``calib_compare("y ~ p_a", "y ~ p_b", data="big.parquet")`` lands here
(:func:`compare_file`), and so does a comparison of results that were
themselves streamed from a file (:func:`streamed_difference`).  The rows are
never held: memory is that of one chunk plus sums over bins and cells.

Two passes
----------
1. One :class:`~calibtest.BinAccumulator` per model, fed the same chunks: each
   model's per-bin sums c_b, S_b, M_b, hence its estimate T and its result, as
   :func:`calibtest.calib_ci` streams a file.
2. Given each model's bin means mu_b = S_b / c_b (pass 1), one pass of
   additive sums (:class:`DifferenceSums`, merged across chunks as the bin sums
   are):

   * the influence values psi_i = ||mu_b(i)||^2 + 2 mu_b(i)^T (U_i - mu_b(i))
     of each model and their difference delta_i = psi^A_i - psi^B_i, summed
     and squared after subtracting a centre c known from pass 1 (the sum of
     psi is sum_b ||S_b||^2 / c_b), so that the population variance
     Var_n(delta) = mean((delta - c)^2) - mean(delta - c)^2 keeps its digits;
   * per bin of each model, sum_i ||U_i||^4, which with M_b gives the
     distinct-pair sums ||M_b||_F^2 - sum_i ||U_i||^4 of the second order;
   * per occupied cell of the cross partition (A-bin, B-bin), the sums of
     W_i = U^A_i (U^B_i)^T and of ||U^A_i||^2 ||U^B_i||^2, whose cell sums
     give sum_{i != j in cell} (U^A_i.U^A_j)(U^B_i.U^B_j) =
     ||sum W_i||_F^2 - sum ||U^A_i||^2 ||U^B_i||^2 (the covariance of the two
     degenerate parts).  These are kept sparse, one row per occupied cell:
     at most min(n, m_A m_B) rows of d^2 + 1 numbers, with m_A, m_B the
     models' bins (B^d each); with an integer ``n_bins`` this does not grow
     with n, with ``n_bins="auto"`` (B ~ n^(2/(4+d))) it grows like
     n^(4/(4+d)) at most.

   The variance is then :func:`calibtest.core.difference_variance.paired_variance_from_sums`
   (or :func:`~calibtest.core.difference_variance.unpaired_variance_from_sums`),
   the function the rows in memory end in, so the streamed numbers equal the
   in-memory ones up to the order of the floating-point additions.

Several models compared pairwise share both passes (one accumulator per
model in pass 1, the cells of every pair in pass 2).  ``n_bins="auto"`` needs
the number of rows before binning: a Parquet file's metadata with
``missing="raise"``, otherwise a counting pass first.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from calibtest.core.binstats import column_sums
from calibtest.core.difference_variance import (DifferenceVariance, influence_from_means,
                                                paired_variance_from_sums, unpaired_variance_from_sums)
from calibtest.core.partition import partition_rows
from calibtest.core.targets import Target
from calibtest.display.format import Call
from calibtest.ece.result import CalibrationResult
from calibtest.inputs.formula import check_formula_names, formula_columns
from calibtest.inputs.rows import joint_missing, read_rows
from calibtest.inputs.settings import Settings
from calibtest.options import DEFAULT_CHUNKSIZE, DataError
from calibtest.streams.accumulator import BinAccumulator, _prepare_rows
from calibtest.streams.evidence import with_stream
from calibtest.streams.files import DataFile, each_chunk, open_data_file

__all__ = ["ModelBins", "DifferenceSums", "compare_file", "streamed_difference", "is_streamed"]


def is_streamed(res) -> bool:
    """Whether a result holds no rows but can read them again from its file or Dask frame (``res.stream``)."""
    return getattr(res, "data", None) is None and getattr(res, "stream", None) is not None


@dataclass(frozen=True, eq=False)
class ModelBins:
    """One model's bins from its first pass: where a row falls, and each bin's mean of U.

    Attributes
    ----------
    n_bins : int
        B of the model's partition.
    strides : ndarray of int64
        Strides of the linear key of a cube cell index (``(B + 1)^j``).
    linear : ndarray of int64, shape (m,)
        Linear keys of the occupied bins, increasing (the order of the result's bins).
    count : ndarray of float64, shape (m,)
        c_b.
    mu : ndarray, shape (m, d)
        mu_b = S_b / c_b.
    frobenius : ndarray, shape (m,)
        ||M_b||_F^2, M_b = sum U U^T over the bin.
    centre : float
        mean of psi over the rows, sum_b ||S_b||^2 / c_b / n (subtracted before squaring).
    """

    n_bins: int
    strides: np.ndarray
    linear: np.ndarray
    count: np.ndarray
    mu: np.ndarray
    frobenius: np.ndarray
    centre: float

    @classmethod
    def of(cls, stats, n_bins: int) -> "ModelBins":
        """From the merged :class:`~calibtest.core.binstats.BinStats` of a cube partition with B = ``n_bins``."""
        d = stats.keys.shape[1]
        if float(n_bins + 1) ** d >= 2.0**62:
            raise ValueError(f"the streamed comparison keys each cell by one int64, and {n_bins + 1}^{d} cells do "
                             "not fit; use fewer bins (n_bins=) or a smaller k, or read the columns into memory")
        strides = (n_bins + 1) ** np.arange(d, dtype=np.int64)
        linear = stats.keys @ strides
        order = np.argsort(linear, kind="stable")  # the bins' own order already, for sums merged or not
        linear, count = linear[order], stats.count[order].astype(np.float64)
        sum_u, sum_uu = stats.sum_u[order], stats.sum_uu[order]
        mu = sum_u / count[:, None]
        frob = np.einsum("bij,bij->b", sum_uu, sum_uu)
        centre = float(np.sum(np.einsum("bi,bi->b", sum_u, sum_u) / count) / np.sum(count))
        return cls(int(n_bins), strides, linear, count, mu, frob, centre)

    @property
    def m(self) -> int:
        return int(self.linear.shape[0])

    def locate(self, prepared) -> np.ndarray:
        """Bin number (0..m-1, the result's bins) of each row of a prepared chunk.

        Raises
        ------
        DataError
            A row falls in a bin the first pass did not see (the rows differ from the first pass's).
        """
        part = partition_rows(prepared, self.n_bins)
        linear = part.keys @ self.strides
        pos = np.minimum(np.searchsorted(self.linear, linear), self.m - 1)
        if not np.array_equal(self.linear[pos], linear):
            raise DataError("a row falls in a bin the first pass over the file did not see: the rows read differ "
                            "between the passes")
        return pos[part.inverse]


class _Cells:
    """Sparse per-cell column sums: one running total (sorted distinct keys and their sums) that each chunk's
    sums are merged into.

    Two models' cells fill up quickly (most cells of the cross partition hold rows after a few chunks), so
    a binary counter of partials, as :class:`~calibtest.BinAccumulator` keeps for bins, would hold about
    log2(chunks) partials of nearly the full size; one total holds one, plus the chunk's and the merge's.
    """

    def __init__(self):
        self.keys = np.empty(0, dtype=np.int64)
        self.sums: np.ndarray | None = None

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        uniq, inverse = np.unique(keys, return_inverse=True)
        self._into(uniq, column_sums(inverse.reshape(-1), values, uniq.shape[0]))

    def _into(self, keys, sums) -> None:
        if self.sums is None:
            self.keys, self.sums = keys, sums
        else:
            self.keys, self.sums = _merge_cells((self.keys, self.sums), (keys, sums))

    def extend(self, other: "_Cells") -> None:
        if other.sums is not None:
            self._into(other.keys, other.sums)

    def total(self) -> tuple[np.ndarray, np.ndarray]:
        return self.keys, self.sums


def _merge_cells(total, part) -> tuple[np.ndarray, np.ndarray]:
    """The running ``total`` (sorted distinct keys, their sums) with a chunk's ``part`` added cell by cell.

    The sums of the part's cells already in the total are added in place; its
    new cells are inserted at their sorted places (``np.insert``, one copy of
    the total), so a merge holds the total, the part and at most one copy.
    """
    k0, s0 = total
    k1, s1 = part
    pos = np.searchsorted(k0, k1)
    hit = pos < k0.shape[0]
    hit[hit] = k0[pos[hit]] == k1[hit]
    s0[pos[hit]] += s1[hit]
    if hit.all():
        return k0, s0
    new = ~hit
    return np.insert(k0, pos[new], k1[new]), np.insert(s0, pos[new], s1[new], axis=0)


def _outer_flat(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (u[:, :, None] * v[:, None, :]).reshape(u.shape[0], -1)


@dataclass
class _ModelSums:
    count: np.ndarray
    quartic: np.ndarray  # per bin sum ||U||^4
    s1: float = 0.0  # sum (psi - centre)
    s2: float = 0.0  # sum (psi - centre)^2


@dataclass
class _PairSums:
    cells: _Cells
    s1: float = 0.0  # sum (delta - centre_A + centre_B)
    s2: float = 0.0
    identical: bool = True  # the outcomes y = U + Z agree row by row


class DifferenceSums:
    """Additive sums of one pass over shared rows for Var(T_A - T_B) of pairs of models (pass 2).

    Parameters
    ----------
    bins : sequence of ModelBins
        Each model's bins from the first pass.
    pairs : sequence of (int, int)
        The pairs (i, j) of models compared on the same rows (none: each model's own sums only, for an
        unpaired comparison).

    Notes
    -----
    :meth:`add` takes the prepared rows of a chunk, one
    :class:`~calibtest.core.targets.PreparedData` per model, row-aligned;
    :meth:`merge` adds the sums of disjoint chunks.  See the module docstring
    for what is summed.
    """

    def __init__(self, bins, pairs=()):
        self.bins = list(bins)
        self.pairs = [tuple(p) for p in pairs]
        self.models = [_ModelSums(np.zeros(b.m), np.zeros(b.m)) for b in self.bins]
        self.pair_sums = {p: _PairSums(_Cells()) for p in self.pairs}

    def add(self, prepared) -> "DifferenceSums":
        """Add the sums of one chunk of rows (a list of PreparedData, one per model, the same rows)."""
        where, psi = [], []
        for b, s, p in zip(self.bins, self.models, prepared):
            idx = b.locate(p)
            centred = influence_from_means(b.mu[idx], p.u) - b.centre
            sq = np.einsum("ij,ij->i", p.u, p.u)
            s.count += np.bincount(idx, minlength=b.m)
            s.quartic += np.bincount(idx, weights=sq * sq, minlength=b.m)
            s.s1 += float(np.sum(centred))
            s.s2 += float(np.sum(centred * centred))
            where.append(idx)
            psi.append(centred)
        for (i, j), s in self.pair_sums.items():
            ui, uj = prepared[i].u, prepared[j].u
            delta = psi[i] - psi[j]
            s.s1 += float(np.sum(delta))
            s.s2 += float(np.sum(delta * delta))
            diag = np.einsum("ij,ij->i", ui, ui) * np.einsum("ij,ij->i", uj, uj)
            s.cells.add(where[i].astype(np.int64) * self.bins[j].m + where[j],
                        np.column_stack([_outer_flat(ui, uj), diag]))
            s.identical = s.identical and np.array_equal(np.rint(ui + prepared[i].z), np.rint(uj + prepared[j].z))
        return self

    def merge(self, other: "DifferenceSums") -> "DifferenceSums":
        """Add the sums of ``other`` (disjoint rows, the same bins and pairs) into these."""
        for s, o in zip(self.models, other.models):
            s.count += o.count
            s.quartic += o.quartic
            s.s1, s.s2 = s.s1 + o.s1, s.s2 + o.s2
        for p, s in self.pair_sums.items():
            o = other.pair_sums[p]
            s.cells.extend(o.cells)
            s.s1, s.s2 = s.s1 + o.s1, s.s2 + o.s2
            s.identical = s.identical and o.identical
        return self

    def refuse_other_rows(self) -> None:
        """Raise a DataError when a bin's rows in this pass differ from the first pass's."""
        for b, s in zip(self.bins, self.models):
            if not np.array_equal(s.count, b.count):
                raise DataError("the rows of the second pass over the file differ from the first pass's (bin counts "
                                "differ)")

    def n(self, i: int = 0) -> int:
        return int(np.sum(self.models[i].count))

    def single(self, i: int) -> tuple[float, tuple]:
        """Model i's Var_n(psi) / n and its (n, counts, distinct-pair sums)."""
        s, b, n = self.models[i], self.bins[i], self.n(i)
        var = s.s2 / n - (s.s1 / n) ** 2
        return var / n, (n, b.count, b.frobenius - s.quartic)

    def identical(self, i: int, j: int) -> bool:
        """Whether the outcomes of models i and j agree row by row."""
        return bool(self.pair_sums[(i, j)].identical)

    def variance(self, i: int, j: int, paired: bool) -> DifferenceVariance:
        """The components of Var(T_i - T_j): paired (the rows of this pass) or as independent sets."""
        if not paired:
            (va, a), (vb, b) = self.single(i), self.single(j)
            return unpaired_variance_from_sums(va + vb, [a, b])
        s, n = self.pair_sums[(i, j)], self.n(i)
        plugin = (s.s2 / n - (s.s1 / n) ** 2) / n
        keys, sums = s.cells.total()
        m_j = self.bins[j].m
        cells = np.column_stack([keys // m_j, keys % m_j]).astype(np.intp)
        pairs_c = np.einsum("cj,cj->c", sums[:, :-1], sums[:, :-1]) - sums[:, -1]
        (_, a), (_, b) = self.single(i), self.single(j)
        return paired_variance_from_sums(n, plugin, (a[1], a[2], b[1], b[2], cells, pairs_c))


# ----------------------------------------------------------------------------- reading the chunks
@dataclass(frozen=True)
class _Models:
    """The formulas read from each chunk and how: the environment, the missing-value rule, the target."""

    formulas: tuple
    envs: tuple  # where each formula's names that are not columns are looked up
    missing: str
    n_classes: object = None
    k: object = None

    def usable(self, chunk):
        """The chunk's rows without a missing value in any formula (``missing="drop"``), the per-formula
        missing counts and the rows dropped."""
        if self.missing != "drop":
            return chunk, None, 0
        masks = [joint_missing([f], chunk, env) for f, env in zip(self.formulas, self.envs)]
        joint = np.logical_or.reduce(masks)
        return (chunk.loc[~joint] if joint.any() else chunk), [int(m.sum()) for m in masks], int(joint.sum())

    def prepared(self, chunk) -> list:
        """One PreparedData per formula of the chunk's usable rows (after :meth:`usable`)."""
        out = []
        for f, env in zip(self.formulas, self.envs):
            rows = read_rows(f, chunk, None, None, env, "raise")
            out.append(_prepare_rows(rows.y, rows.probs, n_classes=self.n_classes, k=self.k,
                                     class_names=rows.class_names, y_name=rows.y_name, prob_names=rows.prob_names))
        return out


def _second_pass(file: DataFile, columns, models: _Models, bins, pairs) -> DifferenceSums:
    """Pass 2 over the file (see the module docstring), its counts checked against pass 1's."""
    total = DifferenceSums(bins, pairs)

    def handle(chunk) -> None:
        chunk, _, _ = models.usable(chunk)
        if len(chunk):
            total.add(models.prepared(chunk))

    each_chunk(file, columns, handle)
    total.refuse_other_rows()
    return total


def _count_rows(file: DataFile, columns, models: _Models) -> int:
    """The usable rows (a counting pass; for ``n_bins="auto"``)."""
    counts = []
    each_chunk(file, columns, lambda chunk: counts.append(len(models.usable(chunk)[0])))
    return sum(counts)


def compare_file(path, formulas, settings: Settings, pairs) -> tuple[list, dict]:
    """Each model's result and the variance components of each pair, streamed from a CSV or Parquet file.

    Parameters
    ----------
    path : str or os.PathLike
        The file (format from the name, :func:`calibtest.streams.files.file_format`).
    formulas : sequence of str
        The models, all scored on the same rows of the file.
    settings : Settings
        ``n_classes``, ``k``, ``n_bins``, ``missing`` (``"drop"``: a row with
        a missing value in any formula is dropped for every model), ``env``,
        ``chunksize`` and ``progress``, as in :func:`calibtest.calib_ci`.
    pairs : sequence of (int, int)
        The pairs compared.

    Returns
    -------
    results : list of CalibrationResult
        As :func:`calibtest.calib_ci` (``null="asymptotic"``, as the
        comparison's results in memory) on the shared rows, with
        ``source`` recording the file and its passes; each holds its rows as
        ``stream`` (so that its report can read them again) when its own
        missing-value rule keeps exactly the shared rows.
    variances : dict
        ``{(i, j): DifferenceVariance}`` of the paired comparison.
    """
    s = settings
    file = open_data_file(path, formulas[0], s.env, s.chunksize)
    for f in formulas[1:]:
        check_formula_names(f, file.columns, s.env, where=f"file {file.name!r}")
    columns = list(dict.fromkeys(c for f in formulas for c in formula_columns(f, file.columns)))
    models = _Models(tuple(formulas), (s.env,) * len(formulas), s.missing, s.n_classes, s.k)
    n_rows = None
    if isinstance(s.n_bins, str) and s.n_bins == "auto":
        n_rows = file.reader.num_rows if file.fmt == "parquet" and s.missing == "raise" else \
            _count_rows(file, columns, models)
        if n_rows < 2:
            raise ValueError(f"need at least n = 2 rows, got {n_rows} in {file.name}")
    accs = [BinAccumulator(f, n_classes=s.n_classes, k=s.k, n_bins=s.n_bins, n_rows=n_rows, alpha=s.alpha,
                           eval_env=s.env, null="asymptotic") for f in formulas]
    dropped = {"own": [0] * len(formulas), "joint": 0}

    def first(chunk) -> None:
        chunk, own, joint = models.usable(chunk)
        if own is not None:
            dropped["own"] = [a + b for a, b in zip(dropped["own"], own)]
            dropped["joint"] += joint
        for acc in accs:
            acc.update(chunk)

    each_chunk(file, columns, first, digest=True, progress=s.progress)
    for acc in accs:
        if acc.bin_stats is None or acc.n < 2:
            raise ValueError(f"need at least n = 2 rows, got {acc.n} in {file.name}")
        if n_rows is not None and acc.n != n_rows:
            raise ValueError(f"{file.name} held {n_rows} usable rows when counted and {acc.n} when read")
        _refuse_off_cube(acc)
    bins = [ModelBins.of(acc.bin_stats, acc.n_bins) for acc in accs]
    sums = _second_pass(file, columns, models, bins, pairs)
    results = [_file_result(acc, f, file, columns, s, dropped["own"][i] == dropped["joint"])
               for i, (acc, f) in enumerate(zip(accs, formulas))]
    return results, {p: sums.variance(*p, paired=True) for p in pairs}


def _refuse_off_cube(acc: BinAccumulator) -> None:
    mode = Target.of(acc._target[0])
    if not mode.cube:  # the message of the rows in memory (calib_compare's _rows)
        raise ValueError(f"a: calib_compare supports the modes {tuple(t.value for t in Target if t.cube)}, "
                         f"got {mode!r}")


def _file_result(acc, formula, file: DataFile, columns, s: Settings, same_rows: bool) -> CalibrationResult:
    """A model's result from its pass-1 sums, the file recorded as its source, its rows as its stream."""
    call = Call("calib_ci", (repr(formula), f"data={file.name!r}"),
                {"n_classes": s.n_classes, "k": s.k, "n_bins": s.n_bins, "alpha": s.alpha,
                 "missing": s.missing if s.missing != "raise" else None,
                 "chunksize": file.chunksize if file.chunksize != DEFAULT_CHUNKSIZE else None})
    res = acc.result(call=call, source=file.source(columns))
    if not same_rows:  # its own rule would read other rows than the shared ones: no stream
        return res
    return with_stream(res, file.again(), formula, dataclasses.replace(s, chunksize=file.chunksize))


# ----------------------------------------------------------------------------- streamed results
def _stream_file(res, which: str) -> DataFile:
    stream = res.stream
    if not stream.is_file:
        raise ValueError(f"{which} was computed from a Dask DataFrame; calib_compare streams files only: compare "
                         "the formulas on a file (calib_compare('y ~ p_a', 'y ~ p_b', data='preds.parquet')) or on "
                         "the columns in memory (ddf[columns].compute())")
    return stream.data


def _same_file(a: DataFile, b: DataFile) -> bool:
    return (a.path.resolve() == b.path.resolve() and a.stat0.st_size == b.stat0.st_size
            and a.stat0.st_mtime_ns == b.stat0.st_mtime_ns)


def _single_pass(res, which: str) -> DifferenceSums:
    """One model's own sums from a pass over its stream."""
    file = _stream_file(res, which).again()
    st = res.stream
    models = _Models((st.formula,), (st.env,), st.missing, st.n_classes, st.k)
    return _second_pass(file, st.columns, models, [ModelBins.of(res.bin_stats, res.n_bins)], ())


def _joint_pass(a, b) -> DifferenceSums:
    """The pair's sums from one pass over the file both results were streamed from (the same rows)."""
    sa, sb = a.stream, b.stream
    if sa.missing != sb.missing:
        raise ValueError(f"the two results were computed with different missing-value rules ({sa.missing!r} and "
                         f"{sb.missing!r}); a paired comparison needs the same rows")
    models = _Models((sa.formula, sb.formula), (sa.env, sb.env), sa.missing, sa.n_classes, sa.k)
    columns = list(dict.fromkeys(sa.columns + sb.columns))
    file = sa.data.again()
    bins = [ModelBins.of(r.bin_stats, r.n_bins) for r in (a, b)]
    return _second_pass(file, columns, models, bins, [(0, 1)])


def _memory_single(res) -> tuple[float, tuple]:
    from calibtest.core.difference_variance import first_order_var_single, pair_sums_single
    inv, u = res.partition.inverse, res.data.u
    return first_order_var_single(inv, u), (u.shape[0], *pair_sums_single(inv, u))


def streamed_difference(a, b, paired) -> tuple[DifferenceVariance, tuple[bool, str]]:
    """The variance components of T_A - T_B and the pairing, when a result was streamed from a file.

    Parameters
    ----------
    a, b : CalibrationResult
        At least one streamed from a file (no rows held; ``res.stream``); the other streamed too, or in memory.
    paired : bool or None
        As in :func:`calibtest.calib_compare`.  Two results streamed from the
        same file (the same path, size and modification time) are compared in
        one more pass over it: paired (``paired=True``, or ``None`` when the
        binary outcomes agree row by row) or not.  Results of different files,
        or one streamed and one in memory, are independent evaluation sets: one
        more pass over each streamed file gives its own sums.

    Raises
    ------
    ValueError
        ``paired=True`` for results of different files or numbers of rows;
        ``paired=None`` for results of different files with the same n (the
        rows cannot be recognised without reading both files side by side).
    """
    files = [_stream_file(r, w) for r, w in ((a, "a"), (b, "b")) if is_streamed(r)]
    same = len(files) == 2 and _same_file(*files)
    if paired is True and a.n != b.n:
        raise ValueError(f"paired=True needs the same rows in the same order, but the results have different "
                         f"numbers of rows (n_a = {a.n}, n_b = {b.n})")
    if same and a.n == b.n and paired is not False:
        sums = _joint_pass(a, b)
        pair = (True, "caller") if paired else a.kind.shares_rows(b.kind, identical=sums.identical(0, 1))
        return sums.variance(0, 1, paired=pair[0]), pair
    if paired is True:
        raise ValueError("a paired comparison of streamed results needs both streamed from the same file (the same "
                         "rows): put both models' predictions in one file and compare the formulas on it, "
                         "calib_compare('y ~ p_a', 'y ~ p_b', data='preds.parquet')")
    if paired is None and a.n == b.n and not same:
        raise ValueError("cannot tell whether a streamed result and another of a different file or in memory, with "
                         f"the same n = {a.n}, share their rows: pass paired=False (independent evaluation sets), or "
                         "compare the formulas on one file, calib_compare('y ~ p_a', 'y ~ p_b', data=path)")
    reason = "caller" if paired is False else "different n"
    parts = [_single_pass(r, w).single(0) if is_streamed(r) else _memory_single(r)
             for r, w in ((a, "a"), (b, "b"))]
    return unpaired_variance_from_sums(parts[0][0] + parts[1][0], [parts[0][1], parts[1][1]]), (False, reason)
