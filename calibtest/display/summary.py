"""statsmodels-style Summary tables and the JSON-safe dict of a result.

Tables are stored as DataFrames (``statsmodels.iolib.summary2.Summary``) and
formatted only when rendered; numbers are rounded for display only.
"""
from __future__ import annotations

import html
import math
import re
import textwrap

import numpy as np

import pandas as pd
from statsmodels.iolib import summary2

from calibtest.display.format import fmt, fmt_interval, fmt_p, interval_verdict, json_safe, p_equals
from calibtest.options import check_alpha

__all__ = ["CalibSummary", "ResultDisplay", "WIDTH", "latex_escape", "wrap_note", "short_name", "model_text", "build_summary", "result_dict", "result_notes", "null_rows", "null_notes",
           "asymptotic_test", "resampling_notes", "null_text", "null_name", "verdict_null_note"]


#: Below this n (or with fewer than 2 rows per occupied bin on average) the summary says that the
#: asymptotic approximations are unreliable and which null to use instead.
SMALL_N = 50

#: Width of every line of a text summary (characters).
WIDTH = 78

_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))
#: an interval such as "[0.001, 0.02]", "(0, 0.3]" or "(-inf, 1.2]": its ", " must not break a line
_INTERVAL_RE = re.compile(r"[\[(][^\s\[\]()]*, [^\s\[\]()]*[\])]")
_NBSP = "\x00"


def part(res, name: str, field: str):
    """``res.<name>.<field>`` of a result's optional nested part (``conditional``, ``monte_carlo``, ...), or None."""
    obj = getattr(res, name, None)
    return None if obj is None else getattr(obj, field)


def latex_escape(text) -> str:
    """``text`` with the LaTeX special characters & % $ # _ { } ~ ^ \\ escaped."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], str(text))


def wrap_note(text: str, width: int, indent: str = "") -> list[str]:
    """Lines of ``text`` wrapped at word boundaries to ``width``, never inside an interval "[a, b]"."""
    protected = _INTERVAL_RE.sub(lambda m: m.group().replace(", ", "," + _NBSP), text)
    lines = textwrap.wrap(protected, width, subsequent_indent=indent, break_on_hyphens=False)
    return [line.replace(_NBSP, " ") for line in lines] or [""]


def _cell(value, spec) -> str:
    """One table cell as shown: ``spec`` is a number of significant digits, a callable or None (str)."""
    if value is None:
        return ""
    if callable(spec):
        return spec(value)
    if isinstance(spec, int) and not isinstance(value, str):
        return fmt(value, spec)
    return fmt(value) if isinstance(value, (bool, np.bool_)) else str(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 3, 0)] + "..."


class CalibSummary(summary2.Summary):
    """A statsmodels ``Summary`` of fixed width with escaped HTML and LaTeX.

    ``print(s)`` gives text whose lines all have :data:`WIDTH` characters,
    ``s.as_html()`` HTML and ``s.as_latex()`` LaTeX, with user-supplied text
    escaped; it displays as HTML in notebooks.  Tables hold numbers, formatted
    only when rendered: each column has one format (``formats``).
    """

    width = WIDTH

    # ------------------------------------------------------------------ building
    def add_settings(self, items: dict) -> None:
        """Add ``label: value`` pairs (shown two per line when they fit)."""
        df = pd.DataFrame({"key": [str(k) for k in items], "value": [str(v) for v in items.values()]})
        self.tables.append(df)
        self.settings.append({"kind": "settings", "index": False, "header": False})

    def add_table(self, df: pd.DataFrame, formats: dict | None = None, index: bool = True) -> None:
        """Add a table of numbers; ``formats`` maps a column to digits (see :func:`fmt`) or a callable."""
        self.tables.append(df)
        self.settings.append({"kind": "table", "index": index, "header": True, "formats": dict(formats or {})})

    def add_notes(self, notes) -> None:
        """Add numbered notes to the footer."""
        self.add_text("Notes:")
        for i, note in enumerate(notes, 1):
            self.add_text(f"[{i}] {note}")

    # ------------------------------------------------------------------ formatted cells
    def _formatted(self, i: int):
        """(header, index labels or None, rows of str) of table ``i``."""
        df, st = self.tables[i], self.settings[i]
        formats = st.get("formats", {})
        header = [str(c) for c in df.columns]
        rows = [[_cell(v, formats.get(c)) for c, v in zip(df.columns, row)]
                for row in df.astype(object).itertuples(index=False, name=None)]
        index = [str(v) for v in df.index] if st.get("index", True) else None
        return header, index, rows

    # ------------------------------------------------------------------ text
    def _settings_text(self, i: int) -> list[str]:
        W = self.width
        df = self.tables[i]
        pairs = list(zip(df["key"], df["value"]))
        half = (W - 2) // 2
        kw = max(len(k) for k, _ in pairs) + 1 if pairs else 0
        short = lambda k, v: kw + len(v) <= half
        lines, j = [], 0
        while j < len(pairs):
            k, v = pairs[j]
            if short(k, v) and j + 1 < len(pairs) and short(*pairs[j + 1]):
                k2, v2 = pairs[j + 1]
                lines.append(f"{k:<{kw}}{v:<{half - kw}}  {k2:<{kw}}{v2}")
                j += 2
                continue
            room = W - kw
            chunks = textwrap.wrap(v, room, break_on_hyphens=False) or [""]
            lines.append(f"{k:<{kw}}{chunks[0]}")
            lines += [" " * kw + c for c in chunks[1:]]
            j += 1
        return lines

    def _table_text(self, i: int) -> list[str]:
        W = self.width
        header, index, rows = self._formatted(i)
        widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(header)]
        iw = max([len(v) for v in index]) if index else 0
        gap = 2
        total = lambda: iw + sum(w + gap for w in widths) - (0 if index else gap)
        if total() > W:  # narrower gaps before anything is cut
            gap = 1
        if index and total() > W:  # then shorten the row labels
            iw = max(W - (total() - iw), 8)
        while total() > W:  # then the widest column (text)
            j = int(np.argmax(widths))
            widths[j] -= total() - W
        extra = W - total()
        if widths:  # spread the spare width over the columns, so the table spans the line
            share, rest = divmod(extra, len(widths))
            widths = [w + share + (1 if j < rest else 0) for j, w in enumerate(widths)]
        elif index:
            iw += extra

        def line(label, cells):
            pieces = [_clip(label, iw).ljust(iw)] if index else []
            pieces += [_clip(c, w).rjust(w) for c, w in zip(cells, widths)]
            return (" " * gap).join(pieces)

        def row_lines(label, cells) -> list[str]:  # a label longer than its column continues below, indented
            parts = textwrap.wrap(label, iw, break_on_hyphens=False) if len(label) > iw else [label]
            parts = parts[:1] + textwrap.wrap(" ".join(parts[1:]), iw - 2, break_on_hyphens=False) \
                if len(parts) > 1 and iw > 10 else [label]
            return [line(parts[0], cells)] + [line("  " + part, [""] * len(cells)) for part in parts[1:]]
        lines = [line("", header), "-" * W]
        for label, r in zip(index or [""] * len(rows), rows):  # a loop over the table's rows
            lines += row_lines(label, r)
        return [ln.ljust(W) for ln in lines]

    def as_text(self) -> str:
        W = self.width
        out = []
        if self.title:
            out += [t.center(W) for t in textwrap.wrap(self.title, W)]
        out.append("=" * W)
        for i, st in enumerate(self.settings):
            if i:
                out.append("-" * W if st.get("kind") == "settings" or self.settings[i - 1].get("kind")
                           == "settings" else "=" * W)
            out += self._settings_text(i) if st.get("kind") == "settings" else self._table_text(i)
        out.append("=" * W)
        for txt in self.extra_txt:
            indent = " " * (txt.index("]") + 2) if txt.startswith("[") and "]" in txt else ""
            out += wrap_note(txt, W, indent)
        return "\n".join(line.ljust(W) for line in out)

    # ------------------------------------------------------------------ HTML
    def as_html(self) -> str:
        esc = html.escape
        parts = []
        for i, st in enumerate(self.settings):
            cap = f"<caption>{esc(self.title)}</caption>" if i == 0 and self.title else ""
            if st.get("kind") == "settings":
                df = self.tables[i]
                body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>"
                               for k, v in zip(df["key"], df["value"]))
                parts.append(f'<table class="simpletable">{cap}{body}</table>')
                continue
            header, index, rows = self._formatted(i)
            head = "<tr>" + ("<th></th>" if index else "") + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"
            body = "".join("<tr>" + (f"<th>{esc(label)}</th>" if index else "")
                           + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
                           for label, r in zip(index or [None] * len(rows), rows))
            parts.append(f'<table class="simpletable">{cap}{head}{body}</table>')
        notes = "<br/>\n".join(esc(t) for t in self.extra_txt)
        return "\n".join(parts) + "<br/>\n" + notes

    # ------------------------------------------------------------------ LaTeX
    def as_latex(self, label: str = "") -> str:
        le = latex_escape
        out = ["\\begin{table}", "\\caption{" + le(self.title or "") + "}", "\\label{" + le(label) + "}",
               "\\begin{center}"]
        for i, st in enumerate(self.settings):
            if st.get("kind") == "settings":
                df = self.tables[i]
                out += ["\\begin{tabular}{ll}", "\\hline"]
                out += [f"{le(k)} & {le(v)} \\\\" for k, v in zip(df["key"], df["value"])]
            else:
                header, index, rows = self._formatted(i)
                cols = ("l" if index else "") + "r" * len(header)
                out += ["\\begin{tabular}{" + cols + "}", "\\hline",
                        " & ".join(([""] if index else []) + [le(h) for h in header]) + " \\\\", "\\hline"]
                out += [" & ".join(([le(lb)] if index else []) + [le(c) for c in r]) + " \\\\"
                        for lb, r in zip(index or [None] * len(rows), rows)]
            out += ["\\hline", "\\end{tabular}", ""]
        out += ["\\end{center}", "\\end{table}", "\\bigskip"]
        out.append(" \\newline\n".join(le(t) for t in self.extra_txt))
        return "\n".join(out)

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()


class ResultDisplay:
    """The display protocol shared by every result type.

    A subclass implements ``_summary(alpha)`` (a :class:`CalibSummary`),
    ``_dict()`` (a flat dict of scalars and lists) and ``_repr_parts()``
    (short ``name=value`` strings); this mixin gives ``summary(alpha=None)``,
    ``to_dict()`` (JSON-safe), a one-line ``__repr__`` and ``_repr_html_``.
    Dataclasses using it pass ``repr=False`` so that this ``__repr__`` is kept.
    """

    def summary(self, alpha: float | None = None) -> CalibSummary:
        """A statsmodels-style summary at level ``alpha`` (default: the result's own).

        ``print`` it for text (every line the same width, at most 80
        characters); ``.as_html()`` and ``.as_latex()`` escape user text.
        """
        return self._summary(None if alpha is None else check_alpha(alpha))

    def to_dict(self) -> dict:
        """All scalar results as a flat JSON-safe dict (NaN and infinities become None)."""
        return json_safe(self._dict())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} " + ", ".join(self._repr_parts()) + ">"

    def _repr_html_(self) -> str:
        return self.summary().as_html()

    @property
    def call(self) -> str | None:
        """The call that produced the result, as text (rendered from ``call_record``)."""
        record = getattr(self, "call_record", None)
        return None if record is None else str(record)


def short_name(text, width: int = 24) -> str:
    """``text`` cut to ``width`` characters (for one-line reprs)."""
    return _clip(str(text), width)


def model_text(formula, y_name, prob_names, name: str | None = None) -> str:
    """The model as shown in a summary: the formula, or ``y ~ p1 + p2``; ``name (formula)`` when named."""
    text = formula if formula else f"{y_name} ~ {' + '.join(map(str, prob_names)) or 'probs'}"
    return f"{name} ({text})" if name else text


def result_notes(res, alpha: float | None = None) -> list[str]:
    """Numbered notes for the summary footer (for the interval at level 1 - alpha)."""
    kind = res.kind
    notes = list(kind.notes())
    alpha = res.alpha if alpha is None else alpha
    ci = res.conf_int(alpha)
    level = f"{100 * (1 - alpha):g}%"
    if res.method != "adjusted":
        notes += resampling_notes(res, alpha)
    elif ci.contains_zero and res.null != "asymptotic":
        notes.append(f"The {kind.null_word()} test does not reject ECE = 0 ({p_equals(res.null_pvalue, 4)}), so 0 "
                     f"belongs to the {level} interval: no evidence of miscalibration at level {alpha:g} "
                     "(this is not evidence that the model is calibrated).")
    elif ci.contains_zero:
        notes.append(f"T+ = {fmt(res.estimate_pos)} is below the calibrated-regime threshold, so 0 belongs "
                     f"to the {level} interval: no evidence of miscalibration at level {alpha:g} "
                     "(this is not evidence that the model is calibrated).")
    elif ci.lower_open:
        notes.append("The interval is open at 0: (0, upper]. The calibrated-regime test rejects ECE = 0, "
                     "while the lower bound of the miscalibrated-regime interval reaches 0.")
    if ci.upper == ci.lower:
        notes.append(f"The {level} interval has zero width: the resampled statistics do not vary (too few rows "
                     "per resample, e.g. subsampling with b = floor(sqrt(n)) = 1); it carries no information."
                     if res.method != "adjusted" else
                     f"The {level} interval has zero width: the estimated standard error is 0 (every bin's "
                     "outcomes are constant); it carries no information about the sampling error.")
    notes += null_notes(res, alpha)
    if res.n < SMALL_N or res.n < 2 * res.n_occupied_bins:
        notes.append(f"Few rows for the asymptotic approximations (n = {res.n}, {res.n / res.n_occupied_bins:.3g} "
                     f"rows per occupied bin on average; they are reliable from about n = {SMALL_N} with at "
                     "least 2 rows per bin): the interval is approximate; for the test of calibration use "
                     "null='monte-carlo', whose size is exact given the predictions, and fewer bins.")
    if res.estimate < 0:
        notes.append("The debiased estimate T is negative (possible when ECE is small); T+ = 0 is used.")
    if res.n_occupied_bins and res.n_singleton_bins > res.n_occupied_bins / 2:
        notes.append(f"{res.n_singleton_bins} of {res.n_occupied_bins} occupied bins hold fewer than 2 rows "
                     "and do not enter T; consider fewer bins.")
    notes += sparse_cell_notes(res)
    if res.n_dropped:
        notes.append(f"{res.n_dropped} rows with missing values were dropped (missing='drop').")
    notes.append(f"Plug-in (biased) estimate T_m on the same bins: {fmt(res.plugin_estimate)}.")
    return notes + kind.closing_notes()


def sparse_cell_notes(res) -> list[str]:
    """The notes on the bin-count rule and on sparse cells (``docs/conventions.md``, "Number of bins")."""
    notes = []
    rule = getattr(res, "bin_rule", None)
    if rule is not None and rule.rule != "user":
        notes.append(f"Bins: {rule.describe()}")
    approx = getattr(res, "approximation", None)
    if approx is not None and approx.second_order_variance is not None:
        notes.append(f"The standard error adds the second-order variance of T, V2 = "
                     f"{fmt(approx.second_order_variance)}, to sigma1^2 / n (the simplex cells hold few rows).")
    if approx is not None and approx.approximate:
        notes.append("APPROXIMATE interval: " + "; ".join(approx.reasons) + ". " + SPARSE_ADVICE)
    return notes


#: What the approximate-interval note tells the user (coverage measured in vignettes/edges_coverage.md).
SPARSE_ADVICE = ("With many rows alone in a cell the interval can cover the binned ECE^2 far less often than "
                 "stated (measured with 200 data sets: 0.66, s.e. 0.03, at nominal 0.90 with 61% of the rows "
                 "alone, full calibration with K = 5 at n = 2000 and B = 8; 0.90 to 0.99 in milder cases). Use fewer bins (n_bins='auto' keeps at most 5% of the rows alone), fewer "
                 "classes or a top-k target; the test of calibration alone stays exact in size with "
                 "null='conditional' or null='monte-carlo'.")


def _settings_table(res, alpha: float) -> dict:
    out = {
        "Model:": model_text(res.formula, res.y_name, res.prob_names, getattr(res, "model_label", None)),
        "Mode:": res.kind.target_text(),
        "Classes (K):": "2" if res.n_classes is None else str(res.n_classes),
        "No. observations:": str(res.n),
        "Bins per dim. (B):": f"{res.n_bins} ({res.n_bins_rule})",
        "Occupied bins:": str(res.n_occupied_bins),
        "Bin volume (w):": fmt(res.bin_volume),
        "Method:": res.method,
        "Alpha:": fmt(alpha),
        "Null:": null_text(res),
    }
    if res.method != "adjusted":
        out.update(_resampling_settings(res))
    return res.kind.settings(out)  # a survival outcome: the estimand, the censoring and the events by t


def _resampling_settings(res) -> dict:
    """Settings rows of a resampling interval: resamples, their size, seed, HulC details."""
    label = {"bootstrap": "Resamples:", "subsampling": "Subsamples:", "hulc": "Bias subsamples:"}
    rs = res.resampling
    out = {label.get(res.method, "Resamples:"): f"{fmt(rs.n_resamples)} x {fmt(rs.resample_size)} rows",
           "Seed:": "Generator" if rs.seed == "Generator" else fmt(rs.seed)}
    if res.method == "hulc":
        out["HulC splits:"] = "more than n" if rs.hulc_splits is None else fmt(rs.hulc_splits)
        out["Median bias:"] = fmt(rs.hulc_median_bias, 4)
    return out


def build_summary(res, alpha=None, evidence=None, evidence_note: str | None = None,
                  conclusion: str | None = None) -> CalibSummary:
    """Summary of a :class:`~calibtest.ece.result.CalibrationResult` at level 1 - alpha (default: its own).

    It formats what the result holds and what it is given; it computes no
    test.  ``evidence`` (an :class:`~calibtest.EvidenceResult` of the same
    rows at the same alpha) opens the summary with the evidence table and
    its conclusion, and adds the bin-sensitivity table; without it,
    ``evidence_note`` says why it is not shown and ``conclusion`` (written
    by :func:`calibtest.checks.evidence_table.conclude` from the interval and its test)
    opens the summary.
    """
    alpha = res.alpha if alpha is None else alpha
    ci = res.conf_int(alpha)
    ci_ece = res.conf_int(alpha, scale="ece")
    smry = CalibSummary()
    smry.add_title("Calibration error: debiased l2-ECE with adjusted interval" if res.method == "adjusted"
                   else f"Calibration error: debiased l2-ECE with {res.method} interval")
    if evidence is not None:
        evidence.add_tables(smry)
    elif conclusion:
        smry.add_settings({"Conclusion:": conclusion})
    smry.add_settings(_settings_table(res, alpha))
    # the interval as every table shows it: (0, u] when it is open at 0, with its verdict beside it
    est = pd.DataFrame(
        {"estimate": [res.estimate, res.ece], "std err": [res.se, None],
         "interval": [fmt_interval(ci.lower, ci.upper, ci.lower_open, 6),
                      fmt_interval(ci_ece.lower, ci_ece.upper, ci_ece.lower_open, 6)],
         "verdict": [interval_verdict(ci.contains_zero)] * 2},
        index=["ECE^2 (T)", "ECE (sqrt T+)"], dtype=object)
    smry.add_table(est, {"estimate": 6, "std err": 6})
    z0, p0, _ = asymptotic_test(res)
    tests = pd.DataFrame(
        {"variance": [res.sigma0_sq, res.sigma1_sq],
         "statistic": [z0, res.estimate / res.se if res.se > 0 else float("nan")],
         "p-value": [p0, None],
         "threshold": [res.asymptotic_threshold(alpha), None]},
        index=["calibrated: z0", "miscalibrated: T / se"], dtype=object)
    if res.conditional is not None or res.monte_carlo is not None:
        tests = pd.concat([tests, null_rows(res, alpha)])
    smry.add_table(tests, TEST_FORMATS)
    for table, formats in res.kind.summary_tables(alpha):  # a clustered result's cluster-robust CITL, slope, O/E
        smry.add_table(table, formats)
    if evidence is not None and len(evidence.sensitivity):  # a survival evidence has none
        smry.add_table(evidence.sensitivity_table(), {"T": 4, "p-value": fmt_p})
    level = f"{100 * (1 - alpha):g}%"
    interval_note = f"Adjusted {level} confidence interval (Algorithm 1): {ci} for ECE^2, {ci_ece} for ECE."
    if res.method != "adjusted":
        name = {"bootstrap": "Percentile bootstrap", "subsampling": "Subsampling", "hulc": "Adaptive HulC"}
        interval_note = (f"{name.get(res.method, res.method)} {level} confidence interval: "
                         f"{ci} for ECE^2, {ci_ece} for ECE.")
    tests_note = res.kind.tests_note(alpha)
    head = [verdict_null_note(res, alpha)]
    if evidence is not None:  # the evidence of the result's kind (at the horizon for a survival outcome)
        head.append(res.kind.evidence_opening())
    elif evidence_note:
        head.append(evidence_note)
    tail = [] if evidence is None else evidence.notes()
    smry.add_notes(head + [interval_note, tests_note] + result_notes(res, alpha) + tail)
    return smry


def verdict_null_note(res, alpha: float | None = None) -> str:
    """Which null decides the interval's test, with its p-value and the paper's asymptotic test next to it."""
    alpha = res.alpha if alpha is None else alpha
    z0, p0, _ = asymptotic_test(res)
    verdict = "rejects" if res.null_pvalue <= alpha else "does not reject"
    text = (f"Null of the interval's test (null='{res.null}'): {null_text(res)}, {p_equals(res.null_pvalue, 4)} "
            f"({verdict} ECE = 0 at level {alpha:g}).")
    if res.null != "asymptotic":
        p_asym = "rejects" if p0 <= alpha else "does not reject"
        text += f" {res.kind.asymptotic_name()}: z0 = {fmt(z0, 4)}, {p_equals(p0, 4)} ({p_asym})."
    return text


#: One format per column of the tests table (significant digits).
TEST_FORMATS = {"variance": 6, "statistic": 4, "p-value": 4, "threshold": 6}


#: The flat ``to_dict()`` keys of a result's nested parts: key -> (part, field).
_FLAT_PARTS = {
    "asymptotic_zstat": ("asymptotic", "zstat"), "asymptotic_pvalue": ("asymptotic", "pvalue"),
    "conditional_variance": ("conditional", "variance"), "conditional_skewness": ("conditional", "skewness"),
    "conditional_zstat": ("conditional", "zstat"), "conditional_pvalue": ("conditional", "pvalue"),
    "conditional_threshold": ("conditional", "threshold"),
    "mc_pvalue": ("monte_carlo", "pvalue"), "mc_draws": ("monte_carlo", "n_draws"),
    "mc_seed": ("monte_carlo", "seed"), "n_resamples": ("resampling", "n_resamples"), "seed": ("resampling", "seed"),
    "resample_size": ("resampling", "resample_size"),
    "hulc_splits": ("resampling", "hulc_splits"), "hulc_median_bias": ("resampling", "hulc_median_bias"),
}


def result_dict(res) -> dict:
    """JSON-safe dict of a result's scalars (CLI ``--json`` keys first)."""
    ci_ece = res.conf_int(scale="ece")
    out = {
        "estimate": res.estimate, "ece": res.ece,
        "ci_lower": res.ci_lower, "ci_upper": res.ci_upper, "ci_lower_open": res.ci_lower_open,
        "ece_ci_lower": ci_ece.lower, "ece_ci_upper": ci_ece.upper,
        "contains_zero": res.contains_zero, "sigma1_sq": res.sigma1_sq, "sigma0_sq": res.sigma0_sq,
        "se": res.se, "threshold": res.threshold, "null_zstat": res.null_zstat,
        "null_pvalue": res.null_pvalue, "n": res.n, "n_bins": res.n_bins, "k": res.k,
        "n_classes": res.n_classes, "mode": res.mode, "alpha": res.alpha,
        "estimate_pos": res.estimate_pos, "plugin_estimate": res.plugin_estimate,
        "ci_branch": res.ci_branch, "n_bins_rule": res.n_bins_rule, "bin_width": res.bin_width,
        "bin_volume": res.bin_volume, "n_occupied_bins": res.n_occupied_bins,
        "n_singleton_bins": res.n_singleton_bins, "method": res.method, "formula": res.formula,
        "approximate": bool(getattr(res, "approximate", False)),
        "singleton_fraction": None if getattr(res, "approximation", None) is None
        else res.approximation.singleton_fraction,
        "y_name": res.y_name, "prob_names": list(res.prob_names), "n_dropped": res.n_dropped,
        "notes": result_notes(res),
        "null": res.null, "null_method": res.null_method,
        **{key: part(res, name, field) for key, (name, field) in _FLAT_PARTS.items()},
    }
    out["seed"] = None if out["seed"] is None else str(out["seed"])
    out.update(res.kind.to_dict())  # the weights', clusters' or survival outcome's keys
    return json_safe(out)


# --------------------------------------------------------------------------- the finite-sample nulls
def null_text(res) -> str:
    """The null law that decided the interval's test, in words (written by the result's kind, ``res.kind``)."""
    return res.kind.null_text()


def null_name(res) -> str:
    """The null that decided the interval's test, in a few words (written by the result's kind, ``res.kind``)."""
    return res.kind.null_name()


def asymptotic_test(res) -> tuple[float, float, float]:
    """(z0, p-value, threshold) of the paper's calibrated-regime test, whatever the chosen null."""
    if res.null == "asymptotic" or res.asymptotic is None:
        return res.null_zstat, res.null_pvalue, res.threshold
    return res.asymptotic.zstat, res.asymptotic.pvalue, res.asymptotic_threshold()


def null_rows(res, alpha: float | None = None) -> pd.DataFrame:
    """Rows of the tests table for the conditional and Monte Carlo nulls (thresholds at ``alpha``)."""
    alpha = res.alpha if alpha is None else alpha
    rows = {}
    cond, mc = res.conditional, res.monte_carlo
    if cond is not None:
        threshold = cond.threshold if alpha == res.alpha else cond.threshold_at(alpha)
        rows["conditional: T / sd(T | Z)"] = {"variance": cond.variance, "statistic": cond.zstat,
                                              "p-value": cond.pvalue, "threshold": threshold}
    if mc is not None and mc.pvalue is not None:
        label = res.kind.draws_label(mc)
        critical = mc.critical_value(alpha)  # inf when no attainable p-value is <= alpha (few clusters): not shown
        rows[label] = {"variance": None, "statistic": None, "p-value": mc.pvalue,
                       "threshold": critical if math.isfinite(critical) else None}
    return pd.DataFrame(list(rows.values()), index=list(rows), dtype=object)


def _unreliable_gamma_note(res) -> str:
    """Why the shifted-gamma p-value was not used (or should not be read)."""
    head = (f"The conditional skewness of T is {fmt(res.conditional.skewness, 3)} (above "
            f"{res.conditional.max_skewness:g}): the label noise is nearly degenerate (predictions near 0 or 1), "
            "and the shifted-gamma approximation of the conditional null cannot be trusted.")
    if res.null == "conditional":
        return head + (f" The conditional p-value is the exact conditional Monte Carlo p-value from "
                       f"{res.monte_carlo.n_draws} label draws.")
    if res.null == "asymptotic" and res.data is None and res.call_record is not None \
            and res.call_record.options.get("null") is None:
        return head + (" Rows in memory would use the exact conditional Monte Carlo test, whose label draws need "
                       "every row; these rows were streamed, so the default null is the paper's asymptotic test, "
                       "which is conservative for predictions this near 0 or 1. Load the columns into memory "
                       "(a DataFrame) for the exact test.")
    return head + " Its p-value is shown for reference only; null='monte-carlo' gives an exact-size test."


def null_notes(res, alpha: float | None = None) -> list[str]:
    """Notes on the null used, and on disagreement between the nulls at ``alpha`` (default ``res.alpha``)."""
    if res.conditional is None and res.monte_carlo is None:
        return []
    alpha = res.alpha if alpha is None else alpha
    notes = []
    tests = {"asymptotic": asymptotic_test(res)[1]}
    if res.conditional is not None and res.conditional.reliable:  # an unreliable gamma has its own note
        tests["conditional"] = res.conditional.pvalue
    if part(res, "monte_carlo", "pvalue") is not None:
        tests["monte-carlo"] = res.monte_carlo.pvalue
    rejects = {name: p <= alpha for name, p in tests.items()}
    if len(set(rejects.values())) > 1:
        said = "; ".join(f"{name} {p_equals(p, 4)} ({'rejects' if rejects[name] else 'does not reject'})"
                         for name, p in tests.items())
        notes.append(f"The tests of ECE = 0 disagree at level {alpha:g}: {said}. The {res.null} null "
                     "(null=) decides whether 0 joins the interval; the conditional and Monte Carlo nulls "
                     "hold their size in finite samples, the asymptotic one may not.")
    if res.conditional is not None and not res.conditional.reliable:
        notes.append(_unreliable_gamma_note(res))
    cond = res.conditional
    if cond is not None and cond.skewness is not None:
        notes.append(f"Conditional null given the predictions: sd(T | Z) = "
                     f"{fmt(cond.variance ** 0.5 if cond.variance else 0.0)}, skewness {fmt(cond.skewness, 3)}.")
    return notes + res.kind.seed_notes()


# --------------------------------------------------------------------------- resampling intervals
def resampling_notes(result, alpha: float | None = None) -> list[str]:
    """Summary notes describing a resampling interval (at level 1 - alpha; default the stored alpha)."""
    if result.resampling is None:
        return []
    alpha = result.alpha if alpha is None else alpha
    level = f"{100 * (1 - alpha):g}%"
    rs = result.resampling
    seed = rs.seed
    seed_txt = "a numpy Generator (no integer seed)" if seed == "Generator" else f"rng={seed}"
    if result.method == "bootstrap":
        how = (f"percentile bootstrap: the {alpha / 2:g} and {1 - alpha / 2:g} quantiles of T "
               f"over {rs.n_resamples} resamples of n = {result.n} rows drawn with replacement")
    elif result.method == "subsampling":
        how = (f"subsampling: T + sqrt(b/n) (q_{{a/2}}, q_{{1-a/2}}) with q the quantiles of T_b - T over "
               f"{rs.n_resamples} subsamples of b = {rs.resample_size} rows without replacement")
    elif rs.hulc_splits is None:
        how = (f"adaptive HulC: estimated median bias {rs.hulc_median_bias:.4g} (from {rs.n_resamples} "
               f"subsamples of {rs.resample_size} rows) needs more splits than rows, so the interval is "
               "the whole line")
    else:
        how = (f"adaptive HulC: [min, max] of T over {rs.hulc_splits} disjoint random splits; median bias "
               f"{rs.hulc_median_bias:.4g} estimated from {rs.n_resamples} subsamples of {rs.resample_size} rows")
    notes = [f"The {level} interval is a resampling interval ({how}); {seed_txt} reproduces it."]
    lo, hi = result.resampling.at_level(alpha)
    if lo < 0.0 or hi < 0.0:
        notes.append(f"The method's interval [{lo:.6g}, {hi:.6g}] reaches below 0; the reported interval "
                     "is its intersection with [0, inf)" + (" (empty: shown as [0, 0])." if hi < 0 else "."))
    notes.append("0 belongs to the interval" if lo <= 0.0 <= hi else "0 is outside the interval")
    notes[-1] += (f"; the calibrated-regime z test (p = {result.null_pvalue:.4g}) is reported separately and "
                  "does not decide the interval.")
    return notes
