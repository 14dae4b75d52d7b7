"""calib_ci on CSV and Parquet files: chunked reading gives the in-memory result, with provenance."""
from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.streams import files as filestream
from calibtest.streams.accumulator import BinAccumulator
from calibtest.options import DataError
from scale_helpers import assert_same_result

pyarrow = pytest.importorskip("pyarrow")


def frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.1, 1, n)
    conf[:7] = 1.0
    return pd.DataFrame({"id": np.arange(n), "conf": conf,
                         "correct": (rng.uniform(size=n) < conf ** 1.5).astype(np.int8),
                         "note": rng.choice(["a", "b"], n)})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("files")
    df = frame()
    df.loc[[11, 2500], "conf"] = np.nan
    paths = {"csv": d / "preds.csv", "gz": d / "preds.csv.gz", "parquet": d / "preds.parquet"}
    df.to_csv(paths["csv"], index=False)
    df.to_csv(paths["gz"], index=False)
    df.to_parquet(paths["parquet"], row_group_size=700)
    return df, paths


@pytest.mark.parametrize("kind", ["csv", "gz", "parquet"])
@pytest.mark.parametrize("n_bins", ["auto", 17])
def test_file_equals_in_memory(files, kind, n_bins):
    df, paths = files
    ref = ct.calib_ci("correct ~ conf", data=df, n_classes=10, n_bins=n_bins, missing="drop")
    res = ct.calib_ci("correct ~ conf", data=paths[kind], n_classes=10, n_bins=n_bins, missing="drop",
                      chunksize=499, progress=False)
    assert_same_result(res, ref)
    assert res.n_dropped == 2 and res.data is None
    src = res.source
    raw = paths[kind].read_bytes()
    assert src["sha256"] == hashlib.sha256(raw).hexdigest()
    assert src["size_bytes"] == len(raw)
    assert src["name"] == paths[kind].name and Path(src["path"]) == paths[kind].resolve()
    assert src["format"] == ("parquet" if kind == "parquet" else "csv")
    assert sorted(src["columns"]) == ["conf", "correct"]  # only the formula's columns are read
    assert src["n_chunks"] == math.ceil(len(df) / 499) and src["n_rows_read"] == len(df)
    # auto bins with dropped rows need a counting pass first; an integer B does not
    assert src["passes"] == (2 if n_bins == "auto" else 1)
    assert f"data={paths[kind].name!r}" in res.call and "chunksize=499" in res.call


def test_parquet_auto_bins_from_metadata_in_one_pass(files, tmp_path):
    df = files[0].dropna()
    path = tmp_path / "clean.parquet"
    df.to_parquet(path, row_group_size=1000)
    res = ct.calib_ci("correct ~ conf", data=str(path), n_classes=10, progress=False)
    assert res.source["passes"] == 1
    assert res.n_bins == ct.auto_n_bins(len(df), 1)
    assert_same_result(res, ct.calib_ci("correct ~ conf", data=df, n_classes=10))


def test_chunks_never_exceed_chunksize(files, monkeypatch):
    seen = []
    original = BinAccumulator.update

    def spy(self, data=None, **kw):
        seen.append(len(data))
        return original(self, data, **kw)

    monkeypatch.setattr(BinAccumulator, "update", spy)
    _, paths = files
    for kind in ("csv", "parquet"):
        seen.clear()
        ct.calib_ci("correct ~ conf", data=paths[kind], n_classes=10, n_bins=5, missing="drop", chunksize=256)
        assert max(seen) <= 256 and sum(seen) == 3000


def test_topk_with_string_labels(tmp_path):
    rng = np.random.default_rng(4)
    n, K = 800, 4
    logits = rng.normal(size=(n, K)) * 1.5
    P = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    names = ["cat", "dog", "owl", "yak"]
    df = pd.DataFrame(P, columns=names)
    df["label"] = [names[rng.choice(K, p=row)] for row in P]
    path = tmp_path / "topk.csv"
    df.to_csv(path, index=False)
    formula = "label ~ cat + dog + owl + yak"
    ref = ct.calib_ci(formula, data=df, k=2, n_bins=6)
    res = ct.calib_ci(formula, data=path, k=2, n_bins=6, chunksize=97)
    assert res.mode == "topk" and res.k == 2
    assert_same_result(res, ref)


def test_full_calibration_from_a_file(tmp_path):
    rng = np.random.default_rng(12)
    n, K = 900, 3
    P = rng.dirichlet(np.ones(K) * 2, size=n)
    df = pd.DataFrame(P, columns=["a", "b", "c"])
    df["label"] = [rng.choice(K, p=row) for row in P]
    path = tmp_path / "full.parquet"
    df.to_parquet(path, row_group_size=200)
    # a stream fixes B before it has seen the predictions: the rate alone (the occupancy scan of the
    # in-memory rule needs every row first), so the reference is the in-memory call at that B
    B = ct.auto_n_bins(n, K - 1)
    ref = ct.calib_ci("label ~ a + b + c", data=df, k="full", n_bins=B)
    res = ct.calib_ci("label ~ a + b + c", data=path, k="full", chunksize=128)
    assert res.mode == "full" and res.n_bins == B and res.n_bins_rule == "auto"
    for name in ("estimate", "sigma1_sq", "se", "ci_lower", "ci_upper", "null_pvalue", "threshold"):
        assert getattr(res, name) == pytest.approx(getattr(ref, name), rel=1e-12, abs=1e-15), name
    assert res.approximation == ref.approximation and res.approximation.second_order_variance > 0
    assert res.bin_rule.rule == "rate" and res.bin_rule.singleton_fraction == ref.bin_rule.singleton_fraction
    assert ct.calib_ci("label ~ a + b + c", data=df, k="full").n_bins <= B


def test_formula_variables_from_the_callers_environment(tmp_path):
    df = frame(500, seed=9)
    df["pct"] = df["conf"] * 100
    path = tmp_path / "pct.csv"
    df.to_csv(path, index=False)
    divisor = 100.0
    ref = ct.calib_ci("correct ~ np.minimum(pct / divisor, 1)", data=df, n_classes=10, n_bins=8)
    res = ct.calib_ci("correct ~ np.minimum(pct / divisor, 1)", data=path, n_classes=10, n_bins=8, chunksize=64)
    assert res.source["columns"] == ["correct", "pct"]
    assert_same_result(res, ref)


def test_error_messages_name_file_rows_and_columns(tmp_path, files):
    df = frame(40)
    df.loc[23, "conf"] = 1.5
    path = tmp_path / "bad.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"bad\.csv, data rows 20\.\.29 .*must lie in \[0, 1\]; found 1\.5 at data row 23 \(line 25 of bad\.csv\)"):
        ct.calib_ci("correct ~ conf", data=path, n_classes=10, n_bins=4, chunksize=10)
    _, paths = files
    with pytest.raises(ValueError, match=r"rows 0\.\.2999.*missing values"):
        ct.calib_ci("correct ~ conf", data=paths["parquet"], n_classes=10, n_bins=4, chunksize=5000)
    with pytest.raises(ValueError, match="names column 'confidence', which is not in file 'preds.csv'"):
        ct.calib_ci("correct ~ confidence", data=paths["csv"], n_classes=10)
    with pytest.raises(FileNotFoundError, match="nowhere.csv"):
        ct.calib_ci("correct ~ conf", data=tmp_path / "nowhere.csv")
    with pytest.raises(ValueError, match="file format"):
        ct.calib_ci("correct ~ conf", data="preds.xlsx")
    with pytest.raises(ValueError, match="needs a formula"):
        ct.calib_ci(data=paths["csv"])
    with pytest.raises(ValueError, match="y= and probs="):
        ct.calib_ci(data=paths["csv"], y=[0, 1], probs=[0.5, 0.5])
    with pytest.raises(ValueError, match="chunksize= applies only"):
        ct.calib_ci("correct ~ conf", data=df, chunksize=10)
    with pytest.raises(TypeError, match="chunksize"):
        ct.calib_ci("correct ~ conf", data=paths["csv"], chunksize=2.5)
    with pytest.raises(ValueError, match="chunksize must be >= 1"):
        ct.calib_ci("correct ~ conf", data=paths["csv"], chunksize=0)
    with pytest.raises(TypeError, match="progress"):
        ct.calib_ci("correct ~ conf", data=paths["csv"], n_classes=10, missing="drop", progress="yes")


@pytest.mark.parametrize("method", ["bootstrap", "subsampling", "hulc"])
def test_resampling_methods_need_in_memory_data(files, method):
    _, paths = files
    with pytest.raises(ValueError, match=f"method='{method}' resamples rows and needs in-memory data"):
        ct.calib_ci("correct ~ conf", data=paths["parquet"], n_classes=10, method=method)
    import inspect
    if "method" in inspect.signature(ct.calib_ci).parameters:  # once calib_ci has method= (resampling branch)
        with pytest.raises(ValueError, match="needs in-memory data"):
            ct.calib_ci("correct ~ conf", data=paths["parquet"], n_classes=10, method=method)


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("progress, tty, ci_env, shown", [
    (None, False, None, False), (None, True, None, True), (None, True, "true", False),
    (False, True, None, False), (True, False, "true", True)])
def test_progress_bar_only_in_interactive_terminals(files, monkeypatch, progress, tty, ci_env, shown):
    pytest.importorskip("tqdm")
    _, paths = files
    err = _FakeTTY() if tty else io.StringIO()
    monkeypatch.setattr(filestream.sys, "stderr", err)
    if ci_env is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci_env)
    ct.calib_ci("correct ~ conf", data=paths["parquet"], n_classes=10, n_bins=5, missing="drop",
                progress=progress)
    assert ("rows" in err.getvalue()) is shown


def test_cli_streams_parquet(files, capsys):
    import json

    from calibtest.cli import main
    df, paths = files
    assert main(["ci", str(paths["parquet"]), "--formula", "correct ~ conf", "--n-classes", "10",
                 "--bins", "9", "--missing", "drop", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_ci("correct ~ conf", data=df, n_classes=10, n_bins=9, missing="drop")
    assert out["n"] == ref.n and out["n_dropped"] == 2
    assert math.isclose(out["estimate"], ref.estimate, rel_tol=1e-12)
    assert main(["ci", "nowhere.parquet", "--formula", "correct ~ conf"]) == 1
    assert "file not found" in capsys.readouterr().err


def test_formula_names_and_quoted_columns(tmp_path):
    from calibtest.inputs.formula import formula_columns, formula_names
    assert formula_names('label ~ Q("odd name") + np.log(x) + I(p / 100)') == \
        ["label", "odd name", "x", "np", "I", "p"]
    assert formula_names('y ~ Q("Q")') == ["y", "Q"]  # a column that happens to be called Q
    assert formula_columns("y ~ I(p / 100)", ["p", "q", "y"]) == ["y", "p"]
    df = frame(300, seed=5).rename(columns={"conf": "odd name"})
    path = tmp_path / "odd.csv"
    df.to_csv(path, index=False)
    res = ct.calib_ci('correct ~ Q("odd name")', data=path, n_classes=10, n_bins=6, chunksize=100)
    assert res.source["columns"] == ["correct", "odd name"]
    assert_same_result(res, ct.calib_ci('correct ~ Q("odd name")', data=df, n_classes=10, n_bins=6))


def test_monte_carlo_null_needs_in_memory_data(tmp_path):
    import pandas as pd
    import pytest
    import calibtest as ct
    path = tmp_path / "d.csv"
    pd.DataFrame({"y": [0, 1, 1, 0], "p": [0.2, 0.7, 0.6, 0.3]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="null='monte-carlo' draws labels for every row and needs the rows"):
        ct.calib_ci("y ~ p", data=str(path), null="monte-carlo", n_bins=2)
    res = ct.calib_ci("y ~ p", data=str(path), null="conditional", n_bins=2)
    assert (res.null, res.null_method) == ("conditional", "shifted gamma")


def test_one_partition_dask_frame_warns_naming_npartitions(monkeypatch):
    import warnings

    dd = pytest.importorskip("dask.dataframe")
    from calibtest.streams import dask_frames
    df = frame(600, seed=11)
    ref = ct.calib_ci("correct ~ conf", data=df, n_classes=10, n_bins=6, missing="drop")
    monkeypatch.setattr(dask_frames, "ONE_PARTITION_ROWS", 500)
    with pytest.warns(UserWarning, match=r"npartitions=1: its 600 rows were read and binned by one task") as rec:
        res = ct.calib_ci("correct ~ conf", data=dd.from_pandas(df, npartitions=1), n_classes=10, n_bins=6,
                          missing="drop")
    assert rec[0].filename == __file__  # points at the user's call, not the package
    assert_same_result(res, ref)  # not repartitioned: the same sums as the rows in memory
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct.calib_ci("correct ~ conf", data=dd.from_pandas(df, npartitions=2), n_classes=10, n_bins=6,
                    missing="drop")  # two partitions: no warning
        monkeypatch.setattr(dask_frames, "ONE_PARTITION_ROWS", 10_000)
        ct.calib_ci("correct ~ conf", data=dd.from_pandas(df, npartitions=1), n_classes=10, n_bins=6,
                    missing="drop")  # one small partition: no warning


# ----------------------------------------------------------------------------- one reader: a file changed mid-read
def _changer(path: Path, df: pd.DataFrame):
    """``touch(p)`` for a formula: returns p; once armed, its first call (while a chunk is read) adds a row
    to the file (a CSV line appended; a Parquet file written again with the row)."""
    state = {"armed": False}

    def touch(p):
        if state["armed"]:
            state["armed"] = False
            extra = pd.concat([df, df.iloc[:1]], ignore_index=True)
            if path.suffix == ".csv":
                with open(path, "a") as fh:
                    fh.write(extra.iloc[-1:].to_csv(index=False, header=False))
            else:
                extra.to_parquet(path, row_group_size=500)
        return p
    return touch, state


_F = "y ~ touch(p)"
# each streamed pass over a file: (call, when the change is armed: "first" read or "after" the interval)
_PASSES = {
    "calib_ci": (lambda d, e: ct.calib_ci(_F, data=d, chunksize=500, eval_env=e), "first"),
    "calib_ci by=": (lambda d, e: ct.calib_ci(_F, data=d, by="g", chunksize=500, eval_env=e), "first"),
    "calib_test": (lambda d, e: ct.calib_test(_F, data=d, chunksize=500, rng=1, eval_env=e), "first"),
    "calib_test B=8": (lambda d, e: ct.calib_test(_F, data=d, n_bins=8, chunksize=500, rng=1, eval_env=e),
                       "first"),
    "calib_test by=": (lambda d, e: ct.calib_test(_F, data=d, by="g", chunksize=500, rng=1, eval_env=e),
                       "first"),
    "calib_test scales": (lambda d, e: ct.calib_test(_F, data=d, n_bins=[4, 8], partitions="both", chunksize=500,
                                                     rng=1, eval_env=e), "first"),
    "evidence": (lambda d, e: ct.evidence(_F, data=d, chunksize=500, rng=1, eval_env=e), "first"),
    "res.evidence()": (lambda res: res.evidence(rng=1), "after"),
    "res.hosmer_lemeshow()": (lambda res: res.hosmer_lemeshow(), "after"),
    "calib_compare": (lambda d, e: ct.calib_compare(_F, "y ~ I(touch(p) ** 2)", data=d, chunksize=500,
                                                    eval_env=e), "first"),
    "calib_compare(res, res)": (lambda res: ct.calib_compare(res, res, paired=True), "after"),
}


def _sources(out) -> list:
    """The ``source`` records a streamed result holds (its own; an evidence result's test's too)."""
    if isinstance(out, ct.HosmerLemeshowResult):
        return []  # a table of the interval's rows, no result of its own
    if isinstance(out, ct.ComparisonResult):
        return [out.result_a.source, out.result_b.source]
    return [out.source] + ([out.test.source] if isinstance(out, ct.EvidenceResult) else [])


@pytest.mark.parametrize("changed", [True, False], ids=["changed", "unchanged"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("name", list(_PASSES))
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_every_streamed_pass_refuses_a_file_changed_mid_read(tmp_path, name, fmt, changed):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 3000)
    df = pd.DataFrame({"y": (rng.uniform(size=p.size) < p).astype(int), "p": p, "g": np.arange(p.size) % 3})
    path = tmp_path / f"chg.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, row_group_size=500)
    raw = path.read_bytes()
    touch, state = _changer(path, df)
    call, when = _PASSES[name]
    state["armed"] = changed and when == "first"
    run = (lambda: call(path, {"touch": touch})) if when == "first" else None
    if when == "after":
        res = ct.calib_ci(_F, data=path, chunksize=500, eval_env={"touch": touch})
        state["armed"] = changed
        run = lambda: call(res)  # noqa: E731
    if changed:
        with pytest.raises(DataError) as err:
            run()
        assert str(err.value) == f"{path.name} changed while it was being read; the result would mix two versions"
        assert path.read_bytes() != raw  # the change was made (and refused)
        return
    out = run()
    for src in _sources(out):
        assert src["name"] == path.name and src["format"] == fmt
        assert src["sha256"] == hashlib.sha256(raw).hexdigest() and src["size_bytes"] == len(raw)
        assert src["n_rows_read"] == len(df) and src["n_chunks"] == math.ceil(len(df) / 500)
        assert src["passes"] >= 1 and src["chunksize"] == 500
