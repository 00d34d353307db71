"""Predict, then measure: a lesson's headline figure beside the same figure measured on the course's GPUs.

A learner without a GPU still sees the real picture, and one with a GPU notices when their runtime is
abnormal. The reference figures come from the GPU runs imported into the course (``reports/gpu/<date>-<gpu>/``,
from GPU CI on Kaggle or ``make gpu-suite``): ``make import-gpu-run`` copies each run's lesson figures into
``colab_gpu/references.json``, shipped with the package. A GPU without a run says "not measured yet".

When ``COLAB_GPU_FIGURES`` names a file (the GPU suite sets it while it runs the lessons), every figure a
lesson shows is also written there, for the report.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import torch

from ..hardware.device import checked_device
from ..hardware.gpus import REFERENCE_GPUS
from .json_files import parsed, write_atomically

FIGURES_ENV = "COLAB_GPU_FIGURES"
NOT_MEASURED = "not measured yet"


def gpu_label(device_name: str) -> str | None:
    """The course's label for a GPU name ("Tesla T4" -> "T4", "NVIDIA A100-SXM4-40GB" -> "A100"), None for a GPU the
    course does not name. A label matches a whole word of the name: an "NVIDIA L40S" is not an L4."""
    words = set(re.split(r"[^A-Za-z0-9]+", device_name or ""))
    return next((label for label in REFERENCE_GPUS if label in words), None)


def _shipped() -> dict:
    """references.json, as the package ships it."""
    text = resources.files("colab_gpu").joinpath("references.json").read_text(encoding="utf-8")
    fix = "Reinstall colab_gpu (pip install --force-reinstall colab-gpu), or rebuild it: make import-gpu-run."
    return parsed(text, "colab_gpu/references.json", {"figures": dict}, fix)


def reference_title(label: str, runtime: Mapping[str, object] | None) -> str:
    """The name a course figure is shown with: its GPU and the platform of the run that measured it ("T4 on Colab, 2
    CPU cores", "T4 x2 on Kaggle, 4 CPU cores", "H100 on a server, 16 CPU cores"). Colab's T4 and Kaggle's T4 x2 are
    different hosts, and a launch-bound figure follows the host: each platform keeps its own figure. A run that did
    not record its platform: the GPU's label alone."""
    if not runtime or not runtime.get("platform"):
        return label
    gpus, cores = runtime.get("gpu_count") or 1, runtime.get("cpu_count")
    where = runtime["platform"] if runtime["platform"] in ("Colab", "Kaggle") else "a server"
    return f"{label}{f' x{gpus}' if gpus > 1 else ''} on {where}" + (f", {cores} CPU cores" if cores else "")


def reference_figures(key: str) -> dict[str, float | None]:
    """The figure ``key`` measured on each course run, by its `reference_title` ("T4 on Colab, 2 CPU cores": 2.3), in
    the order of the GPUs the course names; a GPU no report has it for yet: its label, with None.

    Taught in lesson 02.
    """
    measured = _shipped().get("figures", {}).get(key, {})
    figures: dict[str, float | None] = {}
    for label in REFERENCE_GPUS:
        titles = sorted(title for title in measured if gpu_label(title) == label)
        figures.update({title: measured[title] for title in titles} if titles else {label: None})
    return figures


def _shown(value: float) -> str:
    """``value`` to three significant figures, its trailing zeros kept: a measured 1.003 reads "1.00", not "1"."""
    text = f"{value:#.3g}"
    return text if "e" in text else text.rstrip(".")


def _record(key: str, value: float, device: torch.device, workload: Mapping[str, object] | None = None) -> None:
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    target = Path(path)
    fix = f"Delete it (the GPU suite gives each lesson a new one: {FIGURES_ENV})."
    figures = parsed(target.read_text(), str(target), {}, fix) if target.exists() else {}
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    figures[key] = {"value": value, "device": name} | ({"workload": dict(workload)} if workload else {})
    write_atomically(target, figures)


def compare_with_references(
    key: str,
    value: float | None,
    device: str | torch.device,
    *,
    what: str,
    unit: str = "x",
    prediction: float | None = None,
    host_bound: bool = False,
    workload: Mapping[str, object] | None = None,
) -> None:
    """Print the learner's prediction, this runtime's figure and the course GPUs' figures for ``what``.

    ``workload`` says what the figure was measured on ({"images per epoch": 60000, "CPU cores": 2}): a course
    figure measured on another workload, or on one its run did not record, is printed with what differs, since the
    two figures then do not compare.

    ``value`` is None when this runtime cannot measure it (a GPU figure on a CPU runtime). ``host_bound``: a figure
    of a launch-bound step, which follows the CPU that launches the kernels: on a GPU one more line compares this
    host with the host of each reference run (`colab_gpu.measure.host`).

    Taught in lesson 02.
    """
    device = checked_device(device, "cg.compare_with_references")
    here = torch.cuda.get_device_name(device) if device.type == "cuda" else "this CPU runtime"
    print(f"{what}:")
    if prediction is not None:
        print(f"  your prediction:   {prediction:g} {unit}")
    print(f"  {here}: " + (f"{_shown(value)} {unit}" if value is not None else "not measurable here"))
    figures = reference_figures(key)
    if all(figure is None for figure in figures.values()):  # one line until a GPU run of the course has it
        print(f"  {', '.join(figures)} (course reports): {NOT_MEASURED}, until the course's GPU CI has run")
        known = list(_shipped().get("figures", {}))
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85) if key not in known else []
        if close:  # a key one letter off would say "not measured yet" forever
            print(f"  (no course figure is named {key!r}: did you mean {close[0]!r}?)")
    else:
        theirs = _shipped().get("workloads", {}).get(key, {})
        for title, figure in figures.items():
            if figure is None:
                print(f"  {title:>4} (course report): {NOT_MEASURED}")
            else:
                note = workload_note(theirs.get(title), workload)
                print(f"  {title:>4} (course report): {_shown(figure)} {unit}{note}")
    if host_bound and value is not None and device.type == "cuda":
        for line in host_notes(key, device):
            print(f"  {line}")
    if value is not None:
        _record(key, value, device, workload)


def workload_note(theirs: Mapping[str, object] | None, mine: Mapping[str, object] | None) -> str:
    """What a course figure's workload has that the learner's has not, in words ("" where they match, or where the
    lesson gives none)."""
    if not mine or theirs == dict(mine):
        return ""
    if not theirs:
        return " (its run did not record its workload: it may not compare with yours)"
    differs = [name for name in {**theirs, **mine} if theirs.get(name) != mine.get(name)]
    return f" (on {_described(theirs, differs)}; yours: {_described(mine, differs)}: not the same workload)"


def _described(workload: Mapping[str, object], names: list[str]) -> str:
    return ", ".join(
        f"{name} {value:,}" if isinstance(value, int) else f"{name} {value}"
        for name, value in ((name, workload.get(name, "?")) for name in names)
    )


def host_notes(key: str, device: torch.device) -> list[str]:
    """For each course GPU with a figure for ``key``: how this host compares with the host of the run that measured
    it (`host.compare_hosts`), or that the run did not record its host."""
    from .host import compare_hosts, host_record

    data = _shipped()
    sources = data.get("sources", {}).get(key, {})
    if not sources:
        return []
    mine = host_record(device)
    notes = []
    for label, run in sources.items():
        host = data.get("hosts", {}).get(run)
        probed = host and "linear_step_us" in host and "linear_step_us" in mine
        notes.append(
            compare_hosts(mine, host, label)
            if probed
            else f"the {label} run's host was not recorded (a run from before the suite probed it): a launch-bound "
            "figure follows the host that launches the kernels as much as the GPU."
        )
    return notes
