"""Shared checks for the streaming, file and Dask tests (not a test module).

``assert_same_result`` compares a result computed from merged per-bin sums
with the in-memory one.  Sums added in a different order differ by about
1e-16 relative *to the magnitude of the summands*; T = (1/n) sum_b
(||S_b||^2 - Q_b) / (c_b - 1) can cancel to nearly 0, so each float field is
compared with rtol = 1e-12 *and* an absolute tolerance of 1e-12 times the
field's natural scale (for the ECE^2-scale fields: the mean of ||U||^2,
which bounds the size of every term of T).  Integer, boolean and string
fields must be identical, the null used included.  The conditional null's
moments and p-value are compared with rtol = 1e-10 (its third moment is a
sum of terms that cancel exactly in bins of two rows, so its skewness gets
an absolute tolerance of 1e-10 too).
"""
from __future__ import annotations

import math

import numpy as np

RTOL = 1e-12

EXACT_FIELDS = ("contains_zero", "ci_lower_open", "ci_branch", "n", "n_bins", "n_bins_rule", "bin_width",
                "bin_volume", "n_occupied_bins", "n_singleton_bins", "k", "n_classes", "mode", "alpha",
                "method", "formula", "y_name", "prob_names", "n_dropped", "sigma0_sq", "null", "null_method")

#: Relative (and, for the dimensionless fields, absolute) tolerance of the conditional null's fields.
NULL_RTOL = 1e-10


def _scales(ref) -> dict:
    stats = ref.bin_stats
    q = float(stats.sum_sq.sum()) / ref.n  # mean ||U||^2
    z_scale = ref.n * math.sqrt(ref.bin_volume) * q / math.sqrt(ref.sigma0_sq)
    return {"estimate": q, "estimate_pos": q, "plugin_estimate": q, "ci_lower": q, "ci_upper": q,
            "threshold": q, "ece": math.sqrt(q), "sigma1_sq": q * q, "se": q / math.sqrt(ref.n),
            "null_zstat": z_scale, "null_pvalue": 0.4 * z_scale}


def assert_same_result(res, ref, rtol: float = RTOL) -> None:
    """``res`` (from sums) equals ``ref`` (in memory) field by field."""
    for name in EXACT_FIELDS:
        assert getattr(res, name) == getattr(ref, name), (name, getattr(res, name), getattr(ref, name))
    for name, scale in _scales(ref).items():
        a, b = getattr(res, name), getattr(ref, name)
        if name == "ece":  # sqrt is not Lipschitz at 0: compare on the squared scale
            a, b, scale = a * a, b * b, scale * scale
        assert math.isclose(a, b, rel_tol=rtol, abs_tol=rtol * scale), (name, a, b, abs(a - b) / max(abs(b), 1e-300))
    np.testing.assert_array_equal(res.bin_stats.keys, ref.bin_stats.keys)
    np.testing.assert_allclose(res.bin_stats.count, ref.bin_stats.count, rtol=0, atol=0)
    for name in ("sum_u", "sum_uu", "sum_z"):
        a, b = getattr(res.bin_stats, name), getattr(ref.bin_stats, name)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(1.0, float(np.abs(b).max(initial=0.0))))
    assert (res.conditional is None) == (ref.conditional is None), (res.conditional, ref.conditional)
    if ref.conditional is not None:
        assert_same_conditional(res.conditional, ref.conditional)


def assert_same_conditional(a, b, rtol: float = NULL_RTOL) -> None:
    """Two :class:`~calibtest.core.conditional.ConditionalTest` of the same rows agree to ``rtol``.

    The variance relatively; the skewness, third moment / sd^3, p-value and z
    also absolutely (they are dimensionless); the threshold to rtol * sd.
    """
    assert a.reliable == b.reliable, (a.skewness, b.skewness)
    assert math.isclose(a.variance, b.variance, rel_tol=rtol), ("variance", a.variance, b.variance)
    sd3 = b.variance ** 1.5 if b.variance > 0 else 1.0
    pairs = {"skewness": (a.skewness, b.skewness), "pvalue": (a.pvalue, b.pvalue), "zstat": (a.zstat, b.zstat),
             "third_moment / sd^3": (a.third_moment / sd3, b.third_moment / sd3),
             "threshold / sd": (a.threshold / sd3 ** (1 / 3), b.threshold / sd3 ** (1 / 3))}
    for name, (x, y) in pairs.items():
        if not math.isfinite(y):
            assert x == y or (math.isnan(x) and math.isnan(y)), (name, x, y)
        else:
            assert math.isclose(x, y, rel_tol=rtol, abs_tol=rtol), (name, x, y)
