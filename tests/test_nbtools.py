from nbtools import (
    INSTALL_RE,
    NOTEBOOKS,
    CourseConfig,
    badge_markdown,
    badge_url,
    course_config,
    lesson_sources,
    stamp_text,
)


def test_config_comes_from_pyproject_and_package():
    import colab_gpu

    config = course_config()
    assert "/" in config.repository and config.version == colab_gpu.__version__
    assert config.install_spec.endswith(f"@v{colab_gpu.__version__}")


def test_badge_points_at_the_notebook_path():
    config = CourseConfig("someone/course", "main", "1.2.3")
    url = badge_url(config, NOTEBOOKS / "01_x.ipynb")
    assert url == "https://colab.research.google.com/github/someone/course/blob/main/notebooks/01_x.ipynb"


def test_stamp_rewrites_badge_and_install_spec():
    old = CourseConfig("old/repo", "main", "0.0.1")
    new = CourseConfig("new/repo", "dev", "2.0.0")
    notebook = NOTEBOOKS / "05_x.ipynb"
    text = f'# {badge_markdown(old, notebook)}\n    "{old.install_spec}",\n'
    stamped = stamp_text(text, new, notebook)
    assert badge_url(new, notebook) in stamped and "old/repo" not in stamped
    assert INSTALL_RE.findall(stamped) == ['"colab_gpu @ git+https://github.com/new/repo@v2.0.0"']


def test_committed_lessons_are_stamped():
    config = course_config()
    for source in lesson_sources():
        text = source.read_text()
        assert stamp_text(text, config, source.with_suffix(".ipynb")) == text, f"run `make stamp` for {source.name}"


def test_every_badge_in_readme_and_notebooks_opens_a_file_of_this_repository():
    import re

    from nbtools import ROOT, STUDENT

    config = course_config()
    prefix = f"https://colab.research.google.com/github/{config.repository}/blob/{config.branch}/"
    files = [ROOT / "README.md", *NOTEBOOKS.glob("*.ipynb"), *STUDENT.glob("*.ipynb")]
    pattern = re.compile(r"\]\((https://colab\.research\.google\.com/github/[^)\\]+)\)")
    links = {f: pattern.findall(f.read_text()) for f in files}
    for file, found in links.items():
        assert found, f"{file.name} has no Colab badge"
        for link in found:
            assert link.startswith(prefix), f"{file.name}: badge {link} does not use [tool.course] in pyproject.toml"
            assert (ROOT / link.removeprefix(prefix)).exists(), f"{file.name}: badge {link} opens a missing file"
    readme = links[ROOT / "README.md"]
    for source in lesson_sources():
        for notebook in (source.with_suffix(".ipynb"), STUDENT / source.with_suffix(".ipynb").name):
            assert badge_url(config, notebook) in readme, f"README's lesson table lacks {notebook.relative_to(ROOT)}"
