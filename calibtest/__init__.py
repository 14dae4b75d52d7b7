"""calibtest: confidence intervals and tests for the l2 expected calibration error.

Implements Sun, Chaudhari, Barnett & Dobriban, "A Confidence Interval for the
l2 Expected Calibration Error" (debiased binned estimator, its calibrated and
miscalibrated asymptotic regimes, and the adjusted interval that respects
ECE >= 0).

>>> import calibtest as ct
>>> res = ct.calib_ci("y ~ p", data=df)            # doctest: +SKIP
>>> print(res.summary())                           # doctest: +SKIP
"""
from importlib.metadata import PackageNotFoundError, version as _version

from . import datasets, simulation
from .api import calib_ci
from .binning import auto_n_bins
from .compare import calib_compare
from .compare_results import ComparisonResult, PairwiseComparisonResult
from .datasets import load_demo
from .hosmer_lemeshow import HosmerLemeshowResult
from .null import sigma0_sq
from .reporting import report
from .results import CalibrationResult, ConfidenceInterval
from .stats import BinStats
from .streaming import BinAccumulator
from .tcal import TCalResult, tcal_test

try:
    __version__ = _version("calibtest")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "calib_ci",
    "calib_compare",
    "ComparisonResult",
    "PairwiseComparisonResult",
    "load_demo",
    "datasets",
    "simulation",
    "CalibrationResult",
    "ConfidenceInterval",
    "HosmerLemeshowResult",
    "BinStats",
    "BinAccumulator",
    "auto_n_bins",
    "sigma0_sq",
    "report",
    "tcal_test",
    "TCalResult",
    "__version__",
]
