"""Write every lesson's Colab badge and install cell from pyproject.toml's [tool.course].

Usage: python scripts/stamp_notebooks.py   (then scripts/execute_notebooks.py to refresh the .ipynb)
"""

from __future__ import annotations

from nbtools import course_config, lesson_sources, stamp_text


def main() -> int:
    config = course_config()
    for source in lesson_sources():
        text = source.read_text()
        stamped = stamp_text(text, config, source.with_suffix(".ipynb"))
        if stamped != text:
            source.write_text(stamped)
            print(f"stamped {source.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
