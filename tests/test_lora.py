"""colab_gpu.llm.lora: low-rank adapters that change nothing at step 0, train a fraction, and merge exactly."""

import pytest
import torch
from torch import nn

from colab_gpu.llm import llm_memory as mem
from colab_gpu.llm.lora import LoRALinear, add_lora, merge_lora, trainable_parameters
from colab_gpu.llm.tiny_lm import TinyDecoder

SHAPE = mem.ModelShape("tiny", vocab=64, hidden=64, intermediate=96, layers=2, heads=4, kv_heads=2, head_dim=16)
TEXT = "the quick brown fox jumps over the lazy dog. " * 4


def language_model():
    torch.manual_seed(0)
    return TinyDecoder(SHAPE)


def test_step_zero_changes_nothing_and_only_the_adapters_train():
    model = language_model()
    tokens = torch.randint(0, SHAPE.vocab, (2, 12))
    before = model(tokens)[0]
    assert add_lora(model, rank=4) == 2 * SHAPE.layers  # q and v of every layer
    assert torch.equal(model(tokens)[0], before)  # B = 0: the same function
    per_layer = 4 * (64 + 64) + 4 * (64 + 32)  # q: 64 -> 64, v: 64 -> 2 heads x 16
    assert trainable_parameters(model) == SHAPE.layers * per_layer
    assert {n.rsplit(".", 1)[-1] for n, p in model.named_parameters() if p.requires_grad} == {"A", "B"}


def test_lora_training_lowers_the_loss_with_a_fraction_of_adams_memory():
    model = language_model()
    full_moments = 2 * mem.storage_bytes(model.parameters())  # what full fine-tuning's Adam would keep
    add_lora(model, rank=4)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    ids = torch.tensor([[ord(c) % SHAPE.vocab for c in TEXT]])
    losses = []
    for _ in range(30):
        logits, _ = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]  # 4.20 -> 3.64: only q and v adapt, the rest of the model is frozen
    moments = [t for state in optimizer.state.values() for k, t in state.items() if k != "step"]
    assert mem.storage_bytes(moments) * 10 < full_moments  # 2 x 4 bytes per trainable number, not per weight


def test_merging_gives_the_same_outputs_without_the_adapters():
    model = language_model()
    add_lora(model, rank=4)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, LoRALinear):
                module.B.normal_(0, 0.1)  # as if trained
    tokens = torch.randint(0, SHAPE.vocab, (2, 10))
    adapted = model(tokens)[0]
    assert merge_lora(model) == 2 * SHAPE.layers
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    torch.testing.assert_close(model(tokens)[0], adapted, rtol=1e-4, atol=1e-5)
    assert sum(p.numel() for p in model.parameters()) == SHAPE.parameters  # back to the base model's size


def test_an_fp16_layer_trains_with_adamw_with_fp32_adapters_and_returns_fp16():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(32, 24).to(torch.float16), rank=4)
    assert (layer.A.dtype, layer.B.dtype) == (torch.float32, torch.float32)  # master weights, as PEFT keeps them
    x = torch.randn(5, 32, dtype=torch.float16)
    optimizer = torch.optim.AdamW([layer.A, layer.B], lr=1e-3)
    for _ in range(3):
        out = layer(x)
        assert out.dtype == torch.float16  # the base layer's dtype, for the layers after it
        optimizer.zero_grad()
        out.float().square().mean().backward()
        optimizer.step()
    assert layer.A.isfinite().all() and layer.B.isfinite().all() and layer.B.abs().sum() > 0
    # the same step on adapters in the base's fp16: eps = 1e-8 rounds to 0 in fp16, and A's first gradient is 0
    half = LoRALinear(nn.Linear(32, 24).to(torch.float16), rank=4).to(torch.float16)
    optimizer = torch.optim.AdamW([half.A, half.B], lr=1e-3)
    half(x).float().square().mean().backward()
    optimizer.step()
    assert half.A.isnan().all()


def test_add_lora_takes_your_class_and_merge_lora_merges_it():
    class Yours(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base = base
            self.A = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
            self.B = nn.Parameter(torch.randn(base.out_features, rank) * 0.1)  # as if trained
            self.scale = alpha / rank

        def forward(self, x):
            return self.base(x) + self.scale * (x @ self.A.T @ self.B.T)

    model = language_model()
    assert add_lora(model, rank=4, layer_class=Yours) == 2 * SHAPE.layers
    assert sum(isinstance(m, Yours) for m in model.modules()) == 2 * SHAPE.layers
    assert trainable_parameters(model) == SHAPE.layers * (4 * (64 + 64) + 4 * (64 + 32))  # frozen but A and B
    tokens = torch.randint(0, SHAPE.vocab, (2, 10))
    adapted = model(tokens)[0]
    assert merge_lora(model) == 2 * SHAPE.layers
    torch.testing.assert_close(model(tokens)[0], adapted, rtol=1e-4, atol=1e-5)


def test_a_merged_16_bit_layer_keeps_its_dtype_and_computes_the_same():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(64, 48).to(torch.bfloat16), rank=4)
    with torch.no_grad():
        layer.B.normal_(0, 0.1)
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    merged = layer.merged()
    assert merged.weight.dtype == torch.bfloat16 and not merged.weight.requires_grad
    exact = nn.functional.linear(
        x.float(), layer.base.weight.float() + layer.scale * layer.B @ layer.A, layer.base.bias.float()
    )
    assert (merged(x).float() - exact).abs().max() < 0.05 * exact.abs().max()  # bf16: 3 significant digits


def test_bad_input_says_what_exists():
    with pytest.raises(ValueError, match="rank must be between 1 and min\\(in, out\\) = 4"):
        LoRALinear(nn.Linear(4, 8), rank=5)
    with pytest.raises(TypeError, match="LoRALinear wraps an nn.Linear, got Conv1d"):
        LoRALinear(nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="no nn.Linear named \\['query'\\].*named \\['down', 'gate', 'k', 'o'"):
        add_lora(language_model(), targets=("query",))


def test_add_lora_run_twice_says_so_instead_of_freezing_its_own_adapters():
    model = language_model()
    add_lora(model, rank=4)
    trainable = trainable_parameters(model)
    with pytest.raises(ValueError, match=r"has LoRA adapters already .*add_lora ran on it before \(a cell run twice"):
        add_lora(model, rank=4)
    assert trainable_parameters(model) == trainable  # the first call's adapters still train


def test_a_string_of_targets_is_refused_not_read_letter_by_letter():
    with pytest.raises(TypeError, match=r"targets='down' is a string.*\('down',\) with its comma"):
        add_lora(language_model(), targets=("down"))  # noqa: UP034 (the learner's missing comma)


def test_a_layer_class_whose_a_and_b_are_not_parameters_is_refused():
    class PlainTensors(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base, self.scale = base, alpha / rank
            self.A = torch.randn(rank, base.in_features) * 0.01  # not nn.Parameter: nothing to train
            self.B = torch.zeros(base.out_features, rank)

        def forward(self, x):
            return self.base(x) + (x @ self.A.T @ self.B.T) * self.scale

    with pytest.raises(
        ValueError, match=r"PlainTensors replaced 4 layer\(s\), but the model has nothing left to train"
    ):
        add_lora(language_model(), layer_class=PlainTensors)
