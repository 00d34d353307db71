"""Planning a window of GPU time: the run's parts, what each is expected to take, their order, the clock, timeouts.

`gpu_suite.py` calls these before and while it runs the parts: `parts_of` lists them, `estimates` and `measured` read
the earlier reports of the same GPU, `plan` orders the window (never-measured first), `Window` keeps the budget, and
`lesson_timeout` sets each lesson's limit.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from nbtools import lesson_sources
from suite_report import FAILED, NOT_RUN, PASSED

from colab_gpu.bench import EXPERIMENTS
from colab_gpu.measure.references import gpu_label

# Expected seconds per part, from the last GPU run (see the file); an imported run of the same GPU overrides them.
TIMES = Path(__file__).resolve().parent / "assets" / "gpu-suite-times.json"
DEFAULT_SECONDS = {"tests": 120.0, "lesson": 60.0, "bench": 20.0}  # a part no run has timed yet
RESERVE = 5.0  # seconds kept at the end of a budget for the report
LESSON_TIMEOUT = {"gpu": 300, "cpu": 900}  # a lesson past this is broken, not slow (a CPU runs them 2-10x longer)
# Slower GPU classes get more. Lesson 12 on a T4, rebuilt from the H100's cells and the T4's rates as PyTorch reaches
# them (rung 0 on per-image CPU transforms with 2 vCPUs, two cold compiles, rungs 1-2 and the fp32 variant GPU-bound
# at about 4.3 TFLOP/s), is estimated at 430-760 s (prediction: t4 12.lesson_time): its timeout leaves that room
# rather than trimming the T4's ladder. An L4 sits between.
GPU_CLASS_TIMEOUT = {"T4": 900, "L4": 450}
# Until a run of a GPU's class is imported, its parts are planned from the times in TIMES (the H100's) scaled by how
# much slower that class is expected to be: a T4 has about a twelfth of the H100's fp32 matmul rate and an eighteenth
# of its fp16, behind Colab's or Kaggle's few cores (prediction: t4 suite_times); an L4 and an A100 sit between
# (prediction: l4 suite_times) (prediction: a100 suite_times); a class not listed keeps them.
CLASS_SLOWDOWN = {"T4": 3.0, "L4": 1.8, "A100": 1.3}


def selected_lessons(numbers: list[str]) -> list[Path]:
    """The lessons' sources, all of them or those whose number is in ``numbers`` ("01", "08")."""
    sources = [s for s in lesson_sources() if not numbers or s.name[:2] in numbers]
    unknown = set(numbers) - {s.name[:2] for s in sources}
    if unknown:
        raise SystemExit(f"no lesson numbered {sorted(unknown)}; lessons: {[s.name[:2] for s in lesson_sources()]}")
    return sources


def parts_of(sources: list[Path], bench: list[str], unit_tests: bool = True) -> dict[str, dict]:
    """Every part of a run, in the order it runs: the unit tests, each lesson, each bench experiment."""
    unknown = sorted(set(bench) - set(EXPERIMENTS))
    if unknown:
        raise SystemExit(f"no bench experiment named {unknown}; experiments: {list(EXPERIMENTS)}")
    parts = {"unit tests": {"kind": "tests"}} if unit_tests else {}
    parts.update({f"lesson {s.stem}": {"kind": "lesson", "lesson": s.stem} for s in sources})
    parts.update({f"bench {name}": {"kind": "bench", "experiment": name} for name in bench})
    for part in parts.values():
        part.update(status=NOT_RUN, seconds=None, window=None, timeout=None, error=None)
    return parts


def estimates(reports: list[Path], gpu: str) -> dict[str, float]:
    """Expected seconds per part: TIMES (scaled by `CLASS_SLOWDOWN` for another GPU class), then every report in
    ``reports`` of the same GPU class ("Tesla T4" and "Tesla T4 x2"; later ones win): a part a run of this class
    measured is planned by its own time, the others by the scaled ones.

    A report's passed parts give their time; a part that was cut or failed gives at least the time it ran."""
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    label = gpu_label(gpu)
    same = [r for r in (json.loads(p.read_text()) for p in reports if p.exists()) if _same_class(r.get("gpu", ""), gpu)]
    seconds = dict(times.get("seconds", {}))
    if label != gpu_label(times.get("gpu", "")):
        seconds = {name: value * CLASS_SLOWDOWN.get(label, 1.0) for name, value in seconds.items()}
    for report in same:
        for name, part in report.get("parts", {}).items():
            if part.get("seconds") is not None:
                ran = part["seconds"]
                seconds[name] = ran if part["status"] == PASSED else max(ran, seconds.get(name, 0.0))
    return seconds


def _same_class(report_gpu: str, gpu: str) -> bool:
    """Whether a report's GPU is ``gpu`` or of its class (the course's label: an L40S is no L4)."""
    label = gpu_label(gpu)
    return report_gpu == gpu or (label is not None and gpu_label(report_gpu) == label)


def measured(reports: list[Path], state: dict) -> set[str]:
    """The parts an earlier report of this run's GPU ran to the end (passed or failed), this run's own included."""
    done = {name for name, part in state["parts"].items() if part["status"] in (PASSED, FAILED)}
    for path in reports:
        report = json.loads(path.read_text()) if path.exists() else {}
        if report.get("gpu") == state["gpu"]:
            done |= {name for name, part in report.get("parts", {}).items() if part.get("status") in (PASSED, FAILED)}
    return done


def plan(todo: list[str], measured_before: set[str]) -> list[str]:
    """The order of a window: first what no run has measured on this GPU (so a window spends itself on what only
    it can show: six bench rows were "not run (budget)" in every window behind the lessons), then the rest, each
    group in the usual order."""
    return sorted(todo, key=lambda name: name in measured_before)


class Window:
    """This window's clock: what is left of the budget, and whether a part's expected time fits in it."""

    def __init__(self, budget: float | None):
        self.start = time.monotonic()
        self.deadline = None if budget is None else self.start + budget - RESERVE

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def fits(self, seconds: float) -> bool:
        return self.deadline is None or time.monotonic() + seconds <= self.deadline


def lesson_timeout(gpu: str, on_gpu: bool, expected: float | None) -> int:
    """A lesson's timeout: its GPU class's (`GPU_CLASS_TIMEOUT`, else `LESSON_TIMEOUT`'s), and at least twice what an
    earlier run on this GPU took (``expected``), so a lesson that is slow on this GPU, not broken, finishes."""
    base = (
        LESSON_TIMEOUT["cpu"]
        if not on_gpu
        else GPU_CLASS_TIMEOUT.get(gpu_label(gpu), LESSON_TIMEOUT["gpu"])  # by the course's label: an L40S is no L4
    )
    return max(base, math.ceil(2 * expected)) if expected else base
