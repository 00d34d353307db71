"""What this hardware can do: the one home of the course's hardware rules.

Every hardware question the course asks is answered here, and `doctor` (runtime.py), `choose_precision`
(precision.py) and `suggest_num_workers` (loaders.py) derive their answers from these rules:

- torch.compile's GPU code generator: Triton needs compute capability >= 7.0 (a P100 cannot compile, a T4 can);
- number formats, from the compute capability (the GPU's architecture version):
  >= 8.0 (A100, L4, H100): native bf16 and TF32 tensor cores; 7.x (V100, T4): fp16 tensor cores, bf16 only
  emulated (``torch.cuda.is_bf16_supported()`` still says True there); below 7.0 (P100): no tensor cores;
- old-GPU support: whether this PyTorch build has machine code for the GPU at all (`kernels_for`);
- DataLoader workers: one per core the process may use, capped at 8 (Colab has 2 vCPUs);
- attention: which kernel ``scaled_dot_product_attention`` runs (`attention_backend`): flash from 8.0 in fp16/bf16,
  memory-efficient from 5.0 (a T4 in fp16 or fp32), cuDNN first on Hopper and Blackwell with a recent cuDNN.

Lessons 01 (compute capability, kernels), 05 (workers), 06 (precision) and 11 (compile) teach these rules.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch

#: Compute capability from which GPUs have native bf16 and TF32 tensor cores (Ampere).
AMPERE = (8, 0)
#: Compute capability from which GPUs have fp16 tensor cores (Volta).
VOLTA = (7, 0)
#: Triton, which writes torch.compile's GPU kernels, supports compute capability 7.0 (Volta) and newer.
TRITON_MIN = VOLTA
#: Colab offers at most this many CPU cores on its free and Pro runtimes.
COLAB_VCPUS = 2
#: More DataLoader workers than this rarely helps and costs memory.
MAX_WORKERS = 8
#: cuDNN 9.11 and later have no kernels for GPUs below compute capability 7.5 (a P100, a V100); PyTorch checks it
#: (torch/backends/cudnn/__init__.py) and raises once, on its first look at cuDNN.
CUDNN_DROPS_BELOW = (91100, (7, 5))
#: scaled_dot_product_attention's fused CUDA kernels (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, read in
#: 2.7, 2.10, 2.11 and main): flash and cuDNN need Ampere, memory-efficient Maxwell; none runs beyond sm121.
FLASH_ATTENTION_MIN = AMPERE
EFFICIENT_ATTENTION_MIN = (5, 0)
FUSED_ATTENTION_MAX = (12, 1)
FLASH_ATTENTION_MAX_HEAD_DIM = 256
#: torch >= 2.10 puts cuDNN attention first on sm90/sm100/sm103 when the runtime's cuDNN is newer than 9.15.0
#: (2.10's wheels ship 9.10, 2.11's cu130 wheels 9.19); TORCH_CUDNN_SDPA_DEPRIORITIZED=1 turns that off. torch 2.9
#: tried the same from a cuDNN 9.9 it was compiled with, which its wheels (built with 9.8) were not: the rule covers
#: the official wheels.
CUDNN_ATTENTION_FIRST_FROM = (91500, (2, 10))
# PyTorch's sdp_utils.cpp (read in the v2.10.0-v2.14.0 wheels and on main): cuDNN attention's head_dim limit is 128,
# 256 on sm90 with cuDNN >= 9.10 before torch 2.14; from 2.14, 256 on sm90 and sm10x with a cuDNN newer than 9.22
# (sm107: than 9.25). Flash takes head_dim <= 256, but when the inputs require grad on sm86, sm89 and sm120-121
# (less shared memory) it refuses 193-224 (and 225-256 with dropout, which the course does not use).
CUDNN_D256 = {(2, 10): 91000, (2, 14): 92200}  # torch release from which: the cuDNN version to be newer than
FLASH_SMALL_SMEM = ((8, 6), (8, 9), (12, 0), (12, 1))


@dataclass(frozen=True)
class GpuCapability:
    """A GPU's name and compute capability, and what follows from them."""

    name: str
    compute_capability: tuple[int, int]

    @property
    def cc(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    @property
    def bf16_native(self) -> bool:
        return self.compute_capability >= AMPERE

    @property
    def tf32(self) -> bool:
        return self.compute_capability >= AMPERE

    @property
    def fp16_tensor_cores(self) -> bool:
        return self.compute_capability >= VOLTA

    @property
    def triton(self) -> bool:
        """Whether Triton, torch.compile's GPU code generator, supports this GPU."""
        return self.compute_capability >= TRITON_MIN

    def precision(self) -> tuple[str, bool, str]:
        """(format, whether it needs a GradScaler, why): the mixed-precision rule for this GPU."""
        where = f"{self.name} (CC {self.cc})"
        if self.bf16_native:
            return "bf16", False, f"{where} has native bf16 tensor cores; bf16 needs no loss scaling."
        if self.fp16_tensor_cores:
            return (
                "fp16",
                True,
                (
                    f"{where} has fp16 tensor cores but only emulates bf16; fp16 needs loss scaling "
                    "against gradient underflow."
                ),
            )
        return "fp32", False, f"{where} has no tensor cores: mixed precision gains little."

    def kernels_in(self, arch_list: list[str]) -> bool | None:
        """Whether a PyTorch built for ``arch_list`` has code for this GPU (see `kernels_for`)."""
        return kernels_for(self.compute_capability, arch_list)


def gpu_capability(device: int | str | torch.device = 0) -> GpuCapability:
    """The capability of a visible CUDA GPU."""
    props = torch.cuda.get_device_properties(device)
    return GpuCapability(props.name, (props.major, props.minor))


def kernels_for(capability: tuple[int, int], arch_list: list[str]) -> bool | None:
    """Whether a PyTorch built for ``arch_list`` (``torch.cuda.get_arch_list()``) can run on ``capability``.

    A GPU runs machine code built for its own major version and an equal or lower minor (sm_80 code
    on an sm_86 GPU), or PTX for an equal or lower capability, compiled when first used. None when
    the list is empty (some releases report nothing without a visible GPU): unknown, not "no".
    Official cu128/cu130 wheels start at sm_70 (torch 2.8-2.10's cu128) or sm_75 (T4): a P100 (6.0) is visible but the
    first kernel fails with "no kernel image is available for execution on the device". Lesson 01.
    """
    known = False
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)[a-z]?", arch)
        if not match:
            continue
        known = True
        kind, major, minor = match.group(1), int(match.group(2)), int(match.group(3))
        if kind == "sm" and major == capability[0] and minor <= capability[1]:
            return True
        if kind == "compute" and (major, minor) <= capability:
            return True
    return False if known else None


def worker_rule(cores: int) -> tuple[int, str]:
    """(DataLoader workers, why) for a process that may use ``cores`` CPU cores."""
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores}.")
    if cores == 1:
        return 0, "one CPU core: a worker process would only take turns with the training loop."
    why = f"{cores} CPU cores: one worker per core"
    if cores > MAX_WORKERS:
        why += f" up to {MAX_WORKERS} (more rarely helps and costs memory: measure before raising it)"
    elif cores <= COLAB_VCPUS:
        why += f" (Colab's {COLAB_VCPUS} vCPUs: more workers only compete for the same cores)"
    return min(cores, MAX_WORKERS), why + "."


def release_of(version: str) -> tuple[int, int]:
    """(major, minor) of a package's version string: "2.11.0+cu130" -> (2, 11), "5.0.0rc1" -> (5, 0)."""
    numbers = re.findall(r"\d+", version)[:2]
    if len(numbers) < 2:
        raise ValueError(f"not a version with a major and a minor number: {version!r}.")
    return int(numbers[0]), int(numbers[1])


def cudnn_attention_first(capability: tuple[int, int], cudnn_version: int | None, torch_version: str) -> bool:
    """Whether ``scaled_dot_product_attention`` tries cuDNN's kernel before flash on this GPU (see
    `CUDNN_ATTENTION_FIRST_FROM`); ``cudnn_version`` as ``torch.backends.cudnn.version()`` gives it (91900).
    Taught in lesson 14."""
    newer_than, first_torch = CUDNN_ATTENTION_FIRST_FROM
    return (
        release_of(torch_version) >= first_torch
        and cudnn_version is not None
        and cudnn_version > newer_than
        and capability[0] in (9, 10)
        and capability[1] in (0, 3)
        # PyTorch reads the variable once, when the first attention runs; c10::utils::check_env takes exactly "1"
        # (and "0"), and ignores any other value with a warning
        and os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED") != "1"
    )


def attention_backend(
    capability: tuple[int, int] | None,
    dtype: torch.dtype,
    head_dim: int,
    *,
    cudnn_first: bool = False,
    key_length: int | None = None,
    requires_grad: bool = False,
    cudnn_version: int | None = None,
    torch_version: str | None = None,
) -> str:
    """The kernel ``scaled_dot_product_attention`` runs by default: "flash", "efficient", "cudnn" or "math".

    For queries, keys and values of ``dtype`` with ``head_dim`` features per head, no mask, no dropout, on a GPU of
    ``capability`` (None: the CPU, where a flash kernel takes every float type). PyTorch tries its kernels in the
    order flash, memory-efficient, math (cuDNN first where `cudnn_attention_first`) and runs the first whose
    checks pass: on a T4 (7.5) flash is out and fp16 runs memory-efficient, but bf16 falls to the math kernel,
    which writes the whole (length x length) score matrix to memory. cuDNN's kernel refuses a single key or value
    (``key_length=1``); a single query (a generation step with a KV cache) it takes, without dropout. Its head_dim
    limit is 128, or 256 on newer GPUs and cuDNN (`CUDNN_D256`: ``cudnn_version`` and ``torch_version`` default to
    this runtime's). Flash refuses a head_dim of 193-224 when the inputs ``requires_grad`` on sm86, sm89 and
    sm120 (`FLASH_SMALL_SMEM`). Lesson 14.
    """
    if head_dim < 1:
        raise ValueError(f"head_dim must be at least 1, got {head_dim}.")
    if capability is None:
        return "flash"
    if not (isinstance(capability, tuple) and len(capability) == 2 and all(isinstance(n, int) for n in capability)):
        raise TypeError(
            f"capability={capability!r}: give it as (major, minor), e.g. (7, 5) for a T4, as "
            "torch.cuda.get_device_capability() returns it (None: the CPU)."
        )
    half = dtype in (torch.float16, torch.bfloat16)
    in_range = capability <= FUSED_ATTENTION_MAX
    if cudnn_first and in_range and capability >= AMPERE and half and head_dim % 8 == 0 and key_length != 1:
        if head_dim <= _cudnn_head_dim_limit(capability, cudnn_version, torch_version):
            return "cudnn"
    small_smem_training = requires_grad and capability in FLASH_SMALL_SMEM and 192 < head_dim <= 224
    if in_range and capability >= FLASH_ATTENTION_MIN and half and head_dim <= FLASH_ATTENTION_MAX_HEAD_DIM:
        if not small_smem_training:
            return "flash"
    efficient_dtypes = (torch.float16, torch.float32) + ((torch.bfloat16,) if capability >= AMPERE else ())
    if in_range and capability >= EFFICIENT_ATTENTION_MIN and dtype in efficient_dtypes:
        # the kernel's GEMMs load aligned vectors: head_dim must be a multiple of this many values
        alignment = (8 if half else 4) if capability >= AMPERE else (8 if half else 1) if capability >= VOLTA else 1
        if head_dim % alignment == 0:
            return "efficient"
    return "math"


def _cudnn_head_dim_limit(capability: tuple[int, int], cudnn_version: int | None, torch_version: str | None) -> int:
    """cuDNN attention's largest head_dim on this GPU, cuDNN and PyTorch (`CUDNN_D256`)."""
    release = release_of(torch_version or torch.__version__)
    if cudnn_version is None:
        cudnn_version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if cudnn_version is None:
        return 128
    if release >= (2, 14):
        newer_than = 92500 if capability == (10, 7) else CUDNN_D256[(2, 14)]
        wide = capability == (9, 0) or capability[0] == 10
        return 256 if wide and cudnn_version > newer_than else 128
    return 256 if capability == (9, 0) and cudnn_version >= CUDNN_D256[(2, 10)] else 128


def cudnn_supports(cudnn_version: int, capability: tuple[int, int]) -> bool:
    """Whether a cuDNN of ``cudnn_version`` (as ``torch.backends.cudnn.version()`` gives it) has kernels for a GPU
    of ``capability`` (see `CUDNN_DROPS_BELOW`)."""
    dropped_from, minimum = CUDNN_DROPS_BELOW
    return cudnn_version < dropped_from or capability >= minimum
