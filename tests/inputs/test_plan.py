"""Pre-specified analysis plans: the file, its fingerprint, reading back, and deviations of results."""
import hashlib
import inspect
import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import calibtest as ct
from calibtest.inputs.plan import NULL_DEFAULT, PLAN_FORMAT, AnalysisPlan

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))


def test_file_content_and_hash_recomputed_by_hand(tmp_path):
    path = tmp_path / "plan.json"
    p = ct.plan(path, alpha=0.01, n_bins=15, null="conditional", tests=["calib_ci", "hosmer_lemeshow"],
                subgroups=["site"], sample_size={"n": 2000, "width": 0.02}, created=WHEN)
    raw = json.loads(path.read_text(encoding="utf-8"))
    # creation time stored in UTC
    assert raw["created"] == "2026-01-02T01:04:05+00:00"
    assert raw["format"] == PLAN_FORMAT
    assert raw["alpha"] == 0.01 and raw["n_bins"] == 15 and raw["null"] == "conditional"
    assert raw["tests"] == ["calib_ci", "hosmer_lemeshow"] and raw["subgroups"] == ["site"]
    assert raw["sample_size"] == {"n": 2000, "width": 0.02}
    # the documented hash: canonical JSON (sorted keys, no whitespace) of every field but sha256
    body = {k: v for k, v in raw.items() if k != "sha256"}
    text = "{" + ",".join(f'"{k}":{json.dumps(body[k], separators=(",", ":"), sort_keys=True)}'
                          for k in sorted(body)) + "}"
    assert raw["sha256"] == hashlib.sha256(text.encode()).hexdigest() == p.sha256
    assert p.to_dict() == raw


def test_read_round_trip_and_tampering(tmp_path):
    path = tmp_path / "plan.json"
    p = ct.plan(path, n_bins="adaptive", k=2, created=WHEN)
    q = AnalysisPlan.read(path)
    assert q.to_dict() == p.to_dict() and q.path == str(path)
    raw = json.loads(path.read_text())
    for key, value in [("alpha", 0.1), ("n_bins", 10), ("created", "2026-01-01T00:00:00+00:00")]:
        bad = dict(raw, **{key: value})
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="does not match its content"):
            AnalysisPlan.read(path)
    path.write_text(json.dumps(dict(raw, extra=1)))
    with pytest.raises(ValueError, match="unknown fields \\['extra'\\]"):
        AnalysisPlan.read(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON file"):
        AnalysisPlan.read(path)
    path.write_text(json.dumps({"alpha": 0.05}))
    with pytest.raises(ValueError, match="not a calibtest analysis plan"):
        AnalysisPlan.read(path)


def test_defaults_match_calib_ci():
    sig = inspect.signature(ct.calib_ci).parameters
    assert NULL_DEFAULT == sig["null"].default
    psig = inspect.signature(ct.plan).parameters
    for name in ("alpha", "n_bins", "null", "method"):
        assert psig[name].default == sig[name].default, name


@pytest.mark.parametrize("kwargs, exc, word", [
    ({"alpha": 1.5}, ValueError, "alpha"), ({"alpha": "0.05"}, TypeError, "alpha"),
    ({"n_bins": "many"}, ValueError, "n_bins"), ({"n_bins": 0}, ValueError, "n_bins"),
    ({"n_bins": 2.5}, TypeError, "n_bins"), ({"null": "exact"}, ValueError, "null"),
    ({"method": "jackknife"}, ValueError, "method"), ({"k": 0}, ValueError, "k"),
    ({"k": "top"}, ValueError, "k"), ({"n_classes": 1}, ValueError, "n_classes"),
    ({"tests": "calib_ci"}, TypeError, "tests"), ({"tests": ["t_test"]}, ValueError, "tests"),
    ({"subgroups": [1]}, TypeError, "subgroups"), ({"sample_size": 200}, TypeError, "sample_size"),
    ({"sample_size": {"f": object()}}, TypeError, "sample_size"),
    ({"created": datetime(2026, 1, 1)}, ValueError, "created"),
])
def test_bad_options_name_the_argument(tmp_path, kwargs, exc, word):
    with pytest.raises(exc, match=word):
        ct.plan(tmp_path / "p.json", **kwargs)
    assert not (tmp_path / "p.json").exists()


def test_deviations_each_option(tmp_path):
    df = ct.load_demo()
    p = ct.plan(tmp_path / "p.json", created=WHEN)
    assert p.deviations(ct.calib_ci("y ~ p", data=df)) == ()
    cases = {
        "alpha": (ct.calib_ci("y ~ p", data=df, alpha=0.1), "0.05", "0.1"),
        "n_bins": (ct.calib_ci("y ~ p", data=df, n_bins=10), "auto", "10 (set by the user)"),
        "null": (ct.calib_ci("y ~ p", data=df, null="asymptotic"), "auto", "asymptotic"),
        "method": (ct.calib_ci("y ~ p", data=df, method="subsampling", rng=1, n_resamples=20),
                   "adjusted", "subsampling"),
    }
    for option, (res, planned, used) in cases.items():
        (dev,) = p.deviations(res, name="M")
        assert (dev.model, dev.option, dev.planned, dev.used) == ("M", option, planned, used)
    fixed = ct.plan(tmp_path / "q.json", n_bins=10, created=WHEN)
    assert fixed.deviations(cases["n_bins"][0]) == ()
    (dev,) = fixed.deviations(ct.calib_ci("y ~ p", data=df))
    assert dev.option == "n_bins" and dev.planned == "10" and dev.used.endswith("(automatic)")


def test_deviations_of_the_target(tmp_path):
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(3), size=600)
    y = np.array([rng.choice(3, p=q) for q in probs])
    top2 = ct.calib_ci(y=y, probs=probs, k=2)
    p = ct.plan(tmp_path / "p.json", created=WHEN)
    options = {d.option: (d.planned, d.used) for d in p.deviations(top2)}
    assert options["k"] == ("not set", "2")
    p2 = ct.plan(tmp_path / "p2.json", k=2, n_classes=top2.n_classes, created=WHEN)
    assert p2.deviations(top2) == ()
