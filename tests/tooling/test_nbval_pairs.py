"""scripts/common/nbval_pairs.py: the notebook `make nbval` runs for a lesson holds every cell of the lesson and of its
student version, in each one's own order, and runs their shared cells once."""

import nbformat
import pytest
import torch
from nbtools import lesson_sources
from nbval_pairs import (
    MARK,
    STRICT_ID,
    STRICT_SOURCE,
    UNDONE_ID,
    UNDONE_SOURCE,
    combined,
    is_solution,
    lesson_part,
    longest_first,
    write_pairs,
)
from paths import NOTEBOOKS, STUDENT

import colab_gpu as cg
from colab_gpu.checks import core as check_core


def code(cells):
    return [cell.source for cell in cells if cell.cell_type == "code"]


@pytest.mark.parametrize("source", lesson_sources(), ids=[s.stem for s in lesson_sources()])
def test_the_pair_runs_the_student_version_then_the_lessons_rest(source):
    name = source.with_suffix(".ipynb").name
    lesson, student = (nbformat.read(folder / name, as_version=4) for folder in (NOTEBOOKS, STUDENT))
    pair = combined(lesson, student, name)
    nbformat.validate(pair)  # unique cell ids
    marker = next(i for i, cell in enumerate(pair.cells) if "the student version ends here" in cell.source)
    first = next(i for i, cell in enumerate(lesson.cells) if is_solution(cell))
    assert pair.cells[first].id == UNDONE_ID  # the student version's rest begins with the cell that makes a pass fail
    student_part = [cell for cell in pair.cells[:marker] if cell.id != UNDONE_ID]
    assert code(student_part) == code(student.cells)  # Run all of the student version, in its order
    assert pair.cells[marker + 1].id == STRICT_ID  # the lesson's part begins with the cell that makes checks strict
    assert code(pair.cells[:first] + pair.cells[marker + 2 :]) == code(lesson.cells)  # and of the lesson
    assert code(lesson_part(pair).cells) == code(lesson.cells)  # what the GPU suite keeps: the lesson alone
    assert pair.cells[:first] == lesson.cells[:first]  # the shared part keeps its outputs (NBVAL_CHECK_OUTPUT)
    assert all(not cell.outputs for cell in pair.cells[first + 1 : marker] if cell.cell_type == "code")
    shared = sum(len(cell.source) for cell in pair.cells[:first] if cell.cell_type == "code")
    assert shared > 0.5 * sum(len(s) for s in code(lesson.cells))  # most of a lesson is shared: run once


def test_a_student_version_out_of_step_with_its_lesson_is_refused():
    name = lesson_sources()[0].with_suffix(".ipynb").name
    lesson, student = (nbformat.read(folder / name, as_version=4) for folder in (NOTEBOOKS, STUDENT))
    next(cell for cell in reversed(student.cells) if cell.cell_type == "code").source += "\n# edited by hand"
    with pytest.raises(SystemExit, match="is not its lesson without the solution cells: run `make notebooks`"):
        combined(lesson, student, name)


def test_write_pairs_writes_one_notebook_per_lesson(tmp_path):
    written = write_pairs(["01", "12"], tmp_path / "nbval")
    assert [p.name for p in written] == [
        s.with_suffix(".ipynb").name for s in lesson_sources() if s.name[:2] in ("01", "12")
    ]
    assert sorted(p.name for p in (tmp_path / "nbval").iterdir() if p.name != MARK) == [p.name for p in written]
    with pytest.raises(SystemExit, match=r"no lesson numbered \['99'\]"):
        write_pairs(["99"], tmp_path / "other")


def test_the_longest_lesson_goes_first_and_unmeasured_ones_last_in_their_order(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(
        "<!-- times:start -->\n| Lesson | CPU | GPU |\n|---|---:|---:|\n"
        "| [01 · a](x) | 5 s | 7 s (H100) |\n| [02 · b](x) | not measured yet | 7 s |\n"
        "| [12 · c](x) | 46 s | 174 s |\n| [13 · d](x) | failed | 7 s |\n| [14 · e](x) | 34 s | 9 s |\n"
        "<!-- times:end -->\n"
    )
    names = ["01_a.ipynb", "02_b.ipynb", "12_c.ipynb", "13_d.ipynb", "14_e.ipynb"]
    ordered = longest_first([tmp_path / name for name in names], guide)
    assert [path.name for path in ordered] == ["12_c.ipynb", "14_e.ipynb", "01_a.ipynb", "02_b.ipynb", "13_d.ipynb"]


def test_in_the_lessons_part_a_check_that_gives_a_hint_fails_its_cell(monkeypatch, capsys):
    # nbval --nbval-lax fails a cell only on an error: the pair's strict cell turns a lesson check's hint into one.
    monkeypatch.setattr(check_core, "_verdict", check_core._verdict)  # put back after the test
    exec(STRICT_SOURCE, {})
    assert cg.checks.on_device(torch.zeros(1), "cpu", name="x")
    assert "✅ Correct: x is on cpu." in capsys.readouterr().out
    with pytest.raises(AssertionError, match="the lesson's own check did not pass: ❌ Not yet: x is on cpu, expected"):
        cg.checks.on_device(torch.zeros(1), "meta", name="x")
    # An error inside a check (the lesson's code it runs) is a hint too: it fails the cell as well, not hidden.
    with pytest.raises(AssertionError, match="could not run your answer: ZeroDivisionError"):
        check_core.guarded(lambda: 1 / 0)()


def test_in_the_student_versions_part_a_check_that_passes_fails_its_cell(monkeypatch, capsys):
    # An exercise left undone must get a hint: the pair's undone cell turns a pass into an error there, and the
    # lesson's strict cell after it patches the package's own verdict, not the undone cell's.
    monkeypatch.setattr(check_core, "_verdict", check_core._verdict)  # put back after the test
    exec(UNDONE_SOURCE, {})
    assert not cg.checks.on_device(torch.zeros(1), "meta", name="x")
    assert "❌ Not yet: x is on cpu, expected" in capsys.readouterr().out
    with pytest.raises(BaseException, match="an exercise left undone passes its check: ✅ Correct: x is on cpu."):
        cg.checks.on_device(torch.zeros(1), "cpu", name="x")  # raised through the check's own error handling
    exec(STRICT_SOURCE, {})
    assert cg.checks.on_device(torch.zeros(1), "cpu", name="x")
    with pytest.raises(AssertionError, match="the lesson's own check did not pass"):
        cg.checks.on_device(torch.zeros(1), "meta", name="x")


def test_out_never_deletes_a_folder_it_did_not_make(tmp_path):
    # Issue 63: `--out notebooks` deleted every lesson, `--out .` the checkout, before anything was checked.
    theirs = tmp_path / "lessons"
    theirs.mkdir()
    (theirs / "01_mine.py").write_text("an uncommitted edit")
    with pytest.raises(SystemExit, match="holds files nbval_pairs.py did not write"):
        write_pairs(["01"], theirs)
    assert (theirs / "01_mine.py").read_text() == "an uncommitted edit"
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(SystemExit, match="is a file"):
        write_pairs(["01"], tmp_path / "a_file")
    ours = tmp_path / "nbval"
    write_pairs(["01"], ours)
    (ours / "data").mkdir()  # what the notebooks' runs leave there
    assert [p.name for p in write_pairs(["01"], ours)] == [s.with_suffix(".ipynb").name for s in lesson_sources()[:1]]
    assert not (ours / "data").exists()  # a folder it made is emptied for the next run
