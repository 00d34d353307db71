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
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from paths import ROOT

RUNNER = Path(__file__).resolve().parent / "gpu_runner.py"
WORK = ROOT / "build" / "gpu-kaggle"
ACCELERATOR = "NvidiaTeslaT4"  # the CLI's name for "GPU T4 x2" (kaggle-cli #1196/#1198)
HOW_TO_CREDENTIALS = (
    "no Kaggle credentials: set KAGGLE_API_TOKEN (kaggle.com > Settings > API > Generate New "
    "Token, on a phone-verified account), or KAGGLE_USERNAME and KAGGLE_KEY; README, 'GPU CI'."
)
FINAL = {"COMPLETE", "ERROR", "CANCEL_REQUESTED", "CANCEL_ACKNOWLEDGED"}
# What kaggle-cli 2.2.x prints for a failure worth retrying: its format_http_error() lines ("429 Client Error: Too
# Many Requests", "You have been rate limited", "This is a problem on Kaggle's side"), an HTML page, the JSON decoder's
# complaint about one ("Expecting value: line 1 column 1"), and network trouble.
HTTP_TROUBLE = re.compile(
    r"<html|<!doctype|\b(429|500|502|503|504)\b|too many requests|internal server error|"
    r"service unavailable|bad gateway|gateway time|rate.?limit|kaggle's side|try again later|"
    r"expecting value: line 1 column 1|max retries exceeded|timed? ?out|"
    r"connection (reset|aborted|refused|error)|quota exceeded",
    re.I,
)
ERROR_PAGE = re.compile(r"<html|<!doctype", re.I)  # an HTTP error answered as a web page, whatever the exit code
CALL_TIMEOUT_S = 300  # one CLI call; a hung one is retried like an HTTP error, not waited on for hours
SESSION_LIMIT = re.compile(r"(maximum|max)\b.*\bGPU session count of (\d+) reached", re.I)


class Stop(Exception):
    """The run cannot go on; the message says why and what to do."""


class PushFailed(Stop):
    """Kaggle answered the push with a failure, so it created no kernel: there is nothing to delete."""


NOTHING_TO_DELETE = "the push failed, so no kernel was created on Kaggle: nothing to delete"


@dataclass
class Settings:
    deadline_s: float = 3 * 3600.0  # from the push: queue + run + a margin
    poll_s: float = 60.0
    timeout_s: int = 2 * 3600  # the kernel's own limit (-t): an estimated full run is well under an hour
    retries: int = 5
    retry_s: float = 20.0

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Settings:
        names = {
            "deadline_s": "KAGGLE_DEADLINE_S",
            "poll_s": "KAGGLE_POLL_S",
            "timeout_s": "KAGGLE_TIMEOUT_S",
            "retries": "KAGGLE_RETRIES",
            "retry_s": "KAGGLE_RETRY_S",
        }
        values = {}
        for field, name in names.items():
            if env.get(name):
                kind = type(getattr(cls, field))
                try:
                    values[field] = kind(env[name])
                except ValueError:
                    raise Stop(f"{name}={env[name]!r} is not a number of seconds (or tries).") from None
        return cls(**values)


def pause(seconds: float) -> None:
    """Wait between polls and retries (where a cancelled job's SIGTERM usually arrives)."""
    time.sleep(seconds)


def kaggle_cli() -> str:
    found = shutil.which("kaggle")
    if found is None:
        raise Stop('no `kaggle` command on PATH: pip install "kaggle==2.2.5" six (or put a pinned one first on PATH).')
    return found


def call(cli: str, args: list[str], settings: Settings, deadline: float) -> str:
    """Run `kaggle ARGS`; retry with backoff while it fails with an HTTP error page; return its output."""
    for attempt in range(settings.retries + 1):
        code, output = call_once(cli, args)
        if code == 0 and not ERROR_PAGE.search(output):
            return output
        transient = bool(HTTP_TROUBLE.search(output))
        wait = settings.retry_s * 2**attempt
        if not transient or attempt == settings.retries or time.monotonic() + wait > deadline:
            raise Stop(f"`kaggle {' '.join(args)}` failed after {attempt + 1} tries: {readable(output)}")
        print(f"kaggle {args[0]} {args[1]}: {readable(output, 120)}; again in {wait:.0f} s", flush=True)
        pause(wait)
    raise AssertionError("unreachable")


def call_once(cli: str, args: list[str]) -> tuple[int | None, str]:
    """Run `kaggle ARGS` once: its exit code (None when it gave no answer in CALL_TIMEOUT_S) and its output."""
    try:
        done = subprocess.run([cli, *args], capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"no answer in {CALL_TIMEOUT_S} s (timed out)"
    return done.returncode, (done.stdout + done.stderr).strip()


def readable(output: str, limit: int = 600) -> str:
    """A failed call's output as one line: a traceback from its exception on, an HTML error page as its text."""
    lines = output.splitlines()
    raised = [i for i, line in enumerate(lines) if re.match(r"[\w.]+(Error|Exception)\b", line)]
    output = "\n".join(lines[raised[-1] :]) if raised else output
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"(?is)<(script|style).*?</\1>", " ", output)))
    text = " ".join(text.split()) or "(no output)"
    return text if len(text) <= limit else text[:limit] + "..."


def kaggle_user(cli: str, env: dict[str, str], settings: Settings) -> str:
    """The Kaggle account the kernel belongs to (its id is user/slug)."""
    if env.get("KAGGLE_USERNAME") and (env.get("KAGGLE_KEY") or env.get("KAGGLE_API_TOKEN")):
        return env["KAGGLE_USERNAME"]
    if not env.get("KAGGLE_API_TOKEN"):
        raise Stop(HOW_TO_CREDENTIALS)
    shown = call(cli, ["config", "view"], settings, time.monotonic() + settings.deadline_s)
    found = re.search(r"^- username: (\S+)", shown, re.M)
    if found is None or found.group(1) == "None":
        raise Stop(
            "KAGGLE_API_TOKEN is set but Kaggle does not accept it (`kaggle config view` names no user): "
            "generate a new token at kaggle.com > Settings > API."
        )
    return found.group(1)


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


def push(cli: str, folder: Path, settings: Settings) -> None:
    """Push the kernel folder once (a retried push would start a second session); PushFailed when Kaggle refuses."""
    args = ["kernels", "push", "-p", str(folder), "--accelerator", ACCELERATOR, "-t", str(settings.timeout_s)]
    code, output = call_once(cli, args)
    if code is None:  # no answer: the push may have reached Kaggle, so the kernel is deleted as after any push
        raise Stop(f"`kaggle {' '.join(args)}` failed: {output}")
    if code != 0 or ERROR_PAGE.search(output):  # no network, an HTTP error
        raise PushFailed(
            f"`kaggle {' '.join(args)}` failed: {readable(output)} "
            "(check this machine's network and the Kaggle credentials, then run again)"
        )
    print(output, flush=True)
    limit = SESSION_LIMIT.search(output)
    if limit:
        raise PushFailed(
            f"Kaggle runs at most {limit.group(2)} GPU sessions at once per account and yours are all busy: "
            "wait for them, or stop one at kaggle.com/code (Your Work), then run again."
        )
    error = re.search(r"Kernel push error:?\s*(.*)", output)
    if error:  # the CLI prints this and still exits 0
        raise PushFailed(f"Kaggle refused the kernel: {error.group(1).strip() or output}")


def status_of(output: str) -> str:
    found = re.search(r'has status "(?:KernelWorkerStatus\.)?([A-Z_]+)"', output)
    if found is None:
        raise Stop(f"`kaggle kernels status` said something unexpected: {readable(output)}")
    return found.group(1)


def wait_for(cli: str, kernel: str, settings: Settings, pushed: float, deadline: float) -> str:
    """Poll until the kernel reaches a final status; Stop at the deadline."""
    last = None
    while True:
        status = status_of(call(cli, ["kernels", "status", kernel], settings, deadline))
        if status != last:
            print(f"{time.monotonic() - pushed:7.0f} s  {kernel}: {status}", flush=True)
            last = status
        if status in FINAL:
            return status
        if time.monotonic() + settings.poll_s > deadline:
            elapsed = time.monotonic() - pushed
            past = (
                f", past its own -t limit of {settings.timeout_s} s: a crashed kernel that Kaggle did not stop"
                if elapsed > settings.timeout_s
                else ""
            )
            raise Stop(
                f"the kernel is still {status} after {elapsed:.0f} s "
                f"(KAGGLE_DEADLINE_S={settings.deadline_s:.0f}){past}; it is deleted now."
            )
        pause(settings.poll_s)


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


def download(cli: str, kernel: str, output: Path, settings: Settings, deadline: float) -> None:
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    call(cli, ["kernels", "output", kernel, "-p", str(output), "-o"], settings, deadline)


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


def delete(cli: str, kernel: str, settings: Settings) -> None:
    """Delete the kernel, retrying while Kaggle answers with an HTTP error."""
    try:
        call(cli, ["kernels", "delete", kernel, "--yes"], settings, time.monotonic() + 10 * settings.retry_s + 60)
        print(f"deleted the kernel {kernel}", flush=True)
    except Stop as failed:
        print(f"could not delete the kernel {kernel} (delete it at kaggle.com/code): {failed}", flush=True)


@contextmanager
def kernel_deleted_afterwards(cli: str, kernel: str, settings: Settings) -> Iterator[None]:
    """Delete the pushed kernel however the block ends (a Stop, a cancelled job's signal), but not after a failed
    push: Kaggle created no kernel then, and deleting it would only retry for minutes and end in a false alarm."""
    try:
        yield
    except PushFailed:
        print(NOTHING_TO_DELETE, flush=True)
        raise
    except BaseException:
        delete(cli, kernel, settings)
        raise
    delete(cli, kernel, settings)


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
