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

The public names are imported on first use (PEP 562): ``import calibtest``
loads neither numpy nor pandas, so ``calibtest --version`` and ``--help`` start
quickly; ``calibtest.calib_ci`` or ``from calibtest import calib_ci`` imports
the module that defines it.
"""
import importlib
import sys
import types
from typing import TYPE_CHECKING

#: Each public name and the module that defines it (imported when the name is first used).
_EXPORTS = {
    "calib_ci": "calibtest.ece",
    "calib_test": "calibtest.calibration_test",
    "calib_compare": "calibtest.compare",
    "evidence": "calibtest.evidence",
    "tcal_test": "calibtest.tcal",
    "val_prob": "calibtest.valprob",
    "flexible_calibration": "calibtest.flexible",
    "hosmer_lemeshow": "calibtest.hosmer_lemeshow",
    "calib_power": "calibtest.planning",
    "calib_sample_size": "calibtest.planning",
    "report": "calibtest.reporting.html",
    "plan": "calibtest.plan",
    "AnalysisPlan": "calibtest.plan",
    "BinAccumulator": "calibtest.backends.accumulator",
    "CalibrationResult": "calibtest.results",
    "GroupedCalibrationResult": "calibtest.groups",
    "ConfidenceInterval": "calibtest.results",
    "ComparisonResult": "calibtest.compare",
    "PairwiseComparisonResult": "calibtest.compare",
    "TCalResult": "calibtest.tcal",
    "EvidenceResult": "calibtest.evidence",
    "CalibrationTestResult": "calibtest.calibration_test",
    "HosmerLemeshowResult": "calibtest.hosmer_lemeshow",
    "ValProbResult": "calibtest.valprob",
    "FlexibleCalibration": "calibtest.flexible",
    "PowerResult": "calibtest.planning",
    "SampleSizeResult": "calibtest.planning",
    "BinStats": "calibtest.core.binstats",
    "auto_n_bins": "calibtest.core.binning",
    "sigma0_sq": "calibtest.core.null",
    "load_demo": "calibtest.datasets",
}

#: Public subpackages and modules reached as attributes (``calibtest.simulation``).
_SUBMODULES = ("datasets", "simulation")

#: Public functions that share their name with the submodule defining them (``calibtest.evidence``):
#: the function, not the module, is the package attribute.
_SHADOWING = frozenset(name for name, module in _EXPORTS.items() if module == f"{__name__}.{name}")

__all__ = [*_EXPORTS, *_SUBMODULES, "__version__"]

if TYPE_CHECKING:  # what static tools read; tests/test_startup.py checks that it matches _EXPORTS
    from calibtest import datasets, simulation
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
    from calibtest.groups import GroupedCalibrationResult
    from calibtest.hosmer_lemeshow import HosmerLemeshowResult, hosmer_lemeshow
    from calibtest.planning import PowerResult, SampleSizeResult, calib_power, calib_sample_size
    from calibtest.plan import AnalysisPlan, plan
    from calibtest.reporting.html import report
    from calibtest.results import CalibrationResult, ConfidenceInterval
    from calibtest.tcal import TCalResult, tcal_test
    from calibtest.valprob import ValProbResult, val_prob


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


class _Package(types.ModuleType):
    """The calibtest package: importing ``calibtest.evidence`` (the module) keeps ``calibtest.evidence`` the function.

    The import system binds a newly imported submodule as an attribute of its
    package; for the names in ``_SHADOWING`` that binding is skipped, so the
    attribute is the public function whichever import came first.
    """

    def __setattr__(self, name: str, value) -> None:
        if (name in _SHADOWING and isinstance(value, types.ModuleType)
                and value.__name__ == f"{__name__}.{name}"):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
