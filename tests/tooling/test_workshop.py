"""The workshop kit's per-lesson time budgets follow the lessons: same sections, adding up to the study time."""

import re
from pathlib import Path

import jupytext
import pytest
from nbtools import lesson_sources

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "docs" / "workshop.md"


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


def kit_budget(stem: str, text: str) -> list[tuple[str, int]]:
    """The rows of the budget table under the kit's heading for lesson ``stem`` (e.g. "03")."""
    block = re.search(rf"^### {stem} · .*?(?=^### |^## |\Z)", text, re.M | re.S)
    assert block, f"docs/workshop.md has no notes for lesson {stem}"
    rows = re.findall(r"^\| (.+?) \| (\d+) \|$", block.group(0), re.M)
    return [(name, int(minutes)) for name, minutes in rows]


@pytest.mark.parametrize("source", lesson_sources(), ids=lambda s: s.stem)
def test_budget_lists_the_lessons_sections_and_adds_up_to_its_study_time(source):
    minutes, sections = lesson_sections(source)
    budget = kit_budget(source.stem[:2], KIT.read_text())
    assert [name for name, _ in budget] == sections, f"{source.stem}: the kit's sections differ from the lesson's"
    assert sum(m for _, m in budget) == minutes, (
        f"{source.stem}: the kit's budget adds up to {sum(m for _, m in budget)} min, the lesson says {minutes}"
    )


def test_the_budget_check_notices_a_wrong_sum():
    text = "### 01 · x\n\n| section | minutes |\n|---|---:|\n| 1. A | 3 |\n| Exercise | 2 |\n"
    assert kit_budget("01", text) == [("1. A", 3), ("Exercise", 2)]
    assert sum(m for _, m in kit_budget("01", text)) != 15


def test_kit_is_linked_from_the_readme_and_the_guide():
    assert "(docs/workshop.md)" in (ROOT / "README.md").read_text()
    assert "(workshop.md)" in (ROOT / "docs" / "instructor_guide.md").read_text()


def agenda(heading: str, text: str) -> list[tuple[int, str]]:
    """(minutes from the start, block) for each row of the agenda under ``### heading``."""
    block = re.search(rf"^### {re.escape(heading)}.*?(?=^### |^## )", text, re.M | re.S)
    assert block, f"docs/workshop.md has no agenda '{heading}'"
    rows = re.findall(r"^\| (\d+):(\d\d) \| ([^|]+) \|", block.group(0), re.M)
    return [(int(h) * 60 + int(m), what.strip()) for h, m, what in rows]


def lessons_in(rows) -> list[str]:
    return [number for _, what in rows for number in re.findall(r"(?:^|, )(\d\d) ", what)]


def test_the_three_hour_agenda_follows_the_prerequisites_and_ends_on_the_capstone():
    rows = agenda("3 hours", KIT.read_text())
    starts = [start for start, _ in rows]
    assert starts == sorted(set(starts)) and starts[-1] < 180, starts  # in order, within the 3 hours
    lessons = lessons_in(rows)
    assert lessons == sorted(lessons), lessons  # each lesson after those it builds on
    assert "04" in lessons and lessons[-1] == "12", lessons  # 05 needs 04; the payoff comes last
    assert [what for _, what in rows][-1] == "exit survey" and 180 - starts[-1] <= 10


def test_the_full_day_reaches_the_end_of_the_course():
    rows = agenda("Full day", KIT.read_text())
    starts = [start for start, _ in rows]
    assert starts == sorted(set(starts)), starts
    assert {"10", "11", "12", "13"} <= set(lessons_in(rows)), lessons_in(rows)
    assert lessons_in(rows).index("12") > lessons_in(rows).index("05")
