"""Installing colab_gpu never changes the torch a runtime already has (Colab's, Kaggle's, a learner's).

pip resolves this checkout against the packages already installed here, offline (``--no-index``, so it
can only keep what is there) and without installing anything (``--dry-run --report``). The report must
install colab_gpu and nothing else, and colab_gpu's requirements, as pip built them from pyproject.toml,
must be lower bounds only (no pin, no upper bound) that admit the torch installed here. CI's compat job
runs this on every torch from the floor to the newest release (`make test-compat`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import requires_source

ROOT = Path(__file__).resolve().parents[2]
LOWER_BOUNDS = {">=", ">"}


def missing_build_requirements() -> list[str]:
    """What pip would need here to build colab_gpu's metadata without build isolation (offline)."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    missing = []
    for text in requires:
        requirement = Requirement(text)
        try:
            found = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{requirement} (not installed)")
            continue
        if not requirement.specifier.contains(found, prereleases=True):
            missing.append(f"{requirement} (found {found})")
    try:
        old_setuptools = Version(metadata.version("setuptools")) < Version("70.1")
    except metadata.PackageNotFoundError:
        old_setuptools = False
    if old_setuptools:  # setuptools < 70.1 builds (editable) wheels through the separate `wheel` package
        try:
            metadata.version("wheel")
        except metadata.PackageNotFoundError:
            missing.append("wheel (setuptools < 70.1 needs it)")
    return missing


def dry_run_install(project: Path, workdir: Path) -> tuple[list[dict] | None, str]:
    """``pip install -e project`` against this environment, offline and dry: (report's installs, pip's stderr).

    The installs are None when pip cannot resolve it from what is installed (it would have to download,
    i.e. replace something). pip's config files and PIP_* variables are left out, so a machine-wide pip
    constraint or index cannot change the answer; PYTHONPATH too, which would show the checkout's
    ``colab_gpu.egg-info`` to pip as an installed colab_gpu.
    """
    report = workdir / "pip-report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--disable-pip-version-check",
        "--no-index",
        "--no-build-isolation",
        "--report",
        str(report),
        "-e",
        str(project),
    ]
    done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return None, done.stderr
    return json.loads(report.read_text())["install"], done.stderr


def requirement_problems(requires_dist: list[str], installed: dict[str, str]) -> list[str]:
    """Why these requirements could make pip change a runtime's packages (empty when they cannot).

    Every requirement (extras included) must be a lower bound only; torch must have a floor; and each
    bound must admit the version installed here (``installed``: canonical name -> version).
    """
    problems = []
    requirements = [Requirement(text) for text in requires_dist]
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if requirement.url:
            problems.append(f"{requirement}: a direct URL, not a lower bound")
        for spec in requirement.specifier:
            if spec.operator not in LOWER_BOUNDS:
                problems.append(f"{requirement}: '{spec}' is not a lower bound (pip would replace Colab's {name})")
        if name in installed and not requirement.specifier.contains(installed[name], prereleases=True):
            problems.append(f"{requirement}: does not admit the installed {name} {installed[name]}")
    torch_requirements = [r for r in requirements if canonicalize_name(r.name) == "torch" and r.marker is None]
    if not torch_requirements:
        problems.append("colab_gpu does not depend on torch")
    elif not any(spec.operator in LOWER_BOUNDS for r in torch_requirements for spec in r.specifier):
        problems.append(f"{torch_requirements[0]}: no floor (the oldest torch the tests pass on)")
    return problems


def installed_versions(requires_dist: list[str]) -> dict[str, str]:
    versions = {}
    for text in requires_dist:
        name = canonicalize_name(Requirement(text).name)
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    versions["torch"] = torch.__version__
    return versions


@pytest.fixture(scope="module")
def can_build():
    missing = missing_build_requirements()
    if missing:
        pytest.skip(
            f"cannot build colab_gpu's metadata offline in {sys.executable}: missing {', '.join(missing)} "
            "(pip install them; `make test-compat` does)"
        )


def broken_copy(tmp_path: Path, torch_requirement: str) -> Path:
    """A copy of the package source whose pyproject.toml requires ``torch_requirement`` instead."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(ROOT / "colab_gpu", project / "colab_gpu", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", project / "README.md")
    text, count = re.subn(r'"torch\s*[<>=!~][^"]*"', f'"{torch_requirement}"', (ROOT / "pyproject.toml").read_text())
    assert count == 1, "pyproject.toml should name torch exactly once, with a version bound"
    (project / "pyproject.toml").write_text(text)
    return project


@requires_source
def test_installing_colab_gpu_keeps_this_torch(can_build, tmp_path):
    installs, stderr = dry_run_install(ROOT, tmp_path)
    assert installs is not None, f"pip cannot install colab_gpu here without replacing something:\n{stderr}"
    names = sorted(canonicalize_name(item["metadata"]["name"]) for item in installs)
    assert names == ["colab-gpu"], f"installing colab_gpu would also install or replace {names} here"
    requires = installs[0]["metadata"].get("requires_dist", [])
    assert requirement_problems(requires, installed_versions(requires)) == []


@requires_source
def test_the_install_check_catches_a_requirement_that_would_replace_torch(can_build, tmp_path):
    installs, stderr = dry_run_install(broken_copy(tmp_path, "torch<2.0"), tmp_path)
    assert installs is None, "pip accepted torch<2.0 offline: the dry run cannot see a torch it would replace"
    assert "torch" in stderr


@pytest.mark.parametrize(
    ("torch_requirement", "problem"),
    [
        ("torch==2.7.1", "not a lower bound"),
        ("torch>=2.7,<3", "not a lower bound"),
        ("torch~=2.7", "not a lower bound"),
        ("torch!=2.9.0,>=2.7", "not a lower bound"),
        ("torch>=99", "does not admit the installed torch"),
        ("torch", "no floor"),
        ("torch @ https://download.pytorch.org/whl/torch.whl", "direct URL"),
    ],
)
def test_requirement_check_rejects_pins_upper_bounds_and_missing_floors(torch_requirement, problem):
    problems = requirement_problems([torch_requirement, "numpy"], {"torch": "2.11.0+cu128", "numpy": "2.0.2"})
    assert any(problem in p for p in problems), problems


def test_requirement_check_accepts_lower_bounds_that_admit_the_runtime():
    requires = ["torch>=2.7", "numpy", "tqdm", 'torchvision>=0.22; extra == "lessons"']
    assert requirement_problems(requires, {"torch": "2.11.0+cu128", "torchvision": "0.26.0+cu128"}) == []
    assert requirement_problems([], {}) == ["colab_gpu does not depend on torch"]


def test_transformers_is_pinned_and_its_floor_is_the_one_the_loader_checks():
    """Lesson 14 loads a Hub model with transformers: requirements.txt pins it, the `lessons` extra asks for the floor
    `hub_models.load_language_model` enforces (one fact, read from the code), and the pin is above that floor."""
    from colab_gpu.llm.hub_models import TRANSFORMERS_FLOOR

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["lessons"]
    (wanted,) = [Requirement(r) for r in extra if Requirement(r).name == "transformers"]
    floor = Version(".".join(map(str, TRANSFORMERS_FLOOR)))
    assert [(s.operator, Version(s.version)) for s in wanted.specifier] == [(">=", floor)]
    pins = re.findall(r"^transformers==(\S+)$", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert len(pins) == 1 and Version(pins[0]) >= floor


def test_transformers_never_requires_torch_so_installing_it_leaves_torch_alone():
    """The transformers installed here names torch only under its extras: `pip install transformers`
    (requirements.txt, the `lessons` extra, a learner's runtime) never reinstalls Colab's or Kaggle's torch."""
    requires = [Requirement(r) for r in metadata.requires("transformers") or []]
    unconditional = [r.name for r in requires if r.marker is None]
    assert unconditional and "torch" not in unconditional
    assert "torch" in {r.name for r in requires if r.marker is not None}  # the extras do name it: this looks
