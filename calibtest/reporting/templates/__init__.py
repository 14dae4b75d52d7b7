"""Jinja2 templates for calibtest reports (installed as ``calibtest.templates``)."""
