"""`make course`: run every lesson top to bottom on the best device here and write build/.

build/index.html                the site's home page: the course, how to start, the lesson table (study time,
                                run seconds, device, status), and the navigation to every page (course_site.py)
build/notebooks/NN_topic.html   a lesson's page; NN_topic.ipynb beside it is the executed notebook
build/notebooks/student/        the student versions' pages and notebooks
build/docs/, build/reports/     the instructor guide and workshop kit; the newest bench report and the GPU reports
build/search.html               full-text search, working from the folder itself
build/report.md                 the lesson table in markdown, with the total
build/timings.json              seconds per lesson (scripts/common/guide_times.py puts them in the instructor guide)
build/logs/                     each lesson's kernel output, and Sphinx's (site.log)
notebooks/student/              the student versions (solutions removed), regenerated from the lessons

Prints one line per lesson as it goes, then the table; exits 1 if any lesson fails.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

import nbformat
from course_site import build_site
from execution import Execution, device_label, execute
from nbtools import badge_markdown, course_config, lesson_sources, lesson_title, read_lesson, write_student_versions
from paths import BUILD


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


def write_report(lessons: list[Lesson], build: Path) -> None:
    config = course_config()
    lines = ["| Lesson | Colab | Device | Seconds | Status |", "|---|---|---|---:|---|"]
    for lesson in lessons:
        badge = badge_markdown(config, lesson.source.with_suffix(".ipynb"))
        lines.append(f"| {lesson.title} | {badge} | {lesson.device} | {lesson.seconds:.1f} | {lesson.status} |")
    total = sum(lesson.seconds for lesson in lessons)
    (build / "report.md").write_text("# Course run\n\n" + "\n".join(lines) + f"\n\nTotal: {total:.1f} s\n")


def lesson_timings(lessons: list[Lesson]) -> dict:
    """Seconds and status per lesson, and the device: what the instructor guide's table and a GPU report read."""
    return {
        "device": lessons[0].device if lessons else None,
        "lessons": {
            lesson.source.stem: {"seconds": round(lesson.seconds, 1), "status": lesson.status} for lesson in lessons
        },
    }


def write_timings(lessons: list[Lesson], build: Path) -> None:
    """build/timings.json (scripts/common/guide_times.py puts it in the instructor guide)."""
    (build / "timings.json").write_text(json.dumps(lesson_timings(lessons), indent=2) + "\n")


def write_site(lessons: list[Lesson], build: Path = BUILD) -> str | None:
    """The site (course_site.py: Sphinx's log in build/logs/site.log), the report and the timings.

    Returns None, or what went wrong building the site.
    """
    build.mkdir(parents=True, exist_ok=True)
    write_report(lessons, build)
    write_timings(lessons, build)
    return build_site(lessons, build, log=build / "logs" / "site.log")


def terminal_table(lessons: list[Lesson]) -> str:
    """Lesson, device, seconds, status: aligned for a terminal."""
    width = max(len(lesson.title) for lesson in lessons)
    dev = max(len("device"), *(len(lesson.device) for lesson in lessons))
    header = f"{'lesson':<{width}}  {'device':<{dev}}  {'seconds':>7}  status"
    body = [
        f"{lesson.title:<{width}}  {lesson.device:<{dev}}  {lesson.seconds:7.1f}  {lesson.status}" for lesson in lessons
    ]
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
    site_error = write_site(lessons, BUILD)
    print("\n" + terminal_table(lessons))
    if site_error is not None:
        print(f"\nthe site was not built: {site_error}")
    return 1 if site_error or any(lesson.error for lesson in lessons) else 0


if __name__ == "__main__":
    raise SystemExit(main())
