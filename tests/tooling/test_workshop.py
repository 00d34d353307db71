"""The workshop kit's per-lesson time budgets follow the lessons: same sections, adding up to the study time."""

import ast
import builtins
import re
from pathlib import Path

import jupytext
import pytest
from nbtools import lesson_sources
from workshop_kit import (
    FRESH_RUNTIME_MINUTES,
    KIT,
    agenda,
    learners_part,
    lesson_budget,
    lessons_in,
    live_minutes,
    named_sections,
)

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


AGENDAS_WITH_LIVE_SECTIONS = ("3 hours, about 30 learners", "3 hours: transformers on a T4", "90 minutes", "Full day")
LENGTH = {"3 hours": 180, "90 minutes": 90}  # an agenda's minutes, by the start of its heading (the full day: its rows)


@pytest.mark.parametrize("heading", AGENDAS_WITH_LIVE_SECTIONS)
def test_each_block_of_an_agenda_holds_the_sections_it_teaches_live_and_a_fresh_runtime(heading):
    """A block's slot holds the study minutes of the sections it teaches live (issue 44: the agenda put 285 minutes
    of lesson cards into 140 minutes of slots), and the capstone has time for its exercise. Issue 66: each lesson
    after the first opens in a fresh runtime, whose minutes its first block holds too."""
    rows = agenda(heading)
    length = next((m for start, m in LENGTH.items() if heading.startswith(start)), rows[-1][0])
    ends = [start for start, _ in rows[1:]] + [length]
    assert rows[-1][0] <= length, f"{heading}: its last row starts after its end"
    opened: list[str] = []
    for (start, cells), end in zip(rows, ends, strict=True):
        for number in lessons_in(cells[0]):
            fresh = FRESH_RUNTIME_MINUTES if opened and number not in opened else 0  # the first opens at welcome
            opened.append(number)
            needed = live_minutes(number, cells[1])
            slot = end - start
            assert 0 < needed and needed + fresh <= slot, (
                f"{heading}, {cells[0]}: {needed} min of sections + {fresh} for a fresh runtime in a {slot} min slot"
            )
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
    glossary = text.replace("| 1. A | 3 |", "| Glossary: the words | 2 |\n| 1. A | 3 |")
    assert live_minutes("01", "the glossary, section 1", glossary) == 5  # an unnumbered part, named
    assert live_minutes("01", "section 1", glossary) == 3


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


def lesson_parts(source: Path) -> list[tuple[str, str]]:
    """(part, code) for each code cell of a lesson, in order: part "" for the cells before section 1 (the setup, run
    in every block), "3" for section 3, "exercise 1", "exercise 2" for the exercises, "end" for the summary and
    "Going further"."""
    part, parts = "", []
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                numbered = re.match(r"##+ (\d+)\. ", line)
                exercise = re.match(r"##+ Exercise(?: (\d+))?", line)
                if numbered and line.startswith("## "):
                    part = numbered.group(1)
                elif exercise:
                    part = f"exercise {exercise.group(1) or 1}"
                elif line.startswith("## "):  # unnumbered: an introduction before section 1, else the end
                    part = "end" if part else ""
        elif cell.cell_type == "code":
            code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            parts.append((part, code))
    return parts


def names_of(code: str) -> tuple[set[str], set[str]]:
    """(the names a cell binds anywhere in it, the names it reads)."""
    bound, read = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def missing_names(source: Path, sections: set[int], exercises: set[str]) -> dict[str, set[str]]:
    """For each part run in a block that runs only the setup, ``sections`` and ``exercises`` ({"all"}: every one),
    the names it reads that only a skipped part of the lesson defines: a NameError in the workshop."""

    def runs(part: str) -> bool:
        if part.startswith("exercise"):
            return "all" in exercises or part.split()[1] in exercises
        return part == "" or (part.isdigit() and int(part) in sections)

    parts = [(part, *names_of(code)) for part, code in lesson_parts(source)]
    skipped = set().union(*(bound for part, bound, _ in parts if not runs(part)))
    defined, missing = set(dir(builtins)), {}
    for part, bound, read in parts:
        if runs(part):
            lacking = (read - defined - bound) & skipped
            if lacking:
                missing.setdefault(part, set()).update(lacking)
            defined |= bound
    return missing


def test_missing_names_finds_a_name_only_a_skipped_section_defines(tmp_path):
    lesson = tmp_path / "99_x.py"
    lesson.write_text(
        "# %%\nimport torch\n\n# %% [markdown]\n# ## 1. A\n\n# %%\nshape = (2, 3)\n\n"
        "# %% [markdown]\n# ## 2. B\n\n# %%\nx = torch.zeros(shape)\n\n# %% [markdown]\n# ## Exercise\n\n"
        "# %%\nassert x.sum() == 0\n"
    )
    assert missing_names(lesson, {1, 2}, set()) == {}
    assert missing_names(lesson, {2}, set()) == {"2": {"shape"}}
    assert missing_names(lesson, {1}, {"all"}) == {"exercise 1": {"x"}}


def agenda_blocks() -> list[tuple[str, str, set[int], set[str]]]:
    """(agenda, lesson, sections, exercises) that learners run, for each lesson block of the three-hour agendas: the
    live sections (with those of the lesson's earlier blocks in the same agenda: the same runtime), and the same less
    what is "cut if late" (an instructor who is late cuts it, and the rest must still run)."""
    blocks = []
    for heading in AGENDAS_WITH_LIVE_SECTIONS:
        ran: dict[str, tuple[set[int], set[str]]] = {}
        for _, cells in agenda(heading):
            for number in lessons_in(cells[0]):
                before_sections, before_exercises = ran.get(number, (set(), set()))
                sections, exercises = named_sections(learners_part(cells[1]))
                sections, exercises = sections | before_sections, exercises | before_exercises
                blocks.append((heading, number, sections, exercises))
                if cells[2] and "'s" not in cells[2]:  # "section 6's merge" cuts part of a section: not modelled
                    cut_sections, cut_exercises = named_sections(cells[2])
                    blocks.append((heading, number, sections - cut_sections, exercises - cut_exercises))
                ran[number] = (sections, exercises)
    return blocks


@pytest.mark.parametrize(
    ("heading", "number", "sections", "exercises"),
    agenda_blocks(),
    ids=lambda value: str(sorted(value)) if isinstance(value, set) else value,
)
def test_the_live_sections_of_an_agenda_block_run_alone(heading, number, sections, exercises):
    """Issue 49: the 3-hour agenda ran lesson 04's sections 2, 4 and 6 live, with 5 as homework, and section 6
    failed with `NameError: step_shape`. What a block runs live (with or without its "cut if late") needs no
    section it skips."""
    source = next(s for s in lesson_sources() if s.stem.startswith(number))
    missing = missing_names(source, sections, exercises)
    assert not missing, f"{heading}, lesson {number}: the live parts read names only skipped parts define: {missing}"
