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
  4. downloads the rest, one wheel each and no dependencies, into --dest (emptied of older wheels first).

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
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from gpu_runner import NOT_FOR_THE_SUITE, PINNED
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from paths import ROOT

DEFAULT_FREEZE = Path(__file__).resolve().parent / "assets" / "gpu-image-freeze.txt"
DEFAULT_DEST = Path(".whl")
# What the GPU suite needs beyond a GPU image's scientific stack: nbval runs the lessons under pytest through
# nbclient, ipykernel and nbformat; jupytext pairs each lesson's .py with its .ipynb; nbconvert and ipywidgets are
# what the lessons and scripts/gpu/gpu_suite.py import. Colab's, Kaggle's and a cluster's images have torch, numpy,
# pytest, matplotlib, scikit-learn and transformers, but these only in part, at other versions, or not at all.
TOOLING = ("nbformat", "nbclient", "nbconvert", "nbval", "jupytext", "ipykernel", "ipywidgets")
# The image's own builds, whatever it holds: a wheel of one of these in the folder could replace the torch (CUDA)
# build, or the numpy and pytest it was built and tested with, that learners have.
NEVER = frozenset({*PINNED, "numpy", "pytest"})
# The newest glibc a wheel may need: Ubuntu 22.04's, 2.35; its wheels run on a newer one (the lent H100 image's 2.39).
DEFAULT_GLIBC = "2.35"
# Lines that a machine's pip configuration may add (find-links folders that do not exist there).
PIP_NOISE = re.compile(r"is ignored: it is neither a file nor a directory")


class GpuWheelsError(Exception):
    """Something the maintainer must fix: a pin missing from requirements.txt, a failing pip."""


@dataclass
class Dist:
    """One package of pip's resolved closure: its version and its requirements (Requires-Dist) as written."""

    name: str
    version: str
    requires: list[str] = field(default_factory=list)


@dataclass
class Selection:
    """What select() decided, and what main() prints of it."""

    keep: list[tuple[str, str]]  # (name, version) to download, by name
    notes: list[str]  # what the image had but the tooling needs newer (or could not tell)
    warnings: list[str]  # what the install on the GPU machine will fail on
    unresolved: list[str]  # requirements the target needs that pip's closure lacks (markers of another Python)
    from_image: list[str] = field(default_factory=list)  # `name version` of what the image has and the tooling needs


def requirement_lines(requirements: Path) -> list[Requirement]:
    """requirements.txt's requirements (options such as --index-url and -e left aside)."""
    found = []
    for line in requirements.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if not spec or spec.startswith("-"):
            continue
        try:
            found.append(Requirement(spec))
        except InvalidRequirement as err:
            raise GpuWheelsError(f"{requirements}: cannot read {spec!r}: {err}") from None
    return found


def read_pins(requirements: Path, names: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``name==version`` of each of ``names`` in requirements.txt, by canonical name; GpuWheelsError if one is not
    pinned there."""
    pins = {canonicalize_name(req.name): str(req) for req in requirement_lines(requirements)}
    wanted = [canonicalize_name(name) for name in names]
    lacking = [name for name in wanted if name not in pins or "==" not in pins[name]]
    if lacking:
        raise GpuWheelsError(
            f"{requirements} pins no version of {', '.join(lacking)}: the GPU suite needs every one of "
            f"{', '.join(TOOLING)} pinned there (name==version)."
        )
    return {name: pins[name] for name in wanted}


def runner_pins(requirements: Path, image: dict[str, str | None]) -> dict[str, str]:
    """The pins scripts/gpu/gpu_runner.py installs on that image: requirements.txt's, less what the image has, less
    torch, torchvision and the tools the suite does not use (gpu_runner.NOT_FOR_THE_SUITE)."""
    pins = read_pins(requirements, TOOLING)
    for req in requirement_lines(requirements):
        name = canonicalize_name(req.name)
        if name not in PINNED and name not in NOT_FOR_THE_SUITE:
            pins.setdefault(name, str(req))
    return {name: spec for name, spec in pins.items() if name not in image}


def parse_freeze(text: str) -> dict[str, str | None]:
    """An image's `pip freeze` (or `pip list --format=freeze`): version by canonical name, None where it does not
    say (``name @ URL`` lines other than a wheel's, bare names, editable installs)."""
    image: dict[str, str | None] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("-e ", "--editable")):  # -e git+https://...#egg=name
            egg = re.search(r"#egg=([A-Za-z0-9._-]+)", line)
            if egg:
                image[canonicalize_name(egg.group(1))] = None
            continue
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        if " @ " in line:  # a direct URL: its version is known where it names a wheel
            name, url = (part.strip() for part in line.split(" @ ", 1))
            wheel = re.search(r"/[^/]+?-([^-/]+)-[^/]*\.whl$", url)
            image[canonicalize_name(name)] = wheel.group(1) if wheel else None
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)\s*(?:===?\s*(\S+))?", line)
        if match:
            image[canonicalize_name(match.group(1))] = match.group(2)
    return image


def target_environment(python_version: str) -> dict[str, str]:
    """Marker values of CPython ``python_version`` (3.12 or 3.12.3) on Linux x86-64: the GPU image's."""
    parts = python_version.split(".")
    if len(parts) not in (2, 3) or not all(part.isdigit() for part in parts):
        raise GpuWheelsError(f"--python-version {python_version!r}: give it as 3.12 (or 3.12.3)")
    full = ".".join(parts + ["0"] * (3 - len(parts)))
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "platform_release": "",
        "platform_version": "",
        "python_full_version": full,
        "python_version": ".".join(parts[:2]),
        "sys_platform": "linux",
    }


def applies(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    """Whether ``req`` holds on the target, for a package asked for with ``extras``."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in {"", *extras})


def only_for_extras(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    """Whether ``req`` comes with one of ``extras`` alone (not with the package itself)."""
    return req.marker is not None and not req.marker.evaluate({**env, "extra": ""}) and applies(req, env, extras)


def satisfies(version: str | None, reqs: list[tuple[Requirement, str]]) -> bool:
    """Whether the image's ``version`` meets every requirement on the package (an unknown one, only none)."""
    if version is None:
        return all(not str(req.specifier) for req, _ in reqs)
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return all(req.specifier.contains(parsed, prereleases=True) for req, _ in reqs)


def describe(reqs: list[tuple[Requirement, str]]) -> str:
    """`X>=2 (nbconvert), X<4 (jupyter-client)`: the requirements on a package and who sets them."""
    return ", ".join(sorted(f"{req.name}{req.specifier or ''} ({by})" for req, by in reqs))


def needed(
    closure: dict[str, Dist], roots: list[str], env: dict[str, str], image: dict[str, str | None], dropped: set[str]
) -> tuple[dict[str, list[tuple[Requirement, str]]], list[str]]:
    """Walk the closure from ``roots`` on the target: every package reached and the requirements on it. The walk
    does not go through what is ``dropped`` (the image's copy brings its own dependencies), except into what the
    extras asked of it add; requirements reached that the closure lacks or does not meet come back as unresolved."""
    reqs: dict[str, list[tuple[Requirement, str]]] = {}
    extras: dict[str, set[str]] = {}
    done: dict[str, frozenset[str]] = {}
    unresolved: list[str] = []
    queue = [(Requirement(root), "requirements.txt") for root in roots]
    while queue:
        req, by = queue.pop(0)
        name = canonicalize_name(req.name)
        if all(str(req) != str(seen) or by != seen_by for seen, seen_by in reqs.get(name, [])):
            reqs.setdefault(name, []).append((req, by))
        extras.setdefault(name, set()).update(req.extras)
        dist = closure.get(name)
        if dist is None or not req.specifier.contains(dist.version, prereleases=True):
            if name not in NEVER and not (name in image and satisfies(image[name], [(req, by)])):
                unresolved.append(str(Requirement(f"{req.name}{req.specifier}")))
            continue
        if done.get(name) == frozenset(extras[name]) or name in NEVER:
            continue
        done[name] = frozenset(extras[name])
        for line in dist.requires:
            child = Requirement(line)
            if name in dropped:
                if only_for_extras(child, env, extras[name]):
                    queue.append((child, dist.name))
            elif applies(child, env, extras[name]):
                queue.append((child, dist.name))
    return reqs, unresolved


def select(closure: dict[str, Dist], roots: list[str], image: dict[str, str | None], python_version: str) -> Selection:
    """What to download: the packages the roots need on the target that the image lacks, or has at a version some
    requirement in the closure refuses; never NEVER. Pure: ``closure`` from pip's report, ``image`` from a freeze."""
    env = target_environment(python_version)
    dropped: set[str] = set()
    while True:  # dropping one package can free others that only it needed: until nothing changes
        reqs, unresolved = needed(closure, roots, env, image, dropped)
        more = {name for name in reqs if name in NEVER or (name in image and satisfies(image[name], reqs[name]))}
        if more <= dropped:
            break
        dropped |= more
    keep, notes, warnings, from_image = [], [], [], []
    for name in sorted(reqs):
        on_it, has = reqs[name], image.get(name)
        shown = has if has is not None else "(version unknown)"
        if name in image and satisfies(has, on_it):
            from_image.append(f"{name} {shown}")
        elif name in NEVER:
            warnings.append(
                (f"image has {name} {shown}" if name in image else f"the image has no {name}")
                + f", the tooling needs {describe(on_it)}, and {name} is never carried (the image's own build is "
                "what the course tests): the install there will fail"
            )
        elif name not in dropped and name in closure:
            keep.append((closure[name].name, closure[name].version))
            if name in image:
                notes.append(f"image has {name} {shown}, the tooling needs {describe(on_it)}: its wheel is included")
    return Selection(keep, notes, warnings, sorted(set(unresolved)), from_image)


def closure_from_report(report: dict) -> dict[str, Dist]:
    """pip's installation report (`pip install --dry-run --report`) as Dists by canonical name."""
    closure = {}
    for item in report.get("install", []):
        meta = item["metadata"]
        closure[canonicalize_name(meta["name"])] = Dist(
            meta["name"], meta["version"], list(meta.get("requires_dist") or [])
        )
    return closure


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


def download(keep: list[tuple[str, str]], dest: Path, python_version: str, glibc: str) -> list[Path]:
    """One wheel of each (name, version), no dependencies, into ``dest`` in place of its older wheels. They are
    downloaded beside it first: a download that fails leaves the wheels ``dest`` had."""
    dest.mkdir(parents=True, exist_ok=True)
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
            old.unlink()
        for wheel in Path(scratch).glob("*.whl"):
            shutil.move(str(wheel), dest / wheel.name)
    return sorted(dest.glob("*.whl"))


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
