"""colab_gpu.llm.llm_memory: the memory arithmetic of language models, checked against what real tensors occupy."""

import pytest
import torch
from torch import nn

from colab_gpu.llm import llm_memory as mem

TINY = mem.ModelShape("tiny", vocab=50, hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2, head_dim=8)


class Layer(nn.Module):
    """One Llama-style decoder layer's weights: q, k, v, o projections, a gated MLP, two RMSNorms."""

    def __init__(self, s: mem.ModelShape):
        super().__init__()
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        self.q = nn.Linear(s.hidden, q, bias=s.qkv_bias)
        self.k = nn.Linear(s.hidden, kv, bias=s.qkv_bias)
        self.v = nn.Linear(s.hidden, kv, bias=s.qkv_bias)
        self.o = nn.Linear(q, s.hidden, bias=False)
        self.gate, self.up = (nn.Linear(s.hidden, s.intermediate, bias=False) for _ in range(2))
        self.down = nn.Linear(s.intermediate, s.hidden, bias=False)
        self.norms = nn.ModuleList([nn.RMSNorm(s.hidden), nn.RMSNorm(s.hidden)])


class Decoder(nn.Module):
    def __init__(self, s: mem.ModelShape):
        super().__init__()
        self.embed = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList([Layer(s) for _ in range(s.layers)])
        self.norm = nn.RMSNorm(s.hidden)
        self.head = nn.Linear(s.hidden, s.vocab, bias=False)
        if s.tied_embeddings:
            self.head.weight = self.embed.weight  # one storage, counted once


def test_parameter_counts_are_the_model_cards():
    published = {"Qwen2.5-0.5B": 494_032_768, "Llama-3.2-1B": 1_235_814_400, "Llama-3.2-3B": 3_212_749_824}
    published["Mistral-7B"] = 7_241_732_096
    assert {m.name: m.parameters for m in mem.MODELS} == published


@pytest.mark.parametrize("shape", [TINY, mem.ModelShape("untied", 40, 16, 48, 3, 2, 1, 8, False, True)])
def test_weights_take_what_the_formula_says_in_every_format(shape):
    model = Decoder(shape)
    assert sum(p.numel() for p in model.parameters()) == shape.parameters  # tied weights listed once
    assert mem.storage_bytes(model.parameters()) == mem.weight_bytes(shape.parameters, "fp32")
    assert mem.storage_bytes(model.half().parameters()) == mem.weight_bytes(shape.parameters, "fp16")
    assert mem.storage_bytes(model.bfloat16().parameters()) == mem.weight_bytes(shape.parameters, "bf16")


def test_the_kv_cache_takes_what_the_formula_says():
    batch, tokens = 3, 17
    cache = [
        torch.zeros(batch, TINY.kv_heads, tokens, TINY.head_dim, dtype=torch.float16)
        for _layer in range(TINY.layers)
        for _keys_then_values in range(2)
    ]
    assert mem.storage_bytes(cache) == mem.kv_cache_bytes(TINY, tokens, batch=batch, fmt="fp16")
    assert mem.kv_cache_bytes(TINY, tokens, batch=batch, fmt="fp32") == 2 * mem.storage_bytes(cache)


@pytest.mark.parametrize("autocast", [False, True])
def test_training_with_adam_takes_16_bytes_per_parameter(autocast):
    torch.manual_seed(0)
    model = Decoder(TINY)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, TINY.vocab, (2, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        hidden = model.embed(tokens)
        for layer in model.layers:  # every weight takes part, so every one gets a gradient
            h = layer.norms[0](hidden)
            hidden = hidden + layer.o(layer.q(h)) + 0 * (layer.k(h).sum() + layer.v(h).sum())
            h = layer.norms[1](hidden)
            hidden = hidden + layer.down(nn.functional.silu(layer.gate(h)) * layer.up(h))
        hidden = model.norm(hidden)
        loss = nn.functional.cross_entropy(model.head(hidden).flatten(0, 1).float(), tokens.flatten())
    loss.backward()
    optimizer.step()
    moments = [t for state in optimizer.state.values() for k, t in state.items() if k != "step"]
    parts = mem.training_bytes(TINY.parameters)
    assert mem.storage_bytes(model.parameters()) == parts["weights"]  # fp32 under autocast too: the master copy
    assert mem.storage_bytes(p.grad for p in model.parameters()) == parts["gradients"]
    assert mem.storage_bytes(moments) == parts["adam moments"]
    assert sum(parts.values()) == mem.ADAM_TRAINING_BYTES_PER_PARAMETER * TINY.parameters


def test_what_fits_on_a_t4():
    llama_1b, mistral = mem.MODELS[1], mem.MODELS[3]
    t4 = mem.T4_BYTES  # 14.75 GiB, as PyTorch reports a T4
    assert mem.weight_bytes(mistral.parameters, "fp16") < t4 < mem.weight_bytes(mistral.parameters, "fp32")
    assert mem.context_that_fits(mistral, t4, fmt="fp32") == 0  # the weights alone do not fit
    tokens = mem.context_that_fits(llama_1b, t4, fmt="fp16")
    used = mem.weight_bytes(llama_1b.parameters, "fp16") + mem.kv_cache_bytes(llama_1b, tokens)
    assert used <= t4 < used + mem.kv_cache_bytes(llama_1b, 1)  # one more token would not fit
    assert mem.context_that_fits(llama_1b, t4, fmt="fp16", batch=8) == tokens // 8
    assert 16 * mem.MODELS[0].parameters < t4 < 16 * llama_1b.parameters  # full fine-tuning: 0.5B fits, 1B not


def test_bad_input_says_what_exists():
    with pytest.raises(ValueError, match="Unknown format 'fp8': the formats are fp32, fp16, bf16, int8, 4-bit"):
        mem.weight_bytes(10, "fp8")
    with pytest.raises(ValueError, match="tokens must be 0 or more and batch at least 1"):
        mem.kv_cache_bytes(TINY, -1)
    with pytest.raises(ValueError, match="parameters must be a count"):
        mem.weight_bytes(-5, "fp16")


def test_shared_storages_count_once():
    weight = torch.zeros(10, 10)
    assert mem.storage_bytes([weight, weight.t(), weight[:5]]) == 400


def test_lora_parameters_count_what_add_lora_adds_to_a_model_of_that_shape():
    import colab_gpu as cg

    torch.manual_seed(0)
    model = cg.TinyDecoder(TINY)
    before = sum(p.numel() for p in model.parameters())
    cg.add_lora(model, targets=mem.PROJECTIONS, rank=4)
    assert sum(p.numel() for p in model.parameters()) - before == mem.lora_parameters(TINY, 4)
    assert before == TINY.parameters


def test_the_finetuning_ledger_by_method():
    full = mem.finetune_bytes(TINY, "full")
    assert full == mem.training_bytes(TINY.parameters)
    adapters = mem.lora_parameters(TINY, 16)
    lora = mem.finetune_bytes(TINY, "lora")
    assert lora["frozen base (fp16)"] == 2 * TINY.parameters
    assert lora["adapter weights"] + lora["adapter gradients"] + lora["adapter adam moments"] == 16 * adapters
    qlora = mem.finetune_bytes(TINY, "qlora")
    linear = TINY.layers * sum(i * o for i, o in mem.projection_shapes(TINY).values())
    assert qlora["frozen linear layers (NF4)"] == pytest.approx(linear * 4.127 / 8)
    assert qlora["frozen rest (fp16)"] == 2 * (TINY.parameters - linear)
    mistral = mem.MODELS[-1]  # 7.24B: QLoRA's published ~4-5 GiB for a 7B model, before activations
    assert 4 * mem.GIB < sum(mem.finetune_bytes(mistral, "qlora").values()) < 5 * mem.GIB
    with pytest.raises(ValueError, match="method must be one of"):
        mem.finetune_bytes(TINY, "QLoRA")
    with pytest.raises(ValueError, match="targets must be among"):
        mem.lora_parameters(TINY, 8, targets=("q_proj",))
