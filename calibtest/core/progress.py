"""The one progress helper of calibtest: when to show a tqdm bar, and the bar.

Every step that can take more than about 2 s (the label draws of the
multi-scale test, each pass of the streamed evidence and of a file, the
resamples of an interval, the report's parts, the simulation of
``calib_sample_size``) asks :func:`want_progress` or opens
:func:`progress_bar`.  The rule, for ``progress=None`` (the default): a bar
on stderr only when stderr is an interactive terminal or the code runs in a
Jupyter notebook (an IPython kernel: tqdm's widget), the ``CI`` environment
variable is unset, tqdm is installed, and the step is long enough (``work``
at least ``min_work``, when the caller gives them).  ``progress=True``: always
(a warning when tqdm is missing); ``False``: never.
"""
from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager

__all__ = ["want_progress", "progress_bar", "in_notebook", "interactive"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ZMQInteractiveShell); IPython is not imported here."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - a broken IPython is no notebook
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def interactive() -> bool:
    """stderr is a terminal or the code runs in a notebook, and the ``CI`` environment variable is unset."""
    if os.environ.get("CI"):
        return False
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty or in_notebook()


def _has_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def want_progress(progress=None, work: float | None = None, min_work: float = 0.0) -> bool:
    """Whether to show a bar: see the module.  ``progress`` True, False or None; ``work`` the step's size."""
    if progress is False:
        return False
    if progress is None:
        if (work is not None and work < min_work) or not interactive():
            return False
    elif progress is not True:
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    if not _has_tqdm():
        if progress:
            warnings.warn("progress=True needs tqdm (pip install 'calibtest[progress]'); no progress bar shown",
                          stacklevel=3)
        return False
    return True


def make_bar(total, desc: str, unit: str = "it", unit_scale: bool = False):
    """A tqdm bar on stderr (the notebook widget inside a kernel)."""
    if in_notebook():
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, file=sys.stderr)


class _NoBar:
    """The bar when none is shown: ``update`` and ``close`` do nothing."""

    def update(self, n: int = 1) -> None:
        return None

    def write(self, text: str) -> None:
        """Print a line on stdout (a shown bar's ``write`` prints it above the bar)."""
        print(text)

    def close(self) -> None:
        return None


@contextmanager
def progress_bar(total, desc: str, *, unit: str = "it", show=None, work: float | None = None,
                 min_work: float = 0.0, unit_scale: bool = False):
    """A bar over ``total`` steps while the block runs (a do-nothing bar when :func:`want_progress` says no).

    ``show`` is the caller's ``progress=`` (None, True or False).
    """
    bar = make_bar(total, desc, unit, unit_scale) if want_progress(show, work, min_work) else _NoBar()
    try:
        yield bar
    finally:
        bar.close()
