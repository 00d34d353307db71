"""Choosing the device: the GPU when it is usable, the CPU otherwise, and never a silent swap.

`get_device()` is what every notebook calls first. It answers the question "where should my
tensors live?" and, unlike many tutorial helpers, it refuses to guess when you asked for
something specific that does not exist: a wrong device name is a bug to fix, not a reason
to quietly train on the CPU.
"""

from __future__ import annotations

import os

import torch

#: What the course's loaders yield: (inputs, labels).
Batch = tuple[torch.Tensor, torch.Tensor]


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether ``a`` and ``b`` name the same device: "cuda" and "cuda:0" do (the default index is 0)."""
    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and (a.index or 0) == (b.index or 0)


ENABLE_GPU_HINT = (
    "In Colab: Runtime > Change runtime type > T4 GPU, then rerun. "
    "On Kaggle: Settings > Accelerator > GPU T4 x2 (a phone-verified account), then rerun. "
    "On your own machine: install a CUDA build of PyTorch and an NVIDIA driver."
)

#: Environment variable that turns "no GPU" into an error everywhere (GPU CI jobs set it).
REQUIRE_CUDA_ENV = "REQUIRE_CUDA"

_TRUE_WORDS = {"1", "true", "yes", "on"}


class DeviceNotAvailableError(RuntimeError):
    """Raised when the requested device does not exist on this machine. Taught in lesson 01."""


def cuda_required() -> bool:
    """Return True when the environment says this run must have a CUDA GPU.

    Example:
        >>> if cuda_required():
        ...     print("this run fails without a GPU")

    Taught in lesson 01.
    """
    return os.environ.get(REQUIRE_CUDA_ENV, "").strip().lower() in _TRUE_WORDS


def cuda_device_count() -> int:
    """Number of usable CUDA GPUs (0 on a CPU-only build or machine). Taught in lesson 01."""
    if not torch.cuda.is_available():
        return 0
    return torch.cuda.device_count()


def available_devices() -> list[torch.device]:
    """Every device this machine can compute on: always the CPU, then each CUDA GPU.

    Unlike helpers that return ``[]`` when there is no GPU, the CPU is always in the list.

    Example:
        >>> available_devices()[0]
        device(type='cpu')

    Taught in lesson 01.
    """
    return [torch.device("cpu")] + [torch.device("cuda", i) for i in range(cuda_device_count())]


def _describe_available() -> str:
    return ", ".join(str(d) for d in available_devices())


def require_cuda_if_asked() -> None:
    """Raise when ``REQUIRE_CUDA=1`` is set and no CUDA GPU is visible.

    A GPU CI job sets the variable so that a runner which lost its GPU fails loudly
    instead of passing on the CPU.

    Taught in lesson 01.
    """
    if cuda_required() and cuda_device_count() == 0:
        raise DeviceNotAvailableError(
            f"{REQUIRE_CUDA_ENV}=1 is set but no CUDA GPU is visible "
            f"(available: {_describe_available()}). {ENABLE_GPU_HINT} "
            f"Unset {REQUIRE_CUDA_ENV} to allow running on the CPU."
        )


def _parse(name: str | torch.device) -> torch.device:
    if isinstance(name, torch.device):
        return name
    if not isinstance(name, str):  # get_device(0): the learner may mean GPU 0, which is spelled "cuda:0"
        gpu_index = isinstance(name, int) and not isinstance(name, bool)
        hint = f" For GPU number {name}, use 'cuda:{name}'." if gpu_index else ""
        raise TypeError(
            f"get_device takes a device name such as 'cpu', 'cuda' or 'cuda:0' (or None for the best "
            f"one here), not {type(name).__name__} {name!r}.{hint} "
            f"Available here: {_describe_available()}."
        )
    try:
        return torch.device(name.strip().lower())
    except RuntimeError as err:
        raise ValueError(
            f"Unknown device name {name!r}. Use 'cpu', 'cuda' or 'cuda:N' (available here: {_describe_available()})."
        ) from err


def _check_cuda(device: torch.device) -> torch.device:
    count = cuda_device_count()
    if count == 0:
        raise DeviceNotAvailableError(
            f"You requested {device} but no CUDA GPU is visible (available: {_describe_available()}). {ENABLE_GPU_HINT}"
        )
    index = 0 if device.index is None else device.index
    if index >= count:
        plural = "GPU" if count == 1 else "GPUs"
        raise DeviceNotAvailableError(
            f"You requested cuda:{index} but this machine only has {count} {plural} "
            f"(available: {_describe_available()}). Use an index below {count}."
        )
    return torch.device("cuda", index)


def ensure_cuda_started(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device``, after starting CUDA in this process when it is a CUDA GPU.

    PyTorch starts CUDA lazily, at the first tensor or kernel. Some calls do not start it themselves: in a fresh
    kernel, ``torch.cuda.reset_peak_memory_stats(device)`` before any tensor raises "Invalid device argument 0:
    did you call init?", and ``memory_allocated`` quietly answers 0. Starting it here, once, makes every CUDA
    call after ``get_device`` safe, and it does what the first tensor would have done anyway (a CUDA context,
    a few hundred MiB that no allocator statistic counts). DataLoader workers forked later must not use CUDA,
    as before (lesson 05). `get_device` and the memory helpers call it.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.init()  # does nothing once CUDA is started
    return device


def get_device(name: str | torch.device | None = None) -> torch.device:
    """Return the device to compute on.

    Args:
        name: ``None`` or ``"auto"`` picks the first CUDA GPU when one is usable, else the CPU.
            ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` ask for that device and raise if it is absent.

    Returns:
        A ``torch.device``; ``"cuda"`` is returned with its index (``cuda:0``), with CUDA started in this
        process, so that allocator calls such as ``torch.cuda.reset_peak_memory_stats`` work from the first cell.

    Raises:
        DeviceNotAvailableError: the requested GPU does not exist here, or ``REQUIRE_CUDA=1``
            is set and there is no GPU.
        ValueError: the name is not a device PyTorch knows, or one this course does not support.
        TypeError: ``name`` is not a string or device (``get_device(0)``: use ``"cuda:0"``).

    Example:
        >>> get_device("cpu")
        device(type='cpu')

    Taught in lesson 01.
    """
    require_cuda_if_asked()
    if name is None or (isinstance(name, str) and name.strip().lower() == "auto"):
        return ensure_cuda_started(torch.device("cuda", 0)) if cuda_device_count() > 0 else torch.device("cpu")
    return checked_device(name)


def checked_device(name: str | torch.device) -> torch.device:
    """``name`` as a device that exists here (CUDA started for a GPU), or the clear error `get_device` gives.

    For helpers that take a ``device`` argument: a typo, a GPU that is not there or a device the course does
    not support gets the same message as in `get_device`, not PyTorch's list of device types or "Found no NVIDIA
    driver".
    """
    device = _parse(name)
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "cuda":
        return ensure_cuda_started(_check_cuda(device))
    raise ValueError(
        f"Device {str(device)!r} is not supported by this course. Use 'cpu', 'cuda' or 'cuda:N' "
        f"(available here: {_describe_available()})."
    )


def visible_device(name: str | torch.device, what: str) -> torch.device:
    """``name`` as a ``torch.device`` that this runtime has, checked without starting CUDA: the one clear message
    for ``device="cuda"`` on a runtime without a GPU (``what`` names the helper that was asked), instead of
    "Found no NVIDIA driver" from deep inside PyTorch. For helpers that time or profile work on ``device``."""
    device = _parse(name)
    if device.type == "cuda" and cuda_device_count() == 0:
        raise DeviceNotAvailableError(
            f"{what} was asked to run on {device}, but this runtime has no GPU (available: "
            f"{_describe_available()}). Pass device=device from cg.get_device(), or: {ENABLE_GPU_HINT}"
        )
    if device.type == "cuda":
        _check_cuda(device)  # an index this machine has ("cuda:3" on one GPU: the same message as get_device)
    return device


def synchronize(device: str | torch.device) -> None:
    """Wait until all queued work on ``device`` has finished (a no-op on the CPU).

    CUDA kernels run asynchronously: Python returns as soon as a kernel is queued. Call this
    before reading a clock, or you measure how fast kernels are launched, not how fast they run.

    Taught in lesson 02.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
