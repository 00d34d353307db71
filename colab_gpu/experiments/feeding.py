"""How fast data reaches the GPU (lessons 02 and 05; the bench's loader rows), every way measured the same way.

- `measure_loader` times an epoch of any loader, synchronized; `sweep_workers` measures each worker count in its
  steady state, over enough batches that every worker prepares ten of them.
- `time_loader_epochs` times a training epoch of a fresh MLP per loader; `epoch_samples` is its data set's size;
  `training_step` is one step of that epoch, fed by a loader, for `profile_step` to name its regime.
- `copy_bandwidth` measures host-to-device copies, from pageable or pinned memory.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from functools import partial
from itertools import chain, repeat

import torch
from torch import nn

from ..data.loaders import worker_loader
from ..hardware.device import checked_device, synchronize
from ..hardware.machine import cpu_count
from ..measure.timing import BenchResult, benchmark, interleaved_times, timed_call
from ..train.models import mlp
from ..train.steps import train_epoch
from .sizes import sized

BATCHES_PER_WORKER = 10  # a sweep's rounds: each worker prepares this many batches while it is timed
MIN_SWEEP_BATCHES = 20  # and no setting is timed on fewer batches than this (0 and 1 workers)


def measure_loader(loader, device: str | torch.device, *, epochs: int = 1) -> float:
    """Samples per second delivered to ``device`` (batches copied there and synchronized). Taught in lesson 05."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"measure_loader needs epochs >= 1 passes over the loader, got epochs={epochs!r}.")
    device = checked_device(device, "cg.measure_loader")
    samples, seconds = timed_call(lambda: sum(_delivered(loader, device) for _ in range(epochs)), device)
    if samples == 0:
        raise ValueError(
            "The loader yielded no samples: its data set is empty, or it is a generator that ran once already "
            "(make a new one, or a DataLoader, which starts over at every pass)."
        )
    return samples / seconds


def worker_counts(cores: int) -> list[int]:
    """The ``num_workers`` values worth measuring on ``cores`` cores: 0, 1, powers of two, the core count and twice
    it (capped at 64), so that a sweep shows the plateau past the cores (`sweep_workers`'s default, lesson 05)."""
    powers = {2**i for i in range(1, 7) if 2**i < cores}
    return sorted({0, 1, 2, *powers, cores, min(2 * cores, 64)})


def sweep_batches(workers: int) -> int:
    """How many batches `sweep_workers` times for ``workers`` workers: ten per worker (ten rounds), at least 20."""
    return max(BATCHES_PER_WORKER * workers, MIN_SWEEP_BATCHES)


def _steady_rate(loader, device: torch.device, warmup_batches: int) -> float:
    """Samples/s of ``loader``'s batches after the first ``warmup_batches`` (which start the workers and fill their
    queues), copied to ``device`` and synchronized: one iterator, so no epoch boundary drains the pipeline."""
    batches = iter(loader)
    for _ in range(warmup_batches):
        next(batches)
    samples, seconds = timed_call(lambda: _delivered(batches, device), device)
    return samples / seconds


def _delivered(batches, device: torch.device) -> int:
    """How many samples ``batches`` delivered, each batch's inputs copied to ``device`` as a training step would."""
    samples = 0
    for inputs, _labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        samples += len(inputs)
    return samples


def sweep_workers(
    dataset,
    device: torch.device,
    counts: list[int] | None = None,
    *,
    batch_size: int = 64,
    verbose: bool = False,
) -> dict[int, float]:
    """Samples/s that ``dataset`` delivers to ``device`` for each worker count (lesson 05; the bench's row).

    ``counts`` defaults to `worker_counts` of the cores this process may use: 0, a few, every core and twice as
    many. Each count is timed in its steady state: its first ``max(workers, 1)`` batches start the workers and are
    not counted, then `sweep_batches` batches are (ten per worker, at least 20), drawn at random from ``dataset``,
    repeated as often as needed. An epoch of a small data set would time the batch count instead: 12 batches take
    2 rounds of 8 workers but 1 round of 16. PyTorch's warning about more workers than cores is silenced here:
    the sweep asks for them on purpose."""
    device = checked_device(device, "cg.sweep_workers")
    counts = worker_counts(cpu_count()) if counts is None else counts
    rates = {}
    for workers in counts:
        warmup, timed = max(workers, 1), sweep_batches(workers)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            loader = worker_loader(
                dataset,
                batch_size,
                device=device,
                num_workers=workers,
                persistent_workers=False,
                samples=(warmup + timed) * batch_size,
            )
            rates[workers] = _steady_rate(loader, device, warmup)
        if verbose:
            print(f"num_workers={workers:2d}: {rates[workers]:7,.0f} samples/s ({timed} batches timed)")
        del loader  # its iterator has ended: its workers have stopped
    return rates


def epoch_samples(device: torch.device) -> int:
    """Samples per epoch in the loader experiments: FashionMNIST's 60,000 on a GPU, fewer on a CPU."""
    return sized("epoch_samples", device)


EPOCH_ROUNDS = 7  # epochs per loader, interleaved: the gain and its bound come from medians of as many


def time_loader_epochs(
    loaders: dict[str, Iterable], device: torch.device, rounds: int = EPOCH_ROUNDS
) -> dict[str, BenchResult]:
    """Epochs of a lesson-03 MLP (784-512-512-10, Adam; one per loader, from the same seed) fed by each loader, after
    one warm-up epoch each: ``rounds`` epochs per loader, the loaders taking turns (the order reversed every other
    round), so a drift of the machine hits all alike and their medians compare (lesson 05; the bench's row).

    A "loader" is anything that yields (inputs, labels) batches: a list that repeats one batch already on the
    device times the training steps alone, with no loading at all (lesson 05's bound on the epoch gain)."""
    device = checked_device(device, "cg.time_loader_epochs")
    epochs = {}
    for name, loader in loaders.items():
        torch.manual_seed(0)
        model = mlp(784, hidden=512).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        epochs[name] = partial(_one_epoch, model, loader, optimizer, device)
    for epoch in epochs.values():
        epoch()  # warm-up: the allocator, the first kernels, a DataLoader's first iterator
    return {name: BenchResult(tuple(times)) for name, times in interleaved_times(epochs, rounds).items()}


def _one_epoch(model: nn.Module, loader: Iterable, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    train_epoch(model, loader, optimizer, device, progress=False)
    synchronize(device)


def training_step(loader: Iterable, device: str | torch.device) -> Callable[[], None]:
    """One training step of a fresh lesson-03 MLP (Adam) per call, each on the next batch of ``loader`` (starting
    over at its end): what `time_loader_epochs` times an epoch of, one step at a time. Fetching the batch and
    copying it to ``device`` is labelled "data", so ``cg.profile_step(training_step(loader, device), device)``
    can tell an input-bound step from the others. Lesson 05 profiles it; the bench's "gpu_busy" row too."""
    from torch.profiler import record_function

    device = torch.device(device)
    torch.manual_seed(0)
    model = mlp(784, hidden=512).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = chain.from_iterable(repeat(loader))  # the loader's batches, epoch after epoch

    def step() -> None:
        with record_function("data"):
            inputs, labels = next(batches)
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def copy_bandwidth(megabytes: int, device: str | torch.device, *, pinned: bool, repeat: int = 10) -> float:
    """Host-to-device copy bandwidth in GB/s from pinned or pageable host memory (median of ``repeat``).

    Taught in lesson 02.
    """
    device = checked_device(device, "cg.copy_bandwidth")
    if device.type != "cuda":
        raise ValueError(f"copy_bandwidth measures host-to-GPU copies; {device} is not a GPU.")
    host = torch.empty(megabytes * 2**20, dtype=torch.uint8, pin_memory=pinned)
    result = benchmark(lambda: host.to(device, non_blocking=pinned), device=device, repeat=repeat)
    return host.numel() / result.median / 1e9
