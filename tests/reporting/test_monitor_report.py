"""The monitoring report (calibtest.reporting.monitor_report): its tables are the result's numbers, its embedded
JSON is the result's to_dict(), it is autoescaped, and a refused path writes nothing."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

import calibtest as ct
from calibtest.options import OptionError, OptionTypeError
from report_helpers import tables


@pytest.fixture(scope="module")
def monitor():
    """30 daily batches, miscalibrated (+0.15) from day 16: every alarm fires."""
    mon = ct.CalibrationMonitor(alpha=0.05, margin=0.3, model="risk <script>alert(1)</script> v2")
    rng = np.random.default_rng(0)
    for day in range(30):
        p = rng.uniform(0, 1, 400)
        q = np.clip(p + (0.15 if day >= 15 else 0.0), 0, 1)
        mon.update(y=rng.random(400) < q, probs=p, time=f"2024-01-{day + 1:02d}")
    return mon


@pytest.fixture(scope="module")
def html(monitor, tmp_path_factory):
    path = tmp_path_factory.mktemp("rep") / "monitoring.html"
    assert monitor.report(path, metadata={"document_id": "MON-7"}) == path
    return path.read_text(encoding="utf-8")


def _table(html, start):
    found = [rows for caption, rows in tables(html) if caption.startswith(start)]
    assert len(found) == 1, start
    return found[0]


def _close(text: str, value) -> bool:
    """A cell shown with 6 significant digits against the exact value: relative error <= 5e-6."""
    return float(text) == pytest.approx(float(value), rel=5.01e-6, abs=1e-300)


def test_looks_table_is_the_results_numbers(monitor, html):
    res = monitor.result()
    rows = _table(html, "The looks")
    header, body = rows[0], rows[1:]
    assert len(body) == len(res.looks) == 30
    col = {h: i for i, h in enumerate(header)}
    for cells, (_, rec) in zip(body, res.looks.iterrows()):
        assert int(cells[col["Look"]]) == rec["look"] and int(cells[col["n"]]) == rec["n"] == 400
        assert cells[col["Time"]] == rec["time"]
        for head, field in (("E_t", "e_value"), ("Anytime p", "p_value"), ("ECE upper", "ece_upper"),
                            ("Detector M_t", "detector"), ("RA-CUSUM up", "ra_up"), ("RA-CUSUM down", "ra_down")):
            assert _close(cells[col[head]], rec[field]), (head, cells[col[head]], rec[field])
        for head, (lo, hi) in (("CITL CS", ("citl_lower", "citl_upper")), ("O/E CS", ("oe_lower", "oe_upper"))):
            a, b = re.fullmatch(r"\[(\S+), (\S+)\]", cells[col[head]]).groups()
            assert _close(a, rec[lo]) and _close(b, rec[hi])
        assert ("e-process" in cells[col["Alarms"]]) == bool(rec["alarm"])
        assert ("RA-CUSUM" in cells[col["Alarms"]]) == bool(rec["ra_alarm"])


def test_alarms_plan_and_status_tables(monitor, html):
    res = monitor.result()
    assert res.alarm_look is not None and res.detector_look is not None and res.ra_look is not None
    alarms = {r[0]: r[1:] for r in _table(html, "The alarms")[1:]}
    assert alarms["E-process E_t ≥ 1/α"][1] == f"look {res.alarm_look} (time {res.time_of(res.alarm_look)})"
    assert alarms["E-detector M_t ≥ ARL"][1] == f"look {res.detector_look} (time {res.time_of(res.detector_look)})"
    assert alarms["E-detector M_t ≥ ARL"][2] == f"look {res.change_look} (time {res.time_of(res.change_look)})"
    assert alarms["RA-CUSUM (either chart) ≥ h"][1].startswith(f"look {res.ra_look} ")
    h_up, h_down = re.match(r"(\S+) \(up\), (\S+) \(down\)", alarms["RA-CUSUM (either chart) ≥ h"][0]).groups()
    assert _close(h_up, res.ra_thresholds[0]) and _close(h_down, res.ra_thresholds[1])
    assert float(alarms["E-process E_t ≥ 1/α"][0]) == 1 / 0.05
    plan = dict(_table(html, "The monitoring plan"))
    assert plan["Settings fingerprint (SHA-256)"] == res.fingerprint == monitor.settings.fingerprint
    assert plan["Level α (alpha)"] == "0.05" and plan["ECE margin δ (margin)"] == "0.3"
    assert plan["Bin scales of the e-process (scales)"] == "1, 2, 4, 8, 16"
    assert plan["In-control ARL, looks (arl)"] == "20" and plan["RA-CUSUM odds ratio R_A (odds_ratio)"] == "2"
    assert plan["Model identifier"] == "risk <script>alert(1)</script> v2"
    status = {r[0]: r[1:] for r in _table(html, "The statistics at the last look")[1:]}
    last = res.looks.iloc[-1]
    assert _close(status["E-process E_t"][0], last["e_value"]) and status["E-process E_t"][2] == str(res.alarm_look)


def test_embedded_json_is_to_dict(monitor, html):
    m = re.search(r'<a download="monitor-result.json" href="data:application/json;charset=utf-8;base64,([^"]+)"',
                  html)
    assert m
    embedded = json.loads(base64.b64decode(m.group(1)).decode("utf-8"))
    assert embedded == json.loads(json.dumps(monitor.result().to_dict()))


def test_autoescaped_and_guarantee_in_words(html):
    assert "<script" not in html  # the model id is text, never markup
    assert "risk &lt;script&gt;alert(1)&lt;/script&gt; v2" in html
    text = re.sub(r"<[^>]+>", " ", html.split('id="guarantee"')[1].split('id="methods"')[0])
    assert "Ville" in text and "at most α = 0.05" in text and "whatever the number and the timing" in text
    assert "ARL = 20 looks" in text
    assert "MON-7" in html and '<img src="data:image/png;base64,' in html


def test_calibtest_report_takes_a_monitor_or_its_result(monitor, tmp_path):
    a = ct.report(monitor, tmp_path / "a.html")
    b = ct.report(monitor.result(), tmp_path / "b.html")
    looks = [_table(p.read_text(encoding="utf-8"), "The looks") for p in (a, b)]
    assert looks[0] == looks[1] == _table(monitor.result().report(tmp_path / "c.html").read_text(encoding="utf-8"),
                                          "The looks")
    with pytest.raises(OptionError, match="labels"):
        ct.report(monitor, tmp_path / "d.html", labels=["x"])
    assert not (tmp_path / "d.html").exists()


@pytest.mark.parametrize("name", ["report.txt", "no_folder/report.html"])
def test_refused_path_leaves_no_file(monitor, tmp_path, name):
    with pytest.raises(OptionError):
        monitor.report(tmp_path / name)
    assert list(tmp_path.rglob("*")) == []


def test_not_a_monitor_and_empty_monitor(tmp_path):
    from calibtest.reporting.monitor_report import monitor_report

    with pytest.raises(OptionTypeError, match="CalibrationMonitor or a MonitorResult"):
        monitor_report({"looks": []}, tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()
    html = ct.CalibrationMonitor().report(tmp_path / "empty.html").read_text(encoding="utf-8")
    assert "No batch has been added" in html and _table(html, "The looks")[1:] == []
