"""The levers of the regime rule (lesson 10): what helps a step in each regime and what cannot, each text with the
short names of the levers it speaks of (`LEVER_NAMES`: lesson 10's exercise answers with one).
`colab_gpu.measure.regimes` picks among them; the facts behind them are COURSE_DESIGN.md's "Measuring on a GPU".
"""

from __future__ import annotations

from ..hardware.device import COLAB_GPU_MENU
from .profile_events import (
    AUGMENTATION,
    CONVOLUTIONS,
    COPIES,
    ELEMENTWISE,
    GROWN,
    HIDDEN_INPUT,
    MATMUL,
    OPTIMIZER,
    REPEATED,
    TINY,
    WAIT_NAMES,
)

Lever = tuple[tuple[str, ...], str]  # the short names of the levers a text speaks of, and the text

# What helps in each regime, and what cannot (COURSE_DESIGN.md, "Measuring on a GPU"), each text with the short names
# of the levers it speaks of (lesson 10's exercise answers with one of them: `LEVER_NAMES`).
INPUT_LEVERS: tuple[Lever, ...] = (
    (("workers",), "DataLoader workers and pinned memory (lesson 05)"),
    (("data on the GPU",), "the whole data set on the GPU, decoded once, cg.DeviceLoader (lesson 05)"),
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
# A step without an optimizer's step (inference, generation) reads no training loss: its reads are its own loop's
# checks or a library's (generate() asks after each token whether every sequence has ended).
LIBRARY_SYNC_LEVER: Lever = (
    ("fewer syncs",),
    "fewer host syncs: each read of a result (yours, or a library's check such as generate()'s end-of-sequence test "
    "after every token) waits for the GPU; read results once at the end, or check every few steps",
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
)
# CUDA graphs are listed only where the course measured them to pay: for a training step whose optimizer stays
# eager, reduce-overhead graphs only the model's forward and backward (figure 11.graphs_speedup_mlp on the H100:
# no gain); whole-step capture is
# timed in lesson 11 on a GPU (figure "11.whole_step_graph"), and offered as a lever once a course run says it pays.
GRAPHS_EAGER_OPTIMIZER: Lever = (
    ("CUDA graphs",),
    'CUDA graphs with torch.compile(mode="reduce-overhead") (lesson 11): it replays the compiled model\'s forward '
    "and backward as one launch each, but the loss, the optimizer and the rest of the step stay eager: it gained "
    "nothing for a launch-bound MLP on the course's H100 (figure 11.graphs_speedup_mlp)",
)
LAUNCH_USELESS: tuple[Lever, ...] = (
    (
        ("fusion", "16-bit", "layouts"),
        "default torch.compile, AMP, TF32, channels_last and cudnn.benchmark: they make kernels cheaper, "
        "and this step does not wait on kernels",
    ),
    GRAPHS_EAGER_OPTIMIZER,
    (("workers", "data on the GPU"), "more DataLoader workers: the step does not wait for its data"),
)
# A GPU-bound step's levers by what its kernels are busy with (`colab_gpu.measure.profile_events.kernel_category`).
KERNEL_LEVERS: dict[str, tuple[Lever, ...]] = {
    MATMUL: (
        (
            ("16-bit",),
            "16-bit matmuls: AMP in bf16 or fp16, TF32 for fp32 matmuls on compute capability 8.0 and up (lesson 06)",
        ),
        (("layouts",), "layouts cuDNN's convolutions like: channels_last and cudnn.benchmark (lesson 04)"),
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
        (("fusion",), "fewer kernels: fusion with torch.compile (lesson 11)"),
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
    (("GPU runtime",), f"a GPU runtime (Colab: {COLAB_GPU_MENU})"),
    (
        ("bigger batch",),
        "a bigger batch: Python's and the operators' fixed cost per call is spread over more samples, and bigger "
        "matrices run the CPU's math libraries nearer their peak (lesson 10)",
    ),
    (
        ("fused optimizer",),
        "a foreach or fused optimizer, e.g. torch.optim.Adam(..., foreach=True): one operation over all "
        "parameters instead of one per tensor (on a CPU, foreach is not the default)",
    ),
)
CPU_USELESS: tuple[Lever, ...] = (
    (
        ("CUDA graphs", "16-bit", "layouts"),
        "GPU levers: pinned memory, CUDA graphs, cudnn.benchmark, TF32 and AMP (the CPU has no tensor cores to feed)",
    ),
)
# A GPU-bound inference step in tiny or element-wise kernels (a decode step: each token reads the weights and the
# whole cache, little math per byte) pays for moving fewer bytes and copying less per token (lesson 14).
DECODE_LEVERS: tuple[Lever, ...] = (
    (
        ("cache in place",),
        "a key/value cache allocated once and written in place (a slice assignment), not grown with torch.cat: "
        "each cat copies the whole cache every token (lesson 14)",
    ),
    (
        ("SDPA heads",),
        "scaled_dot_product_attention(..., enable_gqa=True): the kernel pairs each query head with its shared "
        "key/value head, where repeat_interleave copies the cache for every head every token (lesson 14)",
    ),
    (("16-bit",), "a 16-bit model and cache: each token reads half the bytes (lesson 14)"),
)
# Levers that need a part of the step (`colab_gpu.measure.profile_events.parts_found`), and what to say where it is
# missing.
NEEDS: dict[str, tuple[str, str]] = {
    "fused optimizer": (OPTIMIZER, "a fused or foreach optimizer: this step runs no optimizer step"),
    "layouts": (CONVOLUTIONS, "channels_last and cudnn.benchmark: this step runs no convolution"),
    "augment on the GPU": (AUGMENTATION, "augmentation on the GPU: this step's data phase augments nothing"),
    "cache in place": (GROWN, "a cache written in place: this step grows no tensor with torch.cat"),
    "SDPA heads": (REPEATED, "SDPA pairing the heads: this step repeats no key/value heads (repeat_interleave)"),
}
#: Every lever's short name, with what it does in a line: lesson 10's exercise prints it as a glossary (a learner in
#: a workshop has met two or three of them), and `cg.checks.regime` takes an answer by its name.
LEVER_MEANINGS = {
    "workers": "DataLoader workers prepare batches on other CPU cores (lesson 05)",
    "data on the GPU": "the data set decoded once and kept on the GPU: no loader, no copies (lesson 05)",
    "augment on the GPU": "augmentation per batch on the GPU, not per image on the CPU (lesson 05)",
    "fewer syncs": "no .item() or print(loss) per step: the CPU runs ahead of the GPU (lesson 03)",
    "bigger batch": "the same launches, each doing more work (lesson 07 finds the largest batch that fits)",
    "fused optimizer": "one optimizer kernel for all parameters, not several per tensor (fused=True)",
    "CUDA graphs": "a recorded sequence of kernels replayed with one launch (lesson 11)",
    "fusion": "torch.compile merges chains of element-wise kernels into one (lesson 11)",
    "16-bit": "AMP (bf16 or fp16) or TF32: tensor cores, half the bytes (lesson 06)",
    "layouts": "channels_last and cudnn.benchmark for convolutions (lesson 04)",
    "GPU runtime": "a GPU instead of the CPU (lesson 01)",
    "cache in place": "a key/value cache written in place, not grown with torch.cat (lesson 14)",
    "SDPA heads": "scaled_dot_product_attention pairs the heads, not repeat_interleave (lesson 14)",
}
LEVER_NAMES = tuple(LEVER_MEANINGS)
FEW_CORES = 2  # a host with this many cores or fewer (Colab's 2 vCPUs): more DataLoader workers pay about 1x there
FEW_CORES_FIRST = "data on the GPU"  # the input lever that pays first there (lesson 05)


def input_levers(cores: int | None) -> tuple[tuple[Lever, ...], str]:
    """The input-bound levers in the order they pay on a host of ``cores`` CPU cores (None: not recorded), and the
    reason for that order, said where it differs from the usual one."""
    if cores is None or cores > FEW_CORES:
        return INPUT_LEVERS, ""
    first = tuple(entry for entry in INPUT_LEVERS if FEW_CORES_FIRST in entry[0])
    rest = tuple(entry for entry in INPUT_LEVERS if FEW_CORES_FIRST not in entry[0])
    why = (
        f"; with {cores} CPU core(s) more workers gain at most {cores}x (on Colab's 2 vCPUs, two threads of one "
        "core, often about 1x: lesson 05), while the data decoded once and kept on the GPU removes the loading: it "
        "comes first"
    )
    return first + rest, why


def for_the_step(summary, levers: tuple[Lever, ...], useless: tuple[Lever, ...]):
    """``levers`` and ``useless`` fitted to the step the summary profiled (`ProfileSummary.found`): a lever that
    needs a part the step lacks (`NEEDS`) cannot help it, and reduce-overhead's CUDA graphs are said to be no help
    only to a training step (whole-step capture, lesson 11, has no course figure yet). A summary that did not record
    the step's parts (None) keeps both as they are."""
    found = summary.found
    if found is None:
        return levers, useless
    kept, missing = [], []
    for names, text in levers:
        lacking = [name for name in names if name in NEEDS and not _has(found, name)]
        missing += [((name,), NEEDS[name][1]) for name in lacking]
        if not lacking:
            kept.append((names, text))
    if inference(summary):
        useless = tuple(entry for entry in useless if entry is not GRAPHS_EAGER_OPTIMIZER)
    return tuple(kept), tuple(useless) + tuple(missing)


def inference(summary) -> bool:
    """Whether the profiled step runs no optimizer step (inference, generation), as far as the profile recorded."""
    return summary.found is not None and OPTIMIZER not in summary.found


def _has(found: tuple[str, ...], lever: str) -> bool:
    """Whether a step with the parts ``found`` has what ``lever`` needs: augmentation done in DataLoader workers
    is out of the profile's sight, so there it may be."""
    part = NEEDS[lever][0]
    return part in found or (part == AUGMENTATION and HIDDEN_INPUT in found)


def reads_text(summary, effect: str) -> str:
    """ ", and N host read(s) per step <effect>", naming the GradScaler's reads apart from the loop's own."""
    reads = summary.host_reads_per_step
    if reads < 1:
        return ""
    scaler = summary.scaler_reads_per_step
    whose = [f"{scaler:g} of them the GradScaler's inf/NaN check"] if scaler >= 1 else []
    whose += [f"{n:g} {WAIT_NAMES.get(name, name)}" for name, n in summary.host_waits.items()]
    whose_text = f" ({'; '.join(whose)})" if whose else ""
    return f"; its {reads:g} host read(s) per step{whose_text} {effect}"


def sync_levers(summary) -> tuple[Lever, ...]:
    """The lever for each kind of host read the step makes: the loop's own, the GradScaler's."""
    if summary.host_reads_per_step < 1:
        return ()
    own = summary.host_reads_per_step - summary.scaler_reads_per_step
    loops = LIBRARY_SYNC_LEVER if inference(summary) else SYNC_LEVER
    return ((loops,) if own >= 1 else ()) + ((SCALER_LEVER,) if summary.scaler_reads_per_step >= 1 else ())


def decode_levers(summary, kind: str | None, levers: tuple[Lever, ...]) -> tuple[Lever, ...]:
    """A GPU-bound step's kernel ``levers``, with `DECODE_LEVERS` first for an inference step (no optimizer step in
    its profile) busy in tiny or element-wise kernels; a lever of both keeps the decode text."""
    if not inference(summary) or kind not in (TINY, ELEMENTWISE):
        return levers
    decode = {name for names, _ in DECODE_LEVERS for name in names}
    return DECODE_LEVERS + tuple(entry for entry in levers if not decode.intersection(entry[0]))
