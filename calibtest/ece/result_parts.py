"""The typed, frozen parts a :class:`~calibtest.ece.result.CalibrationResult` nests.

A result holds its headline numbers (T, T_m, sigma1^2, the standard error,
alpha) as fields and groups the rest by what it describes, as scipy's
``BootstrapResult`` nests its ``confidence_interval``:

* :class:`ResultInterval`: the interval for ECE^2 at the result's level and how it was made;
* :class:`ZeroTest`: the test of H0: ECE = 0 (the calibrated-regime test) under the chosen null;
* :class:`Binning`: B, how it was chosen, the cells and their sums;
* :class:`CalibrationTarget`: which probabilities of which outcome are assessed;
* :class:`AnalysedRows`: the rows that were analysed and where they came from.

Two small bundles carry what a result's builder
(:meth:`~calibtest.ece.result.CalibrationResult.from_estimates`) is given
before the parts exist: :class:`BinChoice` (B and how it was chosen, from
which it makes the :class:`Binning` with the bin sums) and :class:`NullChoice`
(the null that decided the test, with the finite-sample tests computed).

Every field of a part keeps its flat name on the result (``res.ci_lower`` is
``res.ci.lower``, ``res.null_pvalue`` is ``res.zero_test.pvalue``), read
through :class:`PartField`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from calibtest.core.targets import Target

if TYPE_CHECKING:  # annotations only
    from calibtest.core.binning import BinRule
    from calibtest.core.binstats import BinStats
    from calibtest.core.conditional import ConditionalTest, MonteCarloTest
    from calibtest.core.null import AsymptoticTest
    from calibtest.core.partition import Partition
    from calibtest.core.resampling import ResamplingInterval
    from calibtest.core.targets import PreparedData

__all__ = ["ResultInterval", "ZeroTest", "Binning", "CalibrationTarget", "AnalysedRows", "PartField", "BinChoice",
           "NullChoice"]

T = TypeVar("T")


class PartField(Generic[T]):
    """A read-only attribute of a result that reads one field of one of its parts.

    ``ci_lower = PartField[float]("ci", "lower")`` in the class body makes
    ``res.ci_lower`` return ``res.ci.lower`` (the very object), and refuses
    assignment as a frozen field does.

    Parameters
    ----------
    part : str
        The result's field that holds the part.
    name : str
        The part's field.
    """

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name
        self.attr = name

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr
        self.__doc__ = f"``{part_path(self)}`` (read-only)."

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> PartField[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.part), self.name)

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(f"cannot assign to {self.attr!r}: the result is frozen (it reads {part_path(self)}; "
                             f"res.with_parts({self.attr}=...) makes a changed copy)")

    def __delete__(self, obj: object) -> None:
        raise AttributeError(f"cannot delete {self.attr!r}: the result is frozen")


def part_path(forward: PartField) -> str:
    """Where a flat name lives, e.g. ``"ci.lower"``."""
    return f"{forward.part}.{forward.name}"


@dataclass(frozen=True)
class ResultInterval:
    """The confidence interval for ECE^2 at the result's level 1 - alpha, and how it was made.

    Attributes
    ----------
    lower, upper : float
        Ends of the interval (``ci_lower``, ``ci_upper``): the adjusted interval
        of Algorithm 1 with the zero rule, or a resampling interval intersected
        with [0, inf), the parameter space of ECE^2.
    lower_open : bool
        The interval is ``(0, upper]``: it excludes 0 although its infimum is 0
        (``ci_lower_open``).
    contains_zero : bool
        Zero belongs to the interval (``contains_zero``).
    branch : int
        Case of the paper's eq. (10) that gave the lower end (1, 2 or 3; 0 for
        a resampling interval) (``ci_branch``).
    method : str
        How the interval was made: ``"adjusted"`` (Algorithm 1), or the
        resampling method (``method``).
    resampling : ResamplingInterval or None
        The resampling interval (``method="bootstrap"``, ``"subsampling"`` or
        ``"hulc"``): the method's own interval, resamples, seed, HulC details
        and the resampled statistics; None for the adjusted interval (``resampling``).
    """

    lower: float
    upper: float
    lower_open: bool
    contains_zero: bool
    branch: int
    method: str = "adjusted"
    resampling: ResamplingInterval | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ZeroTest:
    """The test of H0: ECE = 0 (the calibrated-regime test) under the null law the result used.

    Attributes
    ----------
    null : {"asymptotic", "conditional", "monte-carlo"}
        The null law that decided ``zstat``, ``pvalue``, ``threshold`` and the
        interval's zero rule: ``"asymptotic"`` (the paper), ``"conditional"``
        (exact conditional moments, shifted-gamma p-value) or ``"monte-carlo"``
        (see :mod:`calibtest.core.conditional`) (``null``).
    method : {"normal", "point mass", "shifted gamma", "monte carlo"}
        How the chosen null's p-value was computed (``null_method``).
    zstat, pvalue : float
        The chosen null's statistic and p-value; under the asymptotic null
        z0 = n sqrt(w) T / sigma0 and p = 1 - Phi(z0) (``null_zstat``, ``null_pvalue``).
    threshold : float
        Critical value of T: zero joins the interval iff T+ < threshold; under
        the asymptotic null z_alpha sigma0 / (n sqrt(w)) (``threshold``).
    sigma0_sq : float
        Exact variance constant of the calibrated regime (paper eq. (12)); a
        weighted result's is n^2 w V_0 (``sigma0_sq``).
    asymptotic : AsymptoticTest or None
        ``(zstat, pvalue)`` of the paper's asymptotic test, kept when a
        finite-sample null was computed next to it (the conditional moments, a
        weighted result's Monte Carlo null, a clustered result's sign-flip
        null); under the asymptotic null it repeats ``zstat`` and ``pvalue``.
        None otherwise (``asymptotic``).
    conditional : ConditionalTest or None
        The conditional test given the predictions (variance, skewness, z,
        shifted-gamma p-value and critical value of T at alpha); None when it
        was not computed (``conditional``).
    monte_carlo : MonteCarloTest or None
        The conditional Monte Carlo test: p-value, draws, seed (``monte_carlo``).
    """

    null: str
    method: str
    zstat: float
    pvalue: float
    threshold: float
    sigma0_sq: float
    asymptotic: AsymptoticTest | None = None
    conditional: ConditionalTest | None = field(default=None, repr=False)
    monte_carlo: MonteCarloTest | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Binning:
    """The bins of the estimator: B, how it was chosen, the occupied cells and their sums.

    Attributes
    ----------
    n_bins : int
        Bins per dimension B (``n_bins``).
    n_bins_rule : {"auto", "user"}
        How B was given (``n_bins_rule``).
    volume : float
        The cell volume w (``bin_volume``).
    n_occupied, n_singleton : int
        Non-empty cells, and those holding a single row, which do not enter T
        (``n_occupied_bins``, ``n_singleton_bins``).
    rule : BinRule or None
        How B was chosen, with the rule's inputs (B_rate, fraction of rows alone
        in a cell at B_rate and at B); ``rule.describe()`` states it (``bin_rule``).
    stats : BinStats or None
        Per-cell sums of the rows (``bin_stats``).
    partition : Partition or None
        The row-to-cell assignment, rows in memory only (``partition``).
    """

    n_bins: int
    n_bins_rule: str
    volume: float
    n_occupied: int
    n_singleton: int
    rule: BinRule | None = field(default=None, repr=False)
    stats: BinStats | None = field(default=None, repr=False)
    partition: Partition | None = field(default=None, repr=False)

    @property
    def width(self) -> float:
        """1/B, the width of a bin along one coordinate (``bin_width``)."""
        return 1.0 / self.n_bins


@dataclass(frozen=True)
class CalibrationTarget:
    """What is assessed: which probabilities, of which outcome, under which notion of calibration.

    Attributes
    ----------
    mode : Target
        The calibration target (``mode``): ``"binary"``, ``"top1"``, ``"topk"`` or ``"full"`` (a string given is
        made a :class:`~calibtest.core.targets.Target`).
    k : int
        Coordinates of the top-k target (1 for binary and top-1) (``k``).
    n_classes : int or None
        Number of classes, when known (``n_classes``).
    formula : str or None
        The formula of the call, if one was given (``formula``).
    y_name : str
        Name of the outcome (``y_name``).
    prob_names : tuple of str
        Names of the probability columns (``prob_names``).
    name : str or None
        The model's name given by the caller (``model_label``; a scikit-learn
        Display's ``name``): comparisons, figures and reports show it in place
        of the name made of ``formula`` or ``prob_names``.
    """

    mode: Target
    k: int
    n_classes: int | None
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Target(self.mode))


@dataclass(frozen=True)
class AnalysedRows:
    """The rows that were analysed and where they came from.

    Attributes
    ----------
    n : int
        Rows used (``n``).
    n_dropped : int
        Rows dropped for missing values, ``missing="drop"`` (``n_dropped``).
    data : PreparedData or None
        Z and U of every row, rows in memory only (``data``).
    source : dict or None
        The file or Dask frame the rows were read from (``source``).
    stream : StreamedRows or None
        For a binary or top-1 result of a file or a Dask frame: its rows, to be
        read again in passes by the evidence (:mod:`calibtest.streams.evidence`)
        (``stream``).
    impossible : tuple of int or None
        For rows not held in memory (a file, a Dask frame, an accumulator): the
        rows impossible under calibration counted as they went by, (events at a
        stated probability 0, non-events at 1, rows with either).
    """

    n: int
    n_dropped: int = 0
    data: PreparedData | None = field(default=None, repr=False)
    source: dict | None = field(default=None, repr=False)
    #: ``calibtest.streams.evidence.StreamedRows`` (typed loosely: the streams layer sits above this one).
    stream: object | None = field(default=None, repr=False)
    impossible: tuple | None = field(default=None, repr=False)


@dataclass(frozen=True)
class BinChoice:
    """B and how it was chosen: what a result's :class:`Binning` is made of, with the bin sums.

    Attributes
    ----------
    n_bins : int
        Bins per dimension B.
    n_bins_rule : {"auto", "user"}
        How B was given.
    rule : BinRule or None
        How B was chosen, with the rule's inputs.
    partition : Partition or None
        The row-to-cell assignment, rows in memory only.
    """

    n_bins: int
    n_bins_rule: str
    rule: BinRule | None = field(default=None, repr=False)
    partition: Partition | None = field(default=None, repr=False)

    def binning(self, stats: BinStats, volume: float) -> Binning:
        """The :class:`Binning` of these bins with the sums ``stats`` and the cell volume w."""
        return Binning(n_bins=self.n_bins, n_bins_rule=self.n_bins_rule, volume=volume,
                       n_occupied=int(stats.count.size), n_singleton=int((stats.count < 2).sum()),
                       rule=self.rule, stats=stats, partition=self.partition)


@dataclass(frozen=True)
class NullChoice:
    """The null that decides a result's test, with the finite-sample tests computed beside it.

    Attributes
    ----------
    null : {"asymptotic", "conditional", "monte-carlo"} (``"auto"`` before a stream resolves it)
        The null law.
    conditional : ConditionalTest or None
        The conditional test given the predictions (required by ``null="conditional"``).
    monte_carlo : MonteCarloTest or None
        The Monte Carlo test (required by ``null="monte-carlo"``).
    """

    null: str = "asymptotic"
    conditional: ConditionalTest | None = field(default=None, repr=False)
    monte_carlo: MonteCarloTest | None = field(default=None, repr=False)
