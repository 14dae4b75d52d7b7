"""``calibtest monitor``: batches in time order, the state file kept, one line per batch, exit status 3 on alarm."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.cli import EXIT_STATUSES, main


def _write_days(folder, days, shift_from=None, n=800, seed=1, fmt="csv"):
    rng = np.random.default_rng(seed)
    folder.mkdir(exist_ok=True)
    frames = []
    for d in range(days):
        p = rng.uniform(0.05, 0.95, n)
        q = np.clip(p + (0.15 if shift_from is not None and d >= shift_from else 0.0), 0, 1)
        df = pd.DataFrame({"y": (rng.random(n) < q).astype(int), "p": p, "day": d})
        # names out of time order on purpose for --time: z.. for early days
        name = f"day{d:02d}.{fmt}"
        df.to_csv(folder / name, index=False) if fmt == "csv" else df.to_parquet(folder / name)
        frames.append(df)
    return frames


def test_monitor_matches_python_and_keeps_state(tmp_path, capsys):
    frames = _write_days(tmp_path / "d", 6)
    state = str(tmp_path / "s.json")
    status = main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", state, "--model", "m"])
    assert status == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6 and lines[0].startswith("look 1 day00.csv n=800")
    mon = ct.CalibrationMonitor("y ~ p", model="m")
    for df in frames:
        mon.update(df)
    saved = ct.CalibrationMonitor.load(state)
    pd.testing.assert_frame_equal(saved.result().looks, mon.result().looks)
    # a second run skips what is in the state and adds nothing
    assert main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", state, "--model", "m"]) == 0
    assert capsys.readouterr().out.count("skip") == 6


def test_alarm_exit_status_and_time_column(tmp_path, capsys):
    _write_days(tmp_path / "d", 10, shift_from=5, fmt="parquet")
    state = str(tmp_path / "s.json")
    status = main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", state, "--time", "day",
                   "--arl", "100"])
    out = capsys.readouterr().out
    assert status == EXIT_STATUSES["monitor alarm"] == 3
    assert "ALARM" in out and "look 10" in out
    assert ct.CalibrationMonitor.load(state).result().looks["time"].tolist() == list(range(10))


def test_refusals_leave_the_state_file_as_it_was(tmp_path, capsys):
    _write_days(tmp_path / "d", 3)
    state = tmp_path / "s.json"
    assert main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", str(state)]) == 0
    before = state.read_bytes()
    assert main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", str(state), "--alpha",
                 "0.1"]) == 1
    assert "another model or monitoring plan" in capsys.readouterr().err
    bad = tmp_path / "e"
    bad.mkdir()
    pd.DataFrame({"y": [0, 1], "p": [0.5, 1.5]}).to_csv(bad / "day99.csv", index=False)
    assert main(["monitor", str(bad), "--formula", "y ~ p", "--state", str(state)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("calibtest: error:") and "[0, 1]" in err and len(err.strip().splitlines()) == 1
    assert state.read_bytes() == before
    state.write_text(json.dumps({**json.loads(before), "version": 7}))
    assert main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", str(state)]) == 1
    assert "version 7" in capsys.readouterr().err


def test_report_option_writes_the_monitoring_report(tmp_path, capsys):
    from report_helpers import tables

    _write_days(tmp_path / "d", 8, shift_from=4, fmt="parquet")
    state, out = str(tmp_path / "s.json"), tmp_path / "mon.html"
    status = main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", state, "--time", "day",
                   "--model", "m<1>", "--report", str(out), "--title", "Daily monitoring"])
    assert status == EXIT_STATUSES["monitor alarm"]
    assert f"calibtest: wrote {out}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    res = ct.CalibrationMonitor.load(state).result()
    looks = [rows for caption, rows in tables(html) if caption.startswith("The looks")][0]
    assert [int(r[0]) for r in looks[1:]] == res.looks["look"].tolist() == list(range(1, 9))
    assert [float(r[3]) for r in looks[1:]] == pytest.approx(res.looks["e_value"].tolist(), rel=5.01e-6)
    assert "Daily monitoring" in html and "m&lt;1&gt;" in html and "--report" in html


def test_report_path_refused_before_any_batch(tmp_path, capsys):
    _write_days(tmp_path / "d", 2)
    state = tmp_path / "s.json"
    status = main(["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--state", str(state), "--report",
                   str(tmp_path / "r.txt")])
    assert status == 2 and "--report must end in .html" in capsys.readouterr().err
    assert not state.exists() and not (tmp_path / "r.txt").exists()


def test_many_files_show_a_bar_on_a_terminal_and_the_same_lines(tmp_path, capsys, monkeypatch):
    # The one progress helper: over MONITOR_PROGRESS_FILES batch files or more, an interactive terminal gets a
    # bar on stderr; every look's line is printed as without it, and a non-interactive run shows no bar.
    pytest.importorskip("tqdm")
    from calibtest import cli
    from calibtest.core import progress

    days = cli.MONITOR_PROGRESS_FILES
    _write_days(tmp_path / "d", days, n=100)
    args = ["monitor", str(tmp_path / "d"), "--formula", "y ~ p", "--model", "m"]
    assert main(args + ["--state", str(tmp_path / "a.json")]) == 0
    quiet = capsys.readouterr()
    monkeypatch.setattr(progress, "interactive", lambda: True)
    assert main(args + ["--state", str(tmp_path / "b.json")]) == 0
    shown = capsys.readouterr()
    assert quiet.err == "" and "monitor: 100%" in shown.err and f"{days}/{days}" in shown.err
    assert shown.out == quiet.out and len(quiet.out.splitlines()) >= days
