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
# # 07 · GPU memory: measure it, clean it up, survive out-of-memory
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/07_gpu_memory.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/07_gpu_memory.ipynb)
#
# **What you will learn**
# - reading GPU memory: allocated vs reserved, peaks, `mem_get_info`, `memory_summary`;
# - where training memory goes (weights, gradients, optimizer state, activations), by hand;
# - what `del`, `gc.collect()` and `torch.cuda.empty_cache()` free, and the notebook traps that
#   keep tensors alive;
# - recovering from `torch.OutOfMemoryError` without restarting, and finding the largest batch
#   that fits; gradient accumulation, activation checkpointing, `expandable_segments`, snapshots.
#
# **Time:** 48 minutes. **Prerequisites:** lessons 03 and 06.
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
import gc
import weakref

import torch

import colab_gpu as cg

# The course's error explainer: after an error its atlas knows (lesson 09), the cause and the fix.
# %load_ext colab_gpu

device = cg.get_device()
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. Reading GPU memory
#
# PyTorch does not return freed GPU memory to the driver: its *caching allocator* keeps the
# blocks for the next tensor, because asking the driver is slow. So there are two numbers:
# - `torch.cuda.memory_allocated()`: bytes used by live tensors;
# - `torch.cuda.memory_reserved()`: bytes the allocator holds (allocated + cached). This is
#   what `nvidia-smi` shows for the process, plus the CUDA context (a few hundred MB).
#
# `max_memory_allocated()` is the peak since the last `reset_peak_memory_stats()`;
# `torch.cuda.mem_get_info()` asks the driver for (free, total); `torch.cuda.memory_summary()`
# prints the allocator's whole table (we print its two rows this section explains). On a CPU
# runtime none of this exists: the cells explain instead of measuring.
#
# These calls need CUDA started in the process. PyTorch starts it lazily, at the first GPU
# tensor, and `reset_peak_memory_stats()` does not start it: as the very first CUDA call of a
# kernel it fails with "Invalid device argument 0: did you call init?" (lesson 09). In your own
# code, call `torch.cuda.init()` (or create a tensor on the GPU) first; `cg.get_device()`
# already did, above.

# %%
on_gpu = device.type == "cuda"
MIB = 2**20
if on_gpu:
    assert torch.cuda.is_initialized()  # started by cg.get_device()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)  # before any kernel ran in this notebook
    x = torch.empty(256 * MIB, dtype=torch.uint8, device=device)  # 256 MiB
    print("after a 256 MiB tensor:", cg.format_memory(device))
    assert torch.cuda.memory_allocated(device) - base == 256 * MIB
    assert torch.cuda.memory_reserved(device) >= torch.cuda.memory_allocated(device)
    free, total = torch.cuda.mem_get_info(device)
    print(f"driver: {free / MIB:,.0f} MiB free of {total / MIB:,.0f} MiB")
    rows = torch.cuda.memory_summary(device, abbreviated=True).splitlines()
    print("\n".join(row for row in rows if row.strip("| ").startswith(("Metric", "Allocated", "GPU reserved"))))
    del x
else:
    print(cg.format_memory(device))

# %% [markdown]
# ## 2. Where training memory goes
#
# For a model with `P` parameters trained with Adam in float32:
# - weights: `4P` bytes; gradients: `4P`; Adam's two moment estimates: `8P`;
# - activations: every layer's output that backward needs, for the whole batch. For an MLP,
#   each `Linear` keeps its input and each `ReLU` its output; a `ReLU`'s output *is* the next
#   `Linear`'s input (one tensor, kept once), so about `batch x (in_features + hidden x depth) x 4`
#   bytes.
#
# Weights and optimizer state are fixed; activations grow with the batch size, which is why
# the batch size is the first thing to cut on an out-of-memory error.

# %%
batch, in_features, hidden, depth = (4096, 1024, 4096, 4) if on_gpu else (256, 256, 512, 4)
model = cg.mlp(in_features, hidden=hidden, depth=depth).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
params = cg.count_parameters(model)
estimate = {
    "weights": 4 * params,
    "gradients": 4 * params,
    "Adam state": 8 * params,
    "activations": batch * (in_features + hidden * depth) * 4,
}
for part, nbytes in estimate.items():
    print(f"{part:>12}: {nbytes / MIB:8.1f} MiB")
print(f"{'total':>12}: {sum(estimate.values()) / MIB:8.1f} MiB (estimate, {params:,} parameters, batch {batch})")

inputs = torch.randn(batch, in_features, device=device)
labels = torch.randint(0, 10, (batch,), device=device)
cg.train_step(model, inputs, labels, optimizer)  # the first step creates the gradients and Adam's state
if on_gpu:
    torch.cuda.reset_peak_memory_stats(device)
    cg.train_step(model, inputs, labels, optimizer)
    measured = torch.cuda.max_memory_allocated(device) - inputs.nbytes - labels.nbytes
    ratio = measured / sum(estimate.values())
    print(f"measured peak during a step: {measured / MIB:,.1f} MiB = {ratio:.2f}x the estimate")
    assert 0.5 < ratio < 2, "the hand estimate should be within a factor of 2 of the measured peak"
else:
    print("CPU runtime: PyTorch does not track CPU allocations; on a GPU this cell compares with the measured peak.")

# %% [markdown]
# ## 3. Cleaning up: `del`, `gc.collect()`, `empty_cache()`
#
# - `del x` drops *your name* for the tensor. If nothing else refers to it, its memory goes
#   back to PyTorch's cache (allocated falls, reserved does not).
# - `gc.collect()` frees objects caught in reference cycles (a model referring to itself
#   through a closure, say), which `del` alone leaves for later.
# - `torch.cuda.empty_cache()` gives cached blocks back to the driver (reserved falls). It frees
#   nothing that is still in use, and only matters for *other* processes: PyTorch itself
#   reuses its cache.
#
# Some memory stays allocated after we delete everything, and it is not ours. At its first
# matrix multiply, PyTorch gives cuBLAS (NVIDIA's matmul library) a *workspace* from the caching
# allocator and keeps it for the life of the process: one per cuBLAS handle, and each thread that
# multiplies has its own (this notebook's, and autograd's backward thread). A workspace is 32 MiB
# on an H100 (65.0 MiB left here on the course's H100 run (2026-11-26)); expected on a T4: about
# 16-17 MiB in all (prediction: t4 07.cublas_workspace).
# So a "back to baseline" check takes its baseline after a first matmul, as section 4 does.

# %%
del model, optimizer, inputs, labels
gc.collect()
if on_gpu:
    before = torch.cuda.memory_reserved(device)
    print("after del + gc.collect():", cg.format_memory(device))
    cached = before - torch.cuda.memory_allocated(device)  # reserved but free: what empty_cache can return
    torch.cuda.empty_cache()
    print("after empty_cache():     ", cg.format_memory(device))
    returned = before - torch.cuda.memory_reserved(device)
    print(f"{cached / MIB:,.0f} MiB were cached; reserved fell by {returned / MIB:,.0f} MiB")
    residue = torch.cuda.memory_allocated(device) - base  # base: section 1, before the first matmul
    print(f"{residue / MIB:,.1f} MiB stay allocated with none of our tensors alive: cuBLAS's workspaces")
    # The model, its gradients and Adam's state went to the cache (hundreds of MiB): now back to the driver.
    assert torch.cuda.memory_reserved(device) < before, "empty_cache returned the cached blocks to the driver"
else:
    print("CPU runtime: freed tensors go back to the system allocator; there is no cache to empty.")

# %% [markdown]
# ### The notebook traps: output history and tracebacks
#
# A notebook keeps references you did not write. When a cell's **last line** is a tensor,
# IPython stores it in `Out[n]` and `_` to display it: `del` on your name does not free it.
# We watch the tensor with a `weakref`, which does not keep it alive:

# %%
big = torch.randn(1000, 1000, device=device)
probe = weakref.ref(big)
big.sum()  # harmless: a number
big  # displayed, and therefore kept in Out[...] and _

# %%
del big
gc.collect()
from IPython import get_ipython

user_ns = get_ipython().user_ns  # the notebook's variables, including Out and _
held_by_history = any(value is probe() for value in user_ns["Out"].values()) or user_ns.get("_") is probe()
print("still alive after del:", probe() is not None, "| held by IPython's output history:", held_by_history)
# Jupyter and Colab keep it; a runner that executes cells without history (nbval, in CI) does not.
assert (probe() is not None) == held_by_history

# %%
cg.clear_notebook_references()  # clears Out, _, __, ___ (and the last traceback)
gc.collect()
print("alive after clearing the output history:", probe() is not None)
assert probe() is None

# %% [markdown]
# ## 4. Out of memory, and recovering without a restart
#
# The second trap: an exception keeps its **traceback**, and the traceback keeps every local
# variable of the frames that failed, tensors included. After an out-of-memory error inside
# a training step, the step's activations stay allocated until the traceback goes.
#
# We ask for twice the GPU's memory (on a CPU runtime: a petabyte), inside a function that
# already holds 64 MiB of "activations". `cg.shows_error` shows the error and lets the notebook go
# on; like any error in a notebook, it keeps the traceback in `sys.last_traceback`.

# %%
too_much = 2 * torch.cuda.get_device_properties(device).total_memory if on_gpu else 2**50
baseline = torch.cuda.memory_allocated(device) if on_gpu else None  # after the first matmuls: cuBLAS's included
probes = []


def oversized_step():
    activations = torch.randn(4096, 4096, device=device)  # 64 MiB held by this frame
    probes.append(weakref.ref(activations))
    return torch.empty(too_much, dtype=torch.uint8, device=device)


# %%
with cg.shows_error(RuntimeError, match="out of memory|can't allocate memory"):  # torch.OutOfMemoryError on a GPU
    oversized_step()

# %% [markdown]
# On a GPU that is `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`; on a CPU
# runtime, `RuntimeError: ... DefaultCPUAllocator: can't allocate memory`. The kernel survived.
# But the failed frame, and its 64 MiB, are still alive:

# %%
gc.collect()
print("activations of the failed step still alive:", probes[0]() is not None)
if probes[0]() is not None:  # the notebook kept the error's traceback (sys.last_traceback), as after any error
    cg.cleanup(device)  # clear the traceback and output history, collect, empty the cache
assert probes[0]() is None
if on_gpu:
    print("after cleanup:", cg.format_memory(device))
    assert torch.cuda.memory_allocated(device) == baseline, "memory is back to its baseline"

# %% [markdown]
# In code, catch the error where it happens and retry smaller, but free memory **after** the
# `except` block, not inside it: while it runs, the exception's traceback holds every frame of
# the failed step, and their tensors with them, so `gc.collect()` and `empty_cache()` there free
# nothing (PyTorch's FAQ says the same). Leave the block first; Python then drops the exception
# and the frames. In plain PyTorch, with a weak reference watching the failed step's tensor:

# %%
def ran_out_of_memory(step) -> bool:
    """Run ``step``; True when it ran out of memory (the recovery happens outside, in the caller)."""
    try:
        step()
    except RuntimeError as error:  # torch.OutOfMemoryError on a GPU is a RuntimeError; a CPU's allocator raises one
        if "out of memory" not in str(error) and "can't allocate memory" not in str(error):
            raise  # another error: not ours to handle
        print("inside the except block, the failed step's tensor is alive:", probes[-1]() is not None)
        return True
    return False


if ran_out_of_memory(oversized_step):  # out of the except block: the traceback, and its frames, are gone
    gc.collect()
    if on_gpu:
        torch.cuda.empty_cache()  # give the cached blocks back, then retry smaller
    print("after the except block, it is freed:", probes[-1]() is None)
assert probes[-1]() is None

# %% [markdown]
# A notebook keeps more references than a script: the last error (`sys.last_traceback`, which
# `sys.last_traceback = None` drops), the outputs of earlier cells (`Out`, `_`, `__`: `%reset -f
# out` and `_ = None`), and your own variables (`del`). `cg.cleanup(device)` drops the first two
# kinds, collects and empties the cache. `cg.find_max_batch_size` recovers the same way to find
# the largest batch that fits (it cleans up in a `finally`, after the error has been handled): it
# doubles the batch until it runs out of memory, then bisects, cleaning up after every failure.
# Three details make it usable:
# - it stops bisecting once the gap is within 1/16 of the size (about four bisections, not
#   sixteen: on a small GPU each try at a large batch is a slow, full training step); the
#   doublings before them are most of the tries (on the course's H100 run (2026-11-26): 21
#   tries, 16 of them doublings from 64);
# - it **suggests** a batch 10% below the edge, rounded down to a multiple of 8: memory use
#   varies from step to step (fragmentation, cuDNN workspaces), and a batch that just fitted
#   once fails an hour later;
# - it needs a limit, in case nothing ever runs out of memory. A fixed one is wrong somewhere: a
#   batch that fills a 15 GB T4 is a fifth of an 80 GB H100. So it measures, on the GPU, how much
#   memory one more sample takes as the batch grows, and stops at twice the batch that the free
#   memory holds. A batch that ran at the limit is no edge: then it says so, and suggests nothing.
#
# On a GPU the model here is narrower than section 2's (hidden width 1024, not 4096): it fills
# the memory with activations for about a quarter of the compute, so the search takes seconds on
# an H100 and about 20-30 s on a T4, whose edge should lie near 500,000 samples of this model
# (prediction: t4 07.batch_edge): the doublings climb from 64 through a dozen full training steps, each
# larger than the last.
# On a CPU runtime there is no GPU to fill, so we **pretend**: the step below raises
# `torch.OutOfMemoryError` when the estimated activations exceed a 64 MiB "GPU". On a GPU the
# real allocator decides.

# %%
search_hidden = 1024 if on_gpu else hidden
model = cg.mlp(in_features, hidden=search_hidden, depth=depth).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
pretend_budget = 64 * MIB


def try_batch(batch_size: int) -> None:
    if not on_gpu and batch_size * (in_features + search_hidden * depth) * 4 > pretend_budget:
        raise torch.OutOfMemoryError(f"pretend GPU out of memory at batch_size={batch_size}")
    inputs = torch.randn(batch_size, in_features, device=device)
    labels = torch.randint(0, 10, (batch_size,), device=device)
    try:
        cg.train_step(model, inputs, labels, optimizer)
    finally:
        model.zero_grad(set_to_none=True)  # every try, failed or not, starts from the same memory


cg.cleanup(device)
start_allocated = torch.cuda.memory_allocated(device) if on_gpu else None  # after the first matmuls, as above
found = cg.find_max_batch_size(try_batch, device, start=64)
print(found)
# The step's activations grow with the batch, so the limit lies past the edge: the search ran out of memory.
assert found.first_oom is not None, "the search should have found the out-of-memory edge"
assert 64 <= found.suggested < found.largest_fit
assert found.first_oom - found.largest_fit <= found.largest_fit / 16, "stopped at the resolution"
if on_gpu:
    assert torch.cuda.memory_allocated(device) == start_allocated, "the search leaves memory at its baseline"
    print("memory after the search:", cg.format_memory(device))
else:
    per_sample = (in_features + search_hidden * depth) * 4
    assert found.largest_fit * per_sample <= pretend_budget < found.first_oom * per_sample

# %% [markdown]
# ## 5. Doing more with the memory you have
#
# ### Gradient accumulation: a large batch in small pieces
#
# Run `k` micro-batches, each loss divided by `k`, calling `backward()` every time (gradients
# add up) and `step()` once. The gradient is that of the large batch, at the memory cost of a
# micro-batch.

# %%
import torch.nn.functional as F

cg.seed_everything(0)
model = cg.mlp(in_features, hidden=256).to(device)
inputs = torch.randn(256, in_features, device=device)
labels = torch.randint(0, 10, (256,), device=device)

model.zero_grad()
F.cross_entropy(model(inputs), labels).backward()
large_batch = [p.grad.clone() for p in model.parameters()]

model.zero_grad()
k = 4
for micro_inputs, micro_labels in zip(inputs.chunk(k), labels.chunk(k), strict=True):
    (F.cross_entropy(model(micro_inputs), micro_labels) / k).backward()  # gradients accumulate
accumulated = [p.grad for p in model.parameters()]

difference = max((a - b).abs().max().item() for a, b in zip(large_batch, accumulated, strict=True))
print(f"largest difference between the two gradients: {difference:.2e}")
assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(large_batch, accumulated, strict=True))

# %% [markdown]
# ### Activation checkpointing: recompute instead of store
#
# `torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)` runs `block` without
# keeping its inner activations, and runs it again during backward to get them. Less memory,
# about one extra forward pass of compute.

# %%
from torch import nn
from torch.utils.checkpoint import checkpoint


class Deep(nn.Module):
    def __init__(self, width: int, blocks: int, use_checkpoint: bool):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width),
                                                  nn.ReLU()) for _ in range(blocks))
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.use_checkpoint else block(x)
        return x


width, blocks, rows = (2048, 8, 8192) if on_gpu else (256, 4, 256)
x = torch.randn(rows, width, device=device)
peaks, grads = {}, {}
for use_checkpoint in (False, True):
    torch.manual_seed(0)
    deep = Deep(width, blocks, use_checkpoint).to(device)
    with cg.measure_peak(device) as peak:
        deep(x).square().mean().backward()
    peaks[use_checkpoint] = peak.peak_mib
    grads[use_checkpoint] = torch.cat([p.grad.flatten() for p in deep.parameters()])  # every gradient
    print(f"checkpointing {'on ' if use_checkpoint else 'off'}: {peak}")
# Gradients of a deep, unnormalized net are tiny (1e-7 and less here), so an absolute tolerance
# would pass even if one side were all zeros. Compare relative to their size instead.
difference = ((grads[True] - grads[False]).norm() / grads[False].norm()).item()
print(f"gradient norm {grads[False].norm():.2e}; relative difference with checkpointing {difference:.1e}")
assert grads[False].norm() > 0 and grads[False].count_nonzero() > grads[False].numel() // 2
assert difference < 1e-4, "same gradients with and without checkpointing"
if on_gpu:
    assert peaks[True] < peaks[False], "checkpointing should lower the peak"
    print(f"activation checkpointing saved {1 - peaks[True] / peaks[False]:.0%} of the peak")

# %% [markdown]
# ### `expandable_segments`: less fragmentation
#
# After many allocations of varying sizes, the cache can hold enough free memory in total but
# no single block large enough: an out-of-memory error with gigabytes "reserved but unallocated"
# in its message. Setting, **before the first CUDA call** (first cell, or restart the runtime),
#
# ```python
# import os
# os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
# ```
#
# lets the allocator grow segments instead of creating new ones. Use this name:
# PyTorch 2.9 added a device-neutral `PYTORCH_ALLOC_CONF`, but torch 2.9.x silently ignores it
# for this key on CUDA (pytorch/pytorch#183387; torch 2.11 applied it on the course's H100 run
# (2026-11-26)) and releases before 2.9 do not know it, while `PYTORCH_CUDA_ALLOC_CONF` works on
# every version this course supports (PyTorch's out-of-memory message names
# `PYTORCH_CUDA_ALLOC_CONF` in 2.7-2.9, 2.11 and 2.14, but `PYTORCH_ALLOC_CONF` in 2.10, Kaggle's
# version: set `PYTORCH_CUDA_ALLOC_CONF` whatever it says).
#
# A setting that is silently ignored is worse than none, so **confirm it took effect**: the
# allocator reports the settings it applied in `torch.cuda.memory._snapshot()["allocator_settings"]`
# (`cg.allocator_settings(device)`, a dict of every setting; we print the one we change). This
# notebook's CUDA already started, so we try both names in fresh Python processes, where the
# variable is set before CUDA starts:

# %%
import os
import subprocess

settings = cg.allocator_settings(device)  # None on a CPU runtime
print("this process: expandable_segments", settings["expandable_segments"] if settings else "n/a (no CUDA allocator)")
confirm = ("import torch; torch.empty(1, device='cuda'); "
           "print(torch.cuda.memory._snapshot()['allocator_settings']['expandable_segments'])")
if on_gpu:
    applied = {}
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        env = {k: v for k, v in os.environ.items() if not k.endswith("ALLOC_CONF")}
        child = subprocess.run([sys.executable, "-c", confirm], env={**env, name: "expandable_segments:True"},
                               capture_output=True, text=True)
        applied[name] = child.stdout.strip() or child.stderr.strip().splitlines()[-1]
        print(f"{name}=expandable_segments:True -> expandable_segments applied: {applied[name]}")
    assert applied["PYTORCH_CUDA_ALLOC_CONF"] == "True", "the setting this lesson teaches must take effect"
else:
    print("CPU runtime: on a GPU this cell starts two fresh processes, one per variable name, and prints what "
          "the allocator applied (PYTORCH_ALLOC_CONF shows False on torch 2.9.x).")

# %% [markdown]
# ### Memory over one training step, from a snapshot
#
# PyTorch can record every allocation with its stack trace. We record one training step (after
# two warm-up steps, so the optimizer's state already exists) and plot what the tensors hold
# after each allocation and free, relative to the moment before the step: the activations pile
# up in the forward pass; `zero_grad` frees the previous step's gradients (the curve can go below
# zero); the backward pass frees activations as it builds new gradients; and Adam's step adds a
# temporary as large as the parameters (its fast "foreach" version computes a square root of its
# state for all of them at once). Drop the saved file on <https://pytorch.org/memory_viz> to see
# which tensor is which.

# %%
import matplotlib.pyplot as plt

del deep, x, grads  # section 5's checkpointing experiment: not part of this step's memory
if on_gpu:
    model = cg.mlp(in_features, hidden=hidden, depth=depth).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step_batch = torch.randn(512, in_features, device=device), torch.randint(0, 10, (512,), device=device)
    for _ in range(2):
        cg.train_step(model, *step_batch, optimizer)  # warm-up: Adam creates its state here
    torch.cuda.reset_peak_memory_stats(device)
    held_before = torch.cuda.memory_allocated(device)  # the timeline counts from here
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    cg.train_step(model, *step_batch, optimizer)
    torch.cuda.synchronize(device)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._dump_snapshot("memory_snapshot.pickle")
    torch.cuda.memory._record_memory_history(enabled=None)  # stop recording
    timeline = cg.allocated_timeline(snapshot, device.index or 0)
    cg.plot_memory_timeline(timeline, f"one training step, batch 512, MLP depth {depth} (change since before the step)")
    plt.show()
    print(f"{len(timeline)} allocations and frees; at most {max(timeline) / 2**20:.1f} MiB more than before the "
          f"step; peak allocated {torch.cuda.max_memory_allocated(device) / 2**20:.1f} MiB (the model, its "
          "gradients and Adam's state included)")
    # The snapshot and the allocator's own peak count the same tensors: before + the timeline's top is the peak's
    assert held_before + max(timeline) <= torch.cuda.max_memory_allocated(device)
    print("wrote memory_snapshot.pickle: open it at https://pytorch.org/memory_viz")
else:
    print("CPU runtime: snapshots record the CUDA caching allocator, so here is the shape they show (a sketch). "
          "On a GPU runtime this cell plots the measured one.")
    cg.show_figure("step_memory")

# %% [markdown]
# ## Exercise
#
# The cell below creates a tensor and leaks it in three ways. Free it: afterwards nothing may
# refer to it (the check uses the `weakref`).

# %%
leak = torch.randn(512, 512, device=device)
leak_probe = weakref.ref(leak)
cache = {"last": leak}
leak

# %% tags=["solution"]
del leak
cache.clear()
cg.clear_notebook_references()

# %%
cg.checks.released(leak_probe, name="leak")

# %% [markdown]
# ### Exercise 2: make it fit, and prove it
#
# `one_piece_step` computes the gradients of a batch of 4096 in one go. Pretend that batch does
# not fit in this GPU's memory: write `my_step(model, inputs, labels)`, which leaves the same
# gradients in `.grad` while autograd keeps at most half as much activation memory for
# backward (gradient accumulation, above). The check measures that memory with
# `cg.measure_activations`: it counts the tensors autograd saves (the batch itself left out), so
# it works on every runtime, the CPU included. On a GPU it also asks the allocator's peak to fall.
#
# Accumulation keeps the gradients from piece to piece, so it saves memory only where the
# activations outweigh the gradients. With a wider model (hidden width 512) and a batch of 512,
# 4 MiB of activations against 5 MiB of gradients, the same answer *raised* the allocator's peak
# on an H100 (7.3 MiB instead of 6.0). This model is narrow and the batch large:

# %%
def one_piece_step(model, inputs, labels):
    """The gradients of the whole batch, in one forward and one backward pass."""
    F.cross_entropy(model(inputs), labels).backward()


exercise_batch, exercise_hidden = 4096, 256
exercise_model = cg.mlp(in_features, hidden=exercise_hidden, depth=4).to(device)
exercise_inputs = torch.randn(exercise_batch, in_features, device=device)
exercise_labels = torch.randint(0, 10, (exercise_batch,), device=device)
gradient_bytes = 4 * cg.count_parameters(exercise_model)
activation_bytes = exercise_batch * exercise_hidden * 4 * 4  # four hidden layers' outputs, float32
print(f"gradients {gradient_bytes / MIB:.1f} MiB; activations of the whole batch {activation_bytes / MIB:.0f} MiB")
# Two pieces save half the activations; they cost the gradients and, briefly, one more of their size.
assert activation_bytes > 4 * gradient_bytes, "the activations should dominate for accumulation to pay"
my_step = None  # your function goes here


# %% tags=["solution"]
def my_step(model, inputs, labels, pieces=4):
    """The same gradients, accumulated over micro-batches: each piece's activations are freed by its backward."""
    for micro_inputs, micro_labels in zip(inputs.chunk(pieces), labels.chunk(pieces), strict=True):
        (F.cross_entropy(model(micro_inputs), micro_labels) / pieces).backward()


# %%
cg.checks.memory_saving(my_step, one_piece_step, exercise_model, exercise_inputs, exercise_labels, at_most=0.5)

# %% [markdown]
# ## Summary
#
# - *allocated* = live tensors; *reserved* = what PyTorch's cache holds; read peaks with
#   `max_memory_allocated` after `reset_peak_memory_stats` (or `cg.measure_peak`).
# - Training memory = weights + gradients + optimizer state (fixed) + activations (x batch size).
# - `del` frees only when nothing else refers to the tensor; in notebooks also clear the output
#   history and the last traceback (`cg.cleanup(device)` does all of it, then `empty_cache`).
# - On `torch.OutOfMemoryError`: clean up and retry smaller (`cg.find_max_batch_size`), or
#   accumulate gradients (it pays where activations outweigh the gradients), checkpoint
#   activations, use mixed precision, set `expandable_segments`.
#   `cg.measure_activations` shows what autograd keeps for backward, on any device.
#
# Next: **08 · More than one GPU**.
