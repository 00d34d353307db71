"""The lessons' setup cell never replaces the runtime's torch, and stops with the reason below the course's floor.

Each test runs the stamped setup block (`CourseConfig.setup_block`) in a new venv whose torch is a stand-in: an
installed distribution record of the version under test, no code (the cell reads versions, it never imports
torch). pip works offline against a folder of stand-in wheels, with a newer torch among them, the one pip would
take to satisfy a requirement the runtime's torch does not meet: Colab's 2025.07 runtime has torch 2.6, and
without a constraint pip answered `colab-gpu` (torch>=2.7) with a CUDA 13 torch beside the old torchvision.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pip
import pytest
from nbtools import course_config

from tests.conftest import ROOT

VERSION = course_config().version


def _metadata(name: str, version: str, requires: tuple[str, ...]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    return "\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n"


def installed(site: Path, name: str, version: str) -> None:
    """A stand-in distribution, as pip records one it installed (no files of its own)."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(_metadata(name, version, ()))
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/INSTALLER,,\n{info.name}/RECORD,,\n")


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A stand-in wheel: a module that says its version, and its metadata."""
    module, info = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n',
        f"{info}/METADATA": _metadata(name, version, requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def runtime(tmp_path: Path, packages: dict[str, str], colab_gpu_requires: tuple[str, ...]) -> tuple[Path, Path]:
    """A venv holding ``packages`` (stand-ins) and pip, and a folder of wheels: the pinned colab-gpu with
    ``colab_gpu_requires``, and a newer torch and torchvision than the runtime's."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    borrowed = tmp_path / "pip-only"  # this environment's pip, and nothing else of it (no torch)
    borrowed.mkdir()
    (borrowed / "pip").symlink_to(Path(pip.__file__).parent)
    (site / "borrowed-pip.pth").write_text(f"{borrowed}\n")
    for name, version in packages.items():
        installed(site, name, version)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "colab-gpu", VERSION, colab_gpu_requires)
    wheel(wheels, "torch", "2.14.1")
    wheel(wheels, "torchvision", "0.29.1", ("torch==2.14.1",))
    return python, wheels


def outside_env() -> dict[str, str]:
    """This environment without what would show the checkout's package (PYTHONPATH, which make exports) or steer pip."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}


def run_setup_cell(python: Path, wheels: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = outside_env()
    env.update(
        PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels), PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1"
    )
    return subprocess.run(
        [python, "-c", course_config().setup_block], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def versions(python: Path) -> dict[str, str]:
    code = "from importlib import metadata as m; print(*(f'{d.name}={d.version}' for d in m.distributions()))"
    listed = subprocess.check_output([python, "-c", code], text=True, cwd=python.parents[2], env=outside_env())
    return dict(item.split("=") for item in listed.split())


RUNTIME_27 = {"torch": "2.7.0", "torchvision": "0.22.0", "numpy": "2.2.0", "tqdm": "4.67.0"}


def test_an_older_torch_above_the_floor_is_kept(tmp_path):
    python, wheels = runtime(tmp_path, RUNTIME_27, ("torch>=2.7", "numpy", "tqdm"))
    cell = run_setup_cell(python, wheels, tmp_path)
    assert cell.returncode == 0, cell.stderr
    assert cell.stdout.strip() == f"colab_gpu {VERSION}: installed from colab-gpu=={VERSION}"
    after = versions(python)
    assert (after["torch"], after["torchvision"], after["colab-gpu"]) == ("2.7.0", "0.22.0", VERSION)


def test_a_release_that_would_need_a_newer_torch_fails_and_leaves_the_runtimes_torch(tmp_path):
    # Without the cell's constraints file, pip answers this with the torch 2.14.1 among the wheels.
    python, wheels = runtime(tmp_path, RUNTIME_27, ("torch>=2.9", "numpy", "tqdm"))
    cell = run_setup_cell(python, wheels, tmp_path)
    assert cell.returncode != 0
    assert f"pip could not install colab_gpu {VERSION}" in cell.stderr
    assert "beside this runtime's {'torch': '2.7.0', 'torchvision': '0.22.0'}, which it keeps" in cell.stderr
    assert f"colab-gpu=={VERSION}: ERROR: Cannot install" in cell.stderr  # pip's words for each source
    after = versions(python)
    assert (after["torch"], after["torchvision"]) == ("2.7.0", "0.22.0") and "colab-gpu" not in after


@pytest.mark.parametrize("below", ["2.6.0+cu124", "2.5.1"])
def test_a_torch_below_the_floor_stops_the_cell_with_the_reason_and_installs_nothing(tmp_path, below):
    python, wheels = runtime(tmp_path, {"torch": below, "torchvision": "0.21.0"}, ("torch>=2.7",))
    cell = run_setup_cell(python, wheels, tmp_path)
    assert cell.returncode != 0
    floor = course_config().torch_floor
    assert f"This runtime has torch {below}; the course needs torch {floor} or newer" in cell.stderr
    assert "Runtime version: Latest" in cell.stderr
    assert versions(python)["torch"] == below and "colab-gpu" not in versions(python)


def test_the_floor_is_pyprojects_torch_requirement():
    assert f'"torch>={course_config().torch_floor}"' in (ROOT / "pyproject.toml").read_text()
