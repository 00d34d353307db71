"""Releases: the version, the API listing, the changelog, every setup cell and the tag agree.

The end-to-end test runs `scripts/course/release.py` in a throw-away git repository holding a copy of this working
tree, so it checks what `make release` really writes and tags, without touching this checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import release
import wheel_check
from nbtools import SETUP_RE, course_config, lesson_sources, read_version
from paths import STUDENT

import colab_gpu
from tests.conftest import requires_source

ROOT = Path(__file__).resolve().parents[2]


def test_api_listing_is_the_public_api_of_this_version():
    listed_version, listed = release.read_listing()
    assert listed_version == colab_gpu.__version__, (
        f"docs/api.txt is for {listed_version}, colab_gpu.__version__ is {colab_gpu.__version__}: versions change "
        "only through `make release`"
    )
    api = release.api_listing()
    broken, added = release.api_changes(listed, api)
    needed = release.required_bump(colab_gpu.__version__, listed, api)
    assert (broken, added) == ([], []), (
        f"colab_gpu's public API changed since {colab_gpu.__version__} without a version bump "
        f"(removed or changed: {broken}; added: {added}). Notebooks install the published release, so a lesson "
        f"that uses this API needs a new one: note it under '## Unreleased' in CHANGELOG.md, commit, then "
        f"`make release VERSION=...` (at least a {needed} bump)."
    )


def test_changelog_has_this_version_and_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert release.UNRELEASED in text
    assert re.search(rf"^## {re.escape(colab_gpu.__version__)} \(", text, re.M), (
        f"CHANGELOG.md has no section for {colab_gpu.__version__}"
    )


def test_package_and_checkout_agree_on_the_version():
    assert read_version(ROOT) == colab_gpu.__version__ == course_config().version


def test_every_setup_cell_installs_this_version():
    config = course_config()
    notebooks = [
        *lesson_sources(),
        *(s.with_suffix(".ipynb") for s in lesson_sources()),
        *sorted(STUDENT.glob("[0-9][0-9]_*.ipynb")),
    ]
    for path in notebooks:
        if path.suffix == ".py":
            text = path.read_text()
        else:
            text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        blocks = SETUP_RE.findall(text)
        assert blocks == [config.setup_block], f"{path.relative_to(ROOT)}: the setup cell is not stamped: `make stamp`"
        assert f'COLAB_GPU = "{colab_gpu.__version__}"' in blocks[0]


def test_tag_of_this_version_if_made_holds_this_version():
    tagged = subprocess.run(
        ["git", "show", f"v{colab_gpu.__version__}:colab_gpu/__init__.py"], cwd=ROOT, capture_output=True, text=True
    )
    if tagged.returncode != 0:
        pytest.skip(f"no tag v{colab_gpu.__version__} in this clone")
    assert f'__version__ = "{colab_gpu.__version__}"' in tagged.stdout


@pytest.mark.parametrize(
    ("current", "old", "new", "expected"),
    [
        ("1.2.3", ["a: function(x)"], ["a: function(x)"], "patch"),
        ("1.2.3", ["a: function(x)"], ["a: function(x)", "b: function()"], "minor"),
        ("1.2.3", ["a: function(x)"], ["a: function(x, y)"], "major"),  # changed = removed + added
        ("1.2.3", ["a: function(x)", "b: function()"], ["a: function(x)"], "major"),
        ("0.2.0", ["a: function(x)"], ["a: function(x, y)"], "minor"),  # before 1.0 a break is a minor bump
        ("0.2.0", ["a: function(x)"], ["a: function(x)", "b: function()"], "minor"),
        ("0.2.0", ["a: function(x)"], ["a: function(x)"], "patch"),
    ],
)
def test_required_bump_follows_semantic_versioning(current, old, new, expected):
    assert release.required_bump(current, old, new) == expected


def test_a_bump_smaller_than_the_api_change_is_refused():
    with pytest.raises(release.ReleaseError, match="needs a major bump, VERSION=1.3.0 is a minor bump"):
        release.check_bump("1.2.3", "1.3.0", ["a: function(x)"], ["a: function()"])
    release.check_bump("1.2.3", "2.0.0", ["a: function(x)"], ["a: function()"])  # enough


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("0.2", "is not X.Y.Z"),
        ("v0.3.0", "is not X.Y.Z"),
        ("0.02.0", "is not X.Y.Z"),
        ("0.0.9", "is not newer than"),
    ],
)
def test_bad_versions_are_refused_with_the_reason(version, message):
    with pytest.raises(release.ReleaseError, match=message):
        release.bump_of("0.1.0", version)


def test_changelog_release_moves_the_notes_and_keeps_an_empty_unreleased_section():
    text = "# Changelog\n\nintro\n\n## Unreleased\n\n- new thing\n\n## 0.1.0 (2026-01-01)\n\n- old\n"
    done = release.release_changelog(text, "0.2.0", "2026-11-23")
    assert done == (
        "# Changelog\n\nintro\n\n## Unreleased\n\n## 0.2.0 (2026-11-23)\n\n- new thing\n\n"
        "## 0.1.0 (2026-01-01)\n\n- old\n"
    )
    with pytest.raises(release.ReleaseError, match="is empty"):
        release.release_changelog(done, "0.3.0", "2026-11-24")


def test_listing_is_stable_text():
    lines = release.api_listing()
    names = [line.split(":")[0].split(".")[0] for line in lines]
    assert names == sorted(names) and set(names) == set(colab_gpu.__all__)  # every public name, in order
    assert any(line.startswith("fit: function(model, train_loader, ") for line in lines)
    assert "DeviceNotAvailableError: exception(RuntimeError)" in lines  # no Python-version-dependent signature
    assert any(line.startswith("checks.train_loop: function(train_epoch_fn, ") for line in lines)  # the second tier


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def scratch_repo(tmp_path_factory) -> Path:
    """A git repository holding this working tree (tracked and untracked files, not ignored ones)."""
    repo = tmp_path_factory.mktemp("release") / "course"
    try:
        wheel_check.copy_checkout(repo)
    except wheel_check.WheelCheckError:
        pytest.skip("not a git checkout")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "copy")
    return repo


def run_release(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # import the copy's colab_gpu
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(
        [sys.executable, "scripts/course/release.py", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@requires_source
def test_make_release_bumps_stamps_commits_and_tags(scratch_repo):
    repo = scratch_repo
    current = read_version(repo)
    major, minor, _ = release.parse_version(current)
    new = f"{major}.{minor + 1}.0"

    refused = run_release(repo, f"{major}.{minor}.{_}")
    assert refused.returncode == 2 and "not newer" in refused.stderr

    changelog = repo / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace("## Unreleased\n", "## Unreleased\n\n- A tested change.\n", 1))
    dirty = run_release(repo, new)
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "note")

    done = run_release(repo, new)
    assert done.returncode == 0, done.stderr
    assert f"released v{new}. Publish: `git push origin v{new}`" in done.stdout
    assert git(repo, "status", "--porcelain") == "", "the release commit holds every file it wrote"
    assert git(repo, "rev-parse", f"v{new}^{{commit}}") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "log", "-1", "--format=%s") == f"Release {new}\n"
    assert read_version(repo) == new
    assert release.read_listing(repo / "docs" / "api.txt")[0] == new
    assert re.search(
        rf"^## {re.escape(new)} \(\d{{4}}-\d\d-\d\d\)\n\n.*A tested change\.", changelog.read_text(), re.M | re.S
    )
    stamped = [
        *(repo / "notebooks").glob("[0-9][0-9]_*.py"),
        *(repo / "notebooks").glob("[0-9][0-9]_*.ipynb"),
        *(repo / "notebooks" / "student").glob("[0-9][0-9]_*.*"),
    ]
    assert len(stamped) == 4 * len(lesson_sources())
    for path in stamped:
        text = path.read_text()
        assert f'COLAB_GPU = \\"{new}\\"' in text or f'COLAB_GPU = "{new}"' in text, path.name
        assert current not in re.findall(r'COLAB_GPU = \\?"([^"\\]+)', text), path.name
    executed = nbformat.read(repo / "notebooks" / lesson_sources()[0].with_suffix(".ipynb").name, as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert f"colab_gpu {new}: " in printed and f"colab_gpu {current}: " not in printed

    again = run_release(repo, new)
    assert again.returncode == 2 and "exists already" in again.stderr


@requires_source
def test_a_release_that_fails_midway_puts_every_file_back(scratch_repo):
    repo = scratch_repo
    head = git(repo, "rev-parse", "HEAD")
    version = read_version(repo)
    major, minor, _ = release.parse_version(version)
    changelog = repo / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace("## Unreleased\n", "## Unreleased\n\n- Another change.\n", 1))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "note 2")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'refused by a hook' >&2\nexit 1\n")
    hook.chmod(0o755)
    try:
        failed = run_release(repo, f"{major}.{minor + 1}.0")
    finally:
        hook.unlink()
    assert failed.returncode == 2 and "refused by a hook" in failed.stderr
    assert git(repo, "status", "--porcelain") == "", "a failed release leaves no file changed"
    assert read_version(repo) == version and git(repo, "rev-parse", "HEAD") != head  # only the note commit
    assert run_release(repo, f"{major}.{minor + 1}.0", "--dry-run").returncode == 0  # and can simply run again


def workflow_line(start: str) -> str:
    """The shell line of .github/workflows/release.yml that starts with ``start``."""
    for line in (ROOT / ".github" / "workflows" / "release.yml").read_text().splitlines():
        if line.strip().startswith(start):
            return line.strip()
    raise AssertionError(f"release.yml has no line starting with {start!r}")


@requires_source
def test_release_workflow_reads_the_version_and_the_notes_this_repository_has(tmp_path):
    # The same shell lines the workflow runs on a tag: the version check and the GitHub release notes.
    version = subprocess.run(["bash", "-c", workflow_line("version=$(sed")], cwd=ROOT, capture_output=True, text=True)
    assert version.returncode == 0
    probe = subprocess.run(
        ["bash", "-c", workflow_line("version=$(sed") + '; echo "$version"'], cwd=ROOT, capture_output=True, text=True
    )
    assert probe.stdout.strip() == colab_gpu.__version__
    awk = workflow_line("awk ").replace("notes.md", str(tmp_path / "notes.md"))
    done = subprocess.run(
        ["bash", "-c", f'version="{colab_gpu.__version__}"; {awk}'], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    notes = (tmp_path / "notes.md").read_text()
    section = (ROOT / "CHANGELOG.md").read_text().split(f"## {colab_gpu.__version__} (", 1)[1].split("\n## ", 1)[0]
    assert notes.strip() and notes.strip() == section.split("\n", 1)[1].strip()
