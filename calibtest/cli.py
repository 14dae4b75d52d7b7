"""Command-line interface: ``calibtest ci``, ``calibtest demo``."""
from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

__all__ = ["main"]


def _bins(value: str):
    return value if value == "auto" else int(value)


def _k(value: str):
    return value if value == "full" else int(value)


def _read_csv(path: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise SystemExit(f"calibtest: file not found: {path}")


def _cmd_ci(args) -> int:
    from .api import calib_ci
    stream = _streamed(args)
    df = args.file if stream else _read_csv(args.file)
    res = calib_ci(args.formula, data=df, n_classes=args.n_classes, k=args.k, n_bins=args.bins,
                   alpha=args.alpha, missing=args.missing, **stream, **_resampling_options(args),
                   **_null_options(args))
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        print(res.summary())
    return 0


def _streamed(args) -> dict:
    """Options for streaming the file in chunks (Parquet files, or CSV with --chunksize), else {}."""
    if args.chunksize is None and not args.file.lower().endswith((".parquet", ".pq")):
        return {}
    import os
    if not os.path.isfile(args.file):
        raise SystemExit(f"calibtest: file not found: {args.file}")
    return {"chunksize": args.chunksize}


def _null_options(args) -> dict:
    """``--null`` (and ``--seed`` for the Monte Carlo null) as calib_ci keywords."""
    if args.null == "asymptotic":
        return {}
    out = {"null": args.null}
    if args.null == "monte-carlo" and args.method == "adjusted":
        out["rng"] = args.seed
    return out


def _resampling_options(args) -> dict:
    """``--method``, ``--n-resamples`` and ``--seed`` as calib_ci keywords (only those given)."""
    out = {}
    if getattr(args, "method", "adjusted") != "adjusted":
        out.update(method=args.method, n_resamples=args.n_resamples, rng=args.seed)
    elif getattr(args, "n_resamples", None) is not None:
        out.update(n_resamples=args.n_resamples)  # calib_ci explains that it needs a resampling method
    return out


def _cmd_demo(args) -> int:
    from .api import calib_ci
    from .datasets import load_demo
    df = load_demo()
    res = calib_ci("y ~ p", data=df)
    print("calibtest demo: calibration of a logistic risk model on held-out data "
          "(see calibtest/data/README.md)\n")
    print(res.summary())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calibtest",
                                     description="Confidence intervals and tests for the l2 expected calibration error.")
    sub = parser.add_subparsers(dest="command", required=True)
    ci = sub.add_parser("ci", help="interval and test for one model's calibration error")
    ci.add_argument("file", help="CSV or Parquet file with outcomes and predictions")
    ci.add_argument("--formula", required=True, help='e.g. "correct ~ confidence" or "label ~ p0 + p1 + p2"')
    ci.add_argument("--n-classes", type=int, default=None, help="K for a single top-1 confidence column")
    ci.add_argument("--k", type=_k, default=None, help="top-1-to-k calibration for a probability matrix")
    ci.add_argument("--bins", type=_bins, default="auto", help="bins per dimension, or 'auto' (default)")
    ci.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    ci.add_argument("--missing", choices=["raise", "drop"], default="raise")
    ci.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    ci.add_argument("--chunksize", type=int, default=None,
                    help="stream the file in chunks of this many rows (Parquet files are always streamed)")
    ci.add_argument("--method", choices=["adjusted", "bootstrap", "subsampling", "hulc"], default="adjusted",
                    help="interval: the paper's adjusted interval (default) or a resampling baseline")
    ci.add_argument("--n-resamples", type=int, default=None, help="resamples of a resampling method (500)")
    ci.add_argument("--seed", type=int, default=None, help="seed of a resampling method or the Monte Carlo null")
    ci.add_argument("--null", choices=["asymptotic", "conditional", "monte-carlo"], default="asymptotic",
                    help="null law of the calibration test (default: the paper's asymptotic one)")
    ci.set_defaults(func=_cmd_ci)
    from .report_cli import add_report_parser
    add_report_parser(sub)
    from .tcal_cli import add_tcal_parser
    add_tcal_parser(sub)
    demo = sub.add_parser("demo", help="run calibtest on the packaged example data")
    demo.set_defaults(func=_cmd_demo)
    from .compare_cli import add_compare_parser
    add_compare_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError) as exc:
        print(f"calibtest: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
