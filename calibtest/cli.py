"""Command-line interface: ``calibtest ci | report | plan | tcal | compare | sample-size | demo`` and ``calibtest --version``.

One parser.  The options that several subcommands take (``--formula``,
``--n-classes``, ``--k``, ``--bins``, ``--alpha``, ``--missing``, ``--json``)
are declared once, in the parent parsers built by :func:`_shared_options`, so
every subcommand parses them with the same type and help text.  ``--formula``
is repeatable (``action="append"``): ``ci`` and ``tcal`` take one,
``compare`` takes two (``--formula-a``/``--formula-b`` are kept as aliases of
the older spelling); ``report`` takes one or more (or ``--model
LABEL=FORMULA``).  Every error is one line on stderr, ``calibtest: error:
...``, in the command line's spellings (``--missing drop``, not
``missing='drop'``): exit status 2 for usage errors (options), 1 for errors in
the data or the files; ``calibtest --debug ...`` shows the traceback instead.

Formulas are evaluated by patsy with numpy available as ``np``
(``--formula "y ~ np.clip(p, 0, 1)"``); like Python code, a formula can run
arbitrary expressions, so formulas are trusted input.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys

import numpy as np

from calibtest._version import package_version
from calibtest._validation import OptionError, OptionTypeError
from calibtest.backends.files import read_csv_file
from calibtest.compare import calib_compare
from calibtest.datasets import load_demo
from calibtest.ece import calib_ci
from calibtest.formula import parse_formula, resolve_env
from calibtest.sample_size import calib_sample_size
from calibtest.analysis_plan import NULL_DEFAULT, PLAN_TESTS, AnalysisPlan, plan
from calibtest.reporting.document import load_metadata
from calibtest.reporting.html import file_provenance, report
from calibtest.tcal import tcal_test

__all__ = ["main", "build_parser", "report_command"]


# ----------------------------------------------------------------------------- option types
def _bins(value: str):
    """``--bins``: an integer number of bins per dimension, or 'auto'."""
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'auto', got {value!r}") from None


def _k(value: str):
    """``--k``: an integer k, or 'full'."""
    if value == "full":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'full', got {value!r}") from None


# ----------------------------------------------------------------------------- the shared options
def _shared_options() -> dict[str, argparse.ArgumentParser]:
    """Parent parsers holding each shared option once: ``formula``, ``model`` (n-classes, k, bins,
    alpha, missing), ``json`` and ``weighting`` (weights, prevalence).  A subcommand lists the parents it takes."""
    formula = argparse.ArgumentParser(add_help=False)
    formula.add_argument("--formula", action="append", default=None, metavar="FORMULA",
                         help='model formula, e.g. "y ~ p", "correct ~ confidence" or "label ~ p0 + p1 + p2" '
                              "(numpy is available as np); compare takes two (--formula A --formula B). "
                              "Formulas are evaluated as Python expressions: trusted input only")
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--n-classes", type=int, default=None,
                       help="K, the number of classes, for a single top-1 confidence column")
    model.add_argument("--k", type=_k, default=None,
                       help="top-1-to-k calibration for a probability matrix (an integer), or 'full' "
                            "for full calibration")
    model.add_argument("--bins", type=_bins, default="auto", help="bins per dimension, or 'auto' (default)")
    model.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    model.add_argument("--missing", choices=["raise", "drop"], default="raise",
                       help="rows with a missing value: raise an error (default) or drop them")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    weighting = argparse.ArgumentParser(add_help=False)
    weighting.add_argument("--weights", default=None, metavar="COLUMN",
                           help="column of case weights (survey or inverse-probability weights)")
    weighting.add_argument("--prevalence", type=float, default=None, metavar="PI",
                           help="population prevalence: re-weight an enriched (e.g. case-control) sample to it")
    return {"formula": formula, "model": model, "json": as_json, "weighting": weighting}


class _Parser(argparse.ArgumentParser):
    """ArgumentParser that also checks the number of ``--formula`` options of a subcommand.

    argparse's ``action="append"`` cannot require an exact count, so a
    subcommand parser made with ``n_formulas=1`` (or 2) checks it after
    parsing and replaces ``formula`` by the one formula (or the list of two).
    A wrong count is a usage error (exit status 2) naming the subcommand.
    """

    def __init__(self, *args, n_formulas: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_formulas = n_formulas

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if self.n_formulas:
            namespace.formula = self._formulas(namespace)
        return namespace, extras

    def _formulas(self, ns):
        given = list(ns.formula or [])
        aliases = [getattr(ns, "formula_a", None), getattr(ns, "formula_b", None)]
        if aliases != [None, None]:
            if given:
                self.error("give the two formulas either as --formula twice or as --formula-a/--formula-b, "
                           "not both")
            if None in aliases:
                self.error("--formula-a and --formula-b go together (or give --formula twice)")
            given = aliases
        if self.n_formulas == 1 and len(given) != 1:
            self.error("the following arguments are required: --formula" if not given else
                       f"--formula given {len(given)} times; this subcommand takes one model formula")
        if self.n_formulas == 2 and len(given) != 2:
            self.error(f"compare needs exactly two --formula options (model A, then model B), got {len(given)}")
        return given[0] if self.n_formulas == 1 else given


#: What formulas evaluated by the command line can use besides the file's columns.
FORMULA_NAMESPACE = {"np": np}


def _model_keywords(args) -> dict:
    """The shared model options as keywords of calib_ci, tcal_test and calib_compare."""
    return {"n_classes": args.n_classes, "k": args.k, "n_bins": args.bins, "alpha": args.alpha,
            "missing": args.missing, "eval_env": FORMULA_NAMESPACE}


# ----------------------------------------------------------------------------- input and output
class CommandError(Exception):
    """An error of the command's input that :func:`main` prints as one line (exit status 1)."""


def _fail(message: str):
    """Stop with one line on stderr, ``calibtest: error: <message>`` (exit status 1)."""
    raise CommandError(message)


def _read_input(args, *, stream: bool = False):
    """``(data, keywords)`` for the input file ``args.file``.

    The CSV file read into a DataFrame (every line checked for its number of
    fields) and ``{}``; or, when ``stream`` is allowed (``ci``) and the file is
    Parquet or ``--chunksize`` is given, the path itself and
    ``{"chunksize": ...}`` so that calib_ci reads it in chunks.
    """
    path = args.file
    if os.path.isdir(path):
        _fail(f"{path} is a directory, not a data file")
    if not os.path.exists(path):
        _fail(f"file not found: {path}")
    if stream and (args.chunksize is not None or path.lower().endswith((".parquet", ".pq"))):
        return path, {"chunksize": args.chunksize}
    return read_csv_file(path), {}


def _print_result(res, as_json: bool = False) -> int:
    """Print ``res`` as one JSON object or as its summary; the exit status 0."""
    print(json.dumps(res.to_dict()) if as_json else res.summary())
    return 0


# ----------------------------------------------------------------------------- ci
def _null_options(args) -> dict:
    """``--null`` (and ``--seed`` for the Monte Carlo null) as calib_ci keywords."""
    if args.null == "auto":
        return {}
    out = {"null": args.null}
    if args.null == "monte-carlo" and args.method == "adjusted":
        out["rng"] = args.seed
    return out


def _resampling_options(args) -> dict:
    """``--method``, ``--n-resamples`` and ``--seed`` as calib_ci keywords (only those given)."""
    out = {}
    if args.method != "adjusted":
        out.update(method=args.method, n_resamples=args.n_resamples, rng=args.seed)
    elif args.n_resamples is not None:
        out.update(n_resamples=args.n_resamples)  # calib_ci explains that it needs a resampling method
    return out


def _population_options(args) -> dict:
    """``--by``, ``--weights`` and ``--prevalence`` as calib_ci keywords (only those given; the seed for
    the Monte Carlo draws they may need)."""
    out = {}
    if args.by:
        out["by"] = args.by[0] if len(args.by) == 1 else list(args.by)
    if args.weights is not None:
        out["weights"] = args.weights
    if args.prevalence is not None:
        out["prevalence"] = args.prevalence
    if out and args.seed is not None:
        out["rng"] = args.seed
    return out


def _cmd_ci(args) -> int:
    data, stream = _read_input(args, stream=True)
    keywords = {**_model_keywords(args), **stream, **_resampling_options(args), **_null_options(args)}
    keywords.update(_population_options(args))
    res = calib_ci(args.formula, data=data, **keywords)
    return _print_result(res, args.json)


def _add_ci_parser(sub, shared) -> None:
    ci = sub.add_parser("ci", help="interval and test for one model's calibration error", n_formulas=1,
                        parents=[shared["formula"], shared["model"], shared["json"], shared["weighting"]])
    ci.add_argument("file", help="CSV or Parquet file with outcomes and predictions")
    ci.add_argument("--chunksize", type=int, default=None,
                    help="stream the file in chunks of this many rows (Parquet files are always streamed)")
    ci.add_argument("--method", choices=["adjusted", "bootstrap", "subsampling", "hulc"], default="adjusted",
                    help="interval: the paper's adjusted interval (default) or a resampling baseline")
    ci.add_argument("--n-resamples", type=int, default=None, help="resamples of a resampling method (500)")
    ci.add_argument("--seed", type=int, default=None, help="seed of a resampling method or the Monte Carlo null")
    ci.add_argument("--null", choices=["auto", "asymptotic", "conditional", "monte-carlo"], default="auto",
                    help="null law of the calibration test (default auto: conditional for at most 4 binned "
                         "coordinates, in memory or streamed, else the paper's asymptotic one)")
    ci.add_argument("--by", action="append", default=None, metavar="COLUMN",
                    help="analyse each subgroup of this column (repeat for crossed groups): per-group intervals, "
                         "the global and the heterogeneity tests")
    ci.set_defaults(func=_cmd_ci)


# ----------------------------------------------------------------------------- sample-size
#: Name of the placeholder outcome that lets a one-sided formula ("~ p") name the prediction columns.
_NO_OUTCOME = "_calibtest_no_outcome_"


def _cmd_sample_size(args) -> int:
    data, _ = _read_input(args)
    formula = args.formula.strip()
    if formula.startswith("~"):  # predictions only: a placeholder outcome column for the parser
        data = data.assign(**{_NO_OUTCOME: 0})
        formula = f"{_NO_OUTCOME} {formula}"
    try:
        parsed = parse_formula(formula, data, resolve_env({"np": np}))
    except ValueError as exc:  # the user's formula in the message, not the placeholder
        raise ValueError(str(exc).replace(f"{_NO_OUTCOME} ", "")) from None
    probs = parsed.probs
    missing = np.isnan(probs).any(axis=1)
    if missing.any():
        if args.missing != "drop":
            raise ValueError(f"the prediction column(s) {', '.join(parsed.prob_names)} hold missing values in "
                             f"{int(missing.sum())} rows (first at row {int(np.argmax(missing))}); use "
                             "--missing drop to drop them")
        probs = probs[~missing]
    probs = probs[:, 0] if probs.shape[1] == 1 else probs
    res = calib_sample_size(probs=probs, intercept=args.intercept, slope=args.slope, power=args.power,
                            ci_width=args.ci_width, alpha=args.alpha, n_bins=args.bins,
                            k=1 if args.k is None else args.k, n_classes=args.n_classes, method=args.method,
                            n_sim=args.n_sim, rng=args.seed)
    return _print_result(res, args.json)


def _add_sample_size_parser(sub, shared) -> None:
    ss = sub.add_parser("sample-size", help="sample size of a validation study (power or interval width)",
                        n_formulas=1, parents=[shared["formula"], shared["model"], shared["json"]])
    ss.add_argument("file", help='CSV file whose predictions stand for the study population (formula "~ p")')
    target = ss.add_mutually_exclusive_group(required=True)
    target.add_argument("--power", type=float, default=None, help="target power of the test of calibration")
    target.add_argument("--ci-width", type=float, default=None,
                        help="target expected width of the ECE-scale interval")
    ss.add_argument("--intercept", type=float, default=0.0,
                    help="anticipated calibration intercept: E[y|p] = expit(a + b logit p) (default 0)")
    ss.add_argument("--slope", type=float, default=1.0, help="anticipated calibration slope b (default 1)")
    ss.add_argument("--method", choices=["analytic", "simulation"], default="analytic",
                    help="analytic normal approximation (default) or simulated studies")
    ss.add_argument("--n-sim", type=int, default=1000, help="simulated studies per n (--method simulation)")
    ss.add_argument("--seed", type=int, default=None, help="seed of the simulation")
    ss.set_defaults(func=_cmd_sample_size)


# ----------------------------------------------------------------------------- report
def _report_models(args) -> list[tuple[str, str]]:
    """``(label, formula)`` of every model: ``--model LABEL=FORMULA`` options, or ``--formula`` with ``--label``."""
    models = []
    for spec in args.model or []:
        label, sep, formula = spec.partition("=")
        if not sep or not label.strip() or not formula.strip():
            raise OptionError(f"--model must be LABEL=FORMULA (e.g. --model 'old=y ~ p_old'), got {spec!r}")
        models.append((label.strip(), formula.strip()))
    formulas = list(args.formula or [])
    labels = list(args.label or [])
    if formulas and models:
        raise OptionError("give the models either as --model LABEL=FORMULA or as --formula (with --label), "
                          "not both")
    if labels and len(labels) != len(formulas):
        raise OptionError(f"--label given {len(labels)} times for {len(formulas)} --formula options; "
                          "give one label per formula")
    if formulas:
        models = list(zip(labels, formulas)) if labels else [(None, f) for f in formulas]
    if not models:
        raise OptionError("the following arguments are required: --model LABEL=FORMULA (or --formula)")
    named = [m[0] for m in models if m[0] is not None]
    if len(set(named)) < len(named):
        raise OptionError(f"model labels must be distinct, got {named}")
    return models


def _report_comparisons(args, results, labels):
    """The ``--compare`` options as comparison results: ``A,B`` (two labels) or ``all`` (pairwise, Holm)."""
    out = []
    for spec in args.compare or []:
        if spec == "all":
            if len(results) < 3:
                raise OptionError("--compare all needs three or more models (for two, give --compare A,B)")
            out.append(calib_compare(list(results), names=labels, alpha=args.alpha))
            continue
        pair = [part.strip() for part in spec.split(",")]
        if len(pair) != 2 or pair[0] == pair[1]:
            raise OptionError(f"--compare must be two different model labels separated by a comma, or 'all'; "
                              f"got {spec!r}")
        unknown = [p for p in pair if p not in labels]
        if unknown:
            raise OptionError(f"--compare {spec}: unknown model label {unknown[0]!r}; the labels are {labels}")
        i, j = labels.index(pair[0]), labels.index(pair[1])
        out.append(calib_compare(results[i], results[j], names=(labels[i], labels[j]), alpha=args.alpha))
    return out


def report_command(args) -> str:
    """The complete command line (every option, defaults included) that reproduces the report."""
    parts = ["calibtest", "report", args.file]
    for label, formula in _report_models(args):
        parts += ["--model", f"{label}={formula}"] if label is not None else ["--formula", formula]
    parts += ["-o", args.output]
    for spec in args.compare or []:
        parts += ["--compare", spec]
    for option in ("title", "purpose", "metadata", "plan"):
        value = getattr(args, option)
        if value is not None:
            parts += [f"--{option}", value]
    for spec in args.deviation_reason or []:
        parts += ["--deviation-reason", spec]
    if args.n_classes is not None:
        parts += ["--n-classes", str(args.n_classes)]
    if args.k is not None:
        parts += ["--k", str(args.k)]
    parts += ["--bins", str(args.bins), "--alpha", repr(args.alpha), "--method", args.method,
              "--missing", args.missing, "--hl-groups", str(args.hl_groups)]
    for column in args.by or []:
        parts += ["--by", column]
    if args.weights is not None:
        parts += ["--weights", args.weights]
    if args.prevalence is not None:
        parts += ["--prevalence", repr(args.prevalence)]
    if args.seed is not None:
        parts += ["--seed", str(args.seed)]
    return " ".join(shlex.quote(p) for p in parts)


def _deviation_reasons(specs) -> dict:
    """``--deviation-reason OPTION=TEXT`` options as a dict (each option once)."""
    reasons = {}
    for spec in specs or []:
        option, sep, text = spec.partition("=")
        option, text = option.strip(), text.strip()
        if not sep or not option or not text:
            raise OptionError(f"--deviation-reason must be OPTION=TEXT, the option as in --plan and then the "
                              f"reason, got {spec!r}")
        if option in reasons:
            raise OptionError(f"--deviation-reason {option} is given twice")
        reasons[option] = text
    return reasons


def _cmd_report(args) -> int:
    if not args.output.lower().endswith((".html", ".htm", ".pdf")):
        raise OptionError(f"-o/--output must end in .html, .htm or .pdf, got {args.output!r}")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise OptionError(f"-o/--output {args.output}: the folder {os.path.dirname(args.output)} does not exist")
    models = _report_models(args)
    metadata = load_metadata(args.metadata) if args.metadata is not None else None
    plan = None
    if args.plan is not None:
        if not os.path.isfile(args.plan):
            raise OptionError(f"--plan: file not found: {args.plan}")
        plan = AnalysisPlan.read(args.plan)
    reasons = _deviation_reasons(args.deviation_reason)
    if reasons and plan is None:
        raise OptionError("--deviation-reason needs --plan: without a plan there is nothing to deviate from")
    df, _ = _read_input(args)
    source = file_provenance(args.file)
    population = _population_options(args)
    results = [calib_ci(formula, data=df, **_model_keywords(args), method=args.method, **population)
               for _, formula in models]
    labels = [label for label, _ in models]
    labels = None if None in labels else labels
    names = labels if labels is not None else [r.formula for r in results]
    pooled = [getattr(r, "pooled", r) for r in results]  # --by: compare the models on all rows
    comparisons = _report_comparisons(args, pooled, names)
    try:
        path = report(results if len(results) > 1 else results[0], args.output, comparisons=comparisons,
                      title=args.title, purpose=args.purpose, labels=labels, source=source,
                      command=report_command(args), hl_groups=args.hl_groups, metadata=metadata, plan=plan,
                      rng=args.seed, deviation_reasons=reasons or None)
    except ImportError as exc:
        _fail(str(exc))
    print(f"calibtest: wrote {path}")
    return 0


def _add_report_parser(sub, shared) -> None:
    rep = sub.add_parser("report", help="write an HTML or PDF validation report of one or more models",
                         parents=[shared["formula"], shared["model"], shared["weighting"]],
                         epilog='e.g. calibtest report preds.csv --model "old=y ~ p_old" --model "new=y ~ p_new" '
                                "--compare old,new --metadata meta.toml --plan plan.json -o report.pdf")
    rep.add_argument("file", help="CSV file with outcomes and predictions")
    rep.add_argument("-o", "--output", required=True, help="output file: .html or .pdf (PDF needs calibtest[pdf])")
    rep.add_argument("--model", action="append", default=None, metavar="LABEL=FORMULA",
                     help="a model and its label, e.g. --model 'new=y ~ p_new'; repeat for several models")
    rep.add_argument("--label", action="append", default=None,
                     help="label of the model of the --formula in the same position (alternative to --model)")
    rep.add_argument("--compare", action="append", default=None, metavar="A,B",
                     help="compare the calibration errors of the models labelled A and B (repeatable), or "
                          "'all' for every pair with Holm's adjustment")
    rep.add_argument("--title", default=None, help="report title")
    rep.add_argument("--purpose", default=None, help="free text: what is evaluated and why")
    rep.add_argument("--metadata", default=None, metavar="FILE",
                     help="document control (.json, or .toml on Python 3.11+): document_id, document_version, "
                          "author, reviewer, approver, organisation, model_name, model_version, intended_use, "
                          "population, outcome_definition, data_source, data_period, inclusion_criteria, "
                          "revisions")
    rep.add_argument("--plan", default=None, metavar="FILE",
                     help="pre-specified analysis plan (written by 'calibtest plan'); the report checks the "
                          "analysis against it")
    rep.add_argument("--deviation-reason", action="append", default=None, metavar="OPTION=TEXT",
                     help="why the analysis deviates from --plan in one option (alpha, n_bins, null, method, k, "
                          "n_classes, tests, subgroups); repeat for several")
    rep.add_argument("--hl-groups", type=int, default=10, help="groups of the Hosmer-Lemeshow test (default 10)")
    rep.add_argument("--seed", type=int, default=None,
                     help="seed of the evidence table's multi-scale test and of the Monte Carlo draws of --by or "
                          "--prevalence (default: each result's recorded seed)")
    rep.add_argument("--by", action="append", default=None, metavar="COLUMN",
                     help="add a subgroup section for the groups of this column (repeat for crossed groups): "
                          "per-group intervals, forest plot, the global and the heterogeneity tests")
    rep.add_argument("--method", default="adjusted",
                     help="interval method: adjusted (default, the paper's Algorithm 1), or a resampling "
                          "method calib_ci supports (bootstrap, subsampling, hulc)")
    rep.set_defaults(func=_cmd_report)


# ----------------------------------------------------------------------------- plan
def _cmd_plan(args) -> int:
    if not args.output.lower().endswith(".json"):
        raise OptionError(f"-o/--output must end in .json, got {args.output!r}")
    sample_size = None
    if args.sample_size is not None:
        if not os.path.isfile(args.sample_size):
            raise OptionError(f"--sample-size: file not found: {args.sample_size}")
        try:
            with open(args.sample_size, encoding="utf-8") as fh:
                sample_size = json.load(fh)
        except json.JSONDecodeError as exc:
            raise OptionError(f"--sample-size {args.sample_size}: invalid JSON ({exc})") from None
    split = (lambda v: None if v is None else [x.strip() for x in v.split(",") if x.strip()])
    out = plan(args.output, alpha=args.alpha, n_bins=args.n_bins, null=args.null, method=args.method, k=args.k,
               n_classes=args.n_classes, tests=split(args.tests), subgroups=split(args.subgroups),
               sample_size=sample_size)
    print(f"calibtest: wrote {args.output} (SHA-256 {out.sha256}, created {out.created})")
    return 0


def _plan_bins(value: str):
    """``--n-bins``: an integer, 'auto' or 'adaptive'."""
    return value if value in ("auto", "adaptive") else _bins(value)


def _add_plan_parser(sub, shared) -> None:
    helps = {a.dest: a.help for a in shared["model"]._actions}  # one help text per shared option
    pl = sub.add_parser("plan", help="write a pre-specified analysis plan (JSON with its SHA-256)",
                        epilog="e.g. calibtest plan -o plan.json --alpha 0.05 --n-bins auto "
                               "--tests calib_ci,hosmer_lemeshow")
    pl.add_argument("-o", "--output", required=True, help="the plan file to write (.json)")
    pl.add_argument("--alpha", type=float, default=0.05, help=helps["alpha"])
    pl.add_argument("--n-bins", type=_plan_bins, default="auto",
                    help="bins per dimension: an integer, 'auto' (default) or 'adaptive'")
    pl.add_argument("--null", choices=["asymptotic", "conditional", "monte-carlo"], default=NULL_DEFAULT,
                    help=f"null law of the test of ECE = 0 (default {NULL_DEFAULT})")
    pl.add_argument("--method", choices=["adjusted", "bootstrap", "subsampling", "hulc"], default="adjusted",
                    help="interval method (default adjusted)")
    pl.add_argument("--k", type=_k, default=None, help=helps["k"])
    pl.add_argument("--n-classes", type=int, default=None, help=helps["n_classes"])
    pl.add_argument("--tests", default=None, metavar="T1,T2",
                    help="comma-separated tests to report: " + ", ".join(PLAN_TESTS))
    pl.add_argument("--subgroups", default=None, metavar="COL1,COL2", help="comma-separated subgroup columns")
    pl.add_argument("--sample-size", default=None, metavar="FILE",
                    help="JSON file with a sample-size calculation to store in the plan")
    pl.set_defaults(func=_cmd_plan)


# ----------------------------------------------------------------------------- tcal
def _cmd_tcal(args) -> int:
    df, _ = _read_input(args)
    res = tcal_test(args.formula, data=df, **_model_keywords(args), n_draws=args.draws, adaptive=args.adaptive,
                    rng=args.seed)
    return _print_result(res, args.json)


def _add_tcal_parser(sub, shared) -> None:
    tc = sub.add_parser("tcal", help="T-Cal test of calibration (consistency-resampling threshold)", n_formulas=1,
                        parents=[shared["formula"], shared["model"], shared["json"]])
    tc.add_argument("file", help="CSV file with outcomes and predictions")
    tc.add_argument("--draws", type=int, default=None,
                    help="Monte Carlo resamples per scale (default: at least 3000, and enough for every scale "
                         "to be able to reject at --alpha)")
    tc.add_argument("--adaptive", action="store_true", help="adaptive T-Cal over dyadic bin counts")
    tc.add_argument("--seed", type=int, default=None, help="random seed")
    tc.set_defaults(func=_cmd_tcal)


# ----------------------------------------------------------------------------- compare
def _cmd_compare(args) -> int:
    df, _ = _read_input(args)
    formula_a, formula_b = args.formula
    res = calib_compare(formula_a, formula_b, data=df, **_model_keywords(args), alternative=args.alternative,
                        variance=args.variance)
    return _print_result(res, args.json)


def _add_compare_parser(sub, shared) -> None:
    cmp = sub.add_parser("compare", help="test whether two models' calibration errors differ (paired)",
                         n_formulas=2, parents=[shared["formula"], shared["model"], shared["json"]],
                         epilog='e.g. calibtest compare preds.csv --formula "y ~ p_old" --formula "y ~ p_new"')
    cmp.add_argument("file", help="CSV file with the outcomes and both models' predictions")
    cmp.add_argument("--formula-a", default=None, help="alias: model A, the same as the first --formula")
    cmp.add_argument("--formula-b", default=None, help="alias: model B, the same as the second --formula")
    cmp.add_argument("--alternative", choices=["two-sided", "less", "greater"], default="two-sided",
                     help="alternative hypothesis on Delta = ECE_A^2 - ECE_B^2 (default two-sided; "
                          "greater: model A worse calibrated)")
    cmp.add_argument("--variance", choices=["corrected", "plugin"], default="corrected",
                     help="variance estimate: corrected (default) or plugin (conservative near calibration)")
    cmp.set_defaults(func=_cmd_compare)


# ----------------------------------------------------------------------------- demo
def _cmd_demo(args) -> int:
    res = calib_ci("y ~ p", data=load_demo())
    print("calibtest demo: calibration of a logistic risk model on held-out data "
          "(see calibtest/data/README.md)\n")
    return _print_result(res)


def build_parser() -> argparse.ArgumentParser:
    """The ``calibtest`` parser with every subcommand."""
    parser = _Parser(prog="calibtest",
                     description="Confidence intervals and tests for the l2 expected calibration error.")
    parser.add_argument("--version", action="version", version=f"calibtest {package_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", required=True)
    shared = _shared_options()
    _add_ci_parser(sub, shared)
    _add_report_parser(sub, shared)
    _add_tcal_parser(sub, shared)
    demo = sub.add_parser("demo", help="run calibtest on the packaged example data")
    demo.set_defaults(func=_cmd_demo)
    _add_compare_parser(sub, shared)
    _add_sample_size_parser(sub, shared)
    _add_plan_parser(sub, shared)
    return parser


#: Python argument names and their command-line spellings, for messages.
_SPELLINGS = {"n_bins": "--bins", "n_classes": "--n-classes", "n_resamples": "--n-resamples",
              "n_draws": "--draws", "n_null_draws": "--draws", "rng": "--seed", "alpha": "--alpha",
              "missing": "--missing", "method": "--method", "null": "--null", "k": "--k",
              "chunksize": "--chunksize", "formula": "--formula"}


def cli_spelling(message: str) -> str:
    """``message`` with Python spellings of options replaced by the command line's.

    ``missing='drop'`` becomes ``--missing drop`` and ``n_bins must ...``
    becomes ``--bins must ...``; other text is left alone.
    """
    def option_value(m):
        name, value = m.group(1), m.group(2)
        return f"{_SPELLINGS[name]} {value}" if name in _SPELLINGS else m.group(0)

    names = "|".join(sorted(_SPELLINGS, key=len, reverse=True))
    message = re.sub(r"\bdeviation_reasons\[['\"](\w+)['\"]\]", r"--deviation-reason \1", message)
    message = message.replace("deviation_reasons", "--deviation-reason")
    message = re.sub(rf"\b({names})=['\"]?([^'\",)\s]*)['\"]?", option_value, message)
    return re.sub(rf"(?<![\w.-])({names})(?= must| applies)", lambda m: _SPELLINGS[m.group(1)], message)


def _message(exc: BaseException) -> str:
    """One line describing ``exc``: its message, with the kind of error when that is not obvious."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (ValueError, TypeError, CommandError)):
        return text
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.filename}: {exc.strerror or text}"
    return f"{type(exc).__name__}: {text}"


def main(argv=None) -> int:
    """Run the command line; return the exit status (0 success, 1 data or file error, 2 usage error)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        if args.debug:
            raise
        usage = isinstance(exc, (OptionError, OptionTypeError))
        print(f"calibtest: error: {cli_spelling(_message(exc))}", file=sys.stderr)
        return 2 if usage else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
