"""The lessons as files: the course's configuration, badges and setup cells, reading a lesson, student versions.

The repository slug lives in ONE place, ``[tool.course]`` in pyproject.toml, the distribution name in
``[project]``, the version in ``colab_gpu.__version__``; every Colab and Kaggle badge and every setup
cell is derived from them here (``make stamp``, ``make release``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import tomllib
from paths import NOTEBOOKS, ROOT, STUDENT

import colab_gpu as cg

SOLUTION_TAG = "solution"
STUDENT_NOTE = (
    "*Student version: the solution cells are removed. Write your answer in each exercise, then run "
    "its check cell. The full lesson is one folder up.*"
)
COLAB_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE_SVG = "https://kaggle.com/static/images/open-in-kaggle.svg"
# Metadata that makes a Colab badge open a GPU runtime, and asks Kaggle for a T4 with internet access
# (the setup cell's pip needs it). Kaggle's importer may ignore it: lesson 01 says where to set both by hand.
NOTEBOOK_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kaggle": {
        "accelerator": "nvidiaTeslaT4",
        "isGpuEnabled": True,
        "isInternetEnabled": True,
        "language": "python",
        "sourceType": "notebook",
    },
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
}
# A Colab badge, and the Kaggle badge after it (same line, or the next line of the same comment or paragraph).
BADGE_RE = re.compile(
    r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)"
    r"(?:[ \n]#? ?\[!\[Open In Kaggle\]\([^)]*\)\]\([^)]*\))?"
)
# The setup cell's install block, from its first comment line to the line that says what it did.
# The setup cell's install block (older lessons' blocks started "# Setup: colab_gpu, ..."), up to its print line.
SETUP_RE = re.compile(r"^# (?:@title )?Setup: colab_gpu.*?^print\(f\"colab_gpu \{COLAB_GPU\}.*?$", re.M | re.S)
# A Colab form cell: Colab shows only its title (the cell's metadata says "cellView": "form", added by
# read_lesson); Kaggle and Jupyter show the code, so it stays short. Where PyPI lacks the pinned release (before a
# publish, a yanked version), pip takes the repository's tag of the same release.
SETUP_TEMPLATE = """\
# @title Setup: colab_gpu {version}, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys
import tempfile
from importlib import metadata

COLAB_GPU = "{version}"
TORCH_FLOOR = "{torch_floor}"  # the oldest torch the course is tested on
SOURCES = [f"{distribution}=={{COLAB_GPU}}", f"git+https://github.com/{repository}@v{{COLAB_GPU}}"]
try:
    from colab_gpu import __version__ as found
except ImportError:
    found = None
everything = {{d.metadata["Name"]: d.version for d in metadata.distributions()}}
runtime = {{name: everything[name] for name in ("torch", "torchvision") if name in everything}}  # kept as they are
torch_found = runtime.get("torch")
if torch_found and [int(n) for n in torch_found.split(".")[:2]] < [int(n) for n in TORCH_FLOOR.split(".")]:
    raise RuntimeError(f"This runtime has torch {{torch_found}}; the course needs torch {{TORCH_FLOOR}} or newer, and "
                       "the setup cell never replaces a runtime's torch. Colab: Runtime > Change runtime type > "
                       "Runtime version: Latest. Elsewhere: install a newer torch with its torchvision (pytorch.org).")
source = None
if found != COLAB_GPU:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as keep:  # pip's constraints file
        keep.write("".join(f"{{name}}=={{version}}\\n" for name, version in runtime.items()))
    errors = []
    for source in SOURCES:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", keep.name, source],
                             capture_output=True, text=True)
        if pip.returncode == 0:
            break
        errors.append(f"{{source}}: {{pip.stderr.strip()[-800:]}}")
    else:
        raise RuntimeError(f"pip could not install colab_gpu {{COLAB_GPU}} beside this runtime's {{runtime}}, which it "
                           "keeps (is this runtime online? On Kaggle: Settings > Internet):\\n" + "\\n".join(errors))
    for name in [m for m in sys.modules if m.partition(".")[0] == "colab_gpu"]:
        del sys.modules[name]  # another version was imported above: the import below loads this one
    importlib.invalidate_caches()
print(f"colab_gpu {{COLAB_GPU}}:", "already installed" if source is None else f"installed from {{source}}")"""


@dataclass(frozen=True)
class CourseConfig:
    repository: str
    branch: str
    version: str
    distribution: str = "colab-gpu"
    torch_floor: str = "2.7"

    @property
    def install_spec(self) -> str:
        """What the setup cell pip-installs: the package from PyPI, pinned to this release."""
        return f"{self.distribution}=={self.version}"

    @property
    def setup_block(self) -> str:
        """The setup cell's install block, identical in every lesson."""
        return SETUP_TEMPLATE.format(
            version=self.version,
            distribution=self.distribution,
            repository=self.repository,
            torch_floor=self.torch_floor,
        )


def read_version(root: Path = ROOT) -> str:
    """``colab_gpu.__version__`` as written in the checkout at ``root`` (without importing it).

    A tree without the package's source (the tests run against an installed wheel) has the installed one's.
    """
    if not (root / "colab_gpu" / "__init__.py").exists():
        return cg.__version__
    version = re.search(r'^__version__ = "([^"]+)"', (root / "colab_gpu" / "__init__.py").read_text(), re.M)
    if version is None:
        raise RuntimeError(f"{root / 'colab_gpu' / '__init__.py'} has no __version__ line.")
    return version.group(1)


def course_config(root: Path = ROOT) -> CourseConfig:
    """Read the repository slug and distribution name from pyproject.toml and the version from the package."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    course = pyproject["tool"]["course"]
    return CourseConfig(
        course["repository"],
        course["branch"],
        read_version(root),
        pyproject["project"]["name"],
        torch_floor(pyproject["project"]["dependencies"]),
    )


def torch_floor(dependencies: list[str]) -> str:
    """The X.Y of the package's ``torch>=X.Y`` requirement: the floor the setup cell refuses to go below."""
    for requirement in dependencies:
        floor = re.fullmatch(r"torch\s*>=\s*(\d+\.\d+)", requirement.strip())
        if floor:
            return floor.group(1)
    raise RuntimeError(f"pyproject.toml's dependencies name no torch>=X.Y floor: {dependencies}")


def github_path(config: CourseConfig, notebook: Path) -> str:
    """``owner/repo/blob/branch/notebooks/...``: where GitHub serves ``notebook`` on the default branch."""
    rel = notebook.resolve().relative_to(ROOT).as_posix()
    return f"{config.repository}/blob/{config.branch}/{rel}"


def badge_url(config: CourseConfig, notebook: Path) -> str:
    """The Colab address that opens ``notebook`` from the repository's default branch."""
    return f"https://colab.research.google.com/github/{github_path(config, notebook)}"


def kaggle_url(config: CourseConfig, notebook: Path) -> str:
    """The Kaggle address that imports ``notebook`` from the repository's default branch into a new notebook."""
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{github_path(config, notebook)}"


def badge_markdown(config: CourseConfig, notebook: Path, sep: str = "\n") -> str:
    """The Colab badge and the Kaggle badge: on two lines of one paragraph (side by side once rendered)."""
    return (
        f"[![Open In Colab]({COLAB_BADGE_SVG})]({badge_url(config, notebook)}){sep}"
        f"[![Open In Kaggle]({KAGGLE_BADGE_SVG})]({kaggle_url(config, notebook)})"
    )


def _line_prefix(text: str, start: int) -> str:
    """What precedes ``start`` on its line ("# " in a py:percent markdown cell), to continue a badge line."""
    return text[text.rfind("\n", 0, start) + 1 : start]


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
    """Rewrite the badges and the setup cell's install block in a lesson's source text."""
    text = BADGE_RE.sub(lambda m: badge_markdown(config, notebook, "\n" + _line_prefix(m.string, m.start())), text)
    return SETUP_RE.sub(lambda _: config.setup_block, text)


def stamp_page_badges(text: str, config: CourseConfig) -> str:
    """Re-render every badge pair of a page (README) for the notebook its Colab link opens."""

    def render(match: re.Match) -> str:
        path = re.search(r"/blob/[^/]+/([^)]+)\)", match.group(0)).group(1)
        return badge_markdown(config, ROOT / path, sep=" ")  # a table row stays on one line

    return BADGE_RE.sub(render, text)


def stamp_notebook(notebook: nbformat.NotebookNode, config: CourseConfig, path: Path) -> bool:
    """Stamp an executed notebook in place, outputs included: the setup cell prints its version.

    Returns whether anything changed. A release restamps the committed ``.ipynb`` this way, so their
    outputs stay those of the last real run while every version string agrees.
    """
    changed = False
    for cell in notebook.cells:
        stamped = stamp_text(cell.source, config, path)
        if cell.cell_type == "code" and SETUP_RE.search(cell.source):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream":
                    text = re.sub(r"^colab_gpu \S+: ", f"colab_gpu {config.version}: ", output.text, flags=re.M)
                    changed |= text != output.text
                    output.text = text
        changed |= stamped != cell.source
        cell.source = stamped
    return changed


def read_lesson(source: Path) -> nbformat.NotebookNode:
    """Read a lesson's ``.py`` source as a notebook with the course's metadata."""
    notebook = jupytext.read(source)
    notebook.metadata.update(NOTEBOOK_METADATA)
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.startswith("# @title"):
            cell.metadata["cellView"] = "form"  # Colab shows the title only (the .py keeps tags alone)
    return notebook


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
