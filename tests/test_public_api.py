"""Every public helper says which lesson teaches it, and the package docstring maps lessons to modules."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import colab_gpu as cg

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
MODULES = {m.name for m in pkgutil.iter_modules(cg.__path__)}
LESSONS = {p.name[:2]: p.read_text() for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))}


def lessons_named(doc: str) -> set[str]:
    """Lesson numbers a docstring names: "lesson 03", "lessons 02-06", "lessons 07, 09"."""
    return {
        number
        for phrase in re.findall(r"[Ll]essons? (\d\d(?:(?:, | and |-)\d\d)*)", doc)
        for number in re.findall(r"\d\d", phrase)
    }


def test_lessons_named_reads_the_forms_docstrings_use():
    assert lessons_named("Taught in lesson 03.") == {"03"}
    assert lessons_named("Lessons 02-06 and lesson 09") == {"02", "06", "09"}
    assert lessons_named("(lessons 07, 09)") == {"07", "09"} and lessons_named("no lesson") == set()


@pytest.mark.parametrize("name", [n for n in cg.__all__ if not inspect.ismodule(getattr(cg, n))])
def test_every_public_helper_names_the_lesson_that_teaches_it(name):
    named = lessons_named(inspect.getdoc(getattr(cg, name)) or "")
    assert named, f"cg.{name}'s docstring names no lesson: add 'Taught in lesson NN.'"
    assert named <= set(LESSONS), f"cg.{name} names lesson(s) {sorted(named - set(LESSONS))} that do not exist"
    used = sorted(k for k, text in LESSONS.items() if re.search(rf"\bcg\.{name}\b", text))
    if used:  # taught no later than the first lesson that uses it by name
        assert min(named) <= used[0], f"cg.{name} says lesson {min(named)}, but lesson {used[0]} uses it first"


def test_the_package_docstring_maps_every_lesson_to_modules():
    doc = cg.__doc__
    for number in LESSONS:
        line = next((line for line in doc.splitlines() if line.startswith(f"- {number} ")), None)
        assert line, f"the package docstring has no line for lesson {number}"
        for dotted in re.findall(r"``([\w.]+)``", line):  # ``feeding``, ``feeding.copy_bandwidth``
            module, _, attribute = dotted.partition(".")
            assert module in MODULES, f"lesson {number}'s line names ``{dotted}``: colab_gpu has no such module"
            assert not attribute or hasattr(importlib.import_module(f"colab_gpu.{module}"), attribute), dotted
