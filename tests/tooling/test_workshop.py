"""The workshop kit's per-lesson time budgets follow the lessons: same sections, adding up to the study time."""

import re
from pathlib import Path

import jupytext
import pytest
from nbtools import lesson_sources
from workshop_kit import KIT, agenda, lesson_budget, lessons_in, live_minutes

ROOT = Path(__file__).resolve().parents[2]


def lesson_sections(source: Path) -> tuple[int, list[str]]:
    """(study minutes from the lesson card, the lesson's numbered sections and its exercise)."""
    cells = jupytext.read(source).cells
    minutes = int(re.search(r"\*\*Time:\*\* (\d+) minutes", cells[0].source).group(1))
    headings = [
        line[3:].strip()
        for c in cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("## ") and not line.startswith("## Summary")
    ]
    return minutes, headings


@pytest.mark.parametrize("source", lesson_sources(), ids=lambda s: s.stem)
def test_budget_lists_the_lessons_sections_and_adds_up_to_its_study_time(source):
    minutes, sections = lesson_sections(source)
    budget = lesson_budget(source.stem[:2])
    assert [name for name, _ in budget] == sections, f"{source.stem}: the kit's sections differ from the lesson's"
    assert sum(m for _, m in budget) == minutes, (
        f"{source.stem}: the kit's budget adds up to {sum(m for _, m in budget)} min, the lesson says {minutes}"
    )


def test_the_budget_check_notices_a_wrong_sum():
    text = "### 01 · x\n\n| section | minutes |\n|---|---:|\n| 1. A | 3 |\n| Exercise | 2 |\n"
    assert lesson_budget("01", text) == [("1. A", 3), ("Exercise", 2)]
    assert sum(m for _, m in lesson_budget("01", text)) != 15


def test_kit_is_linked_from_the_readme_and_the_guide():
    assert "(docs/workshop.md)" in (ROOT / "README.md").read_text()
    assert "(workshop.md)" in (ROOT / "docs" / "instructor_guide.md").read_text()


def test_the_three_hour_agenda_follows_the_prerequisites_and_ends_on_the_capstone():
    rows = agenda("3 hours, about 30 learners")
    starts = [start for start, _ in rows]
    assert starts == sorted(set(starts)) and starts[-1] < 180, starts  # in order, within the 3 hours
    lessons = [number for _, cells in rows for number in lessons_in(cells[0])]
    assert lessons == sorted(lessons), lessons  # each lesson after those it builds on
    assert "04" in lessons and lessons[-1] == "12", lessons  # 05 needs 04; the payoff comes last
    assert rows[-1][1][0] == "exit survey" and 180 - starts[-1] <= 10


@pytest.mark.parametrize("heading", ["3 hours, about 30 learners", "3 hours: transformers on a T4"])
def test_each_block_of_a_three_hour_agenda_holds_the_sections_it_teaches_live(heading):
    """A block's slot holds the study minutes of the sections it teaches live (issue 44: the agenda put 285 minutes
    of lesson cards into 140 minutes of slots), and the capstone has time for its exercise."""
    rows = agenda(heading)
    ends = [start for start, _ in rows[1:]] + [180]
    for (start, cells), end in zip(rows, ends, strict=True):
        for number in lessons_in(cells[0]):
            needed = live_minutes(number, cells[1])
            slot = end - start
            assert 0 < needed <= slot, f"{heading}, {cells[0]}: {needed} min of sections in a {slot} min slot"
            if number == "12":
                assert slot >= 45 and "exercise" in cells[1], "the capstone's block must hold its exercise"


def test_live_minutes_add_the_sections_named_and_the_exercise():
    rows = ["| 1. A | 3 |", "| 2. B | 4 |", "| 3. C | 5 |", "| Exercise | 7 |"]
    text = "### 01 · x\n\n| section | minutes |\n|---|---:|\n" + "\n".join(rows) + "\n"
    assert live_minutes("01", "sections 1, 3 (the loop)", text) == 8
    assert live_minutes("01", "sections 2-3, then the exercise", text) == 16
    assert live_minutes("01", "section 2", text) == 4
    two = text.replace("| Exercise | 7 |", "| Exercise 1: fix it | 7 |\n| Exercise 2: name it | 6 |")
    assert live_minutes("01", "section 1, then exercise 2 (part 1)", two) == 9  # that exercise only
    assert live_minutes("01", "the exercise", two) == 13


def test_the_full_day_reaches_the_end_of_the_course():
    rows = agenda("Full day")
    starts = [start for start, _ in rows]
    assert starts == sorted(set(starts)), starts
    lessons = [number for _, cells in rows for number in lessons_in(cells[0])]
    assert {"10", "11", "12", "13"} <= set(lessons), lessons
    assert lessons.index("12") > lessons.index("05")


def test_every_lesson_but_the_two_gpu_one_is_in_some_agenda():
    """08 needs two GPUs (Kaggle's T4 x2): the full day names it for self-study."""
    text = KIT.read_text()
    agendas = re.findall(r"^### (.+)$", text.split("## Lesson notes")[0], re.M)
    taught = {number for heading in agendas for _, cells in agenda(heading) for number in lessons_in(cells[0])}
    assert "14" in taught, "no workshop plan includes lesson 14 (issue 44)"
    assert taught | {"08"} == {source.stem[:2] for source in lesson_sources()}, sorted(taught)
