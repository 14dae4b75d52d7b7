"""Small example data shipped with calibtest (see ``README.md`` in this folder)."""
