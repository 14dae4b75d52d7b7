"""Time of calib_sample_size(slope=0.8, power=0.8): the first call in a fresh interpreter and later calls.

Run: ``python benchmarks/bench_sample_size.py``.  Prints, for Beta(2, 5)
predictions (m = 5000): the import of calibtest's planning module in a fresh
interpreter (numpy, pandas, scipy.stats, scipy.optimize), the first call
there, the median of 7 later calls with a cProfile breakdown of one, and the
machine's load (``os.getloadavg()``).  ``benchmarks/bench_sample_size.txt``
holds one run's output.
"""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import time

CODE = """
import time
t0 = time.perf_counter()
import numpy as np
import calibtest.api.sample_size as S
t1 = time.perf_counter()
p = np.random.default_rng(0).beta(2, 5, 5000)
t2 = time.perf_counter()
r = S.calib_sample_size(probs=p, slope=0.8, power=0.8)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2, r.n)
"""


def fresh_interpreter() -> tuple[float, float, int]:
    """(import seconds, first-call seconds, n) in a new Python process."""
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True, env=env).stdout
    imp, first, n = out.split()
    return float(imp), float(first), int(n)


def main() -> None:
    import numpy as np

    import calibtest as ct

    print(f"load average (1, 5, 15 min) before: {os.getloadavg()}")
    for i in range(3):
        imp, first, n = fresh_interpreter()
        print(f"fresh interpreter {i + 1}: import {imp:.3f} s, first call {first:.3f} s (n = {n})")
    p = np.random.default_rng(0).beta(2, 5, 5000)
    fn = lambda: ct.calib_sample_size(probs=p, slope=0.8, power=0.8)  # noqa: E731
    n = fn().n
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    print(f"later calls: n = {n}, median {statistics.median(times):.3f} s, min {min(times):.3f} s, "
          f"max {max(times):.3f} s (7 calls)")
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(12)
    keep = [line for line in buf.getvalue().splitlines() if "calibtest" in line or "ncalls" in line]
    print("cProfile of one later call (cumulative, calibtest functions):")
    print("\n".join(keep))
    print(f"load average (1, 5, 15 min) after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
