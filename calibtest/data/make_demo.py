"""Regenerate ``demo.csv``, the demo data set shipped with calibtest.

Run ``python -m calibtest.data.make_demo`` to rewrite ``demo.csv`` next to this
file (or ``python -m calibtest.data.make_demo --output PATH`` to write elsewhere).
The output is deterministic up to floating-point rounding: the same statsmodels
data, the same seeded split and the same Newton fit give the same outcomes and
the same predictions to within an absolute 1e-9 (the last bits of the fitted
logit, and so the bytes of the file, can differ between numpy/statsmodels/pandas
builds; ``tests/test_datasets.py`` compares the values, not the bytes).

Recipe (see ``README.md`` in this folder):

1. Load Fair's (1978) extramarital-affairs survey, ``statsmodels.datasets.fair``
   (n = 6366 women), and set the outcome ``y = 1{affairs > 0}``.
2. Permute the row indices with ``numpy.random.default_rng(SEED).permutation(n)``;
   the first ``n // 2`` permuted rows are the training half, the rest the
   validation half (kept in original row order).
3. Fit on the training half the logistic regression

   ``logit P(y = 1 | x) = b0 + b1 rate_marriage + b2 age + b3 yrs_married
   + b4 children + b5 religious + b6 educ + C(occupation) + C(occupation_husb)``

   by maximum likelihood (``statsmodels.formula.api.logit``, Newton's method).
4. Write the validation half's outcomes ``y`` (0/1) and predicted probabilities
   ``p = 1 / (1 + exp(-x'b))`` with ``%.17g`` (round-trip exact for float64).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["SEED", "FORMULA", "build_demo", "write_demo", "main"]

#: Seed of the ``numpy.random.Generator`` that splits the rows.
SEED = 20240607

#: Patsy formula of the logistic model fitted on the training half.
FORMULA = (
    "y ~ rate_marriage + age + yrs_married + children + religious + educ"
    " + C(occupation) + C(occupation_husb)"
)

#: Default output file, next to this module.
DEMO_PATH = Path(__file__).with_name("demo.csv")


def build_demo(seed: int = SEED) -> pd.DataFrame:
    """Build the demo frame: validation-half outcomes and predicted probabilities.

    Parameters
    ----------
    seed : int, optional
        Seed of ``numpy.random.default_rng`` used to split the rows in halves.

    Returns
    -------
    pandas.DataFrame
        Columns ``y`` (int64, 0/1) and ``p`` (float64 in (0, 1)), one row per
        validation-half woman, in the original row order of the source data.
        ``p_i = expit(x_i' b_hat)`` with ``b_hat`` the maximum-likelihood
        estimate on the training half.
    """
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    raw = sm.datasets.fair.load_pandas().data
    df = raw.drop(columns="affairs").assign(y=(raw["affairs"].to_numpy() > 0).astype(np.int64))
    n = len(df)
    perm = np.random.default_rng(seed).permutation(n)
    train_idx = np.sort(perm[: n // 2])
    valid_idx = np.sort(perm[n // 2:])
    train = df.iloc[train_idx].reset_index(drop=True)
    valid = df.iloc[valid_idx].reset_index(drop=True)

    fit = smf.logit(FORMULA, data=train).fit(method="newton", maxiter=100, tol=1e-12, disp=False)
    if not fit.mle_retvals["converged"]:  # pragma: no cover - the fit is well posed
        raise RuntimeError("logistic fit of the demo model did not converge")
    p = np.asarray(fit.predict(valid), dtype=np.float64)
    return pd.DataFrame({"y": valid["y"].to_numpy(dtype=np.int64), "p": p})


def write_demo(path: str | Path = DEMO_PATH, seed: int = SEED) -> Path:
    """Write :func:`build_demo` to ``path`` as CSV (``%.17g``, ``\\n`` line ends).

    Parameters
    ----------
    path : str or pathlib.Path, optional
        Output file; defaults to ``demo.csv`` in this package folder.
    seed : int, optional
        Split seed passed to :func:`build_demo`.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    path = Path(path)
    build_demo(seed).to_csv(path, index=False, float_format="%.17g", lineterminator="\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``python -m calibtest.data.make_demo [--output PATH]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEMO_PATH, help="CSV to write (default: %(default)s)")
    args = parser.parse_args(argv)
    out = write_demo(args.output)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
