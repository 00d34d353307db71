"""Ways to feed the GPU (lesson 05): DataLoader workers with pinned memory, a CPU-heavy JPEG data set, and a loader
that keeps the whole data set on the device.

- `suggest_num_workers` says how many DataLoader workers this runtime can use, and why (capability.py's rule).
- `worker_loader` builds a DataLoader with checked worker settings and pinned memory on GPUs.
- `EncodedImages` is a CPU-heavy pipeline: JPEG bytes decoded and augmented per sample.
- `DeviceLoader` keeps a whole data set on the device and batches it with a shuffled index.
How fast each one feeds the GPU is measured in feeding.py.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from ..hardware.capability import worker_rule
from ..hardware.device import Batch, checked_device
from ..hardware.machine import cpu_count


@dataclass(frozen=True)
class WorkerAdvice:
    """What `suggest_num_workers` recommends, and why. Taught in lesson 05."""

    num_workers: int
    reason: str

    def __str__(self) -> str:
        return f"num_workers={self.num_workers}: {self.reason}"


PLATEAU = 0.9  # a worker count delivering at least this share of a sweep's fastest rate is on the plateau


def suggest_num_workers(cores: int | None = None, *, measured: dict[int, float] | None = None) -> WorkerAdvice:
    """How many DataLoader worker processes to use on this runtime, with the reason.

    Without ``measured``, the rule is capability.py's: one worker per core the process may use, capped at 8 (workers
    beyond the core count only compete for the same cores; Colab has 2 vCPUs). Given ``measured``, a sweep's
    samples/s per worker count (`sweep_workers`), the measurement decides among the counts up to the cores (PyTorch
    warns past them, and there they compete as soon as the machine is busier than during the sweep): the fewest
    workers within 10% of the fastest rate, where the curve's plateau starts (more workers cost memory and start-up
    time for nothing). Lesson 05.

    Example:
        >>> suggest_num_workers(cores=2).num_workers
        2
        >>> suggest_num_workers(cores=4, measured={0: 100.0, 2: 190.0, 4: 200.0}).num_workers
        2
    """
    cores = cpu_count() if cores is None else cores
    if measured:
        return _measured_advice(measured, max(cores, 1))
    return WorkerAdvice(*worker_rule(cores))


def _measured_advice(measured: dict[int, float], cores: int) -> WorkerAdvice:
    """The fewest workers, up to ``cores``, within `PLATEAU` of the fastest rate measured up to ``cores``."""
    allowed = {n: rate for n, rate in measured.items() if n <= cores} or measured
    fastest = max(allowed, key=allowed.get)
    top = allowed[fastest]
    chosen = min(n for n, rate in allowed.items() if rate >= PLATEAU * top)
    why = f"measured here, {allowed[chosen]:,.0f} samples/s"
    if chosen != fastest:
        why += (
            f", within {1 - PLATEAU:.0%} of the fastest ({fastest} workers, {top:,.0f}): the plateau starts here, "
            "and more workers only cost memory and start-up time"
        )
    elif fastest == max(measured):
        why += ", the fastest rate, at the sweep's largest count: no plateau within the sweep"
    else:
        why += ", the fastest rate of the sweep"
    beyond = max(measured, key=measured.get)
    if beyond > cores and measured[beyond] > top:
        why += (
            f"; {beyond} workers measured faster ({measured[beyond]:,.0f}), but more workers than the {cores} cores "
            "compete for them (PyTorch warns) as soon as anything else runs: capped at the cores"
        )
    return WorkerAdvice(chosen, why + ".")


def _require_batches(samples: int, batch_size: int) -> None:
    """Both loaders' check: a data set to load, and a batch size it can fill at least once."""
    if samples == 0:
        raise ValueError("The data set is empty: there is nothing to load.")
    if batch_size < 1 or batch_size > samples:
        raise ValueError(
            f"batch_size={batch_size} but the data set has {samples} samples: use a batch size between 1 and {samples}."
        )


def worker_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    device: str | torch.device,
    num_workers: int = 0,
    shuffle: bool = True,
    persistent_workers: bool = True,
    prefetch_factor: int | None = None,
    seed: int = 0,
    samples: int | None = None,
) -> DataLoader:
    """A DataLoader with checked settings: pinned memory on GPUs, persistent workers by default.

    Args:
        persistent_workers: keep worker processes alive between epochs instead of forking new
            ones every epoch (ignored with 0 workers).
        prefetch_factor: batches each worker prepares ahead (PyTorch's default is 2).
        samples: samples per epoch, drawn in random order; more than the data set repeats it, a new order each
            pass (`sweep_workers` times enough batches this way). None: the data set once.

    Taught in lesson 05.
    """
    device = checked_device(device, "cg.worker_loader")
    if num_workers < 0:
        raise ValueError(
            f"num_workers must be 0 (load in the main process) or more, got {num_workers}. {suggest_num_workers()}"
        )
    _require_batches(len(dataset), batch_size)
    extra = {}
    if num_workers > 0:
        extra = {"persistent_workers": persistent_workers, "prefetch_factor": prefetch_factor or 2}
    elif prefetch_factor is not None:
        raise ValueError("prefetch_factor needs num_workers > 0: with 0 workers nothing is prefetched.")
    generator = torch.Generator().manual_seed(seed)
    if samples is not None:
        if samples < batch_size or not shuffle:
            raise ValueError(
                f"samples={samples} asks for a random draw of at least one batch: use samples >= batch_size "
                f"({batch_size}) with shuffle=True, or samples=None for the data set once."
            )
        extra["sampler"] = RandomSampler(dataset, num_samples=samples, generator=generator)
        shuffle = False  # the sampler shuffles
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
        generator=generator,
        **extra,
    )


class EncodedImages(Dataset):
    """Images stored as JPEG bytes, decoded and augmented on the CPU for every sample.

    This is what a real image pipeline costs: decoding plus augmentation per sample, which
    DataLoader workers can spread over the CPU cores. Decoding uses Pillow, as torchvision's
    ``ImageFolder`` does (torchvision.io's JPEG functions are deprecated since torchvision 0.29).
    Each sample comes out as a uint8 ``(C, H, W)`` tensor (``v2.ToImage``) before ``transform``.

    Taught in lesson 05.
    """

    def __init__(
        self, images: torch.Tensor, labels: torch.Tensor, transform: Callable | None = None, quality: int = 90
    ):
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[1] not in (1, 3):
            raise ValueError(f"images must be uint8 (N, 1 or 3, H, W), got {images.dtype} {tuple(images.shape)}.")
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels.")
        self.encoded = [_encode_jpeg(image, quality) for image in images]
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, index: int) -> Batch:
        from PIL import Image
        from torchvision.transforms import v2

        with Image.open(io.BytesIO(self.encoded[index])) as picture:
            image = v2.functional.to_image(picture)  # PIL -> uint8 tensor (C, H, W)
        return (self.transform(image) if self.transform else image), self.labels[index]


def _encode_jpeg(image: torch.Tensor, quality: int) -> bytes:
    from PIL import Image

    array = image.permute(1, 2, 0).squeeze(-1).numpy()  # (H, W, C), or (H, W) for grey
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


class DeviceLoader:
    """Batches from tensors that already live on the device: no workers, no copies, no collation.

    For data sets that fit in GPU memory (FashionMNIST is 47 MB as uint8), this removes the
    input pipeline: every epoch draws a random permutation on the device and slices it.

    Example:
        >>> loader = DeviceLoader(torch.zeros(10, 3), torch.zeros(10), batch_size=4, device="cpu")
        >>> [len(x) for x, _ in loader]
        [4, 4, 2]

    Taught in lesson 05.
    """

    def __init__(
        self,
        inputs: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int,
        *,
        device: str | torch.device,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 0,
    ):
        device = checked_device(device, "cg.DeviceLoader")
        if inputs.device != labels.device:
            raise ValueError(
                f"inputs are on {inputs.device} but labels on {labels.device}: pass both on the same "
                "device (the CPU is fine: DeviceLoader moves them once)."
            )
        if len(inputs) != len(labels):
            raise ValueError(f"{len(inputs)} inputs but {len(labels)} labels.")
        _require_batches(len(inputs), batch_size)
        self.device = device
        self.inputs = inputs.to(self.device)
        self.labels = labels.to(self.device)
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.generator = torch.Generator(device=self.device).manual_seed(seed)

    def __len__(self) -> int:
        n = len(self.inputs) / self.batch_size
        return math.floor(n) if self.drop_last else math.ceil(n)

    def __iter__(self) -> Iterator[Batch]:
        n = len(self.inputs)
        order = (
            torch.randperm(n, device=self.device, generator=self.generator)
            if self.shuffle
            else torch.arange(n, device=self.device)
        )
        for batch in range(len(self)):
            index = order[batch * self.batch_size : (batch + 1) * self.batch_size]
            yield self.inputs[index], self.labels[index]

    @property
    def dataset(self) -> torch.Tensor:
        """The inputs (so ``len(loader.dataset)`` works as for a DataLoader)."""
        return self.inputs
