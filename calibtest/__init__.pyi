"""Type stub of the calibtest package: the public names, imported on first use at run time (see __init__.py)."""
from calibtest import datasets, simulation
from calibtest.checks.acceptance import (EquivalenceTestResult, MarginTestResult, citl_test, margin_test, oe_test,
                                  slope_test)
from calibtest.streams.accumulator import BinAccumulator
from calibtest.monitor.monitor import CalibrationMonitor
from calibtest.monitor.result import MonitorResult
from calibtest.streams.multiscale import CalibTestAccumulator
from calibtest.checks.multiscale import CalibrationTestResult
from calibtest.api.calib_compare import ComparisonResult, PairwiseComparisonResult, calib_compare
from calibtest.core.binning import auto_n_bins
from calibtest.core.binstats import BinStats
from calibtest.core.null import sigma0_sq
from calibtest.datasets import load_demo
from calibtest.api.calib_ci import calib_ci
from calibtest.api.calib_test import calib_test, evidence
from calibtest.checks.evidence_table import EvidenceResult
from calibtest.checks.flexible_calibration import FlexibleCalibration, flexible_calibration
from calibtest.ece.group_engine import GroupedResult
from calibtest.ece.grouped_interval import GroupedCalibrationResult
from calibtest.ece.meta_analysis import MetaAnalysisResult
from calibtest.checks.hosmer_lemeshow import HosmerLemeshowResult, hosmer_lemeshow
from calibtest.api.sample_size import PowerResult, SampleSizeResult, calib_power, calib_sample_size
from calibtest.inputs.plan import AnalysisPlan, plan
from calibtest.reporting.html import report
from calibtest.ece.result import CalibrationResult, ConfidenceInterval
from calibtest.checks.survival_calibration import SurvivalEvidence, survival_calibration
from calibtest.api.tcal_test import TCalResult, tcal_test
from calibtest.checks.val_prob import ValProbResult, val_prob

__version__: str

__all__ = [
    "calib_ci",
    "calib_test",
    "calib_compare",
    "evidence",
    "tcal_test",
    "val_prob",
    "survival_calibration",
    "flexible_calibration",
    "hosmer_lemeshow",
    "calib_power",
    "calib_sample_size",
    "report",
    "plan",
    "AnalysisPlan",
    "BinAccumulator",
    "CalibTestAccumulator",
    "CalibrationResult",
    "GroupedCalibrationResult",
    "GroupedResult",
    "MetaAnalysisResult",
    "ConfidenceInterval",
    "ComparisonResult",
    "PairwiseComparisonResult",
    "TCalResult",
    "EvidenceResult",
    "CalibrationTestResult",
    "HosmerLemeshowResult",
    "ValProbResult",
    "SurvivalEvidence",
    "FlexibleCalibration",
    "PowerResult",
    "SampleSizeResult",
    "BinStats",
    "auto_n_bins",
    "sigma0_sq",
    "load_demo",
    "margin_test",
    "citl_test",
    "slope_test",
    "oe_test",
    "MarginTestResult",
    "EquivalenceTestResult",
    "CalibrationMonitor",
    "MonitorResult",
    "datasets",
    "simulation",
    "__version__",
]
