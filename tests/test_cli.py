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
    assert main(["ci", str(path), "--formula", "label ~ nope"]) == 2
    assert "column 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="file not found"):
        main(["ci", str(path) + ".missing", "--formula", "y ~ p"])


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
