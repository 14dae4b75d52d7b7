"""calib_ci: formulas, arrays, labels, invariances and every bad input."""
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

import calibtest as ct

FIELDS = ("estimate", "sigma1_sq", "sigma0_sq", "ci_lower", "ci_upper", "null_zstat", "plugin_estimate")


def same(a, b, rtol=1e-12):
    for name in FIELDS:
        assert_allclose(getattr(a, name), getattr(b, name), rtol=rtol, atol=1e-16, err_msg=name)


@pytest.fixture
def binary_df():
    rng = np.random.default_rng(11)
    p = rng.uniform(0.01, 0.99, size=400)
    y = (rng.uniform(size=400) < p**0.8).astype(int)
    return pd.DataFrame({"y": y, "p": p, "pct": 100 * p, "logit": np.log(p / (1 - p))})


@pytest.fixture
def multiclass_df():
    rng = np.random.default_rng(12)
    P = rng.dirichlet(np.ones(4), size=600)
    labels = np.array([rng.choice(4, p=np.roll(row, 1)) for row in P])
    df = pd.DataFrame(P, columns=["p0", "p1", "p2", "p3"])
    df["label"] = labels
    df["name"] = np.array(["p0", "p1", "p2", "p3"])[labels]
    return df, P, labels


def test_formula_equals_arrays(binary_df):
    a = ct.calib_ci("y ~ p", data=binary_df)
    b = ct.calib_ci(y=binary_df.y.to_numpy(), probs=binary_df.p.to_numpy())
    same(a, b, rtol=0)
    assert a.mode == "binary" and a.formula == "y ~ p" and a.prob_names == ("p",)


def test_formula_transformations(binary_df):
    base = ct.calib_ci("y ~ p", data=binary_df)
    same(base, ct.calib_ci("y ~ I(pct / 100)", data=binary_df), rtol=1e-12)
    same(base, ct.calib_ci("y ~ I(np.exp(logit) / (1 + np.exp(logit)))", data=binary_df), rtol=1e-9)
    same(base, ct.calib_ci("y ~ p - 1", data=binary_df), rtol=0)  # intercept is not a column
    same(base, ct.calib_ci("y ~ 1 + p", data=binary_df), rtol=0)


def test_q_quoting_of_odd_names(binary_df):
    df = binary_df.rename(columns={"p": "risk score"})
    same(ct.calib_ci("y ~ p", data=binary_df), ct.calib_ci('y ~ Q("risk score")', data=df), rtol=0)


def test_multiclass_labels_codes_or_names(multiclass_df):
    df, P, labels = multiclass_df
    a = ct.calib_ci("label ~ p0 + p1 + p2 + p3", data=df, k=2)
    b = ct.calib_ci("name ~ p0 + p1 + p2 + p3", data=df, k=2)
    c = ct.calib_ci(y=labels, probs=P, k=2)
    same(a, b, rtol=0)
    same(a, c, rtol=0)
    assert a.mode == "topk" and a.k == 2 and a.n_classes == 4
    assert a.sigma0_sq == pytest.approx(ct.sigma0_sq("topk", 4, 2))


def test_top1_from_formula_with_n_classes(binary_df):
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.1, 1, size=300)
    df = pd.DataFrame({"correct": (rng.uniform(size=300) < conf).astype(int), "confidence": conf})
    res = ct.calib_ci("correct ~ confidence", data=df, n_classes=10)
    assert res.mode == "top1" and res.n_classes == 10
    assert res.sigma0_sq == pytest.approx(ct.sigma0_sq("top1", 10))


def test_row_order_invariance(multiclass_df):
    df, P, labels = multiclass_df
    perm = np.random.default_rng(0).permutation(len(df))
    same(ct.calib_ci(y=labels, probs=P, k=2), ct.calib_ci(y=labels[perm], probs=P[perm], k=2), rtol=1e-10)


def test_class_relabelling_invariance(multiclass_df):
    df, P, labels = multiclass_df
    cols = np.array([2, 0, 3, 1])
    inverse = np.argsort(cols)
    same(ct.calib_ci(y=labels, probs=P, k=2),
         ct.calib_ci(y=inverse[labels], probs=P[:, cols], k=2), rtol=1e-12)


def test_ties_broken_by_lower_class_index():
    # rows with a tie at the top: class 0 comes first
    P = np.array([[0.4, 0.4, 0.2], [0.4, 0.4, 0.2], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]] * 3)
    labels = np.array([0, 1, 1, 2] * 3)
    res = ct.calib_ci(y=labels, probs=P, k=2, n_bins=5)
    u = res.data.u
    assert_allclose(u[0], [1 - 0.4, -0.4])  # top-2 classes (0, 1); label 0
    assert_allclose(u[1], [-0.4, 1 - 0.4])  # label 1 is the second
    # [0.3, 0.3, 0.4]: top-2 = (class 2, class 0) -- class 0 wins the tie with class 1,
    # so label 1 is not among the top two and U = -Z
    assert_allclose(u[2], [-0.4, -0.3])
    # [0.5, 0.25, 0.25]: top-2 = (0, 1) -- class 1 wins the tie with class 2; label 2 -> U = -Z
    assert_allclose(u[3], [-0.5, -0.25])


def test_rows_at_exactly_one_keep_their_own_cube():
    p = np.array([1.0, 1.0, 1.0, 0.99, 0.5, 0.2])
    y = np.array([1, 1, 0, 1, 0, 0])
    res = ct.calib_ci(y=y, probs=p, n_bins=10)
    table = res.bin_table()
    assert table["count"].sum() == 6
    top = table[table["bin"] == (10,)]
    assert top["count"].item() == 3 and top["lower"].item() == 1.0 and top["upper"].item() == 1.0


def test_missing_raise_and_drop(binary_df):
    df = binary_df.copy()
    df.loc[[3, 17], "p"] = np.nan
    df["y"] = df["y"].astype(float)
    df.loc[5, "y"] = np.nan
    with pytest.raises(ValueError, match=r"3 rows have missing values.*'y'.*'p'"):
        ct.calib_ci("y ~ p", data=df)
    res = ct.calib_ci("y ~ p", data=df, missing="drop")
    assert res.n == 397 and res.n_dropped == 3
    same(res, ct.calib_ci("y ~ p", data=df.dropna()), rtol=0)
    assert "3 rows with missing values were dropped" in str(res.summary())
    with pytest.raises(ValueError, match="missing"):
        ct.calib_ci("y ~ p", data=df, missing="ignore")


@pytest.mark.parametrize("bad,match", [
    (np.inf, "an infinite value"),
    (-0.1, r"must lie in \[0, 1\]"),
    (1.2, r"must lie in \[0, 1\]"),
])
def test_bad_probabilities(binary_df, bad, match):
    df = binary_df.copy()
    df.loc[0, "p"] = bad
    with pytest.raises(ValueError, match=match) as err:
        ct.calib_ci("y ~ p", data=df)
    assert "p" in str(err.value)


def test_bad_labels(binary_df, multiclass_df):
    df = binary_df.copy()
    df.loc[0, "y"] = 2
    with pytest.raises(ValueError, match=r"y must be binary"):
        ct.calib_ci("y ~ p", data=df)
    with pytest.raises(ValueError, match="binary"):
        ct.calib_ci("y ~ confidence", data=df.rename(columns={"p": "confidence"}), n_classes=10)
    mdf, P, labels = multiclass_df
    bad = labels.copy()
    bad[0] = 4
    with pytest.raises(ValueError, match=r"class codes outside 0..3"):
        ct.calib_ci(y=bad, probs=P)
    with pytest.raises(ValueError, match="integer class codes"):
        ct.calib_ci(y=labels + 0.5, probs=P)
    names = mdf["name"].copy()
    names[0] = "dog"
    with pytest.raises(ValueError, match=r"labels \['dog'\] that are not among"):
        ct.calib_ci("name ~ p0 + p1 + p2 + p3", data=mdf.assign(name=names))
    with pytest.raises(ValueError, match="NaN"):
        ct.calib_ci(y=np.where(np.arange(len(labels)) == 0, np.nan, labels), probs=P)


def test_rows_not_summing_to_one(multiclass_df):
    df, P, labels = multiclass_df
    Q = P.copy()
    Q[7] *= 1.001
    with pytest.raises(ValueError, match=r"sum to 1 \(tolerance 1e-06\); row 7"):
        ct.calib_ci(y=labels, probs=Q)
    Q = P.copy()
    Q[7, 0] += 5e-7
    ct.calib_ci(y=labels, probs=Q)  # within tolerance


def test_k_and_bins_validation(multiclass_df, binary_df):
    df, P, labels = multiclass_df
    with pytest.raises(ValueError, match="k must be < K = 4"):
        ct.calib_ci(y=labels, probs=P, k=5)  # k = K = 4 is full calibration (tests/ece/test_full.py)
    with pytest.raises(ValueError, match="k must be >= 1"):
        ct.calib_ci(y=labels, probs=P, k=0)
    with pytest.raises(TypeError, match="k must be an integer"):
        ct.calib_ci(y=labels, probs=P, k=1.5)
    with pytest.raises(ValueError, match="n_bins must be >= 1"):
        ct.calib_ci(y=labels, probs=P, n_bins=0)
    with pytest.raises(TypeError, match="n_bins"):
        ct.calib_ci(y=labels, probs=P, n_bins=2.5)
    with pytest.raises(ValueError, match="n_bins"):
        ct.calib_ci(y=labels, probs=P, n_bins="many")
    with pytest.raises(ValueError, match="single column supports only k=1"):
        ct.calib_ci("y ~ p", data=binary_df, k=2)
    with pytest.raises(ValueError, match="n_classes=5 does not match"):
        ct.calib_ci(y=labels, probs=P, n_classes=5)


def test_small_n_and_shapes():
    with pytest.raises(ValueError, match="at least n = 2"):
        ct.calib_ci(y=[1], probs=[0.5])
    with pytest.raises(ValueError, match="shape"):
        ct.calib_ci(y=[1, 0, 1], probs=[0.5, 0.2])
    with pytest.raises(TypeError, match="probs must be numeric"):
        ct.calib_ci(y=[1, 0], probs=["a", "b"])


def test_top1_confidence_below_one_over_k():
    with pytest.raises(ValueError, match="cannot be below 1/K"):
        ct.calib_ci(y=[1, 0, 1], probs=[0.05, 0.5, 0.9], n_classes=10)


def test_formula_errors(binary_df):
    with pytest.raises(ValueError, match="column 'q'.*not in data"):
        ct.calib_ci("y ~ q", data=binary_df)
    with pytest.raises(ValueError, match="column 'yy'"):
        ct.calib_ci("yy ~ p", data=binary_df)
    with pytest.raises(ValueError, match="parse"):
        ct.calib_ci("y ~ ~ p (", data=binary_df)
    with pytest.raises(ValueError, match="exactly one outcome"):
        ct.calib_ci("~ p", data=binary_df)
    with pytest.raises(ValueError, match="interaction"):
        ct.calib_ci("y ~ p:pct", data=binary_df)
    with pytest.raises(TypeError, match="formula must be a string"):
        ct.calib_ci(3, data=binary_df)
    with pytest.raises(TypeError, match="data must be"):
        ct.calib_ci("y ~ p", data=[1, 2])
    with pytest.raises(ValueError, match="needs data"):
        ct.calib_ci("y ~ p")
    with pytest.raises(ValueError, match="not both"):
        ct.calib_ci("y ~ p", data=binary_df, y=[1], probs=[0.5])
    with pytest.raises(TypeError, match="'name' must be numeric"):
        ct.calib_ci("y ~ name", data=binary_df.assign(name="x"))


def test_auto_bins_reproduce_the_papers_choices():
    assert [ct.auto_n_bins(n, 1) for n in (100, 1000)] == [19, 48]
    assert [ct.auto_n_bins(n, 2) for n in (100, 1000)] == [9, 20]
    assert ct.auto_n_bins(2, 5) == 2
    rng = np.random.default_rng(0)
    p = rng.uniform(size=1000)
    res = ct.calib_ci(y=(rng.uniform(size=1000) < p).astype(int), probs=p)
    assert res.n_bins == 48 and res.n_bins_rule == "auto" and res.bin_width == 1 / 48


def test_caller_variable_named_like_a_patsy_builtin_is_not_hidden(binary_df):
    scale = 100.0  # patsy has a builtin called scale; the caller's variable wins, as in patsy
    res = ct.calib_ci("y ~ I(pct / scale)", data=binary_df)
    same(res, ct.calib_ci("y ~ p", data=binary_df), rtol=1e-12)
    assert scale == 100.0
