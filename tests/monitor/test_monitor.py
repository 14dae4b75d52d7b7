"""CalibrationMonitor: inputs, refusals that leave the state as it was, merge, save/load, results and display."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core import sequential as sq
from calibtest.monitor.state import LOOK_FIELDS
from calibtest.options import DataError, OptionError


def _batch(rng, n, shift=0.0):
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < np.clip(p + shift, 0, 1)).astype(int)
    return p, y


def _stream(seed=0, looks=6, n=300, shift_from=None, shift=0.1):
    rng = np.random.default_rng(seed)
    return [_batch(rng, n, shift if shift_from is not None and t >= shift_from else 0.0) for t in range(looks)]


def _fed(batches, **options):
    mon = ct.CalibrationMonitor(**options)
    for t, (p, y) in enumerate(batches):
        mon.update(y=y, probs=p, time=t)
    return mon


def _state_text(mon):
    return json.dumps(mon.to_json(), sort_keys=True)


def test_e_process_equals_an_independent_recomputation():
    """The monitor's E_t against the engines called by hand: aGRAPA bets from past cell sums, mixture of products."""
    batches = _stream(looks=5)
    mon = _fed(batches)
    scales, size = sq.DEFAULT_SCALES, sq.n_cells(sq.DEFAULT_SCALES)
    sums, wealth = np.zeros((2, size)), np.zeros(len(scales) + 1)
    for (p, y), e in zip(batches, mon.result().looks["e_value"]):
        bets = np.clip(sums[0] / (sums[1] + 1), -0.5, 0.5)
        for i in range(p.size):  # row by row, the slow way
            cells = [int(math.floor(p[i] * b)) + off for b, off in zip(scales, np.cumsum([0, 2, 3, 5, 9]))]
            gs = [1.0] * len(scales) + [2 * p[i] - 1]
            cells.append(size - 1)
            for f, (c, gv) in enumerate(zip(cells, gs)):
                x = gv * (y[i] - p[i])
                wealth[f] += math.log(1 + bets[c] * x)
                sums[0, c] += x
                sums[1, c] += x * x
        assert e == pytest.approx(np.mean(np.exp(wealth)), rel=1e-9)


def test_formula_frame_file_and_arrays_agree(tmp_path):
    batches = _stream(looks=3)
    by_arrays = _fed(batches)
    by_frame = ct.CalibrationMonitor("y ~ p")
    by_file = ct.CalibrationMonitor("y ~ p", chunksize=70)  # several chunks per file, summed
    for t, (p, y) in enumerate(batches):
        df = pd.DataFrame({"y": y, "p": p})
        by_frame.update(df, time=t)
        path = tmp_path / f"day{t}.csv"
        df.to_csv(path, index=False)
        by_file.update(path, time=t)
    a, b, c = (m.result().looks.drop(columns="time") for m in (by_arrays, by_frame, by_file))
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c, rtol=1e-10)


def test_top1_from_confidence_and_from_probability_matrix():
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.ones(3) * 0.5, 400)
    label = np.array([rng.choice(3, p=row) for row in P])
    mat = ct.CalibrationMonitor()
    mat.update(y=label, probs=P)
    conf = P.max(axis=1)
    correct = (P.argmax(axis=1) == label).astype(int)
    one = ct.CalibrationMonitor("correct ~ confidence", n_classes=3)
    one.update(pd.DataFrame({"correct": correct, "confidence": conf}))
    assert mat.result().mode == one.result().mode == "top1"
    pd.testing.assert_frame_equal(mat.result().looks, one.result().looks)


@pytest.mark.parametrize("bad, error, match", [
    (dict(y=[0, 1], probs=[0.2, 1.2], time=5), DataError, r"\[0, 1\]"),
    (dict(y=[], probs=[], time=5), DataError, "empty batch"),
    (dict(y=[0, 1], probs=[0.2, 0.5], time=-1), OptionError, "out of time order"),
    (dict(y=[0, 1], probs=[0.2, 0.5], time=2), OptionError, "out of time order"),  # equal to the last
    (dict(y=[0, 1], probs=[0.2, 0.5], time="2024-01-01"), OptionError, "date-time"),
    (dict(y=[0, 1], probs=[0.2, 0.5]), OptionError, "time stamp or none"),
    (dict(y=[0, 2], probs=[0.2, 0.5], time=5), DataError, "binary"),
    (dict(y=[0, 1], probs=[[0.2, 0.8], [0.5, 0.5]], time=5), DataError, "target"),
])
def test_refused_batches_leave_the_state_as_it_was(bad, error, match):
    mon = _fed(_stream(looks=3))
    before = _state_text(mon)
    with pytest.raises(error, match=match):
        mon.update(**bad)
    assert _state_text(mon) == before


def test_another_set_of_classes_is_refused():
    rng = np.random.default_rng(3)
    mon = ct.CalibrationMonitor()
    P3 = rng.dirichlet(np.ones(3), 50)
    mon.update(y=P3.argmax(1), probs=pd.DataFrame(P3, columns=["a", "b", "c"]))
    before = _state_text(mon)
    P4 = rng.dirichlet(np.ones(4), 50)
    with pytest.raises(DataError, match="follows one target and one set of classes"):
        mon.update(y=P4.argmax(1), probs=pd.DataFrame(P4, columns=["a", "b", "c", "d"]))
    with pytest.raises(DataError, match="follows one target and one set of classes"):
        mon.update(y=P3.argmax(1), probs=pd.DataFrame(P3, columns=["a", "b", "x"]))
    assert _state_text(mon) == before


def test_a_refused_batch_never_alarms():
    """A batch that would alarm (labels far from the predictions) but is refused leaves no alarm."""
    mon = _fed(_stream(looks=3, n=200))
    p = np.full(5000, 0.1)
    p[0] = 1.5  # one bad prediction: the whole batch is refused
    with pytest.raises(DataError):
        mon.update(y=np.ones(5000, dtype=int), probs=p, time=3)
    assert not mon.result().alarm and mon.result().n_looks == 3
    p[0] = 0.1
    mon.update(y=np.ones(5000, dtype=int), probs=p, time=3)  # the same batch, accepted, does alarm
    mon.update(y=np.ones(5000, dtype=int), probs=p, time=4)
    assert mon.result().alarm


def test_merge_of_parts_equals_the_whole_batch():
    batches = _stream(looks=4, n=400, shift_from=2)
    whole = _fed(batches)
    parts = _fed(batches[:3])
    other = parts.copy()
    p, y = batches[3]
    parts.update(y=y[:150], probs=p[:150], time=3)
    other.update(y=y[150:], probs=p[150:], time=3)
    merged = parts.merge(other)
    pd.testing.assert_frame_equal(merged.result().looks, whole.result().looks, rtol=1e-12)
    assert _state_text(merged).replace(" ", "") != ""


def test_merge_of_first_batch_parts_and_refusals():
    p, y = _stream(looks=1, n=400)[0]
    whole = ct.CalibrationMonitor()
    whole.update(y=y, probs=p)
    a = ct.CalibrationMonitor()
    b = a.copy()
    a.update(y=y[:100], probs=p[:100])
    b.update(y=y[100:], probs=p[100:])
    pd.testing.assert_frame_equal(b.merge(a).result().looks, whole.result().looks, rtol=1e-12)
    assert b.result().ra_thresholds == whole.result().ra_thresholds
    with pytest.raises(OptionError, match="other settings"):
        whole.merge(ct.CalibrationMonitor(alpha=0.1))
    c = whole.copy()
    c.update(y=y, probs=p)
    with pytest.raises(OptionError, match="same state"):
        whole.merge(c)


def test_save_load_round_trip_and_continue(tmp_path):
    batches = _stream(looks=6, n=250, shift_from=3)
    straight = _fed(batches, model="sepsis-v2", margin=0.1)
    saved = _fed(batches[:3], model="sepsis-v2", margin=0.1)
    path = tmp_path / "state.json"
    saved.save(path)
    loaded = ct.CalibrationMonitor.load(path, model="sepsis-v2")
    for t, (p, y) in enumerate(batches[3:], start=3):
        loaded.update(y=y, probs=p, time=t)
    pd.testing.assert_frame_equal(loaded.result().looks, straight.result().looks)
    assert _state_text(loaded) == _state_text(straight)
    assert path.stat().st_size < 20_000


def test_load_refuses_other_version_model_settings_and_altered_files(tmp_path):
    mon = _fed(_stream(looks=2), model="m1")
    path = tmp_path / "s.json"
    mon.save(path)
    text = path.read_text()
    with pytest.raises(DataError, match="not 'm2'"):
        ct.CalibrationMonitor.load(path, model="m2")
    with pytest.raises(DataError, match="alpha, arl differ"):
        ct.CalibrationMonitor.load(path, like=ct.CalibrationMonitor(alpha=0.1, model="m1"))
    record = json.loads(text)
    record["version"] = 99
    path.write_text(json.dumps(record))
    with pytest.raises(DataError, match="version 99"):
        ct.CalibrationMonitor.load(path)
    record = json.loads(text)
    record["settings"]["alpha"] = 0.2
    path.write_text(json.dumps(record))
    with pytest.raises(DataError, match="altered"):
        ct.CalibrationMonitor.load(path)
    path.write_text("not json")
    with pytest.raises(DataError, match="not a monitor state file"):
        ct.CalibrationMonitor.load(path)


def test_detects_a_shift_and_reports_change_time():
    mon = _fed(_stream(looks=40, n=1000, shift_from=20, shift=0.08), arl=200)
    res = mon.result()
    assert res.alarm and res.alarm_look > 20
    assert res.detector_look is not None and res.detector_look > 20
    assert 15 <= res.change_look <= res.detector_look
    assert res.looks["p_value"].is_monotonic_decreasing


def test_result_display_and_dict():
    res = _fed(_stream(looks=3), margin=0.2).result()
    text = str(res.summary())
    assert "Calibration monitor" in text and "E-process" in text
    assert all(len(line) == 78 for line in text.splitlines())
    d = res.to_dict()
    json.dumps(d)
    assert d["n_looks"] == 3 and list(d["looks"]) == list(LOOK_FIELDS)
    assert "<table" in res._repr_html_()


def test_plot_marks_alarms(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    mon = _fed(_stream(looks=30, n=800, shift_from=12, shift=0.1), arl=50)
    fig = mon.plot()
    labels = {line.get_label() for ax in fig.axes for line in ax.get_lines()}
    assert {"e-process alarm", "detector alarm", "estimated change"} <= labels
    fig.savefig(tmp_path / "m.png")


def test_dask_frame_equals_memory():
    dd = pytest.importorskip("dask.dataframe")
    p, y = _stream(looks=1, n=500)[0]
    df = pd.DataFrame({"y": y, "p": p})
    a = ct.CalibrationMonitor("y ~ p")
    a.update(dd.from_pandas(df, npartitions=3))
    b = ct.CalibrationMonitor("y ~ p")
    b.update(df)
    pd.testing.assert_frame_equal(a.result().looks, b.result().looks, rtol=1e-12)


@pytest.mark.parametrize("options, error, match", [
    (dict(alpha=1.5), OptionError, "alpha"), (dict(arl=0.5), OptionError, "arl"),
    (dict(arl=1e6), OptionError, "arl"), (dict(forget=1.0), OptionError, "forget"),
    (dict(odds_ratio="2"), TypeError, "odds_ratio"), (dict(scales=[2, 2]), OptionError, "scales"),
    (dict(n_bins=0), OptionError, "n_bins"), (dict(margin=-0.1), OptionError, "margin"),
    (dict(model=3), TypeError, "model"),
])
def test_options_are_checked_by_name(options, error, match):
    with pytest.raises(error, match=match):
        ct.CalibrationMonitor(**options)
