"""The bench's rows on the training loop (lessons 03, 05, 10 and 11): fit against a hand loop, DataLoader workers,
a resident loader, the GPU-busy share of a profiled step, compiled against eager. Each returns rows, ratios measured
side by side in the same run.

They call the experiments and primitives the lessons call (05: ``cg.sweep_workers``, ``cg.time_loader_epochs``;
06: ``cg.workloads.time_step``; 10: ``cg.profile_training_steps``; 11: ``cg.workloads.time_compiled_step``), so a
bench figure and a lesson's figure are the same measurement. Rows that need a GPU are skipped, with the reason, on a
CPU runtime.
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from ..compiling import compile_support
from ..data import fake_image_data, load_digits
from ..feeding import epoch_samples, sweep_workers, time_loader_epochs, worker_counts
from ..fit_loop import fit
from ..loaders import DeviceLoader, EncodedImages
from ..models import mlp
from ..profiling import profile_training_steps, summarize_profile
from ..runtime import cpu_count
from ..timing import interleaved_medians
from ..workloads import (
    MLP_STEP,
    TINY_STEP,
    hand_loop_epoch,
    time_compiled_step,
    time_step,
)
from .rows import NEEDS_GPU, Row, skipped


def fit_vs_hand_loop(
    device: torch.device, *, samples: int | None = None, epochs: int = 5, batch_size: int = 256
) -> Row:
    """Seconds per epoch of `fit` and of the minimal hand loop, same model, data and loader."""
    device = torch.device(device)
    samples = samples or (60_000 if device.type == "cuda" else 12_000)
    loader = DataLoader(
        fake_image_data(samples, (1, 28, 28)),
        batch_size=batch_size,
        shuffle=True,
        pin_memory=device.type == "cuda",
        generator=torch.Generator().manual_seed(0),
    )
    torch.manual_seed(0)
    models = {name: mlp(784, hidden=512).to(device) for name in ("fit", "hand loop")}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-3) for name, m in models.items()}
    runs = {
        "hand loop": lambda: hand_loop_epoch(models["hand loop"], loader, optimizers["hand loop"], device),
        "fit": lambda: fit(
            models["fit"], loader, None, optimizers["fit"], device, epochs=1, progress=False, verbose=False
        ),
    }
    interleaved_medians(runs, repeat=1)  # warm-up: allocator, kernels, thread pools
    seconds = interleaved_medians(runs, repeat=epochs)
    overhead = seconds["fit"] / seconds["hand loop"]
    return Row(
        "fit",
        "fit vs hand loop (seconds per epoch)",
        str(device),
        "ok",
        round(overhead, 3),
        "x (lower is better)",
        {
            "fit_s": seconds["fit"],
            "hand_loop_s": seconds["hand loop"],
            "samples": samples,
            "batch_size": batch_size,
            "epochs_timed": epochs,
            "model": "MLP 784-512-512-10, Adam",
        },
        note=f"fit costs {100 * (overhead - 1):+.1f}% per epoch vs the hand loop",
    )


def workers_sweep(device: torch.device, images: int = 1024) -> Row:
    """Samples/s of a JPEG decode + augment pipeline for 0 .. CPU-count workers."""
    from torchvision.transforms import v2

    data = load_digits(image_size=32, channels=3)
    augment = v2.Compose(
        [
            v2.RandomResizedCrop(32, scale=(0.6, 1.0), antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ColorJitter(0.3, 0.3, 0.3),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )
    jpegs = EncodedImages(data.train_images[:images], data.train_labels[:images], augment)
    cores = cpu_count()
    rates = sweep_workers(jpegs, device, worker_counts(cores))
    best = max(rates, key=rates.get)
    return Row(
        "workers",
        "DataLoader workers, best vs 0 (JPEG decode + augment)",
        str(device),
        "ok",
        round(rates[best] / rates[0], 2),
        "x",
        {"samples_per_s": rates, "best_workers": best, "cores": cores},
    )


def resident_vs_dataloader(device: torch.device) -> Row:
    """One MLP epoch fed by a default DataLoader (0 workers, pageable) vs by a DeviceLoader."""
    n = epoch_samples(device)
    data = fake_image_data(n, (1, 28, 28))
    images, labels = data.tensors
    seconds = {
        name: result.median
        for name, result in time_loader_epochs(
            {
                "DataLoader": DataLoader(data, batch_size=256, shuffle=True),
                "DeviceLoader": DeviceLoader(images, labels, batch_size=256, device=device),
            },
            device,
        ).items()
    }
    return Row(
        "resident",
        "device-resident loader vs default DataLoader (MLP epoch)",
        str(device),
        "ok",
        round(seconds["DataLoader"] / seconds["DeviceLoader"], 2),
        "x",
        {"dataloader_s": seconds["DataLoader"], "deviceloader_s": seconds["DeviceLoader"], "samples": n},
    )


def gpu_busy_row(device: torch.device) -> Row:
    """Share of the step time the GPU was busy (lesson 10's profile), DeviceLoader vs default DataLoader."""
    if device.type != "cuda":
        return skipped("gpu_busy", "GPU-busy share of a training step, DeviceLoader vs DataLoader", device, NEEDS_GPU)
    data = fake_image_data(epoch_samples(device), (1, 28, 28))
    busy = {}
    for name, loader in (
        ("DataLoader", DataLoader(data, batch_size=256, shuffle=True)),
        ("DeviceLoader", DeviceLoader(*data.tensors, batch_size=256, device=device)),
    ):
        torch.manual_seed(0)
        model = mlp(784, hidden=512).to(device)
        prof = profile_training_steps(model, loader, torch.optim.Adam(model.parameters(), 1e-3), device, steps=10)
        busy[name] = summarize_profile(prof).gpu_busy
    return Row(
        "gpu_busy",
        "GPU-busy share of a training step, DeviceLoader vs DataLoader",
        str(device),
        "ok",
        round(busy["DeviceLoader"] / busy["DataLoader"], 2),
        "x",
        {f"{k}_busy": v for k, v in busy.items()},
    )


def compile_rows(device: torch.device) -> list[Row]:
    """Compiled vs eager training steps (lesson 11): the MLP in the default mode; on a GPU also a launch-bound
    tiny MLP with ``mode="reduce-overhead"`` (CUDA graphs: the model's forward and backward each replay from one
    launch; the loss and the SGD step stay eager)."""
    cases = {
        "compile": ("torch.compile vs eager, MLP training step", MLP_STEP, "default"),
        "compile_graphs": (
            "torch.compile reduce-overhead vs eager, tiny launch-bound MLP step",
            TINY_STEP,
            "reduce-overhead",
        ),
    }
    support, rows = compile_support(device), []
    for key, (name, workload, mode) in cases.items():
        if not support.ok or (mode == "reduce-overhead" and device.type != "cuda"):
            rows.append(skipped(key, name, device, support.reason if not support.ok else "CUDA graphs need a GPU"))
            continue
        eager, eager_peak = time_step(workload, device)
        compiled = time_compiled_step(workload, device, mode)
        rows.append(
            Row(
                key,
                name,
                str(device),
                "ok",
                round(eager.median / compiled.step.median, 2),
                "x",
                {
                    "eager_s": eager.median,
                    "compiled_s": compiled.step.median,
                    "mode": mode,
                    "first_call_s": compiled.first_call_s,
                    "eager_peak_mib": eager_peak,
                    "compiled_peak_mib": compiled.peak_mib,
                    "model": workload.name,
                },
                note=f"first call (compile) {compiled.first_call_s:.1f} s",
            )
        )
    return rows
