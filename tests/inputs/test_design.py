"""The design of a call (calibtest.inputs.design): resolved once, and the one table of refused combinations.

Each rule of RULES is exercised through calib_ci with a call that breaks it and only it, and must raise
exactly the rule's reason; the documentation's table and the command line's help are checked against the
same table.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.inputs.design import RULES, Design, combinations_markdown, combinations_text, source_of
from calibtest.options import OptionError

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(3)
    n = 300
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    time = rng.exponential(5.0, n)
    return pd.DataFrame({"y": y, "p": p, "w": rng.gamma(2.0, 1.0, n), "site": np.arange(n) % 6,
                         "g": np.arange(n) % 2, "time": time, "event": (rng.random(n) < 0.7).astype(int)})


@pytest.fixture(scope="module")
def csv(frame, tmp_path_factory):
    path = tmp_path_factory.mktemp("design") / "rows.csv"
    frame.to_csv(path, index=False)
    return path


def _call(rule_name, frame, csv):
    """A calib_ci call that breaks the named rule and no earlier one."""
    surv = dict(horizon=3.0)
    calls = {
        "a survival outcome (horizon=) with a file or a Dask frame":
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=str(csv), **surv),
        "a survival outcome (horizon=) with cluster=":
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame, cluster="site", **surv),
        "chunksize= with rows in memory": lambda: ct.calib_ci("y ~ p", data=frame, chunksize=100),
        "chunksize= with a Dask frame": None,
        "cluster= with a file or a Dask frame": lambda: ct.calib_ci("y ~ p", data=str(csv), cluster="site"),
        "cluster= with a resampling method":
            lambda: ct.calib_ci("y ~ p", data=frame, cluster="site", method="bootstrap", n_resamples=20, rng=1),
        "cluster= with weights= or prevalence=": lambda: ct.calib_ci("y ~ p", data=frame, cluster="site", weights="w"),
        "cluster= with null='conditional'": lambda: ct.calib_ci("y ~ p", data=frame, cluster="site", null="conditional"),
        "weights= or prevalence= with a file or a Dask frame": lambda: ct.calib_ci("y ~ p", data=str(csv), weights="w"),
        "null='monte-carlo' and by= with a file or a Dask frame":
            lambda: ct.calib_ci("y ~ p", data=str(csv), by="g", null="monte-carlo"),
        "null='monte-carlo' with a file or a Dask frame": lambda: ct.calib_ci("y ~ p", data=str(csv), null="monte-carlo"),
    }
    return calls[rule_name]


@pytest.mark.parametrize("rule", RULES, ids=[r.combination for r in RULES])
def test_each_rule_is_the_refusal_calib_ci_raises(rule, frame, csv):
    call = _call(rule.combination, frame, csv)
    if call is None:
        dd = pytest.importorskip("dask.dataframe")
        ddf = dd.from_pandas(frame, npartitions=2)
        call = lambda: ct.calib_ci("y ~ p", data=ddf, chunksize=10)  # noqa: E731
    with pytest.raises(OptionError) as info:
        call()
    assert str(info.value) == rule.reason.format(method="bootstrap", null="conditional")


def test_every_rule_has_a_call_here(frame, csv):
    # A rule added to the table without a call above fails here (and so cannot go untested).
    for rule in RULES:
        _call(rule.combination, frame, csv)


def test_a_supported_design_passes_and_is_described():
    design = Design.resolve("calib_ci", data=pd.DataFrame(), horizon=5.0, cause=1, weights="w", by="site")
    assert design.check() is design
    assert design.outcome == "competing risks" and design.survival and design.grouped
    assert design.describe() == "competing risks, case-weighted, grouped, rows in memory"
    assert Design.resolve("calib_ci", k="full").target == "full"
    assert Design.resolve("calib_ci", k=2).target == "top-k"
    assert Design.resolve("calib_ci", n_classes=10).target == "top-1"
    assert Design.resolve("calib_ci").target is None


def test_the_source_is_read_without_importing_dask(tmp_path):
    assert source_of(str(tmp_path / "x.csv")) == "file" and source_of(tmp_path / "x.parquet") == "file"
    assert source_of(pd.DataFrame()) == "memory" and source_of({"y": [1]}) == "memory"


def test_the_docs_table_is_the_rules_table():
    text = (DOCS / "combinations.md").read_text(encoding="utf-8")
    assert combinations_markdown() in text
    # one row per rule, no stale row left behind
    assert len(re.findall(r"^\| (?!combination|---)", text, flags=re.M)) == len(RULES)


def test_the_cli_help_lists_the_refused_combinations(capsys):
    from calibtest.cli import main
    with pytest.raises(SystemExit):
        main(["ci", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(combinations_text("calib_ci").split()) in out
