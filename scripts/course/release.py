"""Cut a release of colab_gpu: ``make release VERSION=X.Y.Z``.

In one commit and one tag, on a clean working tree:
1. checks VERSION (X.Y.Z, newer than ``colab_gpu.__version__``, big enough for what changed in the public
   API: see ``required_bump``) and that CHANGELOG.md's "## Unreleased" section says what changed;
2. writes ``__version__``, moves the Unreleased notes under "## X.Y.Z (date)", rewrites docs/api.txt;
3. restamps every badge and setup cell (``make stamp``: lessons, executed notebooks, student versions);
4. commits "Release X.Y.Z" and makes the annotated tag ``vX.Y.Z``; if a step fails, every file is put back.
Push the tag first: it runs .github/workflows/release.yml, which tests the built wheel and publishes it to
PyPI. Push the branch after that: its lessons install the new version, which must exist by then.

Versions follow semantic versioning (https://semver.org): from 1.0.0 on, a removed or changed public name bumps
the major version, a new one the minor version, anything else the patch version; before 1.0.0 every change
of the public API bumps the minor version.

Usage: python scripts/course/release.py X.Y.Z [--dry-run] [--allow-dirty]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from paths import ROOT  # scripts/ is on the path: run as `python scripts/course/release.py`

API_LISTING = ROOT / "docs" / "api.txt"
CHANGELOG = ROOT / "CHANGELOG.md"
PACKAGE_INIT = ROOT / "colab_gpu" / "__init__.py"
VERSION_RE = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
UNRELEASED = "## Unreleased"
LISTING_HEADER = "# colab_gpu {version}: the public API (colab_gpu.__all__), written by `make release`; do not edit"


class ReleaseError(Exception):
    """A release that must not happen, with what to do instead."""


def parse_version(text: str) -> tuple[int, int, int]:
    match = VERSION_RE.fullmatch(text.strip())
    if match is None:
        raise ReleaseError(f"VERSION={text!r} is not X.Y.Z (three numbers, no leading zeros, e.g. 0.3.0).")
    return tuple(int(part) for part in match.groups())


# --- the public API as text -------------------------------------------------------------------------------


def _parameters(function) -> str:
    """A signature without annotations: names, kinds and defaults (literal defaults only, others as ...)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return "(...)"
    parts, star_done = [], False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_POSITIONAL:
            parts.append(f"*{parameter.name}")
            star_done = True
            continue
        if parameter.kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = parameter.name
        if parameter.default is not parameter.empty:
            literal = isinstance(parameter.default, (bool, int, float, str, type(None)))
            text += f"={parameter.default!r}" if literal else "=..."
        parts.append(text)
    return "(" + ", ".join(parts) + ")"


def _describe(name: str, value) -> list[str]:
    if inspect.isclass(value) and issubclass(value, BaseException):
        # An exception's signature is the builtin one, which Python versions print differently.
        return [f"{name}: exception({', '.join(base.__name__ for base in value.__bases__)})"]
    if inspect.isclass(value):
        lines = [f"{name}: class{_parameters(value)}"]
        for attribute, member in sorted(vars(value).items()):
            if attribute.startswith("_"):
                continue
            if isinstance(member, property):
                lines.append(f"{name}.{attribute}: property")
            elif isinstance(member, (staticmethod, classmethod)):
                lines.append(f"{name}.{attribute}: method{_parameters(member.__func__)}")
            elif inspect.isfunction(member):
                lines.append(f"{name}.{attribute}: method{_parameters(member)}")
        return lines
    if callable(value):
        return [f"{name}: function{_parameters(value)}"]
    if inspect.ismodule(value) and hasattr(value, "__all__"):  # a second tier the lessons call: cg.checks.<name>
        return [
            f"{name}: module",
            *(line for n in sorted(value.__all__) for line in _describe(f"{name}.{n}", getattr(value, n))),
        ]
    return [f"{name}: {type(value).__name__}"]


def api_listing(module_name: str = "colab_gpu") -> list[str]:
    """One line per public name (and per public method or property of a public class, and per name of a public
    module with an ``__all__``, such as ``checks``), sorted."""
    module = importlib.import_module(module_name)
    lines = []
    for name in sorted(module.__all__):
        lines.extend(_describe(name, getattr(module, name)))
    return lines


def read_listing(path: Path = API_LISTING) -> tuple[str, list[str]]:
    """(version, lines) of the committed listing."""
    text = path.read_text().splitlines()
    version = re.match(r"# colab_gpu (\S+):", text[0]) if text else None
    if version is None:
        raise ReleaseError(f"{path} does not start with {LISTING_HEADER.format(version='X.Y.Z')!r}")
    return version.group(1), [line for line in text[1:] if line.strip()]


def write_listing(version: str, lines: list[str], path: Path = API_LISTING) -> None:
    path.write_text("\n".join([LISTING_HEADER.format(version=version), *lines]) + "\n")


def api_changes(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """(removed or changed lines, added lines) between two listings."""
    old_set, new_set = set(old), set(new)
    return sorted(old_set - new_set), sorted(new_set - old_set)


def required_bump(current: str, old: list[str], new: list[str]) -> str:
    """ "major", "minor" or "patch": the smallest bump semantic versioning allows after these API changes."""
    broken, added = api_changes(old, new)
    if parse_version(current)[0] == 0:
        return "minor" if broken or added else "patch"
    return "major" if broken else "minor" if added else "patch"


def bump_of(current: str, new: str) -> str:
    """Which part ``new`` bumps relative to ``current``; raises when ``new`` is not newer."""
    old_parts, new_parts = parse_version(current), parse_version(new)
    if new_parts <= old_parts:
        raise ReleaseError(f"VERSION={new} is not newer than the current version {current}.")
    for part, (a, b) in zip(("major", "minor", "patch"), zip(old_parts, new_parts, strict=True), strict=True):
        if b != a:
            return part
    raise AssertionError("unreachable")


RANK = {"patch": 0, "minor": 1, "major": 2}


def check_bump(current: str, new: str, old: list[str], api: list[str]) -> None:
    needed, done = required_bump(current, old, api), bump_of(current, new)
    if RANK[done] < RANK[needed]:
        broken, added = api_changes(old, api)
        detail = "; ".join(
            filter(
                None,
                [
                    f"removed or changed: {', '.join(line.split(':')[0] for line in broken)}" if broken else "",
                    f"added: {', '.join(line.split(':')[0] for line in added)}" if added else "",
                ],
            )
        )
        raise ReleaseError(
            f"the public API changed since {current} ({detail}): semantic versioning needs a "
            f"{needed} bump, VERSION={new} is a {done} bump."
        )


# --- the changelog ----------------------------------------------------------------------------------------


def release_changelog(text: str, version: str, date: str) -> str:
    """Move the Unreleased notes under "## version (date)", leaving an empty Unreleased section."""
    if UNRELEASED not in text:
        raise ReleaseError(f"{CHANGELOG.name} has no {UNRELEASED!r} section: add one with what changed.")
    head, _, rest = text.partition(UNRELEASED)
    body, heading, tail = rest.partition("\n## ")
    notes = body.strip()
    if not notes:
        raise ReleaseError(
            f"{CHANGELOG.name}'s {UNRELEASED!r} section is empty: write what changed for users before releasing."
        )
    if re.search(rf"^## {re.escape(version)} ", text, re.M):
        raise ReleaseError(f"{CHANGELOG.name} already has a section for {version}.")
    return f"{head}{UNRELEASED}\n\n## {version} ({date})\n\n{notes}\n{heading}{tail}".rstrip() + "\n"


# --- the release ------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def write_version(version: str, path: Path = PACKAGE_INIT) -> None:
    text = path.read_text()
    updated, count = re.subn(r'^__version__ = "[^"]*"$', f'__version__ = "{version}"', text, flags=re.M)
    if count != 1:
        raise ReleaseError(f'{path} must have exactly one `__version__ = "..."` line (found {count}).')
    path.write_text(updated)


def release(version: str, *, dry_run: bool = False, allow_dirty: bool = False, today: str | None = None) -> str:
    """Cut the release; returns the tag. ``dry_run`` checks everything and changes nothing."""
    sys.path.insert(0, str(ROOT))
    from nbtools import read_version

    current = read_version(ROOT)
    parse_version(version)
    tag = f"v{version}"
    if git("tag", "--list", tag).strip():
        raise ReleaseError(f"the tag {tag} exists already: pick the next version.")
    if not allow_dirty and git("status", "--porcelain").strip():
        raise ReleaseError(
            "the working tree has uncommitted changes: commit or stash them, so the release commit "
            "holds the release alone."
        )
    listed_version, listed = read_listing()
    if listed_version != current:
        raise ReleaseError(
            f"{API_LISTING.relative_to(ROOT)} lists the API of {listed_version}, but __version__ is "
            f"{current}: the last release did not go through `make release`; restore the file."
        )
    api = api_listing()
    check_bump(current, version, listed, api)
    changelog = release_changelog(CHANGELOG.read_text(), version, today or datetime.date.today().isoformat())
    who = subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], cwd=ROOT, capture_output=True, text=True)
    if who.returncode != 0:  # the commit would fail after every file was written
        raise ReleaseError(
            "git does not know who commits here: `git config user.name ...` and "
            "`git config user.email ...`, then rerun."
        )
    if dry_run:
        return tag

    written = ["colab_gpu/__init__.py", "CHANGELOG.md", str(API_LISTING.relative_to(ROOT)), "notebooks", "README.md"]
    try:
        write_version(version)
        CHANGELOG.write_text(changelog)
        write_listing(version, api)
        import stamp_notebooks

        stamp_notebooks.stamp_lessons()
        git("add", "-A", *written)
        git("commit", "-q", "-m", f"Release {version}")
    except BaseException:
        # Nothing half-done: put every file back as it was, so the same command can simply run again.
        subprocess.run(["git", "reset", "-q", "--", *written], cwd=ROOT)
        subprocess.run(["git", "checkout", "--", *written], cwd=ROOT)
        raise
    try:
        git("tag", "-a", tag, "-m", f"colab_gpu {version}")
    except ReleaseError as err:
        raise ReleaseError(
            f"committed 'Release {version}' but could not tag it ({err}); fix that, then run "
            f"`git tag -a {tag} -m 'colab_gpu {version}'`."
        ) from err
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="X.Y.Z")
    parser.add_argument("--dry-run", action="store_true", help="check everything, change nothing")
    parser.add_argument("--allow-dirty", action="store_true", help="release with uncommitted changes in the tree")
    args = parser.parse_args(argv)
    try:
        tag = release(args.version, dry_run=args.dry_run, allow_dirty=args.allow_dirty)
    except ReleaseError as err:
        print(f"make release: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(f"{tag}: every check passed (dry run, nothing changed)")
    else:
        branch = git("branch", "--show-current").strip()
        print(
            f"released {tag}. Publish: `git push origin {tag}`; once release.yml has put {args.version} on PyPI, "
            f"`git push origin {branch}` (the lessons on {branch} install {args.version}: it must exist first)."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
