"""Reading the stored R reference results and the data they were computed on (tests/reference/)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest


def load_reference(json_path: Path, data_path: Path) -> dict:
    """The stored R results; the test is skipped when they or their data are absent, and fails when the data
    changed since the R run (its MD5 is stored with the results)."""
    if not (json_path.exists() and data_path.exists()):
        pytest.skip("the R reference file or its data is absent")
    ref = json.loads(json_path.read_text())
    assert hashlib.md5(data_path.read_bytes()).hexdigest() == ref["data_md5"], "the data changed since the R run"
    return ref


def survival_set(data_path: Path, name: str) -> tuple:
    """``(time, event, risk, horizon)`` of the data set ``name`` of a stored survival data file."""
    d = pd.read_csv(data_path)
    d = d[d["set"] == name]
    return d["time"].to_numpy(), d["event"].to_numpy(), d["risk"].to_numpy(), float(d["horizon"].iloc[0])
