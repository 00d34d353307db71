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
# # 01 · Enable the GPU runtime
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/01_enable_gpu_runtime.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/01_enable_gpu_runtime.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - the words GPU programming uses, in a short glossary;
# - how to keep your own copy of a lesson, and how to switch it to a GPU runtime;
# - how to ask PyTorch which GPU you got: its name, memory, architecture and software versions;
# - whether the PyTorch you have can run on the GPU you got (Kaggle's P100 cannot);
# - Colab's tiers and limits, what a disconnect loses, and what to do on a CPU-only runtime.
#
# **Time:** 30 minutes. **Prerequisites:** basic Python; no PyTorch experience needed yet.
#
# Every lesson runs top to bottom on a GPU runtime *and* on a CPU-only one (slower, smaller sizes).

# %% cellView="form"
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
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## Glossary: the words this course uses
#
# A GPU (graphics processing unit) has thousands of small cores that do the same arithmetic on
# many numbers at once, which is what matrix products and convolutions need. Around it:
#
# - **host** and **device**: the host is the CPU and its memory (RAM), where your Python code
#   runs; a *device* is where a tensor lives and is computed on: the GPU (`cuda`) or the CPU
#   (`cpu`). Data moves between the two over a bus (PCIe) far slower than either memory.
# - **CUDA**: NVIDIA's platform for running programs on its GPUs (the driver, a runtime library,
#   a compiler). PyTorch names NVIDIA GPUs after it: `"cuda:0"` is the first GPU.
# - **kernel**: in this course, one function that runs on the GPU, such as one matrix product.
#   Each PyTorch operation on a GPU tensor *launches* one kernel or a few: the host queues it and
#   goes on. (Not the Jupyter kernel, the Python process behind this notebook, which
#   **Runtime > Restart session** restarts.)
# - **cuBLAS** and **cuDNN**: NVIDIA's libraries of fast kernels, for matrix products (BLAS:
#   basic linear algebra) and for neural-network layers such as convolutions. PyTorch calls them
#   for you; each starts up on its first call, which is why a first call is slow.
# - **compute capability**: a GPU's architecture version (7.5 for a T4, 9.0 for an H100). It
#   decides whether your PyTorch has kernels for that GPU (section 3) and which number formats
#   run fast on it (lesson 06).
#
# The other lessons link back here.
#
# ## 1. Make it yours, then switch the runtime to a GPU
#
# **First, File > Save a copy in Drive.** A notebook opened from a badge is a copy of GitHub's:
# what you type in it is lost when the tab closes. The copy opens in a new tab, saved in your
# Drive (folder "Colab Notebooks"): work there. When you first run a cell, Colab warns "This
# notebook was not authored by Google", once per notebook: choose **Run anyway** (the setup cell
# installs only the course's package; read it first if you like). On Kaggle the badge already
# makes a notebook of your own: **Save Version** keeps it.
#
# In Colab: **Runtime > Change runtime type > Hardware accelerator: T4 GPU > Save**.
# Colab then starts a *new* virtual machine: every variable, every installed package and every
# file under `/content` from the old one is gone, so rerun the notebook from the top.
#
# The free tier gives a **T4** (16 GB on the box, about 15 GB that PyTorch can use; compute
# capability 7.5) when one is free; Colab Pro and pay-as-you-go add the **L4** (24 GB, 8.9), the
# **A100** (40 or 80 GB, 8.0), the **H100** (80 GB, 9.0) and the **G4** (RTX PRO 6000, 96 GB,
# 12.0); when an H100 or A100 is not available Colab may give a G4 or an L4 instead.
#
# **On Kaggle** (the "Open in Kaggle" badge imports the lesson into a new Kaggle notebook): in the
# notebook's right-hand panel, **Settings > Accelerator > GPU T4 x2**, and **Settings > Internet >
# on** (the setup cell downloads `colab_gpu`; both need a phone-verified Kaggle account). Kaggle's
# T4 x2 is the only free place that gives you **two** GPUs: lesson 08 uses both. Do not pick
# Kaggle's **GPU P100**: see section 3.
#
# **The setup cell** (the first code cell of every lesson) installs `colab_gpu`, the course's
# companion package, from PyPI at the release the lesson was written for (`COLAB_GPU`), and only
# when that version is not already importable; pip keeps the runtime's own torch, because the
# package asks only for `torch>=2.7`. It prints one line saying what it did. **On your own
# machine**, install torch and its matching torchvision first (pytorch.org), then once
# `pip install "colab-gpu[lessons]"`, start Jupyter, and every setup cell will say "already installed".
#
# ## 2. Ask the driver: `nvidia-smi`
#
# In a Colab cell you would type `!nvidia-smi`. It lists the GPU, its memory in use, the driver
# version and the highest CUDA version that driver supports. On a CPU runtime the tool does not
# exist, so this cell checks for it first.

# %%
import shutil
import subprocess

if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
else:
    print("nvidia-smi is not installed here: this is a CPU-only runtime.")

# %% [markdown]
# ## 3. Ask PyTorch
#
# `nvidia-smi` says a GPU exists; PyTorch must also be able to *use* it. The CUDA build of
# PyTorch can be installed on a machine without a GPU (as on this course's CI), so always ask:

# %%
print("CUDA build of PyTorch:", torch.version.cuda or "no (CPU-only build)")
print("torch.cuda.is_available():", torch.cuda.is_available())
print("GPUs visible:", torch.cuda.device_count())
# The accelerator PyTorch would use, or None (torch.accelerator, PyTorch 2.7 and later). Without
# check_available=True a CUDA build on a CPU-only machine still answers "cuda".
print("current accelerator:", torch.accelerator.current_accelerator(check_available=True))

# On an Apple-silicon Mac the accelerator is "mps" (the Mac's GPU): the course computes on the CPU there, because
# its GPU sections measure CUDA; the runtime report below says so. get_device() and PyTorch agree on CUDA: the GPU
# is chosen exactly when PyTorch can use one.
assert (device.type == "cuda") == torch.cuda.is_available()

# %% [markdown]
# On a GPU runtime, the device's properties tell you what you got. The memory field is
# `total_memory` (in bytes); older tutorials write `total_mem`, which does not exist.

# %%
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(device)
    print("name:               ", props.name)
    print("compute capability: ", f"{props.major}.{props.minor}")
    print("total memory:       ", f"{props.total_memory / 1024**3:.1f} GiB")
    print("multiprocessors:    ", props.multi_processor_count)
    # cuDNN 9.11+ has no kernels for a P100 or V100 (compute capability < 7.5): PyTorch raises once, on its first
    # look at cuDNN, and answers after, so a rerun prints the version; the runtime report below checks every time.
    try:
        cudnn = torch.backends.cudnn.version()
    except RuntimeError as err:
        cudnn = f"none for this GPU ({str(err).split('. ')[0]})"
    print("cuDNN version:      ", cudnn)
    assert props.total_memory > 0
else:
    print("No GPU: skipping its properties. Everything below still runs, on the CPU.")

# %% [markdown]
# ### Does this PyTorch have code for this GPU?
#
# A GPU's *compute capability* (CC) is its architecture version: 7.5 on a T4, 9.0 on an H100
# (lesson 06 shows how it decides your number formats). A PyTorch wheel carries machine code for a
# list of architectures (`sm_75` is CC 7.5). A GPU older than the list is still *visible*: `torch.cuda.is_available()`
# says True, PyTorch warns "... with CUDA capability sm_60 is not compatible with the current
# PyTorch installation", and the first real operation fails with **"CUDA error: no kernel image
# is available for execution on the device"**. That is what Kaggle's P100 (6.0) does with recent
# PyTorch wheels (their CUDA 12.8 and newer builds start at sm_70 or sm_75, by release: none
# has the P100's 6.0). The fix is a supported GPU
# (on Kaggle: GPU T4 x2), or a PyTorch build that still includes the old architecture.

# %%
arches = torch.cuda.get_arch_list()  # some releases list nothing while no GPU is visible
print("this PyTorch has GPU code for:", " ".join(arches) or "(not listed without a visible GPU)")
gpus = [("P100 (Kaggle)", (6, 0)), ("T4", (7, 5))]
if torch.cuda.is_available():
    gpus.append(("this GPU", torch.cuda.get_device_capability(device)))
for name, cc in gpus:
    verdict = {True: "runs", False: "NO kernels", None: "unknown"}[cg.kernels_for(cc, arches)]
    print(f"{name:14} CC {cc[0]}.{cc[1]}: {verdict}")
if torch.cuda.is_available() and cg.kernels_for(gpus[-1][1], arches) is False:
    print("This GPU is visible but this PyTorch has no kernels for it: the first computation on it will fail with "
          "'no kernel image is available'. Switch to a supported GPU (Kaggle: GPU T4 x2).")

# %% [markdown]
# `colab_gpu` gathers all of this in one report, with advice for the runtime you are on (Colab,
# Kaggle or your own machine). From a terminal, `python -m colab_gpu doctor` prints the same thing.

# %%
report = cg.print_runtime_report()
assert report["cuda_available"] == torch.cuda.is_available()

# %% [markdown]
# ## 4. The common error: asking for a GPU that is not there
#
# Code written for another machine often names a GPU that this runtime lacks: `"cuda"` on a CPU
# runtime, or `"cuda:1"` on Colab's single GPU. PyTorch's own message depends on the case and
# rarely says what to do. Here we ask for the GPU *after* the last one this runtime has
# (`cuda:0` on a CPU runtime, `cuda:1` on a T4):

# %%
missing_gpu = f"cuda:{torch.cuda.device_count()}"
# The error, shown the way a notebook shows it, without stopping "Run all" (cg.shows_error fails the
# cell if the error does not happen). On a CPU-only build of PyTorch it is an AssertionError.
with cg.shows_error((RuntimeError, AssertionError), match="CUDA|NVIDIA|device"):
    torch.zeros(3, device=missing_gpu)

# %% [markdown]
# The fix: ask `cg.get_device()` for the best device that exists (as the setup cell did), or
# ask for a specific one and get an error that says what exists and how to get a GPU:

# %%
try:
    cg.get_device(missing_gpu)
except cg.DeviceNotAvailableError as err:
    print(err)

x = torch.zeros(3, device=device)  # the device that exists
assert x.device.type == device.type

# %% [markdown]
# ## 5. Colab's limits, and what a disconnect loses
#
# | | free | Pro / pay as you go |
# |---|---|---|
# | GPU | T4 when available | T4, L4, A100, H100, G4 (compute units) |
# | idle timeout | about 90 minutes without interaction | longer, with background execution |
# | maximum session | about 12 hours | up to 24 hours |
# | CPU / RAM | 2 vCPUs, about 12 GB | 2+ vCPUs, more RAM on request |
#
# When the runtime disconnects, the virtual machine is gone: variables, models in memory, files
# under `/content`, packages you installed. What survives is the notebook itself and whatever
# you saved to Google Drive (`from google.colab import drive; drive.mount("/content/drive")`).
# Lesson 03 writes training checkpoints there so a disconnect costs minutes, not hours.
#
# **TPU runtimes** are a different accelerator: PyTorch needs `torch_xla` for them, and this
# course does not use them. The runtime report above warns if you picked one by mistake.
#
# **No GPU quota left?** Colab sometimes says "Cannot connect to GPU backend". Every lesson
# still runs on the CPU with smaller problem sizes: read the measured GPU numbers in the
# committed outputs, and come back later or open the lesson on Kaggle (free T4s, within a weekly
# quota of GPU hours).

# %% [markdown]
# ## Exercise
#
# Write `make_ones(where)`, which returns a tensor of 1000 ones created **directly on** `where`
# (with `device=`, no `.to()` copy), and set `gpu_count` to the number of GPUs PyTorch sees (a
# whole number). Then run the check cell.
#
# The check calls `make_ones` twice: for the CPU, where it reads the values, and for `target`. On a
# GPU runtime `target` is the GPU. A CPU runtime has no second device, so there `target` is
# PyTorch's `meta` device (tensors with a shape but no data): either way, a tensor created without
# `device=` lands on the CPU, and a copy made with `.to()` is a call the check sees.

# %%
target = device if device.type == "cuda" else torch.device("meta")


def make_ones(where):
    return None  # your tensor goes here


gpu_count = None  # and the number of GPUs here

# %%
cg.checks.created_on(make_ones, target)
cg.checks.gpu_count(gpu_count)

# %% [markdown]
# ## Summary
#
# - **File > Save a copy in Drive** first, then turn the GPU on with **Runtime > Change runtime
#   type** (Kaggle: **Settings > Accelerator > GPU T4 x2**, Internet on); the runtime restarts from
#   scratch.
# - A GPU older than the architectures of your PyTorch (Kaggle's P100) is visible but fails with
#   "no kernel image is available": `cg.print_runtime_report()` says so.
# - `torch.cuda.is_available()` tells whether PyTorch can use a GPU; `get_device_properties`
#   gives its name, `total_memory` and compute capability.
# - The compute capability (7.5 on a T4) also decides which number formats run fast: lesson 06.
# - Use `cg.get_device()`: the GPU when it exists, the CPU otherwise, and a clear error when you
#   ask for a device that is not there.
# - Save what matters to Drive: a disconnect loses the whole virtual machine.
#
# Next: **02 · Tensors and models on the device**.
