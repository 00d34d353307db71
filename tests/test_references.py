"""Predict, then measure: lesson figures beside the course GPUs' figures from committed reports."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch
import update_references

import colab_gpu as cg
from colab_gpu.hardware.gpus import REFERENCE_GPUS
from colab_gpu.measure import references


def test_gpu_labels_from_device_names():
    assert references.gpu_label("Tesla T4") == "T4"
    assert references.gpu_label("NVIDIA A100-SXM4-40GB") == "A100"
    assert references.gpu_label("NVIDIA H100 80GB HBM3") == "H100"
    assert references.gpu_label("NVIDIA L4") == "L4"
    assert references.gpu_label("Tesla P100-PCIE-16GB") is None


def test_a_figure_keeps_its_trailing_zeros(capsys, monkeypatch):
    # The H100 run measured reduce-overhead at 1.0035x eager: "1 x" read like a round guess, not a measurement.
    monkeypatch.setattr(
        references, "reference_figures", lambda key: {"T4": 2.0, "L4": None, "A100": 0.5, "H100": 1.0035}
    )
    cg.compare_with_references("11.x", 1.0, "cpu", what="speed-up")
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  this CPU runtime: 1.00 x"
    assert out[2:] == [
        "    T4 (course report): 2.00 x",
        "    L4 (course report): not measured yet",
        "  A100 (course report): 0.500 x",
        "  H100 (course report): 1.00 x",
    ]


def test_comparison_names_every_course_gpu_and_says_what_is_not_measured(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(
        references, "reference_figures", lambda key: {"T4": 21.5, "L4": None, "A100": None, "H100": 140.0}
    )
    figures = tmp_path / "figures.json"
    monkeypatch.setenv(references.FIGURES_ENV, str(figures))
    cg.compare_with_references("02.x", 1.25, "cpu", what="matmul speed-up", prediction=30)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "matmul speed-up:" and out[1] == "  your prediction:   30 x"
    assert out[2] == "  this CPU runtime: 1.25 x"
    assert out[3:] == [
        "    T4 (course report): 21.5 x",
        "    L4 (course report): not measured yet",
        "  A100 (course report): not measured yet",
        "  H100 (course report): 140 x",
    ]
    assert json.loads(figures.read_text()) == {"02.x": {"value": 1.25, "device": "cpu"}}  # for the GPU report


def test_before_any_gpu_run_the_course_gpus_take_one_line(capsys, monkeypatch):
    monkeypatch.setattr(references, "reference_figures", lambda key: dict.fromkeys(REFERENCE_GPUS))
    cg.compare_with_references("02.x", 1.25, "cpu", what="matmul speed-up")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "matmul speed-up:",
        "  this CPU runtime: 1.25 x",
        "  T4, L4, A100, H100 (course reports): not measured yet, until the course's GPU CI has run",
    ]


def test_a_figures_file_named_before_the_tests_start_gets_nothing_from_them(tmp_path):
    # The GPU suite runs the unit tests with COLAB_GPU_FIGURES naming its report's figures file: a CPU figure of a
    # test (this one shows 1.25 x on "cpu") was recorded there as the run's GPU figure. tests/conftest.py unsets it.
    figures = tmp_path / "figures.json"
    test = f"{Path(__file__)}::test_before_any_gpu_run_the_course_gpus_take_one_line"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-p", "no:cacheprovider", "-q"],
        cwd=Path(__file__).resolve().parents[1],
        env=dict(os.environ, **{references.FIGURES_ENV: str(figures)}),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not figures.exists()


def test_a_figure_this_runtime_cannot_measure_is_said_so_and_not_recorded(capsys, monkeypatch, tmp_path):
    figures = tmp_path / "figures.json"
    monkeypatch.setenv(references.FIGURES_ENV, str(figures))
    cg.compare_with_references("02.x", None, torch.device("cpu"), what="GPU speed-up")
    out = capsys.readouterr().out
    assert "this CPU runtime: not measurable here" in out and not figures.exists()


def test_shipped_references_are_valid_and_list_every_course_gpu():
    assert set(cg.measure.references.reference_figures("no such figure")) == set(REFERENCE_GPUS)


def test_update_references_takes_the_newest_report_per_gpu(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()

    def report(name, gpu, figures):
        (reports / name).mkdir()
        (reports / name / "report.json").write_text(
            json.dumps({"runtime": {"gpus": [{"name": gpu}]}, "lesson_figures": figures})
        )

    report("2026-11-01-tesla-t4-x2", "Tesla T4", {"02.x": {"value": 20.0, "device": "Tesla T4"}})
    report("2026-12-01-tesla-t4-x2", "Tesla T4", {"02.x": {"value": 22.0, "device": "Tesla T4"}})
    report("2026-12-02-h100", "NVIDIA H100 80GB HBM3", {"02.x": {"value": 150.0, "device": "H100"}})
    report("2026-12-03-p100", "Tesla P100-PCIE-16GB", {"02.x": {"value": 5.0, "device": "P100"}})
    report("2026-12-04-l4", "NVIDIA L4", {})  # an older suite without lesson figures
    data = update_references.collect(reports, shown={"02.x"})
    assert data["figures"] == {"02.x": {"T4": 22.0, "H100": 150.0}}
    assert data["sources"] == {"02.x": {"T4": "2026-12-01-tesla-t4-x2", "H100": "2026-12-02-h100"}}
    target = tmp_path / "references.json"
    assert update_references.main(reports, target, shown={"02.x"}) == 0
    assert json.loads(target.read_text())["figures"] == data["figures"]


def test_update_references_leaves_out_a_figure_measured_on_another_device_than_the_runs_gpu(tmp_path, capsys):
    # A real H100 run held a CPU figure: a unit test of the run had recorded it into the suite's figures file.
    reports = tmp_path / "reports" / "gpu"
    (reports / "2026-12-02-h100").mkdir(parents=True)
    figures = {
        "02.matmul_gpu_vs_cpu": {"value": 150.0, "device": "NVIDIA H100 80GB HBM3"},
        "02.x": {"value": 1.25, "device": "cpu"},
        "02.y": {"value": 3.0},  # from before figures recorded their device
    }
    report = {"gpu": "NVIDIA H100 80GB HBM3", "lesson_figures": figures}
    (reports / "2026-12-02-h100" / "report.json").write_text(json.dumps(report))
    (reports / "2026-12-03-t4").mkdir()  # a run whose every figure is from another device adds nothing
    report = {"gpu": "Tesla T4 x2", "lesson_figures": {"02.x": {"value": 1.5, "device": "cpu"}}}
    (reports / "2026-12-03-t4" / "report.json").write_text(json.dumps(report))
    data = update_references.collect(reports, shown={"02.matmul_gpu_vs_cpu", "02.x", "02.y"})
    assert data["figures"] == {"02.matmul_gpu_vs_cpu": {"H100": 150.0}}
    assert data["sources"] == {"02.matmul_gpu_vs_cpu": {"H100": "2026-12-02-h100"}}
    assert capsys.readouterr().out.splitlines() == [
        "skipped 2 figure(s) of reports/gpu/2026-12-02-h100 measured on another device: "
        "02.x (cpu), 02.y (no device recorded)",
        "skipped 1 figure(s) of reports/gpu/2026-12-03-t4 measured on another device: 02.x (cpu)",
    ]


def test_update_references_leaves_out_the_figures_no_lesson_shows_any_more(tmp_path, capsys):
    # references.json kept 11.compile_speedup_mlp from an older run long after lesson 11 stopped printing it.
    lessons = tmp_path / "notebooks"
    lessons.mkdir()
    (lessons / "11_compile.py").write_text(
        'cg.compare_with_references("11.graphs_speedup_mlp", gain, device,\n'
        '                           what="reduce-overhead vs eager")\n'
        "cg.compare_with_references(\n"
        '    "11.compile_speedup_fusion", fused.speedup(), device, what="compiled vs eager")\n'
    )
    shown = update_references.lesson_figure_keys(sorted(lessons.glob("*.py")))
    assert shown == {"11.graphs_speedup_mlp", "11.compile_speedup_fusion"}
    reports = tmp_path / "reports" / "gpu"
    for run, figures in {
        "2026-11-20-h100": {"11.compile_speedup_mlp": 1.09, "11.compile_speedup_fusion": 1.5},
        "2026-11-26-h100": {"11.graphs_speedup_mlp": 1.0},
        "2026-11-27-t4": {"10.item_every_step_cost": 0.9},  # a run of only dropped figures is no source
    }.items():
        (reports / run).mkdir(parents=True)
        gpu = "Tesla T4" if run.endswith("t4") else "NVIDIA H100 80GB HBM3"
        lesson_figures = {key: {"value": value, "device": gpu} for key, value in figures.items()}
        (reports / run / "report.json").write_text(json.dumps({"gpu": gpu, "lesson_figures": lesson_figures}))
    data = update_references.collect(reports, shown)
    assert data["figures"] == {"11.compile_speedup_fusion": {"H100": 1.5}, "11.graphs_speedup_mlp": {"H100": 1.0}}
    assert data["sources"] == {
        "11.compile_speedup_fusion": {"H100": "2026-11-20-h100"},  # each figure names the run it came from
        "11.graphs_speedup_mlp": {"H100": "2026-11-26-h100"},
    }
    assert capsys.readouterr().out.splitlines() == [
        "left out 2 figure(s) that no lesson shows any more: 10.item_every_step_cost, 11.compile_speedup_mlp"
    ]


def test_the_shipped_references_hold_only_figures_a_lesson_shows():
    shipped = json.loads((Path(cg.__file__).parent / "references.json").read_text())
    assert set(shipped["figures"]) <= update_references.lesson_figure_keys()


def test_a_gpu_label_matches_a_whole_word_of_the_name_so_an_l40s_is_no_l4():
    # Issue 63: an L40S was filed as the L4's reference (and given the L4's timeout): "L4" is in "L40S".
    from colab_gpu.measure.references import gpu_label

    assert gpu_label("NVIDIA L40S") is None and gpu_label("NVIDIA L4") == "L4"
    assert gpu_label("Tesla T4") == "T4" and gpu_label("Tesla T4 x2") == "T4"
    assert gpu_label("NVIDIA A100-SXM4-40GB") == "A100" and gpu_label("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_label("NVIDIA H200") is None and gpu_label("") is None


def test_a_target_for_one_gpu_given_as_a_string_is_refused_not_applied_elsewhere():
    import pytest

    from colab_gpu.bench.rows import Target

    with pytest.raises(ValueError, match=r"write gpus=\('T4',\)"):
        Target("x", "y", at_least=2, gpus="T4")
    with pytest.raises(ValueError, match="the course's GPU labels"):
        Target("x", "y", at_least=2, gpus=("L40S",))
    t4 = Target("x", "y", at_least=2, gpus=("T4",))
    assert t4.applies_to("Tesla T4") and not t4.applies_to("NVIDIA A100-SXM4-40GB")


def test_a_figure_key_one_letter_off_is_named_with_the_key_it_resembles(capsys):
    # Issue 63: a key one letter off printed "not measured yet" forever.
    import colab_gpu as cg

    cg.compare_with_references("02.matmul_gpu_vs_cpus", 3.0, "cpu", what="matmul")
    assert "(no course figure is named '02.matmul_gpu_vs_cpus': did you mean '02.matmul_gpu_vs_cpu'?)" in (
        capsys.readouterr().out
    )
    cg.compare_with_references("15.a_new_figure", 3.0, "cpu", what="new")  # a new figure: not measured yet, no guess
    assert "did you mean" not in capsys.readouterr().out


def test_a_course_figure_of_another_workload_says_what_differs(capsys, monkeypatch, tmp_path):
    # Issue 65: lesson 03 printed the H100's 1.38x, measured on 1,437 stand-in images, under a learner's 60,000.
    monkeypatch.setattr(references, "reference_figures", lambda key: {"T4": 3.1, "L4": None, "A100": 2.0, "H100": 1.38})
    shipped = {
        "workloads": {
            "03.x": {
                "H100": {"images": 1437, "data": "digits (scikit-learn)"},
                "T4": {"images": 60000, "data": "FashionMNIST"},
            }
        }
    }
    monkeypatch.setattr(references, "_shipped", lambda: shipped)
    figures = tmp_path / "figures.json"
    monkeypatch.setenv(references.FIGURES_ENV, str(figures))
    cg.compare_with_references("03.x", 2.5, "cpu", what="epoch", workload={"images": 60000, "data": "FashionMNIST"})
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "    T4 (course report): 3.10 x"  # the same workload: no note
    assert (
        out[4] == "  A100 (course report): 2.00 x (its run did not record its workload: it may not compare with yours)"
    )
    assert out[5] == (
        "  H100 (course report): 1.38 x (on images 1,437, data digits (scikit-learn); yours: images 60,000, data "
        "FashionMNIST: not the same workload)"
    )
    assert json.loads(figures.read_text())["03.x"]["workload"] == {"images": 60000, "data": "FashionMNIST"}
    cg.compare_with_references("03.x", 2.5, "cpu", what="epoch")  # a lesson that gives no workload: no notes
    assert "workload" not in capsys.readouterr().out


def test_update_references_keeps_each_figures_workload_from_its_run(tmp_path):
    run = tmp_path / "reports" / "gpu" / "2026-12-01-tesla-t4"
    run.mkdir(parents=True)
    figure = {"value": 3.1, "device": "Tesla T4", "workload": {"images": 60000, "data": "FashionMNIST"}}
    report = {"gpu": "Tesla T4", "date": "2026-12-01", "lesson_figures": {"03.mlp_epoch_gpu_vs_cpu": figure}}
    (run / "report.json").write_text(json.dumps(report))
    data = update_references.collect(tmp_path / "reports" / "gpu", shown={"03.mlp_epoch_gpu_vs_cpu"})
    assert data["workloads"] == {"03.mlp_epoch_gpu_vs_cpu": {"T4": {"images": 60000, "data": "FashionMNIST"}}}


def test_colab_and_kaggle_t4_runs_each_keep_their_figure_named_by_platform(tmp_path, capsys, monkeypatch):
    # Colab's T4 (2 vCPUs) and Kaggle's T4 x2 are different hosts: both used to be filed as "T4", the newest winning.
    reports = tmp_path / "reports"
    reports.mkdir()

    def report(name, runtime, value):
        (reports / name).mkdir()
        figures = {"03.x": {"value": value, "device": "Tesla T4", "workload": {"images": 60000}}}
        (reports / name / "report.json").write_text(json.dumps({"runtime": runtime, "lesson_figures": figures}))

    colab = {"platform": "Colab", "gpu_count": 1, "cpu_count": 2, "gpus": [{"name": "Tesla T4"}]}
    kaggle = {"platform": "Kaggle", "gpu_count": 2, "cpu_count": 4, "gpus": [{"name": "Tesla T4"}] * 2}
    report("2026-12-01-colab", colab, 2.5)
    report("2026-12-02-kaggle", kaggle, 3.5)
    report("2026-12-03-colab", colab, 2.4)  # the same platform again: the newer run wins
    data = update_references.collect(reports, shown={"03.x"})
    assert data["figures"] == {"03.x": {"T4 on Colab, 2 CPU cores": 2.4, "T4 x2 on Kaggle, 4 CPU cores": 3.5}}
    monkeypatch.setattr(references, "_shipped", lambda: data)
    assert list(references.reference_figures("03.x")) == [
        "T4 on Colab, 2 CPU cores",
        "T4 x2 on Kaggle, 4 CPU cores",
        "L4",
        "A100",
        "H100",
    ]
    cg.compare_with_references("03.x", 1.2, "cpu", what="epoch speed-up", workload={"images": 60000})
    out = capsys.readouterr().out.splitlines()
    assert out[2:4] == [
        "  T4 on Colab, 2 CPU cores (course report): 2.40 x",
        "  T4 x2 on Kaggle, 4 CPU cores (course report): 3.50 x",
    ]
    assert references.reference_title("H100", {"platform": "local", "gpu_count": 1, "cpu_count": 16}) == (
        "H100 on a server, 16 CPU cores"
    )
    assert references.reference_title("T4", {"gpus": [{"name": "Tesla T4"}]}) == "T4"  # a run from before platforms


def test_every_figure_a_lesson_compares_says_what_it_was_measured_on():
    # A course figure is printed beside the learner's only as the same workload, or with what differs (issue 65): a
    # comparison without `workload=` would print an H100's figure of another size under the learner's heading.
    import ast

    from nbtools import lesson_sources

    calls = [
        (source.name, node)
        for source in lesson_sources()
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "compare_with_references"
    ]
    assert len(calls) >= 13
    without = [(name, node.lineno) for name, node in calls if "workload" not in {kw.arg for kw in node.keywords}]
    assert not without, f"compare_with_references without workload= (lesson, line): {without}"


# A figure as prose writes it: a number with its unit, or a share "0.67 of" (a compute capability like 8.0 is not one).
MEASURED = re.compile(r"\d(?:[\d,.]*\d)?\s?(?:x\b|ms\b|µs\b|s\b|s/epoch|TFLOP/s|GB/s|%)|\b0\.\d+ of\b")
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "colab_gpu"


def _package_lines():
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            yield path.relative_to(ROOT).as_posix(), number, line, lines[number] if number < len(lines) else ""


def _said_of_the_h100(line: str, after: str) -> str:
    """The words after "H100" on ``line`` (from the parenthesis it stands in, if any), and the next line's up to the
    parenthesis that mention left open."""
    at = line.index("H100")
    opened = line.rfind("(", 0, at)
    said = line[opened if opened > line.rfind(")", 0, at) else at :]
    return said + " " + after.split(")")[0] if said.count("(") > said.count(")") else said


def test_no_h100_figure_is_copied_into_the_packages_prose():
    # A figure copied into a comment goes stale when a run lands (the amp_peak row read 0.72 where a comment said
    # 0.67): the prose cites the run folder, the bench row or the references.json key, and the figure stays there.
    copied = [
        f"{path}:{number}: {line.strip()}"
        for path, number, line, after in _package_lines()
        if "H100" in line and MEASURED.search(_said_of_the_h100(line, after))
    ]
    assert not copied, "cite the run (reports/gpu/<folder>) or the figure's key instead:\n" + "\n".join(copied)


def test_the_runs_and_figures_the_package_cites_exist():
    figures = set(json.loads((PACKAGE / "references.json").read_text())["figures"])
    compared = set(re.findall(r"\"(\d\d\.\w+)\"", "".join(p.read_text() for p in ROOT.glob("notebooks/[0-9]*.py"))))
    text = {path: p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py") for path in [p.name]}
    runs = {run for source in text.values() for run in re.findall(r"reports/gpu/([\w.-]*\w)", source)}
    cited = {key for source in text.values() for key in re.findall(r"\bfigure \"?(\d\d\.[a-z]\w*)", source)}
    assert runs and cited
    assert not {run for run in runs if not (ROOT / "reports" / "gpu" / run / "report.json").is_file()}
    assert not cited - figures - compared, "a figure key no run measured and no lesson compares"
