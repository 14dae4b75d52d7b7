"""Validation reports (HTML and PDF) and the plots they hold.

:func:`report` writes a self-contained HTML file or a PDF (WeasyPrint, the
optional extra ``calibtest[pdf]``); :mod:`calibtest.reporting.plotting` draws
reliability diagrams with matplotlib; :func:`plot_forest`
(:mod:`calibtest.reporting.forest`) the per-group intervals of a grouped result.
"""
from calibtest.reporting.forest import plot_forest
from calibtest.reporting.html import report

__all__ = ["report", "plot_forest"]
