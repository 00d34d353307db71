"""A small decoder-only language model, built the way Llama is (lesson 14), and greedy generation with a KV cache.

`TinyDecoder` has Llama's parts at a size a CPU trains in seconds: rotary positions, grouped-query attention
through ``scaled_dot_product_attention``, a gated MLP, RMSNorm, and an output layer tied to the embedding, so its
`shape` is an `llm_memory.ModelShape` whose formulas hold for it exactly. Its forward takes and returns a KV
cache: the keys and values of the tokens seen so far, per layer. `generate` decodes greedily with or without it.

A generation step of a small model waits on the host, which launches one GPU kernel per operation, so the step does
each thing once: the rotary angles and the attention mask are built once per forward and shared by the layers (as
transformers' Llama does), the ids are read (a host-device synchronization) once per `generate`, not per token, and
generation asks for the logits of the last position only, the one it reads (nanoGPT's ``x[:, [-1], :]``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from ..hardware.capability import attention_backend, release_of
from ..hardware.device import checked_device
from .llm_memory import ModelShape

EFFICIENT_GQA_FROM = (2, 14)  # the first PyTorch whose memory-efficient attention takes fewer key/value heads

#: One layer's cached keys and values, each (batch, KV heads, tokens, head dim).
LayerCache = tuple[torch.Tensor, torch.Tensor]
#: Llama's rotary base (``rope_theta``): the slowest pair of features turns once every ~60,000 positions.
ROPE_BASE = 10_000.0


def rotary_angles(positions: torch.Tensor, head_dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos and sin, each (tokens, head_dim / 2), of the angles that rotary embedding turns each pair of features
    by: the angle grows with the token's position, at a different rate for each pair. Every layer uses the same
    ones, so `TinyDecoder` computes them once per forward."""
    half = head_dim // 2
    frequencies = ROPE_BASE ** (-torch.arange(half, device=positions.device, dtype=torch.float32) / half)
    angles = positions.float()[:, None] * frequencies  # (tokens, half), in fp32: a 16-bit angle loses its position
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn each pair of features of ``x`` (batch, heads, tokens, head dim) by its angle (`rotary_angles`), so that
    attention scores depend on how far apart two tokens are."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def sdpa_groups_heads(device: str | torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    """Whether the attention kernel picked on ``device`` (a name such as "cuda", checked as every helper checks a
    device) pairs query heads with fewer key/value heads itself: `kernel_groups_heads` for a device of this runtime."""
    return kernel_groups_heads(checked_device(device, "colab_gpu.llm.tiny_lm.sdpa_groups_heads"), dtype, head_dim)


@functools.cache
def kernel_groups_heads(device: torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    """Whether the kernel ``scaled_dot_product_attention`` picks here pairs several query heads with one key/value
    head itself (``enable_gqa=True``, torch 2.5+; the package needs 2.7).

    The CPU's flash kernel and the GPU's flash and cuDNN kernels do. The memory-efficient kernel, which a T4 and
    fp32 on any GPU run, refuses fewer key/value heads before PyTorch 2.14 (Colab's 2.11, Kaggle's 2.10), and the
    math kernel that PyTorch takes instead writes the whole score matrix: there `TinyDecoder` repeats the key/value
    heads first. From 2.14 it takes them (pytorch/pytorch#191085: ``check_grouped_query_attention`` in
    sdp_utils_cpp.h, read in the 2.14.0 wheel; not yet run on a GPU by the course). Elsewhere (ROCm, other
    devices) it repeats them too: that works with every kernel.
    """
    if device.type == "cpu":
        return True
    if device.type != "cuda" or torch.version.hip is not None:
        return False
    kernel = attention_backend(torch.cuda.get_device_capability(device), dtype, head_dim)
    return kernel == "flash" or (kernel == "efficient" and release_of(torch.__version__) >= EFFICIENT_GQA_FROM)


class StepConstants(NamedTuple):
    """What every layer of one forward shares, computed once by `TinyDecoder`."""

    cos: torch.Tensor  # rotary angles of the new tokens' positions, (tokens, head_dim / 2)
    sin: torch.Tensor
    is_causal: bool  # no cache: each token sees itself and the tokens before it
    mask: torch.Tensor | None  # several new tokens after a cache; one new token sees everything: no mask
    grouped: bool  # the kernel pairs query heads with key/value heads itself (`kernel_groups_heads`)


class DecoderLayer(nn.Module):
    """Attention (queries from every head, keys and values from fewer heads) then a gated MLP, each after an
    RMSNorm and added to its input."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, shape.head_dim
        q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        self.attention_norm, self.mlp_norm = nn.RMSNorm(shape.hidden), nn.RMSNorm(shape.hidden)
        self.q = nn.Linear(shape.hidden, q, bias=False)
        self.k = nn.Linear(shape.hidden, kv, bias=False)
        self.v = nn.Linear(shape.hidden, kv, bias=False)
        self.o = nn.Linear(q, shape.hidden, bias=False)
        self.gate = nn.Linear(shape.hidden, shape.intermediate, bias=False)
        self.up = nn.Linear(shape.hidden, shape.intermediate, bias=False)
        self.down = nn.Linear(shape.intermediate, shape.hidden, bias=False)

    def forward(
        self, x: torch.Tensor, cache: LayerCache | None, step: StepConstants
    ) -> tuple[torch.Tensor, LayerCache]:
        attended, cache = self.attention(self.attention_norm(x), cache, step)
        x = x + attended
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), cache

    def attention(
        self, h: torch.Tensor, cache: LayerCache | None, step: StepConstants
    ) -> tuple[torch.Tensor, LayerCache]:
        batch, tokens, _ = h.shape
        # (batch, tokens, heads x head_dim) -> (batch, heads, tokens, head_dim): one attention per head
        q = self.q(h).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, step.cos, step.sin), apply_rotary(k, step.cos, step.sin)
        if cache is not None:  # the new tokens attend to every earlier one: keep their keys and values
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        group = self.heads // self.kv_heads  # query heads per key/value head (query head i reads kv head i // group)
        if tokens == 1:
            # One new token: the `group` query heads of a key/value head are `group` queries of the same keys, with
            # no mask between them, so they go side by side as (batch, kv_heads, group, head_dim): no copy of the
            # cache, and every kernel takes it (transformers does the same)
            out = F.scaled_dot_product_attention(q.reshape(batch, self.kv_heads, group, self.head_dim), k, v)
        elif step.grouped:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=step.mask, is_causal=step.is_causal, enable_gqa=group > 1
            )
        else:  # a kernel that needs as many key/value heads as query heads: a copy of them, for this step only
            keys, values = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=step.mask, is_causal=step.is_causal)
        # (batch, heads, tokens, head_dim) -> (batch, tokens, heads x head_dim), the output projection's input
        return self.o(out.reshape(batch, self.heads, tokens, self.head_dim).transpose(1, 2).flatten(2)), (k, v)


class TinyDecoder(nn.Module):
    """A decoder-only language model of ``shape`` (tied embeddings, no biases): tokens in, next-token logits out.
    Taught in lesson 14."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        if not shape.tied_embeddings or shape.qkv_bias or shape.heads % shape.kv_heads or shape.head_dim % 2:
            raise ValueError(
                f"TinyDecoder builds tied embeddings without biases, heads a multiple of kv_heads and an even "
                f"head_dim; {shape} is not that: adjust those fields."
            )
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab, shape.hidden)
        nn.init.normal_(self.embed.weight, std=0.02)  # Llama's initializer_range: logits start near uniform
        self.layers = nn.ModuleList(DecoderLayer(shape) for _ in range(shape.layers))
        self.norm = nn.RMSNorm(shape.hidden)

    def forward(
        self, tokens: torch.Tensor, cache: list[LayerCache] | None = None, *, last_only: bool = False
    ) -> tuple[torch.Tensor, list[LayerCache]]:
        """Logits (batch, tokens, vocab) for ``tokens`` (batch, tokens) following the ``cache``d ones, and the
        cache extended by them. ``last_only``: the last position's logits only, (batch, 1, vocab), all that
        generation reads; training needs them all (the default).

        Without a cache, the ids come from you: they are checked, which reads them back from the device (one
        host-device synchronization). With a cache, the new ids are the model's own choices and are not read."""
        self.check_tokens(tokens, read_ids=cache is None)
        return self.forward_unchecked(tokens, cache, last_only=last_only)

    def check_tokens(self, tokens: torch.Tensor, *, read_ids: bool = True) -> None:
        """Raise a clear error for ids that are not a (batch, tokens) int64 tensor on the model's device (free: it
        reads only shapes) or, with ``read_ids``, not in 0..vocab-1 (one read of the device: do it once per prompt,
        never once per generated token)."""
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(
                f"tokens must be a (batch, tokens) tensor of int64 ids, got a {type(tokens).__name__}: "
                f"torch.tensor([ids], device='{self.embed.weight.device}') makes one from a list of ids."
            )
        if tokens.dtype != torch.long or tokens.ndim != 2:
            raise ValueError(
                f"tokens must be a (batch, tokens) tensor of int64 ids, got {tuple(tokens.shape)} {tokens.dtype}."
            )
        if tokens.device != self.embed.weight.device:
            raise ValueError(
                f"tokens are on {tokens.device}, the model on {self.embed.weight.device}: create them there, or move "
                f"them with tokens.to('{self.embed.weight.device}')."
            )
        if read_ids and tokens.numel():
            low, high = torch.aminmax(tokens)
            if (low < 0) | (high >= self.shape.vocab):  # one host read; an id out of range stops a GPU for good
                raise ValueError(f"token ids must be in 0..{self.shape.vocab - 1}, got {low.item()}..{high.item()}.")

    def forward_unchecked(
        self, tokens: torch.Tensor, cache: list[LayerCache] | None = None, *, last_only: bool = False
    ) -> tuple[torch.Tensor, list[LayerCache]]:
        """`forward` without reading the ids: for loops that checked them once (`generate`)."""
        batch, length = tokens.shape
        seen = 0 if cache is None else cache[0][0].shape[2]
        x = self.embed(tokens)
        positions = torch.arange(seen, seen + length, device=tokens.device)
        cos, sin = rotary_angles(positions, self.shape.head_dim, x.dtype)
        mask = None
        if seen and length > 1:  # new token i sees the cache and the new tokens up to itself
            mask = torch.ones(length, seen + length, dtype=torch.bool, device=tokens.device).tril(seen)
        grouped = mask is None and kernel_groups_heads(x.device, x.dtype, self.shape.head_dim)
        step = StepConstants(cos, sin, is_causal=seen == 0 and length > 1, mask=mask, grouped=grouped)
        new_cache = []
        for i, layer in enumerate(self.layers):
            x, layer_cache = layer(x, None if cache is None else cache[i], step)
            new_cache.append(layer_cache)
        if last_only:
            x = x[:, -1:]  # (batch, 1, hidden): the output layer is the largest matrix product of a decode step
        return self.norm(x) @ self.embed.weight.T, new_cache  # the output layer is the embedding, transposed


@torch.inference_mode()
def generate(model: TinyDecoder, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool = True) -> torch.Tensor:
    """``prompt`` (batch, tokens) followed by ``new_tokens`` tokens chosen greedily (the most likely each step).

    With the cache, each step runs the model on the one new token; without it, on the whole sequence so far: the
    same tokens, for work that grows with the square of the length. Either way the prompt's ids are checked once,
    and each step computes the logits of the last position only. Taught in lesson 14."""
    if new_tokens < 0:
        raise ValueError(f"new_tokens must be 0 or more, got {new_tokens}.")
    model.check_tokens(prompt)
    if prompt.shape[1] == 0:  # nothing to continue: the first step would have no position to predict from
        raise ValueError(
            f"the prompt has no tokens (shape {tuple(prompt.shape)}): give at least one id per sequence, e.g. a "
            "beginning-of-text id."
        )  # the one read of the device: every later id is the model's own argmax
    tokens, cache, step_input = prompt, None, prompt
    for _ in range(new_tokens):
        if use_cache:
            logits, cache = model.forward_unchecked(step_input, cache, last_only=True)
        else:
            logits, _ = model.forward_unchecked(tokens, last_only=True)
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
        step_input = next_token
    return tokens
