"""A small decoder-only language model, built the way Llama is (lesson 14), and greedy generation with a KV cache.

`TinyDecoder` has Llama's parts at a size a CPU trains in seconds: rotary positions, grouped-query attention
through ``scaled_dot_product_attention``, a gated MLP, RMSNorm, and an output layer tied to the embedding, so its
`shape` is an `llm_memory.ModelShape` whose formulas hold for it exactly. Its forward takes and returns a KV
cache: the keys and values of the tokens seen so far, per layer. `generate` decodes greedily with or without it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .llm_memory import ModelShape

#: One layer's cached keys and values, each (batch, KV heads, tokens, head dim).
LayerCache = tuple[torch.Tensor, torch.Tensor]


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10_000.0) -> torch.Tensor:
    """Rotary position embedding: turn each pair of features of ``x`` (batch, heads, tokens, head dim) by an angle
    that grows with the token's position, so attention scores depend on how far apart two tokens are."""
    half = x.shape[-1] // 2
    frequencies = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions.float()[:, None] * frequencies  # (tokens, half)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


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

    def forward(self, x: torch.Tensor, cache: LayerCache | None) -> tuple[torch.Tensor, LayerCache]:
        batch, tokens, _ = x.shape
        seen = 0 if cache is None else cache[0].shape[2]
        positions = torch.arange(seen, seen + tokens, device=x.device)
        h = self.attention_norm(x)
        q = rotate(self.q(h).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2), positions)
        k = rotate(self.k(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2), positions)
        v = self.v(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None:  # the new tokens attend to every earlier one: keep their keys and values
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        group = self.heads // self.kv_heads  # query heads per key/value head
        keys, values = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        if seen == 0:
            out = F.scaled_dot_product_attention(q, keys, values, is_causal=True)
        else:  # new token i sees the cache and the new tokens up to itself
            mask = torch.ones(tokens, seen + tokens, dtype=torch.bool, device=x.device).tril(seen)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        x = x + self.o(out.transpose(1, 2).reshape(batch, tokens, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), (k, v)


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
        self, tokens: torch.Tensor, cache: list[LayerCache] | None = None
    ) -> tuple[torch.Tensor, list[LayerCache]]:
        """Logits (batch, tokens, vocab) for ``tokens`` (batch, tokens) following the ``cache``d ones, and the
        cache extended by them."""
        if tokens.dtype != torch.long or tokens.ndim != 2:
            raise ValueError(
                f"tokens must be a (batch, tokens) tensor of int64 ids, got {tuple(tokens.shape)} {tokens.dtype}."
            )
        if tokens.device != self.embed.weight.device:
            raise ValueError(
                f"tokens are on {tokens.device}, the model on {self.embed.weight.device}: create them there, or move "
                f"them with tokens.to('{self.embed.weight.device}')."
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.shape.vocab):
            raise ValueError(f"token ids must be in 0..{self.shape.vocab - 1}, got {tokens.min()}..{tokens.max()}.")
        x, new_cache = self.embed(tokens), []
        for i, layer in enumerate(self.layers):
            x, layer_cache = layer(x, None if cache is None else cache[i])
            new_cache.append(layer_cache)
        return self.norm(x) @ self.embed.weight.T, new_cache  # the output layer is the embedding, transposed


@torch.inference_mode()
def generate(model: TinyDecoder, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool = True) -> torch.Tensor:
    """``prompt`` (batch, tokens) followed by ``new_tokens`` tokens chosen greedily (the most likely each step).

    With the cache, each step runs the model on the one new token; without it, on the whole sequence so far: the
    same tokens, for work that grows with the square of the length. Taught in lesson 14."""
    if new_tokens < 0:
        raise ValueError(f"new_tokens must be 0 or more, got {new_tokens}.")
    tokens, cache = prompt, None
    step_input = prompt
    for _ in range(new_tokens):
        logits, new_cache = model(step_input, cache) if use_cache else model(tokens)
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
        if use_cache:
            cache, step_input = new_cache, next_token
    return tokens
