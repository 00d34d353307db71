"""Put measured lesson run times into docs/instructor_guide.md.

Usage: python scripts/common/guide_times.py cpu|gpu [build/timings.json]
Reads the timings `make course` wrote and fills that column of the table between the
`<!-- times:start -->` and `<!-- times:end -->` markers; the other column is kept. `make import-gpu-run` fills the
GPU column from every imported run instead (`fill_gpu_from_reports`): each lesson's newest time on a T4, the GPU of
the workshops, else its newest time on another GPU, which the cell names.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
from execution import data_used
from nbtools import lesson_sources, lesson_title, read_lesson
from paths import ROOT

from colab_gpu.measure.references import gpu_label

GUIDE = ROOT / "docs" / "instructor_guide.md"
START, END = "<!-- times:start -->", "<!-- times:end -->"
NOT_MEASURED = "not measured yet"
WORKSHOP_GPU = "T4"  # the free Colab GPU: its times come first in the GPU column
FROM_REPORTS = "imported GPU runs, a T4's where one ran"


def current_columns(text: str) -> dict[str, dict[str, str]]:
    """{"cpu": {stem: cell}, "gpu": {stem: cell}} from the existing table."""
    columns: dict[str, dict[str, str]] = {"cpu": {}, "gpu": {}}
    for line in text.split(START, 1)[-1].split(END, 1)[0].splitlines():
        found = re.match(r"\| \[(\d\d)[^|]*\| ([^|]*) \| ([^|]*) \|", line)
        if found:
            columns["cpu"][found.group(1)], columns["gpu"][found.group(1)] = found.group(2), found.group(3)
    return columns


def cpu_seconds(guide: Path = GUIDE) -> dict[str, int]:
    """{lesson number: seconds} of the CPU column, for the lessons it has a time for (not "failed", not unmeasured):
    read back as `fill_column` writes them."""
    cpu = current_columns(guide.read_text())["cpu"]
    return {number: int(cell[: -len(" s")]) for number, cell in cpu.items() if re.fullmatch(r"\d+ s", cell.strip())}


def render(columns: dict[str, dict[str, str]], devices: dict[str, str]) -> str:
    rows = [
        f"| Lesson | CPU run time: {devices.get('cpu', NOT_MEASURED)} | "
        f"GPU run time: {devices.get('gpu', NOT_MEASURED)} |",
        "|---|---:|---:|",
    ]
    for source in lesson_sources():
        number = source.stem[:2]
        title = lesson_title(read_lesson(source))
        rows.append(
            f"| [{title}](../notebooks/{source.stem}.ipynb) | {columns['cpu'].get(number, NOT_MEASURED)} | "
            f"{columns['gpu'].get(number, NOT_MEASURED)} |"
        )
    return "\n".join(rows)


def fill_column(column: str, timings: dict, guide: Path = GUIDE) -> None:
    """Put ``timings`` (build/timings.json's shape: device, seconds and status per lesson) in one column."""
    text = guide.read_text()
    columns = current_columns(text)
    for stem, result in timings["lessons"].items():
        columns[column][stem[:2]] = f"{result['seconds']:.0f} s" if result["status"] == "ok" else "failed"
    devices = dict(re.findall(r"<!-- device:(cpu|gpu)=([^>]*) -->", text))
    devices[column] = timings["device"]
    write_table(guide, text, columns, devices)


def gpu_times(reports: Path) -> dict[str, str]:
    """{lesson number: "67 s (H100, small stand-in)"} from the imported runs' report.json: a T4's newest time, else
    the newest; each cell names the GPU and the data the lesson trained on (`lesson_data`)."""
    chosen: dict[str, tuple[bool, str, str]] = {}  # number -> (on a T4, when the run ended, cell)
    for report_file in sorted(reports.glob("*/report.json")):
        report = json.loads(report_file.read_text())
        gpu = gpu_label(report["gpu"])
        for stem, result in report.get("lessons", {}).get("lessons", {}).items():
            if result.get("status") != "ok":
                continue
            when = max([w.get("started", "") for w in report.get("windows", [])] or [report.get("date", "")])
            data = lesson_data(result, report_file.parent / "notebooks" / f"{stem}.ipynb")
            cell = f"{result['seconds']:.0f} s ({gpu}{', ' + data if data else ''})"
            key = (gpu == WORKSHOP_GPU, when, cell)
            chosen[stem[:2]] = max(chosen.get(stem[:2], key), key)
    return {number: cell for number, (_, _, cell) in chosen.items()}


def lesson_data(result: dict, notebook: Path) -> str | None:
    """The data a lesson of an imported run trained on: as its report says, else (runs from before reports said it)
    as its executed notebook printed (`execution.data_used`)."""
    if "data" in result:
        return result["data"]
    return data_used(nbformat.read(notebook, as_version=4)) if notebook.exists() else None


def fill_gpu_from_reports(reports: Path, guide: Path = GUIDE) -> dict[str, str]:
    """Rewrite the GPU column from every imported run (`gpu_times`); the CPU column is kept. Returns the cells."""
    text = guide.read_text()
    columns = current_columns(text)
    columns["gpu"] = gpu_times(reports)
    devices = dict(re.findall(r"<!-- device:(cpu|gpu)=([^>]*) -->", text))
    devices["gpu"] = FROM_REPORTS if columns["gpu"] else NOT_MEASURED
    write_table(guide, text, columns, devices)
    return columns["gpu"]


def write_table(guide: Path, text: str, columns: dict[str, dict[str, str]], devices: dict[str, str]) -> None:
    device_notes = "".join(f"<!-- device:{k}={v} -->" for k, v in sorted(devices.items()))
    head, tail = text.split(START, 1)[0], text.split(END, 1)[1]
    guide.write_text(f"{head}{START}{device_notes}\n{render(columns, devices)}\n{END}{tail}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("cpu", "gpu"):
        print(__doc__, file=sys.stderr)
        return 2
    column = argv[0]
    timings_file = Path(argv[1]) if len(argv) > 1 else ROOT / "build" / "timings.json"
    if not timings_file.exists():
        print(f"No {timings_file}: run `make course` first.", file=sys.stderr)
        return 1
    fill_column(column, json.loads(timings_file.read_text()), GUIDE)
    print(f"updated the {column} column of {GUIDE} from {timings_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
