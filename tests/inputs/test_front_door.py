"""The table of options bound to the front doors' signatures (calibtest.inputs.front_door)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import calibtest as ct
from calibtest.inputs.front_door import bound_options, table_entries
from calibtest.options import OPTIONS, OptionError, OptionTypeError

FRONT_DOORS = (ct.calib_ci, ct.calib_test, ct.evidence, ct.tcal_test, ct.calib_compare, ct.calib_power,
               ct.calib_sample_size, ct.hosmer_lemeshow, ct.val_prob)


@pytest.mark.parametrize("door", FRONT_DOORS, ids=lambda f: f.__name__)
def test_each_front_door_binds_the_table_to_its_signature(door):
    # Every parameter named in the table is bound to an entry, and its default is a valid value of that entry
    # (a binding to the wrong entry would refuse the function's own default).
    table = door.options_table
    assert table, door.__name__
    params = inspect.signature(door).parameters
    for name, entry in table.items():
        default = params[name].default
        assert OPTIONS[entry].check(default, name) == default or default is None, (door.__name__, name)


def test_an_option_is_refused_before_any_row_is_read(tmp_path):
    missing_file = tmp_path / "absent.csv"  # never opened: the options are checked first
    with pytest.raises(OptionError, match="alpha must be in the open interval"):
        ct.calib_ci("y ~ p", data=missing_file, alpha=1.5)
    with pytest.raises(OptionError, match="combine"):
        ct.calib_test("y ~ p", data=missing_file, combine="mean")
    with pytest.raises(OptionTypeError, match="n_classes"):
        ct.evidence("y ~ p", data=missing_file, n_classes=2.5)


def test_an_unknown_keyword_names_the_function_and_the_keyword():
    with pytest.raises(OptionTypeError, match=r"calib_ci\(\): got an unexpected keyword argument 'horizn'"):
        ct.calib_ci("y ~ p", data=ct.load_demo(), horizn=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'weights'"):
        ct.calib_test("y ~ p", data=ct.load_demo(), weights="w")


def test_the_function_receives_the_canonical_values():
    seen = {}

    @bound_options("f")
    def f(alpha=0.05, k=None, n_bins="auto", eval_env=0):
        seen.update(alpha=alpha, k=k, n_bins=n_bins, eval_env=eval_env)

    f(alpha=np.float32(0.25), k=np.int64(2), n_bins=np.int16(7))
    assert type(seen["alpha"]) is float and seen["alpha"] == 0.25
    assert type(seen["k"]) is int and type(seen["n_bins"]) is int and seen["n_bins"] == 7
    assert "np" in seen["eval_env"].namespace  # this module's namespace: the caller's, resolved at the front door


def test_eval_env_counts_frames_from_the_users_call():
    def outer():
        def same(x):
            return x
        return inner()

    def inner():  # its caller defines same(): one frame above the call
        return ct.calib_ci("y ~ same(p)", data=ct.load_demo(), eval_env=1)

    assert outer().estimate == ct.calib_ci("y ~ p", data=ct.load_demo()).estimate


def test_table_entries_refuse_a_parameter_the_function_lacks():
    def g(alpha=0.05):
        return alpha

    with pytest.raises(ValueError, match="no parameter"):
        table_entries(g, null="test_null")
