"""Snapshot of the public API's numbers, to check that a refactor leaves them bit-identical.

``python benchmarks/api_snapshot.py OUT.json`` runs a fixed set of public calls
(every target, every null, weights, prevalence, subgroups, the multi-scale test,
T-Cal, the evidence table, Hosmer-Lemeshow, val.prob, a comparison, planning)
on seeded data and writes every number of their ``to_dict()`` (floats as
``repr``).  ``python benchmarks/api_snapshot.py OLD.json NEW.json`` lists the
keys whose values differ, are new or are gone.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np


def _flat(obj, prefix=""):
    out = {}
    if hasattr(obj, "to_dict") and not isinstance(obj, dict):
        obj = obj.to_dict()
    if isinstance(obj, dict):
        for key, val in obj.items():
            out.update(_flat(val, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(obj, (list, tuple)):
        for i, val in enumerate(obj):
            out.update(_flat(val, f"{prefix}[{i}]"))
    elif isinstance(obj, np.ndarray):
        out.update(_flat(obj.tolist(), prefix))
    elif isinstance(obj, (float, np.floating)):
        out[prefix] = "nan" if math.isnan(obj) else repr(float(obj))
    elif isinstance(obj, (bool, np.bool_, int, np.integer, str)) or obj is None:
        out[prefix] = obj if not isinstance(obj, (np.integer, np.bool_)) else obj.item()
    else:
        out[prefix] = f"<{type(obj).__name__}>"
    return out


def _calls():
    import calibtest as ct
    df = ct.load_demo()
    rng = np.random.default_rng(7)
    n = 1500
    q = rng.beta(2, 5, n)
    y = (rng.random(n) < q ** 1.3).astype(int)
    w = rng.gamma(2.0, 1.0, n)
    g = rng.choice(["a", "b", "c"], n)
    import pandas as pd
    frame = pd.DataFrame({"y": y, "p": q, "w": w, "g": g, "p2": np.clip(q * 1.1, 0, 1)})
    sim = ct.simulation.setting3(n=1200, beta=0.05, rng=1)
    out = {
        "ci_default": lambda: ct.calib_ci("y ~ p", data=df),
        "ci_asym": lambda: ct.calib_ci("y ~ p", data=df, null="asymptotic"),
        "ci_mc": lambda: ct.calib_ci("y ~ p", data=frame, null="monte-carlo", rng=3),
        "ci_cond": lambda: ct.calib_ci("y ~ p", data=frame, null="conditional"),
        "ci_weighted": lambda: ct.calib_ci("y ~ p", data=frame, weights="w", rng=6),  # Monte Carlo null by default
        "ci_prevalence": lambda: ct.calib_ci("y ~ p", data=frame, prevalence=0.2, rng=11),
        "ci_boot": lambda: ct.calib_ci("y ~ p", data=frame, method="bootstrap", n_resamples=200, rng=2),
        "ci_top1": lambda: ct.calib_ci(y=sim.correct, probs=sim.confidence, n_classes=10),
        "ci_topk": lambda: ct.calib_ci(y=sim.labels, probs=sim.probs, k=2),
        "ci_full3": lambda: ct.calib_ci(y=sim.labels % 3, probs=np.c_[sim.probs[:, 0], sim.probs[:, 1],
                                                                       1 - sim.probs[:, 0] - sim.probs[:, 1]],
                                        k="full"),
        "ci_by": lambda: ct.calib_ci("y ~ p", data=frame, by="g").to_frame().to_dict(),
        "test": lambda: ct.calib_test("y ~ p", data=frame, rng=5),
        "test_single": lambda: ct.calib_test("y ~ p", data=frame, n_bins=10, rng=5),
        "test_top1": lambda: ct.calib_test(y=sim.correct, probs=sim.confidence, n_classes=10, rng=5),
        "tcal": lambda: ct.tcal_test("y ~ p", data=frame.iloc[:400], rng=1, n_resamples=3000),
        "evidence": lambda: ct.evidence("y ~ p", data=frame, rng=4),
        "hl": lambda: ct.hosmer_lemeshow("y ~ p", data=frame),
        "valprob": lambda: ct.val_prob("y ~ p", data=frame),
        "compare": lambda: ct.calib_compare(ct.calib_ci("y ~ p", data=frame), ct.calib_ci("y ~ p2", data=frame)),
        "power": lambda: ct.calib_power(800, probs=q, slope=0.8),
        "summary_default": lambda: {"text": str(ct.calib_ci("y ~ p", data=df).summary())},
    }
    return out


def snapshot(path):
    result = {}
    for name, call in _calls().items():
        try:
            result.update(_flat(call(), name))
        except Exception as exc:  # recorded, so a change in errors shows too
            result[name] = f"error: {type(exc).__name__}: {exc}"
    with open(path, "w") as fh:
        json.dump(result, fh, indent=0, sort_keys=True)
    print(f"{len(result)} values written to {path}")


def compare(old_path, new_path):
    old, new = (json.load(open(p)) for p in (old_path, new_path))
    changed = [k for k in old if k in new and old[k] != new[k]]
    gone = [k for k in old if k not in new]
    added = [k for k in new if k not in old]
    for label, keys in (("changed", changed), ("gone", gone), ("new", added)):
        print(f"{label}: {len(keys)}")
        for key in keys[:200]:
            print(f"  {key}: {old.get(key)!r} -> {new.get(key)!r}")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        snapshot(sys.argv[1])
    elif len(sys.argv) == 3:
        compare(*sys.argv[1:])
    else:
        sys.exit(__doc__)
