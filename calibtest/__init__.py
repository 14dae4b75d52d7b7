"""calibtest: confidence intervals and tests for the l2 expected calibration error.

Implements Sun, Chaudhari, Barnett & Dobriban, "A Confidence Interval for the
l2 Expected Calibration Error" (arXiv:2408.08998): the debiased binned
estimator, its calibrated and miscalibrated asymptotic regimes, and the
adjusted interval that respects ECE >= 0.

>>> import calibtest as ct
>>> res = ct.calib_ci("y ~ p", data=df)            # doctest: +SKIP
>>> print(res.summary())                           # doctest: +SKIP

The public surface is this module; the layers below it are
``calibtest.core`` (numpy/scipy engines), ``calibtest.backends`` (files,
Dask frames, the streaming accumulator), ``calibtest.reporting`` (HTML/PDF
reports and plots) and ``calibtest.simulation`` (the paper's settings and
simulation study).
"""
from calibtest import datasets, simulation
from calibtest._format import package_version
from calibtest.backends.accumulator import BinAccumulator
from calibtest.calibration_test import CalibrationTestResult, calib_test
from calibtest.compare import ComparisonResult, PairwiseComparisonResult, calib_compare
from calibtest.core.binning import auto_n_bins
from calibtest.core.binstats import BinStats
from calibtest.core.null import sigma0_sq
from calibtest.datasets import load_demo
from calibtest.ece import calib_ci
from calibtest.evidence import EvidenceResult, evidence
from calibtest.flexible import FlexibleCalibration, flexible_calibration
from calibtest.grouping import GroupedResult
from calibtest.groups import GroupedCalibrationResult
from calibtest.hosmer_lemeshow import HosmerLemeshowResult, hosmer_lemeshow
from calibtest.planning import PowerResult, SampleSizeResult, calib_power, calib_sample_size
from calibtest.plan import AnalysisPlan, plan
from calibtest.reporting import report
from calibtest.results import CalibrationResult, ConfidenceInterval
from calibtest.tcal import TCalResult, tcal_test
from calibtest.valprob import ValProbResult, val_prob

__version__ = package_version()

__all__ = [
    "calib_ci",
    "calib_test",
    "calib_compare",
    "evidence",
    "tcal_test",
    "val_prob",
    "flexible_calibration",
    "hosmer_lemeshow",
    "calib_power",
    "calib_sample_size",
    "report",
    "plan",
    "AnalysisPlan",
    "BinAccumulator",
    "CalibrationResult",
    "GroupedResult",
    "GroupedCalibrationResult",
    "ConfidenceInterval",
    "ComparisonResult",
    "PairwiseComparisonResult",
    "TCalResult",
    "EvidenceResult",
    "CalibrationTestResult",
    "HosmerLemeshowResult",
    "ValProbResult",
    "FlexibleCalibration",
    "PowerResult",
    "SampleSizeResult",
    "BinStats",
    "auto_n_bins",
    "sigma0_sq",
    "load_demo",
    "datasets",
    "simulation",
    "__version__",
]
