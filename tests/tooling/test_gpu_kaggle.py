"""`make gpu-kaggle` against a fake `kaggle` CLI (tests/fake_kaggle/kaggle): a passing run and each known trap."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import gpu_kaggle
import kaggle_cli
import pytest
from paths import ROOT

from tests.conftest import GPU_RUN_LESSON as LESSON

FAKE = Path(__file__).resolve().parents[1] / "fake_kaggle"
SHA = "1234567abcdef0123456789abcdef0123456789a"


@pytest.fixture
def kaggle(tmp_path, monkeypatch, run_folder):
    """The fake CLI first on PATH, fast polls and retries; returns a function running one scenario."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAGGLE_API_TOKEN", "fake-token")
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    env = {
        "FAKE_KAGGLE_STATE": str(state),
        "FAKE_KAGGLE_RUN": str(run_folder),
        "KAGGLE_POLL_S": "0.01",
        "KAGGLE_RETRY_S": "0.01",
        "KAGGLE_RETRIES": "3",
        "KAGGLE_DEADLINE_S": "20",
        "KAGGLE_TIMEOUT_S": "600",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(gpu_kaggle, "warn_if_not_pushed", lambda sha: None)

    def play(scenario, course_root, capsys, **extra_env):
        monkeypatch.setenv("FAKE_KAGGLE_SCENARIO", scenario)
        for name, value in extra_env.items():
            monkeypatch.setenv(name, value)
        code = gpu_kaggle.main(
            [
                "--sha",
                SHA,
                "--work",
                str(tmp_path / "work"),
                "--import-to",
                str(course_root),
                "--repo",
                "https://github.com/someone/course.git",
            ]
        )
        out, err = capsys.readouterr()
        calls = [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]
        deleted = (state / "deleted").read_text() if (state / "deleted").exists() else None
        return code, out, err, calls, deleted

    return play


def test_a_passing_run_is_imported_and_the_kernel_deleted(kaggle, course, capsys):
    code, out, err, calls, deleted = kaggle("pass", course, capsys)
    assert code == 0, err
    kernel = "fakeuser/course-gpu-ci-1234567-4242"
    assert calls[0] == ["config", "view"]  # KAGGLE_API_TOKEN alone: the CLI names the account
    push = calls[1]
    assert push[:2] == ["kernels", "push"] and push[push.index("--accelerator") + 1] == "NvidiaTeslaT4"
    assert [c[:3] for c in calls[2:5]] == [["kernels", "status", kernel]] * 3
    assert calls[-2][:3] == ["kernels", "output", kernel] and deleted == kernel
    run = course / "reports" / "gpu" / "2026-11-20-tesla-t4-x2"
    assert {p.name for p in run.iterdir()} == {"manifest.json", "report.md", "report.json", "notebooks"}
    assert json.loads((run / "manifest.json").read_text())["sha"] == SHA
    assert (run / "notebooks" / f"{LESSON}.ipynb").exists()
    references = json.loads((course / "colab_gpu" / "references.json").read_text())
    assert references["figures"] == {"02.matmul_gpu_vs_cpu": {"T4": 31.5}}
    guide = (course / "docs" / "instructor_guide.md").read_text()
    assert re.search(rf"\(\.\./notebooks/{LESSON}\.ipynb\) \| [^|]+ \| 21 s \(T4\) \|", guide)
    assert out.strip().splitlines()[-1].startswith("gpu-kaggle passed: 1310 passed, 0 failed, on Tesla T4, Tesla T4;")
    assert "42.0 GPU min used" in out


def test_the_kernel_folder_is_checked_field_by_field(tmp_path):
    slug = gpu_kaggle.kernel_slug(SHA, "4242")
    folder = gpu_kaggle.write_kernel(tmp_path / "kernel", "someone", slug, SHA, "https://github.com/a/b.git", ["08"])
    meta = json.loads((folder / "kernel-metadata.json").read_text())
    assert meta == {
        "id": "someone/course-gpu-ci-1234567-4242",
        "title": "course gpu ci 1234567 4242",
        "code_file": "gpu_runner.py",
        "language": "python",
        "kernel_type": "script",
        "is_private": True,
        "enable_gpu": True,
        "enable_internet": True,
        "machine_shape": "NvidiaTeslaT4",
        "dataset_sources": [],
        "competition_sources": [],
        "kernel_sources": [],
        "model_sources": [],
    }
    assert "_" not in meta["id"] and "docker_image" not in meta  # kaggle-cli #1197: a pinned image won
    # The CLI's own check: slugify(title) must give the id's slug, or it warns and Kaggle renames the kernel.
    assert re.sub(r"[^a-z0-9]+", "-", meta["title"].lower()).strip("-") == meta["id"].split("/")[1]
    assert gpu_kaggle.kernel_slug(SHA, "Run_7") == "course-gpu-ci-1234567-run-7"  # no underscore ever
    runner = (folder / "gpu_runner.py").read_text()
    config = json.loads(re.search(r"^CONFIG: dict = (\{.*\})$", runner, re.M).group(1))
    assert config == {
        "repo": "https://github.com/a/b.git",
        "sha": SHA,
        "out": "/kaggle/working",
        "require_cuda": True,
        "lessons": ["08"],
    }
    assert sorted(p.name for p in folder.iterdir()) == ["gpu_runner.py", "kernel-metadata.json"]


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ("push-error", "gpu-kaggle: Kaggle refused the kernel: Notebook not found"),  # printed with exit code 0
        ("session-limit", "at most 2 GPU sessions at once per account and yours are all busy"),  # exit code 0 too
        ("offline", "failed: requests.exceptions.ConnectionError: HTTPSConnectionPool(host='www.kaggle.com'"),
    ],
)
def test_a_failed_push_ends_at_once_without_deleting_a_kernel_that_was_never_created(
    kaggle, course, capsys, monkeypatch, scenario, message
):
    waits = []
    monkeypatch.setattr(kaggle_cli, "pause", waits.append)  # each retry of the delete offline waited 20 s and more
    started = time.monotonic()
    code, out, err, calls, deleted = kaggle(scenario, course, capsys)
    assert code == 1
    assert message in err
    assert [c[:2] for c in calls] == [["config", "view"], ["kernels", "push"]]  # no status, no delete
    assert deleted is None and waits == []
    assert "the push failed, so no kernel was created on Kaggle: nothing to delete" in out.splitlines()
    assert "delete it at kaggle.com" not in out + err
    assert out.strip().splitlines()[-1].startswith("gpu-kaggle FAILED:")
    assert time.monotonic() - started < 30  # two calls of the fake CLI: seconds on a loaded machine
    assert not list((course / "reports" / "gpu").iterdir())


@pytest.mark.parametrize(
    ("scenario", "extra", "message"),
    [
        ("http-down", {}, "failed after 4 tries: requests.exceptions.HTTPError: 500 Server Error"),
        ("stuck", {"KAGGLE_DEADLINE_S": "0.3", "KAGGLE_TIMEOUT_S": "1"}, "still RUNNING after"),
        ("error", {}, "ended in ERROR (the GPU suite failed (nbval)"),
        ("wrong-sha", {}, f"the output is of commit {'0' * 40}, not of {SHA} pushed"),
    ],
)
def test_each_trap_ends_non_zero_with_the_kernel_deleted(kaggle, course, capsys, scenario, extra, message):
    code, out, err, calls, deleted = kaggle(scenario, course, capsys, **extra)
    assert code == 1
    assert message in err
    assert deleted == "fakeuser/course-gpu-ci-1234567-4242"
    assert out.strip().splitlines()[-1].startswith("gpu-kaggle FAILED:")
    assert not list((course / "reports" / "gpu").iterdir())  # nothing imported
    if scenario == "error":  # the end of the kernel's log is shown
        assert "peer access is not supported between these two devices" in err
    if scenario == "http-down":
        assert "<" not in err.split("tries:", 1)[1]  # the HTML page as text
        assert len([c for c in calls if c[:2] == ["kernels", "status"]]) == 4


def test_what_the_real_cli_prints_for_a_refused_call_is_retried(kaggle, course, capsys):
    code, out, err, calls, deleted = kaggle("http-flaky", course, capsys)
    assert code == 0, err
    for said in ("429 Client Error: Too Many Requests", "You have been rate limited", "Expecting value: line 1"):
        assert said in out
    assert out.count("again in") == 3
    assert len([c for c in calls if c[:2] == ["kernels", "status"]]) == 6  # 3 refused, QUEUED, RUNNING, COMPLETE


def test_a_stuck_kernel_is_named_as_such(kaggle, course, capsys):
    # The deadline counts from before the push (a fake CLI process, slow on a loaded machine), the -t limit from
    # after it: 3 s leaves that margin, so the kernel is past its 1 s limit however long the push took.
    _, _, err, _, _ = kaggle("stuck", course, capsys, KAGGLE_DEADLINE_S="3", KAGGLE_TIMEOUT_S="1")
    assert "past its own -t limit of 1 s" in err


def test_without_credentials_it_says_how_to_get_them(kaggle, course, capsys, monkeypatch):
    monkeypatch.delenv("KAGGLE_API_TOKEN")
    code = gpu_kaggle.main(["--sha", SHA, "--import-to", str(course)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"gpu-kaggle: {gpu_kaggle.HOW_TO_CREDENTIALS}"


def test_without_the_cli_it_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_kaggle.main(["--sha", SHA]) == 1
    assert 'pip install "kaggle==2.2.5" six' in capsys.readouterr().err


def test_settings_come_from_the_environment():
    settings = gpu_kaggle.Settings.from_env(
        {"KAGGLE_DEADLINE_S": "900", "KAGGLE_POLL_S": "5", "KAGGLE_TIMEOUT_S": "600"}
    )
    assert (settings.deadline_s, settings.poll_s, settings.timeout_s, settings.retries) == (900.0, 5.0, 600, 5)
    with pytest.raises(gpu_kaggle.Stop, match="KAGGLE_POLL_S='soon' is not a number"):
        gpu_kaggle.Settings.from_env({"KAGGLE_POLL_S": "soon"})


def test_repository_comes_from_pyproject():
    assert gpu_kaggle.repository_url() == "https://github.com/colab-gpu-course/pytorch-gpus-colab.git"
    assert gpu_kaggle.RUNNER.parent == ROOT / "scripts" / "gpu"


def test_a_cancelled_job_still_deletes_the_kernel(kaggle, course, capsys, monkeypatch):
    """GitHub cancels a job with SIGTERM: it must leave through the block that deletes the kernel."""
    import signal

    def cancelled(seconds):  # what the installed handler does when SIGTERM arrives while it waits
        handler = signal.getsignal(signal.SIGTERM)
        assert handler is gpu_kaggle.stop_on_sigterm
        handler(signal.SIGTERM, None)

    monkeypatch.setattr(kaggle_cli, "pause", cancelled)
    code, out, err, calls, deleted = kaggle("stuck", course, capsys)
    assert code == 1 and "stopped by signal 15" in err, out + err
    assert deleted == "fakeuser/course-gpu-ci-1234567-4242", out + err
    assert signal.getsignal(signal.SIGTERM) is not gpu_kaggle.stop_on_sigterm  # put back after the run


def test_the_commit_is_resolved_to_its_full_sha(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:  # a git checkout (make test-wheel copies the tests without one)
        assert gpu_kaggle.resolve_commit(None) == head.stdout.strip() == gpu_kaggle.resolve_commit(head.stdout[:9])
    assert gpu_kaggle.resolve_commit(SHA) == SHA  # a full sha this checkout lacks: taken as it is
    with pytest.raises(gpu_kaggle.Stop, match="--sha no-such-branch names no commit of this checkout"):
        gpu_kaggle.resolve_commit("no-such-branch")


def test_the_kernel_id_is_written_for_the_workflows_clean_up(kaggle, course, capsys, tmp_path):
    kaggle("pass", course, capsys)
    assert (tmp_path / "work" / "kernel-id.txt").read_text() == "fakeuser/course-gpu-ci-1234567-4242\n"
