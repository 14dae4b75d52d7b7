"""The paper's simulation study: coverage, length and power of every interval method.

For each setting of :mod:`calibtest.simulation` and each beta of a grid, many
data sets are drawn; on each, every method gives an interval for ECE^2 (or,
for T-Cal, a test of ECE = 0).  :func:`simulate_intervals` returns one row per
(data set, method); :func:`summarise_study` turns them into a tidy table of

* coverage of the true ECE^2 with its Clopper-Pearson interval
  (``statsmodels.stats.proportion.proportion_confint(method="beta")``) and
  Monte Carlo standard error ``sqrt(p (1 - p) / N)``;
* mean, 5% and 95% interval length, and the ratio of the mean length to that
  of the adjusted interval (the paper's length-ratio figure);
* power: the rate of rejecting ECE = 0 (0 outside the interval), with its
  Clopper-Pearson interval;

and :func:`run_study` does both.  This reproduces Section 4.1 of the paper and
the supplement's n = 1000 and bin-sensitivity studies (``vignettes/simulation_study.py``).

Lengths are measured on the ECE^2 scale after intersecting each interval with
[0, inf), the parameter space (the adjusted interval already lies in it; a
resampling interval may reach below 0).  Coverage and rejection use each
method's own interval: the adjusted set with the zero rule (open at 0 when it
says so), the closed resampling intervals as the methods define them.

Seeding: data set i at beta b of setting s uses
``numpy.random.SeedSequence(seed, spawn_key=(s, beta_key(b), i))`` with
``beta_key(b) = 2 round(|b| 10^6) + (b < 0)`` (the child
``SeedSequence(seed).spawn(s+1)[s].spawn(k+1)[k].spawn(i+1)[i]``, k = beta_key(b)),
whose five children seed, in order, the data, the bootstrap, the subsampling,
HulC and T-Cal.  Results therefore do not depend on the number of worker
processes, on the chunking, on the rest of the beta grid, or on which other
methods run, and two studies with the same seed (e.g. different bin counts)
see the same data sets.
"""
from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibtest import simulation as sim
from calibtest.core.progress import make_bar, want_progress
from calibtest.inputs.validation import check_alpha
from calibtest.options import BIN_COUNT, check_option
from calibtest.core.binstats import debiased_statistic, sigma1_sq
from calibtest.core.intervals import adjusted_interval
from calibtest.core.null import threshold as null_threshold
from calibtest.core.partition import partition_rows
from calibtest.core.resampling import DEFAULT_N_RESAMPLES, binned_rows, resampling_interval, subsampling_interval
from calibtest.core.targets import prepare, prepare_full
from calibtest.core.tcal import tcal_reject

__all__ = [
    "INTERVAL_METHODS",
    "PAPER_BINS",
    "PAPER_TARGETS",
    "available_methods",
    "beta_key",
    "run_study",
    "simulate_intervals",
    "summarise_study",
]

#: Interval methods of the study.  ``"subsampling_reflected"`` is the
#: Politis-Romano form of the subsampling interval, computed from the same
#: subsamples; ``"adjusted_full"`` is the adjusted interval's test of full
#: calibration in settings 1-2 (K = 2: binary mode, whose z test is that of
#: full calibration), recorded for power only, as the paper compares it with T-Cal.
INTERVAL_METHODS = ("adjusted", "bootstrap", "subsampling", "hulc", "subsampling_reflected", "adjusted_full")

#: The paper's bins per dimension: n = 100 in the main text, n = 1000 in the supplement.
PAPER_BINS = {100: {1: 20, 2: 20, 3: 10}, 1000: {1: 50, 2: 50, 3: 20}}

#: The paper's calibration targets: top-1 for settings 1-2, top-1-to-2 for setting 3.
PAPER_TARGETS = {1: "top1", 2: "top1", 3: "top2"}

#: Columns of the per-data-set record of each method.
_FIELDS = ("lower", "upper", "lower_open", "reject", "hulc_splits", "hulc_median_bias")


def available_methods() -> tuple[str, ...]:
    """The default methods: the four intervals and T-Cal."""
    return ("adjusted", "bootstrap", "subsampling", "hulc", "tcal")


def _prepared(data: "sim.SimulatedData", target: str):
    if target == "top1":
        return prepare(data.correct, data.confidence, n_classes=data.n_classes)
    if target == "top2":
        return prepare(data.labels, data.probs, k=2)
    if target == "binary":
        return prepare((data.labels == 0).astype(np.int64), data.probs[:, 0])
    raise ValueError(f"target must be 'binary', 'top1' or 'top2' in the study, got {target!r}")


def beta_key(beta: float) -> int:
    """Seed key of a beta: ``2 round(|beta| 10^6) + (beta < 0)`` (a non-negative int)."""
    return 2 * int(round(abs(beta) * 1e6)) + int(beta < 0)


@dataclass(frozen=True)
class _Task:
    setting: int
    beta_key: int
    beta: float
    start: int
    stop: int
    n: int
    n_bins: int
    target: str
    alpha: float
    methods: tuple
    n_resamples: int
    tcal_draws: int
    seed: int


def _one_dataset(task: _Task, i: int) -> np.ndarray:
    """Intervals of every method on data set i: array (n_methods, len(_FIELDS))."""
    ss = np.random.SeedSequence(task.seed, spawn_key=(task.setting, task.beta_key, i))
    data_ss, boot_ss, sub_ss, hulc_ss, tcal_ss = ss.spawn(5)
    gen = getattr(sim, f"setting{task.setting}")
    data = gen(task.n, task.beta, rng=np.random.default_rng(data_ss))
    prep = _prepared(data, task.target)
    B = task.n_bins
    partition = partition_rows(prep, B)
    rows = binned_rows(partition, prep.u)
    out = np.full((len(task.methods), len(_FIELDS)), np.nan)
    n = prep.n
    stats = partition.bin_sums(prep)
    t = debiased_statistic(stats, n)  # the estimate every method of this data set uses
    sub_iv = None
    for row, method in enumerate(task.methods):
        if method == "adjusted":
            out[row, :4] = _adjusted(partition, stats, task.alpha)
        elif method == "adjusted_full":
            if task.setting in (1, 2):  # K = 2 full calibration = binary mode (same z test, ends doubled)
                binary = _prepared(data, "binary")
                part_b = partition_rows(binary, B)
                out[row, 3] = _adjusted(part_b, part_b.bin_sums(binary), task.alpha)[3]
        elif method in ("bootstrap", "subsampling", "hulc"):
            seed_ss = {"bootstrap": boot_ss, "subsampling": sub_ss, "hulc": hulc_ss}[method]
            iv = resampling_interval(rows, method, alpha=task.alpha, estimate=t, n_resamples=task.n_resamples,
                                     rng=np.random.default_rng(seed_ss), progress=False)
            if method == "subsampling":
                sub_iv = iv
            out[row, :4] = (iv.lower, iv.upper, False, not iv.contains_zero)
            if method == "hulc":
                out[row, 4] = np.nan if iv.hulc_splits is None else iv.hulc_splits
                out[row, 5] = iv.hulc_median_bias
        elif method == "subsampling_reflected":
            if sub_iv is None:
                raise ValueError("'subsampling_reflected' needs 'subsampling' earlier in methods")
            lo, hi = subsampling_interval(sub_iv.estimate, sub_iv.estimates, n, sub_iv.resample_size,
                                          task.alpha, reflect=True)
            out[row, :4] = (lo, hi, False, not (lo <= 0.0 <= hi))
        elif method == "tcal":
            if task.setting in (1, 2):  # the paper runs T-Cal (full calibration) in settings 1-2 only
                out[row, 3] = _tcal_reject(data, task, np.random.default_rng(tcal_ss))
        else:
            raise ValueError(f"unknown study method {method!r}")
    return out


def _tcal_reject(data, task: _Task, gen) -> bool:
    """T-Cal test of full calibration (settings 1-2, as the paper).

    Full calibration of the K = 2 probability matrix, on the study's bins,
    with ``task.tcal_draws`` Monte Carlo draws for the threshold.  The study
    uses the debiased statistic (divisor c_b - 1, as ``calib_ci``) and an
    explicit number of draws, so that its published numbers reproduce
    (``tcal_test``'s defaults are now T-Cal's own statistic and
    max(3000, ...) draws).  The decision is that of
    ``tcal_test(y=labels, probs=probs, k="full", n_bins=B, n_draws=R,
    statistic="debiased", rng=gen).reject``, from its engine
    (:func:`calibtest.core.tcal.tcal_reject`), which stops drawing once the
    decision is known: only the decision is recorded.
    """
    target = prepare_full(data.labels, data.probs)
    bins = partition_rows(target, task.n_bins).inverse
    reject, _ = tcal_reject(target.z, target.u, bins, alpha=task.alpha, n_draws=task.tcal_draws, rng=gen,
                            full=target.mode.full_calibration, statistic="debiased")
    return reject


def _adjusted(partition, stats, alpha: float):
    """(lower, upper, lower_open, reject) of the adjusted interval (Algorithm 1) from the bin sums."""
    n = partition.n
    t = debiased_statistic(stats, n)
    se = math.sqrt(sigma1_sq(stats, n) / n)
    thr = null_threshold(alpha, partition.sigma0_sq, n, partition.volume)
    iv = adjusted_interval(t, se, thr, alpha)
    return iv.lower, iv.upper, iv.lower_open, not iv.contains_zero


def _run_task(task: _Task) -> np.ndarray:
    return np.stack([_one_dataset(task, i) for i in range(task.start, task.stop)])


def _check_grid(settings, betas, n_bins, n):
    """The settings (each the table's ``setting``), with the betas and bin counts of each: defaults that
    depend on the settings and on n (the paper's bins exist for n = 100 and 1000)."""
    settings = tuple(check_option("setting", s, "settings") for s in settings)
    if betas is None:
        betas = {s: sim.paper_betas(s) for s in settings}
    elif not isinstance(betas, dict):
        betas = {s: np.asarray(betas, dtype=float) for s in settings}
    if n_bins is None:
        if n not in PAPER_BINS:
            raise ValueError(f"n_bins is needed for n = {n} (paper bins exist for n = 100 and 1000)")
        n_bins = PAPER_BINS[n]
    elif not isinstance(n_bins, dict):
        n_bins = dict.fromkeys(settings, BIN_COUNT.check(n_bins, "n_bins"))
    return settings, {s: np.atleast_1d(np.asarray(betas[s], dtype=float)) for s in settings}, n_bins


def _want_bar(progress) -> bool:
    """The package's rule (:func:`calibtest.core.progress.want_progress`)."""
    return want_progress(progress)


def simulate_intervals(*, settings=(1, 2, 3), betas=None, n: int = 100, n_bins=None, n_datasets: int = 1000,
                       alpha: float = 0.1, methods=None, targets=None, n_resamples: int = DEFAULT_N_RESAMPLES,
                       tcal_draws: int = 1000, seed: int = 0, n_jobs: int = 1, chunk_size: int = 50,
                       progress: bool | None = None) -> pd.DataFrame:
    """Every method's interval on every simulated data set.

    Parameters
    ----------
    settings : sequence of int
        Settings of :mod:`calibtest.simulation` (1, 2, 3).
    betas : dict, sequence or None
        Grid of beta per setting (default :func:`calibtest.simulation.paper_betas`).
    n : int
        Rows per data set.
    n_bins : dict, int or None
        Bins per dimension per setting (default :data:`PAPER_BINS` for n = 100 or 1000).
    n_datasets : int
        Data sets per (setting, beta).
    alpha : float
        Significance level (the paper: 0.1).
    methods : sequence of str, optional
        Among :data:`INTERVAL_METHODS` and ``"tcal"`` (default :func:`available_methods`).
    targets : dict, optional
        Calibration target per setting (default :data:`PAPER_TARGETS`).
    n_resamples : int
        Resamples of the bootstrap, subsampling and HulC's median-bias step.
    tcal_draws : int
        Monte Carlo draws of the T-Cal threshold.
    seed : int
        Root seed (see the module notes).
    n_jobs : int
        Worker processes (``concurrent.futures.ProcessPoolExecutor``); 1 runs in this process.
    chunk_size : int
        Data sets per task.
    progress : bool, optional
        Progress bar over tasks (tqdm); by default only in an interactive terminal outside CI.

    Returns
    -------
    pandas.DataFrame
        One row per (setting, beta, data set, method): ``lower``, ``upper``
        (the method's interval; NaN for T-Cal), ``lower_open``, ``reject``
        (0 outside the interval / T-Cal rejects), ``covered``, ``length``
        (after intersecting with [0, inf)), ``hulc_splits``,
        ``hulc_median_bias``, and ``true_ece_sq``.
    """
    alpha = check_alpha(alpha)
    settings, betas, n_bins = _check_grid(settings, betas, n_bins, n)
    methods = tuple(available_methods() if methods is None else methods)
    unknown = set(methods) - set(INTERVAL_METHODS) - {"tcal"}
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {INTERVAL_METHODS + ('tcal',)}")
    targets = dict(PAPER_TARGETS if targets is None else targets)
    tasks = []
    for s in settings:
        for beta in betas[s]:
            for start in range(0, n_datasets, chunk_size):
                stop = min(start + chunk_size, n_datasets)
                tasks.append(_Task(s, beta_key(float(beta)), float(beta), start, stop, int(n), int(n_bins[s]),
                                   targets[s], alpha, methods, int(n_resamples), int(tcal_draws), int(seed)))
    bar = None
    if _want_bar(progress):
        bar = make_bar(len(tasks), "study", unit="task")
    try:
        if n_jobs == 1:
            chunks = []
            for task in tasks:
                chunks.append(_run_task(task))
                if bar is not None:
                    bar.update()
        else:
            with ProcessPoolExecutor(max_workers=n_jobs) as pool:
                chunks = []
                for out in pool.map(_run_task, tasks, chunksize=1):
                    chunks.append(out)
                    if bar is not None:
                        bar.update()
    finally:
        if bar is not None:
            bar.close()
    return _raw_frame(tasks, chunks, methods, settings, betas, n_bins, targets)


def _raw_frame(tasks, chunks, methods, settings, betas, n_bins, targets) -> pd.DataFrame:
    values = np.concatenate([c.reshape(-1, len(_FIELDS)) for c in chunks])
    m = len(methods)
    setting = np.concatenate([np.full((t.stop - t.start) * m, t.setting) for t in tasks])
    beta = np.concatenate([np.full((t.stop - t.start) * m, t.beta) for t in tasks])
    dataset = np.concatenate([np.repeat(np.arange(t.start, t.stop), m) for t in tasks])
    method = np.tile(np.array(methods, dtype=object), len(dataset) // m)
    truth_map = {(s, float(b)): sim.true_ece_sq(s, float(b), targets[s]) for s in settings for b in betas[s]}
    truth = np.array([truth_map[(s, b)] for s, b in zip(setting, beta)])
    df = pd.DataFrame({"setting": setting, "beta": beta, "dataset": dataset, "method": method})
    for j, name in enumerate(_FIELDS):
        df[name] = values[:, j]
    keep = ~np.isnan(values[:, 3])  # T-Cal rows of setting 3 (not run)
    df, truth = df[keep].reset_index(drop=True), truth[keep]
    df["lower_open"] = df["lower_open"] == 1.0
    df["reject"] = df["reject"] == 1.0
    df["true_ece_sq"] = truth
    lo, hi = df["lower"].to_numpy(), df["upper"].to_numpy()
    above = (lo < truth) | ((lo == truth) & ~df["lower_open"].to_numpy())
    covered = above & (truth <= hi)
    df["covered"] = np.where(np.isnan(lo), np.nan, covered.astype(float))
    with np.errstate(invalid="ignore"):
        df["length"] = np.maximum(hi, 0.0) - np.maximum(lo, 0.0)
    df["n_bins"] = df["setting"].map({s: int(n_bins[s]) for s in settings})
    df["target"] = df["setting"].map(targets)
    return df


def _clopper_pearson(count: np.ndarray, nobs: np.ndarray, alpha: float):
    from statsmodels.stats.proportion import proportion_confint
    lo, hi = proportion_confint(count, nobs, alpha=alpha, method="beta")
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def summarise_study(raw: pd.DataFrame, *, ci_alpha: float = 0.05) -> pd.DataFrame:
    """Tidy summary of :func:`simulate_intervals`: one row per (setting, beta, method).

    Columns: ``setting, beta, method, target, n_bins, n_datasets, true_ece_sq,
    true_ece, coverage, coverage_se, coverage_lo, coverage_hi, mean_length,
    length_q05, length_q95, length_ratio, power, power_se, power_lo, power_hi,
    hulc_mean_splits, n_infinite``.  ``*_lo``/``*_hi`` are Clopper-Pearson
    intervals at level ``1 - ci_alpha``; ``*_se`` the Monte Carlo standard
    error sqrt(p (1 - p) / N); ``length_ratio`` is the mean length over that of
    the adjusted interval at the same (setting, beta); ``n_infinite`` counts
    infinite intervals (HulC needing more splits than rows), which are left out
    of the length columns.
    """
    keys = ["setting", "beta", "method"]
    g = raw.groupby(keys, sort=False)
    out = g.agg(target=("target", "first"), n_bins=("n_bins", "first"), n_datasets=("dataset", "size"),
                true_ece_sq=("true_ece_sq", "first"), covered=("covered", "sum"),
                n_interval=("covered", "count"), rejected=("reject", "sum")).reset_index()
    finite = raw[np.isfinite(raw["length"])]
    lengths = finite.groupby(keys, sort=False)["length"].agg(
        mean_length="mean", length_q05=lambda x: np.quantile(x, 0.05),
        length_q95=lambda x: np.quantile(x, 0.95)).reset_index()
    out = out.merge(lengths, on=keys, how="left")
    n_inf = raw.assign(inf=np.isinf(raw["length"])).groupby(keys, sort=False)["inf"].sum().reset_index()
    out = out.merge(n_inf.rename(columns={"inf": "n_infinite"}), on=keys, how="left")
    splits = raw.groupby(keys, sort=False)["hulc_splits"].mean().reset_index()
    out = out.merge(splits.rename(columns={"hulc_splits": "hulc_mean_splits"}), on=keys, how="left")
    out["true_ece"] = np.sqrt(out["true_ece_sq"])
    N = out["n_interval"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = out["covered"].to_numpy(dtype=float) / N
        out["coverage"] = np.where(N > 0, cov, np.nan)
        out["coverage_se"] = np.sqrt(out["coverage"] * (1 - out["coverage"]) / N)
    has = N > 0
    lo = np.full(len(out), np.nan)
    hi = np.full(len(out), np.nan)
    if has.any():
        lo[has], hi[has] = _clopper_pearson(out["covered"].to_numpy()[has], N[has], ci_alpha)
    out["coverage_lo"], out["coverage_hi"] = lo, hi
    M = out["n_datasets"].to_numpy(dtype=float)
    out["power"] = out["rejected"].to_numpy(dtype=float) / M
    out["power_se"] = np.sqrt(out["power"] * (1 - out["power"]) / M)
    out["power_lo"], out["power_hi"] = _clopper_pearson(out["rejected"].to_numpy(), M, ci_alpha)
    ref = out[out["method"] == "adjusted"][["setting", "beta", "mean_length"]].rename(
        columns={"mean_length": "_ref"})
    out = out.merge(ref, on=["setting", "beta"], how="left")
    with np.errstate(invalid="ignore", divide="ignore"):
        out["length_ratio"] = out["mean_length"] / out["_ref"]
    cols = ["setting", "beta", "method", "target", "n_bins", "n_datasets", "true_ece_sq", "true_ece",
            "coverage", "coverage_se", "coverage_lo", "coverage_hi", "mean_length", "length_q05",
            "length_q95", "length_ratio", "power", "power_se", "power_lo", "power_hi",
            "hulc_mean_splits", "n_infinite"]
    return out[cols]


def run_study(*, settings=(1, 2, 3), betas=None, n: int = 100, n_bins=None, n_datasets: int = 1000,
              alpha: float = 0.1, methods=None, targets=None, n_resamples: int = DEFAULT_N_RESAMPLES,
              tcal_draws: int = 1000, seed: int = 0, n_jobs: int = 1, chunk_size: int = 50,
              progress: bool | None = None, ci_alpha: float = 0.05) -> pd.DataFrame:
    """Run the study and summarise it (:func:`simulate_intervals` then :func:`summarise_study`).

    The returned frame also has the columns ``n``, ``alpha`` and ``n_resamples``.
    """
    raw = simulate_intervals(settings=settings, betas=betas, n=n, n_bins=n_bins, n_datasets=n_datasets,
                             alpha=alpha, methods=methods, targets=targets, n_resamples=n_resamples,
                             tcal_draws=tcal_draws, seed=seed, n_jobs=n_jobs, chunk_size=chunk_size,
                             progress=progress)
    out = summarise_study(raw, ci_alpha=ci_alpha)
    out.insert(3, "n", n)
    out.insert(4, "alpha", alpha)
    out["n_resamples"] = n_resamples
    return out
