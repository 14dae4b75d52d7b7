"""Snapshot of the public API's numbers, to check that a refactor leaves them bit-identical.

Usage
-----
``python benchmarks/api_snapshot.py OUT.json``
    Run a fixed set of seeded public calls and write every value they produce
    to ``OUT.json`` (one flat JSON object, key -> value; floats as ``repr``, so
    two files are equal exactly when the numbers are bit-identical).
``python benchmarks/api_snapshot.py OLD.json NEW.json``
    List the keys whose values changed, are gone or are new (the first 200 of
    each; ``--all`` after the two files lists every one).  The exit status is 0
    when the two files are equal, 1 otherwise.

To prove that a refactor changes no number except the ones it fixes, run the
script on the code before and after, each from its own checkout::

    cd /path/to/old-checkout && PYTHONPATH=$PWD python benchmarks/api_snapshot.py /tmp/before.json
    cd /path/to/new-checkout && PYTHONPATH=$PWD python benchmarks/api_snapshot.py /tmp/after.json
    python benchmarks/api_snapshot.py /tmp/before.json /tmp/after.json

and account for every changed key.  A few calls deliberately use the default
random generator (their names end in ``_defaultrng``): run the snapshot twice
on the same code and compare the two files to see which keys the default
generator leaves irreproducible (on commit 7d7eccf: the Monte Carlo and
sign-flip seeds of ``ci_cluster_defaultrng``, ``ci_weighted_defaultrng``,
``test_by_defaultrng`` and ``test_cluster_defaultrng`` with the numbers and
texts that follow from them, the pooled threshold of
``ci_by_cluster_defaultrng`` whose seed is recorded nowhere, and the
evidence-table seed in the text of ``report_by_defaultrng``).  The run takes
about a minute; ``--verbose`` after ``OUT.json`` prints each call's time.

What is covered
---------------
Kinds of analysis: binary, top-1, top-k, full, survival at a horizon, competing
risks (``cause=``), weighted, prevalence, clustered (``cluster=``), grouped
(``by=``), grouped and clustered, streamed from CSV and Parquet files
(``data="file.csv", chunksize=``) and from a Dask frame (local synchronous
scheduler) -- for calib_ci, calib_test, evidence, val_prob, hosmer_lemeshow,
survival_calibration, tcal_test, calib_compare (paired and not),
calib_power / calib_sample_size (``censored_fraction=``, ``margin=``),
flexible_calibration, the acceptance tests, and plan with the acceptance
evaluation and the deviations of a result.

Consumers: every number of ``to_dict()`` (key ``NAME.<path>``), the text of
``str(summary())`` (``NAME.summary``), the warnings a call issues
(``NAME.warnings[i]``), the command line's output for each subcommand
(``cli_*``: exit status, the ``--json`` object flattened, or the printed text;
the plan file written by ``calibtest plan``) and the reports (``report_*`` and
``cli_report_*``: the visible text of the HTML with whitespace collapsed under
``NAME.html_text``, every file embedded in it as a ``data:`` link flattened
under ``NAME.files.<file name>`` (CSV rows, or JSON numbers), and the SHA-256
of each embedded image under ``NAME.images[i]``; for a report made through
the API also the ``to_dict()`` of its results and comparisons under
``NAME.results[i]`` and ``NAME.comparisons[i]``: the ``result-*.json`` and
``comparison-*.json`` a PDF report attaches, which an HTML report does not
embed).

An exception is recorded as the value ``"error: <type>: <message>"``, so a
changed refusal shows up as a changed value.

Portability
-----------
The data files are written to a temporary folder whose path is replaced by
``<TMP>`` in every value, and the creation times of reports and of the plan
written by the command line by ``<TIME>`` (with that plan's fingerprint by
``<PLAN-SHA256>``), so snapshots from different checkouts compare equal.  The
script imports only ``calibtest``, ``calibtest.cli``, ``calibtest.reporting``
and ``calibtest.simulation``, so it keeps working when the package's internal
modules move.
"""
from __future__ import annotations

import base64
import contextlib
import csv
import dataclasses
import hashlib
import html.parser
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone

import numpy as np
import pandas as pd

#: Creation time of the plan made through the API (kept, not masked: it is fixed).
PLAN_CREATED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
_PLAN_CREATED_TEXT = PLAN_CREATED.isoformat(timespec="seconds")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
HORIZON = 5.0


# ----------------------------------------------------------------------------- flattening and cleaning
class _Cleaner:
    """Replace the temporary folder's path by ``<TMP>`` and variable times by ``<TIME>`` in text."""

    def __init__(self, tmp: str):
        paths = {tmp, os.path.realpath(tmp), os.path.abspath(tmp)}
        self.paths = sorted(paths, key=len, reverse=True)
        self.extra: dict[str, str] = {}  # further literal replacements (the CLI plan's fingerprint)

    def __call__(self, text: str) -> str:
        for path in self.paths:
            text = text.replace(path, "<TMP>")
        for old, new in self.extra.items():
            text = text.replace(old, new)
        return _TIMESTAMP.sub(lambda m: m.group(0) if m.group(0) == _PLAN_CREATED_TEXT else "<TIME>", text)


def _flat(obj, prefix, clean):
    """Every leaf of ``obj`` (to_dict() objects, dicts, lists, arrays, frames) as ``{key: JSON value}``."""
    out = {}
    if hasattr(obj, "to_dict") and not isinstance(obj, (dict, pd.DataFrame, pd.Series)):
        obj = obj.to_dict()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # e.g. ConfidenceInterval
        obj = {field.name: getattr(obj, field.name) for field in dataclasses.fields(obj)}
    elif hasattr(obj, "_asdict"):  # a named tuple
        obj = obj._asdict()
    if isinstance(obj, pd.DataFrame):
        obj = {str(c): obj[c].tolist() for c in obj.columns} | {"_index": [str(i) for i in obj.index]}
    elif isinstance(obj, pd.Series):
        obj = {str(i): v for i, v in obj.items()}
    if isinstance(obj, dict):
        for key, val in obj.items():
            out.update(_flat(val, f"{prefix}.{key}" if prefix else str(key), clean))
    elif isinstance(obj, (list, tuple)):
        for i, val in enumerate(obj):
            out.update(_flat(val, f"{prefix}[{i}]", clean))
    elif isinstance(obj, np.ndarray):
        out.update(_flat(obj.tolist(), prefix, clean))
    elif isinstance(obj, (bool, np.bool_)):
        out[prefix] = bool(obj)
    elif isinstance(obj, (float, np.floating)):
        out[prefix] = "nan" if math.isnan(obj) else repr(float(obj))
    elif isinstance(obj, (int, np.integer)):
        out[prefix] = int(obj)
    elif isinstance(obj, str):
        out[prefix] = clean(obj)
    elif obj is None:
        out[prefix] = None
    else:
        out[prefix] = clean(f"<{type(obj).__name__}: {obj}>")
    return out


def _error(exc: BaseException, clean) -> str:
    return clean(f"error: {type(exc).__name__}: {exc}")


# ----------------------------------------------------------------------------- HTML reports
class _TextAndFiles(html.parser.HTMLParser):
    """The visible text of an HTML page, its ``data:`` links (download name -> URI) and images' ``data:`` URIs."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text, self.files, self.images, self._skip = [], {}, [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("style", "script"):
            self._skip += 1
        href, src = attrs.get("href") or "", attrs.get("src") or ""
        if href.startswith("data:"):
            self.files[attrs.get("download") or f"link-{len(self.files) + 1}"] = href
        if src.startswith("data:"):
            self.images.append(src)

    def handle_endtag(self, tag):
        if tag in ("style", "script") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def _decode(uri: str) -> tuple[str, bytes]:
    head, _, payload = uri.partition(",")
    media = head[5:].split(";")[0]
    if head.endswith(";base64"):
        return media, base64.b64decode(payload)
    from urllib.parse import unquote_to_bytes
    return media, unquote_to_bytes(payload)


def _embedded_file(name: str, uri: str, clean) -> object:
    media, raw = _decode(uri)
    text = raw.decode("utf-8", errors="replace")
    if media == "text/csv" or name.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        return [dict(zip(rows[0], row)) for row in rows[1:]] if rows else []
    if media == "application/json" or name.endswith(".json"):
        return json.loads(text)
    return {"media": media, "sha256": hashlib.sha256(raw).hexdigest()}


def _html_record(path, clean) -> dict:
    """The visible text (whitespace collapsed), the embedded files and the images' hashes of an HTML report."""
    parser = _TextAndFiles()
    with open(path, encoding="utf-8") as fh:
        parser.feed(fh.read())
    out = {"html_text": " ".join(" ".join(parser.text).split())}
    out["files"] = {name: _embedded_file(name, uri, clean) for name, uri in parser.files.items()}
    out["images"] = [hashlib.sha256(_decode(uri)[1]).hexdigest() for uri in parser.images]
    return out


# ----------------------------------------------------------------------------- data
def _binary_frame(n=1500, seed=7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    q = rng.beta(2, 5, n)
    y = (rng.random(n) < q ** 1.3).astype(int)
    g = rng.integers(0, 3, n)
    return pd.DataFrame({"y": y, "p": q, "w": rng.gamma(2.0, 1.0, n), "g": np.array(["a", "b", "c"])[g],
                         "h": rng.choice(["u", "v"], n), "site": 10 * g + rng.integers(0, 10, n),  # inside g
                         "p2": np.clip(q * 1.1, 0, 1), "p3": np.clip(q ** 0.9, 0, 1)})


def _multiclass(sim) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A 10-class frame (top-1 and top-k) and a 3-class frame (full calibration)."""
    ten = pd.DataFrame(sim.probs, columns=[f"p{j}" for j in range(sim.probs.shape[1])])
    ten.insert(0, "label", sim.labels)
    ten["correct"], ten["confidence"] = sim.correct, sim.confidence
    sharper = sim.probs ** 1.2
    for j, col in enumerate((sharper / sharper.sum(axis=1, keepdims=True)).T):  # a second model
        ten[f"r{j}"] = col
    three = pd.DataFrame({"label": sim.labels % 3, "q0": sim.probs[:, 0], "q1": sim.probs[:, 1],
                          "q2": 1 - sim.probs[:, 0] - sim.probs[:, 1]})
    return ten, three


def _survival_frame(n=1000, seed=11) -> pd.DataFrame:
    """Exponential event times (a covariate), a competing cause 2, exponential censoring (as in the tests)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, n)
    lam1, lam2 = 0.1 * np.exp(x), 0.05
    total = lam1 + lam2
    t_event = rng.exponential(1 / total)
    cause = np.where(rng.random(n) < lam1 / total, 1, 2)
    t_cens = rng.exponential(1 / 0.08, n)
    time_ = np.round(np.minimum(t_event, t_cens), 2)
    observed = t_event <= t_cens
    risk1 = np.clip(lam1 / total * (1 - np.exp(-total * HORIZON * 1.3)), 0.01, 0.99)
    t_single = rng.exponential(1 / lam1)
    time1 = np.round(np.minimum(t_single, t_cens), 2)
    event1 = (t_single <= t_cens).astype(int)
    risk = np.clip(1 - np.exp(-lam1 * HORIZON * 1.3), 0.01, 0.99)
    return pd.DataFrame({"time": time1, "event": event1, "risk": risk, "risk2": np.clip(risk * 0.9, 0.01, 0.99),
                         "x": x, "site": rng.integers(0, 25, n), "g": rng.choice(["a", "b"], n),
                         "ctime": time_, "cevent": np.where(observed, cause, 0), "crisk": risk1})


class _Data:
    """Every data set and file of the snapshot (files in ``tmp``)."""

    def __init__(self, tmp: str):
        import calibtest as ct

        self.tmp = tmp
        self.demo = ct.load_demo()
        self.frame = _binary_frame()
        self.sim = ct.simulation.setting3(n=1200, beta=0.05, rng=1)
        self.ten, self.three = _multiclass(self.sim)
        self.surv = _survival_frame()
        self.files = {}
        for name, df in (("binary", self.frame), ("ten", self.ten), ("three", self.three), ("surv", self.surv)):
            self.files[f"{name}.csv"] = os.path.join(tmp, f"{name}.csv")
            df.to_csv(self.files[f"{name}.csv"], index=False)
            self.files[f"{name}.parquet"] = os.path.join(tmp, f"{name}.parquet")
            df.to_parquet(self.files[f"{name}.parquet"], index=False)

    def path(self, name: str) -> str:
        return self.files[name]

    def dask(self, name: str = "binary", npartitions: int = 3):
        import dask.dataframe as dd
        return dd.from_pandas({"binary": self.frame, "ten": self.ten}[name], npartitions=npartitions)


@contextlib.contextmanager
def _synchronous_dask():
    import dask
    with dask.config.set(scheduler="synchronous"):
        yield


def _with_dask(call):
    def run():
        with _synchronous_dask():
            return call()
    return run


# ----------------------------------------------------------------------------- the calls
def _ci_calls(ct, d: _Data) -> dict:
    f, surv, ten, three = d.frame, d.surv, d.ten, d.three
    tenp = " + ".join(f"p{j}" for j in range(10))
    return {
        "ci_default": lambda: ct.calib_ci("y ~ p", data=d.demo, rng=1),
        "ci_asym": lambda: ct.calib_ci("y ~ p", data=d.demo, null="asymptotic", rng=1),
        "ci_mc": lambda: ct.calib_ci("y ~ p", data=f, null="monte-carlo", rng=3),
        "ci_cond": lambda: ct.calib_ci("y ~ p", data=f, null="conditional", rng=3),
        "ci_bins8": lambda: ct.calib_ci("y ~ p", data=f, n_bins=8, alpha=0.1, rng=3),
        "ci_weighted": lambda: ct.calib_ci("y ~ p", data=f, weights="w", rng=6),
        "ci_prevalence": lambda: ct.calib_ci("y ~ p", data=f, prevalence=0.2, rng=11),
        "ci_boot": lambda: ct.calib_ci("y ~ p", data=f, method="bootstrap", n_resamples=200, rng=2),
        "ci_subsampling": lambda: ct.calib_ci("y ~ p", data=f, method="subsampling", n_resamples=200, rng=2),
        "ci_hulc": lambda: ct.calib_ci("y ~ p", data=f, method="hulc", rng=2),
        "ci_top1": lambda: ct.calib_ci(y=d.sim.correct, probs=d.sim.confidence, n_classes=10, rng=4),
        "ci_top1_formula": lambda: ct.calib_ci("correct ~ confidence", data=ten, n_classes=10, rng=4),
        "ci_topk": lambda: ct.calib_ci(y=d.sim.labels, probs=d.sim.probs, k=2, rng=4),
        "ci_full3": lambda: ct.calib_ci("label ~ q0 + q1 + q2", data=three, k="full", rng=4),
        "ci_surv": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv, horizon=HORIZON, rng=5),
        "ci_surv_arrays": lambda: ct.calib_ci(time=surv.time.to_numpy(), event=surv.event.to_numpy(),
                                              probs=surv.risk.to_numpy(), horizon=HORIZON, n_bins=5, rng=5),
        "ci_surv_cox": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv, horizon=HORIZON,
                                           censoring="cox", censoring_covariates=["x"], rng=5),
        "ci_surv_mc": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv, horizon=HORIZON,
                                          null="monte-carlo", rng=5),
        "ci_competing": lambda: ct.calib_ci("Surv(ctime, cevent) ~ crisk", data=surv, horizon=HORIZON, cause=1,
                                            rng=5),
        "ci_competing_declared": lambda: ct.calib_ci("Surv(ctime, cevent == 1) ~ crisk", data=surv,
                                                     horizon=HORIZON, rng=5),
        "ci_surv_weighted": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv.assign(w=1 + surv.x ** 2),
                                                horizon=HORIZON, weights="w", rng=5),
        "ci_competing_nocause": lambda: ct.calib_ci("Surv(ctime, cevent) ~ crisk", data=surv, horizon=HORIZON,
                                                    rng=5),
        "ci_surv_cluster": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv, horizon=HORIZON,
                                               cluster="site", rng=5),
        "ci_surv_by": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv, horizon=HORIZON, by="g", rng=5),
        "ci_cluster": lambda: ct.calib_ci("y ~ p", data=f, cluster="site", rng=8),
        "ci_cluster_weighted": lambda: ct.calib_ci("y ~ p", data=f, cluster="site", weights="w", rng=8),
        "ci_top1_cluster": lambda: ct.calib_ci("correct ~ confidence", data=ten.assign(site=f.site[:1200].values),
                                               n_classes=10, cluster="site", rng=8),
        "ci_by": lambda: ct.calib_ci("y ~ p", data=f, by="g", rng=9),
        "ci_by_crossed": lambda: ct.calib_ci("y ~ p", data=f, by=["g", "h"], rng=9),
        "ci_by_weighted": lambda: ct.calib_ci("y ~ p", data=f, by="g", weights="w", rng=9),
        "ci_by_prevalence": lambda: ct.calib_ci("y ~ p", data=f, by="g", prevalence=0.2, rng=9),
        "ci_by_cluster": lambda: ct.calib_ci("y ~ p", data=f, by="g", cluster="site", rng=9),
        "ci_csv": lambda: ct.calib_ci("y ~ p", data=d.path("binary.csv"), chunksize=400, rng=10),
        "ci_parquet": lambda: ct.calib_ci("y ~ p", data=d.path("binary.parquet"), chunksize=400, rng=10),
        "ci_csv_top1": lambda: ct.calib_ci("correct ~ confidence", data=d.path("ten.csv"), n_classes=10,
                                           chunksize=500, rng=10),
        "ci_csv_topk": lambda: ct.calib_ci(f"label ~ {tenp}", data=d.path("ten.csv"), k=2, chunksize=500, rng=10),
        "ci_csv_by": lambda: ct.calib_ci("y ~ p", data=d.path("binary.csv"), by="g", chunksize=400, rng=10),
        "ci_csv_asym": lambda: ct.calib_ci("y ~ p", data=d.path("binary.csv"), null="asymptotic", chunksize=400,
                                           rng=10),
        "ci_parquet_weighted": lambda: ct.calib_ci("y ~ p", data=d.path("binary.parquet"), weights="w",
                                                   chunksize=400, rng=10),
        "ci_csv_surv": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=d.path("surv.csv"), horizon=HORIZON,
                                           chunksize=400, rng=10),
        "ci_dask": _with_dask(lambda: ct.calib_ci("y ~ p", data=d.dask(), rng=10)),
        "ci_dask_top1": _with_dask(lambda: ct.calib_ci("correct ~ confidence", data=d.dask("ten"), n_classes=10,
                                                       rng=10)),
        "ci_dask_by": _with_dask(lambda: ct.calib_ci("y ~ p", data=d.dask(), by="g", rng=10)),
        # the default generator (its reproducibility is under repair): compare two runs to see what it changes
        "ci_by_defaultrng": lambda: ct.calib_ci("y ~ p", data=f, by="g"),
        "ci_cluster_defaultrng": lambda: ct.calib_ci("y ~ p", data=f, cluster="site"),
        "ci_by_cluster_defaultrng": lambda: ct.calib_ci("y ~ p", data=f, by="g", cluster="site"),
        "ci_surv_defaultrng": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=surv, horizon=HORIZON),
        "ci_competing_defaultrng": lambda: ct.calib_ci("Surv(ctime, cevent) ~ crisk", data=surv, horizon=HORIZON,
                                                       cause=1),
        "ci_weighted_defaultrng": lambda: ct.calib_ci("y ~ p", data=f, weights="w"),
    }


def _test_calls(ct, d: _Data) -> dict:
    f, ten = d.frame, d.ten
    tenp = " + ".join(f"p{j}" for j in range(10))
    return {
        "test": lambda: ct.calib_test("y ~ p", data=f, rng=5),
        "test_single": lambda: ct.calib_test("y ~ p", data=f, n_bins=10, rng=5),
        "test_fisher": lambda: ct.calib_test("y ~ p", data=f, combine="bonferroni", rng=5),
        "test_quantile": lambda: ct.calib_test("y ~ p", data=f, partitions="equal-mass", rng=5),
        "test_top1": lambda: ct.calib_test(y=d.sim.correct, probs=d.sim.confidence, n_classes=10, rng=5),
        "test_topk": lambda: ct.calib_test(f"label ~ {tenp}", data=ten, k=2, rng=5),
        "test_full3": lambda: ct.calib_test("label ~ q0 + q1 + q2", data=d.three, k="full", rng=5),
        "test_surv": lambda: ct.calib_test("Surv(time, event) ~ risk", data=d.surv, rng=5),
        "test_cluster": lambda: ct.calib_test("y ~ p", data=f, cluster="site", rng=5),
        "test_by": lambda: ct.calib_test("y ~ p", data=f, by="g", rng=5),
        "test_by_cluster": lambda: ct.calib_test("y ~ p", data=f, by="g", cluster="site", rng=5),
        "test_csv": lambda: ct.calib_test("y ~ p", data=d.path("binary.csv"), chunksize=400, rng=5),
        "test_parquet": lambda: ct.calib_test("y ~ p", data=d.path("binary.parquet"), chunksize=400, rng=5),
        "test_csv_top1": lambda: ct.calib_test("correct ~ confidence", data=d.path("ten.csv"), n_classes=10,
                                               chunksize=500, rng=5),
        "test_csv_by": lambda: ct.calib_test("y ~ p", data=d.path("binary.csv"), by="g", chunksize=400, rng=5),
        "test_dask": _with_dask(lambda: ct.calib_test("y ~ p", data=d.dask(), rng=5)),
        "test_dask_by": _with_dask(lambda: ct.calib_test("y ~ p", data=d.dask(), by="g", rng=5)),
        "test_by_defaultrng": lambda: ct.calib_test("y ~ p", data=f, by="g"),
        "test_cluster_defaultrng": lambda: ct.calib_test("y ~ p", data=f, cluster="site"),
        "evidence": lambda: ct.evidence("y ~ p", data=f, rng=4),
        "evidence_demo": lambda: ct.evidence("y ~ p", data=d.demo, rng=4),
        "evidence_top1": lambda: ct.evidence("correct ~ confidence", data=ten, n_classes=10, rng=4),
        "evidence_topk": lambda: ct.evidence(f"label ~ {tenp}", data=ten, k=2, rng=4),
        "evidence_cluster": lambda: ct.evidence("y ~ p", data=f, cluster="site", rng=4),
        "evidence_by": lambda: ct.evidence("y ~ p", data=f, by="g", rng=4),
        "evidence_by_cluster": lambda: ct.evidence("y ~ p", data=f, by="g", cluster="site", rng=4),
        "evidence_csv": lambda: ct.evidence("y ~ p", data=d.path("binary.csv"), chunksize=400, rng=4),
        "evidence_parquet": lambda: ct.evidence("y ~ p", data=d.path("binary.parquet"), chunksize=400, rng=4),
        "evidence_csv_by": lambda: ct.evidence("y ~ p", data=d.path("binary.csv"), by="g", chunksize=400, rng=4),
        "evidence_dask": _with_dask(lambda: ct.evidence("y ~ p", data=d.dask(), rng=4)),
        "evidence_surv": lambda: ct.evidence("Surv(time, event) ~ risk", data=d.surv, rng=4),
        "tcal": lambda: ct.tcal_test("y ~ p", data=f.iloc[:400], rng=1, n_draws=3000),
        "tcal_adaptive": lambda: ct.tcal_test("y ~ p", data=f.iloc[:400], rng=1, n_draws=500, adaptive=True),
        "tcal_top1": lambda: ct.tcal_test("correct ~ confidence", data=ten.iloc[:400], n_classes=10, rng=1,
                                          n_draws=500),
        "tcal_csv": lambda: ct.tcal_test("y ~ p", data=d.path("binary.csv"), rng=1, n_draws=500),
        "tcal_by": lambda: ct.tcal_test("y ~ p", data=f.iloc[:600], by="g", rng=1, n_draws=500),
    }


def _other_calls(ct, d: _Data) -> dict:
    f, surv = d.frame, d.surv
    tenp = " + ".join(f"p{j}" for j in range(10))
    q = f.p.to_numpy()
    ci = lambda formula, **kw: ct.calib_ci(formula, data=f, rng=12, **kw)  # noqa: E731
    return {
        "hl": lambda: ct.hosmer_lemeshow("y ~ p", data=f),
        "hl_internal": lambda: ct.hosmer_lemeshow("y ~ p", data=f, groups=8, validation="development"),
        "hl_weighted": lambda: ct.hosmer_lemeshow("y ~ p", data=f, weights="w"),
        "hl_top1": lambda: ct.hosmer_lemeshow("correct ~ confidence", data=d.ten, n_classes=10),
        "hl_surv": lambda: ct.hosmer_lemeshow("Surv(time, event) ~ risk", data=surv),
        "hl_csv": lambda: ct.hosmer_lemeshow("y ~ p", data=d.path("binary.csv")),
        "valprob_csv": lambda: ct.val_prob("y ~ p", data=d.path("binary.parquet")),
        "valprob": lambda: ct.val_prob("y ~ p", data=f),
        "valprob_demo": lambda: ct.val_prob("y ~ p", data=d.demo, alpha=0.1),
        "valprob_weighted": lambda: ct.val_prob("y ~ p", data=f, weights="w"),
        "valprob_top1": lambda: ct.val_prob("correct ~ confidence", data=d.ten),
        "survcal": lambda: ct.survival_calibration(surv.time, surv.event, surv.risk, HORIZON),
        "survcal_groups": lambda: ct.survival_calibration(surv.time, surv.event, surv.risk, HORIZON, n_groups=5,
                                                          alpha=0.1),
        "survcal_competing": lambda: ct.survival_calibration(surv.ctime, surv.cevent, surv.crisk, HORIZON),
        "flexible": lambda: ct.flexible_calibration(f.p.to_numpy(), f.y.to_numpy()),
        "flexible_knots5": lambda: ct.flexible_calibration(d.demo.p.to_numpy(), d.demo.y.to_numpy(), knots=5,
                                                           alpha=0.1),
        "compare": lambda: ct.calib_compare(ci("y ~ p"), ci("y ~ p2")),
        "compare_paired_formula": lambda: ct.calib_compare("y ~ p", "y ~ p2", data=f),
        "compare_paired_onesided": lambda: ct.calib_compare("y ~ p", "y ~ p3", data=f, alternative="less",
                                                            variance="plugin"),
        "compare_unpaired": lambda: ct.calib_compare(ci("y ~ p"), ct.calib_ci("y ~ p", data=d.demo, rng=12)),
        "compare_caller_paired": lambda: ct.calib_compare(ci("y ~ p"), ci("y ~ p2"), paired=True),
        "compare_all": lambda: ct.calib_compare([ci("y ~ p"), ci("y ~ p2"), ci("y ~ p3")],
                                                names=["p", "p2", "p3"]),
        "compare_topk": lambda: ct.calib_compare(f"label ~ {tenp}", f"label ~ {tenp.replace('p', 'r')}",
                                                 data=d.ten, k=2),
        "compare_csv": lambda: ct.calib_compare("y ~ p", "y ~ p2", data=d.path("binary.csv")),
        "compare_cluster": lambda: ct.calib_compare("y ~ p", "y ~ p2", data=f, cluster="site"),
        "compare_surv": lambda: ct.calib_compare("Surv(time, event) ~ risk", "Surv(time, event) ~ risk2",
                                                 data=surv, horizon=HORIZON),
        "compare_competing": lambda: ct.calib_compare("Surv(ctime, cevent) ~ crisk",
                                                      "Surv(ctime, cevent) ~ I(crisk * 0.9)", data=surv,
                                                      horizon=HORIZON, cause=1),
        "power": lambda: ct.calib_power(800, probs=q, slope=0.8),
        "power_grid": lambda: ct.calib_power([200, 500, 1000], probs=q, intercept=0.2, slope=0.9, n_bins=8),
        "power_sim": lambda: ct.calib_power([300, 600], probs=q, slope=0.8, method="simulation", n_sim=60, rng=3),
        "power_margin": lambda: ct.calib_power(800, probs=q, slope=0.95, margin=0.05),
        "power_censored": lambda: ct.calib_power(800, probs=q, slope=0.8, censored_fraction=0.3),
        "power_topk": lambda: ct.calib_power(800, probs=d.sim.probs, k=2, slope=0.8),
        "samplesize_power": lambda: ct.calib_sample_size(probs=q, slope=0.8, power=0.8),
        "samplesize_width": lambda: ct.calib_sample_size(probs=q, ci_width=0.05),
        "samplesize_margin": lambda: ct.calib_sample_size(probs=q, slope=0.95, power=0.8, margin=0.05),
        "samplesize_censored": lambda: ct.calib_sample_size(probs=q, slope=0.8, power=0.8, censored_fraction=0.3),
        "samplesize_sim": lambda: ct.calib_sample_size(probs=q, slope=0.7, power=0.8, method="simulation",
                                                       n_sim=40, n_grid=6, n_max=3000, rng=3),
        "summary_default": lambda: {"text": str(ct.calib_ci("y ~ p", data=d.demo, rng=1).summary())},
    }


def _result_method_calls(ct, d: _Data) -> dict:
    """Methods of a result and the acceptance tests (on a binary, a clustered and a survival result)."""
    cache = {}

    def res(kind):
        if kind not in cache:
            cache[kind] = {"binary": lambda: ct.calib_ci("y ~ p", data=d.frame, rng=13),
                           "cluster": lambda: ct.calib_ci("y ~ p", data=d.frame, cluster="site", rng=13),
                           "surv": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=d.surv, horizon=HORIZON,
                                                       rng=13)}[kind]()
        return cache[kind]

    out = {}
    for kind in ("binary", "cluster", "surv"):
        out.update({
            f"method_{kind}_conf_int": lambda k=kind: {s: res(k).conf_int(scale=s) for s in ("squared", "ece")} |
            {"alpha10": res(k).conf_int(alpha=0.1)},
            f"method_{kind}_conclusion": lambda k=kind: list(res(k).conclusion()),
            f"method_{kind}_bin_table": lambda k=kind: res(k).bin_table(),
            f"method_{kind}_hl": lambda k=kind: res(k).hosmer_lemeshow(),
            f"method_{kind}_valprob": lambda k=kind: res(k).val_prob(),
            f"method_{kind}_evidence": lambda k=kind: res(k).evidence(rng=14),
            f"method_{kind}_margin": lambda k=kind: res(k).margin_test(0.05),
            f"accept_{kind}_margin": lambda k=kind: ct.margin_test(res(k), 0.05),
            f"accept_{kind}_citl": lambda k=kind: ct.citl_test(res(k), 0.2),
            f"accept_{kind}_slope": lambda k=kind: ct.slope_test(res(k), (0.8, 1.25)),
            f"accept_{kind}_oe": lambda k=kind: ct.oe_test(res(k), (0.8, 1.25)),
        })
    out["accept_oe_arrays"] = lambda: ct.oe_test(probs=d.frame.p.to_numpy(), y=d.frame.y.to_numpy(),
                                                 within=(0.8, 1.25))
    return out


def _plan_calls(ct, d: _Data) -> dict:
    def make_plan():
        if "plan" not in d.__dict__:
            size = ct.calib_sample_size(probs=d.frame.p.to_numpy(), slope=0.8, power=0.8)
            d.plan = ct.plan(os.path.join(d.tmp, "plan.json"), alpha=0.05, n_bins="auto", tests=None,
                             sample_size=size, created=PLAN_CREATED,
                             acceptance={"ece_below": 0.05, "citl_within": 0.2, "slope_within": (0.8, 1.25),
                                         "oe_within": (0.8, 1.25)}, primary="ece_below")
        return d.plan

    criteria = lambda: make_plan().acceptance  # noqa: E731
    return {
        "plan": make_plan,
        "plan_read": lambda: ct.AnalysisPlan.read(make_plan().path),
        "plan_options": lambda: make_plan().options(),
        "plan_deviations_binary": lambda: [x.to_dict() for x in make_plan().deviations(
            ct.calib_ci("y ~ p", data=d.frame, rng=15))],
        "plan_deviations_other": lambda: [x.to_dict() for x in make_plan().deviations(
            ct.calib_ci("y ~ p", data=d.frame, n_bins=7, alpha=0.1, null="asymptotic", cluster="site", rng=15))],
        "plan_acceptance_binary": lambda: ct.calib_ci("y ~ p", data=d.frame, rng=15).acceptance(
            criteria(), alpha=0.05, primary="ece_below"),
        "plan_acceptance_cluster": lambda: ct.calib_ci("y ~ p", data=d.frame, cluster="site", rng=15).acceptance(
            criteria(), alpha=0.05, primary="ece_below"),
        "plan_acceptance_surv": lambda: ct.calib_ci("Surv(time, event) ~ risk", data=d.surv, horizon=HORIZON,
                                                    rng=15).acceptance(criteria(), alpha=0.05),
        "plan_acceptance_demo": lambda: ct.calib_ci("y ~ p", data=d.demo, rng=15).acceptance(criteria()),
    }


def _report_calls(ct, d: _Data) -> dict:
    def report(name, results, **kwargs):
        def run():
            path = os.path.join(d.tmp, f"{name}.html")
            made = results()
            ct.report(made, path, **kwargs)
            return _Report(path, made if isinstance(made, list) else [made], kwargs.get("comparisons") or [])
        return run

    f = d.frame
    binary = lambda: ct.calib_ci("y ~ p", data=f, rng=16)  # noqa: E731
    return {
        "report_binary": report("report_binary", binary, rng=17),
        "report_plan_compare": lambda: report(
            "report_plan_compare", lambda: [ct.calib_ci("y ~ p", data=f, rng=16), ct.calib_ci("y ~ p2", data=f, rng=16)],
            labels=["old", "new"], plan=_plan_calls(ct, d)["plan"](), rng=17,
            comparisons=[ct.calib_compare("y ~ p", "y ~ p2", data=f, names=("old", "new"))],
            title="Snapshot report", metadata={"document_id": "SNAP-1", "author": "snapshot"})(),
        "report_top1": report("report_top1", lambda: ct.calib_ci("correct ~ confidence", data=d.ten, n_classes=10,
                                                                 rng=16), rng=17),
        "report_weighted": report("report_weighted", lambda: ct.calib_ci("y ~ p", data=f, weights="w", rng=16),
                                  rng=17),
        "report_by": report("report_by", lambda: ct.calib_ci("y ~ p", data=f, by="g", rng=16), rng=17),
        "report_cluster": report("report_cluster", lambda: ct.calib_ci("y ~ p", data=f, cluster="site", rng=16),
                                 rng=17),
        "report_surv": report("report_surv", lambda: ct.calib_ci("Surv(time, event) ~ risk", data=d.surv,
                                                                 horizon=HORIZON, rng=16), rng=17),
        "report_csv": report("report_csv", lambda: ct.calib_ci("y ~ p", data=d.path("binary.csv"), chunksize=400,
                                                               rng=16), rng=17),
        # the default generator (its reproducibility is under repair)
        "report_binary_defaultrng": report("report_binary_defaultrng", lambda: ct.calib_ci("y ~ p", data=f)),
        "report_by_defaultrng": report("report_by_defaultrng", lambda: ct.calib_ci("y ~ p", data=f, by="g")),
        "report_surv_defaultrng": report("report_surv_defaultrng", lambda: ct.calib_ci(
            "Surv(time, event) ~ risk", data=d.surv, horizon=HORIZON)),
    }


def _cli_calls(d: _Data) -> dict:
    b, bp, ten, three, surv = (d.path(n) for n in ("binary.csv", "binary.parquet", "ten.csv", "three.csv",
                                                   "surv.csv"))
    tenp = " + ".join(f"p{j}" for j in range(10))
    out_path = lambda name: os.path.join(d.tmp, name)  # noqa: E731

    def plan_file():
        import calibtest as ct
        return _plan_calls(ct, d)["plan"]().path

    calls = {
        "cli_ci": ["ci", b, "--formula", "y ~ p", "--json"],
        "cli_ci_text": ["ci", b, "--formula", "y ~ p"],
        "cli_ci_parquet": ["ci", bp, "--formula", "y ~ p", "--json", "--chunksize", "400"],
        "cli_ci_asym": ["ci", b, "--formula", "y ~ p", "--null", "asymptotic", "--json"],
        "cli_ci_mc": ["ci", b, "--formula", "y ~ p", "--null", "monte-carlo", "--seed", "3", "--json"],
        "cli_ci_boot": ["ci", b, "--formula", "y ~ p", "--method", "bootstrap", "--n-resamples", "200", "--seed",
                        "2", "--json"],
        "cli_ci_weighted": ["ci", b, "--formula", "y ~ p", "--weights", "w", "--seed", "6", "--json"],
        "cli_ci_prevalence": ["ci", b, "--formula", "y ~ p", "--prevalence", "0.2", "--seed", "11", "--json"],
        "cli_ci_cluster": ["ci", b, "--formula", "y ~ p", "--cluster", "site", "--seed", "8", "--json"],
        "cli_ci_by": ["ci", b, "--formula", "y ~ p", "--by", "g", "--seed", "9", "--json"],
        "cli_ci_by_cluster": ["ci", b, "--formula", "y ~ p", "--by", "g", "--cluster", "site", "--seed", "9",
                              "--json"],
        "cli_ci_top1": ["ci", ten, "--formula", "correct ~ confidence", "--n-classes", "10", "--json"],
        "cli_ci_topk": ["ci", ten, "--formula", f"label ~ {tenp}", "--k", "2", "--json"],
        "cli_ci_full": ["ci", three, "--formula", "label ~ q0 + q1 + q2", "--k", "full", "--json"],
        "cli_ci_surv": ["ci", surv, "--formula", "Surv(time, event) ~ risk", "--horizon", "5", "--seed", "5",
                        "--json"],
        "cli_ci_competing": ["ci", surv, "--formula", "Surv(ctime, cevent) ~ crisk", "--horizon", "5", "--cause",
                             "1", "--seed", "5", "--json"],
        "cli_ci_bad_option": ["ci", b, "--formula", "y ~ p", "--cause", "1", "--json"],
        "cli_test": ["test", b, "--formula", "y ~ p", "--seed", "5", "--json"],
        "cli_test_text": ["test", b, "--formula", "y ~ p", "--seed", "5"],
        "cli_test_parquet": ["test", bp, "--formula", "y ~ p", "--seed", "5", "--chunksize", "400", "--json"],
        "cli_test_top1": ["test", ten, "--formula", "correct ~ confidence", "--n-classes", "10", "--seed", "5",
                          "--json"],
        "cli_compare": ["compare", b, "--formula", "y ~ p", "--formula", "y ~ p2", "--json"],
        "cli_compare_text": ["compare", b, "--formula", "y ~ p", "--formula", "y ~ p3", "--alternative", "less"],
        "cli_sample_size": ["sample-size", b, "--formula", "~ p", "--power", "0.8", "--slope", "0.8", "--json"],
        "cli_sample_size_width": ["sample-size", b, "--formula", "~ p", "--ci-width", "0.05", "--json"],
        "cli_sample_size_censored": ["sample-size", b, "--formula", "~ p", "--power", "0.8", "--slope", "0.8",
                                     "--censored-fraction", "0.3", "--json"],
        "cli_sample_size_sim": ["sample-size", b, "--formula", "~ p", "--power", "0.8", "--slope", "0.7",
                                "--method", "simulation", "--n-sim", "40", "--seed", "3", "--json"],
        "cli_tcal": ["tcal", b, "--formula", "y ~ p", "--draws", "500", "--seed", "1", "--json"],
        "cli_demo": ["demo"],
        "cli_plan": ["plan", "-o", out_path("cli_plan.json"), "--accept", "ece_below=0.05", "--accept",
                     "slope_within=0.8,1.25", "--primary", "ece_below", "--tests", "calib_ci,hosmer_lemeshow",
                     "--cluster", "site"],
        "cli_report": lambda: ["report", b, "--model", "old=y ~ p", "--model", "new=y ~ p2", "--compare",
                               "old,new", "--plan", plan_file(), "--seed", "17", "-o",
                               out_path("cli_report.html")],
        "cli_report_by": ["report", b, "--formula", "y ~ p", "--by", "g", "--seed", "17", "-o",
                          out_path("cli_report_by.html")],
        "cli_report_cluster": ["report", b, "--formula", "y ~ p", "--cluster", "site", "--seed", "17", "-o",
                               out_path("cli_report_cluster.html")],
        "cli_report_surv": ["report", surv, "--formula", "Surv(time, event) ~ risk", "--horizon", "5", "--seed",
                            "17", "-o", out_path("cli_report_surv.html")],
        "cli_report_stream": ["report", b, "--formula", "y ~ p", "--chunksize", "400", "--seed", "17", "-o",
                              out_path("cli_report_stream.html")],
    }
    return {name: (lambda argv=argv: _Cli(argv() if callable(argv) else argv)) for name, argv in calls.items()}


class _Report:
    """An HTML report written to ``path`` of ``results`` and ``comparisons``.

    Recorded as its text, embedded files and images, and the ``to_dict()`` of
    the results and comparisons (what a PDF report attaches as
    ``result-*.json`` and ``comparison-*.json``).
    """

    def __init__(self, path, results, comparisons):
        self.path, self.results, self.comparisons = path, results, comparisons

    def record(self, clean) -> dict:
        return {**_html_record(self.path, clean), "results": self.results, "comparisons": self.comparisons}


class _Cli:
    """Run ``calibtest.cli.main(argv)``, capturing the exit status, stdout and stderr."""

    def __init__(self, argv):
        from calibtest.cli import main

        self.argv = list(argv)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                self.status = main(self.argv)
            except SystemExit as exc:  # argparse's usage errors
                self.status = exc.code
        self.stdout, self.stderr = out.getvalue(), err.getvalue()

    def record(self, clean) -> dict:
        rec = {"status": self.status, "stderr": self.stderr}
        try:
            rec["json"] = json.loads(self.stdout) if "--json" in self.argv else None
        except json.JSONDecodeError:
            rec["json"] = None
        if rec["json"] is None:
            rec["stdout"] = self.stdout
        written = self.argv[self.argv.index("-o") + 1] if "-o" in self.argv else None
        if written and os.path.exists(written) and self.status == 0:
            if written.endswith(".json"):  # the plan file: its creation time and so its fingerprint vary
                with open(written, encoding="utf-8") as fh:
                    fields = json.load(fh)
                clean.extra[fields.get("sha256", "")] = "<PLAN-SHA256>"
                rec["file"] = fields
            else:
                rec["report"] = _html_record(written, clean)
        return rec


# ----------------------------------------------------------------------------- running
def _record(name, value, clean) -> dict:
    """The values of one call: to_dict() (or the value itself), summary text, and so on."""
    if isinstance(value, _Cli):
        return _flat(value.record(clean), name, clean)
    if isinstance(value, _Report):
        return _flat(value.record(clean), name, clean)
    out = _flat(value, name, clean)
    if hasattr(value, "summary") and callable(value.summary) and not isinstance(value, dict):
        try:
            out[f"{name}.summary"] = clean(str(value.summary()))
        except Exception as exc:
            out[f"{name}.summary"] = _error(exc, clean)
    if hasattr(value, "to_frame") and hasattr(value, "groups"):
        try:
            out.update(_flat(value.to_frame(), f"{name}.frame", clean))
        except Exception as exc:
            out[f"{name}.frame"] = _error(exc, clean)
    return out


def all_calls(d: _Data) -> dict:
    """Every call of the snapshot, name -> function of no arguments."""
    import calibtest as ct

    calls = {}
    for group in (_ci_calls, _test_calls, _other_calls, _result_method_calls, _plan_calls, _report_calls):
        calls.update(group(ct, d))
    calls.update(_cli_calls(d))
    return calls


def snapshot(path, *, verbose: bool = False) -> dict:
    """Run every call and write their values to ``path`` (JSON); return them."""
    start = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="calibtest-snapshot-")
    clean = _Cleaner(tmp)
    result = {}
    try:
        d = _Data(tmp)
        for name, call in all_calls(d).items():
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    result.update(_record(name, call(), clean))
                except Exception as exc:  # recorded, so a change in errors shows too
                    result[name] = _error(exc, clean)
            for i, w in enumerate(caught):
                result[f"{name}.warnings[{i}]"] = clean(f"{w.category.__name__}: {w.message}")
            if verbose:
                print(f"{time.perf_counter() - t0:7.2f}s {name}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=0, sort_keys=True, ensure_ascii=False)
    print(f"{len(result)} values written to {path} in {time.perf_counter() - start:.1f} s")
    return result


def compare(old_path, new_path, limit: int | None = 200) -> int:
    """Print the keys whose values changed, are gone or are new; 0 if the files are equal, else 1."""
    with open(old_path, encoding="utf-8") as fh:
        old = json.load(fh)
    with open(new_path, encoding="utf-8") as fh:
        new = json.load(fh)
    changed = [k for k in old if k in new and old[k] != new[k]]
    gone = [k for k in old if k not in new]
    added = [k for k in new if k not in old]
    for label, keys in (("changed", changed), ("gone", gone), ("new", added)):
        print(f"{label}: {len(keys)}")
        for key in keys[:limit]:
            print(f"  {key}: {_short(old.get(key))} -> {_short(new.get(key))}")
    return int(bool(changed or gone or added))


def _short(value, width: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + f"... ({len(text)} chars)"


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) == 1:
        snapshot(args[0], verbose="--verbose" in sys.argv)
    elif len(args) == 2:
        sys.exit(compare(*args, limit=None if "--all" in sys.argv else 200))
    else:
        sys.exit(__doc__)
