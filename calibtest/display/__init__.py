"""Text and numbers as shown: number formats, JSON-safe values, call records, and the statsmodels-style Summary tables every result prints."""
