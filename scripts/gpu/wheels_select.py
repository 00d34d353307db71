"""Which wheels a GPU image lacks for the GPU suite: pure decisions, from requirements.txt, the image's `pip freeze`
and pip's resolved closure (`gpu_wheels.py` runs pip and downloads what `select` keeps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from runner_steps import NOT_FOR_THE_SUITE, PINNED

# What the GPU suite needs beyond a GPU image's scientific stack: nbval runs the lessons under pytest through
# nbclient, ipykernel and nbformat; jupytext pairs each lesson's .py with its .ipynb; nbconvert and ipywidgets are
# what the lessons and scripts/gpu/gpu_suite.py import. Colab's, Kaggle's and a cluster's images have torch, numpy,
# pytest, matplotlib, scikit-learn and transformers, but these only in part, at other versions, or not at all.
TOOLING = ("nbformat", "nbclient", "nbconvert", "nbval", "jupytext", "ipykernel", "ipywidgets")
# The image's own builds, whatever it holds: a wheel of one of these in the folder could replace the torch (CUDA)
# build, or the numpy and pytest it was built and tested with, that learners have.
NEVER = frozenset({*PINNED, "numpy", "pytest"})


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
    torch, torchvision and the tools the suite does not use (runner_steps.NOT_FOR_THE_SUITE)."""
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
