"""Validation reports (HTML and PDF) and the plots they hold.

:func:`report` writes a self-contained HTML file or a PDF (WeasyPrint, the
optional extra ``calibtest[pdf]``); :mod:`calibtest.reporting.plotting` draws
reliability diagrams with matplotlib.
"""
from calibtest.reporting.html import report

__all__ = ["report"]
