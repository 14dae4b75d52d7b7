"""Accuracy of the RA-CUSUM's computed thresholds (FFT batch law + Brook-Evans Markov chain).

Run: ``PYTHONPATH=. nice -n 10 python vignettes/ra_cusum_arl.py [--quick] > vignettes/ra_cusum_arl.txt``.

1. Convergence of the computation: the ARL at the computed h with 256 ... 4096 chain states and with a lattice
   twice as fine (128 steps per row sd), and the normal approximation's ARL at the same h.
2. The computation against simulation, for the law it assumes (batches of m rows whose predictions are drawn
   from the reference p_ref, labels y ~ Bernoulli(p)): Beta(2,5) risks and top-1 confidences near 1, batches of
   50, 500 and 5,000, target 200 per chart.  Each replicate draws a fresh pool of batch scores (both charts from
   the same batches) and runs CUSUM paths resampled from it, capped at 20 * ARL (a path still below h is
   counted at the cap and reported); the s.e. is the spread of the replicate means / sqrt(replicates), so it
   includes the pool's noise.  Where no positive threshold reaches the target (h = 0+), the ARL is
   1 / P(X > 0), checked by counting positive batch scores.
3. The top-1 design of monitoring_study.md (batches of 500, arl = 100): thresholds from ten first batches
   against the design's true law (a pool of 200,000 batches): what is left is the first batch's case mix.
4. The study's false-alarm figure for the RA-CUSUM in that design (0.0132 alarms per look with the simulated
   thresholds), re-run through CalibrationMonitor with the study's own streams and the computed thresholds.
"""
import math
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import monitoring_study as ms  # noqa: E402
from calibtest.core import sequential as sq  # noqa: E402

QUICK = "--quick" in sys.argv
TARGET = 200.0
t_start = time.time()


def batch_scores(p_ref, m, ratios, n, rng, risk=None, block=4_000_000):
    """(n, 2) paired batch scores; predictions resampled from p_ref (or drawn from ``risk``), in blocks."""
    out = np.empty((n, len(ratios)))
    step = max(1, block // m)
    for s in range(0, n, step):  # a loop over blocks of batches
        k = min(step, n - s)
        p = p_ref[rng.integers(0, p_ref.size, (k, m))] if risk is None else risk(rng, k * m).reshape(k, m)
        y = rng.random(p.shape) < p
        for j, r in enumerate(ratios):
            out[s:s + k, j] = sq.ra_scores(p, y, r).sum(axis=1)
    return out


def run_lengths(pool, h, n_paths, cap, rng):
    """First crossing of each chart and of either, (n_paths, 3); cap + 1 for a path that did not cross."""
    s = np.zeros((n_paths, 2))
    first = np.full((n_paths, 3), cap + 1)
    for t in range(1, cap + 1):  # a loop over batches, vectorised over paths
        s = np.maximum(0.0, s + pool[rng.integers(0, len(pool), n_paths)])
        hit = np.column_stack([s >= h, (s >= h).any(axis=1)])
        first[hit & (first > cap)] = t
        if (first <= cap).all():
            break
    return first


def line(label, value, se):
    return f"{label} {value:.1f} (s.e. {se:.1f}, {100 * (value / TARGET - 1):+.1f}% of target)"


# ----------------------------------------------------------------------------- 1. convergence
print("1. Convergence of the computed ARL at h (target 200 per chart; R = 2 chart)")
designs = {"Beta(2,5)": ms.beta_risks, "top-1 near 1": ms.top1_near_one}
for name, risk in designs.items():
    for m in (1, 50, 500):
        p_ref = np.sort(risk(np.random.default_rng(1), m if m > 1 else 500))
        law = sq.ra_batch_law(p_ref, 2.0, m)
        h, arl = sq.cusum_threshold(law.cdf, TARGET, law.sd)
        if h < 1e-300:
            print(f"  {name}, m={m}: h = 0+ (ARL at 0+ = {arl:.4g} > target)")
            continue
        by_m = [sq.cusum_arl(law.cdf, h, k) for k in (256, 512, 1024, 2048, 4096)]
        fine = sq.ra_batch_law(p_ref, 2.0, m, steps_per_sd=128)
        normal = sq.BatchLaw(law.mean, law.sd)
        print(f"  {name}, m={m}: h={h:.5f}; ARL with M = 256..4096 states: "
              + ", ".join(f"{a:.3f}" for a in by_m)
              + f"; lattice twice as fine: {sq.cusum_arl(fine.cdf, h):.3f}; normal law: {sq.cusum_arl(normal.cdf, h):.2f}")
print(f"  ({time.time() - t_start:.0f} s)", flush=True)

# ----------------------------------------------------------------------------- 2. against simulation
reps, paths = (4, 1000) if QUICK else (10, 2000)
print(f"\n2. Computed thresholds against simulation of the law they assume ({reps} replicates x {paths} paths)")
for name, risk in designs.items():
    for m, ratio, pool_rows in ((50, 2.0, 10_000_000), (500, 2.0, 10_000_000), (5000, 1.1, 10_000_000)):
        rng = np.random.default_rng([7, m])
        p_ref = np.sort(risk(np.random.default_rng(1), m))
        t0 = time.process_time()
        found = [sq.ra_threshold(p_ref, r, TARGET) for r in (ratio, 1 / ratio)]
        secs = time.process_time() - t0
        h, arls = np.array([f[0] for f in found]), np.array([f[1] for f in found])
        n_pool = (pool_rows // m) // (4 if QUICK else 1)
        head = f"  {name}, m={m}, R={ratio}: h = {np.array2string(h, precision=4)}, computed ARLs " \
               f"{np.array2string(arls, precision=1)} ({secs:.2f} s CPU)"
        if (h < 1e-300).any():  # ARL 1 / P(X > 0): count positive batch scores
            pool = batch_scores(p_ref, m, (ratio, 1 / ratio), n_pool * reps, rng)
            pos = (pool > 0).mean(axis=0)
            print(head + "; simulated 1/P(X > 0) from " + f"{len(pool)} batches: "
                  + ", ".join(f"{1 / q:.4g}" if q > 0 else "inf (none positive)" for q in pos), flush=True)
            continue
        cap = int(20 * TARGET)
        means, censored = [], 0
        for _ in range(reps):
            pool = batch_scores(p_ref, m, (ratio, 1 / ratio), n_pool, rng)
            first = run_lengths(pool, h, paths, cap, rng)
            censored += int((first[:, :2] > cap).sum())
            means.append(first[:, :2].mean(axis=0))
        means = np.array(means)
        est, se = means.mean(axis=0), means.std(axis=0, ddof=1) / math.sqrt(reps)
        print(head + f"; pool {n_pool} batches/replicate; " + line("simulated ARL up", est[0], se[0]) + "; "
              + line("down", est[1], se[1]) + f"; censored {censored}", flush=True)
print(f"  ({time.time() - t_start:.0f} s)", flush=True)

# ----------------------------------------------------------------------------- 3. the study's top-1 design
name = [k for k in ms.DESIGNS if "top-1" in k][0]
risk, batch = ms.DESIGNS[name][0], ms.DESIGNS[name][1]
n_true = 50_000 if QUICK else 200_000
rng = np.random.default_rng(99)
true_pool = batch_scores(None, batch, (2.0, 0.5), n_true, rng, risk=risk)
print(f"\n3. {name}: thresholds for ARL 200 per chart from first batches (seeds 1-10) against the true law "
      f"({n_true} batches; 4,000 paths each, capped at 6,000 looks)")
rows = []
for seed in range(1, 11):
    h, a = ms.ra_thresholds(risk, batch, 100, seed)
    first = run_lengths(true_pool, h, 4000, 6000, rng)
    m_, s_ = first.mean(axis=0), first.std(axis=0) / math.sqrt(len(first))
    t2 = first[:, 2]
    hits, looks = (t2 <= 100).sum(), np.minimum(t2, 100).sum()
    rows.append(m_[:2])
    print(f"  seed {seed}: h = {np.array2string(h, precision=3)}: true ARL up {m_[0]:.1f} ({s_[0]:.1f}), down "
          f"{m_[1]:.1f} ({s_[1]:.1f}), two-sided {m_[2]:.1f} ({s_[2]:.1f}); first alarms per look within 100 "
          f"looks {hits / looks:.4f} (s.e. {math.sqrt(hits) / looks:.4f})", flush=True)
rows = np.array(rows)
print(f"  per-chart true ARL range over the ten first batches: {rows.min():.0f}-{rows.max():.0f} "
      f"(up {rows[:, 0].min():.0f}-{rows[:, 0].max():.0f}, down {rows[:, 1].min():.0f}-{rows[:, 1].max():.0f})")
print(f"  ({time.time() - t_start:.0f} s)", flush=True)

# ----------------------------------------------------------------------------- 4. the study's figure
ms.DESIGNS = {name: ms.DESIGNS[name]}
scale = 0.3 if QUICK else 1.0
(_, streams, looks, c, secs), = ms.false_alarms(scale)
rate = c["ra"] / c["ra_looks"]
print(f"\n4. monitoring_study.md's false-alarm table, {name}, {streams} streams (the study's own), computed "
      f"thresholds: RA-CUSUM {rate:.4f} alarms per look ({c['ra']} / {c['ra_looks']}; Poisson s.e. "
      f"{math.sqrt(c['ra']) / c['ra_looks']:.4f}); the study had 0.0132 with the simulated thresholds; "
      f"{secs:.0f} s")
print("seconds", round(time.time() - t_start))
