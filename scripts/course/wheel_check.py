"""Install colab_gpu the way a learner's runtime does, and use it from outside the checkout.

`make test-wheel` (and .github/workflows/release.yml) run:
1. build the wheel from this checkout (or take ``--wheel``);
2. in an environment that already holds a torch (``--python``: an interpreter of that environment; by default
   a new venv in build/wheel-check/venv that sees the packages of this environment, or of ``--borrow-from``'s,
   colab_gpu left out), run the
   lessons' setup cell, the very code ``make stamp`` writes into every lesson, with pip pointed at the wheel;
3. check that torch is the same version from the same place afterwards, that ``colab_gpu`` now imports from
   that environment at the lessons' version, and that ``python -m colab_gpu doctor`` runs;
4. execute lesson 01 from a folder outside the checkout with that interpreter;
5. with ``--unit``, run the unit tests from a copy of the repository without its colab_gpu/ folder, so they
   import the installed wheel.

Usage: python scripts/course/wheel_check.py [--python PY | --borrow-from PY] [--wheel FILE] [--unit] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

import nbformat
from nbtools import course_config, lesson_sources, read_lesson
from paths import ROOT

#: What the check's environment must not borrow from the one that runs it: the checkout's own colab_gpu.
OWN_PACKAGE = ("colab_gpu", "colab-gpu", "__editable__", "_colab_gpu")


class WheelCheckError(Exception):
    """A step of the check failed; the message says which and shows the output."""


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without PYTHONPATH (which would put the checkout's colab_gpu first) or pip settings."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900) -> str:
    done = subprocess.run(command, cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise WheelCheckError(
            f"{' '.join(map(str, command))} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def build_wheel(out: Path) -> Path:
    """Build colab_gpu's wheel from the checkout (no network: the installed setuptools builds it)."""
    shutil.rmtree(out, ignore_errors=True)  # a wheel of an earlier version must not be the one tested
    out.mkdir(parents=True)
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        cwd=out,
        env=clean_env(PIP_CONFIG_FILE=os.devnull),
    )
    wheels = sorted(out.glob("colab_gpu-*.whl"))
    if len(wheels) != 1:
        raise WheelCheckError(f"expected one colab_gpu wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


def venv_borrowing(target: Path, source_python: Path) -> Path:
    """A new venv (same Python) that sees every package of ``source_python``'s environment except colab_gpu.

    Each entry of this environment's site-packages is linked into one folder that the venv adds through a
    .pth file: torch and the notebook tooling are "preinstalled" as on Colab, and colab_gpu is missing.
    """
    if target.exists():
        shutil.rmtree(target)
    # No pip of its own: the borrowed pip installs into this venv, and no second setuptools hides the one torch
    # declares.
    base = run([str(source_python), "-c", "import sys; print(sys._base_executable)"], cwd=ROOT).strip()
    run([base, "-m", "venv", "--without-pip", str(target)], cwd=ROOT)
    python = target / "bin" / "python"
    borrowed = target / "borrowed-site-packages"
    borrowed.mkdir()
    source = Path(
        run([str(source_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=ROOT).strip()
    )
    for entry in source.iterdir():
        if entry.name.startswith(OWN_PACKAGE) or entry.suffix == ".pth":
            continue
        (borrowed / entry.name).symlink_to(entry)
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=ROOT).strip())
    (site / "borrowed.pth").write_text(f"{borrowed}\n")
    # Jupyter's data files (kernel specs, nbconvert templates) live under the environment's prefix.
    prefix = Path(run([str(source_python), "-c", "import sys; print(sys.prefix)"], cwd=ROOT).strip())
    if (prefix / "share").is_dir():
        (target / "share").symlink_to(prefix / "share")
    return python


def torch_identity(python: Path, cwd: Path) -> dict[str, str]:
    return json.loads(
        run(
            [
                str(python),
                "-c",
                "import json, torch; print(json.dumps({'version': torch.__version__, 'file': torch.__file__}))",
            ],
            cwd=cwd,
        )
    )


def run_setup_cell(python: Path, wheel_dir: Path, cwd: Path) -> str:
    """The lessons' setup block, unchanged, with pip told to find colab-gpu in ``wheel_dir`` (offline)."""
    env = clean_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheel_dir), PIP_CONFIG_FILE=os.devnull)
    return run([str(python), "-c", course_config().setup_block], cwd=cwd, env=env)


def tagged_repository(target: Path, version: str) -> Path:
    """This checkout committed in a new repository and tagged ``v<version>``: what GitHub serves at the tag."""
    copy_checkout(target)
    git = ["git", "-C", str(target), "-c", "user.email=ci@example.com", "-c", "user.name=ci"]
    run(["git", "init", "-q", str(target)], cwd=ROOT)
    run([*git, "add", "-A"], cwd=ROOT)
    run([*git, "commit", "-q", "-m", f"colab_gpu {version}"], cwd=ROOT)
    run([*git, "tag", f"v{version}"], cwd=ROOT)
    return target


def run_setup_cell_without_pypi(python: Path, repository: Path, cwd: Path) -> str:
    """The setup block where PyPI lacks the release: pip finds no wheel (an empty index), so the cell takes the git
    tag; git's url.<base>.insteadOf sends the cell's own GitHub address to ``repository`` (offline)."""
    empty = cwd / "empty-index"
    empty.mkdir(exist_ok=True)
    config = course_config()
    # The image's setuptools builds it (PIP_NO_BUILD_ISOLATION=0 is pip's spelling of --no-build-isolation): an
    # isolated build would download setuptools, and this check runs offline.
    env = clean_env(
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(empty),
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_BUILD_ISOLATION="0",
        GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0=f"url.{repository.as_uri()}.insteadOf",
        GIT_CONFIG_VALUE_0=f"https://github.com/{config.repository}",
    )
    return run([str(python), "-c", config.setup_block], cwd=cwd, env=env)


def installed_colab_gpu(python: Path, cwd: Path) -> dict[str, str]:
    return json.loads(
        run(
            [
                str(python),
                "-c",
                "import json, colab_gpu; print(json.dumps({'version': "
                "colab_gpu.__version__, 'file': colab_gpu.__file__}))",
            ],
            cwd=cwd,
        )
    )


def execute_lesson(python: Path, lesson: Path, cwd: Path) -> str:
    """Run a lesson top to bottom in a kernel of ``python``, in ``cwd`` (outside the checkout).

    A last cell added to the copy prints where the kernel's Python and colab_gpu live; that line is returned.
    """
    notebook = read_lesson(lesson)
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            "import sys, colab_gpu\nprint('kernel:', sys.executable, 'colab_gpu:', colab_gpu.__file__)"
        )
    )
    target = cwd / lesson.with_suffix(".ipynb").name
    nbformat.write(notebook, target)
    script = (
        "import nbformat\nfrom nbclient import NotebookClient\n"
        f"nb = nbformat.read({str(target)!r}, as_version=4)\n"
        "NotebookClient(nb, timeout=600, kernel_name='python3',"
        f" resources={{'metadata': {{'path': {str(cwd)!r}}}}}).execute()\n"
        "print(''.join(o.get('text', '') for o in nb.cells[-1].outputs).strip())\n"
    )
    return run([str(python), "-c", script], cwd=cwd).strip().splitlines()[-1]


def copy_checkout(target: Path, *, without_package: bool = False) -> Path:
    """The repository's files (tracked and untracked, not ignored) copied to ``target``; optionally without
    colab_gpu/, so that tests run there import an installed wheel."""
    listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        if (without_package and name.startswith("colab_gpu/")) or not (ROOT / name).is_file():
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)
    return target


def check(
    python: Path | None, wheel: Path | None, work: Path, unit: bool, borrow_from: Path | None = None
) -> list[str]:
    """Run every step; return one line per step that passed. Raises WheelCheckError at the first failure."""
    work.mkdir(parents=True, exist_ok=True)
    config = course_config()
    done = []
    # Absolute: pip runs in folders outside the checkout, where a relative --find-links finds nothing.
    wheel = wheel.resolve() if wheel else build_wheel(work / "dist")
    done.append(f"wheel: {wheel.name}")
    own_venv = python is None
    python = python or venv_borrowing(work / "venv", borrow_from or Path(sys.executable))
    outside = Path(tempfile.mkdtemp(prefix="lesson-", dir=work))
    before = torch_identity(python, outside)

    printed = run_setup_cell(python, wheel.parent, outside)
    if f"colab_gpu {config.version}: installed" not in printed:
        raise WheelCheckError(f"the setup cell did not install colab_gpu {config.version}: {printed!r}")
    again = run_setup_cell(python, wheel.parent, outside)
    if f"colab_gpu {config.version}: already installed" not in again:
        raise WheelCheckError(f"run twice, the setup cell should find what it installed: {again!r}")
    done.append(f"setup cell: {printed.strip()!r}, then {again.strip()!r}")

    after = torch_identity(python, outside)
    if after != before:
        raise WheelCheckError(f"installing colab_gpu changed torch: {before} -> {after}")
    done.append(f"torch unchanged: {after['version']} from {after['file']}")

    package = installed_colab_gpu(python, outside)
    if package["version"] != config.version or Path(package["file"]).resolve().is_relative_to(ROOT / "colab_gpu"):
        raise WheelCheckError(f"colab_gpu should come from the installed wheel at {config.version}: {package}")
    done.append(f"colab_gpu {package['version']} imported from {package['file']}")

    if own_venv:  # a second clean venv: the setup cell where PyPI lacks the release
        tagged = tagged_repository(Path(tempfile.mkdtemp(prefix="tag-", dir=work)) / "repo", config.version)
        fresh = venv_borrowing(work / "venv-tag", borrow_from or Path(sys.executable))
        printed = run_setup_cell_without_pypi(fresh, tagged, outside)
        wanted = f"colab_gpu {config.version}: installed from git+https://github.com/{config.repository}@v"
        if wanted not in printed or installed_colab_gpu(fresh, outside)["version"] != config.version:
            raise WheelCheckError(f"without the release on PyPI, the setup cell should take the git tag: {printed!r}")
        done.append(f"setup cell without PyPI: {printed.strip()!r}")
    else:
        done.append("setup cell without PyPI: not checked (--python given: no clean environment to install into)")

    doctor = run([str(python), "-m", "colab_gpu", "doctor"], cwd=outside)
    done.append(f"doctor: {doctor.splitlines()[0]!r} ... ({len(doctor.splitlines())} lines)")

    first = lesson_sources()[0]
    where = execute_lesson(python, first, outside)
    kernel, _, package_file = where.removeprefix("kernel: ").partition(" colab_gpu: ")
    if not kernel.startswith(str(python.parent)) or Path(package_file).resolve().is_relative_to(ROOT / "colab_gpu"):
        raise WheelCheckError(f"{first.stem} ran in the wrong Python or against the checkout: {where}")
    done.append(f"{first.stem} executed top to bottom in {outside} ({where})")

    if unit:
        tree = copy_checkout(Path(tempfile.mkdtemp(prefix="tests-", dir=work)), without_package=True)
        out = run([str(python), "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "-x"], cwd=tree, timeout=1800)
        done.append(f"unit tests against the wheel: {out.strip().splitlines()[-1]}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, help="interpreter of an environment that already holds torch")
    parser.add_argument(
        "--borrow-from",
        type=Path,
        metavar="PY",
        help="without --python: a new venv borrows this interpreter's packages (default: this one's)",
    )
    parser.add_argument("--wheel", type=Path, help="a built colab_gpu wheel (default: build one from here)")
    parser.add_argument("--unit", action="store_true", help="also run the unit tests against the installed wheel")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "wheel-check")
    args = parser.parse_args(argv)
    try:
        for line in check(args.python, args.wheel, args.work.resolve(), args.unit, args.borrow_from):
            print(f"ok  {line}")
    except WheelCheckError as err:
        print(f"FAILED  {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
