"""The typed calibration target (calibtest.core.targets.Target): a str that prints as before, and the one place
that answers what a target is."""
import json
import pickle

import numpy as np
import pytest

import calibtest as ct
from calibtest.core.targets import Target, prepare_target


def test_a_target_is_its_string_in_every_text():
    """str, format, repr, %-format, JSON, hashing and pickling give the bare string (to_dict and texts unchanged)."""
    for target in Target:
        value = target.value
        assert target == value and hash(target) == hash(value) and {value: 1}[target] == 1
        assert str(target) == value and type(str(target)) is str
        assert f"{target}" == value and f"{target:>8}" == f"{value:>8}" and "%s" % target == value
        assert repr(target) == repr(value) and repr((target, 1)) == repr((value, 1))
        assert json.dumps({"mode": target}) == json.dumps({"mode": value})
        assert pickle.loads(pickle.dumps(target)) is target
        assert Target(value) is target and Target(target) is target
    with pytest.raises(ValueError):
        Target("top-1")


def test_the_properties_are_the_definitions_of_the_targets():
    """Each property against the target's definition written out by hand."""
    one_dim = {"binary", "top1"}
    for target in Target:
        v = target.value
        assert target.one_dimensional == (v in one_dim)
        assert target.full_calibration == (v == "full") and target.cube == (v != "full")
        assert target.has_recalibration_measures == (v == "binary")
        assert (target.binary, target.top1, target.topk) == (v == "binary", v == "top1", v == "topk")
    assert Target.TOPK.text(3) == "top-1-to-k (k = 3)" and Target.BINARY.text(3) == "binary (E[y | p] = p)"


def test_prepared_data_and_results_carry_the_target():
    """The mode of prepared rows and of a result is a Target equal to the string the target names."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), 200)
    y = np.array([rng.choice(4, p=row) for row in probs])
    cases = {"binary": dict(y=(y == 0).astype(int), probs=probs[:, 0]), "top1": dict(y=y, probs=probs, k=1),
             "topk": dict(y=y, probs=probs, k=2), "full": dict(y=y, probs=probs, k="full")}
    for name, kwargs in cases.items():
        prepared = prepare_target(kwargs["y"], kwargs["probs"], k=kwargs.get("k"))
        assert prepared.mode is Target(name)
        res = ct.calib_ci(**kwargs, n_bins=3 if name == "full" else 5)
        assert res.mode is Target(name) and res.to_dict()["mode"] == name
        assert type(json.loads(json.dumps(res.to_dict(), default=str))["mode"]) is str
