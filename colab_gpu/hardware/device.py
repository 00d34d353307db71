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


#: The menus that give a notebook its runtime: the one home of these words (the hints, the atlas and the doctor use
#: them; the lessons' setup cell, which runs before colab_gpu is installed, spells them out).
COLAB_RUNTIME_MENU = "Runtime > Change runtime type"
COLAB_GPU_MENU = f"{COLAB_RUNTIME_MENU} > T4 GPU"
KAGGLE_GPU_MENU = "Settings > Accelerator > GPU T4 x2"
ENABLE_GPU_HINT = (
    f"In Colab: {COLAB_GPU_MENU}, then rerun. "
    f"On Kaggle: {KAGGLE_GPU_MENU} (a phone-verified account), then rerun. "
    "On your own machine: install a CUDA build of PyTorch and an NVIDIA driver."
)

#: Environment variable that turns "no GPU" into an error everywhere (GPU CI jobs set it).
REQUIRE_CUDA_ENV = "REQUIRE_CUDA"

_TRUE_WORDS = {"1", "true", "yes", "on"}


class DeviceNotAvailableError(RuntimeError):
    """Raised when the requested device does not exist on this machine. Taught in lesson 01."""


class DeviceNameError(ValueError):
    """Raised for a device name PyTorch does not know ("gpu") or a device the course does not use ("mps")."""


class DeviceTypeError(TypeError):
    """Raised when ``device`` is neither a name nor a ``torch.device`` (``device=0``: the name is "cuda:0")."""


#: Every error of the device door (`checked_device`): a self-check shows its words as they are, as its hint.
DEVICE_MISTAKES = (DeviceNotAvailableError, DeviceNameError, DeviceTypeError)


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


#: What every helper that takes ``device=`` accepts, in the words of its error messages.
DEVICE_WORDS = "'cpu', 'cuda' or 'cuda:N' (or a torch.device, such as the one cg.get_device() returns)"


def _parse(name: object, what: str) -> torch.device:
    if isinstance(name, torch.device):
        return name
    if not isinstance(name, str):  # device=0: the learner may mean GPU 0, which is spelled "cuda:0"
        gpu_index = isinstance(name, int) and not isinstance(name, bool)
        hint = f" For GPU number {name}, use 'cuda:{name}'." if gpu_index else ""
        raise DeviceTypeError(
            f"{what} takes a device such as {DEVICE_WORDS}, not {type(name).__name__} {name!r}.{hint} "
            f"Available here: {_describe_available()}."
        )
    try:
        return torch.device(name.strip().lower())
    except RuntimeError as err:
        hint = " PyTorch calls an NVIDIA GPU 'cuda'." if name.strip().lower().startswith("gpu") else ""
        raise DeviceNameError(
            f"{what} was given the device name {name!r}, which PyTorch does not know.{hint} "
            f"Use {DEVICE_WORDS}; available here: {_describe_available()}."
        ) from err


def _check_cuda(device: torch.device, what: str) -> torch.device:
    count = cuda_device_count()
    if count == 0:
        best = "Call it with no name for the best device here"  # get_device's own answer
        if what != "cg.get_device":
            best = "Pass device=device from cg.get_device()"
        raise DeviceNotAvailableError(
            f"{what} was asked for {device}, but this runtime has no GPU (available: "
            f"{_describe_available()}). {best}, or: {ENABLE_GPU_HINT}"
        )
    index = 0 if device.index is None else device.index
    if index >= count:
        plural = "GPU" if count == 1 else "GPUs"
        raise DeviceNotAvailableError(
            f"{what} was asked for cuda:{index}, but this machine only has {count} {plural} "
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
    return checked_device(name, "cg.get_device")


def checked_device(name: object, what: str, *, also: tuple[str, ...] = ()) -> torch.device:
    """The one door for every ``device`` argument: ``name`` as a device that exists here, CUDA started for a GPU.

    Every helper that takes ``device=`` calls it first, with its own name as ``what``, so each mistake gets the
    same words wherever it is made: a typo ("gpu"), a GPU this runtime does not have ("cuda" on a CPU runtime,
    "cuda:3" on one GPU), a device the course does not use ("mps", "meta") or a number instead of a name,
    rather than PyTorch's list of device types or "Found no NVIDIA driver" from deep inside a helper.
    "cuda" comes back with its index (``cuda:0``). ``also``: device types one helper takes besides (the checks
    of where a tensor lives take "meta", which lessons 01-02 use as "another device" on a CPU runtime).
    """
    device = _parse(name, what)
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type in also:
        return device
    if device.type == "cuda":
        return ensure_cuda_started(_check_cuda(device, what))
    why = " (its GPU sections measure CUDA: lesson 01, section 3)" if device.type == "mps" else ""
    raise DeviceNameError(
        f"{what} was given the device {str(device)!r}, which this course does not use{why}. "
        f"Use {DEVICE_WORDS}; available here: {_describe_available()}."
    )


def synchronize(device: str | torch.device) -> None:
    """Wait until all queued work on ``device`` has finished (a no-op on the CPU).

    CUDA kernels run asynchronously: Python returns as soon as a kernel is queued. Call this
    before reading a clock, or you measure how fast kernels are launched, not how fast they run.

    Taught in lesson 02.
    """
    device = checked_device(device, "cg.synchronize")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
