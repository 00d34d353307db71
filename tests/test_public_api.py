"""Every public helper says which lesson teaches it, and the package docstring maps lessons to modules."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import colab_gpu as cg

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
MODULES = {m.name.removeprefix("colab_gpu.") for m in pkgutil.walk_packages(cg.__path__, "colab_gpu.")}


def longest_module(dotted: str) -> tuple[str | None, str]:
    """``measure.timing.compare_steps`` -> ("measure.timing", "compare_steps"): the longest prefix that is a module."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in MODULES:
            return ".".join(parts[:cut]), ".".join(parts[cut:])
    return None, dotted


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


#: The learner's tier: cg.<name> and the self-checks, cg.checks.<name>.
PUBLIC = [n for n in cg.__all__ if not inspect.ismodule(getattr(cg, n))] + [f"checks.{n}" for n in cg.checks.__all__]
MAX_NAMES_PER_LESSON = 20


def resolve(dotted: str):
    obj = cg
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def cg_names(text: str) -> set[str]:
    """The distinct names a lesson reaches through ``cg.``: ``cg.checks.train_loop`` counts as ``checks``."""
    return set(re.findall(r"\bcg\.([A-Za-z_]\w*)", text))


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_helper_names_the_lesson_that_teaches_it(name):
    named = lessons_named(inspect.getdoc(resolve(name)) or "")
    assert named, f"cg.{name}'s docstring names no lesson: add 'Taught in lesson NN.'"
    assert named <= set(LESSONS), f"cg.{name} names lesson(s) {sorted(named - set(LESSONS))} that do not exist"
    pattern = rf"\bcg\.{re.escape(name)}\b"
    used = sorted(k for k, text in LESSONS.items() if re.search(pattern, text))
    assert used, f"cg.{name} is public but no lesson uses it: take it out of __all__ (it stays in its module)"
    assert min(named) <= used[0], f"cg.{name} says lesson {min(named)}, but lesson {used[0]} uses it first"


def test_the_flat_namespace_is_what_the_lessons_call():
    used = set().union(*(cg_names(text) for text in LESSONS.values()))
    assert sorted(used - set(cg.__all__)) == [], "lessons use cg.<name>s that are not in colab_gpu.__all__"
    assert sorted(set(cg.__all__) - used) == [], "names in colab_gpu.__all__ that no lesson uses"
    # and nothing else hides in it: plumbing is imported from its module (colab_gpu.hardware.machine.notebook_platform)
    hidden = {n for n, v in vars(cg).items() if not n.startswith("_") and not inspect.ismodule(v)} - set(cg.__all__)
    assert hidden <= {"load_ipython_extension", "unload_ipython_extension"}, sorted(hidden)


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_a_lesson_meets_at_most_20_names_and_calls_its_checks_from_cg_checks(number):
    names = cg_names(LESSONS[number])
    assert len(names) <= MAX_NAMES_PER_LESSON, f"lesson {number} uses {len(names)} cg names: {sorted(names)}"
    assert not re.search(r"\bcg\.check_", LESSONS[number]), "self-checks are called as cg.checks.<name>"


def test_the_name_count_reads_dotted_names_once():
    assert cg_names("cg.checks.train_loop(x); cg.checks.that(y); cg.fit(m)  # cg.fit") == {"checks", "fit"}


def test_the_package_docstring_maps_every_lesson_to_modules():
    doc = cg.__doc__
    for number in LESSONS:
        line = next((line for line in doc.splitlines() if line.startswith(f"- {number} ")), None)
        assert line, f"the package docstring has no line for lesson {number}"
        for dotted in re.findall(r"``([\w.]+)``", line):  # ``measure.timing``, ``measure.timing.compare_steps``
            module, attribute = longest_module(dotted)
            assert module, f"lesson {number}'s line names ``{dotted}``: colab_gpu has no such module"
            assert not attribute or hasattr(importlib.import_module(f"colab_gpu.{module}"), attribute), dotted
