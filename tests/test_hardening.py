"""Adversarial inputs: no silent wrong answer, clear errors, no traceback from the command line.

Each test here failed before the fix it checks (the hardening issue's list).
"""
from __future__ import annotations

import gzip
import math
import pickle
from math import comb, factorial

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.inputs.validation import MAX_BYTES, OptionError
from calibtest.cli import main
from calibtest.core.binning import MAX_CELLS_LOG2, max_n_bins
from calibtest.core.conditional import SHIFTED_GAMMA_MAX_SKEWNESS


# ----------------------------------------------------------------------------- 1. the conditional null
def _exact_constant_pvalue(n: int, p: float, t_obs: float) -> float:
    """P(T >= t_obs) under H0 when every row has prediction p (one bin): enumerate the number of errors j.

    With j rows at y = 0 (U = -p) and n - j at y = 1 (U = 1 - p): S = (n - j)(1 - p) - j p,
    Q = (n - j)(1 - p)^2 + j p^2 and T = (S^2 - Q) / (n (n - 1)).
    """
    total = 0.0
    for j in range(n + 1):
        s = (n - j) * (1 - p) - j * p
        q = (n - j) * (1 - p) ** 2 + j * p ** 2
        t = (s * s - q) / (n * (n - 1))
        if t >= t_obs - 1e-15 * max(1.0, abs(t_obs)):
            total += comb(n, j) * p ** (n - j) * (1 - p) ** j
    return total


def test_conditional_null_falls_back_to_monte_carlo_on_degenerate_noise():
    n, p = 40, 0.9999
    res = ct.calib_ci(y=np.ones(n, int), probs=np.full(n, p), null="conditional", n_bins=2, rng=3,
                      n_null_draws=20000)
    assert res.conditional.skewness > SHIFTED_GAMMA_MAX_SKEWNESS and not res.conditional.reliable
    assert res.null_method == "monte carlo" and res.monte_carlo is not None
    exact = _exact_constant_pvalue(n, p, res.estimate)
    assert abs(res.null_pvalue - exact) < 4 * math.sqrt(exact * (1 - exact) / 20000) + 1e-4
    assert res.conditional.pvalue < 0.1 < exact  # the shifted gamma alone would have rejected
    assert res.contains_zero
    text = str(res.summary())
    assert "Monte Carlo" in text and "cannot be trusted" in " ".join(text.split())
    assert res.to_dict()["null_method"] == "monte carlo"
    # predictions at 1 - 1e-16: no label error is ever drawn, p-value 1, not 1e-24
    res = ct.calib_ci(y=np.ones(1000, int), probs=np.full(1000, 1 - 1e-16), null="conditional", rng=1)
    assert res.null_method == "monte carlo" and res.null_pvalue == 1.0


def test_conditional_null_keeps_the_shifted_gamma_when_reliable():
    rng = np.random.default_rng(4)
    p = rng.beta(2, 5, 500)
    y = (rng.random(500) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p, null="conditional")
    assert res.conditional.reliable and res.null_method == "shifted gamma" and res.monte_carlo is None
    assert res.null_pvalue == res.conditional.pvalue


@pytest.mark.slow
def test_conditional_null_size_on_near_degenerate_designs():
    """200 calibrated data sets each; the fallback keeps the level (rejection <= alpha + 3 s.e.)."""
    alpha, reps = 0.05, 200
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    for i, draw in enumerate([lambda g: g.uniform(0.999, 1.0, 300), lambda g: g.uniform(0.0, 0.001, 300),
                              lambda g: np.full(300, 0.9999)]):
        gen = np.random.default_rng([11, i])
        rejections = 0
        for _ in range(reps):
            p = draw(gen)
            y = (gen.random(p.size) < p).astype(int)
            rejections += ct.calib_ci(y=y, probs=p, null="conditional", n_null_draws=400, rng=gen).null_pvalue <= alpha
        assert rejections / reps <= limit, i


# ----------------------------------------------------------------------------- 2. malformed CSV rows
@pytest.fixture
def malformed(tmp_path):
    good = "y,p\n" + "".join(f"{i % 2},{0.1 + 0.8 * (i % 7) / 7}\n" for i in range(30))
    extra = good.replace("1,0.1\n", "1,0,7\n", 1)       # decimal comma: an extra field
    short = "y,p,q\n" + "".join(f"{i % 2},{0.1 + 0.8 * (i % 7) / 7},1\n" for i in range(30))
    short = short.replace(",1\n", "\n", 3)[:]          # the first three data lines lose q
    paths = {}
    for name, text in [("extra.csv", extra), ("short.csv", short)]:
        (tmp_path / name).write_text(text)
        paths[name] = tmp_path / name
    with gzip.open(tmp_path / "extra.csv.gz", "wt") as fh:
        fh.write(extra)
    paths["extra.csv.gz"] = tmp_path / "extra.csv.gz"
    return paths, extra, short


def _first_bad_line(text: str) -> int:
    import csv
    import io
    rows = list(csv.reader(io.StringIO(text)))
    width = len(rows[0])
    return next(i + 1 for i, r in enumerate(rows) if r and len(r) != width)


@pytest.mark.parametrize("name", ["extra.csv", "short.csv", "extra.csv.gz"])
@pytest.mark.parametrize("chunksize", [None, 4])
def test_rows_with_the_wrong_number_of_fields_are_errors(malformed, name, chunksize):
    paths, extra, short = malformed
    line = _first_bad_line(short if name == "short.csv" else extra)
    with pytest.raises(ValueError, match=rf"{name.replace('.', '[.]')}, line {line}: \d fields, but the header"):
        ct.calib_ci("y ~ p", data=paths[name], chunksize=chunksize, n_bins=5)


def test_cli_reads_malformed_csv_as_an_error(malformed, capsys):
    paths, extra, _ = malformed
    for argv in (["ci", str(paths["extra.csv"]), "--formula", "y ~ p"],
                 ["ci", str(paths["extra.csv"]), "--formula", "y ~ p", "--chunksize", "5"],
                 ["tcal", str(paths["short.csv"]), "--formula", "y ~ p"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "fields, but the header" in err


def test_quoted_fields_with_separators_are_not_errors(tmp_path):
    text = 'y,p,note\n' + "".join(f'{i % 2},{0.2 + 0.6 * (i % 5) / 5},"a, b"\n' for i in range(20))
    (tmp_path / "q.csv").write_text(text)
    df = pd.read_csv(tmp_path / "q.csv")
    assert ct.calib_ci("y ~ p", data=tmp_path / "q.csv", n_bins=4).estimate == \
        pytest.approx(ct.calib_ci("y ~ p", data=df, n_bins=4).estimate, rel=1e-12)


# ----------------------------------------------------------------------------- 3 and 5. bounds
def test_bin_count_bounds():
    rng = np.random.default_rng(0)
    p = rng.random(60)
    y = (rng.random(60) < p).astype(int)
    assert max_n_bins(1) == 2 ** 53
    assert max_n_bins(20) == math.floor(2 ** (MAX_CELLS_LOG2 / 20))
    for B in (2 ** 63 - 2, 2 ** 63 - 1, 10 ** 23, 2 ** 53 + 1):
        with pytest.raises(OptionError, match=f"largest B allowed is {2 ** 53}"):
            ct.calib_ci(y=y, probs=p, n_bins=B)
    assert ct.calib_ci(y=y, probs=p, n_bins=2 ** 53).n_bins == 2 ** 53
    P = rng.dirichlet(np.ones(3), 60)
    labels = rng.integers(0, 3, 60)
    top = max_n_bins(2, factorial(2))
    assert top == math.floor(2 ** ((MAX_CELLS_LOG2 - 1) / 2)) or top == 2 ** 53
    with pytest.raises(OptionError, match="largest B allowed"):
        ct.calib_ci(y=labels, probs=P, k=2, n_bins=max_n_bins(2) + 1)


def test_full_calibration_class_limit():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(22), 30)
    with pytest.raises(ValueError, match="at most K = 21"):
        ct.calib_ci(y=rng.integers(0, 22, 30), probs=P, k="full")
    P = rng.dirichlet(np.ones(21), 30)
    assert ct.calib_ci(y=rng.integers(0, 21, 30), probs=P, k="full", n_bins=2).n == 30


def test_oversized_requests_are_refused_with_their_size():
    rng = np.random.default_rng(2)
    K, n = 10000, 10
    P = rng.dirichlet(np.ones(K), n)
    labels = rng.integers(0, K, n)
    with pytest.raises(ValueError, match="too many for a partition"):
        ct.calib_ci(y=labels, probs=P, k=K - 1)
    with pytest.raises(ValueError, match="sigma0\\^2 .* below the smallest normal float64"):
        ct.calib_ci(y=labels, probs=P, k=500)
    p = rng.random(100)
    y = (rng.random(100) < p).astype(int)
    with pytest.raises(OptionError, match=r"about 7\.45 GiB .* lower n_draws"):
        ct.tcal_test(y=y, probs=p, n_draws=10 ** 9)
    with pytest.raises(OptionError, match="lower n_null_draws"):
        ct.calib_ci(y=y, probs=p, null="monte-carlo", n_null_draws=10 ** 9)
    assert 8 * 10 ** 9 > MAX_BYTES


# ----------------------------------------------------------------------------- 4, 6. pandas inputs
def test_dataframes_with_integer_column_names():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(3), 80)
    labels = rng.integers(0, 3, 80)
    frame = pd.DataFrame(P)  # columns 0, 1, 2
    for kw in (dict(k=1), dict(k=2), dict(k="full")):
        assert ct.calib_ci(y=labels, probs=frame, n_bins=4, **kw).estimate == \
            ct.calib_ci(y=labels, probs=P, n_bins=4, **kw).estimate
    assert ct.tcal_test(y=labels, probs=frame, rng=0).pvalue == ct.tcal_test(y=labels, probs=P, rng=0).pvalue
    acc = ct.BinAccumulator(n_bins=4).update(y=labels, probs=frame)
    assert acc.result().estimate == pytest.approx(ct.calib_ci(y=labels, probs=P, n_bins=4).estimate, rel=1e-12)


@pytest.mark.parametrize("dtype,values", [("boolean", [True, False, None]), ("Int64", [1, 0, None]),
                                          ("Int8", [1, 0, None])])
def test_nullable_labels_follow_the_missing_value_rule(dtype, values):
    rng = np.random.default_rng(5)
    p = rng.random(60)
    y = pd.array(values * 20, dtype=dtype)
    keep = ~pd.isna(y)
    res = ct.calib_ci(y=y, probs=p, missing="drop", n_bins=5)
    plain = ct.calib_ci(y=np.asarray(y[keep], dtype=int), probs=p[np.asarray(keep)], n_bins=5)
    assert res.n == plain.n == 40 and res.n_dropped == 20 and res.estimate == plain.estimate
    with pytest.raises(ValueError, match="missing values"):
        ct.calib_ci(y=y, probs=p)


def test_nullable_probabilities_in_a_formula():
    df = pd.DataFrame({"y": [1, 0, 1, 0, 1, 0], "p": pd.array([0.9, 0.2, None, 0.4, 0.7, 0.1], dtype="Float64")})
    res = ct.calib_ci("y ~ p", data=df, missing="drop", n_bins=2)
    assert res.n == 5 and res.n_dropped == 1


def test_boolean_labels_with_a_probability_matrix_are_refused():
    rng = np.random.default_rng(6)
    P = rng.dirichlet(np.ones(3), 30)
    with pytest.raises(TypeError, match="True/False"):
        ct.calib_ci(y=rng.random(30) < 0.5, probs=P)


# ----------------------------------------------------------------------------- 7, 8. formulas with np
def test_accumulator_with_np_in_its_formula_pickles():
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"y": rng.integers(0, 2, 200), "x": rng.normal(size=200)})
    acc = ct.BinAccumulator("y ~ I(1 / (1 + np.exp(-x)))", n_bins=6).update(df.iloc[:120])
    copy = pickle.loads(pickle.dumps(acc))
    copy.update(df.iloc[120:])
    direct = ct.calib_ci("y ~ I(1 / (1 + np.exp(-x)))", data=df, n_bins=6)
    assert copy.result().estimate == pytest.approx(direct.estimate, rel=1e-12)


def test_cli_formulas_can_use_np(tmp_path, capsys):
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"y": rng.integers(0, 2, 100), "p": rng.uniform(-0.1, 1.1, 100)})
    df.to_csv(tmp_path / "d.csv", index=False)
    assert main(["ci", str(tmp_path / "d.csv"), "--formula", "y ~ np.clip(p, 0, 1)", "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["estimate"] == pytest.approx(ct.calib_ci(y=df.y, probs=np.clip(df.p, 0, 1)).estimate, rel=1e-12)


# ----------------------------------------------------------------------------- 9. no tracebacks
def test_cli_errors_are_one_line_with_exit_status(tmp_path, capsys):
    df = pd.DataFrame({"y": [1, 0, 1, 0, 1, 0, 1, 0], "p": [.9, .2, .7, .4, .6, .1, .8, .3]})
    df.to_csv(tmp_path / "ok.csv", index=False)
    (tmp_path / "x.csv").mkdir()
    (tmp_path / "fake.csv.gz").write_bytes(b"not gzip at all")
    raw = gzip.compress((tmp_path / "ok.csv").read_bytes())
    (tmp_path / "cut.csv.gz").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "bad.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    (tmp_path / "head.csv").write_text("y,p\n")
    ok = str(tmp_path / "ok.csv")
    cases = [
        (["ci", str(tmp_path / "x.csv"), "--formula", "y ~ p"], 1, "is a directory"),
        (["ci", ok, "--formula", "y ~ p", "--bins", "99999999999999999999999"], 2, "--bins"),
        (["ci", str(tmp_path / "fake.csv.gz"), "--formula", "y ~ p"], 1, "cannot read fake.csv.gz"),
        (["ci", str(tmp_path / "cut.csv.gz"), "--formula", "y ~ p"], 1, "cut.csv.gz"),
        (["ci", str(tmp_path / "bad.parquet"), "--formula", "y ~ p"], 1, "bad.parquet"),
        (["ci", str(tmp_path / "head.csv"), "--formula", "y ~ p"], 1, "no data rows"),
        (["ci", str(tmp_path / "head.csv"), "--formula", "y ~ p", "--chunksize", "3", "--bins", "4"], 1,
         "no data rows"),
        (["report", ok, "--formula", "y ~ p", "-o", str(tmp_path / "nodir" / "r.html")], 2, "does not exist"),
        (["ci", ok, "--formula", "y ~ p", "--n-resamples", "9"], 2, "--method bootstrap"),
        (["ci", ok, "--formula", "y ~ nope"], 1, "column 'nope'"),
        (["ci", ok, "--formula", "y ~ p", "--prevalence", "0.3", "--chunksize", "3"], 2, "in memory"),
    ]
    for argv, status, expected in cases:
        rc = main(argv)
        captured = capsys.readouterr()
        assert rc == status, (argv, captured.err)
        assert captured.err.count("\n") == 1 and captured.err.startswith("calibtest: error: "), argv
        assert expected in captured.err and "Traceback" not in captured.err, (argv, captured.err)
        assert "missing='drop'" not in captured.err and "n_bins" not in captured.err
    # an option out of its range in the table of options is argparse's usage error: one line, exit status 2
    with pytest.raises(SystemExit) as exc:
        main(["ci", ok, "--formula", "y ~ p", "--alpha", "3"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err == ("calibtest ci: error: argument --alpha: must be in the open interval (0, 1), got 3.0 "
                   "(see calibtest ci --help)\n")
    with pytest.raises(OptionError):
        main(["--debug", "ci", ok, "--formula", "y ~ p", "--prevalence", "0.3", "--chunksize", "3"])


def test_cli_missing_value_message_uses_cli_spelling(tmp_path, capsys):
    (tmp_path / "m.csv").write_text("y,p\n1,0.3\n0,\n1,0.8\n0,0.1\n")
    assert main(["ci", str(tmp_path / "m.csv"), "--formula", "y ~ p"]) == 1
    err = capsys.readouterr().err
    assert "--missing drop" in err and "missing='drop'" not in err


# ----------------------------------------------------------------------------- messages
def test_messages_show_the_offending_value():
    p = np.linspace(0.1, 0.9, 20)
    with pytest.raises(ValueError, match=r"found 1\.000000000001 at row 19"):
        ct.calib_ci(y=np.ones(20, int), probs=np.r_[p[:-1], 1 + 1e-12])
    with pytest.raises(ValueError, match="infinite") as info:
        ct.calib_ci(y=np.ones(20, int), probs=np.r_[p[:-1], np.inf], missing="drop")
    assert "missing='drop' to drop" not in str(info.value)
    with pytest.raises(TypeError, match="eval_env"):
        ct.calib_ci("y ~ p", data=pd.DataFrame({"y": [0, 1], "p": [.2, .7]}), eval_env="x")


def test_file_errors_give_file_rows_not_chunk_rows(tmp_path):
    n = 60
    df = pd.DataFrame({"y": np.arange(n) % 2, "p": np.full(n, 0.5)})
    df.loc[50, "p"] = 1.5
    df.to_csv(tmp_path / "f.csv", index=False)
    with pytest.raises(ValueError, match=r"found 1\.5 at data row 50 \(line 52 of f\.csv\)"):
        ct.calib_ci("y ~ p", data=tmp_path / "f.csv", chunksize=20, n_bins=4)


def test_tcal_records_a_seed_that_reproduces_it():
    rng = np.random.default_rng(9)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    a = ct.tcal_test(y=y, probs=p, n_draws=200)
    assert isinstance(a.seed, int) and f"rng={a.seed}" in a.call and a.to_dict()["seed"] == str(a.seed)
    b = ct.tcal_test(y=y, probs=p, n_draws=200, rng=a.seed)
    assert np.array_equal(a.null_draws, b.null_draws)
    assert str(a.seed) in str(a.summary())


def test_an_accumulator_cannot_be_merged_with_itself():
    acc = ct.BinAccumulator(n_bins=3).update(y=[0, 1, 1], probs=[0.2, 0.6, 0.9])
    with pytest.raises(ValueError, match="more than once"):
        acc.merge(acc)


def test_tiny_samples_and_zero_width_intervals_get_notes():
    res = ct.calib_ci(y=[0, 1], probs=[0.3, 0.6], method="subsampling", n_resamples=10, rng=1)
    assert res.ci_lower == res.ci_upper
    text = " ".join(str(res.summary()).split())
    assert "zero width" in text and "null='monte-carlo'" in text
    big = ct.calib_ci("y ~ p", data=ct.load_demo())
    assert "Few rows" not in " ".join(str(big.summary()).split())


def test_formula_docs_say_formulas_are_trusted_input():
    for fn in (ct.calib_ci, ct.tcal_test, ct.calib_compare, ct.val_prob, ct.hosmer_lemeshow, ct.BinAccumulator):
        doc = " ".join((fn.__doc__ or "").split())
        assert "trusted input" in doc, fn


def test_tiny_conditional_variance_does_not_divide_by_zero():
    """Found by the fuzz tests: Var(T | Z) > 0 whose 3/2 power underflows (predictions ~1e-131)."""
    tiny = np.full(2, 9.59580832e-132)
    res = ct.calib_ci(y=np.zeros(2, int), probs=tiny)
    assert res.conditional.variance > 0 and math.isinf(res.conditional.skewness)
    assert not res.conditional.reliable and math.isnan(res.conditional.pvalue)
    other = ct.calib_ci(y=np.zeros(2, int), probs=np.zeros(2))
    assert ct.calib_compare(other, res).pvalue == pytest.approx(ct.calib_compare(other, res).pvalue)
    cond = ct.calib_ci(y=np.zeros(2, int), probs=tiny, null="conditional", rng=1)
    assert cond.null_method == "monte carlo" and cond.null_pvalue == 1.0


def test_degenerate_null_vignette_runs(tmp_path):
    """Smoke version of vignettes/degenerate_null.py (the full study: 1000 data sets per design)."""
    import importlib.util
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "vignettes" / "degenerate_null.py"
    spec = importlib.util.spec_from_file_location("degenerate_null", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--reps", "2", "--scan-reps", "2", "--out", str(tmp_path)])
    text = (tmp_path / "degenerate_null.md").read_text()
    assert "## 2." in text and (tmp_path / "degenerate_null_size.csv").exists()
    size = pd.read_csv(tmp_path / "degenerate_null_size.csv")
    assert (size.loc[size["design"].str.startswith("every p"), "fallback share"] == 1.0).all()
