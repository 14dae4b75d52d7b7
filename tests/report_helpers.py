"""Shared reading of report output for the report tests (not a test module)."""
from __future__ import annotations

import base64
import io
import re

import pandas as pd


def bins_csv(html: str) -> tuple[str, pd.DataFrame]:
    """(file name, table) of the first bin table linked in an HTML report (a base64 ``data:`` URI)."""
    m = re.search(r'<a\s+download="([^"]+-bins\.csv)" href="data:text/csv;charset=utf-8;base64,([^"]+)"', html)
    assert m, "no bin-table link"
    return m.group(1), pd.read_csv(io.StringIO(base64.b64decode(m.group(2)).decode("utf-8")))
