"""The bench's rows for lesson 14 (transformers): fused attention against attention written by hand, and
generation with a KV cache against recomputing the whole sequence every step.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from ..capability import attention_backend, cudnn_attention_first
from ..device import synchronize
from ..llm_memory import ModelShape
from ..memory import measure_peak
from ..precision import choose_precision
from ..timing import interleaved_medians
from ..tiny_lm import TinyDecoder, generate
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
    length, heads, head_dim = (4096, 8, 64) if on_gpu else (1024, 4, 64)
    dtype = choose_precision(device).dtype or torch.float32
    q, k, v = (torch.randn(1, heads, length, head_dim, device=device, dtype=dtype) for _ in range(3))
    torch.testing.assert_close(
        _attention_by_hand(q, k, v), F.scaled_dot_product_attention(q, k, v), **_tolerance(dtype)
    )

    def timed(fn):
        def run():
            fn(q, k, v)
            synchronize(device)

        return run

    runs = {"by hand": timed(_attention_by_hand), "fused": timed(F.scaled_dot_product_attention)}
    for run in runs.values():
        run()  # warm-up: kernels loaded, memory reserved
    seconds = interleaved_medians(runs, repeat=10 if on_gpu else 5)
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
    }
    rows = [
        Row(
            "attention",
            f"attention at {length} tokens, fused vs by hand (time)",
            str(device),
            "ok",
            round(seconds["by hand"] / seconds["fused"], 2),
            "x",
            details,
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
    """Tokens per second of greedy generation with a KV cache against recomputing the whole sequence each step,
    same model, prompt and tokens (fp32: the cache changes the work, not the precision)."""
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    shape = (
        ModelShape("bench", 32_000, 512, 1408, layers=8, heads=8, kv_heads=2, head_dim=64)
        if on_gpu
        else ModelShape("bench", 2_000, 128, 352, layers=4, heads=4, kv_heads=2, head_dim=32)
    )
    prompt_tokens, new_tokens = (64, 256) if on_gpu else (16, 64)
    torch.manual_seed(0)
    model = TinyDecoder(shape).to(device).eval()
    prompt = torch.randint(0, shape.vocab, (1, prompt_tokens), device=device)
    outputs = {}

    def run(use_cache: bool):
        def go():
            outputs[use_cache] = generate(model, prompt, new_tokens, use_cache=use_cache)
            synchronize(device)

        return go

    runs = {"cached": run(True), "recomputed": run(False)}
    for go in runs.values():
        go()  # warm-up
    seconds = interleaved_medians(runs, repeat=3)
    same = torch.equal(outputs[True], outputs[False])
    return Row(
        "generation",
        f"generating {new_tokens} tokens, KV cache vs recomputing (tokens/s)",
        str(device),
        "ok",
        round(seconds["recomputed"] / seconds["cached"], 2),
        "x",
        {
            "cached_tokens_per_s": round(new_tokens / seconds["cached"], 1),
            "recomputed_tokens_per_s": round(new_tokens / seconds["recomputed"], 1),
            "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens,
            "parameters": shape.parameters,
            "same_tokens": same,
        },
        note="" if same else "the two ways generated different tokens",
    )
