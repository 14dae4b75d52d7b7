"""Write tests/reference/meta_sites.csv: the per-site estimates that meta_metafor.R pools with metafor.

Usage (from the repository root): ``python tests/reference/meta_sites.py``.

The sites are the groups of ``calib_ci("y ~ p", data=sites_frame(), by="site")``:
eight sites whose outcomes follow the predictions shifted on the logit scale by
a random site effect (N(0, 0.4^2)) and, in half the sites, also spread
(slope 0.7); ``tests/ece/test_meta_analysis.py`` checks that the file holds that
grouped result's numbers.  Three small extra sets test the boundaries: three
sites (the prediction interval's fewest), and five homogeneous sites (tau^2 = 0).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent


def sites_frame(seed: int = 20261125) -> pd.DataFrame:
    """Rows of eight sites (columns y, p, site)."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(8):
        n = int(rng.integers(200, 900))
        lp = rng.normal(-1.0, 1.0, n)
        slope = 0.7 if s % 2 else 1.0
        y = rng.binomial(1, 1.0 / (1.0 + np.exp(-(rng.normal(0.0, 0.4) + slope * lp))))
        parts.append(pd.DataFrame({"y": y, "p": 1.0 / (1.0 + np.exp(-lp)), "site": f"site{s + 1}"}))
    return pd.concat(parts, ignore_index=True)


def extra_sets() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, y, v) of the boundary sets."""
    return [("three", np.array([0.12, -0.30, 0.45]), np.array([0.010, 0.020, 0.015])),
            ("homogeneous", np.array([0.10, 0.12, 0.09, 0.11, 0.10]), np.array([0.02, 0.03, 0.025, 0.02, 0.04]))]


def site_table() -> pd.DataFrame:
    """Columns set, site, yi, vi: the grouped result's four measures, then the boundary sets."""
    import calibtest as ct
    from calibtest.ece.meta_analysis import MEASURES, site_estimates

    grouped = ct.calib_ci("y ~ p", data=sites_frame(), by="site", rng=0)
    frames = []
    for m in MEASURES:
        y, v, _ = site_estimates(grouped.to_frame(), m)
        frames.append(pd.DataFrame({"set": m, "site": [str(i) for i in y.index], "yi": y.to_numpy(),
                                    "vi": v.to_numpy()}))
    for name, y, v in extra_sets():
        frames.append(pd.DataFrame({"set": name, "site": [f"s{i + 1}" for i in range(y.size)], "yi": y, "vi": v}))
    return pd.concat(frames, ignore_index=True)


if __name__ == "__main__":
    site_table().to_csv(HERE / "meta_sites.csv", index=False, float_format="%.17g")
