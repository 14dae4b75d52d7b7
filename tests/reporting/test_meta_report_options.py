"""The report's meta-analysis method: ``report(..., meta_method=, hartung_knapp=)`` and ``calibtest report
--meta-method/--hartung-knapp``; the section shows the pooled numbers of ``meta_analysis`` with that method."""
import numpy as np
import pandas as pd
import pytest
from scipy import special

import calibtest as ct
from calibtest.display.format import fmt
from calibtest.options import OptionError
from calibtest.reporting.html import build_context


def sites(seed=0, G=6):
    rng = np.random.default_rng(seed)
    site = np.repeat(np.arange(G), rng.integers(150, 300, G))
    p = special.expit(rng.normal(-0.5, 1.0, site.size))
    y = (rng.uniform(size=site.size) < special.expit(special.logit(p) + rng.normal(0, 0.4, G)[site])).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": [f"s{g}" for g in site]})


@pytest.mark.parametrize("method, hk", [("DL", False), ("PM", True)])
def test_sites_section_uses_the_method(method, hk):
    grouped = ct.calib_ci("y ~ p", data=sites(), by="site", null="asymptotic")
    ctx = build_context(grouped, figures=False, meta_method=method, hartung_knapp=hk)
    section = ctx["models"][0]["sites"]
    want = grouped.meta_analysis(method=method, hartung_knapp=hk)
    assert want.method == method and f"τ² by {method}" in section["table"]["caption"]
    r = want.pooled["log_oe"].row(natural=True)
    assert fmt(r["estimate"], 4) in str(section["table"]["rows"][0])
    default = build_context(grouped, figures=False)["models"][0]["sites"]
    assert "τ² by REML" in default["table"]["caption"]
    with pytest.raises(OptionError, match="meta_method"):
        build_context(grouped, figures=False, meta_method="ML")


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_report_meta_method(tmp_path, capsys):
    from calibtest.cli import main

    data = tmp_path / "d.csv"
    sites().to_csv(data, index=False)
    out = tmp_path / "r.html"
    argv = ["report", str(data), "--formula", "y ~ p", "--by", "site", "-o", str(out)]
    assert main(argv + ["--meta-method", "DL", "--hartung-knapp"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "τ² by DL" in html and "Hartung–Knapp" in html
    with pytest.raises(SystemExit) as exc:  # argparse: a usage error, one line
        main(argv + ["--meta-method", "XX"])
    assert exc.value.code != 0
    err = capsys.readouterr().err
    assert "meta-method" in err and "Traceback" not in err
