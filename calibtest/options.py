"""The options of calibtest, declared once: name, type, allowed values, default and a one-line doc.

Everything that checks, writes or parses an option is built from the table
:data:`OPTIONS` (in the manner of scikit-learn's ``_parameter_constraints``):

* the argument checks of the public functions (:func:`check_option`, used by
  :mod:`calibtest.inputs.validation` and the entry points);
* the plan file's schema (:data:`PLAN_SCHEMA`: what :func:`calibtest.plan`
  writes and :meth:`calibtest.AnalysisPlan.read` accepts);
* the command line's options (:meth:`Option.add_to` gives argparse its
  ``type``, ``choices``, ``default`` and help text).

So a value one of them writes, the others accept: ``plan(..., null="auto")``
writes ``"null": "auto"``, which ``calibtest plan --null auto`` and
``calib_ci(null="auto")`` both take.

The exception family is defined here too: :class:`OptionError` (an option
out of range, a ``ValueError``), :class:`OptionTypeError` (an option of the
wrong type, a ``TypeError``) and :class:`DataError` (bad rows, columns or
input files, a ``ValueError``).  The command line exits with
:data:`EXIT_USAGE` (2) for option errors and argparse's usage errors, and
with :data:`EXIT_DATA` (1) for errors in the data or the files.

This module imports only the standard library, so the command line's
``--help`` and ``--version`` stay fast and every layer may use it.
"""
from __future__ import annotations

import math
import numbers
import os
import sys
from typing import cast
from dataclasses import dataclass, replace

__all__ = ["OptionError", "OptionTypeError", "DataError", "EXIT_OK", "EXIT_DATA", "EXIT_USAGE", "Option",
           "OPTIONS", "PLAN_SCHEMA", "PLAN_TESTS", "ACCEPTANCE_CRITERIA", "ACCEPTANCE_LABELS", "check_criteria",
           "criterion_text", "check_option", "check_options", "is_bool", "is_integer",
           "MISSING_OPTIONS", "NULLS", "DEFAULT_NULL", "DEFAULT_DRAWS", "DEFAULT_SEED", "METHODS", "RESAMPLING_METHODS", "MAX_BYTES",
           "check_alpha", "check_count", "check_seed", "check_bool", "check_choice", "check_missing", "check_null",
           "check_method", "check_memory", "format_bytes", "BIN_COUNT", "survival_refusal"]


# ----------------------------------------------------------------------------- the exception family
class OptionError(ValueError):
    """An option (argument other than the data) has an invalid value.

    A ``ValueError``, so ``except ValueError`` catches it; the command line
    reports it as a usage error (exit status 2), unlike errors in the data.
    """


class OptionTypeError(TypeError):
    """An option has a value of the wrong type (a ``TypeError``; a usage error on the command line)."""


class DataError(ValueError):
    """The data cannot be used as given: a missing column, missing values, rows of the wrong shape, an
    undecodable input file (a ``ValueError``; exit status 1 on the command line)."""


#: Why a test of binary labels takes no survival outcome: the one text of :func:`survival_refusal` and of the
#: table of combinations (:data:`calibtest.inputs.design.RULES`).
SURVIVAL_REFUSAL = ("{what} draws or tests binary labels, which rows censored before the horizon do not have: for a "
                    "survival outcome use {ci} (the IPCW interval and test) or {report} (with the survival evidence)")


def survival_refusal(what: str, *, ci: str = "calib_ci('Surv(time, event) ~ risk', data=..., horizon=t)",
                     report: str = "that result's evidence() or report()") -> OptionError:
    """The error of a test that draws or tests binary labels when it is given a survival outcome.

    The one explanation of why calib_test, evidence and tcal_test (and the
    command line's ``test`` and ``tcal``) take no survival outcome; ``ci``
    and ``report`` name the way out as the caller spells it (Python calls by
    default, ``calibtest ci --horizon T ...`` on the command line).

    Parameters
    ----------
    what : str
        The test refused, e.g. ``"calib_test (the multi-scale test)"``.
    ci, report : str
        How to get the IPCW interval and test, and the survival evidence.

    Returns
    -------
    OptionError
    """
    return OptionError(SURVIVAL_REFUSAL.format(what=what, ci=ci, report=report))


#: Exit statuses of the command line: success, an error in the data or files, a usage (option) error.
EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2


# ----------------------------------------------------------------------------- kinds of values
def is_bool(value) -> bool:
    """True for ``bool`` and ``numpy.bool_`` (which must not pass as numbers); numpy is not imported."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"))


def is_integer(value) -> bool:
    """True for Python and numpy integers, False for booleans."""
    return not is_bool(value) and isinstance(value, numbers.Integral)


#: The kinds of option: how a value is checked and how the command line parses its text.
KINDS = ("level", "count", "choice", "names", "seed", "flag", "mapping", "number", "folder", "criteria", "column")

#: The acceptance criteria a plan can fix (``acceptance=`` of :func:`calibtest.plan`, ``--accept`` of the command
#: line): key -> (what the limit is, the test that decides it).  ``ece_below`` is a margin delta > 0 on the ECE
#: scale (H1: ECE < delta); the others are limits (l, u) of a two-sided equivalence (TOST) test, ``citl_within``
#: also a single a > 0 meaning (-a, a), ``oe_within`` with 0 < l.
ACCEPTANCE_CRITERIA = {
    "ece_below": ("a margin delta > 0 on the ECE scale", "margin_test"),
    "citl_within": ("a > 0 (meaning -a < CITL < a) or a pair l,u", "citl_test"),
    "slope_within": ("a pair l,u", "slope_test"),
    "oe_within": ("a pair l,u with 0 < l", "oe_test"),
}
#: How reports name the acceptance criteria (followed by the limit, :func:`criterion_text`).
ACCEPTANCE_LABELS = {"ece_below": "ECE below", "citl_within": "CITL within", "slope_within": "Calibration slope within",
                     "oe_within": "O/E within"}


def criterion_text(key: str, limit) -> str:
    """``"ECE below 0.05"``, ``"Calibration slope within (0.8, 1.25)"``: a criterion and its limit in words."""
    shown = f"{limit:g}" if key == "ece_below" else f"({limit[0]:g}, {limit[1]:g})"
    return f"{ACCEPTANCE_LABELS[key]} {shown}"


@dataclass(frozen=True)
class Option:
    """One option: its name, kind, allowed values, default and a one-line doc.

    Attributes
    ----------
    name : str
        The option's key in :data:`OPTIONS`: the keyword of the public
        functions (``n_bins``), or a qualified name where two functions give
        one keyword different meanings (``study_method`` is the ``method`` of
        :func:`calibtest.calib_sample_size`, ``hl_groups`` the ``groups`` of
        :func:`calibtest.hosmer_lemeshow`).
    kind : str
        ``"level"`` (a number in the open interval (0, 1)), ``"count"`` (an
        integer >= ``minimum`` and <= ``maximum`` when given, or one of
        ``choices``), ``"number"`` (a finite real number), ``"choice"`` (one of
        ``choices``), ``"names"`` (a list of distinct strings, from
        ``choices`` when given), ``"seed"`` (None or an integer >= 0; a
        ``numpy.random.Generator`` is accepted by the functions, not by files
        or the command line), ``"flag"`` (True or False), ``"mapping"`` (a
        dict of JSON values), ``"folder"`` (the path of an existing
        directory: a ``str`` or path-like; canonical form ``str``),
        ``"column"`` (a column name of ``data``, or one value per row as a
        one-dimensional array, list or Series: its values are checked with
        the rows, :mod:`calibtest.inputs.rows`).
    default : object
        The default of the public functions, the plan and the command line.
    doc : str
        One line, used as the command line's help text.
    choices : tuple of str
        Allowed strings (for a ``"count"``, the words allowed besides integers,
        such as ``"auto"``).
    minimum : int
        Smallest integer of a ``"count"``.
    nullable : bool
        Whether ``None`` is allowed (its meaning is in ``doc``).
    flag : str or None
        The command line's spelling (default ``--`` and the name with dashes).
    maximum : int or None
        Largest integer of a ``"count"`` (None: no upper bound).
    """

    name: str
    kind: str
    default: object
    doc: str
    choices: tuple = ()
    minimum: int = 1
    nullable: bool = False
    flag: str | None = None
    maximum: int | None = None
    positive: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def cli(self) -> str:
        """The command line's spelling of the option (``--n-bins``)."""
        return self.flag or "--" + self.name.replace("_", "-")

    def allowed(self, cli: bool = False) -> str:
        """The allowed values, in words (for messages; ``cli``: as typed on the command line, without None)."""
        if self.kind == "level":
            text = "a number in the open interval (0, 1)"
        elif self.kind == "count":
            bound = (f"an integer from {self.minimum} to {self.maximum}" if self.maximum is not None
                     else f"an integer >= {self.minimum}")
            text = " or ".join([bound] + [repr(c) for c in self.choices])
        elif self.kind == "number":
            text = "a finite number"
        elif self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.kind == "names":
            text = "a list of distinct strings" + (" from " + ", ".join(self.choices) if self.choices else "")
        elif self.kind == "seed":
            text = "an int seed >= 0"
        elif self.kind == "flag":
            return "True, False or None" if self.nullable and not cli else "True or False"
        elif self.kind == "folder":
            text = "the path of an existing directory"
        elif self.kind == "criteria":
            text = "criteria KEY=VALUE with KEY one of " + ", ".join(ACCEPTANCE_CRITERIA)
        elif self.kind == "column":
            text = "a column name" if cli else "a column name or one value per row (array_like)"
        else:
            text = "a dict of JSON values"
        return ("None or " + text) if self.nullable and not cli else text

    # ------------------------------------------------------------------ checks
    def check(self, value, name: str | None = None):
        """``value`` in canonical form (Python int/float/str/tuple), or an :class:`OptionError` /
        :class:`OptionTypeError` naming the option (``name`` overrides the name in messages)."""
        name = name or self.name
        if value is None and self.nullable:
            return None
        kind = self.kind
        if kind == "level":
            if is_bool(value) or not isinstance(value, numbers.Real):
                raise OptionTypeError(f"{name} must be a number in (0, 1), got {type(value).__name__}")
            value = float(value)
            if not (0.0 < value < 1.0):
                raise OptionError(f"{name} must be in the open interval (0, 1), got {value}")
            return value
        if kind == "count":
            kinds = " or ".join(["an integer"] + [repr(c) for c in self.choices])  # the bound comes next
            if isinstance(value, str) and self.choices:
                if value in self.choices:
                    return value
                raise OptionError(f"{name} must be {kinds}, got {value!r}")
            if not is_integer(value):
                raise OptionTypeError(f"{name} must be {kinds}, got {value!r}")
            if self.maximum is not None and not self.minimum <= value <= self.maximum:
                raise OptionError(f"{name} must be between {self.minimum} and {self.maximum}, got {value}")
            if value < self.minimum:
                raise OptionError(f"{name} must be >= {self.minimum}, got {value}")
            return int(value)
        if kind == "number":
            if is_bool(value) or not isinstance(value, numbers.Real):
                raise OptionTypeError(f"{name} must be a real number, got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise OptionError(f"{name} must be finite, got {value}")
            if self.positive and not value > 0:
                raise OptionError(f"{name} must be > 0, got {value:g}")
            return value
        if kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise OptionError(f"{name} must be one of {tuple(self.choices)}, got {value!r}")
            return value
        if kind == "names":
            if isinstance(value, str) or not hasattr(value, "__iter__"):
                raise OptionTypeError(f"{name} must be {self.allowed()}, got {type(value).__name__}")
            values = list(value)
            for v in values:
                if not isinstance(v, str):
                    raise OptionTypeError(f"{name} must hold strings, got {v!r}")
            unknown = [v for v in values if self.choices and v not in self.choices]
            if unknown:
                raise OptionError(f"{name} has unknown entries {unknown}; allowed: {list(self.choices)}")
            if len(set(values)) != len(values):
                raise OptionError(f"{name} lists an entry twice: {values}")
            return tuple(values)
        if kind == "seed":
            if type(value).__name__ == "Generator" and type(value).__module__.startswith("numpy"):
                return value
            if not is_integer(value):
                raise OptionTypeError(f"{name} must be None, an int seed or a numpy.random.Generator, "
                                      f"got {type(value).__name__}")
            if value < 0:
                raise OptionError(f"{name} must be a non-negative integer seed, got {value}")
            return int(value)
        if kind == "flag":
            if not is_bool(value):
                raise OptionTypeError(f"{name} must be {self.allowed()}, got {value!r}")
            return bool(value)
        if kind == "folder":
            if is_bool(value) or not isinstance(value, (str, os.PathLike)):
                raise OptionTypeError(f"{name} must be {self.allowed()} (str or path-like), "
                                      f"got {type(value).__name__}")
            path = os.fspath(value)
            if not os.path.isdir(path):
                what = "is a file, not a directory" if os.path.exists(path) else "does not exist"
                raise OptionError(f"{name} must be an existing directory: {path!r} {what}")
            return path
        if kind == "column":
            if isinstance(value, str):
                if not value:
                    raise OptionError(f"{name} must name a column, got an empty string")
                return value
            if is_bool(value) or isinstance(value, (dict, numbers.Number)) or not hasattr(value, "__len__"):
                raise OptionTypeError(f"{name} must be {self.allowed()}, got {type(value).__name__}")
            return value
        if not isinstance(value, dict):
            raise OptionTypeError(f"{name} must be {self.allowed()}, got {type(value).__name__}")
        if kind == "criteria":
            return check_criteria(value, name)
        return value

    # ------------------------------------------------------------------ the command line
    def parse(self, text: str):
        """The value of the command line's text (argparse's ``type=``): what :meth:`check` accepts.

        Raises ``argparse.ArgumentTypeError`` (a usage error, exit status 2)
        with the allowed values.
        """
        import argparse  # the standard library's; only the command line calls this

        try:
            if self.kind in ("level", "number"):
                value = float(text)
            elif self.kind in ("count", "seed"):
                value = text if (self.kind == "count" and text in self.choices) else int(text)
            elif self.kind == "names":
                value = [part.strip() for part in text.split(",") if part.strip()]
            elif self.kind == "criteria":
                return _parse_criterion(text)
            else:
                value = text
            return self.check(value, self.cli)
        except (ValueError, TypeError) as exc:
            if isinstance(exc, (OptionError, OptionTypeError)):
                raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{self.cli} ")) from None
            raise argparse.ArgumentTypeError(f"expected {self.allowed(cli=True)}, got {text!r}") from None

    def format(self, value) -> str:
        """The command line's text of ``value`` (the inverse of :meth:`parse`)."""
        if isinstance(value, (list, tuple)):
            return ",".join(value)
        return repr(value) if isinstance(value, float) else str(value)

    def add_to(self, parser, *flags, help: str | None = None, **overrides):
        """Add the option to an argparse ``parser`` with its type, choices, default and help text."""
        kwargs = {"default": self.default, "help": help or self.help()}
        if self.kind == "flag":
            kwargs["action"] = "store_true"
        elif self.kind == "criteria":  # repeated KEY=VALUE, merged into one dict and checked as a whole
            kwargs.update(type=self.parse, action=_criteria_action(self), metavar="KEY=VALUE")
        elif self.kind == "choice":
            kwargs["choices"] = list(self.choices)
        else:
            kwargs["type"] = self.parse
        if self.kind == "names":
            kwargs.setdefault("metavar", "A,B")
        kwargs.update(overrides)
        return parser.add_argument(*(flags or (self.cli,)), **kwargs)

    def help(self) -> str:
        """The command line's help text: the doc, the allowed values and the default."""
        default = self.default
        shown = "" if default is None or self.kind == "flag" else f" (default {default})"
        allowed = "" if self.kind in ("choice", "flag") else f"; {self.allowed(cli=True)}"
        return f"{self.doc}{allowed}{shown}"


#: Rows per chunk of a streamed file when ``chunksize`` is not given (about 150-200 MB of working memory for
#: top-1 data); :mod:`calibtest.streams.files` and the command line's help read it from here.
DEFAULT_CHUNKSIZE = 1_000_000


# ----------------------------------------------------------------------------- the table
#: The tests and measures a plan can name (``tests=``), with what a report shows for each.
PLAN_TESTS = {
    "calib_ci": "confidence interval for the l2-ECE (adjusted interval)",
    "calib_test": "multi-scale test of calibration (evidence table)",
    "hosmer_lemeshow": "Hosmer-Lemeshow test",
    "spiegelhalter": "Spiegelhalter's z test (evidence table)",
    "citl": "calibration-in-the-large (evidence table)",
    "slope": "calibration slope (evidence table)",
    "val_prob": "validation metrics of rms::val.prob",
    "calib_compare": "comparison of calibration errors between models",
}

_OPTIONS = (
    Option("alpha", "level", 0.05, "significance level of every test and interval"),
    Option("n_bins", "count", "auto", "bins per dimension B", choices=("auto",), flag="--bins"),
    Option("null", "choice", "auto", "null law of the test of ECE = 0 (auto: conditional for at most 4 binned "
           "coordinates, in memory or streamed, else the paper's asymptotic one; with weights or prevalence, "
           "Monte Carlo in the binary and top-1 modes)",
           choices=("auto", "asymptotic", "conditional", "monte-carlo")),
    Option("method", "choice", "adjusted", "interval: the paper's adjusted interval or a resampling baseline",
           choices=("adjusted", "bootstrap", "subsampling", "hulc")),
    Option("study_method", "choice", "analytic", "sample size by the analytic normal approximation or by "
           "simulated studies", choices=("analytic", "simulation"), flag="--method"),
    Option("k", "count", None, "top-1-to-k calibration of a probability matrix (an integer), or 'full' "
           "calibration", choices=("full",), nullable=True),
    Option("n_classes", "count", None, "K, the number of classes, for a single top-1 confidence column",
           minimum=2, nullable=True),
    Option("missing", "choice", "raise", "rows with a missing value: raise an error or drop them",
           choices=("raise", "drop")),
    Option("n_null_draws", "count", 999, "label draws R of the Monte Carlo null", flag="--draws"),
    Option("n_draws", "count", 999, "label draws R of a Monte Carlo test", flag="--draws"),
    Option("n_resamples", "count", None, "resamples of a resampling interval (default 500)", minimum=2,
           nullable=True),
    Option("rng", "seed", None, "seed of the random draws (None: the default seed 0, recorded)", nullable=True,
           flag="--seed"),
    Option("progress", "flag", None, "progress bar (None: only in an interactive terminal)", nullable=True),
    Option("chunksize", "count", None, "rows per chunk of a streamed file", nullable=True),
    Option("prevalence", "level", None, "population prevalence: re-weight an enriched (e.g. case-control) "
           "sample to it", nullable=True),
    Option("cluster", "column", None, "clusters of correlated rows (e.g. the site of a multicentre study): "
           "cluster-robust interval, test, CITL, slope and O/E, clusters independent", nullable=True),
    Option("n_sim", "count", 1000, "simulated studies per n of a sample-size calculation (--method simulation)",
           minimum=2),
    Option("adaptive", "flag", False, "adaptive T-Cal over dyadic bin counts"),
    Option("hl_groups", "count", 10, "groups g of the Hosmer-Lemeshow test", minimum=3),
    Option("ece_bins", "count", 10, "bins B of the binned ECE whose upper bound a monitor reports", minimum=1),
    Option("validation", "choice", "external", "Hosmer-Lemeshow degrees of freedom: external (df = g) or "
           "development (df = g - 2)", choices=("external", "development")),
    Option("combine", "choice", "max-z", "how the multi-scale test combines its scales",
           choices=("max-z", "bonferroni")),
    Option("partitions", "choice", "equal-width", "bins of the multi-scale test",
           choices=("equal-width", "equal-mass", "both")),
    Option("test_null", "choice", "auto", "null law of the multi-scale test's scales (auto: the Gaussian null of "
           "the cell label sums at n >= 10^6 when few rows sit in thin cells, else monte-carlo, every row's label "
           "drawn)", choices=("auto", "monte-carlo", "gaussian")),
    Option("alternative", "choice", "two-sided", "alternative hypothesis on Delta = ECE_A^2 - ECE_B^2 "
           "(greater: model A worse calibrated)", choices=("two-sided", "less", "greater")),
    Option("variance", "choice", "corrected", "variance estimate of a comparison (plugin is conservative near "
           "calibration)", choices=("corrected", "plugin")),
    Option("meta_method", "choice", "REML", "estimator of the between-site variance tau^2 of a random-effects "
           "meta-analysis across sites", choices=("REML", "DL", "PM")),
    Option("hartung_knapp", "flag", False, "Hartung-Knapp interval (t on k - 1 df) of a random-effects pooled "
           "estimate"),
    Option("forest_measure", "choice", "ece", "what each row of a grouped interval's forest plot shows",
           choices=("ece", "citl", "slope", "oe")),
    Option("meta_measures", "names", None, "calibration measures pooled across sites (None: all)",
           choices=("log_oe", "citl", "slope", "ece"), nullable=True),
    Option("spiegelhalter", "flag", None, "whether the multi-scale test adds Spiegelhalter's z (None: for a "
           "1-dim prediction)", nullable=True),
    Option("paired", "flag", None, "whether two results share their rows (None: detected)", nullable=True),
    Option("tests", "names", None, "tests and measures to report", choices=tuple(PLAN_TESTS), nullable=True),
    Option("subgroups", "names", None, "subgroup columns", nullable=True),
    Option("sample_size", "mapping", None, "a sample-size calculation (to_dict() of its result)", nullable=True),
    Option("statistic", "choice", "tcal", "statistic of the T-Cal test: the authors' (divisor c_b) or the "
           "debiased T (divisor c_b - 1)", choices=("tcal", "debiased")),
    Option("scales", "count", "adaptive", "bin counts of the multi-scale test: 'adaptive' (2, 4, 8, ... up to "
           "the automatic B) or one bin count (a list of them in Python)", choices=("adaptive",)),
    Option("knots", "count", 4, "knots of the restricted cubic spline of a flexible calibration curve (or "
           "their positions on the logit scale, in Python)", minimum=3, maximum=7),
    Option("display_bins", "count", None, "equal-width display bins of a reliability diagram (None: deciles "
           "of risk)", minimum=2, maximum=15, nullable=True),
    Option("reliability_bins", "count", None, "bins a reliability diagram draws: None (deciles of the "
           "predictions), 2 to 15 equal-width display bins, or 'estimator' (the estimator's B bins)", minimum=2,
           maximum=15, nullable=True, choices=("estimator",)),
    Option("squared", "flag", False, "whether ece_score returns the debiased estimate T of ECE^2 (may be "
           "negative) rather than the ECE, sqrt(max(T, 0))"),
    Option("setting", "count", None, "simulation setting of the paper (1, 2: two classes with uniform or "
           "Beta(5, 0.5) predictions; 3: ten classes)", maximum=3),
    Option("sim_n", "count", None, "rows of a simulated data set"),
    Option("beta", "number", None, "miscalibration parameter of a simulation setting (its range depends on "
           "the setting)"),
    Option("templates", "folder", None, "folder of an organisation's report templates, used before the built-in "
           "ones (e.g. only title_page.html)", nullable=True),
    Option("margin", "number", None, "the margin delta > 0 on the ECE scale of the test of H0: ECE >= delta "
           "(margin_test; planning for it)", nullable=True, positive=True),
    Option("horizon", "number", None, "time horizon t of a survival outcome Surv(time, event): the prediction is "
           "the risk P(T <= t)", nullable=True, positive=True),
    Option("censoring", "choice", "km", "censoring distribution of the inverse probability of censoring weights: "
           "Kaplan-Meier, or a Cox model on censoring_covariates", choices=("km", "cox")),
    Option("censoring_covariates", "names", None, "columns the censoring depends on (censoring='cox')",
           nullable=True),
    Option("censored_fraction", "level", None, "planning a survival study: the anticipated share of patients "
           "censored before the horizon in the absence of events (exponential censoring); None: no censoring",
           nullable=True),
    Option("cause", "count", None, "competing risks: the event code of the cause whose cumulative incidence by the "
           "horizon is predicted (codes: 0 censored, other positive codes competing events)", nullable=True),
    Option("acceptance", "criteria", None, "pre-specified acceptance criterion KEY=VALUE (repeat for several): "
           "ece_below=0.05, citl_within=0.2 or -0.1,0.3, slope_within=0.8,1.25, oe_within=0.8,1.25",
           nullable=True, flag="--accept"),
    Option("primary", "choice", None, "the primary acceptance criterion (one of the --accept keys); the others are "
           "secondary, and the report leads with it (None: every criterion is co-primary)",
           choices=tuple(ACCEPTANCE_CRITERIA), nullable=True),
)

#: Every option by name.
OPTIONS: dict[str, Option] = {option.name: option for option in _OPTIONS}

#: The options a plan file fixes, in the order of :func:`calibtest.plan`; ``n_bins`` also takes
#: ``"adaptive"`` in a plan (the multi-scale test chooses the scale; the interval uses the automatic rule).
PLAN_SCHEMA: dict[str, Option] = {
    name: OPTIONS[name] for name in ("alpha", "n_bins", "null", "method", "k", "n_classes", "tests", "subgroups",
                                     "sample_size", "acceptance", "primary", "cluster")}
PLAN_SCHEMA["n_bins"] = replace(OPTIONS["n_bins"], choices=("auto", "adaptive"), flag="--n-bins")

#: One bin count B, an entry of a list of scales (``n_bins=[4, 8]``): the ``n_bins`` option without its words.
BIN_COUNT = replace(OPTIONS["n_bins"], choices=())


def _number(value, what: str) -> float:
    if is_bool(value) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise OptionTypeError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def check_criteria(criteria, name: str = "acceptance") -> dict:
    """Acceptance criteria in canonical form: ``{"ece_below": delta, "citl_within": (l, u), ...}``.

    Keys are those of :data:`ACCEPTANCE_CRITERIA`, in its order; ``ece_below``
    is a float > 0; ``citl_within`` a pair (a single a > 0 becomes (-a, a));
    ``slope_within`` a pair l < u; ``oe_within`` a pair 0 < l < u.  Raises
    :class:`OptionError` / :class:`OptionTypeError` naming the criterion.
    """
    if not isinstance(criteria, dict):
        raise OptionTypeError(f"{name} must be a dict of criteria, got {type(criteria).__name__}")
    if not criteria:
        raise OptionError(f"{name} must name at least one criterion ({', '.join(ACCEPTANCE_CRITERIA)}), or be None")
    unknown = [key for key in criteria if key not in ACCEPTANCE_CRITERIA]
    if unknown:
        raise OptionError(f"{name} has unknown criteria {unknown}; allowed: {list(ACCEPTANCE_CRITERIA)}")
    out = {}
    for key in ACCEPTANCE_CRITERIA:
        if key not in criteria:
            continue
        value, label = criteria[key], f"{name}[{key!r}]"
        if key == "ece_below":
            delta = _number(value, label)
            if delta <= 0.0:
                raise OptionError(f"{label} must be > 0 (a margin on the ECE scale), got {delta}")
            out[key] = delta
            continue
        if key == "citl_within" and not isinstance(value, (list, tuple)):
            a = _number(value, label)
            if a <= 0.0:
                raise OptionError(f"{label} must be > 0 (meaning -a < CITL < a) or a pair, got {a}")
            out[key] = (-a, a)
            continue
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise OptionTypeError(f"{label} must be a pair (lower, upper), got {value!r}")
        low, high = _number(value[0], label), _number(value[1], label)
        if not low < high:
            raise OptionError(f"{label} must have lower < upper, got ({low}, {high})")
        if key == "oe_within" and low <= 0.0:
            raise OptionError(f"{label} limits must be > 0 for a ratio, got ({low}, {high})")
        out[key] = (low, high)
    return out


def _parse_criterion(text: str) -> dict:
    """``"slope_within=0.8,1.25"`` -> ``{"slope_within": (0.8, 1.25)}`` (checked), for ``--accept``."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OptionError(f"expected KEY=VALUE with KEY one of {', '.join(ACCEPTANCE_CRITERIA)}, got {text!r}")
    parts = [part.strip() for part in rest.split(",")]
    try:
        numbers_ = [float(part) for part in parts]
    except ValueError:
        raise OptionError(f"{key}: expected a number or two numbers l,u, got {rest!r}") from None
    value = numbers_[0] if len(numbers_) == 1 else numbers_
    return check_criteria({key: value}, "acceptance")


def _criteria_action(option):
    """An argparse action that merges repeated ``--accept KEY=VALUE`` into one dict (a key twice is an error)."""
    import argparse

    class _Merge(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            current = dict(getattr(namespace, self.dest, None) or {})
            for key in values:
                if key in current:
                    parser.error(f"argument {option.cli}: {key} given twice")
            current.update(values)
            setattr(namespace, self.dest, check_criteria(current, "acceptance"))

    return _Merge


def check_option(name: str, value, label: str | None = None):
    """``value`` of the option ``name`` checked against :data:`OPTIONS`, in canonical form."""
    return OPTIONS[name].check(value, label)


def check_options(**values) -> dict:
    """Several options at once: ``check_options(alpha=alpha, k=k)`` -> their canonical values."""
    return {name: OPTIONS[name].check(value) for name, value in values.items()}


# --------------------------------------------------------------------------- checks built on the table
# The option values below are those of the table of options (calibtest.options), not copies.
MISSING_OPTIONS = OPTIONS["missing"].choices
#: The options of ``null=``; :data:`DEFAULT_NULL` is the default of every function that takes it.
NULLS = OPTIONS["null"].choices
DEFAULT_NULL: str = cast(str, OPTIONS["null"].default)
#: Default number R of label draws of every conditional Monte Carlo test (``n_draws``, ``n_null_draws``).
#: With R = 999, (R + 1) alpha is an integer at alpha = 0.01, 0.05 and 0.10, so the Monte Carlo p-value
#: (1 + #{T*_r >= T}) / (R + 1) rejects with probability exactly alpha under H0 there; its Monte Carlo
#: standard error at p = 0.05 is 0.0069, and against R = 1999 the measured power differed by at most
#: 0.3 points (s.e. 0.3) on four designs (``vignettes/calib_test_study.md``).
DEFAULT_DRAWS: int = cast(int, OPTIONS["n_draws"].default)
#: The seed that ``rng=None`` stands for in every function with random draws (Monte Carlo nulls, sign
#: flips, resampling, the groups' and the evidence's draws): fixed, so that the same data give the same
#: numbers in any process; it is recorded like a seed passed as ``rng=``.
DEFAULT_SEED: int = 0
METHODS = OPTIONS["method"].choices
RESAMPLING_METHODS = tuple(m for m in METHODS if m != "adjusted")


def check_alpha(alpha, name: str = "alpha") -> float:
    """Validate a significance level in the open interval (0, 1) and return it as a float."""
    return check_option("alpha", alpha, name)


def check_count(value, name: str, minimum: int = 1) -> int:
    """Check a count argument (an integer >= ``minimum``, not a bool) and return it as an int."""
    return Option(name, "count", None, "", minimum=minimum).check(value)


def _is_generator(value) -> bool:
    """A ``numpy.random.Generator`` (without importing numpy: if it is not loaded, no Generator exists)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.random.Generator)


def check_seed(rng, name: str = "rng"):
    """Check a seed argument: None, a non-negative int seed or a ``numpy.random.Generator``; return it."""
    if rng is None or _is_generator(rng):
        return rng
    return check_option("rng", rng, name)


def check_bool(value, name: str, *, allow_none: bool = False):
    """Check a flag: ``True`` or ``False`` (or ``None`` when ``allow_none``); return it as a bool."""
    return Option(name, "flag", None, "", nullable=allow_none).check(value)


def check_choice(value, name: str, choices) -> str:
    """Check that ``value`` is one of the strings ``choices`` and return it."""
    return Option(name, "choice", None, "", choices=tuple(choices)).check(value)


def check_missing(missing) -> str:
    """The missing-value rule: ``"raise"`` or ``"drop"``."""
    return check_option("missing", missing)


def check_null(null, n_null_draws=DEFAULT_DRAWS, rng=None) -> None:
    """Validate ``null=``, ``n_null_draws=`` and ``rng=`` of the finite-sample nulls."""
    check_option("null", null)
    check_option("n_null_draws", n_null_draws)
    check_memory(8.0 * n_null_draws, f"n_null_draws={n_null_draws} (one statistic per label draw)",
                 "lower n_null_draws: the Monte Carlo p-value's resolution is 1 / (n_null_draws + 1)")
    check_seed(rng)


def check_method(method, n_resamples, rng=None, progress=None) -> None:
    """Validate ``method=``, ``n_resamples=``, ``rng=`` and ``progress=`` of an interval."""
    check_option("method", method)
    if n_resamples is not None:
        if method == "adjusted":
            raise OptionError("n_resamples applies only to the resampling methods "
                              "(method='bootstrap', method='subsampling' or method='hulc')")
        check_option("n_resamples", n_resamples)
        check_memory(16.0 * n_resamples, f"n_resamples={n_resamples} (the resampled statistics)",
                     "lower n_resamples")
    check_seed(rng)
    check_bool(progress, "progress", allow_none=True)


#: Largest working memory a single step may ask for before it is refused (2 GiB).
MAX_BYTES = 2 ** 31


def format_bytes(nbytes: float) -> str:
    """``1.9 GiB``, ``340 MiB``, ... for messages."""
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} bytes"


def check_memory(nbytes: float, what: str, how: str) -> None:
    """Refuse a step whose estimated memory exceeds :data:`MAX_BYTES`, saying how to lower it.

    Raises
    ------
    OptionError
        With the estimated size, the step (``what``) and the remedy (``how``).
    """
    if nbytes > MAX_BYTES:
        raise OptionError(f"{what} would need about {format_bytes(nbytes)} of memory (the limit is "
                          f"{format_bytes(MAX_BYTES)}); {how}")


def check_number(value, name: str) -> float:
    """Check a finite real number argument (not a bool) and return it as a float (the table's ``"number"`` kind)."""
    return Option(name, "number", None, "").check(value)
