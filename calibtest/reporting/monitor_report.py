"""The report of a calibration monitor (HTML, or PDF with WeasyPrint): plan, looks, alarms and guarantees.

``monitor_report(mon_or_result, "monitoring.html")`` renders the template
``monitor_report.html`` (autoescaped, the tables and figure macros of
``macros.html``) from a context of preformatted strings built here from a
:class:`~calibtest.monitor.result.MonitorResult`.  The document control
(metadata, revision history, signatures), the numbering of tables and
figures, the path check, the atomic writing and the PDF machinery are those
of the validation report (:mod:`calibtest.reporting.document`,
:mod:`calibtest.reporting.html`).  The result's ``to_dict()`` is embedded:
a JSON ``data:`` link in the HTML, a file attachment in the PDF.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from calibtest.display.format import fmt, json_safe
from calibtest.options import OptionTypeError, check_option
from calibtest.reporting.document import (Numbering, check_metadata, check_report_path, check_report_text,
                                          write_report_file)
from calibtest.reporting.html import (_document_control, _import_weasyprint, _png_data_uri, _render, _table,
                                      _versions, pdf_writer)

#: The type of a monitor's result (``calibtest.monitor.result.MonitorResult``), named here without importing it:
#: the monitor imports this module when a report is asked for, so this module does not import it back.
MonitorResult = Any

__all__ = ["monitor_report", "monitor_context", "MonitorReportOptions", "as_monitor_result", "JSON_FILE"]

#: Name of the embedded machine-readable result (``MonitorResult.to_dict()``).
JSON_FILE = "monitor-result.json"

#: The looks table's columns: header and the LOOK_FIELDS shown in it (one field, or the two ends of a sequence).
LOOK_COLUMNS = (("Look", ("look",)), ("Time", ("time",)), ("n", ("n",)), ("E_t", ("e_value",)),
                ("Anytime p", ("p_value",)), ("CITL CS", ("citl_lower", "citl_upper")),
                ("O/E CS", ("oe_lower", "oe_upper")), ("ECE upper", ("ece_upper",)),
                ("Detector M_t", ("detector",)), ("RA-CUSUM up", ("ra_up",)), ("RA-CUSUM down", ("ra_down",)),
                ("Alarms", ()))

_REFERENCES = {
    "ville": "Ville, J. (1939). Étude critique de la notion de collectif. Gauthier-Villars, Paris.",
    "ramdas": "Ramdas, A., Grünwald, P., Vovk, V. and Shafer, G. (2023). Game-theoretic statistics and safe "
              "anytime-valid inference. Statistical Science 38(4), 576–601. https://doi.org/10.1214/23-STS894",
    "arnold": "Arnold, S., Henzi, A. and Ziegel, J. F. (2023). Sequentially valid tests for forecast calibration. "
              "Annals of Applied Statistics 17(3), 1909–1935. https://doi.org/10.1214/22-AOAS1697",
    "wsr": "Waudby-Smith, I. and Ramdas, A. (2024). Estimating means of bounded random variables by betting. "
           "Journal of the Royal Statistical Society Series B 86(1), 1–27. https://doi.org/10.1093/jrsssb/qkad009",
    "fan": "Fan, X., Grama, I. and Liu, Q. (2015). Exponential inequalities for martingales with applications. "
           "Electronic Journal of Probability 20(1), 1–22. https://doi.org/10.1214/EJP.v20-3496",
    "shin": "Shin, J., Ramdas, A. and Rinaldo, A. (2024). E-detectors: a nonparametric framework for sequential "
            "change detection. New England Journal of Statistics in Data Science 2(2), 229–260. "
            "https://doi.org/10.51387/23-NEJSDS51",
    "steiner": "Steiner, S. H., Cook, R. J., Farewell, V. T. and Treasure, T. (2000). Monitoring surgical "
               "performance using risk-adjusted cumulative sum charts. Biostatistics 1(4), 441–452. "
               "https://doi.org/10.1093/biostatistics/1.4.441",
}


@dataclass(frozen=True)
class MonitorReportOptions:
    """The keywords of :func:`monitor_report` other than the monitor, the path and the templates.

    Attributes
    ----------
    title, purpose, command : str or None
    metadata : dict or None
        Document control, as in :func:`calibtest.report`.
    figures : bool
        False leaves out the plot (the slowest part).
    generated : datetime or None
        The report's time (None: now).
    """

    title: str | None = None
    purpose: str | None = None
    command: str | None = None
    metadata: dict | None = None
    figures: bool = True
    generated: datetime | None = None


def as_monitor_result(obj) -> "MonitorResult":
    """The :class:`MonitorResult` of a monitor (its :meth:`~CalibrationMonitor.result`) or the result itself.

    Both are recognised by ``report_kind == "monitor"`` (the monitor package imports this module when a
    report is asked for, so this module does not import it back).

    Raises
    ------
    OptionTypeError
        Neither a ``CalibrationMonitor`` nor a ``MonitorResult``.
    """
    if getattr(obj, "report_kind", None) != "monitor":
        raise OptionTypeError(f"a monitoring report takes a CalibrationMonitor or a MonitorResult, got "
                              f"{type(obj).__name__}")
    return obj if hasattr(obj, "looks") else obj.result()


# --------------------------------------------------------------------------- the parts of the context
def _when(res: "MonitorResult", look) -> str:
    """``look 12 (time 2024-03-01)``, or ``look 12`` when the batches have no time stamps."""
    time = res.time_of(look)
    return f"look {look}" + ("" if time is None or time == look else f" (time {time})")


def _plan_table(res: "MonitorResult") -> dict:
    st = res.settings
    h, arls = res.ra_thresholds, res.ra_arls
    rows = [("Model identifier", st["model"] if st["model"] else "not stated"),
            ("Model formula", st["formula"] or "arrays y=, probs="),
            ("Target", (res.mode or "no batch yet") + (f", K = {st['n_classes']}" if st["n_classes"] else "")),
            ("Level α (alpha)", fmt(st["alpha"])), ("E-process alarm threshold 1/α", fmt(1 / st["alpha"])),
            ("Bin scales of the e-process (scales)", ", ".join(map(str, st["scales"]))),
            ("Bins of the ECE bound (n_bins)", fmt(st["n_bins"])),
            ("ECE margin δ (margin)", "none" if st["margin"] is None else fmt(st["margin"])),
            ("In-control ARL, looks (arl)", fmt(st["arl"])), ("Detector discount (forget)", fmt(st["forget"])),
            ("RA-CUSUM odds ratio R_A (odds_ratio)", fmt(st["odds_ratio"])),
            ("RA-CUSUM thresholds h_up, h_down", "not yet computed" if h is None else f"{fmt(h[0])}, {fmt(h[1])}"),
            ("Their computed in-control ARLs (looks)", "" if arls is None else f"{fmt(arls[0])}, {fmt(arls[1])}"),
            ("Settings fingerprint (SHA-256)", res.fingerprint),
            ("Looks, rows", f"{res.n_looks}, {res.n_total}")]
    return {**_table(["Setting", "Value"], rows), "caption": "The monitoring plan: the monitor's settings."}


def _status(res: "MonitorResult") -> dict:
    table = res._status_table()
    rows = [(name, fmt(v), fmt(t), first) for name, (v, t, first) in zip(table.index, table.itertuples(index=False))]
    return {**_table(["Statistic", "Value at the last look", "Threshold", "First look"], rows),
            "caption": "The statistics at the last look against their thresholds (6 significant digits)."}


def _look_row(rec: dict) -> list[str]:
    flags = [w for w, key in (("e-process", "alarm"), ("detector", "detector_alarm"), ("RA-CUSUM", "ra_alarm"))
             if rec[key]]
    cells = []
    for _, fields in LOOK_COLUMNS[:-1]:
        values = [rec[f] for f in fields]
        cells.append(f"[{fmt(values[0])}, {fmt(values[1])}]" if len(values) == 2 else
                     ("" if values[0] is None else fmt(values[0])) if fields != ("time",) else
                     ("" if values[0] is None or values[0] != values[0] else str(values[0])))
    return cells + [", ".join(flags)]


def _looks_table(res: "MonitorResult") -> dict:
    records = res.looks.astype(object).where(res.looks.notna(), None).to_dict(orient="records")
    return {**_table([h for h, _ in LOOK_COLUMNS], [_look_row(r) for r in records]),
            "caption": (f"The looks: the e-process E_t, the anytime p-value, the (1 − α) confidence sequences of "
                        f"calibration-in-the-large and O/E, the upper bound of the binned ECE (B = "
                        f"{res.settings['n_bins']}), the e-detector and the RA-CUSUMs (6 significant digits).")}


def _alarm_rows(res: "MonitorResult") -> list:
    st = res.settings
    never = "no alarm"
    change = "" if res.detector_look is None or res.change_look is None else _when(res, res.change_look)
    h = res.ra_thresholds
    rows = [("E-process E_t ≥ 1/α", fmt(1 / st["alpha"]), never if res.alarm_look is None else
             _when(res, res.alarm_look), ""),
            ("E-detector M_t ≥ ARL", fmt(st["arl"]), never if res.detector_look is None else
             _when(res, res.detector_look), change),
            ("RA-CUSUM (either chart) ≥ h", "" if h is None else f"{fmt(h[0])} (up), {fmt(h[1])} (down)",
             never if res.ra_look is None else _when(res, res.ra_look), "")]
    if st["margin"] is not None:
        rows.append(("ECE upper bound < margin (not an alarm: calibration shown)", fmt(st["margin"]),
                     "not yet" if res.ece_below_look is None else _when(res, res.ece_below_look), ""))
    return rows


def _findings(res: "MonitorResult") -> list[dict]:
    st = res.settings
    if not res.n_looks:
        return [{"text": "No batch has been added to the monitor yet.", "alarm": False}]
    out = [{"text": (f"ALARM at {_when(res, res.alarm_look)}: the e-process crossed 1/α = {fmt(1 / st['alpha'])}; "
                     "evidence that the model is miscalibrated." if res.alarm else
                     f"No alarm of the e-process in {res.n_looks} looks ({res.n_total} rows): no evidence of "
                     f"miscalibration at level α = {fmt(st['alpha'])}."), "alarm": res.alarm}]
    if res.detector_look is not None:
        out.append({"text": f"The change detector alarmed at {_when(res, res.detector_look)}; estimated change "
                            f"time: {_when(res, res.change_look)}.", "alarm": True})
    if res.ra_look is not None:
        out.append({"text": f"The RA-CUSUM alarmed at {_when(res, res.ra_look)}.", "alarm": True})
    if res.ece_below_look is not None:
        out.append({"text": f"The ECE upper bound fell below the margin {fmt(st['margin'])} at "
                            f"{_when(res, res.ece_below_look)}.", "alarm": False})
    return out


def _guarantee(res: "MonitorResult") -> list[str]:
    st = res.settings
    alpha, arl = fmt(st["alpha"]), fmt(st["arl"])
    h = "" if res.ra_arls is None else (f" (computed per-chart ARLs at the thresholds: {fmt(res.ra_arls[0])} and "
                                        f"{fmt(res.ra_arls[1])} looks)")
    if res.ra_arls is not None and max(res.ra_arls) > 2 * st["arl"] * 1.001:
        h += (". Where a chart's ARL exceeds the target, even the smallest positive threshold gives a larger ARL "
              "(batch scores are rarely positive): that chart alarms at any positive value")
    return [
        f"E-process. When every row is calibrated (E[y | p] = p), the probability that the e-process ever "
        f"reaches 1/α = {fmt(1 / st['alpha'])}, at any look, is at most α = {alpha}, whatever the number and the "
        "timing of the looks and whenever monitoring stops (Ville's inequality for a nonnegative "
        "supermartingale with initial value 1). The anytime p-value 1 / max E_s has the same guarantee: "
        "P(it ever falls to α or below) ≤ α.",
        f"Confidence sequences. The intervals for calibration-in-the-large and O/E, and the bound on the binned "
        f"ECE, hold at every look simultaneously with probability at least {fmt(1 - st['alpha'])} when the rows "
        "are independent; the ECE bound is for the binned ECE at B (a lower bound on the true l2-ECE).",
        f"E-detector. The average run length to a false alarm of the Shiryaev–Roberts e-detector is at least "
        f"ARL = {arl} looks; a detector alarm is a change-point signal, not a level-α test.",
        f"RA-CUSUM. Each one-sided chart's threshold is computed for an in-control ARL of {fmt(2 * st['arl'])} "
        f"looks (about {arl} for the two charts together){h}: the law of a batch score (batches of the first "
        "batch's size whose predictions are drawn from the first batch's, labels y ~ Bernoulli(p); an FFT "
        "convolution) and the run length of the CUSUM (Brook and Evans's Markov chain), accurate to about 0.1% "
        "for batches of that law. The stream's case mix is known only through the first batch, so the true ARL "
        "varies with how well it represents the stream (docs/monitoring.md states the error measured); no "
        "guarantee holds over any number of looks.",
    ]


def _methods(res: "MonitorResult") -> list[str]:
    st = res.settings
    return [
        f"E-process [1–3]: a mixture of betting test martingales, one per family: equal-width binnings of the "
        f"predictions at B = {', '.join(map(str, st['scales']))} (calibration-in-the-large at B = 1, "
        "region-confined miscalibration at larger B) and the slope direction 2p − 1; the bets (aGRAPA [4]) are "
        "fixed by the past batches only (predictable).",
        "Confidence sequences [4, 5]: hedged betting capital, lower-bounded by Fan et al.'s inequality, for "
        "calibration-in-the-large (mean of y − p) and O/E; the ECE bound combines one sequence per bin at "
        f"level α / (B + 1) with B = {st['n_bins']}.",
        f"Change detection [6]: the Shiryaev–Roberts e-detector on the batch e-values with bets discounted by "
        f"{fmt(st['forget'])} per look; its e-CUSUM's start estimates the change time.",
        f"Risk-adjusted CUSUM [7]: the log-likelihood-ratio scores of the odds ratio R_A = {fmt(st['odds_ratio'])} "
        f"(upper chart) and 1/R_A (lower chart) against calibration, summed per batch.",
    ]


def _references() -> list[str]:
    return [_REFERENCES[k] for k in ("ville", "ramdas", "arnold", "wsr", "fan", "shin", "steiner")]


def _plot(res: "MonitorResult", figures: bool) -> tuple[dict | None, str]:
    if not figures:
        return None, "The figure was not drawn (figures=False)."
    if not res.n_looks:
        return None, "No look to draw yet."
    import matplotlib.pyplot as plt

    fig = res.plot()
    try:
        src = _png_data_uri(fig)
    finally:
        plt.close(fig)
    return ({"src": src, "alt": "The monitor's statistics over the looks against their thresholds",
             "caption": ("From the top: the e-process E_t against 1/α; the e-detector M_t against the ARL; the "
                         "CITL confidence sequence and the ECE upper bound (against the margin, if any); the "
                         "RA-CUSUMs against their thresholds. Vertical lines: the alarms and the estimated change "
                         "time.")}, "")


def _numbered(ctx: dict) -> None:
    n = Numbering()
    for t in (ctx["status"], ctx["plan"], ctx["doc"]["model_data"]):
        n.table(t)
    if ctx["plot"]:
        n.figure(ctx["plot"])
    for t in (ctx["looks"], ctx["alarms"], ctx["versions"], ctx["doc"]["revisions"], ctx["doc"]["signatures"]):
        n.table(t)


def _toc() -> list[dict]:
    entries = [("summary", "Summary of findings"), ("plan", "Monitoring plan"),
               ("over-time", "The statistics over time"), ("alarms", "Alarms"), ("guarantee", "The guarantee"), ("methods", "Methods"),
               ("software", "Software and reproducibility"), ("references", "References"),
               ("revision-history", "Revision history"), ("approval", "Approval")]
    return [{"anchor": a, "number": str(i), "title": t} for i, (a, t) in enumerate(entries, 1)]


def monitor_json(res: "MonitorResult") -> str:
    """The embedded machine-readable result: ``json.dumps(res.to_dict())``."""
    return json.dumps(json_safe(res.to_dict()), indent=1, ensure_ascii=False)


def monitor_context(res: "MonitorResult", options: MonitorReportOptions) -> dict:
    """The template context of :func:`monitor_report` (strings and lists only)."""
    o = options
    meta = check_metadata(o.metadata)
    generated = (datetime.now().astimezone() if o.generated is None else o.generated).isoformat(timespec="seconds")
    title = o.title or "Calibration monitoring report"
    doc = _document_control(meta, title, generated)
    doc["model_data"]["caption"] = "The monitored model and its data."
    if res.settings["model"] and not meta["model_name"]:
        doc["model_data"]["rows"][0][1] = res.settings["model"]
    plot, plot_note = _plot(res, o.figures)
    text = monitor_json(res)
    ctx = {
        "title": title, "purpose": o.purpose, "command": o.command, "generated": generated, "doc": doc,
        "subject": o.purpose or f"Calibration monitoring of {res.settings['model'] or res.settings['formula'] or 'a model'}",
        "keywords": "calibration, monitoring, e-process, anytime-valid, confidence sequence, CUSUM",
        "version": res.version, "findings": _findings(res), "status": _status(res) if res.n_looks else None,
        "plan": _plan_table(res), "plot": plot, "plot_note": plot_note, "looks": _looks_table(res),
        "looks_note": (f"The table holds the {len(res.looks)} looks kept of {res.n_looks} (the monitor keeps its "
                       "last `history` looks; the statistics themselves carry the whole stream)."),
        "alarms": {**_table(["Alarm", "Threshold", "First crossed", "Estimated change time"], _alarm_rows(res)),
                   "caption": "The alarms: the first look at which each statistic crossed its threshold."},
        "alarms_intro": "Each statistic's first crossing of its threshold, with its look and time stamp.",
        "guarantee": _guarantee(res), "methods": _methods(res), "references": _references(),
        "versions": {**_table(["Software", "Version"], _versions()), "caption": "Software used to produce this report."},
        "json_file": JSON_FILE,
        "json_uri": "data:application/json;charset=utf-8;base64," + base64.b64encode(text.encode()).decode("ascii"),
        "_attachments": [(JSON_FILE, text, "MonitorResult.to_dict(): every kept look and the first alarms")],
        "toc": _toc(),
    }
    if ctx["status"] is None:
        ctx["status"] = {**_table(["Statistic", "Value"], []), "caption": "No look yet."}
    ctx["section_number"] = {e["anchor"]: e["number"] for e in ctx["toc"]}
    _numbered(ctx)
    return ctx


def monitor_report(monitor, path, *, title: str | None = None, purpose: str | None = None,
                   command: str | None = None, metadata: dict | None = None, templates=None) -> Path:
    """Write the report of a calibration monitor as HTML or PDF (a document a quality team signs).

    The report holds the monitoring plan (alpha, scales, bins, margin, ARL,
    odds ratio, model identifier, settings fingerprint, the RA-CUSUM's
    computed thresholds), the statistics at the last look against their
    thresholds, the monitor's plot, a table of the looks (time, n, E_t,
    anytime p-value, confidence sequences of CITL and O/E, ECE upper bound,
    e-detector, RA-CUSUMs), the alarms with their look, time and the
    estimated change time, the guarantee in words (Ville's inequality:
    P(any false alarm, ever) <= alpha for any number and timing of looks;
    the detector's and the RA-CUSUM's in-control ARL), the methods and
    references, the software, a revision history and a signature block.
    ``MonitorResult.to_dict()`` is embedded (a JSON link in the HTML, a file
    attachment in the PDF).

    Parameters
    ----------
    monitor : CalibrationMonitor or MonitorResult
    path : str or path-like
        ``.html``/``.htm``, or ``.pdf`` (WeasyPrint, ``pip install "calibtest[pdf]"``).
    title, purpose, command : str, optional
    metadata : dict, optional
        Document control, as in :func:`calibtest.report`.
    templates : str or path-like, optional
        An organisation's folder of templates, used before the built-in ones.

    Returns
    -------
    pathlib.Path
        The file, written atomically (a failure leaves an existing file as it was).

    Raises
    ------
    OptionError, OptionTypeError
        A path with another suffix or in a folder that cannot be reached (nothing is written), something that
        is not a monitor or its result, a metadata value or text that is not a string.
    ImportError
        A PDF without WeasyPrint.
    """
    path = check_report_path(path)
    templates = check_option("templates", templates)
    res = as_monitor_result(monitor)
    check_report_text(title=title, purpose=purpose, command=command)
    weasyprint = _import_weasyprint() if path.suffix.lower() == ".pdf" else None
    ctx = monitor_context(res, MonitorReportOptions(title=title, purpose=purpose, command=command,
                                                    metadata=metadata))
    if weasyprint is not None:
        ctx["versions"]["rows"].insert(-2, ["WeasyPrint (made this PDF)", str(weasyprint.__version__)])
    html = _render(ctx, pdf=weasyprint is not None, templates=templates, name="monitor_report.html")
    return write_report_file(path, html, pdf_writer(weasyprint, ctx["_attachments"]))
