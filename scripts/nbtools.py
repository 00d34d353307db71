"""Shared notebook tooling for the maintenance scripts and the hygiene tests.

The repository slug lives in ONE place, ``[tool.course]`` in pyproject.toml, the distribution name in
``[project]``, the version in ``colab_gpu.__version__``; every Colab and Kaggle badge and every setup
cell is derived from them here (``make stamp``, ``make release``).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
import tomllib
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"  # make course's output, the GPU suite's work folder
sys.path.insert(0, str(ROOT))
import colab_gpu as cg  # noqa: E402
from colab_gpu.downloads import STAND_IN_NOTE  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
STUDENT = NOTEBOOKS / "student"
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

COLAB_GPU = "{version}"
SOURCES = [f"{distribution}=={{COLAB_GPU}}", f"git+https://github.com/{repository}@v{{COLAB_GPU}}"]
try:
    from colab_gpu import __version__ as found
except ImportError:
    found = None
source = None
if found != COLAB_GPU:
    for source in SOURCES:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], capture_output=True, text=True)
        if pip.returncode == 0:
            break
    else:
        raise RuntimeError(f"pip could not install colab_gpu {{COLAB_GPU}} from {{SOURCES}} (is this runtime "
                           f"online? On Kaggle: Settings > Internet):\\n{{pip.stderr[-1500:]}}")
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

    @property
    def install_spec(self) -> str:
        """What the setup cell pip-installs: the package from PyPI, pinned to this release."""
        return f"{self.distribution}=={self.version}"

    @property
    def setup_block(self) -> str:
        """The setup cell's install block, identical in every lesson."""
        return SETUP_TEMPLATE.format(version=self.version, distribution=self.distribution, repository=self.repository)


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
    return CourseConfig(course["repository"], course["branch"], read_version(root), pyproject["project"]["name"])


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


ANSI = re.compile(r"\x1b\[[0-9;]*m")  # terminal colours in a notebook's traceback


@dataclass
class Execution:
    notebook: nbformat.NotebookNode
    seconds: float
    error: str | None
    failed_cell: str | None = None  # the source of the cell that failed
    traceback: str | None = None  # its error as the notebook shows it, without colours
    timed_out: bool = False  # a cell ran past the time left (``timeout``, or ``deadline``)
    kernel_died: bool = False
    cell_seconds: list[tuple[int, str, float]] = field(default_factory=list)  # (number, first line, seconds)


COMMIT_FILE = ROOT / "scripts" / "COMMIT"  # "$Format:%H$" in git; `git archive` writes the commit (.gitattributes)
COMMIT_ENV = "COLAB_GPU_COMMIT"  # scripts/gpu_runner.py sets it from --sha where the tree has neither git nor that
SHA = re.compile(r"[0-9a-f]{40}")


def git_commit(root: Path = ROOT) -> str | None:
    """The full sha of the commit this tree is (a GPU run's report, the site's CPU label); None when unknown.

    In order: ``COLAB_GPU_COMMIT`` (the GPU runner's --sha), ``git rev-parse HEAD``, then scripts/COMMIT, which
    a `git archive` tarball carries filled in (export-subst): a GPU node may have no git, or a tree without .git.
    """
    import os
    import subprocess

    if SHA.fullmatch(os.environ.get(COMMIT_ENV, "").strip()):
        return os.environ[COMMIT_ENV].strip()
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
        if done.returncode == 0 and SHA.fullmatch(done.stdout.strip()):
            return done.stdout.strip()
    except FileNotFoundError:  # no git on this machine
        pass
    stamped = (root / COMMIT_FILE.relative_to(ROOT)).read_text().strip() if COMMIT_FILE.exists() else ""
    return stamped if SHA.fullmatch(stamped) else None


def device_label() -> str:
    """The device the lessons pick here: ``cuda:0 (Tesla T4)``, or ``cpu (2 cores)``."""
    device = cg.get_device()
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"{device} ({cg.cpu_count()} cores)"


STAND_IN_SIGNS = (STAND_IN_NOTE, "so this lesson uses scikit-learn's handwritten digits")  # the latter: older runs


def data_used(notebook: nbformat.NotebookNode) -> str | None:
    """Which data an executed lesson trained on, from what it printed: "FashionMNIST" or "CIFAR-10" (the real data
    set), "stand-in at full size" (the digits repeated to the real data set's size: an offline GPU), "small stand-in"
    (the 1,797 digits: an offline CPU, or a GPU run from before the stand-ins grew), or None (no data set loaded)."""
    lines = [
        line
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if isinstance(output.get("text"), str)
        for line in output["text"].splitlines()
    ]
    if any(sign in line for line in lines for sign in STAND_IN_SIGNS):
        return "stand-in at full size" if any("repeated to" in line for line in lines) else "small stand-in"
    loaded = [name for name in ("FashionMNIST", "CIFAR-10") for line in lines if line.startswith(f"{name} loaded from")]
    return loaded[0] if loaded else None


def _first_line(source: str) -> str:
    return source.strip().splitlines()[0][:60] if source.strip() else ""


def execute(
    notebook: nbformat.NotebookNode,
    cwd: Path,
    timeout: int = 600,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    deadline: float | None = None,
) -> Execution:
    """Run every cell top to bottom in a fresh kernel of this Python; never raises on what a lesson does.

    The notebook's metadata records where it ran, so a committed notebook says which device
    produced its outputs. With ``log``, what the kernel process and the processes a lesson starts write
    to their own stdout and stderr (the kernel's transport warning, a child's traceback that the lesson
    provokes on purpose) goes to that file instead of the terminal; the notebook's outputs are unchanged.
    ``timeout`` bounds each cell; ``deadline`` (a ``time.monotonic()`` value) bounds the whole notebook: the cell
    running then is stopped. A cell error, a cell past its time and a kernel that dies all come back as
    ``error``, with the cell: a GPU suite goes on to the next lesson. ``env`` is the kernel's environment.
    """
    notebook.metadata["colab_gpu"] = {"executed_on": device_label(), "torch": torch.__version__}

    def time_left(cell) -> int:
        left = timeout if deadline is None else min(timeout, deadline - time.monotonic())
        return max(1, int(left))

    running: dict[str, int] = {}
    client = NotebookClient(
        notebook,
        timeout=timeout,
        timeout_func=time_left,
        kernel_name="python3",
        record_timing=True,  # each cell's seconds for the GPU suite's report; removed from the notebook below
        resources={"metadata": {"path": str(cwd)}},
        on_cell_execute=lambda cell, cell_index: running.update(index=cell_index),
    )
    start = time.perf_counter()
    run = Execution(notebook, 0.0, None)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    kernel = {"stdout": None, "stderr": None} if log is None else {}
    with open(log, "w") if log is not None else contextlib.nullcontext() as sink:
        if sink:
            kernel = {"stdout": sink, "stderr": sink}
        if env is not None:
            kernel["env"] = env
        kernel = {key: value for key, value in kernel.items() if value is not None}
        try:
            client.execute(**kernel)
        except CellExecutionError as err:
            run.error = f"{err.ename}: {err.evalue}"
            for number, cell in enumerate(notebook.cells, start=1):
                errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
                if errors and "raises-exception" not in cell.metadata.get("tags", []):
                    run.error = f"cell {number} ({_first_line(cell.source)!r}): {run.error}"
                    run.failed_cell = cell.source
                    run.traceback = ANSI.sub("", "\n".join(errors[0].get("traceback", [])))
        except (CellTimeoutError, DeadKernelError) as err:
            run.timed_out = isinstance(err, CellTimeoutError)
            run.kernel_died = not run.timed_out
            cell = notebook.cells[running["index"]] if "index" in running else None
            number = running.get("index", -1) + 1
            what = (
                "did not finish in the time it had (the notebook's timeout, or its deadline)"
                if run.timed_out
                else "killed the kernel (it died: out of host memory, a crash in native code, or os._exit)"
            )
            where = f"cell {number} ({_first_line(cell.source)!r})" if cell is not None else "the kernel's start"
            run.error = f"{where} {what}: {type(err).__name__}"
            run.failed_cell = cell.source if cell is not None else None
            run.traceback = ANSI.sub("", str(err))[-2000:]
    run.seconds = time.perf_counter() - start
    run.cell_seconds = cell_seconds(notebook)
    return run


def cell_seconds(notebook: nbformat.NotebookNode) -> list[tuple[int, str, float]]:
    """(cell number, first line, seconds) of every cell that ran, from nbclient's timing metadata, which it then
    removes: a committed notebook carries no timestamps."""
    from datetime import datetime

    times = []
    for number, cell in enumerate(notebook.cells, start=1):
        stamps = cell.metadata.pop("execution", {})
        if "iopub.execute_input" in stamps and "shell.execute_reply" in stamps:
            began, ended = (
                datetime.fromisoformat(stamps[k].replace("Z", "+00:00"))
                for k in ("iopub.execute_input", "shell.execute_reply")
            )
            times.append((number, _first_line(cell.source), round((ended - began).total_seconds(), 2)))
    return times


def without_machine_paths(text: str) -> str:
    """``text`` without the paths of the machine that ran it: what readers of GitHub and the site see.

    The checkout becomes a relative path, installed packages their import path, the home folder ``~``, and the
    kernel's temporary file of a cell (``/tmp/ipykernel_123/456.py``, in tracebacks and Dynamo's logs) ``<cell>``.
    """
    text = re.sub(r"/tmp/ipykernel_\d+/\d+\.py", "<cell>", text)
    text = re.sub(r"[^\s'\"(]*/site-packages/", "", text)
    for folder, shown in ((NOTEBOOKS, ""), (ROOT, ""), (Path.home(), "~")):
        text = text.replace(f"{folder}/", f"{shown}/" if shown else "").replace(str(folder), shown or ".")
    return text


def strip_machine_paths(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Apply `without_machine_paths` to every output of ``notebook`` (streams, text results, tracebacks)."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = without_machine_paths(output["text"])
            if "text/plain" in output.get("data", {}):
                output["data"]["text/plain"] = without_machine_paths(output["data"]["text/plain"])
            if "traceback" in output:
                output["traceback"] = [without_machine_paths(line) for line in output["traceback"]]
    return notebook


def write_paired(notebook: nbformat.NotebookNode, source: Path) -> Path:
    """Write the executed notebook next to its source, keeping the jupytext pairing, without machine paths."""
    target = source.with_suffix(".ipynb")
    jupytext.write(strip_machine_paths(notebook), target, fmt="ipynb")
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
