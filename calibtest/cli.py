"""Command-line interface: ``calibtest ci | test | report | plan | tcal | compare | sample-size | monitor | demo`` and ``calibtest --version``.

One parser.  The options that several subcommands take (``--formula``,
``--n-classes``, ``--k``, ``--bins``, ``--alpha``, ``--missing``, ``--json``)
are declared once, in the parent parsers built by :func:`_shared_options`, so
every subcommand parses them with the same type and help text.  ``--formula``
is repeatable (``action="append"``): ``ci`` and ``tcal`` take one,
``compare`` takes two (``--formula-a``/``--formula-b`` are kept as aliases of
the older spelling); ``report`` takes one or more (or ``--model
LABEL=FORMULA``).  Every error is one line on stderr, ``calibtest: error:
...``, in the command line's spellings (``--missing drop``, not
``missing='drop'``), with one exit status per kind of error (:data:`EXIT_STATUSES`):
2 for usage errors (argparse's, and every :class:`~calibtest.options.OptionError`
or :class:`~calibtest.options.OptionTypeError` of the functions), 1 for errors in
the data or the files (:class:`~calibtest.options.DataError` and every other
error); ``calibtest --debug ...`` shows the traceback instead.  A closed
output pipe (``calibtest demo | head -2``) ends the command quietly with
status 141 (128 + SIGPIPE, as the shell reports a command killed by it).

The options' types, allowed values, defaults and help texts come from the
table of options (:mod:`calibtest.options`), the one the functions check and
plan files are written from.  This module imports only the standard library
and that table: the package's functions (numpy, pandas, ...) are imported by
the command handlers, so ``--help`` and ``--version`` are fast.

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

from calibtest.core.progress import progress_bar
from calibtest.inputs.design import Design, combinations_text
from calibtest.inputs.settings import Inputs, Settings
from calibtest.options import (DEFAULT_CHUNKSIZE, EXIT_DATA, EXIT_USAGE, OPTIONS, PLAN_SCHEMA, PLAN_TESTS, DataError,
                               OptionError, OptionTypeError, survival_refusal)

__all__ = ["main", "build_parser", "report_command", "EXIT_STATUSES"]

#: Exit status of the command line for each kind of outcome.
#: ``calibtest monitor`` shows a progress bar (on an interactive terminal) from this many batch files.
MONITOR_PROGRESS_FILES = 20

EXIT_STATUSES = {"success": 0, "data or file error": EXIT_DATA, "usage (option) error": EXIT_USAGE,
                 "monitor alarm": 3, "output pipe closed": 141}

_EPILOG = ("exit status: 0 success; 1 an error in the data or the files (a missing column, missing values, "
           "an undecodable file); 2 a usage error (an unknown or invalid option, or options that do not go "
           "together); 141 the output pipe was closed (e.g. by head)")



# ----------------------------------------------------------------------------- the shared options
def _shared_options() -> dict[str, argparse.ArgumentParser]:
    """Parent parsers holding each shared option once: ``formula``, ``model`` (n-classes, k, bins,
    alpha, missing), ``json`` and ``weighting`` (weights, prevalence, cluster).  A subcommand lists the parents it takes."""
    formula = argparse.ArgumentParser(add_help=False)
    formula.add_argument("--formula", action="append", default=None, metavar="FORMULA", help=_FORMULA_HELP)
    one_formula = argparse.ArgumentParser(add_help=False)  # shown as required where it is
    one_formula.add_argument("--formula", action="append", default=None, metavar="FORMULA", required=True,
                             help=_FORMULA_HELP)
    model = argparse.ArgumentParser(add_help=False)
    OPTIONS["n_classes"].add_to(model)
    OPTIONS["k"].add_to(model)
    OPTIONS["n_bins"].add_to(model, "--bins", "--n-bins", dest="bins")
    OPTIONS["alpha"].add_to(model)
    OPTIONS["missing"].add_to(model)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    weighting = argparse.ArgumentParser(add_help=False)
    weighting.add_argument("--weights", default=None, metavar="COLUMN",
                           help="column of case weights (survey or inverse-probability weights)")
    OPTIONS["prevalence"].add_to(weighting, metavar="PI")
    OPTIONS["cluster"].add_to(weighting, metavar="COLUMN")
    survival = argparse.ArgumentParser(add_help=False)  # a survival outcome: --formula "Surv(time, event) ~ risk"
    OPTIONS["horizon"].add_to(survival, metavar="T")
    OPTIONS["censoring"].add_to(survival)
    OPTIONS["censoring_covariates"].add_to(survival)
    OPTIONS["cause"].add_to(survival)
    return {"formula": formula, "one_formula": one_formula, "model": model, "json": as_json,
            "weighting": weighting, "survival": survival}


_FORMULA_HELP = ('model formula, e.g. "y ~ p", "correct ~ confidence" or "label ~ p0 + p1 + p2" '
                 "(numpy is available as np); compare takes two (--formula A --formula B). "
                 "Formulas are evaluated as Python expressions: trusted input only")


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

    def error(self, message):
        """A usage error on one line (exit status 2), pointing to ``--help`` instead of printing the usage."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

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


def formula_namespace() -> dict:
    """What formulas evaluated by the command line can use besides the file's columns (numpy as ``np``)."""
    import numpy as np

    return {"np": np}


def _model_keywords(args) -> dict:
    """The shared model options as keywords of calib_ci, tcal_test and calib_compare."""
    return {"n_classes": args.n_classes, "k": args.k, "n_bins": args.bins, "alpha": args.alpha,
            "missing": args.missing, "eval_env": formula_namespace()}


# ----------------------------------------------------------------------------- input and output
class CommandError(DataError):
    """An error of the command's input files that :func:`main` prints as one line (exit status 1)."""


def _fail(message: str):
    """Stop with one line on stderr, ``calibtest: error: <message>`` (exit status 1)."""
    raise CommandError(message)


def _read_input(args, *, stream: bool = False):
    """``(data, keywords)`` for the input file ``args.file`` (CSV or Parquet, the format told by its name).

    With ``stream`` (a subcommand that needs only bin sums), the path itself
    and ``{"chunksize": ...}``, so that calib_ci reads the file in chunks
    (``--chunksize`` rows, by default :data:`~calibtest.options.DEFAULT_CHUNKSIZE`);
    otherwise the whole file as a DataFrame and ``{}``
    (:func:`calibtest.streams.files.read_data_file`, which checks every
    line of a CSV file for its number of fields).  A name that is neither
    ``.csv`` (possibly compressed) nor ``.parquet``/``.pq`` is a one-line error.
    """
    from calibtest.streams.files import file_format, read_data_file

    path = args.file
    if os.path.isdir(path):
        _fail(f"{path} is a directory, not a data file")
    if not os.path.exists(path):
        _fail(f"file not found: {path}")
    file_format(path, None)
    if stream:
        return path, {"chunksize": args.chunksize}
    return read_data_file(path, None), {}


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


def _survival_options(args) -> dict:
    """``--horizon``, ``--censoring`` and ``--censoring-covariates`` as calib_ci keywords (only those given)."""
    out = {}
    if args.horizon is not None:
        out["horizon"] = args.horizon
    if args.censoring != OPTIONS["censoring"].default:
        out["censoring"] = args.censoring
    if args.censoring_covariates is not None:
        out["censoring_covariates"] = list(args.censoring_covariates)
    if args.cause is not None:
        out["cause"] = args.cause
    if not out.get("horizon") and out:
        raise OptionError("--censoring, --censoring-covariates and --cause go with a survival outcome: give --horizon and "
                          '--formula "Surv(time, event) ~ risk"')
    return out


def _refuse_survival(args, command: str) -> None:
    """Refuse a survival outcome (``--horizon`` or a ``Surv(...)`` formula) where the subcommand has none."""
    formulas = args.formula if isinstance(args.formula, list) else [args.formula]
    if any(_design(args, "calib_ci", formula).survival for formula in formulas):
        raise survival_refusal(command, ci="'calibtest ci --horizon T --formula \"Surv(time, event) ~ risk\"'",
                               report="'calibtest report --horizon T'")


def _population_options(args) -> dict:
    """``--by``, ``--weights``, ``--prevalence`` and ``--cluster`` as calib_ci keywords (only those given; the
    seed for the Monte Carlo draws they may need)."""
    out = {}
    if args.cluster is not None:
        out["cluster"] = args.cluster
    if args.by:
        out["by"] = args.by[0] if len(args.by) == 1 else list(args.by)
    if args.weights is not None:
        out["weights"] = args.weights
    if args.prevalence is not None:
        out["prevalence"] = args.prevalence
    if out and args.seed is not None:
        out["rng"] = args.seed
    return out


#: The ``ci`` options that need the rows in memory (the whole file is read), as the help text lists them.
_CI_ROW_OPTIONS = "--weights, --prevalence, --cluster, --horizon, a resampling --method or --null monte-carlo"


def _design(args, analysis: str, formula=None) -> Design:
    """The design of the command line's analysis (``formula``: one of its formulas, default ``--formula``), as the
    front door ``analysis`` resolves it from the same options."""
    formula = args.formula if formula is None else formula
    by = getattr(args, "by", None)
    inputs = Inputs(formula if isinstance(formula, str) else None, getattr(args, "file", None),
                    weights=getattr(args, "weights", None), by=(by or None), cluster=getattr(args, "cluster", None))
    settings = Settings(horizon=getattr(args, "horizon", None), prevalence=getattr(args, "prevalence", None),
                        method=getattr(args, "method", "adjusted"), null=getattr(args, "null", "auto"))
    return Design.resolve(analysis, inputs, settings)


def _ci_needs_rows(args) -> bool:
    """Whether ``ci``'s options need the rows in memory (see :data:`_CI_ROW_OPTIONS`: the design's
    ``needs_rows``); otherwise the file is streamed, ``--by`` included (per-group bin sums): only the per-bin sums
    are kept, so memory is bounded by the chunk size, not the file."""
    return _design(args, "calib_ci").needs_rows


def _cmd_ci(args) -> int:
    from calibtest.api.calib_ci import calib_ci

    # streamed unless an option needs the rows; --chunksize with such an option reaches calib_ci, which says why
    data, stream = _read_input(args, stream=args.chunksize is not None or not _ci_needs_rows(args))
    keywords = {**_model_keywords(args), **stream, **_resampling_options(args), **_null_options(args)}
    keywords.update(_population_options(args))
    keywords.update(_survival_options(args))
    res = calib_ci(args.formula, data=data, **keywords)
    return _print_result(res, args.json)


def _add_ci_parser(sub, shared) -> None:
    ci = sub.add_parser("ci", help="interval and test for one model's calibration error", n_formulas=1,
                        parents=[shared["one_formula"], shared["model"], shared["json"], shared["weighting"],
                                 shared["survival"]], epilog=f"{combinations_text('calib_ci')}. {_EPILOG}")
    ci.add_argument("file", help="CSV or Parquet file with outcomes and predictions; streamed in chunks of "
                                 f"--chunksize rows (only the formula's columns are read), except that "
                                 f"{_CI_ROW_OPTIONS} read the whole file into memory")
    OPTIONS["chunksize"].add_to(ci, help="stream the file in chunks of this many rows (default "
                                         f"{DEFAULT_CHUNKSIZE}; working memory grows with it)")
    OPTIONS["method"].add_to(ci)
    OPTIONS["n_resamples"].add_to(ci)
    OPTIONS["rng"].add_to(ci, help="seed of a resampling method or the Monte Carlo null")
    OPTIONS["null"].add_to(ci)
    ci.add_argument("--by", action="append", default=None, metavar="COLUMN",
                    help="analyse each subgroup of this column (repeat for crossed groups): per-group intervals, "
                         "the global and the heterogeneity tests")
    ci.set_defaults(func=_cmd_ci)


# ----------------------------------------------------------------------------- test
def _cmd_test(args) -> int:
    from calibtest.api.calib_test import calib_test

    _refuse_survival(args, "calibtest test (the multi-scale test)")
    path, stream = _read_input(args, stream=True)
    res = calib_test(args.formula, data=path, n_classes=args.n_classes, alpha=args.alpha, n_bins=args.scales,
                     n_draws=args.n_draws, rng=args.seed, missing=args.missing, eval_env=formula_namespace(),
                     null=args.test_null, **stream)
    return _print_result(res, args.json)


def _add_test_parser(sub, shared) -> None:
    te = sub.add_parser("test", help="multi-scale test of calibration (binary or top-1; the file streamed)",
                        n_formulas=1, parents=[shared["one_formula"], shared["json"]], epilog=_EPILOG)
    te.add_argument("file", help="CSV or Parquet file with outcomes and predictions; streamed in chunks of "
                                 "--chunksize rows (only the formula's columns are read)")
    OPTIONS["n_classes"].add_to(te)
    OPTIONS["scales"].add_to(te, "--bins", "--scales", dest="scales")
    OPTIONS["alpha"].add_to(te)
    OPTIONS["rng"].add_to(te, help="seed of the label draws (default: 0, recorded in the output)")
    OPTIONS["n_draws"].add_to(te, "--n-draws", "--draws", dest="n_draws")
    OPTIONS["test_null"].add_to(te, "--null", "--test-null", dest="test_null")
    OPTIONS["chunksize"].add_to(te, help="stream the file in chunks of this many rows (default "
                                         f"{DEFAULT_CHUNKSIZE}; the p-value does not depend on it)")
    OPTIONS["missing"].add_to(te)
    te.set_defaults(func=_cmd_test)


# ----------------------------------------------------------------------------- sample-size
#: Name of the placeholder outcome that lets a one-sided formula ("~ p") name the prediction columns.
_NO_OUTCOME = "_calibtest_no_outcome_"


def _cmd_sample_size(args) -> int:
    import numpy as np

    from calibtest.inputs.formula import parse_formula, resolve_env
    from calibtest.api.sample_size import calib_sample_size

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
            raise DataError(f"the prediction column(s) {', '.join(parsed.prob_names)} hold missing values in "
                            f"{int(missing.sum())} rows (first at row {int(np.argmax(missing))}); use "
                            "--missing drop to drop them")
        probs = probs[~missing]
    probs = probs[:, 0] if probs.shape[1] == 1 else probs
    res = calib_sample_size(probs=probs, intercept=args.intercept, slope=args.slope, power=args.power,
                            ci_width=args.ci_width, alpha=args.alpha, n_bins=args.bins,
                            k=1 if args.k is None else args.k, n_classes=args.n_classes, method=args.method,
                            n_sim=args.n_sim, rng=args.seed, censored_fraction=args.censored_fraction,
                            margin=args.margin, precision=_precision_targets(args.precision),
                            acceptance=args.acceptance)
    return _print_result(res, args.json)


def _precision_targets(items) -> dict | None:
    """``--precision MEASURE=SE`` options as ``{measure: standard error}`` (None when none is given)."""
    if not items:
        return None
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise OptionError(f"--precision must be MEASURE=SE (measure one of oe, citl, slope, c), got {item!r}")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise OptionError(f"--precision {key.strip()}: the standard error must be a number, got {value!r}") from None
    return out


def _add_sample_size_parser(sub, shared) -> None:
    ss = sub.add_parser("sample-size", help="sample size of a validation study (power or interval width)",
                        n_formulas=1, parents=[shared["one_formula"], shared["model"], shared["json"]],
                        epilog=_EPILOG)
    ss.add_argument("file", help='CSV or Parquet file whose predictions stand for the study population (formula '
                                 '"~ p"; read whole into memory)')
    target = ss.add_mutually_exclusive_group()
    target.add_argument("--power", type=float, default=None,
                        help="target power of the test of calibration (with --margin: of the margin test)")
    target.add_argument("--ci-width", type=float, default=None,
                        help="target expected width of the ECE-scale interval")
    OPTIONS["margin"].add_to(ss, help="plan the margin test of H0: ECE >= MARGIN instead: n at which the ECE's upper "
                                      "bound falls below MARGIN with probability --power (calibrated model unless "
                                      "--intercept/--slope)")
    ss.add_argument("--precision", action="append", default=None, metavar="MEASURE=SE",
                    help="target standard error of a measure (repeat for several): oe (of ln O/E), citl, slope, c; "
                         "n is the largest of the sizes (Riley et al. 2021) and the --power/--ci-width one")
    OPTIONS["acceptance"].add_to(ss, dest="acceptance", help="acceptance criterion KEY=VALUE (repeat for several; as plan --accept): "
                                          "the simulated power of the criteria taken together at n (--n-sim studies, "
                                          "--seed)")
    ss.add_argument("--intercept", type=float, default=0.0,
                    help="anticipated calibration intercept: E[y|p] = expit(a + b logit p) (default 0)")
    ss.add_argument("--slope", type=float, default=1.0, help="anticipated calibration slope b (default 1)")
    OPTIONS["study_method"].add_to(ss, dest="method")
    OPTIONS["censored_fraction"].add_to(ss)
    OPTIONS["n_sim"].add_to(ss)
    OPTIONS["rng"].add_to(ss, help="seed of the simulation")
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
    from calibtest.api.calib_compare import calib_compare

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
    for option in ("title", "purpose", "metadata", "plan", "templates"):
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
    if args.cluster is not None:
        parts += ["--cluster", args.cluster]
    if args.seed is not None:
        parts += ["--seed", str(args.seed)]
    if args.chunksize is not None:
        parts += ["--chunksize", str(args.chunksize)]
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
    from calibtest.api.calib_ci import calib_ci
    from calibtest.inputs.plan import AnalysisPlan
    from calibtest.reporting.document import check_report_path, load_metadata
    from calibtest.reporting.html import file_provenance, report

    check_report_path(args.output, "-o/--output")  # as report() checks its path: before the file is read
    models = _report_models(args)
    metadata = load_metadata(args.metadata) if args.metadata is not None else None
    plan = None
    if args.plan is not None:
        if not os.path.isfile(args.plan):
            raise OptionError(f"--plan: file not found: {args.plan}")
        plan = AnalysisPlan.read(args.plan)
        if plan.cluster is not None and args.cluster is None:  # the planned clusters, unless named on the line
            args.cluster = plan.cluster
    reasons = _deviation_reasons(args.deviation_reason)
    if reasons and plan is None:
        raise OptionError("--deviation-reason needs --plan: without a plan there is nothing to deviate from")
    streamed = args.chunksize is not None
    design = _design(args, "calib_ci", args.formula[0] if isinstance(args.formula, list) else args.formula)
    if streamed and (design.grouped or design.weighted):
        raise OptionError("--chunksize streams the file, and --by, --weights and --prevalence need its rows in "
                          "memory: leave out --chunksize, or those options")
    df, chunks = _read_input(args, stream=streamed)
    source = file_provenance(args.file)
    population = _population_options(args)
    survival = _survival_options(args)
    if survival and streamed:
        raise OptionError("--chunksize streams the file, and --horizon needs its rows in memory (the censoring "
                          "weights): leave out --chunksize")
    results = [calib_ci(formula, data=df, **_model_keywords(args), **chunks, method=args.method, **population,
                        **survival)
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
                      rng=args.seed, deviation_reasons=reasons or None, templates=args.templates,
                      meta_method=args.meta_method, hartung_knapp=args.hartung_knapp)
    except ImportError as exc:
        _fail(str(exc))
    print(f"calibtest: wrote {path}")
    return 0


def _add_report_parser(sub, shared) -> None:
    rep = sub.add_parser("report", help="write an HTML or PDF validation report of one or more models",
                         parents=[shared["formula"], shared["model"], shared["weighting"], shared["survival"]],
                         epilog='e.g. calibtest report preds.csv --model "old=y ~ p_old" --model "new=y ~ p_new" '
                                "--compare old,new --metadata meta.toml --plan plan.json -o report.pdf; "
                                + _EPILOG)
    rep.add_argument("file", help="CSV or Parquet file with outcomes and predictions (read whole into memory, "
                                  "or in chunks with --chunksize)")
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
    OPTIONS["templates"].add_to(rep, metavar="DIR")
    OPTIONS["hl_groups"].add_to(rep)
    OPTIONS["rng"].add_to(rep, help="seed of the evidence table's multi-scale test and of the Monte Carlo draws of "
                                    "--by or --prevalence (default: each result's recorded seed)")
    rep.add_argument("--by", action="append", default=None, metavar="COLUMN",
                     help="add a subgroup section for the groups of this column (repeat for crossed groups): "
                          "per-group intervals, forest plot, the global and the heterogeneity tests")
    OPTIONS["meta_method"].add_to(rep, help="with --by: estimator of the between-site variance tau^2 in the "
                                            "section 'Calibration across sites' (REML, DL or PM; default REML)")
    OPTIONS["hartung_knapp"].add_to(rep, help="with --by: Hartung-Knapp intervals (t on k - 1 df) of the pooled "
                                              "estimates across sites")
    OPTIONS["method"].add_to(rep)
    OPTIONS["chunksize"].add_to(rep, help="stream the file in chunks of this many rows instead of reading it whole "
                                          "(bounded memory): the interval, the evidence table, Hosmer-Lemeshow, "
                                          "the validation fits and the --compare comparisons are computed in "
                                          "passes over the file (binary and top-1 targets); the figures and statistics that need every row at once "
                                          "(flexible curve, C index, lowess/loess) are left out, as the report says")
    rep.set_defaults(func=_cmd_report)


# ----------------------------------------------------------------------------- plan
def _cmd_plan(args) -> int:
    from calibtest.inputs.plan import plan

    if not args.output.lower().endswith(".json"):
        raise OptionError(f"-o/--output must end in .json, got {args.output!r}")
    sample_size = None
    if args.sample_size is not None:
        if not os.path.isfile(args.sample_size):
            raise OptionError(f"--sample-size: file not found: {args.sample_size}")
        try:
            with open(args.sample_size, "rb") as fh:
                sample_size = json.loads(fh.read().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DataError(f"--sample-size {args.sample_size}: not UTF-8 text (byte {exc.start}: "
                            f"{exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"--sample-size {args.sample_size}: invalid JSON ({exc})") from None
    options = {name: getattr(args, name) for name in PLAN_SCHEMA if name != "sample_size"}
    out = plan(args.output, **options, sample_size=sample_size)
    print(f"calibtest: wrote {args.output} (SHA-256 {out.sha256}, created {out.created})")
    return 0


def _add_plan_parser(sub, shared) -> None:
    pl = sub.add_parser("plan", help="write a pre-specified analysis plan (JSON with its SHA-256)",
                        epilog="e.g. calibtest plan -o plan.json --alpha 0.05 --n-bins auto "
                               "--tests calib_ci,hosmer_lemeshow; " + _EPILOG)
    pl.add_argument("-o", "--output", required=True, help="the plan file to write (.json)")
    helps = {"n_bins": "bins per dimension ('adaptive': the multi-scale test chooses the scale)",
             "tests": "comma-separated tests to report: " + ", ".join(PLAN_TESTS),
             "subgroups": "comma-separated subgroup columns"}
    for name, option in PLAN_SCHEMA.items():  # every option a plan file holds, as the file spells its values
        if name == "sample_size":
            continue
        flags = ("--n-bins", "--bins") if name == "n_bins" else ()
        extra = {"help": helps[name] + ("" if option.default is None else
                                        f"; {option.allowed(cli=True)} (default {option.default})")} \
            if name in helps else {}
        option.add_to(pl, *flags, dest=name, **extra)
    pl.add_argument("--sample-size", default=None, metavar="FILE",
                    help="JSON file with a sample-size calculation to store in the plan")
    pl.set_defaults(func=_cmd_plan)


# ----------------------------------------------------------------------------- tcal
def _cmd_tcal(args) -> int:
    from calibtest.api.tcal_test import tcal_test

    _refuse_survival(args, "calibtest tcal (the T-Cal test)")
    df, _ = _read_input(args)
    res = tcal_test(args.formula, data=df, **_model_keywords(args), n_draws=args.draws, adaptive=args.adaptive,
                    rng=args.seed)
    return _print_result(res, args.json)


def _add_tcal_parser(sub, shared) -> None:
    tc = sub.add_parser("tcal", help="T-Cal test of calibration (consistency-resampling threshold)", n_formulas=1,
                        parents=[shared["one_formula"], shared["model"], shared["json"]], epilog=_EPILOG)
    tc.add_argument("file", help="CSV or Parquet file with outcomes and predictions (read whole into memory)")
    OPTIONS["n_draws"].add_to(tc, default=None, dest="draws",
                              help="Monte Carlo resamples per scale (default: at least 3000, and enough for every "
                                   "scale to be able to reject at --alpha)")
    OPTIONS["adaptive"].add_to(tc)
    OPTIONS["rng"].add_to(tc, help="random seed")
    tc.set_defaults(func=_cmd_tcal)


# ----------------------------------------------------------------------------- compare
def _cmd_compare(args) -> int:
    from calibtest.api.calib_compare import calib_compare

    path, stream = _read_input(args, stream=True)  # two passes of sums; the rows are never held
    formula_a, formula_b = args.formula
    res = calib_compare(formula_a, formula_b, data=path, **_model_keywords(args), **stream,
                        alternative=args.alternative, variance=args.variance)
    return _print_result(res, args.json)


def _add_compare_parser(sub, shared) -> None:
    cmp = sub.add_parser("compare", help="test whether two models' calibration errors differ (paired)",
                         n_formulas=2, parents=[shared["formula"], shared["model"], shared["json"]],
                         epilog='e.g. calibtest compare preds.csv --formula "y ~ p_old" --formula "y ~ p_new"; '
                                + _EPILOG)
    cmp.add_argument("file", help="CSV or Parquet file with the outcomes and both models' predictions; streamed "
                                  "in chunks of --chunksize rows in two passes (only the formulas' columns are "
                                  "read): memory does not grow with the rows")
    OPTIONS["chunksize"].add_to(cmp, help="stream the file in chunks of this many rows (default "
                                          f"{DEFAULT_CHUNKSIZE}; working memory grows with it)")
    cmp.add_argument("--formula-a", default=None, help="alias: model A, the same as the first --formula")
    cmp.add_argument("--formula-b", default=None, help="alias: model B, the same as the second --formula")
    OPTIONS["alternative"].add_to(cmp)
    OPTIONS["variance"].add_to(cmp)
    cmp.set_defaults(func=_cmd_compare)


# ----------------------------------------------------------------------------- monitor
_MONITOR_EPILOG = ("e.g. calibtest monitor batches/ --formula 'y ~ p' --state s.json --model risk-v2 "
                   "--report monitoring.html; exit status: 0 no alarm; 3 an alarm: the e-process has crossed "
                   "1/alpha (at any look so far) or the change detector is in alarm at the last batch; 1 an error "
                   "in the data or the files; 2 a usage error.  On an error the state file is left as it was.")


def _batch_files(paths) -> list:
    """The CSV/Parquet files named, a folder standing for the data files in it; sorted by name."""
    from pathlib import Path

    from calibtest.streams.files import file_format

    files = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files += [f for f in path.iterdir() if f.is_file() and _is_data_file(f)]
        elif path.is_file():
            file_format(path, None)
            files.append(path)
        else:
            _fail(f"file not found: {given}")
    if not files:
        _fail("no batch files (.csv or .parquet) in " + ", ".join(map(str, paths)))
    return sorted(set(files), key=lambda f: (f.name, str(f)))


def _is_data_file(path) -> bool:
    from calibtest.streams.files import file_format

    try:
        file_format(path, None)
    except ValueError:
        return False
    return True


def _file_time(path, column: str):
    """A batch file's time stamp: the latest value of ``column`` in it."""
    import pandas as pd

    from calibtest.streams.files import file_format

    if file_format(path, None) == "csv":
        values = pd.read_csv(path, usecols=[column])[column]
    else:
        import pyarrow.parquet as pq
        values = pq.read_table(path, columns=[column]).to_pandas()[column]
    if values.isna().all():
        _fail(f"{path.name}: the time column {column!r} holds no value")
    values = values.dropna()
    return values.max() if values.dtype.kind in "iufM" else pd.to_datetime(values).max()


def _monitor_state(args):
    from calibtest.monitor.monitor import CalibrationMonitor

    fresh = CalibrationMonitor(args.formula, n_classes=args.n_classes, alpha=args.alpha, n_bins=args.ece_bins,
                               margin=args.margin, arl=args.arl, odds_ratio=args.odds_ratio, model=args.model,
                               rng=args.seed, eval_env=formula_namespace(), missing=args.missing,
                               chunksize=args.chunksize)
    if not os.path.exists(args.state):
        return fresh, None
    mon = CalibrationMonitor.load(args.state, like=fresh, eval_env=formula_namespace())
    with open(args.state, encoding="utf-8") as fh:
        last_file = json.load(fh).get("cli", {}).get("last_file")
    return mon, last_file


def _look_line(name: str, rec: dict) -> str:
    flags = [w for w, on in (("ALARM", rec["alarm"]), ("CHANGE", rec["detector_alarm"]),
                             ("RA-CUSUM", rec["ra_alarm"])) if on]
    ece = "" if rec["ece_below"] is None else (" <margin" if rec["ece_below"] else " >=margin")
    return (f"look {rec['look']} {name} n={rec['n']} E={rec['e_value']:.4g} p={rec['p_value']:.4g} "
            f"CITL=[{rec['citl_lower']:.4g}, {rec['citl_upper']:.4g}] O/E=[{rec['oe_lower']:.4g}, "
            f"{rec['oe_upper']:.4g}] ECE<={rec['ece_upper']:.4g}{ece} detector={rec['detector']:.4g} "
            f"change_look={rec['change_look']} RA+={rec['ra_up']:.3g} RA-={rec['ra_down']:.3g}"
            + (" " + " ".join(flags) if flags else ""))


def _monitor_report_inputs(args):
    """``--report``'s path and ``--metadata``, checked before any batch is read (a bad one changes nothing)."""
    from calibtest.reporting.document import check_report_path, load_metadata

    if args.report is None:
        if args.metadata is not None or args.title is not None:
            raise OptionError("--metadata and --title are for the report: give --report PATH too")
        return None
    check_report_path(args.report, "--report")
    if args.report.lower().endswith(".pdf"):
        from calibtest.reporting.html import _import_weasyprint
        try:
            _import_weasyprint()
        except ImportError as exc:
            _fail(str(exc))
    return load_metadata(args.metadata) if args.metadata is not None else None


def monitor_command(args) -> str:
    """The command line of a ``calibtest monitor`` run, as its report shows it."""
    parts = ["calibtest", "monitor", *map(str, args.paths), "--formula", args.formula, "--state", args.state]
    for option in ("time", "n_classes", "alpha", "ece_bins", "margin", "arl", "odds_ratio", "model", "seed",
                   "chunksize", "report", "metadata", "title"):
        value = getattr(args, option)
        if value is not None:
            parts += ["--" + option.replace("_", "-"), str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _cmd_monitor(args) -> int:
    metadata = _monitor_report_inputs(args)
    files = _batch_files(args.paths)
    mon, last_file = _monitor_state(args)
    if args.time:
        stamped = sorted(((_file_time(f, args.time), f) for f in files), key=lambda tf: tf[0])
        last = mon.result().looks["time"].iloc[-1] if mon.result().n_looks else None
        todo = [(t, f) for t, f in stamped if last is None or _after(t, last)]
    else:
        todo = [(None, f) for f in files if last_file is None or f.name > last_file]
    for f in files:
        if f not in {g for _, g in todo}:
            print(f"skip {f.name} (already in the state)")
    record = None
    with progress_bar(len(todo), "monitor", unit="file", work=len(todo), min_work=MONITOR_PROGRESS_FILES) as bar:
        for stamp, f in todo:  # a bar on an interactive terminal over many files; each look's line above it
            record = mon.update(str(f), time=stamp)
            bar.write(_look_line(f.name, record))
            bar.update()
    state = mon.to_json()
    state["cli"] = {"last_file": todo[-1][1].name if todo else last_file}
    tmp = args.state + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh, separators=(",", ":"))
    os.replace(tmp, args.state)
    res = mon.result()
    if args.json:
        print(json.dumps(res.to_dict()))
    if args.report is not None:
        from calibtest.reporting.monitor_report import monitor_report

        path = monitor_report(res, args.report, title=args.title, metadata=metadata, command=monitor_command(args))
        print(f"calibtest: wrote {path}")
    alarm = res.alarm or res.detector_alarm
    return EXIT_STATUSES["monitor alarm"] if alarm else 0


def _after(stamp, last) -> bool:
    from calibtest.monitor.batches import time_value
    import pandas as pd

    value = time_value(stamp)
    if isinstance(value, (int, float)):
        return value > last
    return pd.Timestamp(value) > pd.Timestamp(last)


def _add_monitor_parser(sub, shared) -> None:

    mo = sub.add_parser("monitor", help="monitor calibration batch by batch (anytime-valid alarms; state in a file)",
                        n_formulas=1, parents=[shared["one_formula"], shared["json"]], epilog=_MONITOR_EPILOG)
    mo.add_argument("paths", nargs="+", metavar="DIR_OR_FILES",
                    help="batch files (CSV or Parquet), or folders of them; processed in time order: by file name, "
                         "or by --time")
    mo.add_argument("--state", required=True, metavar="STATE.json",
                    help="the monitor's state file: read when it exists (its settings must match), written after "
                         "the batches (files already in it are skipped)")
    mo.add_argument("--time", default=None, metavar="COLUMN",
                    help="column holding each batch's time (the batch's time stamp is its latest value)")
    OPTIONS["n_classes"].add_to(mo)
    OPTIONS["alpha"].add_to(mo)
    OPTIONS["ece_bins"].add_to(mo)
    OPTIONS["margin"].add_to(mo, help="ECE margin delta: report when the ECE bound falls below it")
    mo.add_argument("--arl", type=float, default=None, help="in-control average run length, in batches, of the "
                                                            "change detector and the RA-CUSUM (default 1/alpha)")
    mo.add_argument("--odds-ratio", type=float, default=2.0, help="odds ratio R_A of the RA-CUSUM (default 2)")
    mo.add_argument("--model", default=None, help="identifier of the deployed model, stored in the state file")
    OPTIONS["rng"].add_to(mo, help="seed of the RA-CUSUM's simulated threshold (default 0)")
    OPTIONS["chunksize"].add_to(mo)
    OPTIONS["missing"].add_to(mo)
    mo.add_argument("--report", default=None, metavar="PATH",
                    help="write the monitoring report after the batches: .html, or .pdf (needs calibtest[pdf]): "
                         "the plan, the statistics over time, every look, the alarms and the guarantee; a path "
                         "that cannot be written is refused before any batch is read")
    mo.add_argument("--metadata", default=None, metavar="FILE",
                    help="document control of the report (.json or .toml, as for 'calibtest report')")
    mo.add_argument("--title", default=None, help="the report's title")
    mo.set_defaults(func=_cmd_monitor)


# ----------------------------------------------------------------------------- demo
def _cmd_demo(args) -> int:
    from calibtest.datasets import load_demo
    from calibtest.api.calib_ci import calib_ci

    res = calib_ci("y ~ p", data=load_demo())
    print("calibtest demo: calibration of a logistic risk model on held-out data "
          "(see calibtest/data/README.md)\n")
    return _print_result(res)


def build_parser() -> argparse.ArgumentParser:
    """The ``calibtest`` parser with every subcommand."""
    parser = _Parser(prog="calibtest",
                     description="Confidence intervals and tests for the l2 expected calibration error.",
                     epilog=_EPILOG)
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", required=True)
    shared = _shared_options()
    _add_ci_parser(sub, shared)
    _add_report_parser(sub, shared)
    _add_tcal_parser(sub, shared)
    _add_test_parser(sub, shared)
    demo = sub.add_parser("demo", help="run calibtest on the packaged example data", epilog=_EPILOG)
    demo.set_defaults(func=_cmd_demo)
    _add_compare_parser(sub, shared)
    _add_sample_size_parser(sub, shared)
    _add_plan_parser(sub, shared)
    _add_monitor_parser(sub, shared)
    return parser


#: Python argument names and their command-line spellings, for messages.
_SPELLINGS = {**{name: OPTIONS[name].cli for name in (
    "n_bins", "n_classes", "n_resamples", "n_draws", "n_null_draws", "rng", "alpha", "missing", "method", "null",
    "k", "chunksize", "prevalence", "n_sim", "alternative", "variance", "horizon", "censoring",
    "censoring_covariates", "cause", "cluster", "censored_fraction", "margin")}, "formula": "--formula",
    "power": "--power", "ci_width": "--ci-width", "precision": "--precision"}


def cli_spelling(message: str) -> str:
    """``message`` with Python spellings of options replaced by the command line's.

    ``missing='drop'`` becomes ``--missing drop`` and ``n_bins must ...``
    becomes ``--bins must ...``; other text is left alone.
    """
    def option_value(m):
        name, value = m.group(1), m.group(2)
        if name not in _SPELLINGS:
            return m.group(0)
        return f"{_SPELLINGS[name]} {value}" if value else _SPELLINGS[name]  # "horizon= needs" -> "--horizon needs"

    names = "|".join(sorted(_SPELLINGS, key=len, reverse=True))
    message = re.sub(r"\bdeviation_reasons\[['\"](\w+)['\"]\]", r"--deviation-reason \1", message)
    message = message.replace("deviation_reasons", "--deviation-reason")
    message = re.sub(rf"\b({names})=['\"]?([^'\",)\s]*)['\"]?", option_value, message)
    message = re.sub(r"\bcalib_ci\(\.\.\., (--[\w-]+(?: [^)\s]+)?)\)", r"\1", message)  # "calib_ci(..., --horizon t)"
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
    """Run the command line; return the exit status (:data:`EXIT_STATUSES`: 0 success, 1 data or file error,
    2 usage error, 141 output pipe closed)."""
    try:
        args = build_parser().parse_args(argv)
        try:
            status = args.func(args)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
            return status
        except BrokenPipeError:
            raise
        except Exception as exc:
            if args.debug:
                raise
            usage = isinstance(exc, (OptionError, OptionTypeError))
            print(f"calibtest: error: {cli_spelling(_message(exc))}", file=sys.stderr)
            return EXIT_USAGE if usage else EXIT_DATA
    except BrokenPipeError:
        # the reader went away (``calibtest demo | head -2``): end quietly; stdout goes to devnull so that
        # the interpreter's final flush does not complain either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_STATUSES["output pipe closed"]


class _Version(argparse.Action):
    """``--version``: print ``calibtest <version>`` and exit (the version is looked up only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from calibtest._version import package_version
        text = package_version()
        print(f"calibtest {text}")
        parser.exit()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
