"""The bench's rows on the training loop (lessons 03, 05, 10 and 11): fit against a hand loop, DataLoader workers,
a resident loader, the GPU-busy share of a profiled step, compiled against eager. Each returns rows, ratios measured
side by side in the same run.

They call the experiments and primitives the lessons call (05: ``cg.sweep_workers``, ``cg.time_loader_epochs``,
``cg.measure_loader``, ``cg.profile_step``; 06: ``cg.workloads.time_step``; 11: ``cg.workloads.compare_compiled``),
so a bench figure and a lesson's figure are the same measurement. Rows that need a GPU are skipped, with the reason,
on a CPU runtime.
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from ..data.datasets import fake_image_data, load_digits
from ..data.loaders import DeviceLoader, EncodedImages, suggest_num_workers
from ..experiments.feeding import (
    epoch_samples,
    measure_loader,
    sweep_batches,
    sweep_workers,
    time_loader_epochs,
    training_step,
    worker_counts,
)
from ..experiments.workloads import (
    TINY_STEP,
    compare_compiled,
    fusion_workload,
    hand_loop_epoch,
    matmul_peak,
    training_flops,
    workload_step,
)
from ..hardware.machine import cpu_count
from ..measure.profiling import profile_step
from ..measure.timing import interleaved_medians, typical
from ..train.compiling import compile_support
from ..train.fit import fit
from ..train.models import mlp
from ..train.precision import choose_precision
from .rows import NEEDS_GPU, Row, skipped


def fit_vs_hand_loop(
    device: torch.device, *, samples: int | None = None, epochs: int = 5, batch_size: int = 256
) -> Row:
    """Seconds per epoch of `fit` and of the minimal hand loop, same model, data and loader."""
    device = torch.device(device)
    samples = samples or epoch_samples(device)
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


def workers_sweep(device: torch.device, images: int = 1024, *, batch_size: int = 64) -> Row:
    """Samples/s of a JPEG decode + augment pipeline for 0 workers up to twice the cores, each count in its steady
    state over ten batches per worker (`sweep_workers`); the row's figure is the count `suggest_num_workers` picks
    from the sweep (where the plateau starts) against 0 workers, so the figure and the advice agree."""
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
    counts = worker_counts(cores)
    rates = sweep_workers(jpegs, device, counts, batch_size=batch_size)
    advice = suggest_num_workers(measured=rates)
    return Row(
        "workers",
        "DataLoader workers, the measured advice (up to the cores) vs 0 (JPEG decode + augment)",
        str(device),
        "ok",
        round(rates[advice.num_workers] / rates[0], 2),
        "x",
        {
            "samples_per_s": rates,
            "best_workers": advice.num_workers,
            "fastest_workers": max(rates, key=rates.get),
            "cores": cores,
            "batches_timed": {n: sweep_batches(n) for n in counts},
            "batch_size": batch_size,
        },
        note=str(advice),
    )


def resident_vs_dataloader(device: torch.device) -> list[Row]:
    """A default DataLoader (0 workers, pageable) against a DeviceLoader, lesson 05 §4's measurement: each loader
    alone (batches/s delivered), and one epoch of a fresh MLP fed by each. The epoch gain is bounded by the step's
    own cost, (load + train) / train, with train timed on one batch already on the device (no loading at all)."""
    n, batch_size = epoch_samples(device), 256
    data = fake_image_data(n, (1, 28, 28))
    images, labels = data.tensors
    loaders = {
        "DataLoader": DataLoader(data, batch_size=batch_size, shuffle=True),
        "DeviceLoader": DeviceLoader(images, labels, batch_size=batch_size, device=device),
    }
    batches = len(loaders["DeviceLoader"])
    rates = {name: typical([measure_loader(loader, device) for _ in range(3)]) for name, loader in loaders.items()}
    batches_per_s = {name: samples_per_s * batches / n for name, samples_per_s in rates.items()}
    one_batch = next(iter(loaders["DeviceLoader"]))
    timings = time_loader_epochs({**loaders, "steps alone": [one_batch] * batches}, device)
    seconds = {name: result.median for name, result in timings.items()}
    # (load + train) / train, from medians of interleaved epochs. It once took the smaller of the steps alone and the
    # resident epoch (two noisy timings of the same cost), so the gain could never exceed its bound, whatever the
    # noise: now both come from the same interleaved rounds, and the spread says how far they can be trusted.
    bound = seconds["DataLoader"] / seconds["steps alone"]
    spread = max(result.spread / result.median for result in timings.values())
    return [
        Row(
            "resident",
            "device-resident loader vs default DataLoader (batches/s, the loaders alone)",
            str(device),
            "ok",
            round(batches_per_s["DeviceLoader"] / batches_per_s["DataLoader"], 2),
            "x",
            {f"{name}_batches_per_s": rate for name, rate in batches_per_s.items()} | {"batch_size": batch_size},
        ),
        Row(
            "resident_epoch",
            "device-resident loader vs default DataLoader (MLP epoch)",
            str(device),
            "ok",
            round(seconds["DataLoader"] / seconds["DeviceLoader"], 2),
            "x",
            {
                "dataloader_s": seconds["DataLoader"],
                "deviceloader_s": seconds["DeviceLoader"],
                "steps_alone_s": seconds["steps alone"],
                "bound": round(bound, 2),
                "spread": round(spread, 3),
                "samples": n,
            },
            note=f"bounded by the step's own cost: (load + train) / train = {bound:.2f}x (medians of "
            f"{len(timings['DataLoader'].times)} interleaved epochs each, spread up to {spread:.0%} of a median)",
        ),
    ]


def gpu_busy_row(device: torch.device) -> Row:
    """Share of the step time the GPU was busy (lesson 10's profile), DeviceLoader vs default DataLoader, and the
    regime `profile_step` names for each (lesson 05 prints the same two lines)."""
    if device.type != "cuda":
        return skipped("gpu_busy", "GPU-busy share of a training step, DeviceLoader vs DataLoader", device, NEEDS_GPU)
    data = fake_image_data(epoch_samples(device), (1, 28, 28))
    summaries = {
        name: profile_step(training_step(loader, device), device, steps=10)
        for name, loader in (
            ("DataLoader", DataLoader(data, batch_size=256, shuffle=True)),
            ("DeviceLoader", DeviceLoader(*data.tensors, batch_size=256, device=device)),
        )
    }
    return Row(
        "gpu_busy",
        "GPU-busy share of a training step, DeviceLoader vs DataLoader",
        str(device),
        "ok",
        round(summaries["DeviceLoader"].gpu_busy / summaries["DataLoader"].gpu_busy, 2),
        "x",
        {f"{name}_busy": s.gpu_busy for name, s in summaries.items()}
        | {f"{name}_regime": s.regime.name for name, s in summaries.items()},
        note="; ".join(f"{name}: {s.regime}" for name, s in summaries.items()),
    )


def _peak_name(precision) -> str:
    """The name of the matmul peak `matmul_peak` measures for ``precision`` (a `Precision` or its name)."""
    name = getattr(precision, "name", precision)
    return "TF32" if name == "fp32" else name  # matmul_peak measures fp32 with TF32 on


def compile_rows(device: torch.device) -> list[Row]:
    """Compiled vs eager training steps (lesson 11), each row in the regime its claim needs, timed with
    ``compare_steps`` and named with the regime `profile_step` measured for the eager step here:

    - "compile": default mode on the GPU-bound residual MLP (`fusion_workload`, in `choose_precision`'s precision),
      whose element-wise chains Inductor fuses;
    - "compile_graphs": ``mode="reduce-overhead"`` (CUDA graphs: the model's forward and backward each replay from
      one launch; the loss and the SGD step stay eager) on the launch-bound tiny MLP, in float32; GPU only.
    """
    device = torch.device(device)
    cases = {
        "compile": (
            "torch.compile vs eager, GPU-bound residual MLP step (fusion)",
            fusion_workload(device),
            "default",
            choose_precision(device),
        ),
        "compile_graphs": (
            "torch.compile reduce-overhead vs eager, launch-bound tiny MLP step (CUDA graphs)",
            TINY_STEP,
            "reduce-overhead",
            "fp32",
        ),
    }
    support, rows = compile_support(device), []
    for key, (name, workload, mode, precision) in cases.items():
        if mode == "reduce-overhead" and device.type != "cuda":
            rows.append(skipped(key, name, device, f"CUDA graphs replay CUDA kernels: {NEEDS_GPU}"))
            continue
        comparison = compare_compiled(workload, device, (mode,), precision) if support else None
        if comparison is None or mode in comparison.failed:
            rows.append(skipped(key, name, device, comparison.failed[mode] if comparison else support.reason))
            continue
        regime = profile_step(
            workload_step(workload, device, precision),
            device,
            flops_per_step=training_flops(workload),
            peak_tflops=matmul_peak(device, precision),
            peak_precision=_peak_name(precision),
        ).regime
        eager, compiled = comparison.steps["eager"], comparison.steps[mode]
        rows.append(
            Row(
                key,
                name,
                str(device),
                "ok",
                round(comparison.speedup(mode), 2),
                "x",
                {
                    "eager_s": eager.median,
                    "compiled_s": compiled.median,
                    "steps_per_sample": eager.steps_per_sample,
                    "samples": len(eager.times),
                    "mode": mode,
                    "precision": comparison.precision,
                    "first_call_s": comparison.first_call_s[mode],
                    "eager_peak_mib": comparison.peak_mib["eager"],
                    "compiled_peak_mib": comparison.peak_mib[mode],
                    "model": workload.name,
                    "regime": regime.name,
                    "regime_reason": regime.reason,
                },
                note=f"measured {regime.name} here; K={eager.steps_per_sample} steps per sample; "
                f"first call (compile) {comparison.first_call_s[mode]:.1f} s",
            )
        )
    return rows
