"""GPU suite: the evidence that the course works on a real NVIDIA GPU.

Runs, with REQUIRE_CUDA=1 (so nothing can silently fall back to the CPU), and writes a run folder (--out,
build/gpu-run by default) that `make import-gpu-run RUN=<folder>` brings into the course:
  1. `colab_gpu doctor`   the GPU, driver and versions;
  2. the unit tests       the `@gpu` tests included (junit/unit.xml);
  3. nbval                every lesson's and student version's cells run and checked (junit/nbval.xml);
  4. the lessons          each lesson top to bottom, timed, its executed notebook kept (notebooks/NN_topic.ipynb);
  5. `colab_gpu bench`    the measured ratios (bench/);
then report.md and report.json: every figure, every target met or not, every test and notebook cell.
Each step's output goes to logs/ in the run folder as well as to the terminal.

Usage on a GPU machine: `make gpu-suite` (USE_SYSTEM_PYTHON=1 on a preinstalled image).
`--refresh-notebooks` also writes the executed lessons over the committed notebooks (and their student versions).
`--lessons 01 04`, `--unit-tests tests/test_device.py` and `--bench-only resident` limit the run, and `--allow-cpu`
makes it a CPU dry run (scripts/gpu_runner.py's local test uses them; `make import-gpu-run` refuses a CPU run).
Exits non-zero when there is no GPU (without --allow-cpu) or anything failed.
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

import nbformat
from course import COURSE_TARGET, Lesson, lesson_timings
from nbtools import (
    BUILD,
    NOTEBOOKS,
    ROOT,
    course_config,
    device_label,
    execute,
    git_commit,
    lesson_sources,
    read_lesson,
    strip_machine_paths,
    write_paired,
    write_student_versions,
)
from nbval_pairs import write_pairs

from colab_gpu.bench import TARGETS

RUN_DIR = BUILD / "gpu-run"
NBVAL = ["--nbval-lax", "--nbval-current-env", "--nbval-sanitize-with", "nbval_sanitize.cfg"]


def run(name: str, command: list[str], env: dict[str, str], logs: Path) -> tuple[int, float, str]:
    """Run a command from the repository root, echoing its output and keeping it in logs/<name>.log.

    Returns (exit code, seconds, stdout)."""
    print("$", " ".join(command), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout, flush=True)
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{slug(name)}.log").write_text(proc.stdout)
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
    results = [
        {
            "key": key,
            "target": target.promise,
            "reason": target.reason,
            "value": rows.get(key, {}).get("ratio"),
            "met": rows.get(key, {}).get("met"),
        }
        for key, target in TARGETS.items()
    ]
    met = None if course_seconds is None else COURSE_TARGET.met(course_seconds)
    return results + [
        {
            "key": "course",
            "target": COURSE_TARGET.promise,
            "reason": COURSE_TARGET.reason,
            "value": course_seconds,
            "met": met,
        }
    ]


def gpu_title(doctor: dict) -> str:
    """ "Tesla T4 x2" for two T4s, "NVIDIA H100 80GB HBM3" for one: what a report and its folder are named after."""
    names = [gpu["name"] for gpu in doctor["gpus"]]
    if not names:
        return "CPU dry run (no GPU)"
    return names[0] + (f" x{len(names)}" if len(names) > 1 else "")


def write_report(
    out: Path,
    doctor: dict,
    steps: dict,
    bench_rows: list[dict],
    targets: list[dict],
    lessons: dict,
    tests: list[tuple[str, str, float]],
    lesson_figures: dict | None = None,
    commit: str | None = None,
) -> tuple[Path, Path]:
    """report.md (for people) and report.json (for scripts/import_gpu_run.py) in the run folder ``out``."""
    gpu = doctor["gpus"][0] if doctor["gpus"] else {"compute_capability": "-", "total_memory_gib": "-"}
    today = dt.date.today().isoformat()
    lines = [
        f"# GPU suite: {gpu_title(doctor)}, {today}",
        "",
        f"- GPU: {gpu_title(doctor)}, compute capability {gpu['compute_capability']}, "
        f"{gpu['total_memory_gib']} GiB each",
        f"- PyTorch {doctor['torch']}, CUDA {doctor['cuda_runtime']}, cuDNN {doctor['cudnn']}, "
        f"driver {doctor['driver']}, Python {doctor['python']}, {doctor['cpu_count']} CPU cores",
        f"- Commit: {commit or 'unknown'}",
        "",
        "## Steps",
        "",
        "| step | result | seconds |",
        "|---|---|---:|",
        *[
            f"| {name} | {'passed' if code == 0 else 'FAILED'} | {seconds:.0f} |"
            for name, (code, seconds) in steps.items()
        ],
        "",
        "## Targets (colab_gpu/bench/ and scripts/course.py)",
        "",
        "| target | measured | met | why |",
        "|---|---:|---|---|",
        *[
            f"| {t['target']} | {t['value'] if t['value'] is not None else 'not measured'} | "
            f"{ {True: 'yes', False: 'NO', None: '-'}[t['met']] } | {t['reason']} |"
            for t in targets
        ],
        "",
        "## Benchmarks (`python -m colab_gpu bench`)",
        "",
        "| benchmark | result | details |",
        "|---|---|---|",
        *[
            f"| {r['name']} | {r['ratio']} {r['unit']} | {r['note'] or ''} |"
            if r["status"] == "ok"
            else f"| {r['name']} | skipped | {r['note']} |"
            for r in bench_rows
        ],
        "",
        "## Lessons (each top to bottom, timed)",
        "",
        "| Lesson | Device | Seconds | Status |",
        "|---|---|---:|---|",
        *[
            f"| {stem} | {lessons.get('device')} | {row['seconds']:.1f} | {row['status']} |"
            for stem, row in lessons.get("lessons", {}).items()
        ],
        "",
        "## Lesson figures (`cg.compare_with_references`; scripts/update_references.py ships them)",
        "",
        "| figure | value | device |",
        "|---|---:|---|",
        *[f"| {key} | {figure['value']:.3g} | {figure['device']} |" for key, figure in (lesson_figures or {}).items()],
        "",
        "## Every test and notebook cell",
        "",
        "| test or cell | outcome | seconds |",
        "|---|---|---:|",
        *[f"| {name} | {outcome} | {seconds:.2f} |" for name, outcome, seconds in tests],
    ]
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "report.md", out / "report.json"
    md.write_text("\n".join(lines) + "\n")
    js.write_text(
        json.dumps(
            {
                "date": today,
                "commit": commit,
                "gpu": gpu_title(doctor),
                "runtime": doctor,
                "steps": steps,
                "targets": targets,
                "bench": bench_rows,
                "lessons": lessons,
                "tests": tests,
                "lesson_figures": lesson_figures or {},
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    return md, js


def selected_lessons(numbers: list[str]) -> list[Path]:
    """The lessons' sources, all of them or those whose number is in ``numbers`` ("01", "08")."""
    sources = [s for s in lesson_sources() if not numbers or s.name[:2] in numbers]
    unknown = set(numbers) - {s.name[:2] for s in sources}
    if unknown:
        raise SystemExit(f"no lesson numbered {sorted(unknown)}; lessons: {[s.name[:2] for s in lesson_sources()]}")
    return sources


def run_lessons(sources: list[Path], out: Path, refresh: bool) -> tuple[dict, bool]:
    """Each lesson top to bottom, timed; its executed notebook in out/notebooks/ (and over the committed one
    with ``refresh``). Returns the timings (build/timings.json's shape) and whether every lesson passed."""
    device = device_label()
    lessons = []
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    for source in sources:
        done = execute(read_lesson(source), cwd=NOTEBOOKS, log=out / "logs" / f"{source.stem}.log")
        lessons.append(Lesson(source, done.notebook, done.seconds, device, done.error))
        print(
            f"{source.stem:<24} {device}  {done.seconds:6.1f} s  {'ok' if done.error is None else 'FAILED'}", flush=True
        )
        if done.error is not None:
            print(done.traceback or done.error, flush=True)
            continue  # a failed run never replaces a notebook
        nbformat.write(strip_machine_paths(done.notebook), out / "notebooks" / f"{source.stem}.ipynb")
        if refresh:
            write_paired(done.notebook, source)
    if refresh:
        write_student_versions(course_config())
    return lesson_timings(lessons), all(lesson.error is None for lesson in lessons)


def doctor_report(python: str, env: dict[str, str]) -> dict | None:
    """`colab_gpu doctor --json`, None when it fails (no CUDA GPU with REQUIRE_CUDA=1, a broken install)."""
    done = subprocess.run(
        [python, "-m", "colab_gpu", "doctor", "--json"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return None
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--refresh-notebooks", action="store_true", help="write the lessons' GPU outputs in place")
    parser.add_argument("--out", type=Path, default=RUN_DIR, help="the run folder (default: build/gpu-run)")
    parser.add_argument("--lessons", nargs="*", default=[], metavar="NN", help="only these lessons (default: all)")
    parser.add_argument(
        "--unit-tests",
        nargs="*",
        default=["tests"],
        metavar="PATH",
        help="pytest paths for the unit tests (default: tests)",
    )
    parser.add_argument("--bench-only", nargs="*", default=[], metavar="NAME", help="only these benchmarks")
    parser.add_argument("--allow-cpu", action="store_true", help="a CPU dry run: REQUIRE_CUDA is not set")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    sources = selected_lessons(args.lessons)
    figures_file = out / "lesson_figures.json"  # the lessons write their headline figures here
    figures_file.unlink(missing_ok=True)
    env = dict(
        os.environ,
        REQUIRE_CUDA="" if args.allow_cpu else "1",
        PYTHONUNBUFFERED="1",
        COLAB_GPU_FIGURES=str(figures_file),
    )
    python = sys.executable  # `make gpu-suite` runs this script with the environment's Python
    doctor = doctor_report(python, env)
    if doctor is None or not (doctor.get("gpus") or args.allow_cpu):
        print("No CUDA GPU is visible (or the environment is not installed): no GPU report.", file=sys.stderr)
        return 1
    junit, logs = out / "junit", out / "logs"
    workers = ["-n", "2"] if subprocess.run([python, "-c", "import xdist"], capture_output=True).returncode == 0 else []
    # Each lesson with its student version, as `make nbval` runs them (scripts/nbval_pairs.py).
    notebooks = [str(path.relative_to(ROOT)) for path in write_pairs([s.name[:2] for s in sources])]
    steps = {}
    for name, command in (
        ("unit tests", [python, "-m", "pytest", *args.unit_tests, *workers, f"--junitxml={junit / 'unit.xml'}"]),
        ("nbval", [python, "-m", "pytest", *NBVAL, *notebooks, f"--junitxml={junit / 'nbval.xml'}"]),
    ):
        steps[name] = run(name, command, env, logs)[:2]
    start = time.perf_counter()
    lessons, lessons_ok = run_lessons(sources, out, args.refresh_notebooks)
    steps["lessons"] = (0 if lessons_ok else 1, time.perf_counter() - start)
    only = ["--only", *args.bench_only] if args.bench_only else []
    steps["colab_gpu bench"] = run(
        "bench", [python, "-m", "colab_gpu", "bench", "--out", str(out / "bench"), *only], env, logs
    )[:2]
    bench_file = out / "bench" / "bench.json"
    bench_rows = json.loads(bench_file.read_text())["rows"] if bench_file.exists() else []
    every_lesson = len(sources) == len(lesson_sources())
    course_seconds = sum(row["seconds"] for row in lessons["lessons"].values())
    targets = evaluate_targets(bench_rows, course_seconds if lessons_ok and every_lesson else None)
    tests = junit_rows(junit / "unit.xml") + junit_rows(junit / "nbval.xml")
    figures = json.loads(figures_file.read_text()) if figures_file.exists() else {}
    md, js = write_report(out, doctor, steps, bench_rows, targets, lessons, tests, figures, git_commit())
    print(f"wrote {md} and {js}")
    return 0 if all(code == 0 for code, _ in steps.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
