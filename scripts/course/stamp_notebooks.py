"""Write every lesson's badges and setup cell from pyproject.toml and colab_gpu.__version__.

Usage: python scripts/course/stamp_notebooks.py   (`make stamp`; `make release` runs it too)
It rewrites README's badges, the lessons' .py, their executed .ipynb in place (sources and the setup cell's printed
version; the other outputs stay those of the last run) and the student versions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

import nbformat
from nbtools import course_config, lesson_sources, stamp_notebook, stamp_page_badges, stamp_text, write_student_versions
from paths import ROOT


def stamp_lessons() -> list[str]:
    """Stamp every lesson pair and regenerate the student versions; the names of the files that changed."""
    config = course_config()
    changed = []
    for source in lesson_sources():
        paired = source.with_suffix(".ipynb")
        text = source.read_text()
        stamped = stamp_text(text, config, paired)
        if stamped != text:
            source.write_text(stamped)
            changed.append(source.name)
        if paired.exists():
            notebook = nbformat.read(paired, as_version=4)
            if stamp_notebook(notebook, config, paired):
                nbformat.write(notebook, paired)
                changed.append(paired.name)
    readme = ROOT / "README.md"
    text = readme.read_text()
    stamped = stamp_page_badges(text, config)
    if stamped != text:
        readme.write_text(stamped)
        changed.append(readme.name)
    write_student_versions(config)
    return changed


def main() -> int:
    changed = stamp_lessons()
    for name in changed:
        print(f"stamped {name}")
    print(
        f"{len(changed)} file(s) stamped; student versions in {(ROOT / 'notebooks' / 'student').relative_to(ROOT)}/"
        " regenerated"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
