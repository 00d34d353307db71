from types import SimpleNamespace

import pytest
import torch
from torch import nn

import colab_gpu as cg
from colab_gpu.train.precision import require_scaler_fits

from .conftest import A100, H100, P100, T4


@pytest.mark.parametrize(
    ("gpu", "name", "scaler"), [(T4, "fp16", True), (A100, "bf16", False), (H100, "bf16", False), (P100, "fp32", False)]
)
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


@pytest.mark.parametrize(("gain", "name"), [(0.03, "fp32"), (1.1, "fp32"), (1.6, "bf16")])
def test_cpu_precision_follows_the_measured_bf16_speed(monkeypatch, gain, name):
    # Lesson 06 measured bf16 autocast 35x slower than fp32 on one CPU with AVX-512 BF16 and 1.6x
    # faster on another: the flags do not tell, the measurement does.
    monkeypatch.setattr("colab_gpu.train.precision.cpu_bf16_speedup", lambda threads: gain)
    precision = cg.choose_precision("cpu")
    assert precision.name == name and not precision.use_scaler
    assert f"measured {gain:.2f}x the float32 speed on this CPU" in precision.reason


def test_cpu_bf16_speed_is_measured_once_per_process():
    from colab_gpu.train.precision import cpu_bf16_speedup

    gain = cpu_bf16_speedup(torch.get_num_threads())
    assert 0 < gain < 100
    assert cpu_bf16_speedup(torch.get_num_threads()) == gain  # cached, not re-measured
    assert cg.choose_precision("cpu").name == ("bf16" if gain >= 1.2 else "fp32")


def test_unknown_device_type():
    with pytest.raises(ValueError, match="the device 'meta', which this course does not use.*available here: cpu"):
        cg.choose_precision("meta")


def test_a_device_that_does_not_exist_gets_get_devices_message(no_gpu):
    with pytest.raises(ValueError, match="device name 'tpu', which PyTorch does not know.*'cpu', 'cuda' or 'cuda:N'"):
        cg.choose_precision("tpu")  # was PyTorch's list of every device type it knows
    with pytest.raises(cg.DeviceNotAvailableError, match="this runtime has no GPU.*Runtime > Change runtime type"):
        cg.choose_precision("cuda")  # was "Found no NVIDIA driver on your system"


@pytest.mark.parametrize(
    ("text", "dtype"), [(None, None), ("fp32", None), ("bf16", torch.bfloat16), ("fp16", torch.float16)]
)
def test_resolve_precision(text, dtype):
    assert cg.train.precision.resolve_precision(text, "cpu").dtype is dtype


def test_resolve_precision_auto_and_bad_name(fake_gpus):
    fake_gpus(T4)
    assert cg.train.precision.resolve_precision("auto", "cuda").name == "fp16"
    assert cg.train.precision.resolve_precision("fp16", "cuda").use_scaler
    assert not cg.train.precision.resolve_precision("fp16", "cpu").use_scaler
    same = cg.train.precision.Precision("bf16", False, "x")
    assert cg.train.precision.resolve_precision(same, "cpu") is same
    with pytest.raises(ValueError, match="Unknown precision 'half': use 'auto', 'fp32', 'bf16' or 'fp16'"):
        cg.train.precision.resolve_precision("half", "cpu")


def test_make_scaler_only_for_fp16():
    assert cg.train.precision.make_scaler(cg.train.precision.Precision("bf16", False, ""), "cpu") is None
    scaler = cg.train.precision.make_scaler(cg.train.precision.Precision("fp16", True, ""), "cpu")
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()


def test_scaler_with_bf16_is_refused():
    with pytest.raises(ValueError, match="Loss scaling is for float16 only"):
        require_scaler_fits(cg.train.precision.Precision("bf16", False, ""), torch.amp.GradScaler("cpu"))
    require_scaler_fits(cg.train.precision.Precision("fp16", True, ""), torch.amp.GradScaler("cpu"))


def test_fit_with_precision_records_it():
    model = nn.Linear(4, 2)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
    history = cg.fit(
        model,
        batches,
        batches,
        torch.optim.SGD(model.parameters(), 0.1),
        "cpu",
        epochs=1,
        precision="bf16",
        progress=False,
        verbose=False,
    )
    assert history.last["precision"] == "bf16"
    with pytest.raises(ValueError, match="Drop the scaler"):
        cg.fit(
            model,
            batches,
            None,
            torch.optim.SGD(model.parameters(), 0.1),
            "cpu",
            epochs=1,
            precision="bf16",
            scaler=torch.amp.GradScaler("cpu"),
            progress=False,
        )


def test_fit_fp16_with_scaler_on_cpu():
    model = nn.Linear(4, 2)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
    scaler = torch.amp.GradScaler("cpu")
    history = cg.fit(
        model,
        batches,
        None,
        torch.optim.SGD(model.parameters(), 0.1),
        "cpu",
        epochs=2,
        precision="fp16",
        scaler=scaler,
        progress=False,
        verbose=False,
    )
    assert history.last["precision"] == "fp16" and scaler.get_scale() > 0


def conv_tf32() -> bool:
    """Whether float32 convolutions may use TF32, with whichever API this torch has."""
    if cg.train.precision._has_fp32_precision_api():  # 2.9+
        return torch.backends.cudnn.conv.fp32_precision == "tf32"
    return bool(torch.backends.cudnn.allow_tf32)


def test_tf32_mode_restores_the_callers_settings_not_ieee():
    # PyTorch's defaults: IEEE matmuls but TF32 convolutions. Switching "off" is not a reset.
    before = cg.train.precision.backend_settings()
    assert conv_tf32() and not cg.tf32_enabled()  # the defaults
    with cg.tf32_mode(True):
        assert cg.tf32_enabled() and conv_tf32()
    assert cg.train.precision.backend_settings() == before
    with cg.tf32_mode(False):
        assert not cg.tf32_enabled() and not conv_tf32()
    assert cg.train.precision.backend_settings() == before and conv_tf32()
    with pytest.raises(KeyError), cg.tf32_mode(True):
        raise KeyError("an error inside the block")
    assert cg.train.precision.backend_settings() == before


def what_inductor_reads() -> tuple[bool, str]:
    """The legacy readers torch.compile's Inductor uses on torch 2.9-2.10 (they raise on mixed TF32 APIs)."""
    return torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()


def test_tf32_set_by_the_course_leaves_torch_compile_something_to_read():
    with cg.restored_backend_settings():
        cg.set_tf32(True)
        assert cg.tf32_enabled() and what_inductor_reads() == (True, "high")  # pytorch#166387 raised here
        cg.set_tf32(False)
        assert not cg.tf32_enabled() and what_inductor_reads() == (False, "highest")
    assert what_inductor_reads() == (False, "highest")


@pytest.mark.skipif(not cg.train.precision._has_fp32_precision_api(), reason="fp32_precision is new in torch 2.9")
def test_a_learners_own_fp32_precision_setting_is_read_and_given_back():
    with cg.restored_backend_settings():
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # the new API alone: the mixed state
        with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
            what_inductor_reads()
        assert cg.tf32_enabled()
        with cg.tf32_mode(False):
            assert not cg.tf32_enabled() and what_inductor_reads() == (False, "highest")
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"  # theirs, as they set it
        cg.set_tf32(True)  # the legacy flags set both: consistent again
        assert what_inductor_reads() == (True, "high")


def test_restored_backend_settings_covers_cudnn_benchmark():
    before = cg.train.precision.backend_settings()
    with cg.restored_backend_settings():
        torch.backends.cudnn.benchmark = not before["cudnn.benchmark"]
        cg.set_tf32(True)
    assert cg.train.precision.backend_settings() == before
    assert not cg.tf32_enabled()


def test_tf32_switches_use_the_old_flags_before_pytorch_2_9(monkeypatch):
    # torch < 2.9 has no fp32_precision and no torch.backends.cudnn.conv: set_float32_matmul_precision writes the
    # matmul's allow_tf32 flag ("high": TF32), and cudnn has only its allow_tf32 flag.
    old_matmul = SimpleNamespace(allow_tf32=False)
    old_cudnn = SimpleNamespace(allow_tf32=True, benchmark=False)
    monkeypatch.setattr(torch.backends.cuda, "matmul", old_matmul)
    monkeypatch.setattr(torch.backends, "cudnn", old_cudnn)
    monkeypatch.setattr(
        torch, "set_float32_matmul_precision", lambda p: setattr(old_matmul, "allow_tf32", p != "highest")
    )
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high" if old_matmul.allow_tf32 else "highest")
    with cg.tf32_mode(True):
        assert cg.tf32_enabled() and old_matmul.allow_tf32 and old_cudnn.allow_tf32
    assert (old_matmul.allow_tf32, old_cudnn.allow_tf32) == (False, True)  # the defaults came back
    with cg.tf32_mode(False):
        assert not cg.tf32_enabled() and not old_cudnn.allow_tf32
    assert (old_matmul.allow_tf32, old_cudnn.allow_tf32) == (False, True)


LEARNER_SETTINGS = {
    "set_float32_matmul_precision('high')": lambda: torch.set_float32_matmul_precision("high"),
    "the legacy flags": lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
    "fp32_precision = 'tf32'": lambda: setattr(torch.backends.cuda.matmul, "fp32_precision", "tf32"),
    "conv.fp32_precision = 'tf32'": lambda: setattr(torch.backends.cudnn.conv, "fp32_precision", "tf32"),
}


@pytest.mark.skipif(not cg.train.precision._has_fp32_precision_api(), reason="fp32_precision is new in torch 2.9")
@pytest.mark.parametrize("learner", list(LEARNER_SETTINGS))
@pytest.mark.parametrize("enabled", [True, False])
def test_after_any_tf32_switch_a_learner_used_the_course_leaves_every_reader_answering(learner, enabled):
    """Issue 51: after torch.set_float32_matmul_precision (the switch Inductor's warning asks for), the legacy
    flags, then set to another value, left get_float32_matmul_precision() raising "mix of the legacy and new APIs"
    (torch.compile reads it), and tf32_mode restored nothing readable. Four sequences, each on and off."""
    with cg.restored_backend_settings():
        LEARNER_SETTINGS[learner]()

        def theirs():
            return (
                cg.tf32_enabled(),
                torch.backends.cuda.matmul.fp32_precision,
                torch.backends.cudnn.conv.fp32_precision,
            )

        before = theirs()
        with cg.tf32_mode(enabled):
            assert what_inductor_reads() == (enabled, "high" if enabled else "highest")
            assert cg.tf32_enabled() == enabled and torch.backends.cudnn.allow_tf32 == enabled
        assert theirs() == before  # their settings, as they set them
        cg.set_tf32(enabled)
        assert what_inductor_reads() == (enabled, "high" if enabled else "highest")


def test_time_train_step_leaves_the_callers_tf32_settings():
    before = cg.train.precision.backend_settings()
    model = nn.Linear(8, 2)
    for tf32 in (None, True, False):
        cg.time_train_step(model, torch.randn(4, 8), torch.randint(0, 2, (4,)), tf32=tf32, repeat=1)
        assert cg.train.precision.backend_settings() == before


def test_time_train_step_times_training_even_for_a_model_left_in_eval_mode():
    # What fit() leaves behind: its last evaluate() put the model in eval mode (lesson 04 timed such a copy).
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)).eval()
    running_mean = model[1].running_mean.clone()
    cg.time_train_step(model, torch.randn(16, 8) + 3, torch.randint(0, 2, (16,)), repeat=1)
    assert not torch.equal(model[1].running_mean, running_mean)  # BatchNorm ran on batch statistics
    assert not model.training  # and the caller's mode came back


def test_measure_peak_on_cpu_says_it_is_not_tracked():
    with cg.measure_peak("cpu") as peak:
        torch.zeros(10)
    assert peak.peak_mib is None and "not tracked on cpu" in str(peak)


def test_measure_peak_with_fake_cuda_statistics(fake_gpus, monkeypatch):
    fake_gpus()
    allocated = iter([100 * 2**20])
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
