"""Type stub of the calibtest package: the public names, imported on first use at run time (see __init__.py)."""
from calibtest import datasets, simulation
from calibtest.acceptance import (EquivalenceTestResult, MarginTestResult, citl_test, margin_test, oe_test,
                                  slope_test)
from calibtest.backends.accumulator import BinAccumulator
from calibtest.backends.calib_test_stream import CalibTestAccumulator
from calibtest.calibration_test import CalibrationTestResult
from calibtest.compare import ComparisonResult, PairwiseComparisonResult, calib_compare
from calibtest.core.binning import auto_n_bins
from calibtest.core.binstats import BinStats
from calibtest.core.null import sigma0_sq
from calibtest.datasets import load_demo
from calibtest.ece import calib_ci
from calibtest.evidence_suite import calib_test, evidence
from calibtest.evidence_table import EvidenceResult
from calibtest.flexible import FlexibleCalibration, flexible_calibration
from calibtest.grouping import GroupedResult
from calibtest.groups import GroupedCalibrationResult
from calibtest.meta_analysis import MetaAnalysisResult
from calibtest.goodness_of_fit import HosmerLemeshowResult, hosmer_lemeshow
from calibtest.sample_size import PowerResult, SampleSizeResult, calib_power, calib_sample_size
from calibtest.analysis_plan import AnalysisPlan, plan
from calibtest.reporting.html import report
from calibtest.results import CalibrationResult, ConfidenceInterval
from calibtest.survival_evidence import SurvivalEvidence, survival_calibration
from calibtest.tcal import TCalResult, tcal_test
from calibtest.valprob import ValProbResult, val_prob

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
    "datasets",
    "simulation",
    "__version__",
]
