"""Shared reading of report output for the report tests (not a test module)."""
from __future__ import annotations

import base64
import io
import re
from html.parser import HTMLParser

import pandas as pd


def bins_csv(html: str) -> tuple[str, pd.DataFrame]:
    """(file name, table) of the first bin table linked in an HTML report (a base64 ``data:`` URI)."""
    m = re.search(r'<a\s+download="([^"]+-bins\.csv)" href="data:text/csv;charset=utf-8;base64,([^"]+)"', html)
    assert m, "no bin-table link"
    return m.group(1), pd.read_csv(io.StringIO(base64.b64decode(m.group(2)).decode("utf-8")))


# ------------------------------------------------------------------------------------------- reading the tables
class _Tables(HTMLParser):
    """Every <table>: its caption text and its rows (header row first) of whitespace-collapsed cell texts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[dict] = []
        self._table = None
        self._cell = None
        self._caption = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = {"caption": "", "rows": []}
            self.tables.append(self._table)
        elif self._table is None:
            return
        elif tag == "caption":
            self._caption = True
        elif tag == "tr":
            self._table["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "caption":
            self._caption = False
        elif tag in ("td", "th") and self._cell is not None:
            self._table["rows"][-1].append(" ".join(self._cell.split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._table is None:
            return
        if self._caption:
            self._table["caption"] += data
        elif self._cell is not None:
            self._cell += data


def tables(html: str) -> list[tuple[str, list[list[str]]]]:
    """(caption without its "Table N. " label, rows) of every table of a report."""
    parser = _Tables()
    parser.feed(html)
    parser.close()
    return [(re.sub(r"^Table \d+\.\s*", "", " ".join(t["caption"].split())), t["rows"]) for t in parser.tables]
