"""GPU suite: the evidence that the course works on a real NVIDIA GPU.

Runs, with REQUIRE_CUDA=1 (so nothing can silently fall back to the CPU):
  1. `make test`          lint, unit tests, hygiene, nbval over every notebook (JUnit XML per test);
  2. `make course`        every lesson top to bottom, timed;
  3. `colab_gpu bench`    the measured ratios;
  4. `colab_gpu doctor`   the GPU, driver and versions;
then writes reports/gpu/<date>-<gpu>.md and .json with every figure and the targets, met or not.

Usage on a GPU machine: `make gpu-suite` (USE_SYSTEM_PYTHON=1 on a preinstalled image).
`--refresh-notebooks` also re-executes the committed notebooks in place, so they show GPU outputs.
Exits non-zero when there is no GPU or anything failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from course import COURSE_TARGET
from nbtools import BUILD, ROOT

from colab_gpu.bench import TARGETS

REPORTS = ROOT / "reports" / "gpu"
JUNIT = BUILD / "junit"

def run(command: list[str], env: dict[str, str]) -> tuple[int, float, str]:
    """Run a command from the repository root, echoing its output; return (code, seconds, stdout)."""
    print("$", " ".join(command), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    print(proc.stdout, flush=True)
    return proc.returncode, time.perf_counter() - start, proc.stdout


def junit_rows(path: Path) -> list[tuple[str, str, float]]:
    """(test id, outcome, seconds) for every test case in a JUnit XML file."""
    if not path.exists():
        return []
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child, word in (("failure", "FAILED"), ("error", "ERROR"), ("skipped", "skipped")):
            if case.find(child) is not None:
                outcome = word
        rows.append((f"{case.get('classname')}::{case.get('name')}", outcome, float(case.get("time", 0))))
    return rows


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def evaluate_targets(bench_rows: list[dict], course_seconds: float | None) -> list[dict]:
    """Every target (bench.TARGETS, then the course's) with its measured value and whether it was met.

    The bench rows carry their verdict (``met``, judged on the GPU that measured them); a target whose row is
    missing or skipped is listed as not measured, so a report never silently drops a promise."""
    rows = {row["key"]: row for row in bench_rows if row.get("status") == "ok"}
    results = [{"key": key, "target": target.promise, "reason": target.reason,
                "value": rows.get(key, {}).get("ratio"), "met": rows.get(key, {}).get("met")}
               for key, target in TARGETS.items()]
    met = None if course_seconds is None else COURSE_TARGET.met(course_seconds)
    return results + [{"key": "course", "target": COURSE_TARGET.promise, "reason": COURSE_TARGET.reason,
                       "value": course_seconds, "met": met}]


def course_lessons(timings: Path) -> dict:
    """Seconds and status per lesson from build/timings.json (what `make course` measured), {} before a run."""
    return json.loads(timings.read_text()) if timings.exists() else {}


def write_report(doctor: dict, steps: dict, bench_rows: list[dict], targets: list[dict],
                 lessons: dict, tests: list[tuple[str, str, float]],
                 lesson_figures: dict | None = None) -> tuple[Path, Path]:
    gpu = doctor["gpus"][0]
    today = dt.date.today().isoformat()
    stem = REPORTS / f"{today}-{slug(gpu['name'])}"
    lines = [
        f"# GPU suite: {gpu['name']}, {today}", "",
        f"- GPU: {gpu['name']}, compute capability {gpu['compute_capability']}, {gpu['total_memory_gib']} GiB",
        f"- PyTorch {doctor['torch']}, CUDA {doctor['cuda_runtime']}, cuDNN {doctor['cudnn']}, "
        f"driver {doctor['driver']}, Python {doctor['python']}, {doctor['cpu_count']} CPU cores",
        "", "## Steps (REQUIRE_CUDA=1)", "", "| step | result | seconds |", "|---|---|---:|",
        *[f"| `{name}` | {'passed' if code == 0 else 'FAILED'} | {seconds:.0f} |" for name, (code, seconds) in
          steps.items()],
        "", "## Targets (colab_gpu/bench.py and scripts/course.py)", "", "| target | measured | met | why |",
        "|---|---:|---|---|",
        *[f"| {t['target']} | {t['value'] if t['value'] is not None else 'not measured'} | "
          f"{ {True: 'yes', False: 'NO', None: '-'}[t['met']] } | {t['reason']} |" for t in targets],
        "", "## Benchmarks (`python -m colab_gpu bench`)", "", "| benchmark | result | details |", "|---|---|---|",
        *[f"| {r['name']} | {r['ratio']} {r['unit']} | {r['note'] or ''} |" if r["status"] == "ok"
          else f"| {r['name']} | skipped | {r['note']} |" for r in bench_rows],
        "", "## Lessons (`make course`)", "",
        "| Lesson | Device | Seconds | Status |", "|---|---|---:|---|",
        *[f"| {stem} | {lessons.get('device')} | {row['seconds']:.1f} | {row['status']} |"
          for stem, row in lessons.get("lessons", {}).items()],
        "", "## Lesson figures (`cg.compare_with_references`; scripts/update_references.py ships them)", "",
        "| figure | value | device |", "|---|---:|---|",
        *[f"| {key} | {figure['value']:.3g} | {figure['device']} |" for key, figure in (lesson_figures or {}).items()],
        "", "## Every test and notebook cell", "", "| test or cell | outcome | seconds |", "|---|---|---:|",
        *[f"| {name} | {outcome} | {seconds:.2f} |" for name, outcome, seconds in tests],
    ]
    REPORTS.mkdir(parents=True, exist_ok=True)
    md, js = stem.with_suffix(".md"), stem.with_suffix(".json")
    md.write_text("\n".join(lines) + "\n")
    js.write_text(json.dumps({"date": today, "runtime": doctor, "steps": steps, "targets": targets,
                              "bench": bench_rows, "lessons": lessons, "tests": tests,
                              "lesson_figures": lesson_figures or {}},
                             indent=2, default=str) + "\n")
    return md, js


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--refresh-notebooks", action="store_true", help="re-execute the committed notebooks")
    args = parser.parse_args(argv)
    figures_file = BUILD / "lesson_figures.json"  # the lessons write their headline figures here
    figures_file.unlink(missing_ok=True)
    env = dict(os.environ, REQUIRE_CUDA="1", JUNIT_DIR=str(JUNIT), PYTHONUNBUFFERED="1",
               COLAB_GPU_FIGURES=str(figures_file))
    python = sys.executable  # `make gpu-suite` runs this script with the environment's Python
    JUNIT.mkdir(parents=True, exist_ok=True)
    code, _, doctor_json = run([python, "-m", "colab_gpu", "doctor", "--json"], env)
    if code != 0:
        print("No CUDA GPU is visible (or the environment is not installed): no GPU report.", file=sys.stderr)
        return 1
    doctor = json.loads(doctor_json)
    steps = {}
    for name, command in (("make test", ["make", "test"]), ("make course", ["make", "course"]),
                          ("colab_gpu bench", [python, "-m", "colab_gpu", "bench", "--out", str(BUILD / "bench")])):
        code, seconds, _ = run(command, env)
        steps[name] = (code, seconds)
    if args.refresh_notebooks:
        steps["make notebooks"] = run(["make", "notebooks"], env)[:2]
    bench_file = BUILD / "bench" / "bench.json"
    bench_rows = json.loads(bench_file.read_text())["rows"] if bench_file.exists() else []
    course_seconds = steps["make course"][1] if steps["make course"][0] == 0 else None
    targets = evaluate_targets(bench_rows, course_seconds)
    tests = junit_rows(JUNIT / "unit.xml") + junit_rows(JUNIT / "nbval.xml")
    figures = json.loads(figures_file.read_text()) if figures_file.exists() else {}
    md, js = write_report(doctor, steps, bench_rows, targets, course_lessons(BUILD / "timings.json"), tests, figures)
    print(f"wrote {md.relative_to(ROOT)} and {js.relative_to(ROOT)}")
    return 0 if all(code == 0 for code, _ in steps.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
