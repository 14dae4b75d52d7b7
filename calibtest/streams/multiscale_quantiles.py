"""The multi-scale test with equal-mass scales (``partitions="equal-mass"`` or ``"both"``) on a file or a Dask frame.

The equal-mass bins of :func:`calibtest.checks.multiscale.equal_mass_bins` have
their edges at ``np.quantile(p, j / B)`` (linear interpolation) of every
prediction.  On a stream they are found exactly before the draws: a first
pass counts the rows (n, hence the adaptive grid) and takes the 2^16-cell
histogram of the predictions' bits, then the radix selection of
:mod:`calibtest.streams.evidence` refines the cells holding the
order statistics each edge interpolates (one or two more passes for a
continuous score), and numpy's interpolation formula gives the edge, so each
row falls in the bin it has in memory (``np.searchsorted(edges, p,
side="right")``; a bin left empty has no rows and no term).  Then one pass
reduces each chunk (partition) to per-draw bin sums on every scale, keyed by
the seed and each row's position, as the equal-width scales are
(:class:`~calibtest.streams.multiscale.CalibTestAccumulator`), so the
p-value for a seed is the one of the same rows in memory, whatever the chunk
size or the partitioning.  Binary and top-1 targets, without ``by=``.
"""
from __future__ import annotations

import numpy as np

from calibtest.display.format import Call
from calibtest.streams.multiscale import CalibTestAccumulator
from calibtest.streams.evidence import StreamedRows, _add, _Select
from calibtest.checks.multiscale import CalibrationTestResult, MultiScaleOptions, adaptive_grid, check_grid
from calibtest.core.binning import cube_indices
from calibtest.core.conditional import counter_key
from calibtest.inputs.settings import Settings

__all__ = ["linear_quantiles", "stream_calib_test_scales"]


def _quantile_ranks(n: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower rank, upper rank, weight) of ``np.quantile(x, q)`` (method ``"linear"``) on n values.

    numpy's virtual index h = (n - 1) q, its floor and the next rank (both the
    last rank when h >= n - 1), and gamma = h - floor(h).
    """
    h = (n - 1) * np.asarray(q, dtype=np.float64)
    lower = np.floor(h)
    above = h >= n - 1
    lo = np.where(above, n - 1, lower).astype(np.int64)
    hi = np.where(above, n - 1, lower + 1).astype(np.int64)
    return lo, hi, np.where(above, 0.0, h - lower)


def linear_quantiles(values_at, n: int, q) -> np.ndarray:
    """``np.quantile(x, q)`` from the order statistics of x: ``values_at(ranks)`` gives sorted(x)[ranks].

    numpy's linear interpolation, ``a + (b - a) gamma``, or ``b - (b - a) (1 - gamma)``
    where gamma >= 0.5, so the edges are numpy's to the last bit.
    """
    lo, hi, gamma = _quantile_ranks(n, q)
    a, b = values_at(lo), values_at(hi)
    diff = b - a
    out = a + diff * gamma
    return np.where(gamma >= 0.5, b - diff * (1.0 - gamma), out)


class _ScalesAccumulator(CalibTestAccumulator):
    """The multi-scale test's sums on equal-width and equal-mass scales (binary and top-1 targets).

    ``scales`` lists (family, B, edges): ``"equal-width"`` bins [i/B, (i+1)/B)
    (``edges`` None), ``"equal-mass"`` bins between the given interior edges.
    """

    def __init__(self, scales: list, partitions: str, **options):
        self.scales, self.partitions = scales, partitions
        super().__init__(n_bins=sorted({b for _, b, _ in scales}), **options)

    def _widths(self) -> list:
        return [b + 1 if fam == "equal-width" else b for fam, b, _ in self.scales]

    def _inverses(self, p: np.ndarray, z: np.ndarray) -> list:
        return [cube_indices(z, b)[:, 0] if fam == "equal-width" else np.searchsorted(edges, p, side="right")
                for fam, b, edges in self.scales]  # a loop over the few scales

    def _scale_labels(self) -> list:
        """(family, B) of each scale: equal-width and equal-mass scales, in the order of the draws' partitions."""
        return [(fam, b) for fam, b, _ in self.scales]

    def _partitions_name(self) -> str:
        return self.partitions


def _scales_step(scales, partitions, options, p, y, start, index):
    acc = _ScalesAccumulator(scales, partitions, start=start, **options)
    return acc.update(y=np.rint(y), probs=p)


def stream_calib_test_scales(data, formula: str, settings: Settings,
                             test: MultiScaleOptions) -> CalibrationTestResult:
    """:func:`calibtest.calib_test` with ``partitions="equal-mass"`` or ``"both"`` on a file path or a Dask frame.

    See the module docstring.

    Parameters
    ----------
    data, formula
        As in :func:`calibtest.streams.multiscale.stream_calib_test`.
    settings : Settings
        ``env``, ``chunksize``, ``n_bins`` (as given: ``"adaptive"``, a bin
        count or a list), ``missing``, ``n_classes``, ``k`` and ``rng``.
    test : MultiScaleOptions
        ``alpha``, ``n_draws``, ``combine``, ``partitions`` and
        ``spiegelhalter`` (its ``grid`` is read from ``settings.n_bins``).
    """
    env, chunksize, n_bins, missing, rng = (settings.env, settings.chunksize, settings.n_bins, settings.missing,
                                            settings.rng)
    n_classes, k, partitions = settings.n_classes, settings.k, test.partitions
    if rng is not None and not (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        raise TypeError(f"rng must be None or an int seed on a file or Dask DataFrame (the label draws are keyed "
                        f"by it), got {type(rng).__name__}")
    rows = StreamedRows(data, formula, env, missing, n_classes, k, chunksize)
    first_plan = [("hist", 0, 0)]
    first = rows.run(lambda p, y, s, i: {"n": p.size, **_Select.step(first_plan, p)}, _add)
    n = 0 if first is None else int(first["n"])
    if n < 2:
        raise ValueError(f"need at least n = 2 rows, got {n}")
    grid = check_grid(n_bins)
    grid = adaptive_grid(n, 1) if grid is None else grid
    families = [fam for fam in ("equal-width", "equal-mass") if partitions in (fam, "both")]
    qs = {b: np.arange(1, b) / b for b in grid}
    ranks = sorted({int(r) for b in grid for part in _quantile_ranks(n, qs[b])[:2] for r in part})
    select = _Select(ranks)
    counts = select.advance(first_plan, first)
    while not select.done:  # one or two more passes for a continuous score
        plan = select.plan(counts)
        counts = select.advance(plan, rows.run(lambda p, y, s, i: _Select.step(plan, p), _add))
    values_at = np.vectorize(lambda r: select.found[int(r)][0], otypes=[np.float64])
    scales = [(fam, b, None if fam == "equal-width" else linear_quantiles(values_at, n, qs[b]))
              for fam in families for b in grid]
    key_seed = counter_key(rng)[1] if rng is None else int(rng)  # one seed for every chunk
    options = dict(n_classes=n_classes, k=k, alpha=test.alpha, n_draws=test.n_draws, rng=key_seed,
                   combine=test.combine, spiegelhalter=test.spiegelhalter)
    acc = rows.run(lambda p, y, s, i: _scales_step(scales, partitions, options, p, y, s, i),
                   lambda a, b: a.merge(b), digest=True)
    y_name, prob_names = rows.names
    shown = {"n_bins": None if n_bins == "adaptive" else n_bins, "partitions": partitions, "rng": key_seed}
    name = rows.data.name if rows.is_file else "<Dask DataFrame>"
    call = Call("calib_test", (repr(formula), f"data={name!r}"), {k_: v for k_, v in shown.items() if v is not None})
    return acc.result(formula=formula, y_name=y_name, prob_names=tuple(prob_names), n_dropped=rows.n_dropped,
                      call_record=call, source=rows.source())
