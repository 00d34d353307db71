"""The suite's parts that are not lessons: the unit tests and the bench, each a command run with a timeout.

`gpu_suite.py` runs them in the order `suite_plan.plan` gives; each records its status, seconds and results in its part
of the run's state (`suite_report.py` writes it out). A command runs in its own process group, so a cut stops it all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from paths import ROOT
from suite_plan import Window
from suite_report import CUT, FAILED, NOT_RUN, PASSED, junit_rows

from colab_gpu.measure.profiling import PROFILES_ENV
from colab_gpu.measure.references import FIGURES_ENV


def run_command(command: list[str], env: dict, log: Path, timeout: float | None) -> tuple[int | None, float]:
    """Run ``command`` from the repository root, its output into ``log``; (exit code or None if cut, seconds).

    It runs in its own process group, so a cut also stops what it started (pytest's workers, torchrun's children)."""
    print("$", " ".join(command), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("a") as sink:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return code, time.monotonic() - start


GPU_TESTS_ONLY = "the @gpu tests (the others take no GPU branch: CI runs them on the CPU; --cpu-tests adds them)"
ALL_TESTS = "every unit test: those without a GPU branch in parallel, then the @gpu ones alone"


def unit_test_commands(python: str, paths: list[str], junit: Path, everything: bool = True) -> list[list[str]]:
    """The `@gpu` tests in one process, after (``everything``) the package's other tests in parallel."""
    ignore = ["--ignore=tests/tooling"] if paths == ["tests"] else []
    has_xdist = subprocess.run([python, "-c", "import xdist"], capture_output=True).returncode == 0
    workers = ["-n", str(min(8, max(2, (os.cpu_count() or 2) // 2)))] if has_xdist else []
    base = [python, "-m", "pytest", *paths, *ignore, "-p", "no:cacheprovider", "-q"]
    gpu = [*base, "-m", "gpu", f"--junitxml={junit / 'unit-gpu.xml'}"]
    return [[*base, "-m", "not gpu", *workers, f"--junitxml={junit / 'unit.xml'}"], gpu] if everything else [gpu]


def run_unit_tests(
    part: dict, python: str, paths: list[str], out: Path, env: dict, window: Window, everything: bool = True
) -> None:
    env = {key: value for key, value in env.items() if key != FIGURES_ENV}  # never the lessons' figures file
    codes, seconds = [], 0.0
    for command in unit_test_commands(python, paths, out / "junit", everything):
        left = window.left()
        code, took = run_command(command, env, out / "logs" / "unit-tests.log", None if left is None else max(1, left))
        codes.append(code)
        seconds += took
        if code is None:
            break
    tests = junit_rows(out / "junit" / "unit.xml") + junit_rows(out / "junit" / "unit-gpu.xml")
    passed = all(code in (0, 5) for code in codes)  # 5: no test collected (no `@gpu` test among the paths)
    status = CUT if None in codes else PASSED if passed else FAILED
    error = None if status == PASSED else "see logs/unit-tests.log" if status == FAILED else "the budget ended"
    part.update(status=status, seconds=round(seconds, 1), tests=tests, error=error)
    part["scope"] = ALL_TESTS if everything else GPU_TESTS_ONLY


def run_bench(parts: dict[str, dict], python: str, out: Path, env: dict, window: Window, number: int) -> None:
    """The experiments of ``parts`` in one `colab_gpu bench` process; each part gets its rows or its fate."""
    names = [part["experiment"] for part in parts.values()]
    folder = out / "bench" / f"window-{number}"
    left = window.left()
    command = [python, "-m", "colab_gpu", "bench", "--out", str(folder), "--only", *names]
    (out / "profiles").mkdir(parents=True, exist_ok=True)
    env = dict(env, **{PROFILES_ENV: str(out / "profiles" / f"bench-window-{number}.jsonl")})
    code, seconds = run_command(command, env, out / "logs" / f"bench-window-{number}.log", left and max(1, left))
    found = json.loads((folder / "bench.json").read_text()) if (folder / "bench.json").exists() else {}
    rows = {row["key"]: row for row in found.get("rows", [])}
    measured = found.get("experiments", {})
    stopped_in = next((name for name in names if name not in measured), None)
    for part in parts.values():
        name = part["experiment"]
        if name in measured:
            part.update(status=PASSED, seconds=measured[name]["seconds"], error=None)
            part["rows"] = [rows[key] for key in measured[name]["keys"]]
        elif name == stopped_in:
            part.update(
                status=CUT if code is None else FAILED,
                seconds=round(seconds - sum(m["seconds"] for m in measured.values()), 1),
            )
            part["error"] = (
                "the budget ended" if code is None else f"bench exited {code}: see logs/bench-window-{number}.log"
            )
        else:
            part.update(status=NOT_RUN if code is None else FAILED, error="an earlier experiment stopped the bench")
