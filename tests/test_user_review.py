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
