"""Shared notebook tooling for the maintenance scripts and the hygiene tests.

The repository slug lives in ONE place, ``[tool.course]`` in pyproject.toml; every Colab badge
and every install cell is derived from it here.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import tomllib
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import colab_gpu as cg  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
STUDENT = NOTEBOOKS / "student"
SOLUTION_TAG = "solution"
STUDENT_NOTE = ("*Student version: the solution cells are removed. Write your answer in each exercise, then run "
                "its check cell. The full lesson is one folder up.*")
COLAB_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"
# Metadata that makes a Colab badge open a GPU runtime.
NOTEBOOK_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
}
BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")
INSTALL_RE = re.compile(r'"colab_gpu @ git\+https://github\.com/[^"]*"')


@dataclass(frozen=True)
class CourseConfig:
    repository: str
    branch: str
    version: str

    @property
    def install_spec(self) -> str:
        """What the setup cell pip-installs on Colab: the package, pinned to the release tag."""
        return f"colab_gpu @ git+https://github.com/{self.repository}@v{self.version}"


def course_config(root: Path = ROOT) -> CourseConfig:
    """Read the repository slug from pyproject.toml and the version from the package."""
    course = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["course"]
    version = re.search(r'__version__ = "([^"]+)"', (root / "colab_gpu" / "__init__.py").read_text())
    if version is None:
        raise RuntimeError("colab_gpu/__init__.py has no __version__ line.")
    return CourseConfig(course["repository"], course["branch"], version.group(1))


def badge_url(config: CourseConfig, notebook: Path) -> str:
    """The Colab address that opens ``notebook`` from the repository's default branch."""
    rel = notebook.resolve().relative_to(ROOT).as_posix()
    return f"https://colab.research.google.com/github/{config.repository}/blob/{config.branch}/{rel}"


def badge_markdown(config: CourseConfig, notebook: Path) -> str:
    return f"[![Open In Colab]({COLAB_BADGE_SVG})]({badge_url(config, notebook)})"


def lesson_sources(folder: Path = NOTEBOOKS) -> list[Path]:
    """The lessons' source files, ``NN_topic.py``, in teaching order."""
    return sorted(folder.glob("[0-9][0-9]_*.py"))


def lesson_title(notebook: nbformat.NotebookNode) -> str:
    """The first markdown heading of the notebook."""
    for line in notebook.cells[0].source.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return "(untitled)"


def stamp_text(text: str, config: CourseConfig, notebook: Path) -> str:
    """Rewrite the Colab badge and the install spec in a lesson's source text."""
    text = BADGE_RE.sub(lambda _: badge_markdown(config, notebook), text)
    return INSTALL_RE.sub(lambda _: f'"{config.install_spec}"', text)


def read_lesson(source: Path) -> nbformat.NotebookNode:
    """Read a lesson's ``.py`` source as a notebook with the course's metadata."""
    notebook = jupytext.read(source)
    notebook.metadata.update(NOTEBOOK_METADATA)
    return notebook


@dataclass
class Execution:
    notebook: nbformat.NotebookNode
    seconds: float
    error: str | None


def device_label() -> str:
    """The device the lessons pick here: ``cuda:0 (Tesla T4)``, or ``cpu (2 cores)``."""
    device = cg.get_device()
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"{device} ({cg.cpu_count()} cores)"


def execute(notebook: nbformat.NotebookNode, cwd: Path, timeout: int = 600) -> Execution:
    """Run every cell top to bottom in a fresh kernel of this Python; never raises on cell errors.

    The notebook's metadata records where it ran, so a committed notebook says which device
    produced its outputs.
    """
    notebook.metadata["colab_gpu"] = {"executed_on": device_label(), "torch": torch.__version__}
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except CellExecutionError as err:
        error = f"{err.ename}: {err.evalue}"
        for number, cell in enumerate(notebook.cells, start=1):
            if any(o.output_type == "error" for o in cell.get("outputs", [])) and \
                    "raises-exception" not in cell.metadata.get("tags", []):
                first_line = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                error = f"cell {number} ({first_line[:60]!r}): {error}"
    return Execution(notebook, time.perf_counter() - start, error)


def write_paired(notebook: nbformat.NotebookNode, source: Path) -> Path:
    """Write the executed notebook next to its source, keeping the jupytext pairing."""
    target = source.with_suffix(".ipynb")
    jupytext.write(notebook, target, fmt="ipynb")
    return target


def student_notebook(source: Path, config: CourseConfig) -> nbformat.NotebookNode:
    """The lesson without its solution cells, with a badge that opens the student version itself."""
    notebook = read_lesson(source)
    notebook.cells = [c for c in notebook.cells if SOLUTION_TAG not in c.metadata.get("tags", [])]
    card = notebook.cells[0]
    target = STUDENT / source.with_suffix(".ipynb").name
    card.source = BADGE_RE.sub(lambda _: badge_markdown(config, target), card.source)
    learn = "\n\n**What you will learn**"
    card.source = card.source.replace(learn, f"\n\n{STUDENT_NOTE}{learn}", 1)
    for number, cell in enumerate(notebook.cells):
        cell.id = f"{source.stem[:2]}-{number:03d}"  # stable ids: regenerating changes no line
    return notebook


def write_student_versions(config: CourseConfig, folder: Path = STUDENT) -> list[Path]:
    """Write notebooks/student/NN_topic.py and .ipynb (paired, no outputs) for every lesson."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for source in lesson_sources():
        notebook = student_notebook(source, config)
        for suffix, fmt in ((".py", "py:percent"), (".ipynb", "ipynb")):
            target = folder / f"{source.stem}{suffix}"
            jupytext.write(notebook, target, fmt=fmt)
            written.append(target)
    return written
