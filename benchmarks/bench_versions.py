"""The interval at n = 50,000 and ``calib_test`` at 10^6 rows in two checkouts, interleaved (issue 33's figure).

    python benchmarks/bench_versions.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 4]

Each round runs both checkouts in fresh processes, one after the other, so that the machine's load falls on
both alike; each process reports its best CPU time per call (``time.process_time``) over repeated runs: the
interval (``calib_ci(y=, probs=)``, binary, 100 calls a run, 15 runs) and the multi-scale test (``calib_test``
with the default null and grid, 10^6 binary rows, 3 runs).  Prints every round and the minimum over rounds,
with the load average.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

CODE = r'''
import sys, time, numpy as np
sys.path.insert(0, sys.argv[1])
import calibtest as ct
what = sys.argv[2]
rng = np.random.default_rng(0)
if what == "interval":
    n, calls, runs = 50_000, 100, 15
    p = rng.uniform(size=n); y = rng.binomial(1, p)
    call = lambda: ct.calib_ci(y=y, probs=p)
else:
    n, calls, runs = 1_000_000, 1, 3
    p = rng.uniform(size=n); y = rng.binomial(1, p)
    call = lambda: ct.calib_test(y=y, probs=p, rng=1)
call()
best = float("inf")
for _ in range(runs):
    t0 = time.process_time()
    for _ in range(calls):
        call()
    best = min(best, (time.process_time() - t0) / calls)
print(best)
'''


def _best(checkout: str, what: str) -> float:
    out = subprocess.run([sys.executable, "-c", CODE, checkout, what], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    for what, unit, scale in (("interval", "ms", 1e3), ("calib_test", "s", 1.0)):
        rounds = {args.old: [], args.new: []}
        for _ in range(args.rounds):
            for checkout in (args.old, args.new):
                rounds[checkout].append(_best(checkout, what) * scale)
        for label, checkout in (("old", args.old), ("new", args.new)):
            shown = ", ".join(f"{t:.3f}" for t in rounds[checkout])
            print(f"{what:10s} {label}: min {min(rounds[checkout]):.3f} {unit} of CPU per call (rounds: {shown})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
