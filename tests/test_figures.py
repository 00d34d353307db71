"""The course's diagrams ship inside the package (so Colab shows them without the repository) and render."""

import xml.etree.ElementTree as ET

import pytest

import colab_gpu as cg

SVG = "{http://www.w3.org/2000/svg}"


def test_the_lessons_diagrams_are_in_the_installed_package():
    assert {"async_timeline", "pinned_copy", "dataparallel_vs_ddp", "step_memory"} <= set(
        cg.measure.plots.figure_names()
    )


@pytest.mark.parametrize("name", cg.measure.plots.figure_names())
def test_each_diagram_is_an_svg_with_a_title_and_text(name):
    assert cg.show_figure(name) is None  # outside a notebook it displays nothing
    root = ET.fromstring(cg.measure.plots.figure_svg(name))
    assert root.tag == f"{SVG}svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0
    assert root.find(f"{SVG}title").text.strip(), "a title, read by screen readers"
    assert len(root.findall(f".//{SVG}text")) >= 5


def test_unknown_figure_says_which_exist():
    with pytest.raises(ValueError, match="No figure named 'timeline'; the package has: async_timeline"):
        cg.measure.plots.figure_svg("timeline")


def test_bandwidth_plot_has_one_point_per_size():
    import matplotlib

    matplotlib.use("Agg")
    fig = cg.plot_bandwidth({16: 6.5, 1: 2.0, 256: 11.8}, "host to device")
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [1, 16, 256] and list(line.get_ydata()) == [2.0, 6.5, 11.8]
    assert fig.axes[0].get_xscale() == "log"
    with pytest.raises(ValueError, match="at least one measured size"):
        cg.plot_bandwidth({}, "empty")


@pytest.mark.parametrize(
    ("lesson", "figure"),
    [
        ("02_tensors_on_device", "async_timeline"),
        ("05_feeding_the_gpu", "pinned_copy"),
        ("07_gpu_memory", "step_memory"),  # a CPU runtime's stand-in for the snapshot a GPU draws
        ("08_multi_gpu_ddp", "dataparallel_vs_ddp"),
    ],
)
def test_lessons_show_their_diagram_and_the_executed_notebook_holds_it(lesson, figure):
    import nbformat
    from paths import NOTEBOOKS

    notebook = nbformat.read(NOTEBOOKS / f"{lesson}.ipynb", as_version=4)
    cells = [c for c in notebook.cells if c.cell_type == "code" and f'cg.show_figure("{figure}")' in c.source]
    assert len(cells) == 1, f"{lesson} should show the {figure} diagram once"
    shown = [o for o in cells[0].outputs if "image/svg+xml" in o.get("data", {})]
    assert shown and "<svg" in shown[0]["data"]["image/svg+xml"], f"{lesson}.ipynb: the diagram did not render"
