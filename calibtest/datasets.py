"""Loaders for the small data sets shipped inside the calibtest package."""
from __future__ import annotations

from importlib.resources import files

import numpy as np
import pandas as pd

__all__ = ["load_demo"]


def load_demo() -> pd.DataFrame:
    """Load the packaged demo data set (validation half of a logistic model on Fair's affairs data).

    The file ``calibtest/data/demo.csv`` holds, for the 3183 women of the
    validation half of ``statsmodels.datasets.fair``, the outcome
    ``y = 1{affairs > 0}`` and the probability ``p = expit(x' b_hat)`` predicted
    by a logistic regression fitted on the other half.  See
    ``calibtest/data/README.md`` and :mod:`calibtest.data.make_demo`, which
    regenerates its values (to within 1e-9).

    Returns
    -------
    pandas.DataFrame
        Columns ``y`` (int64, 0/1) and ``p`` (float64, strictly inside (0, 1)),
        3183 rows.  The probabilities are stored with 17 significant digits, so
        they are the exact float64 values the model produced.

    Examples
    --------
    >>> from calibtest import load_demo
    >>> df = load_demo()
    >>> df.shape, list(df.columns)
    ((3183, 2), ['y', 'p'])
    """
    resource = files("calibtest.data").joinpath("demo.csv")
    with resource.open("r", encoding="utf-8") as fh:
        # The python engine parses with Python's correctly rounded float(), so the
        # %.17g text gives back the exact float64 values on every pandas version.
        df = pd.read_csv(fh, dtype={"y": np.int64, "p": np.float64}, engine="python")
    return df
