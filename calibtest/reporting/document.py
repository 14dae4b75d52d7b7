"""Document control of a validation report: metadata, the analysis-plan check, numbering and attachments.

A report is a controlled document: it names the model and the data, carries a
document id, version, revision history and signature block
(:func:`check_metadata`, :func:`load_metadata`), states whether the analysis
followed a pre-specified plan (:func:`plan_check`), numbers its tables and
figures (:class:`Numbering`), and embeds the machine-readable results in the
PDF (:func:`pdf_attachments`).  Everything here returns plain strings, lists
and dicts for the template, except :func:`write_report_file`, which writes
the rendered report atomically (a failure leaves an existing file as it was).
"""
from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from pathlib import Path

from calibtest.display.format import json_safe
from calibtest.inputs.validation import DataError, OptionError, OptionTypeError
from calibtest.inputs.plan import PLAN_OPTIONS, AnalysisPlan, Deviation, is_calculation, planned_vs_achieved

__all__ = ["METADATA_FIELDS", "NOT_STATED", "check_metadata", "load_metadata", "Numbering", "plan_check",
           "reported_tests", "pdf_attachments", "bins_file_name", "result_file_name", "result_record", "bin_table_csv", "check_deviation_reasons",
           "check_text", "check_report_text", "check_report_path", "REPORT_SUFFIXES", "write_report_file"]

#: Document-control fields of ``report(..., metadata=...)`` and their labels, in the order shown.
METADATA_FIELDS = {
    "document_id": "Document ID",
    "document_version": "Document version",
    "author": "Prepared by",
    "reviewer": "Reviewed by",
    "approver": "Approved by",
    "organisation": "Organisation",
    "model_name": "Model name",
    "model_version": "Model version",
    "intended_use": "Intended use",
    "population": "Target population",
    "outcome_definition": "Outcome definition",
    "data_source": "Data source",
    "data_period": "Data period",
    "inclusion_criteria": "Inclusion criteria",
    "revisions": "Revision history",
}

#: Shown for a document-control field that was not given.
NOT_STATED = "not stated"

_REVISION_KEYS = ("version", "date", "description")


def check_metadata(metadata) -> dict:
    """Validate ``metadata`` and return every field of :data:`METADATA_FIELDS`.

    Text fields must be strings (a number such as a version is written as a
    string, ``"1.0"``, so that nothing is reformatted); a field not given is
    ``None``.  ``revisions`` is a list of dicts with the string fields
    ``version``, ``date`` and ``description``.

    Raises
    ------
    ValueError
        For unknown keys (all named), a revision with missing or unknown keys,
        or a value holding a character that cannot be encoded as UTF-8 (a lone
        surrogate such as ``"\\ud800"``), naming the field.
    TypeError
        For a value of the wrong type, naming the field.
    """
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise OptionTypeError(f"metadata must be a dict, got {type(metadata).__name__}")
    unknown = sorted(str(k) for k in metadata if k not in METADATA_FIELDS)
    if unknown:
        raise OptionError(f"metadata has unknown keys {unknown}; allowed: {list(METADATA_FIELDS)}")
    out = {}
    for key in METADATA_FIELDS:
        value = metadata.get(key)
        if key == "revisions":
            out[key] = _check_revisions(value)
        elif value is None or isinstance(value, str):
            out[key] = value if value is None or check_text(value, f"metadata[{key!r}]").strip() else None
        else:
            raise OptionTypeError(f"metadata[{key!r}] must be a string, got {type(value).__name__} {value!r} "
                                  "(write numbers and dates as strings)")
    return out


def check_text(value: str, name: str) -> str:
    """Return the string ``value`` if it can be written as UTF-8; otherwise raise naming the field ``name``.

    A lone surrogate (``"\\ud800"``, e.g. from a file name decoded with
    ``surrogateescape``) is a valid Python string that no UTF-8 file can hold;
    the report refuses it before anything is written.

    Raises
    ------
    ValueError
        (an ``OptionError``) naming ``name``, the character and its position.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start:exc.end]
        raise OptionError(f"{name} holds a character that cannot be encoded: {bad!r} at position {exc.start} "
                          f"of {value!r} ({exc.reason}; a report is written as UTF-8)") from None
    return value


def check_report_text(**fields) -> None:
    """:func:`check_text` for each free-text argument of a report that is a string or a list of strings.

    ``fields`` maps the argument's name (``title``, ``purpose``, ``command``,
    ``labels``, ...) to its value: None, a string or a list of strings (a
    list's items are named ``labels[1]``); anything else is an
    :class:`OptionTypeError` naming the argument (the command line gives
    only text).
    """
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, str):
            check_text(value, name)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    raise OptionTypeError(f"{name}[{i}] must be a string, got {type(item).__name__}")
                check_text(item, f"{name}[{i}]")
        else:
            raise OptionTypeError(f"{name} must be a string or None, got {type(value).__name__}")


#: The suffixes of a report file: HTML or PDF.
REPORT_SUFFIXES = (".html", ".htm", ".pdf")


def _unreachable_folder(folder: str) -> str | None:
    """The first folder on the way to ``folder`` that the OS cannot enter, in words, or None.

    The prefixes are checked as the OS resolves them, left to right and
    without removing ``..`` first: ``nosub/..`` cannot be entered when
    ``nosub`` does not exist, though it would normalise to ``.``.
    """
    parts = Path(folder).parts
    for i in range(1, len(parts) + 1):
        prefix = os.path.join(*parts[:i])
        if not os.path.isdir(prefix):  # os.stat: the OS's resolution, '..' and symbolic links included
            what = "is not a folder" if os.path.lexists(prefix) else "does not exist"
            return f"the folder {prefix!r} {what}"
    return None


def check_report_path(path, name: str = "path") -> Path:
    """The report file ``path`` checked before anything is computed or written: its suffix, and a folder the
    OS can write it in.

    The checks of :func:`calibtest.report` and of ``calibtest report -o``
    (``name`` is how the message names the argument).

    Raises
    ------
    OptionTypeError
        ``path`` is not a string or path-like.
    OptionError
        A suffix other than .html, .htm or .pdf, or a folder on the way that
        does not exist or is not a folder (resolved as the OS resolves it:
        ``nosub/../r.html`` is refused when ``nosub`` does not exist), naming
        the path and that folder.
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise OptionTypeError(f"{name} must be a str or path-like, got {type(path).__name__}")
    text = os.fspath(path)
    if not text.lower().endswith(REPORT_SUFFIXES):
        raise OptionError(f"{name} must end in .html, .htm or .pdf, got {text!r}")
    problem = _unreachable_folder(os.path.dirname(text) or os.curdir)
    if problem is not None:
        raise OptionError(f"{name} {text!r} cannot be written: {problem}; nothing was written")
    return Path(text)


def write_report_file(path: Path, html: str, write_pdf=None) -> Path:
    """Write a rendered report to ``path`` atomically: all of it, or nothing and the old file as it was.

    The report goes to a new temporary file in the same directory
    (``.NAME.XXXXXXXX.tmp``, created exclusively, so with the permissions a
    new file gets), which replaces ``path`` (:func:`os.replace`, atomic on
    POSIX and Windows within one file system) only once it is complete; an
    existing report keeps its permissions, and a symbolic link is written
    through (its target is replaced).  On any failure, including an
    interrupt, the temporary file is removed and ``path`` is untouched.

    Parameters
    ----------
    path : Path
        The report file.
    html : str
        The rendered HTML (written as UTF-8 for an HTML report; the source of
        the PDF otherwise).
    write_pdf : callable, optional
        ``write_pdf(html, target)`` writes the PDF to the file name
        ``target`` (the temporary file); None writes ``html`` itself.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        When ``html`` holds a character that cannot be encoded as UTF-8
        (naming it and showing its context), before any file is created.
    """
    try:  # for a PDF too: the renderer would fail on it, or drop it
        data = html.encode("utf-8")
    except UnicodeEncodeError as exc:
        context = html[max(exc.start - 40, 0):exc.end + 40]
        raise OptionError(f"the report holds a character that cannot be encoded: "
                          f"{html[exc.start:exc.end]!r} in {context!r} ({exc.reason}; a report is written "
                          "as UTF-8)") from None
    path = Path(path)
    problem = _unreachable_folder(os.path.dirname(os.fspath(path)) or os.curdir)
    if problem is not None:  # realpath would drop 'nosub/..' where the OS refuses it
        raise OptionError(f"{str(path)!r} cannot be written: {problem}; nothing was written")
    target = Path(os.path.realpath(path))  # a symbolic link: write through it, as opening it would
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as fh:  # exclusive: never an existing file
            if write_pdf is None:
                fh.write(data)
        if write_pdf is not None:
            write_pdf(html, str(tmp))
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _check_revisions(value) -> list:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise OptionTypeError(f"metadata['revisions'] must be a list of dicts, got {type(value).__name__}")
    out = []
    for i, rev in enumerate(value):
        if not isinstance(rev, dict):
            raise OptionTypeError(f"metadata['revisions'][{i}] must be a dict, got {type(rev).__name__}")
        keys = set(rev)
        if keys != set(_REVISION_KEYS):
            raise OptionError(f"metadata['revisions'][{i}] must have the keys {list(_REVISION_KEYS)}; "
                              f"unknown {sorted(map(str, keys - set(_REVISION_KEYS)))}, "
                              f"missing {sorted(set(_REVISION_KEYS) - keys)}")
        for k in _REVISION_KEYS:
            if not isinstance(rev[k], str):
                raise OptionTypeError(f"metadata['revisions'][{i}][{k!r}] must be a string, got "
                                      f"{type(rev[k]).__name__} {rev[k]!r} (dates as 'YYYY-MM-DD')")
            check_text(rev[k], f"metadata['revisions'][{i}][{k!r}]")
        out.append({k: rev[k] for k in _REVISION_KEYS})
    return out


def load_metadata(path) -> dict:
    """Read document-control metadata from a ``.json`` or ``.toml`` file and validate it.

    TOML needs Python 3.11 or later (the standard library's :mod:`tomllib`);
    on Python 3.10 a TOML file is refused with a message saying so.  In TOML,
    the revisions are an array of tables (``[[revisions]]``).

    Raises
    ------
    OptionError
        The path is not a ``.json``/``.toml`` file that exists (or TOML on Python 3.10).
    DataError
        The file cannot be decoded (not UTF-8, invalid JSON or TOML) or a field
        is wrong; the message names the file and the field.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise OptionError(f"metadata file must end in .json or .toml, got {str(path)!r}")
    if not path.is_file():
        raise OptionError(f"metadata file not found: {path}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"metadata file {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"metadata file {path}: invalid JSON ({exc})") from None
    else:
        if sys.version_info < (3, 11):
            raise OptionError(f"metadata file {path}: TOML needs Python 3.11 or later (tomllib); "
                              "write the metadata as JSON instead")
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise DataError(f"metadata file {path}: invalid TOML ({exc})") from None
    try:
        return check_metadata(data)
    except (OptionError, OptionTypeError) as exc:  # the file's content: a data error naming file and field
        raise DataError(f"metadata file {path}: {exc}") from None


class Numbering:
    """Consecutive numbers of tables and figures in the order they are created.

    :meth:`table` and :meth:`figure` add ``number``, ``label`` ("Table 3")
    and ``id`` to a table or figure dict (which holds its ``caption``), so
    the template can refer to it by ``label`` anywhere in the text.
    """

    def __init__(self):
        self.tables = 0
        self.figures = 0

    def table(self, t: dict) -> dict:
        """Give the table dict ``t`` (with its ``caption``) the next table number; return it."""
        self.tables += 1
        t.update(number=self.tables, label=f"Table {self.tables}", id=f"table-{self.tables}")
        return t

    def figure(self, fig: dict) -> dict:
        """Give the figure dict ``fig`` (``src``, ``alt``, ``caption``) the next figure number; return it."""
        self.figures += 1
        fig.update(number=self.figures, label=f"Figure {self.figures}", id=f"figure-{self.figures}")
        return fig


def reported_tests(models: list, has_comparisons: bool) -> set:
    """The keys of :data:`calibtest.inputs.plan.PLAN_TESTS` that a report shows for every model."""
    shown = None
    for m in models:
        keys = {"calib_ci"}
        if m.get("evidence_keys"):
            keys |= set(m["evidence_keys"])
        if m.get("hl"):
            keys.add("hosmer_lemeshow")
        if m.get("valprob"):
            keys.add("val_prob")
        shown = keys if shown is None else shown & keys
    shown = shown or set()
    if has_comparisons:
        shown.add("calib_compare")
    return shown


def check_deviation_reasons(reasons, plan) -> dict:
    """Validate ``deviation_reasons``: a dict from plan option names to the reason for deviating (strings)."""
    if reasons is None:
        return {}
    if not isinstance(reasons, dict):
        raise OptionTypeError(f"deviation_reasons must be a dict (option -> reason), got {type(reasons).__name__}")
    if reasons and plan is None:
        raise OptionError("deviation_reasons needs a plan (plan=...): without one there is nothing to deviate from")
    for key, text in reasons.items():
        if key not in PLAN_OPTIONS + ("sample_size",):
            raise OptionError(f"deviation_reasons has the unknown option {key!r}; the options of a plan are "
                              f"{list(PLAN_OPTIONS + ('sample_size',))}")
        if not isinstance(text, str) or not text.strip():
            raise OptionTypeError(f"deviation_reasons[{key!r}] must be a non-empty string, got {text!r}")
        check_text(text, f"deviation_reasons[{key!r}]")
    return dict(reasons)


def plan_check(plan, results, names, shown_tests: set, subgroups=None, reasons=None) -> dict:
    """The plan statement and the deviations of ``results`` from ``plan``, with their stated reasons.

    Returns a dict with ``plan`` (the AnalysisPlan or None), ``statement``
    (one sentence), ``deviations`` (list of :class:`Deviation`),
    ``reasons`` (option -> the reason given for deviating from it) and
    ``options`` (option -> planned value as text).  A reason given for an
    option the analysis did not deviate from raises ``ValueError``.  Planned tests that the
    report does not show are deviations too.  ``subgroups`` holds, per
    result, the ``by`` columns of its subgroup analysis (None: whole sample
    only); the planned subgroups are followed when they are the same set of
    columns, and a model analysed by other columns, by none, or by subgroups
    that were not planned is a deviation naming the planned and the used
    columns.
    """
    reasons = check_deviation_reasons(reasons, plan)
    if plan is None:
        return {"plan": None, "deviations": [], "options": {}, "reasons": {},
                "statement": "The analysis options were not pre-specified: no analysis plan was given.",
                "achieved": []}
    if isinstance(plan, (str, Path)):
        plan = AnalysisPlan.read(plan)
    if not isinstance(plan, AnalysisPlan):
        raise OptionTypeError(f"plan must be a path to a plan file or an AnalysisPlan, got {type(plan).__name__}")
    deviations = [dev for res, name in zip(results, names) for dev in plan.deviations(res, name)]
    everyone = "all models"
    for test in plan.tests or ():
        if test not in shown_tests:
            deviations.append(Deviation(everyone, "tests", test, "not reported"))
    subgroups = [None] * len(names) if subgroups is None else list(subgroups)
    planned = tuple(plan.subgroups or ())
    for by, name in zip(subgroups, names):
        used = tuple(by or ())
        if set(used) != set(planned):
            deviations.append(Deviation(name, "subgroups", ", ".join(planned) if planned else "none planned",
                                        ", ".join(used) if used else "not analysed (whole sample only)"))
    achieved = []  # the plan's sample-size calculation at each model's n; a shortfall is a deviation
    if is_calculation(plan.sample_size):
        for res, name in zip(results, names):
            pva = planned_vs_achieved(plan.sample_size, int(res.n), events=_events(res))
            achieved.append((name, pva))
            if pva.shortfall:
                at = (f"{pva.quantity} {pva.value_text(pva.achieved_value)} at n = {pva.achieved_n} for the planned "
                      "alternative" if pva.achieved_value is not None else
                      f"{pva.quantity} at n = {pva.achieved_n} not recomputed: {pva.not_recomputed}")
                deviations.append(Deviation(
                    name, "sample_size", f"n = {pva.planned_n} ({pva.quantity} {pva.value_text(pva.planned_value)})",
                    f"n = {pva.achieved_n}", note=f"{pva.planned_n - pva.achieved_n} rows short: {at}"))
    deviated = {dev.option for dev in deviations}
    for key in reasons:
        if key not in deviated:
            raise OptionError(f"deviation_reasons[{key!r}]: the analysis followed the plan for {key}; give "
                              f"reasons only for the options that deviate ({sorted(deviated) or 'none'})")
    ident = f"SHA-256 {plan.sha256}, created {plan.created}"
    if deviations:
        missing = sum(dev.option not in reasons for dev in deviations)
        why = ("each with the reason given" if not missing else
               f"{missing} of them without a stated reason")
        statement = (f"The analysis deviated from the pre-specified plan ({ident}) in {len(deviations)} "
                     f"{'option' if len(deviations) == 1 else 'options'}, {why}; each is listed with its "
                     "planned and used value in the section Analysis plan.")
    else:
        statement = f"The analysis followed the pre-specified plan ({ident})."
    return {"plan": plan, "deviations": deviations, "options": plan.options(), "statement": statement,
            "reasons": reasons, "achieved": achieved}


def _events(res):
    """The events for the plan's sentence, as the result's kind counts them (``planning_inputs()["events"]``).

    A binary result's rows with y = 1 (weighted or not), a survival
    result's events (of the cause) at or before the horizon, the count its
    follow-up table shows, never the sum of its IPCW outcomes; None for
    the other targets.
    """
    kind = getattr(res, "kind", None)
    return None if kind is None else kind.planning_inputs()["events"]


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "-" for c in text)
    return "-".join(part for part in keep.split("-") if part)[:40] or "model"


def bins_file_name(index: int, name: str) -> str:
    """File name of the bin table of the ``index``-th model (1-based) of a report."""
    return f"result-{index}-{_slug(name)}-bins.csv"


def bin_table_csv(table) -> str:
    """The estimator's bin table (``res.bin_table()``) as CSV text, one row per occupied bin.

    The bin index becomes one integer column per coordinate (``bin``, or
    ``bin_1``, ``bin_2``, ... in several dimensions; for full calibration the
    simplex cell's index); every float is written with the shortest decimal
    that reads back as the same double, so the ``contribution`` column sums
    to the result's T exactly as ``res.bin_table()`` does.
    """
    keys = [tuple(k) if isinstance(k, tuple) else (k,) for k in table["bin"]]
    width = max((len(k) for k in keys), default=1)
    index = {"bin": [k[0] for k in keys]} if width == 1 else \
        {f"bin_{j + 1}": [k[j] for k in keys] for j in range(width)}
    out = table.drop(columns="bin")
    for j, (col, values) in enumerate(index.items()):  # a loop over the few coordinates
        out.insert(j, col, values)
    return out.to_csv(index=False, lineterminator="\n")


def result_file_name(index: int, name: str, grouped: bool = False) -> str:
    """File name of the machine-readable result of the ``index``-th model (1-based) of a report."""
    return f"result-{index}-{_slug(name)}{'-subgroups' if grouped else ''}.json"


def result_record(res, evidence: dict | None, verdict: str, acceptance: dict | None) -> dict:
    """The machine-readable result a report attaches: ``res.to_dict()`` with what the report concludes from it.

    Keys beside those of ``to_dict()``: ``evidence`` (the evidence table's
    ``to_dict()``: every row's statistic, p-value, interval, reject and
    verdict, the conclusion, and for a survival result censored before the
    horizon the whole survival evidence under ``survival``; None when the
    report shows no evidence table), ``acceptance`` (the plan's criteria
    evaluated on this result, ``AcceptanceEvaluation.to_dict()``; None without
    a plan) and ``verdict`` (the evidence's verdict, or the interval's when
    there is no evidence table).
    """
    return json_safe({**res.to_dict(), "evidence": evidence, "acceptance": acceptance, "verdict": verdict})


def pdf_attachments(results, names, comparisons, plan, bin_tables, records=None) -> list[tuple[str, str, str]]:
    """``(file name, text, description)`` of every result's ``to_dict()`` and bin table, each comparison and the plan.

    ``bin_tables`` holds, per result, the ``(file name, CSV text)`` of its
    bin table as the report names and links it (:func:`bins_file_name`,
    :func:`bin_table_csv`; of the pooled result for a subgroup analysis).  A
    subgroup analysis (``GroupedCalibrationResult``) is attached whole: its
    ``to_dict()`` holds the per-group rows, the tests across groups and the
    pooled result.  ``records`` holds, per result, the file's text when
    the report made one (the JSON of :func:`result_record`); else that of ``to_dict()``.
    """
    out = []
    records = [None] * len(results) if records is None else records
    for i, (res, name, (bins_name, bins_text), record) in enumerate(zip(results, names, bin_tables, records), 1):
        grouped = hasattr(res, "groups") and hasattr(res, "pooled")
        kind = "subgroup analysis (per-group results, global and heterogeneity tests, pooled result)" \
            if grouped else "calibration result"
        extra = "" if record is None else ", with its evidence table, acceptance criteria and verdict"
        out.append((result_file_name(i, name, grouped),
                    json.dumps(json_safe(res.to_dict()), indent=1) if record is None else record,
                    f"to_dict() of the {kind} of {name}{extra}"))
        out.append((bins_name, bins_text,
                    f"bin table of {name}{' (pooled)' if grouped else ''}: one row per occupied bin of the estimator"))
    for i, cmp in enumerate(comparisons, 1):
        out.append((f"comparison-{i}.json", json.dumps(json_safe(cmp.to_dict()), indent=1),
                    f"to_dict() of comparison {i}"))
    if plan is not None:
        out.append(("analysis-plan.json", json.dumps(plan.to_dict(), indent=2, ensure_ascii=False),
                    "the pre-specified analysis plan (its sha256 field fingerprints the other fields)"))
    return out
