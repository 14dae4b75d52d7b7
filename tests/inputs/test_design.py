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
from calibtest.inputs.design import (LABELS, RULES, SURVIVAL_WAY_OUT, Design, combinations_markdown, combinations_text,
                                     source_of)
from calibtest.inputs.settings import Inputs, Settings
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


def _calls(frame, csv):
    """For each (rule, front door): a call that breaks that rule and no earlier one."""
    surv, f = dict(horizon=3.0), str(csv)
    return {
        ("a survival outcome (horizon= or a Surv(...) formula) in a test of binary labels", "calib_test"):
            lambda: ct.calib_test("y ~ p", data=frame, horizon=3.0),
        ("a survival outcome (horizon= or a Surv(...) formula) in a test of binary labels", "evidence"):
            lambda: ct.evidence("Surv(time, event) ~ p", data=frame),
        ("a survival outcome (horizon= or a Surv(...) formula) in a test of binary labels", "tcal_test"):
            lambda: ct.tcal_test("Surv(time, event) ~ p", data=frame),
        ("a survival outcome (horizon= or a Surv(...) formula) in a test of binary labels", "hosmer_lemeshow"):
            lambda: ct.hosmer_lemeshow("y ~ p", data=frame, horizon=3.0),
        ("a survival outcome (horizon= or a Surv(...) formula) in a test of binary labels", "val_prob"):
            lambda: ct.val_prob("Surv(time, event) ~ p", data=frame),
        ("a survival outcome (horizon=) with a file or a Dask frame", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=f, **surv),
        ("a survival outcome (horizon=) with cluster=", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame, cluster="site", **surv),
        ("a survival outcome (horizon=) with prevalence=", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame, prevalence=0.3, **surv),
        ("a survival outcome (horizon=) with weights= and null='conditional'", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame, weights="w", null="conditional", **surv),
        ("a survival outcome (horizon=) with n_classes= or k=", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame, n_classes=3, **surv),
        ("a survival outcome (horizon=) with a resampling method", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame, method="bootstrap", n_resamples=20, **surv),
        ("a survival outcome without horizon=", "calib_ci"):
            lambda: ct.calib_ci("Surv(time, event) ~ p", data=frame),
        ("weights= in val_prob", "val_prob"): lambda: ct.val_prob("y ~ p", data=frame, weights="w"),
        ("chunksize= with rows in memory", "calib_ci"): lambda: ct.calib_ci("y ~ p", data=frame, chunksize=100),
        ("chunksize= with rows in memory", "calib_test"): lambda: ct.calib_test("y ~ p", data=frame, chunksize=100),
        ("chunksize= with rows in memory", "evidence"): lambda: ct.evidence("y ~ p", data=frame, chunksize=100),
        ("chunksize= with a Dask frame", "calib_ci"): "dask",
        ("cluster= with a file or a Dask frame", "calib_ci"): lambda: ct.calib_ci("y ~ p", data=f, cluster="site"),
        ("cluster= with a file or a Dask frame", "calib_test"): lambda: ct.calib_test("y ~ p", data=f, cluster="site"),
        ("cluster= with a file or a Dask frame", "evidence"): lambda: ct.evidence("y ~ p", data=f, cluster="site"),
        ("cluster= with a resampling method", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=frame, cluster="site", method="bootstrap", n_resamples=20, rng=1),
        ("cluster= with weights= or prevalence=", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=frame, cluster="site", weights="w"),
        ("cluster= with null='conditional'", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=frame, cluster="site", null="conditional"),
        ("weights= or prevalence= with a file or a Dask frame", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=f, weights="w"),
        ("by= with a file or a Dask frame in evidence", "evidence"): lambda: ct.evidence("y ~ p", data=f, by="g"),
        ("null='monte-carlo' and by= with a file or a Dask frame", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=f, by="g", null="monte-carlo"),
        ("null='monte-carlo' with a file or a Dask frame", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=f, null="monte-carlo"),
        ("null='monte-carlo' with a file or a Dask frame", "evidence"):
            lambda: ct.evidence("y ~ p", data=f, null="monte-carlo"),
        ("a resampling method with a file or a Dask frame", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=f, method="bootstrap", n_resamples=20, rng=1),
        ("y=/probs= arrays with a file or a Dask frame", "calib_ci"):
            lambda: ct.calib_ci("y ~ p", data=f, y=frame.y.to_numpy()),
        ("y=/probs= arrays with a file or a Dask frame", "evidence"):
            lambda: ct.evidence("y ~ p", data=f, probs=frame.p.to_numpy()),
        ("a file or a Dask frame without a formula", "calib_ci"): lambda: ct.calib_ci(data=f),
        ("a file or a Dask frame without a formula", "evidence"): lambda: ct.evidence(data=f),
    }


CASES = [(rule, door) for rule in RULES for door in rule.analyses]


@pytest.mark.parametrize("rule, door", CASES, ids=[f"{door}: {rule.combination}" for rule, door in CASES])
def test_each_rule_is_the_refusal_its_front_door_raises(rule, door, frame, csv):
    call = _calls(frame, csv)[(rule.combination, door)]
    if call == "dask":
        dd = pytest.importorskip("dask.dataframe")
        ddf = dd.from_pandas(frame, npartitions=2)
        call = lambda: ct.calib_ci("y ~ p", data=ddf, chunksize=10)  # noqa: E731
    with pytest.raises(OptionError) as info:
        call()
    expected = rule.reason.format(method="bootstrap", null="conditional" if "conditional" in rule.combination
                                  else "monte-carlo", what=LABELS[door], ci=SURVIVAL_WAY_OUT,
                                  report="that result's evidence() or report()")
    assert str(info.value) == expected


def test_every_rule_and_front_door_has_a_call_here(frame, csv):
    # A rule added to the table without a call above fails here (and so cannot go untested); no stale calls.
    assert set(_calls(frame, csv)) == {(rule.combination, door) for rule, door in CASES}


def test_the_survival_refusal_is_the_command_lines_too():
    # One text: the CLI's `calibtest test` refusal and the table's rule are the same template.
    from calibtest.options import SURVIVAL_REFUSAL, survival_refusal
    assert str(survival_refusal("X", ci="C", report="R")) == SURVIVAL_REFUSAL.format(what="X", ci="C", report="R")


def test_a_supported_design_passes_and_is_described():
    design = Design.resolve("calib_ci", Inputs(data=pd.DataFrame(), weights="w", by="site"),
                            Settings(horizon=5.0, cause=1))
    assert design.check() is design
    assert design.outcome == "competing risks" and design.survival and design.grouped
    assert design.describe() == "competing risks, case-weighted, grouped, rows in memory"
    assert Design.resolve("calib_ci", settings=Settings(k="full")).target == "full"
    assert Design.resolve("calib_ci", settings=Settings(k=2)).target == "top-k"
    assert Design.resolve("calib_ci", settings=Settings(n_classes=10)).target == "top-1"
    assert Design.resolve("calib_ci").target is None
    assert Design.resolve("calib_test", Inputs(formula="Surv(t, e) ~ r")).survival
    assert not Design.resolve("calib_test", Inputs(formula="y ~ p")).survival


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


def test_a_prevalence_is_recorded_besides_case_weights(frame):
    """``reweighted``: prevalence= given, alone or with case weights (``weighting`` names the weights first); the
    weighted result records the design's decision, and only its prevalence-weighted one is the jackknife."""
    both = Design.resolve("calib_ci", Inputs(formula="y ~ p", data=frame, weights="w"), Settings(prevalence=0.3))
    alone = Design.resolve("calib_ci", Inputs(formula="y ~ p", data=frame), Settings(prevalence=0.3))
    weights = Design.resolve("calib_ci", Inputs(formula="y ~ p", data=frame, weights="w"), Settings())
    assert (both.weighting, both.reweighted) == ("weights", True)
    assert (alone.weighting, alone.reweighted) == ("prevalence", True)
    assert (weights.weighting, weights.reweighted) == ("weights", False)
    assert both.case_weighted and weights.case_weighted and not alone.case_weighted
    res_both = ct.calib_ci("y ~ p", data=frame, weights="w", prevalence=0.3, rng=1)
    res_w = ct.calib_ci("y ~ p", data=frame, weights="w", rng=1)
    assert res_both.weighting.reweighted and res_both.weighting.kind == "case weights and prevalence"
    assert not res_w.weighting.reweighted and res_w.weighting.kind == "case weights"
    assert res_w.weighting.case_weights is not None and res_both.weighting.case_weights is None
