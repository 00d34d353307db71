"""Checks of the first exercises: a tensor created on the device, the number of GPUs (lesson 01).

A tensor made on the CPU and then copied with ``.to()`` ends up on the same device as one created there, so its
result cannot tell them apart: the check calls the learner's function and watches the calls it makes.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from ..hardware.device import same_device
from .core import CheckResult, fail, ok, that

COPIES = {"to", "cuda", "cpu", "copy_", "type"}  # tensor methods that move or copy data to another device


class _CopyWatch(TorchFunctionMode):
    """Records each tensor method of ``COPIES`` whose result is on another device than its input."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        source = args[0] if args else None
        if name in COPIES and isinstance(source, torch.Tensor) and isinstance(result, torch.Tensor):
            if not same_device(source.device, result.device):
                self.copies.append(f".{name}() from {source.device} to {result.device}")
        return result


def created_on(
    make: object, target: str | torch.device, *, shape: tuple[int, ...] = (1000,), name: str = "make_ones"
) -> CheckResult:
    """Check ``make(where)``: a float32 tensor of ones of ``shape``, created directly on ``where``.

    Called for the CPU (where its values can be read) and for ``target`` (the GPU, or PyTorch's ``meta`` device on
    a CPU runtime); a copy from another device (``torch.ones(...).to(where)``) is seen as the call it is.

    Example:
        >>> bool(created_on(lambda where: torch.ones(1000, device=where), "meta"))
        ✅ Correct: make_ones makes 1000 ones (float32) directly on cpu and on meta.
        True

    Taught in lesson 01.
    """
    if not callable(make):
        return fail(f"define {name}(where), which returns the tensor, and rerun.")
    for where in (torch.device("cpu"), torch.device(target)):
        with _CopyWatch() as watch:
            made = make(where)
        call = f"{name}({str(where)!r})"
        if watch.copies:
            return fail(
                f"{call} made the tensor elsewhere, then copied it ({watch.copies[0]}): create it on `where` "
                "directly, with device=where (on a GPU a copy is a second tensor and a transfer)."
            )
        if not isinstance(made, torch.Tensor):
            return fail(f"{call} returned {type(made).__name__}, not a tensor: return the tensor you create.")
        if not same_device(made.device, where):
            return fail(f"{call} made a tensor on {made.device}: pass device=where to the function that creates it.")
        if tuple(made.shape) != tuple(shape):
            return fail(f"{call} has shape {tuple(made.shape)}, expected {tuple(shape)}: {shape[0]} values.")
        if made.dtype != torch.float32:
            return fail(f"{call} holds {made.dtype}, expected torch.float32, PyTorch's default: leave dtype out.")
        if where.type == "cpu" and not bool((made == 1).all()):
            return fail(f"{call} holds values other than 1: ones everywhere (torch.ones).")
    return ok(f"{name} makes {shape[0]} ones (float32) directly on cpu and on {torch.device(target)}.")


def gpu_count(answer: object) -> CheckResult:
    """Check the number of GPUs PyTorch sees: a whole number equal to ``torch.cuda.device_count()``.

    Example:
        >>> bool(gpu_count(torch.cuda.device_count()))  # doctest: +ELLIPSIS
        ✅ Correct: gpu_count = ...
        True

    Taught in lesson 01.
    """
    if answer is None:
        return fail("gpu_count is not set yet: complete the exercise cell and run it.")
    if isinstance(answer, bool) or not isinstance(answer, int):
        return fail(
            f"gpu_count should be a whole number, got {answer!r} ({type(answer).__name__}): "
            "torch.cuda.is_available() says whether there is a GPU, torch.cuda.device_count() how many."
        )
    seen = torch.cuda.device_count()
    return that(
        answer == seen,
        f"gpu_count = {answer}: the GPUs PyTorch sees on this runtime.",
        f"gpu_count = {answer}, but PyTorch sees {seen}: ask torch.cuda.device_count().",
    )
