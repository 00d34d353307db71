"""The GPU runner: the course's GPU suite on a fresh GPU machine, everything it produced in one folder.

The Kaggle kernel's code (`make gpu-kaggle` fills CONFIG below), also run by hand on Colab Pro
(maintainers/gpu_run.ipynb) or on any GPU machine:

    python gpu_runner.py --repo https://github.com/OWNER/REPO.git --sha COMMIT [--out DIR]
    python3 scripts/gpu/gpu_runner.py --checkout course.tar.gz --wheels .whl --budget 540 --out DIR [--resume]

Offline, --checkout takes a folder or a `git archive` tarball (its commit: --sha, else git, else the tarball's
scripts/common/COMMIT) and --wheels a folder `make gpu-wheels` filled. --budget and --resume go to the suite: a window
runs what fits, the next finishes the run in the same --out.

It records `nvidia-smi` and the image's versions (Python, torch, CUDA, driver, `pip freeze`), clones or unpacks the
course, then runs the steps of the clone's scripts/gpu/runner_steps.py: install colab_gpu and the tools the image
lacks (never torch or torchvision, and checks they did not change), run scripts/gpu/gpu_suite.py --refresh-notebooks,
and write its outputs and manifest.json (commit, GPUs, versions, seconds per lesson, test counts) to --out (Kaggle's
/kaggle/working by default).

With REQUIRE_CUDA=1 (the Kaggle kernel, the maintainer notebook) a machine without a CUDA GPU fails at once; without
it the suite runs on the CPU as a dry run, which `make import-gpu-run` refuses. Exits 1 when anything failed, 3 when
parts are left for --resume. Standard library only: it runs before the clone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path

CONFIG: dict = {}  # `make gpu-kaggle` writes the repository, the commit and the options here
MANIFEST = "manifest.json"
WINDOW = ("started", "finished", "seconds", "status", "sha")  # what the manifest keeps of each window of a run
KAGGLE_WORKING = Path("/kaggle/working")
# What a Kaggle kernel tells about its image, kept in the manifest (Kaggle sets these; none of them is a secret).
IMAGE_ENV = ("KAGGLE_DOCKER_IMAGE", "KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE", "COLAB_RELEASE_TAG", "COLAB_GPU")
IMAGE_ENV += ("CUDA_VERSION", "NV_CUDA_LIB_VERSION")
VERSIONS_CODE = """
import json, platform, torch
try:
    import torchvision
    vision = torchvision.__version__
except ImportError:
    vision = None
count = torch.cuda.device_count()
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "torchvision": vision,
                  "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
                  "gpus": [torch.cuda.get_device_name(i) for i in range(count)]}))
"""


class RunFailed(Exception):
    """A step that leaves nothing to run after it (no GPU, no clone, a changed torch)."""


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def sh(command: list[str], log: Path, cwd: Path | None = None, env: dict | None = None) -> int:
    """Run ``command``, its output into ``log`` and its last lines onto the terminal; return its exit code."""
    print("$", shlex.join(command), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        code = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    tail = log.read_text(errors="replace").splitlines()[-15:]
    print("\n".join(f"  {line}" for line in tail), flush=True)
    return code


def nvidia_smi(logs: Path) -> dict:
    """The driver and GPU names from `nvidia-smi` (None where there is none), its full output in logs/."""
    if shutil.which("nvidia-smi") is None:
        (logs / "nvidia-smi.txt").write_text("nvidia-smi: not found\n")
        return {"driver": None, "smi_gpus": []}
    full = subprocess.run(["nvidia-smi"], capture_output=True, text=True)
    (logs / "nvidia-smi.txt").write_text(full.stdout + full.stderr)
    query = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True
    )
    rows = [line.split(", ") for line in query.stdout.strip().splitlines() if ", " in line]
    return {"driver": rows[0][1] if rows else None, "smi_gpus": [row[0] for row in rows]}


def versions(python: str) -> dict:
    """Python, torch, torchvision, CUDA and the visible GPUs, asked of a fresh ``python``."""
    done = subprocess.run([python, "-c", VERSIONS_CODE], capture_output=True, text=True)
    if done.returncode != 0:
        raise RunFailed(f"{python} cannot import torch:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def require_gpu(found: dict) -> None:
    if not found["cuda_available"]:
        raise RunFailed(
            "REQUIRE_CUDA=1 is set but torch sees no CUDA GPU "
            f"(torch {found['torch']}, CUDA build {found['cuda']}). On Kaggle, the kernel needs the accelerator "
            "'GPU T4 x2' (make gpu-kaggle asks for it); on Colab, Runtime > Change runtime type > GPU; "
            "on this machine, unset REQUIRE_CUDA for a CPU dry run."
        )


def clone(repo: str, sha: str, into: Path, logs: Path) -> str:
    """Clone ``repo`` and check out ``sha``; return the full commit."""
    log = logs / "clone.log"
    if sh(["git", "clone", "--quiet", repo, str(into)], log) != 0:
        raise RunFailed(f"git clone {repo} failed (see logs/clone.log): is the repository public and the URL right?")
    if sh(["git", "-C", str(into), "checkout", "--quiet", sha], log) != 0:
        raise RunFailed(f"commit {sha} is not in {repo}: push it first (the runner clones it from there).")
    return subprocess.run(
        ["git", "-C", str(into), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


# What a local checkout's copy leaves behind: environments, build output, caches, wheels (the suite's own venv
# is the image's Python; its outputs go to --out).
NOT_COPIED = shutil.ignore_patterns(".git", ".venv*", "build", ".whl", "__pycache__", ".pytest_cache", ".ruff_cache")


def unpack(checkout: Path, into: Path) -> None:
    """A copy of the course at ``checkout`` (a folder, or a tarball such as `git archive` writes) in ``into``."""
    if checkout.is_dir():
        shutil.copytree(checkout, into, ignore=NOT_COPIED)
    elif tarfile.is_tarfile(checkout):
        with tarfile.open(checkout) as archive:
            archive.extractall(into.parent / "unpacked", filter="data")
        found = sorted((into.parent / "unpacked").glob("**/scripts/gpu/gpu_suite.py"), key=lambda p: len(p.parts))
        if not found:
            raise RunFailed(f"{checkout} holds no scripts/gpu/gpu_suite.py: give --checkout the course or its tarball.")
        found[0].parents[2].rename(into)  # `git archive --prefix=course/` wraps it in a folder; without, not
    else:
        raise RunFailed(f"--checkout {checkout}: neither a folder nor a tarball (git archive -o course.tar.gz HEAD).")
    if not (into / "scripts" / "gpu" / "gpu_suite.py").exists():
        raise RunFailed(f"--checkout {checkout} is not the course: it has no scripts/gpu/gpu_suite.py.")


def load_steps(course: Path) -> types.ModuleType:
    """The steps after the clone, from the course's scripts/gpu/runner_steps.py (install, the suite, its report).

    They ``import gpu_runner`` for RunFailed, sh and versions: run as a script or a kernel this file is not yet known
    by that name, so it is registered first (a second copy of it would raise a RunFailed this one cannot catch)."""
    this = sys.modules.get(__name__)
    if getattr(this, "RunFailed", None) is not RunFailed:  # exec'd into a namespace (a notebook kernel)
        this = types.ModuleType("gpu_runner")
        vars(this).update(globals())
    sys.modules.setdefault("gpu_runner", this)
    path = course / "scripts" / "gpu" / "runner_steps.py"
    if not path.exists():
        raise RunFailed("the course has no scripts/gpu/runner_steps.py: run the gpu_runner.py of the same commit.")
    spec = importlib.util.spec_from_file_location("runner_steps", path)
    steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steps)
    return steps


def earlier_run(out: Path, options: dict) -> tuple[str | None, list[dict]]:
    """With --resume, the commit and the windows of the run's earlier manifest (None and [] for a new run). Without
    it, a folder that holds a run already is refused: a second window would overwrite the first one's manifest."""
    path = out / MANIFEST
    if not options.get("resume") and path.exists():
        raise SystemExit(
            f"--out {out} holds a run already (its {MANIFEST}): finish that run with --resume, or give a new --out. "
            "Nothing was changed."
        )
    if not options.get("resume") or not path.exists():
        return None, []
    try:
        earlier = json.loads(path.read_text())
    except ValueError as err:
        raise SystemExit(
            f"--resume {out}: its {MANIFEST} cannot be read ({err}): it is truncated or half copied. Copy the run "
            "folder again from where it ran, then resume."
        ) from None
    return earlier.get("sha"), earlier.get("windows") or [{key: earlier.get(key) for key in WINDOW}]


def run(options: dict) -> int:
    out = Path(options["out"]).resolve()
    earlier_sha, earlier = earlier_run(out, options)  # before anything is written into --out
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    require_cuda = truthy(os.environ.get("REQUIRE_CUDA"))
    started = time.time()
    manifest = {
        "format": 1,
        "repo": options.get("repo") or f"checkout {options['checkout']}",
        "sha": options.get("sha") or earlier_sha,  # a window that fails early keeps the run importable
        "status": "failed",
        "failures": [],
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "require_cuda": require_cuda,
        "image": {k: os.environ[k] for k in IMAGE_ENV if k in os.environ},
    }
    try:
        manifest.update(nvidia_smi(logs))
        before = versions(python)
        image = {key: before[key] for key in ("python", "torch", "torchvision", "cuda", "gpus")}
        manifest.update(image, gpu_count=len(before["gpus"]))
        (logs / "pip-freeze-before.txt").write_text(
            subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
        )
        if require_cuda:
            require_gpu(before)
        work = Path(options.get("workdir") or tempfile.mkdtemp(prefix="course-run-"))
        course = work / "course"
        if options.get("checkout"):
            unpack(Path(options["checkout"]).resolve(), course)
            steps = load_steps(course)
            manifest["sha"] = options.get("sha") or steps.checkout_commit(Path(options["checkout"]).resolve(), course)
        else:
            manifest["sha"] = clone(options["repo"], options["sha"], course, logs)
            steps = load_steps(course)
        wheels = Path(options["wheels"]).resolve() if options.get("wheels") else None
        manifest["installed"] = steps.install(course, python, before, logs, work, wheels)
        manifest["pinned_unchanged"] = True
        steps.run_suite(course, python, out, options, manifest)
    except RunFailed as failure:
        manifest["failures"].append(str(failure))
        print(f"FAILED: {failure}", file=sys.stderr, flush=True)
    except Exception as error:  # noqa: BLE001 (an image without git, a full disk: still a manifest that says so)
        manifest["failures"].append(f"the runner itself failed: {type(error).__name__}: {error}")
        print(f"FAILED: {manifest['failures'][-1]}", file=sys.stderr, flush=True)
    finally:
        manifest["seconds"] = round(time.time() - started, 1)
        manifest["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        this = {key: manifest.get(key) for key in WINDOW}
        manifest["windows"] = [*earlier, this]
        manifest["started"] = manifest["windows"][0]["started"]  # the run's date: its first window's
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    tests = manifest.get("tests", {})
    print(
        f"GPU run {manifest['status']}: {tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, "
        f"on {', '.join(manifest.get('gpus') or ['no GPU'])}, {manifest['seconds'] / 60:.1f} min; "
        f"everything is in {out}",
        flush=True,
    )
    if manifest["status"] == "incomplete":
        print(f"{len(manifest['left'])} part(s) left: run again with --resume and the same --out", flush=True)
    return {"passed": 0, "incomplete": 3}.get(manifest["status"], 1)


def parse(argv: list[str] | None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=CONFIG.get("repo"), help="the course repository to clone (URL or path)")
    parser.add_argument("--sha", default=CONFIG.get("sha"), help="the commit to check out (with --checkout: its name)")
    parser.add_argument("--checkout", default=None, help="a local checkout or a source tarball instead of --repo")
    parser.add_argument("--wheels", default=None, help="install the missing tools from this folder, no index")
    parser.add_argument("--budget", type=float, default=None, help="seconds of GPU time this window has")
    parser.add_argument("--resume", action="store_true", help="finish the run in --out (another window)")
    default_out = KAGGLE_WORKING if KAGGLE_WORKING.is_dir() else Path("gpu-run")
    parser.add_argument("--out", default=CONFIG.get("out", str(default_out)), help="where everything goes")
    parser.add_argument("--workdir", default=None, help="where to clone (default: a new temporary folder)")
    parser.add_argument("--lessons", nargs="*", default=CONFIG.get("lessons", []), metavar="NN")
    parser.add_argument("--unit-tests", nargs="*", default=CONFIG.get("unit_tests"), metavar="PATH")
    bench = "only these benchmarks (default: all)"
    parser.add_argument("--bench", nargs="*", default=CONFIG.get("bench"), metavar="NAME", help=bench)
    parser.add_argument("--data", default=CONFIG.get("data"), help="real data sets in torchvision's layout")
    options = vars(parser.parse_args(argv))
    if options["data"] and not Path(options["data"]).is_dir():
        parser.error(
            f"--data {options['data']}: no such folder. Give one that holds FashionMNIST/ and "
            "cifar-10-batches-py/, or leave it out (an offline GPU then trains on full-size stand-ins)."
        )
    if options["budget"] is not None and not (math.isfinite(options["budget"]) and options["budget"] > 0):
        parser.error(f"--budget {options['budget']:g}: a window's length is a positive number of seconds")
    if options["checkout"] and not Path(options["checkout"]).exists():
        parser.error(
            f"--checkout {options['checkout']}: no such folder or file. Give a local checkout of the course or its "
            "tarball (git archive -o course.tar.gz HEAD)."
        )
    if options["checkout"] and options["repo"]:
        parser.error("--checkout or --repo, not both")
    if not options["checkout"] and (not options["repo"] or not options["sha"]):
        parser.error("--repo and --sha are needed, or --checkout (make gpu-kaggle fills them in for a Kaggle kernel)")
    return options


def main(argv: list[str] | None = None) -> int:
    if CONFIG:  # a pushed kernel: its options are CONFIG, whatever arguments the platform starts it with
        os.environ["REQUIRE_CUDA"] = "1" if CONFIG.get("require_cuda", True) else ""
        argv = [] if argv is None else argv
    return run(parse(argv))


if __name__ == "__main__":
    code = main()
    if code:  # only a failure raises: under an IPython-based kernel even SystemExit(0) can read as an error
        raise SystemExit(code)
