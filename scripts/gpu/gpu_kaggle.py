"""`make gpu-kaggle`: the GPU suite on Kaggle's free "GPU T4 x2", at the commit checked out, imported into the course.

That commit must be pushed: the kernel clones the public repository named in pyproject.toml's [tool.course]
(`--repo URL` for a fork). It drives the official `kaggle` CLI found on PATH (`pip install "kaggle==2.2.5" six`; tests
put a fake one first) and needs KAGGLE_API_TOKEN, or KAGGLE_USERNAME and KAGGLE_KEY (README, "GPU CI").

  1. writes build/gpu-kaggle/<slug>/kernel/: kernel-metadata.json (a private script kernel, internet on,
     machine_shape NvidiaTeslaT4) and scripts/gpu/gpu_runner.py with the repository, commit and options filled in;
  2. `kaggle kernels push -p DIR --accelerator NvidiaTeslaT4 -t KAGGLE_TIMEOUT_S`;
  3. polls `kaggle kernels status` every KAGGLE_POLL_S seconds up to KAGGLE_DEADLINE_S after the push;
  4. downloads /kaggle/working with `kaggle kernels output` into build/gpu-kaggle/<slug>/output/, checks that its
     manifest is of the commit pushed, and imports a passing run (scripts/gpu/import_gpu_run.py);
  5. deletes the kernel, whatever happened after the push (a push that failed created none), and prints one
     closing line.

Kaggle's known traps each end in a clear message and a non-zero exit: "Kernel push error: ..." printed with exit
code 0, the 2-GPU-sessions limit, HTTP 429/500 answered as HTML pages (retried KAGGLE_RETRIES times with backoff
from KAGGLE_RETRY_S seconds), a crashed kernel left RUNNING past -t, a kernel in ERROR (the end of its log is
shown), an output from another commit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from kaggle_cli import (
    ACCELERATOR,
    HOW_TO_CREDENTIALS,
    Settings,
    Stop,
    download,
    kaggle_cli,
    kaggle_user,
    kernel_deleted_afterwards,
    push,
    wait_for,
)
from paths import ROOT

RUNNER = Path(__file__).resolve().parent / "gpu_runner.py"
WORK = ROOT / "build" / "gpu-kaggle"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def resolve_commit(given: str | None) -> str:
    """The full sha of ``given`` (a sha, a short sha, a branch; default HEAD): the runner's manifest records the full
    one, and the output is checked against it. A full sha this checkout lacks is taken as it is."""
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{given or 'HEAD'}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode == 0:
        return done.stdout.strip()
    if given and re.fullmatch(r"[0-9a-f]{40}", given):
        return given
    raise Stop(f"--sha {given or 'HEAD'} names no commit of this checkout: give a full sha, or fetch it first.")


def repository_url() -> str:
    import tomllib

    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
    return f"https://github.com/{course['repository']}.git"


def warn_if_not_pushed(sha: str) -> None:
    try:
        dirty, pushed = git("status", "--porcelain", "--untracked-files=no"), git("branch", "-r", "--contains", sha)
    except subprocess.CalledProcessError:
        dirty, pushed = "", ""
    if dirty:
        print("note: uncommitted changes are not part of the run: the kernel clones the commit", flush=True)
    if not pushed:
        print(f"note: no remote branch here contains {sha[:7]}: push it, or the kernel's clone will fail", flush=True)


def run_label(env: dict[str, str]) -> str:
    """What tells this run's kernel from another of the same commit: the Actions run, else the time."""
    return env.get("GITHUB_RUN_ID") or time.strftime("%m%d%H%M%S", time.gmtime())


def kernel_slug(sha: str, label: str) -> str:
    """Lower case, digits and hyphens only: an underscore breaks `kaggle kernels status`. One kernel per run: pushing
    to an existing kernel starts a second session, and status and output then answer for the newest only."""
    return re.sub(r"[^a-z0-9-]+", "-", f"course-gpu-ci-{sha[:7]}-{label}".lower())


def kernel_metadata(user: str, slug: str) -> dict:
    # No docker_image: a pinned image silently overrode the accelerator (kaggle-cli #1197); the run records the
    # image's versions instead. The title is the slug with spaces: the CLI warns when slugify(title) != slug.
    return {
        "id": f"{user}/{slug}",
        "title": slug.replace("-", " "),
        "code_file": RUNNER.name,
        "language": "python",
        "kernel_type": "script",
        "is_private": True,
        "enable_gpu": True,
        "enable_internet": True,
        "machine_shape": ACCELERATOR,
        "dataset_sources": [],
        "competition_sources": [],
        "kernel_sources": [],
        "model_sources": [],
    }


def write_kernel(folder: Path, user: str, slug: str, sha: str, repo: str, lessons: list[str]) -> Path:
    """The kernel folder `kaggle kernels push` uploads: its metadata and the runner, configured."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "kernel-metadata.json").write_text(json.dumps(kernel_metadata(user, slug), indent=2) + "\n")
    config = {"repo": repo, "sha": sha, "out": "/kaggle/working", "require_cuda": True, "lessons": lessons}
    source, found = re.subn(
        r"^CONFIG: dict = \{\}.*$", lambda _: f"CONFIG: dict = {json.dumps(config)}", RUNNER.read_text(), flags=re.M
    )
    if found != 1:
        raise Stop(f"{RUNNER} must hold exactly one line starting with 'CONFIG: dict = {{}}'")
    (folder / RUNNER.name).write_text(source)
    return folder


def log_tail(output: Path, lines: int = 40) -> str:
    """The end of the kernel's log (Kaggle writes it as <slug>.log: a JSON list of stream records, or text)."""
    logs = sorted(output.glob("*.log"))
    if not logs:
        return "(Kaggle returned no log)"
    text = logs[0].read_text(errors="replace")
    try:
        text = "".join(record.get("data", "") for record in json.loads(text))
    except (ValueError, AttributeError, TypeError):
        pass
    return "\n".join(text.rstrip().splitlines()[-lines:])


def checked_manifest(output: Path, sha: str) -> dict:
    path = output / "manifest.json"
    if not path.exists():
        raise Stop(
            f"the kernel's output has no manifest.json (it has: {sorted(p.name for p in output.iterdir())}): "
            f"the runner stopped before writing it. The end of its log:\n{log_tail(output)}"
        )
    manifest = json.loads(path.read_text())
    if manifest.get("sha") != sha:
        raise Stop(
            f"the output is of commit {manifest.get('sha')}, not of {sha} pushed: an older kernel "
            "version's output. Nothing is imported."
        )
    return manifest


def closing_line(outcome: str, manifest: dict | None, started: float) -> str:
    manifest = manifest or {}
    tests = manifest.get("tests", {})
    gpus = ", ".join(manifest.get("gpus") or []) or "GPUs unknown"
    used = manifest.get("seconds")
    minutes = f"{used / 60:.1f} GPU min used" if used is not None else "GPU time unknown"
    return (
        f"gpu-kaggle {outcome}: {tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, on {gpus}; "
        f"{minutes}, {(time.monotonic() - started) / 60:.1f} min in all"
    )


def run(args: argparse.Namespace, env: dict[str, str]) -> int:
    started = time.monotonic()
    manifest = None
    try:
        settings = Settings.from_env(env)
        cli = kaggle_cli()
        if not (env.get("KAGGLE_API_TOKEN") or (env.get("KAGGLE_USERNAME") and env.get("KAGGLE_KEY"))):
            raise Stop(HOW_TO_CREDENTIALS)
        user = kaggle_user(cli, env, settings)
        sha = resolve_commit(args.sha)
        warn_if_not_pushed(sha)
        slug = kernel_slug(sha, run_label(env))
        work = args.work / slug
        kernel = kernel_metadata(user, slug)["id"]
        write_kernel(work / "kernel", user, slug, sha, args.repo or repository_url(), args.lessons)
        deadline = time.monotonic() + settings.deadline_s
        print(f"pushing {kernel}: commit {sha[:7]} on {ACCELERATOR}, -t {settings.timeout_s} s", flush=True)
        # The workflow's clean-up step deletes this kernel if the job itself is cancelled or killed.
        (args.work / "kernel-id.txt").write_text(kernel + "\n")
        with kernel_deleted_afterwards(cli, kernel, settings):
            push(cli, work / "kernel", settings)
            pushed = time.monotonic()
            status = wait_for(cli, kernel, settings, pushed, deadline)
            try:
                download(cli, kernel, work / "output", settings, deadline)
            except Stop as failed:
                if status != "ERROR":
                    raise
                print(f"the output of the failed kernel could not be downloaded: {failed}", flush=True)
            if status == "ERROR":
                found = work / "output" / "manifest.json"
                manifest = json.loads(found.read_text()) if found.exists() else None
                failures = "; ".join((manifest or {}).get("failures", [])) or "see the log"
                raise Stop(
                    f"the kernel ended in ERROR ({failures}); what it returned is in {work / 'output'}. "
                    f"The end of its log:\n{log_tail(work / 'output')}"
                )
            if status != "COMPLETE":
                raise Stop(f"the kernel ended {status}: someone cancelled it on kaggle.com")
            manifest = checked_manifest(work / "output", sha)
            if manifest.get("status") != "passed":
                raise Stop(
                    f"the run failed: {'; '.join(manifest.get('failures', [])) or 'see its logs'} "
                    f"(everything is in {work / 'output'})"
                )
            from import_gpu_run import ImportRefused, import_run  # the course's environment: torch, nbformat

            try:
                print(import_run(work / "output", args.import_to), flush=True)
            except ImportRefused as refused:
                raise Stop(f"the run passed but was not imported: {refused}") from None
    except Stop as stop:
        print(f"gpu-kaggle: {stop}", file=sys.stderr, flush=True)
        print(closing_line("FAILED", manifest, started), flush=True)
        return 1
    print(closing_line("passed", manifest, started), flush=True)
    return 0


def stop_on_sigterm(signum, frame) -> None:
    """A cancelled job gets SIGTERM: leave through kernel_deleted_afterwards, which deletes the kernel."""
    raise Stop(f"stopped by signal {signum} (the job was cancelled or timed out)")


def main(argv: list[str] | None = None) -> int:
    previous = signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        return run(parse(argv), dict(os.environ))
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", help="the repository the kernel clones (default: [tool.course] on GitHub)")
    parser.add_argument("--sha", help="the commit to run (default: the one checked out)")
    parser.add_argument("--lessons", nargs="*", default=[], metavar="NN", help="only these lessons (default: all)")
    parser.add_argument("--work", type=Path, default=WORK, help="where the kernel folder and its output go")
    parser.add_argument("--import-to", type=Path, default=ROOT, help="the course the passing run is imported into")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
