"""calib_ci on Dask DataFrames: on a real 2-process LocalCluster and on the local scheduler."""
from __future__ import annotations

import logging
from importlib.util import find_spec

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from scale_helpers import assert_same_result

pytestmark = pytest.mark.skipif(any(find_spec(m) is None for m in ("dask", "distributed", "pyarrow")),
                                reason="needs dask, distributed and pyarrow")


def frame(n: int = 4000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.2, 1, n)
    conf[:5] = 1.0
    df = pd.DataFrame({"conf": conf, "correct": (rng.uniform(size=n) < conf ** 1.3).astype(np.int8),
                       "extra": rng.normal(size=n)})
    df.loc[[17, 3 * n // 4 + 1], "conf"] = np.nan
    return df


@pytest.fixture(scope="module")
def parquet_dir(dd, tmp_path_factory):
    df = frame()
    path = tmp_path_factory.mktemp("dask") / "preds"
    dd.from_pandas(df, npartitions=7).to_parquet(path)
    return df, path


@pytest.fixture(scope="module")
def client():
    import distributed

    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    cl = distributed.Client(cluster)
    yield cl
    cl.shutdown()  # stops the workers at once (close() waits for them to time out)
    cluster.close()


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_local_cluster_equals_in_memory(dd, parquet_dir, client):
    df, path = parquet_dir
    ddf = dd.read_parquet(path)
    assert ddf.npartitions == 7
    ref = ct.calib_ci("correct ~ conf", data=df, n_classes=5, missing="drop")
    import distributed

    with distributed.get_task_stream(client) as stream:  # auto B: a counting pass, then the binning
        res = ct.calib_ci("correct ~ conf", data=ddf, n_classes=5, missing="drop")
    assert_same_result(res, ref)
    assert res.n_dropped == 2 and res.data is None
    assert res.source["scheduler"] == f"distributed {client.scheduler.address}"
    assert res.source["npartitions"] == 7 and res.source["columns"] == ["correct", "conf"]
    # the per-partition sums were computed by the worker processes of the cluster
    ran = {(_task_prefix(t["key"]), t["worker"]) for t in stream.data}
    assert {p for p, _ in ran} >= {"partition_usable", "partition_sums", "merge"}
    assert {w for p, w in ran if p == "partition_sums"} <= set(client.nthreads())  # asks the scheduler now

def _task_prefix(key) -> str:
    from dask.utils import key_split
    return key_split(key)


def test_local_cluster_ships_formula_variables(dd, parquet_dir, client):
    df, path = parquet_dir
    shrink = lambda x: 0.2 + 0.8 * x  # noqa: E731 - a closure the workers must receive by value
    ref = ct.calib_ci("correct ~ shrink(conf)", data=df, n_classes=5, n_bins=12, missing="drop")
    res = ct.calib_ci("correct ~ shrink(conf)", data=dd.read_parquet(path), n_classes=5, n_bins=12,
                      missing="drop")
    assert_same_result(res, ref)


def test_threaded_scheduler_and_partition_errors(dd):
    df = frame(600).dropna()
    ddf = dd.from_pandas(df, npartitions=20)
    ref = ct.calib_ci("correct ~ conf", data=df, n_classes=5)
    with __import__("dask").config.set(scheduler="threads"):
        res = ct.calib_ci("correct ~ conf", data=ddf, n_classes=5)
    assert_same_result(res, ref)
    bad = df.copy()
    bad.iloc[590, 0] = 1.5
    with pytest.raises(ValueError, match=r"Dask partition 19: .*must lie in \[0, 1\]"):
        ct.calib_ci("correct ~ conf", data=dd.from_pandas(bad, npartitions=20), n_classes=5, n_bins=4)
    with pytest.raises(ValueError, match="names column 'confidence', which is not in the Dask DataFrame"):
        ct.calib_ci("correct ~ confidence", data=ddf)
    with pytest.raises(ValueError, match="chunksize= applies to files"):
        ct.calib_ci("correct ~ conf", data=ddf, chunksize=10)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_bootstrap_on_a_dask_frame_is_refused(dd):
    ddf = dd.from_pandas(frame(100), npartitions=2)
    with pytest.raises(ValueError, match="needs in-memory data .* a file or a Dask frame"):
        ct.calib_ci("correct ~ conf", data=ddf, method="bootstrap")


def test_a_dask_pass_shows_its_progress_only_when_asked(dd, capsys):
    # One progress helper (calibtest.core.progress): progress=True draws a bar over the pass's tasks on stderr;
    # the default draws none outside a terminal; the numbers are the same either way.
    pytest.importorskip("tqdm")
    df = frame(400)
    ddf = dd.from_pandas(df, npartitions=4)
    quiet = ct.calib_ci("correct ~ conf", data=ddf, n_classes=5, missing="drop")
    assert capsys.readouterr().err == ""
    shown = ct.calib_ci("correct ~ conf", data=ddf, n_classes=5, missing="drop", progress=True)
    err = capsys.readouterr().err
    assert "Dask: counting rows" in err and "Dask: bin sums" in err and "100%" in err
    assert shown.estimate == quiet.estimate and shown.ci_upper == quiet.ci_upper
