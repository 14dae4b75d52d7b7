"""The one progress helper (calibtest.core.progress): its decisions, and that every long step uses it."""
import io
import sys
import types

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core import counter_draws, progress

tqdm = pytest.importorskip("tqdm")


class _TTY(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def no_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delitem(sys.modules, "IPython", raising=False)


@pytest.mark.parametrize("show, tty, ci, work, expected", [
    (None, True, None, None, True),     # a terminal
    (None, False, None, None, False),   # a pipe or a file: a non-interactive run
    (None, True, "true", None, False),  # CI
    (None, True, None, 5.0, False),     # a short step (work below min_work = 10)
    (None, True, None, 50.0, True),
    (False, True, None, None, False),   # progress=False
    (True, False, "true", None, True),  # progress=True: always
])
def test_decisions(monkeypatch, no_ci, show, tty, ci, work, expected):
    monkeypatch.setattr(sys, "stderr", _TTY() if tty else io.StringIO())
    if ci is not None:
        monkeypatch.setenv("CI", ci)
    assert progress.want_progress(show, work, 10.0) is expected


def test_notebook_counts_as_interactive(monkeypatch, no_ci):
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a kernel's stderr is no terminal
    assert progress.want_progress(None) is False
    shell = type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert progress.in_notebook() and progress.want_progress(None) is True
    other = type("TerminalInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: other))
    assert progress.want_progress(None) is False
    monkeypatch.setenv("CI", "1")
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert progress.want_progress(None) is False


def test_bad_progress_refused():
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        progress.want_progress("yes")


def test_the_bar_writes_to_stderr_and_the_null_bar_does_nothing(monkeypatch, no_ci):
    err = _TTY()
    monkeypatch.setattr(sys, "stderr", err)
    with progress.progress_bar(4, "steps") as bar:
        bar.update(4)
    assert "steps" in err.getvalue() and "4/4" in err.getvalue()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress.progress_bar(4, "steps") as bar:
        assert isinstance(bar, progress._NoBar)


@pytest.fixture
def bars(monkeypatch, no_ci):
    """Every bar made, by description: the helper told it is interactive, tqdm replaced by a recorder."""
    made = []

    class Recorder:
        def __init__(self, total=None, desc=None, **kwargs):
            self.total, self.desc, self.n = total, desc, 0
            made.append(self)

        def update(self, n=1):
            self.n += n

        def close(self):
            pass

    monkeypatch.setattr(progress, "interactive", lambda: True)
    monkeypatch.setattr(tqdm, "tqdm", Recorder)
    return made


def _frame(n, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 5, n)
    return pd.DataFrame({"y": (rng.uniform(size=n) < p).astype(float), "p": p})


def test_label_draws_use_the_helper(bars, monkeypatch):
    df = _frame(3000)
    ct.calib_test("y ~ p", data=df, null="monte-carlo")
    assert not [b for b in bars if b.desc == "label draws"]  # 3000 rows x 999 draws: below 10^9
    monkeypatch.setattr(counter_draws, "PROGRESS_MIN_LABELS", 0)
    ct.calib_test("y ~ p", data=df, null="monte-carlo")
    draws = [b for b in bars if b.desc == "label draws"]
    assert len(draws) == 1 and draws[0].n == draws[0].total == 3000


def test_thin_cells_of_the_gaussian_null_use_the_helper(bars, monkeypatch):
    from calibtest.core import gaussian_null
    monkeypatch.setattr(gaussian_null, "PROGRESS_MIN_DRAWS", 0)
    ct.calib_test("y ~ p", data=_frame(3000), null="gaussian", n_draws=99)
    thin = [b for b in bars if b.desc.startswith("Gaussian null")]
    assert len(thin) == 1 and thin[0].n == 99


def test_streamed_passes_and_evidence_use_the_helper(bars, tmp_path):
    path = tmp_path / "rows.parquet"
    _frame(4000).to_parquet(path)
    ct.calib_test("y ~ p", data=str(path), chunksize=1000)
    assert [(b.desc, b.n) for b in bars] == [("rows.parquet", 4000)]  # n from the Parquet metadata; one pass
    del bars[:]
    res = ct.calib_ci("y ~ p", data=str(path), chunksize=1000)
    assert len(bars) == 1  # the interval's pass (calib_ci's own bar, through the helper)
    res.evidence()
    assert len(bars) >= 5 and all((b.desc, b.n) == ("rows.parquet", 4000) for b in bars)  # test, HL, fits, bins


def test_sample_size_simulation_uses_the_helper(bars, monkeypatch):
    from calibtest.api import sample_size
    monkeypatch.setattr(sample_size, "SIMULATION_PROGRESS_ROWS", 0)
    p = np.random.default_rng(1).beta(2, 5, 500)
    ct.calib_sample_size(probs=p, slope=0.6, power=0.8, method="simulation", n_sim=20, rng=1)
    sims = [b for b in bars if b.desc.startswith("simulated studies at n = ")]
    assert sims and all(b.n == b.total == 20 for b in sims)


@pytest.mark.slow
def test_report_uses_the_helper(bars, tmp_path):
    res = ct.calib_ci("y ~ p", data=_frame(500))
    ct.report(res, tmp_path / "r.html")
    rep = [b for b in bars if b.desc == "report r.html"]
    assert len(rep) == 1 and rep[0].n == rep[0].total == 3
