"""The state of a calibration monitor: settings, additive batch statistics and the step that closes a look.

A look (one batch) is processed in two steps, so that parts of one batch
computed on different workers merge exactly:

1. :func:`batch_stats` reduces the batch's rows to additive sums, given the
   state *before* the batch (the bets of the e-process and of the detector are
   fixed by it: predictable).  Parts of a batch give sums that add
   (:func:`add_stats`).
2. :func:`close_look` turns the state before the batch and the batch's summed
   statistics into the state after it and the look's record (the numbers
   reported).  The confidence sequences' bets are set here, from the past and
   the whole batch's row counts (never its labels).

Everything is numpy arrays and floats, written to JSON by
:func:`state_to_json` and read back by :func:`state_from_json` exactly
(floats are written with ``repr``, which round-trips).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from calibtest.core import sequential as sq
from calibtest.core.binning import edge_floor

__all__ = ["FORMAT", "FORMAT_VERSION", "MonitorSettings", "new_state", "batch_stats", "add_stats", "close_look",
           "state_to_json", "state_from_json", "LOOK_FIELDS"]

#: Name and version of the state file format (``docs/monitoring.md``, "The state file").
FORMAT = "calibtest.monitor"
FORMAT_VERSION = 1

#: The numbers recorded at every look, in order (the columns of ``MonitorResult.looks``).
LOOK_FIELDS = ("look", "time", "n", "n_total", "e_value", "p_value", "alarm", "citl", "citl_lower", "citl_upper",
               "oe", "oe_lower", "oe_upper", "ece_upper", "ece_below", "detector", "detector_cusum",
               "detector_alarm", "change_look", "ra_up", "ra_down", "ra_alarm")

#: Range of the O/E confidence sequence.
OE_MAX = 1e3


@dataclass(frozen=True)
class MonitorSettings:
    """What a monitor is fixed to when it is made; its fingerprint is stored in the state file.

    Attributes
    ----------
    formula : str or None
        The model formula (None: arrays ``y=``/``probs=``).
    n_classes : int or None
        K of a top-1 confidence column (None: binary, or K from a probability matrix).
    alpha : float
        P(any false alarm of the e-process, ever) <= alpha; level of the confidence sequences.
    scales : tuple of int
        Bin counts of the binned families of the e-process.
    n_bins : int
        B of the binned ECE whose upper bound is reported.
    margin : float or None
        ``ece_below`` margin delta: "ECE < delta shown" when the bound is below it.
    arl : float
        In-control average run length (in looks) of the change detector's and the RA-CUSUM's alarms.
    forget : float
        Discount per look of the detector's bets (they learn from recent looks only).
    odds_ratio : float
        R_A of the risk-adjusted CUSUM (the upper chart tests R_A, the lower 1 / R_A).
    seed : int
        Recorded for the state format; the RA-CUSUM's thresholds are computed, not simulated, and use no seed.
    model : str or None
        The model's identifier; a state file of another model is refused.
    """

    formula: str | None
    n_classes: int | None
    alpha: float
    scales: tuple
    n_bins: int
    margin: float | None
    arl: float
    forget: float
    odds_ratio: float
    seed: int
    model: str | None

    def record(self) -> dict:
        """The settings as a JSON-ready dict."""
        out = asdict(self)
        out["scales"] = list(self.scales)
        return out

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the settings (identifies the model, target and monitoring plan)."""
        text = json.dumps(self.record(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_record(cls, record: dict) -> "MonitorSettings":
        return cls(**{**record, "scales": tuple(record["scales"])})


def _size(settings: MonitorSettings) -> int:
    return sq.n_cells(settings.scales)


def new_state(settings: MonitorSettings) -> dict:
    """The state before the first batch."""
    size, nb = _size(settings), settings.n_bins + 1
    return {
        "looks": 0, "n_total": 0, "last_time": None, "mode": None, "classes": None,
        "log_wealth": np.zeros(len(settings.scales) + 1), "log_max": 0.0, "alarm_look": None,
        "sums": np.zeros((2, size)), "dsums": np.zeros((2, size)),
        "cs_moments": np.zeros(3), "citl_coef": np.zeros(5), "oe_coef": np.zeros(5),
        "bin_moments": np.zeros((nb, 3)), "bin_coef": np.zeros((nb, 5)),
        "ece_below_look": None,
        "log_sr": -math.inf, "log_cusum": -math.inf, "cusum_start": 0, "detector_look": None,
        "ra_h": None, "ra_arl": None, "ra_s": np.zeros(2), "ra_look": None,
        "raw": {"sum_y": 0.0, "sum_p": 0.0},
    }


# ----------------------------------------------------------------------------- step 1: a batch's sums
def batch_stats(settings: MonitorSettings, state: dict, p: np.ndarray, y: np.ndarray) -> dict:
    """Additive statistics of a batch (or of a part of one) given the state before it.

    Every entry is a sum over rows: parts of one batch give statistics that
    :func:`add_stats` adds.  ``p_ref`` (the first batch's predictions, for the
    RA-CUSUM's thresholds) is kept only while no threshold is set.
    """
    r = y - p
    cell, g = sq.features(p, settings.scales)
    bin_idx = edge_floor(p * settings.n_bins)
    nb = settings.n_bins + 1
    ra = np.stack([sq.ra_scores(p, y, settings.odds_ratio), sq.ra_scores(p, y, 1.0 / settings.odds_ratio)])
    stats = {
        "n": float(p.size),
        "growth": sq.log_growth(cell, g, r, sq.grapa_bets(state["sums"])),
        "dgrowth": sq.log_growth(cell, g, r, sq.grapa_bets(state["dsums"])),
        "cells": sq.cell_sums(cell, g, r, _size(settings)),
        "citl": sq.cs_sums(r, 1.0), "oe": sq.cs_sums(y, p),
        "bins": np.column_stack([np.bincount(bin_idx, w, nb) for w in (r, np.ones_like(r), r * r, r, np.ones_like(r))]),
        "ra": ra.sum(axis=1), "sum_y": float(y.sum()), "sum_p": float(p.sum()),
        "p_ref": p.copy() if state["ra_h"] is None else None,
    }
    return stats


def add_stats(a: dict, b: dict) -> dict:
    """The statistics of two parts of one batch together."""
    out = {}
    for key, value in a.items():
        if key == "p_ref":
            out[key] = None if value is None else np.concatenate([value, b[key]])
        else:
            out[key] = value + b[key]
    return out


# ----------------------------------------------------------------------------- step 2: closing a look
def _eprocess(settings, state, stats, look, new) -> dict:
    new["log_wealth"], log_e = sq.eprocess_step(state["log_wealth"], stats["growth"])
    new["log_max"] = max(state["log_max"], log_e)
    alarm = new["log_max"] >= math.log(1.0 / settings.alpha)
    new["alarm_look"] = state["alarm_look"] if state["alarm_look"] is not None else (look if alarm else None)
    new["sums"] = state["sums"] + stats["cells"]
    return {"e_value": math.exp(min(log_e, 700.0)), "p_value": min(1.0, math.exp(-new["log_max"])), "alarm": alarm}


def _accumulate(coef, lam, sums):
    """Coefficients of the Fan-bound capital after one batch bet with ``lam`` (vectorised over bins)."""
    lam = np.asarray(lam, dtype=np.float64)[..., None]
    return coef + np.concatenate([lam * sums[..., :2], sq.psi(lam) * sums[..., 2:]], axis=-1)


def _sequences(settings, state, stats, new) -> dict:
    alpha = settings.alpha
    m = state["cs_moments"]  # rows, sum u, sum u^2 of u = (y - p) / 2 over past batches
    lam = sq.cs_bet(m[0], m[1], m[2], stats["n"], alpha)
    new["cs_moments"] = m + np.array([stats["n"], stats["citl"][0] / 2, stats["citl"][2] / 4])
    new["citl_coef"] = _accumulate(state["citl_coef"], lam, stats["citl"])
    new["oe_coef"] = _accumulate(state["oe_coef"], lam, stats["oe"])
    citl = sq.cs_interval(new["citl_coef"], alpha, "citl", -1.0, 1.0)
    oe = sq.cs_interval(new["oe_coef"], alpha, "oe", 0.0, OE_MAX)
    raw = {"sum_y": state["raw"]["sum_y"] + stats["sum_y"], "sum_p": state["raw"]["sum_p"] + stats["sum_p"]}
    new["raw"] = raw
    n_total = state["n_total"] + stats["n"]
    return {"citl": (raw["sum_y"] - raw["sum_p"]) / n_total, "citl_lower": float(citl[0]),
            "citl_upper": float(citl[1]), "oe": raw["sum_y"] / raw["sum_p"] if raw["sum_p"] > 0 else math.nan,
            "oe_lower": float(oe[0]), "oe_upper": float(oe[1])}


def _ece_bound(settings, state, stats, look, new) -> dict:
    nb = settings.n_bins + 1
    bins, m = stats["bins"], state["bin_moments"]
    lam = sq.cs_bet(m[:, 0], m[:, 1], m[:, 2], bins[:, 1], settings.alpha / nb)
    new["bin_moments"] = m + np.column_stack([bins[:, 1], bins[:, 0] / 2, bins[:, 2] / 4])
    new["bin_coef"] = _accumulate(state["bin_coef"], lam, bins)
    lo0, hi0 = sq.bin_bracket(settings.n_bins)
    lo, hi = sq.cs_interval(new["bin_coef"], settings.alpha / nb, "citl", lo0, hi0)
    bound = sq.ece_upper(new["bin_moments"][:, 0], lo, hi)
    below = None if settings.margin is None else bool(bound < settings.margin)
    new["ece_below_look"] = state["ece_below_look"] if state["ece_below_look"] is not None else (
        look if below else None)
    return {"ece_upper": bound, "ece_below": below}


def _detector(settings, state, stats, look, new) -> dict:
    log_e = float(sq.log_mean_exp(stats["dgrowth"]))
    new["log_sr"], new["log_cusum"], new["cusum_start"] = sq.detector_step(
        state["log_sr"], state["log_cusum"], state["cusum_start"], log_e, look)
    new["dsums"] = settings.forget * state["dsums"] + stats["cells"]
    alarm = new["log_sr"] >= math.log(settings.arl)
    new["detector_look"] = state["detector_look"] if state["detector_look"] is not None else (
        look if alarm else None)
    return {"detector": math.exp(min(new["log_sr"], 700.0)), "detector_cusum": math.exp(min(new["log_cusum"], 700.0)),
            "detector_alarm": alarm, "change_look": new["cusum_start"]}


def _ra_cusum(settings, state, stats, look, new) -> dict:
    if state["ra_h"] is None:  # thresholds computed from the first batch's predictions, order-free
        p_ref = np.sort(stats["p_ref"])
        found = [sq.ra_threshold(p_ref, r, 2.0 * settings.arl) for r in (settings.odds_ratio, 1.0 / settings.odds_ratio)]
        new["ra_h"], new["ra_arl"] = np.array([f[0] for f in found]), np.array([f[1] for f in found])
    else:
        new["ra_h"], new["ra_arl"] = state["ra_h"], state["ra_arl"]
    new["ra_s"] = np.maximum(0.0, state["ra_s"] + stats["ra"])
    alarm = bool(np.any(new["ra_s"] >= new["ra_h"]))
    new["ra_look"] = state["ra_look"] if state["ra_look"] is not None else (look if alarm else None)
    return {"ra_up": float(new["ra_s"][0]), "ra_down": float(new["ra_s"][1]), "ra_alarm": alarm}


def close_look(settings: MonitorSettings, state: dict, stats: dict, time) -> tuple[dict, dict]:
    """The state after a batch and the batch's record (:data:`LOOK_FIELDS`), from the state before it and
    the batch's summed statistics."""
    look = state["looks"] + 1
    new = dict(state)
    record = {"look": look, "time": time, "n": int(stats["n"]), "n_total": int(state["n_total"] + stats["n"])}
    record.update(_eprocess(settings, state, stats, look, new))
    record.update(_sequences(settings, state, stats, new))
    record.update(_ece_bound(settings, state, stats, look, new))
    record.update(_detector(settings, state, stats, look, new))
    record.update(_ra_cusum(settings, state, stats, look, new))
    new.update(looks=look, n_total=record["n_total"], last_time=time)
    return new, {k: record[k] for k in LOOK_FIELDS}


# ----------------------------------------------------------------------------- JSON
def _encode(value):
    if isinstance(value, np.ndarray):
        return {"array": [_encode(v) for v in value.tolist()], "shape": list(value.shape)} if value.ndim > 1 \
            else {"array": [_encode(v) for v in value.tolist()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, dict):
        return {"dict": {k: _encode(v) for k, v in value.items()}}
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    return value


def _decode(value):
    if isinstance(value, dict):
        if "array" in value:
            arr = np.array([_decode(v) for v in value["array"]], dtype=np.float64)
            return arr.reshape(value["shape"]) if "shape" in value else arr
        if "float" in value:
            return float(value["float"])
        if "dict" in value:
            return {k: _decode(v) for k, v in value["dict"].items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def state_to_json(state: dict) -> dict:
    """The state as JSON values (arrays as ``{"array": [...]}``, infinities as ``{"float": "-inf"}``)."""
    return {k: _encode(v) for k, v in state.items()}


def state_from_json(record: dict) -> dict:
    """The inverse of :func:`state_to_json`."""
    return {k: _decode(v) for k, v in record.items()}
