"""Test the lessons' self-checks the way mutation testing tests a test suite: by the mutants of each solution.

For every exercise (exercises.py) it runs, in an IPython shell as a kernel would, the earlier cells the exercise
needs; then, for each variant of the answer and from the state after them, the exercise's starting cell, the variant
and the check cell, recording every verdict the checks give (colab_gpu.checks.core._verdict). The solution must pass;
the starting cell (the exercise undone) must not; every mutant (mutants.py) must be rejected with a hint, or crash
the learner's code (counted apart), unless tests/tooling/check_mutants_equivalent.toml lists it with its reason: as
equivalent (a right answer still), as wrong on a GPU only ("GPU only:", what a CPU runtime cannot see), or as a known
hole ("OPEN:", until its check is fixed); each kind is counted apart. A listed mutant that is rejected now is a stale
entry: the list holds only what is true. A timed check that rejects a right answer with its busy-machine note gets
two more tries; still so, the answer counts as "busy", neither passed nor failed.

Usage: python scripts/course/check_mutants.py [NN ...] [--only 03.1,08.1] [--cap 40] [--busy N] [--verbose]
It prints one row per check (mutants, rejected, crashed, equivalent, GPU-only, open, busy, accepted, distinct hints)
and the accepted mutants; exit status 1 when a check passes a wrong mutant or a stale entry is listed.
`make nbval` runs the same judgement in each lesson's kernel, fewer mutants each (nbval_mutants.py); the
attempts themselves are mutant_runs.py's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import mutant_runs  # noqa: E402
from exercises import Exercise, lesson_exercises  # noqa: E402
from mutant_runs import Kernel, Report, judge, table  # noqa: E402
from nbtools import lesson_sources  # noqa: E402
from paths import ROOT  # noqa: E402  (after common/ is on the path)

EQUIVALENT = ROOT / "tests" / "tooling" / "check_mutants_equivalent.toml"


def equivalent_mutants(path: Path = EQUIVALENT) -> dict[str, dict[str, str]]:
    """{exercise: {mutant name: reason}} from the reviewed list; each reason a sentence, never empty."""
    try:
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SystemExit(f"{path.name} is not valid TOML ({err}): fix it, one [NN.M] table per exercise") from err
    for exercise, entries in table.items():
        empty = [name for name, reason in entries.items() if not str(reason).strip()]
        if empty:
            raise SystemExit(f"{path.name} [{exercise}] lists mutants with no reason: {empty}")
    return table


def run_exercise(exercise: Exercise, kernel: Kernel, ran: set[int], equivalent: dict[str, str], cap: int) -> Report:
    """The report of one exercise: the setup cells ``kernel`` has not ``ran`` yet, then the solution, the undone
    exercise and every mutant, each from the state after the setup."""
    started = time.perf_counter()
    kernel.restore()  # the lesson's state after the previous exercise's setup: its attempts leave nothing behind
    with contextlib.redirect_stdout(io.StringIO()):
        kernel.run(*[source for at, source in zip(exercise.setup_at, exercise.setup, strict=True) if at not in ran])
    ran.update(exercise.setup_at)
    kernel.save()
    report = judge(exercise, kernel, equivalent, cap)
    report.seconds = time.perf_counter() - started
    return report


def selected(numbers: list[str], only: set[str]) -> list[Exercise]:
    known = {s.stem[:2]: s for s in lesson_sources()}
    wrong = [n for n in numbers if n not in known]
    if wrong:
        raise SystemExit(f"no lesson {', '.join(wrong)}: the lessons are {', '.join(sorted(known))}")
    exercises = [e for n in numbers or sorted(known) for e in lesson_exercises(known[n])]
    missing = only - {e.name for e in exercises}
    if missing:
        raise SystemExit(f"no exercise {', '.join(sorted(missing))}: they are {', '.join(e.name for e in exercises)}")
    return [e for e in exercises if not only or e.name in only]


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` processes that each keep a core busy while the block runs: a neighbour on a shared host, the
    machine a timed check must not be fooled on (an exercise left undone is still rejected)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield burners
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (01 ... 14); every lesson when none")
    parser.add_argument("--only", default="", help="exercises by name, comma-separated: 03.1,08.2")
    parser.add_argument("--cap", type=int, default=40, help="mutants per exercise at most (default 40)")
    parser.add_argument("--verbose", action="store_true", help="print every mutant's outcome and hint")
    parser.add_argument(
        "--busy", type=int, default=0, metavar="N", help="beside N processes that each keep a core busy"
    )
    args = parser.parse_args(argv)
    if args.cap < 1:
        parser.error(f"--cap must be 1 or more, got {args.cap}")
    exercises = selected(args.lessons, {n for n in args.only.split(",") if n})
    equivalent = equivalent_mutants()
    reports = []
    if args.busy < 0:
        parser.error(f"--busy must be 0 or more, got {args.busy}")
    mutant_runs.MUTANT_SECONDS *= 1 + args.busy  # a right answer gets its time on a shared machine
    with (
        tempfile.TemporaryDirectory(prefix="check-mutants-") as work,
        contextlib.chdir(work),
        busy_cores(args.busy),
    ):
        # The cells write files (a DDP script, weights) here, never into the checkout, and import them from here as
        # from a notebook's folder (`from ddp_train import ...`).
        sys.path.insert(0, work)
        kernel, lesson, ran = None, None, set()
        for exercise in exercises:
            if exercise.lesson != lesson:  # one kernel per lesson: its exercises share the cells they need
                kernel, lesson, ran = Kernel(), exercise.lesson, set()
            reports.append(run_exercise(exercise, kernel, ran, equivalent.get(exercise.name, {}), args.cap))
            print(f"{exercise.name}: {len(reports[-1].outcomes)} mutants in {reports[-1].seconds:.0f} s", flush=True)
            if args.verbose:
                for name, outcome in reports[-1].outcomes.items():
                    print(f"  {outcome.verdict:<10} {name}\n             {outcome.detail}")
    print(table(reports))
    problems = [f"{r.exercise} ({r.check}): {p}" for r in reports for p in r.problems]
    print("\n".join(problems) if problems else "every check rejected every mutant not listed as equivalent")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
