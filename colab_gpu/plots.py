"""Small plots the lessons share: timings side by side.

matplotlib is imported inside the functions, so ``import colab_gpu`` works without it.
"""

from __future__ import annotations

from collections.abc import Mapping


def bar_seconds(times: Mapping[str, float], title: str, *, ylabel: str = "seconds (median)", log: bool = False):
    """Draw one bar per label (e.g. ``{"CPU": 0.12, "cuda:0": 0.004}``) and return the figure.

    Each bar is annotated with its value, so the plot reads without the table next to it.

    Example:
        >>> fig = bar_seconds({"CPU": 0.2, "GPU": 0.01}, "matmul 4096x4096")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    if not times:
        raise ValueError(f"bar_seconds needs at least one timing to draw, got none for {title!r}.")
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(times), 3.2))
    bars = ax.bar(list(times), list(times.values()), color=[f"C{i}" for i in range(len(times))])
    ax.bar_label(bars, labels=[_short(v) for v in times.values()])
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    fig.tight_layout()
    return fig


def _short(seconds: float) -> str:
    from .timing import format_seconds

    return format_seconds(seconds)
