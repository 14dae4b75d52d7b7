"""Real top-1 predictions of published image classifiers (T-Cal data, ../shared/data/tcal).

Reference values come from an independent pandas implementation: per bin, the
U-statistic of ||E U||^2 written as mean^2 - (unbiased variance)/c, and sigma1^2
from groupby means and variances.
"""
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

import calibtest as ct

from conftest import tcal_file

FILES = {
    "cifar10_resnet50": 10,
    "cifar100_resnet56": 100,
    "imagenet_densenet161": 1000,
    "imagenet_resnet152": 1000,
}


def pandas_reference(conf: np.ndarray, correct: np.ndarray, B: int):
    df = pd.DataFrame({"bin": np.floor(conf * B).astype(int), "u": correct - conf})
    g = df.groupby("bin")["u"]
    c, mean, var = g.count(), g.mean(), g.var(ddof=1)
    n = len(df)
    keep = c >= 2
    t = float(((c / n) * (mean**2 - var / c))[keep].sum())
    p = c / n
    var_biased = g.var(ddof=0)
    sigma1 = float((p * mean**4).sum() - ((p * mean**2).sum()) ** 2 + 4 * (p * mean**2 * var_biased).sum())
    return t, sigma1, c


@pytest.mark.parametrize("name", sorted(FILES))
def test_top1_against_pandas_reference(name):
    df = pd.read_csv(tcal_file(name))
    K = FILES[name]
    res = ct.calib_ci("correct ~ confidence", data=df, n_classes=K, n_bins=50, alpha=0.1)
    t, s1, counts = pandas_reference(df.confidence.to_numpy(), df.correct.to_numpy(), 50)
    assert res.n == len(df)
    assert_allclose(res.estimate, t, rtol=1e-9)
    assert_allclose(res.sigma1_sq, s1, rtol=1e-9)
    assert res.n_occupied_bins == len(counts)
    ones = int((df.confidence == 1.0).sum())
    table = res.bin_table()
    assert table["count"].sum() == len(df)  # no row dropped
    if ones:
        assert table.loc[table["bin"] == (50,), "count"].item() == ones
    # these published classifiers are all detectably miscalibrated at n >= 10,000
    assert not res.contains_zero and res.null_pvalue < 1e-6
    lo, hi = res.conf_int(scale="ece")
    assert lo < np.sqrt(t) < hi


def test_rows_at_one_are_hundreds_in_two_imagenet_files():
    counts = {name: int((pd.read_csv(tcal_file(name)).confidence == 1.0).sum())
              for name in ("imagenet_densenet161", "imagenet_resnet152")}
    assert counts == {"imagenet_densenet161": 624, "imagenet_resnet152": 328}


def test_cli_json_on_real_file(capsys):
    from calibtest.cli import main
    import json
    path = tcal_file("cifar10_densenet121")
    assert main(["ci", str(path), "--formula", "correct ~ confidence", "--n-classes", "10",
                 "--bins", "50", "--alpha", "0.1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = ct.calib_ci("correct ~ confidence", data=pd.read_csv(path), n_classes=10, n_bins=50, alpha=0.1)
    assert out["estimate"] == res.estimate and out["ci_upper"] == res.ci_upper
