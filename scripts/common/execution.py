"""Running a lesson: execute a notebook in a fresh kernel, time its cells, strip the machine's paths, write it.

`make course`, `make notebooks` and the GPU suite's lesson runs all execute through `execute` here.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from paths import NOTEBOOKS, ROOT

import colab_gpu as cg
from colab_gpu.data.downloads import STAND_IN_NOTE

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
