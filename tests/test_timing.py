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
