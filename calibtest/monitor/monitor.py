"""``CalibrationMonitor``: a deployed model's calibration followed batch by batch, valid however often one looks."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pandas as pd

from calibtest.core.sequential import DEFAULT_SCALES
from calibtest.inputs.formula import freeze_env, resolve_env
from calibtest.monitor.batches import Reader, Target, check_time_order, read_batch, time_value
from calibtest.monitor.result import MonitorResult
from calibtest.monitor.state import (FORMAT, FORMAT_VERSION, LOOK_FIELDS, MonitorSettings, add_stats, close_look,
                                     new_state, state_from_json, state_to_json)
from calibtest.options import (DEFAULT_SEED, DataError, OptionError, OptionTypeError, check_alpha, check_count,
                               check_missing, check_number, check_option)

__all__ = ["CalibrationMonitor", "MAX_ARL"]

#: Largest in-control average run length (looks) a monitor takes (a bound kept from the simulated RA-CUSUM
#: thresholds of earlier versions, so that every state file stays valid; the computed thresholds need none).
MAX_ARL = 10_000


def _check_scales(scales) -> tuple:
    if isinstance(scales, (str, bytes)) or not hasattr(scales, "__iter__"):
        raise OptionTypeError(f"scales must be a list of bin counts, got {scales!r}")
    out = tuple(check_count(b, "scales") for b in scales)
    if not out or len(set(out)) != len(out):
        raise OptionError(f"scales must be distinct bin counts, at least one, got {list(scales)}")
    return out


def _check_positive(value, name: str, upper: float | None = None) -> float:
    value = check_number(value, name)
    if not value > 0 or (upper is not None and not value < upper):
        raise OptionError(f"{name} must be > 0" + (f" and < {upper:g}" if upper else "") + f", got {value!r}")
    return value


def _margin_of(plan, margin):
    if plan is None:
        return margin
    plan_margin = (plan.acceptance or {}).get("ece_below")
    if margin is not None and plan_margin is not None and margin != plan_margin:
        raise OptionError(f"margin={margin} differs from the plan's ece_below={plan_margin}; give one")
    return plan_margin if margin is None else margin


def _checked_formula(formula):
    if formula is not None and not isinstance(formula, str):
        raise OptionTypeError(f"formula must be a string such as 'y ~ p', got {type(formula).__name__}")
    return formula


def _checked_model(model):
    if model is not None and not isinstance(model, str):
        raise OptionTypeError(f"model must be a string identifying the deployed model, got {model!r}")
    return model


def _checked_alpha(alpha, plan) -> float:
    """``alpha``, else the plan's, else 0.05."""
    return check_alpha(plan.alpha if plan is not None and alpha is None else (0.05 if alpha is None else alpha))


def _checked_arl(arl, alpha: float) -> float:
    """The RA-CUSUM's in-control average run length in looks (default 1 / alpha)."""
    arl = 1.0 / alpha if arl is None else _check_positive(arl, "arl")
    if not 1 <= arl <= MAX_ARL:
        raise OptionError(f"arl must be between 1 and {MAX_ARL} looks, got {arl}")
    return float(arl)


class CalibrationMonitor:
    """Monitor a deployed model's calibration batch by batch, with a false-alarm guarantee for any looks.

    H0: every row is calibrated given its prediction (E[y | p] = p; top-1:
    E[correct | confidence] = confidence).  Each :meth:`update` adds a batch
    (a look) and updates:

    * an **e-process** E_t: a mixture of betting test martingales over the
      directions of several bin scales (calibration-in-the-large at B = 1,
      region-confined miscalibration at larger B) and the slope; bets are
      predictable (from past batches only).  Alarm when E_t >= 1/alpha:
      P(any false alarm, ever) <= alpha by Ville's inequality, whatever the
      number and timing of looks; the anytime p-value is 1 / max_s E_s;
    * time-uniform (1 - alpha) **confidence sequences** for
      calibration-in-the-large (mean of y - p) and O/E, and an anytime-valid
      **upper bound for the binned l2-ECE** at ``n_bins`` (checked against
      ``margin``, the ``ece_below`` of an analysis plan);
    * a **change detector** (Shiryaev-Roberts e-detector on the batch
      e-values with discounted bets), in-control average run length >= ``arl``
      looks, with an estimated change time (the e-CUSUM's argmax start);
    * the **risk-adjusted CUSUM** of Steiner et al. (2000), upper (odds ratio
      ``odds_ratio``) and lower (1 / ``odds_ratio``), on batch sums of its
      scores, thresholds computed (FFT convolution of the batch score's law, Brook-Evans
      Markov chain) for an in-control ARL of ``2 * arl`` per chart.

    See ``docs/monitoring.md`` for the formulas and guarantees.

    Parameters
    ----------
    formula : str, optional
        ``"y ~ p"`` (binary), ``"correct ~ confidence"`` with ``n_classes``
        (top-1), or ``"label ~ p0 + p1 + p2"`` (top-1 of a probability matrix).
        Without it, batches are given as ``y=``/``probs=`` arrays.
    n_classes : int, optional
        K of a single top-1 confidence column.
    alpha : float, default 0.05 (or the plan's)
    scales : sequence of int, default (1, 2, 4, 8, 16)
        Bin counts of the e-process's binned directions.
    n_bins : int, default 10
        B of the binned ECE whose upper confidence bound is reported.
    margin : float, optional
        ECE margin delta: the look where the bound first falls below it is reported.
    plan : AnalysisPlan, optional
        Takes alpha and the ``ece_below`` margin from an analysis plan.
    arl : float, optional
        In-control average run length, in looks, of the detector and the
        RA-CUSUM (default 1 / alpha).
    forget : float, default 0.8
        Discount per look of the detector's bets.
    odds_ratio : float, default 2.0
        R_A of the RA-CUSUM.
    model : str, optional
        The deployed model's identifier, stored with the state; a state file of another model is refused.
    rng : int, optional
        Recorded with the settings (default 0); unused since the RA-CUSUM's thresholds are computed, not
        simulated.
    eval_env : int or dict, default 0
        Where the formula's names are looked up (patsy semantics).
    missing : {"raise", "drop"}
    chunksize : int, optional
        Rows per chunk when a batch is a file.
    history : int or None, default 1000
        Looks kept in :meth:`result` (the oldest are dropped; None: all).

    Examples
    --------
    >>> import numpy as np, calibtest as ct
    >>> mon = ct.CalibrationMonitor(alpha=0.05)
    >>> rng = np.random.default_rng(0)
    >>> for day in range(3):
    ...     p = rng.uniform(0, 1, 500)
    ...     _ = mon.update(y=rng.random(500) < p, probs=p, time=day)
    >>> mon.result().alarm
    False
    """

    #: What :func:`calibtest.report` writes for it: the monitoring report.
    report_kind = "monitor"

    def __init__(self, formula=None, *, n_classes=None, alpha=None, scales=DEFAULT_SCALES, n_bins=10, margin=None,
                 plan=None, arl=None, forget=0.8, odds_ratio=2.0, model=None, rng=None, eval_env=0,
                 missing="raise", chunksize=None, history=1000):
        alpha, margin = _checked_alpha(alpha, plan), _margin_of(plan, margin)
        self.settings = MonitorSettings(
            formula=_checked_formula(formula), n_classes=check_option("n_classes", n_classes), alpha=alpha,
            scales=_check_scales(scales), n_bins=check_count(n_bins, "n_bins"),
            margin=None if margin is None else _check_positive(margin, "margin"), arl=_checked_arl(arl, alpha),
            forget=_check_positive(forget, "forget", 1.0), odds_ratio=_check_positive(odds_ratio, "odds_ratio"),
            seed=DEFAULT_SEED if rng is None else check_option("rng", rng), model=_checked_model(model))
        env = resolve_env(eval_env, depth=0) if formula is not None else None
        self._reader = Reader(self.settings, freeze_env(formula, env) if formula is not None else {},
                              check_missing(missing))
        self.chunksize = check_option("chunksize", chunksize)
        self.history = None if history is None else check_count(history, "history")
        self._state = new_state(self.settings)
        self._looks: list[dict] = []
        self._pending = None  # (state before the last look, its statistics): what merge() needs

    # ------------------------------------------------------------------ updating
    def update(self, data=None, *, y=None, probs=None, time=None) -> dict:
        """Add one batch (a look) and return its record (:data:`calibtest.monitor.state.LOOK_FIELDS`).

        Parameters
        ----------
        data : DataFrame, str or path-like, or Dask DataFrame, optional
            The batch's rows (read with the formula); a CSV/Parquet file is streamed in chunks.
        y, probs : array_like, optional
            The batch as arrays (instead of ``data``).
        time : number or date-time, optional
            The batch's time stamp; must be after the last batch's.

        Raises
        ------
        DataError
            An empty batch, predictions outside [0, 1], another target or set of classes.
        OptionError
            A batch out of time order.  A refused batch leaves the monitor as it was and never alarms.
        """
        stamp = time_value(time)
        check_time_order(stamp, self._state["last_time"], self._state["looks"])
        stats, target = read_batch(self._reader, self._state, data, y, probs, self.chunksize)
        target.check(self._target())
        return self._close(self._state, stats, stamp, target)

    def _target(self) -> Target | None:
        if not self._state["looks"]:  # no batch yet: the first one sets the target
            return None
        classes = self._state["classes"]
        return Target(self._state["mode"], self._state["n_classes"], None if classes is None else tuple(classes))

    def _close(self, before: dict, stats: dict, stamp, target: Target, replace: bool = False) -> dict:
        after, record = close_look(self.settings, before, stats, stamp)
        after.update(mode=target.mode, n_classes=target.n_classes,
                     classes=None if target.classes is None else list(target.classes))
        self._state, self._pending = after, (before, {**stats, "p_ref": stats["p_ref"]}, stamp, target)
        if replace:
            self._looks[-1] = record
        else:
            self._looks.append(record)
            if self.history is not None and len(self._looks) > self.history:
                del self._looks[0]
        return dict(record)

    def merge(self, other: "CalibrationMonitor") -> "CalibrationMonitor":
        """Combine the last look with ``other``'s: two parts of the same batch processed from the same state.

        Both monitors must have the same settings and the same state before their last look (e.g. copies of one
        monitor, each updated with one part of the batch on its own worker), and the same time stamp.  The
        combined look is the look of the whole batch: the e-process's and the detector's bets were fixed by the
        state before it, and every per-batch quantity is a sum over rows.

        Raises
        ------
        OptionError
            Other settings, another state before the look, another time stamp, or nothing to merge.
        """
        if not isinstance(other, CalibrationMonitor):
            raise OptionTypeError(f"merge() takes a CalibrationMonitor, got {type(other).__name__}")
        if other.settings != self.settings:
            raise OptionError("merge(): the other monitor has other settings (another model, target or bins)")
        if self._pending is None or other._pending is None:
            raise OptionError("merge(): both monitors need a last look made by update() in this session")
        (before, stats, stamp, target), (o_before, o_stats, o_stamp, o_target) = self._pending, other._pending
        if _state_text(before) != _state_text(o_before) or stamp != o_stamp:
            raise OptionError("merge(): the two parts were not made from the same state and time stamp; merge "
                              "parts of one batch, each processed by a copy of the same monitor")
        o_target.check(target)
        self._close(before, add_stats(stats, o_stats), stamp, target, replace=True)
        return self

    def copy(self) -> "CalibrationMonitor":
        """An independent copy (e.g. to process a part of the next batch on another worker)."""
        return copy.deepcopy(self)

    # ------------------------------------------------------------------ results
    def result(self) -> MonitorResult:
        """The numbers now: every kept look and the first alarms (a frozen :class:`MonitorResult`)."""
        from calibtest._version import package_version

        st = self._state
        looks = pd.DataFrame(self._looks, columns=list(LOOK_FIELDS))
        alarm_change = None
        if st["detector_look"] is not None:
            rows = looks[looks["look"] == st["detector_look"]]
            alarm_change = int(rows["change_look"].iloc[0]) if not rows.empty else None
        h = None if st["ra_h"] is None else tuple(float(v) for v in st["ra_h"])
        arls = None if st["ra_arl"] is None else tuple(float(v) for v in st["ra_arl"])
        return MonitorResult(looks=looks, settings=self.settings.record(), fingerprint=self.settings.fingerprint,
                             mode=st["mode"], n_looks=st["looks"], n_total=int(st["n_total"]),
                             alarm_look=st["alarm_look"], detector_look=st["detector_look"],
                             change_look=alarm_change, ra_look=st["ra_look"], ece_below_look=st["ece_below_look"],
                             ra_thresholds=h, ra_arls=arls, version=package_version())

    def summary(self, alpha=None):
        """:meth:`MonitorResult.summary` of :meth:`result`."""
        return self.result().summary(alpha)

    def to_dict(self) -> dict:
        return self.result().to_dict()

    def plot(self, ax=None):
        return self.result().plot(ax=ax)

    def report(self, path, **kwargs):
        """:meth:`MonitorResult.report` of :meth:`result`: the monitoring report (HTML or PDF)."""
        return self.result().report(path, **kwargs)

    def _repr_html_(self) -> str:
        return self.result()._repr_html_()

    def __repr__(self) -> str:
        return repr(self.result()).replace("MonitorResult", "CalibrationMonitor", 1)

    # ------------------------------------------------------------------ the state file
    def to_json(self) -> dict:
        """The state file's content (``docs/monitoring.md``, "The state file")."""
        from calibtest._version import package_version

        return {"format": FORMAT, "version": FORMAT_VERSION, "calibtest": package_version(),
                "fingerprint": self.settings.fingerprint, "settings": self.settings.record(),
                "options": {"missing": self._reader.missing, "chunksize": self.chunksize, "history": self.history},
                "state": state_to_json(self._state), "looks": [_look_json(r) for r in self._looks]}

    def save(self, path) -> None:
        """Write the state to a JSON file (written to a temporary file and renamed: never half-written)."""
        path = Path(os.fspath(path))
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path, *, like: "CalibrationMonitor | None" = None, model: str | None = None,
             eval_env=0) -> "CalibrationMonitor":
        """Read a monitor saved by :meth:`save`.

        Parameters
        ----------
        like : CalibrationMonitor, optional
            A monitor made with the settings expected; a file with other settings is refused.
        model : str, optional
            The model expected; a file of another model is refused.

        Raises
        ------
        DataError
            Not a monitor state file, another format version, a fingerprint that does not match its settings,
            another model or other settings than expected.
        """
        path = Path(os.fspath(path))
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{path.name} is not a monitor state file (not JSON: {exc})") from None
        settings = _check_record(record, path.name, like, model)
        env = resolve_env(eval_env, depth=0) if settings.formula is not None else None
        options = record.get("options", {})
        mon = cls.__new__(cls)
        mon.settings = settings
        mon._reader = Reader(settings, freeze_env(settings.formula, env) if settings.formula else {},
                             options.get("missing", "raise"))
        mon.chunksize, mon.history = options.get("chunksize"), options.get("history", 1000)
        mon._state, mon._pending = state_from_json(record["state"]), None
        mon._looks = [dict(r) for r in record["looks"]]
        return mon


def _state_text(state: dict) -> str:
    return json.dumps(state_to_json(state), sort_keys=True)


def _look_json(record: dict) -> dict:
    return {k: (None if isinstance(v, float) and v != v else (v.item() if hasattr(v, "item") else v))
            for k, v in record.items()}


def _check_record(record, name: str, like, model) -> MonitorSettings:
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise DataError(f"{name} is not a calibtest monitor state file (format {FORMAT!r})")
    if record.get("version") != FORMAT_VERSION:
        raise DataError(f"{name} is a monitor state file of format version {record.get('version')!r}; this "
                        f"calibtest reads version {FORMAT_VERSION}")
    settings = MonitorSettings.from_record(record["settings"])
    if settings.fingerprint != record.get("fingerprint"):
        raise DataError(f"{name}: the fingerprint does not match the settings; the file was altered")
    if model is not None and settings.model != model:
        raise DataError(f"{name} monitors the model {settings.model!r}, not {model!r}")
    if like is not None and like.settings != settings:
        diff = [k for k, v in like.settings.record().items() if settings.record()[k] != v]
        raise DataError(f"{name} was made for another model or monitoring plan: {', '.join(diff)} differ "
                        f"(file: {', '.join(f'{k}={settings.record()[k]!r}' for k in diff)})")
    return settings
