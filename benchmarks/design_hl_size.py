"""Size of the design-based Hosmer-Lemeshow test (calibtest.checks.evidence_clustered) on calibrated clustered rows.

Rows of G clusters of m rows; the predictions carry a site effect (their logit is 0.5 a_g + e_i, a_g and e_i
normal) and y ~ Bernoulli(p), so the model is calibrated and every mean residual is 0. The F-adjusted test
(g = 10 groups, F(g, G - g)) is run with the cluster covariance of the package (the totals' form: each
cluster's share of the groups' mean residuals, centred over the clusters) and, for comparison, the ratio
linearisation of Archer, Lemeshow and Hosmer (2007), z_cj = (S_cj - m_j N_cj) / n_j. Rejection rates at
alpha = 0.05 over ``REPS`` data sets per design (Monte Carlo s.e. about 0.007).

    python benchmarks/design_hl_size.py
"""
import numpy as np
from scipy import special, stats

from calibtest.checks.evidence_clustered import design_hosmer_lemeshow

REPS = 1000
DESIGNS = [(30, 40), (30, 200), (60, 40), (100, 20)]


def ratio_form_pvalue(y, p, site, G, g=10):
    n = y.size
    order = np.argsort(p, kind="stable")
    sizes = np.array([len(a) for a in np.array_split(order, g)])
    grp = np.empty(n, dtype=int)
    grp[order] = np.repeat(np.arange(g), sizes)
    cell = site * g + grp
    S = np.bincount(cell, weights=y - p, minlength=G * g).reshape(G, g)
    N = np.bincount(cell, minlength=G * g).reshape(G, g)
    mean = S.sum(axis=0) / sizes
    z = (S - N * mean) / sizes
    V = G / (G - 1) * z.T @ z
    f = G - 1
    F = (f - g + 1) * float(mean @ np.linalg.solve(V, mean)) / (f * g)
    return stats.f.sf(F, g, f - g + 1)


def main():
    rng = np.random.default_rng(11)
    print("G    m   size (package)   size (ratio form)")
    for G, m in DESIGNS:
        site = np.repeat(np.arange(G), m)
        hits = np.zeros(2)
        for _ in range(REPS):  # a loop over simulated data sets
            p = special.expit(rng.normal(-0.5, 1.0, G)[site] * 0.5 + rng.normal(-0.5, 0.8, site.size))
            y = (rng.uniform(size=site.size) < p).astype(float)
            hits += [design_hosmer_lemeshow(y, p, site, G).pvalue <= 0.05, ratio_form_pvalue(y, p, site, G) <= 0.05]
        print(f"{G:<4d} {m:<4d} {hits[0] / REPS:<16.3f} {hits[1] / REPS:.3f}")


if __name__ == "__main__":
    main()
