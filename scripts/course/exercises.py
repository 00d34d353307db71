"""The lessons' exercises as code: each one's starting cell, solution, check cell, and the earlier cells it needs.

`check_mutants.py` runs an exercise's check on variants of its solution. It needs the lesson's state at the exercise,
not the whole lesson (most of a lesson's run time is demos the exercise never reads): `setup_cells` keeps the earlier
code cells that bind or change a name the exercise reads, and the cells those read in turn (a backward slice over
top-level names). A file a cell writes (`%%writefile ddp_train.py`, a `.pt` a job saves) counts as a name, so the cell
that writes it is kept too. The slice is checked where it is used: the solution must pass its check after it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from nbtools import SOLUTION_TAG, lesson_sources, read_lesson

WRITEFILE = re.compile(r"\A%%writefile\s+(\S+)\n")
FILE_NAME = re.compile(r"[\w.-]+\.(?:py|pt|pth|csv|json|txt|zip|npz)")
# Methods that change their receiver in place: a cell calling one on a name the exercise reads is part of its state.
CHANGES_RECEIVER = re.compile(
    r"\A(?:to|cuda|cpu|train|eval|requires_grad_|load_state_dict|append|extend|update|add_"
    r"|copy_|zero_|fill_|manual_seed|set_epoch|reset_parameters|apply)\Z"
)


# Modules the lessons import: `torch.manual_seed(0)` changes no state an exercise reads through the name `torch`.
MODULES = {"torch", "cg", "nn", "F", "np", "os", "sys", "plt", "time", "math", "dist"}


@dataclass
class Exercise:
    """One exercise of a lesson: ``lesson`` "03_train_mlp", ``number`` 1, 2 ... in the lesson's order."""

    lesson: str
    number: int
    setup: list[str]  # the earlier cells it needs, in the lesson's order
    setup_at: list[int]  # their positions among the lesson's code cells (exercises of a lesson share a kernel)
    start: str  # the cell the learner edits, as the lesson gives it
    solution: str  # the lesson's solution cell (a %%writefile cell keeps its first line)
    check: str  # the cell that calls cg.checks

    @property
    def name(self) -> str:
        return f"{self.lesson[:2]}.{self.number}"


def as_python(source: str) -> str:
    """A cell's source as plain Python: ``%%writefile F`` writes its body to F, line magics (``%load_ext``) go."""
    found = WRITEFILE.match(source)
    if found:
        body = source[found.end() :]
        return f"import pathlib as _pathlib\n_pathlib.Path({found.group(1)!r}).write_text({body!r})\n"
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def _files(source: str) -> set[str]:
    names = set(FILE_NAME.findall(source))
    found = WRITEFILE.match(source)
    if found:  # `from ddp_train import ...` in a written script reads ddp_train.py
        for node in ast.walk(ast.parse(source[found.end() :])):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(f"{node.module}.py")
    return {f"file:{n}" for n in names}


def names_of(source: str) -> tuple[set[str], set[str], set[str]]:
    """(bound, changed, read) names of a cell: ``bound`` unconditionally at top level (an earlier binding is dead),
    ``changed`` anywhere else or in place (``model.to(device)``), ``read`` every name it loads, function bodies
    included (they read globals when called). Files count as names, both changed and read."""
    files = _files(source)
    found = WRITEFILE.match(source)
    if found:
        return {f"file:{found.group(1)}"}, set(), files
    tree = ast.parse(as_python(source))
    bound: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(statement.name)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).partition(".")[0] for a in statement.names}
        elif isinstance(statement, ast.Assign):
            bound |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
    changed, read = set(files), set(files)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else changed).add(node.id)
            if isinstance(node.ctx, ast.Del):
                read.add(node.id)  # `del x` needs x to exist
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if CHANGES_RECEIVER.match(node.func.attr) and isinstance(receiver, ast.Name) and receiver.id not in MODULES:
                changed.add(receiver.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name):
                changed.add(node.value.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            changed |= {(a.asname or a.name).partition(".")[0] for a in node.names}
    return bound, changed - bound, read


def _deferred(source: str) -> set[str]:
    """The names read inside the cell's functions: read when a later cell calls them, not where they are defined."""
    if WRITEFILE.match(source):
        return set()
    names = set()
    for node in ast.walk(ast.parse(as_python(source))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return names


def _slice(earlier: list[str], needed: set[str]) -> list[int]:
    kept = []
    for index in range(len(earlier) - 1, -1, -1):
        bound, changed, read = names_of(earlier[index])
        if index < 2 or (bound | changed) & needed:
            kept.append(index)
            needed = (needed - bound) | read
    return sorted(kept)


def setup_cells(earlier: list[str], exercise_cells: list[str]) -> list[int]:
    """The positions of the cells of ``earlier`` (code cells, in order) that the ``exercise_cells`` need: a backward
    slice.

    A function reads its globals when it is called, so the names a kept function reads are needed as of the
    exercise (the slice is taken again with them until it no longer grows). The lesson's first two code cells (the
    install cell and the one that picks ``device``) are always kept."""
    needed: set[str] = set()
    for source in exercise_cells:
        needed |= names_of(source)[2] | _deferred(source)
    while True:
        kept = _slice(earlier, needed)
        more = set().union(*(_deferred(earlier[i]) for i in kept)) - needed
        if not more:
            return kept
        needed |= more


def lesson_exercises(source: Path) -> list[Exercise]:
    """Every exercise of the lesson ``source`` (notebooks/NN_topic.py), in order."""
    cells = [c for c in read_lesson(source).cells if c.cell_type == "code"]
    found = []
    for index, cell in enumerate(cells):
        if SOLUTION_TAG not in cell.metadata.get("tags", []):
            continue
        start, check = cells[index - 1].source, cells[index + 1].source
        earlier = [c.source for c in cells[: index - 1]]  # as the lesson runs: earlier exercises, then solved
        at = setup_cells(earlier, [start, cell.source, check])
        found.append(Exercise(source.stem, len(found) + 1, [earlier[i] for i in at], at, start, cell.source, check))
    return found


def all_exercises() -> list[Exercise]:
    return [exercise for source in lesson_sources() for exercise in lesson_exercises(source)]
