"""Peak memory of the streamed comparison on Parquet files of 10^6 to 3 x 10^7 rows (issue 36, point 3).

``calibtest.calib_compare("y ~ p_a", "y ~ p_b", data=path)`` reads the file in two passes (each model's
bin sums, then the sums of the difference's variance: influence values, per-bin fourth powers and the
per-cell cross products of the two models' residuals); ``calibtest compare FILE`` (the command line) does
the same; ``calibtest.report(...)`` of the two streamed results with that comparison reads the rows again
for each model's evidence, Hosmer-Lemeshow and validation fits.  Each measurement runs in a fresh Python
process (``subprocess``) whose peak resident set size (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is
printed with its wall time; the baseline is a process that imports calibtest and pyarrow and does nothing.

Data: p_a ~ Beta(2, 5), y ~ Bernoulli(p_a^1.1), p_b = expit(1.2 logit(p_a) + 0.3 e), e ~ N(0, 1): two
correlated models.  Each file is written in row groups of 10^6 rows (``pyarrow.parquet.ParquetWriter``,
one row group in memory at a time) under the temporary directory and deleted after its measurements.
Chunks are the default 10^6 rows.  ``n_bins="auto"`` gives B ~ 3 n^(2/5) bins per model, so the sparse
cells of the cross partition grow like n^(4/5) at most; ``n_bins=50`` fixes them.

Run: ``nice -n 10 python benchmarks/bench_compare_stream.py [--rows 1e6 1e7 3e7] [--report-rows 1e6 1e7]``
(writes ``benchmarks/results/bench_compare_stream.txt``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "bench_compare_stream.txt"
ROW_GROUP = 1_000_000

#: What each measured process runs (``PATH`` is the Parquet file); it prints a JSON line of numbers.
JOBS = {
    "baseline (import calibtest, pyarrow)": "import calibtest, pyarrow.parquet; out = {}",
    "calib_compare, n_bins='auto'": (
        "import calibtest as ct\n"
        "c = ct.calib_compare('y ~ p_a', 'y ~ p_b', data=PATH)\n"
        "out = {'estimate': c.estimate, 'se': c.se, 'pvalue': c.pvalue, 'B': c.n_bins_a,\n"
        "       'passes': c.result_a.source['passes']}"),
    "calib_compare, n_bins=50": (
        "import calibtest as ct\n"
        "c = ct.calib_compare('y ~ p_a', 'y ~ p_b', data=PATH, n_bins=50)\n"
        "out = {'estimate': c.estimate, 'se': c.se, 'pvalue': c.pvalue, 'B': c.n_bins_a,\n"
        "       'passes': c.result_a.source['passes']}"),
    "calibtest compare (command line)": (
        "from calibtest.cli import main\n"
        "import contextlib, io\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    main(['compare', PATH, '--formula', 'y ~ p_a', '--formula', 'y ~ p_b', '--json'])\n"
        "d = json.loads(buf.getvalue())\n"
        "out = {'estimate': d['estimate'], 'se': d['se'], 'pvalue': d['pvalue']}"),
    "report(two streamed results, comparison)": (
        "import calibtest as ct, tempfile, os\n"
        "a = ct.calib_ci('y ~ p_a', data=PATH); b = ct.calib_ci('y ~ p_b', data=PATH)\n"
        "c = ct.calib_compare(a, b)\n"
        "with tempfile.TemporaryDirectory() as tmp:\n"
        "    ct.report([a, b], os.path.join(tmp, 'r.html'), comparisons=c, labels=['a', 'b'])\n"
        "out = {'estimate': c.estimate, 'se': c.se, 'pvalue': c.pvalue, 'pairing': c.pairing}"),
}


def _measure(code: str, path: str) -> dict:
    """Run ``code`` in a fresh interpreter: its numbers, peak RSS (MB) and wall time (s)."""
    script = ("import json, resource, time\nPATH = " + repr(path) + "\nt0 = time.perf_counter()\n" + code +
              "\nout['wall_s'] = time.perf_counter() - t0\n"
              "out['peak_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
              "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_file(path: str, n: int, seed: int = 0) -> None:
    """A Parquet file of n rows (y, p_a, p_b), written one row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from scipy.special import expit, logit

    g = np.random.default_rng(seed)
    schema = pa.schema([("y", pa.int8()), ("p_a", pa.float64()), ("p_b", pa.float64())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n, ROW_GROUP):  # one row group at a time
            m = min(ROW_GROUP, n - start)
            p = np.clip(g.beta(2, 5, m), 1e-6, 1 - 1e-6)
            y = (g.random(m) < p ** 1.1).astype(np.int8)
            pb = expit(1.2 * logit(p) + 0.3 * g.standard_normal(m))
            writer.write_table(pa.table({"y": y, "p_a": p, "p_b": pb}, schema=schema))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, nargs="+", default=[1e6, 1e7, 3e7])
    ap.add_argument("--report-rows", type=float, nargs="*", default=[1e6, 1e7],
                    help="sizes at which the report (many passes per model) is measured too")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    lines = [f"Streamed comparison on Parquet files; {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
             "peak RSS of a fresh process per row (MB), wall time (s)"]
    for n in (int(r) for r in args.rows):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rows.parquet")
            t0 = time.perf_counter()
            write_file(path, n)
            size = os.path.getsize(path) / 2**20
            lines.append(f"n = {n:,} rows ({size:.0f} MB file, written in {time.perf_counter() - t0:.0f} s):")
            for name, code in JOBS.items():
                if name.startswith("report") and n not in {int(r) for r in args.report_rows}:
                    continue
                r = _measure(code, path)
                extra = ", ".join(f"{k} = {v:.6g}" if isinstance(v, float) else f"{k} = {v}"
                                  for k, v in r.items() if k not in ("wall_s", "peak_mb"))
                lines.append(f"  {name:42s} peak {r['peak_mb']:7.0f} MB  {r['wall_s']:7.1f} s  {extra}")
                print(lines[-1], flush=True)
    load1 = os.getloadavg()
    lines.append(f"load average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    text = "\n".join(lines)
    print(text)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
