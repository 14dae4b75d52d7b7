"""cluster in analysis plans: written only when set, read back, a deviation when not followed, used by
``calibtest report --plan``."""
import json

import numpy as np
import pandas as pd
import pytest
from scipy import special

import calibtest as ct
from calibtest.inputs.plan import AnalysisPlan, plan_sha256
from calibtest.options import OptionTypeError


def sites(seed=0, G=8):
    rng = np.random.default_rng(seed)
    site = np.repeat(np.arange(G), rng.integers(30, 60, G))
    p = special.expit(rng.normal(-0.5, 1.0, site.size))
    y = (rng.uniform(size=site.size) < special.expit(special.logit(p) + rng.normal(0, 0.5, G)[site])).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": [f"s{g}" for g in site]})


def test_plan_with_cluster_round_trips(tmp_path):
    path = tmp_path / "plan.json"
    written = ct.plan(path, cluster="site")
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["cluster"] == "site"
    assert stored["sha256"] == plan_sha256(stored)  # the fingerprint covers the cluster
    back = AnalysisPlan.read(path)
    assert back.cluster == "site" and back.sha256 == written.sha256 and back.options()["cluster"] == "site"
    # a plan without clusters has no cluster field (its fingerprint is that of the file before the option)
    bare = ct.plan(tmp_path / "bare.json")
    assert "cluster" not in json.loads((tmp_path / "bare.json").read_text()) and bare.cluster is None
    assert "cluster" not in bare.options()
    # a changed cluster is a changed file
    stored["cluster"] = "ward"
    path.write_text(json.dumps(stored), encoding="utf-8")
    with pytest.raises(ValueError, match="SHA-256"):
        AnalysisPlan.read(path)
    with pytest.raises(OptionTypeError, match="cluster must name a column"):
        ct.plan(tmp_path / "x.json", cluster=["a", "b"])


def test_plan_cluster_deviations(tmp_path):
    df = sites()
    planned = ct.plan(tmp_path / "plan.json", cluster="site")
    clustered = ct.calib_ci("y ~ p", data=df, cluster="site")
    iid = ct.calib_ci("y ~ p", data=df)
    assert [d.option for d in planned.deviations(clustered)] == []
    dev = [d for d in planned.deviations(iid) if d.option == "cluster"]
    assert len(dev) == 1 and dev[0].planned == "site" and dev[0].used == "none (rows independent)"
    bare = ct.plan(tmp_path / "bare.json")
    dev = [d for d in bare.deviations(clustered) if d.option == "cluster"]
    assert len(dev) == 1 and dev[0].used == "site"


def test_cli_plan_and_report_use_the_planned_cluster(tmp_path, capsys):
    from calibtest.cli import main

    data = tmp_path / "d.csv"
    sites().to_csv(data, index=False)
    plan_path = tmp_path / "plan.json"
    assert main(["plan", "-o", str(plan_path), "--cluster", "site"]) == 0
    assert AnalysisPlan.read(plan_path).cluster == "site"
    out = tmp_path / "r.html"
    assert main(["report", str(data), "--formula", "y ~ p", "--plan", str(plan_path), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "come from 8 clusters (column site;" in html and "multi-scale test (clustered)" in html
    capsys.readouterr()
