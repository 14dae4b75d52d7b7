"""The calibtest command line."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.cli import main

JSON_KEYS = {"estimate", "ece", "ci_lower", "ci_upper", "ci_lower_open", "ece_ci_lower", "ece_ci_upper",
             "contains_zero", "sigma1_sq", "sigma0_sq", "se", "threshold", "null_zstat", "null_pvalue",
             "n", "n_bins", "k", "n_classes", "mode", "alpha"}


@pytest.fixture
def csv(tmp_path):
    rng = np.random.default_rng(9)
    P = rng.dirichlet(np.ones(4), size=500)
    labels = np.array([rng.choice(4, p=row) for row in P])
    df = pd.DataFrame(P, columns=["p0", "p1", "p2", "p3"]).assign(label=labels)
    path = tmp_path / "preds.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path, df


def test_json_output_matches_api(csv, capsys):
    path, df = csv
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2 + p3", "--k", "2", "--bins", "8",
                 "--alpha", "0.1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert JSON_KEYS <= set(out)
    res = ct.calib_ci("label ~ p0 + p1 + p2 + p3", data=df, k=2, n_bins=8, alpha=0.1)
    for key in JSON_KEYS:
        assert out[key] == res.to_dict()[key], key


def test_summary_output(csv, capsys):
    path, _ = csv
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2 + p3"]) == 0
    assert "Calibration error" in capsys.readouterr().out


def test_errors_are_reported_not_raised(csv, capsys):
    path, _ = csv
    assert main(["ci", str(path), "--formula", "label ~ nope"]) == 1  # a data error
    assert "column 'nope'" in capsys.readouterr().err
    assert main(["ci", str(path) + ".missing", "--formula", "y ~ p"]) == 1
    assert "calibtest: error: file not found" in capsys.readouterr().err


def test_console_script_demo():
    out = subprocess.run([sys.executable, "-m", "calibtest.cli", "demo"], capture_output=True, text=True,
                         check=True).stdout
    res = ct.calib_ci("y ~ p", data=ct.load_demo())
    assert "No. observations:" in out and str(res.n) in out


@pytest.mark.parametrize("null", ["conditional", "monte-carlo"])
def test_null_option(csv, capsys, null):
    path, df = csv
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2 + p3", "--k", "2", "--bins", "6",
                 "--null", null, "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = ct.calib_ci("label ~ p0 + p1 + p2 + p3", data=df, k=2, n_bins=6, null=null, rng=3)
    assert out["null"] == null and out["null_pvalue"] == res.null_pvalue


# ----------------------------------------------------------------------------- one parser, shared options
SHARED = ["--formula", "--n-classes", "--k", "--bins", "--alpha", "--missing", "--json"]


def _subcommands():
    import argparse

    from calibtest.cli import build_parser
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _run(*argv):
    """Run the console command in a fresh interpreter: (exit status, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "calibtest.cli", *map(str, argv)], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def two_models(tmp_path):
    """Binary outcomes with two models' predictions, and four-class outcomes with two probability matrices."""
    rng = np.random.default_rng(21)
    n = 600
    pa = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < pa).astype(int)
    pb = np.clip(pa * 1.2, 0.01, 0.99)
    A = rng.dirichlet(np.ones(4), size=n)
    label = np.array([rng.choice(4, p=row) for row in A])
    B = 0.7 * A + 0.3 * rng.dirichlet(np.ones(4), size=n)
    df = pd.DataFrame(np.c_[A, B], columns=[f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)])
    df = df.assign(y=y, pa=pa, pb=pb, label=label)
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path, df


def test_version(capsys):
    from importlib.metadata import PackageNotFoundError, version
    try:
        expected = version("calibtest")
    except PackageNotFoundError:
        expected = "0+unknown"
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"calibtest {expected}\n"
    rc, out, _ = _run("--version")
    assert rc == 0 and out == f"calibtest {expected}\n"


def test_compare_formula_twice_matches_python(two_models, capsys):
    path, df = two_models
    assert main(["compare", str(path), "--formula", "y ~ pa", "--formula", "y ~ pb", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_compare("y ~ pa", "y ~ pb", data=df)
    assert out["name_a"] == "pa" and out["name_b"] == "pb"  # order: first --formula is model A
    for key in ("estimate", "estimate_a", "estimate_b", "se", "statistic", "pvalue", "ci_lower", "ci_upper"):
        assert out[key] == getattr(ref, key), key
    assert out == json.loads(json.dumps(ref.to_dict()))
    # the older spelling gives the same result
    assert main(["compare", str(path), "--formula-a", "y ~ pa", "--formula-b", "y ~ pb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == out


def test_compare_shared_options_reach_calib_compare(two_models, capsys):
    path, df = two_models
    fa, fb = "label ~ a0 + a1 + a2 + a3", "label ~ b0 + b1 + b2 + b3"
    assert main(["compare", str(path), "--formula", fa, "--formula", fb, "--k", "2", "--bins", "5",
                 "--alpha", "0.1", "--alternative", "greater", "--variance", "plugin", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_compare(fa, fb, data=df, k=2, n_bins=5, alpha=0.1, alternative="greater", variance="plugin")
    assert out["mode"] == "topk" and out["k"] == 2 and out["n_bins_a"] == ref.n_bins_a
    assert (out["estimate"], out["se"], out["pvalue"]) == (ref.estimate, ref.se, ref.pvalue)


def test_compare_full_calibration_is_a_one_line_error(two_models):
    path, df = two_models
    fa, fb = "label ~ a0 + a1 + a2 + a3", "label ~ b0 + b1 + b2 + b3"
    with pytest.raises(ValueError) as exc:
        ct.calib_compare(fa, fb, data=df, k="full")
    rc, out, err = _run("compare", path, "--formula", fa, "--formula", fb, "--k", "full")
    assert rc == 1 and out == ""
    assert err == f"calibtest: error: {exc.value}\n"


@pytest.mark.parametrize("formulas", [["--formula", "y ~ pa"],
                                      ["--formula", "y ~ pa", "--formula", "y ~ pb", "--formula", "y ~ pa"],
                                      ["--formula", "y ~ pa", "--formula-b", "y ~ pb"],
                                      ["--formula-a", "y ~ pa"],
                                      []])
def test_compare_needs_exactly_two_formulas(two_models, capsys, formulas):
    path, _ = two_models
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(path), *formulas])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: calibtest compare")
    assert err.splitlines()[-1].startswith("calibtest compare: error: ") and "formula" in err.splitlines()[-1]


@pytest.mark.parametrize("command", ["ci", "report", "tcal"])
def test_single_model_commands_take_one_formula(csv, capsys, command):
    path, _ = csv
    extra = ["-o", "r.html"] if command == "report" else []
    for formulas in ([], ["--formula", "label ~ p0", "--formula", "label ~ p1"]):
        with pytest.raises(SystemExit) as exc:
            main([command, str(path), *extra, *formulas])
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith(f"calibtest {command}: error: ")


def test_shared_options_have_one_help_text_everywhere():
    subs = _subcommands()
    takes = {name: {s for a in p._actions for s in a.option_strings if s in SHARED} for name, p in subs.items()}
    # every subcommand that fits a model takes the model options; the printing ones take --json
    assert takes == {"ci": set(SHARED), "report": set(SHARED) - {"--json"}, "tcal": set(SHARED),
                     "compare": set(SHARED), "sample-size": set(SHARED), "demo": set()}
    for option in SHARED:
        helps = {name: a.help for name, p in subs.items() for a in p._actions if option in a.option_strings}
        assert len(set(helps.values())) == 1, (option, helps)
        assert all(h and h.strip() for h in helps.values()), option


@pytest.mark.parametrize("command", ["ci", "report", "tcal", "compare"])
def test_k_accepts_an_integer_or_full_everywhere(command, capsys):
    parser = _subcommands()[command]
    formulas = ["--formula", "y ~ p"] * (2 if command == "compare" else 1)
    extra = ["-o", "r.html"] if command == "report" else []
    assert parser.parse_args(["f.csv", *formulas, *extra, "--k", "full"]).k == "full"
    assert parser.parse_args(["f.csv", *formulas, *extra, "--k", "3"]).k == 3
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["f.csv", *formulas, *extra, "--k", "two"])
    assert exc.value.code == 2 and "integer or 'full'" in capsys.readouterr().err


def _stderr_of(argv, capsys):
    """(exit status, stdout, stderr) of main(argv) as the interpreter would show them; any other
    exception (a traceback) propagates and fails the test."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:  # the interpreter prints a string code on stderr and exits with status 1
        out, err = capsys.readouterr()
        return (1, out, err + f"{exc.code}\n") if isinstance(exc.code, str) else (exc.code, out, err)
    out, err = capsys.readouterr()
    return rc, out, err


def test_errors_are_one_line_without_traceback(csv, tmp_path, capsys):
    path, _ = csv
    for argv, expected in [
        (["ci", tmp_path / "missing.csv", "--formula", "y ~ p"], "file not found"),
        (["tcal", tmp_path / "missing.csv", "--formula", "y ~ p"], "file not found"),
        (["compare", tmp_path / "missing.csv", "--formula", "y ~ p", "--formula", "y ~ q"], "file not found"),
        (["report", tmp_path / "missing.csv", "--formula", "y ~ p", "-o", tmp_path / "r.html"], "file not found"),
        (["ci", tmp_path / "missing.parquet", "--formula", "y ~ p"], "file not found"),
        (["ci", tmp_path, "--formula", "y ~ p"], "is a directory"),
        (["ci", path, "--formula", "label ~ nope"], "column 'nope'"),
        (["tcal", path, "--formula", "label ~ nope"], "column 'nope'"),
        (["report", path, "--formula", "label ~ p0 + p1 + p2 + p3", "-o", tmp_path / "r.txt"], ".html, .htm or .pdf"),
    ]:
        rc, out, err = _stderr_of(argv, capsys)
        assert rc != 0 and out == "", argv
        assert err.count("\n") == 1 and err.startswith("calibtest: error: ") and expected in err, (argv, err)
