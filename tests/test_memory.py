import sys
import weakref

import pytest
import torch

import colab_gpu as cg
from colab_gpu import memory


def fake_oom_step(capacity: int, calls: list):
    """A training step that 'runs out of memory' above ``capacity`` samples, like a GPU would."""

    def step(batch_size: int):
        calls.append(batch_size)
        if batch_size > capacity:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {batch_size} samples")
        return batch_size

    return step


@pytest.mark.parametrize("capacity", [1, 5, 64, 100, 1000])
def test_find_max_batch_size_against_a_fake_oom(capacity):
    calls = []
    assert cg.find_max_batch_size(fake_oom_step(capacity, calls), "cpu", limit=4096) == capacity
    assert len(calls) < 30  # doubling then bisection, not a linear scan


def test_find_max_batch_size_stops_at_the_limit():
    assert cg.find_max_batch_size(fake_oom_step(10**9, []), "cpu", limit=512) == 512


def test_find_max_batch_size_cleans_up_after_each_failure(monkeypatch):
    cleanups = []
    monkeypatch.setattr(memory, "cleanup", lambda device, notebook=True: cleanups.append(device))
    cg.find_max_batch_size(fake_oom_step(3, []), "cpu", limit=16)
    assert len(cleanups) >= 3


def test_find_max_batch_size_bad_input():
    with pytest.raises(RuntimeError, match="Even batch_size=1 runs out of memory"):
        cg.find_max_batch_size(fake_oom_step(0, []), "cpu")
    with pytest.raises(ValueError, match="1 <= start <= limit"):
        cg.find_max_batch_size(fake_oom_step(4, []), "cpu", start=0)


def test_other_errors_are_not_swallowed():
    def broken(batch_size):
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError, match="shape mismatch"):
        cg.find_max_batch_size(broken, "cpu")


def test_memory_report_on_cpu_is_empty_and_says_why():
    assert set(cg.memory_report("cpu").values()) == {None}
    assert "CUDA devices only" in cg.format_memory("cpu")


def test_memory_report_with_fake_cuda(monkeypatch):
    mib = 2**20
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1000 * mib, 16000 * mib))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 10 * mib)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 20 * mib)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 15 * mib)
    assert cg.memory_report("cuda") == {"allocated": 10, "reserved": 20, "peak": 15, "free": 1000, "total": 16000}
    assert "allocated 10.0 MiB, reserved 20.0 MiB" in cg.format_memory("cuda")


def test_cleanup_releases_what_the_last_traceback_kept_alive():
    def fail():
        big = torch.zeros(1000)
        fail.probe = weakref.ref(big)
        raise RuntimeError("boom")

    try:
        fail()
    except RuntimeError:
        sys.last_traceback = sys.exc_info()[2]  # what IPython does after a failing cell
    assert fail.probe() is not None
    assert cg.cleanup("cpu") is None
    assert fail.probe() is None and not hasattr(sys, "last_traceback")


def test_cleanup_on_fake_gpu_empties_the_cache(monkeypatch):
    reserved = iter([300 * 2**20, 100 * 2**20])
    emptied = []
    monkeypatch.setattr(memory, "memory_report", lambda device: {"reserved": next(reserved) / 2**20})
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    assert cg.cleanup("cuda", notebook=False) == 200
    assert emptied == [True]


@pytest.mark.gpu
def test_real_oom_is_recovered_and_memory_returns_to_baseline():
    device = cg.get_device("cuda")
    cg.cleanup(device)
    baseline = torch.cuda.memory_allocated(device)
    total = torch.cuda.get_device_properties(device).total_memory

    def step(batch_size):
        x = torch.empty(batch_size, 2**20, dtype=torch.uint8, device=device)  # batch_size MiB
        return x.sum()

    best = cg.find_max_batch_size(step, device, start=256, limit=4 * total // 2**20)
    assert 0 < best * 2**20 <= total
    assert torch.cuda.memory_allocated(device) == baseline
