"""Figures for reports and sweeps: matplotlib without a display, saved whole or not at all."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed; imported only when a plot is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, dpi: int = 120) -> None:
    """Write `fig` to `path` atomically (its format from the extension) and close it, even on error."""
    from ralm.atomic_files import atomic_path

    path = Path(path)
    try:
        with atomic_path(path, suffix=path.suffix) as tmp:  # savefig picks the format from the extension
            fig.savefig(tmp, dpi=dpi)
    finally:
        pyplot().close(fig)
