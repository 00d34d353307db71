import sys
import weakref

import pytest
import torch

import colab_gpu as cg
from colab_gpu.measure import memory
from colab_gpu.train import batch_size


def fake_oom_step(capacity: int, calls: list):
    """A training step that 'runs out of memory' above ``capacity`` samples, like a GPU would."""

    def step(batch_size: int):
        calls.append(batch_size)
        if batch_size > capacity:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {batch_size} samples")
        return batch_size

    return step


@pytest.fixture
def instant_cleanup(monkeypatch):
    """The search's logic without its cleanup after each failure (a full gc.collect, tested on its own below)."""
    monkeypatch.setattr(batch_size, "cleanup", lambda device, notebook=True: None)


@pytest.mark.usefixtures("instant_cleanup")
@pytest.mark.parametrize("capacity", [1, 5, 64, 100, 1000, 50_000])
def test_find_max_batch_size_against_a_fake_oom(capacity):
    calls = []
    found = cg.find_max_batch_size(fake_oom_step(capacity, calls), "cpu", limit=2**17)
    # Within the resolution (1/16) of the edge, never above it, and found in few tries.
    assert capacity * 15 / 16 - 1 <= found.largest_fit <= capacity
    assert found.first_oom is not None and found.largest_fit < found.first_oom <= 2 * capacity
    assert found.tries == len(calls) and len(calls) <= 22  # doubling then a few bisections
    assert found.suggested <= max(1, 0.9 * found.largest_fit)


@pytest.mark.usefixtures("instant_cleanup")
def test_find_max_batch_size_stops_bisecting_at_the_resolution():
    calls = []
    found = cg.find_max_batch_size(fake_oom_step(6000, calls), "cpu", start=64, limit=2**18)
    # 64 .. 4096 doubles (7 tries), 8192 fails, then bisections until the gap is within 1/16.
    assert found.first_oom - found.largest_fit <= found.largest_fit / 16
    assert len(calls) <= 12, calls
    fine = []
    exact = cg.find_max_batch_size(fake_oom_step(6000, fine), "cpu", start=64, limit=2**18, resolution=1e-6)
    assert exact.largest_fit == 6000 and len(fine) > len(calls)


@pytest.mark.usefixtures("instant_cleanup")
def test_find_max_batch_size_suggests_a_margin_below_the_edge_and_says_why():
    found = cg.find_max_batch_size(fake_oom_step(1000, []), "cpu", start=64, margin=0.2)
    assert found.suggested % 8 == 0 and found.suggested <= 0.8 * found.largest_fit
    assert found.suggested > 0.8 * found.largest_fit - 8
    text = str(found)
    assert f"suggested: {found.suggested:,}, 20% below" in text and "first out-of-memory at" in text
    no_margin = cg.find_max_batch_size(fake_oom_step(1000, []), "cpu", start=64, margin=0.0, resolution=1e-6)
    assert no_margin.largest_fit == 1000 and no_margin.suggested == 1000


@pytest.mark.usefixtures("instant_cleanup")
def test_find_max_batch_size_stops_at_the_limit_and_suggests_nothing_without_an_edge():
    found = cg.find_max_batch_size(fake_oom_step(10**9, []), "cpu", limit=512)
    assert found.largest_fit == found.limit == 512 and found.first_oom is None
    assert found.suggested is None, "the limit is not an out-of-memory edge: no margin below it means anything"
    assert "no out-of-memory error up to batch 512" in str(found) and "nothing is suggested" in str(found)
    assert "suggested:" not in str(found)
    on_a_cpu = cg.find_max_batch_size(fake_oom_step(10**9, []), "cpu", start=64)
    assert on_a_cpu.largest_fit == batch_size.FALLBACK_LIMIT and on_a_cpu.per_sample_bytes is None  # no statistics


class FakeAllocator:
    """A GPU of ``total`` bytes whose allocator statistics a fake training step moves: at its peak the step holds
    ``fixed`` bytes (weights' gradients, workspaces) plus ``per_sample`` bytes for each sample, up to ``saturates``
    samples (a step whose memory stops growing), and runs out of memory beyond ``total``."""

    def __init__(self, monkeypatch, total: int, *, fixed: int, per_sample: int, saturates: int | None = None):
        self.total, self.fixed, self.per_sample, self.saturates = total, fixed, per_sample, saturates
        self.held, self.peak, self.calls = 0, 0, []
        for name, value in {
            "memory_allocated": lambda device=None: self.held,
            "memory_reserved": lambda device=None: self.held,
            "max_memory_allocated": lambda device=None: self.peak,
            "mem_get_info": lambda device=None: (self.total - self.held, self.total),
            "reset_peak_memory_stats": lambda device=None: setattr(self, "peak", self.held),
            "empty_cache": lambda: None,
        }.items():
            monkeypatch.setattr(torch.cuda, name, value)

    def step(self, batch_size: int) -> None:
        self.calls.append(batch_size)
        samples = batch_size if self.saturates is None else min(batch_size, self.saturates)
        need = self.fixed + self.per_sample * samples
        if self.held + need > self.total:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {need} bytes")
        self.peak = max(self.peak, self.held + need)


@pytest.mark.usefixtures("instant_cleanup")
@pytest.mark.parametrize(("gpu", "memory_gib"), [("T4", 15), ("H100", 80)])
def test_find_max_batch_size_derives_its_limit_from_the_free_memory_and_reaches_the_edge(
    fake_gpus, monkeypatch, gpu, memory_gib
):
    fake_gpus()
    gpu = FakeAllocator(monkeypatch, memory_gib * 2**30, fixed=208 * 2**20, per_sample=100 * 2**10)
    found = cg.find_max_batch_size(gpu.step, "cuda", start=64)
    edge = (gpu.total - gpu.fixed) // gpu.per_sample  # 836,528 samples on 80 GiB: far above the old fixed 2**18
    assert found.first_oom is not None and found.first_oom > edge >= found.largest_fit >= edge * 15 / 16
    assert found.per_sample_bytes == gpu.per_sample, "measured between two batches: the fixed memory cancels out"
    assert found.free_bytes == gpu.total and found.limit == 2 * gpu.total // gpu.per_sample > edge
    assert found.suggested <= 0.9 * found.largest_fit and found.tries == len(gpu.calls) <= 20
    assert "memory per sample: 100.0 KiB" in str(found) and "first out-of-memory at" in str(found)


@pytest.mark.usefixtures("instant_cleanup")
def test_find_max_batch_size_says_when_memory_stops_growing_before_the_limit_and_suggests_nothing(
    fake_gpus, monkeypatch
):
    fake_gpus()
    gpu = FakeAllocator(monkeypatch, 16 * 2**30, fixed=2**20, per_sample=100 * 2**10, saturates=4096)
    found = cg.find_max_batch_size(gpu.step, "cuda", start=64)
    assert found.first_oom is None and found.suggested is None and found.largest_fit == found.limit
    assert found.limit == 2 * gpu.total // gpu.per_sample  # measured before the memory stopped growing
    assert "not what limits this batch size" in str(found) and "nothing is suggested" in str(found)
    flat = FakeAllocator(monkeypatch, 16 * 2**30, fixed=2**20, per_sample=0)  # memory that never grows
    found = cg.find_max_batch_size(flat.step, "cuda", start=64)
    assert found.first_oom is None and found.limit == batch_size.UNMEASURED_LIMIT and found.per_sample_bytes == 0


@pytest.mark.usefixtures("instant_cleanup")
def test_find_max_batch_size_refuses_a_step_that_allocates_nothing_on_the_gpu(fake_gpus, monkeypatch):
    fake_gpus()
    nothing = FakeAllocator(monkeypatch, 16 * 2**30, fixed=0, per_sample=0)  # the step runs on another device
    with pytest.raises(RuntimeError, match=r"try_batch\(64\) and try_batch\(128\) allocated no memory on cuda"):
        cg.find_max_batch_size(nothing.step, "cuda", start=64)
    found = cg.find_max_batch_size(nothing.step, "cuda", start=64, limit=1024)  # a limit given: searched anyway
    assert found.largest_fit == 1024 and found.suggested is None


def test_find_max_batch_size_cleans_up_after_each_failure(monkeypatch):
    cleanups = []
    monkeypatch.setattr(batch_size, "cleanup", lambda device, notebook=True: cleanups.append(device))
    cg.find_max_batch_size(fake_oom_step(3, []), "cpu", limit=16)
    assert len(cleanups) >= 3


@pytest.mark.usefixtures("instant_cleanup")
def test_find_max_batch_size_bad_input():
    with pytest.raises(RuntimeError, match="Even batch_size=1 runs out of memory"):
        cg.find_max_batch_size(fake_oom_step(0, []), "cpu")
    with pytest.raises(ValueError, match="1 <= start <= limit"):
        cg.find_max_batch_size(fake_oom_step(4, []), "cpu", start=0)
    with pytest.raises(ValueError, match="0 < resolution < 1 and 0 <= margin < 1, got resolution=0, margin=0.1"):
        cg.find_max_batch_size(fake_oom_step(4, []), "cpu", resolution=0)


def test_other_errors_are_not_swallowed():
    def broken(batch_size):
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError, match="shape mismatch"):
        cg.find_max_batch_size(broken, "cpu")


def test_memory_report_on_cpu_is_empty_and_says_why():
    assert set(cg.measure.memory.memory_report("cpu").values()) == {None}
    assert "CUDA devices only" in cg.format_memory("cpu")


def test_memory_report_with_fake_cuda(fake_gpus, monkeypatch):
    fake_gpus()
    mib = 2**20
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1000 * mib, 16000 * mib))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 10 * mib)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 20 * mib)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 15 * mib)
    assert cg.measure.memory.memory_report("cuda") == {
        "allocated": 10,
        "reserved": 20,
        "peak": 15,
        "free": 1000,
        "total": 16000,
    }
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


def test_cleanup_on_fake_gpu_empties_the_cache(monkeypatch, fake_gpus):
    fake_gpus()
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
        # float32 on purpose: a uint8 tensor's sum() makes an int64 copy on CUDA (9 MiB a sample, not 1; H100 run)
        x = torch.empty(batch_size, 2**18, dtype=torch.float32, device=device)  # batch_size MiB
        return x.sum()

    found = cg.find_max_batch_size(step, device, start=256, limit=4 * total // 2**20)
    assert 0 < found.suggested < found.largest_fit and found.largest_fit * 2**20 <= total
    assert torch.cuda.memory_allocated(device) == baseline


@pytest.mark.gpu
def test_find_max_batch_size_on_a_real_gpu_derives_its_limit_from_the_free_memory_and_finds_the_edge():
    device = cg.get_device("cuda")
    cg.cleanup(device)
    baseline = torch.cuda.memory_allocated(device)

    def step(batch_size):
        # float32 on purpose: a uint8 tensor's sum() makes an int64 copy on CUDA (9 MiB a sample, not 1; H100 run)
        x = torch.empty(batch_size, 2**18, dtype=torch.float32, device=device)  # batch_size MiB
        return x.sum()

    found = cg.find_max_batch_size(step, device, start=16)  # no limit given: 2**16 MiB would not fill an 80 GB GPU
    assert found.first_oom is not None and found.per_sample_bytes == pytest.approx(2**20, rel=0.01), found
    assert found.limit > found.first_oom and torch.cuda.memory_allocated(device) == baseline


def test_allocator_settings_on_cpu_is_none_and_on_cuda_comes_from_the_snapshot(fake_gpus, monkeypatch):
    fake_gpus()
    assert cg.allocator_settings("cpu") is None
    snapshot = {"segments": [], "allocator_settings": {"expandable_segments": True, "max_split_size": -1}}
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda device=None: snapshot)
    assert cg.allocator_settings("cuda") == {"expandable_segments": True, "max_split_size": -1}
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda device=None: {"segments": []})
    assert cg.allocator_settings("cuda:0") is None  # a PyTorch that does not report them


@pytest.mark.gpu
def test_allocator_settings_on_a_real_gpu_report_expandable_segments():
    device = cg.get_device("cuda")
    torch.empty(1, device=device)
    settings = cg.allocator_settings(device)
    assert settings is not None and "expandable_segments" in settings


def test_allocated_timeline_follows_allocations_and_completed_frees():
    # The trace format of torch.cuda.memory._snapshot() (TraceEntry in torch/cuda/memory.py, 2.7 to 2.15).
    trace = [
        {"action": "segment_alloc", "addr": 0, "size": 2 << 20, "stream": 0},
        {"action": "alloc", "addr": 0, "size": 1000, "stream": 0},
        {"action": "alloc", "addr": 1024, "size": 500, "stream": 0},
        {"action": "free_requested", "addr": 0, "size": 1000, "stream": 0},
        {"action": "free_completed", "addr": 0, "size": 1000, "stream": 0},
        {"action": "oom", "size": 10**12, "stream": 0, "device_free": 0},
    ]
    snapshot = {"segments": [], "device_traces": [[], trace]}
    assert cg.allocated_timeline(snapshot, device_index=1) == [1000, 1500, 500]
    assert cg.allocated_timeline(snapshot, device_index=0) == []
    with pytest.raises(ValueError, match="traces for 2 device\\(s\\), not for device 2"):
        cg.allocated_timeline(snapshot, device_index=2)


def test_plot_memory_timeline_in_mib():
    import matplotlib

    matplotlib.use("Agg")
    fig = cg.plot_memory_timeline([2**20, 3 * 2**20, 2**20], "one step")
    assert list(fig.axes[0].lines[0].get_ydata()) == [1.0, 3.0, 1.0]
    with pytest.raises(ValueError, match="at least one recorded event"):
        cg.plot_memory_timeline([], "empty")


@pytest.mark.gpu
def test_allocated_timeline_of_a_real_snapshot():
    device = cg.get_device("cuda")
    torch.cuda.memory._record_memory_history(max_entries=1000)
    try:
        x = torch.empty(2**20, dtype=torch.uint8, device=device)
        del x
        torch.cuda.synchronize(device)
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    timeline = cg.allocated_timeline(snapshot, device.index or 0)
    steps = [after - before for before, after in zip([0, *timeline], timeline, strict=False)]
    assert 2**20 in steps and -(2**20) in steps  # the 1 MiB tensor, allocated then freed


def test_the_memory_saving_check_on_a_gpu_also_needs_the_allocator_peak_to_fall(monkeypatch):
    from contextlib import contextmanager

    from colab_gpu.checks import memory as memory_checks

    peaks = iter([])

    @contextmanager
    def fake_peak(device):  # the allocator's peak of each run, reference first: as a GPU would report it
        yield memory.PeakMemory(torch.device("cuda"), start_bytes=0, peak_bytes=next(peaks))

    monkeypatch.setattr(memory_checks, "measure_peak", fake_peak)
    model = cg.mlp(32, hidden=64, depth=2)
    inputs, labels = torch.randn(256, 32), torch.randint(0, 10, (256,))

    def whole(m, x, y):
        torch.nn.functional.cross_entropy(m(x), y).backward()

    def pieces(m, x, y, k=4):
        for a, b in zip(x.chunk(k), y.chunk(k), strict=True):
            (torch.nn.functional.cross_entropy(m(a), b) / k).backward()

    peaks = iter([6 * 2**20, 3 * 2**20])
    saved = cg.checks.memory_saving(pieces, whole, model, inputs, labels)
    assert saved and "allocator peak on cuda: 3.0 MiB instead of 6.0" in saved.message, saved.message
    peaks = iter([6 * 2**20, int(7.3 * 2**20)])  # the H100 run's exercise: gradients larger than the activations
    raised = cg.checks.memory_saving(pieces, whole, model, inputs, labels)
    assert not raised and "(0.25x)" in raised.message and "the allocator's peak did not fall" in raised.message
    assert "outweigh the activations" in raised.message


def test_memory_is_freed_after_the_except_block_not_inside_it():
    """Issue 51: lesson 07 taught `except torch.OutOfMemoryError:` then cleanup; inside the block the exception's
    traceback keeps the failed step's tensors alive, so nothing is freed there. Its plain-PyTorch pattern recovers
    after the block."""
    import gc
    import weakref

    probes = []

    def oversized_step():
        activations = torch.randn(256, 256)
        probes.append(weakref.ref(activations))
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 160.00 GiB")

    alive_inside = []

    def ran_out_of_memory(step):
        try:
            step()
        except RuntimeError as error:
            assert "out of memory" in str(error)
            gc.collect()  # what the lesson used to do here
            alive_inside.append(probes[-1]() is not None)
            return True
        return False

    assert ran_out_of_memory(oversized_step)
    assert alive_inside == [True]  # the traceback held the frame: cleaning up inside freed nothing
    assert probes[-1]() is None  # out of the block, the frame and its tensor are gone
