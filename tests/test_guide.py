"""The instructor guide's run times come from measured runs (scripts/guide_times.py), one row per lesson."""

import json
import re

import guide_times
from nbtools import lesson_sources


def table_rows(text):
    block = text.split(guide_times.START, 1)[1].split(guide_times.END, 1)[0]
    return [line for line in block.splitlines() if line.startswith("| [")]


def test_guide_has_measured_cpu_times_for_every_lesson():
    rows = table_rows(guide_times.GUIDE.read_text())
    assert len(rows) == len(lesson_sources())
    for row, source in zip(rows, lesson_sources(), strict=True):
        assert f"(../notebooks/{source.stem}.ipynb)" in row
        assert re.search(r"\| \d+ s \|", row), f"no measured CPU time for {source.stem}: run make course, then " \
                                                "python scripts/guide_times.py cpu"


def test_guide_times_fills_one_column_and_keeps_the_other(tmp_path, monkeypatch):
    guide = tmp_path / "guide.md"
    guide.write_text(f"intro\n{guide_times.START}\n{guide_times.END}\noutro\n")
    monkeypatch.setattr(guide_times, "GUIDE", guide)
    stems = [s.stem for s in lesson_sources()]
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"device": "cpu", "lessons": {s: {"seconds": 12.3, "status": "ok"} for s in stems}}))
    assert guide_times.main(["cpu", str(cpu)]) == 0
    gpu = tmp_path / "gpu.json"
    lessons = {stems[0]: {"seconds": 40.0, "status": "ok"}, stems[1]: {"seconds": 1.0, "status": "FAILED: x"}}
    gpu.write_text(json.dumps({"device": "cuda:0 (Tesla T4)", "lessons": lessons}))
    assert guide_times.main(["gpu", str(gpu)]) == 0
    text = guide.read_text()
    rows = table_rows(text)
    assert rows[0].endswith("| 12 s | 40 s |") and rows[1].endswith("| 12 s | failed |")
    assert rows[2].endswith(f"| 12 s | {guide_times.NOT_MEASURED} |")
    assert "GPU run time: cuda:0 (Tesla T4)" in text and text.startswith("intro") and text.endswith("outro\n")
    assert guide_times.main(["tpu"]) == 2
    assert guide_times.main(["cpu", str(tmp_path / "missing.json")]) == 1
