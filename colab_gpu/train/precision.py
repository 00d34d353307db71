"""Mixed precision by hardware: which autocast dtype, whether a GradScaler, and TF32.

On a GPU the rule is capability.py's (bf16 from compute capability 8.0, fp16 + GradScaler on 7.x, float32
below); on a CPU: bf16 autocast runs on every CPU but is fast only on some (AMX, and not always even with
  AVX-512 BF16: lesson 06 measured it 35x *slower* than float32 on such a CPU). So on a CPU the
  choice is measured: bf16 only when a bf16-autocast training step beats the float32 one here.

TF32 and cuDNN switches are process-wide globals: change them inside `tf32_mode` or
`restored_backend_settings`, which put back whatever the caller had (PyTorch's defaults differ
between matmuls and convolutions, so "off" is not "as before").
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ..hardware.capability import gpu_capability
from ..hardware.device import checked_device
from ..measure.timing import interleaved_medians

_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Precision:
    """How to train: ``dtype`` for autocast (None = plain float32) and whether to scale the loss.

    Taught in lesson 06.
    """

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

    On a CPU the answer is measured once per process (`cpu_bf16_speedup`): bf16 when a bf16-autocast
    training step is at least ``CPU_BF16_MIN_GAIN`` times faster than float32 here, else fp32.
    Taught in lesson 06.

    Example:
        >>> choose_precision("cpu").name in ("bf16", "fp32")
        True
    """
    device = checked_device(device, "cg.choose_precision")
    if device.type == "cpu":
        gain = cpu_bf16_speedup(torch.get_num_threads())
        measured = f"a bf16-autocast training step measured {gain:.2f}x the float32 speed on this CPU"
        if gain >= CPU_BF16_MIN_GAIN:
            return Precision("bf16", False, f"{measured} (native bf16 units): bf16 needs no loss scaling.")
        return Precision("fp32", False, f"{measured} (no fast bf16 path): stay in float32.")
    return Precision(*gpu_capability(device).precision())


def resolve_precision(precision: Precision | str | None, device: str | torch.device) -> Precision:
    """Turn ``"auto"``, ``"fp32"``, ``"bf16"``, ``"fp16"``, None or a `Precision` into a `Precision`.

    Taught in lesson 06.
    """
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
    """A GradScaler when ``precision`` needs one (fp16), else None. Taught in lesson 06."""
    if not precision.use_scaler:
        return None
    return torch.amp.GradScaler(torch.device(device).type)


def require_scaler_fits(precision: Precision, scaler: torch.amp.GradScaler | None) -> None:
    """Raise when a GradScaler is combined with a precision that must not use one."""
    if scaler is not None and scaler.is_enabled() and precision.name != "fp16":
        raise ValueError(
            f"A GradScaler was given with {precision.name} training. Loss scaling is for float16 only: "
            "bf16 has float32's exponent range, so its gradients do not underflow. Drop the scaler."
        )


CPU_BF16_MIN_GAIN = 1.2  # below this, bf16 autocast costs accuracy for no speed worth having


@functools.cache
def cpu_bf16_speedup(threads: int) -> float:
    """How many times faster a bf16-autocast MLP training step is than float32 on this CPU (median of 5).

    Cached per thread count: the answer is a property of the CPU, measured once (about 0.1-0.5 s).
    Flags such as AVX-512 BF16 are not enough: oneDNN may still take a slow path for some layers.
    """
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    inputs = torch.randn(256, 512, generator=generator)
    labels = torch.randint(0, 10, (256,), generator=generator)

    def step(dtype: torch.dtype | None) -> None:
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        model.zero_grad(set_to_none=True)

    runs = {"fp32": lambda: step(None), "bf16": lambda: step(torch.bfloat16)}
    interleaved_medians(runs, repeat=2)  # warm-up: oneDNN kernels, allocator
    seconds = interleaved_medians(runs, repeat=5)
    return seconds["fp32"] / seconds["bf16"]


def _has_fp32_precision_api() -> bool:
    # PyTorch 2.9 added the per-backend fp32_precision attributes.
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def backend_settings() -> dict[str, object]:
    """The process-wide switches that speed experiments change: TF32 for matmuls/convs, cudnn.benchmark.

    The matmul precision is read as ``torch.get_float32_matmul_precision()`` ("highest": IEEE, "high": TF32), the
    convolutions' as ``torch.backends.cudnn.allow_tf32``: what `set_tf32` writes. Where someone mixed the legacy
    flags and the newer ``fp32_precision`` API themselves (torch >= 2.9), those readers raise "mix of the legacy and
    new APIs": the ``fp32_precision`` values are saved instead, and `restore_backend_settings` writes them back the
    same way, leaving their state as they had it.
    """
    settings: dict[str, object] = {"cudnn.benchmark": torch.backends.cudnn.benchmark}
    try:
        settings["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        settings["cudnn.allow_tf32"] = torch.backends.cudnn.allow_tf32
    except RuntimeError:  # a mix of the two APIs: keep to the new one
        settings.pop("float32_matmul_precision", None)
        settings.pop("cudnn.allow_tf32", None)
        settings["matmul.fp32_precision"] = torch.backends.cuda.matmul.fp32_precision
        settings["conv.fp32_precision"] = torch.backends.cudnn.conv.fp32_precision
    return settings


def restore_backend_settings(settings: dict[str, object]) -> None:
    """Put back what `backend_settings` returned."""
    torch.backends.cudnn.benchmark = settings["cudnn.benchmark"]
    if "matmul.fp32_precision" in settings:
        torch.backends.cuda.matmul.fp32_precision = settings["matmul.fp32_precision"]
        torch.backends.cudnn.conv.fp32_precision = settings["conv.fp32_precision"]
    else:
        torch.set_float32_matmul_precision(settings["float32_matmul_precision"])
        torch.backends.cudnn.allow_tf32 = settings["cudnn.allow_tf32"]


@contextmanager
def restored_backend_settings() -> Iterator[dict[str, object]]:
    """Run a block that may change TF32 or ``cudnn.benchmark``, then restore the caller's settings (lesson 06).

    Example:
        >>> with restored_backend_settings():
        ...     torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    """
    saved = backend_settings()
    try:
        yield saved
    finally:
        restore_backend_settings(saved)


@contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """TF32 on (or off) for float32 matmuls and convolutions inside the block; the caller's settings after.

    Example (lesson 06):
        >>> with tf32_mode(True):
        ...     assert tf32_enabled()
    """
    with restored_backend_settings():
        set_tf32(enabled)
        yield


def set_tf32(enabled: bool) -> None:
    """Let float32 matmuls and convolutions use TF32 tensor cores (compute capability >= 8.0 only).

    Calls ``torch.set_float32_matmul_precision("high")`` (``"highest"``: IEEE) for matmuls, the switch Inductor's
    warning asks for, and sets ``torch.backends.cudnn.allow_tf32`` for convolutions. That pair keeps every reader
    answering, whatever set them before: the legacy ``allow_tf32`` flags, PyTorch 2.9's ``fp32_precision``
    attributes and ``get_float32_matmul_precision()``. Setting only the new attributes, or the legacy matmul flag
    after ``set_float32_matmul_precision``, leaves a reader raising "you have used mix of the legacy and new APIs":
    ``torch.compile`` reads one, and fails on its first call (pytorch#166387). This changes a process-wide setting
    until changed again; prefer `tf32_mode` for a block. PyTorch's defaults are IEEE matmuls but TF32
    convolutions, so ``set_tf32(False)`` is not a reset.

    Taught in lesson 06.
    """
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    torch.backends.cudnn.allow_tf32 = enabled


def tf32_enabled() -> bool:
    """Whether float32 matmuls may use TF32 right now, however it was set. Taught in lesson 06."""
    if _has_fp32_precision_api():  # never raises, whichever API set it
        return torch.backends.cuda.matmul.fp32_precision == "tf32"
    return bool(torch.backends.cuda.matmul.allow_tf32)
