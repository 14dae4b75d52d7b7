"""Property-based fuzzing: every call returns a consistent result or raises ValueError/TypeError.

Arbitrary arrays (dtypes, shapes, NaN/inf patterns) and option values go into
``calib_ci``, ``tcal_test``, ``calib_compare`` and ``BinAccumulator``; the
command line gets a corpus of malformed files.  Never another exception, never
a result whose interval is out of order or whose estimate is not finite.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import calibtest as ct  # noqa: E402
from calibtest.cli import main  # noqa: E402

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))

special = st.sampled_from([0.0, 1.0, 0.5, np.nan, np.inf, -np.inf, -0.1, 1.1, 1e-300, 1 - 1e-16])
floats01 = st.one_of(st.floats(0, 1), special)


@st.composite
def inputs(draw):
    n = draw(st.integers(0, 25))
    K = draw(st.sampled_from([1, 1, 2, 3, 5]))
    probs = draw(hnp.arrays(np.float64, (n,) if K == 1 else (n, K),
                            elements=floats01 if draw(st.booleans()) else st.floats(0, 1)))
    if K > 1 and draw(st.booleans()):  # mostly valid rows on the simplex
        raw = np.abs(np.nan_to_num(probs, nan=0.5, posinf=1.0, neginf=0.0)) + 1e-3
        probs = raw / raw.sum(axis=1, keepdims=True)
    kind = draw(st.sampled_from(["int", "int", "int", "float", "bool", "str", "nan"]))
    if kind == "int":
        y = draw(hnp.arrays(np.int64, (n,), elements=st.integers(-1 if draw(st.booleans()) else 0, max(K - 1, 1))))
    elif kind == "float":
        y = draw(hnp.arrays(np.float64, (n,), elements=st.sampled_from([0.0, 1.0, 0.5, 2.0])))
    elif kind == "bool":
        y = draw(hnp.arrays(np.bool_, (n,)))
    elif kind == "str":
        y = np.array(draw(st.lists(st.sampled_from(["0", "1", "a"]), min_size=n, max_size=n)), dtype=object)
    else:
        y = draw(hnp.arrays(np.float64, (n,), elements=st.sampled_from([0.0, 1.0, np.nan])))
    return y, probs


def _mostly(valid, invalid):
    """Valid values four times as often as invalid ones."""
    return st.one_of(*[st.sampled_from(valid)] * 4, st.sampled_from(invalid))


options = st.fixed_dictionaries({
    "n_bins": _mostly(["auto", 1, 3, 7], [0, -2, 2 ** 60, True, 2.5, "many"]),
    "k": _mostly([None, None, 1, 2, "full"], [0, "x", True]),
    "n_classes": _mostly([None, None, 2, 3, 10], [0, 1.5]),
    "alpha": _mostly([0.05, 0.1], [0.0, 1.0, float("nan"), "x"]),
    "missing": _mostly(["raise", "drop"], ["nope"]),
})


def _check_result(res, n_max):
    assert math.isfinite(res.estimate)
    assert res.ci_lower <= res.ci_upper
    assert 2 <= res.n <= n_max
    lo, hi = res.conf_int(scale="ece")
    assert 0 <= lo <= hi


def _allowed(exc: BaseException) -> bool:
    event(f"raised {type(exc).__name__}")
    return isinstance(exc, (ValueError, TypeError)) and bool(str(exc).strip())


@SETTINGS
@given(inputs(), options, st.sampled_from(["asymptotic", "conditional", "monte-carlo"]),
       st.sampled_from(["adjusted", "bootstrap", "hulc"]))
def test_calib_ci_never_fails_otherwise(data, opts, null, method):
    y, probs = data
    kw = dict(opts, null=null, method=method, rng=0)
    if null == "monte-carlo":
        kw["n_null_draws"] = 30
    if method != "adjusted":
        kw["n_resamples"] = 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = ct.calib_ci(y=y, probs=probs, **kw)
        except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
            assert _allowed(exc), repr(exc)
            return
    event("result")
    _check_result(res, len(y))


@SETTINGS
@given(inputs(), options)
def test_tcal_never_fails_otherwise(data, opts):
    y, probs = data
    try:
        res = ct.tcal_test(y=y, probs=probs, n_draws=20, rng=1, **opts)
    except Exception as exc:  # noqa: BLE001
        assert _allowed(exc), repr(exc)
        return
    assert 0 < res.pvalue <= 1 and math.isfinite(res.statistic) and 2 <= res.n <= len(y)


@SETTINGS
@given(inputs(), inputs(), st.sampled_from([None, True, False]))
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_compare_never_fails_otherwise(a, b, paired):
    try:
        ra = ct.calib_ci(y=a[0], probs=a[1])
        rb = ct.calib_ci(y=b[0], probs=b[1])
        res = ct.calib_compare(ra, rb, paired=paired)
    except Exception as exc:  # noqa: BLE001
        assert _allowed(exc), repr(exc)
        return
    assert res.ci_lower <= res.ci_upper and 0 <= res.pvalue <= 1


@SETTINGS
@given(st.lists(inputs(), min_size=1, max_size=3), options)
def test_accumulator_never_fails_otherwise(chunks, opts):
    kw = {key: opts[key] for key in ("k", "n_classes", "alpha", "missing")}
    try:
        acc = ct.BinAccumulator(n_bins=opts["n_bins"] if opts["n_bins"] != "auto" else 4, **kw)
        for y, probs in chunks:
            acc.update(y=y, probs=probs)
        res = acc.result()
    except Exception as exc:  # noqa: BLE001
        assert _allowed(exc), repr(exc)
        return
    _check_result(res, sum(len(y) for y, _ in chunks))


lines = st.lists(st.sampled_from(["1,0.3", "0,0.2", "1,0,7", "0", "", "a,b", "1,nan", "0,inf", '"1",0.5',
                                  "1,1.5", "0,-0.1", "1;0.4", "\x00\x01", "1,0.3,,", "y,p"]), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["y,p", "y;p", "", "p,y", "y,p,q"]), lines, st.sampled_from([[], ["--chunksize", "2"]]),
       st.sampled_from([".csv", ".csv.gz", ".parquet"]))
def test_cli_on_malformed_files_prints_one_line(tmp_path_factory, header, body, extra, suffix, ):
    import gzip
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / f"f{suffix}"
    text = "\n".join([header] + body) + "\n"
    if suffix == ".csv.gz":
        payload = gzip.compress(text.encode()) if body and body[0] != "" else text.encode()
        path.write_bytes(payload)
    else:
        path.write_bytes(text.encode())
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["ci", str(path), "--formula", "y ~ p", "--bins", "3", *extra])
    message = err.getvalue()
    assert rc in (0, 1, 2)
    if rc:
        assert message.startswith("calibtest: error: ") and message.count("\n") == 1, message


@st.composite
def valid_inputs(draw):
    n = draw(st.integers(2, 40))
    K = draw(st.sampled_from([1, 2, 3, 4]))
    if K == 1:
        probs = draw(hnp.arrays(np.float64, (n,), elements=st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0]))))
        y = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, 1)))
    else:
        raw = draw(hnp.arrays(np.float64, (n, K), elements=st.floats(0, 1))) + 1e-9
        probs = raw / raw.sum(axis=1, keepdims=True)
        y = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, K - 1)))
    return y, probs


@SETTINGS
@given(valid_inputs(), st.sampled_from(["auto", 1, 2, 5, 40]), st.sampled_from([None, 1, 2, "full"]),
       st.sampled_from(["asymptotic", "conditional", "monte-carlo"]),
       st.sampled_from(["adjusted", "bootstrap", "subsampling", "hulc"]))
def test_valid_inputs_give_consistent_results(data, n_bins, k, null, method):
    y, probs = data
    kw = dict(n_bins=n_bins, null=null, method=method, rng=2, n_null_draws=30)
    if method != "adjusted":
        kw["n_resamples"] = 20
    if probs.ndim == 2:
        kw["k"] = k if (k is None or k == "full" or k < probs.shape[1]) else None
    try:
        res = ct.calib_ci(y=y, probs=probs, **kw)
    except Exception as exc:  # noqa: BLE001
        assert _allowed(exc), repr(exc)
        return
    event("result")
    _check_result(res, len(y))
    assert res.n == len(y)
    assert sum(res.bin_table()["count"]) == len(y)
    assert res.bin_table()["contribution"].sum() == pytest.approx(res.estimate, rel=1e-9, abs=1e-12)
