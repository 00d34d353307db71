"""Small plots the lessons share: timings side by side, bandwidth by size, and the course's diagrams.

matplotlib is imported inside the functions, so ``import colab_gpu`` works without it. The diagrams are SVG
files shipped inside the package (``colab_gpu/figures``), so a notebook on Colab or Kaggle shows them
without the repository.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

from .timing import format_seconds


def bar_seconds(times: Mapping[str, float], title: str, *, ylabel: str = "seconds (median)", log: bool = False):
    """Draw one bar per label (e.g. ``{"CPU": 0.12, "cuda:0": 0.004}``) and return the figure.

    Each bar is annotated with its value, so the plot reads without the table next to it.

    Example:
        >>> fig = bar_seconds({"CPU": 0.2, "GPU": 0.01}, "matmul 4096x4096")  # doctest: +SKIP

    Taught in lesson 02.
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
    return format_seconds(seconds)


def plot_history(history, title: str = "learning curves"):
    """Loss and accuracy per epoch, train and test side by side; return the figure. Taught in lesson 03."""
    import matplotlib.pyplot as plt

    epochs = history.column("epoch")
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.2))
    for split in ("train", "test"):
        if f"{split}_loss" in history.last:
            ax_loss.plot(epochs, history.column(f"{split}_loss"), marker="o", label=split)
            ax_acc.plot(epochs, history.column(f"{split}_acc"), marker="o", label=split)
    ax_loss.set(xlabel="epoch", ylabel="loss", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def show_images(images, titles, *, mean=None, std=None, columns: int = 8, title: str = ""):
    """A grid of images (N, C, H, W) with a title each; ``mean``/``std`` undo normalization. Taught in lesson 03."""
    import matplotlib.pyplot as plt

    if len(images) == 0:
        raise ValueError("show_images got no images to show.")
    images = images.detach().float().cpu()
    if mean is not None and std is not None:
        images = images * std.view(1, -1, 1, 1).cpu() + mean.view(1, -1, 1, 1).cpu()
    elif images.max() > 1:
        images = images / 255
    rows = (len(images) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(1.5 * columns, 1.7 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, image, label in zip(axes.flat, images, titles, strict=False):
        picture = image.clamp(0, 1).permute(1, 2, 0).numpy()
        ax.imshow(picture.squeeze(-1) if picture.shape[-1] == 1 else picture, cmap="gray")
        ax.set_title(label, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def figure_names() -> list[str]:
    """The diagrams ``show_figure`` can display. Taught in lesson 02."""
    return sorted(
        item.name.removesuffix(".svg")
        for item in resources.files("colab_gpu").joinpath("figures").iterdir()
        if item.name.endswith(".svg")
    )


def figure_svg(name: str) -> str:
    """The SVG text of the course diagram ``name``. Taught in lesson 02."""
    names = figure_names()
    if name not in names:
        raise ValueError(f"No figure named {name!r}; the package has: {', '.join(names)}.")
    return resources.files("colab_gpu").joinpath("figures", f"{name}.svg").read_text(encoding="utf-8")


def show_figure(name: str) -> None:
    """Display the course diagram ``name`` (an SVG shipped with the package) in the notebook.

    Outside a notebook it displays nothing (``figure_svg`` gives the text).

    Taught in lesson 02.
    """
    svg = figure_svg(name)
    try:
        from IPython import get_ipython
        from IPython.display import SVG, display
    except ImportError:  # pragma: no cover - IPython ships with every notebook kernel
        return
    if get_ipython() is not None:
        display(SVG(svg))


def plot_bandwidth(gbps_by_mib: Mapping[int, float], title: str):
    """Copy bandwidth (GB/s) against transfer size (MiB, log scale), one point per measured size.

    Taught in lesson 02.
    """
    import matplotlib.pyplot as plt

    if not gbps_by_mib:
        raise ValueError(f"plot_bandwidth needs at least one measured size, got none for {title!r}.")
    sizes = sorted(gbps_by_mib)
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.plot(sizes, [gbps_by_mib[s] for s in sizes], marker="o")
    for size in sizes:
        ax.annotate(
            f"{gbps_by_mib[size]:.1f}",
            (size, gbps_by_mib[size]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [f"{s} MiB" for s in sizes])
    ax.set_xlabel("transfer size")
    ax.set_ylabel("GB/s (median)")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_memory_timeline(timeline_bytes: list[int], title: str):
    """Memory held by tensors (MiB) after each allocation or free, e.g. from ``allocated_timeline``.

    Taught in lesson 07.
    """
    import matplotlib.pyplot as plt

    if not timeline_bytes:
        raise ValueError(f"plot_memory_timeline needs at least one recorded event, got none for {title!r}.")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot([b / 2**20 for b in timeline_bytes], drawstyle="steps-post")
    ax.set_xlabel("allocation or free, in order")
    ax.set_ylabel("MiB held by tensors")
    ax.set_title(title)
    fig.tight_layout()
    return fig
