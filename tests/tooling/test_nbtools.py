import nbformat
from nbtools import (
    SETUP_RE,
    CourseConfig,
    badge_markdown,
    badge_url,
    course_config,
    kaggle_url,
    lesson_sources,
    stamp_notebook,
    stamp_text,
)
from paths import NOTEBOOKS


def test_config_comes_from_pyproject_and_package():
    import tomllib
    from paths import ROOT

    import colab_gpu

    config = course_config()
    assert "/" in config.repository and config.version == colab_gpu.__version__
    assert config.distribution == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert config.install_spec == f"{config.distribution}=={colab_gpu.__version__}"  # PyPI, exact pin, no git


def test_badges_point_at_the_notebook_path_on_colab_and_kaggle():
    config = CourseConfig("someone/course", "main", "1.2.3")
    notebook = NOTEBOOKS / "01_x.ipynb"
    assert (
        badge_url(config, notebook)
        == "https://colab.research.google.com/github/someone/course/blob/main/notebooks/01_x.ipynb"
    )
    assert (
        kaggle_url(config, notebook)
        == "https://kaggle.com/kernels/welcome?src=https://github.com/someone/course/blob/main/notebooks/01_x.ipynb"
    )
    assert badge_markdown(config, notebook).count("](https://") == 4  # two images, two links


def test_stamp_rewrites_badges_and_setup_block():
    old = CourseConfig("old/repo", "main", "0.0.1")
    new = CourseConfig("new/repo", "dev", "2.0.0")
    notebook = NOTEBOOKS / "05_x.ipynb"
    colab_only = f"[![Open In Colab](x.svg)]({badge_url(old, notebook)})"
    text = f"# {colab_only}\n\n{old.setup_block}\n\nimport torch\n"
    stamped = stamp_text(text, new, notebook)
    assert badge_markdown(new, notebook, "\n# ") in stamped and "old/repo" not in stamped  # a py:percent comment
    assert SETUP_RE.findall(stamped) == [new.setup_block] and 'COLAB_GPU = "2.0.0"' in stamped
    assert stamped.endswith("\n\nimport torch\n")  # the lesson's own lines stay
    assert stamp_text(stamped, new, notebook) == stamped


def test_stamp_notebook_updates_the_version_the_setup_cell_printed():
    old, new = CourseConfig("a/b", "main", "0.1.0"), CourseConfig("a/b", "main", "0.2.0")
    cell = nbformat.v4.new_code_cell(old.setup_block + "\nprint('hi')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="colab_gpu 0.1.0: already installed\nhi\n")]
    other = nbformat.v4.new_code_cell("print('colab_gpu 0.1.0: is just text here')")
    other.outputs = [nbformat.v4.new_output("stream", name="stdout", text="colab_gpu 0.1.0: is just text here\n")]
    notebook = nbformat.v4.new_notebook(cells=[cell, other])
    assert stamp_notebook(notebook, new, NOTEBOOKS / "01_x.ipynb")
    assert cell.outputs[0].text == "colab_gpu 0.2.0: already installed\nhi\n"
    assert 'COLAB_GPU = "0.2.0"' in cell.source
    assert other.outputs[0].text == "colab_gpu 0.1.0: is just text here\n"  # only the setup cell's output
    assert not stamp_notebook(notebook, new, NOTEBOOKS / "01_x.ipynb")


def test_committed_lessons_are_stamped():
    config = course_config()
    for source in lesson_sources():
        text = source.read_text()
        assert stamp_text(text, config, source.with_suffix(".ipynb")) == text, f"run `make stamp` for {source.name}"


def test_every_badge_in_readme_and_notebooks_opens_a_file_of_this_repository():
    import re

    from paths import ROOT, STUDENT

    config = course_config()
    blob = f"github.com/{config.repository}/blob/{config.branch}/"
    prefixes = {
        "Colab": f"https://colab.research.google.com/{blob}".replace(".com/github.com/", ".com/github/"),
        "Kaggle": f"https://kaggle.com/kernels/welcome?src=https://{blob}",
    }
    patterns = {
        "Colab": re.compile(r"\]\((https://colab\.research\.google\.com/github/[^)\\]+)\)"),
        "Kaggle": re.compile(r"\]\((https://(?:www\.)?kaggle\.com/kernels/welcome\?src=[^)\\]+)\)"),
    }
    files = [ROOT / "README.md", *NOTEBOOKS.glob("*.ipynb"), *STUDENT.glob("*.ipynb")]
    opened = {}
    for file in files:
        text = file.read_text()
        for platform, pattern in patterns.items():
            links = pattern.findall(text)
            assert links, f"{file.name} has no {platform} badge"
            for link in links:
                assert link.startswith(prefixes[platform]), (
                    f"{file.name}: {platform} badge {link} does not use [tool.course] in pyproject.toml"
                )
                target = ROOT / link.removeprefix(prefixes[platform])
                assert target.exists(), f"{file.name}: {link} opens a missing file"
            opened[file, platform] = {link.removeprefix(prefixes[platform]) for link in links}
        assert opened[file, "Colab"] == opened[file, "Kaggle"], f"{file.name}: every Colab badge has a Kaggle twin"
    readme = " ".join(patterns["Colab"].findall((ROOT / "README.md").read_text()))
    for source in lesson_sources():
        for notebook in (source.with_suffix(".ipynb"), STUDENT / source.with_suffix(".ipynb").name):
            assert badge_url(config, notebook) in readme, f"README's lesson table lacks {notebook.relative_to(ROOT)}"


def test_committed_outputs_lose_the_paths_of_the_machine_that_ran_them():
    from pathlib import Path

    from execution import without_machine_paths
    from paths import NOTEBOOKS, ROOT

    text = (
        f"saved to {NOTEBOOKS}/lesson13_checkpoints/a.pt; log {ROOT}/build/x.log; "
        f".venv/lib/python3.11/site-packages/torch/_dynamo/guards.py:12] Recompiling forward in "
        f"/tmp/ipykernel_8866/1789536557.py:21; to {Path.home()}/.cache/torch/hub"
    )
    assert without_machine_paths(text) == (
        "saved to lesson13_checkpoints/a.pt; log build/x.log; "
        "torch/_dynamo/guards.py:12] Recompiling forward in <cell>:21; "
        "to ~/.cache/torch/hub"
    )
