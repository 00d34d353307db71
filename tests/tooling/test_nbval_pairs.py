"""scripts/common/nbval_pairs.py: the notebook `make nbval` runs for a lesson holds every cell of the lesson and of its
student version, in each one's own order, and runs their shared cells once."""

import nbformat
import pytest
from nbtools import lesson_sources
from nbval_pairs import combined, is_solution, longest_first, write_pairs
from paths import NOTEBOOKS, STUDENT


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
    assert code(pair.cells[:marker]) == code(student.cells)  # Run all of the student version, in its order
    assert code(pair.cells[:first] + pair.cells[marker + 1 :]) == code(lesson.cells)  # and of the lesson
    assert pair.cells[:first] == lesson.cells[:first]  # the shared part keeps its outputs (NBVAL_CHECK_OUTPUT)
    assert all(not cell.outputs for cell in pair.cells[first:marker] if cell.cell_type == "code")
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
    assert sorted(p.name for p in (tmp_path / "nbval").iterdir()) == [p.name for p in written]
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
