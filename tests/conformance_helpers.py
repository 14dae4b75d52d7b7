"""Data, kinds of analysis and readers of what each consumer prints, for tests/test_conformance.py (not a test
module).

A *kind* is one way of calling ``calib_ci`` (binary, top-1, survival at a horizon, clustered, streamed from a
file, ...): :class:`Kind` holds the call, its data, the result and what the data say independently of the
package (the events counted row by row, the target's name).  A *reader* turns what one consumer prints
(``summary()``, the HTML report, the command line's JSON, ``to_dict()``) into :class:`Printed`: the printed
tokens of the estimate, ECE, interval, p-value, null, target and events, exactly as they appear, so that a test
compares them with the result's own numbers to the precision printed.
"""
from __future__ import annotations

import html as html_lib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import calibtest as ct
from report_helpers import tables

H = 5.0  # the horizon of every survival kind
SEED = 7  # the rng= of every kind (its Monte Carlo numbers are then the same in each consumer's own call)
CRITERIA = {"ece_below": 0.1, "citl_within": (-0.5, 0.5), "slope_within": (0.7, 1.4), "oe_within": (0.7, 1.4)}
#: a number as printed ("%g"), not the digit of a name such as a0, z_B or chi2
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


# ----------------------------------------------------------------------------------------------------- data
def binary_frame(n: int = 800, seed: int = 1) -> pd.DataFrame:
    """Probabilities p, outcomes y drawn from p**1.2 (miscalibrated), case weights w, 20 sites nested in two
    groups g (so that by="g" and cluster="site" may be combined)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    site = rng.integers(0, 20, n)
    return pd.DataFrame({"y": (rng.random(n) < p ** 1.2).astype(np.int64), "p": p, "w": rng.uniform(0.5, 2.0, n),
                         "site": site, "g": np.where(site < 10, "a", "b")})


def probs_frame(n: int = 900, n_classes: int = 3, seed: int = 2) -> pd.DataFrame:
    """Three-class probabilities p0..p2, labels drawn from the sharpened probabilities, the top-1 confidence and
    whether the top-1 class is correct."""
    rng = np.random.default_rng(seed)
    prob = np.exp(rng.normal(0.0, 1.5, (n, n_classes)))
    prob /= prob.sum(axis=1, keepdims=True)
    sharp = prob ** 1.3 / np.sum(prob ** 1.3, axis=1, keepdims=True)
    label = (rng.random(n)[:, None] > np.cumsum(sharp, axis=1)).sum(axis=1)
    frame = pd.DataFrame(prob, columns=[f"p{i}" for i in range(n_classes)])
    frame["label"] = label
    frame["conf"] = prob.max(axis=1)
    frame["correct"] = (prob.argmax(axis=1) == label).astype(np.int64)
    return frame


def survival_frame(n: int = 800, seed: int = 3, *, censoring: float | None = 15.0, causes: bool = False
                   ) -> pd.DataFrame:
    """Exponential event times given the risk by H (as tests/test_survival_report.py builds them), exponential
    censoring with mean ``censoring`` (None: every row followed to time 100, past the horizon), with ``causes``
    a second (competing) event code 2 for 30% of the events; case weights w."""
    rng = np.random.default_rng(seed)
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(H / -np.log1p(-risk))
    c = rng.exponential(censoring, n) if censoring else np.full(n, 100.0)
    event = (t <= c).astype(np.int64)
    if causes:
        event = event * np.where(rng.random(n) < 0.7, 1, 2)
    return pd.DataFrame({"time": np.minimum(t, c), "event": event, "risk": risk, "w": rng.uniform(0.5, 2.0, n)})


# ----------------------------------------------------------------------------------------------------- kinds
@dataclass
class Kind:
    """One kind of analysis: the call, its data, the result and what the data say without the package.

    ``options`` are the keyword arguments of ``calib_ci`` besides ``data`` (the CLI gets the same through
    ``cli``, None when the command line cannot run the kind); ``events`` counts rows (y = 1, the top-1
    prediction correct, the event of the cause by the horizon), per group for a grouped kind; ``target`` is
    a word the target's name must contain and ``not_target`` a name it must not be; ``evaluable`` are the
    acceptance criteria the kind can evaluate; ``sample_size`` the keyword arguments of calib_sample_size for
    a plan of this kind; ``file`` the data file a streamed kind reads.
    """

    name: str
    formula: str
    frame: pd.DataFrame
    options: dict
    data: object
    result: object
    events: object
    target: str
    not_target: str | None = None
    cli: list | None = None
    evaluable: tuple = ("ece_below",)
    sample_size: dict = field(default_factory=dict)
    file: Path | None = None
    cache: dict = field(default_factory=dict, repr=False)  # what a consumer wrote or printed, made once

    @property
    def grouped(self) -> bool:
        return hasattr(self.result, "groups") and hasattr(self.result, "pooled")

    @property
    def single(self):
        """The result that holds the whole sample's numbers (the pooled one of a grouped analysis)."""
        return self.result.pooled if self.grouped else self.result

    @property
    def survival(self) -> bool:
        return "horizon" in self.options


def survival_events(frame: pd.DataFrame, cause: int = 1) -> int:
    """Rows with the event (of ``cause``) at or before the horizon: a count of rows."""
    return int(np.count_nonzero((frame["event"].to_numpy() == cause) & (frame["time"].to_numpy() <= H)))


def make_kind(name, formula, frame, options=None, *, data=None, events=None, target="binary", cli=(), **extra):
    """Run ``calib_ci(formula, data=data or frame, rng=SEED, **options)`` and wrap it as a :class:`Kind`."""
    options = dict(options or {})
    data = frame if data is None else data
    result = ct.calib_ci(formula, data=data, rng=SEED, **options)
    return Kind(name=name, formula=formula, frame=frame, options=options, data=data, result=result, events=events,
                target=target, cli=None if cli is None else list(cli), **extra)


# ----------------------------------------------------------------------------------------------------- printed
@dataclass
class Printed:
    """What one consumer prints of one result, as the printed tokens (None: the consumer does not print it).

    ``groups`` maps a group's label to its printed tokens (``n``, ``events``, ``ece``, ``ece_ci_lower``,
    ``ece_ci_upper``, ``pvalue``) for a grouped result.
    """

    estimate: str | None = None
    ece: str | None = None
    ci_lower: str | None = None
    ci_upper: str | None = None
    ece_ci_lower: str | None = None
    ece_ci_upper: str | None = None
    pvalue: str | None = None
    null: str | None = None
    target: str | None = None
    events: str | None = None
    groups: dict | None = None
    own: object = None  # the result whose numbers these are, when not the kind's own (the CLI's file call)


def significant(text: str) -> int:
    digits = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return max(len(digits), 1)


def shown_as(text: str, x) -> bool:
    """Whether the printed ``text`` is ``x`` rounded to the significant digits of ``text`` (an integer printed
    in full, a zero only for an exact zero)."""
    if text is None or x is None:
        return False
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return text == str(int(x))
    x = float(x)
    if not math.isfinite(x) or NUMBER.fullmatch(text) is None:
        return False
    value = float(text)
    if value == 0:
        return x == 0
    return value == float(f"{x:.{significant(text)}g}")


def own_numbers(res) -> dict:
    """The result's own numbers of the fields of :class:`Printed` (a ``CalibrationResult``)."""
    d = res.to_dict()
    keys = ("estimate", "ece", "ci_lower", "ci_upper", "ece_ci_lower", "ece_ci_upper")
    return {**{k: d[k] for k in keys}, "pvalue": d["null_pvalue"]}


def numbers_in(text: str) -> list[str]:
    return NUMBER.findall(text)


def flat(text: str) -> str:
    """Whitespace collapsed to single spaces (the summary wraps sentences over lines)."""
    return " ".join(text.split())


# ----------------------------------------------------------------------------------------------------- summary
def _summary_line(text: str, label: str) -> list[str] | None:
    for line in text.splitlines():
        if line.startswith(label):  # the verdict beside the interval is words, not a number
            return numbers_in(re.sub(r"\b(contains|excludes) 0\b", "", line[len(label):]))
    return None


def _setting(text: str, label: str) -> str | None:
    """The value of a ``Label:  value`` setting of a summary (in either column; continuation lines of a
    first-column setting joined)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        at = line.find(label)
        if at < 0:
            continue
        value = [line[at + len(label):].strip()]
        for more in lines[i + 1:] if at == 0 else []:
            if more.startswith(" " * 10) and more.strip():
                value.append(more.strip())
            else:
                break
        return re.split(r"\s{3,}", " ".join(value))[0]
    return None


def read_summary_text(text: str) -> Printed:
    """The tokens of a calib_ci summary: the estimate table, note [1] (null and p-value), Mode and Events."""
    t = _summary_line(text, "ECE^2 (T)")
    e = _summary_line(text, "ECE (sqrt T+)")
    m = re.search(r"Null of the interval's test \(null='([\w-]+)'\).*?, p = (\S+?)[\s(]", flat(text))
    events = _setting(text, "Events by t:")
    return Printed(estimate=t[0], ci_lower=t[-2], ci_upper=t[-1], ece=e[0], ece_ci_lower=e[-2], ece_ci_upper=e[-1],
                   null=m.group(1) if m else None, pvalue=m.group(2) if m else None,
                   target=_setting(text, "Mode:"), events=events.split()[0] if events else None)


def read_grouped_summary_text(text: str, labels: list[str]) -> Printed:
    """The tokens of a grouped summary: one table row per group (n, events, B, ece, lower, upper, p, p Holm),
    the pooled row, the Null and Mode settings."""
    rows = {}
    for line in text.splitlines():
        line = re.sub(r"\b(contains|excludes) 0\b", "", line)  # the verdict column beside the interval
        head = line.split("  ")[0].strip()
        if head in labels + ["(pooled)"] and len(numbers_in(line[len(head) + 1:])) >= 7 and head not in rows:
            rows[head] = numbers_in(line[len(head) + 1:])
    groups = {lab: dict(zip(("n", "events", "n_bins", "ece", "ece_ci_lower", "ece_ci_upper", "pvalue"), rows[lab]))
              for lab in labels if lab in rows}
    pooled = rows.get("(pooled)")
    null = re.search(r"Null:\s+([\w-]+)", text)
    return Printed(ece=pooled[3], ece_ci_lower=pooled[4], ece_ci_upper=pooled[5], pvalue=pooled[6],
                   null=null.group(1) if null else None, target=_setting(text, "Mode:"), events=pooled[1],
                   groups=groups)


# ----------------------------------------------------------------------------------------------------- HTML
def visible_text(html: str) -> str:
    """The text a reader of the HTML sees (no scripts, styles or tags), whitespace collapsed."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return flat(html_lib.unescape(re.sub(r"<[^>]+>", " ", body)))


def table_rows(html: str, caption_start: str) -> list[list[str]]:
    """The rows of every table whose caption starts with ``caption_start``, in order."""
    return [row for cap, rows in tables(html) if cap.startswith(caption_start) for row in rows]


def row_cells(rows: list[list[str]], label: str) -> list[str] | None:
    """The cells after the label of the first row whose first cell starts with ``label``."""
    for row in rows:
        if row and row[0].startswith(label):
            return row[1:]
    return None


def read_report_html(html: str) -> Printed:
    """The tokens of a one-model report: the estimate table, the p-value of the test used, the null and target
    in the settings, the events of "Model and data"."""
    est = table_rows(html, "Estimate and")
    point = " ".join(row_cells(est, "Point estimate"))
    interval = row_cells(est, "95%")
    t = re.search(r"T = (\S+)", point).group(1)
    ece = re.search(r"√T⁺ = (\S+)", point).group(1)
    low, high = numbers_in(interval[0])[-2:]
    elow, ehigh = numbers_in(interval[1])[-2:]
    settings = table_rows(html, "Settings of the analysis")
    null = re.search(r"\(null='([\w-]+)'\)", " ".join(row_cells(settings, "Null distribution")))
    pvalues = [row_cells(rows, "p-value of H0: ECE = 0") for cap, rows in tables(html)
               if row_cells(rows, "p-value of H0: ECE = 0")]
    # the test that decided the interval: the finite-sample table when there is one, else the asymptotic one
    pvalue = numbers_in(pvalues[-1][0])[0] if pvalues else None
    data_rows = table_rows(html, "The model under validation")
    counts = row_cells(data_rows, "Rows analysed")
    return Printed(estimate=t, ece=ece, ci_lower=low, ci_upper=high, ece_ci_lower=elow, ece_ci_upper=ehigh,
                   pvalue=pvalue, null=null.group(1) if null else None,
                   target=" ".join(row_cells(settings, "Target (mode)") or []) or None,
                   events=counts[0].split(";")[1].strip() if counts and ";" in counts[0] else None)


def plan_events(html: str) -> str | None:
    """The events of "the study has n = ... with E events" in the report's plan section."""
    m = re.search(r"the study has n = \d+ with (\S+) events", visible_text(html))
    return m.group(1) if m else None


def plan_power(html: str) -> tuple[int, str] | None:
    """(n, power) of "the power for the planned alternative is P at n = N" in the report's plan section."""
    m = re.search(r"the power for the planned alternative is (\S+) at n = (\d+)", visible_text(html))
    return (int(m.group(2)), m.group(1)) if m else None


def read_dict(d: dict) -> Printed:
    """The fields of a one-result ``to_dict()`` (or the CLI's JSON), as the tokens repr would print."""
    return Printed(**{k: repr(d[k]) for k in ("estimate", "ece", "ci_lower", "ci_upper", "ece_ci_lower",
                                              "ece_ci_upper")},
                   pvalue=repr(d["null_pvalue"]), null=d["null"],
                   events=None if d.get("n_events_before_horizon") is None else str(d["n_events_before_horizon"]))


def read_grouped_dict(d: dict) -> Printed:
    """The pooled result's fields of a grouped ``to_dict()``, with each group's row (keyed by its level)."""
    pooled = read_dict(d["pooled"])
    pooled.groups = {str(g["group"]).split("=", 1)[-1]: {
        "n": str(g["n"]), "events": None if g["events"] is None else str(g["events"]), "ece": repr(g["ece"]),
        "ece_ci_lower": repr(g["ece_ci_lower"]), "ece_ci_upper": repr(g["ece_ci_upper"]), "pvalue": repr(g["pvalue"])}
        for g in d["groups"]}
    pooled.null = d["null"]
    return pooled


def attached_json(ctx: dict) -> dict:
    """The ``result-*.json`` the report embeds (its PDF attachments), parsed."""
    found = [json.loads(text) for name, text, _ in ctx["_attachments"]
             if re.fullmatch(r"result-\d+-.*\.json", name)]
    assert len(found) == 1, [name for name, _, _ in ctx["_attachments"]]
    return found[0]
