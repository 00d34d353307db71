"""Refresh the committed notebooks: run each lesson's .py top to bottom and write its paired .ipynb.

Usage: python scripts/course/execute_notebooks.py [NN ...]   (no argument: every lesson)
The outputs come from whatever device this machine has; run it on a GPU runtime for GPU outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from execution import execute, write_paired
from nbtools import course_config, lesson_sources, read_lesson, write_student_versions
from paths import BUILD, NOTEBOOKS


def main(selected: list[str]) -> int:
    sources = [s for s in lesson_sources() if not selected or s.name[:2] in selected]
    if not sources:
        print(f"No lesson matches {selected}; lessons: {[s.name for s in lesson_sources()]}", file=sys.stderr)
        return 2
    failed = 0
    for source in sources:
        run = execute(read_lesson(source), cwd=NOTEBOOKS, log=BUILD / "logs" / f"{source.stem}.log")
        if run.error:
            failed += 1
            print(
                f"FAILED {source.name} after {run.seconds:.1f} s: {run.error}\n{run.traceback or ''}", file=sys.stderr
            )
            continue  # keep the last good .ipynb instead of committing a broken run
        write_paired(run.notebook, source)
        print(f"ok     {source.name} in {run.seconds:.1f} s")
    write_student_versions(course_config())  # solutions removed; kept in step with the lessons
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
