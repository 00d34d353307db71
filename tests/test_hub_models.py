"""colab_gpu.llm.hub_models and llm_memory's Hugging Face side: a Hub model loaded the way learners load one, a stated
offline stand-in, and the memory formulas checked on real transformers models (built here from configurations)."""

import importlib
import re

import pytest
import torch

from colab_gpu.llm import hub_models
from colab_gpu.llm import llm_memory as mem

transformers = pytest.importorskip("transformers")

TINY_LLAMA = {
    "model_type": "llama",
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "tie_word_embeddings": True,
}


def tiny_model(**overrides):
    config = transformers.AutoConfig.for_model(**{**TINY_LLAMA, **overrides})
    return transformers.AutoModelForCausalLM.from_config(config).eval()


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"model_type": "mistral", "tie_word_embeddings": False, "sliding_window": None},
        {"model_type": "qwen2"},  # a bias on q, k and v
        {"num_key_value_heads": 4, "head_dim": None},  # no GQA; head_dim from hidden / heads
    ],
)
def test_the_shape_read_from_a_config_counts_every_weight_of_the_real_model(overrides):
    model = tiny_model(**overrides)
    shape = mem.ModelShape.from_config(model.config)
    assert shape.parameters == sum(p.numel() for p in model.parameters())
    assert mem.storage_bytes(model.parameters()) == mem.weight_bytes(shape.parameters, "fp32")
    assert mem.storage_bytes(model.half().parameters()) == mem.weight_bytes(shape.parameters, "fp16")


@pytest.mark.parametrize("config", [{"model_type": "gpt2"}, {**TINY_LLAMA, "attention_bias": True}])
def test_a_config_whose_parts_the_shape_does_not_count_is_refused_with_what_to_do(config):
    with pytest.raises(ValueError, match=r"sum\(p.numel\(\) for p in model.parameters\(\)\)"):
        mem.ModelShape.from_config(transformers.AutoConfig.for_model(**config))


@pytest.mark.parametrize("batch,tokens", [(1, 5), (3, 9)])
def test_a_hugging_face_cache_takes_what_the_formula_says(batch, tokens):
    model = tiny_model().to(torch.bfloat16)
    shape = mem.ModelShape.from_config(model.config)
    with torch.no_grad():
        outputs = model(torch.randint(0, 64, (batch, tokens)), use_cache=True)
    expected = mem.kv_cache_bytes(shape, tokens, batch=batch, fmt="bf16")
    assert mem.storage_bytes(mem.cache_tensors(outputs)) == expected  # the outputs
    cache = outputs["cache"] if "cache" in outputs else outputs["past_key_values"]
    assert mem.storage_bytes(mem.cache_tensors(cache)) == expected  # the Cache itself
    assert len(mem.cache_tensors(cache)) == 2 * shape.layers
    older = {"past_key_values": cache}  # before transformers 5, the outputs named it past_key_values
    assert mem.storage_bytes(mem.cache_tensors(older)) == expected


def offline(monkeypatch, *, cached=False):
    monkeypatch.setattr(hub_models, "hub_reachable", lambda timeout_s=5.0: False)
    monkeypatch.setattr(hub_models, "in_hub_cache", lambda name: cached)
    monkeypatch.setitem(hub_models.OFFLINE_CONFIGS, "course/tiny-llama", TINY_LLAMA)


def refuse_downloads(monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("from_pretrained was called offline, with nothing in the cache")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_download)


def test_offline_the_same_architecture_stands_in_with_one_printed_line(monkeypatch, capsys):
    offline(monkeypatch)
    refuse_downloads(monkeypatch)  # offline transformers would retry for a minute: it must not be asked
    model, tokenizer, pretrained = hub_models.load_language_model(
        "course/tiny-llama", dtype=torch.float16, device="cpu"
    )
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "course/tiny-llama" in printed[0] and "no internet access" in printed[0]
    assert "random weights" in printed[0] and "token ids" in printed[0]
    assert (tokenizer, pretrained, model.training) == (None, False, False)
    assert {p.dtype for p in model.parameters()} == {torch.float16}
    assert mem.ModelShape.from_config(model.config).parameters == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_stand_in_is_built_in_its_dtype_never_in_fp32_first(monkeypatch, dtype):
    offline(monkeypatch)
    created = []  # every parameter ever created: a model built in fp32, then cast, creates fp32 ones first
    original = torch.nn.Parameter.__new__

    def recorded(cls, data=None, requires_grad=True):
        parameter = original(cls, data, requires_grad)
        created.append(parameter.dtype)
        return parameter

    monkeypatch.setattr(torch.nn.Parameter, "__new__", recorded)
    default = torch.get_default_dtype()
    model = hub_models.load_language_model("course/tiny-llama", dtype=dtype, device="cpu").model
    monkeypatch.undo()
    assert created and set(created) == {dtype} and {p.dtype for p in model.parameters()} == {dtype}
    assert torch.get_default_dtype() == default  # the default dtype is the caller's again


def test_offline_a_model_without_a_stand_in_is_refused_with_the_ones_there_are(monkeypatch):
    offline(monkeypatch)
    refuse_downloads(monkeypatch)
    with pytest.raises(RuntimeError) as error:
        hub_models.load_language_model("someone/no-such-model", dtype=torch.float32, device="cpu")
    message = str(error.value)
    assert "someone/no-such-model" in message and "HuggingFaceTB/SmolLM2-135M" in message
    assert "no internet access" in message and "Settings > Internet" in message


class FakeHub:
    """transformers' two from_pretrained calls, recorded; a model built from TINY_LLAMA's configuration."""

    def __init__(self, monkeypatch, failure: Exception | None = None):
        self.calls = []
        self.failure = failure
        monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", self.model)
        monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", self.tokenizer)

    def model(self, name, **kwargs):
        self.calls.append(("model", name, kwargs))
        if self.failure is not None:
            raise self.failure
        return tiny_model().to(kwargs["dtype"]).train()

    def tokenizer(self, name, **kwargs):
        self.calls.append(("tokenizer", name, kwargs))
        return "a tokenizer"


@pytest.mark.parametrize("accelerate", [True, False])
def test_online_the_model_loads_straight_to_the_device_in_its_dtype(monkeypatch, capsys, accelerate):
    monkeypatch.setattr(hub_models, "hub_reachable", lambda timeout_s=5.0: True)
    monkeypatch.setattr(hub_models, "accelerate_installed", lambda: accelerate)
    hub = FakeHub(monkeypatch)
    model, tokenizer, pretrained = hub_models.load_language_model("org/model", dtype=torch.bfloat16, device="cpu")
    assert (tokenizer, pretrained, model.training) == ("a tokenizer", True, False)
    assert capsys.readouterr().out == ""
    (kind, name, kwargs), (kind_2, _, kwargs_2) = hub.calls
    assert (kind, name, kind_2) == ("model", "org/model", "tokenizer")
    # device_map needs accelerate (transformers raises without it): then the 16-bit model moves after loading
    placed = {"device_map": torch.device("cpu")} if accelerate else {}
    assert kwargs == {"dtype": torch.bfloat16, "local_files_only": False, **placed}
    assert kwargs_2 == {"local_files_only": False}
    assert {p.device for p in model.parameters()} == {torch.device("cpu")}
    assert model.generation_config.pad_token_id == model.generation_config.eos_token_id  # generate stays quiet


def test_offline_a_cached_model_loads_from_the_cache_only(monkeypatch):
    offline(monkeypatch, cached=True)
    hub = FakeHub(monkeypatch)
    _, _, pretrained = hub_models.load_language_model("course/tiny-llama", dtype=torch.float32, device="cpu")
    assert pretrained and all(call[2]["local_files_only"] for call in hub.calls)


def test_a_failed_download_falls_back_and_says_why(monkeypatch, capsys):
    monkeypatch.setattr(hub_models, "hub_reachable", lambda timeout_s=5.0: True)
    monkeypatch.setitem(hub_models.OFFLINE_CONFIGS, "course/tiny-llama", TINY_LLAMA)
    FakeHub(monkeypatch, failure=OSError("Read timed out."))
    _, tokenizer, pretrained = hub_models.load_language_model("course/tiny-llama", dtype=torch.float32, device="cpu")
    assert (tokenizer, pretrained) == (None, False)
    assert "(the download timed out)" in capsys.readouterr().out


def test_the_offline_stand_in_is_the_published_model(monkeypatch):
    """SmolLM2-135M's configuration gives its model card's 134,515,008 parameters (counted, not built: 0.5 GB)."""
    config = transformers.AutoConfig.for_model(**hub_models.OFFLINE_CONFIGS["HuggingFaceTB/SmolLM2-135M"])
    assert mem.ModelShape.from_config(config).parameters == 134_515_008


@pytest.mark.parametrize("version", ["4.55.2", "4.9.0"])
def test_a_transformers_older_than_the_floor_is_named_with_the_fix(monkeypatch, version):
    # Loading a model replaces sys.modules["transformers"] (a lazy module): patch the one an import finds now
    monkeypatch.setattr(importlib.import_module("transformers"), "__version__", version)
    with pytest.raises(ImportError, match=rf"transformers {re.escape(version)} is installed; this needs 4\.56"):
        hub_models.transformers_module()


def test_a_sliding_window_cache_stops_growing_at_the_window_as_the_formula_says():
    """Issue 50: kv_cache_bytes counted every token for Mistral-7B v0.1 (a 4,096-token window); Hugging Face's cache
    keeps the last window - 1 tokens, a view of a window-sized tensor."""
    model = tiny_model(model_type="mistral", tie_word_embeddings=False, sliding_window=4)
    shape = mem.ModelShape.from_config(model.config)
    assert shape.sliding_window == 4
    assert mem.ModelShape.from_config(tiny_model(model_type="qwen2").config).sliding_window is None  # named, unused
    with torch.no_grad():
        outputs = model(torch.randint(0, 64, (2, 9)), use_cache=True)
        cache = outputs["cache"] if "cache" in outputs else outputs["past_key_values"]
        name = "cache" if "cache" in outputs else "past_key_values"  # its name from transformers 5
        for _ in range(3):  # decode past the window: the cache stays its size
            outputs = model(torch.randint(0, 64, (2, 1)), **{name: cache}, use_cache=True)
    assert mem.storage_bytes(mem.cache_tensors(cache)) == mem.kv_cache_bytes(shape, 12, batch=2, fmt="fp32")
    assert mem.kv_cache_bytes(shape, 12, batch=2) == mem.kv_cache_bytes(shape, 4, batch=2)  # the window's memory
