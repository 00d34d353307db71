"""The GPU runner: the course's GPU suite on a fresh GPU machine, everything it produced in one folder.

It is the code of the Kaggle kernel that `make gpu-kaggle` pushes (scripts/gpu/gpu_kaggle.py fills CONFIG below), and
what a maintainer runs by hand on Colab Pro (maintainers/gpu_run.ipynb) or on any GPU machine:

    python gpu_runner.py --repo https://github.com/OWNER/REPO.git --sha COMMIT [--out DIR]
    python3 scripts/gpu/gpu_runner.py --checkout . --wheels .whl --budget 540 --out DIR [--sha SHA]  (no git, no index)
    python3 scripts/gpu/gpu_runner.py --checkout . --wheels .whl --budget 540 --out DIR --resume  (the next window)

A GPU node without internet takes a local checkout or a source tarball (`git archive`) instead of --repo, and a
folder of wheels (`make gpu-wheels`) instead of an index. Its commit comes from --sha, else git, else the tarball's
scripts/common/COMMIT (filled in by `git archive`: .gitattributes export-subst). --budget and --resume go to the suite
(scripts/gpu/gpu_suite.py): a window of GPU time runs what fits, the next finishes the run in the same --out folder.

  1. records `nvidia-smi` and the image's versions (Python, torch, torchvision, CUDA, driver, `pip freeze`);
  2. clones the repository and checks out the commit;
  3. installs colab_gpu from the clone, and those of requirements.txt's tools the image lacks (nbval, jupytext...),
     never torch or torchvision: pip runs with them pinned to the image's versions, and the runner checks and
     records that they did not change;
  4. runs the GPU suite (scripts/gpu/gpu_suite.py --refresh-notebooks): unit tests with the `@gpu` tests, every lesson
     under nbval, every lesson timed (lesson 08 on every visible GPU), and `colab_gpu bench`;
  5. writes the suite's report.md/report.json, JUnit XML, executed notebooks and logs to --out (Kaggle's
     /kaggle/working by default), and manifest.json: the commit, GPUs, versions, seconds per lesson, test counts.

With REQUIRE_CUDA=1 (the Kaggle kernel and the maintainer notebook set it) a machine without a CUDA GPU fails at
once. Without it the suite runs on the CPU as a dry run (`--lessons 01` keeps it short), which `make
import-gpu-run` refuses. Exits non-zero when anything failed. Standard library only: it runs before the clone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

CONFIG: dict = {}  # `make gpu-kaggle` writes the repository, the commit and the options here
MANIFEST = "manifest.json"
PINNED = ("torch", "torchvision")  # the image's own builds: never installed over
# requirements.txt's tools that the suite does not use (the site's Sphinx stack and its browser test, the linter):
# installing them on an image would only risk moving its IPython or docutils under the lessons.
NOT_FOR_THE_SUITE = {"sphinx", "myst-nb", "sphinx-book-theme", "pydata-sphinx-theme", "selenium", "ruff"}
KAGGLE_WORKING = Path("/kaggle/working")
# What a Kaggle kernel tells about its image, kept in the manifest (Kaggle sets these; none of them is a secret).
IMAGE_ENV = (
    "KAGGLE_DOCKER_IMAGE",
    "KAGGLE_KERNEL_RUN_TYPE",
    "KAGGLE_URL_BASE",
    "COLAB_RELEASE_TAG",
    "COLAB_GPU",
    "CUDA_VERSION",
    "NV_CUDA_LIB_VERSION",
)
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
            raise RunFailed(
                f"the wheels folder {wheels} does not exist: fill it on a machine with an index "
                "(make gpu-wheels PYTHON_VERSION=3.12) and carry it to this one."
            )
        pip += ["--no-index", "--find-links", str(Path(wheels).resolve())]
    log = logs / "install.log"
    missing = missing_requirements(course / "requirements.txt")
    if missing and sh([*pip, *missing], log) != 0:
        where = f" from {wheels} alone" if wheels is not None else ""
        raise RunFailed(
            f"pip could not install {missing}{where} next to torch {before['torch']} (see logs/install.log)"
        )
    # The image's setuptools builds it: no download, and nothing but colab_gpu itself changes.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    if sh([*pip, "--no-deps", *isolation, str(course)], log) != 0:
        raise RunFailed("pip could not install colab_gpu from the clone (see logs/install.log)")
    after = versions(python)
    changed = [f"{name} {before[name]} -> {after[name]}" for name in PINNED if before[name] != after[name]]
    if changed:
        raise RunFailed(
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


def write_manifest(out: Path, manifest: dict) -> None:
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def earlier_manifest(out: Path, options: dict) -> dict:
    """With --resume, the manifest the run's earlier windows wrote ({} for a new run)."""
    path = out / MANIFEST
    if not options.get("resume") or not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise SystemExit(
            f"--resume {out}: its {MANIFEST} cannot be read ({err}): it is truncated or half copied. Copy the run "
            "folder again from where it ran, then resume."
        ) from None


def earlier_windows(earlier: dict) -> list[dict]:
    """The windows an earlier manifest lists (this one is added after them)."""
    if not earlier:
        return []
    return earlier.get("windows") or [
        {key: earlier.get(key) for key in ("started", "finished", "seconds", "status", "sha")}
    ]


def run(options: dict) -> int:
    out = Path(options["out"]).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    require_cuda = truthy(os.environ.get("REQUIRE_CUDA"))
    started = time.time()
    previous = earlier_manifest(out, options)
    earlier = earlier_windows(previous)
    manifest = {
        "format": 1,
        "repo": options.get("repo") or f"checkout {options['checkout']}",
        "sha": options.get("sha") or previous.get("sha"),  # a window that fails early keeps the run importable
        "status": "failed",
        "failures": [],
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "require_cuda": require_cuda,
        "image": {k: os.environ[k] for k in IMAGE_ENV if k in os.environ},
    }
    try:
        manifest.update(nvidia_smi(logs))
        before = versions(python)
        manifest.update(
            python=before["python"],
            torch=before["torch"],
            torchvision=before["torchvision"],
            cuda=before["cuda"],
            gpus=before["gpus"],
            gpu_count=len(before["gpus"]),
        )
        (logs / "pip-freeze-before.txt").write_text(
            subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
        )
        if require_cuda:
            require_gpu(before)
        work = Path(options.get("workdir") or tempfile.mkdtemp(prefix="course-run-"))
        course = work / "course"
        if options.get("checkout"):
            unpack(Path(options["checkout"]).resolve(), course)
            manifest["sha"] = options.get("sha") or checkout_commit(Path(options["checkout"]).resolve(), course)
        else:
            manifest["sha"] = clone(options["repo"], options["sha"], course, logs)
        wheels = Path(options["wheels"]).resolve() if options.get("wheels") else None
        manifest["installed"] = install(course, python, before, logs, work, wheels)
        manifest["pinned_unchanged"] = True
        # As `make gpu-suite USE_SYSTEM_PYTHON=1` would, without needing make: the clone first on the import path.
        path = os.pathsep.join(filter(None, [str(course), os.environ.get("PYTHONPATH")]))
        commit = {"COLAB_GPU_COMMIT": manifest["sha"]} if manifest["sha"] else {}  # a tree without git knows it so
        code = sh(
            suite_command(python, out, options, require_cuda),
            logs / "gpu-suite.log",
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
            raise RunFailed(f"the GPU suite failed ({', '.join(failed) or f'exit {code}'}): see logs/gpu-suite.log")
        left = [name for name, part in report.get("parts", {}).items() if part["status"] != "passed"]
        manifest["status"] = "passed" if code == 0 else "incomplete"
        manifest["left"] = left
    except RunFailed as failure:
        manifest["failures"].append(str(failure))
        print(f"FAILED: {failure}", file=sys.stderr, flush=True)
    except Exception as error:  # noqa: BLE001 (an image without git, a full disk: still a manifest that says so)
        manifest["failures"].append(f"the runner itself failed: {type(error).__name__}: {error}")
        print(f"FAILED: {manifest['failures'][-1]}", file=sys.stderr, flush=True)
    finally:
        manifest["seconds"] = round(time.time() - started, 1)
        manifest["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        this = {key: manifest.get(key) for key in ("started", "finished", "seconds", "status", "sha")}
        manifest["windows"] = [*earlier, this]
        manifest["started"] = manifest["windows"][0]["started"]  # the run's date: its first window's
        write_manifest(out, manifest)
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
    parser.add_argument(
        "--bench",
        nargs="*",
        default=CONFIG.get("bench"),
        metavar="NAME",
        help="only these benchmarks (default: all)",
    )
    parser.add_argument("--data", default=CONFIG.get("data"), help="real data sets in torchvision's layout")
    options = vars(parser.parse_args(argv))
    if options["data"] and not Path(options["data"]).is_dir():
        parser.error(
            f"--data {options['data']}: no such folder. Give one that holds FashionMNIST/ and "
            "cifar-10-batches-py/, or leave it out (an offline GPU then trains on full-size stand-ins)."
        )
    if options["budget"] is not None and options["budget"] <= 0:
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
