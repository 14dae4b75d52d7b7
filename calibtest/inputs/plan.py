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

Optional fields
---------------
``"acceptance"`` (the pre-specified acceptance criteria, see
:data:`calibtest.options.ACCEPTANCE_CRITERIA`) and ``"primary"`` (the primary
criterion) are written only when set, so a plan without them has the same
fields, and the same fingerprint, as before they existed.

The sample-size calculation
---------------------------
:func:`plan` stores a sample-size calculation compactly: its n, B, power,
expected width, target, the anticipated calibration and the prediction
summary (``inputs``, with a survival study's anticipated censoring), the ``n_bins`` rule it used, and -- for a single
prediction column with a logistic anticipated calibration -- the predictions'
distribution as the planning function uses it (``"predictions"``: the sorted
predictions, or their 5000 quantiles (i + 0.5) / 5000 when there are more, in
units of 1e-6, as little-endian unsigned 32-bit differences of consecutive
values, zlib-compressed and base64-encoded).  The power curve is not stored:
:func:`planned_vs_achieved` recomputes the power (or expected width) at any n
with :func:`calibtest.calib_power` from these inputs.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from calibtest.display.format import json_safe
from calibtest._version import package_version
from calibtest.options import ACCEPTANCE_LABELS, OPTIONS, PLAN_SCHEMA, PLAN_TESTS, DataError, OptionError, \
    OptionTypeError, check_count, criterion_text
from calibtest.core.planning import (AnalyticPlanner, CensoredPlanner, logistic_recalibration, planned_censoring,
                                     planned_null)
from calibtest.core.targets import prepare

__all__ = ["plan", "AnalysisPlan", "Deviation", "canonical_json", "plan_sha256", "PLAN_FORMAT",
           "NULL_DEFAULT", "PLAN_TESTS", "PLAN_OPTIONS", "PlannedVsAchieved", "planned_vs_achieved",
           "sample_size_record", "ACCEPTANCE_LABELS", "planned_curve", "power_arguments", "not_recomputable",
           "decode_predictions",
           "is_calculation"]

#: The ``"format"`` field of a plan file.
PLAN_FORMAT = "calibtest-analysis-plan/1"

#: The analysis options a plan fixes, in the order of :func:`plan` (the keys of :meth:`AnalysisPlan.options`).
#: Their types, allowed values and defaults are those of the table of options (:data:`calibtest.options.PLAN_SCHEMA`).
PLAN_OPTIONS = tuple(name for name in PLAN_SCHEMA if name != "sample_size")

#: ``null=`` of :func:`calibtest.calib_ci` when it is not given.
NULL_DEFAULT = OPTIONS["null"].default

#: The file's fields: three of bookkeeping (strings), then the options of :data:`PLAN_SCHEMA`; the optional
#: ones are written only when set (a plan without them keeps its fields and fingerprint).
_TEXT_FIELDS = ("format", "created", "calibtest_version")
_OPTIONAL = ("acceptance", "primary", "cluster")
_FIELDS = _TEXT_FIELDS + tuple(name for name in PLAN_SCHEMA if name not in _OPTIONAL)


#: At most this many values of the predictions' distribution are stored (their quantiles beyond it).
MAX_STORED_PREDICTIONS = 5000
#: The unit of the stored predictions.
_PREDICTION_UNIT = 1e6
_PREDICTION_ENCODING = "sorted, units of 1e-6, uint32 LE differences, zlib, base64"


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
    note : str
        What the package computed about the deviation (for a shortfall of the
        sample size: the power at the achieved n); empty otherwise.
    """

    model: str
    option: str
    planned: str
    used: str
    note: str = ""

    def to_dict(self) -> dict:
        """The fields as a JSON-safe dict."""
        out = {"model": self.model, "option": self.option, "planned": self.planned, "used": self.used}
        return {**out, "note": self.note} if self.note else out


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


def acceptance_text(acceptance: dict | None) -> str:
    """``"ECE below 0.05; Calibration slope within (0.8, 1.25)"`` (or ``"not set"``)."""
    if not acceptance:
        return "not set"
    return "; ".join(criterion_text(key, value) for key, value in acceptance.items())


def _text(value) -> str:
    if value is None:
        return "not set"
    if isinstance(value, dict):
        return acceptance_text(value)
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
        A sample-size calculation (:func:`sample_size_record` of its result),
        shown in reports and compared with the achieved sample size.
    acceptance : dict or None
        Pre-specified acceptance criteria (key -> limit; see :func:`plan`).
    primary : str or None
        The primary acceptance criterion (a key of ``acceptance``), or None
        (every criterion co-primary).
    cluster : str or None
        The column of the clusters of correlated rows (e.g. the site of a
        multicentre study) the analysis allows for, or None (rows independent).
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
    acceptance: dict | None = None
    primary: str | None = None
    cluster: str | None = None

    def fields(self) -> dict:
        """The file's fields (JSON values), without ``sha256``."""
        out = {"format": PLAN_FORMAT, "created": self.created, "calibtest_version": self.calibtest_version,
               "alpha": self.alpha, "n_bins": self.n_bins, "null": self.null, "method": self.method,
               "k": self.k, "n_classes": self.n_classes,
               "tests": None if self.tests is None else list(self.tests),
               "subgroups": None if self.subgroups is None else list(self.subgroups),
               "sample_size": self.sample_size}
        return {**out, **_optional_fields(self.acceptance, self.primary, self.cluster)}

    def __repr__(self) -> str:
        parts = [f"alpha={self.alpha:g}", f"n_bins={self.n_bins!r}", f"null={self.null!r}", f"method={self.method!r}"]
        parts += [f"{name}={getattr(self, name)!r}" for name in ("k", "n_classes") if getattr(self, name) is not None]
        if self.acceptance:
            parts.append(f"acceptance={{{', '.join(self.acceptance)}}}")
        if self.sample_size:
            parts.append(f"sample_size=n {self.sample_size.get('n')}")
        return f"<AnalysisPlan {', '.join(parts)}; sha256={self.sha256[:12]}...>"

    def _repr_html_(self) -> str:
        rows = [("Created", self.created), ("SHA-256", self.sha256)]
        rows += [(name, _text(getattr(self, name))) for name in PLAN_OPTIONS]
        if self.sample_size:
            rows += [(item, value) for item, value in sample_size_rows(self.sample_size)]
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td>"
                       "</tr>" for k, v in rows)
        return f"<table><caption>Analysis plan (calibtest {html.escape(self.calibtest_version)})</caption>{body}</table>"

    def to_dict(self) -> dict:
        """The file's content: :meth:`fields` and ``sha256`` (JSON-safe)."""
        return {**self.fields(), "sha256": self.sha256}

    def options(self) -> dict:
        """The planned options as text (option name -> value), in the order of :func:`plan`."""
        out = {name: _text(getattr(self, name)) for name in PLAN_OPTIONS if name != "cluster"}
        out.update(_given(cluster=self.cluster))  # shown when planned (a plan without it keeps its rows)
        if self.primary is not None:
            out["primary"] = criterion_text(self.primary, self.acceptance[self.primary])
        return out

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
        unknown = sorted(set(fields) - expected - set(_OPTIONAL))
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
                options[name] = option.check(fields.get(name)) if name != "sample_size" \
                    else _check_sample_size(fields[name])
            except (OptionError, OptionTypeError) as exc:
                raise DataError(f"plan {path}: field {name!r}: {exc}") from None
        return _build(**options, created=fields["created"], version=fields["calibtest_version"], path=str(path))

    def deviations(self, result, name: str | None = None) -> tuple:
        """Where ``result`` (a :class:`~calibtest.CalibrationResult`) departs from the plan.

        Compares ``alpha``, ``n_bins`` (``"auto"`` and ``"adaptive"`` match a
        result whose B came from the automatic rule; an integer matches a B
        set to that value), ``null``, ``method``, ``k`` (None matches the
        binary and top-1 targets), ``n_classes`` (a planned None matches a
        probability matrix, whose columns give K) and ``cluster`` (the
        result's cluster column; a planned None matches independent rows).

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
        planned = result.kind.planning_inputs()  # what the result's kind says of its target and clusters
        used_k = planned["k"]
        if used_k != self.k:
            add("k", self.k, used_k if used_k is not None else f"none ({result.mode} target)")
        # a probability matrix implies K; a planned None matches it, not a top-1 column's stated K
        if (self.n_classes is not None or planned["n_classes_stated"]) and result.n_classes != self.n_classes:
            add("n_classes", self.n_classes, result.n_classes)
        used_cluster = planned["cluster"]
        if used_cluster != self.cluster:
            add("cluster", _cluster_text(self.cluster), _cluster_text(used_cluster))
        return tuple(out)


def _given(**fields) -> dict:
    """The fields that are set (not None)."""
    return {name: value for name, value in fields.items() if value is not None}


def _cluster_text(cluster) -> str:
    """A planned or used cluster column as the plan check shows it."""
    return str(cluster) if cluster else "none (rows independent)"


def _optional_fields(acceptance, primary, cluster=None) -> dict:
    """The optional fields as JSON values (pairs as lists); absent when not set."""
    out = _given(cluster=cluster)
    if acceptance is not None:
        out["acceptance"] = {key: list(value) if isinstance(value, tuple) else value
                             for key, value in acceptance.items()}
    if primary is not None:
        out["primary"] = primary
    return out

# ----------------------------------------------------------------------------- the sample-size calculation
def _encode_predictions(z) -> dict:
    """The predictions' distribution as stored in a plan (module docstring)."""
    z = np.asarray(z, dtype=np.float64)
    m = int(z.size)
    if m > MAX_STORED_PREDICTIONS:
        z = np.quantile(z, (np.arange(MAX_STORED_PREDICTIONS) + 0.5) / MAX_STORED_PREDICTIONS)
    units = np.sort(np.rint(z * _PREDICTION_UNIT).astype(np.int64))
    steps = np.diff(units, prepend=0).astype("<u4")
    blob = base64.b64encode(zlib.compress(steps.tobytes(), 9)).decode("ascii")
    return {"encoding": _PREDICTION_ENCODING, "sample_size": m, "count": int(units.size),
            "kind": "sample" if m <= MAX_STORED_PREDICTIONS else "quantiles", "values": blob}


def decode_predictions(stored: dict) -> np.ndarray:
    """The predictions a plan stores (``sample_size["predictions"]``), as floats in [0, 1]."""
    if not isinstance(stored, dict) or stored.get("encoding") != _PREDICTION_ENCODING:
        raise DataError("sample_size['predictions'] is not in the encoding calibtest writes "
                        f"({_PREDICTION_ENCODING!r})")
    try:
        steps = np.frombuffer(zlib.decompress(base64.b64decode(stored["values"], validate=True)), dtype="<u4")
    except (ValueError, zlib.error, KeyError) as exc:
        raise DataError(f"sample_size['predictions'] cannot be decoded: {exc}") from None
    if steps.size != stored.get("count"):
        raise DataError(f"sample_size['predictions'] holds {steps.size} values, its count says {stored.get('count')}")
    return np.cumsum(steps.astype(np.int64)) / _PREDICTION_UNIT


def sample_size_record(result) -> dict:
    """What a plan stores of a sample-size calculation: a short record, enough to recompute the power at any n.

    Parameters
    ----------
    result : SampleSizeResult or dict
        From :func:`calibtest.calib_sample_size`, or its ``to_dict()`` (as
        ``calibtest sample-size --json`` prints it); the dict's power curve is
        left out (it is recomputed from the inputs when needed), every other
        key is kept.

    Returns
    -------
    dict
        ``n``, ``n_bins``, ``target``, ``target_value``, ``margin``,
        ``achieved_power``, ``expected_width``, ``ece_binned``, ``method``,
        ``reliable``, ``rule``, ``inputs`` (target, prediction summary,
        anticipated calibration, alpha, null), ``n_bins_rule`` and
        ``predictions`` (None when the calculation's predictions cannot be
        kept: a probability matrix, a callable calibration, or a dict).
    """
    if hasattr(result, "n_bins_rule") and hasattr(result, "predictions") and hasattr(result, "to_dict"):
        out = {key: value for key, value in result.to_dict().items() if key != "curve"}
        out["n_bins_rule"] = result.n_bins_rule
        out["predictions"] = None if result.predictions is None else _encode_predictions(result.predictions)
        return out
    if isinstance(result, dict):
        return {key: value for key, value in result.items() if key != "curve"}
    raise OptionTypeError(f"sample_size must be a SampleSizeResult (from calib_sample_size) or its to_dict(), "
                          f"got {type(result).__name__}")


def _anticipated(inputs: dict) -> str:
    mis = inputs.get("miscalibration") or {}
    if mis.get("form") == "logistic":
        if mis.get("intercept") == 0.0 and mis.get("slope") == 1.0:
            return "calibrated (intercept 0, slope 1)"
        return f"logistic recalibration: intercept {mis['intercept']:g}, slope {mis['slope']:g}"
    return f"callable {mis.get('name', '?')}" if mis else "not recorded"


def is_calculation(record) -> bool:
    """Whether a plan's ``sample_size`` is a calculation of :func:`calibtest.calib_sample_size` (not a free dict)."""
    return (isinstance(record, dict) and record.get("target") in ("power", "ci_width")
            and isinstance(record.get("inputs"), dict) and isinstance(record.get("n"), int))


def _flat_rows(d: dict, prefix: str = "") -> list:
    rows = []
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _flat_rows(value, name + ".")
        elif isinstance(value, list):
            rows.append((name, f"{len(value)} values"))
        else:
            rows.append((name, f"{value:g}" if isinstance(value, float) else str(value)))
    return rows


def sample_size_rows(record: dict) -> list:
    """The sample-size calculation of a plan as (item, value) rows of a short table.

    A calculation of :func:`calibtest.calib_sample_size`: target, n, B, power and width at n, the
    anticipated calibration, the prediction summary, alpha, null and method, and a survival study's
    anticipated censoring (its null is the IPCW asymptotic one).  Any other dict: its
    items (nested keys joined by dots, a list shown by its length).
    """
    if not is_calculation(record):
        return _flat_rows(record)
    inputs = record.get("inputs") or {}
    target = record.get("target")
    if target == "power":
        goal = (f"power {record['target_value']:g} to show ECE < {record['margin']:g} (margin test)"
                if record.get("margin") is not None else f"power {record['target_value']:g} to reject H0: calibrated")
    else:
        goal = f"expected ECE-scale interval width <= {record.get('target_value', float('nan')):g}"
    rows = [("Target", goal), ("Planned n", str(record.get("n"))), ("Bins B at n", str(record.get("n_bins")))]
    if record.get("achieved_power") is not None:
        rows.append(("Power at n", f"{record['achieved_power']:.3f}"))
    if record.get("expected_width") is not None:
        rows.append(("Expected interval width at n", f"{record['expected_width']:.4f}"))
    rows.append(("Anticipated calibration", _anticipated(inputs)))
    ps = inputs.get("prediction_summary")
    if ps:
        rows.append(("Predictions", f"m = {inputs.get('n_predictions')}, mean {ps['mean']:.3g}, median "
                     f"{ps['median']:.3g}, 90% range [{ps['q05']:.3g}, {ps['q95']:.3g}]"))
    level = f"{inputs['alpha']:g}" if "alpha" in inputs else "not recorded"
    censoring = inputs.get("censoring")
    rows.append(("Alpha, null, method", f"{level}, {planned_null(inputs.get('null', 'not recorded'), censoring)}, "
                 f"{record.get('method', 'not recorded')}"))
    if censoring is not None:
        rows.append(("Censoring (survival study)", planned_censoring(censoring)))
    return rows


@dataclass(frozen=True)
class PlannedVsAchieved:
    """The planned sample size against the achieved one (:func:`planned_vs_achieved`).

    Attributes
    ----------
    planned_n, achieved_n : int
    events : int or None
        Events of a binary result (``res.n_events``: the rows with y = 1, or
        of a survival result the events at or before the horizon); None when
        the result holds no rows or is not binary.
    quantity : {"power", "expected width"}
        What the calculation targeted (power, or the expected interval width).
    planned_value : float or None
        That quantity at the planned n, as the plan records it.
    achieved_value : float or None
        The same quantity at the achieved n for the planned alternative,
        recomputed as :func:`calibtest.calib_power` (analytic) computes it, from
        the plan's inputs (:func:`planned_curve`); None when it cannot be (``not_recomputed`` says why).
    not_recomputed : str
        Why ``achieved_value`` is None (empty otherwise).
    shortfall : bool
        achieved_n < planned_n.
    """

    planned_n: int
    achieved_n: int
    events: int | None
    quantity: str
    planned_value: float | None
    achieved_value: float | None
    not_recomputed: str
    shortfall: bool

    def value_text(self, value) -> str:
        """The quantity's value as the report prints it."""
        if value is None:
            return "not recomputed"
        return f"{value:.3f}" if self.quantity == "power" else f"{value:.4f}"

    @property
    def sentence(self) -> str:
        """One sentence: planned n, achieved n and events, and the quantity at the achieved n."""
        events = "" if self.events is None else f" with {self.events} events"
        at = (f"the {self.quantity} for the planned alternative is {self.value_text(self.achieved_value)} at "
              f"n = {self.achieved_n} (recomputed from the plan's inputs) against "
              f"{self.value_text(self.planned_value)} planned" if self.achieved_value is not None
              else f"the {self.quantity} at n = {self.achieved_n} was not recomputed: {self.not_recomputed}")
        if self.shortfall:
            head = (f"The plan asked for n = {self.planned_n}; the study has n = {self.achieved_n}{events}, "
                    f"{self.planned_n - self.achieved_n} fewer")
        else:
            head = f"The plan asked for n = {self.planned_n}; the study has n = {self.achieved_n}{events}"
        return f"{head}; {at}."

    def to_dict(self) -> dict:
        """The fields as a JSON-safe dict."""
        return {"planned_n": self.planned_n, "achieved_n": self.achieved_n, "events": self.events,
                "quantity": self.quantity, "planned_value": self.planned_value,
                "achieved_value": self.achieved_value, "not_recomputed": self.not_recomputed,
                "shortfall": self.shortfall}


def not_recomputable(record: dict) -> str:
    """Why the plan's sample-size calculation cannot be recomputed at another n (empty when it can)."""
    mis = (record.get("inputs") or {}).get("miscalibration") or {}
    if record.get("predictions") is None:
        return ("the plan does not hold the predictions' distribution (a probability matrix, a callable calibration, "
                "or a calculation given as a dict)")
    if mis.get("form") != "logistic":
        return "the anticipated calibration is not a logistic recalibration"
    return ""


def power_arguments(record: dict) -> dict:
    """The keyword arguments of :func:`calibtest.calib_power` that recompute a plan's sample-size calculation.

    Every input the calculation stores: the predictions' distribution, the
    logistic anticipated calibration, alpha, the null, the ``n_bins`` rule,
    the target (``k``, ``n_classes``), the margin and, for a survival study,
    the anticipated ``censored_fraction``; ``method="analytic"``.  A survival
    plan written before its null was recorded as the IPCW asymptotic one
    (it read ``"conditional"``) is recomputed with that null, the only one
    ``censored_fraction`` takes.

    Raises
    ------
    DataError
        When the plan does not hold the predictions or the anticipated
        calibration is not logistic.
    """
    why = not_recomputable(record)
    if why:
        raise DataError(f"the plan's sample-size calculation cannot be recomputed: {why}")
    inputs = record["inputs"]
    mis, censoring = inputs["miscalibration"], inputs.get("censoring")
    null = "asymptotic" if censoring is not None else inputs["null"]
    return {"probs": decode_predictions(record["predictions"]), "intercept": float(mis["intercept"]),
            "slope": float(mis["slope"]), "alpha": float(inputs["alpha"]), "n_bins": record.get("n_bins_rule", "auto"),
            "k": inputs.get("k", 1), "n_classes": inputs.get("n_classes"), "null": null, "method": "analytic",
            "margin": record.get("margin"),
            "censored_fraction": None if censoring is None else float(censoring["censored_fraction"])}


def planned_curve(record: dict, ns) -> dict:
    """The plan's sample-size calculation at the sizes ``ns``: ``{"n", "power", "expected_width"}`` arrays.

    The analytic power and expected ECE-scale width of
    :func:`calibtest.calib_power` with every input the plan stores
    (:func:`power_arguments`), by its engine
    (:class:`calibtest.core.planning.AnalyticPlanner`, or
    :class:`~calibtest.core.planning.CensoredPlanner` for a survival study
    with its anticipated censored fraction), without the estimation layer.
    Raises the ``DataError`` of :func:`power_arguments`.
    """
    args = power_arguments(record)
    p = args["probs"]
    data = prepare(np.zeros(p.size, dtype=np.int64), p, n_classes=args["n_classes"], k=args["k"])
    z = data.z
    q = logistic_recalibration(z[:, 0], args["intercept"], args["slope"])[:, None]
    shared = (z, q, data.mode, data.n_classes, data.k, args["n_bins"], args["alpha"])
    planner = (AnalyticPlanner(*shared, args["null"], args["margin"]) if args["censored_fraction"] is None else
               CensoredPlanner(*shared, args["censored_fraction"], args["margin"]))
    rows = planner.analytic_many([int(v) for v in ns])
    return {key: np.array([r[key] for r in rows]) for key in ("n", "power", "expected_width")}


def planned_vs_achieved(record: dict, n: int, events=None) -> PlannedVsAchieved:
    """The plan's sample-size calculation at the achieved sample size.

    The power (or, for a width target, the expected ECE-scale interval
    width) at ``n`` is recomputed with :func:`calibtest.calib_power`
    (``method="analytic"``) from every input the plan stored
    (:func:`power_arguments`): its predictions' distribution, anticipated
    calibration, alpha, null, ``n_bins`` rule, target, margin and, for a
    survival study, the anticipated censored fraction.

    Parameters
    ----------
    record : dict
        The plan's ``sample_size`` (:func:`sample_size_record`).
    n : int
        The achieved sample size.
    events : int, optional
        Events of the study (``res.n_events``), for the sentence.

    Returns
    -------
    PlannedVsAchieved
    """
    if not is_calculation(record):
        raise DataError("the plan's sample_size is not a calculation of calib_sample_size (it needs 'n', "
                        "'target' and 'inputs')")
    events = None if events is None else check_count(events, "events", 0)
    quantity = "power" if record["target"] == "power" else "expected width"
    planned_value = record.get("achieved_power" if quantity == "power" else "expected_width")
    value, why = None, not_recomputable(record)
    if not why and int(n) < 2:
        why = f"n = {n} is below 2"
    if not why:
        row = planned_curve(record, [int(n)])
        value = float(row["power" if quantity == "power" else "expected_width"][0])
    planned_n = int(record["n"])
    return PlannedVsAchieved(planned_n=planned_n, achieved_n=int(n), events=events,
                             quantity=quantity, planned_value=None if planned_value is None else float(planned_value),
                             achieved_value=value, not_recomputed=why, shortfall=int(n) < planned_n)



def _build(*, created, version, path, **options) -> AnalysisPlan:
    """The plan of ``options`` (every key of :data:`PLAN_SCHEMA`), each checked against the table of options."""
    checked = {name: (option.check(options[name]) if name != "sample_size" else _check_sample_size(options[name]))
               for name, option in PLAN_SCHEMA.items()}
    if checked["cluster"] is not None and not isinstance(checked["cluster"], str):
        raise OptionTypeError(f"cluster must name a column in a plan (a file holds no per-row values), got "
                              f"{type(checked['cluster']).__name__}")
    if checked["primary"] is not None and checked["primary"] not in (checked["acceptance"] or {}):
        raise OptionError(f"primary must be one of the acceptance criteria "
                          f"({', '.join(checked['acceptance'] or {}) or 'none given'}), got {checked['primary']!r}")
    as_list = {name: None if checked[name] is None else list(checked[name]) for name in ("tests", "subgroups")}
    fields = {"format": PLAN_FORMAT, "created": created, "calibtest_version": version,
              **{k: v for k, v in checked.items() if k not in _OPTIONAL}, **as_list,
              **_optional_fields(checked["acceptance"], checked["primary"], checked["cluster"])}
    return AnalysisPlan(**checked, created=created, calibtest_version=version, sha256=plan_sha256(fields),
                        path=path)


def plan(path, *, alpha: float = PLAN_SCHEMA["alpha"].default, n_bins=PLAN_SCHEMA["n_bins"].default,
         null: str = PLAN_SCHEMA["null"].default, method: str = PLAN_SCHEMA["method"].default,
         k=None, n_classes: int | None = None, tests=None, subgroups=None, sample_size=None,
         acceptance: dict | None = None, primary: str | None = None, cluster: str | None = None,
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
    sample_size : SampleSizeResult or dict, optional
        A sample-size calculation (:func:`calibtest.calib_sample_size`, or its
        ``to_dict()``), stored as :func:`sample_size_record` (no power curve:
        the report recomputes the power at the achieved n from the stored
        inputs) and compared in reports with the achieved sample size.
    acceptance : dict, optional
        Pre-specified acceptance criteria, tested in the report
        (:func:`calibtest.checks.acceptance.evaluate_acceptance`): ``ece_below``
        (a margin delta > 0 on the ECE scale; H1: ECE < delta, the margin
        test), ``citl_within`` (a > 0, meaning -a < CITL < a, or a pair
        (l, u)), ``slope_within`` ((l, u) for the calibration slope) and
        ``oe_within`` ((l, u), 0 < l, for the observed/expected ratio); the
        last three by two one-sided tests.  The model meets the criteria when
        every one is met (an intersection-union test, so the level of the
        overall verdict is alpha without a multiplicity adjustment).
    primary : str, optional
        The primary criterion: one of the keys of ``acceptance``, the one
        the study's conclusion rests on (the report lists it first and names
        it in the Summary of findings); the others are secondary.  Default:
        every criterion co-primary.
    cluster : str, optional
        The column of the clusters of correlated rows (e.g. ``"site"``): the
        analysis is the clustered one (``calib_ci(..., cluster=)``;
        ``calibtest report --plan`` uses it when ``--cluster`` is not given),
        and a result without these clusters is a deviation.  Written only
        when set, so a plan without it keeps its fields and fingerprint.
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
    over every field except ``sha256`` itself (see the module docstring): the
    analysis specified before the data are seen, as TRIPOD asks of a
    validation [1]_.

    References
    ----------
    .. [1] Collins, Reitsma, Altman and Moons, "Transparent reporting of a
           multivariable prediction model for individual prognosis or
           diagnosis (TRIPOD): the TRIPOD statement", BMJ 350 (2015) g7594.

    Examples
    --------
    >>> import pathlib, tempfile, calibtest as ct
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> p = ct.plan(folder / "plan.json", alpha=0.05, n_bins="auto",
    ...             acceptance={"ece_below": 0.05, "slope_within": (0.8, 1.25)}, primary="ece_below")
    >>> p.alpha, p.primary, len(p.sha256)
    (0.05, 'ece_below', 64)

    The report of a result checks it against the plan (``"report.pdf"`` for
    a PDF):

    >>> res = ct.calib_ci("y ~ p", data=ct.load_demo())
    >>> ct.report(res, folder / "report.html", plan=folder / "plan.json").name
    'report.html'
    """
    if created is None:
        created = datetime.now(timezone.utc)
    if not isinstance(created, datetime):
        raise OptionTypeError(f"created must be a datetime, got {type(created).__name__}")
    if created.tzinfo is None:
        raise OptionError("created must be a timezone-aware datetime (its UTC time is stored)")
    stamp = created.astimezone(timezone.utc).isoformat(timespec="seconds")
    if sample_size is not None:
        sample_size = sample_size_record(sample_size)
    out = _build(alpha=alpha, n_bins=n_bins, null=null, method=method, k=k, n_classes=n_classes, tests=tests,
                 subgroups=subgroups, sample_size=sample_size, acceptance=acceptance, primary=primary,
                 cluster=cluster, created=stamp, version=package_version(), path=str(path))
    Path(path).write_text(json.dumps(out.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
