"""rng left at its default: every Monte Carlo part draws from the recorded seed, the same in any process.

Each kind of analysis with random draws (grouped calib_ci / calib_test / evidence with by=, the clustered
sign-flip null, clustered evidence, grouped and clustered, weighted survival and weighted binary with their
Monte Carlo nulls) is run in two fresh Python processes with the default ``rng``; the p-values must be equal,
the recorded seed must be the default one, and ``rng=<recorded seed>`` must give the same numbers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibtest.options import DEFAULT_SEED

ROOT = Path(__file__).resolve().parents[1]

#: Runs every kind with ``rng=RNG`` (None: the default) and prints {kind: [p-values..., recorded seed]} as JSON.
SCRIPT = r'''
import json, sys
import numpy as np, pandas as pd, calibtest as ct
RNG = None if sys.argv[1] == "default" else int(sys.argv[1])
rng = np.random.default_rng(11)
n = 480
p = rng.uniform(0.05, 0.6, n)
y = (rng.uniform(size=n) < p * 1.15).astype(int)
df = pd.DataFrame(dict(y=y, p=p, site=np.repeat(["a", "b", "c", "d"], n // 4), cl=np.arange(n) // 8,
                       w=rng.uniform(0.5, 2, n)))
t = rng.exponential(5 / -np.log1p(-p))
df["time"], df["event"] = np.minimum(t, 7.0), (t <= 7.0).astype(int)
out = {}
def groups(res):
    return [res.global_pvalue] + [float(v) for v in res.table["pvalue"]] + [res.to_dict()["seed"]]
out["calib_ci by"] = groups(ct.calib_ci("y ~ p", data=df, by="site", null="monte-carlo", rng=RNG))
out["calib_test by"] = groups(ct.calib_test("y ~ p", data=df, by="site", rng=RNG))
out["evidence by"] = groups(ct.evidence("y ~ p", data=df, by="site", rng=RNG))
out["calib_ci by cluster"] = groups(ct.calib_ci("y ~ p", data=df, by="site", cluster="cl", rng=RNG))
res = ct.calib_ci("y ~ p", data=df, cluster="cl", rng=RNG)
out["calib_ci cluster"] = [res.null_pvalue, res.to_dict()["mc_seed"]]
ev = res.evidence()
out["evidence of cluster"] = [float(v) for v in ev.table["pvalue"].dropna()] + [ev.seed]
ct_res = ct.calib_test("y ~ p", data=df, cluster="cl", rng=RNG)
out["calib_test cluster"] = [ct_res.pvalue, ct_res.to_dict()["seed"]]
res = ct.calib_ci("Surv(time, event) ~ p", data=df, horizon=5, weights="w", rng=RNG)
out["survival weighted"] = [res.null_pvalue, res.to_dict()["mc_seed"]]
res = ct.calib_ci("y ~ p", data=df, weights="w", rng=RNG)
out["weighted"] = [res.null_pvalue, res.to_dict()["mc_seed"]]
print(json.dumps(out))
'''


def _run(rng: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "random"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, rng], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def default_runs():
    return _run("default"), _run("default")


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_default_rng_gives_the_same_pvalues_in_two_processes(default_runs):
    first, second = default_runs
    assert first.keys() == second.keys() and len(first) == 9
    for kind in first:
        assert first[kind] == second[kind], kind


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_the_recorded_seed_is_the_one_used(default_runs):
    first, _ = default_runs
    for kind, values in first.items():
        assert int(values[-1]) == DEFAULT_SEED, kind
    again = _run(str(DEFAULT_SEED))  # rng=<the recorded seed>: the same numbers
    assert again == first
    other = _run("1")  # another seed changes the Monte Carlo p-values (so the comparison above can fail)
    assert any(other[kind][:-1] != first[kind][:-1] for kind in first)
