"""Pre-specified analysis plans: the options of a calibration analysis, fixed before the data are seen.

``plan("plan.json", alpha=0.05, n_bins="auto")`` writes the options as a JSON
file with its creation time and a SHA-256 fingerprint; ``AnalysisPlan.read``
reads it back and refuses a file whose fingerprint does not match its content;
:meth:`AnalysisPlan.deviations` lists where a result's options differ from the
plan, and :func:`calibtest.report` states either that the analysis followed the
plan or each deviation.

The fingerprint
---------------
The file is one JSON object.  Its ``"sha256"`` field is the hexadecimal
SHA-256 of the UTF-8 bytes of the *canonical* JSON of every other field::

    json.dumps(fields_without_sha256, sort_keys=True, separators=(",", ":"),
               ensure_ascii=False, allow_nan=False)

so a reader can recompute it in any language: drop ``"sha256"``, serialise
with sorted keys, no whitespace, non-ASCII characters kept, and hash.  The
file itself is written indented for reading; its layout does not enter the
fingerprint, any change of a value does.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from calibtest._format import json_safe
from calibtest._version import package_version
from calibtest.options import OPTIONS, PLAN_SCHEMA, PLAN_TESTS, DataError, OptionError, OptionTypeError

__all__ = ["plan", "AnalysisPlan", "Deviation", "canonical_json", "plan_sha256", "PLAN_FORMAT",
           "NULL_DEFAULT", "PLAN_TESTS", "PLAN_OPTIONS"]

#: The ``"format"`` field of a plan file.
PLAN_FORMAT = "calibtest-analysis-plan/1"

#: The analysis options a plan fixes, in the order of :func:`plan` (the keys of :meth:`AnalysisPlan.options`).
#: Their types, allowed values and defaults are those of the table of options (:data:`calibtest.options.PLAN_SCHEMA`).
PLAN_OPTIONS = tuple(name for name in PLAN_SCHEMA if name != "sample_size")

#: ``null=`` of :func:`calibtest.calib_ci` when it is not given.
NULL_DEFAULT = OPTIONS["null"].default

#: The file's fields: three of bookkeeping (strings), then the options of :data:`PLAN_SCHEMA`.
_TEXT_FIELDS = ("format", "created", "calibtest_version")
_FIELDS = _TEXT_FIELDS + tuple(PLAN_SCHEMA)


def canonical_json(fields: dict) -> str:
    """The canonical JSON text of a plan's fields (sorted keys, no whitespace, UTF-8 characters kept)."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def plan_sha256(fields: dict) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``fields`` without their ``"sha256"`` key."""
    body = {key: value for key, value in fields.items() if key != "sha256"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Deviation:
    """One option of a result that differs from the plan.

    Attributes
    ----------
    model : str
        The model (its label in a report, else its formula).
    option : str
        The option's name as in :func:`plan` (``alpha``, ``n_bins``, ...).
    planned, used : str
        The planned and the used value, as text.
    """

    model: str
    option: str
    planned: str
    used: str

    def to_dict(self) -> dict:
        """The fields as a JSON-safe dict."""
        return {"model": self.model, "option": self.option, "planned": self.planned, "used": self.used}


def _check_sample_size(sample_size):
    if sample_size is None:
        return None
    if hasattr(sample_size, "to_dict") and not isinstance(sample_size, dict):
        sample_size = sample_size.to_dict()
    PLAN_SCHEMA["sample_size"].check(sample_size)
    safe = json_safe(sample_size)
    try:
        canonical_json(safe)
    except (TypeError, ValueError) as exc:
        raise OptionTypeError(f"sample_size must hold JSON values only: {exc}") from None
    return safe


def _text(value) -> str:
    if value is None:
        return "not set"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True)
class AnalysisPlan:
    """The options of a calibration analysis fixed in advance, with a creation time and a fingerprint.

    Made by :func:`plan` (which also writes the file) or :meth:`read`.

    Attributes
    ----------
    alpha : float
        Significance level of every test and interval.
    n_bins : int or str
        Bins per dimension of the interval, ``"auto"`` (the automatic rule
        of :func:`calibtest.calib_ci`) or ``"adaptive"`` (the multi-scale
        test chooses the scale; the interval uses the automatic rule).
    null : str
        Null law of the test of ECE = 0 (``null=`` of calib_ci).
    method : str
        Interval method (``method=`` of calib_ci).
    k : int, "full" or None
        Calibration target: top-1-to-k, full, or None for the default target
        of the data (binary, or top-1 with ``n_classes``).
    n_classes : int or None
        K for a top-1 confidence column.
    tests : tuple of str or None
        Tests and measures the report must show (keys of :data:`PLAN_TESTS`).
    subgroups : tuple of str or None
        Columns defining subgroups to analyse separately.
    sample_size : dict or None
        A sample-size calculation (``to_dict()`` of its result), shown in reports.
    created : str
        Creation time, UTC, ISO 8601 (``2026-11-23T04:00:00+00:00``).
    calibtest_version : str
        Version of calibtest that wrote the plan.
    sha256 : str
        SHA-256 of the canonical JSON of the other fields (module docstring).
    path : str or None
        The file written or read.
    """

    alpha: float
    n_bins: int | str
    null: str
    method: str
    k: int | str | None
    n_classes: int | None
    tests: tuple | None
    subgroups: tuple | None
    sample_size: dict | None
    created: str
    calibtest_version: str
    sha256: str
    path: str | None = None

    def fields(self) -> dict:
        """The file's fields (JSON values), without ``sha256``."""
        return {"format": PLAN_FORMAT, "created": self.created, "calibtest_version": self.calibtest_version,
                "alpha": self.alpha, "n_bins": self.n_bins, "null": self.null, "method": self.method,
                "k": self.k, "n_classes": self.n_classes,
                "tests": None if self.tests is None else list(self.tests),
                "subgroups": None if self.subgroups is None else list(self.subgroups),
                "sample_size": self.sample_size}

    def to_dict(self) -> dict:
        """The file's content: :meth:`fields` and ``sha256`` (JSON-safe)."""
        return {**self.fields(), "sha256": self.sha256}

    def options(self) -> dict:
        """The planned options as text (option name -> value), in the order of :func:`plan`."""
        return {name: _text(getattr(self, name)) for name in PLAN_OPTIONS}

    @classmethod
    def read(cls, path) -> "AnalysisPlan":
        """Read a plan file and verify its fingerprint.

        Raises
        ------
        ValueError
            If the file is not a plan, has unknown or missing fields, or its
            ``sha256`` does not match its content (the file was changed after
            it was written).
        """
        path = Path(path)
        try:
            fields = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DataError(f"plan {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"plan {path}: not a JSON file ({exc})") from None
        if not isinstance(fields, dict) or fields.get("format") != PLAN_FORMAT:
            raise DataError(f"plan {path}: not a calibtest analysis plan (format {PLAN_FORMAT!r} expected)")
        expected = set(_FIELDS) | {"sha256"}
        unknown = sorted(set(fields) - expected)
        missing = sorted(expected - set(fields))
        if unknown or missing:
            raise DataError(f"plan {path}: unknown fields {unknown}, missing fields {missing}")
        for name in _TEXT_FIELDS + ("sha256",):
            if not isinstance(fields[name], str):
                raise DataError(f"plan {path}: field {name!r} must be a string, got {fields[name]!r}")
        for name, value in fields.items():  # NaN and Infinity, which Python's json reads and JSON has not
            if isinstance(value, float) and not math.isfinite(value):
                raise DataError(f"plan {path}: field {name!r} is {value}, not a finite number")
        try:
            digest = plan_sha256(fields)
        except ValueError as exc:  # the same inside sample_size
            raise DataError(f"plan {path}: field 'sample_size': {exc}") from None
        if fields["sha256"] != digest:
            raise DataError(f"plan {path}: its SHA-256 {fields['sha256']!r} does not match its content "
                            f"({digest}); the file was changed after it was written")
        options = {}
        for name, option in PLAN_SCHEMA.items():
            try:
                options[name] = option.check(fields[name]) if name != "sample_size" \
                    else _check_sample_size(fields[name])
            except (OptionError, OptionTypeError) as exc:
                raise DataError(f"plan {path}: field {name!r}: {exc}") from None
        return _build(**options, created=fields["created"], version=fields["calibtest_version"], path=str(path))

    def deviations(self, result, name: str | None = None) -> tuple:
        """Where ``result`` (a :class:`~calibtest.CalibrationResult`) departs from the plan.

        Compares ``alpha``, ``n_bins`` (``"auto"`` and ``"adaptive"`` match a
        result whose B came from the automatic rule; an integer matches a B
        set to that value), ``null``, ``method``, ``k`` (None matches the
        binary and top-1 targets) and ``n_classes`` (a planned None matches a
        probability matrix, whose columns give K).

        Returns
        -------
        tuple of Deviation
            Empty when the result followed the plan.
        """
        name = name if name is not None else (result.formula or "model")
        out = []

        def add(option, planned, used):
            out.append(Deviation(name, option, _text(planned), _text(used)))

        if float(result.alpha) != self.alpha:
            add("alpha", self.alpha, float(result.alpha))
        rule = result.n_bins_rule
        if isinstance(self.n_bins, str):
            if rule != "auto":
                add("n_bins", self.n_bins, f"{result.n_bins} (set by the user)")
        elif rule == "auto" or int(result.n_bins) != self.n_bins:
            add("n_bins", self.n_bins, f"{result.n_bins} ({'automatic' if rule == 'auto' else 'set by the user'})")
        used_null = str(getattr(result, "null", NULL_DEFAULT))
        if self.null == "auto":  # followed unless the call asked for a null explicitly
            call = getattr(result, "call_record", None)
            explicit = None if call is None else call.options.get("null")
            if explicit not in (None, "auto"):
                add("null", self.null, used_null)
        elif used_null != self.null:
            add("null", self.null, used_null)
        if result.method != self.method:
            add("method", self.method, result.method)
        used_k = "full" if result.mode == "full" else (None if result.mode in ("binary", "top1") else result.k)
        if used_k != self.k:
            add("k", self.k, used_k if used_k is not None else f"none ({result.mode} target)")
        # a probability matrix implies K; a planned None matches it, not a top-1 column's stated K
        stated = result.mode == "top1" and len(result.prob_names) == 1
        if (self.n_classes is not None or stated) and result.n_classes != self.n_classes:
            add("n_classes", self.n_classes, result.n_classes)
        return tuple(out)


def _build(*, created, version, path, **options) -> AnalysisPlan:
    """The plan of ``options`` (every key of :data:`PLAN_SCHEMA`), each checked against the table of options."""
    checked = {name: (option.check(options[name]) if name != "sample_size" else _check_sample_size(options[name]))
               for name, option in PLAN_SCHEMA.items()}
    as_list = {name: None if checked[name] is None else list(checked[name]) for name in ("tests", "subgroups")}
    fields = {"format": PLAN_FORMAT, "created": created, "calibtest_version": version, **checked, **as_list}
    return AnalysisPlan(**checked, created=created, calibtest_version=version, sha256=plan_sha256(fields),
                        path=path)


def plan(path, *, alpha: float = PLAN_SCHEMA["alpha"].default, n_bins=PLAN_SCHEMA["n_bins"].default,
         null: str = PLAN_SCHEMA["null"].default, method: str = PLAN_SCHEMA["method"].default,
         k=None, n_classes: int | None = None, tests=None, subgroups=None, sample_size=None,
         created: datetime | None = None) -> AnalysisPlan:
    """Write a pre-specified analysis plan (JSON with a creation time and its SHA-256) and return it.

    Parameters
    ----------
    path : str or path-like
        The JSON file to write (an existing file is replaced).
    alpha : float
        Significance level of every test and interval (0 < alpha < 1).
    n_bins : int, "auto" or "adaptive"
        Bins per dimension of the interval; ``"auto"`` is calib_ci's rule
        B = max(2, round(6 / (d + 1) n^(2 / (4 + d)))),
        ``"adaptive"`` lets the multi-scale test choose the scale.
    null : {"auto", "asymptotic", "conditional", "monte-carlo"}
        Null law of the test of ECE = 0 (default: calib_ci's, ``"auto"``: the
        conditional null for rows in memory with at most 4 binned coordinates,
        the asymptotic one otherwise; a result follows a planned ``"auto"``
        unless its call asked for a null explicitly).
    method : {"adjusted", "bootstrap", "subsampling", "hulc"}
        Interval method (default: the adjusted interval, Algorithm 1 of [1]_).
    k : int, "full" or None
        Top-1-to-k target, full calibration, or None (binary or top-1).
    n_classes : int, optional
        K for a top-1 confidence column.
    tests : list of str, optional
        Tests and measures to report, from :data:`PLAN_TESTS`.
    subgroups : list of str, optional
        Columns whose levels are analysed separately.
    sample_size : dict or object with ``to_dict()``, optional
        A sample-size calculation, stored in the plan and shown in reports.
    created : datetime, optional
        Creation time (default: now); stored in UTC as ISO 8601.

    Returns
    -------
    AnalysisPlan

    Raises
    ------
    ValueError, TypeError
        For an invalid option, naming it.

    Notes
    -----
    The ``sha256`` field is the SHA-256 of
    ``json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
    over every field except ``sha256`` itself (see the module docstring).

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024.

    Examples
    --------
    >>> p = ct.plan("plan.json", alpha=0.05, n_bins="auto")       # doctest: +SKIP
    >>> ct.report(res, "report.pdf", plan="plan.json")            # doctest: +SKIP
    """
    if created is None:
        created = datetime.now(timezone.utc)
    if not isinstance(created, datetime):
        raise OptionTypeError(f"created must be a datetime, got {type(created).__name__}")
    if created.tzinfo is None:
        raise OptionError("created must be a timezone-aware datetime (its UTC time is stored)")
    stamp = created.astimezone(timezone.utc).isoformat(timespec="seconds")
    out = _build(alpha=alpha, n_bins=n_bins, null=null, method=method, k=k, n_classes=n_classes, tests=tests,
                 subgroups=subgroups, sample_size=sample_size, created=stamp, version=package_version(),
                 path=str(path))
    Path(path).write_text(json.dumps(out.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
