"""colab_gpu.tiny_lm: a Llama-shaped decoder whose KV cache changes the speed of generation, not its tokens."""

import pytest
import torch

from colab_gpu import llm_memory as mem
from colab_gpu.tiny_lm import TinyDecoder, generate

SHAPE = mem.ModelShape("tiny", vocab=64, hidden=32, intermediate=48, layers=2, heads=4, kv_heads=2, head_dim=8)


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TinyDecoder(SHAPE).eval()


def test_the_model_is_the_shape_the_memory_formulas_describe(model):
    assert sum(p.numel() for p in model.parameters()) == SHAPE.parameters
    assert mem.storage_bytes(model.parameters()) == mem.weight_bytes(SHAPE.parameters, "fp32")
    prompt = torch.randint(0, SHAPE.vocab, (3, 5))
    _, cache = model(prompt)
    tensors = [t for layer in cache for t in layer]
    assert mem.storage_bytes(tensors) == mem.kv_cache_bytes(SHAPE, 5, batch=3, fmt="fp32")


def test_the_cache_gives_the_same_logits_one_token_at_a_time(model):
    tokens = torch.randint(0, SHAPE.vocab, (2, 9))
    full, _ = model(tokens)
    _, cache = model(tokens[:, :4])
    stepped = []
    for i in range(4, 9):
        logits, cache = model(tokens[:, i : i + 1], cache)
        stepped.append(logits)
    torch.testing.assert_close(torch.cat(stepped, dim=1), full[:, 4:], rtol=1e-5, atol=1e-5)
    logits, _ = model(tokens[:, 6:], model(tokens[:, :6])[1])  # several new tokens after a cache: causal mask
    torch.testing.assert_close(logits, full[:, 6:], rtol=1e-5, atol=1e-5)


def test_generation_with_and_without_the_cache_gives_the_same_tokens(model):
    prompt = torch.randint(0, SHAPE.vocab, (2, 4))
    cached, uncached = generate(model, prompt, 12), generate(model, prompt, 12, use_cache=False)
    assert cached.shape == (2, 16) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, uncached)
    assert torch.equal(generate(model, prompt, 0), prompt)


def test_bad_input_gets_a_clear_error(model):
    with pytest.raises(ValueError, match="token ids must be in 0..63, got 0..64"):
        model(torch.tensor([[0, 64]]))
    with pytest.raises(ValueError, match="tokens must be a \\(batch, tokens\\) tensor of int64 ids"):
        model(torch.zeros(2, 3))
    with torch.device("meta"):
        elsewhere = TinyDecoder(model.shape)
    with pytest.raises(ValueError, match=r"tokens are on cpu, the model on meta: .* tokens.to\('meta'\)"):
        elsewhere(torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="new_tokens must be 0 or more"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), -1)
    with pytest.raises(ValueError, match="heads a multiple of kv_heads"):
        TinyDecoder(mem.ModelShape("odd", 10, 12, 8, 1, heads=3, kv_heads=2, head_dim=4))
