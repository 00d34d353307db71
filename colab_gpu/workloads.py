"""The models and batch sizes the course's experiments time (bench.py's rows; lesson 06 times the same ones)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .models import mlp, small_cnn
from .timing import BenchResult, time_train_step


@dataclass(frozen=True)
class Workload:
    """A model and a batch shape whose training step an experiment times (lesson 06 times the same ones)."""

    name: str
    make_model: Callable[[], nn.Module]
    shape: tuple[int, ...]


def time_step(workload: Workload, device: torch.device, precision: str = "fp32", *, tf32: bool = False,
              channels_last: bool = False) -> tuple[BenchResult, float | None]:
    """Step time and peak MiB (GPU only) of a fresh ``workload`` model on random inputs (lesson 06; bench rows).

    ``tf32=False`` measures IEEE float32; ``channels_last`` puts the model and the batch in that layout."""
    device = torch.device(device)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    torch.manual_seed(0)
    inputs = torch.randn(*workload.shape, device=device).contiguous(memory_format=layout)
    labels = torch.randint(0, 10, (workload.shape[0],), device=device)
    model = workload.make_model().to(device, memory_format=layout)
    return time_train_step(model, inputs, labels, precision=precision, tf32=tf32,
                           repeat=5 if device.type == "cuda" else 3)


MLP_STEP = Workload("MLP 784-512-512-10", lambda: mlp(784, hidden=512), (256, 1, 28, 28))
CNN_STEP = Workload("small CNN, width 32", lambda: small_cnn(3, 10, width=32), (256, 3, 32, 32))


def amp_workloads(device: torch.device) -> dict[str, Workload]:
    """Lesson 06's two models: a matmul-heavy MLP (tensor cores' best case) and the CNN; small on a CPU."""
    if torch.device(device).type == "cuda":
        return {"MLP": Workload("MLP 1024-4096x3, batch 8192", lambda: mlp(1024, hidden=4096, depth=3), (8192, 1024)),
                "CNN": CNN_STEP}
    return {"MLP": Workload("MLP 256-512x3, batch 256", lambda: mlp(256, hidden=512, depth=3), (256, 256)),
            "CNN": Workload("small CNN, width 16, batch 32", lambda: small_cnn(3, 10, width=16), (32, 3, 32, 32))}
