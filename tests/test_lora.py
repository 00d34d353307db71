"""colab_gpu.lora: low-rank adapters that change nothing at step 0, train a fraction, and merge exactly."""

import pytest
import torch
from torch import nn

from colab_gpu import llm_memory as mem
from colab_gpu.lora import LoRALinear, add_lora, merge_lora, trainable_parameters
from colab_gpu.tiny_lm import TinyDecoder

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


def test_bad_input_says_what_exists():
    with pytest.raises(ValueError, match="rank must be between 1 and min\\(in, out\\) = 4"):
        LoRALinear(nn.Linear(4, 8), rank=5)
    with pytest.raises(TypeError, match="LoRALinear wraps an nn.Linear, got Conv1d"):
        LoRALinear(nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="no nn.Linear named \\['query'\\].*named \\['down', 'gate', 'k', 'o'"):
        add_lora(language_model(), targets=("query",))
