"""The GPU runner's steps after the clone: install what the image lacks (never torch), run the suite, read its report.

scripts/gpu/gpu_runner.py loads this file from the course it has just cloned or unpacked (gpu_runner.load_steps): the
runner is the Kaggle kernel's code, pushed as one file before any clone, so what can wait for the clone lives here and
keeps that file short. Both come from the same commit. Standard library only, like the runner: it runs on the image's
Python before anything is installed. It shares the runner's RunFailed, sh and versions through ``import gpu_runner``
(the runner registers itself under that name before it loads this file, so there is one RunFailed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import gpu_runner as runner

PINNED = ("torch", "torchvision")  # the image's own builds: never installed over
# requirements.txt's tools that the suite does not use (the site's Sphinx stack and its browser test, the linter):
# installing them on an image would only risk moving its IPython or docutils under the lessons.
# bitsandbytes: where an image lacks it (the lent H100/H200 image does), lesson 15 skips its 8-bit AdamW and QLoRA
# cells with a line that says so; its 43 MB wheel would take the wheels folder past the 64 MiB a lent machine's
# checkout may carry. Colab's and Kaggle's images have it: their runs check those cells.
NOT_FOR_THE_SUITE = {
    "sphinx",
    "myst-nb",
    "sphinx-book-theme",
    "pydata-sphinx-theme",
    "selenium",
    "ruff",
    "bitsandbytes",
}


def checkout_commit(checkout: Path, course: Path) -> str | None:
    """The commit of a checkout: git's, where git and the checkout's .git are there, else the tarball's stamp."""
    if checkout.is_dir() and shutil.which("git") and (checkout / ".git").exists():
        done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.strip()
    stamp = course / "scripts" / "common" / "COMMIT"
    text = stamp.read_text().strip() if stamp.exists() else ""
    return text if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else None


def missing_requirements(requirements: Path) -> list[str]:
    """requirements.txt's pins whose package this Python lacks, torch, torchvision and NOT_FOR_THE_SUITE left out."""
    missing = []
    for line in requirements.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if not spec:
            continue
        name = spec.split("==")[0].split(">=")[0].strip()
        if name.lower() in PINNED or name.lower() in NOT_FOR_THE_SUITE:
            continue
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(spec)
    return missing


def install(course: Path, python: str, before: dict, logs: Path, work: Path, wheels: Path | None = None) -> list[str]:
    """colab_gpu from the clone, and what the image lacks; torch and torchvision pinned to ``before``.

    With ``wheels`` (a folder `make gpu-wheels` filled) pip reads that folder only, never an index: a GPU node
    without internet."""
    constraints = work / "constraints.txt"
    constraints.write_text("".join(f"{name}=={before[name]}\n" for name in PINNED if before.get(name)))
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", str(constraints)]
    if wheels is not None:
        if not Path(wheels).is_dir():
            raise runner.RunFailed(
                f"the wheels folder {wheels} does not exist: fill it on a machine with an index "
                "(make gpu-wheels PYTHON_VERSION=3.12) and carry it to this one."
            )
        pip += ["--no-index", "--find-links", str(Path(wheels).resolve())]
    log = logs / "install.log"
    missing = missing_requirements(course / "requirements.txt")
    if missing and runner.sh([*pip, *missing], log) != 0:
        where = f" from {wheels} alone" if wheels is not None else ""
        raise runner.RunFailed(
            f"pip could not install {missing}{where} next to torch {before['torch']} (see logs/install.log)"
        )
    # The image's setuptools builds it: no download, and nothing but colab_gpu itself changes.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    if runner.sh([*pip, "--no-deps", *isolation, str(course)], log) != 0:
        raise runner.RunFailed("pip could not install colab_gpu from the clone (see logs/install.log)")
    after = runner.versions(python)
    changed = [f"{name} {before[name]} -> {after[name]}" for name in PINNED if before[name] != after[name]]
    if changed:
        raise runner.RunFailed(
            f"installing the tools changed the image's {', '.join(changed)}: the run would not test "
            "the image learners have."
        )
    return missing


def suite_command(python: str, out: Path, options: dict, require_cuda: bool) -> list[str]:
    """What `make gpu-suite` runs (scripts/gpu/gpu_suite.py, from the clone, on this Python), writing into ``out``."""
    resume = options.get("resume") and (out / "report.json").exists()
    args = ["--refresh-notebooks", *(["--resume", str(out)] if resume else ["--out", str(out)])]
    if options.get("budget"):
        args += ["--budget", str(options["budget"])]
    if options.get("lessons"):
        args += ["--lessons", *options["lessons"]]
    if options.get("unit_tests") is not None:  # [] is "none", None the suite's default
        args += ["--unit-tests", *options["unit_tests"]]
    if options.get("bench") is not None:
        args += ["--bench-only", *options["bench"]]
    if options.get("data"):
        args += ["--data", str(Path(options["data"]).resolve())]
    if not require_cuda:
        args.append("--allow-cpu")
    return [python, "scripts/gpu/gpu_suite.py", *args]


def test_counts(report: dict) -> dict:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for _, outcome, _ in report.get("tests", []):
        counts["skipped" if outcome == "skipped" else "passed" if outcome == "passed" else "failed"] += 1
    return counts


def run_suite(course: Path, python: str, out: Path, options: dict, manifest: dict) -> None:
    """The GPU suite from the clone, into ``out``; what its report says goes into ``manifest`` (status, lessons,
    steps, test counts, the parts left for the next window). Raises RunFailed when the suite failed."""
    # As `make gpu-suite USE_SYSTEM_PYTHON=1` would, without needing make: the clone first on the import path.
    path = os.pathsep.join(filter(None, [str(course), os.environ.get("PYTHONPATH")]))
    commit = {"COLAB_GPU_COMMIT": manifest["sha"]} if manifest["sha"] else {}  # a tree without git knows it so
    code = runner.sh(
        suite_command(python, out, options, manifest["require_cuda"]),
        out / "logs" / "gpu-suite.log",
        cwd=course,
        env=dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **commit),
    )
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    manifest["sha"] = manifest["sha"] or report.get("commit")
    manifest["lessons"] = report.get("lessons", {}).get("lessons", {})
    manifest["steps"] = report.get("steps", {})
    manifest["tests"] = test_counts(report)
    if code not in (0, 3):
        failed = [name for name, (step_code, _) in report.get("steps", {}).items() if step_code == 1]
        raise runner.RunFailed(f"the GPU suite failed ({', '.join(failed) or f'exit {code}'}): see logs/gpu-suite.log")
    manifest["status"] = "passed" if code == 0 else "incomplete"
    manifest["left"] = [name for name, part in report.get("parts", {}).items() if part["status"] != "passed"]
