"""Mixed precision by hardware: which autocast dtype, whether a GradScaler, and TF32.

The rule (compute capability = the GPU's architecture version):
- >= 8.0 (A100, L4, H100): bf16 autocast, no GradScaler (bf16 has float32's range);
- 7.x (T4, V100): fp16 autocast with ``torch.amp.GradScaler("cuda")`` (bf16 is only emulated:
  ``torch.cuda.is_bf16_supported()`` says True there unless asked ``including_emulation=False``);
- below 7.0: no tensor cores, stay in float32;
- CPU: bf16 autocast runs everywhere (fast only on CPUs with AMX/AVX-512 bf16).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AMPERE = (8, 0)
VOLTA = (7, 0)
_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Precision:
    """How to train: ``dtype`` for autocast (None = plain float32) and whether to scale the loss."""

    name: str  # "fp32", "bf16" or "fp16"
    use_scaler: bool
    reason: str

    @property
    def dtype(self) -> torch.dtype | None:
        return _DTYPES[self.name]

    def __str__(self) -> str:
        scaler = " + GradScaler" if self.use_scaler else ""
        return f"{self.name}{scaler}: {self.reason}"


def choose_precision(device: str | torch.device) -> Precision:
    """The mixed-precision setting for ``device``, from its compute capability.

    Example:
        >>> choose_precision("cpu").name
        'bf16'
    """
    device = torch.device(device)
    if device.type == "cpu":
        return Precision("bf16", False, "CPU autocast supports bf16; whether it is faster depends on the CPU.")
    if device.type != "cuda":
        raise ValueError(f"choose_precision knows 'cpu' and 'cuda' devices, got {device}.")
    capability = torch.cuda.get_device_capability(device)
    name = torch.cuda.get_device_properties(device).name
    cc = f"{capability[0]}.{capability[1]}"
    if capability >= AMPERE:
        return Precision("bf16", False, f"{name} (CC {cc}) has native bf16 tensor cores; bf16 needs no loss scaling.")
    if capability >= VOLTA:
        return Precision("fp16", True, f"{name} (CC {cc}) has fp16 tensor cores but only emulates bf16; "
                                       "fp16 needs loss scaling against gradient underflow.")
    return Precision("fp32", False, f"{name} (CC {cc}) has no tensor cores: mixed precision gains little.")


def resolve_precision(precision: Precision | str | None, device: str | torch.device) -> Precision:
    """Turn ``"auto"``, ``"fp32"``, ``"bf16"``, ``"fp16"``, None or a `Precision` into a `Precision`."""
    if isinstance(precision, Precision):
        return precision
    if precision is None or precision == "fp32":
        return Precision("fp32", False, "plain float32")
    if precision == "auto":
        return choose_precision(device)
    if precision == "bf16":
        return Precision("bf16", False, "bf16 autocast")
    if precision == "fp16":
        return Precision("fp16", torch.device(device).type == "cuda", "fp16 autocast with loss scaling")
    raise ValueError(f"Unknown precision {precision!r}: use 'auto', 'fp32', 'bf16' or 'fp16'.")


def make_scaler(precision: Precision, device: str | torch.device) -> torch.amp.GradScaler | None:
    """A GradScaler when ``precision`` needs one (fp16), else None."""
    if not precision.use_scaler:
        return None
    return torch.amp.GradScaler(torch.device(device).type)


def check_scaler_fits(precision: Precision, scaler: torch.amp.GradScaler | None) -> None:
    """Raise when a GradScaler is combined with a precision that must not use one."""
    if scaler is not None and scaler.is_enabled() and precision.name != "fp16":
        raise ValueError(
            f"A GradScaler was given with {precision.name} training. Loss scaling is for float16 only: "
            "bf16 has float32's exponent range, so its gradients do not underflow. Drop the scaler."
        )


def set_tf32(enabled: bool) -> None:
    """Let float32 matmuls and convolutions use TF32 tensor cores (compute capability >= 8.0 only).

    Uses ``torch.backends.cuda.matmul.fp32_precision`` on current PyTorch, and the older
    ``allow_tf32`` flags where that does not exist (mixing the two APIs is an error).
    """
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if enabled else "ieee"
        conv.fp32_precision = "tf32" if enabled else "ieee"
    else:  # pragma: no cover - PyTorch before 2.9
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def tf32_enabled() -> bool:
    """Whether float32 matmuls may use TF32 right now."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        return matmul.fp32_precision == "tf32"
    return bool(matmul.allow_tf32)  # pragma: no cover - PyTorch before 2.9
