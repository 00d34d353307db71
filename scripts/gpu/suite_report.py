"""The GPU suite's report: report.json (for scripts/gpu/import_gpu_run.py) and report.md (for people).

The suite writes both after every part it runs (the unit tests, each lesson, each bench experiment), so a run that is
killed still leaves a valid report of what it did. A run's state is report.json itself: ``parts`` holds each part's
status, seconds, window and results; everything else (steps, lessons, bench rows, tests, figures, targets) is
derived from the parts every time, so two windows merged by ``--resume`` read as one run.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from suite_runs import measured_on

from colab_gpu.bench import TARGETS
from colab_gpu.bench.rows import Target, target_for
from colab_gpu.measure.references import gpu_label

PASSED, FAILED = "passed", "failed"
NOT_RUN = "not run (budget)"  # the budget had no room for it: --resume runs it
CUT = "cut (budget)"  # started, stopped when the budget ended: --resume runs it again
ENDED = "cut (the run ended while it ran)"  # what a killed run leaves on the part it was running
CPU_TITLE = "CPU dry run (no GPU)"  # what a report of a run without a GPU is named after (`gpu_title`)
SLOW_LESSON = 60  # seconds on a GPU: a lesson above it names its slowest cells (issue 42's goal for an H100)
# The course's own target, which the report checks (colab_gpu/bench/ holds the experiments' targets).
COURSE_TARGET = Target(
    "the whole `make course` under 5 minutes (seconds)",
    at_most=300,
    reason="an instructor runs every lesson once before a workshop starts",
)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


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


def evaluate_targets(
    bench_rows: list[dict], course_seconds: float | None, gpu: str = "", measured: dict[str, set[str]] | None = None
) -> list[dict]:
    """Every target (bench.TARGETS, then the course's) with its measured value and whether it was met.

    The bench rows carry their verdict (``met``, judged on the GPU that measured them, against the target for that
    GPU: `Target.gpus`); a target whose row is missing or skipped is listed as not measured, so a report never
    silently drops a promise. A row whose targets are all for other GPUs is listed with none. A target is a
    prediction for this GPU until an imported run of its class has measured the row (``measured``, by default
    `measured_on` the course's imported runs): the report says so. The course's own target is about `make course`,
    the lessons at the sizes a CPU runs them: a GPU run, which runs them at full size, lists its sum unjudged."""
    rows = {row["key"]: row for row in bench_rows if row.get("status") == "ok"}
    measured = measured_on() if measured is None else measured
    label, on_gpu = gpu_label(gpu), gpu not in ("", CPU_TITLE)
    results = []
    for key, targets in TARGETS.items():
        target = target_for(targets, gpu)
        if target is None:
            others = ", ".join("/".join(t.gpus) for t in targets)
            results.append(
                {
                    "key": key,
                    "target": f"none for {gpu or 'this GPU'} (targets for {others})",
                    "reason": "",
                    "value": rows.get(key, {}).get("ratio"),
                    "met": None,
                }
            )
            continue
        promise = target.promise
        if on_gpu and (label is None or label not in measured.get(key, set())):
            run = f"{label} run" if label else "run of this GPU"
            promise += f" (predicted: no {run} has measured it yet)"
        results.append(
            {
                "key": key,
                "target": promise,
                "reason": target.reason,
                "value": rows.get(key, {}).get("ratio"),
                "met": rows.get(key, {}).get("met"),
            }
        )
    met = None if course_seconds is None or on_gpu else COURSE_TARGET.met(course_seconds)
    course = COURSE_TARGET.promise
    if on_gpu:
        course += " (not judged here: this GPU run trains each lesson at full size, which `make course` does not)"
    return results + [
        {
            "key": "course",
            "target": course,
            "reason": COURSE_TARGET.reason,
            "value": course_seconds,
            "met": met,
        }
    ]


def gpu_title(doctor: dict) -> str:
    """ "Tesla T4 x2" for two T4s, "NVIDIA H100 80GB HBM3" for one: what a report and its folder are named after."""
    names = [gpu["name"] for gpu in doctor["gpus"]]
    if not names:
        return CPU_TITLE
    return names[0] + (f" x{len(names)}" if len(names) > 1 else "")


def _of_kind(state: dict, kind: str) -> dict[str, dict]:
    return {name: part for name, part in state["parts"].items() if part["kind"] == kind}


def _step(parts: dict[str, dict]) -> tuple[int, float]:
    """A step's (exit code, seconds) as the runner reads it: 1 when a part failed, 3 when one did not run."""
    statuses = {part["status"] for part in parts.values()}
    code = 1 if FAILED in statuses else 0 if statuses <= {PASSED} else 3
    return code, round(sum(part.get("seconds") or 0 for part in parts.values()), 1)


def derive(state: dict) -> dict:
    """Fill the report's derived fields from its parts (see the module's doc)."""
    tests, lessons, bench = (_of_kind(state, kind) for kind in ("tests", "lesson", "bench"))
    state["steps"] = {label: _step(parts) for label, parts in (("unit tests", tests), ("lessons", lessons)) if parts}
    if bench:
        state["steps"]["colab_gpu bench"] = _step(bench)
    state["bench"] = [row for part in bench.values() for row in part.get("rows", [])]
    ran = {p["lesson"]: p for p in lessons.values() if p["status"] in (PASSED, FAILED)}
    state["lessons"] = {
        "device": state.get("device"),
        "lessons": {
            stem: {
                "seconds": p["seconds"],
                "status": "ok" if p["status"] == PASSED else f"FAILED: {p['error']}",
                "data": p.get("data"),  # which data it trained on: its time is a learner's only on full-size data
            }
            for stem, p in ran.items()
        },
    }
    state["tests"] = [tuple(row) for part in state["parts"].values() for row in part.get("tests", [])]
    state["lesson_figures"] = {key: f for part in lessons.values() for key, f in part.get("figures", {}).items()}
    every_lesson_passed = lessons and all(p["status"] == PASSED for p in lessons.values())
    course = (
        round(sum(p["seconds"] for p in lessons.values()), 1) if every_lesson_passed and state["all_lessons"] else None
    )
    state["targets"] = evaluate_targets(state["bench"], course, state.get("gpu", ""))
    state["complete"] = all(part["status"] == PASSED for part in state["parts"].values())
    return state


def _parts_table(state: dict) -> list[str]:
    rows = []
    for name, part in state["parts"].items():
        seconds = "" if part.get("seconds") is None else f"{part['seconds']:.1f}"
        limit = "" if part.get("timeout") is None else f"{part['timeout']}"
        detail = (part.get("error") or part.get("scope") or "").replace("|", "/").replace("\n", " ")[:300]
        if part.get("seconds") and part["seconds"] > SLOW_LESSON and part.get("slowest"):
            cells = ", ".join(f"cell {n} ({line!r}) {seconds:.0f} s" for n, line, seconds in part["slowest"])
            detail = f"{detail} slowest: {cells}".strip().replace("|", "/")
        rows.append(f"| {name} | {part['status']} | {seconds} | {part.get('window') or ''} | {limit} | {detail} |")
    return rows


def host_line(host: dict | None) -> str:
    """The host beside the GPU, as report.md shows it: a launch-bound figure is this CPU's as much as the GPU's."""
    if not host:
        return "Host: not recorded (a run from before the suite probed it)"
    clock = f" at {host['mhz']:.0f} MHz" if host.get("mhz") else ""
    if "linear_step_us" not in host:
        return (
            f"Host: {host['cpu_model']}, {host['cores']} cores{clock}; dispatch not probed: {host.get('probe_error')}"
        )
    return (
        f"Host: {host['cpu_model']}, {host['cores']} cores{clock}; dispatch on {host['device']}: "
        f"{host['empty_op_us']:.1f} µs per empty op, {host['linear_step_us']:.1f} µs per small Linear forward and "
        "backward"
    )


def markdown(state: dict) -> str:
    doctor = state["runtime"]
    gpu = doctor["gpus"][0] if doctor["gpus"] else {"compute_capability": "-", "total_memory_gib": "-"}
    windows = state.get("windows", [])
    done = sum(part["status"] == PASSED for part in state["parts"].values())
    lines = [
        f"# GPU suite: {state['gpu']}, {state['date']}",
        "",
        f"- GPU: {state['gpu']}, compute capability {gpu['compute_capability']}, {gpu['total_memory_gib']} GiB each",
        f"- PyTorch {doctor['torch']}, CUDA {doctor['cuda_runtime']}, cuDNN {doctor['cudnn']}, "
        f"driver {doctor['driver']}, Python {doctor['python']}, {doctor['cpu_count']} CPU cores",
        f"- {host_line(doctor.get('host'))}",
        f"- Commit: {state.get('commit') or 'unknown'}",
        f"- {done} of {len(state['parts'])} parts passed"
        + ("" if state["complete"] else "; `scripts/gpu/gpu_suite.py --resume RUN_DIR` runs the others"),
        "",
        "## Windows",
        "",
        "| window | started | budget (s) | seconds | parts run |",
        "|---:|---|---:|---:|---|",
        *[
            f"| {w['window']} | {w['started']} | {w.get('budget') or 'none'} | {w.get('seconds', 0):.0f} | "
            f"{', '.join(w.get('parts', [])) or '-'} |"
            for w in windows
        ],
        "",
        "## Parts (each lesson runs once, with its student version: nbval's checks, its time, its notebook)",
        "",
        "| part | status | seconds | window | timeout (s) | details |",
        "|---|---|---:|---:|---:|---|",
        *_parts_table(state),
        "",
        "## Steps",
        "",
        "| step | result | seconds |",
        "|---|---|---:|",
        *[
            f"| {name} | {({0: 'passed', 1: 'FAILED'}).get(code, 'incomplete')} | {seconds:.0f} |"
            for name, (code, seconds) in state["steps"].items()
        ],
        "",
        "## Targets (colab_gpu/bench/ and scripts/course/course.py)",
        "",
        "| target | measured | met | why |",
        "|---|---:|---|---|",
        *[
            f"| {t['target']} | {t['value'] if t['value'] is not None else 'not measured'} | "
            f"{ {True: 'yes', False: 'NO', None: '-'}[t['met']] } | {t['reason']} |"
            for t in state["targets"]
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
            for r in state["bench"]
        ],
        "",
        "## Lessons (each with its student version's own cells, timed)",
        "",
        "| Lesson | Device | Seconds | Status |",
        "|---|---|---:|---|",
        *[
            f"| {stem} | {state['lessons'].get('device')} | {row['seconds']:.1f} | {row['status']} |"
            for stem, row in state["lessons"]["lessons"].items()
        ],
        "",
        "## Lesson figures (`cg.compare_with_references`; scripts/gpu/update_references.py ships them)",
        "",
        "| figure | value | device |",
        "|---|---:|---|",
        *[f"| {key} | {figure['value']:.3g} | {figure['device']} |" for key, figure in state["lesson_figures"].items()],
        "",
        "## Every test and notebook cell",
        "",
        "| test or cell | outcome | seconds |",
        "|---|---|---:|",
        *[f"| {row[0]} | {row[1]} | {row[2]:.2f} |" for row in state["tests"]],
    ]
    return "\n".join(lines) + "\n"


def write_report(out: Path, state: dict) -> tuple[Path, Path]:
    """report.md and report.json in the run folder ``out``, each replaced whole (never half written)."""
    derive(state)
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "report.md", out / "report.json"
    for path, text in ((md, markdown(state)), (js, json.dumps(state, indent=2, default=str) + "\n")):
        partial = path.with_suffix(path.suffix + ".partial")
        partial.write_text(text)
        partial.replace(path)  # atomic: a run killed while writing keeps the previous report
    return md, js


def new_state(doctor: dict, commit: str | None, device: str, all_lessons: bool) -> dict:
    """An empty report for a run on the machine ``doctor`` describes."""
    return {
        "format": 2,
        "date": dt.date.today().isoformat(),
        "commit": commit,
        "gpu": gpu_title(doctor),
        "runtime": doctor,
        "device": device,
        "all_lessons": all_lessons,
        "windows": [],
        "parts": {},
    }
