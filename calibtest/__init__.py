"""calibtest: confidence intervals and tests for the l2 expected calibration error.

Implements Sun, Chaudhari, Barnett & Dobriban, "A Confidence Interval for the
l2 Expected Calibration Error" (arXiv:2408.08998): the debiased binned
estimator, its calibrated and miscalibrated asymptotic regimes, and the
adjusted interval that respects ECE >= 0.

>>> import calibtest as ct
>>> res = ct.calib_ci("y ~ p", data=ct.load_demo())
>>> round(res.ece, 4), res.conclusion()[0]
(0.0142, 'no evidence')

``print(res.summary())`` prints the evidence table, the conclusion, the
interval and the notes.

The public surface is this module; the layers below it are
``calibtest.core`` (numpy/scipy engines), ``calibtest.streams`` (files,
Dask frames, the streaming accumulator), ``calibtest.reporting`` (HTML/PDF
reports and plots) and ``calibtest.simulation`` (the paper's settings and
simulation study).

The public names are imported on first use (PEP 562): ``import calibtest``
loads neither numpy nor pandas, so ``calibtest --version`` and ``--help`` start
quickly; ``calibtest.calib_ci`` or ``from calibtest import calib_ci`` imports
the module that defines it.  Static tools (type checkers, IDEs) read the
names from the stub ``__init__.pyi`` (the lazy-loading pattern of
scientific Python's SPEC 1); ``tests/test_startup.py`` checks that it lists
exactly the names here.
"""
import importlib

#: Each public name and the module that defines it (imported when the name is first used).
_EXPORTS = {
    "calib_ci": "calibtest.api.calib_ci",
    "calib_test": "calibtest.api.calib_test",
    "calib_compare": "calibtest.api.calib_compare",
    "evidence": "calibtest.api.calib_test",
    "tcal_test": "calibtest.api.tcal_test",
    "val_prob": "calibtest.checks.val_prob",
    "survival_calibration": "calibtest.checks.survival_calibration",
    "flexible_calibration": "calibtest.checks.flexible_calibration",
    "hosmer_lemeshow": "calibtest.checks.hosmer_lemeshow",
    "calib_power": "calibtest.api.sample_size",
    "calib_sample_size": "calibtest.api.sample_size",
    "report": "calibtest.reporting.html",
    "plan": "calibtest.inputs.plan",
    "AnalysisPlan": "calibtest.inputs.plan",
    "BinAccumulator": "calibtest.streams.accumulator",
    "CalibTestAccumulator": "calibtest.streams.multiscale",
    "CalibrationResult": "calibtest.ece.result",
    "GroupedCalibrationResult": "calibtest.ece.grouped_interval",
    "GroupedResult": "calibtest.ece.group_engine",
    "MetaAnalysisResult": "calibtest.ece.meta_analysis",
    "ConfidenceInterval": "calibtest.ece.result",
    "ComparisonResult": "calibtest.api.calib_compare",
    "PairwiseComparisonResult": "calibtest.api.calib_compare",
    "TCalResult": "calibtest.api.tcal_test",
    "EvidenceResult": "calibtest.checks.evidence_table",
    "CalibrationTestResult": "calibtest.checks.multiscale",
    "HosmerLemeshowResult": "calibtest.checks.hosmer_lemeshow",
    "ValProbResult": "calibtest.checks.val_prob",
    "SurvivalEvidence": "calibtest.checks.survival_calibration",
    "FlexibleCalibration": "calibtest.checks.flexible_calibration",
    "PowerResult": "calibtest.api.sample_size",
    "SampleSizeResult": "calibtest.api.sample_size",
    "BinStats": "calibtest.core.binstats",
    "auto_n_bins": "calibtest.core.binning",
    "sigma0_sq": "calibtest.core.null",
    "load_demo": "calibtest.datasets",
    "margin_test": "calibtest.checks.acceptance",
    "citl_test": "calibtest.checks.acceptance",
    "slope_test": "calibtest.checks.acceptance",
    "oe_test": "calibtest.checks.acceptance",
    "MarginTestResult": "calibtest.checks.acceptance",
    "EquivalenceTestResult": "calibtest.checks.acceptance",
    "CalibrationMonitor": "calibtest.monitor.monitor",
    "MonitorResult": "calibtest.monitor.result",
}

#: Public subpackages and modules reached as attributes (``calibtest.simulation``).
_SUBMODULES = ("datasets", "simulation")

__all__ = [*_EXPORTS, *_SUBMODULES, "__version__"]



def __getattr__(name: str):
    """Import a public name on first use and keep it (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif name == "__version__":
        from calibtest._version import package_version
        value = package_version()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The loaded attributes and every public name, loaded or not."""
    return sorted(set(globals()) | set(__all__))
