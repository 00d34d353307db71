"""The bench's rows for lesson 14 (transformers): fused attention against attention written by hand, and
generation with a KV cache against recomputing the whole sequence every step.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from ..experiments.sizes import sized
from ..hardware.capability import attention_backend, cudnn_attention_first
from ..llm.tiny_lm import TinyDecoder, generate
from ..measure.memory import measure_peak
from ..measure.timing import compare_steps
from ..train.precision import choose_precision
from .rows import Row


def _attention_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    # The textbook formula: the (length x length) score matrix is written to memory, then read back twice.
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return scores.softmax(dim=-1) @ v


def attention_rows(device: str | torch.device) -> list[Row]:
    """Time and peak memory of hand-written attention against ``scaled_dot_product_attention`` at one length, in
    the precision lesson 06 chooses (peak memory on a GPU only)."""
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    length, heads, head_dim = sized("attention", device)
    dtype = choose_precision(device).dtype or torch.float32
    q, k, v = (torch.randn(1, heads, length, head_dim, device=device, dtype=dtype) for _ in range(3))
    torch.testing.assert_close(
        _attention_by_hand(q, k, v), F.scaled_dot_product_attention(q, k, v), **_tolerance(dtype)
    )

    # ~0.1-1 ms a call on a GPU: the course's method for short steps, K calls per sample, the two sides interleaved
    timings = compare_steps(
        {"by hand": lambda: _attention_by_hand(q, k, v), "fused": lambda: F.scaled_dot_product_attention(q, k, v)},
        device=device,
    )
    seconds = {name: result.median for name, result in timings.items()}
    capability = torch.cuda.get_device_capability(device) if on_gpu else None
    cudnn_first = on_gpu and cudnn_attention_first(capability, torch.backends.cudnn.version(), torch.__version__)
    details = {
        "length": length,
        "heads": heads,
        "head_dim": head_dim,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": attention_backend(capability, dtype, head_dim, cudnn_first=cudnn_first, key_length=length),
        "by_hand_ms": round(seconds["by hand"] * 1e3, 3),
        "fused_ms": round(seconds["fused"] * 1e3, 3),
        "steps_per_sample": timings["fused"].steps_per_sample,
    }
    rows = [
        Row(
            key="attention",
            name=f"attention at {length} tokens, fused vs by hand (time)",
            device=str(device),
            status="ok",
            ratio=round(seconds["by hand"] / seconds["fused"], 2),
            unit="x",
            details=details,
        )
    ]
    peaks = {}
    for name, fn in (("by hand", _attention_by_hand), ("fused", F.scaled_dot_product_attention)):
        with measure_peak(device) as peak:
            fn(q, k, v)
        peaks[name] = peak.peak_mib
    name = f"attention at {length} tokens, by hand vs fused (peak memory)"
    if peaks["fused"] is None:
        rows.append(Row("attention_memory", name, str(device), "skipped", note="peak memory is measured on a GPU"))
    else:
        ratio = round(peaks["by hand"] / max(peaks["fused"], 1e-6), 1)
        memory = {"by_hand_mib": round(peaks["by hand"], 1), "fused_mib": round(peaks["fused"], 1)}
        rows.append(Row("attention_memory", name, str(device), "ok", ratio, "x", details | memory))
    return rows


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 2e-2, "atol": 2e-2} if dtype in (torch.float16, torch.bfloat16) else {"rtol": 1e-4, "atol": 1e-5}


def generation_row(device: str | torch.device) -> Row:
    """Greedy generation with a KV cache against recomputing the whole sequence every step: same model, prompts and
    tokens (fp32, so that both ways pick the same tokens: the cache changes the work, not the precision).

    The sizes make recomputing cost something: on a GPU a batch of 8 prompts of 2,048 tokens, so that each step
    without the cache runs the model on ~2,060 tokens per sequence (a GPU-bound step of matrix products), while a
    step with it runs on 1 token and waits on the host's kernel launches (a launch-bound step). Both ways compute
    the last position's logits only, the ones generation reads (a comparison that charges one side for logits
    nobody reads overstates the cache)."""
    device = torch.device(device)
    shape, batch, prompt_tokens, new_tokens = sized("decode", device)
    torch.manual_seed(0)
    model = TinyDecoder(shape).to(device).eval()
    prompts = torch.randint(0, shape.vocab, (batch, prompt_tokens), device=device)
    outputs = {}

    def run(use_cache: bool):
        return lambda: outputs.__setitem__(use_cache, generate(model, prompts, new_tokens, use_cache=use_cache))

    # seven interleaved samples of each way; K per side (in the details): 1 on a CPU, where a generation lasts well
    # over 20 ms, and on a GPU the floor of 8 while 8 generations take under a second (timing.steps_per_sample)
    timings = compare_steps({"cached": run(True), "recomputed": run(False)}, device=device, warmup=1)
    seconds = {name: result.median for name, result in timings.items()}
    same = torch.equal(outputs[True], outputs[False])
    # tokens the model runs on per step and sequence: 1 with the cache, the whole sequence so far without it
    work_ratio = prompt_tokens + (new_tokens - 1) / 2
    generated = batch * new_tokens
    return Row(
        key="generation",
        name=f"generating {new_tokens} tokens after {batch} prompts of {prompt_tokens}, KV cache vs recomputing (time)",
        device=str(device),
        status="ok",
        ratio=round(seconds["recomputed"] / seconds["cached"], 2),
        unit="x",
        details={
            "cached_tokens_per_s": round(generated / seconds["cached"], 1),
            "recomputed_tokens_per_s": round(generated / seconds["recomputed"], 1),
            "batch": batch,
            "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens,
            "work_ratio": round(work_ratio, 1),
            "dtype": "float32",
            "parameters": shape.parameters,
            "steps_per_sample": timings["cached"].steps_per_sample,
            "recomputed_steps_per_sample": timings["recomputed"].steps_per_sample,
            "same_tokens": same,
        },
        note="" if same else "the two ways generated different tokens",
    )
