"""GPU suite: the evidence that the course works on a real NVIDIA GPU, in the windows of GPU time there are.

Runs, with REQUIRE_CUDA=1 (so nothing can silently fall back to the CPU), and writes a run folder (--out,
build/gpu-run by default) that `make import-gpu-run RUN=<folder>` brings into the course. Its parts, in order:
  1. the unit tests       the `@gpu` tests of the package (tests/, not tests/tooling), alone, so their timings and
                          memory figures share the GPU with no neighbour (junit/); the others take no GPU branch and
                          CI runs them on the CPU: `--cpu-tests` (and a CPU dry run) runs them first, in parallel;
  2. each lesson          its nbval pair (the lesson and its student version, common/nbval_pairs.py) executed ONCE:
                          nbval's verdict, the lesson's time, its executed notebook (notebooks/NN_topic.ipynb) and
                          its figures all come from that one run (scripts/gpu/suite_lessons.py); each has a timeout;
  3. each bench experiment `colab_gpu bench` (bench/): one process, bench.json rewritten after each experiment.
`colab_gpu doctor` (the GPU, driver and versions) opens every window. report.md and report.json are written after
every part (scripts/gpu/suite_report.py), so a run that is killed leaves a valid report of what it did.

GPU time comes in windows (a Colab session, a Kaggle quota, a node's job limit). A window runs first the parts no
earlier run measured on its GPU (`plan`), then the others; each lesson's timeout follows its GPU class and its earlier
time on that GPU (`lesson_timeout`).
  --budget SECONDS    plan the window: a part whose expected time (an earlier run's, see `estimates`) does not fit in
                      what is left is "not run (budget)"; the part running when the budget ends is stopped, "cut".
  --resume RUN_DIR    run, into RUN_DIR, only what it did not finish (not run, cut or failed) and merge the results:
                      two windows give one report, each part saying which window ran it.
  --merge RUN OTHER   merge runs of one commit and GPU made in separate folders (windows on fresh machines) into RUN.
A lesson cell past the lesson's timeout, or a kernel that dies, fails that lesson only; the next one runs.

Usage on a GPU machine: `make gpu-suite` (USE_SYSTEM_PYTHON=1 on a preinstalled image), or scripts/gpu/gpu_runner.py.
`--refresh-notebooks` also writes the executed lessons over the committed notebooks (and their student versions).
`--lessons 01 04`, `--unit-tests tests/test_device.py` and `--bench-only resident` limit the run (`--unit-tests` or
`--bench-only` with nothing after it: none), and `--allow-cpu` makes it a CPU dry run (`make import-gpu-run` refuses
a CPU run). A resumed run keeps the parts its first window chose. `--data DIR` gives the lessons and the bench a
folder of the real data sets (torchvision's layout: FashionMNIST/, cifar-10-batches-py/), read with no download;
without it an offline GPU trains on stand-ins of the real data sets' size, and each lesson's result says which data
it had ("data" in report.json).
Exits 0 when every part passed, 1 when one failed or there is no GPU (without --allow-cpu), 3 when parts are left
for --resume.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from execution import device_label
from nbtools import course_config, lesson_sources, write_student_versions
from nbval_pairs import write_pairs
from paths import BUILD, ROOT, git_commit

DATA_SETS = ("FashionMNIST", "cifar-10-batches-py")  # what --data holds, in torchvision's layout
from suite_lessons import kernel_env, run_lesson
from suite_merge import merge
from suite_plan import DEFAULT_SECONDS, Window, estimates, lesson_timeout, measured, parts_of, plan, selected_lessons
from suite_report import (  # noqa: F401 (gpu_title, junit_rows, slug, evaluate_targets: the suite's public names)
    CUT,
    ENDED,
    FAILED,
    NOT_RUN,
    PASSED,
    evaluate_targets,
    gpu_title,
    junit_rows,
    new_state,
    slug,
    write_report,
)
from suite_runs import read_state, require_same_run
from suite_steps import run_bench, run_unit_tests

from colab_gpu.bench import EXPERIMENTS
from colab_gpu.data.downloads import DATA_ENV

RUN_DIR = BUILD / "gpu-run"


def load_or_start(args, out: Path, doctor: dict, sources: list[Path]) -> dict:
    """The run's state: the resumed run's report (checked: same commit and GPU), or a new one."""
    commit = git_commit()
    if args.resume is None:
        state = new_state(doctor, commit, device_label(), len(sources) == len(lesson_sources()))
        bench = list(EXPERIMENTS) if args.bench_only is None else args.bench_only
        state["parts"] = parts_of(sources, bench, unit_tests=bool(args.unit_tests))
        return state
    state = read_state(out, "--resume")
    here = {"commit": commit, "gpu": gpu_title(doctor)}
    require_same_run(
        "--resume", out, state, here, {"commit": "this tree is", "gpu": "this machine has"}, unknown_commit=True
    )
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--refresh-notebooks", action="store_true", help="write the lessons' GPU outputs in place")
    parser.add_argument("--out", type=Path, default=None, help="the run folder (default: build/gpu-run)")
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR", help="finish this run (see above)")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RUN", help="RUN OTHER...: merge runs (suite_merge)")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS", help="this window's length")
    parser.add_argument(
        "--times", type=Path, nargs="*", default=[], metavar="REPORT", help="earlier reports to plan by"
    )
    parser.add_argument(
        "--lesson-timeout", type=int, default=None, metavar="SECONDS", help="per lesson (default: lesson_timeout)"
    )
    parser.add_argument("--lessons", nargs="*", default=[], metavar="NN", help="only these lessons (default: all)")
    parser.add_argument(
        "--unit-tests", nargs="*", default=["tests"], metavar="PATH", help="(default: tests/; none: none)"
    )
    parser.add_argument("--bench-only", nargs="*", default=None, metavar="NAME", help="only these (none: no bench)")
    parser.add_argument("--allow-cpu", action="store_true", help="a CPU dry run: REQUIRE_CUDA is not set")
    parser.add_argument(
        "--cpu-tests", action="store_true", help="also the unit tests without a GPU branch (a CPU dry run runs them)"
    )
    parser.add_argument(
        "--data", type=Path, default=None, metavar="DIR", help="real data sets in torchvision's layout (no download)"
    )
    args = parser.parse_args(argv)
    if args.data is not None and not args.data.is_dir():
        parser.error(f"--data {args.data}: no such folder. Give one that holds FashionMNIST/ and cifar-10-batches-py/.")
    if args.data is not None and not any((args.data / name).is_dir() for name in DATA_SETS):
        parser.error(
            f"--data {args.data} holds neither {' nor '.join(f'{n}/' for n in DATA_SETS)}: every lesson would run on "
            "its stand-in. Give the folder that holds them (torchvision's layout)."
        )
    if args.merge:
        if len(args.merge) < 2:
            parser.error("--merge RUN OTHER [OTHER ...]: the run to merge into, then the runs to merge into it")
        folders = [run.resolve() for run in args.merge]
        if len(set(folders)) < len(folders):
            parser.error(f"--merge {' '.join(map(str, args.merge))}: a run named twice; each run once, RUN first")
        state = merge(args.merge[0].resolve(), [run.resolve() for run in args.merge[1:]])
        left = [name for name, part in state["parts"].items() if part["status"] != PASSED]
        print(
            f"merged {len(args.merge) - 1} run(s) into {args.merge[0]}: {len(state['windows'])} window(s), "
            f"{len(state['parts']) - len(left)} of {len(state['parts'])} parts passed"
        )
        return 0 if not left else 1 if any(state["parts"][n]["status"] == FAILED for n in left) else 3
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):  # nan compares false
        parser.error(f"--budget {args.budget:g}: a window's length is a positive number of seconds (none: no limit)")
    if args.lesson_timeout is not None and not (math.isfinite(args.lesson_timeout) and args.lesson_timeout > 0):
        parser.error(f"--lesson-timeout {args.lesson_timeout}: a positive number of seconds (none: the default)")
    window = Window(args.budget)
    if args.resume is not None and args.out is not None and args.out.resolve() != args.resume.resolve():
        parser.error("--resume writes into the run it resumes: leave out --out")
    out = (args.resume or args.out or RUN_DIR).resolve()
    if args.resume is None and (out / "report.json").exists():
        parser.error(
            f"{out} holds an earlier run (report.json): a new run would replace its report. Finish that run with "
            f"--resume {out}, give a new --out folder, or delete {out} first."
        )
    sources = selected_lessons(args.lessons)
    env = kernel_env(require_cuda=not args.allow_cpu)
    if args.data is not None:  # the lessons and the bench read the data sets there (downloads.DATA_ENV)
        env[DATA_ENV] = str(args.data.resolve())
    python = sys.executable  # `make gpu-suite` runs this script with the environment's Python
    doctor = doctor_report(python, env)
    if doctor is None or not (doctor.get("gpus") or args.allow_cpu):
        print("No CUDA GPU is visible (or the environment is not installed): no GPU report.", file=sys.stderr)
        return 1
    state = load_or_start(args, out, doctor, sources)
    number = len(state["windows"]) + 1
    record = {
        "window": number,
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "budget": args.budget,
        "seconds": 0.0,
        "parts": [],
    }
    state["windows"].append(record)
    reports = [*args.times, *sorted((ROOT / "reports" / "gpu").glob("*/report.json")), out / "report.json"]
    expected = estimates(reports, state["gpu"])
    todo = plan([name for name, part in state["parts"].items() if part["status"] != PASSED], measured(reports, state))
    lessons_todo = [state["parts"][name]["lesson"][:2] for name in todo if state["parts"][name]["kind"] == "lesson"]
    pairs = {pair.stem: pair for pair in write_pairs(lessons_todo)} if lessons_todo else {}
    bench_group: dict[str, dict] = {}

    def save(name: str | None = None):
        record["seconds"] = round(time.monotonic() - window.start, 1)
        if name is not None:
            record["parts"].append(name)
        write_report(out, state)

    def run_bench_group():  # the bench parts planned so far, in one process, before the next other part
        if bench_group:
            save()
            run_bench(bench_group, python, out, env, window, number)
            record["parts"].extend(bench_group)
            bench_group.clear()

    for name in todo:
        part = state["parts"][name]
        guess = expected.get(name, DEFAULT_SECONDS[part["kind"]])
        if part["kind"] == "bench":
            guess += sum(expected.get(n, DEFAULT_SECONDS["bench"]) for n in bench_group)
        if not window.fits(guess):
            part.update(status=NOT_RUN, error=f"expected {guess:.0f} s, {window.left():.0f} s left", window=None)
            continue
        part.update(status=ENDED, window=number, error=None)
        if part["kind"] == "bench":
            bench_group[name] = part  # measured together: one process, one CUDA start
            continue
        run_bench_group()
        save()
        print(f"--- {name}", flush=True)
        if part["kind"] == "tests":
            run_unit_tests(part, python, args.unit_tests, out, env, window, args.cpu_tests or args.allow_cpu)
        else:
            timeout = args.lesson_timeout or lesson_timeout(state["gpu"], bool(doctor.get("gpus")), expected.get(name))
            done = run_lesson(pairs[part["lesson"]], out, timeout, window.deadline, env, args.refresh_notebooks)
            part.update(
                status=done.status,
                seconds=round(done.seconds, 1),
                timeout=timeout,
                error=done.error,
                tests=done.checks,
                figures=done.figures,
                slowest=done.slowest,
                data=done.data,
            )
        print(f"{name}: {part['status']} in {part['seconds']} s {part['error'] or ''}", flush=True)
        save(name)
    run_bench_group()
    if args.refresh_notebooks:
        write_student_versions(course_config())
    save()
    md, js = out / "report.md", out / "report.json"
    failed = [name for name, part in state["parts"].items() if part["status"] == FAILED]
    left = [name for name, part in state["parts"].items() if part["status"] not in (PASSED, FAILED)]
    print(
        f"wrote {md} and {js}: {len(state['parts']) - len(failed) - len(left)} part(s) passed, "
        f"{len(failed)} failed{f' ({failed})' if failed else ''}, {len(left)} left for --resume {out}"
    )
    return 1 if failed else 3 if left else 0


def doctor_report(python: str, env: dict[str, str]) -> dict | None:
    """`colab_gpu doctor --json`, None when it fails (no CUDA GPU with REQUIRE_CUDA=1, a broken install)."""
    done = subprocess.run(
        [python, "-m", "colab_gpu", "doctor", "--json"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return None
    return json.loads(done.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
