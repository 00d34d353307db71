"""The instructor guide's run times come from measured runs (scripts/common/guide_times.py), one row per lesson."""

import json
import re

import execution
import guide_times
from nbtools import lesson_sources
from workshop_kit import exercise_minutes


def table_rows(text):
    block = text.split(guide_times.START, 1)[1].split(guide_times.END, 1)[0]
    return [line for line in block.splitlines() if line.startswith("| [")]


def test_guide_has_measured_cpu_times_for_every_lesson():
    rows = table_rows(guide_times.GUIDE.read_text())
    assert len(rows) == len(lesson_sources())
    for row, source in zip(rows, lesson_sources(), strict=True):
        assert f"(../notebooks/{source.stem}.ipynb)" in row
        assert re.search(r"\| \d+ s \|", row), (
            f"no measured CPU time for {source.stem}: run make course, then python scripts/common/guide_times.py cpu"
        )


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


def card_minutes(notebook) -> int:
    return int(re.search(r"\*\*Time:\*\*\s*(\d+) minutes", notebook.cells[0].source).group(1))


def test_study_times_are_honest_and_the_guide_agrees_with_the_cards():
    """A card's study time covers reading the lesson, running it (the slower of its measured CPU and GPU run times) and
    the exercise (its minutes in the workshop kit, not a flat 10: issue 44); the guide's line and total are the cards'
    (issue 34: the guide said "about 7 hours" for cards that added up to 8.8)."""
    import nbformat

    text = guide_times.GUIDE.read_text()
    line = re.search(r"Study times: (.*?) \((\d+) h(?: (\d+) min)? in all\)", text, re.S)
    assert line, "the guide's 'Study times: NN M min, ... (H h M min in all)' line"
    listed = dict(re.findall(r"(\d\d) (\d+) min", line.group(1)))
    cards = {}
    rows = {row.split("](")[1][len("../notebooks/") :][:2]: row for row in table_rows(text)}
    for source in lesson_sources():
        notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        number, minutes = source.stem[:2], card_minutes(notebook)
        cards[number] = minutes
        words = sum(len(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")
        lines = sum(len(c.source.splitlines()) for c in notebook.cells if c.cell_type == "code")
        run = [int(s) for s in re.findall(r"\| (\d+) s", rows[number])]  # the measured CPU and GPU run times
        needed = words / 150 + lines / 15 + exercise_minutes(number) + max(run, default=0) / 60
        assert minutes >= needed, (
            f"{source.stem}: the card says {minutes} min; reading, running and the exercise need {needed:.0f}"
        )
    assert {k: int(v) for k, v in listed.items()} == cards, "the guide's study times are not the cards'"
    total = int(line.group(2)) * 60 + int(line.group(3) or 0)
    assert total == sum(cards.values()), f"the guide says {total} min in all, the cards add up to {sum(cards.values())}"


def test_the_gpu_column_names_the_gpu_and_the_data_each_time_comes_from(tmp_path):
    """Issue 50: "04: 67 s (H100)" came from 1,437 stand-in images, where a T4 learner trains on 50,000."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    def lesson(*lines):
        cell = new_code_cell("x", outputs=[new_output("stream", name="stdout", text="\n".join(lines) + "\n")])
        return new_notebook(cells=[cell])

    old_line = "CIFAR-10 could not be downloaded (x), so this lesson uses scikit-learn's handwritten digits instead"
    new_line = (
        "CIFAR-10 could not be downloaded (x), so this lesson uses a stand-in: ... and repeated to CIFAR-10's size"
    )
    assert execution.data_used(lesson(old_line)) == "small stand-in"
    assert execution.data_used(lesson(new_line)) == "stand-in at full size"
    assert execution.data_used(lesson("CIFAR-10 loaded from data/.")) == "CIFAR-10"
    assert execution.data_used(lesson("nothing loaded")) is None

    run = tmp_path / "2026-12-01-tesla-t4"
    (run / "notebooks").mkdir(parents=True)
    nbformat.write(lesson(old_line), run / "notebooks" / "04_train_cnn.ipynb")
    lessons = {
        "03_train_mlp": {"seconds": 20.0, "status": "ok", "data": "FashionMNIST"},
        "04_train_cnn": {"seconds": 300.0, "status": "ok"},  # a run from before reports said: its notebook tells
        "01_enable_gpu_runtime": {"seconds": 7.0, "status": "ok", "data": None},
    }
    report = {"gpu": "Tesla T4", "date": "2026-12-01", "lessons": {"lessons": lessons}}
    (run / "report.json").write_text(json.dumps(report))
    assert guide_times.gpu_times(tmp_path) == {
        "03": "20 s (T4, FashionMNIST)",
        "04": "300 s (T4, small stand-in)",
        "01": "7 s (T4)",
    }
