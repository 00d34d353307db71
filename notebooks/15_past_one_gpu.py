# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 15 · When one GPU is not enough: fit a model that does not fit
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/15_past_one_gpu.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/15_past_one_gpu.ipynb)
#
# **What you will learn**
# - the memory ledger of a training step (weights, gradients, optimizer state, activations),
#   measured on a real step and checked against lesson 14's formulas, and the largest model
#   each way of fine-tuning fits on a T4;
# - the levers of one GPU, each measured in memory and time: activation checkpointing per
#   block, an optimizer with less state (Adafactor, 8-bit AdamW), a 4-bit base model with LoRA
#   adapters (QLoRA, with `bitsandbytes` and `peft`), and offloading to the CPU;
# - FSDP2 (`fully_shard`) on two processes launched with `torchrun`: each process holds half
#   the model, and training gives the same losses as one process; beside DDP, which copies it;
# - the engines that come next (Accelerate, DeepSpeed, `torchrun` across machines, Ray Train),
#   and which problem each solves.
#
# **Time:** 70 minutes. **Prerequisites:** lessons 07 (GPU memory, checkpointing), 08 (DDP and
# `torchrun`) and 14 (what a language model needs in memory, LoRA).
#
# The words host, device, kernel, CUDA, cuBLAS, cuDNN and compute capability: [lesson 01's
# glossary](01_enable_gpu_runtime.ipynb).

# %%
# @title Setup: colab_gpu 0.52.0, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys
import tempfile
from importlib import metadata

COLAB_GPU = "0.52.0"
TORCH_FLOOR = "2.7"  # the oldest torch the course is tested on
SOURCES = [f"colab-gpu=={COLAB_GPU}", f"git+https://github.com/colab-gpu-course/pytorch-gpus-colab@v{COLAB_GPU}"]
try:
    from colab_gpu import __version__ as found
except ImportError:
    found = None
everything = {d.metadata["Name"]: d.version for d in metadata.distributions()}
runtime = {name: everything[name] for name in ("torch", "torchvision") if name in everything}  # kept as they are
torch_found = runtime.get("torch")
if torch_found and [int(n) for n in torch_found.split(".")[:2]] < [int(n) for n in TORCH_FLOOR.split(".")]:
    raise RuntimeError(f"This runtime has torch {torch_found}; the course needs torch {TORCH_FLOOR} or newer, and "
                       "the setup cell never replaces a runtime's torch. Colab: Runtime > Change runtime type > "
                       "Runtime version: Latest. Elsewhere: install a newer torch with its torchvision (pytorch.org).")
source = None
if found != COLAB_GPU:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as keep:  # pip's constraints file
        keep.write("".join(f"{name}=={version}\n" for name, version in runtime.items()))
    errors = []
    for source in SOURCES:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", keep.name, source],
                             capture_output=True, text=True)
        if pip.returncode == 0:
            break
        errors.append(f"{source}: {pip.stderr.strip()[-800:]}")
    else:
        raise RuntimeError(f"pip could not install colab_gpu {COLAB_GPU} beside this runtime's {runtime}, which it "
                           "keeps (is this runtime online? On Kaggle: Settings > Internet):\n" + "\n".join(errors))
    for name in [m for m in sys.modules if m.partition(".")[0] == "colab_gpu"]:
        del sys.modules[name]  # another version was imported above: the import below loads this one
    importlib.invalidate_caches()
print(f"colab_gpu {COLAB_GPU}:", "already installed" if source is None else f"installed from {source}")

# %%
import torch

import colab_gpu as cg

# The course's error explainer: after an error its atlas knows (lesson 09), the cause and the fix.
# %load_ext colab_gpu

device = cg.get_device()
print(f"PyTorch {torch.__version__}, computing on: {device}, GPUs visible: {torch.cuda.device_count()}")

# %% [markdown]
# ## 1. The memory ledger of a training step
#
# A learner outgrows a free T4 in memory first: "CUDA out of memory" while fine-tuning a 1-7B
# model. Lesson 14 computed what a model needs before loading it; here we measure the same parts
# on a real step. One step holds:
#
# - the **weights**, and a **gradient** for every weight that trains (same size, same dtype);
# - the **optimizer state**: AdamW keeps two moments per trained weight, in fp32;
# - the **activations**: what autograd keeps from the forward pass for the backward pass
#   (lesson 07), which grows with the batch and the sequence length;
# - on a GPU, the CUDA context and the allocator's reserve on top (lesson 07).
#
# The model and the data live in a file, so that section 4's processes can import them too: a
# small decoder (lesson 14's `TinyDecoder`) that learns to continue a sentence, one token per
# byte.

# %%
# %%writefile decoder_task.py
"""The model and the data of lesson 15: a small decoder continuing a sentence, one token per byte."""

import torch
import torch.nn.functional as F

import colab_gpu as cg
from colab_gpu.llm.llm_memory import ModelShape

SHAPE = ModelShape("small decoder", vocab=256, hidden=128, intermediate=384, layers=6, heads=4, kv_heads=2,
                   head_dim=32)
GLOBAL_BATCH, TOKENS = 8, 128
TEXT = torch.tensor(list(b"the quick brown fox jumps over the lazy dog. " * 40))  # one token per byte


def make_model(device="cpu") -> cg.TinyDecoder:
    cg.seed_everything(0)  # the same weights in every process that builds it
    with torch.device(device):  # created on the device: no copy on the CPU first
        return cg.TinyDecoder(SHAPE)


def global_batch(step: int) -> torch.Tensor:
    """Step ``step``'s GLOBAL_BATCH sequences of TOKENS + 1 tokens, the same in every process."""
    starts = torch.randint(0, len(TEXT) - TOKENS - 1, (GLOBAL_BATCH,), generator=torch.Generator().manual_seed(step))
    return torch.stack([TEXT[start : start + TOKENS + 1] for start in starts])


def loss_of(model: torch.nn.Module, rows: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy: each position predicts the token after it."""
    logits, _ = model(rows[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), rows[:, 1:].flatten())

# %% [markdown]
# Measured by hand: the weights, gradients and optimizer state are the storages of the tensors
# each holds (`untyped_storage().nbytes()`, each storage once: a tied weight is one tensor), and
# `cg.measure_activations` (lesson 07) counts what autograd keeps, on any device.

# %%
from decoder_task import SHAPE, global_batch, loss_of, make_model

from colab_gpu.llm.llm_memory import finetune_bytes

MIB = 2**20
rows = global_batch(0).to(device)
model = make_model(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)


def storage_bytes(tensors):
    """Bytes the tensors' storages occupy, each storage once."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


with cg.measure_activations(model) as saved:
    loss_of(model, rows).backward()
optimizer.step()  # AdamW creates its two moments at its first step
measured = {
    "weights": storage_bytes(model.parameters()),
    "gradients": storage_bytes(p.grad for p in model.parameters()),
    "optimizer state": storage_bytes(t for state in optimizer.state.values() for t in state.values()),
    "activations": saved.peak_bytes,
}
optimizer.zero_grad()
formula = finetune_bytes(SHAPE, "full")  # lesson 14: 4 + 4 + 8 bytes per parameter
print(f"{SHAPE.parameters:,} parameters, a batch of {rows.shape[0]} x {rows.shape[1] - 1} tokens")
print(f"{'part':16} {'measured':>10} {'formula':>10}")
for (part, value), expected in zip(measured.items(), [*formula.values(), None], strict=True):
    print(f"{part:16} {value / MIB:>7.2f} MiB {'' if expected is None else f'{expected / MIB:7.2f} MiB':>10}")
assert measured["weights"] == formula["weights"] and measured["gradients"] == formula["gradients"]
assert abs(measured["optimizer state"] - formula["adam moments"]) < 0.01 * formula["adam moments"]  # + step counts

# %% [markdown]
# The formulas hold to the byte for the weights and the gradients; AdamW adds a step count per
# tensor to its two moments. And at this batch the **activations are the largest part**, several
# times the rest together: for a language model they grow with batch x tokens x (hidden size x
# layers), and the logits (batch x tokens x vocabulary) come on top.
#
# `cg.step_ledger(model, optimizer, loss_of)` runs one step and returns this ledger (it also
# counts a sharded weight by the part a process holds, section 4). Its total is an upper bound
# of the step's peak: the activations are freed as the gradients appear.
#
# **The largest model each method fits on a T4.** From lesson 14's arithmetic, before the
# activations: full fine-tuning with AdamW needs 16 bytes per parameter; LoRA a 2-byte frozen
# base plus 16 bytes per adapter parameter; QLoRA a 4-bit base (about 0.52 bytes per weight of
# the linear layers) plus the adapters. Computed per parameter of a Llama-3.2-3B shape:

# %%
from colab_gpu.hardware.units import GIB
from colab_gpu.llm.llm_memory import CUDA_CONTEXT_BYTES, MODELS, T4_BYTES

usable = T4_BYTES - CUDA_CONTEXT_BYTES
llama_3b = next(m for m in MODELS if m.name == "Llama-3.2-3B")
print(f"a T4: {usable / GIB:.1f} GiB once the CUDA context is made (prediction: t4 14.cuda_context)")
for method in ("full", "lora", "qlora"):
    per_parameter = sum(finetune_bytes(llama_3b, method).values()) / llama_3b.parameters
    print(f"{method:6} {per_parameter:5.2f} bytes per parameter: at most {usable / per_parameter / 1e9:4.1f} billion "
          "parameters, before the activations")

# %% [markdown]
# So a free T4 fully fine-tunes about one billion parameters at most (Llama-3.2-1B's 1.24
# billion do not fit), LoRA reaches about 7 billion in 16 bits with nothing left for the
# activations, and QLoRA about 19 billion: a 7-8B model with room for a batch. These are
# computed: a model's activations and the allocator's reserve decide the real limit, which you
# measure as section 2 does.
#
# ## 2. One GPU, a model that does not fit: the levers in the order they pay
#
# Each lever cuts one line of the ledger. We measure every one on the same step: the ledger, the
# loss (a lever changes what is stored, never what is computed) and the step time (the median of
# 3 timed steps).
#
# **Activation checkpointing per block** (lesson 07 did it for a whole stack). Wrapping each
# decoder block in `torch.utils.checkpoint.checkpoint` keeps only the block's input; the backward
# pass runs the block's forward again to get the rest. A wrapper module does it for a model you
# did not write, without touching its `forward`:

# %%
from torch import nn
from torch.utils.checkpoint import checkpoint


class Checkpointed(nn.Module):
    """``block``, keeping only its inputs for the backward pass: the rest is recomputed there."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)  # the non-reentrant form, as PyTorch advises


def checkpointed(model):
    model.layers = nn.ModuleList(Checkpointed(block) for block in model.layers)
    return model

# %% [markdown]
# **An optimizer with less state.** AdamW keeps 8 bytes per trained weight. PyTorch's
# `torch.optim.Adafactor` keeps, for a matrix, one number per row and one per column (its second
# moment, factored) and no first moment. `bitsandbytes`' `AdamW8bit` keeps AdamW's two moments in
# 8 bits with a scale per block of 2,048 (2 bytes per weight; tensors of fewer than 4,096 numbers
# stay in 32 bits). `bitsandbytes` is on Colab and Kaggle; where it is missing, its rows are
# skipped with a line that says so.

# %%
import importlib.util
from functools import partial

has_bitsandbytes = importlib.util.find_spec("bitsandbytes") is not None
levers = {  # name: (change the model, make the optimizer)
    "AdamW": (None, lambda p: torch.optim.AdamW(p, lr=3e-3)),
    "checkpointing + AdamW": (checkpointed, lambda p: torch.optim.AdamW(p, lr=3e-3)),
    "Adafactor": (None, lambda p: torch.optim.Adafactor(p, lr=1e-2)),
    "checkpointing + Adafactor": (checkpointed, lambda p: torch.optim.Adafactor(p, lr=1e-2)),
}
if has_bitsandbytes:
    import bitsandbytes as bnb

    levers["checkpointing + AdamW8bit"] = (checkpointed, lambda p: bnb.optim.AdamW8bit(p, lr=3e-3))
else:
    print("bitsandbytes is not installed here: the 8-bit AdamW row needs it (the PyPI package bitsandbytes).")


def one_step(model, optimizer):
    loss_of(model, rows).backward()
    optimizer.step()
    optimizer.zero_grad()


ledgers, seconds = {}, {}
for name, (change, make_optimizer) in levers.items():
    model = make_model(device)
    model = change(model) if change else model
    optimizer = make_optimizer(model.parameters())
    ledgers[name] = cg.step_ledger(model, optimizer, lambda m: loss_of(m, rows))
    seconds[name] = cg.benchmark(partial(one_step, model, optimizer), device=device, warmup=1, repeat=3).median
print(f"{'':26} {'weights':>8} {'grads':>8} {'optimizer':>10} {'activations':>12} {'total':>8} {'loss':>7} {'step':>9}")
for name, ledger in ledgers.items():
    widths = (8, 9, 11, 13)
    parts = "".join(f"{value / MIB:>{w}.2f}" for value, w in zip(ledger.parts.values(), widths, strict=True))
    print(f"{name:26}{parts} {ledger.total / MIB:>8.2f} {ledger.loss:>7.4f} {cg.format_seconds(seconds[name]):>9}")
print(f"(MiB; the step time is the median of 3 steps on {device})")
plain, light = ledgers["AdamW"], ledgers["checkpointing + Adafactor"]
assert all(abs(ledger.loss - plain.loss) < 1e-4 for ledger in ledgers.values())  # the same computation
assert light.parts["activations"] < plain.parts["activations"] / 4  # six blocks' insides no longer kept
assert light.parts["optimizer state"] < plain.parts["optimizer state"] / 20

# %% [markdown]
# Read it line by line. Checkpointing cuts the largest part, the activations, by about 12x here
# and costs one more forward pass per step (the step column: a backward costs about twice a
# forward, so recomputing adds roughly a third to a half of a step). Adafactor's state is almost
# nothing, and 8-bit AdamW's a quarter of AdamW's; both change the optimizer's arithmetic, so
# check that your model still trains as well (the exercise does). On a T4 the order is the same,
# and the step-time costs there are predicted (prediction: t4 15.checkpoint_cost).
#
# Two more levers, when the weights themselves do not fit:
#
# - **Offload to the CPU.** Keep the weights, gradients and optimizer state in the CPU's memory
#   and bring each block to the GPU only while it runs: FSDP2's `CPUOffloadPolicy` (section 4)
#   does this even with a single process, DeepSpeed's ZeRO-Offload too; `bitsandbytes`' paged
#   optimizers (`bnb.optim.PagedAdamW8bit`) move their state to the CPU only when the GPU runs
#   out. The price is the PCIe bus: a T4's host link moves about 12 GB/s (lesson 05), so a step
#   that streams 2 GB of fp16 weights twice (forward and backward) waits about a third of a
#   second for them, much longer than the compute of a small batch.
# - **A 4-bit base model with LoRA adapters (QLoRA).** Freeze the model, store its linear layers
#   in 4 bits, and train small fp32 adapters on them (lesson 14's LoRA): no gradients and no
#   optimizer state for the base, and a quarter of its 16-bit weights.
#
# ## 3. QLoRA: a 4-bit model with LoRA adapters, with `bitsandbytes` and `peft`
#
# This is how Hugging Face users fine-tune a 7B model on a free T4. Three objects:
# `BitsAndBytesConfig` (how `from_pretrained` stores the linear layers: 4-bit NF4 with double
# quantization, computing in 16 bits), `LoraConfig` (rank, scale, which projections get
# adapters) and `get_peft_model` (freezes the model and adds the adapters). Below with
# SmolLM2-135M, a real model of the Llama family; offline (CI, a laptop without internet)
# `cg.pretrained_source` saves its architecture with fewer layers and random weights to a folder,
# and the same `from_pretrained` call reads it.
# Where `bitsandbytes` or `peft` is missing, the cell says so: add them with
# `!pip install bitsandbytes peft` in a new cell (it leaves torch as it is), then rerun it.

# %%
import importlib.util

if all(importlib.util.find_spec(name) for name in ("bitsandbytes", "peft")):
    import warnings

    import bitsandbytes as bnb
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    transformers.logging.disable_progress_bar()  # its loading bars go to stderr
    compute = torch.float16 if device.type == "cuda" else torch.float32  # a T4 computes in fp16 (lesson 06)
    four_bit = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                  bnb_4bit_compute_dtype=compute)
    source = cg.pretrained_source("HuggingFaceTB/SmolLM2-135M")
    base = AutoModelForCausalLM.from_pretrained(source, quantization_config=four_bit, dtype=compute,
                                                device_map={"": str(device)})
    lora = LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    with warnings.catch_warnings():  # peft reads a name transformers 5 renamed: a warning about peft, not you
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
        qlora = get_peft_model(base, lora)  # the base frozen, adapters on the seven projections of every layer
    qlora.print_trainable_parameters()
else:
    qlora = None
    print("QLoRA needs the PyPI packages bitsandbytes and peft (both on Colab and Kaggle): add them to this "
          "runtime, then rerun this cell.")

# %% [markdown]
# The 4-bit weights checked against lesson 14's formula: `bitsandbytes` packs two 4-bit values
# per byte and keeps a scale per block of 64 (itself quantized to 8 bits: the double
# quantization), 4.127 bits per weight in all. What the linear layers' weights and scales really
# occupy, and the formula's `frozen linear layers (NF4)` line for this model's shape:

# %%
if qlora is not None:
    from colab_gpu.llm.llm_memory import ModelShape

    def nf4_bytes(weight):
        """A 4-bit weight's packed bytes, its block scales and the scales' own scales."""
        state = weight.quant_state
        scales = [state.absmax, state.state2.absmax, state.state2.code] if state.nested else [state.absmax]
        return weight.untyped_storage().nbytes() + sum(t.untyped_storage().nbytes() for t in scales)

    packed = sum(nf4_bytes(m.weight) for m in qlora.modules() if isinstance(m, bnb.nn.Linear4bit))
    shape = ModelShape.from_config(qlora.config)
    expected = finetune_bytes(shape, "qlora", rank=16)
    print(f"{shape.layers} layers: linear weights in 4 bits {packed / MIB:.2f} MiB measured, "
          f"{expected['frozen linear layers (NF4)'] / MIB:.2f} MiB by the formula")
    assert abs(packed - expected["frozen linear layers (NF4)"]) < 0.05 * packed

# %% [markdown]
# Training is lesson 14's loop: the optimizer gets the adapters only, and with fp16 compute the
# `GradScaler` scales the loss (the adapters are fp32, so it can unscale them).

# %%
if qlora is not None:
    text = "the quick brown fox jumps over the lazy dog. " * 4
    ids = torch.tensor([[ord(c) for c in text]], device=device)  # bytes as token ids: the same offline and online
    adapters = [p for p in qlora.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(adapters, lr=2e-3)
    scaler = torch.amp.GradScaler(device.type, enabled=compute == torch.float16)
    losses = []
    for _ in range(10):
        loss = qlora(input_ids=ids, labels=ids).loss  # transformers shifts the labels by one itself
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    print(f"{len(adapters)} adapter tensors in {adapters[0].dtype}: loss {losses[0]:.3f} -> {losses[-1]:.3f} "
          "in 10 steps")
    assert losses[-1] < losses[0]

# %% [markdown]
# For Mistral-7B the same lines load about 3.8 GiB (3.35 GiB of 4-bit linear layers, the
# embeddings and norms in fp16) where fp16 needs 13.5 GiB (lesson 14's table): the difference
# between "out of memory" and a free T4. The price is time: every forward dequantizes each
# weight to 16 bits first, so a QLoRA step is slower than a 16-bit LoRA step on a GPU where both
# fit (prediction: t4 15.qlora_step).
#
# ## 4. Two GPUs, a model bigger than one: FSDP2
#
# DDP (lesson 08) gives every process a whole copy of the model, its gradients and its
# optimizer state: two GPUs hold no bigger a model than one. **FSDP2** shards them: each of N
# processes keeps 1/N of every weight, gradient and moment. Before a block runs, its weights are
# gathered whole from all processes (all-gather) and freed right after; its gradients are summed
# and split back into shards (reduce-scatter). In plain PyTorch it is one call per block, then
# one for the model:
#
# ```python
# from torch.distributed.fsdp import fully_shard
#
# for block in model.layers:
#     fully_shard(block)   # each block: gathered just before it runs, freed just after
# fully_shard(model)       # the rest: the embeddings and the final norm
# optimizer = torch.optim.AdamW(model.parameters())  # after fully_shard: it holds the shards
# ```
#
# The weights become `DTensor`s: `weight.to_local()` is the shard this process holds. On GPUs,
# `MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)` gathers the
# weights in 16 bits for the compute and keeps fp32 shards for the optimizer; on a T4 (no bf16)
# that is fp16, so the loss needs lesson 06's `GradScaler`, which works with FSDP2's sharded
# gradients as with DDP's. `CPUOffloadPolicy()` keeps the shards, their gradients and the
# optimizer step on the CPU.
#
# `fully_shard` needs a process group, one process per GPU, started by `torchrun` (lesson 08).
# Called in a notebook cell, it tries to join a group that nobody started:

# %%
from torch.distributed.fsdp import fully_shard

with cg.shows_error(ValueError, atlas="env-rank"):
    fully_shard(make_model())  # no torchrun: no RANK, WORLD_SIZE or meeting point to join

# %% [markdown]
# So the training goes into a script, as in lesson 08. It trains section 1's model with DDP,
# then with FSDP2, in the same processes, and writes what each process holds: the same
# processes, data and seed for both.

# %%
# %%writefile fsdp_train.py
"""Train lesson 15's decoder on N processes with DDP, then FSDP2; rank 0 writes each rank's memory, its shard of one
weight and the losses.

Launch: torchrun --standalone --nproc-per-node=N fsdp_train.py [--backend gloo|nccl] [--steps 8] [--offload]
"""

import argparse
import json
import time

import torch
from decoder_task import global_batch, loss_of, make_model
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import colab_gpu as cg
from colab_gpu.llm.ledger import held_bytes, local_tensors, optimizer_state_tensors


def build(mode: str, info: cg.DistInfo, half: torch.dtype | None) -> torch.nn.Module:
    model = make_model(info.device)  # seeded: the same weights in every process and in the notebook
    if mode == "ddp":
        return DDP(model, device_ids=[info.local_rank] if info.device.type == "cuda" else None)
    # 16-bit weights for the forward and backward; gradients reduced and shards kept in fp32 (lesson 06's rule)
    mixed = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32) if half else MixedPrecisionPolicy()
    offload = CPUOffloadPolicy() if mode == "fsdp + offload" else OffloadPolicy()  # shards, grads, Adam on the CPU
    for block in model.layers:  # each block a unit: gathered whole just before it runs, freed just after
        fully_shard(block, mp_policy=mixed, offload_policy=offload)
    fully_shard(model, mp_policy=mixed, offload_policy=offload)  # the rest: the embeddings and the last norm
    return model


def train(mode: str, info: cg.DistInfo, steps: int, half: torch.dtype | None) -> dict:
    model = build(mode, info, half)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)  # made after fully_shard: it holds the shards
    scaler = torch.amp.GradScaler(info.device.type, enabled=half == torch.float16)  # fp16 needs it, FSDP2 too
    autocast = torch.autocast(info.device.type, dtype=half or torch.float32, enabled=mode == "ddp" and bool(half))
    if info.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(info.device)
    losses, started = [], time.perf_counter()
    for step in range(steps):
        if step == 1:  # the first step creates the gradients and Adam's moments: time the others
            cg.synchronize(info.device)
            started = time.perf_counter()
        rows = global_batch(step).chunk(info.world_size)[info.rank].to(info.device)  # this process's share
        with autocast:  # FSDP2's policy casts the weights itself; DDP's step uses autocast (lesson 06)
            loss = loss_of(model, rows)
        optimizer.zero_grad()
        scaler.scale(loss).backward()  # DDP all-reduces the gradients; FSDP2 reduce-scatters them into shards
        scaler.step(optimizer)
        scaler.update()
        losses.append(cg.all_reduce_mean(loss.detach(), info))  # the mean over processes: the global batch's
    cg.synchronize(info.device)
    q = dict(model.named_parameters())[("module." if mode == "ddp" else "") + "layers.0.q.weight"]
    parameters = list(model.parameters())
    return {  # what this process holds between steps, a shard counted as its local part
        "mode": mode,
        "rank": info.rank,
        "q shape": list(local_tensors([q])[0].shape),
        "weights": held_bytes(parameters),
        "gradients": held_bytes(p.grad for p in parameters if p.grad is not None),
        "optimizer state": held_bytes(optimizer_state_tensors(optimizer)),
        "peak allocated": torch.cuda.max_memory_allocated(info.device) if info.device.type == "cuda" else None,
        "step_s": (time.perf_counter() - started) / max(steps - 1, 1),
        "losses": losses,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=None, help="nccl (GPUs) or gloo (CPU); default: nccl when CUDA works")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--offload", action="store_true", help="FSDP2 with its shards on the CPU too (GPUs only)")
    parser.add_argument("--out", default="fsdp_run.json", help="every rank's rows, written by rank 0")
    args = parser.parse_args()
    info = cg.ddp_setup(args.backend)  # lesson 08: the process group, and NCCL's setting for Kaggle's T4 x2
    try:
        # fp32 in CPU processes; on GPUs lesson 06's 16-bit format: fp16 (with its scaler) on a T4, bf16 from Ampere
        half = cg.choose_precision(info.device).dtype if info.device.type == "cuda" else None
        modes = ["ddp", "fsdp"] + (["fsdp + offload"] if args.offload and info.device.type == "cuda" else [])
        rows = []
        for mode in modes:  # each model is gone before the next is built, and before the teardown
            gathered = [None] * info.world_size
            torch.distributed.all_gather_object(gathered, train(mode, info, args.steps, half))
            rows += gathered
        if info.is_main:
            precision = str(half).removeprefix("torch.") if half else "float32"
            with open(args.out, "w") as file:
                json.dump({"backend": info.backend, "precision": precision, "rows": rows}, file)
    finally:
        cg.ddp_teardown()


if __name__ == "__main__":
    main()

# %% [markdown]
# On Kaggle's T4 x2 it runs with `nccl`, one process per GPU, with the offload run added; on any
# other runtime with two CPU processes over `gloo` (lesson 08), which is enough to see the
# sharding and check the losses:

# %%
import json
import re

backend = "nccl" if torch.cuda.device_count() >= 2 else "gloo"
try:
    cg.launch_torchrun("fsdp_train.py", 2, "--backend", backend, *(["--offload"] if backend == "nccl" else []),
                       timeout=300)
except RuntimeError as error:  # a failing GPU run must not stop the notebook: say what failed, go on with gloo
    if backend == "gloo":
        raise
    raised = [line for line in str(error).splitlines() if re.match(r"\w+(Error|Exception): ", line)]
    print("the two-GPU run failed here:", raised[0] if raised else str(error).splitlines()[0])  # a process's error
    print("Where NCCL is the cause, NCCL_DEBUG=INFO in the environment shows its reasons (lesson 08, section 4). "
          "Below, the same script with two CPU processes (gloo).")
    cg.launch_torchrun("fsdp_train.py", 2, "--backend", "gloo", timeout=300)
with open("fsdp_run.json") as file:
    run = json.load(file)
print(f"{run['backend']}, 2 processes, {run['precision']} compute")
print(f"{'':15} {'rank':>4} {'layers.0.q':>11} {'weights':>8} {'grads':>8} {'optimizer':>10} {'peak GPU':>9} "
      f"{'step':>9}")
for row in run["rows"]:
    peak = "-" if row["peak allocated"] is None else f"{row['peak allocated'] / MIB:.1f}"
    parts = "".join(f"{row[part] / MIB:>{w}.2f}" for part, w in (("weights", 9), ("gradients", 9),
                                                                 ("optimizer state", 11)))
    shard = "x".join(map(str, row["q shape"]))
    print(f"{row['mode']:15} {row['rank']:>4} {shard:>11}{parts} {peak:>9} {cg.format_seconds(row['step_s']):>9}")
print("(MiB held by each process between steps)")
held = {row["mode"]: row["weights"] + row["gradients"] + row["optimizer state"] for row in run["rows"]}
assert held["fsdp"] < 0.55 * held["ddp"]  # half of everything, and a little padding

# %% [markdown]
# Each FSDP2 process holds half of `layers.0.q.weight`'s rows and half of every other weight,
# gradient and moment; each DDP process holds all of them. Is it the same training? One process,
# the same model and the 8 sequences of each step in one batch, on the device the processes used
# (CPU processes with gloo, GPUs with nccl):

# %%
ran_on = torch.device("cpu") if run["backend"] == "gloo" else device
reference = make_model(ran_on)
optimizer = torch.optim.AdamW(reference.parameters(), lr=3e-3)
alone = []
for step in range(len(run["rows"][0]["losses"])):
    loss = loss_of(reference, global_batch(step).to(ran_on))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    alone.append(loss.item())
for mode in ("ddp", "fsdp"):
    losses = next(row["losses"] for row in run["rows"] if row["mode"] == mode)
    gap = max(abs(a - b) for a, b in zip(losses, alone, strict=True))
    print(f"{mode:5} loss {losses[0]:.4f} -> {losses[-1]:.4f}; one process {alone[0]:.4f} -> {alone[-1]:.4f}; "
          f"largest gap {gap:.1e}")
    # fp32 on CPUs agrees to rounding; 16-bit compute on GPUs rounds each step differently, the training is the same
    assert gap < (1e-4 if run["precision"] == "float32" else 0.05 * alone[0])

# %% [markdown]
# The same losses: each process's half-batch loss, averaged, is the batch's loss, and FSDP2
# averages the gradients as DDP does; it only stores them in halves.
#
# **A trap: a forward pass before the optimizer exists.** After a forward pass FSDP2 keeps the
# root module's own weights (here the embeddings and the last norm) gathered, since the backward
# pass needs them next; they return to shards at the next backward. An optimizer made in
# between, after an evaluation for instance, gets those gathered copies from
# `model.parameters()`, not the shards, and the root's weights silently stop training. Make the
# optimizer right after `fully_shard`; an evaluation later, between steps, is fine. A process
# group of this process alone (FSDP2 needs a group, even of one) shows it in the notebook:

# %%
import warnings

import torch.distributed as dist

# Recent FSDP2 warns about outputs that are views, in case one is changed in place: the decoder returns its keys and
# values (its KV cache, lesson 14) as views, and nothing changes them
warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # no torchrun: a group of one
try:
    for evaluate_first in (False, True):
        sharded = make_model()
        for block in sharded.layers:
            fully_shard(block)
        fully_shard(sharded)
        if evaluate_first:
            with torch.no_grad():
                loss_of(sharded, global_batch(0))  # an evaluation: a forward pass, no backward
        optimizer = torch.optim.AdamW(sharded.parameters(), lr=3e-3)
        held = type(sharded.embed.weight).__name__  # DTensor: a shard; Parameter: the gathered copy
        losses = []
        for step in range(4):
            loss = loss_of(sharded, global_batch(step))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"{'evaluated, then' if evaluate_first else 'sharded, then'} the optimizer (embeddings held as "
              f"{held}): loss {' -> '.join(f'{x:.3f}' for x in losses)}")
        if not evaluate_first:
            assert held == "DTensor"  # made right after fully_shard, the optimizer holds the shards
            right = losses
        elif held != "DTensor":  # this PyTorch kept the gathered copy: the embeddings do not train
            assert losses[-1] > right[-1]
finally:
    dist.destroy_process_group()

# %% [markdown]
# With PyTorch 2.11 and 2.14 the second optimizer holds the gathered embeddings, which no step
# updates: its loss falls more slowly, with no error (`model.reshard()` after the evaluation, or
# an optimizer made first, avoids it).
#
# **What it costs.** Per step, FSDP2 gathers every block twice (forward and backward) and
# reduce-scatters its gradients: about 1.5 times DDP's traffic. Where the GPUs talk over NVLink
# that hides behind the compute; Kaggle's two T4s have no peer-to-peer link, so every gather
# goes through the host's memory over PCIe. There FSDP2 is a tool to *fit* a model, not to
# speed one up: for section 1's small model its step will be slower than DDP's on T4 x2
# (prediction: t4 15.fsdp_step_t4x2), as it is on these CPU processes. With `--offload` each
# process keeps its shards on the CPU: the GPU's memory holds one gathered block at a time, the
# step is slower again. The peak GPU column shows the halving less clearly than the ledger: the
# activations are the same for both (prediction: t4 15.fsdp_peak_t4x2).
#
# ## 5. The engines that come next
#
# FSDP2, checkpointing and `bitsandbytes` are what the engines below are built on. Reach for one
# when the problem it solves is yours; each starts with one command:
#
# - **Hugging Face Accelerate**: `accelerate launch train.py`, or in a notebook
#   `notebook_launcher(train, num_processes=2)`. One training script for one GPU, several, FSDP
#   or DeepSpeed, chosen by a config file (`accelerate config`): where Hugging Face users meet
#   multi-GPU.
# - **DeepSpeed ZeRO-Offload**: `deepspeed --num_gpus=1 train.py --deepspeed ds_config.json`.
#   For a model whose optimizer state (and weights) do not fit even sharded: kept in the CPU's
#   memory, and the optimizer steps on the CPU.
# - **`torchrun` across machines**: `torchrun --nnodes=2 --node-rank=0 --nproc-per-node=8
#   --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 train.py` on each machine (lesson 08). For more
#   GPUs than one machine has: the same script on every machine.
# - **Ray Train**: `TorchTrainer(train_loop, scaling_config=ScalingConfig(num_workers=4,
#   use_gpu=True)).fit()`. For workers that come and go (preemptible or spot GPUs): it restarts
#   them from checkpoints and schedules the cluster for you.
#
# None of them removes the ledger: they choose where each of its lines lives.
#
# ## Exercise: fit a step into a budget
#
# Section 1's step holds about 87 MiB by its ledger on a CPU (section 2's first row: read yours):
# weights, gradients, AdamW's state, activations. Your budget is **20 MiB**: in proportion, a
# full fine-tuning that does not fit a T4. Complete `fit_in_budget(model)`: apply the levers of
# section 2 to the model you are given and return it with its optimizer. The check measures one
# step's ledger with `cg.step_ledger`, checks that the first loss is the given model's (the same
# computation), and trains 20 steps: the loss must fall below 80% of its first value. A T4 has no
# bf16, so the weights that train stay in fp32.

# %%
def fit_in_budget(model):
    """Return (model, optimizer): the model changed as you choose, its step within the budget."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)  # your code: cut the largest parts
    return model, optimizer

# %% tags=["solution"]
def fit_in_budget(model):
    """Return (model, optimizer): the model changed as you choose, its step within the budget."""
    model = checkpointed(model)  # the activations: each block keeps its input only
    optimizer = torch.optim.Adafactor(model.parameters(), lr=1e-2)  # the state: a row and a column per matrix
    return model, optimizer

# %%
cg.checks.memory_budget(fit_in_budget, lambda: make_model(device), lambda m: loss_of(m, rows), budget_mib=20)

# %% [markdown]
# ### Exercise 2: shard a model yourself
#
# Write `shard(model, half)`: FSDP2 on a decoder as section 4's script does it (each block of
# `model.layers`, then the model), computing in `half` with fp32 shards and the gradients
# reduced in fp32; return the model. `half` is what lesson 06's rule gives a T4:
# `torch.float16`. The check runs your function in this process, in a process group of one
# (`gloo`: FSDP2 needs a group even over one process), trains 6 steps with a `GradScaler`, and
# compares the losses with those of the unsharded model.

# %%
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model, half):
    """FSDP2 on ``model``: each block, then the model; computing in ``half``, shards and reduction in fp32."""
    return model  # your code

# %% tags=["solution"]
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model, half):
    """FSDP2 on ``model``: each block, then the model; computing in ``half``, shards and reduction in fp32."""
    mixed = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32)
    for block in model.layers:  # each block a unit: gathered just before it runs
        fully_shard(block, mp_policy=mixed)
    fully_shard(model, mp_policy=mixed)  # then the rest
    return model

# %%
cg.checks.fsdp_shard(shard, half=torch.float16)

# %% [markdown]
# ## Summary
#
# - A training step holds weights, gradients, optimizer state and activations; measure them
#   (`cg.step_ledger`, or storages and `measure_activations` by hand) before choosing a lever.
#   On a GPU, the CUDA context and the allocator's reserve come on top.
# - Full fine-tuning with AdamW: 16 bytes per parameter, about 1 billion parameters at most on a
#   T4; LoRA on a 16-bit base about 7 billion; QLoRA's 4-bit base a 7-8B model with room to train.
# - One GPU: checkpoint each block (`checkpoint(block, ..., use_reentrant=False)`, one more
#   forward per step), an optimizer with less state (`torch.optim.Adafactor`,
#   `bnb.optim.AdamW8bit`), a 4-bit base with LoRA (`BitsAndBytesConfig`, `LoraConfig`,
#   `get_peft_model`), and offload to the CPU when nothing else is enough.
# - Several GPUs: `fully_shard` each block, then the model, then make the optimizer; each of N
#   processes holds 1/N of everything, and training gives the losses of one process. fp16 on a
#   T4 with `MixedPrecisionPolicy` and `GradScaler`; on T4 x2 it fits models, it does not speed
#   them up.
# - The engines (Accelerate, DeepSpeed, Ray Train) choose where each line of the ledger lives.
#
# This is the course's last lesson. Where to go from here: the course's README lists what each
# lesson measured on real GPUs; PyTorch's FSDP2 tutorial and the Hugging Face PEFT documentation
# go further on the two tools of sections 3 and 4.
