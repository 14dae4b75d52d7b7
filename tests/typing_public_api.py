"""The public functions as a user calls them, for mypy (``[tool.mypy]`` in pyproject.toml): not a pytest file.

mypy reads ``calibtest``'s public names from the stub ``__init__.pyi`` and checks that each call below is
accepted by the function's signature and returns the annotated type.  A changed parameter type, a removed
keyword or a wrong return annotation makes ``python -m mypy`` fail in CI.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

import calibtest as ct

if TYPE_CHECKING:
    from typing_extensions import assert_type


def _public_api(df: pd.DataFrame, probs: np.ndarray, labels: np.ndarray, folder: Path) -> None:
    """Calls of every public function with its annotated result type."""
    res = ct.calib_ci("y ~ p", data=df, alpha=0.1, n_bins="auto", null="conditional")
    assert_type(res, "ct.CalibrationResult | ct.GroupedCalibrationResult")
    assert_type(ct.calib_ci(y=labels, probs=probs, k=2), "ct.CalibrationResult | ct.GroupedCalibrationResult")
    assert_type(ct.calib_test("y ~ p", data=df, rng=1), "ct.CalibrationTestResult | ct.GroupedResult")
    assert_type(ct.evidence("y ~ p", data=df, rng=1), "ct.EvidenceResult | ct.GroupedResult")
    assert_type(ct.tcal_test("y ~ p", data=df, rng=1), "ct.TCalResult | ct.GroupedResult")
    assert_type(ct.calib_compare("y ~ p", "y ~ q", data=df),
                "ct.ComparisonResult | ct.PairwiseComparisonResult")
    assert_type(ct.val_prob("y ~ p", data=df), ct.ValProbResult)
    assert_type(ct.flexible_calibration(df["p"], df["y"], alpha=0.05), ct.FlexibleCalibration)
    assert_type(ct.hosmer_lemeshow("y ~ p", data=df, groups=10), ct.HosmerLemeshowResult)
    assert_type(ct.calib_power([500, 1000], probs=probs, slope=0.8), ct.PowerResult)
    assert_type(ct.calib_sample_size(probs=probs, slope=0.8, power=0.8), ct.SampleSizeResult)
    plan = ct.plan(folder / "plan.json", alpha=0.05, n_bins="auto")
    assert_type(plan, ct.AnalysisPlan)
    assert_type(ct.auto_n_bins(1000, 1), int)
    assert_type(ct.sigma0_sq("binary"), float)
    assert_type(ct.load_demo(), pd.DataFrame)
    single = ct.calib_ci("y ~ p", data=df)
    assert isinstance(single, ct.CalibrationResult)
    assert_type(ct.report(single, folder / "report.html", plan=folder / "plan.json"), Path)
    assert_type(ct.margin_test(single, 0.05), ct.MarginTestResult)
    assert_type(ct.citl_test(single, 0.2), ct.EquivalenceTestResult)
    assert_type(ct.slope_test(single, (0.8, 1.25), alpha=0.05), ct.EquivalenceTestResult)
    assert_type(ct.oe_test(probs=df["p"], y=df["y"], within=(0.8, 1.25)), ct.EquivalenceTestResult)
    assert_type(ct.__version__, str)
