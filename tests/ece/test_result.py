"""CalibrationResult as a few typed, frozen parts: its field count, every former flat name, with_parts, pickling.

The flat names (``res.ci_lower``, ``res.null_pvalue``, ...) were the result's 49 dataclass fields; they are now
read from the parts (``res.ci.lower``, ``res.zero_test.pvalue``).  The table below says where each one lives, and
the tests check each name against it and against values computed here from the rows.
"""
from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import calibtest as ct
from calibtest.ece.result import CalibrationResult
from calibtest.ece.result_parts import AnalysedRows, Binning, CalibrationTarget, ResultInterval, ZeroTest

#: Every former field of CalibrationResult that now lives in a part: flat name -> (part, the part's field).
IN_PARTS = {
    "ci_lower": ("ci", "lower"), "ci_upper": ("ci", "upper"), "ci_lower_open": ("ci", "lower_open"),
    "ci_branch": ("ci", "branch"), "contains_zero": ("ci", "contains_zero"), "method": ("ci", "method"),
    "resampling": ("ci", "resampling"),
    "null": ("zero_test", "null"), "null_method": ("zero_test", "method"), "null_zstat": ("zero_test", "zstat"),
    "null_pvalue": ("zero_test", "pvalue"), "threshold": ("zero_test", "threshold"),
    "sigma0_sq": ("zero_test", "sigma0_sq"), "asymptotic": ("zero_test", "asymptotic"),
    "conditional": ("zero_test", "conditional"), "monte_carlo": ("zero_test", "monte_carlo"),
    "n_bins": ("binning", "n_bins"), "n_bins_rule": ("binning", "n_bins_rule"), "bin_width": ("binning", "width"),
    "bin_volume": ("binning", "volume"), "n_occupied_bins": ("binning", "n_occupied"),
    "n_singleton_bins": ("binning", "n_singleton"), "bin_rule": ("binning", "rule"),
    "bin_stats": ("binning", "stats"), "partition": ("binning", "partition"),
    "mode": ("target", "mode"), "k": ("target", "k"), "n_classes": ("target", "n_classes"),
    "formula": ("target", "formula"), "y_name": ("target", "y_name"), "prob_names": ("target", "prob_names"),
    "n": ("rows", "n"), "n_dropped": ("rows", "n_dropped"), "data": ("rows", "data"), "source": ("rows", "source"),
    "stream": ("rows", "stream"),
}
#: Former fields that stay fields, and the two now computed from ``estimate``.
STILL_FIELDS = ("estimate", "plugin_estimate", "sigma1_sq", "se", "alpha", "call_record", "approximation",
                "weighting", "clustering", "survival")
COMPUTED = ("estimate_pos", "ece")
PARTS = {"ci": ResultInterval, "zero_test": ZeroTest, "binning": Binning, "target": CalibrationTarget,
         "rows": AnalysedRows}


# --------------------------------------------------------------------------- data of several kinds
def _binary_frame(n=1500, seed=7):
    rng = np.random.default_rng(seed)
    q = rng.beta(2, 5, n)
    y = (rng.random(n) < q ** 1.3).astype(int)
    return pd.DataFrame({"y": y, "p": q, "w": rng.gamma(2.0, 1.0, n)})


def _survival(n=400, seed=9):
    """Exponential event times, independent exponential censoring, a risk model off by 1.6 in its hazard."""
    rng = np.random.default_rng(seed)
    lam = 0.1 * np.exp(rng.uniform(-1.5, 1.5, n))
    t_event, t_cens = rng.exponential(1 / lam), rng.exponential(1 / 0.08, n)
    time = np.round(np.minimum(t_event, t_cens), 2)
    event = (t_event <= t_cens).astype(int)
    return pd.DataFrame({"futime": time, "status": event, "risk": np.clip(1 - np.exp(-lam * 8.0), 0.01, 0.99)})


def _sites(G=25, seed=0):
    """Rows of G sites with a site effect."""
    rng = np.random.default_rng(seed)
    site = np.repeat(np.arange(G), rng.integers(30, 120, G))
    p = special.expit(rng.normal(-0.8, 1.0, site.size))
    eta = special.logit(p) + rng.normal(0, 0.7, G)[site]
    y = (rng.uniform(size=site.size) < special.expit(eta)).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": [f"h{g:02d}" for g in site]})


def _top1():
    sim = ct.simulation.setting3(n=1200, beta=0.05, rng=1)
    return pd.DataFrame({"correct": sim.correct, "confidence": sim.confidence})


#: kind -> (rows, the call, the expected target (mode, k, n_classes, y_name, prob_names)).
KINDS = {
    "binary": (_binary_frame, lambda d: ct.calib_ci("y ~ p", data=d, null="asymptotic"),
               ("binary", 1, None, "y", ("p",))),
    "top1": (_top1, lambda d: ct.calib_ci("correct ~ confidence", data=d, n_classes=10),
             ("top1", 1, 10, "correct", ("confidence",))),
    "weighted": (_binary_frame, lambda d: ct.calib_ci("y ~ p", data=d, weights="w", rng=6, n_null_draws=199),
                 ("binary", 1, None, "y", ("p",))),
    "survival": (_survival, lambda d: ct.calib_ci("Surv(futime, status) ~ risk", data=d, horizon=5.0),
                 ("binary", 1, None, "Surv(futime, status)", ("risk",))),
    "clustered": (_sites, lambda d: ct.calib_ci("y ~ p", data=d, cluster="site", rng=4),
                  ("binary", 1, None, "y", ("p",))),
    "bootstrap": (_binary_frame, lambda d: ct.calib_ci("y ~ p", data=d, method="bootstrap", n_resamples=100, rng=2),
                  ("binary", 1, None, "y", ("p",))),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def kind_result(request):
    make_rows, call, target = KINDS[request.param]
    rows = make_rows()
    return request.param, rows, call(rows), target


@pytest.fixture(scope="module")
def file_result(tmp_path_factory):
    """A result streamed from a CSV file: no rows in memory, a ``source`` and a ``stream`` instead."""
    rows = _binary_frame(900, 3)
    path = tmp_path_factory.mktemp("rows") / "rows.csv"
    rows.to_csv(path, index=False)
    return rows, ct.calib_ci("y ~ p", data=str(path))


# --------------------------------------------------------------------------- the shape of the class
def test_the_result_has_at_most_20_fields_and_its_parts_are_the_documented_ones():
    names = [f.name for f in dataclasses.fields(CalibrationResult)]
    assert len(names) <= 20
    assert set(names) == set(STILL_FIELDS) | set(PARTS) | {"_cache"}
    for part, cls in PARTS.items():
        assert cls.__dataclass_params__.frozen, part
        assert "Attributes\n    ----------" in cls.__doc__, f"{cls.__name__} has no numpydoc Attributes section"
        documented = {f.name for f in dataclasses.fields(cls)}
        assert all(name in cls.__doc__ for name in documented), cls.__name__


def test_every_former_field_is_a_read_only_name_of_the_class():
    old = set(IN_PARTS) | set(STILL_FIELDS) | set(COMPUTED)
    assert len(old) == 48  # the 49 former fields without _cache
    for name in set(IN_PARTS) | set(COMPUTED):
        assert hasattr(CalibrationResult, name) and name not in {f.name for f in dataclasses.fields(CalibrationResult)}


# --------------------------------------------------------------------------- every name on results of several kinds
def test_every_former_name_reads_its_part_and_the_numbers_computed_here(kind_result):
    kind, rows, res, (mode, k, n_classes, y_name, prob_names) = kind_result
    for name, (part, attr) in IN_PARTS.items():  # the part's very object (bin_width: 1/B, computed)
        same = getattr(res, name) == getattr(getattr(res, part), attr) if attr == "width" else \
            getattr(res, name) is getattr(getattr(res, part), attr)
        assert same, (kind, name)
    for part, cls in PARTS.items():
        assert type(getattr(res, part)) is cls
    # computed from estimate, bit for bit
    assert res.estimate_pos == max(res.estimate, 0.0) and res.estimate_pos >= 0.0
    assert res.ece == math.sqrt(max(res.estimate, 0.0))
    # the stored interval is conf_int() at the stored level
    ci = res.conf_int()
    assert (res.ci_lower, res.ci_upper, res.ci_lower_open, res.contains_zero) == (ci.lower, ci.upper, ci.lower_open,
                                                                                   ci.contains_zero)
    assert res.ci_lower <= res.ci_upper and res.contains_zero == (res.ci_lower == 0.0 and not res.ci_lower_open)
    # the rows and the bins, counted from the inputs and the partition
    assert res.n == len(rows) and res.n_dropped == 0
    counts = np.bincount(res.partition.inverse)
    assert res.n_occupied_bins == np.count_nonzero(counts) == res.bin_stats.count.size
    assert res.n_singleton_bins == np.count_nonzero(counts == 1)
    assert int(res.bin_stats.count.sum()) == res.n
    assert res.bin_width == 1.0 / res.n_bins and res.n_bins == res.partition.n_bins
    assert res.bin_rule is res.partition.bin_rule or res.bin_rule is None
    # the target, from the call
    assert (res.mode, res.k, res.n_classes, res.y_name, res.prob_names) == (mode, k, n_classes, y_name, prob_names)
    assert res.formula is not None and res.formula.split(" ~ ")[0] == y_name
    # the test of ECE = 0 and the interval's method
    assert 0.0 <= res.null_pvalue <= 1.0 and res.null in ("asymptotic", "conditional", "monte-carlo")
    assert (res.method, res.resampling is not None) == (("bootstrap", True) if kind == "bootstrap"
                                                        else ("adjusted", False))
    assert (res.weighting is not None, res.clustering is not None, res.survival is not None) == (
        kind == "weighted", kind == "clustered", kind == "survival")
    assert res.data is not None and res.stream is None and res.source is None


def test_the_asymptotic_test_of_a_binary_result_is_the_papers_z0():
    res = ct.calib_ci("y ~ p", data=_binary_frame(), null="asymptotic")
    z0 = res.n * math.sqrt(res.bin_volume) * res.estimate / math.sqrt(res.sigma0_sq)
    assert res.null_zstat == pytest.approx(z0, rel=1e-12)
    assert res.null_pvalue == pytest.approx(stats.norm.sf(z0), rel=1e-12)
    assert res.threshold == pytest.approx(stats.norm.isf(0.05) * math.sqrt(res.sigma0_sq)
                                          / (res.n * math.sqrt(res.bin_volume)), rel=1e-12)
    assert res.se == pytest.approx(math.sqrt(res.sigma1_sq / res.n), rel=1e-12)
    # the conditional moments are computed next to the asymptotic null (binary rows): the kept asymptotic
    # test is then the deciding one
    assert res.conditional is not None and res.null_method == "normal"
    assert res.asymptotic == (res.null_zstat, res.null_pvalue)


def test_a_result_of_a_file_holds_its_source_and_stream_in_its_rows(file_result):
    rows, res = file_result
    assert res.n == len(rows) == int(res.bin_stats.count.sum())
    assert res.data is None and res.partition is None
    assert res.stream is res.rows.stream and type(res.stream).__name__ == "StreamedRows"
    assert isinstance(res.source, dict) and res.source is res.rows.source
    table = res.bin_table()
    assert res.n_occupied_bins == len(table) and res.n_singleton_bins == int((table["count"] == 1).sum())
    assert res.ece == math.sqrt(max(res.estimate, 0.0))


# --------------------------------------------------------------------------- frozen, copied, pickled
def test_the_parts_and_the_flat_names_are_frozen(kind_result):
    _, _, res, _ = kind_result
    for part in PARTS:
        obj = getattr(res, part)
        for f in dataclasses.fields(obj):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(obj, f.name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(res, part, None)
    for name in list(IN_PARTS) + list(COMPUTED):
        before = getattr(res, name)
        with pytest.raises(AttributeError):  # FrozenInstanceError is an AttributeError
            setattr(res, name, 1)
        assert getattr(res, name) == before


def test_with_parts_replaces_a_field_in_a_copy_of_its_part():
    res = ct.calib_ci("y ~ p", data=_binary_frame(), null="asymptotic")
    shown = res.to_dict()["null_pvalue"]  # computed and kept by the original
    copy = res.with_parts(null_pvalue=0.0, ci_lower=0.0001, contains_zero=False)
    assert (copy.null_pvalue, copy.ci_lower, copy.contains_zero) == (0.0, 0.0001, False)
    assert copy.to_dict()["null_pvalue"] == 0.0 and res.to_dict()["null_pvalue"] == shown == res.null_pvalue
    assert copy.ci.upper == res.ci.upper and copy.zero_test.zstat == res.zero_test.zstat
    assert copy.binning is res.binning and copy.rows is res.rows and copy.target is res.target
    assert copy.zero_test is not res.zero_test and res.ci_lower != 0.0001
    part = dataclasses.replace(res.rows, n_dropped=3)
    assert res.with_parts(rows=part).n_dropped == 3 and res.n_dropped == 0
    with pytest.raises(TypeError, match="not both"):
        res.with_parts(rows=part, n=5)
    for derived in ("estimate_pos", "ece", "bin_width", "no_such_field"):
        with pytest.raises(TypeError, match=derived):
            res.with_parts(**{derived: 0.0})


def test_a_pickled_result_reads_the_same(kind_result):
    kind, _, res, _ = kind_result
    back = pickle.loads(pickle.dumps(res))
    assert repr(back) == repr(res) and back.to_dict() == res.to_dict()
    assert back.target == res.target and back.target is not res.target
    for name in list(IN_PARTS) + list(STILL_FIELDS) + list(COMPUTED):
        value = getattr(res, name)
        if isinstance(value, (int, float, str, bool, tuple)) or value is None:
            assert getattr(back, name) == value or (value != value), (kind, name)
    pd.testing.assert_frame_equal(back.bin_table(), res.bin_table())
