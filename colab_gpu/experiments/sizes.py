"""How much work each of the course's experiments does on a GPU and on a CPU runtime, in one table.

A GPU is timed at the sizes learners train at (FashionMNIST's 60,000 images, ImageNet's 224 pixels, a 2,048-token
prompt); a CPU runtime, Colab's 2 vCPUs included, runs the same experiment at sizes that fit in a lesson's minute.
Every module that sizes an experiment by device reads `sized` (tests/test_imports.py: no other module picks sizes by
device type), so the GPU's and the CPU's sizes of one experiment are read side by side, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..llm.llm_memory import ModelShape


@dataclass(frozen=True)
class LadderSize:
    """Problem sizes by device: every rung trains ``epochs`` epochs; the CPU ladder fits in a lesson's minute."""

    epochs: int
    batch_size: int
    large_batch: int
    width: int  # speed_net's width
    train_images: int  # images per epoch when the data set is a small offline fallback
    speedrun_epochs: int  # `speedrun`'s full length (the GPU figure aims at 93% on CIFAR-10; not yet measured)


@dataclass(frozen=True)
class Sizes:
    """One experiment's sizes on a GPU and on a CPU runtime, and why they differ."""

    gpu: object
    cpu: object
    why: str


SIZES: dict[str, Sizes] = {
    "epoch_samples": Sizes(
        60_000, 12_000, "the loader experiments' epoch: FashionMNIST's 60,000 images on a GPU, a fifth on a CPU"
    ),
    "step_repeats": Sizes(5, 3, "repeats of a workload's training step: a CPU step takes tens of milliseconds"),
    "matmul_sides": Sizes(
        (2048, 4096, 8192), (256, 512, 1024), "square matmuls whose peak is the device's: a GPU needs large ones"
    ),
    "image_folder": Sizes(
        (224, 342, 64),
        (64, 32, 32),
        "(image size, images per class, batch size): ImageNet's 224 and about a thousand images on a GPU; a CPU "
        "runtime times a small epoch at 64 pixels",
    ),
    "attention": Sizes((4096, 8, 64), (1024, 4, 64), "(tokens, heads, head size) of the attention comparison"),
    "decode": Sizes(
        (ModelShape("bench", 32_000, 512, 1408, layers=8, heads=8, kv_heads=2, head_dim=64), 8, 2048, 32),
        (ModelShape("bench", 2_000, 128, 352, layers=4, heads=4, kv_heads=2, head_dim=32), 4, 128, 16),
        "(decoder, batch, prompt tokens, new tokens) of the decode benchmark: a GPU decodes a long prompt",
    ),
    "speedrun_ladder": Sizes(
        LadderSize(epochs=5, batch_size=128, large_batch=512, width=64, train_images=50_000, speedrun_epochs=16),
        # A CPU's large batch is 64: at 128, the 1,000 images of the lesson's CPU ladder make 24 steps in 3 epochs,
        # too few for the one-cycle schedule (rungs 4 and 6 fell to about half rung 0's accuracy on digits).
        LadderSize(epochs=3, batch_size=32, large_batch=64, width=16, train_images=0, speedrun_epochs=3),
        "lesson 12's ladder: CIFAR-10 for 5 epochs a rung on a GPU; the CPU ladder fits in a lesson's minute",
    ),
}


def sized(name: str, device: str | torch.device):
    """The sizes of experiment ``name`` on ``device``: its GPU sizes on a CUDA device, else its CPU sizes."""
    if name not in SIZES:
        raise KeyError(f"No sizes named {name!r}; the experiments' sizes: {', '.join(SIZES)}.")
    sizes = SIZES[name]
    return sizes.gpu if torch.device(device).type == "cuda" else sizes.cpu
