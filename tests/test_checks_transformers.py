"""Lesson 14's LoRA exercise check: it passes the right layer and names each typical mistake."""

import math

import pytest
import torch
from torch import nn

from colab_gpu.checks.core import HINT, PASS
from colab_gpu.checks.transformers import lora_linear
from colab_gpu.llm.lora import LoRALinear


class Starting(nn.Module):
    """The exercise's starting code: the base layer, nothing added yet."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base

    def forward(self, x):
        return self.base(x)


def lora(init_b, scale, freeze=True, init_a=None, cast=True, adapter_dtype=torch.float32):
    """A LoRA layer written one way or another: fp32 adapters cast to the input's dtype in forward, unless told."""

    class Attempt(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base = base.requires_grad_(not freeze)
            factory = {"device": base.weight.device, "dtype": adapter_dtype or base.weight.dtype}
            a = init_a(rank, base.in_features, **factory) if init_a else torch.randn(rank, base.in_features, **factory)
            self.A = nn.Parameter(a / math.sqrt(base.in_features))
            self.B = nn.Parameter(init_b(base.out_features, rank, **factory))
            self.scale = scale(alpha, rank)

        def forward(self, x):
            A, B = (self.A.to(x.dtype), self.B.to(x.dtype)) if cast else (self.A, self.B)
            return self.base(x) + self.scale * (x @ A.T @ B.T)

    return Attempt


def on_the_cpu():
    """A layer right in every way but one: its adapters are made on the CPU whatever the base layer's device."""

    class Attempt(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base = base.requires_grad_(False)
            self.A = nn.Parameter(torch.randn(rank, base.in_features) * 0.01)
            self.B = nn.Parameter(torch.zeros(base.out_features, rank))
            self.scale = alpha / rank

        def forward(self, x):
            return self.base(x) + self.scale * (x @ self.A.to(x.dtype).T @ self.B.to(x.dtype).T)

    return Attempt


class MovedAfterwards(nn.Module):
    """The .to() trap: nn.Parameter(...).to(device) is a plain tensor wherever .to() really moves (a GPU)."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(rank, base.in_features) * 0.01).to(base.weight.device)
        self.B = nn.Parameter(torch.zeros(base.out_features, rank)).to(base.weight.device)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.to(x.dtype).T @ self.B.to(x.dtype).T)


class ComputedInFp32(LoRALinear):
    """The update computed in fp32 and added as it is: the output of an fp16 layer becomes fp32."""

    def forward(self, x):
        return self.base(x) + (x.float() @ self.A.T @ self.B.T) * self.scale


class ScaleInline(LoRALinear):
    """Right, but the scale computed in forward and not kept: merging cannot read it."""

    def __init__(self, base, rank, alpha):
        super().__init__(base, rank, alpha)
        del self.scale
        self.factor = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.A.to(x.dtype).T @ self.B.to(x.dtype).T) * self.factor


class NotAModule:
    def __init__(self, base, rank, alpha):
        self.base = base


@pytest.mark.parametrize(
    "attempt, said",
    [
        (Starting, "two nn.Parameter attributes, self.A and self.B"),
        (NotAModule, "make your class an nn.Module"),
        (lora(torch.randn, lambda a, r: a / r), "start B at zero"),
        (lora(torch.zeros, lambda a, r: 1.0), "check the order and the scale"),
        (lora(torch.zeros, lambda a, r: a / r, freeze=False), "the base layer still trains"),
        (lora(torch.zeros, lambda a, r: a / r, init_a=torch.zeros), "A starts at zero"),
        (MovedAfterwards, ".to() on an nn.Parameter returns a plain tensor: pass device=/dtype= when you create it"),
        (ScaleInline, "self.scale = alpha / rank"),
        (on_the_cpu(), "created on the base layer's device (device=base.weight.device)"),
        (lora(torch.zeros, lambda a, r: a / r, cast=False), "Cast A and B to the input's dtype in forward"),
        (ComputedInFp32, "for an fp16 input your layer returns torch.float32"),
        (lora(torch.zeros, lambda a, r: a / r, adapter_dtype=torch.bfloat16), "keep them in fp32"),
        (LoRALinear(nn.Linear(2, 2), 1), "pass your class (LoRALinear, not LoRALinear(...))"),
    ],
)
def test_typical_mistakes_get_their_hint(attempt, said, capsys):
    assert not lora_linear(attempt)
    out = capsys.readouterr().out
    assert out.startswith(HINT) and said in out


def test_adapters_in_the_fp16_base_dtype_turn_nan_at_the_first_adamw_step_and_get_the_hint(capsys):
    old_recipe = lora(torch.zeros, lambda a, r: a / r, adapter_dtype=None)  # dtype=base.weight.dtype, as taught before
    layer = old_recipe(nn.Linear(32, 24).to(torch.float16), 4, 8.0)
    optimizer = torch.optim.AdamW([layer.A, layer.B], lr=1e-3)
    layer(torch.randn(5, 32, dtype=torch.float16)).float().square().mean().backward()
    optimizer.step()
    assert layer.A.isnan().all()  # A's gradient is 0 (B = 0) and eps = 1e-8 is 0 in fp16: 0/0
    assert not lora_linear(old_recipe)
    out = capsys.readouterr().out
    assert out.startswith(HINT) and "Adam's eps=1e-8 rounds to 0" in out and "dtype=torch.float32" in out


def test_a_layer_with_dropout_is_compared_in_eval_mode_and_passes(capsys):
    class WithDropout(LoRALinear):
        def __init__(self, base, rank, alpha):
            super().__init__(base, rank, alpha)
            self.dropout = nn.Dropout(0.5)

        def forward(self, x):
            update = self.dropout(x) @ self.A.to(x.dtype).T @ self.B.to(x.dtype).T
            return self.base(x) + update * self.scale

    assert lora_linear(WithDropout)
    assert capsys.readouterr().out.startswith(PASS)


def test_the_right_layer_passes_and_its_saving_is_measured(capsys):
    assert lora_linear(LoRALinear, "cpu", rank=8)
    out = capsys.readouterr().out
    assert out.startswith(PASS) and "trains 32,768 of 4,194,304 numbers (0.8%)" in out and "128x less" in out
    assert "an fp16 layer trains with AdamW" in out


def test_a_layer_that_raises_gets_a_hint(capsys):
    class Broken(Starting):
        def __init__(self, base, rank, alpha):
            raise RuntimeError("not written yet")

    assert not lora_linear(Broken)
    assert "your layer raised RuntimeError: not written yet" in capsys.readouterr().out


def test_an_error_while_measuring_is_a_hint_not_a_crash(capsys):
    class FailsWhenLarge(LoRALinear):
        def forward(self, x):
            if x.shape[-1] > 1000:  # as a GPU out of memory would, in the check's measurement on 2048 x 2048
                raise RuntimeError("out of memory")
            return super().forward(x)

    assert not lora_linear(FailsWhenLarge)
    assert "your layer raised RuntimeError: out of memory" in capsys.readouterr().out
