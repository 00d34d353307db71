"""What a language model needs in GPU memory, computed before anything is loaded (lesson 14).

- Weights: parameters x bytes per value of the format (fp32 4, fp16/bf16 2, int8 1, 4-bit 0.5).
- The KV cache: 2 (keys and values) x layers x KV heads x head dim x tokens x batch x bytes per value.
- Training with Adam: weights, gradients and Adam's two moments in fp32, 16 bytes per parameter, under
  ``torch.autocast`` (which keeps fp32 weights: they are the "master weights" of mixed precision) as in fp32;
  activations and autocast's 16-bit weight copies come on top during a step.
`storage_bytes` measures what tensors really occupy, to check the arithmetic against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

from ..hardware.gpus import BY_LABEL
from ..hardware.units import GIB

#: A T4's memory as PyTorch reports it (the course's GPU table: 14.75 GiB of its 16 GB); the CUDA context takes a few
#: hundred MiB of that before the first tensor.
T4_BYTES = int(BY_LABEL["T4"].memory_gib * GIB)
#: What the CUDA context takes of a GPU's memory before the first tensor (its kernels, cuBLAS's and cuDNN's handles):
#: a few hundred MiB with recent PyTorch, loading modules lazily; about 400 MiB on a T4
#: (prediction: t4 14.cuda_context). Lesson 14 gives `context_that_fits` a T4's memory less this.
CUDA_CONTEXT_BYTES = 400 * 2**20
#: Bytes per stored value. 4-bit formats (NF4, GPTQ, AWQ) pack two values per byte, plus small per-block scales.
FORMATS = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "int8": 1.0, "4-bit": 0.5}
#: fp32 weights, fp32 gradients, Adam's exp_avg and exp_avg_sq in fp32.
ADAM_TRAINING_BYTES_PER_PARAMETER = 16
#: Bytes per weight of a frozen base stored in 4-bit NF4 with double quantization, its block scales included: 4.127
#: bits (QLoRA, Dettmers et al. 2023); bitsandbytes quantizes the linear layers only, the rest stays 16-bit.
NF4_BYTES = 4.127 / 8
#: The projections of a decoder layer, as `colab_gpu.llm.tiny_lm` and Llama-family models name them (q_proj, ...).
PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")
METHODS = ("full", "lora", "qlora")


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's sizes (its config.json): what its weights and its KV cache take."""

    name: str
    vocab: int
    hidden: int
    intermediate: int  # the gated MLP's width: gate, up and down projections
    layers: int
    heads: int
    kv_heads: int  # grouped-query attention: fewer key/value heads than query heads
    head_dim: int
    tied_embeddings: bool = True  # the output layer reuses the input embedding's weights
    qkv_bias: bool = False
    sliding_window: int | None = None  # each token attends to this many before it (Mistral-7B v0.1: 4,096)

    @property
    def parameters(self) -> int:
        """Every weight: embeddings, per layer the attention projections, the gated MLP and two RMSNorms, and the
        final norm (the count each model card publishes)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q + 2 * kv) + q * self.hidden + (q + 2 * kv if self.qkv_bias else 0)
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return embeddings + self.layers * layer + self.hidden

    @classmethod
    def from_config(cls, config) -> ModelShape:
        """The shape of a Hugging Face model from its configuration (``model.config``, or
        ``transformers.AutoConfig.from_pretrained(name)``, which downloads only config.json). The families whose parts
        this counts: Llama, Mistral and Qwen2 (and the many models built on them)."""
        family = getattr(config, "model_type", None)
        if family not in HUB_FAMILIES or getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
            raise ValueError(
                f"A {family!r} configuration: ModelShape counts the parts of {', '.join(HUB_FAMILIES)} models without "
                "biases outside Qwen2's q, k and v. For another model, count its weights with "
                "sum(p.numel() for p in model.parameters())."
            )
        heads = config.num_attention_heads
        return cls(
            name=getattr(config, "name_or_path", "") or family,
            vocab=config.vocab_size,
            hidden=config.hidden_size,
            intermediate=config.intermediate_size,
            layers=config.num_hidden_layers,
            heads=heads,
            kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            tied_embeddings=bool(config.tie_word_embeddings),
            qkv_bias=family == "qwen2",  # Qwen2 adds a bias to q, k and v; Llama and Mistral to nothing
            # Qwen2's configs name a window they do not use (use_sliding_window: false); Llama's name none
            sliding_window=getattr(config, "sliding_window", None)
            if getattr(config, "use_sliding_window", True)
            else None,
        )


#: The Hugging Face model types `ModelShape.from_config` reads: gated MLP, RMSNorm, no other biases.
HUB_FAMILIES = ("llama", "mistral", "qwen2")


#: Published configurations (each model's config.json on the Hugging Face Hub).
MODELS = (
    ModelShape("Qwen2.5-0.5B", 151_936, 896, 4864, layers=24, heads=14, kv_heads=2, head_dim=64, qkv_bias=True),
    ModelShape("Llama-3.2-1B", 128_256, 2048, 8192, layers=16, heads=32, kv_heads=8, head_dim=64),
    ModelShape("Llama-3.2-3B", 128_256, 3072, 8192, layers=28, heads=24, kv_heads=8, head_dim=128),
    ModelShape(
        "Mistral-7B", 32_000, 4096, 14_336, layers=32, heads=32, kv_heads=8, head_dim=128, tied_embeddings=False
    ),
)


def bytes_per_value(fmt: str) -> float:
    """Bytes one value takes in ``fmt`` ("fp32", "fp16", "bf16", "int8", "4-bit")."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown format {fmt!r}: the formats are {', '.join(FORMATS)}.")
    return FORMATS[fmt]


def weight_bytes(parameters: int, fmt: str) -> float:
    """Bytes of ``parameters`` weights stored in ``fmt``."""
    if parameters < 0:
        raise ValueError(f"parameters must be a count (0 or more), got {parameters}.")
    return parameters * bytes_per_value(fmt)


def kv_cache_bytes(model: ModelShape, tokens: int, *, batch: int = 1, fmt: str = "fp16") -> float:
    """Bytes of the keys and values cached for ``tokens`` tokens of each of ``batch`` sequences. A sliding-window
    model stops growing at its window: Hugging Face's cache (transformers' ``DynamicSlidingWindowLayer``) keeps the
    last ``sliding_window - 1`` tokens as a view of the window-sized tensor of its last step, so ``sliding_window``
    tokens of memory once decoding has passed the window (right after a longer prompt, until the first decoding
    step, the view still holds the whole prompt's)."""
    if tokens < 0 or batch < 1:
        raise ValueError(f"tokens must be 0 or more and batch at least 1, got tokens={tokens}, batch={batch}.")
    kept = min(tokens, model.sliding_window) if model.sliding_window else tokens
    return 2 * model.layers * model.kv_heads * model.head_dim * kept * batch * bytes_per_value(fmt)


def training_bytes(parameters: int) -> dict[str, float]:
    """Bytes of full training with Adam that last from step to step, by part: weights, gradients, the two moments.

    The same under ``torch.autocast``: its weights stay fp32, the master copy each step updates. On top, at the
    peak of a step: the activations, and under autocast the 16-bit copies of the matmuls' weights (2 bytes per
    such parameter: autocast caches them until its region ends, and autograd keeps them for the backward)."""
    return {"weights": 4.0 * parameters, "gradients": 4.0 * parameters, "adam moments": 8.0 * parameters}


def projection_shapes(model: ModelShape) -> dict[str, tuple[int, int]]:
    """(inputs, outputs) of each linear projection of one decoder layer, by its name in `PROJECTIONS`."""
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
    h, m = model.hidden, model.intermediate
    return {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h), "gate": (h, m), "up": (h, m), "down": (m, h)}


def lora_parameters(model: ModelShape, rank: int, targets: tuple[str, ...] = PROJECTIONS) -> int:
    """The adapters' parameters: ``rank`` x (inputs + outputs) for each target projection of every layer."""
    shapes = projection_shapes(model)
    unknown = sorted(set(targets) - set(shapes))
    if unknown or rank < 1:
        raise ValueError(f"targets must be among {PROJECTIONS} and rank at least 1, got {targets}, rank={rank}.")
    return model.layers * sum(rank * sum(shapes[name]) for name in targets)


def finetune_bytes(
    model: ModelShape, method: str, *, rank: int = 16, targets: tuple[str, ...] = PROJECTIONS
) -> dict[str, float]:
    """The memory of fine-tuning ``model`` with Adam that lasts from step to step, by part, before the activations:

    - "full": every weight trained (`training_bytes`: 16 bytes per parameter);
    - "lora": the base frozen in fp16 (2 bytes per weight, no gradients, no moments) and LoRA adapters of ``rank``
      on ``targets``, trained in fp32 (16 bytes per adapter parameter);
    - "qlora": the same adapters on a base whose linear layers are stored in 4-bit NF4 (`NF4_BYTES`), the
      embeddings and norms in fp16.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method == "full":
        return training_bytes(model.parameters)
    adapters = training_bytes(lora_parameters(model, rank, targets))
    trained = {f"adapter {part}": value for part, value in adapters.items()}
    if method == "lora":
        return {"frozen base (fp16)": weight_bytes(model.parameters, "fp16")} | trained
    linear = model.layers * sum(i * o for i, o in projection_shapes(model).values())
    return {
        "frozen linear layers (NF4)": NF4_BYTES * linear,
        "frozen rest (fp16)": weight_bytes(model.parameters - linear, "fp16"),
    } | trained


def context_that_fits(model: ModelShape, memory_bytes: float, *, fmt: str = "fp16", batch: int = 1) -> int:
    """How many tokens per sequence the KV cache can hold once the weights (in ``fmt``) take their share of
    ``memory_bytes``; 0 when the weights alone do not fit. (A sliding-window model caches at most its window: where
    more than the window fits, memory does not limit its context.)"""
    free = memory_bytes - weight_bytes(model.parameters, fmt)
    per_token = 2 * model.layers * model.kv_heads * model.head_dim * batch * bytes_per_value(fmt)
    return max(0, int(free // per_token))


def cache_tensors(cache) -> list[torch.Tensor]:
    """The keys and values a KV cache holds: `TinyDecoder`'s (a (keys, values) pair per layer), a Hugging Face cache
    (a ``Cache``, whose ``.layers`` hold them from transformers 4.56), or a Hugging Face model's outputs (its cache is
    ``outputs.cache``, called ``past_key_values`` before transformers 5)."""
    if isinstance(cache, Mapping):  # a ModelOutput is an OrderedDict of what the model returned
        cache = cache["cache"] if "cache" in cache else cache["past_key_values"]
    layers = cache.layers if hasattr(cache, "layers") else cache
    return [t for layer in layers for t in ((layer.keys, layer.values) if hasattr(layer, "keys") else layer)]


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes the tensors' storages really occupy, each shared storage counted once: what the arithmetic above
    predicts, measured on any device (a view or a tied weight takes no memory of its own)."""
    seen, total = set(), 0
    for tensor in tensors:
        storage = tensor.untyped_storage()
        key = (storage.data_ptr(), tensor.device)
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total
