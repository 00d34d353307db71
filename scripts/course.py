"""`make course`: run every lesson top to bottom on the best device here and write build/.

build/NN_topic.ipynb   the executed notebook
build/NN_topic.html    the same as a web page (images embedded)
build/index.html       the lesson table: title, Colab and Kaggle badges, study time, run seconds, device, status
build/report.md        the same table in markdown, with the total
build/timings.json     seconds per lesson (scripts/guide_times.py puts them in the instructor guide)
build/*-badge.svg      the badge images, so the pages show them offline
notebooks/student/     the student versions (solutions removed), regenerated from the lessons

Prints one line per lesson as it goes, then the table; exits 1 if any lesson fails.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbtools import (
    BUILD,
    COLAB_BADGE_SVG,
    KAGGLE_BADGE_SVG,
    STUDENT,
    Execution,
    badge_markdown,
    badge_url,
    course_config,
    device_label,
    execute,
    kaggle_url,
    lesson_sources,
    lesson_title,
    read_lesson,
    write_student_versions,
)

from colab_gpu.bench import Target

ASSETS = Path(__file__).resolve().parent / "assets"
BADGE_ASSETS = {COLAB_BADGE_SVG: "colab-badge.svg", KAGGLE_BADGE_SVG: "kaggle-badge.svg"}
TITLE = "PyTorch on GPUs, the Colab way"


# The course's own target (the GPU suite's report checks it; bench.py holds the experiments' targets).
COURSE_TARGET = Target("the whole `make course` under 5 minutes (seconds)", at_most=300,
                       reason="an instructor runs every lesson once before a workshop starts")


@dataclass
class Lesson:
    source: Path
    notebook: nbformat.NotebookNode
    seconds: float
    device: str
    error: str | None = None

    @property
    def status(self) -> str:
        return "ok" if self.error is None else f"FAILED: {self.error}"

    @property
    def title(self) -> str:
        return lesson_title(self.notebook)

    @property
    def study_time(self) -> str:
        found = re.search(r"\*\*Time:\*\*\s*([^.*]+)", self.notebook.cells[0].source)
        return found.group(1).strip() if found else "?"


def local_badges(page: str) -> str:
    """Point badge images at the copy in build/, so pages render without a network."""
    for remote, local in BADGE_ASSETS.items():
        page = page.replace(remote, local)
    return page


def write_index(lessons: list[Lesson], build: Path) -> None:
    config = course_config()
    rows = "\n".join(
        f"<tr><td><a href='{lesson.source.stem}.html'>{html.escape(lesson.title)}</a></td>"
        f"<td><a class='badge' href='{badge_url(config, lesson.source.with_suffix('.ipynb'))}'>"
        f"<img src='colab-badge.svg' alt='Open In Colab'></a> "
        f"<a class='kaggle' href='{kaggle_url(config, lesson.source.with_suffix('.ipynb'))}'>"
        f"<img src='kaggle-badge.svg' alt='Open In Kaggle'></a></td>"
        f"<td><a class='student' href='{badge_url(config, STUDENT / lesson.source.with_suffix('.ipynb').name)}'>"
        f"<img src='colab-badge.svg' alt='Open the student version in Colab'></a> "
        f"<a class='student-kaggle' href='{kaggle_url(config, STUDENT / lesson.source.with_suffix('.ipynb').name)}'>"
        f"<img src='kaggle-badge.svg' alt='Open the student version in Kaggle'></a></td>"
        f"<td>{html.escape(lesson.study_time)}</td><td>{lesson.seconds:.1f}</td>"
        f"<td>{html.escape(lesson.device)}</td><td>{html.escape(lesson.status)}</td></tr>"
        for lesson in lessons
    )
    (build / "index.html").write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{TITLE}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left}</style></head>"
        f"<body><h1>{TITLE}</h1><table border='1' cellspacing='0'>"
        "<tr><th>Lesson</th><th>Open in Colab or Kaggle</th><th>Student version</th><th>Study time</th>"
        "<th>Run seconds</th>"
        "<th>Device</th><th>Status</th></tr>"
        f"\n{rows}\n</table><p>Repository: {html.escape(config.repository)}. "
        f"Executed {time.strftime('%Y-%m-%d %H:%M')}.</p></body></html>\n"
    )


def write_report(lessons: list[Lesson], build: Path) -> None:
    config = course_config()
    lines = ["| Lesson | Colab | Device | Seconds | Status |", "|---|---|---|---:|---|"]
    for lesson in lessons:
        badge = badge_markdown(config, lesson.source.with_suffix(".ipynb"))
        lines.append(f"| {lesson.title} | {badge} | {lesson.device} | {lesson.seconds:.1f} | {lesson.status} |")
    total = sum(lesson.seconds for lesson in lessons)
    (build / "report.md").write_text("# Course run\n\n" + "\n".join(lines) + f"\n\nTotal: {total:.1f} s\n")


def write_timings(lessons: list[Lesson], build: Path) -> None:
    """build/timings.json: seconds per lesson and the device, for the instructor guide's table."""
    (build / "timings.json").write_text(json.dumps({
        "device": lessons[0].device if lessons else None,
        "lessons": {lesson.source.stem: {"seconds": round(lesson.seconds, 1), "status": lesson.status}
                    for lesson in lessons},
    }, indent=2) + "\n")


def write_site(lessons: list[Lesson], build: Path = BUILD) -> None:
    """Write every executed notebook, its HTML page, the index, the report and the badge image."""
    build.mkdir(parents=True, exist_ok=True)
    for local in BADGE_ASSETS.values():
        shutil.copyfile(ASSETS / local, build / local)
    exporter = HTMLExporter()
    for lesson in lessons:
        nbformat.write(lesson.notebook, build / f"{lesson.source.stem}.ipynb")
        page, _ = exporter.from_notebook_node(lesson.notebook)
        (build / f"{lesson.source.stem}.html").write_text(local_badges(page))
    write_index(lessons, build)
    write_report(lessons, build)
    write_timings(lessons, build)


def terminal_table(lessons: list[Lesson]) -> str:
    """Lesson, device, seconds, status: aligned for a terminal."""
    width = max(len(lesson.title) for lesson in lessons)
    dev = max(len("device"), *(len(lesson.device) for lesson in lessons))
    header = f"{'lesson':<{width}}  {'device':<{dev}}  {'seconds':>7}  status"
    body = [f"{lesson.title:<{width}}  {lesson.device:<{dev}}  {lesson.seconds:7.1f}  {lesson.status}"
            for lesson in lessons]
    total = sum(lesson.seconds for lesson in lessons)
    return "\n".join([header, "-" * len(header), *body, f"{'total':<{width}}  {'':<{dev}}  {total:7.1f}"])


def failure_details(run: Execution) -> str:
    """What a failing lesson prints under its line: the failing cell's source and its error."""
    source = textwrap.indent(run.failed_cell or "(no cell: the kernel failed)", "    | ")
    error = textwrap.indent(run.traceback or run.error or "", "    ")
    return f"  the failing cell:\n{source}\n  its error:\n{error}"


def main() -> int:
    """One line per lesson as it finishes, then the table; a failing lesson adds its cell and error.

    The kernels' own output (their transport warning, the tracebacks of child processes a lesson provokes on
    purpose) goes to build/logs/, not to the terminal.
    """
    write_student_versions(course_config())
    device = device_label()
    sources = lesson_sources()
    lessons = []
    for number, source in enumerate(sources, start=1):
        run = execute(read_lesson(source), cwd=source.parent, log=BUILD / "logs" / f"{source.stem}.log")
        lessons.append(Lesson(source, run.notebook, run.seconds, device, run.error))
        status = "ok" if run.error is None else "FAILED"
        counter = f"[{number:>{len(str(len(sources)))}}/{len(sources)}]"
        print(f"{counter} {source.stem:<24} {device}  {run.seconds:6.1f} s  {status}", flush=True)
        if run.error is not None:
            print(failure_details(run), flush=True)
    write_site(lessons, BUILD)
    print("\n" + terminal_table(lessons))
    return 1 if any(lesson.error for lesson in lessons) else 0


if __name__ == "__main__":
    raise SystemExit(main())
