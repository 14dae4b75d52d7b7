"""``calibtest report FILE.csv --formula ... -o out.html|out.pdf`` (registered by ``calibtest.cli``)."""
from __future__ import annotations

import shlex

__all__ = ["add_report_parser", "report_command"]


def _bins(value: str):
    return value if value == "auto" else int(value)


def _k(value: str):
    return value if value == "full" else int(value)


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
    from .api import calib_ci
    from .cli import _read_csv
    from .reporting import file_provenance, report

    if not args.output.lower().endswith((".html", ".htm", ".pdf")):
        raise ValueError(f"-o/--output must end in .html, .htm or .pdf, got {args.output!r}")
    df = _read_csv(args.file)
    source = file_provenance(args.file)
    kwargs = {"n_classes": args.n_classes, "k": args.k, "n_bins": args.bins, "alpha": args.alpha,
              "missing": args.missing}
    if args.method != "adjusted":  # calib_ci(method=) is optional on older versions
        kwargs["method"] = args.method
    res = calib_ci(args.formula, data=df, **kwargs)
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
