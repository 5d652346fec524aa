"""Shared matplotlib plumbing for the PNGs the commands write (headless backend)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, path: Path, legend: bool = True) -> Path:
    """Legend (where there are labelled artists), tight layout, 110 dpi PNG; closes the figure."""
    for ax in fig.axes:
        if legend and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return Path(path)
