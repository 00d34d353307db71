import pytest
import torch

import colab_gpu as cg
from colab_gpu.timing import BenchResult


def test_benchmark_warms_up_then_times(monkeypatch):
    calls = []
    result = cg.benchmark(lambda: calls.append(1), device="cpu", warmup=2, repeat=5)
    assert len(calls) == 7
    assert len(result.times) == 5 and all(t >= 0 for t in result.times)


def test_benchmark_synchronizes_after_every_timed_call(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
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
    seconds = cg.timing.interleaved_medians(runs, repeat=3)
    assert order == ["a", "b"] * 3 and set(seconds) == {"a", "b"} and all(s >= 0 for s in seconds.values())


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
    monkeypatch.setattr(cg.timing.time, "perf_counter", lambda: clock.now)
    monkeypatch.setattr(cg.timing, "synchronize", lambda device: clock.events.append("sync"))
    return clock


def test_compare_steps_times_k_steps_per_sample_so_a_sample_lasts_20_ms(monkeypatch):
    clock = fake_clock(monkeypatch)
    timings = cg.timing.compare_steps(
        {"slow": clock.step("slow", 1e-3), "fast": clock.step("fast", 4e-4)}, device="cuda"
    )
    assert {t.steps_per_sample for t in timings.values()} == {50}  # 20 ms / 0.4 ms, the faster side decides
    assert timings["slow"].median == pytest.approx(1e-3) and timings["fast"].median == pytest.approx(4e-4)
    assert [len(t.times) for t in timings.values()] == [7, 7]
    assert "K=50 steps per sample" in str(timings["fast"])


def test_compare_steps_interleaves_the_sides_and_synchronizes_only_around_each_sample(monkeypatch):
    clock = fake_clock(monkeypatch)
    cg.timing.compare_steps({"a": clock.step("a", 0.05), "b": clock.step("b", 0.05)}, device="cuda", warmup=1)
    assert clock.events[:8] == ["a", "sync", "a", "sync", "b", "sync", "b", "sync"]  # warm-up, one timed call each
    timed = clock.events[8:]
    samples = [event for event in timed if event != "sync"]
    assert samples == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]  # K=1, alternating order
    assert timed[:3] == ["sync", "a", "sync"]  # each sample: synchronize, K calls, synchronize


def test_compare_steps_refuses_fewer_than_seven_samples():
    with pytest.raises(ValueError, match="samples >= 7"):
        cg.timing.compare_steps({"a": lambda: None}, device="cpu", samples=5)


def test_steps_per_sample_is_bounded():
    assert cg.timing.steps_per_sample(1.0) == 1 and cg.timing.steps_per_sample(1e-7) == 1000
    assert cg.timing.steps_per_sample(1e-3) == 20
