"""Jinja2 templates for calibtest reports, shipped inside the package and loaded with ``jinja2.PackageLoader``."""
