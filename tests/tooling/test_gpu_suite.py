import json

import gpu_suite
import pytest


def test_reads_junit_outcomes(tmp_path):
    xml = tmp_path / "unit.xml"
    xml.write_text(
        "<testsuites><testsuite>"
        "<testcase classname='tests.a' name='ok' time='0.5'/>"
        "<testcase classname='tests.a' name='bad' time='1'><failure message='x'/></testcase>"
        "<testcase classname='tests.a' name='gpu' time='0'><skipped/></testcase>"
        "</testsuite></testsuites>"
    )
    assert gpu_suite.junit_rows(xml) == [
        ("tests.a::ok", "passed", 0.5),
        ("tests.a::bad", "FAILED", 1.0),
        ("tests.a::gpu", "skipped", 0.0),
    ]
    assert gpu_suite.junit_rows(tmp_path / "missing.xml") == []
    assert gpu_suite.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


BENCH = [  # as bench.json holds them: each row carries its target's verdict, judged where it was measured
    {"key": "amp", "name": "AMP vs fp32", "status": "ok", "ratio": 3.1, "unit": "x", "note": "", "met": True},
    {
        "key": "amp_peak",
        "name": "AMP vs peak",
        "status": "ok",
        "ratio": 0.41,
        "unit": "of peak",
        "note": "",
        "met": False,
    },
    {"key": "cnn_cpu_gpu", "name": "CNN", "status": "ok", "ratio": 45.0, "unit": "x", "note": "", "met": True},
    {
        "key": "resident",
        "name": "resident",
        "status": "skipped",
        "ratio": None,
        "unit": "",
        "note": "no GPU",
        "met": None,
    },
]


def test_targets_met_missed_and_unmeasured():
    results = {t["key"]: t for t in gpu_suite.evaluate_targets(BENCH, course_seconds=240.0)}
    assert results["amp"]["met"] is True and results["cnn_cpu_gpu"]["met"] is True
    assert results["amp_peak"]["met"] is False and results["amp_peak"]["value"] == 0.41
    assert results["resident"]["met"] is None  # skipped, not measured
    assert results["fit"]["value"] is None and results["fit"]["met"] is None  # missing row: listed, not dropped
    assert results["course"]["met"] is True and results["course"]["value"] == 240.0
    assert gpu_suite.evaluate_targets(BENCH, course_seconds=None)[-1]["met"] is None
    assert gpu_suite.evaluate_targets(BENCH, course_seconds=400.0)[-1]["met"] is False
    assert [t["key"] for t in results.values()][:-1] == list(gpu_suite.TARGETS)  # every bench target, in order
    assert all(t["reason"] for t in results.values())


def test_report_lists_everything(tmp_path):
    doctor = {
        "gpus": [{"name": "Tesla T4", "compute_capability": "7.5", "total_memory_gib": 14.7}] * 2,
        "torch": "2.10.0",
        "cuda_runtime": "12.8",
        "cudnn": 91000,
        "driver": "560",
        "python": "3.12.3",
        "cpu_count": 4,
    }
    steps = {"unit tests": (0, 200.0), "lessons": (0, 240.0), "colab_gpu bench": (0, 60.0)}
    targets = gpu_suite.evaluate_targets(BENCH, 240.0)
    figures = {"02.matmul_gpu_vs_cpu": {"value": 123.4, "device": "Tesla T4"}}
    lessons = {"device": "cuda:0 (Tesla T4)", "lessons": {"01_enable_gpu_runtime": {"seconds": 3.0, "status": "ok"}}}
    md, js = gpu_suite.write_report(
        tmp_path / "run",
        doctor,
        steps,
        BENCH,
        targets,
        lessons,
        [("tests::t", "passed", 0.1)],
        figures,
        commit="abc1234",
    )
    text, data = md.read_text(), json.loads(js.read_text())
    assert (md.name, js.name, md.parent.name) == ("report.md", "report.json", "run")
    assert text.startswith("# GPU suite: Tesla T4 x2, ") and data["gpu"] == "Tesla T4 x2"
    assert "| 01_enable_gpu_runtime | cuda:0 (Tesla T4) | 3.0 | ok |" in text
    assert data["lessons"] == lessons and data["commit"] == "abc1234" and "- Commit: abc1234" in text
    assert "| 02.matmul_gpu_vs_cpu | 123 | Tesla T4 |" in text
    assert data["lesson_figures"] == figures  # what scripts/update_references.py reads
    assert "compute capability 7.5" in text and "| unit tests | passed | 200 |" in text
    assert "| AMP MLP training reaches at least 50% of the measured half-precision matmul peak | 0.41 | NO |" in text
    assert "| resident | skipped | no GPU |" in text and "| tests::t | passed |" in text
    assert data["targets"][0]["key"] == "cnn_cpu_gpu"


def test_one_gpu_is_named_without_a_count():
    assert gpu_suite.gpu_title({"gpus": [{"name": "NVIDIA L4"}]}) == "NVIDIA L4"
    assert gpu_suite.gpu_title({"gpus": [{"name": "Tesla T4"}, {"name": "Tesla T4"}]}) == "Tesla T4 x2"


def test_lessons_are_selected_by_number():
    assert [s.name[:2] for s in gpu_suite.selected_lessons(["01", "08"])] == ["01", "08"]
    assert len(gpu_suite.selected_lessons([])) == len(gpu_suite.lesson_sources())
    with pytest.raises(SystemExit, match=r"no lesson numbered \['99'\]"):
        gpu_suite.selected_lessons(["99"])
