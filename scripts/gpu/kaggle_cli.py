"""The `kaggle` command, as `gpu_kaggle.py` uses it: calls retried while Kaggle answers with an HTTP error, the push
(never retried: a second push starts a second session), polling a kernel's status, its output, its deletion.

Every call goes through `call` or `call_once`; `pause` is the one wait (polls and retries), which the tests replace.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


def download(cli: str, kernel: str, output: Path, settings: Settings, deadline: float) -> None:
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    call(cli, ["kernels", "output", kernel, "-p", str(output), "-o"], settings, deadline)


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
