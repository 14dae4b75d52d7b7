"""The three data-generating settings of the paper's simulations, with their true ECE^2.

Section 4.1 ("Simulated Data") of Sun, Chaudhari, Barnett and Dobriban, *A
Confidence Interval for the l2 Expected Calibration Error* [1]_, generates
i.i.d. pairs (Z, Y) of a predicted probability vector Z and a label Y:

* **Setting 1** (K = 2): ``Z_1 ~ Unif(0, 1)``, ``Z = (Z_1, 1 - Z_1)`` and
  ``P(Y = 0 | Z) = p_beta(Z_1)`` (the paper's eq. (14)), where

  .. math:: p_\\beta(s) = \\operatorname{logistic}(\\beta\\,\\operatorname{logit}(s))
            = \\frac{s^\\beta}{s^\\beta + (1-s)^\\beta}.

  ``beta = 1`` is calibrated; ``beta < 1`` is under-confident, ``beta > 1``
  over-confident.
* **Setting 2** (K = 2): as Setting 1 with ``s ~ Beta(5, 0.5)`` in place of
  the uniform, placed at a class chosen uniformly at random.
* **Setting 3** (K = 10): ``Z ~ Dirichlet(1, ..., 1)`` (uniform on the
  simplex); the top class loses ``beta`` of label probability to the
  runner-up.  ``beta = 0`` is calibrated.

Class ``j`` of the paper's one-hot label ``Y = (Y_1, ..., Y_K)`` is the
integer code ``j - 1`` here: ``Y_1 = 1`` is ``label == 0`` and ``Z_1`` is
``probs[:, 0]``.

The true ECE^2 of each setting is in :func:`true_ece_sq`; the paper's beta
grids are in :func:`paper_betas`.  Randomness comes only from the ``rng``
argument (an int seed, a ``numpy.random.Generator`` or ``None``), passed to
``numpy.random.default_rng``, so a seed reproduces a data set bit for bit.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import integrate, special

from calibtest.options import OptionError, OptionTypeError, check_option
from calibtest.core.arrays import read_only

__all__ = [
    "SimulatedData",
    "paper_betas",
    "setting1",
    "setting2",
    "setting3",
    "true_ece_sq",
]

#: Number of classes of each setting.
N_CLASSES = {1: 2, 2: 2, 3: 10}

#: Calibration targets for which :func:`true_ece_sq` knows the truth.
TARGETS = {
    1: ("binary", "top1", "full"),
    2: ("binary", "top1", "full"),
    3: ("top1", "top2", "full"),
}

#: Shape parameters (a, b) of the Beta law of ``s`` in Setting 2.
BETA_PARAMS = (5.0, 0.5)

# Tolerances handed to scipy.integrate.quad, and the error estimate above
# which the result is refused instead of returned.
_QUAD_KW = dict(epsabs=1e-13, epsrel=1e-12, limit=500)
_QUAD_MAX_ERR = 1e-10


@dataclass(frozen=True, eq=False)
class SimulatedData:
    """One simulated data set: predicted probabilities and labels.

    Built by :func:`setting1`, :func:`setting2` and :func:`setting3`; the
    arrays are read-only.  ``confidence`` and ``correct`` are computed from
    ``probs`` and ``labels`` at construction.

    Attributes
    ----------
    probs : ndarray of float64, shape (n, K)
        Predicted probability vectors Z; each row sums to 1 (to rounding).
    labels : ndarray of int64, shape (n,)
        Class codes 0, ..., K-1 (code ``j`` is the paper's class ``j + 1``).
    setting : int
        1, 2 or 3: the paper's setting that generated the data.
    beta : float
        The miscalibration parameter used.
    confidence : ndarray of float64, shape (n,)
        Top-1 confidence ``Z_(1) = max_j Z_j``.
    correct : ndarray of int64, shape (n,)
        1 if ``label == r1`` and 0 otherwise, where ``r1 = argmax_j Z_j``
        with ties broken by the lowest class index (``numpy.argmax``).
    """

    probs: np.ndarray
    labels: np.ndarray
    setting: int
    beta: float
    confidence: np.ndarray = field(init=False, repr=False)
    correct: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        probs = np.asarray(self.probs, dtype=np.float64)
        labels = np.asarray(self.labels)
        if probs.ndim != 2:
            raise ValueError(f"probs must be a 2-D array (n, K), got shape {probs.shape}")
        if labels.shape != (probs.shape[0],):
            raise ValueError(
                f"labels must have shape ({probs.shape[0]},) to match probs, got {labels.shape}"
            )
        labels = labels.astype(np.int64)
        top = np.argmax(probs, axis=1)  # first maximum: ties go to the lowest index
        rows = np.arange(probs.shape[0])
        object.__setattr__(self, "probs", read_only(probs))
        object.__setattr__(self, "labels", read_only(labels))
        object.__setattr__(self, "confidence", read_only(probs[rows, top]))
        object.__setattr__(self, "correct", read_only((labels == top).astype(np.int64)))

    @property
    def n(self) -> int:
        """Number of rows."""
        return self.probs.shape[0]

    @property
    def n_classes(self) -> int:
        """Number of classes K."""
        return self.probs.shape[1]

    def __repr__(self) -> str:
        return (
            f"SimulatedData(setting={self.setting}, beta={self.beta!r}, "
            f"n={self.n}, n_classes={self.n_classes})"
        )


# ---------------------------------------------------------------------------
# validation


def _option(name: str, value, label: str):
    """``value`` checked by the table of options (``setting``, ``sim_n``, ``beta``), a wrong type included
    as an :class:`OptionError`: the settings have raised ``ValueError`` for every bad argument since 0.1.0."""
    try:
        return check_option(name, value, label)
    except OptionTypeError as exc:
        raise OptionError(str(exc)) from None


def _check_beta(beta, setting: int) -> float:
    """beta as the table's finite number, then in the range of ``setting`` (Setting 3: [0, 1/K])."""
    beta = _option("beta", beta, "beta")
    if setting == 3:
        hi = 1.0 / N_CLASSES[3]
        if not 0.0 <= beta <= hi:
            raise OptionError(
                f"beta must lie in [0, {hi}] in setting 3, got {beta}: outside it "
                "P(Y = r1 | Z) = Z_(1) - beta < 0 (beta > 1/K, near the centre of the "
                "simplex) or P(Y = r2 | Z) = Z_(2) + beta < 0 (beta < 0, near a vertex) "
                "on a set of Z of positive probability"
            )
    return beta


# ---------------------------------------------------------------------------
# the logistic recalibration map of settings 1 and 2


def _recalibrate(s, beta: float) -> np.ndarray:
    """``p_beta(s) = logistic(beta * logit(s))``, exact at the ends of [0, 1].

    Computed as ``expit(beta * (log s - log1p(-s)))``: ``logit(1) = +inf``
    and ``logit(0) = -inf`` give the limits ``p_beta(1) = 1`` and
    ``p_beta(0) = 0`` for ``beta > 0`` (the reverse for ``beta < 0``) without
    any clipping, and nothing under- or overflows to ``0/0``.  ``beta = 0``
    gives 1/2 everywhere (the limit of ``s^0 / (s^0 + (1-s)^0)``, also at
    s in {0, 1}) and ``beta = 1`` returns ``s`` itself, so the calibrated
    model is calibrated to the last bit.
    """
    s = np.asarray(s, dtype=np.float64)
    if beta == 1.0:
        return s.copy()
    if beta == 0.0:
        return np.full_like(s, 0.5)
    with np.errstate(divide="ignore", over="ignore"):
        x = np.log(s) - np.log1p(-s)
        return special.expit(beta * x)


def _gap_sq(m, beta: float):
    """``g(m) = (p_beta(m) - m)^2``, the squared calibration gap at ``Z_1 = m``.

    ``g(1 - m) = g(m)`` because ``p_beta(1 - m) = 1 - p_beta(m)``; callers
    evaluate it at ``m = min(s, 1 - s) <= 1/2`` so that ``1 - s`` is never
    formed from an ``s`` rounded to 1.
    """
    return (_recalibrate(m, beta) - m) ** 2


# ---------------------------------------------------------------------------
# generators


def setting1(n, beta, rng=None) -> SimulatedData:
    """Setting 1 of the paper: K = 2, uniform predictions, logistic recalibration.

    .. math::

        Z_1 \\sim \\mathrm{Unif}(0, 1), \\quad Z = (Z_1, 1 - Z_1), \\quad
        P(Y_1 = 1 \\mid Z) = p_\\beta(Z_1)
        = \\frac{1}{1 + \\exp\\{-\\beta \\log[Z_1 / (1 - Z_1)]\\}}.

    Parameters
    ----------
    n : int
        Number of rows, >= 1.
    beta : float
        Any finite real; ``beta = 1`` is calibrated.
    rng : None, int or numpy.random.Generator, optional
        Seed or generator, passed to ``numpy.random.default_rng``.  Draws, in
        order: ``Z_1 = rng.random(n)``, then ``u = rng.random(n)``; the label
        is 0 (the paper's ``Y_1 = 1``) iff ``u < p_beta(Z_1)``.

    Returns
    -------
    SimulatedData
        ``probs[:, 0] = Z_1``, ``probs[:, 1] = 1 - Z_1``.

    See Also
    --------
    true_ece_sq : the true ECE^2 of this model.
    """
    n = _option("sim_n", n, "n")
    beta = _check_beta(beta, 1)
    gen = np.random.default_rng(rng)
    z1 = gen.random(n)
    u = gen.random(n)
    p0 = _recalibrate(z1, beta)
    labels = (u >= p0).astype(np.int64)
    probs = np.column_stack([z1, 1.0 - z1])
    return SimulatedData(probs, labels, 1, beta)


def setting2(n, beta, rng=None) -> SimulatedData:
    """Setting 2 of the paper: K = 2, Beta(5, 0.5) predictions, logistic recalibration.

    .. math::

        s \\sim \\mathrm{Beta}(5, 0.5), \\quad A \\sim \\mathrm{Unif}\\{0, 1\\}
        \\text{ independent}, \\quad Z_A = s, \\; Z_{1-A} = 1 - s, \\quad
        P(Y = A \\mid Z) = p_\\beta(s).

    The paper states ``Z_1 ~ Beta(5, 0.5)``; the random class ``A`` makes both
    classes equally likely to hold the (mostly large) probability ``s`` and
    changes none of the true ECE^2 values (see :func:`true_ece_sq`).  Since
    ``p_beta(1 - s) = 1 - p_beta(s)``, the model is the same as
    ``P(Y_1 = 1 | Z) = p_beta(Z_1)`` with ``Z_1`` drawn from the mixture
    ``(Beta(5, 0.5) + Beta(0.5, 5)) / 2``.

    Beta(5, 0.5) draws pile up at 1 (density ~ (1-s)^(-1/2)) and can be 1.0
    in float64; ``p_beta(1) = 1`` for ``beta > 0`` (0 for ``beta < 0``, 1/2
    for ``beta = 0``) is then taken as the limit, not by clipping ``s``.

    Parameters
    ----------
    n, beta : int, float
        As in :func:`setting1`: rows (>= 1), and any finite real (1 is calibrated).
    rng : None, int or numpy.random.Generator, optional
        Seed or generator, passed to ``numpy.random.default_rng``.  Draws, in
        order: ``s = rng.beta(5, 0.5, n)``, ``A = rng.integers(0, 2, n)``,
        ``u = rng.random(n)``; the label is ``A`` iff ``u < p_beta(s)``,
        else ``1 - A``.

    Returns
    -------
    SimulatedData
    """
    n = _option("sim_n", n, "n")
    beta = _check_beta(beta, 2)
    gen = np.random.default_rng(rng)
    s = gen.beta(*BETA_PARAMS, size=n)
    a = gen.integers(0, 2, size=n)
    u = gen.random(n)
    p_hold = _recalibrate(s, beta)
    labels = np.where(u < p_hold, a, 1 - a).astype(np.int64)
    r = 1.0 - s
    probs = np.column_stack([np.where(a == 0, s, r), np.where(a == 0, r, s)])
    return SimulatedData(probs, labels, 2, beta)


def setting3(n, beta, rng=None) -> SimulatedData:
    """Setting 3 of the paper: K = 10, uniform on the simplex, top-2 shift.

    With ``Z ~ Dirichlet(1, ..., 1)`` on the 9-simplex, ``r1`` and ``r2`` the
    classes of the largest and second-largest ``Z_j`` (ties to the lowest
    index first; ties have probability 0),

    .. math::

        P(Y = r_1 \\mid Z) = Z_{(1)} - \\beta, \\quad
        P(Y = r_2 \\mid Z) = Z_{(2)} + \\beta, \\quad
        P(Y = j \\mid Z) = Z_j \\; (j \\ne r_1, r_2).

    Parameters
    ----------
    n : int
        Number of rows, >= 1.
    beta : float
        In ``[0, 1/K] = [0, 0.1]``; ``beta = 0`` is calibrated.  This is the
        exact range for which the label law is a probability vector for every
        Z: ``Z_(1) >= 1/K`` always, but ``Z_(1) < beta`` has positive
        probability once ``beta > 1/K``, and ``Z_(2) < -beta`` once
        ``beta < 0``.  Out-of-range ``beta`` raises ``ValueError``.
    rng : None, int or numpy.random.Generator, optional
        Seed or generator, passed to ``numpy.random.default_rng``.  Draws, in
        order: ``Z = rng.dirichlet(ones(10), n)``, ``u = rng.random(n)``; the
        label is the class ``j`` with ``c_{j-1} <= u c_K < c_j`` for the
        cumulative sums ``c`` of the label probabilities (inverse CDF;
        scaling by the row total ``c_K`` absorbs its rounding, and a class of
        probability 0 is never drawn).

    Returns
    -------
    SimulatedData
    """
    n = _option("sim_n", n, "n")
    beta = _check_beta(beta, 3)
    k = N_CLASSES[3]
    gen = np.random.default_rng(rng)
    z = gen.dirichlet(np.ones(k), size=n)
    u = gen.random(n)
    rows = np.arange(n)
    r1 = np.argmax(z, axis=1)
    masked = z.copy()
    masked[rows, r1] = -np.inf
    r2 = np.argmax(masked, axis=1)
    q = z.copy()
    q[rows, r1] -= beta
    q[rows, r2] += beta
    c = np.cumsum(q, axis=1)
    labels = np.count_nonzero(c <= (u * c[:, -1])[:, None], axis=1).astype(np.int64)
    return SimulatedData(z, labels, 3, beta)


# ---------------------------------------------------------------------------
# truth


def _ece_sq_setting1(beta: float) -> tuple[float, float]:
    # E g(Z_1), Z_1 ~ Unif(0, 1); g symmetric about 1/2.
    val, err = integrate.quad(_gap_sq, 0.0, 0.5, args=(beta,), **_QUAD_KW)
    return 2.0 * val, 2.0 * err


def _ece_sq_setting2(beta: float) -> tuple[float, float]:
    # E g(s), s ~ Beta(5, 1/2), density f(s) = s^4 (1-s)^(-1/2) / B(5, 1/2).
    # [0, 1/2]: smooth integrand.  [1/2, 1]: with 1 - s = t^2, (1-s)^(-1/2) ds
    # = 2 dt removes the endpoint singularity, and g(s) = g(t^2) is evaluated
    # at the small argument t^2, exactly, instead of at a rounded s near 1.
    a, b = BETA_PARAMS
    lower, err_lo = integrate.quad(
        lambda s: _gap_sq(s, beta) * s ** (a - 1.0) * (1.0 - s) ** (b - 1.0),
        0.0, 0.5, **_QUAD_KW,
    )
    upper, err_up = integrate.quad(
        lambda t: _gap_sq(t * t, beta) * (1.0 - t * t) ** (a - 1.0) * 2.0,
        0.0, math.sqrt(0.5), **_QUAD_KW,
    )
    norm = special.beta(a, b)
    return (lower + upper) / norm, (err_lo + err_up) / norm


def true_ece_sq(setting, beta, target) -> float:
    """True squared l2 ECE of a simulation setting for a calibration target.

    **Settings 1 and 2** (K = 2).  Write ``g(z) = (p_beta(z) - z)^2`` with
    ``p_beta(z) = logistic(beta logit z)``; ``p_beta(1 - z) = 1 - p_beta(z)``
    (``logit`` is odd, ``logistic(-x) = 1 - logistic(x)``), hence
    ``g(1 - z) = g(z)``.  Let ``s`` be the probability drawn (Unif(0, 1) in
    Setting 1, Beta(5, 0.5) in Setting 2).

    * ``"binary"`` -- calibration of ``Z_1`` (target ``binary`` of ``docs/conventions.md``, "Calibration targets"):
      :math:`E[(P(Y_1=1 \\mid Z_1) - Z_1)^2] = E[g(Z_1)]`.  In Setting 2,
      ``Z_1 = s`` or ``1 - s``, and ``P(Y_1 = 1 | Z) = p_beta(Z_1)`` in both
      cases, so ``E g(Z_1) = E g(s)`` by the symmetry of g: randomising the
      class changes the law of ``Z_1`` but not this value.
    * ``"top1"`` -- :math:`E[(P(\\text{correct} \\mid C) - C)^2]` with
      ``C = max(Z_1, 1 - Z_1)``.  Given ``C = c > 1/2`` the predicted class
      holds probability ``c``, and it is correct with probability
      ``p_beta(c)`` whichever class it is and whichever of ``s``, ``1 - s``
      equals ``c`` (if ``s = 1 - c`` the other class is predicted and is
      correct with probability ``1 - p_beta(1 - c) = p_beta(c)``).  So
      ``P(correct | C) = p_beta(C)`` and the value is ``E g(C) = E g(s)``,
      the same number as ``"binary"``.
    * ``"full"`` -- canonical calibration in the paper's l2 norm over both
      components: ``E[Y | Z] - Z = (d, -d)`` with ``d = p_beta(Z_1) - Z_1``,
      so the value is ``2 E g(s)``, twice ``"binary"``.

    ``E g(s)`` is computed with ``scipy.integrate.quad`` (``epsabs=1e-13``,
    ``epsrel=1e-12``): Setting 1 as ``2 \\int_0^{1/2} g(z) dz``; Setting 2 as
    ``\\int_0^{1/2} g(s) f(s) ds`` plus, on ``[1/2, 1]`` with
    ``1 - s = t^2``, ``\\int_0^{1/\\sqrt 2} g(t^2) 2 (1 - t^2)^4 dt / B(5, 1/2)``,
    which removes the ``(1 - s)^{-1/2}`` singularity of the Beta(5, 0.5)
    density ``f(s) = s^4 (1 - s)^{-1/2} / B(5, 1/2)``.  ``beta = 1`` returns
    exactly 0 (``g`` vanishes identically).

    **Setting 3** (K = 10).  ``E[Y | Z] - Z = -beta e_{r1} + beta e_{r2}``,
    a constant vector in the coordinates ordered by rank, so the gaps are
    exact and need no integral:

    * ``"top1"``: ``E[Y_{r1} | Z_(1)] - Z_(1) = -beta``, value ``beta^2``;
    * ``"top2"`` (top-1-to-2, k = 2, the paper's target): the gap vector of
      ``(Y_{r1}, Y_{r2}) - (Z_(1), Z_(2))`` given ``Z_(1:2)`` is
      ``(-beta, +beta)``, value ``2 beta^2``;
    * ``"full"`` (canonical): ``||-beta e_{r1} + beta e_{r2}||^2 = 2 beta^2``.

    Parameters
    ----------
    setting : int
        1, 2 or 3.
    beta : float
        Miscalibration parameter (any finite real for settings 1-2; in
        ``[0, 0.1]`` for Setting 3, as for :func:`setting3`).
    target : str
        ``"binary"``, ``"top1"`` or ``"full"`` for settings 1-2;
        ``"top1"``, ``"top2"`` or ``"full"`` for Setting 3.

    Returns
    -------
    float
        The true ECE^2 (squared; take the square root for the ECE).

    Raises
    ------
    ValueError
        For an unknown setting or target, or an invalid beta.
    RuntimeError
        If quad's error estimate exceeds 1e-10 (not seen for any beta).

    Examples
    --------
    >>> true_ece_sq(1, 0.0, "binary")   # p = 1/2: integral of (1/2 - z)^2
    0.08333333333333334
    >>> true_ece_sq(3, 0.05, "top2")
    0.005000000000000001
    """
    setting = _option("setting", setting, "setting")
    beta = _check_beta(beta, setting)
    if target not in TARGETS[setting]:
        raise ValueError(
            f"target must be one of {TARGETS[setting]} for setting {setting}, got {target!r}"
        )
    if setting == 3:
        return beta * beta if target == "top1" else 2.0 * beta * beta
    if beta == 1.0:
        return 0.0
    val, err = (_ece_sq_setting1 if setting == 1 else _ece_sq_setting2)(beta)
    if not err <= _QUAD_MAX_ERR:
        raise RuntimeError(
            f"quad error estimate {err:.3g} for setting {setting}, beta={beta} "
            f"exceeds {_QUAD_MAX_ERR}"
        )
    return 2.0 * val if target == "full" else val


def paper_betas(setting) -> np.ndarray:
    """The grid of beta values the paper simulates for a setting.

    Settings 1 and 2: ``0, 0.05, ..., 1.0``; Setting 3: ``0, 0.005, ...,
    0.1``; 21 values each, rounded to 10 decimals so that they are the
    float64 nearest the decimal values (``0.15``, not ``0.15000000000000002``).

    Parameters
    ----------
    setting : int
        1, 2 or 3.

    Returns
    -------
    ndarray of float64, shape (21,)
    """
    setting = _option("setting", setting, "setting")
    step = 0.005 if setting == 3 else 0.05
    return np.round(np.arange(21) * step, 10)
