"""``calibtest compare FILE.csv --formula-a ... --formula-b ...`` (registered by ``calibtest.cli``)."""
from __future__ import annotations

import json

__all__ = ["add_compare_parser"]


def _cmd_compare(args) -> int:
    from .cli import _read_csv
    from .compare import calib_compare
    df = _read_csv(args.file)
    res = calib_compare(args.formula_a, args.formula_b, data=df, n_classes=args.n_classes, k=args.k,
                        n_bins=args.bins, alpha=args.alpha, alternative=args.alternative,
                        variance=args.variance, missing=args.missing)
    print(json.dumps(res.to_dict()) if args.json else res.summary())
    return 0


def add_compare_parser(sub) -> None:
    """Add the ``compare`` subcommand to an argparse subparsers object."""
    from .cli import _bins
    cmp = sub.add_parser("compare", help="test whether two models' calibration errors differ (paired)")
    cmp.add_argument("file", help="CSV file with the outcomes and both models' predictions")
    cmp.add_argument("--formula-a", required=True, help='model A, e.g. "y ~ p_old"')
    cmp.add_argument("--formula-b", required=True, help='model B, e.g. "y ~ p_new"')
    cmp.add_argument("--n-classes", type=int, default=None, help="K for single top-1 confidence columns")
    cmp.add_argument("--k", type=int, default=None, help="top-1-to-k calibration for probability matrices")
    cmp.add_argument("--bins", type=_bins, default="auto", help="bins per dimension, or 'auto' (default)")
    cmp.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    cmp.add_argument("--alternative", choices=["two-sided", "less", "greater"], default="two-sided")
    cmp.add_argument("--variance", choices=["corrected", "plugin"], default="corrected")
    cmp.add_argument("--missing", choices=["raise", "drop"], default="raise")
    cmp.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    cmp.set_defaults(func=_cmd_compare)
