"""Fields shared by the result types of the tests of calibration.

:class:`TestOfCalibration` is the keyword-only base of
:class:`~calibtest.TCalResult` and :class:`~calibtest.CalibrationTestResult`;
it sits below :mod:`calibtest.results` so that the tests, and the evidence
built from them, need not import the interval's result module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from calibtest._format import Call
from calibtest.summary import ResultDisplay

__all__ = ["TestOfCalibration"]


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class TestOfCalibration(ResultDisplay):
    """Fields shared by the results of the tests of calibration (``tcal_test``, ``calib_test``).

    Keyword-only, so a subclass lists its own fields first; unpacks as
    ``statistic, pvalue`` (the subclass defines both).

    Attributes
    ----------
    n, k, n_classes, mode : int, int, int or None, str
        The calibration target, as in :class:`CalibrationResult`.
    formula, y_name, prob_names, n_dropped, call_record
        Bookkeeping (``call`` renders the call as text).
    """

    n: int
    k: int
    n_classes: int | None
    mode: str
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    call_record: Call | None = field(default=None, repr=False)

    def __iter__(self):
        return iter((self.statistic, self.pvalue))
