"""Command-line interface: ``calibtest ci``, ``calibtest demo``."""
from __future__ import annotations

import argparse
import json
import shlex
import sys

import pandas as pd

from calibtest.compare import calib_compare
from calibtest.datasets import load_demo
from calibtest.ece import calib_ci
from calibtest.reporting.html import file_provenance, report
from calibtest.tcal import tcal_test

__all__ = ["main", "build_parser", "report_command"]


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
    df = load_demo()
    res = calib_ci("y ~ p", data=df)
    print("calibtest demo: calibration of a logistic risk model on held-out data "
          "(see calibtest/data/README.md)\n")
    print(res.summary())
    return 0



def report_command(args) -> str:
    """The complete command line (every option, defaults included) that reproduces the report."""
    parts = ["calibtest", "report", args.file, "--formula", args.formula, "-o", args.output]
    if args.title is not None:
        parts += ["--title", args.title]
    if args.purpose is not None:
        parts += ["--purpose", args.purpose]
    if args.n_classes is not None:
        parts += ["--n-classes", str(args.n_classes)]
    if args.k is not None:
        parts += ["--k", str(args.k)]
    parts += ["--bins", str(args.bins), "--alpha", repr(args.alpha), "--method", args.method,
              "--missing", args.missing]
    return " ".join(shlex.quote(p) for p in parts)


def _cmd_report(args) -> int:
    if not args.output.lower().endswith((".html", ".htm", ".pdf")):
        raise ValueError(f"-o/--output must end in .html, .htm or .pdf, got {args.output!r}")
    df = _read_csv(args.file)
    source = file_provenance(args.file)
    res = calib_ci(args.formula, data=df, n_classes=args.n_classes, k=args.k, n_bins=args.bins,
                   alpha=args.alpha, missing=args.missing, method=args.method)
    try:
        path = report(res, args.output, title=args.title, purpose=args.purpose, source=source,
                      command=report_command(args))
    except ImportError as exc:
        raise SystemExit(f"calibtest: error: {exc}")
    print(f"calibtest: wrote {path}")
    return 0


def add_report_parser(sub) -> None:
    """Add the ``report`` subcommand to an argparse subparsers object."""
    rep = sub.add_parser("report", help="write an HTML or PDF validation report for one model")
    rep.add_argument("file", help="CSV file with outcomes and predictions")
    rep.add_argument("--formula", required=True, help='e.g. "y ~ p", "correct ~ confidence" or "label ~ p0 + p1"')
    rep.add_argument("-o", "--output", required=True, help="output file: .html or .pdf (PDF needs calibtest[pdf])")
    rep.add_argument("--title", default=None, help="report title")
    rep.add_argument("--purpose", default=None, help="free text: what is evaluated and why")
    rep.add_argument("--n-classes", type=int, default=None, help="K for a single top-1 confidence column")
    rep.add_argument("--k", type=_k, default=None, help="top-1-to-k calibration for a probability matrix, or 'full'")
    rep.add_argument("--bins", type=_bins, default="auto", help="bins per dimension, or 'auto' (default)")
    rep.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    rep.add_argument("--method", default="adjusted",
                     help="interval method: adjusted (default, the paper's Algorithm 1), or a resampling "
                          "method calib_ci supports (bootstrap, subsampling, hulc)")
    rep.add_argument("--missing", choices=["raise", "drop"], default="raise")
    rep.set_defaults(func=_cmd_report)


def _cmd_tcal(args) -> int:
    df = _read_csv(args.file)
    res = tcal_test(args.formula, data=df, n_classes=args.n_classes, k=args.k, n_bins=args.bins,
                    alpha=args.alpha, n_draws=args.draws, adaptive=args.adaptive, rng=args.seed,
                    missing=args.missing)
    print(json.dumps(res.to_dict()) if args.json else res.summary())
    return 0


def add_tcal_parser(sub) -> None:
    """Add the ``tcal`` subcommand to an argparse subparsers object."""
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


def _cmd_compare(args) -> int:
    df = _read_csv(args.file)
    res = calib_compare(args.formula_a, args.formula_b, data=df, n_classes=args.n_classes, k=args.k,
                        n_bins=args.bins, alpha=args.alpha, alternative=args.alternative,
                        variance=args.variance, missing=args.missing)
    print(json.dumps(res.to_dict()) if args.json else res.summary())
    return 0


def add_compare_parser(sub) -> None:
    """Add the ``compare`` subcommand to an argparse subparsers object."""
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
    add_report_parser(sub)
    add_tcal_parser(sub)
    demo = sub.add_parser("demo", help="run calibtest on the packaged example data")
    demo.set_defaults(func=_cmd_demo)
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
