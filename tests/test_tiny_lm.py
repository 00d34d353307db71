"""colab_gpu.llm.tiny_lm: a Llama-shaped decoder whose KV cache changes the speed of generation, not its tokens."""

import pytest
import torch

from colab_gpu.llm import llm_memory as mem
from colab_gpu.llm import tiny_lm
from colab_gpu.llm.tiny_lm import TinyDecoder, generate

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


def test_every_way_of_pairing_query_heads_with_key_value_heads_gives_the_same_logits(model, monkeypatch):
    tokens = torch.randint(0, SHAPE.vocab, (2, 9))
    _, cache = model(tokens[:, :8])
    grouped = model(tokens)[0], model(tokens[:, 8:], cache)[0]  # enable_gqa (the CPU's flash kernel takes it)
    monkeypatch.setattr(tiny_lm, "kernel_groups_heads", lambda device, dtype, head_dim: False)
    repeated = model(tokens)[0], model(tokens[:, 8:], cache)[0]  # the heads repeated, for kernels that need it
    torch.testing.assert_close(repeated[0], grouped[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(repeated[1], grouped[1], rtol=1e-5, atol=1e-5)  # one new token: queries side by side
    torch.testing.assert_close(grouped[1], grouped[0][:, 8:], rtol=1e-5, atol=1e-5)


def test_the_kernel_pairs_the_heads_itself_only_where_it_can(monkeypatch):
    rule = tiny_lm.kernel_groups_heads.__wrapped__  # without the cache of answers, so the fake GPUs below count
    assert rule(torch.device("cpu"), torch.float32, 64)  # the CPU's flash kernel
    monkeypatch.setattr(torch.version, "hip", None)
    cuda = torch.device("cuda", 0)
    for version, capability, dtype, grouped in (
        ("2.11.0", (9, 0), torch.bfloat16, True),  # an H100 in bf16: flash (or cuDNN) takes fewer key/value heads
        ("2.11.0", (8, 9), torch.float16, True),  # an L4
        ("2.11.0", (9, 0), torch.float32, False),  # fp32 runs the memory-efficient kernel, which needs as many heads
        ("2.11.0", (7, 5), torch.float16, False),  # a T4 on Colab's PyTorch: the memory-efficient kernel too
        ("2.14.1", (7, 5), torch.float16, True),  # from 2.14 the memory-efficient kernel takes them (#191085)
    ):
        monkeypatch.setattr(torch, "__version__", version)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device, c=capability: c)
        assert rule(cuda, dtype, 64) is grouped, (version, capability, dtype)
    assert not rule(torch.device("meta"), torch.float32, 64)  # elsewhere: repeat them, which every kernel takes


def test_last_only_gives_the_last_positions_logits_and_generation_asks_for_nothing_else(model):
    tokens = torch.randint(0, SHAPE.vocab, (2, 7))
    full, _ = model(tokens)
    last, _ = model(tokens, last_only=True)
    assert last.shape == (2, 1, SHAPE.vocab)
    torch.testing.assert_close(last, full[:, -1:], rtol=1e-5, atol=1e-5)
    positions = []  # tokens per sequence that reach the output layer, at each step
    model.norm.register_forward_hook(lambda module, args, output: positions.append(args[0].shape[1]))
    generate(model, tokens, 5)
    generate(model, tokens, 5, use_cache=False)
    assert positions == [1] * 10


def test_the_rotary_angles_are_computed_once_per_forward_for_every_layer(model, monkeypatch):
    calls = []
    angles = tiny_lm.rotary_angles
    monkeypatch.setattr(tiny_lm, "rotary_angles", lambda *args: calls.append(args) or angles(*args))
    model(torch.randint(0, SHAPE.vocab, (1, 6)))
    assert len(calls) == 1 and SHAPE.layers == 2
    generate(model, torch.randint(0, SHAPE.vocab, (1, 6)), 4)
    assert len(calls) == 1 + 4  # one per step


def _host_reads(fn) -> int:
    # every read of a tensor's value on the host (.item(), bool(t), if t:) runs this op: on a GPU, a synchronization
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(event.name == "aten::_local_scalar_dense" for event in prof.events())


def test_generation_reads_the_ids_once_not_once_per_token(model):
    prompt = torch.randint(0, SHAPE.vocab, (2, 4))
    assert _host_reads(lambda: generate(model, prompt, 12)) == 1  # the prompt's ids, checked once
    assert _host_reads(lambda: generate(model, prompt, 12, use_cache=False)) == 1
    logits, cache = model(prompt)
    next_token = logits[:, -1:].argmax(dim=-1)
    assert _host_reads(lambda: model(next_token, cache)) == 0  # a decode step feeds the model its own choice


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
    with pytest.raises(ValueError, match="token ids must be in 0..63, got -1..3"):
        generate(model, torch.tensor([[3, -1]]), 4)
    with pytest.raises(ValueError, match="new_tokens must be 0 or more"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), -1)
    with pytest.raises(ValueError, match="heads a multiple of kv_heads"):
        TinyDecoder(mem.ModelShape("odd", 10, 12, 8, 1, heads=3, kv_heads=2, head_dim=4))
