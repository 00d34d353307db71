"""One lesson in the GPU suite: its nbval pair executed once, and everything the suite reads from that run.

`make nbval` runs each lesson with its student version as one notebook (scripts/common/nbval_pairs.py). The GPU suite
executes that same notebook once, with nbclient instead of pytest, and derives from the one run:
  - the nbval verdict: a cell error fails it (a cell tagged ``raises-exception`` may raise), and every cell marked
    ``# NBVAL_CHECK_OUTPUT`` must print what the committed notebook shows, once both are sanitized with
    nbval_sanitize.cfg (nbval's own stream coalescing and sanitizing patterns, and the fields nbval skips);
  - the lesson's time (its student version's remaining cells included: the pair is what runs);
  - the lesson's executed notebook (`nbval_pairs.lesson_part`), the figures it recorded (``COLAB_GPU_FIGURES``), and
    the steps it profiled (``COLAB_GPU_PROFILES``: profiles/<lesson>.jsonl, replayed by the regime tests).
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from execution import data_used, execute, strip_machine_paths, write_paired
from nbval.plugin import coalesce_streams, get_sanitize_patterns
from nbval_pairs import lesson_part
from paths import NOTEBOOKS, ROOT

from colab_gpu.measure.profiling import PROFILES_ENV
from colab_gpu.measure.references import FIGURES_ENV

SANITIZE = ROOT / "nbval_sanitize.cfg"
CHECK_MARKER = "NBVAL_CHECK_OUTPUT"
# What nbval leaves out of a comparison (nbval/plugin.py, IPyNbFile.skip_compare, without --nbdime).
SKIP_COMPARE = {
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
}


@dataclass
class LessonRun:
    """What one execution of a lesson's pair gave: the suite's part for that lesson."""

    stem: str
    status: str  # "passed", "failed" or "cut (budget)"
    seconds: float
    timeout: int
    error: str | None = None
    failed_cell: str | None = None
    checks: list[tuple[str, str, float]] = field(default_factory=list)  # (name, outcome, seconds) for the report
    figures: dict = field(default_factory=dict)
    slowest: list[tuple[int, str, float]] = field(default_factory=list)  # its three slowest cells: why it takes long
    data: str | None = None  # the data it trained on (`execution.data_used`): a learner's times only on real data


def is_checked(cell) -> bool:
    """A cell whose output nbval compares in --nbval-lax mode."""
    tagged = "nbval-check-output" in cell.metadata.get("tags", [])
    return cell.cell_type == "code" and (
        tagged or any(line.strip() == f"# {CHECK_MARKER}" for line in cell.source.splitlines())
    )


def _flatten(outputs: list, patterns: list[tuple[str, str]]) -> dict[str, list]:
    """nbval's view of a cell's outputs: every compared field (a stream's name, a MIME type) to its values."""

    def sanitize(value):
        if isinstance(value, str):
            for regex, replace in patterns:
                value = re.sub(regex, replace, value)
        return value

    flat = defaultdict(list)
    for output in coalesce_streams(copy.deepcopy(outputs)):
        if output.output_type == "stream":
            flat[output.name].append(sanitize(output.text))
            continue
        for key, value in output.items():
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIP_COMPARE:
                        flat[mime].append(sanitize(data))
            elif key not in SKIP_COMPARE:
                flat[key].append(sanitize(value))
    return dict(flat)


def output_difference(expected: list, actual: list, patterns: list[tuple[str, str]]) -> str | None:
    """None when ``actual`` matches ``expected`` as nbval compares them, else what differs."""
    want, got = _flatten(expected, patterns), _flatten(actual, patterns)
    if set(want) != set(got):
        return f"output fields {sorted(got)} where the committed notebook has {sorted(want)}"
    for key in want:
        if want[key] != got[key]:
            return f"{key!r} differs: committed {want[key]!r}, this run {got[key]!r}"
    return None


def sanitize_patterns(path: Path = SANITIZE) -> list[tuple[str, str]]:
    return get_sanitize_patterns(path.read_text()) if path.exists() else []


def compare_checked_cells(
    expected: nbformat.NotebookNode, executed: nbformat.NotebookNode, stem: str
) -> list[tuple[str, str | None]]:
    """(name, difference or None) for each ``# NBVAL_CHECK_OUTPUT`` cell that ran."""
    patterns = sanitize_patterns()
    checked = []
    for number, (before, after) in enumerate(zip(expected.cells, executed.cells, strict=True), start=1):
        if is_checked(before) and after.get("execution_count") is not None:
            name = f"{stem}::cell {number} ({CHECK_MARKER})"
            checked.append((name, output_difference(before.outputs, after.outputs, patterns)))
    return checked


def run_lesson(
    pair: Path, out: Path, timeout: int, budget_deadline: float | None, env: dict[str, str], refresh: bool
) -> LessonRun:
    """Execute the pair notebook ``pair`` once (see the module's doc); write its lesson's notebook to out/notebooks/.

    The lesson stops at ``timeout`` seconds, or at ``budget_deadline`` (a ``time.monotonic()`` value) if that comes
    first: then it is "cut (budget)", to be run again by ``--resume``, not failed."""
    stem = pair.stem
    figures_file = out / "figures" / f"{stem}.json"
    figures_file.parent.mkdir(parents=True, exist_ok=True)
    figures_file.unlink(missing_ok=True)
    profiles_file = out / "profiles" / f"{stem}.jsonl"
    profiles_file.parent.mkdir(parents=True, exist_ok=True)
    profiles_file.unlink(missing_ok=True)
    expected = nbformat.read(pair, as_version=4)
    start = time.monotonic()
    own_deadline = start + timeout
    deadline = own_deadline if budget_deadline is None else min(own_deadline, budget_deadline)
    done = execute(
        copy.deepcopy(expected),
        cwd=NOTEBOOKS,
        timeout=timeout,
        log=out / "logs" / f"{stem}.log",
        env=dict(env, **{FIGURES_ENV: str(figures_file), PROFILES_ENV: str(profiles_file)}),
        deadline=deadline,
    )
    run = LessonRun(stem, "passed", done.seconds, timeout, done.error, done.failed_cell)
    run.figures = json.loads(figures_file.read_text()) if figures_file.exists() else {}
    run.slowest = sorted(done.cell_seconds, key=lambda cell: -cell[2])[:3]
    run.data = data_used(done.notebook)
    checks = compare_checked_cells(expected, done.notebook, stem)
    run.checks = [(name, "passed" if difference is None else "FAILED", 0.0) for name, difference in checks]
    differences = [f"{name}: {difference}" for name, difference in checks if difference is not None]
    if done.timed_out and budget_deadline is not None and budget_deadline < own_deadline:
        run.status, run.error = "cut (budget)", f"{done.error} (the run's budget ended)"
    elif done.timed_out:
        run.status, run.error = "failed", f"{done.error}: the lesson's timeout is {timeout} s"
    elif done.error is not None:
        run.status = "failed"
    elif differences:
        run.status, run.error = "failed", "; ".join(differences)
    run.checks.insert(0, (f"notebooks/{stem} with its student version", _outcome(run.status), round(done.seconds, 2)))
    if run.status == "passed":  # a failed run never replaces a notebook
        lesson = strip_machine_paths(lesson_part(done.notebook))
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
        nbformat.write(lesson, out / "notebooks" / f"{stem}.ipynb")
        if refresh:
            write_paired(lesson, NOTEBOOKS / f"{stem}.py")
    return run


def _outcome(status: str) -> str:
    return {"passed": "passed", "failed": "FAILED"}.get(status, status)


def kernel_env(require_cuda: bool) -> dict[str, str]:
    """The environment the suite's lessons run in: this one, REQUIRE_CUDA as asked, no figures file of its own."""
    env = dict(os.environ, REQUIRE_CUDA="1" if require_cuda else "", PYTHONUNBUFFERED="1")
    env.pop(FIGURES_ENV, None)
    env.pop(PROFILES_ENV, None)
    env.pop("PYTEST_CURRENT_TEST", None)  # ipykernel would stop capturing child processes' output
    return env
