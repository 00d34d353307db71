"""Run an exercise's answers in an IPython shell, as a notebook's kernel runs cells, and judge them by the verdicts
the lesson's checks give (colab_gpu.checks.core._verdict): the harness of `check_mutants.py` (which runs the cells an
exercise needs first, in its own shell) and of `nbval_mutants.py` (which runs in `make nbval`'s kernel, from the state
the lesson reached).

Each attempt starts from the state saved before the exercise (`Kernel.save`), runs the exercise's starting cell, the
answer and the check cell, and returns the verdict: "rejected" with the first hint, "crashed" when the learner's code
raised (counted apart), "accepted". `judge` runs the undone exercise and every mutant of the solution, and holds each
outcome against the reviewed list of equivalent mutants (check_mutants.py says what the list holds).
"""

from __future__ import annotations

import contextlib
import io
import signal
import time
from dataclasses import dataclass, field

from exercises import Exercise
from mutants import mutants

# A listed mutant whose reason starts so is wrong, but only a GPU tells: the check cannot see it on a CPU runtime
# (the learner's function reads the notebook's `device`). The table counts them apart: GPU checks owed.
GPU_ONLY = "GPU only:"
# A listed mutant whose reason starts so is a known hole, wrong and passed today: counted apart until it is fixed.
OPEN = "OPEN:"
# A listed mutant whose reason starts so is right or wrong by what this host measured (a worker count the sweep
# advises): counted as equivalent where the check passes it, as rejected where it does not; never a stale entry.
HOST = "HOST:"
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

    def __init__(self, shell=None) -> None:
        """A fresh shell, emptied; or ``shell``, a running kernel's (``get_ipython()``), as it is."""
        if shell is None:
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config

            config = Config()
            config.HistoryManager.enabled = False  # no history database on disk
            config.InteractiveShell.colors = "nocolor"
            shell = InteractiveShell.instance(config=config)  # one per process: emptied for each lesson
            shell.reset(new_session=False)
        self.shell = shell
        self.saved = dict(shell.user_ns)  # IPython's own names (In, Out, get_ipython), and the lesson's if it ran

    def run(self, *sources: str) -> None:
        """Run the cells in order; raise the first one's error. The shell shows no traceback: in a notebook's kernel
        (`make nbval`) one would be an error output of the cell running the attempts, and nbval fails such a cell."""
        quiet = {name: vars(self.shell).get(name) for name in ("showtraceback", "showsyntaxerror")}
        for name in quiet:
            setattr(self.shell, name, lambda *args, **kwargs: None)
        try:
            for source in sources:
                result = self.shell.run_cell(source, store_history=True)
                error = result.error_before_exec or result.error_in_exec
                if error is not None:
                    raise error
        finally:
            for name, own in quiet.items():  # the shell's own attribute back, or none: its class's method again
                if own is None:
                    delattr(self.shell, name)
                else:
                    setattr(self.shell, name, own)

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


def judge(exercise: Exercise, kernel: Kernel, equivalent: dict[str, str], cap: int, seen: bool = False) -> Report:
    """The report of one exercise, each attempt from the state ``kernel`` saved: the solution and the exercise left
    undone (unless the caller has ``seen`` both judged: `make nbval` runs them as the lesson's and the student
    version's own cells), then up to ``cap`` mutants of the solution, each held against ``equivalent`` (the reviewed
    list's entries for this exercise)."""
    started = time.perf_counter()
    report = Report(exercise.name, exercise.check.split("cg.checks.", 1)[-1].split("(", 1)[0])
    if not seen:
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
        elif reason and not reason.startswith((OPEN, HOST)):  # a hole, or a host, that gives a hint now and then
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
    """One row per exercise: its check, how many mutants ran and what became of them, the distinct hints they got."""
    rows = [COLUMNS]
    for r in reports:
        counts = [r.count(v) for v in ("rejected", "crashed", "equivalent", "gpu-only", "open", "busy", "accepted")]
        rows.append((r.exercise, r.check, len(r.outcomes), *counts, r.hints(), f"{r.seconds:.0f}"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(COLUMNS))]
    lines = [" | ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])
