"""`make nbval` also runs every exercise's mutants: in the lesson's own kernel, from the state the lesson reached.

A lesson's exercise sees what a learner's Run all built before it: every earlier cell, not a slice of them. So the
notebook `make nbval` runs for a lesson (common/nbval_pairs.py: the lesson and its student version as one) gets,
from this module, a cell before each exercise's starting cell that keeps the state there (`snapshot`, a copy of the
kernel's names), and a last cell that runs, from each kept state, up to `cap` mutants of its solution
(mutant_runs.judge), prints the table (check_mutants.py's) and fails on a problem: a wrong mutant passed, or an
entry of the reviewed list that is no longer true. The solution and the exercise left undone were judged by the
pair's own cells (the lesson's check must pass, the student version's must not: nbval_pairs.py). Costs only the
checks' runs: the lesson's cells ran anyway.

Usage: python scripts/course/nbval_mutants.py [--cap N] build/nbval/NN_topic.ipynb ...   (make nbval runs it)
`make check-mutants` runs every mutant of every exercise (up to 40 each), each after the cells it needs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

import nbformat
from check_mutants import equivalent_mutants
from exercises import Exercise, lesson_exercises
from mutant_runs import Kernel, judge, table
from nbtools import lesson_sources

COURSE = Path(__file__).resolve().parent
STATE_ID = "nbval-mutants-state-"  # + the exercise's name, "03.1"
RUN_ID = "nbval-mutants"
# Mutants per exercise, evenly spread over all of them (mutants.py). 6 each (2 in lesson 12) made `make nbval` 256-301
# s on 2 cores, against about 215 s without (2026-11-29), lesson 12 alone 150-169 s: its check trains the loop for
# each mutant, about 30 s. 4 each, and lesson 12's first.
CAP = 4
CAPS = {"12": 1}
STUDENT_SUFFIX = "-student"  # the id suffix nbval_pairs.py gives the student version's own cells

STATES: dict[str, dict] = {}  # in the kernel: each exercise's state as it starts


def snapshot(shell, name: str) -> None:
    """Keep the kernel's names as exercise ``name`` starts (objects are shared: what a later cell changes in
    place stays changed, as in check_mutants.py's kernel)."""
    STATES[name] = dict(shell.user_ns)


def run_in_kernel(shell, stem: str, cap: int) -> None:
    """Judge every exercise of the lesson ``stem`` from its kept state; print the table; raise on a problem."""
    import colab_gpu.checks.core as core

    # The lesson's part made a hint raise (nbval_pairs.STRICT_SOURCE): a mutant's hint is a verdict here.
    core._verdict = getattr(core._verdict, "lesson_verdict", core._verdict)
    source = next(s for s in lesson_sources() if s.stem == stem)
    equivalent = equivalent_mutants()
    kernel, reports = Kernel(shell), []
    for exercise in lesson_exercises(source):
        if exercise.name not in STATES:
            raise AssertionError(f"no state kept for exercise {exercise.name}: its snapshot cell did not run")
        kernel.saved = STATES[exercise.name]
        with contextlib.redirect_stderr(io.StringIO()):
            reports.append(judge(exercise, kernel, equivalent.get(exercise.name, {}), cap, seen=True))
    print(table(reports))
    problems = [f"{r.exercise} ({r.check}): {p}" for r in reports for p in r.problems]
    if problems:
        raise AssertionError("a check's mutants (scripts/course/nbval_mutants.py):\n" + "\n".join(problems))
    print("every check rejected every mutant not listed as equivalent")


def _start_cell(pair: nbformat.NotebookNode, exercise: Exercise) -> int:
    """The position of the exercise's starting cell in the lesson's own run (not the student version's copy)."""
    found = [
        i
        for i, cell in enumerate(pair.cells)
        if cell.cell_type == "code" and cell.source == exercise.start and not cell.id.endswith(STUDENT_SUFFIX)
    ]
    if len(found) != 1:
        raise SystemExit(f"exercise {exercise.name}: {len(found)} starting cells in the pair, want 1 (run make nbval)")
    return found[0]


def with_mutants(pair: nbformat.NotebookNode, stem: str, cap: int) -> nbformat.NotebookNode:
    """``pair`` with a snapshot cell before each exercise's starting cell and the mutants' cell last."""
    source = next(s for s in lesson_sources() if s.stem == stem)
    exercises = lesson_exercises(source)
    for number, exercise in reversed(list(enumerate(exercises))):  # inserting from the end keeps positions
        path = f'__import__("sys").path.insert(0, {str(COURSE)!r})\n' if number == 0 else ""
        cell = nbformat.v4.new_code_cell(
            f"# make nbval: the state as exercise {exercise.name} starts, for its solution's mutants (the last cell)\n"
            f'{path}__import__("nbval_mutants").snapshot(get_ipython(), {exercise.name!r})'
        )
        cell.id = STATE_ID + exercise.name.replace(".", "-")
        pair.cells.insert(_start_cell(pair, exercise), cell)
    if exercises:
        last = nbformat.v4.new_code_cell(
            "# make nbval: the mutants of every exercise's solution, each from the state the exercise starts in\n"
            f'__import__("nbval_mutants").run_in_kernel(get_ipython(), {stem!r}, cap={cap})'
        )
        last.id = RUN_ID
        pair.cells.append(last)
    return pair


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="the pairs nbval_pairs.py wrote")
    parser.add_argument("--cap", type=int, help=f"mutants per exercise (default {CAP}; {CAPS} where named)")
    args = parser.parse_args(argv)
    if args.cap is not None and args.cap < 1:
        parser.error(f"--cap must be 1 or more, got {args.cap}")
    for path in args.notebooks:
        pair = nbformat.read(path, as_version=4)
        cap = args.cap or CAPS.get(path.name[:2], CAP)
        nbformat.write(with_mutants(pair, path.stem, cap), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
