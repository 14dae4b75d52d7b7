"""The version of calibtest, read from the package metadata (standard library only, so it costs no numpy import)."""
from __future__ import annotations

__all__ = ["package_version"]


def package_version() -> str:
    """The installed version of calibtest (``"0+unknown"`` in a source tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("calibtest")
    except PackageNotFoundError:
        return "0+unknown"
