"""Fill a folder with the wheels a GPU image lacks for the course's GPU suite: for a GPU node with no package index.

    make gpu-wheels PYTHON_VERSION=3.12 [IMAGE_FREEZE=FILE]
    python scripts/gpu/gpu_wheels.py --python-version 3.12 [--image-freeze FILE] [--dest .whl] [--glibc 2.35]

On a machine with an index, for the GPU image's CPython on Linux x86-64:
  1. takes the pins of the notebook tooling (TOOLING) from requirements.txt, those the image lacks, and any other
     pin of requirements.txt that scripts/gpu/gpu_runner.py would install there because the image lacks it;
  2. resolves their whole dependency closure for that Python and platform without downloading it
     (`pip install --dry-run --report`), reading each package's version and requirements from pip's report;
  3. leaves out what the image already has (its `pip freeze`: --image-freeze, by default
     scripts/gpu/assets/gpu-image-freeze.txt, the image the course last ran on) wherever the image's version satisfies
     every requirement on it in that closure, and never carries torch, torchvision, numpy or pytest (NEVER);
  4. downloads the rest, one wheel each and no dependencies, into --dest (in place of the wheels it wrote there
     before; a folder holding wheels it did not write is refused, nothing deleted).

There, scripts/gpu/gpu_runner.py --wheels DEST installs from that folder alone (`pip install --no-index --find-links`),
torch and torchvision held at the image's versions. Exits non-zero when requirements.txt lacks a pin or pip fails.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from paths import ROOT
from wheels_select import (
    Dist,
    GpuWheelsError,
    Selection,
    closure_from_report,
    parse_freeze,
    runner_pins,
    select,
    target_environment,
)

DEFAULT_FREEZE = Path(__file__).resolve().parent / "assets" / "gpu-image-freeze.txt"
DEFAULT_DEST = Path(".whl")
# The newest glibc a wheel may need: Ubuntu 22.04's, 2.35; its wheels run on a newer one (the lent H100 image's 2.39).
DEFAULT_GLIBC = "2.35"
# Lines that a machine's pip configuration may add (find-links folders that do not exist there).
PIP_NOISE = re.compile(r"is ignored: it is neither a file nor a directory")


def target_flags(python_version: str, glibc: str) -> list[str]:
    """pip's options for wheels of CPython ``python_version`` on Linux x86-64, needing glibc ``glibc`` at most."""
    major, minor = (int(part) for part in glibc.split(".")[:2])
    platforms = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any"]
    flags = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for platform in platforms:
        flags += ["--platform", platform]
    return flags


def pip(args: list[str], what: str) -> None:
    """Run this Python's pip; GpuWheelsError with its output (less the configuration noise) when it fails."""
    command = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        output = "\n".join(
            line for line in (done.stdout + done.stderr).splitlines() if line.strip() and not PIP_NOISE.search(line)
        )
        raise GpuWheelsError(f"pip failed to {what} ({done.returncode}):\n$ {' '.join(command)}\n{output[-4000:]}")


def resolve(pins: list[str], python_version: str, glibc: str) -> dict[str, Dist]:
    """The dependency closure of ``pins`` for the target, from pip's resolver, nothing downloaded but metadata."""
    with tempfile.TemporaryDirectory(prefix="gpu-wheels-") as tmp:
        report = Path(tmp) / "report.json"
        pip(
            [
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--disable-pip-version-check",
                "--report",
                str(report),
                "--target",
                str(Path(tmp) / "target"),
                *target_flags(python_version, glibc),
                *pins,
            ],
            f"resolve {' '.join(pins)} for CPython {python_version}",
        )
        return closure_from_report(json.loads(report.read_text()))


WRITTEN = ".written-by-gpu-wheels"  # in --dest: the wheels this tool put there, one name a line


def written_here(dest: Path) -> set[str]:
    """The wheels of ``dest`` this tool wrote (its list); every wheel of the default folder, which is its own."""
    listed = dest / WRITTEN
    if listed.is_file():
        return set(listed.read_text().split())
    return {w.name for w in dest.glob("*.whl")} if dest.resolve() == DEFAULT_DEST.resolve() else set()


def download(keep: list[tuple[str, str]], dest: Path, python_version: str, glibc: str) -> list[Path]:
    """One wheel of each (name, version), no dependencies, into ``dest`` in place of the wheels this tool wrote there
    before. They are downloaded beside it first: a download that fails leaves the wheels ``dest`` had. A wheel that
    it did not write is never deleted: ``dest`` holding one is refused before anything is downloaded (the runner
    installs every wheel of the folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    ours = written_here(dest)
    foreign = sorted(w.name for w in dest.glob("*.whl") if w.name not in ours)
    if foreign:
        raise GpuWheelsError(
            f"--dest {dest} holds wheels gpu_wheels.py did not write ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}): give an empty folder, or move them out yourself"
        )
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as scratch:
        if keep:
            pip(
                [
                    "download",
                    "--no-deps",
                    "--quiet",
                    "--disable-pip-version-check",
                    *target_flags(python_version, glibc),
                    "-d",
                    scratch,
                    *(f"{name}=={version}" for name, version in keep),
                ],
                f"download the wheels for CPython {python_version}",
            )
        for old in dest.glob("*.whl"):
            if old.name in ours:
                old.unlink()
        for wheel in Path(scratch).glob("*.whl"):
            shutil.move(str(wheel), dest / wheel.name)
    wheels = sorted(dest.glob("*.whl"))
    (dest / WRITTEN).write_text("".join(f"{w.name}\n" for w in wheels))
    return wheels


def plan(requirements: Path, image: dict[str, str | None], python_version: str, glibc: str) -> Selection:
    """Resolve what the runner will install on that image and select what to carry. pip evaluates environment
    markers for the Python that runs it: a requirement only the target's Python has is resolved in a second pass."""
    roots = list(runner_pins(requirements, image).values())
    if not roots:
        return Selection([], [], [], [])
    extra: list[str] = []
    for _ in range(3):
        selection = select(resolve(roots + extra, python_version, glibc), roots, image, python_version)
        if not selection.unresolved or set(selection.unresolved) <= set(extra):
            break
        extra = sorted(set(extra) | set(selection.unresolved))
    if selection.unresolved:
        raise GpuWheelsError(
            f"pip's resolution for CPython {python_version} lacks {', '.join(selection.unresolved)}, "
            "which that Python needs: resolve with that Python (run this script with it)"
        )
    return selection


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python-version", required=True, help="the GPU image's Python, e.g. 3.12")
    parser.add_argument(
        "--image-freeze",
        type=Path,
        default=DEFAULT_FREEZE,
        help="the GPU image's `pip freeze` (default: scripts/gpu/assets/gpu-image-freeze.txt)",
    )
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="the wheels folder (default: .whl)")
    parser.add_argument("--glibc", default=DEFAULT_GLIBC, help=f"the image's glibc (default: {DEFAULT_GLIBC})")
    parser.add_argument("--requirements", type=Path, default=ROOT / "requirements.txt", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if not re.fullmatch(r"\d+\.\d+", args.glibc):
            raise GpuWheelsError(f"--glibc {args.glibc!r}: give it as 2.35")
        target_environment(args.python_version)  # a malformed version fails here, before pip runs
        if not args.image_freeze.is_file():
            raise GpuWheelsError(f"--image-freeze {args.image_freeze}: no such file (the image's `pip freeze`)")
        image = parse_freeze(args.image_freeze.read_text())
        selection = plan(args.requirements, image, args.python_version, args.glibc)
        if selection.from_image:
            print(f"left out, the image has them at versions the tooling accepts: {', '.join(selection.from_image)}")
        for note in selection.notes:
            print(note)
        for warning in selection.warnings:
            print(f"WARNING: {warning}", file=sys.stderr)
        wheels = download(selection.keep, args.dest, args.python_version, args.glibc)
    except GpuWheelsError as err:
        print(f"gpu_wheels: {err}", file=sys.stderr)
        return 1
    size = sum(wheel.stat().st_size for wheel in wheels) / 1e6
    dest = str(args.dest).rstrip("/")
    print(
        f"{len(wheels)} wheels, {size:.1f} MB in {dest}/ for CPython {args.python_version}: installs on the GPU "
        f"machine with `python3 scripts/gpu/gpu_runner.py --checkout . --wheels {dest} ...`"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
