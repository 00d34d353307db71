import json
import sys

import gpu_suite
import pytest
import suite_plan
import suite_report
import suite_steps

from colab_gpu.bench import TARGETS


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
    assert [t["key"] for t in results.values()][:-1] == list(TARGETS)  # every bench target, in order
    assert all(t["reason"] for t in results.values() if t["key"] != "speedrun")
    assert results["speedrun"]["target"] == "none for this GPU (targets for H100/A100, T4)"  # no GPU named here
    on_t4 = {t["key"]: t for t in gpu_suite.evaluate_targets(BENCH, None, "Tesla T4")}
    assert "at least 5x" in on_t4["speedrun"]["target"] and "prediction" in on_t4["speedrun"]["target"]
    on_h100 = {t["key"]: t for t in gpu_suite.evaluate_targets(BENCH, None, "NVIDIA H100 80GB HBM3")}
    assert "at least 20x" in on_h100["speedrun"]["target"] and "host-bound" in on_h100["speedrun"]["reason"]


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
    state = suite_report.new_state(doctor, "abc1234", "cuda:0 (Tesla T4)", all_lessons=False)
    state["windows"] = [
        {
            "window": 1,
            "started": "2026-11-26T10:00:00+00:00",
            "budget": 540,
            "seconds": 300.0,
            "parts": ["unit tests", "lesson 01_enable_gpu_runtime", "bench amp"],
        }
    ]
    figures = {"02.matmul_gpu_vs_cpu": {"value": 123.4, "device": "Tesla T4"}}
    state["parts"] = {
        "unit tests": {
            "kind": "tests",
            "status": "passed",
            "seconds": 200.0,
            "window": 1,
            "timeout": None,
            "error": None,
            "tests": [("tests::t", "passed", 0.1)],
        },
        "lesson 01_enable_gpu_runtime": {
            "kind": "lesson",
            "lesson": "01_enable_gpu_runtime",
            "status": "passed",
            "seconds": 3.0,
            "window": 1,
            "timeout": 300,
            "error": None,
            "figures": figures,
        },
        "lesson 02_tensors_on_device": {
            "kind": "lesson",
            "lesson": "02_tensors_on_device",
            "status": "not run (budget)",
            "seconds": None,
            "window": None,
            "timeout": None,
            "error": "expected 60 s, 20 s left",
        },
        "bench amp": {
            "kind": "bench",
            "experiment": "amp",
            "status": "passed",
            "seconds": 9.0,
            "window": 1,
            "timeout": None,
            "error": None,
            "rows": BENCH,
        },
    }
    md, js = suite_report.write_report(tmp_path / "run", state)
    text, data = md.read_text(), json.loads(js.read_text())
    assert (md.name, js.name, md.parent.name) == ("report.md", "report.json", "run")
    assert text.startswith("# GPU suite: Tesla T4 x2, ") and data["gpu"] == "Tesla T4 x2"
    assert "| 01_enable_gpu_runtime | cuda:0 (Tesla T4) | 3.0 | ok |" in text
    assert data["lessons"]["lessons"] == {"01_enable_gpu_runtime": {"seconds": 3.0, "status": "ok", "data": None}}
    assert data["commit"] == "abc1234" and "- Commit: abc1234" in text
    assert "| 02.matmul_gpu_vs_cpu | 123 | Tesla T4 |" in text
    assert data["lesson_figures"] == figures  # what scripts/gpu/update_references.py reads
    assert "compute capability 7.5" in text and "| unit tests | passed | 200 |" in text
    assert (
        "| AMP MLP training reaches at least 50% of the measured half-precision matmul peak (sustained) (predicted: no "
        "T4 run has measured it yet) | 0.41 | NO |" in text
    )
    assert "| resident | skipped | no GPU |" in text and "| tests::t | passed |" in text
    assert "| lesson 02_tensors_on_device | not run (budget) |  |  |  | expected 60 s, 20 s left |" in text
    assert "| lessons | incomplete | 3 |" in text and "3 of 4 parts passed; `scripts/gpu/gpu_suite.py --resume" in text
    assert data["steps"]["lessons"] == [3, 3.0] and data["complete"] is False
    assert data["targets"][0]["key"] == "cnn_cpu_gpu" and data["targets"][-1]["value"] is None
    assert not list((tmp_path / "run").glob("*.partial"))  # written whole, then moved into place


def test_one_gpu_is_named_without_a_count():
    assert gpu_suite.gpu_title({"gpus": [{"name": "NVIDIA L4"}]}) == "NVIDIA L4"
    assert gpu_suite.gpu_title({"gpus": [{"name": "Tesla T4"}, {"name": "Tesla T4"}]}) == "Tesla T4 x2"


def test_lessons_are_selected_by_number():
    assert [s.name[:2] for s in gpu_suite.selected_lessons(["01", "08"])] == ["01", "08"]
    assert len(gpu_suite.selected_lessons([])) == len(gpu_suite.lesson_sources())
    with pytest.raises(SystemExit, match=r"no lesson numbered \['99'\]"):
        gpu_suite.selected_lessons(["99"])


# --- budget, resume, timeouts: the suite in-process on small synthetic lessons (a CPU dry run) ---

CPU_DOCTOR = {
    "gpus": [],
    "torch": "x",
    "cuda_runtime": None,
    "cudnn": None,
    "driver": None,
    "python": "3",
    "cpu_count": 2,
}


@pytest.fixture
def lessons(tmp_path, monkeypatch):
    """Return a function that makes the suite's lessons these synthetic ones: {stem: [cell source, ...]}."""
    import nbformat

    def install(cells_by_stem: dict[str, list[str]]) -> None:
        pairs = {}
        for stem, cells in cells_by_stem.items():
            pair = tmp_path / "pairs" / f"{stem}.ipynb"
            pair.parent.mkdir(exist_ok=True)
            nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), pair)
            pairs[stem] = pair
        sources = [tmp_path / f"{stem}.py" for stem in cells_by_stem]
        monkeypatch.setattr(gpu_suite, "selected_lessons", lambda numbers: sources)
        monkeypatch.setattr(gpu_suite, "write_pairs", lambda numbers: [p for s, p in pairs.items() if s[:2] in numbers])
        monkeypatch.setattr(gpu_suite, "doctor_report", lambda python, env: CPU_DOCTOR)

    return install


def planned(tmp_path, seconds: dict[str, float]) -> str:
    """A report of an earlier run on this "GPU" whose part times the suite plans the budget by."""
    report = tmp_path / "earlier.json"
    parts = {name: {"status": "passed", "seconds": s} for name, s in seconds.items()}
    report.write_text(json.dumps({"gpu": "CPU dry run (no GPU)", "parts": parts}))
    return str(report)


def suite(out, *options):
    return gpu_suite.main(["--allow-cpu", "--unit-tests", "--bench-only", *options, "--out", str(out)])


def statuses(out):
    return {name: part["status"] for name, part in json.loads((out / "report.json").read_text())["parts"].items()}


def test_a_budget_that_cuts_after_the_second_lesson_leaves_the_rest_not_run_and_resume_completes_it(lessons, tmp_path):
    lessons({"01_a": ["print(1)"], "02_b": ["print(2)"], "03_c": ["print(3)"]})
    times = planned(tmp_path, {"lesson 01_a": 1, "lesson 02_b": 1, "lesson 03_c": 10_000})
    out = tmp_path / "run"
    assert suite(out, "--budget", "120", "--times", times) == 3  # 3: parts left for --resume
    assert statuses(out) == {"lesson 01_a": "passed", "lesson 02_b": "passed", "lesson 03_c": "not run (budget)"}
    report = json.loads((out / "report.json").read_text())
    assert report["parts"]["lesson 03_c"]["error"].startswith("expected 10000 s")
    assert "not run (budget)" in (out / "report.md").read_text() and not report["complete"]
    assert gpu_suite.main(["--allow-cpu", "--resume", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(statuses(out).values()) == {"passed"} and report["complete"]
    assert [w["parts"] for w in report["windows"]] == [["lesson 01_a", "lesson 02_b"], ["lesson 03_c"]]
    assert [report["parts"][f"lesson {s}"]["window"] for s in ("01_a", "02_b", "03_c")] == [1, 1, 2]
    assert list(report["lessons"]["lessons"]) == ["01_a", "02_b", "03_c"]  # what import_gpu_run and the guide read
    assert sorted(p.name for p in (out / "notebooks").iterdir()) == ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb"]
    assert report["parts"]["lesson 01_a"]["slowest"][0][:2] == [1, "print(1)"]  # why a lesson is slow, per cell
    assert "execution" not in json.loads((out / "notebooks" / "01_a.ipynb").read_text())["cells"][0]["metadata"]


def test_the_lesson_running_when_the_budget_ends_is_cut_and_resume_runs_it_again(lessons, tmp_path):
    lessons({"01_slow": ["print(1)", "import time; time.sleep(60)"]})
    out = tmp_path / "run"
    assert suite(out, "--budget", "15", "--times", planned(tmp_path, {"lesson 01_slow": 1})) == 3
    part = json.loads((out / "report.json").read_text())["parts"]["lesson 01_slow"]
    assert part["status"] == "cut (budget)" and "cell 2" in part["error"] and part["seconds"] < 15


def test_a_cell_past_the_lessons_timeout_fails_that_lesson_and_the_next_lesson_still_runs(lessons, tmp_path):
    lessons({"01_sleeps": ["import time; time.sleep(60)"], "02_fine": ["print('fine')"]})
    out = tmp_path / "run"
    assert suite(out, "--lesson-timeout", "5") == 1
    report = json.loads((out / "report.json").read_text())
    assert statuses(out) == {"lesson 01_sleeps": "failed", "lesson 02_fine": "passed"}
    error = report["parts"]["lesson 01_sleeps"]["error"]
    assert "cell 1 ('import time; time.sleep(60)')" in error and "timeout is 5 s" in error
    assert report["parts"]["lesson 01_sleeps"]["timeout"] == 5 and "| 5 |" in (out / "report.md").read_text()


def test_a_kernel_that_dies_fails_that_lesson_with_its_cell_and_the_next_lesson_still_runs(lessons, tmp_path):
    lessons({"01_dies": ["print(1)", "import os; os._exit(1)"], "02_fine": ["print('fine')"]})
    out = tmp_path / "run"
    assert suite(out) == 1
    assert statuses(out) == {"lesson 01_dies": "failed", "lesson 02_fine": "passed"}
    error = json.loads((out / "report.json").read_text())["parts"]["lesson 01_dies"]["error"]
    assert "cell 2 ('import os; os._exit(1)') killed the kernel" in error


def test_a_checked_cell_that_prints_something_else_fails_as_nbval_would(tmp_path):
    import nbformat
    import suite_lessons

    cell = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint('took 3 ms at 0xdead')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="took 9.5 s at 0xbeef\n")]
    pair = tmp_path / "01_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), pair)
    run = suite_lessons.run_lesson(pair, tmp_path / "run", 60, None, suite_lessons.kernel_env(False), refresh=False)
    assert run.status == "passed"  # timings and addresses are sanitized, as nbval_sanitize.cfg says
    cell.source = "# NBVAL_CHECK_OUTPUT\nprint('something else')"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), pair)
    run = suite_lessons.run_lesson(pair, tmp_path / "run", 60, None, suite_lessons.kernel_env(False), refresh=False)
    assert run.status == "failed" and "'stdout' differs" in run.error and "something else" in run.error
    assert ("01_x::cell 1 (NBVAL_CHECK_OUTPUT)", "FAILED", 0.0) in run.checks


def test_the_steps_a_lesson_profiles_are_kept_with_the_run(tmp_path):
    import nbformat
    import suite_lessons

    source = "import colab_gpu as cg, torch\nlayer = torch.nn.Linear(4, 4)\n"
    source += "cg.profile_step(lambda: layer(torch.randn(2, 4)).sum().backward(), 'cpu', steps=1).regime.name"
    pair = tmp_path / "10_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), pair)
    run = suite_lessons.run_lesson(pair, tmp_path / "run", 120, None, suite_lessons.kernel_env(False), refresh=False)
    (entry,) = [json.loads(line) for line in (tmp_path / "run" / "profiles" / "10_x.jsonl").read_text().splitlines()]
    assert run.status == "passed" and entry["regime"] == "CPU-bound" and entry["record"]["steps"] == 1


def test_the_lessons_figures_reach_the_report_and_never_the_unit_tests(monkeypatch, tmp_path):
    monkeypatch.setenv("COLAB_GPU_FIGURES", str(tmp_path / "leaked.json"))
    monkeypatch.setenv("COLAB_GPU_PROFILES", str(tmp_path / "leaked.jsonl"))
    import suite_lessons

    assert "COLAB_GPU_FIGURES" not in suite_lessons.kernel_env(True)
    assert "COLAB_GPU_PROFILES" not in suite_lessons.kernel_env(True)
    commands = suite_steps.unit_test_commands(sys.executable, ["tests"], tmp_path)
    assert [c[-1].rsplit("/", 1)[-1] for c in commands] == ["unit.xml", "unit-gpu.xml"]
    assert "--ignore=tests/tooling" in commands[0] and ["-m", "gpu"] == commands[1][-3:-1]
    assert "-n" not in commands[1]  # the @gpu tests alone: no neighbour shares their timings and memory
    (only,) = suite_steps.unit_test_commands(sys.executable, ["tests"], tmp_path, everything=False)
    assert only == commands[1]  # on a GPU by default: the tests with a GPU branch (CI runs the others on the CPU)


def test_resume_refuses_another_commit_or_gpu(lessons, tmp_path, monkeypatch):
    lessons({"01_a": ["print(1)"]})
    out = tmp_path / "run"
    assert suite(out) == 0
    report = json.loads((out / "report.json").read_text())
    report["commit"] = "0" * 40
    (out / "report.json").write_text(json.dumps(report))
    monkeypatch.setattr(gpu_suite, "git_commit", lambda: "1" * 40)
    with pytest.raises(SystemExit, match="it ran commit 000000000000, this tree is 111111111111"):
        gpu_suite.main(["--allow-cpu", "--resume", str(out)])


def test_runs_made_in_separate_folders_merge_into_one_and_another_commit_is_refused(lessons, tmp_path, monkeypatch):
    lessons({"01_a": ["print(1)"], "02_b": ["print(2)"]})
    first, second = tmp_path / "first", tmp_path / "second"
    assert suite(first, "--budget", "120", "--times", planned(tmp_path, {"lesson 02_b": 10_000})) == 3
    monkeypatch.setattr(gpu_suite, "selected_lessons", lambda numbers: [tmp_path / "02_b.py"])
    assert suite(second) == 0  # a fresh machine without the first folder: lesson 02 alone
    assert gpu_suite.main(["--merge", str(first), str(second)]) == 0
    report = json.loads((first / "report.json").read_text())
    assert set(statuses(first).values()) == {"passed"} and report["complete"]
    assert [w["window"] for w in report["windows"]] == [1, 2] and report["parts"]["lesson 02_b"]["window"] == 2
    assert (first / "notebooks" / "02_b.ipynb").exists() and (first / "logs" / "02_b.log").exists()
    other = json.loads((second / "report.json").read_text())
    (second / "report.json").write_text(json.dumps(dict(other, commit="f" * 40)))
    with pytest.raises(SystemExit, match=f"ran commit {'f' * 12}, the run it would join ran"):
        gpu_suite.main(["--merge", str(first), str(second)])


def test_a_new_run_into_a_folder_that_holds_one_is_refused_and_the_report_survives(lessons, tmp_path, capsys):
    lessons({"01_a": ["print(1)"]})
    out = tmp_path / "run"
    assert suite(out) == 0
    before = (out / "report.json").read_text(), (out / "report.md").read_text()
    with pytest.raises(SystemExit):
        suite(out)
    refused = capsys.readouterr().err
    assert "holds an earlier run (report.json)" in refused and f"--resume {out.resolve()}" in refused
    assert ((out / "report.json").read_text(), (out / "report.md").read_text()) == before


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--budget", "0"], "--budget 0: a window's length is a positive number of seconds"),
        (["--budget", "-60"], "--budget -60: a window's length"),
        (["--budget", "nan"], "--budget nan: a window's length"),
        (["--budget", "inf"], "--budget inf: a window's length"),
        (["--lesson-timeout", "0"], "--lesson-timeout 0: a positive number of seconds"),
        (["--data", "no-such-folder"], "--data no-such-folder: no such folder"),
        (["--data", "."], "holds neither FashionMNIST/ nor cifar-10-batches-py/: every lesson would run on"),
    ],
)
def test_a_budget_or_timeout_that_is_not_positive_is_refused_before_anything_runs(tmp_path, capsys, option, message):
    with pytest.raises(SystemExit):
        suite(tmp_path / "run", *option)
    assert message in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_resume_of_a_truncated_report_says_so_and_keeps_it(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "report.json").write_text('{"format": 2, "parts": {"lesson 01')
    with pytest.raises(SystemExit, match="report.json cannot be read .*truncated or half copied"):
        gpu_suite.main(["--allow-cpu", "--resume", str(out)])
    assert (out / "report.json").read_text() == '{"format": 2, "parts": {"lesson 01'


def test_data_gives_the_lessons_a_folder_of_real_data_and_each_lesson_says_which_data_it_had(lessons, tmp_path):
    """Issue 50: the suite's lessons read the real data sets from --data (no download), and report.json says, per
    lesson, which data it trained on (the guide's GPU column names it)."""
    lessons(
        {
            "01_reads": ["import os; print('CIFAR-10 loaded from', os.environ['COLAB_GPU_DATA'])"],
            "02_stand_in": [
                "print('CIFAR-10 could not be downloaded (x), so this lesson uses a stand-in: repeated to')"
            ],
            "03_none": ["print(3)"],
        }
    )
    data = tmp_path / "datasets"
    (data / "cifar-10-batches-py").mkdir(parents=True)
    out = tmp_path / "run"
    assert suite(out, "--data", str(data)) == 0
    report = json.loads((out / "report.json").read_text())["lessons"]["lessons"]
    assert {stem: lesson["data"] for stem, lesson in report.items()} == {
        "01_reads": "CIFAR-10",
        "02_stand_in": "stand-in at full size",
        "03_none": None,
    }


def test_a_lessons_timeout_follows_its_gpu_class_and_its_earlier_time_on_that_gpu():
    """Issue 50: lesson 12 on a T4 is estimated past the 300 s an H100 needs (issue 65: 430-760 s)."""
    assert suite_plan.lesson_timeout("NVIDIA H100 80GB HBM3", True, None) == 300
    assert suite_plan.lesson_timeout("Tesla T4", True, None) == 900  # lesson 12 there: 430-760 s, estimated
    assert suite_plan.lesson_timeout("NVIDIA L4", True, 40.0) == 450
    assert suite_plan.lesson_timeout("NVIDIA L40S", True, None) == 300  # no L4: the GPU default (issue 63)
    assert suite_plan.lesson_timeout("NVIDIA H100 80GB HBM3", True, 174.2) == 349  # twice its last time there
    assert suite_plan.lesson_timeout("CPU dry run (no GPU)", False, None) == 900


def test_the_report_shows_the_host_beside_the_gpu():
    import suite_report

    host = {"cpu_model": "Intel Xeon", "cores": 16, "mhz": 2000.0, "device": "cuda:0"}
    line = suite_report.host_line({**host, "empty_op_us": 5.04, "linear_step_us": 41.2})
    assert line == (
        "Host: Intel Xeon, 16 cores at 2000 MHz; dispatch on cuda:0: 5.0 µs per empty op, 41.2 µs per small "
        "Linear forward and backward"
    )
    assert suite_report.host_line(None).startswith("Host: not recorded")


def test_a_window_runs_first_what_no_run_has_measured_on_this_gpu(lessons, tmp_path):
    """Issue 50: six bench rows never ran on a GPU, "not run (budget)" in every window behind the lessons."""
    order = ["unit tests", "lesson 01_a", "lesson 02_b", "bench compile", "bench h2d"]
    assert suite_plan.plan(order, {"unit tests", "lesson 01_a", "bench h2d"}) == [
        "lesson 02_b",
        "bench compile",
        "unit tests",
        "lesson 01_a",
        "bench h2d",
    ]
    lessons({"01_a": ["print(1)"], "02_b": ["print(2)"]})
    out = tmp_path / "run"
    assert suite(out, "--times", planned(tmp_path, {"lesson 01_a": 1})) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["windows"][0]["parts"] == ["lesson 02_b", "lesson 01_a"]


def test_merge_refuses_a_run_named_twice(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu_suite.main(["--merge", str(tmp_path), str(tmp_path)])
    assert "a run named twice" in capsys.readouterr().err


def test_a_t4_run_is_judged_as_a_t4_not_by_the_h100s_promises(tmp_path):
    """Issue 65: a T4 report marks each target a prediction until a T4 run has measured its row, lists the lessons'
    full-size sum without judging `make course`'s 5 minutes by it, and is planned from the H100's times scaled."""
    results = {t["key"]: t for t in suite_report.evaluate_targets(BENCH, 612.0, "Tesla T4 x2", measured={})}
    assert results["amp"]["target"].endswith("(predicted: no T4 run has measured it yet)")
    assert results["amp"]["met"] is True  # judged on the T4 all the same: the row carries its verdict
    assert results["course"]["met"] is None and results["course"]["value"] == 612.0
    assert "not judged here: this GPU run trains each lesson at full size" in results["course"]["target"]
    again = {t["key"]: t for t in suite_report.evaluate_targets(BENCH, 612.0, "Tesla T4", measured={"amp": {"T4"}})}
    assert "predicted" not in again["amp"]["target"] and "predicted" in again["cnn_cpu_gpu"]["target"]
    assert "predicted" not in suite_report.evaluate_targets(BENCH, 240.0)[0]["target"]  # no GPU named: no class
    assert suite_report.evaluate_targets(BENCH, 240.0, suite_report.CPU_TITLE)[-1]["met"] is True

    h100 = suite_plan.estimates([], "NVIDIA H100 80GB HBM3")
    t4 = suite_plan.estimates([], "Tesla T4")
    assert t4["lesson 12_speedrun"] == pytest.approx(3 * h100["lesson 12_speedrun"])  # 445 s: inside 430-760
    timeout = suite_plan.lesson_timeout("Tesla T4", True, t4["lesson 12_speedrun"])
    assert timeout >= 760  # the estimate's top fits
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps({"gpu": "Tesla T4", "parts": {"lesson 12_speedrun": {"seconds": 500.0, "status": "passed"}}})
    )
    measured = suite_plan.estimates([report], "Tesla T4")
    assert measured["lesson 12_speedrun"] == 500.0  # a T4 run of it: its own time
    assert measured["lesson 04_train_cnn"] == t4["lesson 04_train_cnn"]  # not in that run: still scaled
    assert suite_plan.estimates([report], "Tesla T4 x2")["lesson 12_speedrun"] == 500.0  # the same class's time
