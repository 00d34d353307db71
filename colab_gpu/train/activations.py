"""What autograd keeps for backward: the activation memory of a block of code, on any device (lesson 07).

On a GPU, `memory.measure_peak` reads the allocator; on a CPU PyTorch keeps no allocator statistics. The
tensors autograd saves for backward are what grows with the batch, and what gradient accumulation and
activation checkpointing shrink: `measure_activations` counts them through saved-tensor hooks, everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..hardware.units import MIB


@dataclass
class ActivationMemory:
    """Filled in while a ``measure_activations`` block runs: bytes autograd keeps for backward, now and at the peak.

    Taught in lesson 07.
    """

    now_bytes: int = 0
    peak_bytes: int = 0

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / MIB

    def __str__(self) -> str:
        return f"autograd kept at most {self.peak_mib:,.2f} MiB of activations for backward"


class _Saved:
    """One tensor autograd saved for backward, counted (once per storage) while the graph holds it."""

    def __init__(
        self, tensor: torch.Tensor, live: dict[tuple, int], result: ActivationMemory, ignored: set[tuple]
    ) -> None:
        # Kept without its autograd history: an output saved with its grad_fn would hold the graph that holds
        # this object, a reference cycle that only the garbage collector frees (autograd does the same).
        self.tensor = tensor.detach()
        storage = tensor.untyped_storage()
        self.key = (tensor.device, storage.data_ptr())
        self.nbytes = 0 if self.key in ignored else storage.nbytes()
        self.live, self.result = live, result
        if live.get(self.key, 0) == 0:
            result.now_bytes += self.nbytes
            result.peak_bytes = max(result.peak_bytes, result.now_bytes)
        live[self.key] = live.get(self.key, 0) + 1

    def __del__(self) -> None:
        self.live[self.key] -= 1
        if self.live[self.key] == 0:
            del self.live[self.key]
            self.result.now_bytes -= self.nbytes


@contextmanager
def measure_activations(
    model: torch.nn.Module | None = None, *, exclude: tuple[torch.Tensor, ...] = ()
) -> Iterator[ActivationMemory]:
    """Measure the activation memory of the block on any device, the CPU included: the peak bytes of the tensors
    autograd keeps for backward (each storage counted once; the ``model``'s own parameters and the tensors in
    ``exclude``, such as the batch itself, left out: they exist whether or not autograd keeps them).

    This is the part of training memory that grows with the batch, the part that gradient accumulation and
    activation checkpointing shrink (lesson 07). On a GPU, ``measure_peak`` also sees weights, gradients,
    optimizer state and temporaries.

    Example:
        >>> layer = torch.nn.Linear(256, 256)
        >>> with measure_activations(layer) as saved:
        ...     layer(torch.randn(64, 256)).relu().sum().backward()
        >>> saved.peak_bytes == 2 * 64 * 256 * 4  # the layer's input and its output (for the ReLU)
        True
    """
    result = ActivationMemory()
    live: dict[tuple, int] = {}
    kept_anyway = [*(model.parameters() if model is not None else ()), *exclude]
    ignored = {(t.device, t.untyped_storage().data_ptr()) for t in kept_anyway}
    with torch.autograd.graph.saved_tensors_hooks(lambda t: _Saved(t, live, result, ignored), lambda s: s.tensor):
        yield result
