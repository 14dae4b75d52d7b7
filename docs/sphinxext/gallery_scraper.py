"""The sphinx-gallery image scraper of calibtest's documentation site (``sphinx_gallery_conf`` in conf.py)."""
from __future__ import annotations

from pathlib import Path


def unmanaged_figures(block, block_vars, gallery_conf):
    """sphinx-gallery image scraper for the figures pyplot does not hold.

    calibtest's report figures (``calibtest.reporting.plotting``) are ``Figure`` objects with their own
    canvas, not registered with pyplot, so the default matplotlib scraper does not see them. This one
    saves each new such ``Figure`` bound to a name of the example (in the order of the names), as
    ``sphx_glr_<example>_<n>.png`` like every gallery image, and also as ``<example>-<name>.png`` in the
    same folder, a stable name by which the user guide's pages embed it.
    """
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst

    seen = block_vars.setdefault("calibtest_seen_figures", [])  # the figures saved so far (kept alive)
    images = []
    for name, value in list(block_vars["example_globals"].items()):
        if not isinstance(value, Figure) or value.canvas.manager is not None \
                or any(value is figure for figure in seen):
            continue
        seen.append(value)
        path = Path(next(block_vars["image_path_iterator"]))
        value.savefig(path, dpi=100)
        stem = Path(block_vars["src_file"]).stem
        value.savefig(path.with_name(f"{stem}-{name}.png"), dpi=100)
        images.append(str(path))
    return figure_rst(images, gallery_conf["src_dir"])

