import json

import gpu_suite


def test_reads_junit_outcomes(tmp_path):
    xml = tmp_path / "unit.xml"
    xml.write_text(
        "<testsuites><testsuite>"
        "<testcase classname='tests.a' name='ok' time='0.5'/>"
        "<testcase classname='tests.a' name='bad' time='1'><failure message='x'/></testcase>"
        "<testcase classname='tests.a' name='gpu' time='0'><skipped/></testcase>"
        "</testsuite></testsuites>"
    )
    assert gpu_suite.junit_rows(xml) == [("tests.a::ok", "passed", 0.5), ("tests.a::bad", "FAILED", 1.0),
                                         ("tests.a::gpu", "skipped", 0.0)]
    assert gpu_suite.junit_rows(tmp_path / "missing.xml") == []
    assert gpu_suite.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


BENCH = [  # as bench.json holds them: each row carries its target's verdict, judged where it was measured
    {"key": "amp", "name": "AMP vs fp32", "status": "ok", "ratio": 3.1, "unit": "x", "note": "", "met": True},
    {"key": "amp_peak", "name": "AMP vs peak", "status": "ok", "ratio": 0.41, "unit": "of peak", "note": "",
     "met": False},
    {"key": "cnn_cpu_gpu", "name": "CNN", "status": "ok", "ratio": 45.0, "unit": "x", "note": "", "met": True},
    {"key": "resident", "name": "resident", "status": "skipped", "ratio": None, "unit": "", "note": "no GPU",
     "met": None},
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


def test_report_lists_everything(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_suite, "REPORTS", tmp_path)
    doctor = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "total_memory_gib": 79.1}],
              "torch": "2.11.0", "cuda_runtime": "13.0", "cudnn": 91000, "driver": "580", "python": "3.12.3",
              "cpu_count": 16}
    steps = {"make test": (0, 200.0), "make course": (0, 240.0), "colab_gpu bench": (0, 60.0)}
    targets = gpu_suite.evaluate_targets(BENCH, 240.0)
    figures = {"02.matmul_gpu_vs_cpu": {"value": 123.4, "device": "NVIDIA H100 80GB HBM3"}}
    lessons = {"device": "NVIDIA H100 80GB HBM3",
               "lessons": {"01_enable_gpu_runtime": {"seconds": 3.0, "status": "ok"}}}
    md, js = gpu_suite.write_report(doctor, steps, BENCH, targets, lessons, [("tests::t", "passed", 0.1)], figures)
    text = md.read_text()
    assert "| 01_enable_gpu_runtime | NVIDIA H100 80GB HBM3 | 3.0 | ok |" in text
    assert json.loads(js.read_text())["lessons"] == lessons  # structured, read from build/timings.json
    assert "| 02.matmul_gpu_vs_cpu | 123 | NVIDIA H100 80GB HBM3 |" in text
    assert json.loads(js.read_text())["lesson_figures"] == figures  # what scripts/update_references.py reads
    assert md.name.endswith("-nvidia-h100-80gb-hbm3.md")
    assert "compute capability 9.0" in text and "| `make test` | passed | 200 |" in text
    assert "| AMP MLP training reaches at least 50% of the measured half-precision matmul peak | 0.41 | NO |" in text
    assert "| resident | skipped | no GPU |" in text and "| tests::t | passed |" in text
    assert json.loads(js.read_text())["targets"][0]["key"] == "cnn_cpu_gpu"


def test_lessons_come_from_timings_json_not_from_markdown(tmp_path):
    assert gpu_suite.course_lessons(tmp_path / "timings.json") == {}
    (tmp_path / "timings.json").write_text('{"device": "cpu", "lessons": {"01_x": {"seconds": 1.5, "status": "ok"}}}')
    assert gpu_suite.course_lessons(tmp_path / "timings.json")["lessons"]["01_x"]["seconds"] == 1.5
