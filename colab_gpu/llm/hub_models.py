"""A pretrained language model from the Hugging Face Hub, loaded the way learners load one, with an offline fallback.

Online (Colab; Kaggle with Settings > Internet on) `load_language_model` is transformers' two calls::

    model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, device_map=device)
    tokenizer = AutoTokenizer.from_pretrained(name)

``dtype`` and ``device_map`` load each weight straight to the device in the 16-bit format: no fp32 copy of the model
in the runtime's RAM first, which is what crashes a Colab session on a large model. ``device_map`` needs the package
accelerate (preinstalled on Colab and Kaggle); without it the model loads in ``dtype`` and then moves to the device,
which is all a one-device model needs from it. A model already in the Hub's
cache loads offline too. Where it cannot be downloaded (CI, an offline laptop) the same architecture is built with
random weights and no tokenizer, and one printed line says so, as `finetune.load_pretrained` does for torchvision.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from typing import NamedTuple

import torch
from torch import nn

from ..data.downloads import download_problem, download_timeout, host_reachable
from ..hardware.capability import release_of
from ..hardware.device import checked_device

HUB_HOST = "huggingface.co"
#: The oldest transformers with ``dtype=`` (``torch_dtype=`` before; an unknown keyword is silently ignored there,
#: which would load fp32) and caches whose ``.layers`` hold the keys and values.
TRANSFORMERS_FLOOR = (4, 56)

#: Offline stand-ins: the architecture (config.json on the Hub) of each model a lesson loads.
OFFLINE_CONFIGS = {
    "HuggingFaceTB/SmolLM2-135M": {
        "model_type": "llama",
        "vocab_size": 49_152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100_000.0,
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
}


class LanguageModel(NamedTuple):
    model: nn.Module
    tokenizer: object | None  # None for the offline stand-in: it has no vocabulary to decode with
    pretrained: bool


def hub_reachable(timeout_s: float = 5.0) -> bool:
    """Whether this runtime can open a connection to the Hub (a failed attempt answers in seconds, where
    transformers would retry for about a minute)."""
    return host_reachable(HUB_HOST, timeout_s)


def transformers_module():
    """``transformers``, after checking that it is installed and new enough, with what to do if not."""
    try:
        import transformers
    except ImportError as err:
        raise ImportError(
            "Hugging Face transformers is not installed: it is preinstalled on Colab and Kaggle; elsewhere "
            "`pip install transformers` (it leaves torch as it is)."
        ) from err
    if release_of(transformers.__version__) < TRANSFORMERS_FLOOR:
        floor = ".".join(map(str, TRANSFORMERS_FLOOR))
        raise ImportError(
            f"transformers {transformers.__version__} is installed; this needs {floor} or newer (its `dtype=`): "
            "`pip install -U transformers`, then restart the runtime."
        )
    return transformers


def accelerate_installed() -> bool:
    """Whether accelerate is here: transformers refuses ``device_map`` without it."""
    return importlib.util.find_spec("accelerate") is not None


def ready_to_generate(model: nn.Module) -> nn.Module:
    """``model`` in eval mode, with a padding token for ``generate`` (the end-of-text one, as transformers picks
    itself, but without its warning at every call in versions 4.x)."""
    generation = model.generation_config
    if generation.pad_token_id is None and generation.eos_token_id is not None:
        eos = generation.eos_token_id
        generation.pad_token_id = eos[0] if isinstance(eos, (list, tuple)) else eos
    return model.eval()


def in_hub_cache(name: str) -> bool:
    """Whether ``name``'s config.json is in this machine's Hub cache (downloaded before: it loads offline)."""
    from huggingface_hub import try_to_load_from_cache  # a dependency of transformers

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def load_language_model(name: str, *, dtype: torch.dtype, device: torch.device | str) -> LanguageModel:
    """(model, tokenizer, True) for the Hub model ``name`` loaded on ``device`` in ``dtype``, in eval mode; or, where
    it cannot be downloaded, (the same architecture with random weights, None, False), with one printed line.
    Taught in lesson 14.

    Example: ``model, tokenizer, pretrained = load_language_model("HuggingFaceTB/SmolLM2-135M",
    dtype=torch.float16, device="cuda")``.
    """
    device = checked_device(device, "cg.load_language_model")
    transformers = transformers_module()
    online = hub_reachable()
    problem = "this runtime has no internet access"
    # Offline, transformers would retry the Hub for up to a minute (some lookups ignore local_files_only): ask only
    # when the Hub answers or the model is cached.
    if online or in_hub_cache(name):
        try:
            placement = {"device_map": device} if accelerate_installed() else {}
            with download_timeout():
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    name, dtype=dtype, local_files_only=not online, **placement
                )
                tokenizer = transformers.AutoTokenizer.from_pretrained(name, local_files_only=not online)
            model = model if placement else model.to(device)  # in dtype already: never an fp32 copy
            return LanguageModel(ready_to_generate(model), tokenizer, True)
        except OSError as err:  # a failed download, or no such model on the Hub
            problem = download_problem(err)
    if name not in OFFLINE_CONFIGS:
        raise RuntimeError(
            f"{name} could not be loaded ({problem}), and it has no offline stand-in here (those are: "
            f"{', '.join(OFFLINE_CONFIGS)}). Check the name on https://{HUB_HOST}, and run where the Hub is "
            "reachable (Colab, or Kaggle with Settings > Internet on)."
        )
    print(
        f"{name} could not be downloaded ({problem}): its architecture with random weights and no tokenizer "
        "stands in, so the text below is token ids, not words (the memory figures are the real model's)."
    )
    config = transformers.AutoConfig.for_model(**OFFLINE_CONFIGS[name])
    with built_in(dtype, device):  # each weight created on the device in dtype, as from_pretrained loads them
        model = transformers.AutoModelForCausalLM.from_config(config)
    return LanguageModel(ready_to_generate(model), None, False)


@contextlib.contextmanager
def built_in(dtype: torch.dtype, device: torch.device):
    """Create the tensors of a model built inside the block on ``device`` in ``dtype`` (torch's default device and
    floating-point dtype, restored after): no fp32 copy first, which would take twice a 16-bit model's memory.
    transformers' ``from_config(config, dtype=...)`` does the same with the dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(previous)


def pretrained_source(name: str, folder: str = "offline_models", *, layers: int = 4) -> str:
    """What to give ``from_pretrained``: ``name`` where the Hub answers or has cached it; otherwise a folder holding
    its offline stand-in (`OFFLINE_CONFIGS`, with ``layers`` decoder layers and random fp16 weights, saved as the Hub
    serves a model), with one printed line. So a lesson's own ``from_pretrained`` call, a quantization config
    included, runs unchanged offline. Taught in lesson 15.
    """
    if name not in OFFLINE_CONFIGS:
        raise ValueError(f"{name} has no offline stand-in; those are: {', '.join(OFFLINE_CONFIGS)}.")
    if layers < 1:
        raise ValueError(f"layers must be 1 or more, got {layers}.")
    if hub_reachable() or in_hub_cache(name):
        return name
    transformers = transformers_module()
    target = os.path.join(folder, name.replace("/", "--") + f"-{layers}-layers")
    if os.path.exists(target) and not os.path.exists(os.path.join(target, "config.json")):
        raise RuntimeError(
            f"{target}/ exists but holds no config.json: it is not a stand-in this function saved. Delete or rename "
            "it, then run this again."
        )
    if not os.path.exists(target):
        config = transformers.AutoConfig.for_model(**(OFFLINE_CONFIGS[name] | {"num_hidden_layers": layers}))
        torch.manual_seed(0)
        with built_in(torch.float16, torch.device("cpu")):
            model = transformers.AutoModelForCausalLM.from_config(config)
        partial = target + ".partial"  # written whole, then renamed: an interrupted save leaves no half folder
        shutil.rmtree(partial, ignore_errors=True)
        with quiet_progress(transformers):
            model.save_pretrained(partial)
        os.replace(partial, target)
    print(
        f"{name} could not be downloaded (this runtime has no internet access): its architecture with {layers} of "
        f"its {OFFLINE_CONFIGS[name]['num_hidden_layers']} layers and random weights stands in, read from "
        f"{target}/ by the same from_pretrained call."
    )
    return target


@contextlib.contextmanager
def quiet_progress(transformers):
    """transformers without its progress bars (they go to stderr, one per shard): a notebook's output stays clean.
    Left as they were after: a learner who turned them off keeps them off."""
    logging = transformers.utils.logging
    was_enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()
