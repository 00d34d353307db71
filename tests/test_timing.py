import re
from pathlib import Path

import pytest
import torch

import colab_gpu as cg
from colab_gpu.measure.timing import BenchResult, interleaved_best, least_disturbed, timed_call, typical


def test_benchmark_warms_up_then_times(monkeypatch):
    calls = []
    result = cg.benchmark(lambda: calls.append(1), device="cpu", warmup=2, repeat=5)
    assert len(calls) == 7
    assert len(result.times) == 5 and all(t >= 0 for t in result.times)


def test_benchmark_synchronizes_after_every_timed_call(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    monkeypatch.setattr(cg.hardware.device, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)  # the device door starts CUDA: nothing to start
    cg.benchmark(lambda: events.append("run"), device="cuda", warmup=1, repeat=3)
    # warm-up, one sync before timing, then each timed run is followed by a sync
    assert events == ["run", "sync", "run", "sync", "run", "sync", "run", "sync"]


def test_benchmark_measures_real_work():
    x = torch.randn(128, 128)
    result = cg.benchmark(lambda: x @ x, device="cpu", repeat=3)
    assert result.median > 0 and result.best <= result.median


@pytest.mark.parametrize(("warmup", "repeat"), [(-1, 3), (0, 0)])
def test_benchmark_rejects_bad_counts(warmup, repeat):
    with pytest.raises(ValueError, match="warmup >= 0 and repeat >= 1"):
        cg.benchmark(lambda: None, device="cpu", warmup=warmup, repeat=repeat)


def test_result_statistics():
    result = BenchResult((1.0, 2.0, 3.0, 4.0, 100.0))
    assert result.median == 3.0 and result.best == 1.0
    assert result.spread == pytest.approx(2.0)
    assert BenchResult((0.5,)).spread == 0.0
    assert "median" in str(result)


def test_speedup_is_ratio_of_medians():
    assert cg.speedup(BenchResult((4.0,)), BenchResult((1.0,))) == 4.0


@pytest.mark.parametrize(("seconds", "text"), [(2.5, "2.5 s"), (0.0123, "12.3 ms"), (4.2e-5, "42 µs"), (3e-9, "3 ns")])
def test_format_seconds(seconds, text):
    assert cg.format_seconds(seconds) == text


@pytest.mark.gpu
def test_benchmark_on_real_gpu():
    device = cg.get_device("cuda")
    x = torch.randn(1024, 1024, device=device)
    assert cg.benchmark(lambda: x @ x, device=device, repeat=3).median > 0


def test_interleaved_medians_alternate_the_runs_and_take_medians():
    order = []
    slow = iter([0.0] * 3)
    runs = {"a": lambda: order.append("a"), "b": lambda: order.append("b") or next(slow)}
    seconds = cg.measure.timing.interleaved_medians(runs, repeat=3)
    assert (
        order == ["a", "b", "b", "a", "a", "b"] and set(seconds) == {"a", "b"} and all(s >= 0 for s in seconds.values())
    )


class FakeClock:
    """A clock that only the steps move: each step costs its seconds, a synchronize nothing."""

    def __init__(self):
        self.now = 0.0
        self.events = []

    def step(self, name, seconds):
        def run():
            self.now += seconds
            self.events.append(name)

        return run


def fake_clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(cg.measure.timing.time, "perf_counter", lambda: clock.now)
    monkeypatch.setattr(cg.measure.timing, "synchronize", lambda device: clock.events.append("sync"))
    monkeypatch.setattr(cg.hardware.device, "cuda_device_count", lambda: 1)  # a fake GPU: the clock is the only cost
    monkeypatch.setattr(torch.cuda, "init", lambda: None)  # the device door starts CUDA: nothing to start
    return clock


def test_compare_steps_times_k_steps_per_sample_so_a_sample_lasts_20_ms(monkeypatch):
    clock = fake_clock(monkeypatch)
    timings = cg.measure.timing.compare_steps(
        {"slow": clock.step("slow", 1e-3), "fast": clock.step("fast", 4e-4)}, device="cuda"
    )
    k = timings["fast"].steps_per_sample
    assert k in (50, 51)  # 20 ms / 0.4 ms (up to the fake clock's rounding)
    assert timings["slow"].steps_per_sample in (20, 21)  # its own K: 20 ms / 1 ms
    assert timings["slow"].median == pytest.approx(1e-3) and timings["fast"].median == pytest.approx(4e-4)
    assert [len(t.times) for t in timings.values()] == [7, 7]
    assert f"K={k} steps per sample" in str(timings["fast"])


def test_a_1_ms_step_beside_a_no_op_is_not_taken_a_thousand_times_per_sample(monkeypatch, capsys):
    clock = fake_clock(monkeypatch)
    timings = cg.measure.timing.compare_steps(
        {"no-op": clock.step("no-op", 1e-6), "step": clock.step("step", 1e-3)}, device="cuda"
    )
    assert timings["no-op"].steps_per_sample == 1000 and timings["step"].steps_per_sample in (20, 21)
    assert clock.now < 1.0  # simulated seconds in all: 7 samples of about 20 ms per side, not 7 s of the 1 ms step
    assert capsys.readouterr().out == ""  # a short timing prints nothing


def test_a_long_timing_says_how_long_before_it_starts(monkeypatch, capsys):
    clock = fake_clock(monkeypatch)
    cg.measure.timing.compare_steps({"slow": clock.step("slow", 1.0), "fast": clock.step("fast", 0.5)}, device="cpu")
    out = capsys.readouterr().out
    assert out.startswith("compare_steps: timing 7 samples of each step (slow K=1, fast K=1), about 10 s")
    assert out.count("\n") == 1


def test_compare_steps_interleaves_the_sides_and_synchronizes_only_around_each_sample(monkeypatch):
    clock = fake_clock(monkeypatch)
    cg.measure.timing.compare_steps({"a": clock.step("a", 0.05), "b": clock.step("b", 0.05)}, device="cpu", warmup=1)
    # warm-up, then three timed single calls each (K from their median)
    assert clock.events[:20] == ["a"] + ["sync", "a", "sync"] * 3 + ["b"] + ["sync", "b", "sync"] * 3
    timed = clock.events[20:]
    samples = [event for event in timed if event != "sync"]
    assert samples == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]  # K=1, alternating order
    assert timed[:3] == ["sync", "a", "sync"]  # each sample: synchronize, K calls, synchronize


def test_on_a_gpu_a_sample_queues_at_least_8_steps_so_a_long_step_still_runs_ahead(monkeypatch):
    clock = fake_clock(monkeypatch)
    timings = cg.measure.timing.compare_steps({"t4 step": clock.step("t4 step", 0.025)}, device="cuda")
    assert timings["t4 step"].steps_per_sample == cg.measure.timing.MIN_QUEUED_STEPS == 8  # 20 ms alone would give K=1
    assert "K=8 steps per sample" in str(timings["t4 step"])
    on_cpu = cg.measure.timing.compare_steps(
        {"cpu step": fake_clock(monkeypatch).step("cpu step", 0.025)}, device="cpu"
    )
    assert on_cpu["cpu step"].steps_per_sample == 1 and "K=1 step per sample" in str(on_cpu["cpu step"])
    assert cg.measure.timing.can_queue("cuda") and not cg.measure.timing.can_queue("cpu")


def test_one_slow_probe_call_does_not_set_k(monkeypatch):
    clock = fake_clock(monkeypatch)
    costs = iter([1e-3] * 3 + [0.05] + [1e-3] * 1000)  # warm-up, then one 50 ms hiccup among the three probes

    def step():
        clock.now += next(costs)
        clock.events.append("step")

    timings = cg.measure.timing.compare_steps({"step": step}, device="cpu")
    assert timings["step"].steps_per_sample == 20  # 20 ms / 1 ms: the probes' median, not the outlier (K=1)


def test_compare_steps_refuses_fewer_than_seven_samples():
    with pytest.raises(ValueError, match="samples >= 7"):
        cg.measure.timing.compare_steps({"a": lambda: None}, device="cpu", samples=5)


def test_steps_per_sample_is_bounded():
    assert cg.measure.timing.steps_per_sample(1.0) == 1 and cg.measure.timing.steps_per_sample(1e-7) == 1000
    assert cg.measure.timing.steps_per_sample(1e-3) == 20


def test_the_floor_of_8_queued_steps_stops_where_a_sample_would_last_over_a_second(monkeypatch):
    # Issue 64: lesson 14's generation (seconds per call) queued 8 at a time made a comparison 5-8x longer.
    assert cg.measure.timing.steps_per_sample(0.025, least=8) == 8  # a 25 ms step: still 8 (200 ms a sample)
    assert cg.measure.timing.steps_per_sample(0.3, least=8) == 3  # 3 steps make 0.9 s
    assert cg.measure.timing.steps_per_sample(2.0, least=8) == 1  # a 2 s generation: one call per sample
    clock = fake_clock(monkeypatch)
    timings = cg.measure.timing.compare_steps({"generate": clock.step("generate", 2.0)}, device="cuda")
    assert timings["generate"].steps_per_sample == 1


def test_timed_call_synchronizes_before_and_after_the_one_call(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    monkeypatch.setattr(cg.hardware.device, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    result, seconds = timed_call(lambda: events.append("run") or 42, "cuda")
    assert events == ["sync", "run", "sync"] and result == 42 and seconds >= 0


def test_the_two_statistics_report_the_median_and_compare_the_fastest():
    times = [0.30, 0.10, 0.20, 0.90]
    assert typical(times) == pytest.approx(0.25) and least_disturbed(times) == 0.10
    result = BenchResult(tuple(times))
    assert result.median == typical(times) and result.best == least_disturbed(times)
    best, every = interleaved_best({"a": lambda: None, "b": lambda: None}, repeat=3)
    assert set(best) == {"a", "b"} and all(best[name] == min(every[name]) for name in best)


# Where the package reads the clock or reduces repeats itself, and why; anywhere else it calls timing.py's methods.
CLOCK_READERS = {
    "measure/timing.py": "the course's timing methods",
    "checks/timer.py": "patches the clock for its stand-in GPU (the timer exercise)",
    "checks/parallel.py": "a torchrun job's wall time: processes, no device of this one to synchronize",
    "train/steps.py": "an epoch's clock inside train_epoch and evaluate, read after the epoch's one synchronization",
    "data/archives.py": "file reads on the host: no device to synchronize",
    "bench/__init__.py": "an experiment's wall time for the GPU suite's budget, not a figure",
}
OWN_STATISTICS = {
    "measure/timing.py": "typical and least_disturbed, the two statistics",
    "measure/profile_summary.py": "the median share of a step the profile covers, a share not a timing",
    "checks/timer.py": "the mean the learner's timer should return on its stand-in GPU",
}


# min/max of a list of timings, or of a measurement repeated in a loop (max over sizes is a peak, not a repeat)
REPEATS_REDUCED = r"\b(?:min|max)\(\w*(?:times|seconds)\)|\b(?:min|max)\((?:\w+\([^()]*\)|\w+) for _ in range"


def test_the_package_times_only_through_the_methods_timing_names():
    package = Path(cg.__file__).parent
    sources = {path.relative_to(package).as_posix(): path.read_text() for path in package.rglob("*.py")}
    clocks = {name for name, text in sources.items() if "perf_counter" in text}
    statistics = {name for name, text in sources.items() if re.search(r"^import statistics", text, re.M)}
    assert clocks == set(CLOCK_READERS), "read the clock with timing.py's methods (timed_call, benchmark, ...)"
    assert statistics == set(OWN_STATISTICS), "reduce repeated timings with timing.typical or least_disturbed"
    reduced = [
        name for name, text in sources.items() if name not in OWN_STATISTICS and re.search(REPEATS_REDUCED, text)
    ]
    assert not reduced, f"{reduced} take min/max of timings themselves: use timing.least_disturbed"
