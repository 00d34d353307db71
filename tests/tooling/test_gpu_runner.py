"""scripts/gpu/gpu_runner.py, the Kaggle kernel's code, run here against a local clone: clone, install, suite,
manifest."""

import json
import os
import re
import subprocess
import sys
import sysconfig

import gpu_runner
import import_gpu_run
import pytest
import runner_steps
import torch
import wheel_check
from paths import ROOT

from tests.conftest import venv_seeing

LESSON = "01_enable_gpu_runtime"


@pytest.fixture(scope="module")
def course_repo(tmp_path_factory):
    """This working tree (tracked and new files) committed into a fresh repository: what the kernel clones."""
    repo = wheel_check.tagged_repository(tmp_path_factory.mktemp("origin") / "course", "0.0.0-test")
    return repo, subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def image_python(tmp_path_factory):
    """A Python that sees this environment's packages (torch...) but installs into its own folder: the runner's
    pip changes nothing here, as on Kaggle it may add tools but never replace the image's torch."""
    return venv_seeing(tmp_path_factory.mktemp("image") / "venv", sysconfig.get_paths()["purelib"])


def runner(python, repo, sha, out, *options, require_cuda="", path=None):
    env = dict(os.environ, REQUIRE_CUDA=require_cuda, CUDA_VISIBLE_DEVICES="")  # this machine's CPU, even on a GPU
    env.pop("PYTEST_CURRENT_TEST", None)
    env.pop("COLAB_GPU_COMMIT", None)
    if path is not None:
        env["PATH"] = path
    source = ["--repo", str(repo), "--sha", sha] if repo is not None else []
    work = ["--workdir", str(out.parent / "work")]  # the clone in the test's folder, not a /tmp/course-run-* left over
    return subprocess.run(
        [python, ROOT / "scripts" / "gpu" / "gpu_runner.py", *source, "--out", str(out), *work, *options],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_run_from_a_tarball_on_a_machine_without_git_installs_runs_and_writes_the_manifest(
    course_repo, image_python, tmp_path
):
    """A GPU node without git or internet: `git archive` made the tarball; scripts/common/COMMIT has the sha. The one
    whole run of these tests (install, unit tests, a lesson, a benchmark): a run from --repo differs only in how the
    course arrives (the next test), and the steps after that are the same."""
    repo, sha = course_repo
    tarball = tmp_path / "course.tar.gz"
    subprocess.run(["git", "-C", str(repo), "archive", "--prefix=course/", "-o", str(tarball), "HEAD"], check=True)
    no_git = tmp_path / "bin"  # a PATH where git is not found (the runner and the suite use absolute interpreters)
    no_git.mkdir()
    out = tmp_path / "run"
    options = ["--checkout", str(tarball), "--lessons", "01", "--unit-tests", "tests/test_capability.py"]
    done = runner(image_python, None, None, out, *options, "--bench", "h2d", path=str(no_git))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    manifest, report = (json.loads((out / name).read_text()) for name in ("manifest.json", "report.json"))
    assert manifest["sha"] == sha == report["commit"] and manifest["repo"] == f"checkout {tarball}"
    assert manifest["status"] == "passed" and manifest["failures"] == [] and len(manifest["windows"]) == 1
    assert manifest["torch"] == torch.__version__ and manifest["pinned_unchanged"] is True
    assert manifest["gpus"] == [] and manifest["require_cuda"] is False
    assert manifest["lessons"] == {
        LESSON: {"seconds": manifest["lessons"][LESSON]["seconds"], "status": "ok", "data": None}
    }
    assert manifest["tests"]["passed"] > 0 and manifest["tests"]["failed"] == 0
    for name in (
        "report.md",
        "junit/unit.xml",
        f"notebooks/{LESSON}.ipynb",
        "logs/nvidia-smi.txt",
        "logs/install.log",
        "logs/gpu-suite.log",
        "bench/window-1/bench.json",
    ):
        assert (out / name).exists(), name
    assert list(report["lessons"]["lessons"]) == [LESSON]
    assert report["parts"][f"lesson {LESSON}"]["status"] == "passed"
    assert done.stdout.strip().splitlines()[-1].startswith("GPU run passed: ")
    with pytest.raises(import_gpu_run.ImportRefused, match="CPU dry run"):
        import_gpu_run.import_run(out, tmp_path / "course")


def test_a_run_from_a_repository_clones_the_commit_and_runs_the_clones_steps_there(course_repo, tmp_path, monkeypatch):
    """--repo and --sha (the Kaggle kernel): the commit is cloned and checked out, its full sha goes into the
    manifest, and the steps after the clone come from the clone and run on it (they ran whole in the test above)."""
    repo, sha = course_repo
    image = {"python": "3.12.0", "torch": "2.10.0+cu128", "torchvision": "0.25.0+cu128", "cuda": "12.8"}
    monkeypatch.setattr(gpu_runner, "versions", lambda python: {**image, "cuda_available": False, "gpus": []})
    monkeypatch.delenv("REQUIRE_CUDA", raising=False)
    seen = {}

    def install(course, *args):
        seen["installed"] = course
        return []

    def run_suite(course, python, out, options, manifest):
        seen["suite"] = course
        manifest.update(status="passed", left=[])

    def load_steps(course):
        steps = real_load_steps(course)
        seen["steps"] = steps.__file__
        monkeypatch.setattr(steps, "install", install)
        monkeypatch.setattr(steps, "run_suite", run_suite)
        return steps

    real_load_steps = gpu_runner.load_steps
    monkeypatch.setattr(gpu_runner, "load_steps", load_steps)
    out, work = tmp_path / "run", tmp_path / "work"
    assert gpu_runner.main(["--repo", str(repo), "--sha", sha[:12], "--out", str(out), "--workdir", str(work)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sha"] == sha and manifest["repo"] == str(repo) and manifest["status"] == "passed"
    course = work / "course"
    assert seen == {"steps": str(course / "scripts" / "gpu" / "runner_steps.py"), "installed": course, "suite": course}
    assert (out / "logs" / "clone.log").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_require_cuda_on_a_cpu_machine_fails_at_once_with_the_reason(course_repo, image_python, tmp_path):
    repo, sha = course_repo
    done = runner(image_python, repo, sha, tmp_path / "run", require_cuda="1")
    assert done.returncode == 1
    assert "REQUIRE_CUDA=1 is set but torch sees no CUDA GPU" in done.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "GPU T4 x2" in manifest["failures"][0]
    assert not (tmp_path / "run" / "logs" / "clone.log").exists()  # stopped before cloning


def test_an_unknown_commit_says_push_it_first(course_repo, image_python, tmp_path):
    repo, _ = course_repo
    done = runner(image_python, repo, "0123456789abcdef0123456789abcdef01234567", tmp_path / "run")
    assert done.returncode == 1 and "is not in" in done.stderr and "push it first" in done.stderr


def test_only_what_the_image_lacks_is_installed_and_never_torch(tmp_path, monkeypatch):
    def version(name):  # an image that has pytest and nothing else of the list
        if name == "pytest":
            return "8.4.0"
        raise runner_steps.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(runner_steps.metadata, "version", version)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "# pins\ntorch==9.9\ntorchvision==9.9\npytest==9.2.0  # installed: kept as it is\n"
        "nbval==0.11.0\nsphinx==9.0.4\nruff==0.17.6\n"
    )
    assert runner_steps.missing_requirements(requirements) == ["nbval==0.11.0"]  # the site's and lint's tools not


def test_a_changed_torch_fails_the_run(tmp_path, monkeypatch):
    before = {"torch": "2.10.0+cu128", "torchvision": "0.25.0+cu128"}
    monkeypatch.setattr(runner_steps, "missing_requirements", lambda path: [])
    monkeypatch.setattr(gpu_runner, "sh", lambda command, log, **kw: 0)
    monkeypatch.setattr(gpu_runner, "versions", lambda python: {"torch": "2.14.1", "torchvision": "0.25.0+cu128"})
    with pytest.raises(gpu_runner.RunFailed, match=r"changed the image's torch 2\.10\.0\+cu128 -> 2\.14\.1"):
        runner_steps.install(tmp_path, sys.executable, before, tmp_path, tmp_path)
    assert (tmp_path / "constraints.txt").read_text() == "torch==2.10.0+cu128\ntorchvision==0.25.0+cu128\n"


def test_the_maintainer_notebook_runs_this_runner_and_zips_what_import_accepts():
    """maintainers/gpu_run.ipynb (Colab Pro GPUs, or no Kaggle token): in sync with its .py, no outputs, a badge
    that opens it, and a runner command whose options the runner accepts."""
    import jupytext
    from nbtools import badge_url, course_config

    source, notebook = ROOT / "maintainers" / "gpu_run.py", ROOT / "maintainers" / "gpu_run.ipynb"
    paired, stored = jupytext.read(source), jupytext.read(notebook)
    assert [c.source for c in paired.cells] == [c.source for c in stored.cells], "run: jupytext --sync " + str(source)
    assert all(not c.get("outputs") for c in stored.cells)
    assert badge_url(course_config(), notebook) in stored.cells[0].source
    code = "\n".join(c.source for c in stored.cells if c.cell_type == "code")
    assert set(re.findall(r'"(--[a-z-]+)"', code)) == {"--repo", "--sha", "--out", "--lessons", "--resume"}
    assert '["--resume"] if os.path.exists("gpu-run/manifest.json")' in code  # a second Run all resumes
    assert gpu_runner.parse(
        ["--repo", "https://github.com/a/b.git", "--sha", "main", "--out", "gpu-run", "--lessons", "08"]
    )["lessons"] == ["08"]
    assert 'base_dir="gpu-run"' in code  # the zip holds gpu-run/...: import_gpu_run.find_run looks one level down


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--checkout", "no/such/course.tar.gz"], "--checkout no/such/course.tar.gz: no such folder or file"),
        (["--checkout", ".", "--budget", "0"], "--budget 0: a window's length is a positive number of seconds"),
        (["--checkout", ".", "--budget", "nan"], "--budget nan: a window's length is a positive number of seconds"),
        (["--checkout", ".", "--data", "no/such/data"], "--data no/such/data: no such folder"),
    ],
)
def test_a_mistyped_checkout_or_an_empty_budget_is_refused_before_the_run_is_touched(
    tmp_path, capsys, options, message
):
    out = tmp_path / "run"
    out.mkdir()
    manifest = {"format": 1, "sha": "89abcdef", "status": "incomplete", "windows": [{"sha": "89abcdef"}]}
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit):
        gpu_runner.main([*options, "--out", str(out), "--resume"])
    assert message in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text()) == manifest  # still importable


def test_a_window_that_fails_early_keeps_the_runs_commit_and_earlier_windows(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    earlier = {"format": 1, "sha": "89abcdef", "status": "incomplete", "started": "2026-11-26T10:00:00+00:00"}
    earlier["windows"] = [dict(earlier)]
    (out / "manifest.json").write_text(json.dumps(earlier))

    def no_gpu_here(logs):
        raise RuntimeError("nvidia-smi is not installed")

    monkeypatch.setattr(gpu_runner, "nvidia_smi", no_gpu_here)
    assert gpu_runner.main(["--checkout", str(tmp_path), "--out", str(out), "--resume"]) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sha"] == "89abcdef" and manifest["windows"][0] == earlier["windows"][0]
    assert (
        manifest["started"] == "2026-11-26T10:00:00+00:00" and "nvidia-smi is not installed" in manifest["failures"][0]
    )


def test_a_truncated_manifest_is_refused_on_resume_with_the_fix(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text('{"format": 1, "sha": "89ab')
    with pytest.raises(SystemExit, match="manifest.json cannot be read .*truncated or half copied"):
        gpu_runner.main(["--checkout", str(tmp_path), "--out", str(out), "--resume"])


def test_the_runner_hands_a_data_folder_to_the_suite(tmp_path):
    command = runner_steps.suite_command("python", tmp_path / "run", {"data": str(tmp_path)}, require_cuda=True)
    assert command[command.index("--data") + 1] == str(tmp_path.resolve())
    assert "--data" not in runner_steps.suite_command("python", tmp_path / "run", {}, require_cuda=True)


def test_the_steps_from_the_clone_share_the_runners_failure_when_it_runs_as_a_kernel(tmp_path):
    """A notebook kernel execs the runner's code into a namespace: the steps it loads from the clone still raise the
    RunFailed it catches (a failed install is a failure in the manifest, not "the runner itself failed")."""
    kernel = f"""
import sys
from pathlib import Path
kernel = {{"__name__": "kernel"}}  # a namespace, not a module (run_path would start main)
path = {str(ROOT / "scripts" / "gpu" / "gpu_runner.py")!r}
exec(compile(open(path).read(), path, "exec"), kernel)
steps = kernel["load_steps"](Path({str(ROOT)!r}))
try:
    steps.install(Path("."), sys.executable, {{}}, Path("."), Path({str(tmp_path)!r}), Path("no/such/wheels"))
except kernel["RunFailed"] as failure:
    print("caught:", failure)
"""
    done = subprocess.run([sys.executable, "-c", kernel], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("caught: the wheels folder no/such/wheels does not exist")


def test_a_course_without_the_steps_is_refused_with_the_fix(tmp_path):
    with pytest.raises(gpu_runner.RunFailed, match="no scripts/gpu/runner_steps.py: run the gpu_runner.py of the same"):
        gpu_runner.load_steps(tmp_path)


def test_a_second_window_without_resume_is_refused_and_the_first_manifest_stays(tmp_path):
    # Issue 63: a second window into the same --out overwrote the first one's manifest.
    out = tmp_path / "run"
    out.mkdir()
    first = {"format": 1, "sha": "89abcdef", "status": "incomplete", "windows": [{"sha": "89abcdef"}]}
    (out / "manifest.json").write_text(json.dumps(first))
    with pytest.raises(SystemExit, match="holds a run already .* finish that run with --resume, or give a new --out"):
        gpu_runner.main(["--checkout", str(tmp_path), "--out", str(out)])
    assert json.loads((out / "manifest.json").read_text()) == first and not (out / "logs").exists()
