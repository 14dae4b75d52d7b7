"""``calibtest tcal FILE.csv --formula ...`` (registered by ``calibtest.cli``)."""
from __future__ import annotations

import json

__all__ = ["add_tcal_parser"]


def _cmd_tcal(args) -> int:
    from .cli import _read_csv
    from .tcal import tcal_test
    df = _read_csv(args.file)
    res = tcal_test(args.formula, data=df, n_classes=args.n_classes, k=args.k, n_bins=args.bins,
                    alpha=args.alpha, n_draws=args.draws, adaptive=args.adaptive, rng=args.seed,
                    missing=args.missing)
    print(json.dumps(res.to_dict()) if args.json else res.summary())
    return 0


def add_tcal_parser(sub) -> None:
    """Add the ``tcal`` subcommand to an argparse subparsers object."""
    from .cli import _bins, _k
    tc = sub.add_parser("tcal", help="T-Cal test of calibration (consistency-resampling threshold)")
    tc.add_argument("file", help="CSV file with outcomes and predictions")
    tc.add_argument("--formula", required=True, help='e.g. "y ~ p" or "label ~ p0 + p1 + p2"')
    tc.add_argument("--n-classes", type=int, default=None, help="K for a single top-1 confidence column")
    tc.add_argument("--k", type=_k, default=None, help="top-1-to-k, or 'full' for full calibration")
    tc.add_argument("--bins", type=_bins, default="auto", help="bins per dimension, or 'auto' (default)")
    tc.add_argument("--alpha", type=float, default=0.05, help="level of the test (default 0.05)")
    tc.add_argument("--draws", type=int, default=1000, help="Monte Carlo resamples (default 1000)")
    tc.add_argument("--adaptive", action="store_true", help="adaptive T-Cal over dyadic bin counts")
    tc.add_argument("--seed", type=int, default=None, help="random seed")
    tc.add_argument("--missing", choices=["raise", "drop"], default="raise")
    tc.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    tc.set_defaults(func=_cmd_tcal)
