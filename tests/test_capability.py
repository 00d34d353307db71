"""One home for the hardware rules: doctor and choose_precision give the same answer on every GPU the course names."""

import pytest
import torch

import colab_gpu as cg
from colab_gpu import doctor
from colab_gpu.hardware.capability import GpuCapability, worker_rule
from colab_gpu.hardware.gpus import COURSE_GPUS
from colab_gpu.hardware.units import GIB

#: What the course teaches for each GPU (lessons 01 and 06): format, GradScaler, native bf16, TF32.
EXPECTED = {
    "P100": ("fp32", False, False, False),
    "V100": ("fp16", True, False, False),
    "T4": ("fp16", True, False, False),
    "A100": ("bf16", False, True, True),
    "L4": ("bf16", False, True, True),
    "H100": ("bf16", False, True, True),
}


def test_the_table_covers_every_course_gpu():
    assert set(EXPECTED) == set(COURSE_GPUS)


@pytest.mark.parametrize("gpu", list(COURSE_GPUS))
def test_doctor_and_choose_precision_agree(gpu, fake_gpus):
    fake_gpus({"name": f"NVIDIA {gpu}", "capability": COURSE_GPUS[gpu], "memory_gib": 16})
    name, scaler, bf16, tf32 = EXPECTED[gpu]
    chosen = cg.choose_precision("cuda")
    report = doctor.runtime_report()
    row = report["gpus"][0]
    assert (chosen.name, chosen.use_scaler) == (name, scaler)
    assert (row["precision"], row["bf16_native"], row["tf32"]) == (name, bf16, tf32)
    assert row["precision_reason"] == chosen.reason
    tips = " ".join(doctor.advice(report))
    if row["kernels_in_this_torch"]:
        assert doctor._PRECISION_ADVICE[name] in tips
    else:  # cu128 and newer wheels start at the T4: a P100 or V100 is told that this PyTorch cannot run on it
        assert gpu in ("P100", "V100") and "no kernels" in tips


def test_the_cpu_row_measures_instead_of_looking_up(no_gpu, monkeypatch):
    monkeypatch.setattr("colab_gpu.train.precision.cpu_bf16_speedup", lambda threads: 0.5)
    report = doctor.runtime_report()
    assert report["gpus"] == [] and not any("autocast" in tip for tip in doctor.advice(report))
    chosen = cg.choose_precision("cpu")
    assert chosen.name == "fp32" and "measured" in chosen.reason


def test_worker_rule_is_the_one_the_doctor_and_the_loader_helpers_use(no_gpu, monkeypatch):
    assert worker_rule(1)[0] == 0 and worker_rule(2)[0] == 2 and worker_rule(64)[0] == 8
    assert cg.suggest_num_workers(cores=2).num_workers == worker_rule(2)[0]
    monkeypatch.setattr(doctor, "cpu_count", lambda: 2)
    assert any("at most 2 DataLoader workers" in tip for tip in doctor.advice(doctor.runtime_report()))
    with pytest.raises(ValueError, match="at least 1"):
        worker_rule(0)


def test_lesson_06_exercise_is_checked_against_the_same_rule(capsys):
    def rule(major, minor):
        return GpuCapability("any", (major, minor)).precision()[0]

    assert cg.checks.precision_rule(rule)
    assert "6 GPUs (P100, V100, T4, L4, A100, H100)" in capsys.readouterr().out
    assert GIB == 2**30 and torch.cuda.is_available() in (True, False)


@pytest.mark.parametrize(
    "gpu, dtype, head_dim, expected",
    [
        ("T4", torch.float16, 64, "efficient"),  # no flash before Ampere
        ("T4", torch.float32, 63, "efficient"),  # fp32 needs no alignment before Ampere
        ("T4", torch.bfloat16, 64, "math"),  # bf16 on a T4: no fused kernel at all
        ("P100", torch.float16, 64, "efficient"),
        ("A100", torch.float16, 64, "flash"),
        ("A100", torch.bfloat16, 256, "flash"),
        ("A100", torch.bfloat16, 512, "efficient"),  # beyond flash's 256
        ("A100", torch.float32, 64, "efficient"),  # flash is 16-bit only
        ("A100", torch.float32, 6, "math"),  # fp32 rows must be multiples of 4 from Ampere
        ("H100", torch.bfloat16, 128, "flash"),  # without a recent cuDNN
    ],
)
def test_attention_backend_follows_pytorchs_checks(gpu, dtype, head_dim, expected):
    from colab_gpu.hardware.capability import attention_backend

    assert attention_backend(COURSE_GPUS[gpu], dtype, head_dim) == expected


def test_cudnn_attention_goes_first_on_hopper_with_a_recent_cudnn(monkeypatch):
    from colab_gpu.hardware.capability import attention_backend, cudnn_attention_first

    monkeypatch.delenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", raising=False)
    h100, b200 = COURSE_GPUS["H100"], (10, 0)
    assert cudnn_attention_first(h100, 91900, "2.11.0+cu130") and cudnn_attention_first(b200, 91900, "2.14.1")
    assert not cudnn_attention_first(h100, 91002, "2.10.0+cu128")  # 2.10's wheels ship cuDNN 9.10
    assert not cudnn_attention_first(h100, 91900, "2.7.1") and not cudnn_attention_first((8, 0), 91900, "2.11.0")
    assert not cudnn_attention_first(h100, None, "2.11.0")
    for ignored in ("true", "yes", " 1", "0"):  # c10::utils::check_env: exactly "1"; other values warn, and count not
        monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", ignored)
        assert cudnn_attention_first(h100, 91900, "2.11.0"), ignored
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")
    assert not cudnn_attention_first(h100, 91900, "2.11.0")
    assert attention_backend(h100, torch.bfloat16, 128, cudnn_first=True) == "cudnn"
    assert attention_backend(h100, torch.bfloat16, 128, cudnn_first=True, key_length=1) == "flash"
    assert attention_backend(h100, torch.bfloat16, 128, cudnn_first=True, key_length=512) == "cudnn"  # a decode step
    assert attention_backend(h100, torch.float32, 128, cudnn_first=True) == "efficient"


def test_a_version_string_gives_its_release():
    from colab_gpu.hardware.capability import release_of

    assert release_of("2.11.0+cu130") == (2, 11) and release_of("5.0.0rc1") == (5, 0) and release_of("4.57") == (4, 57)
    with pytest.raises(ValueError, match="not a version"):
        release_of("nightly")


def test_attention_backend_on_this_cpu_is_the_one_pytorch_picks():
    from colab_gpu.hardware.capability import attention_backend

    choice = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn"}
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(1, 2, 8, 16, dtype=dtype)
        assert choice[torch._fused_sdp_choice(q, q, q)] == attention_backend(None, dtype, 16)
    with pytest.raises(ValueError, match="head_dim must be at least 1"):
        attention_backend(None, torch.float32, 0)


@pytest.mark.gpu
def test_attention_backend_on_this_gpu_is_the_one_pytorch_picks():
    from colab_gpu.hardware.capability import attention_backend, cudnn_attention_first

    capability = torch.cuda.get_device_capability()
    first = cudnn_attention_first(capability, torch.backends.cudnn.version(), torch.__version__)
    choice = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn"}
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        q = torch.randn(1, 8, 128, 64, dtype=dtype, device="cuda")
        expected = attention_backend(capability, dtype, 64, cudnn_first=first, key_length=128)
        assert choice[torch._fused_sdp_choice(q, q, q)] == expected, dtype


def test_attention_backend_follows_sdp_utils_head_dim_rules_per_release():
    """Issue 50: cuDNN's 256 limit for sm90 and sm100 and flash's 193-224 refusal in training on sm86/sm89 differed
    from PyTorch's sdp_utils.cpp (read in the v2.10.0-v2.14.0 wheels)."""
    from colab_gpu.hardware.capability import attention_backend

    bf16 = torch.bfloat16
    cudnn = {"cudnn_first": True, "cudnn_version": 92400}
    assert attention_backend((9, 0), bf16, 256, **cudnn, torch_version="2.14.1") == "cudnn"  # > 9.22 on 2.14
    assert attention_backend((10, 0), bf16, 256, **cudnn, torch_version="2.14.1") == "cudnn"  # sm100 too
    assert attention_backend((10, 0), bf16, 256, **cudnn, torch_version="2.11.0") == "flash"  # before: sm90 only
    assert attention_backend((9, 0), bf16, 256, **cudnn, torch_version="2.11.0") == "cudnn"  # cuDNN >= 9.10
    older = {"cudnn_first": True, "cudnn_version": 92100}
    assert attention_backend((9, 0), bf16, 256, **older, torch_version="2.14.1") == "flash"  # 9.21 is not > 9.22
    assert attention_backend((9, 0), bf16, 128, **older, torch_version="2.14.1") == "cudnn"
    assert attention_backend((8, 9), torch.float16, 208) == "flash"  # inference on an L4
    assert attention_backend((8, 9), torch.float16, 208, requires_grad=True) == "efficient"  # training: refused
    assert attention_backend((8, 0), torch.float16, 208, requires_grad=True) == "flash"  # an A100 has the memory
    assert attention_backend((8, 6), torch.float16, 232, requires_grad=True) == "flash"  # 225-256: dropout only


def test_the_course_gpus_have_one_table():
    # Six tables once named the course's GPUs (issue 68), and a T4 had 14.75 GiB in the package and 15 in the
    # fixtures. Now colab_gpu/hardware/gpus.py holds them: no module keys a table by two or more of their labels,
    # and the GPU suite's planning factors name only GPUs of the table.
    import ast
    from pathlib import Path

    import suite_plan  # scripts/gpu

    from colab_gpu.hardware.gpus import BY_LABEL, REFERENCE_GPUS

    from .conftest import T4

    package = Path(cg.__file__).parent
    tables = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Dict)
        and len({k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in BY_LABEL}) >= 2
    ]
    assert tables == [], tables
    assert set(suite_plan.GPU_CLASS_TIMEOUT) | set(suite_plan.CLASS_SLOWDOWN) <= set(REFERENCE_GPUS)
    assert T4["memory_gib"] == BY_LABEL["T4"].memory_gib == 14.75
