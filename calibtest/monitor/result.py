"""The numbers of a calibration monitor at one moment: a frozen :class:`MonitorResult`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from calibtest.display.format import fmt
from calibtest.display.summary import CalibSummary, ResultDisplay

__all__ = ["MonitorResult"]


@dataclass(frozen=True, repr=False)
class MonitorResult(ResultDisplay):
    """Everything a :class:`~calibtest.CalibrationMonitor` reports, per look and now.

    Attributes
    ----------
    looks : pandas.DataFrame
        One row per look kept (``history``), columns
        :data:`calibtest.monitor.state.LOOK_FIELDS`: ``e_value`` (the e-process
        E_t), ``p_value`` (anytime-valid, 1 / max_{s<=t} E_s), ``alarm``
        (E_s >= 1/alpha for some s <= t), the running confidence sequences of
        CITL (``citl_lower``, ``citl_upper``) and O/E, ``ece_upper`` (upper
        bound of the binned ECE at ``n_bins``), ``ece_below`` (bound < margin),
        ``detector`` (Shiryaev-Roberts e-detector M_t), ``detector_cusum``
        (e-CUSUM), ``detector_alarm`` (M_t >= arl), ``change_look`` (estimated
        change time: the e-CUSUM's argmax start), ``ra_up``/``ra_down``
        (risk-adjusted CUSUMs) and ``ra_alarm``.
    settings : dict
        The monitor's settings (:class:`calibtest.monitor.state.MonitorSettings`).
    fingerprint : str
        SHA-256 of the settings.
    mode : str or None
        ``binary`` or ``top1`` (None before the first batch).
    n_looks, n_total : int
        Looks (batches) and rows so far.
    alarm_look, detector_look, ra_look, ece_below_look : int or None
        First look of each alarm (and of "ECE < margin shown").
    change_look : int or None
        Estimated change time (a look) at the detector's first alarm.
    ra_thresholds : tuple or None
        (h_up, h_down) of the RA-CUSUMs, computed for an in-control ARL of 2 * arl looks per chart.
    ra_arls : tuple or None
        The computed in-control ARLs at those thresholds (in looks, per one-sided chart).
    """

    looks: pd.DataFrame
    settings: dict
    fingerprint: str
    mode: str | None
    n_looks: int
    n_total: int
    alarm_look: int | None
    detector_look: int | None
    change_look: int | None
    ra_look: int | None
    ece_below_look: int | None
    ra_thresholds: tuple | None
    ra_arls: tuple | None
    version: str = field(default="")

    #: What :func:`calibtest.report` writes for it: the monitoring report.
    report_kind = "monitor"

    # ------------------------------------------------------------------ the latest look
    def _last(self, name: str):
        return None if self.looks.empty else self.looks[name].iloc[-1]

    @property
    def alpha(self) -> float:
        return self.settings["alpha"]

    @property
    def e_value(self) -> float | None:
        """The e-process at the last look."""
        return self._last("e_value")

    @property
    def p_value(self) -> float | None:
        """The anytime-valid p-value at the last look."""
        return self._last("p_value")

    @property
    def alarm(self) -> bool:
        """Whether the e-process has crossed 1/alpha (P(this ever happens | calibrated) <= alpha)."""
        return self.alarm_look is not None

    @property
    def detector_alarm(self) -> bool:
        """Whether the change detector is in alarm at the last look."""
        return bool(self._last("detector_alarm")) if self.n_looks else False

    def time_of(self, look: int | None):
        """The time stamp of a look (its number when the batches have none; None for None or a look dropped)."""
        if look is None:
            return None
        row = self.looks[self.looks["look"] == look]
        if row.empty:
            return None
        value = row["time"].iloc[0]
        return look if value is None or (isinstance(value, float) and math.isnan(value)) else value

    # ------------------------------------------------------------------ display
    def _dict(self) -> dict:
        out = {"n_looks": self.n_looks, "n_total": self.n_total, "mode": self.mode, "fingerprint": self.fingerprint,
               "alarm_look": self.alarm_look, "detector_look": self.detector_look, "change_look": self.change_look,
               "ra_look": self.ra_look, "ece_below_look": self.ece_below_look,
               "ra_thresholds": list(self.ra_thresholds) if self.ra_thresholds else None,
               "ra_arls": list(self.ra_arls) if self.ra_arls else None, "settings": self.settings,
               "version": self.version}
        out["looks"] = self.looks.astype(object).where(self.looks.notna(), None).to_dict(orient="list")
        return out

    def _repr_parts(self) -> list[str]:
        return [f"looks={self.n_looks}", f"n={self.n_total}", f"e_value={fmt(self.e_value, 4)}",
                f"alarm={self.alarm}", f"detector_alarm={self.detector_alarm}"]

    def _summary(self, alpha=None) -> CalibSummary:
        s = CalibSummary()
        s.title = "Calibration monitor"
        st = self.settings
        s.add_settings({"Model:": st["formula"] or "y=, probs=", "Target:": self.mode or "(no batch yet)",
                        "Looks:": self.n_looks, "Rows:": self.n_total, "alpha:": st["alpha"],
                        "Detector ARL >=:": fmt(st["arl"]), "ECE bins:": st["n_bins"],
                        "Margin:": "none" if st["margin"] is None else fmt(st["margin"])})
        if self.n_looks:
            s.add_table(self._status_table(), formats={"value": 5, "threshold": 5, "first look": None})
        s.add_notes(self._notes())
        return s

    def _status_table(self) -> pd.DataFrame:
        last = self.looks.iloc[-1]
        st = self.settings
        h = self.ra_thresholds or (math.nan, math.nan)
        rows = {
            "E-process E_t": (last["e_value"], 1 / st["alpha"], self.alarm_look),
            "Anytime p-value": (last["p_value"], st["alpha"], self.alarm_look),
            "CITL lower": (last["citl_lower"], None, None), "CITL upper": (last["citl_upper"], None, None),
            "O/E lower": (last["oe_lower"], None, None), "O/E upper": (last["oe_upper"], None, None),
            f"ECE (B={st['n_bins']}) upper": (last["ece_upper"], st["margin"], self.ece_below_look),
            "Detector M_t": (last["detector"], st["arl"], self.detector_look),
            "RA-CUSUM up": (last["ra_up"], h[0], self.ra_look), "RA-CUSUM down": (last["ra_down"], h[1], self.ra_look),
        }
        return pd.DataFrame([(v, t, "" if f is None else str(f)) for v, t, f in rows.values()],
                            index=list(rows), columns=["value", "threshold", "first look"], dtype=object)

    def _notes(self) -> list[str]:
        st = self.settings
        notes = [f"E-process: P(any alarm, ever | calibrated) <= alpha = {st['alpha']:g} (Ville's inequality), "
                 "however often one looks; anytime p-value = 1 / running max of E_t."]
        if self.alarm:
            notes.append(f"ALARM: the e-process crossed 1/alpha at look {self.alarm_look} "
                         f"(time {self.time_of(self.alarm_look)}): evidence of miscalibration.")
        if self.detector_look is not None:
            notes.append(f"CHANGE DETECTED at look {self.detector_look}; estimated change time: look "
                         f"{self.change_look} (time {self.time_of(self.change_look)}).")
        notes.append("Confidence sequences (CITL, O/E, per-bin means of the ECE bound) hold at every look "
                     f"simultaneously with probability >= {1 - st['alpha']:g} when the rows are i.i.d.; the ECE "
                     "bound is for the binned ECE at B (a lower bound on the true l2-ECE).")
        notes.append(f"Detector and RA-CUSUM: in-control average run length >= {fmt(st['arl'])} looks "
                     "(RA-CUSUM: computed for batches whose predictions are drawn from the first batch's).")
        return notes

    def report(self, path, **kwargs):
        """Write the monitoring report (HTML, or PDF with WeasyPrint): plan, looks, alarms, guarantee.

        The keywords (``title``, ``purpose``, ``command``, ``metadata``, ``templates``) are those of
        :func:`calibtest.reporting.monitor_report.monitor_report`.

        Returns
        -------
        pathlib.Path
            The file written.
        """
        from calibtest.reporting.monitor_report import monitor_report
        return monitor_report(self, path, **kwargs)

    def plot(self, ax=None):
        """The statistics over time against their thresholds, alarms and the estimated change time marked.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from calibtest.monitor.plot import plot_monitor
        return plot_monitor(self, ax=ax)
