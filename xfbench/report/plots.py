"""Plots (matplotlib, Agg): the helpers every suite's plots share, each plot written as a
PNG file (Table 7's: xfbench/networks/report/plots.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from xfbench.report.files import replacing  # noqa: E402

SIZE = (8.5, 4.0)
COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 110


def save_figure(fig, path: Path) -> Path:
    fig.tight_layout()
    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def place_legend(ax, n: int) -> None:
    if n:  # beside the axes, so no line is hidden under it
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def safely(draw, *args, problems: list[str], what: str):
    """A plot that cannot be drawn (absurd values in a file) must not cost the tables."""
    try:
        return draw(*args)
    except Exception as e:  # noqa: BLE001 - any matplotlib failure, reported below
        plt.close("all")
        problems.append(f"plot {what} not drawn: {type(e).__name__}: {e}")
        return None


def clear(folder: Path) -> None:
    """The plots folder, made, without the last render's plots (plots/ is the report's
    own: each suite's plots are drawn into it again)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.png"):
        stale.unlink()
