"""The levers of the regime rule (lesson 10): what helps a step in each regime and what cannot, each text with the
short names of the levers it speaks of (`LEVER_NAMES`: lesson 10's exercise answers with one). `colab_gpu.regimes`
picks among them; the facts behind them are COURSE_DESIGN.md's "Measuring on a GPU".
"""

from __future__ import annotations

from .profile_events import COPIES, ELEMENTWISE, MATMUL, TINY

Lever = tuple[tuple[str, ...], str]  # the short names of the levers a text speaks of, and the text

# What helps in each regime, and what cannot (COURSE_DESIGN.md, "Measuring on a GPU"), each text with the short names
# of the levers it speaks of (lesson 10's exercise answers with one of them: `LEVER_NAMES`).
INPUT_LEVERS: tuple[Lever, ...] = (
    (("workers",), "DataLoader workers and pinned memory (lesson 05)"),
    (("data on the GPU",), "the whole data set on the GPU, cg.DeviceLoader (lesson 05)"),
    (("augment on the GPU",), "augmentation per batch on the GPU (lesson 05)"),
)
INPUT_USELESS: tuple[Lever, ...] = (
    (
        ("16-bit", "fusion", "layouts", "CUDA graphs"),
        "a faster model: AMP, TF32, torch.compile, channels_last (the step waits for data, not the model)",
    ),
)
SYNC_LEVER: Lever = (
    ("fewer syncs",),
    "fewer host syncs: sum the loss on the device, read it once per epoch (lesson 03)",
)
SCALER_LEVER: Lever = (
    ("fused optimizer",),
    "an optimizer built with fused=True: the GradScaler then hands it the inf/NaN flag on the device instead of "
    "reading it every step (lesson 12)",
)
LAUNCH_LEVERS: tuple[Lever, ...] = (
    (("bigger batch",), "a bigger batch: the same launches do more work each (lesson 07 finds the largest that fits)"),
    (
        ("fused optimizer",),
        "a fused or foreach optimizer, e.g. torch.optim.Adam(..., fused=True): a few launches for all parameters "
        "(lesson 10)",
    ),
    (
        ("CUDA graphs",),
        'CUDA graphs of the whole step (lesson 11): torch.compile(mode="reduce-overhead") replays the compiled '
        "model's forward and backward as one launch each, but the loss, the optimizer and the rest of the step stay "
        "eager: on the course's H100 that measured 1.00x for a launch-bound MLP",
    ),
)
LAUNCH_USELESS: tuple[Lever, ...] = (
    (
        ("fusion", "16-bit", "layouts"),
        "default torch.compile, AMP, TF32, channels_last and cudnn.benchmark: they make kernels cheaper, "
        "and this step does not wait on kernels",
    ),
    (("workers", "data on the GPU"), "more DataLoader workers: the step does not wait for its data"),
)
# A GPU-bound step's levers by what its kernels are busy with (`colab_gpu.profile_events.kernel_category`).
KERNEL_LEVERS: dict[str, tuple[Lever, ...]] = {
    MATMUL: (
        (
            ("16-bit",),
            "16-bit matmuls: AMP in bf16 or fp16, TF32 for fp32 matmuls on compute capability 8.0 and up (lesson 06)",
        ),
        (
            ("layouts",),
            "layouts the tensor cores like: channels_last and cudnn.benchmark for convolutions (lesson 04), sizes in "
            "multiples of 8",
        ),
    ),
    ELEMENTWISE: (
        (("fusion",), "fusion: default torch.compile fuses chains of element-wise kernels into one (lesson 11)"),
        (("16-bit",), "16-bit tensors (AMP, lesson 06): each element-wise kernel moves half the bytes"),
        (
            ("fused optimizer",),
            "a fused optimizer (fused=True): one kernel per update for all parameters, not several per tensor",
        ),
    ),
    TINY: (
        (
            ("bigger batch",),
            "more work per kernel: a bigger batch (lesson 07 finds the largest that fits), more sequences at once",
        ),
        (
            ("fusion", "CUDA graphs"),
            "fewer kernels: fusion with torch.compile (lesson 11); CUDA graphs also remove the gaps between them",
        ),
    ),
    COPIES: ((("data on the GPU",), "pinned memory and non_blocking copies, or the data kept on the GPU (lesson 05)"),),
}
KERNEL_USELESS: dict[str, tuple[Lever, ...]] = {
    MATMUL: (
        (("fusion",), "fusion (default torch.compile): matmuls and convolutions already run in cuBLAS and cuDNN"),
        (("CUDA graphs",), "CUDA graphs: the launches already hide behind busy kernels"),
    ),
    ELEMENTWISE: ((("CUDA graphs",), "CUDA graphs: the launches already hide behind busy kernels"),),
    TINY: (
        (("layouts",), "TF32 and channels_last: they speed up big matmuls and convolutions, not kernels this short"),
    ),
    COPIES: ((("16-bit", "fusion", "layouts"), "a faster model: the copies, not the kernels, fill the GPU's time"),),
}
GPU_USELESS: tuple[Lever, ...] = ((("workers",), "more DataLoader workers: the data is not what the step waits for"),)
CPU_LEVERS: tuple[Lever, ...] = (
    (("GPU runtime",), "a GPU runtime (Colab: Runtime > Change runtime type > T4 GPU)"),
    (("less work",), "less work per step: a smaller model, smaller inputs"),
)
CPU_USELESS: tuple[Lever, ...] = (
    (
        ("CUDA graphs", "16-bit", "layouts"),
        "GPU levers: pinned memory, CUDA graphs, cudnn.benchmark, TF32 and AMP (the CPU has no tensor cores to feed)",
    ),
)
#: Every lever's short name, as lesson 10's exercise (`cg.checks.regime`) takes an answer.
LEVER_NAMES = (
    "workers",
    "data on the GPU",
    "augment on the GPU",
    "fewer syncs",
    "bigger batch",
    "fused optimizer",
    "CUDA graphs",
    "fusion",
    "16-bit",
    "layouts",
    "GPU runtime",
    "less work",
)
