"""Fixes from a user's review of the survival, clustered and meta-analysis features (wording and consistency)."""
import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.reporting.html import _public


def test_public_drops_a_trailing_see_with_its_document():
    # the survival result's refusal of Hosmer-Lemeshow ends "...: see docs/survival.md"; the report
    # leaves the package's documents out and must not leave a dangling "see"
    text = ("val_prob needs binary outcomes; 3 rows of this survival result are censored before the "
            "horizon (their outcomes are IPCW-weighted): see docs/survival.md")
    assert _public(text) == ("val_prob needs binary outcomes; 3 rows of this survival result are censored "
                             "before the horizon (their outcomes are IPCW-weighted)")
    assert _public("a fact, see ``docs/scale.md``.") == "a fact."
    assert _public("a fact (see docs/scale.md).") == "a fact."
    assert _public("a fact (docs/scale.md, section 2).") == "a fact."
    assert _public("described in docs/clusters.md") == "described in"  # a bare path goes, as before


@pytest.fixture(scope="module")
def clustered():
    """600 rows from 15 sites with a shared site effect; calibrated on average."""
    rng = np.random.default_rng(7)
    site = np.repeat(np.arange(15), 40)
    p = rng.uniform(0.1, 0.9, site.size)
    shift = rng.normal(0, 0.05, 15)[site]
    y = rng.binomial(1, np.clip(p + shift, 0, 1))
    df = pd.DataFrame({"y": y, "p": p, "site": site})
    return ct.calib_ci("y ~ p", data=df, cluster="site", rng=3)


def test_clustered_notes_name_the_sign_flip_test_not_label_draws(clustered):
    res = clustered
    assert res.clustering is not None and res.null == "monte-carlo"
    text = res.summary().as_text()
    flat = " ".join(text.split())
    assert "The monte-carlo test" not in flat
    assert res.conf_int().contains_zero  # the note below is the one of an interval holding 0
    assert f"The cluster sign-flip ({res.clustering.n_patterns} sign patterns) test does not reject" in flat
    assert "label draws" not in flat
    assert "(monte-carlo, sign flips of whole clusters)" in flat
