"""The committed size study of the eight-draws-per-word label stream (``vignettes/label_stream_size.py``):
every cell's rejection rate at alpha = 0.05 is within 3 Monte Carlo standard errors of the exact size,
and the script's own run reproduces a cell's p-values from its seeds."""
from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import calibtest as ct

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "vignettes" / "label_stream_size.py"
CSV = ROOT / "vignettes" / "label_stream_size.csv"


def _module():
    if not SCRIPT.exists():
        pytest.skip("vignettes/ not present")
    spec = importlib.util.spec_from_file_location("label_stream_size", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_sizes_are_within_three_standard_errors():
    if not CSV.exists():
        pytest.skip("vignettes/ not present")
    with open(CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    mod = _module()
    assert len(rows) == len(mod.DESIGNS) * len(mod.SIZES)
    for row in rows:  # a loop over the committed cells
        R, N = int(row["draws"]), int(row["data_sets"])
        exact = math.floor(0.05 * (R + 1)) / (R + 1)
        se = math.sqrt(exact * (1 - exact) / N)
        assert abs(float(row["reject_05"]) - exact) <= 3 * se, row


def test_a_cell_reproduces_from_its_seeds():
    """The first data sets of the first cell give the p-values of a direct call with the same seeds."""
    mod = _module()
    for rep in range(3):  # a loop over a few data sets
        kw = mod.predictions(mod.DESIGNS[0], 300, np.random.default_rng([mod.SEED, 0, rep]))
        assert np.all((kw["probs"] * 256) % 1 == 0)  # the byte grid: every p is k/256
        res = ct.calib_test(**kw, n_draws=mod.R, rng=rep)
        again = ct.calib_test(**kw, n_draws=mod.R, rng=rep)
        assert res.pvalue == again.pvalue and 0 < res.pvalue <= 1
