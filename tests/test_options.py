"""The table of options (calibtest.options): one source for the checks, the plan file and the CLI parsers.

Also the exception family, the command line's exit status per family, the prepared-input step, and the
command line's light imports, closed pipes and file decode errors.
"""
import json
import os
import subprocess
import importlib
import sys

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.inputs import rows as inputs
from calibtest.cli import build_parser, main
from calibtest.options import (EXIT_DATA, EXIT_USAGE, OPTIONS, PLAN_SCHEMA, DataError, OptionError, OptionTypeError,
                               check_option)
from calibtest.inputs.plan import AnalysisPlan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _values(option):
    """Every allowed value of a plan option: each word, integers at and above the minimum, None if allowed."""
    if option.kind == "choice":
        return list(option.choices)
    if option.kind == "count":
        return list(option.choices) + [option.minimum, option.minimum + 7]
    if option.kind == "level":
        return [0.05, 0.2, 0.001] + ([None] if option.nullable else [])
    if option.kind == "names":
        chosen = list(option.choices[:3]) if option.choices else ["site", "sex"]
        return [chosen[:1], chosen, None]
    raise AssertionError(option.kind)


def _plan_cases():
    # acceptance and primary are optional fields that go together: tests/checks/test_plan_acceptance.py round-trips them;
    # cluster, optional too, is round-tripped by tests/api/test_cluster_plan.py
    return [(name, value) for name, option in PLAN_SCHEMA.items()
            if name not in ("sample_size", "acceptance", "primary", "cluster") for value in _values(option)]


@pytest.mark.parametrize("name, value", _plan_cases())
def test_every_plan_value_round_trips_through_file_cli_and_check(tmp_path, name, value):
    """ct.plan writes the value; the file holds it; `calibtest plan --option TEXT` parses the file's value back
    to the same value and writes the same field; the table's check accepts it."""
    path = tmp_path / "p.json"
    written = ct.plan(path, **{name: value})
    field = json.loads(path.read_text(encoding="utf-8"))[name]
    assert AnalysisPlan.read(path).to_dict()[name] == field == written.to_dict()[name]
    option = PLAN_SCHEMA[name]
    argv = ["plan", "-o", str(tmp_path / "cli.json")]
    if field is not None:
        argv += [option.cli, option.format(field)]
    args = build_parser().parse_args(argv)
    parsed = getattr(args, name)
    assert (list(parsed) if isinstance(parsed, tuple) else parsed) == field
    assert option.check(field) == option.check(parsed)
    assert main(argv) == 0
    assert json.loads((tmp_path / "cli.json").read_text(encoding="utf-8"))[name] == field
    if name in OPTIONS and not (name == "n_bins" and field == "adaptive"):  # a function's check takes it too
        assert check_option(name, field) == option.check(field)
        if field is not None:  # ... and so does every analysis subcommand that has the option
            subs = build_parser()._subparsers._group_actions[0].choices
            taken = 0
            for command, extra in (("ci", []), ("report", ["-o", "r.html"]), ("tcal", []),
                                   ("compare", ["--formula", "y ~ q"])):
                flags = {s for a in subs[command]._actions for s in a.option_strings}
                flag = OPTIONS[name].cli if OPTIONS[name].cli in flags else option.cli
                if flag not in flags:
                    continue
                args = subs[command].parse_args(["f.csv", "--formula", "y ~ p", *extra, flag,
                                                 option.format(field)])
                dest = {"n_bins": "bins"}.get(name, name)
                assert option.check(getattr(args, dest)) == option.check(field), (command, name)
                taken += 1
            assert taken == {"method": 2, "null": 1, "tests": 0, "subgroups": 0}.get(name, 4), (name, taken)


def test_plan_null_auto_is_accepted_by_the_cli(tmp_path):
    """The issue's example: `calibtest plan -o p.json` writes "null": "auto"; `--null auto` was refused."""
    assert main(["plan", "-o", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["null"] == "auto"
    assert main(["plan", "-o", str(tmp_path / "b.json"), "--null", "auto"]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["null"] == "auto"


def test_cli_choices_and_defaults_are_the_tables():
    parser = build_parser()
    subs = {name: p for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0]))
            for name, p in a.choices.items()}
    seen = 0
    for sub in subs.values():
        for action in sub._actions:
            candidates = [o for o in OPTIONS.values() if o.cli in action.option_strings and o.kind != "flag"]
            if not candidates:
                continue
            # --method is the interval's (ci, report, plan) or the study's (sample-size): the one with its choices
            # test's --bins (alias --scales) is the multi-scale test's scales: the one named by its dest
            fits = [o for o in candidates if list(o.choices) == list(action.choices or o.choices)]
            option = next((o for o in fits if o.name == action.dest), fits[0] if fits else None)
            assert option is not None, action.option_strings
            if option.kind == "choice":
                assert list(action.choices) == list(option.choices), action.option_strings
            if action.default is not None and option.name != "n_draws":
                assert action.default == option.default, action.option_strings
            seen += 1
    assert seen >= 25


def test_option_checks_and_exception_family():
    assert issubclass(OptionError, ValueError) and issubclass(DataError, ValueError)
    assert issubclass(OptionTypeError, TypeError)
    with pytest.raises(OptionError, match="n_bins must be >= 1, got 0"):
        check_option("n_bins", 0)
    with pytest.raises(OptionTypeError, match="alpha"):
        check_option("alpha", True)
    with pytest.raises(OptionError, match="hl_groups must be >= 3"):
        check_option("hl_groups", 2)
    assert check_option("k", np.int64(3)) == 3 and type(check_option("k", np.int64(3))) is int
    assert check_option("rng", None) is None and check_option("rng", 4) == 4
    df = pd.DataFrame({"y": [1, 0, 1, 0], "p": [0.7, np.nan, 0.6, 0.2]})
    with pytest.raises(DataError, match="missing values"):
        ct.calib_ci("y ~ p", data=df)
    with pytest.raises(DataError, match="not a column"):
        ct.calib_ci("y ~ p", data=df.fillna(0.5), weights="w")
    with pytest.raises(OptionError, match="rows in memory"):
        ct.calib_ci("y ~ p", data="some.csv", weights="w")  # by= streams a file now


# ----------------------------------------------------------------------------- the command line
@pytest.fixture
def csv(tmp_path):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 300)
    df = pd.DataFrame({"y": (rng.uniform(size=300) < p).astype(int), "p": p, "g": rng.choice(["a", "b"], 300)})
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    return path


def test_one_exit_status_per_family(csv, capsys):
    """An option error exits 2 wherever it is found (argparse or a function); a data error exits 1."""
    assert main(["ci", str(csv), "--formula", "y ~ p", "--prevalence", "0.3", "--chunksize", "100"]) == EXIT_USAGE
    assert "in memory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["ci", str(csv), "--formula", "y ~ p", "--bins", "0"])
    assert exc.value.code == EXIT_USAGE and "argument --bins/--n-bins: must be >= 1, got 0" in capsys.readouterr().err
    assert main(["ci", str(csv), "--formula", "y ~ nope"]) == EXIT_DATA
    assert "exit status: 0 success; 1 an error in the data" in build_parser().format_help()


@pytest.mark.parametrize("groups", ["0", "2", "-1"])
def test_hl_groups_below_three_is_a_usage_error(csv, tmp_path, capsys, groups):
    with pytest.raises(SystemExit) as exc:
        main(["report", str(csv), "--formula", "y ~ p", "-o", str(tmp_path / "r.html"), "--hl-groups", groups])
    assert exc.value.code == 2
    assert "argument --hl-groups: must be >= 3" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("command", ["ci", "tcal", "sample-size"])
def test_formula_is_shown_as_required(command):
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    usage = sub.format_usage()
    assert " --formula FORMULA" in usage and "[--formula FORMULA]" not in usage


def _run(argv, **kwargs):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=ROOT, **kwargs)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_closed_pipe_ends_quietly():
    """`calibtest demo | head -2`: no BrokenPipeError traceback, status 141 (128 + SIGPIPE)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "calibtest.cli", "demo"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err


@pytest.mark.parametrize("content, words", [
    (b"{not json", ["p.json", "not a JSON file"]),
    (b'{"format": "calibtest-analysis-plan/1", "x": "\xff"}', ["p.json", "not UTF-8"]),
])
def test_undecodable_plan_is_one_line_naming_the_file(tmp_path, csv, capsys, content, words):
    plan = tmp_path / "p.json"
    plan.write_bytes(content)
    rc = main(["report", str(csv), "--formula", "y ~ p", "-o", str(tmp_path / "r.html"), "--plan", str(plan)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and err.startswith("calibtest: error: ")
    assert all(w in err for w in words), err


def test_plan_field_of_wrong_type_names_file_and_field(tmp_path):
    from calibtest.inputs.plan import plan_sha256

    path = tmp_path / "p.json"
    fields = ct.plan(path).to_dict()
    fields["k"] = "top"
    fields["sha256"] = plan_sha256(fields)  # a consistent file whose field is wrong
    path.write_text(json.dumps(fields))
    with pytest.raises(DataError, match=r"p\.json: field 'k': k must be"):
        AnalysisPlan.read(path)


@pytest.mark.parametrize("content, words", [
    (b'{"author": 3}', ["m.json", "metadata['author'] must be a string"]),
    (b'{"author": "\xff"}', ["m.json", "not UTF-8"]),
    (b'{"author": ', ["m.json", "invalid JSON"]),
])
def test_undecodable_metadata_names_the_file_and_field(tmp_path, csv, capsys, content, words):
    meta = tmp_path / "m.json"
    meta.write_bytes(content)
    rc = main(["report", str(csv), "--formula", "y ~ p", "-o", str(tmp_path / "r.html"), "--metadata", str(meta)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and all(w in err for w in words), err


def test_cli_and_options_import_nothing_heavy():
    """calibtest.cli and calibtest.options import no numpy/pandas/scipy/matplotlib (the package's own
    __init__ aside: it is stubbed here, so the test measures these two modules)."""
    code = ("import importlib.util, sys, types\n"
            "spec = importlib.util.find_spec('calibtest')\n"
            "pkg = types.ModuleType('calibtest'); pkg.__path__ = list(spec.submodule_search_locations)\n"
            "sys.modules['calibtest'] = pkg\n"
            "import calibtest.cli, calibtest.options\n"
            "calibtest.cli.build_parser().format_help()\n"
            "heavy = sorted(m for m in ('numpy', 'pandas', 'scipy', 'matplotlib', 'patsy') if m in sys.modules)\n"
            "print(heavy)\n")
    proc = _run(["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_every_entry_point_reads_through_prepare_input(monkeypatch):
    """calib_ci, calib_test, tcal_test, evidence, hosmer_lemeshow and val_prob, with and without by=, all call
    inputs.prepare_input first."""
    calls = []
    real = inputs.prepare_input

    def spy(function, *args, **kwargs):
        calls.append(function)
        return real(function, *args, **kwargs)

    for name in ("ece.build_result", "api.tcal_test", "checks.hosmer_lemeshow", "checks.val_prob", "api.calib_test",
                 "ece.grouped_interval"):
        monkeypatch.setattr(importlib.import_module(f"calibtest.{name}"), "prepare_input", spy)
    df = ct.load_demo().sample(400, random_state=0)
    grouped = df.assign(g=np.arange(len(df)) % 2)
    entry_points = [("calib_ci", lambda: ct.calib_ci("y ~ p", data=df)),
                    ("calib_test", lambda: ct.calib_test("y ~ p", data=df, rng=1, n_draws=19)),
                    ("tcal_test", lambda: ct.tcal_test("y ~ p", data=df, rng=1, n_draws=200)),
                    ("hosmer_lemeshow", lambda: ct.hosmer_lemeshow("y ~ p", data=df)),
                    ("val_prob", lambda: ct.val_prob("y ~ p", data=df)),
                    ("calib_ci", lambda: ct.evidence("y ~ p", data=df, rng=1)),
                    ("calib_test", lambda: ct.calib_test("y ~ p", data=grouped, rng=1, n_draws=19, by="g")),
                    ("tcal_test", lambda: ct.tcal_test("y ~ p", data=grouped, rng=1, n_draws=200, by="g")),
                    ("evidence", lambda: ct.evidence("y ~ p", data=grouped, rng=1, by="g")),
                    ("calib_ci", lambda: ct.calib_ci("y ~ p", data=grouped, by="g"))]
    for function, call in entry_points:  # the first thing each does with its data is the prepared-input step
        calls.clear()
        call()
        assert calls[:1] == [function]


def test_prepare_input_aligns_groups_and_weights_with_kept_rows():
    df = pd.DataFrame({"y": [1, 0, 1, 0, 1], "p": [0.8, np.nan, 0.6, 0.3, 0.9], "w": [1.0, 2.0, 3.0, 4.0, 5.0],
                       "g": ["a", "b", "a", "b", "b"]})
    from calibtest.ece.group_engine import group_labels

    from calibtest.inputs.formula import resolve_env
    from calibtest.inputs.settings import Inputs, Settings

    settings = Settings(env=resolve_env(0), missing="drop")
    prepared = inputs.prepare_input("calib_ci", Inputs("y ~ p", df, weights="w", by="g"), settings,
                                    group_labels=group_labels, options={"weights": None})
    assert prepared.rows.n_dropped == 1
    np.testing.assert_array_equal(prepared.weights, [1.0, 3.0, 4.0, 5.0])
    assert prepared.group_names == ["g"] and list(prepared.group_values[0]) == ["a", "a", "b", "b"]
    assert prepared.call.options["weights"] == "w" and prepared.target.n == 4
    with pytest.raises(OptionError, match="does not take by="):
        inputs.prepare_input("tcal_test", Inputs("y ~ p", df, by="g"), settings)


def test_version_matches_the_package_and_imports_nothing_heavy():
    code = ("import importlib.util, sys, types\n"
            "spec = importlib.util.find_spec('calibtest')\n"
            "pkg = types.ModuleType('calibtest'); pkg.__path__ = list(spec.submodule_search_locations)\n"
            "sys.modules['calibtest'] = pkg\n"
            "import calibtest.cli\n"
            "try:\n"
            "    calibtest.cli.main(['--version'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('numpy' in sys.modules)\n")
    proc = _run(["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"calibtest {ct.__version__}", "False"]


def _xy():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.05, 0.95, 200)
    return (rng.uniform(size=200) < p).astype(int), p


@pytest.mark.parametrize("call, exc, text", [
    (lambda y, p: ct.calib_ci(y=y, probs=p, k=0), OptionError, "k must be >= 1, got 0"),
    (lambda y, p: ct.calib_ci(y=y, probs=p, n_classes=1.5), OptionTypeError, "n_classes must be an integer"),
    (lambda y, p: ct.calib_ci(y=y, probs=p, chunksize=0), OptionError, "chunksize must be >= 1"),
    (lambda y, p: ct.calib_test(y=y, probs=p, null="exact"), OptionError, "null must be one of"),
    (lambda y, p: ct.calib_test(y=y, probs=p, combine="fisher"), OptionError, "combine must be one of"),
    (lambda y, p: ct.calib_test(y=y, probs=p, spiegelhalter="yes"), OptionTypeError, "spiegelhalter must be"),
    (lambda y, p: ct.tcal_test(y=y, probs=p, adaptive="yes"), OptionTypeError, "adaptive must be True or False"),
    (lambda y, p: ct.tcal_test(y=y, probs=p, n_draws=0), OptionError, "n_draws must be >= 1"),
    (lambda y, p: ct.evidence(y=y, probs=p, n_classes=1), OptionError, "n_classes must be >= 2"),
    (lambda y, p: ct.hosmer_lemeshow(y=y, probs=p, groups=2), OptionError, "groups must be >= 3"),
    (lambda y, p: ct.hosmer_lemeshow(y=y, probs=p, validation="internal"), OptionError, "validation must be one of"),
    (lambda y, p: ct.val_prob(y=y, probs=p, missing="keep"), OptionError, "missing must be one of"),
    (lambda y, p: ct.calib_compare(ct.calib_ci(y=y, probs=p), ct.calib_ci(y=y, probs=p ** 1.1),
                                      alternative="bigger"), OptionError,
     "alternative must be one of"),
    (lambda y, p: ct.calib_sample_size(probs=p, power=0.8, method="exact"), OptionError, "method must be one of"),
    (lambda y, p: ct.calib_sample_size(probs=p, power=0.8, intercept=1.0, method="simulation",
                                                      n_sim=1), OptionError,
     "n_sim must be >= 2"),
])
def test_every_entry_point_raises_the_tables_option_errors(call, exc, text):
    y, p = _xy()
    with pytest.raises(exc, match=text):
        call(y, p)


def test_report_command_line_parses_back_to_the_same_options():
    """The command line a report records (every option, defaults included) is accepted by the parser and
    gives the same options."""
    import shlex

    from calibtest.cli import report_command

    argv = ["report", "d.csv", "--model", "a=y ~ p", "-o", "r.html", "--bins", "12", "--alpha", "0.1", "--k", "full",
            "--hl-groups", "5", "--method", "bootstrap", "--missing", "drop", "--seed", "7", "--prevalence", "0.3"]
    args = build_parser().parse_args(argv)
    again = build_parser().parse_args(shlex.split(report_command(args))[1:])
    for name in ("bins", "alpha", "k", "hl_groups", "method", "missing", "seed", "prevalence", "model", "output"):
        assert getattr(again, name) == getattr(args, name), name


@pytest.mark.parametrize("field, value, words", [
    ("alpha", True, ["field 'alpha'", "alpha must be a number"]),
    ("alpha", float("nan"), ["field 'alpha' is nan, not a finite number"]),
    ("tests", "calib_ci", ["field 'tests'", "list of distinct strings"]),
    ("created", 5, ["field 'created' must be a string"]),
])
def test_plan_fields_of_the_wrong_type_are_data_errors_naming_file_and_field(tmp_path, field, value, words):
    path = tmp_path / "plan.json"
    fields = ct.plan(path).to_dict()
    fields[field] = value
    text = json.dumps(fields)  # json writes NaN for nan: a plan file can hold it, JSON proper cannot
    if value == value:  # a consistent fingerprint, so that the field itself is what is refused
        from calibtest.inputs.plan import plan_sha256

        fields["sha256"] = plan_sha256(fields)
        text = json.dumps(fields)
    path.write_text(text)
    with pytest.raises(DataError) as info:
        AnalysisPlan.read(path)
    message = str(info.value)
    assert message.startswith(f"plan {path}:") and all(w in message for w in words), message


# ----------------------------------------------------------------------------- no hand-written option checks
#: Every function named check_* / _check_* outside options.py and _validation.py, with why it is not a
#: single-option check (which belongs in the table of options: an entry, then check_option).
CHECK_FUNCTIONS = {
    # interplay of several arguments (the value itself is checked by the table first)
    "checks/multiscale.py:check_partitions": "partitions against the target's mode (equal-mass needs 1-dim)",
    "checks/multiscale.py:check_spiegelhalter": "spiegelhalter against the target's mode (None resolved by it)",
    "checks/multiscale.py:check_test_null": "null='gaussian' against the target's mode (1-dim label sums)",
    "checks/multiscale.py:check_grid": "the list form of n_bins (each entry BIN_COUNT, a single value 'scales'): "
                                      "not empty, sorted without repeats",
    "core/targets.py:check_k": "k < K, the number of probability columns",
    "core/tcal.py:check_draws": "n_draws against alpha and the number of scales ((R + 1) level >= 1)",
    "simulation/settings.py:_check_beta": "beta's range depends on the setting (Setting 3: [0, 1/K])",
    "simulation/study.py:_check_grid": "default betas and bin counts that depend on the settings and on n",
    "ece/build_result.py:check_weighted_options": "null and method against weights= / prevalence=",
    "ece/build_result.py:check_clustered_options": "method, weights= and prevalence= against cluster=",
    "checks/acceptance.py:_check_limits": "a pair whose two entries must be ordered (lower < upper)",
    "inputs/plan.py:_check_sample_size": "a result converted to a JSON dict (the dict by PLAN_SCHEMA)",
    "core/conditional.py:_check_rng": "the Monte Carlo test's seed rule (full entropy recorded); the argument "
                                      "by check_seed",
    "api/calib_compare.py:_check_compatible": "two results, not an option",
    # data rather than options
    "core/targets.py:_check_probabilities": "data: probabilities in [0, 1]",
    "streams/accumulator.py:_check_target": "data: chunks of one calibration target",
    "streams/files.py:_check_fields_with_csv_module": "data: field counts of a CSV file",
    "streams/files.py:check_csv_fields": "data: field counts of a CSV file",
    "ece/group_engine.py:check_group_labels": "data: a missing group label (in memory and chunk by chunk)",
    "inputs/formula.py:check_formula_names": "data: a formula's names against the columns",
    "api/sample_size.py:_check_n_array": "an array of sample sizes (the scalar by check_count)",
    "reporting/document.py:check_metadata": "data: a report's metadata fields",
    "reporting/document.py:check_text": "data: text a UTF-8 file can hold",
    "reporting/document.py:check_report_text": "data: text a UTF-8 file can hold",
    "reporting/document.py:_check_revisions": "data: a report's revision history",
    "monitor/batches.py:check_time_order": "data: a batch's time stamps against the monitor's last look",
    "monitor/monitor.py:_check_record": "data: a monitor's state file (version, model, settings)",
    "monitor/monitor.py:_check_scales": "a list of distinct bin counts (each entry by check_count)",
    "monitor/monitor.py:_check_positive": "a number in an open range that depends on the option (alpha's upper 1, arl's none)",
    "sklearn.py:_check_plot_kwargs": "keyword arguments for matplotlib, refused by name before plotting",
    "reporting/document.py:check_report_path": "data: a report's path, each folder as the OS resolves it",
    "reporting/document.py:check_deviation_reasons": "data: reasons keyed by the plan's options",
    "reporting/html.py:check_horizon_unit": "free text: the unit of a survival result's follow-up times in a report",
    # single-option checks not yet folded into the table: in files other developers were editing (issue 23)
}


def _check_functions(package=None):
    """``"path:name"`` of every check_* / _check_* function of the package (outside the two option modules)."""
    import ast
    from pathlib import Path

    package = Path(package or Path(ct.__file__).parent)
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() in ("options.py", "inputs/validation.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(("check_",
                                                                                                    "_check_")):
                found.append(f"{path.relative_to(package).as_posix()}:{node.name}")
    return found


def test_every_local_check_function_is_on_the_allow_list_with_a_reason():
    """A new hand-written single-option check fails here: add a table entry and call check_option instead."""
    found = _check_functions()
    unlisted = sorted(set(found) - set(CHECK_FUNCTIONS))
    assert not unlisted, f"check functions not on the allow-list (use the table of options): {unlisted}"
    stale = sorted(set(CHECK_FUNCTIONS) - set(found))
    assert not stale, f"allow-list entries whose function is gone (remove them): {stale}"
    assert all(reason.strip() and "\n" not in reason for reason in CHECK_FUNCTIONS.values())
    assert len(found) == len(set(found)) == len(CHECK_FUNCTIONS)


def test_the_allow_list_scan_sees_a_new_check_function(tmp_path):
    """The scan is not vacuous: a new module's _check_colour (also as a method) is found, the option modules not."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "paint.py").write_text("class A:\n    def _check_colour(self, c):\n        return c\n\n"
                                               "def check_size(n):\n    return n\n\ndef checked(n):\n"
                                               "    return n\n")
    (tmp_path / "options.py").write_text("def check_option(name, value):\n    return value\n")
    found = _check_functions(tmp_path)
    assert sorted(found) == ["sub/paint.py:_check_colour", "sub/paint.py:check_size"]
    assert not set(found) & set(CHECK_FUNCTIONS)
    assert "core/tcal.py:check_statistic" not in _check_functions()  # folded into the table


# ----------------------------------------------------------------------------- the options folded in (issue 23)
def test_new_table_entries_check_type_and_range():
    from calibtest.core.tcal import STATISTICS
    from calibtest.options import BIN_COUNT
    from calibtest.reporting.plotting import MAX_DISPLAY_BINS
    from calibtest.simulation.settings import N_CLASSES

    assert STATISTICS == OPTIONS["statistic"].choices == ("tcal", "debiased")
    assert tuple(range(OPTIONS["setting"].minimum, OPTIONS["setting"].maximum + 1)) == tuple(sorted(N_CLASSES))
    assert MAX_DISPLAY_BINS == OPTIONS["display_bins"].maximum == 15
    for name, low, high in (("knots", 3, 7), ("display_bins", 2, 15), ("setting", 1, 3)):
        assert check_option(name, low) == low and check_option(name, np.int64(high)) == high
        for bad in (low - 1, high + 1):
            with pytest.raises(OptionError, match=f"{name} must be between {low} and {high}, got {bad}"):
                check_option(name, bad)
        with pytest.raises(OptionTypeError, match=f"{name} must be an integer"):
            check_option(name, float(low))
        assert f"an integer from {low} to {high}" in OPTIONS[name].help()
    assert check_option("display_bins", None) is None
    assert BIN_COUNT.check(np.int32(4)) == 4 and BIN_COUNT.choices == ()
    with pytest.raises(OptionTypeError):
        BIN_COUNT.check("auto")
    assert check_option("scales", "adaptive") == "adaptive" and check_option("scales", 6) == 6
    assert check_option("beta", np.float32(0.25)) == 0.25 and check_option("beta", -3) == -3.0
    for bad, kind in ((float("nan"), OptionError), (float("inf"), OptionError), (True, OptionTypeError),
                      ("0.5", OptionTypeError), (None, OptionTypeError)):
        with pytest.raises(kind, match="beta"):
            check_option("beta", bad)
    assert OPTIONS["beta"].parse("-0.5") == -0.5


def test_entry_points_raise_the_tables_errors():
    from calibtest.core.targets import check_k
    from calibtest.checks.flexible_calibration import flexible_calibration
    from calibtest.reporting.plotting import display_bins_caption
    from calibtest.simulation import setting1, true_ece_sq
    from calibtest.simulation.study import simulate_intervals

    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 200)
    y = (rng.uniform(size=200) < p).astype(float)
    with pytest.raises(OptionError, match="statistic must be one of"):
        ct.tcal_test(y=y, probs=p, statistic="plugin")
    with pytest.raises(OptionTypeError, match="n_bins must be an integer"):
        ct.tcal_test(y=y, probs=p, n_bins=[4, 2.5])
    with pytest.raises(OptionError, match="n_bins must list at least one"):
        ct.tcal_test(y=y, probs=p, n_bins=[])
    with pytest.raises(OptionError, match=r"n_bins must be an integer or 'adaptive', got 'auto'"):
        ct.calib_test(y=y, probs=p, n_bins="auto")
    with pytest.raises(OptionError, match="n_bins must be >= 1, got 0"):
        ct.calib_test(y=y, probs=p, n_bins=[4, 0])
    with pytest.raises(OptionError, match="partitions must be one of"):
        ct.calib_test(y=y, probs=p, partitions="quantile")
    with pytest.raises(OptionTypeError, match="spiegelhalter must be"):
        ct.calib_test(y=y, probs=p, spiegelhalter="yes")
    with pytest.raises(OptionError, match="knots must be between 3 and 7, got 8"):
        flexible_calibration(p, y, knots=8)
    with pytest.raises(OptionTypeError, match="knots must be an integer"):
        flexible_calibration(p, y, knots=4.0)
    with pytest.raises(OptionError, match="n_bins must be between 2 and 15, got 16"):
        display_bins_caption([ct.calib_ci(y=y, probs=p)], n_bins=16)
    with pytest.raises(OptionTypeError, match="k must be an integer, got 'full'"):
        check_k("full", 4)
    with pytest.raises(OptionError, match="k must be < K = 4"):
        check_k(4, 4)
    # the simulation settings keep raising ValueError for every bad argument, now in the table's words
    with pytest.raises(OptionError, match="n must be an integer, got '10'"):
        setting1("10", 0.5, rng=0)
    with pytest.raises(OptionError, match="setting must be between 1 and 3, got 4"):
        true_ece_sq(4, 0.5, "top1")
    with pytest.raises(OptionError, match="beta must be a real number"):
        true_ece_sq(1, "0.5", "binary")
    with pytest.raises(OptionTypeError, match="settings must be an integer, got 1.5"):
        simulate_intervals(settings=(1.5,), n_datasets=1)  # was silently setting 1
