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
# # 09 · Troubleshooting: the GPU errors everyone meets
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/09_troubleshooting.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/09_troubleshooting.ipynb)
#
# **What you will learn**
# - to find an error by its exact message: this lesson is an atlas of the messages learners meet
#   when PyTorch meets a GPU, grouped by when they happen, each with its cause and its fix;
# - to reproduce most of them on purpose (on every runtime, a CPU one included), so that you
#   recognise them when they are not on purpose;
# - to let the course explain them for you: `cg.explain(error)` and `%load_ext colab_gpu`.
#
# **Time:** 50 minutes. **Prerequisites:** lessons 01 to 08 (each error is taught in its lesson;
# this is the reference to come back to: search this page for your message).
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
on_gpu = device.type == "cuda"
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## How to use this atlas
#
# Search this page (Ctrl+F, or the course site's search) for the first line of your error, without
# the numbers that change (sizes, indices, process ids). Each heading below is a message as
# PyTorch (or Colab and Kaggle) prints it. Under it, a cell raises the error on purpose inside
# `cg.shows_error(..., atlas="key")`, which shows it the way a notebook would, checks that it is
# still the message this atlas knows (a new PyTorch that changes the wording fails this lesson's
# test), prints its cause and fix from the course's one list of errors (`cg.atlas`), and lets
# "Run all" go on. Errors only a GPU, a crashed process or a platform's banner can produce are
# quoted from PyTorch's source (or the platform) and explained with `cg.explain("message")`,
# which also works on an error you paste.

# %%
import os
import subprocess
import sys

import torch.nn.functional as F
from torch import nn

print(f"the atlas knows {len(cg.atlas.ENTRIES)} errors in {len(cg.atlas.GROUPS)} groups:",
      ", ".join(cg.atlas.GROUPS.values()))

# %% [markdown]
# ## Before the atlas: read a whole traceback
#
# The atlas shows each error in a few lines. Your own errors arrive as a full traceback: many
# lines, most of them PyTorch's. Here is a real one, printed whole with `traceback.format_exc()`
# (so that Run all goes on): a batch of CIFAR-10-sized images (3x32x32) reaches a model built for
# MNIST (1x28x28).

# %%
import traceback


def build_model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))


def training_step(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    logits = model(images)
    return logits.sum()


model = build_model().to(device)
images = torch.randn(8, 3, 32, 32, device=device)
shown = ""
try:
    training_step(model, images)
except RuntimeError:
    shown = traceback.format_exc()
    print(shown)  # what a notebook prints when the error stops the cell (without the colours)
assert "mat1 and mat2 shapes cannot be multiplied (8x3072 and 784x10)" in shown and "in training_step" in shown

# %% [markdown]
# Read it from the bottom up:
# 1. **The last line is the error**: its type and its message. That is the line to search for in
#    the atlas below (without the numbers, which change).
# 2. **Then the first frame in your own code**, going up from the bottom: here `training_step`, at
#    `logits = model(images)`. The frames below it (`torch/nn/modules/...`) are PyTorch's and only
#    say how it got there; the message says what to fix: each image is 3 x 32 x 32 = 3,072 values,
#    and the model's first layer expects 28 x 28 = 784.
# 3. **On a GPU, the line can be the wrong one.** CUDA runs kernels asynchronously (lesson 02): an
#    error inside a kernel (an index out of range: "device-side assert triggered") is noticed at a
#    later call that waits for the GPU, so the traceback points at an innocent line such as
#    `loss.item()`. Set `CUDA_LAUNCH_BLOCKING=1` before CUDA starts (Runtime > Restart session,
#    then `os.environ["CUDA_LAUNCH_BLOCKING"] = "1"` in the first cell; in a script,
#    `CUDA_LAUNCH_BLOCKING=1 python train.py`): each kernel then finishes before the next line
#    runs, and the traceback points at the line that failed. It makes everything slower: use it
#    to find the line, then take it out.

# %% [markdown]
# ## 1. Setup and install
#
# ### "No CUDA GPUs are available"
#
# The runtime has no GPU (Colab's default), or the GPU quota is used up, and the code asks for
# `"cuda"` anyway. The message depends on what is missing: no GPU visible ("No CUDA GPUs are
# available"), no NVIDIA driver at all (a CPU runtime with Colab's CUDA build of PyTorch), or a
# CPU-only build of PyTorch (a laptop or a Mac). To show it on every runtime, GPU ones included,
# the line runs in a fresh Python process that is told to see no GPU (`CUDA_VISIBLE_DEVICES=""`):

# %%
hide_gpus = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # this child process sees no GPU
child = subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1, device='cuda')"],
                       env=hide_gpus, capture_output=True, text=True)
no_gpu_error = child.stderr.strip().splitlines()[-1]
print(no_gpu_error)
cg.explain(no_gpu_error)
entry = cg.explain(no_gpu_error, show=False)  # show=False: no print, the atlas entry back, to check it
assert child.returncode != 0 and entry.key in ("no-gpu", "no-driver", "no-cuda-build")

# %% [markdown]
# ### "Found no NVIDIA driver on your system"

# %%
cg.explain("Found no NVIDIA driver on your system")

# %% [markdown]
# ### "Torch not compiled with CUDA enabled"

# %%
cg.explain("Torch not compiled with CUDA enabled")

# %% [markdown]
# ### "CUDA error: no kernel image is available for execution on the device"
#
# The GPU is visible but this build of PyTorch has no machine code for it (lesson 01, section 3):
# Kaggle's P100 with a current PyTorch. `cg.kernels_for` answers it from the build's list:

# %%
cg.explain("CUDA error: no kernel image is available for execution on the device")
print("a P100 (compute capability 6.0) in this build:", cg.kernels_for((6, 0), torch.cuda.get_arch_list()))

# %% [markdown]
# ### "CUDA error: invalid device ordinal"
#
# A GPU index that does not exist (`"cuda:1"` on a one-GPU T4). Asking `cg.get_device` for it says
# what exists instead:

# %%
try:
    cg.get_device(f"cuda:{torch.cuda.device_count()}")
except cg.DeviceNotAvailableError as err:
    message = str(err)
print(message)
assert "Runtime > Change runtime type" in message or "only has" in message
cg.explain("CUDA error: invalid device ordinal")

# %% [markdown]
# ### "The NVIDIA driver on your system is too old"
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
# On Colab the usual cause is `pip install torch` (or a package that depends on a newer torch)
# replacing Colab's matching build with one compiled for a newer CUDA: do not reinstall torch on
# Colab (this course's setup cell installs only `colab_gpu`); if it happened, Runtime >
# Disconnect and delete runtime, then rerun. Your runtime's versions:

# %%
report = cg.runtime_report()
print("PyTorch:", report["torch"], "| built for CUDA:", report["cuda_runtime"], "| cuDNN:", report["cudnn"],
      "| driver:", report["driver"] or "none (no GPU)")
assert report["torch"] == torch.__version__
cg.explain("The NVIDIA driver on your system is too old")

# %% [markdown]
# ## 2. Moving tensors and models
#
# ### "Expected all tensors to be on the same device"
#
# One input of an operation is on another device: usually the batch was not moved to the model's
# device. On a GPU runtime the cell below makes it so; a CPU runtime has no second device, so a
# model on `meta` (shapes, no data) stands in for the GPU, and PyTorch words it "Tensor on device
# meta is not on the expected device cpu!" (or the reverse). Check a model's device with
# `next(model.parameters()).device`:

# %%
elsewhere = device if on_gpu else torch.device("meta")  # where the model is; the batch stays on the CPU
model = nn.Linear(4, 2).to(elsewhere)
print("the model is on:", next(model.parameters()).device)
with cg.shows_error(RuntimeError, atlas="same-device"):
    model(torch.randn(3, 4))  # made on the CPU, never moved
model = nn.Linear(4, 2).to(device)
assert model(torch.randn(3, 4).to(device)).device == device  # the fix: the batch goes where the model is

# %% [markdown]
# ### "mat1 and mat2 shapes cannot be multiplied"

# %%
fashion_batch = torch.randn(4, 1, 28, 28)  # four FashionMNIST images, as a DataLoader gives them
with cg.shows_error(RuntimeError, atlas="shapes-multiplied"):
    nn.Linear(28 * 28, 10)(fashion_batch)  # unflattened: the last dimension, 28, meets 784
logits = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))(fashion_batch)  # the fix: flatten first
print("flattened first, the logits have shape", tuple(logits.shape))

# %% [markdown]
# ### "mat1 and mat2 must have the same dtype"

# %%
import numpy as np

features = torch.from_numpy(np.random.rand(3, 4))  # NumPy's default: float64
with cg.shows_error(RuntimeError, atlas="same-dtype"):
    nn.Linear(4, 2)(features)

# %% [markdown]
# ### "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"
#
# The common form: a CPU batch (`torch.FloatTensor`) reaches a convolution on the GPU (the batch
# was not moved). The reverse, "Input type (torch.cuda.FloatTensor) and weight type
# (torch.FloatTensor)", means the model is still on the CPU. The same check fires for a dtype
# mismatch, which every runtime can show:

# %%
with cg.shows_error(RuntimeError, atlas="input-weight-type"):
    nn.Conv2d(3, 8, 3)(torch.randn(1, 3, 16, 16, dtype=torch.float64))

# %% [markdown]
# ### "can't convert cuda:0 device type tensor to numpy"
#
# On a GPU the message names `cuda:0`; a `meta` tensor (shape and dtype, no data anywhere) raises
# the same message on every runtime:

# %%
with cg.shows_error(TypeError, atlas="numpy-device"):
    torch.ones(3, device="meta").numpy()

# %% [markdown]
# ### "Can't call numpy() on Tensor that requires grad"

# %%
weights = torch.ones(3, requires_grad=True)
with cg.shows_error(RuntimeError, atlas="numpy-grad"):
    (weights * 2).numpy()

# %% [markdown]
# ### "view size is not compatible with input tensor's size and stride"
#
# Flattening a `channels_last` batch (lesson 04) with `view`:

# %%
images = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
with cg.shows_error(RuntimeError, atlas="view-stride"):
    images.view(2, -1)
assert images.reshape(2, -1).shape == (2, 192)  # the fix

# %% [markdown]
# ## 3. Training
#
# ### "element 0 of tensors does not require grad and does not have a grad_fn"

# %%
model = nn.Linear(4, 2)
inputs, targets = torch.randn(3, 4), torch.tensor([0, 1, 0])
with torch.no_grad():  # left over from an evaluation cell
    loss = F.cross_entropy(model(inputs), targets)
with cg.shows_error(RuntimeError, atlas="no-grad-fn"):
    loss.backward()

# %% [markdown]
# ### "Trying to backward through the graph a second time"

# %%
running = 0
with cg.shows_error(RuntimeError, atlas="backward-twice"):
    for _ in range(2):
        loss = F.cross_entropy(model(inputs), targets)
        running = running + loss  # the fix: running + loss.detach()
        running.backward()

# %% [markdown]
# ### "one of the variables needed for gradient computation has been modified by an inplace operation"

# %%
hidden = torch.sigmoid(model(inputs))  # sigmoid saves its output for the backward pass
hidden.mul_(2)  # ...which this overwrites
with cg.shows_error(RuntimeError, atlas="inplace-modified"):
    hidden.sum().backward()

# %% [markdown]
# ### "expected target dtype to be Long or Byte, but got Float"
#
# The last word names the labels' dtype: `Int` for int32 labels, `Double` for float64 ones. Older
# releases word it "expected scalar type Long but found Float" (lesson 03 quotes it), and on a
# GPU some releases name the kernel instead, `"nll_loss_forward_reduce_cuda_kernel_2d_index" not
# implemented for 'Float'`; the atlas knows each form:

# %%
with cg.shows_error(RuntimeError, atlas="target-dtype"):
    F.cross_entropy(model(inputs), targets.float())
for older in ("RuntimeError: expected scalar type Long but found Float",
              "RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Int'"):
    assert cg.explain(older, show=False).key == "target-dtype"

# %% [markdown]
# ### "0D or 1D target tensor expected, multi-target not supported"

# %%
with cg.shows_error(RuntimeError, atlas="multi-target"):
    F.cross_entropy(model(inputs), targets.view(-1, 1))  # labels of shape (batch, 1)

# %% [markdown]
# ### "CUDA error: device-side assert triggered"
#
# A kernel on the GPU checked something and failed, most often a **label outside
# `0 .. num_classes-1`** in `cross_entropy` (labels 1..10 instead of 0..9), or an index out of
# range in an embedding. The message is vague, often reported at a later line (CUDA is
# asynchronous), and it **breaks the CUDA context**: every later GPU call fails until you restart
# the runtime. So on a GPU it runs in a separate process; the same bug on the CPU gives the clear
# message right away, and the atlas knows both.

# %%
logits = torch.randn(4, 10)  # 10 classes: valid labels are 0..9
labels = torch.tensor([1, 4, 9, 10])  # 10 is one too many
with cg.shows_error(IndexError, atlas="device-assert"):
    F.cross_entropy(logits, labels)

# %%
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
    assert child.returncode != 0 and cg.explain(child.stderr, show=False).key == "device-assert"
else:
    print("CPU runtime: the cell above shows the CPU's clear message ('Target 10 is out of bounds'); "
          "on a GPU the same bug is 'CUDA error: device-side assert triggered'.")
fixed = labels - 1  # labels were 1..10; the classes are 0..9
assert fixed.min() >= 0 and fixed.max() < logits.shape[1]
print("loss with valid labels:", F.cross_entropy(logits, fixed).item())

# %% [markdown]
# ### "Boolean value of Tensor with more than one value is ambiguous"

# %%
with cg.shows_error(RuntimeError, atlas="ambiguous-bool"):
    if logits.argmax(dim=1) == labels:  # several answers: which one decides?
        print("all correct")

# %% [markdown]
# ## 4. Data loading and workers
#
# ### "stack expects each tensor to be equal size"

# %%
from torch.utils.data import DataLoader, Dataset

mixed_sizes = [(torch.zeros(3, 32, 32), 0), (torch.zeros(3, 28, 28), 1)]  # photos of different sizes
with cg.shows_error(RuntimeError, atlas="stack-sizes"):
    next(iter(DataLoader(mixed_sizes, batch_size=2)))

# %% [markdown]
# ### "DataLoader worker (pid(s) ...) exited unexpectedly"
#
# The worker's own error is printed above this line: read that one first.

# %%
cg.explain("RuntimeError: DataLoader worker (pid(s) 6662) exited unexpectedly")

# %% [markdown]
# ### "Can't get attribute 'worker' on <module '__main__'>"
#
# Lesson 08 shows it from a real child process (a function defined in the notebook, sent to a
# process started with "spawn").

# %%
cg.explain("AttributeError: Can't get attribute 'worker' on <module '__main__' (built-in)>")

# %% [markdown]
# ### "Cannot re-initialize CUDA in forked subprocess"
#
# A `Dataset` creates CUDA tensors in `__getitem__` while `DataLoader` workers (forked processes)
# are on, after the notebook already used CUDA (lesson 05). It fails only on a GPU runtime; on a
# CPU runtime there is no CUDA to re-initialize and the cell runs.

# %%
class CudaInWorkers(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([float(i)], device=device)  # wrong: CUDA inside a worker


with cg.shows_error(RuntimeError, raises=on_gpu, atlas="fork-cuda"):  # a CPU runtime has no CUDA to re-initialize
    # fork by name: Python 3.14 starts workers with forkserver, which would fail first on pickling this class
    list(DataLoader(CudaInWorkers(), batch_size=4, num_workers=2, multiprocessing_context="fork"))
if not on_gpu:
    cg.explain("Cannot re-initialize CUDA in forked subprocess")

# %% [markdown]
# ## 5. Memory
#
# ### "CUDA out of memory. Tried to allocate"
#
# The batch (activations), the model, or tensors kept alive by the notebook do not fit
# (lesson 07). On a CPU runtime the equivalent is `DefaultCPUAllocator: can't allocate memory`.

# %%
too_much = 2 * torch.cuda.get_device_properties(device).total_memory if on_gpu else 2**50
allocated_before = torch.cuda.memory_allocated(device) if on_gpu else None
with cg.shows_error(RuntimeError, atlas="cuda-oom"):
    torch.empty(too_much, dtype=torch.uint8, device=device)

# %% [markdown]
# Free what the failed cell and the notebook hold (`cg.cleanup(device)`), then use a smaller
# batch (`cg.find_max_batch_size`), mixed precision (lesson 06), gradient accumulation or
# activation checkpointing (lesson 07). If the message says a lot is "reserved but unallocated",
# set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` before the first CUDA call (lesson 07
# explains why this name and not the newer `PYTORCH_ALLOC_CONF`, and how to confirm it took effect).

# %%
cg.cleanup(device)
print(cg.format_memory(device))
if on_gpu:
    assert torch.cuda.memory_allocated(device) == allocated_before, "the failed allocation left nothing behind"

# %% [markdown]
# ### "Invalid device argument 0: did you call init?"
#
# PyTorch starts CUDA at the first GPU tensor or kernel. A few calls do not start it: in a fresh
# kernel, `torch.cuda.reset_peak_memory_stats(0)` before any GPU tensor fails with this message
# (and `torch.cuda.memory_allocated()` quietly answers 0). `cg.get_device()` starts CUDA, which is
# why this notebook cannot show it.

# %%
cg.explain("RuntimeError: Invalid device argument 0: did you call init?")

# %% [markdown]
# ### "CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"

# %%
cg.explain("CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")

# %% [markdown]
# ## 6. Precision
#
# ### "`torch.cuda.amp.GradScaler(args...)` is deprecated"
#
# Code written for PyTorch 1.x. The `torch.cuda.amp` namespace still works but warns (a
# `FutureWarning`, not an error), and will go away. Here is the real warning (the scaler is
# disabled, so nothing else happens), then the spelling that does not warn:

# %% tags=["deprecated-demo"]
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.cuda.amp.GradScaler(enabled=False)  # the deprecated spelling, on purpose
warning = f"{caught[0].category.__name__}: {caught[0].message}"
print(warning)
cg.explain(warning)
assert issubclass(caught[0].category, FutureWarning) and cg.explain(warning, show=False).key == "gradscaler-deprecated"

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scaler = torch.amp.GradScaler(device.type, enabled=False)
assert not [w for w in caught if issubclass(w.category, FutureWarning)]
print("torch.amp.GradScaler: no warning")

# %% [markdown]
# ### "Got unsupported ScalarType BFloat16"

# %%
with cg.shows_error(TypeError, atlas="bf16-numpy"):
    torch.ones(3, dtype=torch.bfloat16).numpy()  # an output computed under bf16 autocast

# %% [markdown]
# ### "value cannot be converted to type at::Half without overflow"

# %%
scores = torch.zeros(4, dtype=torch.float16)
padding = torch.tensor([False, False, True, True])
with cg.shows_error(RuntimeError, atlas="half-overflow"):
    scores.masked_fill(padding, -1e9)  # the fix: torch.finfo(scores.dtype).min
print(scores.masked_fill(padding, torch.finfo(scores.dtype).min))

# %% [markdown]
# ### "Attempting to unscale FP16 gradients."

# %%
half_model = nn.Linear(2, 2).half()  # the whole model in float16: not what mixed precision means
half_optimizer = torch.optim.SGD(half_model.parameters(), lr=0.1)
half_scaler = torch.amp.GradScaler("cpu")
half_scaler.scale(half_model(torch.ones(1, 2, dtype=torch.float16)).float().sum()).backward()
with cg.shows_error(ValueError, atlas="unscale-fp16"):
    half_scaler.unscale_(half_optimizer)

# %% [markdown]
# ### "you have used mix of the legacy and new APIs to set the TF32 status"
#
# TF32 switched on with PyTorch 2.9's `fp32_precision` alone (or the legacy `allow_tf32` flag
# set after `torch.set_float32_matmul_precision`); the readers then refuse, and `torch.compile`
# reads them (lesson 06, section 5). Older PyTorch has no `fp32_precision`, so there the cell
# has nothing to show.

# %%
new_tf32_api = hasattr(torch.backends.cuda.matmul, "fp32_precision")  # PyTorch 2.9 and later
with cg.restored_backend_settings():  # this notebook's TF32 settings come back after the demo
    with cg.shows_error(RuntimeError, raises=new_tf32_api, atlas="tf32-mixed-api"):
        if new_tf32_api:
            torch.backends.cuda.matmul.fp32_precision = "tf32"  # the new API alone...
        torch.get_float32_matmul_precision()  # ...then what torch.compile reads
    cg.set_tf32(True)  # the fix: set_float32_matmul_precision("high") and cudnn.allow_tf32: every reader agrees
    print("after cg.set_tf32(True):", torch.get_float32_matmul_precision())

# %% [markdown]
# ### "No available kernel. Aborting execution."
#
# `scaled_dot_product_attention` held to one kernel (`sdpa_kernel`) that refuses the inputs: here the
# CPU's FlashAttention, which takes no dropout. On a T4, flash refuses everything (lesson 14, section 1).

# %%
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

attention_input = torch.randn(1, 2, 8, 16)  # (batch, heads, tokens, head_dim), on the CPU on every runtime
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the kernels' reasons come as warnings first: lesson 14 prints them
    with cg.shows_error(RuntimeError, atlas="sdpa-no-kernel"):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(attention_input, attention_input, attention_input, dropout_p=0.1)

# %% [markdown]
# ### "FlashAttention only supports Ampere GPUs or newer."
#
# From the flash-attn package (`attn_implementation="flash_attention_2"`) on a T4; the course does not
# install it, so paste the message into `cg.explain`.

# %%
cg.explain("RuntimeError: FlashAttention only supports Ampere GPUs or newer.")

# %% [markdown]
# ## 7. Saving and loading
#
# ### "Weights only load failed"

# %%
import io

buffer = io.BytesIO()
torch.save({"weights": model.state_dict(), "class_counts": np.array([60, 40])}, buffer)  # a NumPy array inside
buffer.seek(0)
with cg.shows_error(Exception, atlas="weights-only"):  # pickle.UnpicklingError
    torch.load(buffer)

# %% [markdown]
# ### "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False"

# %%
cg.explain("RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False")

# %% [markdown]
# ### 'Unexpected key(s) in state_dict: "module.weight"'
#
# Weights saved from a `DataParallel` or DDP wrapper (lesson 08; a `torch.compile` wrapper adds
# `_orig_mod.` the same way, lesson 11):

# %%
wrapped = nn.DataParallel(nn.Linear(4, 2))
with cg.shows_error(RuntimeError, atlas="state-dict-keys"):
    nn.Linear(4, 2).load_state_dict(wrapped.state_dict())
print(nn.Linear(4, 2).load_state_dict(wrapped.module.state_dict()))  # the fix: the inner model's weights

# %% [markdown]
# ### "size mismatch for weight: copying a param with shape"

# %%
with cg.shows_error(RuntimeError, atlas="size-mismatch"):
    nn.Linear(4, 3).load_state_dict(nn.Linear(4, 2).state_dict())  # 3 classes now, 2 when saved

# %% [markdown]
# ### "Some weights of LlamaForSequenceClassification were not initialized from the model checkpoint"
#
# A warning from Hugging Face `transformers` when it loads a checkpoint into a class with layers the
# checkpoint lacks:

# %%
cg.explain("Some weights of LlamaForSequenceClassification were not initialized from the model checkpoint at "
           "meta-llama/Llama-3.2-1B and are newly initialized: ['score.weight']")

# %% [markdown]
# ## 8. Multi-GPU and torchrun
#
# ### "Default process group has not been initialized"

# %%
import torch.distributed as dist

with cg.shows_error(ValueError, atlas="no-process-group"):
    dist.all_reduce(torch.ones(1))  # a DDP script run with python instead of torchrun

# %% [markdown]
# ### "environment variable RANK expected, but not set"

# %%
with cg.shows_error(ValueError, atlas="env-rank"):
    dist.init_process_group("gloo", init_method="env://")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, ...

# %% [markdown]
# ### "EADDRINUSE: address already in use"
#
# A rendezvous port held by a previous run that is still alive; here, two stores on one port:

# %%
import socket

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]  # a port that was free a moment ago
first = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
with cg.shows_error(RuntimeError, atlas="address-in-use"):  # torch.distributed.DistNetworkError
    dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
del first

# %% [markdown]
# ### "Expected to have finished reduction in the prior iteration before starting a new one"

# %%
cg.explain("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.")

# %% [markdown]
# ### "FSDP expects uniform original parameter dtype but got"
#
# FSDP2 (lesson 15) gathers each unit's weights as one buffer: one dtype per `fully_shard` call.

# %%
cg.explain("AssertionError: FSDP expects uniform original parameter dtype but got {torch.float16, torch.float32}")

# %% [markdown]
# ## 9. torch.compile
#
# ### "No working C++ compiler found"
#
# Reproduced by pointing Inductor at a compiler that does not exist (lesson 11, section 7):

# %%
from torch._inductor import config as inductor_config


def scaled_cosine(x):
    return torch.cos(x) * 2


with inductor_config.patch({"cpp.cxx": ("no-such-compiler++",)}):
    with cg.shows_error(RuntimeError, atlas="no-cxx"):
        torch.compile(scaled_cosine)(torch.ones(4))  # a CPU tensor: C++ code, on every runtime

# %% [markdown]
# ### "which is too old to be supported by the triton GPU compiler"

# %%
cg.explain("RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, "
           "which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0")

# %% [markdown]
# ## 10. Notebook platforms (Colab and Kaggle)
#
# These are banners and pip messages, then the errors learners report most on Colab and Kaggle
# (issue threads, 2024-2026; most need a GPU, two GPUs or a full disk): paste them into
# `cg.explain`.
#
# ### "You cannot currently connect to a GPU due to usage limits in Colab"

# %%
cg.explain("You cannot currently connect to a GPU due to usage limits in Colab")

# %% [markdown]
# ### "You are connected to a GPU runtime, but not utilizing the GPU"

# %%
cg.explain("You are connected to a GPU runtime, but not utilizing the GPU")

# %% [markdown]
# ### "Your session crashed after using all available RAM"

# %%
cg.explain("Your session crashed after using all available RAM")

# %% [markdown]
# ### "Could not find a version that satisfies the requirement"

# %%
cg.explain("ERROR: Could not find a version that satisfies the requirement colab-gpu (from versions: none)")

# %% [markdown]
# ### "Cuda failure 217 'peer access is not supported between these two devices'"
#
# Kaggle's T4 x2 at the first `all_reduce` of a DDP script (lesson 08):

# %%
cg.explain('NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details) '
           "... Cuda failure 217 'peer access is not supported between these two devices'")

# %% [markdown]
# ### "NCCL error: unhandled cuda error"

# %%
cg.explain('RuntimeError: NCCL Error 1: unhandled cuda error')

# %% [markdown]
# ### "Watchdog caught collective operation timeout"

# %%
cg.explain('[Rank 1] Watchdog caught collective operation timeout: '
           'WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600005 milliseconds before timing out.')

# %% [markdown]
# ### "Your setup doesn't support bf16/gpu"
#
# bf16 on a T4 (compute capability 7.5), three ways:

# %%
cg.explain("ValueError: Your setup doesn't support bf16/gpu.")

# %% [markdown]
# ### "does not support bfloat16 compilation natively, skipping"

# %%
cg.explain('UserWarning: Tesla T4 does not support bfloat16 compilation natively, skipping')

# %% [markdown]
# ### "'.bf16' requires .target sm_80 or higher"

# %%
cg.explain('RuntimeError: Internal Triton PTX codegen error: ptxas '
           "error : Feature '.bf16' requires .target sm_80 or higher")

# %% [markdown]
# ### "operator torchvision::nms does not exist"
#
# A runtime whose packages a `pip install` changed:

# %%
cg.explain('RuntimeError: operator torchvision::nms does not exist')

# %% [markdown]
# ### "numpy.dtype size changed, may indicate binary incompatibility"

# %%
cg.explain('ValueError: numpy.dtype size changed, may indicate binary '
           'incompatibility. Expected 96 from C header, got 88 from PyObject')

# %% [markdown]
# ### "DataLoader worker (pid 1234) is killed by signal: Bus error"
#
# Shared memory, disk and the GPU's own memory:

# %%
cg.explain('RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error.')

# %% [markdown]
# ### "[Errno 28] No space left on device"

# %%
cg.explain("OSError: [Errno 28] No space left on device")  # while the Hugging Face cache fills

# %% [markdown]
# ### "CUDA error: an illegal memory access was encountered"

# %%
cg.explain('RuntimeError: CUDA error: an illegal memory access was encountered')

# %% [markdown]
# ## 11. Let the course explain: `cg.explain` and `%load_ext colab_gpu`
#
# `cg.explain(error)` takes an exception (or its text) and prints the atlas's cause and fix, and
# nothing for an error the atlas does not know; `cg.explain(error, show=False)` prints nothing and
# returns the error's atlas entry (None when unknown), for a check. `%load_ext colab_gpu` does it
# for every error in the notebook: after the usual traceback of an error the atlas knows, it
# prints the explanation (and `cg.shows_error` adds it to the errors it shows). Every lesson
# loads it in its second cell, so it has been on since the start of this one; in a notebook of
# your own, put `%load_ext colab_gpu` after the imports. `%unload_ext colab_gpu` switches it off.

# %%
with cg.shows_error(RuntimeError):  # no atlas= here: the extension recognises the error by itself
    nn.Linear(4, 2)(torch.randn(3, 5))
unknown = KeyError("label")
assert cg.explain(unknown, show=False) is None  # unknown errors pass through untouched

# %% [markdown]
# ## Exercise
#
# A classmate's batch has labels `[1, 2, 3, 10]` for a 10-class problem and their training
# crashes with a device-side assert. Write `valid_labels(labels, num_classes)` that returns True
# when every label is a valid class index (`0 <= label < num_classes`) and False otherwise.

# %%
valid_labels = None  # your function goes here

# %% tags=["solution"]
def valid_labels(labels: torch.Tensor, num_classes: int) -> bool:
    return bool(labels.min() >= 0 and labels.max() < num_classes)


# %%
cg.checks.label_validator(valid_labels)

# %% [markdown]
# ### Exercise 2: fix an out-of-memory bug, and prove it
#
# A classmate's `predict_all` runs out of GPU memory on a large test set, even with small
# batches: memory grows with every batch. Find why (section 5's causes, and lesson 07), fix it,
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


# %% tags=["solution"]
def predict_all(model, images, batch_size=64):
    """The model's outputs for every image, batch by batch, with no graph recorded."""
    outputs = []
    with torch.inference_mode():  # each output held a graph with its batch's activations, until the end
        for batch in images.split(batch_size):
            outputs.append(model(batch.to(device)))
    return torch.cat(outputs)


# %%
cg.checks.evaluation_memory(predict_all, leaky_predict_all, eval_model, eval_images)

# %% [markdown]
# ## Summary
#
# - Search this page for the first line of your message; every heading is a message as PyTorch
#   or the platform prints it, with its cause and fix underneath, grouped by when it happens.
# - The ones learners meet first: no GPU runtime (setup), tensors on two devices and shape or dtype
#   mismatches (moving tensors), float or out-of-range labels (training), workers and CUDA
#   (data), out of memory, deprecated `torch.cuda.amp` names (precision), `weights_only` and
#   `module.` keys (saving), process groups and ports (multi-GPU).
# - `cg.explain(error)` prints the cause and fix of an error (or pasted message) the atlas knows;
#   `%load_ext colab_gpu` does it for every error of the notebook.
# - The atlas lives in `colab_gpu/errors/atlas.py`: one list that this lesson, `cg.explain` and the
#   extension share.
