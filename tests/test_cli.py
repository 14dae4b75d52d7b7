"""The calibtest command line."""
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.cli import main

JSON_KEYS = {"estimate", "ece", "ci_lower", "ci_upper", "ci_lower_open", "ece_ci_lower", "ece_ci_upper",
             "contains_zero", "sigma1_sq", "sigma0_sq", "se", "threshold", "null_zstat", "null_pvalue",
             "n", "n_bins", "k", "n_classes", "mode", "alpha"}


@pytest.fixture
def csv(tmp_path):
    rng = np.random.default_rng(9)
    P = rng.dirichlet(np.ones(4), size=500)
    labels = np.array([rng.choice(4, p=row) for row in P])
    df = pd.DataFrame(P, columns=["p0", "p1", "p2", "p3"]).assign(label=labels)
    path = tmp_path / "preds.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path, df


def test_json_output_matches_api(csv, capsys):
    path, df = csv
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2 + p3", "--k", "2", "--bins", "8",
                 "--alpha", "0.1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert JSON_KEYS <= set(out)
    res = ct.calib_ci("label ~ p0 + p1 + p2 + p3", data=df, k=2, n_bins=8, alpha=0.1)
    for key in JSON_KEYS:
        assert out[key] == res.to_dict()[key], key


def test_summary_output(csv, capsys):
    path, _ = csv
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2 + p3"]) == 0
    assert "Calibration error" in capsys.readouterr().out


def test_errors_are_reported_not_raised(csv, capsys):
    path, _ = csv
    assert main(["ci", str(path), "--formula", "label ~ nope"]) == 1  # a data error
    assert "column 'nope'" in capsys.readouterr().err
    assert main(["ci", str(path) + ".missing", "--formula", "y ~ p"]) == 1
    assert "calibtest: error: file not found" in capsys.readouterr().err


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_console_script_demo():
    out = subprocess.run([sys.executable, "-m", "calibtest.cli", "demo"], capture_output=True, text=True,
                         check=True).stdout
    res = ct.calib_ci("y ~ p", data=ct.load_demo())
    assert "No. observations:" in out and str(res.n) in out


@pytest.mark.parametrize("null", ["conditional", "monte-carlo"])
def test_null_option(csv, capsys, null):
    path, df = csv
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2 + p3", "--k", "2", "--bins", "6",
                 "--null", null, "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = ct.calib_ci("label ~ p0 + p1 + p2 + p3", data=df, k=2, n_bins=6, null=null, rng=3)
    assert out["null"] == null and out["null_pvalue"] == res.null_pvalue


# ----------------------------------------------------------------------------- one parser, shared options
SHARED = ["--formula", "--n-classes", "--k", "--bins", "--alpha", "--missing", "--json"]


def _subcommands():
    import argparse

    from calibtest.cli import build_parser
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _run(*argv):
    """Run the console command in a fresh interpreter: (exit status, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "calibtest.cli", *map(str, argv)], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def two_models(tmp_path):
    """Binary outcomes with two models' predictions, and four-class outcomes with two probability matrices."""
    rng = np.random.default_rng(21)
    n = 600
    pa = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < pa).astype(int)
    pb = np.clip(pa * 1.2, 0.01, 0.99)
    A = rng.dirichlet(np.ones(4), size=n)
    label = np.array([rng.choice(4, p=row) for row in A])
    B = 0.7 * A + 0.3 * rng.dirichlet(np.ones(4), size=n)
    df = pd.DataFrame(np.c_[A, B], columns=[f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)])
    df = df.assign(y=y, pa=pa, pb=pb, label=label)
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path, df


def test_version(capsys):
    from importlib.metadata import PackageNotFoundError, version
    try:
        expected = version("calibtest")
    except PackageNotFoundError:
        expected = "0+unknown"
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"calibtest {expected}\n"
    rc, out, _ = _run("--version")
    assert rc == 0 and out == f"calibtest {expected}\n"


def test_compare_formula_twice_matches_python(two_models, capsys):
    path, df = two_models
    assert main(["compare", str(path), "--formula", "y ~ pa", "--formula", "y ~ pb", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_compare("y ~ pa", "y ~ pb", data=path)  # the file is streamed, as the command line streams it
    memory = ct.calib_compare("y ~ pa", "y ~ pb", data=df)
    assert out["name_a"] == "pa" and out["name_b"] == "pb"  # order: first --formula is model A
    for key in ("estimate", "estimate_a", "estimate_b", "se", "statistic", "pvalue", "ci_lower", "ci_upper"):
        assert out[key] == getattr(ref, key), key
        assert out[key] == pytest.approx(getattr(memory, key), rel=1e-12, abs=1e-15), key  # the rows in memory
    assert out == json.loads(json.dumps(ref.to_dict()))
    # the older spelling gives the same result
    assert main(["compare", str(path), "--formula-a", "y ~ pa", "--formula-b", "y ~ pb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == out


def test_compare_shared_options_reach_calib_compare(two_models, capsys):
    path, df = two_models
    fa, fb = "label ~ a0 + a1 + a2 + a3", "label ~ b0 + b1 + b2 + b3"
    assert main(["compare", str(path), "--formula", fa, "--formula", fb, "--k", "2", "--bins", "5",
                 "--alpha", "0.1", "--alternative", "greater", "--variance", "plugin", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_compare(fa, fb, data=path, k=2, n_bins=5, alpha=0.1, alternative="greater", variance="plugin")
    memory = ct.calib_compare(fa, fb, data=df, k=2, n_bins=5, alpha=0.1, alternative="greater", variance="plugin")
    assert out["mode"] == "topk" and out["k"] == 2 and out["n_bins_a"] == ref.n_bins_a == memory.n_bins_a
    assert (out["estimate"], out["se"], out["pvalue"]) == (ref.estimate, ref.se, ref.pvalue)
    assert (out["se"], out["pvalue"]) == pytest.approx((memory.se, memory.pvalue), rel=1e-12)


def test_compare_streams_the_file_in_chunks(two_models, capsys, monkeypatch):
    """calibtest compare never reads the whole file: chunks of --chunksize rows, the same numbers."""
    import calibtest.streams.files as files
    path, df = two_models
    monkeypatch.setattr(files, "read_data_file", lambda *a, **k: pytest.fail("the whole file was read"))
    seen = []
    original = files._CsvReader.chunks

    def chunks(self, columns, chunksize):
        seen.append(chunksize)
        return original(self, columns, chunksize)

    monkeypatch.setattr(files._CsvReader, "chunks", chunks)
    assert main(["compare", str(path), "--formula", "y ~ pa", "--formula", "y ~ pb", "--chunksize", "7",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seen == [7, 7, 7]  # the count for n_bins="auto" (CSV), each model's sums, the variance's sums
    memory = ct.calib_compare("y ~ pa", "y ~ pb", data=df)
    for key in ("estimate_a", "estimate_b", "se", "se_first_order_plugin", "se_second_order", "pvalue"):
        assert out[key] == pytest.approx(getattr(memory, key), rel=1e-12), key


def test_report_chunksize_compares_the_models_on_the_file(two_col, tmp_path):
    """report --chunksize --compare: the comparison section of the streamed report is the in-memory one."""
    path, _ = two_col
    sections = []
    for extra in ([], ["--chunksize", "50"]):
        out = tmp_path / f"r{len(extra)}.html"
        assert main(["report", str(path), "--model", "current=y ~ p", "--model", "inflated=y ~ q",
                     "--compare", "current,inflated", *extra, "-o", str(out)]) == 0
        html = out.read_text(encoding="utf-8")
        section = re.search(r'<section id="comparisons">.*?</section>', html, re.S).group(0)
        text = lambda part: re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", part))  # noqa: E731
        sentence = re.search(r"At level 0\.05, [^.]*\.\d+[^)]*\)[^.]*\.", text(section)).group(0)
        # the tables and the conclusion (the in-memory report adds the overlaid curves, drawn from the rows)
        sections.append([text(t) for t in re.findall(r"<table.*?</table>", section, re.S)] + [sentence])
    assert "Comparison of current with inflated" in sections[0][0] and "Δ = ECE²(current)" in sections[0][-1]
    assert sections[1] == sections[0]


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_compare_full_calibration_is_a_one_line_error(two_models):
    path, df = two_models
    fa, fb = "label ~ a0 + a1 + a2 + a3", "label ~ b0 + b1 + b2 + b3"
    with pytest.raises(ValueError) as exc:
        ct.calib_compare(fa, fb, data=df, k="full")
    rc, out, err = _run("compare", path, "--formula", fa, "--formula", fb, "--k", "full")
    assert rc == 1 and out == ""
    assert err == f"calibtest: error: {exc.value}\n"


@pytest.mark.parametrize("formulas", [["--formula", "y ~ pa"],
                                      ["--formula", "y ~ pa", "--formula", "y ~ pb", "--formula", "y ~ pa"],
                                      ["--formula", "y ~ pa", "--formula-b", "y ~ pb"],
                                      ["--formula-a", "y ~ pa"],
                                      []])
def test_compare_needs_exactly_two_formulas(two_models, capsys, formulas):
    path, _ = two_models
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(path), *formulas])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("calibtest compare: error: ") and "formula" in err
    assert err.rstrip().endswith("(see calibtest compare --help)")


@pytest.mark.parametrize("command", ["ci", "tcal"])
def test_single_model_commands_take_one_formula(csv, capsys, command):
    path, _ = csv
    extra = []
    for formulas in ([], ["--formula", "label ~ p0", "--formula", "label ~ p1"]):
        with pytest.raises(SystemExit) as exc:
            main([command, str(path), *extra, *formulas])
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith(f"calibtest {command}: error: ")


def test_shared_options_have_one_help_text_everywhere():
    subs = _subcommands()
    takes = {name: {s for a in p._actions for s in a.option_strings if s in SHARED} for name, p in subs.items()}
    # every subcommand that fits a model takes the model options; the printing ones take --json
    assert takes == {"ci": set(SHARED), "report": set(SHARED) - {"--json"}, "tcal": set(SHARED),
                     "compare": set(SHARED), "sample-size": set(SHARED), "demo": set(),
                     "plan": {"--alpha", "--k", "--n-classes", "--bins"},
                     "test": set(SHARED) - {"--k"}, "monitor": set(SHARED) - {"--k", "--bins"}}
    # --bins of plan (alias of --n-bins) and test (the scales) take 'adaptive': their own help (a monitor's B of
    # the ECE bound is --ece-bins, an option of its own)
    for option in SHARED:
        helps = {name: a.help for name, p in subs.items() for a in p._actions if option in a.option_strings
                 and not (name in ("plan", "test") and option == "--bins")}
        assert len(set(helps.values())) == 1, (option, helps)
        assert all(h and h.strip() for h in helps.values()), option


@pytest.mark.parametrize("command", ["ci", "report", "tcal", "compare"])
def test_k_accepts_an_integer_or_full_everywhere(command, capsys):
    parser = _subcommands()[command]
    formulas = ["--formula", "y ~ p"] * (2 if command == "compare" else 1)
    extra = ["-o", "r.html"] if command == "report" else []
    assert parser.parse_args(["f.csv", *formulas, *extra, "--k", "full"]).k == "full"
    assert parser.parse_args(["f.csv", *formulas, *extra, "--k", "3"]).k == 3
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["f.csv", *formulas, *extra, "--k", "two"])
    assert exc.value.code == 2 and "integer >= 1 or 'full'" in capsys.readouterr().err


def _stderr_of(argv, capsys):
    """(exit status, stdout, stderr) of main(argv) as the interpreter would show them; any other
    exception (a traceback) propagates and fails the test."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:  # the interpreter prints a string code on stderr and exits with status 1
        out, err = capsys.readouterr()
        return (1, out, err + f"{exc.code}\n") if isinstance(exc.code, str) else (exc.code, out, err)
    out, err = capsys.readouterr()
    return rc, out, err


def test_errors_are_one_line_without_traceback(csv, tmp_path, capsys):
    path, _ = csv
    for argv, expected in [
        (["ci", tmp_path / "missing.csv", "--formula", "y ~ p"], "file not found"),
        (["tcal", tmp_path / "missing.csv", "--formula", "y ~ p"], "file not found"),
        (["compare", tmp_path / "missing.csv", "--formula", "y ~ p", "--formula", "y ~ q"], "file not found"),
        (["report", tmp_path / "missing.csv", "--formula", "y ~ p", "-o", tmp_path / "r.html"], "file not found"),
        (["ci", tmp_path / "missing.parquet", "--formula", "y ~ p"], "file not found"),
        (["ci", tmp_path, "--formula", "y ~ p"], "is a directory"),
        (["ci", path, "--formula", "label ~ nope"], "column 'nope'"),
        (["tcal", path, "--formula", "label ~ nope"], "column 'nope'"),
        (["report", path, "--formula", "label ~ p0 + p1 + p2 + p3", "-o", tmp_path / "r.txt"], ".html, .htm or .pdf"),
    ]:
        rc, out, err = _stderr_of(argv, capsys)
        assert rc != 0 and out == "", argv
        assert err.count("\n") == 1 and err.startswith("calibtest: error: ") and expected in err, (argv, err)


# ----------------------------------------------------------------------------- report with several models, plan
@pytest.fixture
def two_col(tmp_path):
    df = ct.load_demo().iloc[:1200]
    df = df.assign(q=np.clip(df["p"] * 1.25, 0.001, 0.999))
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path, df


def _text(path):
    import re
    from html.parser import HTMLParser

    class T(HTMLParser):
        chunks = []

        def handle_data(self, data):
            self.chunks.append(data)
    t = T()
    t.chunks = []
    t.feed(path.read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", " ".join(t.chunks))


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_report_several_models_with_labels_comparison_metadata_and_plan(two_col, tmp_path, capsys):
    path, df = two_col
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"document_id": "DOC-7", "author": "A. Author", "model_name": "Risk score"}))
    assert main(["plan", "-o", str(tmp_path / "plan.json"), "--alpha", "0.05", "--n-bins", "10"]) == 0
    assert "SHA-256" in capsys.readouterr().out
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--model", "current=y ~ p", "--model", "inflated=y ~ q",
                 "--compare", "current,inflated", "--metadata", str(meta), "--plan", str(tmp_path / "plan.json"),
                 "--title", "Two scores", "--hl-groups", "8", "-o", str(out)]) == 0
    text = _text(out)
    cmp = ct.calib_compare(ct.calib_ci("y ~ p", data=df), ct.calib_ci("y ~ q", data=df),
                           names=("current", "inflated"))
    from calibtest.display.format import fmt
    assert "Comparison of current with inflated" in text and fmt(cmp.estimate) in text
    assert "Model: current (y ~ p)" in text and "Model: inflated (y ~ q)" in text
    assert "DOC-7" in text and "A. Author" in text and "Risk score" in text and "Two scores" in text
    assert "groups g (of equal size, by sorted prediction) 8" in text
    # the plan fixed B = 10, the CLI used the automatic B: one deviation per model
    assert "deviated from the pre-specified plan" in text
    assert text.count("76 (automatic)") == 0 and text.count("(automatic)") == 2
    assert "--model 'current=y ~ p' --model 'inflated=y ~ q'" in text and "--plan" in text


def test_report_formula_with_label(two_col, tmp_path):
    path, _ = two_col
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--formula", "y ~ p", "--label", "Score A", "-o", str(out)]) == 0
    text = _text(out)
    assert "Model: Score A (y ~ p)" in text
    assert "The analysis options were not pre-specified" in text


@pytest.mark.parametrize("args, message", [
    (["--model", "nolabel"], "--model must be LABEL=FORMULA"),
    (["--model", "a=y ~ p", "--model", "a=y ~ q"], "labels must be distinct"),
    (["--model", "a=y ~ p", "--formula", "y ~ q"], "not both"),
    (["--formula", "y ~ p", "--label", "a", "--label", "b"], "one label per formula"),
    ([], "--model LABEL=FORMULA"),
    (["--model", "a=y ~ p", "--compare", "a,b"], "unknown model label 'b'"),
    (["--model", "a=y ~ p", "--model", "b=y ~ q", "--compare", "a"], "two different model labels"),
    (["--model", "a=y ~ p", "--model", "b=y ~ q", "--compare", "all"], "three or more"),
    (["--formula", "y ~ p", "--metadata", "META_BAD"], "unknown keys ['colour']"),
    (["--formula", "y ~ p", "--metadata", "META_TYPE"], "metadata['author'] must be a string"),
    (["--formula", "y ~ p", "--metadata", "meta.yaml"], ".json or .toml"),
    (["--formula", "y ~ p", "--plan", "PLAN_TAMPERED"], "does not match its content"),
    (["--formula", "y ~ p", "--plan", "nowhere.json"], "file not found"),
])
def test_report_errors_are_one_line(two_col, tmp_path, capsys, args, message):
    path, _ = two_col
    (tmp_path / "bad.json").write_text(json.dumps({"colour": "red", "author": "x"}))
    (tmp_path / "type.json").write_text(json.dumps({"author": 3}))
    ct.plan(tmp_path / "plan.json")
    raw = json.loads((tmp_path / "plan.json").read_text())
    (tmp_path / "tampered.json").write_text(json.dumps(dict(raw, alpha=0.1)))
    subst = {"META_BAD": str(tmp_path / "bad.json"), "META_TYPE": str(tmp_path / "type.json"),
             "PLAN_TAMPERED": str(tmp_path / "tampered.json")}
    args = [subst.get(a, a) for a in args]
    status = main(["report", str(path), *args, "-o", str(tmp_path / "r.html")])
    assert status in (1, 2)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("calibtest: error: ")
    assert message in err, err
    assert "Traceback" not in err and not (tmp_path / "r.html").exists()


def test_plan_command_writes_the_plan_python_writes(tmp_path, capsys):
    assert main(["plan", "-o", str(tmp_path / "p.json"), "--alpha", "0.01", "--n-bins", "adaptive", "--null",
                 "conditional", "--k", "2", "--tests", "calib_ci, hosmer_lemeshow", "--subgroups", "site"]) == 0
    p = ct.AnalysisPlan.read(tmp_path / "p.json")
    assert (p.alpha, p.n_bins, p.null, p.k, p.tests, p.subgroups) == (
        0.01, "adaptive", "conditional", 2, ("calib_ci", "hosmer_lemeshow"), ("site",))
    assert p.sha256 in capsys.readouterr().out
    (tmp_path / "ss.json").write_text(json.dumps({"n_required": 1800}))
    assert main(["plan", "-o", str(tmp_path / "q.json"), "--sample-size", str(tmp_path / "ss.json")]) == 0
    assert ct.AnalysisPlan.read(tmp_path / "q.json").sample_size == {"n_required": 1800}
    for bad, message in ((["--tests", "anova"], "unknown entries ['anova']"), (["--n-bins", "many"], "--n-bins"),
                         (["-o", str(tmp_path / "p.txt")], ".json")):
        argv = ["plan", "-o", str(tmp_path / "z.json"), *bad] if bad[0] != "-o" else ["plan", *bad]
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse usage errors
            status = exc.code
        assert status == 2
        assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------- reading files (issue 27 point 5)
def _spy_chunks(monkeypatch):
    """Record the chunk size of every streamed CSV pass."""
    from calibtest.streams import files

    seen = []
    original = files._CsvReader.chunks

    def chunks(self, columns, chunksize):
        seen.append(chunksize)
        return original(self, columns, chunksize)
    monkeypatch.setattr(files._CsvReader, "chunks", chunks)
    return seen


def test_ci_streams_csv_by_default(csv, capsys, monkeypatch):
    from calibtest.options import DEFAULT_CHUNKSIZE
    path, df = csv
    seen = _spy_chunks(monkeypatch)
    formula = "label ~ p0 + p1 + p2 + p3"
    assert main(["ci", str(path), "--formula", formula, "--k", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seen and set(seen) == {DEFAULT_CHUNKSIZE}  # streamed (n_bins="auto": a counting pass, then the sums)
    streamed = ct.calib_ci(formula, data=str(path), k=2).to_dict()
    in_memory = ct.calib_ci(formula, data=df, k=2).to_dict()
    for key in ("estimate", "ci_lower", "ci_upper", "se", "null_pvalue"):
        assert out[key] == streamed[key], key
        assert out[key] == pytest.approx(in_memory[key], rel=1e-10, abs=1e-14), key
    assert (out["n"], out["n_bins"]) == (in_memory["n"], in_memory["n_bins"])


@pytest.mark.parametrize("extra", [["--weights", "w"], ["--prevalence", "0.3"],
                                   ["--method", "bootstrap", "--n-resamples", "20", "--seed", "1"],
                                   ["--null", "monte-carlo", "--seed", "1"]])
def test_ci_reads_the_whole_file_when_an_option_needs_the_rows(tmp_path, capsys, monkeypatch, extra):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 400)
    df = pd.DataFrame({"y": (rng.random(400) < p).astype(int), "p": p, "g": rng.choice(["a", "b"], 400),
                       "w": rng.uniform(0.5, 2, 400)})
    path = tmp_path / "rows.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    seen = _spy_chunks(monkeypatch)
    assert main(["ci", str(path), "--formula", "y ~ p", "--bins", "5", *extra]) == 0, capsys.readouterr().err
    assert seen == []  # read whole, not streamed
    help_text = _subcommands()["ci"].format_help()
    assert extra[0] in " ".join(help_text.split())  # the help names the options that read the whole file


def _parquet_twin(path, df):
    pq = path.with_suffix(".parquet")
    df.to_parquet(pq, index=False)
    return pq


@pytest.mark.parametrize("argv", [
    ["ci", "--formula", "y ~ pa", "--bins", "6", "--json"],
    ["ci", "--formula", "y ~ pa", "--bins", "6", "--by", "grp", "--json"],
    ["tcal", "--formula", "y ~ pa", "--bins", "6", "--draws", "200", "--seed", "4", "--json"],
    ["compare", "--formula", "y ~ pa", "--formula", "y ~ pb", "--bins", "6", "--json"],
    ["sample-size", "--formula", "~ pa", "--power", "0.8", "--slope", "0.7", "--json"],
])
def test_every_subcommand_reads_parquet_as_csv(two_models, tmp_path, capsys, argv):
    path, df = two_models
    df = df.assign(grp=np.where(df["pa"] > 0.5, "high", "low"))
    df.to_csv(path, index=False, float_format="%.17g")
    outs = []
    for file in (path, _parquet_twin(path, df)):
        assert main([argv[0], str(file), *argv[1:]]) == 0, capsys.readouterr().err
        out = json.loads(capsys.readouterr().out)
        out.pop("source", None)
        outs.append(json.dumps(out, sort_keys=True, default=str).replace(".parquet", ".csv"))
    assert outs[0] == outs[1]


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_report_reads_parquet(two_col, tmp_path, capsys):
    path, df = two_col
    df = df.assign(grp=np.where(df["p"] > df["p"].median(), "high", "low"))
    df.to_csv(path, index=False, float_format="%.17g")
    pq = _parquet_twin(path, df)
    texts = []
    for file, name in ((path, "c.html"), (pq, "p.html")):
        assert main(["report", str(file), "--formula", "y ~ p", "--by", "grp", "-o", str(tmp_path / name),
                     "--seed", "1"]) == 0, capsys.readouterr().err
        texts.append(_text(tmp_path / name))
    for text in texts:  # the same subgroup numbers from both files
        assert "high" in text and "low" in text
    numbers = [re.findall(r"\d+\.\d{3,}", t) for t in texts]
    assert numbers[0] and numbers[0] == numbers[1]


@pytest.mark.parametrize("command", ["ci", "tcal", "compare", "report", "sample-size"])
def test_unknown_extension_is_a_one_line_error(two_models, tmp_path, capsys, command):
    path, df = two_models
    odd = tmp_path / "preds.txt"
    odd.write_bytes(path.read_bytes())
    formulas = {"compare": ["--formula", "y ~ pa", "--formula", "y ~ pb"], "sample-size": ["--formula", "~ pa",
                                                                                          "--power", "0.8"]}
    argv = [command, str(odd), *formulas.get(command, ["--formula", "y ~ pa"])]
    argv += ["-o", str(tmp_path / "r.html")] if command == "report" else []
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{odd}: cannot tell the file format from its name" in err, err
    assert ".parquet" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- long formulas (issue 27 point 5)
def test_formula_over_a_1000_column_matrix(tmp_path, capsys):
    K = 1000
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(K), size=40)
    labels = rng.integers(0, K, 40)
    names = [f"p{i}" for i in range(K)]
    df = pd.DataFrame(P, columns=names).assign(label=labels)
    path = tmp_path / "wide.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    formula = "label ~ " + " + ".join(names)
    assert main(["ci", str(path), "--formula", formula, "--bins", "3", "--json"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_ci(y=labels, probs=P, n_bins=3)  # no formula: the arrays themselves
    assert out["n_classes"] == K
    assert out["estimate"] == pytest.approx(ref.estimate, rel=1e-10, abs=1e-15)
    assert ct.calib_ci(formula, data=df, n_bins=3).estimate == ref.estimate


@pytest.mark.parametrize("formula", [
    "y ~ a + b + c", "y ~ a + b + 0 + c", "y ~ a + 0", "y ~ 0 + a + b", "y ~ a + b - 1 + c",
    "y ~ 1 + a + b + c + 1", "y ~ a + a + b + a", "y ~ I(a + b) + c + d + e", "y ~ a + b + c + 0",
    "y ~ (a + b) + (c + d) + e", "y ~ -1 + a + b + c", "y + z ~ a + b + c + d", "~ a + b + c",
    "y ~ " + " + ".join(f"x{i}" for i in range(40)) + " - 1"])
def test_balanced_sums_describe_the_same_model_as_patsy(formula):
    import patsy

    from calibtest.inputs.formula import model_desc
    ours, theirs = model_desc(formula), patsy.ModelDesc.from_formula(formula)
    assert ours.lhs_termlist == theirs.lhs_termlist and ours.rhs_termlist == theirs.rhs_termlist
    assert ours.describe() == theirs.describe()


# ----------------------------------------------------------------------------- test (the multi-scale test)
@pytest.fixture
def binary_file(tmp_path):
    rng = np.random.default_rng(21)
    p = rng.uniform(0.02, 0.98, 700)
    df = pd.DataFrame({"y": (rng.random(700) < p ** 1.3).astype(int), "p": p})
    path = tmp_path / "binary.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path, df


@pytest.mark.parametrize("options, keywords", [
    ([], {}),
    (["--bins", "8", "--alpha", "0.1", "--n-draws", "199", "--chunksize", "150"],
     {"n_bins": 8, "alpha": 0.1, "n_draws": 199, "chunksize": 150}),
])
def test_test_json_equals_calib_test_on_the_file(binary_file, capsys, options, keywords):
    path, df = binary_file
    for file in (path, _parquet_twin(path, df)):
        assert main(["test", str(file), "--formula", "y ~ p", "--seed", "5", *options, "--json"]) == 0, \
            capsys.readouterr().err
        out = json.loads(capsys.readouterr().out)
        ref = ct.calib_test("y ~ p", data=str(file), rng=5, **keywords)
        assert out == json.loads(json.dumps(ref.to_dict()))
        # and the same test as on the rows in memory (the file is streamed, not a different test)
        in_memory = {key: value for key, value in keywords.items() if key != "chunksize"}
        assert out["pvalue"] == ct.calib_test("y ~ p", data=df, rng=5, **in_memory).pvalue


def test_test_chunksize_reaches_the_reader_and_summary_prints(binary_file, capsys, monkeypatch):
    path, _ = binary_file
    seen = _spy_chunks(monkeypatch)
    assert main(["test", str(path), "--formula", "y ~ p", "--seed", "2", "--chunksize", "123",
                 "--n-draws", "99"]) == 0
    out = capsys.readouterr().out
    assert seen and set(seen) == {123}
    assert "Multi-scale test of calibration" in out
    assert "P-value:" in out and str(ct.calib_test("y ~ p", data=str(path), rng=2, n_draws=99).pvalue) in out


def test_test_is_listed_and_its_errors_are_one_line(binary_file, tmp_path, capsys):
    path, _ = binary_file
    with pytest.raises(SystemExit):
        main(["--help"])
    assert re.search(r"^\s+test\s+multi-scale test", capsys.readouterr().out, re.M)
    for bad in (["--bins", "two"], ["--n-draws", "0"], ["--missing", "keep"], ["--nope"]):
        rc, out, err = _stderr_of(["test", path, "--formula", "y ~ p", *bad], capsys)
        assert rc == 2 and out == "", bad
        # an unknown option is reported by the top-level parser, like every subcommand's
        prefix = "calibtest: error: " if bad == ["--nope"] else "calibtest test: error: "
        assert err.count("\n") == 1 and err.startswith(prefix) and "Traceback" not in err, (bad, err)
    for argv, expected in [(["test", path, "--formula", "y ~ q"], "column 'q'"),
                           (["test", tmp_path / "none.csv", "--formula", "y ~ p"], "file not found")]:
        rc, out, err = _stderr_of(argv, capsys)
        assert rc == 1 and out == "", argv
        assert err.count("\n") == 1 and err.startswith("calibtest: error: ") and expected in err, err


def test_calib_test_refuses_chunksize_on_rows_in_memory(binary_file):
    _, df = binary_file
    with pytest.raises(ValueError, match="chunksize= applies only to data given as a file path"):
        ct.calib_test("y ~ p", data=df, chunksize=100, rng=1)


def test_sample_size_margin_precision_and_their_errors(tmp_path, capsys):
    """--margin (with --censored-fraction), --precision and --accept give calib_sample_size's n; bad values one line."""
    import json as _json

    from calibtest.cli import main
    p = np.random.default_rng(0).beta(2, 5, 2000)
    path = tmp_path / "preds.csv"
    pd.DataFrame({"p": p}).to_csv(path, index=False)
    assert main(["sample-size", str(path), "--formula", "~ p", "--power", "0.8", "--margin", "0.05",
                 "--censored-fraction", "0.4", "--json"]) == 0
    out = _json.loads(capsys.readouterr().out)
    api = ct.calib_sample_size(probs=p, power=0.8, margin=0.05, censored_fraction=0.4)
    assert out["n"] == api.n and out["margin"] == 0.05
    assert main(["sample-size", str(path), "--formula", "~ p", "--slope", "0.8", "--precision", "slope=0.1",
                 "--precision", "oe=0.1", "--json"]) == 0
    out = _json.loads(capsys.readouterr().out)
    assert out["n"] == ct.calib_sample_size(probs=p, slope=0.8, precision={"slope": 0.1, "oe": 0.1}).n
    for bad, words in ((["--ci-width", "0.05", "--margin", "0.05"], "--margin plans a margin test: give --power"),
                       (["--precision", "slope"], "--precision must be MEASURE=SE"),
                       (["--precision", "auc=0.1"], "unknown measures"), ([], "--power and --ci-width, or --precision")):
        assert main(["sample-size", str(path), "--formula", "~ p", *bad]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1
