"""Student versions: every lesson without its solution cells, self-checks kept, opening from its own badge."""

import jupytext
import nbformat
import pytest
from nbtools import SOLUTION_TAG, badge_url, course_config, lesson_sources, student_notebook
from paths import STUDENT

SOURCES = lesson_sources()
IDS = [s.stem for s in SOURCES]


def cells(notebook):
    return [(c.cell_type, c.source.strip(), c.metadata.get("tags", [])) for c in notebook.cells]


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_student_version_is_committed_and_current(source):
    expected = cells(student_notebook(source, course_config()))
    for suffix in (".py", ".ipynb"):
        committed = STUDENT / f"{source.stem}{suffix}"
        assert committed.exists(), f"{committed.name} is missing: run `make notebooks` (or course/student_versions.py)"
        assert cells(jupytext.read(committed)) == expected, f"{committed.name} is stale: run `make notebooks`"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_student_version_has_no_solution_but_every_check(source):
    lesson = jupytext.read(source)
    student = nbformat.read(STUDENT / f"{source.stem}.ipynb", as_version=4)
    nbformat.validate(student)
    text = "\n".join(c.source for c in student.cells)
    solutions = [c.source for c in lesson.cells if SOLUTION_TAG in c.metadata.get("tags", [])]
    assert solutions, f"{source.stem} has no solution cell to remove"
    assert all(SOLUTION_TAG not in c.metadata.get("tags", []) for c in student.cells)
    assert all(solution not in text for solution in solutions), "a solution survived in the student version"
    checks = [c.source for c in lesson.cells if c.cell_type == "code" and "cg.checks." in c.source]
    assert checks and all(check in text for check in checks), "every self-check stays in the student version"
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code"), "no outputs give answers away"
    assert student.metadata["accelerator"] == "GPU" and student.metadata["colab"]["gpuType"] == "T4"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_student_badge_opens_the_student_notebook(source):
    card = nbformat.read(STUDENT / f"{source.stem}.ipynb", as_version=4).cells[0].source
    assert f"]({badge_url(course_config(), STUDENT / f'{source.stem}.ipynb')})" in card
    assert "Student version" in card
