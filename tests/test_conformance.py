"""Conformance: every consumer on every kind of analysis prints the result's own numbers.

A registry of kinds (``KINDS``: binary, top-1, top-k, full, survival at a horizon, competing risks, weighted,
prevalence, clustered, grouped, grouped and clustered, streamed from CSV, Parquet and Dask, survival with case
weights) and a registry of consumers (``CONSUMERS``: ``summary()``, the HTML report, the ``result-*.json`` the
report embeds, ``to_dict()``, the command line's ``--json``) are crossed; each check is one parametrised test:

* the estimate, ECE, interval and p-value printed are the result's own, to the precision printed;
* the events printed are a count of rows, counted here from the data (survival: the event by the horizon);
* the null named is the null the result used;
* the target named is the kind's (a survival summary does not say "Target: binary"), also in the margin-test,
  sample-size and power summaries;
* a plan's power shown is the power recomputed with every input the sample-size calculation stores;
* an acceptance criterion the kind can evaluate is evaluated (clustered: from the cluster-robust estimates);
* every Monte Carlo number with the default rng is the same in two processes;
* a survival option given to an entry point that does not take it, a file changed while it is streamed and a
  report option the command line refuses are refused with the package's error.

``test_each_check_fails_on_a_wrong_printed_value`` changes one printed value before it is read and shows that
the check then fails.  The report's embedded ``result-*.json`` is read from ``build_context(...)["_attachments"]``,
the files a PDF report attaches (the HTML links the bin table only).  Adding a kind or a consumer is one line in
its registry.  A case that fails today because of a known finding
is marked ``xfail(strict=True)`` with the finding (``FINDINGS``): when the fix lands it XPASSes, fails, and the
mark must go.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import calibtest as ct
from calibtest.checks.acceptance import NOT_EVALUABLE, evaluate_acceptance
from calibtest.inputs.plan import planned_curve, sample_size_record
from calibtest.cli import main
from calibtest.options import DataError, OptionError, OptionTypeError
from calibtest.reporting.html import build_context

from conformance_helpers import (CRITERIA, H, SEED, Printed, attached_json, binary_frame, make_kind, own_numbers,
                                 plan_events, plan_power, probs_frame, read_dict, read_grouped_dict,
                                 read_grouped_summary_text, read_report_html, read_summary_text, shown_as,
                                 survival_events, survival_frame, tables, visible_text)

pytestmark = pytest.mark.filterwarnings("ignore")

# ----------------------------------------------------------------------------------------------- findings
EVENTS_IPCW = "a survival report prints the censoring-weighted sum of the IPCW outcomes as its events, not the count"
PLAN_CENSORING = "a survival plan's power curve ignores censored_fraction"
CLUSTER_ACCEPT = "clustered acceptance marks CITL/slope/O/E 'not evaluable' and counts them unmet"
DEFAULT_RNG = "grouped and clustered p-values with the default rng differ between processes"
STREAM_CHANGED = "streamed calib_test does not notice a file changed while it was read"
SURV_WEIGHTED_NULL = ("survival + weights (all censoring after the horizon) uses null='asymptotic' where the "
                      "binary weighted call uses Monte Carlo")
SURV_TARGET = "survival summaries say 'Target: binary'"
HORIZON_TYPEERROR = "calib_test(..., horizon=) raises a raw TypeError"
HL_GROUPS = "report(hl_groups=0) is accepted while the CLI refuses it"


#: The findings fixed since this module was written: their cases must pass (a regression fails them).
FIXED = {EVENTS_IPCW, PLAN_CENSORING, CLUSTER_ACCEPT, DEFAULT_RNG, STREAM_CHANGED, SURV_WEIGHTED_NULL, SURV_TARGET,
         HORIZON_TYPEERROR, HL_GROUPS}


def mark(cases, findings: dict):
    """``pytest.param`` of each case, xfail(strict) with its finding where ``findings`` names one not yet fixed."""
    return [pytest.param(*(c if isinstance(c, tuple) else (c,)), id="-".join(map(str, c if isinstance(c, tuple)
                                                                                    else (c,))),
                         marks=[pytest.mark.xfail(strict=True, reason=findings[c])]
                         if c in findings and findings[c] not in FIXED else [])
            for c in cases]


# ----------------------------------------------------------------------------------------------- kinds
def _binary(name, frame, tmp, **options):
    return make_kind(name, "y ~ p", frame, options, events=int(frame["y"].sum()), target=r"binary",
                     evaluable=("ece_below", "citl_within", "slope_within", "oe_within"),
                     sample_size={"probs": frame["p"].to_numpy()}, cli=_cli_options(options))


def _cli_options(options: dict) -> list:
    flags = {"weights": "--weights", "prevalence": "--prevalence", "cluster": "--cluster", "by": "--by",
             "horizon": "--horizon", "cause": "--cause", "n_classes": "--n-classes", "k": "--k"}
    return [x for key, value in options.items() for x in (flags[key], str(value))]


def binary(tmp):
    return _binary("binary", binary_frame(), tmp)


def top1(tmp):
    frame = probs_frame()
    return make_kind("top1", "correct ~ conf", frame, {"n_classes": 3}, events=int(frame["correct"].sum()),
                     target=r"top-?1\b", evaluable=("ece_below", "oe_within"), cli=["--n-classes", "3"],
                     sample_size={"probs": frame["conf"].to_numpy(), "n_classes": 3})


def topk(tmp):
    return make_kind("topk", "label ~ p0 + p1 + p2", probs_frame(), {"k": 2}, target=r"top-?(1-to-)?k",
                     cli=["--k", "2"])


def full(tmp):
    return make_kind("full", "label ~ p0 + p1 + p2", probs_frame(), {"k": "full"}, target=r"full",
                     cli=["--k", "full"])


def _survival(name, frame, **options):
    options = {"horizon": H, **options}
    censored = float(np.mean((frame["event"].to_numpy() == 0) & (frame["time"].to_numpy() <= H)))
    weighted = "weights" in options
    return make_kind(name, "Surv(time, event) ~ risk", frame, options,
                     events=survival_events(frame, options.get("cause", 1)), target=r"survival", cli=_cli_options(
                         options), evaluable=("ece_below",) if weighted or "cause" in options else
                     ("ece_below", "citl_within", "slope_within", "oe_within"),
                     sample_size={"probs": frame["risk"].to_numpy(),
                                  **({"censored_fraction": censored} if censored else {})})


def survival(tmp):
    return _survival("survival", survival_frame())


def competing(tmp):
    return _survival("competing", survival_frame(causes=True), cause=1)


def survival_weighted(tmp):
    return _survival("survival_weighted", survival_frame(censoring=None), weights="w")


def weighted(tmp):
    kind = _binary("weighted", binary_frame(), tmp, weights="w")
    kind.evaluable = ("ece_below",)  # CITL, slope and O/E are tests of unweighted rows (documented)
    return kind


def prevalence(tmp):
    kind = _binary("prevalence", binary_frame(), tmp, prevalence=0.3)
    kind.evaluable = ("ece_below",)
    return kind


def clustered(tmp):
    return _binary("clustered", binary_frame(), tmp, cluster="site")


def _grouped(name, tmp, **options):
    frame = binary_frame()
    kind = _binary(name, frame, tmp, by="g", **options)
    kind.events = {"pooled": int(frame["y"].sum()), **frame.groupby("g")["y"].sum().astype(int).to_dict()}
    return kind


def grouped(tmp):
    return _grouped("grouped", tmp)


def grouped_clustered(tmp):
    return _grouped("grouped_clustered", tmp, cluster="site")


def _streamed(name, tmp, suffix):
    frame = binary_frame()
    path = tmp / f"binary.{suffix}"
    frame.to_csv(path, index=False) if suffix == "csv" else frame.to_parquet(path)
    kind = make_kind(name, "y ~ p", frame, {"chunksize": 200}, data=path, events=int(frame["y"].sum()),
                     target=r"binary", cli=["--chunksize", "200"], sample_size={"probs": frame["p"].to_numpy()})
    kind.file = path
    return kind


def csv(tmp):
    return _streamed("csv", tmp, "csv")


def parquet(tmp):
    return _streamed("parquet", tmp, "parquet")


def dask(tmp):
    dd = pytest.importorskip("dask.dataframe")
    frame = binary_frame()
    return make_kind("dask", "y ~ p", frame, {}, data=dd.from_pandas(frame[["y", "p"]], npartitions=3),
                     events=int(frame["y"].sum()), target=r"binary", cli=None,
                     sample_size={"probs": frame["p"].to_numpy()})


KINDS = {"binary": binary, "top1": top1, "topk": topk, "full": full, "survival": survival, "competing": competing,
         "survival_weighted": survival_weighted, "weighted": weighted, "prevalence": prevalence,
         "clustered": clustered, "grouped": grouped, "grouped_clustered": grouped_clustered, "csv": csv,
         "parquet": parquet, "dask": dask}
SURVIVAL_KINDS = ("survival", "competing", "survival_weighted")
CLUSTERED_KINDS = ("clustered", "grouped_clustered")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("conformance")


@pytest.fixture(scope="module")
def kinds(tmp):
    """Each kind built once, on first use."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = KINDS[name](tmp)
        return cache[name]
    return get


# ----------------------------------------------------------------------------------------------- consumers
def _labels(kind) -> list[str]:
    return [str(v) for v in sorted(kind.frame["g"].unique())]


def summary_reader(kind, tmp) -> Printed:
    text = str(kind.result.summary())
    printed = (read_grouped_summary_text(text, _labels(kind)) if kind.grouped else read_summary_text(text))
    printed.null = _nulls(text) or printed.null
    return printed


def _nulls(text: str) -> str | None:
    """Every null='...' a text names, joined (one name when the text is consistent)."""
    names = sorted(set(re.findall(r"null='([\w-]+)'", text)))
    return "|".join(names) or None


def report_html(kind, tmp, **kwargs) -> str:
    """``ct.report(result, path.html)`` of the kind, written once per set of options."""
    key = ("report", *sorted(kwargs))
    if key not in kind.cache:
        path = tmp / f"{kind.name}-{'-'.join(sorted(kwargs)) or 'plain'}.html"
        ct.report(kind.result, path, **kwargs)
        kind.cache[key] = path.read_text(encoding="utf-8")
    return kind.cache[key]


def report_reader(kind, tmp) -> Printed:
    html = report_html(kind, tmp)
    printed = read_report_html(html)
    text = visible_text(html)
    for _, rows in tables(html):  # the Python call records the argument (null='auto'), not the null used
        for row in rows:
            if row and row[0] == "Python call":
                text = text.replace(row[1], "")
    printed.null = _nulls(text)
    if kind.grouped:
        printed.groups = _report_groups(html, _labels(kind))
    return printed


def _report_groups(html: str, labels: list[str]) -> dict:
    rows = [row for cap, rows in tables(html) if cap.startswith("Calibration of") and "subgroups" in cap
            for row in rows]
    out = {}
    for row in rows:
        if row[0] in labels:
            lo, hi = re.findall(r"-?\d[\d.e-]*", row[7])[-2:]
            assert row[8] in ("contains 0", "excludes 0"), row  # the interval's verdict beside it
            out[row[0]] = {"n": row[1], "events": row[2], "ece": row[6], "ece_ci_lower": lo, "ece_ci_upper": hi,
                           "pvalue": row[9]}
    return out


def report_json_reader(kind, tmp) -> Printed:
    d = attached_json(build_context(kind.result, figures=False))
    return read_grouped_dict(d) if kind.grouped else read_dict(d)


def to_dict_reader(kind, tmp) -> Printed:
    d = kind.result.to_dict()
    return read_grouped_dict(d) if kind.grouped else read_dict(d)


def cli_reader(kind, tmp) -> Printed:
    if kind.cli is None:
        pytest.skip("the command line reads files, not Dask frames")
    if "cli" not in kind.cache:
        path = kind.file
        if path is None:
            path = tmp / f"{kind.name}.csv"
            kind.frame.to_csv(path, index=False)
        out = io.StringIO()
        with redirect_stdout(out):
            status = main(["ci", str(path), "--formula", kind.formula, *kind.cli, "--seed", str(SEED), "--json"])
        assert status == 0, out.getvalue()
        # the command line's own call: the same options on the same file (a file of a full target is streamed,
        # with the rate's B, where rows in memory may get fewer bins: documented in the result's notes); the
        # options that need the rows (weights, clusters, a horizon) the command line reads into memory
        try:
            own = ct.calib_ci(kind.formula, data=path, rng=SEED, **kind.options)
        except OptionError as exc:
            assert "in memory" in str(exc)
            own = kind.result
        kind.cache["cli"] = json.loads(out.getvalue()), own
    d, own = kind.cache["cli"]
    printed = read_grouped_dict(d) if kind.grouped else read_dict(d)
    printed.own = own
    return printed


CONSUMERS = {"summary": summary_reader, "report": report_reader, "report_json": report_json_reader,
             "to_dict": to_dict_reader, "cli": cli_reader}


# ----------------------------------------------------------------------------------------------- checks
NUMBER_FIELDS = ("estimate", "ece", "ci_lower", "ci_upper", "ece_ci_lower", "ece_ci_upper", "pvalue")
GROUP_FIELDS = ("n", "events", "ece", "ece_ci_lower", "ece_ci_upper", "pvalue")


def _own_groups(result) -> dict:
    return {str(g["group"]).split("=", 1)[1]: g for g in result.to_dict()["groups"]}


@pytest.mark.parametrize("kind_name", list(KINDS))
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_printed_numbers_are_the_results_own(kinds, tmp, kind_name, consumer):
    kind = kinds(kind_name)
    printed = CONSUMERS[consumer](kind, tmp)
    result = kind.result if printed.own is None else printed.own
    own = own_numbers(result.pooled if kind.grouped else result)
    fields = [f for f in NUMBER_FIELDS if not (kind.grouped and consumer == "summary" and f in
                                               ("estimate", "ci_lower", "ci_upper"))]  # the grouped table: ECE
    wrong = {f: (getattr(printed, f), own[f]) for f in fields if not shown_as(getattr(printed, f), own[f])}
    if kind.grouped:
        groups = _own_groups(result)
        assert set(printed.groups or {}) == set(groups), printed.groups
        wrong.update({(label, f): (printed.groups[label][f], groups[label][f]) for label in groups
                      for f in GROUP_FIELDS if not shown_as(printed.groups[label][f], groups[label][f])})
    assert not wrong, wrong


@pytest.mark.parametrize("kind_name", list(KINDS))
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_events_printed_are_counts_of_rows(kinds, tmp, kind_name, consumer):
    kind = kinds(kind_name)
    if kind.events is None:
        pytest.skip("no events in this target (a probability vector per row)")
    printed = CONSUMERS[consumer](kind, tmp)
    expected = kind.events["pooled"] if kind.grouped else kind.events
    holds_rows = getattr(kind.single, "data", None) is not None  # a streamed result holds bin sums only
    must_print = {"report": holds_rows, "summary": kind.survival or kind.grouped}.get(consumer, kind.survival)
    if printed.events is None:
        assert not must_print, f"{consumer} prints no events for {kind.name}"
    else:
        assert printed.events == str(expected), (printed.events, expected)
    if kind.grouped:
        got = {label: printed.groups[label]["events"] for label in printed.groups}
        assert got == {label: str(kind.events[label]) for label in got}, got


def test_shown_as_is_rounding_to_the_digits_printed():
    assert shown_as("0.0062", 0.0062354) and shown_as("0.00623538", 0.0062353759) and shown_as("210", 210)
    assert not shown_as("0.0063", 0.0062354) and not shown_as("184.028", 210) and not shown_as("0", 1e-9)
    assert not shown_as(None, 0.1) and not shown_as("210.0", 210)


def _bump(match) -> str:
    """A printed number one unit larger in its last digit (so it no longer rounds from the same value)."""
    text = match.group(0)
    digits = len(text.split(".")[1]) if "." in text else 0
    return f"{float(text) + 10.0 ** -digits:.{digits}f}"


NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
MUTATIONS = {  # (kind, consumer, check): (pattern, replacement) applied to what the consumer prints
    ("binary", "summary", "numbers"): (rf"(ECE\^2 \(T\)\s+)({NUM})",
                                       lambda m: m.group(1) + _bump(re.match(NUM, m.group(2)))),
    ("binary", "summary", "pvalue"): (rf"(?<=p = ){NUM}", _bump),
    ("binary", "summary", "null"): (r"null='conditional'", "null='asymptotic'"),
    ("survival", "summary", "events"): (rf"(?<=Events by t:       ){NUM}", _bump),
    ("survival", "summary", "target"): (r"(?<=Mode:)(\s+)survival at the horizon t = [0-9.]+", r"\1binary"),
    ("survival", "report", "events"): (rf"(?<=800; ){NUM}(?=; )", lambda m: m.group(0) + ".5"),
    ("survival", "report", "numbers"): (rf"(?<=95% adjusted confidence interval</td><td>\[0, ){NUM}", _bump),
    ("grouped", "summary", "events"): (r"(\na\s+\d+\s+)(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 1)),
}


@pytest.mark.parametrize(("kind_name", "consumer", "check"), list(MUTATIONS))
def test_each_check_fails_on_a_wrong_printed_value(kinds, tmp, monkeypatch, kind_name, consumer, check):
    """A consumer that printed one value wrong (the text changed before it is read) fails the check: the
    readers find the values they compare, and the comparisons can fail."""
    kind = kinds(kind_name)
    pattern, replacement = MUTATIONS[kind_name, consumer, check]
    text = str(kind.result.summary()) if consumer == "summary" else report_html(kind, tmp)
    wrong, count = re.subn(pattern, replacement, text)
    assert count >= 1, f"{pattern!r} not in the {consumer}"
    if consumer == "summary":
        monkeypatch.setattr(type(kind.result), "summary", lambda self, *a, **k: wrong)
    else:
        monkeypatch.setitem(kind.cache, ("report",), wrong)
    checks = {"numbers": test_printed_numbers_are_the_results_own, "pvalue": test_printed_numbers_are_the_results_own,
              "events": test_events_printed_are_counts_of_rows, "null": test_null_named_is_the_null_used}
    with pytest.raises(AssertionError):
        if check == "target":
            assert re.search(kind.target, TARGET_READERS[consumer](kind, tmp))
        else:
            checks[check](kinds, tmp, kind_name, consumer)


@pytest.mark.parametrize("kind_name", list(KINDS))
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_null_named_is_the_null_used(kinds, tmp, kind_name, consumer):
    kind = kinds(kind_name)
    printed = CONSUMERS[consumer](kind, tmp)
    used = kind.result.null
    assert kind.result.to_dict()["null"] == used
    assert printed.null == used, (printed.null, used)


# ------------------------------------------------------------------------------------ the target named
def _margin_summary(kind, tmp) -> str:
    text = str(kind.single.margin_test(0.1).summary())
    return re.search(r"Target:\s+(.*?)(\s{2,}|$)", text, flags=re.M).group(1)


def _planning_summary(kind, tmp, what: str) -> str:
    """The Outcome of the summary of the kind's sample-size calculation or of its power at the kind's n."""
    if not kind.sample_size or (kind.survival and "censored_fraction" not in kind.sample_size):
        pytest.skip("no planning call of this kind (a probability matrix; a survival plan without censoring is "
                    "a binary plan)")
    res = (_sample_size(kind) if what == "sample_size" else
           ct.calib_power(kind.single.n, **kind.sample_size, intercept=-0.3))
    return re.search(r"Outcome:\s+(.*?)(\s{2,}|$)", str(res.summary()), flags=re.M).group(1)


TARGET_READERS = {"summary": lambda kind, tmp: summary_reader(kind, tmp).target,
                  "report": lambda kind, tmp: read_report_html(report_html(kind, tmp)).target,
                  "margin_test": _margin_summary,
                  "sample_size": partial(_planning_summary, what="sample_size"),
                  "power": partial(_planning_summary, what="power")}


@pytest.mark.parametrize(("consumer", "kind_name"), mark(
    [(c, k) for c in TARGET_READERS for k in KINDS],
    {**{("margin_test", k): SURV_TARGET for k in SURVIVAL_KINDS},
     **{(c, k): SURV_TARGET for c in ("sample_size", "power") for k in ("survival", "competing")}}))
def test_target_named_matches_the_kind(kinds, tmp, consumer, kind_name):
    kind = kinds(kind_name)
    target = TARGET_READERS[consumer](kind, tmp)
    assert target and re.search(kind.target, target), (target, kind.target)
    if not kind.survival:
        assert "survival" not in target


# ------------------------------------------------------------------------------------ plan and acceptance
def _sample_size(kind):
    """calib_sample_size of the kind's predictions for 90% power against a logistic intercept of -0.3."""
    if "sample_size" not in kind.cache:
        kind.cache["sample_size"] = ct.calib_sample_size(**kind.sample_size, intercept=-0.3, power=0.9)
    return kind.cache["sample_size"]


def _plan(kind, tmp):
    ss = _sample_size(kind)
    return ct.plan(tmp / f"{kind.name}-plan.json", acceptance=CRITERIA, sample_size=ss), ss


PLAN_KINDS = [k for k in KINDS if k not in ("topk", "full")]  # a probability matrix is not kept by a plan


@pytest.mark.parametrize("kind_name", mark(PLAN_KINDS, {k: PLAN_CENSORING for k in ("survival", "competing")}))
def test_plan_power_is_recomputed_with_every_stored_input(kinds, tmp, kind_name):
    kind = kinds(kind_name)
    plan, ss = _plan(kind, tmp)
    record = sample_size_record(ss)
    # the plan stores the predictions rounded to a fixed unit (analysis_plan._encode_predictions): power to ~1e-8
    assert planned_curve(record, [ss.n])["power"][0] == pytest.approx(ss.achieved_power, rel=1e-6)
    html = report_html(kind, tmp, plan=plan)
    n, shown = plan_power(html)
    assert n == kind.single.n
    expected = ct.calib_power(n, **kind.sample_size, intercept=-0.3).power
    assert shown_as(shown, expected), (shown, expected)


@pytest.mark.parametrize("kind_name", mark(PLAN_KINDS, {k: EVENTS_IPCW for k in ("survival", "competing")}))
def test_plan_report_events_are_counts_of_rows(kinds, tmp, kind_name):
    kind = kinds(kind_name)
    plan, _ = _plan(kind, tmp)
    shown = plan_events(report_html(kind, tmp, plan=plan))
    if shown is None:
        pytest.skip("the plan's sentence states no events for this kind")
    expected = kind.events["pooled"] if kind.grouped else kind.events
    assert shown == str(expected), (shown, expected)


@pytest.mark.parametrize("kind_name", mark(list(KINDS), {k: CLUSTER_ACCEPT for k in CLUSTERED_KINDS}))
def test_acceptance_evaluates_every_criterion_the_kind_can(kinds, tmp, kind_name):
    kind = kinds(kind_name)
    evaluation = evaluate_acceptance(kind.single, CRITERIA)
    verdicts = dict(zip(evaluation.table["criterion"], evaluation.table["verdict"]))
    reasons = dict(zip(evaluation.table["criterion"], evaluation.table["reason"]))
    missed = {key: reasons[key] for key in kind.evaluable if verdicts[key] == NOT_EVALUABLE}
    assert not missed, missed
    clustering = getattr(kind.single, "clustering", None)
    if clustering is not None:  # CITL, slope and O/E from the cluster-robust estimates
        m = clustering.measures
        estimates = dict(zip(evaluation.table["criterion"], evaluation.table["estimate"]))
        assert (estimates["citl_within"], estimates["slope_within"], estimates["oe_within"]) == \
            pytest.approx((m.citl, m.slope, m.oe), rel=1e-12)
    plan = _plan(kind, tmp)[0] if kind.sample_size else ct.plan(tmp / f"{kind.name}-accept.json",
                                                                  acceptance=CRITERIA)
    # the report states the same verdicts
    assert evaluate_acceptance(kind.single, CRITERIA, alpha=plan.alpha).sentence.replace("The model", "") in \
        visible_text(report_html(kind, tmp, plan=plan)).replace("²", "^2")


# ------------------------------------------------------------------------------------ survival = binary
@pytest.mark.parametrize("kind_name", mark(["survival_weighted"], {"survival_weighted": SURV_WEIGHTED_NULL}))
def test_survival_without_censoring_before_the_horizon_is_the_binary_call(kinds, kind_name):
    """Every row followed past the horizon: the survival result (with weights) is the (weighted) binary result
    of 1{T <= t}, its null included."""
    kind = kinds(kind_name)
    frame = kind.frame
    assert survival_events(frame) == int(np.sum(frame["time"] <= H))  # no censoring before t
    y = ((frame["event"] == 1) & (frame["time"] <= H)).astype(int)
    weights = {"weights": frame["w"].to_numpy()} if "weights" in kind.options else {}
    ref = ct.calib_ci(y=y.to_numpy(), probs=frame["risk"].to_numpy(), rng=SEED, **weights)
    assert kind.result.estimate == pytest.approx(ref.estimate, rel=1e-12)
    assert kind.result.null == ref.null, (kind.result.null, ref.null)
    assert kind.result.null_pvalue == pytest.approx(ref.null_pvalue, rel=1e-12)
    assert tuple(kind.result.conf_int()) == pytest.approx(tuple(ref.conf_int()), rel=1e-9)


# ------------------------------------------------------------------------------------ the default rng
REPRO_SCRIPT = r"""
import json, re, sys, tempfile
from pathlib import Path
import calibtest as ct
from calibtest.reporting.html import build_context
from conformance_helpers import H, binary_frame, survival_frame, visible_text
calls = {
    "binary": lambda: ct.calib_ci("y ~ p", data=binary_frame()),
    "grouped": lambda: ct.calib_ci("y ~ p", data=binary_frame(), by="g"),
    "clustered": lambda: ct.calib_ci("y ~ p", data=binary_frame(), cluster="site"),
    "survival": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=survival_frame(), horizon=H),
}
stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
out = {}
for name in sys.argv[1:]:
    res = calls[name]()
    path = Path(tempfile.mkdtemp()) / "r.html"
    ct.report(res, path)
    attached = [text for file, text, _ in build_context(res, figures=False)["_attachments"] if file.endswith(".json")]
    out[name] = {"result": json.dumps(res.to_dict(), sort_keys=True, default=str) + str(res.summary()),
                 "report": stamp.sub("<time>", visible_text(path.read_text(encoding="utf-8")) + "".join(attached))}
print(json.dumps(out))
"""
REPRO_KINDS = ("binary", "grouped", "clustered", "survival")


@pytest.fixture(scope="module")
def two_processes():
    """The default-rng calls of REPRO_KINDS (no rng=), their to_dict, summary and report, in two processes."""
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(ct.__file__).parents[1]), tests])}
    procs = [subprocess.Popen([sys.executable, "-c", REPRO_SCRIPT, *REPRO_KINDS], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    return [json.loads(out) for out, _ in outs]


@pytest.mark.parametrize(("kind_name", "what"), mark(
    [(k, w) for k in REPRO_KINDS for w in ("result", "report")],
    {("clustered", "result"): DEFAULT_RNG, ("clustered", "report"): DEFAULT_RNG, ("grouped", "report"): DEFAULT_RNG}))
def test_default_rng_numbers_are_the_same_in_two_processes(two_processes, kind_name, what):
    first, second = (run[kind_name][what] for run in two_processes)
    if first != second:
        a, b = first.split(), second.split()
        diff = [(x, y) for x, y in zip(a, b) if x != y][:5]
        pytest.fail(f"{kind_name} {what} differs between two processes: {diff}")


# ------------------------------------------------------------------------------------ refusals
STREAM_ENTRIES = {"calib_ci": ct.calib_ci, "calib_test": ct.calib_test, "evidence": ct.evidence}


@pytest.mark.parametrize(("kind_name", "entry"), mark(
    [(k, e) for k in ("csv", "parquet") for e in STREAM_ENTRIES],
    {(k, "calib_test"): STREAM_CHANGED for k in ("csv", "parquet")}))
def test_a_file_changed_while_streamed_is_refused(kinds, tmp, monkeypatch, kind_name, entry):
    """The file's modification time moves after its first chunk is read (a writer replaced it): every
    streamed entry point refuses the mix of two versions."""
    from calibtest.streams import files
    kind = kinds(kind_name)
    path = tmp / f"changing-{entry}{kind.file.suffix}"
    path.write_bytes(kind.file.read_bytes())
    for reader in (files._CsvReader, files._ParquetReader):
        monkeypatch.setattr(reader, "chunks", _touching(reader.chunks))
    with pytest.raises(ValueError, match="changed while it was being read"):
        STREAM_ENTRIES[entry](kind.formula, data=path, chunksize=200)


def _touching(chunks):
    """``chunks`` that move the file's modification time once the first chunk is out."""
    def wrapped(self, columns, chunksize):
        for i, chunk in enumerate(chunks(self, columns, chunksize)):
            yield chunk
            if i == 0:
                st = os.stat(self.path)
                os.utime(self.path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    return wrapped


SURVIVAL_ENTRIES = {"calib_test": ct.calib_test, "evidence": ct.evidence, "hosmer_lemeshow": ct.hosmer_lemeshow,
                    "val_prob": ct.val_prob, "tcal_test": ct.tcal_test}


@pytest.mark.parametrize("entry", mark(list(SURVIVAL_ENTRIES), {e: HORIZON_TYPEERROR for e in SURVIVAL_ENTRIES}))
def test_survival_options_are_taken_or_refused_with_the_packages_error(kinds, entry):
    """An entry point given the survival kind's options runs it or refuses with OptionError/DataError naming the
    option, never Python's raw "unexpected keyword argument"."""
    kind = kinds("survival")
    try:
        SURVIVAL_ENTRIES[entry](kind.formula, data=kind.frame, **kind.options)
    except (OptionError, OptionTypeError, DataError) as exc:
        assert "horizon" in str(exc)
    except TypeError as exc:
        pytest.fail(f"{entry}: raw {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("groups", mark([0, 1, 2], {g: HL_GROUPS for g in (0, 1, 2)}))
def test_report_refuses_the_options_the_command_line_refuses(kinds, tmp, groups):
    kind = kinds("binary")
    path = tmp / "binary.csv"
    kind.frame.to_csv(path, index=False)
    with pytest.raises(SystemExit) as exc:
        main(["report", str(path), "--formula", kind.formula, "-o", str(tmp / "cli.html"), "--hl-groups", str(groups)])
    assert exc.value.code == 2
    out = tmp / f"hl{groups}.html"
    with pytest.raises(OptionError, match="hl_groups"):
        ct.report(kind.result, out, hl_groups=groups)
    assert not out.exists()
