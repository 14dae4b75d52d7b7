"""The sphinx-gallery image scraper of calibtest's documentation site (``sphinx_gallery_conf`` in conf.py)."""
from __future__ import annotations

from pathlib import Path


def _figure_of(value):
    """The matplotlib figure a value of an example is or draws on (a Figure, an Axes, a Display), or None."""
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    if isinstance(value, Figure):
        return value
    if isinstance(value, Axes):
        return value.figure
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":   # an array of panels
        first = next(iter(getattr(value, "flat", value)), None)
        return first.figure if isinstance(first, Axes) else None
    figure = getattr(value, "figure_", None)  # scikit-learn's and calibtest's Display objects
    return figure if isinstance(figure, Figure) else None


def unmanaged_figures(block, block_vars, gallery_conf):
    """sphinx-gallery image scraper for the figures pyplot does not hold, and stable names for every figure.

    calibtest's report figures (``calibtest.reporting.plotting``) are ``Figure`` objects with their own
    canvas, not registered with pyplot, so sphinx-gallery's matplotlib scraper does not see them. This
    one saves each new such figure bound to a name of the example (in the order of the names) as
    ``sphx_glr_<example>_<n>.png``, like every gallery image, and shows it under the block. Each new
    figure bound to a name, pyplot's included (as a Figure, an Axes or a Display's ``figure_``), is also
    saved as ``<example>-<name>.png`` in the same folder: the stable name by which the user guide's
    pages (``figures.md``, ``sklearn.md``) embed it. It runs before the matplotlib scraper, which then
    saves and closes pyplot's figures.
    """
    from sphinx_gallery.scrapers import figure_rst

    seen = block_vars.setdefault("calibtest_seen_figures", [])  # the figures saved so far (kept alive)
    stem = Path(block_vars["src_file"]).stem
    images = []
    for name, value in list(block_vars["example_globals"].items()):
        figure = _figure_of(value)
        if figure is None or any(figure is done for done in seen):
            continue
        seen.append(figure)
        if figure.canvas.manager is None:
            path = Path(next(block_vars["image_path_iterator"]))
            figure.savefig(path, dpi=100)
            images.append(str(path))
        folder = Path(block_vars["image_path_iterator"].image_path).parent
        figure.savefig(folder / f"{stem}-{name}.png", dpi=100)
    return figure_rst(images, gallery_conf["src_dir"])


#: The gallery's order: from a first model to a study's report (a new example not listed goes last).
EXAMPLE_ORDER = (
    "plot_breast_cancer.py",
    "plot_sklearn.py",
    "plot_llm_confidence.py",
    "plot_multiclass_full.py",
    "plot_survival_horizon.py",
    "plot_multicentre.py",
    "plot_planning.py",
    "plot_report.py",
    "plot_monitoring.py",
)


class ExampleOrder:
    """sphinx-gallery's ``within_subsection_order``: the examples in the order of :data:`EXAMPLE_ORDER`."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename: str):
        name = Path(filename).name
        return (EXAMPLE_ORDER.index(name), name) if name in EXAMPLE_ORDER else (len(EXAMPLE_ORDER), name)

    def __repr__(self) -> str:  # sphinx-gallery and Sphinx's configuration cache compare it
        return f"{type(self).__name__}()"
