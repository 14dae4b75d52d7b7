"""Validation reports (HTML and PDF) and the plots they hold.

:func:`report` writes a self-contained HTML file or a PDF (WeasyPrint, the
optional extra ``calibtest[pdf]``); :mod:`calibtest.reporting.plotting` draws
reliability diagrams with matplotlib; :func:`plot_forest`
(:mod:`calibtest.reporting.forest`) the per-group intervals of a grouped result;
:func:`plot_survival_calibration` (:mod:`calibtest.reporting.survival_plot`) the
reliability diagram at a time horizon of a survival evidence result.

Both names are imported on first use (PEP 562), so importing
:mod:`calibtest.reporting.plotting` does not load the HTML renderer.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: Each public name and the module that defines it.
_EXPORTS = {"report": "calibtest.reporting.html", "plot_forest": "calibtest.reporting.forest",
            "plot_survival_calibration": "calibtest.reporting.survival_plot"}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from calibtest.reporting.forest import plot_forest
    from calibtest.reporting.html import report
    from calibtest.reporting.survival_plot import plot_survival_calibration


def __getattr__(name: str):
    """Import a public name on first use and keep it (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The loaded attributes and every public name, loaded or not."""
    return sorted(set(globals()) | set(__all__))
