"""Read docs/workshop.md, the workshop kit: each lesson's section budget and the agendas.

The kit is the one home of a lesson's minutes per section (its exercise included): tests/tooling/test_workshop.py
checks them against the lessons and the agendas against them, tests/tooling/test_guide.py prices a lesson's
exercise with them.
"""

from __future__ import annotations

import re

from paths import ROOT

KIT = ROOT / "docs" / "workshop.md"
#: What a lesson's first block of an agenda holds beyond its sections: a fresh runtime (save a copy in Drive, Colab's
#: "not authored by Google" dialog, the setup cell's install, the imports). The agenda's first lesson opens in its
#: welcome block.
FRESH_RUNTIME_MINUTES = 2


def lesson_budget(number: str, text: str | None = None) -> list[tuple[str, int]]:
    """(section, minutes) rows of the budget table under the kit's heading for lesson ``number`` (e.g. "03")."""
    text = KIT.read_text() if text is None else text
    block = re.search(rf"^### {number} · .*?(?=^### |^## |\Z)", text, re.M | re.S)
    if block is None:
        raise KeyError(f"docs/workshop.md has no notes for lesson {number}: add a '### {number} · <title>' section")
    rows = re.findall(r"^\| (.+?) \| (\d+) \|$", block.group(0), re.M)
    return [(name, int(minutes)) for name, minutes in rows]


def exercise_minutes(number: str, text: str | None = None) -> int:
    """The minutes lesson ``number``'s budget gives its exercise(s)."""
    return sum(minutes for name, minutes in lesson_budget(number, text) if name.startswith("Exercise"))


def agenda(heading: str, text: str | None = None) -> list[tuple[int, list[str]]]:
    """(minutes from the start, the row's cells after the time) for each row of the agenda under ``### heading``."""
    text = KIT.read_text() if text is None else text
    block = re.search(rf"^### {re.escape(heading)}.*?(?=^### |^## )", text, re.M | re.S)
    if block is None:
        raise KeyError(f"docs/workshop.md has no agenda '{heading}'")
    rows = re.findall(r"^\| (\d+):(\d\d) \|(.*)\|$", block.group(0), re.M)
    return [(int(h) * 60 + int(m), [cell.strip() for cell in rest.split("|")]) for h, m, rest in rows]


def lessons_in(block: str) -> list[str]:
    """The lesson numbers an agenda block names ("05 Feeding the GPU", "13 Your own data, 14 Transformers")."""
    return re.findall(r"(?:^|, | or )(\d\d) ", block)


def named_sections(cell: str) -> tuple[set[int], set[str]]:
    """(the section numbers, the exercises) an agenda cell names: "sections 2-4, 6 (timing)" -> ({2, 3, 4, 6}, set());
    "exercise 2" -> that exercise, {"2"}; "the exercise" (or any other mention) -> all of them, {"all"}."""
    numbers: set[int] = set()
    for listed in re.findall(r"sections? ((?:\d+(?:-\d+)?(?:, | and )?)+)", cell):
        for first, last in re.findall(r"(\d+)(?:-(\d+))?", listed):
            numbers.update(range(int(first), int(last or first) + 1))
    exercises = set(re.findall(r"exercise (\d+)", cell))  # "exercise 2": that one only; "the exercise": all
    if not exercises and "exercise" in cell:
        exercises = {"all"}
    return numbers, exercises


def learners_part(live: str) -> str:
    """What learners run of an agenda's "live" cell: all of it, or, in "on the projector: section 3 (...); learners:
    section 5, the exercise", the part after "learners:" (the projector shows the instructor's own run)."""
    return live.split("learners:", 1)[1] if "on the projector:" in live and "learners:" in live else live


def live_minutes(number: str, live: str, text: str | None = None) -> int:
    """The budget minutes of the sections an agenda's "live" cell names ("sections 2-4, 6 (timing)", "the
    exercise", "exercise 2"): what those sections take a learner, which the block's slot must hold."""
    budget = lesson_budget(number, text)
    named, exercises = named_sections(live)
    minutes = sum(m for name, m in budget if re.match(r"(\d+)\.", name) and int(name.split(".")[0]) in named)
    minutes += sum(  # an unnumbered part named by its first word: "the glossary" for "Glossary: the words ..."
        m
        for name, m in budget
        if not re.match(r"\d+\.|Exercise", name)
        and re.search(rf"\bthe {re.escape(name.split(':')[0].lower())}\b", live)
    )
    if "all" in exercises:
        return minutes + exercise_minutes(number, text)
    if exercises:
        return minutes + sum(m for name, m in budget if re.match(rf"Exercise ({'|'.join(exercises)})\b", name))
    return minutes
