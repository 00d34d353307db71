import pytest
import torch
from torch import nn

import colab_gpu as cg
from colab_gpu.precision import check_scaler_fits

from .conftest import A100, H100, T4

P100 = {"name": "Tesla P100-PCIE-16GB", "capability": (6, 0), "memory_gib": 16}


@pytest.mark.parametrize(("gpu", "name", "scaler"), [(T4, "fp16", True), (A100, "bf16", False),
                                                     (H100, "bf16", False), (P100, "fp32", False)])
def test_precision_follows_compute_capability(fake_gpus, gpu, name, scaler):
    fake_gpus(gpu)
    precision = cg.choose_precision("cuda")
    assert (precision.name, precision.use_scaler) == (name, scaler)
    assert gpu["name"] in precision.reason


def test_t4_is_not_trusted_to_do_bf16_even_if_pytorch_says_so(fake_gpus, monkeypatch):
    fake_gpus(T4)
    # The plain call counts emulation and answers True on a T4.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    assert cg.choose_precision("cuda:0").name == "fp16"
    assert "only emulates bf16" in cg.choose_precision("cuda:0").reason


def test_cpu_uses_bf16_autocast_without_scaler():
    precision = cg.choose_precision("cpu")
    assert precision.dtype is torch.bfloat16 and not precision.use_scaler
    assert str(precision).startswith("bf16: CPU autocast")


def test_unknown_device_type():
    with pytest.raises(ValueError, match="knows 'cpu' and 'cuda' devices, got meta"):
        cg.choose_precision("meta")


@pytest.mark.parametrize(("text", "dtype"), [(None, None), ("fp32", None), ("bf16", torch.bfloat16),
                                             ("fp16", torch.float16)])
def test_resolve_precision(text, dtype):
    assert cg.resolve_precision(text, "cpu").dtype is dtype


def test_resolve_precision_auto_and_bad_name(fake_gpus):
    fake_gpus(T4)
    assert cg.resolve_precision("auto", "cuda").name == "fp16"
    assert cg.resolve_precision("fp16", "cuda").use_scaler
    assert not cg.resolve_precision("fp16", "cpu").use_scaler
    same = cg.Precision("bf16", False, "x")
    assert cg.resolve_precision(same, "cpu") is same
    with pytest.raises(ValueError, match="Unknown precision 'half': use 'auto', 'fp32', 'bf16' or 'fp16'"):
        cg.resolve_precision("half", "cpu")


def test_make_scaler_only_for_fp16():
    assert cg.make_scaler(cg.Precision("bf16", False, ""), "cpu") is None
    scaler = cg.make_scaler(cg.Precision("fp16", True, ""), "cpu")
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()


def test_scaler_with_bf16_is_refused():
    with pytest.raises(ValueError, match="Loss scaling is for float16 only"):
        check_scaler_fits(cg.Precision("bf16", False, ""), torch.amp.GradScaler("cpu"))
    check_scaler_fits(cg.Precision("fp16", True, ""), torch.amp.GradScaler("cpu"))


def test_fit_with_precision_records_it():
    model = nn.Linear(4, 2)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
    history = cg.fit(model, batches, batches, torch.optim.SGD(model.parameters(), 0.1), "cpu", epochs=1,
                     precision="bf16", progress=False, verbose=False)
    assert history.last["precision"] == "bf16"
    with pytest.raises(ValueError, match="Drop the scaler"):
        cg.fit(model, batches, None, torch.optim.SGD(model.parameters(), 0.1), "cpu", epochs=1, precision="bf16",
               scaler=torch.amp.GradScaler("cpu"), progress=False)


def test_fit_fp16_with_scaler_on_cpu():
    model = nn.Linear(4, 2)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
    scaler = torch.amp.GradScaler("cpu")
    history = cg.fit(model, batches, None, torch.optim.SGD(model.parameters(), 0.1), "cpu", epochs=2,
                     precision="fp16", scaler=scaler, progress=False, verbose=False)
    assert history.last["precision"] == "fp16" and scaler.get_scale() > 0


def test_tf32_switch_round_trip():
    before = cg.tf32_enabled()
    try:
        cg.set_tf32(True)
        assert cg.tf32_enabled()
        assert torch.backends.cudnn.conv.fp32_precision == "tf32"
        cg.set_tf32(False)
        assert not cg.tf32_enabled()
    finally:
        cg.set_tf32(before)


def test_measure_peak_on_cpu_says_it_is_not_tracked():
    with cg.measure_peak("cpu") as peak:
        torch.zeros(10)
    assert peak.peak_mib is None and "not tracked on cpu" in str(peak)


def test_measure_peak_with_fake_cuda_statistics(monkeypatch):
    allocated = iter([100 * 2**20])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: next(allocated))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 164 * 2**20)
    with cg.measure_peak("cuda") as peak:
        pass
    assert peak.peak_mib == 64.0 and "peak 64.0 MiB above the start on cuda" in str(peak)


@pytest.mark.gpu
def test_autocast_on_real_gpu_uses_the_chosen_dtype():
    device = cg.get_device("cuda")
    precision = cg.choose_precision(device)
    x = torch.randn(64, 64, device=device)
    with torch.autocast("cuda", dtype=precision.dtype or torch.float16):
        y = x @ x
    assert y.dtype == (precision.dtype or torch.float16)
    with cg.measure_peak(device) as peak:
        torch.empty(2**20, device=device)
    assert peak.peak_mib >= 4
