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

Usage: python scripts/course/check_mutants.py [NN ...] [--only 03.1,08.1] [--cap 40] [--verbose]
It prints one row per check (mutants, rejected, crashed, equivalent, GPU-only, open, busy, accepted, distinct hints)
and the accepted mutants; exit status 1 when a check passes a wrong mutant or a stale entry is listed.
tests/tooling/test_check_mutants.py runs it under `make test`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from exercises import Exercise, lesson_exercises  # noqa: E402
from mutants import mutants  # noqa: E402
from nbtools import lesson_sources  # noqa: E402
from paths import ROOT  # noqa: E402  (after common/ is on the path)

EQUIVALENT = ROOT / "tests" / "tooling" / "check_mutants_equivalent.toml"
# A listed mutant whose reason starts so is wrong, but only a GPU tells: the check cannot see it on a CPU runtime
# (the learner's function reads the notebook's `device`). The table counts them apart: GPU checks owed.
GPU_ONLY = "GPU only:"
# A listed mutant whose reason starts so is a known hole, wrong and passed today: counted apart until it is fixed.
OPEN = "OPEN:"
BUSY = "the machine was busy"  # a timed check's note on erratic runs (colab_gpu/checks/timed.py)
MUTANT_SECONDS = 60  # a mutant that loops (a flipped loop condition) crashes after this long


@dataclass
class Outcome:
    verdict: str  # "rejected", "crashed", "accepted", "equivalent", "gpu-only", "open", "busy"
    detail: str = ""  # the hint, the error, or the reason it is equivalent


@dataclass
class Report:
    exercise: str
    check: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what fails the run, said in full
    seconds: float = 0.0

    def count(self, verdict: str) -> int:
        return sum(o.verdict == verdict for o in self.outcomes.values())

    def hints(self) -> int:
        return len({o.detail for o in self.outcomes.values() if o.verdict == "rejected"})


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


class _Verdicts:
    """Every verdict the checks give while it is active: (passed, message)."""

    def __enter__(self):
        import colab_gpu.checks.core as core

        self.core, self.original, self.seen = core, core._verdict, []

        def record(passed, message):
            self.seen.append((bool(passed), message))
            return self.original(passed, message)

        core._verdict = record
        return self

    def __exit__(self, *exc):
        self.core._verdict = self.original


def _alarm(_signum, _frame):
    raise TimeoutError(f"still running after {MUTANT_SECONDS} s")


class Kernel:
    """An IPython shell in this process, as a notebook's kernel runs cells (magics, ``Out`` and ``_``,
    ``get_ipython()``), with the state after an exercise's setup kept, so that every attempt starts from it."""

    def __init__(self) -> None:
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False  # no history database on disk
        config.InteractiveShell.colors = "nocolor"
        self.shell = InteractiveShell.instance(config=config)  # one per process: emptied for each exercise
        self.shell.reset(new_session=False)
        self.saved = dict(self.shell.user_ns)  # IPython's own names (In, Out, get_ipython)

    def run(self, *sources: str) -> None:
        """Run the cells in order; raise the first one's error."""
        for source in sources:
            result = self.shell.run_cell(source, store_history=True)
            error = result.error_before_exec or result.error_in_exec
            if error is not None:
                raise error

    def save(self) -> None:
        self.saved = dict(self.shell.user_ns)

    def restore(self) -> None:
        """The names as saved (an attempt's new or rebound names go; objects changed in place stay changed)."""
        self.shell.user_ns.clear()
        self.shell.user_ns.update(self.saved)


def attempt(exercise: Exercise, kernel: Kernel, answer: str) -> Outcome:
    """Run the starting cell, ``answer`` and the check cell; the verdict the checks gave."""
    kernel.restore()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(MUTANT_SECONDS)
    try:
        with contextlib.redirect_stdout(io.StringIO()), _Verdicts() as verdicts:
            try:
                kernel.run(exercise.start, answer)
            except BaseException as err:  # noqa: BLE001 (the learner's code failed: a crash, counted apart)
                return Outcome("crashed", f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"[:160])
            try:
                kernel.run(exercise.check)
            except BaseException as err:  # noqa: BLE001 (the check cell evaluates the learner's code: a crash)
                return Outcome("crashed", f"{type(err).__name__} in the check cell: {str(err)[:120]}")
    finally:
        signal.alarm(0)
    if not verdicts.seen:
        return Outcome("crashed", "no check gave a verdict")
    failed = [message for passed, message in verdicts.seen if not passed]
    return Outcome("rejected", failed[0]) if failed else Outcome("accepted", verdicts.seen[-1][1])


def settled(exercise: Exercise, kernel: Kernel, answer: str, tries: int = 3) -> Outcome:
    """The verdict on a right answer (the solution, an equivalent mutant): a timed check that rejects it with its
    busy-machine note runs again, up to ``tries`` times in all; still rejected so, it is "busy", not a verdict."""
    for _ in range(tries):
        outcome = attempt(exercise, kernel, answer)
        if not (outcome.verdict == "rejected" and BUSY in outcome.detail):
            return outcome
    return Outcome("busy", outcome.detail)


def run_exercise(exercise: Exercise, kernel: Kernel, ran: set[int], equivalent: dict[str, str], cap: int) -> Report:
    """The report of one exercise: the setup cells ``kernel`` has not ``ran`` yet, then the solution, the undone
    exercise and every mutant, each from the state after the setup."""
    started = time.perf_counter()
    check = exercise.check.split("cg.checks.", 1)[-1].split("(", 1)[0]
    report = Report(exercise.name, check)
    kernel.restore()  # the lesson's state after the previous exercise's setup: its attempts leave nothing behind
    with contextlib.redirect_stdout(io.StringIO()):
        kernel.run(*[source for at, source in zip(exercise.setup_at, exercise.setup, strict=True) if at not in ran])
    ran.update(exercise.setup_at)
    kernel.save()
    solved = settled(exercise, kernel, exercise.solution)
    if solved.verdict not in ("accepted", "busy"):
        report.problems.append(f"the lesson's solution is {solved.verdict}: {solved.detail}")
    undone = attempt(exercise, kernel, "")
    if undone.verdict == "accepted":
        report.problems.append(f"the exercise left undone passes: {undone.detail}")
    for mutant in mutants(exercise.solution, cap):
        reason = equivalent.get(mutant.name)
        outcome = settled(exercise, kernel, mutant.source) if reason else attempt(exercise, kernel, mutant.source)
        if outcome.verdict == "busy":
            pass  # a right answer a busy host made look slow, three times: counted, not judged
        elif outcome.verdict == "accepted" and reason:
            kind = "gpu-only" if reason.startswith(GPU_ONLY) else "open" if reason.startswith(OPEN) else "equivalent"
            outcome = Outcome(kind, reason)
        elif reason and not reason.startswith(OPEN):  # a known hole that gets a hint now and then: still open
            report.problems.append(f"listed as equivalent but {outcome.verdict} now (remove it): {mutant.name}")
        elif outcome.verdict == "accepted":
            kind = "wrong on a GPU, " if mutant.gpu_only else ""
            report.problems.append(f"accepted ({kind}not listed as equivalent): {mutant.name} -> {outcome.detail}")
        report.outcomes[mutant.name] = outcome
    unknown = set(equivalent) - {m.name for m in mutants(exercise.solution, cap=10**6)}
    report.problems += [f"listed as equivalent but no such mutant (remove it): {name}" for name in sorted(unknown)]
    report.seconds = time.perf_counter() - started
    return report


COLUMNS = (
    "exercise",
    "check",
    "mutants",
    "rejected",
    "crashed",
    "equivalent",
    "gpu-only",
    "open",
    "busy",
    "accepted",
    "hints",
    "seconds",
)


def table(reports: list[Report]) -> str:
    rows = [COLUMNS]
    for r in reports:
        counts = [r.count(v) for v in ("rejected", "crashed", "equivalent", "gpu-only", "open", "busy", "accepted")]
        rows.append((r.exercise, r.check, len(r.outcomes), *counts, r.hints(), f"{r.seconds:.0f}"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(COLUMNS))]
    lines = [" | ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (01 ... 14); every lesson when none")
    parser.add_argument("--only", default="", help="exercises by name, comma-separated: 03.1,08.2")
    parser.add_argument("--cap", type=int, default=40, help="mutants per exercise at most (default 40)")
    parser.add_argument("--verbose", action="store_true", help="print every mutant's outcome and hint")
    args = parser.parse_args(argv)
    if args.cap < 1:
        parser.error(f"--cap must be 1 or more, got {args.cap}")
    exercises = selected(args.lessons, {n for n in args.only.split(",") if n})
    equivalent = equivalent_mutants()
    reports = []
    with tempfile.TemporaryDirectory(prefix="check-mutants-") as work, contextlib.chdir(work):
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
