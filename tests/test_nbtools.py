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


def test_readme_badges_open_existing_notebooks_of_this_repository():
    import re

    from nbtools import ROOT

    config = course_config()
    prefix = f"https://colab.research.google.com/github/{config.repository}/blob/{config.branch}/"
    links = re.findall(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)", (ROOT / "README.md").read_text())
    for source in lesson_sources():
        assert badge_url(config, source.with_suffix(".ipynb")) in links, f"README's lesson table lacks {source.stem}"
    for link in links:
        assert link.startswith(prefix), f"README badge {link} does not use [tool.course] in pyproject.toml"
        assert (ROOT / link.removeprefix(prefix)).exists(), f"README badge {link} opens a missing notebook"
