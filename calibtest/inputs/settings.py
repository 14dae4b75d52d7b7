"""The data of one call and the options that travel with it, each bundled once at the front door.

A front door (:func:`calibtest.calib_ci`, :func:`calibtest.calib_test`,
:func:`calibtest.evidence`, :func:`calibtest.tcal_test`) validates its
keywords, then hands the layers below it three frozen objects instead of
twenty loose keywords:

* :class:`Inputs` -- where the rows are and which column (or array) plays
  which role: the formula, ``data``, the ``y=``/``probs=`` arrays, the case
  weights, the groups, the clusters, the survival times and events and the
  Cox censoring model's covariates;
* :class:`Settings` -- how to analyse them: the target, the bins, the level,
  the missing-value policy, the formula's environment, the null and its
  draws, the interval method, the seed, the survival horizon, and the
  options the recorded call shows;
* :class:`~calibtest.inputs.design.Design` -- what kind of analysis that is,
  resolved from the two (:meth:`Design.resolve`), on which the layers below
  dispatch.

A layer that changes one option for a part of the analysis (a group's seed,
the null of a clustered test) makes a copy with :meth:`Settings.replace`.
This module imports only the standard library and :mod:`calibtest.options`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from calibtest.options import DEFAULT_DRAWS, DEFAULT_NULL

__all__ = ["Inputs", "Settings"]


@dataclass(frozen=True)
class Inputs:
    """The data of one call and the role of each of its columns (names of ``data``, or arrays).

    Attributes
    ----------
    formula : str or None
        ``"y ~ p"``, ``"Surv(time, event) ~ risk"``, ...; None with arrays.
    data : DataFrame, dict, path, Dask DataFrame or None
        The rows (in memory, a file, a Dask frame).
    y, probs : array_like, optional
        Arrays instead of a formula.
    weights, by, cluster : str, list or array_like, optional
        Case weights, grouping column(s) and clusters, as given.
    time, event : array_like, optional
        A survival outcome's arrays.
    censoring_covariates : list of str or array_like, optional
        The Cox censoring model's covariates.
    """

    formula: Any = None
    data: Any = None
    y: Any = None
    probs: Any = None
    weights: Any = None
    by: Any = None
    cluster: Any = None
    time: Any = None
    event: Any = None
    censoring_covariates: Any = None

    def replace(self, **changes) -> "Inputs":
        """A copy with ``changes`` (e.g. another formula of the same data)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Settings:
    """The options of one call, validated by its front door; the keywords of :func:`calibtest.calib_ci`.

    Attributes
    ----------
    n_classes, k : int, "full" or None
        The calibration target's options.
    n_bins : int or "auto"
        Bins per dimension.
    alpha : float
        Significance level.
    missing : {"raise", "drop"}
    env : patsy.EvalEnvironment or None
        The formula's environment, resolved from ``eval_env``.
    null : str
        The null asked for (``"auto"``, ``"asymptotic"``, ``"conditional"``, ``"monte-carlo"``).
    rng : None, int or numpy.random.Generator
        The seed (a Generator is shared, not copied: it is consumed in the order of the analysis).
    n_null_draws : int
        Label draws of the Monte Carlo null.
    method : str
        The interval method.
    n_resamples : int or None
    progress : bool or None
    chunksize : int or None
        Rows per chunk of a file.
    prevalence : float or None
        The population prevalence to reweight to.
    horizon : float or None
        A survival outcome's horizon.
    censoring : {"km", "cox"}
        The censoring model of a survival outcome.
    cause : int or None
        Competing risks: the cause of interest.
    call_options : mapping
        The options the recorded call shows (read-only; defaults left out).
    """

    n_classes: Any = None
    k: Any = None
    n_bins: Any = "auto"
    alpha: float = 0.05
    missing: str = "raise"
    env: Any = None
    null: str = DEFAULT_NULL
    rng: Any = None
    n_null_draws: int = DEFAULT_DRAWS
    method: str = "adjusted"
    n_resamples: int | None = None
    progress: bool | None = None
    chunksize: int | None = None
    prevalence: float | None = None
    horizon: float | None = None
    censoring: str = "km"
    cause: int | None = None
    call_options: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "call_options", MappingProxyType(dict(self.call_options or {})))

    def replace(self, **changes) -> "Settings":
        """A copy with ``changes`` (a group's seed, a clustered test's null, ...)."""
        return dataclasses.replace(self, **changes)

    def options(self, **changes) -> dict:
        """A fresh ``dict`` of :attr:`call_options` updated with ``changes``, for the recorded call."""
        return {**self.call_options, **changes}
