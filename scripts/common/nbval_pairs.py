"""The notebooks `make nbval` runs: each lesson and its student version as one, build/nbval/NN_topic.ipynb.

A student version is its lesson without the solution cells (scripts/common/nbtools.py, `student_notebook`), so both run
the same cells up to the lesson's first solution: about 90% of a lesson's run time on a CPU. Executing that shared
part twice doubled `make test`'s notebook time. The combined notebook runs it once, then goes on twice:
  1. the shared part (the lesson's cells before its first solution cell, with their outputs: the cells marked
     `# NBVAL_CHECK_OUTPUT` are compared there);
  2. the student version's remaining cells, as a learner's Run all reaches them: exercises unsolved, each check
     printing its hint, up to the student version's last cell. A cell run first (`UNDONE_SOURCE`) makes a check
     that passes there raise: no check may pass an exercise left undone;
  3. the lesson's remaining cells, its solutions included: each check must pass again. nbval --nbval-lax compares no
     output there, so a cell run first (`STRICT_SOURCE`) makes a check that prints a hint raise: its cell fails.
Every cell of every committed notebook, lesson and student version, runs under nbval; only the identical shared
cells run once. The student version must be the lesson minus its solution cells (else: run `make notebooks`).

Usage: python scripts/common/nbval_pairs.py [--out build/nbval] [NN ...]   (make nbval runs it, then pytest --nbval-lax)
It prints the notebooks' paths, the longest lesson first (`longest_first`): the order pytest hands them to the workers.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
from pathlib import Path

import nbformat
from guide_times import GUIDE, cpu_seconds
from nbtools import SOLUTION_TAG, lesson_sources
from paths import BUILD, STUDENT

OUT = BUILD / "nbval"
MARKER_ID = "nbval-student-version-ends"  # the markdown cell between the student version's rest and the lesson's
STUDENT_SUFFIX = "-student"  # the id suffix of the student version's own cells
STRICT_ID = "nbval-lesson-checks-must-pass"  # the code cell that begins the lesson's part
# Every check ends in colab_gpu.checks.core._verdict, which prints the line and returns the verdict: replaced in this
# kernel (not in the package), a hint raises there. Inside a check's `guarded`, the error it catches becomes a hint,
# which raises again: the cell fails with the lesson's hint in its message.
STRICT_SOURCE = """# make nbval: the lesson's own cells follow; a check that gives a hint fails its cell.
import colab_gpu.checks.core as check_core

lesson_verdict = getattr(check_core._verdict, "lesson_verdict", check_core._verdict)  # the package's own


def hint_fails_the_cell(passed, message, print_verdict=lesson_verdict):
    if not passed:
        raise AssertionError(f"the lesson's own check did not pass: {message}")
    return print_verdict(passed, message)


hint_fails_the_cell.lesson_verdict = lesson_verdict  # put back by `make nbval`'s mutants (course/nbval_mutants.py)
check_core._verdict = hint_fails_the_cell"""
UNDONE_ID = "nbval-student-checks-must-not-pass"  # the code cell that begins the student version's rest
# The student version's rest runs each exercise as a learner's Run all meets it, left undone: every check there must
# give its hint. One that passes fails its cell (issue 62: no check passes an exercise left undone).
UNDONE_SOURCE = """# make nbval: the student version's cells follow, exercises undone; a check that passes fails.
import colab_gpu.checks.core as check_core


class UndoneExercisePasses(BaseException):  # not an Exception: a check's `guarded` would make it a hint
    pass


def a_pass_fails_the_cell(passed, message, print_verdict=check_core._verdict):
    if passed:
        raise UndoneExercisePasses(f"an exercise left undone passes its check: {message}")
    return print_verdict(passed, message)


a_pass_fails_the_cell.lesson_verdict = check_core._verdict
check_core._verdict = a_pass_fails_the_cell"""


def is_solution(cell) -> bool:
    return SOLUTION_TAG in cell.metadata.get("tags", [])


def code_sources(notebook) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def combined(lesson: nbformat.NotebookNode, student: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The shared part once, then the student version's rest, then the lesson's rest (see the module's doc)."""
    expected = [cell.source for cell in lesson.cells if cell.cell_type == "code" and not is_solution(cell)]
    if code_sources(student) != expected:
        raise SystemExit(f"notebooks/student/{name} is not its lesson without the solution cells: run `make notebooks`")
    solutions = [i for i, cell in enumerate(lesson.cells) if is_solution(cell)]
    first = solutions[0] if solutions else len(lesson.cells)
    pair = copy.deepcopy(lesson)
    student_rest = []
    for cell in copy.deepcopy(lesson.cells[first:]):
        if is_solution(cell):
            continue
        cell.id = f"{cell.id}{STUDENT_SUFFIX}"  # ids are unique within a notebook
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None  # as the student version stores it: no outputs
        student_rest.append(cell)
    marker = nbformat.v4.new_markdown_cell(
        "*(make nbval: the student version ends here; the lesson's own cells from its first solution on follow.)*"
    )
    marker.id = MARKER_ID
    strict = nbformat.v4.new_code_cell(STRICT_SOURCE)
    strict.id = STRICT_ID
    undone = nbformat.v4.new_code_cell(UNDONE_SOURCE)
    undone.id = UNDONE_ID
    pair.cells = lesson.cells[:first] + [undone] + student_rest + [marker, strict] + lesson.cells[first:]
    return pair


def lesson_part(pair: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The lesson alone, from an executed pair: its cells in order with the outputs this run gave them.

    The GPU suite executes each pair once and keeps this as the lesson's executed notebook. Execution counts are
    renumbered as if the lesson alone had run."""
    lesson = copy.deepcopy(pair)
    lesson.cells = [
        c for c in lesson.cells if c.id not in (MARKER_ID, STRICT_ID, UNDONE_ID) and not c.id.endswith(STUDENT_SUFFIX)
    ]
    count = 0
    for cell in lesson.cells:
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            count += 1
            cell.execution_count = count
            for output in cell.outputs:
                if "execution_count" in output:
                    output.execution_count = count
    return lesson


MARK = ".written-by-nbval-pairs"  # in a folder this tool made: what is in it came from its notebooks' runs


def emptied(out: Path) -> None:
    """``out`` made empty for new pairs: created with its mark, or emptied where the mark says this tool made it (or
    it is ``build/nbval``). A folder it did not make, with anything in it, is refused before anything is touched
    (``--out notebooks`` would have deleted the lessons, ``--out .`` the checkout)."""
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise SystemExit(f"--out {out} is a file: give a folder for the notebooks (default {OUT})")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARK).is_file() and out != OUT.resolve():  # build/nbval is this tool's, mark or not
            raise SystemExit(
                f"--out {out} holds files nbval_pairs.py did not write (it has no {MARK}): give a new or empty "
                f"folder (default {OUT}); nothing was changed"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARK).write_text("nbval_pairs.py made this folder; it empties it before each run\n")


def write_pairs(numbers: list[str], out: Path = OUT) -> list[Path]:
    sources = [s for s in lesson_sources() if not numbers or s.name[:2] in numbers]
    if numbers and len(sources) != len(set(numbers)):
        raise SystemExit(f"no lesson numbered {sorted(set(numbers) - {s.name[:2] for s in sources})}")
    emptied(out)
    written = []
    for source in sources:
        name = source.with_suffix(".ipynb").name
        lesson = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        student = nbformat.read(STUDENT / name, as_version=4)
        nbformat.write(combined(lesson, student, name), out / name)
        written.append(out / name)
    return written


def longest_first(paths: list[Path], guide: Path = GUIDE) -> list[Path]:
    """``paths`` with the lessons that take longest on a CPU first, by the guide's CPU column (`make course`'s times;
    lessons without one go last, in their order). `make nbval`'s workers take the notebooks in this order, so a long
    lesson does not start late and run alone at the end: 170 s, against 176 s in xdist's own order, by number of
    cells (2 workers, 2026-11-28)."""
    seconds = cpu_seconds(guide)
    return sorted(paths, key=lambda path: seconds.get(path.name[:2], -1), reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("lessons", nargs="*", metavar="NN", help="only these lessons (default: all)")
    args = parser.parse_args(argv)
    written = write_pairs(args.lessons, args.out)
    print(f"{len(written)} lesson + student notebook(s) in {args.out}", file=sys.stderr)
    print("\n".join(str(path) for path in longest_first(written)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
