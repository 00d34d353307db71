"""Shared fixtures: fake GPUs so that GPU code paths run on a CPU-only machine."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import colab_gpu as cg
from colab_gpu.hardware.gpus import BY_LABEL
from colab_gpu.hardware.units import GIB

ROOT = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make unit` runs two workers on two cores: with torch's default of one thread per core each, their OpenMP
    # threads would fight over the cores and timings inside a test (a check comparing two loops) would be noise.
    torch.set_num_threads(1)
#: For tests that build, install or release the package from its source: `make test-wheel --unit` runs the
#: tests from a copy of the repository without colab_gpu/, against the installed wheel.
requires_source = pytest.mark.skipif(
    not (ROOT / "colab_gpu" / "__init__.py").exists(),
    reason="no package source here: these tests run against an installed wheel",
)

T4 = {
    "name": "Tesla T4",
    "capability": (7, 5),
    "memory_gib": BY_LABEL["T4"].memory_gib,
}  # the course's GPU table: 14.75
A100 = {"name": "NVIDIA A100-SXM4-40GB", "capability": (8, 0), "memory_gib": 40}
H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": (9, 0), "memory_gib": 80}
P100 = {"name": "Tesla P100-PCIE-16GB", "capability": (6, 0), "memory_gib": 16}
#: What official cu128/cu130 wheels of torch 2.11 report: nothing older than the T4.
CU128_ARCHES = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def pytest_sessionstart(session):
    # REQUIRE_CUDA=1 on a machine without a GPU stops the whole run before any test passes.
    cg.hardware.device.require_cuda_if_asked()


def pytest_collection_modifyitems(config, items):
    if cg.hardware.device.cuda_device_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_figures_file(monkeypatch):
    """No test records into the figures file of a GPU run that runs the unit tests (the GPU suite sets the variable
    for all its steps): its figures would be labelled with the run's GPU. Tests of the recording set their own."""
    monkeypatch.delenv(cg.measure.references.FIGURES_ENV, raising=False)


def _index(device: int | str | torch.device) -> int:
    if isinstance(device, int):
        return device
    return torch.device(device).index or 0


@pytest.fixture
def no_gpu(monkeypatch):
    """Pretend this machine has no CUDA GPU (also on a GPU machine)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.delenv("REQUIRE_CUDA", raising=False)


@pytest.fixture
def fake_gpus(monkeypatch):
    """Return a function that pretends this machine has the given GPUs (defaults: one T4)."""

    def install(*gpus: dict) -> None:
        gpus = gpus or (T4,)
        props = [
            SimpleNamespace(
                name=g["name"],
                major=g["capability"][0],
                minor=g["capability"][1],
                total_memory=g["memory_gib"] * GIB,
                multi_processor_count=40,
            )
            for g in gpus
        ]
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(props))
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=0: props[_index(device)])
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=0: gpus[_index(device)]["capability"])
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: list(CU128_ARCHES))
        monkeypatch.setattr("colab_gpu.doctor.nvidia_driver_version", lambda: "550.54.15")  # as the report reads it
        # PyTorch starts CUDA lazily, and some allocator calls do not start it: in a fresh process
        # reset_peak_memory_stats raises this (c10's CUDACachingAllocator, assertValidDevice).
        started = {"cuda": False}
        monkeypatch.setattr(torch.cuda, "init", lambda: started.update(cuda=True))
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: started["cuda"])

        def reset_peak_memory_stats(device=None):
            if not started["cuda"]:
                raise RuntimeError(f"Invalid device argument {_index(device or 0)}: did you call init?")

        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset_peak_memory_stats)

    return install


# A GPU run and a course to import it into: tests/tooling/test_gpu_kaggle.py and tests/tooling/test_import_gpu_run.py.
GPU_RUN_LESSON = "01_enable_gpu_runtime"


@pytest.fixture
def run_folder(tmp_path):
    """A run as gpu_runner.py leaves it on Kaggle (the fake fills in the sha pushed)."""
    run = tmp_path / "fixture-run"
    (run / "notebooks").mkdir(parents=True)
    shutil.copyfile(ROOT / "notebooks" / f"{GPU_RUN_LESSON}.ipynb", run / "notebooks" / f"{GPU_RUN_LESSON}.ipynb")
    manifest = {
        "format": 1,
        "sha": "?",
        "status": "passed",
        "failures": [],
        "started": "2026-11-20T10:00:00+00:00",
        "gpus": ["Tesla T4", "Tesla T4"],
        "gpu_count": 2,
        "torch": "2.10.0+cu128",
        "seconds": 2520.0,
        "image": {"KAGGLE_KERNEL_RUN_TYPE": "Batch"},
        "tests": {"passed": 1310, "failed": 0, "skipped": 3},
    }
    every_lesson = sorted(source.stem for source in (ROOT / "notebooks").glob("[0-9]*.py"))  # as a full run has
    seconds = {stem: {"seconds": 21.4 if stem == GPU_RUN_LESSON else 10.0, "status": "ok"} for stem in every_lesson}
    report = {
        "commit": "?",
        "gpu": "Tesla T4 x2",
        "runtime": {"gpus": [{"name": "Tesla T4"}] * 2},
        "lessons": {"device": "cuda:0 (Tesla T4)", "lessons": seconds},
        "lesson_figures": {"02.matmul_gpu_vs_cpu": {"value": 31.5, "device": "Tesla T4"}},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "report.json").write_text(json.dumps(report))
    (run / "report.md").write_text("# GPU suite: Tesla T4 x2, 2026-11-20\n")
    (run / "logs").mkdir()
    (run / "logs" / "gpu-suite.log").write_text("...\n")
    return run


@pytest.fixture
def course(tmp_path):
    """The parts of a course checkout that an import writes to."""
    root = tmp_path / "course"
    (root / "reports" / "gpu").mkdir(parents=True)
    (root / "colab_gpu").mkdir()
    (root / "docs").mkdir()
    shutil.copyfile(ROOT / "docs" / "instructor_guide.md", root / "docs" / "instructor_guide.md")
    return root


def venv_seeing(venv: Path, site: str | Path) -> Path:
    """A venv without pip of its own whose .pth puts ``site`` (a site-packages, or a folder of links into one) on its
    path: a GPU image's Python for the runner's tests, which installs into its own folder and leaves ``site`` alone.
    Returns its python."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(own) / "image.pth").write_text(f"{site}\n")
    return python


def skip_unless_an_index_serves(spec: str, folder: Path, *pip_options: str) -> None:
    """Skip the test unless this machine's pip downloads ``spec`` (no dependencies) into ``folder``: the end-to-end
    tests that install from a package index need one, and a machine without one says so instead of failing."""
    import subprocess
    import sys

    probe = [sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "15", *pip_options]
    done = subprocess.run([*probe, "-d", str(folder), spec], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"no package index reachable (pip download {spec} failed): {done.stderr.strip()[-300:]}")
