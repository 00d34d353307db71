import pytest
import torch

import colab_gpu as cg
from colab_gpu.hardware.device import DeviceNotAvailableError

from .conftest import H100, T4


def test_auto_picks_cpu_without_gpu(no_gpu):
    assert cg.get_device() == torch.device("cpu")
    assert cg.get_device("auto") == torch.device("cpu")


def test_auto_picks_first_gpu(fake_gpus):
    fake_gpus(T4)
    assert cg.get_device() == torch.device("cuda", 0)


@pytest.mark.parametrize("name", [None, "cuda", "cuda:1"])
def test_a_gpu_comes_back_with_cuda_started_so_allocator_calls_work_in_a_fresh_kernel(fake_gpus, name):
    fake_gpus(T4, T4)
    with pytest.raises(RuntimeError, match="did you call init"):  # a fresh kernel, as PyTorch behaves
        torch.cuda.reset_peak_memory_stats(0)
    device = cg.get_device(name)
    torch.cuda.reset_peak_memory_stats(device)  # lesson 07's first measuring call
    assert torch.cuda.is_initialized()


def test_a_cpu_device_does_not_start_cuda(fake_gpus):
    fake_gpus(T4)
    cg.get_device("cpu")
    assert not torch.cuda.is_initialized()


def test_the_memory_helpers_start_cuda_for_a_device_made_by_hand(fake_gpus, monkeypatch):
    fake_gpus(T4)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 0)
    with cg.measure_peak(torch.device("cuda", 0)) as peak:  # not from get_device
        pass
    assert torch.cuda.is_initialized() and peak.peak_mib == 0


@pytest.mark.parametrize(("name", "hint"), [(0, "use 'cuda:0'"), (1, "use 'cuda:1'"), (1.5, "")])
def test_a_number_for_a_device_says_how_to_name_a_gpu(no_gpu, name, hint):
    with pytest.raises(TypeError, match=rf"not {type(name).__name__} {name}\..*{hint}.*Available here: cpu"):
        cg.get_device(name)


def test_explicit_cpu_is_always_available(fake_gpus):
    fake_gpus(T4)
    assert cg.get_device("CPU") == torch.device("cpu")


def test_cuda_without_gpu_explains_how_to_enable_one(no_gpu):
    expected = r"cg.get_device was asked for cuda, but this runtime has no GPU.*Runtime > Change runtime type"
    with pytest.raises(DeviceNotAvailableError, match=expected):
        cg.get_device("cuda")


def test_cuda_index_beyond_count_names_what_exists(fake_gpus):
    fake_gpus(T4)
    expected = r"cuda:7, but this machine only has 1 GPU \(available: cpu, cuda:0\)"
    with pytest.raises(DeviceNotAvailableError, match=expected):
        cg.get_device("cuda:7")


def test_cuda_index_within_count(fake_gpus):
    fake_gpus(T4, H100)
    assert cg.get_device("cuda:1") == torch.device("cuda", 1)
    assert cg.get_device(torch.device("cuda")) == torch.device("cuda", 0)


@pytest.mark.parametrize("name", ["gpu", "cuda0", "nvidia"])
def test_unknown_name_is_an_error_not_the_cpu(no_gpu, name):
    words = rf"device name '{name}', which PyTorch does not know.*'cpu', 'cuda' or 'cuda:N'"
    with pytest.raises(ValueError, match=words):
        cg.get_device(name)


def test_known_but_unsupported_device_is_an_error(no_gpu):
    with pytest.raises(ValueError, match=r"the device 'meta', which this course does not use"):
        cg.get_device("meta")


def test_require_cuda_makes_no_gpu_an_error(no_gpu, monkeypatch):
    monkeypatch.setenv("REQUIRE_CUDA", "1")
    assert cg.hardware.device.cuda_required()
    with pytest.raises(DeviceNotAvailableError, match="REQUIRE_CUDA=1 is set but no CUDA GPU"):
        cg.get_device()
    with pytest.raises(DeviceNotAvailableError, match="REQUIRE_CUDA=1"):
        cg.get_device("cpu")


def test_require_cuda_passes_with_a_gpu(fake_gpus, monkeypatch):
    fake_gpus(T4)
    monkeypatch.setenv("REQUIRE_CUDA", "yes")
    assert cg.get_device() == torch.device("cuda", 0)


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_require_cuda_off_values(monkeypatch, value):
    monkeypatch.setenv("REQUIRE_CUDA", value)
    assert not cg.hardware.device.cuda_required()


def test_available_devices_always_lists_the_cpu(no_gpu):
    assert cg.hardware.device.available_devices() == [torch.device("cpu")]


def test_available_devices_lists_every_gpu(fake_gpus):
    fake_gpus(T4, T4)
    assert cg.hardware.device.available_devices() == [
        torch.device("cpu"),
        torch.device("cuda", 0),
        torch.device("cuda", 1),
    ]


def test_synchronize_calls_cuda_only_for_cuda(monkeypatch, fake_gpus):
    fake_gpus()
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    cg.synchronize("cpu")
    assert calls == []
    cg.synchronize("cuda:0")
    assert calls == [torch.device("cuda", 0)]


@pytest.mark.gpu
def test_real_gpu_is_chosen_and_computes():
    device = cg.get_device()
    assert device.type == "cuda"
    x = torch.ones(4, device=device)
    assert (x * 2).sum().item() == 8
