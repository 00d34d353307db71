"""Merge GPU-suite runs made in separate folders into one: `python scripts/gpu/gpu_suite.py --merge RUN OTHER...`.

`--resume RUN_DIR` is the way to finish a run in a second window. But a window on a fresh machine may not have the
first window's folder (a Kaggle kernel, a node whose scratch space is wiped), and two machines of the same GPU can run
parts at the same time. Then each window writes its own run, and this merges them into RUN: same commit, same GPU,
a part passed in any of them counts as passed, each window keeps its number (renumbered after RUN's), and the
lesson notebooks, figures and logs of the parts taken come along. RUN's report is rewritten; the others are not
changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from suite_report import PASSED, write_report
from suite_runs import read_state, require_same_run

RANK = {PASSED: 3, "failed": 2}  # a passed part beats a failed one, which beats one that never finished


def _copy_outputs(part: dict, source: Path, target: Path) -> None:
    """The files a part wrote: a lesson's notebook, figures and kernel log; the unit tests' JUnit XML and log."""
    names = {
        "lesson": [
            f"notebooks/{part.get('lesson')}.ipynb",
            f"figures/{part.get('lesson')}.json",
            f"logs/{part.get('lesson')}.log",
        ],
        "tests": ["junit/unit.xml", "junit/unit-gpu.xml", "logs/unit-tests.log"],
    }.get(part["kind"], [])
    for name in names:
        if (source / name).exists():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, target / name)


def merge(into: Path, others: list[Path]) -> dict:
    """Merge the runs ``others`` into the run ``into`` (see the module's doc); return its new state."""
    state = read_state(into, "--merge")
    for run in others:
        other = read_state(run, "--merge")
        require_same_run("--merge", run, other, state, dict.fromkeys(("commit", "gpu"), "the run it would join ran"))
        offset = len(state["windows"])
        for window in other["windows"]:
            state["windows"].append(dict(window, window=window["window"] + offset))
        for name, part in other["parts"].items():
            mine = state["parts"].get(name)
            if mine is None or RANK.get(part["status"], 0) > RANK.get(mine["status"], 0):
                state["parts"][name] = dict(part, window=part["window"] and part["window"] + offset)
                _copy_outputs(part, run, into)
        if other.get("all_lessons"):
            state["all_lessons"] = True
    write_report(into, state)
    return state
