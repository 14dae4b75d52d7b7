"""Why the RA-CUSUM false-alarmed 0.0132 per look against 0.01 in the top-1-near-1 design of monitoring_study.md.

Run: ``PYTHONPATH=. nice -n 10 python vignettes/ra_cusum_arl.py > vignettes/ra_cusum_arl.txt`` (about 2 minutes).

1. A pool of 200,000 batch scores (both charts, from the same batches) drawn from the design's true law; CUSUM
   paths resampled from it give the true in-control run lengths of any thresholds (up, down, two-sided), and
   the study's statistic (first alarms / looks within 100 looks).
2. The thresholds of the study (seed 1) and of the monitor made from other first batches (seeds 1-10), at the
   monitor's settings (pool of 2,000 batch scores, 500 paths): their true ARLs against the target 200 per chart.
3. The same first batches with a pool of 20,000 and 2,000 paths, and a first "batch" of 50,000 rows: which part
   of the error is the simulation's and which the first batch's.
"""
import sys, time, math
import numpy as np
sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import monitoring_study as ms
from calibtest.core import sequential as sq

ARL = 100
def true_pool(risk, batch, n, rng):
    """(n, 2) paired batch scores (R=2, R=1/2) from the design's true law, in blocks."""
    out = np.empty((n, 2)); step = max(1, 2_000_000 // batch)
    for s in range(0, n, step):
        m = min(step, n - s)
        p = risk(rng, m * batch).reshape(m, batch); y = rng.random(p.shape) < p
        out[s:s+m, 0] = sq.ra_scores(p, y, 2.0).sum(1); out[s:s+m, 1] = sq.ra_scores(p, y, 0.5).sum(1)
    return out

def run_lengths(pool, h, n_paths, max_steps, rng):
    s = np.zeros((n_paths, 2)); first = np.full((n_paths, 3), max_steps + 1)
    for t in range(1, max_steps + 1):
        s = np.maximum(0.0, s + pool[rng.integers(0, len(pool), n_paths)])
        hit = s >= h
        for j in range(2):
            new = hit[:, j] & (first[:, j] > max_steps); first[new, j] = t
        new = hit.any(1) & (first[:, 2] > max_steps); first[new, 2] = t
        if t % 100 == 0 and (first[:, 2] <= max_steps).all() and t > 20 * ARL:
            break
    return first

def summary(first, label):
    m = first.mean(0); se = first.std(0) / math.sqrt(len(first))
    t2 = first[:, 2]; hits = (t2 <= 100).sum(); looks = np.minimum(t2, 100).sum()
    r = hits / looks
    print(f"{label}: ARL up {m[0]:.1f} ({se[0]:.1f}) down {m[1]:.1f} ({se[1]:.1f}) two-sided {m[2]:.1f} ({se[2]:.1f}); "
          f"study's rate in 100 looks {r:.4f} (Poisson s.e. {math.sqrt(hits)/looks:.4f})", flush=True)

t0 = time.time()
rng = np.random.default_rng(99)
name = [k for k in ms.DESIGNS if "top-1" in k][0]
risk, batch = ms.DESIGNS[name][0], ms.DESIGNS[name][1]
designs = {"top1": (risk, batch), "beta": (ms.beta_risks, 200), "lognorm": (ms.logistic_normal, 1000)}
which = sys.argv[1] if len(sys.argv) > 1 else "top1"
risk, batch = designs[which]
pool = true_pool(risk, batch, 200_000, rng)
print(which, "true pool done", time.time() - t0, "mean", pool.mean(0), "sd", pool.std(0), flush=True)
h, a = ms.ra_thresholds(risk, batch, ARL, 1)
print("design thresholds (seed 1)", h, "simulated ARLs", a, flush=True)
summary(run_lengths(pool, h, 20000, 6000, rng), "seed-1 thresholds, true law")
# the threshold's own pool (from p_ref) vs the truth: per chart ARL at h under the p_ref pool with many paths
rr = np.random.default_rng(1); p_ref = np.sort(risk(rr, batch))
refpool = np.column_stack([sq.ra_batch_pool(p_ref, r, np.random.default_rng(5), n_pool=200_000 // 10) for r in (2.0, 0.5)])
print("p_ref pool (unpaired) mean", refpool.mean(0), "sd", refpool.std(0), flush=True)
# threshold spread over seeds
hs = []
for seed in range(1, 11):
    h2, a2 = ms.ra_thresholds(risk, batch, ARL, seed)
    hs.append(h2)
    first = run_lengths(pool, h2, 4000, 6000, rng)
    summary(first, f"seed {seed} h={np.round(h2,3)} sim ARL={np.round(a2,0)}")
for label, kw in (("pool 20000, paths 2000", dict(n_pool=20000, n_paths=2000)),
                  ("true law (p_ref = 50,000 rows), pool 20000, paths 2000", dict(n_pool=20000, n_paths=2000, big=True))):
    for seed in range(1, 7):
        r2 = np.random.default_rng(seed)
        p_ref = np.sort(risk(r2, 50_000 if kw.get("big") else batch))
        hs = []
        for R in (2.0, 0.5):
            bp = sq.ra_batch_pool(p_ref[:batch] if not kw.get("big") else p_ref, R, r2, n_pool=kw["n_pool"]) if not kw.get("big") else \
                 (lambda pp: sq.ra_scores(pp, r2.random(pp.shape) < pp, R).sum(1))(p_ref[r2.integers(0, p_ref.size, (kw["n_pool"], batch))])
            hs.append(sq.ra_threshold(bp, 200, r2, n_paths=kw["n_paths"])[0])
        summary(run_lengths(pool, np.array(hs), 4000, 6000, rng), f"{label} seed {seed} h={np.round(hs,3)}")

print("seconds", time.time() - t0)
