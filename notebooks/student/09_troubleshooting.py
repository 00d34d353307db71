# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
#   jupytext:
#     notebook_metadata_filter: accelerator,colab
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Troubleshooting: the GPU errors everyone meets
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/09_troubleshooting.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/09_troubleshooting.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - to recognise the most common GPU errors in PyTorch on Colab by their real messages;
# - the fix for each: no GPU runtime, device mismatch, CUDA out of memory, CUDA in DataLoader
#   workers, the device-side assert from bad labels, deprecated AMP calls, and driver / CUDA /
#   cuDNN version mismatches.
#
# **Time:** 30 minutes. **Prerequisites:** lessons 01 to 07 (each error is taught in its lesson;
# this is the reference to come back to).

# %%
# Setup: colab_gpu, the course's companion package, at the release this lesson was written for.
# pip installs it only where it is missing or another version (Colab, Kaggle, a new laptop), and
# keeps the runtime's own torch. On Kaggle, turn on Settings > Internet first.
import importlib
import subprocess
import sys

COLAB_GPU = "0.16.0"
try:
    import colab_gpu
    found = getattr(colab_gpu, "__version__", "unknown")
except ImportError:
    found = None
if found != COLAB_GPU:
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"colab-gpu=={COLAB_GPU}"],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install colab-gpu=={COLAB_GPU} (is this runtime online? "
                           f"On Kaggle: Settings > Internet):\n{pip.stderr[-1500:]}")
    for name in [m for m in sys.modules if m.partition(".")[0] == "colab_gpu"]:
        del sys.modules[name]  # a different version imported above: the import below loads the new one
    importlib.invalidate_caches()
print(f"colab_gpu {COLAB_GPU}:", "already installed" if found == COLAB_GPU else f"installed (found: {found})")

import torch

import colab_gpu as cg

device = cg.get_device()
on_gpu = device.type == "cuda"
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. "No CUDA GPUs are available" / "Found no NVIDIA driver on your system" / "Torch not compiled with CUDA enabled"
#
# **Cause:** the runtime has no GPU (Colab's default), or the GPU quota is used up. Asking for
# `"cuda"` anyway fails on the first tensor. The message depends on what is missing: no GPU
# visible ("No CUDA GPUs are available"), no NVIDIA driver at all ("Found no NVIDIA driver on
# your system", a CPU runtime with Colab's CUDA build of PyTorch), or a CPU-only build of
# PyTorch ("Torch not compiled with CUDA enabled", a laptop or a Mac). To show it on every
# runtime, GPU ones included, we run the line in a fresh Python process that is told to see no
# GPU (`CUDA_VISIBLE_DEVICES=""`):

# %%
import os
import subprocess

hide_gpus = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # this child process sees no GPU
child = subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1, device='cuda')"],
                       env=hide_gpus, capture_output=True, text=True)
no_gpu_error = child.stderr.strip().splitlines()[-1]
print(no_gpu_error)
no_gpu_messages = ("No CUDA GPUs are available", "Found no NVIDIA driver on your system",
                   "Torch not compiled with CUDA enabled")
assert child.returncode != 0 and any(message in no_gpu_error for message in no_gpu_messages)

# %% [markdown]
# **Fix:** Runtime > Change runtime type > T4 GPU, then rerun from the top. In code, never hard-code
# `"cuda"`: `cg.get_device()` picks what exists. A close cousin on a GPU runtime is asking for a
# GPU index that does not exist (`"cuda:1"` on a one-GPU T4): "CUDA error: invalid device
# ordinal". Asking `cg.get_device` for a device that does not exist says what does and how to
# get a GPU:

# %%
try:
    cg.get_device(f"cuda:{torch.cuda.device_count()}")
except cg.DeviceNotAvailableError as err:
    message = str(err)
print(message)
assert "Runtime > Change runtime type" in message or "only has" in message

# %% [markdown]
# ## 2. "Expected all tensors to be on the same device"
#
# **Cause:** one input of an operation is on another device: usually the batch was not moved to
# the model's device. Lesson 02, section 4 reproduces it (on a GPU runtime, with this message).
#
# **Fix:** move every batch where the model is, inside the loop: `x = x.to(device, non_blocking=True)`.
# Check a model's device with `next(model.parameters()).device`:

# %%
model = torch.nn.Linear(4, 2).to(device)
print("the model is on:", next(model.parameters()).device)
out = model(torch.randn(3, 4).to(device))
assert out.device == device

# %% [markdown]
# ## 3. "CUDA out of memory. Tried to allocate ..."
#
# **Cause:** the batch (activations), the model, or tensors kept alive by the notebook do not fit
# (lesson 07). On a CPU runtime the equivalent is `DefaultCPUAllocator: can't allocate memory`.

# %%
too_much = 2 * torch.cuda.get_device_properties(device).total_memory if on_gpu else 2**50
allocated_before = torch.cuda.memory_allocated(device) if on_gpu else None
with cg.shows_error(RuntimeError, match="out of memory|can't allocate memory"):
    torch.empty(too_much, dtype=torch.uint8, device=device)

# %% [markdown]
# **Fix:** free what the failed cell and the notebook hold (`cg.cleanup(device)`), then use a
# smaller batch (`cg.find_max_batch_size`), mixed precision (lesson 06), gradient accumulation or
# activation checkpointing (lesson 07). If the message says a lot is "reserved but unallocated",
# set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` before the first CUDA call (lesson 07
# explains why this name and not the newer `PYTORCH_ALLOC_CONF`, and how to confirm it took effect).

# %%
cg.cleanup(device)
print(cg.format_memory(device))
if on_gpu:
    assert torch.cuda.memory_allocated(device) == allocated_before, "the failed allocation left nothing behind"

# %% [markdown]
# ## 4. "Cannot re-initialize CUDA in forked subprocess"
#
# **Cause:** a `Dataset` creates CUDA tensors in `__getitem__` while `DataLoader` workers (forked
# processes) are on, after the notebook already used CUDA (lesson 05). It fails only on a GPU
# runtime; on a CPU runtime there is no CUDA to re-initialize and the cell runs.

# %%
from torch.utils.data import DataLoader, Dataset


class CudaInWorkers(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([float(i)], device=device)  # wrong: CUDA inside a worker


with cg.shows_error(RuntimeError, match="CUDA", raises=on_gpu):  # a CPU runtime has no CUDA to re-initialize
    list(DataLoader(CudaInWorkers(), batch_size=4, num_workers=2))

# %% [markdown]
# **Fix:** return CPU tensors from the dataset and move whole batches in the training loop (with
# `pin_memory=True` and `non_blocking=True`), or keep the data on the GPU and skip workers
# (`cg.DeviceLoader`).
#
# ## 5. "CUDA error: device-side assert triggered"
#
# **Cause:** a kernel on the GPU checked something and failed, most often a **label outside
# `0 .. num_classes-1`** in `cross_entropy` (labels 1..10 instead of 0..9), or an index out of
# range in an embedding. The message is vague, often reported at a later line (CUDA is
# asynchronous), and it **breaks the CUDA context**: every later GPU call fails until you restart
# the runtime. So on a GPU we run it in a separate process; the same bug on the CPU gives the
# clear message right away.

# %%
import torch.nn.functional as F

logits = torch.randn(4, 10)  # 10 classes: valid labels are 0..9
labels = torch.tensor([1, 4, 9, 10])  # 10 is one too many
with cg.shows_error(IndexError, match="out of bounds"):
    F.cross_entropy(logits, labels)

# %%
import os
import subprocess
import textwrap

if on_gpu:
    script = textwrap.dedent("""
        import torch, torch.nn.functional as F
        logits = torch.randn(4, 10, device="cuda")
        F.cross_entropy(logits, torch.tensor([1, 4, 9, 10], device="cuda"))
        torch.cuda.synchronize()
    """)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env={**os.environ, "CUDA_LAUNCH_BLOCKING": "1"})
    lines = [line for line in child.stderr.splitlines() if "assert" in line.lower() or "Error" in line]
    print("\n".join(lines[-4:]))
    assert child.returncode != 0 and "device-side assert" in child.stderr
else:
    print("CPU runtime: the cell above shows the CPU's clear message ('Target 10 is out of bounds'); "
          "on a GPU the same bug is 'CUDA error: device-side assert triggered'.")

# %% [markdown]
# **Fix:** check the labels before training: `assert labels.min() >= 0 and labels.max() < num_classes`.
# To find the failing line on a GPU, rerun with `CUDA_LAUNCH_BLOCKING=1` (errors then surface at
# the call that caused them) or run one batch on the CPU. After the assert, restart the runtime.

# %%
fixed = labels - 1  # labels were 1..10; the classes are 0..9
assert fixed.min() >= 0 and fixed.max() < logits.shape[1]
print("loss with valid labels:", F.cross_entropy(logits, fixed).item())

# %% [markdown]
# ## 6. "FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated"
#
# **Cause:** code written for PyTorch 1.x. The `torch.cuda.amp` namespace still works but warns,
# and will go away. Here is the real warning (the scaler is disabled, so nothing else happens):

# %% tags=["deprecated-demo"]
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.cuda.amp.GradScaler(enabled=False)  # the deprecated spelling, on purpose
print(f"{caught[0].category.__name__}: {caught[0].message}")
assert caught and issubclass(caught[0].category, FutureWarning)

# %% [markdown]
# **Fix:** `torch.amp.GradScaler("cuda")` and `torch.autocast("cuda", dtype=torch.float16)` (lesson 06).

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scaler = torch.amp.GradScaler(device.type, enabled=False)
assert not [w for w in caught if issubclass(w.category, FutureWarning)]
print("torch.amp.GradScaler: no warning")

# %% [markdown]
# ## 7. Driver, CUDA and cuDNN versions
#
# Three pieces must fit together:
# - the **NVIDIA driver** (installed on the machine; `nvidia-smi` shows it and the newest CUDA
#   version it supports);
# - the **CUDA runtime** PyTorch was built with (`torch.version.cuda`, e.g. 12.8 for a `+cu128`
#   wheel). The rule is about the **major** version: since CUDA 11, *minor-version
#   compatibility* lets a program built with CUDA 12.8 run on any driver that supports some
#   CUDA 12.x (driver 525 or newer on Linux), even if `nvidia-smi` shows "CUDA Version: 12.2".
#   A driver older than the major version (a 12.x driver for a `+cu130` wheel) does not work, and
#   some features (PTX compiled at run time, e.g. by Triton) want a driver at least as new as the
#   minor version;
# - **cuDNN**, shipped inside PyTorch's wheels (`torch.backends.cudnn.version()`).
#
# Messages when they do not fit: "The NVIDIA driver on your system is too old", "CUDA driver
# version is insufficient for CUDA runtime version", "cuDNN version incompatibility". On Colab
# the usual cause is `pip install torch` (or a package that depends on a newer torch) replacing
# Colab's matching build with one compiled for a newer CUDA. **Fix:** do not reinstall torch on
# Colab (this course's setup cell installs only `colab_gpu`); if it happened, Runtime >
# Disconnect and delete runtime, then rerun. Your runtime's versions:

# %%
report = cg.runtime_report()
print("PyTorch:", report["torch"], "| built for CUDA:", report["cuda_runtime"], "| cuDNN:", report["cudnn"],
      "| driver:", report["driver"] or "none (no GPU)")
assert report["torch"] == torch.__version__

# %% [markdown]
# ## Exercise
#
# A classmate's batch has labels `[1, 2, 3, 10]` for a 10-class problem and their training
# crashes with a device-side assert. Write `valid_labels(labels, num_classes)` that returns True
# when every label is a valid class index (`0 <= label < num_classes`) and False otherwise.

# %%
valid_labels = None  # your function goes here

# %%
cg.check_label_validator(valid_labels)

# %% [markdown]
# ### Exercise 2: fix an out-of-memory bug, and prove it
#
# A classmate's `predict_all` runs out of GPU memory on a large test set, even with small
# batches: memory grows with every batch. Find why (section 3's causes, and lesson 07), fix it,
# and keep the outputs the same. The check measures what autograd keeps for backward while your
# function runs (`cg.measure_activations`, on every runtime), against the classmate's version.

# %%
def predict_all(model, images, batch_size=64):
    """The model's outputs for every image, batch by batch."""
    outputs = []
    for batch in images.split(batch_size):
        outputs.append(model(batch.to(device)))
    return torch.cat(outputs)


leaky_predict_all = predict_all
eval_model = cg.mlp(64, hidden=256).to(device).eval()
eval_images = torch.randn(4096, 64)

# %%
cg.check_evaluation_memory(predict_all, leaky_predict_all, eval_model, eval_images)

# %% [markdown]
# ## Summary
#
# | message | usual cause | fix |
# |---|---|---|
# | No CUDA GPUs are available / no NVIDIA driver / not compiled with CUDA | no GPU | Runtime > Change runtime type |
# | Expected all tensors to be on the same device | batch not moved | `x.to(device)` in the loop |
# | CUDA out of memory | big batch, leaked refs, graphs kept in evaluation | `cg.cleanup`, smaller batch, no_grad |
# | Cannot re-initialize CUDA in forked subprocess | CUDA tensors in `Dataset` workers | CPU tensors in workers |
# | device-side assert triggered | label out of range | check labels; `CUDA_LAUNCH_BLOCKING=1`; restart |
# | `torch.cuda.amp` FutureWarning | old API | `torch.amp.GradScaler("cuda")`, `torch.autocast` |
# | driver too old / version mismatch | torch reinstalled on Colab | don't reinstall torch; new runtime |
