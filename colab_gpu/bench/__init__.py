"""The bench: the course's experiments, each a ratio measured side by side in the same run, with its target.

``python -m colab_gpu bench`` runs `EXPERIMENTS`; a row the course promises a figure for on a GPU carries a
`Target` (why, and the bound). The rows come from `hardware` (lessons 02, 04, 06), `experiments` (the training
loop: 03, 05, 10, 11), `pipelines` (lessons 12 and 13), `transformers` (lesson 14) and `sharding` (lesson 15), which
call the same functions
the lessons call: lesson or bench -> experiment -> the primitives in colab_gpu/measure/timing.py. `output` writes the
rows (JSON for the GPU suite, markdown, a plot); `rows` defines them.

``import colab_gpu`` does not import this package: it is course tooling, and no library module imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .experiments import compile_rows, fit_vs_hand_loop, gpu_busy_row, resident_vs_dataloader, workers_sweep
from .hardware import amp_rows, cpu_vs_gpu_rows, host_to_device, matmul_rows
from .pipelines import finetune_epoch_row, ladder_row
from .rows import Row, Target, target_for
from .sharding import fsdp_memory_row, qlora_memory_row
from .transformers import attention_rows, generation_row


@dataclass(frozen=True)
class Experiment:
    """One bench entry: the function that measures its rows and the targets some of those rows carry."""

    run: Callable[[torch.device], Row | list[Row]]
    targets: dict[str, Target | tuple[Target, ...]] = field(default_factory=dict)  # per row: one, or one per GPU class


EXPERIMENTS: dict[str, Experiment] = {
    "matmul": Experiment(matmul_rows),
    "h2d": Experiment(host_to_device),
    # mlp_cpu_gpu has no target: lesson 03's MLP at batch 256 is launch-bound on a GPU (its row's gpu_busy on the H100:
    # reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2), so its ratio measures the host's kernel launches against
    # the CPU's math, not the GPU; its row names the regime it measured. The compute-bound MLP beside it asks the same
    # question of the GPU's arithmetic.
    "cpu_gpu": Experiment(
        cpu_vs_gpu_rows,
        {
            "cnn_cpu_gpu": Target(
                "conv training at least 10x this machine's CPU",
                at_least=10,
                reason="a GPU's reason to exist in this course: below 10x a learner is better off on the CPU runtime",
            ),
            "mlp_big_cpu_gpu": Target(
                "a compute-bound MLP trains at least 10x faster than on this machine's CPU",
                at_least=10,
                reason="69 GFLOP per step keeps any course GPU busy: the ratio is the two devices' fp32 arithmetic "
                "(a data-center GPU's fp32 matmul rate, the bench's matmul_fp32 row, against a few TFLOP/s on a "
                "16-core host; about 4.3 on a T4, not the spec sheet's 8.1 (prediction: t4 fp32_matmul), against "
                "Colab's 2 vCPUs)",
            ),
        },
    ),
    "amp": Experiment(
        amp_rows,
        {
            "amp": Target(
                "AMP trains the matmul-heavy MLP at least 2x faster than fp32",
                at_least=2,
                reason="tensor cores run 16-bit matmuls at 8-16x IEEE fp32; half of that survives a real step",
            ),
            "amp_peak": Target(
                "AMP MLP training reaches at least 50% of the measured half-precision matmul peak (sustained)",
                at_least=0.5,
                reason="a step is three large matmuls per layer: below 50% something "
                "other than the matmuls (casts, the optimizer, launches) dominates",
            ),
        },
    ),
    "workers": Experiment(workers_sweep),
    # The target is on delivery, the loaders alone: an epoch's gain is (load + train) / train, and the training step
    # costs the same behind either loader, so the epoch gain is bounded by the step's own cost (the H100's rows resident
    # and resident_epoch: reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2). resident_epoch reports that bound
    # beside the epoch gain.
    "resident": Experiment(
        resident_vs_dataloader,
        {
            "resident": Target(
                "a GPU-resident loader delivers batches at least 5x as fast as a default DataLoader",
                at_least=5,
                reason="a DataLoader makes 60,000 Python calls an epoch that a resident loader replaces by 235 slices",
            )
        },
    ),
    "gpu_busy": Experiment(gpu_busy_row),
    # Each compile target names the regime its mechanism needs, and its row reports the regime measured. The target was
    # on lesson 03's MLP at batch 256 until the H100 run measured it slower compiled than eager (lesson 11 in
    # reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-835455f). That step is launch-bound (mlp_cpu_gpu's gpu_busy) and has
    # nothing to fuse (eager already puts the bias in cuBLAS's addmm, Inductor leaves the matmuls to cuBLAS), while each
    # compiled call adds guard and wrapper work on the host.
    "compile": Experiment(
        compile_rows,
        {
            "compile": Target(
                "compiled training step of a GPU-bound residual MLP at least 1.3x eager, in the chosen precision",
                at_least=1.3,
                reason="each block's element-wise chains (LayerNorm, GELU, dropout, the residual add, autocast's "
                "casts, and their backward) are a dozen memory-bound kernels in eager mode; Inductor fuses them "
                "into a few that read and write memory once, about a third less traffic per step, while the "
                "matmuls stay in cuBLAS on both sides: below 1.3x the compile time is rarely repaid",
            ),
            "compile_graphs": Target(
                "reduce-overhead no slower than eager (>= 0.95x) on a launch-bound tiny model",
                at_least=0.95,
                reason="CUDA graphs replay the compiled model's forward and backward from one launch each, but the "
                "loss, zero_grad, the autograd engine and the optimizer stay eager, and compile's wrapper costs about "
                "what the graphs save: lesson 11's launch-bound MLP gained nothing on the course's H100 (figure "
                "11.graphs_speedup_mlp in references.json). The promise is that it costs nothing; whole-step capture "
                "(forward, backward and a capturable optimizer in one graph) is the lever left to measure",
            ),
        },
    ),
    # The fastest rung, not the last: the last rung's speed net does more arithmetic per image than the lesson 04 CNN,
    # to buy it back in accuracy per epoch (time to accuracy), which the offline bench cannot measure (its digits reach
    # ~100% on every rung). On the H100 the fastest rung was rung 4, and the same code's ratio fell by half on another
    # host (lesson 12 in reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3 and in
    # reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2; measure/host.py).
    "speedrun": Experiment(
        ladder_row,
        {
            "speedrun": (
                Target(
                    "lesson 12's fastest rung trains at least 20x the images/s of its first on a data-center GPU",
                    at_least=20,
                    gpus=("H100", "A100"),
                    reason="rung 0 waits on per-image CPU transforms and on .item() every step; from rung 1 on every "
                    "rung is host-bound on these GPUs (the kernels of a small CNN take less time than launching them), "
                    "so the ratio measures the host as much as the GPU: it missed on a slower host "
                    "(reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2)",
                ),
                Target(
                    "lesson 12's fastest rung trains at least 5x the images/s of its first on a T4 "
                    "(prediction: t4 12.ladder_gain)",
                    at_least=5,
                    gpus=("T4",),
                    reason="no T4 run yet: rung 0's per-image transforms on Colab's 2 vCPUs and the fast rungs on the "
                    "T4's fp16 tensor cores, about an eighteenth of an H100's dense fp16 (prediction: t4 fp16_matmul), "
                    "predict 5-10x; below 5x the fast rungs are not feeding the T4",
                ),
            )
        },
    ),
    "finetune": Experiment(finetune_epoch_row),
    "attention": Experiment(
        attention_rows,
        {
            "attention": Target(
                "fused attention at 4096 tokens at least 1.5x faster than attention written by hand",
                at_least=1.5,
                reason="by hand, the 4096 x 4096 scores of every head go to memory and are read back twice; "
                "a fused kernel keeps its tiles of them on chip",
            ),
            "attention_memory": Target(
                "attention written by hand needs at least 8x the fused kernel's peak memory at 4096 tokens",
                at_least=8,
                reason="the score matrix grows with the square of the length (268 MB per layer in fp16 here); "
                "a fused kernel's memory grows with the length",
            ),
        },
    ),
    "generation": Experiment(generation_row),
    "fsdp_memory": Experiment(
        fsdp_memory_row,
        {
            "fsdp_memory": Target(
                "each of 2 FSDP2 processes holds at most about half what a DDP process holds (at least 1.8x less)",
                at_least=1.8,
                reason="FSDP2 shards every weight, gradient and AdamW moment over the processes where DDP copies them; "
                "two processes halve them, less a little padding of the shards",
            )
        },
    ),
    "qlora_memory": Experiment(
        qlora_memory_row,
        {
            "qlora_memory": Target(
                "a QLoRA step holds at least 3x less than full fine-tuning of the same model",
                at_least=3,
                reason="full fine-tuning with AdamW keeps 16 bytes per weight; QLoRA a 4-bit copy of the linear "
                "layers, the rest in 16 bits, and 16 bytes per adapter weight (about 1% of the model)",
            )
        },
    ),
    "fit": Experiment(
        fit_vs_hand_loop,
        {
            "fit": Target(
                "fit within 10% of a minimal hand loop",
                at_most=1.10,
                reason="the course's helpers must not cost what the lessons teach to save",
            )
        },
    ),
}
TARGETS: dict[str, tuple[Target, ...]] = {
    key: t if isinstance(t, tuple) else (t,) for e in EXPERIMENTS.values() for key, t in e.targets.items()
}


def run_benchmarks(
    device: torch.device,
    names: list[str] | None = None,
    on_experiment: Callable[[str, list[Row], float], None] | None = None,
) -> list[Row]:
    """Run the named benchmarks (all by default) on ``device``, printing each row as it lands.

    ``on_experiment(name, rows, seconds)`` is called after each experiment: the CLI writes bench.json there, so a
    run stopped part-way (the GPU suite's budget) keeps every experiment it finished."""
    unknown = sorted(set(names or []) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"Unknown benchmark(s) {unknown}; available: {sorted(EXPERIMENTS)}.")
    rows = []
    for name in names or list(EXPERIMENTS):
        start = time.perf_counter()
        result = EXPERIMENTS[name].run(device)
        measured = result if isinstance(result, list) else [result]
        for row in measured:
            target = target_for(TARGETS.get(row.key), _gpu_name(device))  # the promise travels with the row
            row.target = target.promise if target else ""
            row.met = target.met(row.ratio) if target and row.status == "ok" and device.type == "cuda" else None
            shown = f"{row.ratio} {row.unit}" if row.status == "ok" else f"skipped ({row.note})"
            print(f"{row.name} on {row.device}: {shown}", flush=True)
        rows.extend(measured)
        if on_experiment is not None:
            on_experiment(name, measured, time.perf_counter() - start)
    return rows


def _gpu_name(device: torch.device) -> str:
    """The GPU's name, which picks its targets ("" on a CPU, or where CUDA cannot say: the targets for every GPU)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return ""
    return torch.cuda.get_device_name(device)
