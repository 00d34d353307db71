"""Put measured lesson run times into docs/instructor_guide.md.

Usage: python scripts/guide_times.py cpu|gpu [build/timings.json]
Reads the timings `make course` wrote and fills that column (`make import-gpu-run` fills the GPU column from a T4
run's report) of the table between the
`<!-- times:start -->` and `<!-- times:end -->` markers; the other column is kept.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from nbtools import ROOT, lesson_sources, lesson_title, read_lesson

GUIDE = ROOT / "docs" / "instructor_guide.md"
START, END = "<!-- times:start -->", "<!-- times:end -->"
NOT_MEASURED = "not measured yet"


def current_columns(text: str) -> dict[str, dict[str, str]]:
    """{"cpu": {stem: cell}, "gpu": {stem: cell}} from the existing table."""
    columns: dict[str, dict[str, str]] = {"cpu": {}, "gpu": {}}
    for line in text.split(START, 1)[-1].split(END, 1)[0].splitlines():
        found = re.match(r"\| \[(\d\d)[^|]*\| ([^|]*) \| ([^|]*) \|", line)
        if found:
            columns["cpu"][found.group(1)], columns["gpu"][found.group(1)] = found.group(2), found.group(3)
    return columns


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
    table = render(columns, devices)
    device_notes = "".join(f"<!-- device:{k}={v} -->" for k, v in sorted(devices.items()))
    head, tail = text.split(START, 1)[0], text.split(END, 1)[1]
    guide.write_text(f"{head}{START}{device_notes}\n{table}\n{END}{tail}")


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
