"""The design of one call, resolved once at the front door, and the one table of supported combinations.

A :class:`Design` says what kind of analysis a call asks for: its outcome
(classification, a survival outcome at a horizon, competing risks), its
target where the options fix it (top-1 with ``n_classes=``, top-k or full
with ``k=``; otherwise the probability columns decide), its weighting (case
``weights=`` or a ``prevalence=``), whether rows are clustered (``cluster=``)
or grouped (``by=``), where the rows come from (memory, a file, a Dask frame),
and the interval method and null asked for.  :meth:`Design.resolve` builds it
from the front door's :class:`~calibtest.inputs.settings.Inputs` and
:class:`~calibtest.inputs.settings.Settings`, before any row is read;
:meth:`Design.check` refuses a combination the package does not support, with the reason, from
the one table :data:`RULES`.

The same table writes the table of combinations in the documentation
(:func:`combinations_markdown`, ``docs/combinations.md``) and the command
line's help (:func:`combinations_text`), so a refusal, the docs and ``--help``
cannot disagree.  This module imports only the standard library,
:mod:`calibtest.options` and :mod:`calibtest.inputs.settings`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from calibtest.inputs.settings import Inputs, Settings
from calibtest.options import SURVIVAL_REFUSAL, OptionError

__all__ = ["Design", "Rule", "RULES", "combinations_markdown", "combinations_text", "source_of"]

#: How refusals name each front door.
LABELS = {"calib_ci": "calib_ci", "calib_test": "calib_test (the multi-scale test)",
          "evidence": "evidence (the multi-scale test, Hosmer-Lemeshow and the label-draw nulls)",
          "tcal_test": "tcal_test (the T-Cal test)", "hosmer_lemeshow": "hosmer_lemeshow (the Hosmer-Lemeshow test)",
          "val_prob": "val_prob (val.prob's validation statistics)"}
#: The survival analysis a refusal of a test of binary labels points to.
SURVIVAL_WAY_OUT = "calib_ci('Surv(time, event) ~ risk', data=..., horizon=t)"


def _surv_formula(formula) -> bool:
    """Whether a formula's outcome is ``Surv(...)`` (patsy is imported only when a formula is given)."""
    if formula is None:
        return False
    from calibtest.inputs.formula import is_survival_formula
    return is_survival_formula(formula)


#: The outcomes a design can have.
OUTCOMES = ("classification", "survival", "competing risks")
#: Where the rows come from.
SOURCES = ("memory", "file", "dask")


def source_of(data) -> str:
    """``"file"`` for a path (``str`` or ``os.PathLike``), ``"dask"`` for a Dask collection, else ``"memory"``.

    A Dask collection is recognised by its module, so Dask is not imported.
    """
    if isinstance(data, (str, os.PathLike)):
        return "file"
    if type(data).__module__.split(".")[0] == "dask":
        return "dask"
    return "memory"


@dataclass(frozen=True)
class Design:
    """What kind of analysis one call is: resolved once from the arguments, before the rows are read.

    Attributes
    ----------
    analysis : str
        The front door: ``"calib_ci"``, ``"calib_test"``, ``"evidence"``, ``"tcal_test"``, ``"hosmer_lemeshow"``,
        ``"val_prob"``.
    outcome : {"classification", "survival", "competing risks"}
        A survival outcome comes with ``horizon=`` (or ``time=``/``event=``); competing risks with ``cause=``.
    target : str or None
        ``"top-1"`` with ``n_classes=``, ``"top-k"`` or ``"full"`` with ``k=``; None where the probability
        columns decide (one column: binary; a matrix: top-1).
    weighting : {None, "weights", "prevalence"}
        Case weights or a prevalence to reweight events and non-events to.
    reweighted : bool
        ``prevalence=`` given: events and non-events re-weighted to it, with or without case weights (the
        weights then depend on the outcome).
    clustered, grouped : bool
        ``cluster=`` and ``by=`` given.
    source : {"memory", "file", "dask"}
        Rows in memory (a DataFrame, a dict or arrays), a CSV/Parquet file, or a Dask DataFrame.
    chunked : bool
        ``chunksize=`` given.
    method : str
        The interval method (``"adjusted"`` or a resampling baseline).
    null : str
        The null asked for (``"auto"``, ``"conditional"``, ``"monte-carlo"``, ``"asymptotic"``).
    arrays, formula : bool
        Arrays given as ``y=``/``probs=`` (or ``time=``/``event=``); a formula given.
    """

    analysis: str
    outcome: str = "classification"
    target: str | None = None
    weighting: str | None = None
    reweighted: bool = False
    clustered: bool = False
    grouped: bool = False
    source: str = "memory"
    chunked: bool = False
    method: str = "adjusted"
    null: str = "auto"
    arrays: bool = False
    formula: bool = True
    horizon: bool = False

    @classmethod
    def resolve(cls, analysis: str, inputs: Inputs = Inputs(), settings: Settings = Settings()) -> "Design":
        """The design of a call from its data and options (nothing is read; options are checked elsewhere).

        A survival outcome is ``horizon=``, ``time=``/``event=`` or a formula whose outcome is ``Surv(...)``.

        Parameters
        ----------
        analysis : str
            The front door.
        inputs : Inputs
            The call's data and the roles of its columns.
        settings : Settings
            The call's options.
        """
        i, s = inputs, settings
        survival = s.horizon is not None or i.time is not None or i.event is not None or _surv_formula(i.formula)
        outcome = ("competing risks" if s.cause is not None else "survival") if survival else "classification"
        if s.n_classes is not None:
            target = "top-1"
        elif s.k is not None:
            target = "full" if s.k == "full" else "top-k"
        else:
            target = None
        weighting = "weights" if i.weights is not None else "prevalence" if s.prevalence is not None else None
        return cls(analysis=analysis, outcome=outcome, target=target, weighting=weighting,
                   reweighted=s.prevalence is not None,
                   clustered=i.cluster is not None, grouped=i.by is not None, source=source_of(i.data),
                   chunked=s.chunksize is not None, method=s.method, null=s.null,
                   arrays=any(a is not None for a in (i.y, i.probs, i.time, i.event)), formula=i.formula is not None,
                   horizon=s.horizon is not None)

    @property
    def label(self) -> str:
        """The front door as messages name it, e.g. ``"calib_test (the multi-scale test)"``."""
        return LABELS.get(self.analysis, self.analysis)

    @property
    def survival(self) -> bool:
        """True for a survival outcome, competing risks included."""
        return self.outcome != "classification"

    @property
    def weighted(self) -> bool:
        """True with case weights or a prevalence (``weights=``, ``prevalence=``)."""
        return self.weighting is not None

    @property
    def case_weighted(self) -> bool:
        """True with case weights (``weights=``), a prevalence besides them or not."""
        return self.weighting == "weights"

    @property
    def needs_rows(self) -> bool:
        """The analysis needs every row in memory: case weights or a prevalence, clusters, a survival outcome, a
        resampling method or the Monte Carlo null (what the table refuses on files and Dask frames)."""
        return (self.weighted or self.clustered or self.survival or self.method != "adjusted"
                or self.null == "monte-carlo")

    @property
    def in_memory(self) -> bool:
        """True when the rows are in memory."""
        return self.source == "memory"

    def refusal(self) -> "Rule | None":
        """The first rule of :data:`RULES` this design breaks, or None when it is supported."""
        return next((rule for rule in RULES if self.analysis in rule.analyses and rule.breaks(self)), None)

    def check(self) -> "Design":
        """This design, or :class:`~calibtest.options.OptionError` with the reason of the rule it breaks."""
        rule = self.refusal()
        if rule is not None:
            raise OptionError(rule.reason.format(method=self.method, null=self.null, what=self.label,
                                                 ci=SURVIVAL_WAY_OUT, report="that result's evidence() or report()"))
        return self

    def describe(self) -> str:
        """The kind of analysis in words, e.g. ``"survival, weighted, grouped, rows in memory"``."""
        parts = [self.outcome if self.target is None else f"{self.outcome} ({self.target})"]
        parts += [{"weights": "case-weighted", "prevalence": "reweighted to a prevalence"}[self.weighting]] \
            if self.weighting else []
        parts += ["clustered"] * self.clustered + ["grouped"] * self.grouped
        parts.append({"memory": "rows in memory", "file": "streamed from a file", "dask": "a Dask frame"}[self.source])
        return ", ".join(parts)


_ALL = ("calib_ci", "calib_test", "evidence", "tcal_test", "hosmer_lemeshow", "val_prob")


@dataclass(frozen=True)
class Rule:
    """One unsupported combination: which analyses it concerns, when a design breaks it, and why.

    Attributes
    ----------
    combination : str
        The combination in the words of the arguments, for the docs' table and ``--help``.
    breaks : callable
        ``breaks(design)`` is True when the design asks for the combination.
    reason : str
        The refusal's message: why, and what to do instead (``{method}``, ``{null}`` and ``{what}`` stand for the
        design's method, null and front door).
    analyses : tuple of str
        The front doors the rule applies to.
    """

    combination: str
    breaks: Callable[[Design], bool]
    reason: str
    analyses: tuple = _ALL


_IN_MEMORY = "(a DataFrame or arrays)"

#: The unsupported combinations, in the order they are checked; every refusal of a combination of options
#: comes from here.
RULES: tuple[Rule, ...] = (
    Rule("a survival outcome (horizon= or a Surv(...) formula) in a test of binary labels",
         lambda d: d.survival, SURVIVAL_REFUSAL, ("calib_test", "evidence", "tcal_test", "hosmer_lemeshow", "val_prob")),
    Rule("a survival outcome without horizon=",
         lambda d: d.survival and not d.horizon,
         "a survival outcome needs horizon=, the time t of the risk P(T <= t)", ("calib_ci",)),
    Rule("weights= in val_prob",
         lambda d: d.weighted,
         "val_prob does not take weights: its statistics (R val.prob's deviance-based D, U, Q and R2, the C index, "
         "the lowess Emax/E90/Eavg) have no weighted definition in val.prob to match; use calib_ci(..., weights=) "
         "or hosmer_lemeshow(..., weights=) for weighted calibration, or calib_ci(..., prevalence=) for an "
         "enriched sample", ("val_prob",)),
    Rule("a survival outcome (horizon=) with a file or a Dask frame",
         lambda d: d.survival and not d.in_memory,
         f"a survival outcome (horizon=) needs the rows in memory {_IN_MEMORY}; read the formula's columns of the "
         "file into pandas", ("calib_ci",)),
    Rule("a survival outcome (horizon=) with cluster=",
         lambda d: d.survival and d.clustered,
         "cluster= is not available with a survival outcome (horizon=): analyse each site separately or without "
         "cluster=", ("calib_ci",)),
    Rule("a survival outcome (horizon=) with prevalence=",
         lambda d: d.survival and d.weighting == "prevalence",
         "prevalence= cannot be combined with a survival outcome (horizon=): it reweights events and non-events, "
         "whose status at t is unknown for rows censored before t; give case weights (weights=) instead",
         ("calib_ci",)),
    Rule("a survival outcome (horizon=) with weights= and null='conditional'",
         lambda d: d.survival and d.weighting == "weights" and d.null == "conditional",
         "weights= with a survival outcome (horizon=) takes null='auto' or 'asymptotic'", ("calib_ci",)),
    Rule("a survival outcome (horizon=) with n_classes= or k=",
         lambda d: d.survival and d.target is not None,
         "a survival outcome (horizon=) takes one risk column P(T <= t); n_classes= and k= do not apply",
         ("calib_ci",)),
    Rule("a survival outcome (horizon=) with a resampling method",
         lambda d: d.survival and d.method != "adjusted",
         "method={method!r} is not available with a survival outcome (horizon=): the resampling baselines would "
         "resample the IPCW outcomes with the censoring distribution held fixed; use method='adjusted'",
         ("calib_ci",)),
    Rule("chunksize= with rows in memory",
         lambda d: d.chunked and d.in_memory,
         "chunksize= applies only to data given as a file path", ("calib_ci", "calib_test", "evidence")),
    Rule("chunksize= with a Dask frame",
         lambda d: d.chunked and d.source == "dask",
         "chunksize= applies to files; a Dask DataFrame is processed by partition (use ddf.repartition to change "
         "their size)", ("calib_ci",)),
    Rule("cluster= with a file or a Dask frame",
         lambda d: d.clustered and not d.in_memory,
         f"cluster= needs the rows in memory {_IN_MEMORY}; for a file or a Dask frame, read the formula's "
         "columns and the cluster column into pandas", ("calib_ci", "calib_test", "evidence")),
    Rule("cluster= with a resampling method",
         lambda d: d.clustered and d.method != "adjusted",
         "cluster= supports method='adjusted' (the cluster-robust adjusted interval), not method={method!r}: "
         "the resampling baselines resample independent rows", ("calib_ci",)),
    Rule("cluster= with weights= or prevalence=",
         lambda d: d.clustered and d.weighted,
         "cluster= cannot be combined with weights= or prevalence= (a weighted clustered estimator is not "
         "implemented)", ("calib_ci",)),
    Rule("cluster= with null='conditional'",
         lambda d: d.clustered and d.null == "conditional",
         "null='conditional' redraws each label independently given its prediction, which ignores the "
         "correlation within clusters; with cluster= use null='auto' (the cluster sign-flip test), 'monte-carlo' "
         "(the same) or 'asymptotic' (z = T_cl / sqrt(V_0))", ("calib_ci",)),
    Rule("weights= or prevalence= with a file or a Dask frame",
         lambda d: d.weighted and not d.in_memory,
         f"weights= and prevalence= need the rows in memory {_IN_MEMORY}; for a file or a Dask frame, read the "
         "columns needed into pandas", ("calib_ci",)),
    Rule("by= with a file or a Dask frame in evidence",
         lambda d: d.grouped and not d.in_memory,
         "by= is not available for evidence on a file or Dask DataFrame: use calib_test(..., by=) or "
         "calib_ci(..., by=) on it, or read the rows into memory", ("evidence",)),
    Rule("null='monte-carlo' and by= with a file or a Dask frame",
         lambda d: d.null == "monte-carlo" and d.grouped and not d.in_memory,
         f"null='monte-carlo' draws labels for every row and needs the rows in memory {_IN_MEMORY}; with by= on "
         "files and Dask frames use null='auto', 'conditional' or 'asymptotic'", ("calib_ci",)),
    Rule("null='monte-carlo' with a file or a Dask frame",
         lambda d: d.null == "monte-carlo" and not d.in_memory,
         f"null='monte-carlo' draws labels for every row and needs the rows in memory {_IN_MEMORY}; files and "
         "Dask frames support null='auto', 'conditional' (the same exact moments as in memory, from per-bin "
         "sums) and 'asymptotic'", ("calib_ci", "evidence")),
    Rule("a resampling method with a file or a Dask frame",
         lambda d: d.method != "adjusted" and not d.in_memory,
         "method={method!r} resamples rows and needs in-memory data (a pandas DataFrame or arrays), but the data "
         "are a file or a Dask frame; use method='adjusted' (Algorithm 1, exact from per-bin sums on data of any "
         "size), or load the rows into memory (e.g. a random sample)", ("calib_ci",)),
    Rule("y=/probs= arrays with a file or a Dask frame",
         lambda d: d.arrays and not d.in_memory,
         "y= and probs= cannot be combined with a file path or Dask DataFrame as data; name the columns in a "
         "formula", ("calib_ci", "evidence")),
    Rule("a file or a Dask frame without a formula",
         lambda d: not d.formula and not d.in_memory,
         "a file path or Dask DataFrame as data needs a formula naming its columns, e.g. 'correct ~ confidence'",
         ("calib_ci", "evidence")),
)


def combinations_markdown() -> str:
    """The table of unsupported combinations as Markdown (the documentation's ``docs/combinations.md``)."""
    lines = ["| combination | refused by | why, and what to do instead |", "|---|---|---|"]
    for rule in RULES:
        doors = ", ".join(f"`{name}`" for name in rule.analyses)
        lines.append(f"| {rule.combination} | {doors} | {rule.reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def combinations_text(analysis: str) -> str:
    """The combinations one front door refuses, as one sentence (the command line's ``--help`` epilog)."""
    rules = [rule.combination for rule in RULES if analysis in rule.analyses]
    return "not supported: " + "; ".join(rules) + " (see the docs' table of combinations)" if rules else ""
