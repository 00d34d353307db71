"""Lesson 14's LoRA exercise check: it passes the right layer and names each typical mistake."""

import math

import pytest
import torch
from torch import nn

from colab_gpu.checks.core import HINT, PASS
from colab_gpu.checks.transformers import lora_linear
from colab_gpu.lora import LoRALinear


class Starting(nn.Module):
    """The exercise's starting code: the base layer, nothing added yet."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base

    def forward(self, x):
        return self.base(x)


def lora(init_b, scale, freeze=True):
    class Attempt(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base = base.requires_grad_(not freeze)
            self.A = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
            self.B = nn.Parameter(init_b(base.out_features, rank))
            self.scale = scale(alpha, rank)

        def forward(self, x):
            return self.base(x) + self.scale * (x @ self.A.T @ self.B.T)

    return Attempt


def on_the_cpu():
    """A layer right in every way but one: its adapters are made on the CPU whatever the base layer's device."""

    class Attempt(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base = base.requires_grad_(False)
            self.A = nn.Parameter(torch.randn(rank, base.in_features, dtype=base.weight.dtype) * 0.01)
            self.B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=base.weight.dtype))
            self.scale = alpha / rank

        def forward(self, x):
            return self.base(x) + self.scale * (x @ self.A.T @ self.B.T)

    return Attempt


@pytest.mark.parametrize(
    "attempt, said",
    [
        (Starting, "two nn.Parameter attributes, self.A and self.B"),
        (lora(torch.randn, lambda a, r: a / r), "start B at zero"),
        (lora(torch.zeros, lambda a, r: 1.0), "check the order and the scale"),
        (lora(torch.zeros, lambda a, r: a / r, freeze=False), "the base layer still trains"),
        (lora(torch.zeros, lambda a, r: a / r), "create them with dtype=base.weight.dtype"),  # fp32 adapters only
        (on_the_cpu(), "created on the base layer's device (device=base.weight.device)"),
        (LoRALinear(nn.Linear(2, 2), 1), "pass your class (LoRALinear, not LoRALinear(...))"),
    ],
)
def test_typical_mistakes_get_their_hint(attempt, said, capsys):
    assert not lora_linear(attempt)
    out = capsys.readouterr().out
    assert out.startswith(HINT) and said in out


def test_the_right_layer_passes_and_its_saving_is_measured(capsys):
    assert lora_linear(LoRALinear, "cpu", rank=8)
    out = capsys.readouterr().out
    assert out.startswith(PASS) and "trains 32,768 of 4,194,304 numbers (0.8%)" in out and "128x less" in out


def test_a_layer_that_raises_gets_a_hint(capsys):
    class Broken(Starting):
        def __init__(self, base, rank, alpha):
            raise RuntimeError("not written yet")

    assert not lora_linear(Broken)
    assert "your layer raised RuntimeError: not written yet" in capsys.readouterr().out
