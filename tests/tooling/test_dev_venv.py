"""The Makefile's `.venv` set-up: uv installs requirements.txt where it can, pip where it cannot (or with
INSTALLER=pip), WARM_IMPORTS are imported (their bytecode, compiled once), and make fails (with no stamp) when
none of that can be done. Each test runs the real recipe on a one-package project, through this machine's index:
about 10 s of CPU per venv it sets up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from tests.conftest import skip_unless_an_index_serves

PACKAGE = "six==1.16.0"  # one small module: its bytecode is one file
FALLBACK = "uv could not install requirements.txt: pip installs it"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """Skip unless pip reaches a package index (the recipe installs from one)."""
    skip_unless_an_index_serves(PACKAGE, tmp_path_factory.mktemp("probe"))


def set_up(
    tmp_path: Path, requirement: str, *variables: str, name: str = "stub"
) -> tuple[subprocess.CompletedProcess, Path]:
    """`make .venv/.installed` with the course's Makefile in a project ``name`` that requires ``requirement``."""
    project = tmp_path / "project"
    (project / "stub").mkdir(parents=True, exist_ok=True)
    (project / "stub" / "__init__.py").write_text("")
    (project / "requirements.txt").write_text(requirement + "\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "' + name + '"\nversion = "0"\n'
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("UV_", "MAKE"))}
    done = subprocess.run(
        ["make", "-f", str(ROOT / "Makefile"), "-C", str(project), f"PYTHON={sys.executable}", "WARM_IMPORTS=six"]
        + list(variables)
        + [".venv/.installed"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return done, project / ".venv"


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def has(venv: Path, module: str) -> bool:
    """Whether the venv's Python imports ``module``, writing no bytecode (the recipe's is what the tests look for)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return (
        subprocess.run([venv / "bin" / "python", "-c", f"import {module}"], capture_output=True, env=env).returncode
        == 0
    )


def compiled(venv: Path, module: str) -> bool:
    return bool(list((site_packages(venv) / "__pycache__").glob(f"{module}.*.pyc")))


def test_uv_installs_the_requirements_and_the_warm_imports_are_compiled(index, tmp_path):
    done, venv = set_up(tmp_path, PACKAGE, "WARM_IMPORTS=six, stub")  # two groups, side by side
    assert done.returncode == 0, done.stdout + done.stderr
    assert FALLBACK not in done.stdout + done.stderr
    assert compiled(venv, "six"), "the recipe imported none of WARM_IMPORTS"
    assert list((venv.parent / "stub" / "__pycache__").glob("__init__.*.pyc")), "the second group was not imported"
    assert (venv / ".installed").exists() and has(venv, "six") and has(venv, "uv") and has(venv, "stub")
    # set up again (requirements.txt changed, say) where a warm import fails: make fails, and writes no stamp
    (venv / ".installed").unlink()
    done, venv = set_up(tmp_path, PACKAGE, "WARM_IMPORTS=six, stub no_such_module")
    assert done.returncode != 0 and "no_such_module" in done.stderr
    assert "importing WARM_IMPORTS (six, stub no_such_module) failed" in done.stdout
    assert has(venv, "six") and not (venv / ".installed").exists()
    # the editable install runs beside the warm imports: where it fails, make fails too, with no stamp
    done, venv = set_up(tmp_path, PACKAGE, name="not a name")
    assert done.returncode != 0 and "not a name" in done.stdout + done.stderr, done.stdout + done.stderr
    assert not (venv / ".installed").exists()


def test_installer_pip_sets_up_the_venv_with_pip_alone(index, tmp_path):
    done, venv = set_up(tmp_path, PACKAGE, "INSTALLER=pip")
    assert done.returncode == 0, done.stdout + done.stderr
    assert FALLBACK not in done.stdout  # chosen, not a fallback: nothing to report
    assert (venv / ".installed").exists() and has(venv, "six") and has(venv, "stub") and not has(venv, "uv")
    assert compiled(venv, "six")


def test_where_uv_cannot_install_pip_tries_and_make_fails_with_no_stamp_when_pip_cannot_either(index, tmp_path):
    # A pin no index has: uv fails, the recipe says so and hands it to pip, which fails too and names the pin.
    done, venv = set_up(tmp_path, "six==0.0.1")
    assert done.returncode != 0
    assert FALLBACK in done.stdout and "six==0.0.1" in done.stderr
    assert not (venv / ".installed").exists() and not has(venv, "six")


def test_an_installer_the_makefile_does_not_know_is_refused_before_any_venv(tmp_path):
    done, venv = set_up(tmp_path, PACKAGE, "INSTALLER=conda")
    assert done.returncode != 0
    assert "INSTALLER=conda: the Makefile installs with uv (the default) or pip" in done.stdout + done.stderr
    assert not venv.exists()


def test_lint_with_a_python_that_does_not_run_fails_and_says_so():
    """It said "ruff is not installed in python3.99: lint skipped" and passed."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-C", str(ROOT), "lint", "USE_SYSTEM_PYTHON=1", "PY=python3.99", "ENV_READY="],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode != 0 and "lint skipped" not in done.stdout
    assert "lint: the Python python3.99 does not run here (set PY= to one that does)" in done.stdout
