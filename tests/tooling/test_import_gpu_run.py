"""`make import-gpu-run RUN=...`: a run folder or its zip into reports/gpu/, references.json and the guide."""

import json
import shutil
import zipfile

import import_gpu_run
import pytest

from tests.conftest import GPU_RUN_LESSON as LESSON

SHA = "89abcdef0123456789abcdef0123456789abcdef"


def stamp(run, sha=SHA, gpu="Tesla T4", count=2, started="2026-11-21T08:00:00+00:00"):
    manifest = json.loads((run / "manifest.json").read_text())
    report = json.loads((run / "report.json").read_text())
    manifest.update(sha=sha, gpus=[gpu] * count, started=started)
    report.update(commit=sha, gpu=gpu + (f" x{count}" if count > 1 else ""), runtime={"gpus": [{"name": gpu}] * count})
    for figure in report["lesson_figures"].values():  # measured on the run's GPU, or update_references skips it
        figure["device"] = gpu
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "report.json").write_text(json.dumps(report))
    return run


def test_a_zip_from_the_maintainer_notebook_is_imported(run_folder, course, tmp_path):
    stamp(run_folder, gpu="NVIDIA A100-SXM4-40GB", count=1)
    archive = tmp_path / "gpu-run.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # the notebook zips its folder, gpu-run/, with the folder's name
        for path in run_folder.rglob("*"):
            zipped.write(path, "gpu-run/" + path.relative_to(run_folder).as_posix())
    done = import_gpu_run.import_run(archive, course)
    target = course / "reports" / "gpu" / "2026-11-21-nvidia-a100-sxm4-40gb"
    assert f"into {target.relative_to(course)}" in done and (target / "notebooks" / f"{LESSON}.ipynb").exists()
    assert json.loads((course / "colab_gpu" / "references.json").read_text())["figures"] == {
        "02.matmul_gpu_vs_cpu": {"A100": 31.5}
    }
    guide = (course / "docs" / "instructor_guide.md").read_text()
    every = len(import_gpu_run.lesson_sources())  # the fixture run has every lesson
    assert f"GPU column: {every} of {every}" in done
    assert "| 21 s (A100) |" in guide  # until a T4 runs the lesson, the A100's time, named


def test_the_steps_a_run_profiled_come_along_for_the_regime_tests(run_folder, course):
    stamp(run_folder)
    (run_folder / "profiles").mkdir()
    entry = {"step": "conv_step", "device": "Tesla T4", "regime": "GPU-bound", "kernels": "matmuls", "record": {}}
    (run_folder / "profiles" / "04_train_cnn.jsonl").write_text(json.dumps(entry) + "\n")
    import_gpu_run.import_run(run_folder, course)
    (target,) = (course / "reports" / "gpu").iterdir()
    assert json.loads((target / "profiles" / "04_train_cnn.jsonl").read_text()) == entry


def test_a_second_commit_the_same_day_gets_its_own_folder(run_folder, course):
    import_gpu_run.import_run(stamp(run_folder), course)
    import_gpu_run.import_run(stamp(run_folder), course)  # the same run again replaces itself
    import_gpu_run.import_run(stamp(run_folder, sha="f" * 40), course)
    assert sorted(p.name for p in (course / "reports" / "gpu").iterdir()) == [
        "2026-11-21-tesla-t4-x2",
        "2026-11-21-tesla-t4-x2-fffffff",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda run: (run / "report.json").unlink(), "has no report.json: the run stopped before"),
        (lambda run: stamp(run, count=0), "CPU dry run"),
        (lambda run: [(run / n).unlink() for n in ("manifest.json", "report.json")], "holds no manifest.json or"),
    ],
)
def test_what_cannot_be_imported_says_why(run_folder, course, change, message):
    stamp(run_folder)
    change(run_folder)
    with pytest.raises(import_gpu_run.ImportRefused, match=message):
        import_gpu_run.import_run(run_folder, course)
    assert not list((course / "reports" / "gpu").iterdir())


def test_a_folder_mixing_two_runs_is_refused(run_folder, course):
    stamp(run_folder)
    report = json.loads((run_folder / "report.json").read_text())
    (run_folder / "report.json").write_text(json.dumps(dict(report, commit="e" * 40)))
    with pytest.raises(import_gpu_run.ImportRefused, match="mixes two runs"):
        import_gpu_run.import_run(run_folder, course)


def test_the_command_line_says_not_imported(tmp_path, capsys):
    assert import_gpu_run.main([str(tmp_path / "nothing.zip")]) == 1
    assert capsys.readouterr().err.startswith(f"not imported: {tmp_path / 'nothing.zip'} does not exist")
    shutil.rmtree(tmp_path)


def test_the_guides_gpu_column_prefers_a_t4_and_else_names_the_newest_gpu(run_folder, course):
    def lesson_times(gpu, started, seconds):
        stamp(run_folder, sha=started[:10].replace("-", "") * 4, gpu=gpu, count=1, started=started)
        report = json.loads((run_folder / "report.json").read_text())
        report["date"], report["windows"] = started[:10], [{"window": 1, "started": started}]
        report["lessons"]["lessons"] = {stem: {"seconds": s, "status": "ok"} for stem, s in seconds.items()}
        (run_folder / "report.json").write_text(json.dumps(report))
        return import_gpu_run.import_run(run_folder, course)

    other = "02_tensors_on_device"
    lesson_times("Tesla T4", "2026-11-21T08:00:00+00:00", {LESSON: 40.2})
    lesson_times("NVIDIA H100 80GB HBM3", "2026-11-22T08:00:00+00:00", {LESSON: 9.6, other: 12.4})
    done = lesson_times("NVIDIA A100-SXM4-40GB", "2026-11-23T08:00:00+00:00", {other: 15.0})
    lesson_times("NVIDIA H100 80GB HBM3", "2026-11-22T09:00:00+00:00", {other: 11.0})  # older than the A100's
    rows = {row[3:5]: row for row in (course / "docs" / "instructor_guide.md").read_text().splitlines() if "| [" in row}
    assert rows[LESSON[:2]].endswith("| 40 s (T4) |")  # the workshop GPU's time, though an H100 ran it later
    assert rows["02"].endswith("| 15 s (A100) |") and rows["03"].endswith("| not measured yet |")
    assert "GPU column: 2 of" in done


def test_a_run_merged_from_two_windows_says_which_parts_each_window_ran(run_folder, course):
    stamp(run_folder, gpu="NVIDIA H100 80GB HBM3", count=1)
    report = json.loads((run_folder / "report.json").read_text())
    report["windows"] = [
        {"window": 1, "started": "2026-11-21T08:00:00+00:00", "seconds": 530.0},
        {"window": 2, "started": "2026-11-21T09:00:00+00:00", "seconds": 410.0},
    ]
    report["parts"] = {
        "unit tests": {"status": "passed", "window": 1},
        f"lesson {LESSON}": {"status": "passed", "window": 2},
        "bench speedrun": {"status": "not run (budget)", "window": None},
    }
    (run_folder / "report.json").write_text(json.dumps(report))
    done = import_gpu_run.import_run(run_folder, course)
    assert "window 1 (2026-11-21T08:00:00+00:00, 530 s): unit tests" in done
    assert f"window 2 (2026-11-21T09:00:00+00:00, 410 s): lesson {LESSON}" in done
    assert "not finished in any window: bench speedrun (not run (budget))" in done


def test_a_run_that_does_not_know_its_commit_is_refused_with_the_fix(run_folder, course):
    stamp(run_folder, sha=None, gpu="NVIDIA H100 80GB HBM3", count=1)
    with pytest.raises(import_gpu_run.ImportRefused, match="--sha COMMIT"):
        import_gpu_run.import_run(run_folder, course)


def test_a_run_of_the_suite_alone_is_imported_from_its_report(run_folder, course):
    """`make gpu-suite` on a self-hosted runner (ci.yml's gpu job) or by hand writes no manifest: its report says
    the commit, the GPU and when its first window started."""
    stamp(run_folder, gpu="NVIDIA H100 80GB HBM3", count=1)
    (run_folder / "manifest.json").unlink()
    report = json.loads((run_folder / "report.json").read_text())
    report.update(format=2, complete=False, windows=[{"window": 1, "started": "2026-11-22T07:00:00+00:00"}])
    (run_folder / "report.json").write_text(json.dumps(report))
    done = import_gpu_run.import_run(run_folder, course)
    target = course / "reports" / "gpu" / "2026-11-22-nvidia-h100-80gb-hbm3"
    assert f"imported the incomplete run of {SHA[:7]} on NVIDIA H100 80GB HBM3 into" in done
    manifest = json.loads((target / "manifest.json").read_text())
    assert (
        manifest["sha"] == SHA and manifest["gpus"] == ["NVIDIA H100 80GB HBM3"] and "report.json" in manifest["from"]
    )
    assert not (run_folder / "manifest.json").exists()  # the run itself is left as it was


def test_reimporting_an_imported_run_keeps_it_and_refreshes_the_references(run_folder, course):
    stamp(run_folder)
    import_gpu_run.import_run(run_folder, course)
    (target,) = (course / "reports" / "gpu").iterdir()
    files = {path.relative_to(target): path.read_bytes() for path in target.rglob("*") if path.is_file()}
    (course / "colab_gpu" / "references.json").write_text("{}")
    done = import_gpu_run.import_run(target, course)  # the committed run as RUN=: its target is its source
    assert "is imported already: kept as it is" in done
    assert {path.relative_to(target): path.read_bytes() for path in target.rglob("*") if path.is_file()} == files
    assert json.loads((course / "colab_gpu" / "references.json").read_text())["figures"]


@pytest.mark.parametrize("name", ["report.json", "manifest.json"])
def test_a_truncated_report_or_manifest_is_refused_with_the_fix(run_folder, course, name):
    stamp(run_folder)
    text = (run_folder / name).read_text()
    (run_folder / name).write_text(text[: len(text) // 2])  # a copy cut short
    with pytest.raises(import_gpu_run.ImportRefused, match=rf"{name} cannot be read .*half copied. Copy the run"):
        import_gpu_run.import_run(run_folder, course)


def test_a_failed_copy_leaves_the_run_imported_before_it(run_folder, course, monkeypatch):
    stamp(run_folder)
    import_gpu_run.import_run(run_folder, course)
    (target,) = (course / "reports" / "gpu").iterdir()
    before = (target / "report.json").read_text()
    real_copy = import_gpu_run.shutil.copyfile

    def copy_that_fails_on_notebooks(source, destination):
        if str(source).endswith(".ipynb"):
            raise OSError("No space left on device")
        return real_copy(source, destination)

    monkeypatch.setattr(import_gpu_run.shutil, "copyfile", copy_that_fails_on_notebooks)
    with pytest.raises(OSError):
        import_gpu_run.import_run(run_folder, course)
    assert (target / "report.json").read_text() == before and list((target / "notebooks").iterdir())


def test_a_partial_rerun_of_an_imported_commit_does_not_replace_the_full_run(run_folder, course):
    # Issue 63: a re-run of one lesson replaced the run of every lesson (its notebooks gone, references recomputed).
    stamp(run_folder)
    import_gpu_run.import_run(run_folder, course)
    (target,) = (course / "reports" / "gpu").iterdir()
    full = sorted(p.name for p in (target / "notebooks").iterdir())
    for notebook in (run_folder / "notebooks").glob("*.ipynb"):
        notebook.unlink()  # the partial re-run executed none of them
    with pytest.raises(import_gpu_run.ImportRefused, match="lacks 1 of them .* --resume into the same --out"):
        import_gpu_run.import_run(run_folder, course)
    assert sorted(p.name for p in (target / "notebooks").iterdir()) == full
    import_gpu_run.import_run(run_folder, course, replace=True)  # asked for: replaced
    assert not list((target / "notebooks").iterdir())


@pytest.mark.parametrize(
    ("field", "value"), [("gpu", None), ("parts", ["a list"]), ("lesson_figures", "text"), ("parts", {"01": 1})]
)
def test_a_damaged_report_is_refused_by_its_field_before_anything_is_copied(run_folder, course, field, value):
    stamp(run_folder)
    report = json.loads((run_folder / "report.json").read_text())
    (run_folder / "report.json").write_text(json.dumps(dict(report, **{field: value})))
    with pytest.raises(import_gpu_run.ImportRefused, match="the report is damaged"):
        import_gpu_run.import_run(run_folder, course)
    assert not list((course / "reports" / "gpu").iterdir())  # nothing left to break the next import


def test_a_damaged_manifest_already_imported_is_named_not_a_crash(run_folder, course):
    stamp(run_folder)
    import_gpu_run.import_run(run_folder, course)
    (target,) = (course / "reports" / "gpu").iterdir()
    (target / "manifest.json").write_text('{"sha": "89ab')
    with pytest.raises(import_gpu_run.ImportRefused, match=f"{target.name}/manifest.json cannot be read"):
        import_gpu_run.import_run(stamp(run_folder, sha="f" * 40), course)
