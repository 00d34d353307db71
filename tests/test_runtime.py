import json
import re

import pytest
import torch

import colab_gpu as cg
from colab_gpu import doctor
from colab_gpu.cli import main
from colab_gpu.hardware import capability as capability_rules
from colab_gpu.hardware import machine

from .conftest import A100, H100, P100, T4


def test_report_on_cpu_has_every_field(no_gpu):
    report = cg.runtime_report()
    assert report["cuda_available"] is False and report["gpus"] == [] and report["driver"] is None
    for key in ("in_colab", "platform", "python", "torch", "cuda_runtime", "cudnn", "cpu_count", "ram_gib", "tpu_hint"):
        assert key in report
    assert report["cpu_count"] >= 1
    json.dumps(report)  # JSON-friendly, so it can be saved next to results


def test_t4_has_no_native_bf16_or_tf32(fake_gpus):
    fake_gpus(T4)
    gpu = cg.runtime_report()["gpus"][0]
    assert gpu == {
        "index": 0,
        "name": "Tesla T4",
        "compute_capability": "7.5",
        "total_memory_gib": 14.75,
        "multiprocessors": 40,
        "bf16_native": False,
        "tf32": False,
        "precision": "fp16",
        "precision_reason": cg.choose_precision("cuda").reason,
        "kernels_in_this_torch": True,
    }


def test_ampere_and_hopper_have_native_bf16_and_tf32(fake_gpus):
    fake_gpus(A100, H100)
    report = cg.runtime_report()
    assert [g["bf16_native"] for g in report["gpus"]] == [True, True]
    assert [g["tf32"] for g in report["gpus"]] == [True, True]
    assert report["driver"] == "550.54.15"


def test_advice_on_cpu_says_how_to_enable_a_gpu(no_gpu):
    tips = " ".join(doctor.advice(cg.runtime_report()))
    assert "Runtime > Change runtime type > T4 GPU" in tips


def test_advice_on_t4_is_fp16_with_gradscaler(fake_gpus):
    fake_gpus(T4)
    tips = " ".join(doctor.advice(cg.runtime_report()))
    assert "fp16 autocast with torch.amp.GradScaler('cuda')" in tips and "bf16 is only emulated" in tips


def test_advice_on_h100_is_bf16(fake_gpus):
    fake_gpus(H100)
    assert "use bf16 autocast" in " ".join(doctor.advice(cg.runtime_report()))


def test_p100_advice_agrees_with_choose_precision_and_says_this_torch_has_no_kernels(fake_gpus, monkeypatch):
    # Kaggle's P100 (6.0) with a cu128 torch: is_available() is True, the first kernel fails.
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    fake_gpus(P100)
    report = cg.runtime_report()
    assert report["platform"] == "Kaggle"
    gpu = report["gpus"][0]
    assert gpu["precision"] == cg.choose_precision("cuda").name == "fp32"
    assert gpu["kernels_in_this_torch"] is False
    tips = " ".join(doctor.advice(report))
    assert "no kernel image is available" in tips and "GPU T4 x2" in tips and "GradScaler" not in tips
    assert "kernels in this PyTorch  NO" in doctor.format_runtime_report(report)


def test_old_gpu_outside_kaggle_is_not_told_to_pick_a_kaggle_accelerator(fake_gpus, monkeypatch):
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    fake_gpus(P100)
    tips = " ".join(doctor.advice(cg.runtime_report()))
    assert "no kernel image is available" in tips and "cu126" in tips and "GPU T4 x2" not in tips


def test_two_identical_gpus_get_the_advice_once_and_the_ddp_tip(fake_gpus):
    # Kaggle's "GPU T4 x2"
    fake_gpus(T4, T4)
    tips = doctor.advice(cg.runtime_report())
    assert sum("Tesla T4" in tip for tip in tips) == 1
    assert any("--nproc-per-node=2" in tip for tip in tips)


def test_one_gpu_gets_no_ddp_tip(fake_gpus):
    fake_gpus(T4)
    assert "nproc-per-node" not in " ".join(doctor.advice(cg.runtime_report()))


@pytest.mark.parametrize(
    ("capability", "arches", "expected"),
    [
        ((7, 5), ["sm_75", "sm_80"], True),
        ((8, 6), ["sm_80", "sm_90"], True),  # sm_80 machine code runs on 8.6
        ((8, 9), ["sm_75", "sm_90"], False),  # no 8.x code and no PTX
        ((6, 0), ["sm_75", "sm_80", "sm_90a", "sm_120"], False),
        ((12, 0), ["sm_90", "compute_90"], True),  # PTX is compiled for newer GPUs when first used
        ((12, 0), ["sm_100", "sm_120"], True),
        ((7, 0), [], None),  # some releases list nothing without a visible GPU: unknown
    ],
)
def test_kernels_for_compute_capability(capability, arches, expected):
    assert capability_rules.kernels_for(capability, arches) is expected


def test_advice_on_two_vcpus_limits_workers(no_gpu, monkeypatch):
    monkeypatch.setattr(doctor, "cpu_count", lambda: 2)
    assert "at most 2 DataLoader workers" in " ".join(doctor.advice(cg.runtime_report()))


def test_advice_on_many_cores_has_no_worker_limit(no_gpu, monkeypatch):
    monkeypatch.setattr(doctor, "cpu_count", lambda: 16)
    assert "DataLoader workers" not in " ".join(doctor.advice(cg.runtime_report()))


def test_tpu_hint(monkeypatch):
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    assert "TPU" in machine.tpu_hint()


def test_in_colab_from_environment(monkeypatch):
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20261101")
    assert cg.hardware.machine.in_colab() and cg.hardware.machine.notebook_platform() == "Colab"


def test_platform_kaggle_and_local(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    assert not cg.hardware.machine.in_kaggle() and cg.hardware.machine.notebook_platform() == "local"
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    assert cg.hardware.machine.in_kaggle() and cg.hardware.machine.notebook_platform() == "Kaggle"
    assert re.search(r"^Platform +Kaggle$", doctor.format_runtime_report(cg.runtime_report()), re.M)


def test_no_gpu_advice_names_colab_and_kaggle_menus(no_gpu):
    tips = " ".join(doctor.advice(cg.runtime_report()))
    assert "Runtime > Change runtime type" in tips and "Settings > Accelerator > GPU T4 x2" in tips


def test_format_runtime_report_shows_gpu_rows(fake_gpus):
    fake_gpus(T4)
    text = doctor.format_runtime_report(cg.runtime_report())
    assert "Tesla T4" in text and "compute capability" in text and "14.75 GiB" in text
    assert re.search(r"native bf16 +no$", text, re.M) and "Advice:" in text
    assert re.search(r"mixed precision +fp16 autocast \+ GradScaler$", text, re.M)


@pytest.mark.parametrize(
    ("gpu", "row"), [(P100, "none: float32"), (T4, "fp16 autocast + GradScaler"), (A100, "bf16 autocast")]
)
def test_the_reports_precision_row_follows_choose_precision(fake_gpus, gpu, row):
    fake_gpus(gpu)
    text = doctor.format_runtime_report(cg.runtime_report())
    assert re.search(rf"mixed precision +{re.escape(row)}", text)  # a P100 was told "fp16 + GradScaler"
    assert cg.choose_precision("cuda").name == {"none: float32": "fp32"}.get(row, row[:4])


def test_print_runtime_report_returns_the_dict(no_gpu, capsys):
    report = cg.print_runtime_report()
    assert report["cuda_available"] is False
    assert "PyTorch" in capsys.readouterr().out


def test_nvidia_driver_version_absent_tool(monkeypatch):
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)
    assert machine.nvidia_driver_version() is None


def test_doctor_prints_advice(no_gpu, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "Advice:" in out and torch.__version__ in out


def test_doctor_json(fake_gpus, capsys):
    fake_gpus(H100)
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"][0]["name"] == H100["name"]


def test_doctor_fails_under_require_cuda_without_gpu(no_gpu, monkeypatch, capsys):
    monkeypatch.setenv("REQUIRE_CUDA", "1")
    assert main(["doctor"]) == 1
    assert "REQUIRE_CUDA=1 is set but no CUDA GPU" in capsys.readouterr().err


def test_cudnn_refusing_an_old_gpu_is_reported_not_raised(fake_gpus, monkeypatch):
    # cuDNN 9.11+ with a P100 or V100: torch.backends.cudnn.version() raises instead of answering.
    fake_gpus(P100)

    def refuse():
        raise RuntimeError("cuDNN version 92400 is not compatible with devices with SM < 7.5. Please install ...")

    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", refuse)
    report = doctor.runtime_report()
    assert report["cudnn"] is None
    assert report["cudnn_problem"] == "cuDNN version 92400 is not compatible with devices with SM < 7.5"
    assert any("convolutions will fail" in tip for tip in doctor.advice(report))
    assert "cuDNN" in doctor.format_runtime_report(report)
    # PyTorch raises once, then answers: the report must still say so
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 92400)
    assert machine.cudnn_version() == (None, "cuDNN version 92400 is not compatible with devices with SM < 7.5")
    fake_gpus(T4)
    assert machine.cudnn_version() == (92400, None)


def test_one_core_is_advised_no_workers_like_the_loader_helper(no_gpu, monkeypatch):
    monkeypatch.setattr(doctor, "cpu_count", lambda: 1)
    assert "use at most 0 DataLoader workers: one CPU core" in " ".join(doctor.advice(cg.runtime_report()))
    assert cg.suggest_num_workers(cores=1).num_workers == 0


def test_an_apple_silicon_mac_is_told_why_the_course_computes_on_its_cpu(no_gpu, monkeypatch):
    # Issue 66: on an M-series Mac lesson 01 printed "current accelerator: mps" beside "computing on: cpu", no word.
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)  # a stand-in for an Apple GPU
    assert cg.get_device().type == "cpu"
    report = cg.runtime_report()
    assert report["apple_gpu"] is True
    tips = doctor.advice(report)
    assert any("Apple GPU (PyTorch's 'mps' device) is not used by the course" in tip for tip in tips)
    with pytest.raises(ValueError, match="measure CUDA: lesson 01"):
        cg.get_device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert not any("mps" in tip for tip in doctor.advice(cg.runtime_report()))
