"""The kind of an analysis (calibtest.ece.kinds): each kind's protocol values against independent ones, and a scan
that fails when a consumer (summary, report, plan, acceptance) tests the kind itself."""
import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import calibtest as ct
from calibtest.ece.kinds import ClusteredKind, RowsKind, SurvivalKind, WeightedKind

PACKAGE = Path(ct.__file__).parent


@pytest.fixture(scope="module")
def demo():
    return ct.load_demo()


@pytest.fixture(scope="module")
def survival_frame():
    rng = np.random.default_rng(7)
    n = 400
    risk = rng.uniform(0.05, 0.6, n)
    event_time = rng.exponential(-5.0 / np.log1p(-risk))  # P(T <= 5) = risk
    censor = rng.exponential(12.0, n)
    return pd.DataFrame({"time": np.minimum(event_time, censor), "event": (event_time <= censor).astype(int),
                         "risk": risk})


@pytest.fixture(scope="module")
def clustered_frame():
    rng = np.random.default_rng(3)
    sites = np.repeat(np.arange(24), 40)
    p = rng.uniform(0.05, 0.9, sites.size)
    y = (rng.uniform(size=sites.size) < np.clip(p + rng.normal(0, 0.05, 24)[sites], 0, 1)).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": sites})


# ----------------------------------------------------------------------------- each kind's values
def test_binary_rows_count_their_events_and_name_their_null(demo):
    res = ct.calib_ci("y ~ p", data=demo, null="monte-carlo", rng=4)
    kind = res.kind
    assert isinstance(kind, RowsKind) and kind is res.kind  # decided once per result
    assert kind.events() == int((demo["y"] == 1).sum()) == res.n_events
    assert kind.target_text() == "binary (E[y | p] = p)" and kind.stated_target() is None
    assert kind.null_name() == f"Monte Carlo ({res.monte_carlo.n_draws} label draws)"
    assert kind.null_text().startswith("Monte Carlo") and res.null == "monte-carlo"
    assert kind.null_seed() == res.monte_carlo.seed == 4
    assert kind.planning_inputs() == {"n": len(demo), "events": int(demo["y"].sum()), "k": None,
                                      "n_classes_stated": False, "cluster": None, "censored_fraction": None}
    assert "Mode:" in kind.settings({"Mode:": "x"}) and kind.notes() == []


def test_binary_recalibration_is_val_probs_and_the_row_count_oe(demo):
    res = ct.calib_ci("y ~ p", data=demo)
    rec = res.kind.recalibration()
    vp = ct.val_prob(y=demo["y"], probs=demo["p"], alpha=res.alpha)
    assert rec["citl"].estimate == pytest.approx(vp.citl, rel=1e-12)
    assert rec["slope"].estimate == pytest.approx(vp.slope, rel=1e-12)
    observed, expected = demo["y"].sum(), demo["p"].sum()
    assert rec["oe"].estimate == pytest.approx(observed / expected, rel=1e-12)
    se = math.sqrt((1 - observed / len(demo)) / observed)  # Debray et al.: se(log O/E)
    z = stats.norm.ppf(0.975)
    lo, hi = rec["oe"].interval(0.05)
    assert (lo, hi) == pytest.approx((observed / expected * math.exp(-z * se), observed / expected * math.exp(z * se)))
    assert res.kind.acceptance_measures()["oe_within"].estimate == rec["oe"].estimate


def test_top1_counts_correct_predictions_and_has_no_citl():
    rng = np.random.default_rng(2)
    probs = rng.dirichlet(np.ones(3), 300)
    y = np.array([rng.choice(3, p=row) for row in probs])
    res = ct.calib_ci(y=y, probs=probs, k=1)
    if res.mode != "top1":
        pytest.skip("k=1 of a matrix is not the top-1 target here")
    assert res.kind.events() == int((probs.argmax(1) == y).sum())
    rec = res.kind.recalibration()
    assert isinstance(rec["citl"], str) and "binary outcome" in rec["citl"]  # the reason, not a number
    assert rec["oe"].estimate == pytest.approx((probs.argmax(1) == y).sum() / probs.max(1).sum(), rel=1e-12)


def test_weighted_rows_count_rows_not_weights(demo):
    w = np.linspace(0.5, 3.0, len(demo))
    res = ct.calib_ci("y ~ p", data=demo.assign(w=w), weights="w", rng=1)
    assert isinstance(res.kind, WeightedKind)
    assert res.kind.events() == int((demo["y"] == 1).sum())  # a count of rows, not sum(w * y)
    assert res.kind.null_text() == ("Monte Carlo (outcomes redrawn given the predictions, the case weights fixed)"
                                    if res.null == "monte-carlo" else res.kind.null_text())
    assert res.null in res.kind.null_setting_text()
    assert res.kind.notes() == res.weighting.notes(res.n)
    assert res.kind.report_prose()["weighting"] == res.kind.notes()[0]  # one wording: the summary's and the report's
    reasons = res.kind.recalibration()
    assert all(isinstance(reasons[m], str) and "weighted" in reasons[m] for m in ("citl", "slope", "oe"))
    assert res.kind.report_prose()["weighting"].startswith("The rows were weighted by case weights")


def test_clustered_recalibration_is_the_cluster_robust_measures(clustered_frame):
    res = ct.calib_ci("y ~ p", data=clustered_frame, cluster="site", rng=5)
    kind = res.kind
    assert isinstance(kind, ClusteredKind)
    cm = res.clustering.measures
    rec = kind.recalibration()
    assert (rec["citl"].estimate, rec["citl"].se, rec["citl"].df) == (cm.citl, cm.citl_se, 23)
    assert (rec["slope"].estimate, rec["oe"].estimate) == (cm.slope, cm.oe)
    assert rec["citl"].interval(0.1) == pytest.approx(cm.citl_ci(0.1), rel=1e-12)
    assert rec["oe"].interval(0.05) == pytest.approx(cm.oe_ci(0.05), rel=1e-12)
    assert kind.null_name() == f"cluster sign-flip ({res.clustering.n_patterns} sign patterns)"
    assert "24 clusters" in kind.null_text() and res.null == "monte-carlo"
    assert kind.planning_inputs()["cluster"] == "site"
    paragraph = kind.report_prose()["clustering"]  # one wording: the summary's note, then the report's additions
    assert paragraph.startswith(res.clustering.notes()[0] + " Cluster-robust CITL")
    assert res.clustering.notes()[0].startswith(f"The {len(clustered_frame)} rows come from 24 clusters")
    evaluation = res.acceptance({"citl_within": 0.5, "oe_within": (0.8, 1.25)})
    assert set(evaluation.table["verdict"]) <= {"met", "not met"}  # evaluable, on the cluster-robust numbers
    assert evaluation.table["estimate"].tolist() == [cm.citl, cm.oe]
    assert "cluster-robust (24 clusters" in evaluation.sentence


def test_survival_counts_events_by_the_horizon_and_names_the_ipcw_null(survival_frame):
    df = survival_frame
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=5)
    kind = res.kind
    assert isinstance(kind, SurvivalKind)
    by_horizon = int(((df["event"] == 1) & (df["time"] <= 5)).sum())
    censored = int(((df["event"] == 0) & (df["time"] < 5)).sum())
    assert censored > 0
    assert kind.events() == by_horizon == res.n_events
    assert kind.planning_inputs()["events"] == by_horizon
    assert kind.planning_inputs()["censored_fraction"] == pytest.approx(censored / len(df))
    assert kind.target_text() == "survival at the horizon t = 5" == kind.stated_target()
    assert res.null == "asymptotic" and kind.null_name() == "IPCW asymptotic"
    text = str(res.summary(evidence=False))
    assert "survival at the horizon t = 5" in text and "Target: binary" not in text and "Binary mode" not in text
    assert f"Events by t:        {by_horizon}" in text or f"Events by t: {by_horizon}" in " ".join(text.split())
    sev = res.evidence().survival
    assert kind.recalibration()["oe"].estimate == sev.oe  # the survival evidence's Kaplan-Meier O/E
    assert dict(kind.censoring_rows())["Censored before t (outcome at t unknown)"] == str(censored)


def test_to_dict_holds_each_kinds_keys(demo, clustered_frame, survival_frame):
    plain = ct.calib_ci("y ~ p", data=demo).to_dict()
    clustered = ct.calib_ci("y ~ p", data=clustered_frame, cluster="site", rng=5).to_dict()
    survival = ct.calib_ci("Surv(time, event) ~ risk", data=survival_frame, horizon=5).to_dict()
    assert "n_clusters" not in plain and clustered["n_clusters"] == 24
    assert survival["n_events_before_horizon"] == int(((survival_frame["event"] == 1)
                                                       & (survival_frame["time"] <= 5)).sum())


# ----------------------------------------------------------------------------- consumers do not test the kind
#: Where the kind of an analysis is decided, and so may be tested: the design of a call, the kind of a result, the
#: calibration target (its properties), and the engines of core/, which branch on the target's mathematics.
DECIDERS = ("inputs/design.py", "ece/kinds.py", "core/")


def consumers(root: Path = PACKAGE) -> tuple:
    """Every module of the package but the deciders: they read ``res.kind``, the design or the target's properties."""
    return tuple(sorted(rel for rel in (p.relative_to(root).as_posix() for p in root.rglob("*.py"))
                        if not any(rel == d or (d.endswith("/") and rel.startswith(d)) for d in DECIDERS)))


CONSUMERS = consumers()

#: Functions outside the deciders that still test the kind, with the number of tests and why (this list must
#: shrink; a new kind test anywhere in the package fails the test below).
ALLOWED = {
    "checks/evidence_table.py:at_horizon": (1, "the evidence table's own optional survival part (an EvidenceResult "
                                               "has no kind object), asked once by its summary, notes and dict"),
}

_KIND_PARTS = {"weighting", "clustering", "survival"}


def _tests_the_kind(node) -> bool:
    """``x.mode == ...``/``in``, ``x.weighting is None``, ``getattr(x, "clustering", None)``, isinstance(...)."""
    if isinstance(node, ast.Compare):
        left = node.left
        name = left.attr if isinstance(left, ast.Attribute) else left.id if isinstance(left, ast.Name) else None
        if name == "mode" and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot))
                                  for op in node.ops):
            return True
        if name in _KIND_PARTS and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return True
        if (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "getattr"
                and len(left.args) >= 2 and isinstance(left.args[1], ast.Constant)
                and left.args[1].value in _KIND_PARTS):
            return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
        return any(word in ast.unparse(node) for word in ("Survival", "Cluster", "Weight"))
    return False


def kind_tests(root: Path = PACKAGE, modules=CONSUMERS) -> dict:
    """module:function -> the number of expressions in it (not in a function inside it) that test the kind."""
    found = {}

    def visit(node, where):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = f"{module}:{node.name}"
        elif where is not None and _tests_the_kind(node):
            found[where] = found.get(where, 0) + 1
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    for module in modules:
        visit(ast.parse((root / module).read_text()), None)
    return found


def test_no_consumer_tests_the_kind_of_a_result():
    """Every module but the deciders reads ``res.kind``, the design or the target's properties; what still tests
    the kind is listed, with why."""
    found = kind_tests()
    unlisted = {key: n for key, n in found.items() if key not in ALLOWED}
    assert not unlisted, f"consumers testing the kind of a result (use res.kind, calibtest.ece.kinds): {unlisted}"
    grown = {key: n for key, n in found.items() if n > ALLOWED[key][0]}
    assert not grown, f"more kind tests than allowed: {grown}"
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"allow-list entries that no longer test the kind (remove them): {stale}"


def test_the_kind_scan_sees_a_new_kind_test(tmp_path):
    """The scan is not vacuous: each form of a kind test in a new consumer is found, a read of res.kind is not."""
    (tmp_path / "m.py").write_text(
        "def a(res):\n    return res.mode == 'binary'\n\n"
        "def b(res):\n    if res.clustering is not None:\n        return 1\n\n"
        "def c(res):\n    return getattr(res, 'survival', None) is None\n\n"
        "def d(res):\n    return isinstance(res, SurvivalEvidence)\n\n"
        "def e(res):\n    return res.kind.null_text()\n\n"
        "def f(res):\n    return res.mode is Target.FULL\n\n"
        "def g(res):\n    return res.mode.full_calibration or res.kind.clustered\n")
    assert kind_tests(tmp_path, ("m.py",)) == {"m.py:a": 1, "m.py:b": 1, "m.py:c": 1, "m.py:d": 1, "m.py:f": 1}


def test_the_scan_covers_the_whole_package_but_the_deciders():
    """A new module anywhere is scanned; the design, the kinds, the target and the engines are not."""
    assert "cli.py" in CONSUMERS and "streams/evidence.py" in CONSUMERS and "ece/result.py" in CONSUMERS
    assert not any(m.startswith("core/") for m in CONSUMERS)
    assert "ece/kinds.py" not in CONSUMERS and "inputs/design.py" not in CONSUMERS
    every = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    assert len(CONSUMERS) == len(every) - len({m for m in every if m.startswith("core/")}) - 2
