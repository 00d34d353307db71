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
# # 02 · Tensors and models on the device
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/02_tensors_on_device.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/02_tensors_on_device.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - `torch.device`, creating tensors directly on the GPU, and moving them with `.to()`, `.cuda()`, `.cpu()`;
# - moving a model, and checking where its parameters live;
# - the device-mismatch error, reproduced and fixed;
# - what host-to-device copies cost, and a CPU-vs-GPU matrix product timed correctly;
# - getting results back to Python and NumPy.
#
# **Time:** 30 minutes. **Prerequisites:** lesson 01; tensors and `nn.Module` at the level of the
# PyTorch "60-minute blitz".
#
# The words host, device, kernel, CUDA, cuBLAS, cuDNN and compute capability: [lesson 01's
# glossary](01_enable_gpu_runtime.ipynb).

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
# ## 1. `torch.device`
#
# A device is a type (`"cpu"`, `"cuda"`) and, for GPUs, an index. `"cuda"` means "the current
# GPU", which is `cuda:0` unless you change it.

# %%
# NBVAL_CHECK_OUTPUT
gpu0 = torch.device("cuda", 0)
print(gpu0, "| type:", gpu0.type, "| index:", gpu0.index)
print(torch.device("cpu"), "| index:", torch.device("cpu").index)

# %% [markdown]
# ## 2. Create tensors where they will be used
#
# Pass `device=` to the factory function. Creating on the CPU and then copying works too, but
# pays for a host-to-device copy you did not need.

# %%
a = torch.randn(3, 4, device=device)  # made on the device, no copy
b = torch.randn(3, 4).to(device)  # made on the CPU, then copied
print(a.device, b.device)
assert a.device == b.device == device

# %% [markdown]
# ### `.to()`, `.cuda()`, `.cpu()` and `get_device()`
#
# - `t.to(device)` **returns** a tensor on `device`; it does not change `t`. When `t` is already
#   there, it returns `t` itself, with no copy.
# - `t.cuda()` is `t.to("cuda")` and fails on a CPU runtime; `t.cpu()` is `t.to("cpu")`. Prefer
#   `.to(device)`: the same line then works on every runtime.
# - `t.get_device()` gives the GPU index, or **-1** for a CPU tensor.

# %%
c = torch.arange(4)  # on the CPU
moved = c.to(device)
print("c stays on", c.device, "| moved is on", moved.device)
print("get_device():", c.get_device(), "(CPU) |", moved.get_device())
assert c.device.type == "cpu" and c.get_device() == -1
assert moved.to(device) is moved  # already there: no copy, same object
assert moved.cpu().device.type == "cpu"

# %% [markdown]
# ## 3. Models: `model.to(device)` moves every parameter and buffer
#
# For a module, `.to()` works in place (and returns the module, so chaining is fine). A model
# has no single `.device`: check its parameters.

# %%
from torch import nn

model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
model.to(device)
print("first parameter on:", next(model.parameters()).device)
assert all(p.device == device for p in model.parameters())
cg.checks.on_device(model, device, name="model")

# %% [markdown]
# ## 4. The common error: model and data on different devices
#
# Every input of an operation must be on the same device. The classic bug: the model was moved
# to the GPU, the batch was not. On a GPU runtime the batch below is a CPU tensor; on a CPU
# runtime we use PyTorch's `meta` device (tensors with a shape but no data) to stand in for
# "another device", so you see the same kind of error everywhere.

# %%
other = torch.device("cpu") if device.type == "cuda" else torch.device("meta")
batch = torch.randn(8, 4, device=other)  # forgot to put the batch where the model is
with cg.shows_error(RuntimeError, match="device"):  # shows the error, and the notebook goes on
    model(batch)

# %% [markdown]
# The fix is one `.to(device)` on the batch (in a training loop: on every batch).

# %%
batch = torch.randn(8, 4).to(device)  # the batch goes where the model is
out = model(batch)
print(out.shape, out.device)
assert out.device == device

# %% [markdown]
# ## 5. Host-device copies are not free
#
# A GPU reaches its own memory far faster than the CPU can send it data: the spec sheets give
# 320 GB/s for a T4's memory and 3 to 5 TB/s for an H100 or H200's, while a copy from the CPU
# crosses PCIe, at most 16 GB/s (PCIe 3, T4) to 64 GB/s (PCIe 5, H100) in theory and less in
# practice. Moving data back and forth inside a loop can cost more than the compute.
# We time copies of growing size with `cg.benchmark`, which synchronizes before it reads the
# clock (section 6 shows why that matters).

# %%
if device.type == "cuda":
    copy_gbps = {}
    for mib in (1, 16, 64, 256):
        # cg.copy_bandwidth times `host.to(device)` with cg.benchmark; lesson 05 explains `pinned`.
        copy_gbps[f"{mib} MiB"] = cg.copy_bandwidth(mib, device, pinned=False)
        print(f"{mib:4d} MiB host->device: {copy_gbps[f'{mib} MiB']:.1f} GB/s")
    # Small copies pay a fixed cost per transfer; large ones get closer to the bus speed (from
    # pageable memory, caches and the staging buffer make the exact order vary: read your figures).
    # What physics does guarantee: no PCIe link of a course runtime (PCIe 3 to 5, x16: 16-64 GB/s)
    # moves 100 GB/s. A faster figure would mean the clock stopped before the copy finished.
    assert all(0 < gbps < 100 for gbps in copy_gbps.values()), copy_gbps
    cg.plot_bandwidth({int(size.split()[0]): gbps for size, gbps in copy_gbps.items()},
                      f"host -> {torch.cuda.get_device_name(device)}, pageable memory")
    import matplotlib.pyplot as plt

    plt.show()
else:
    print("CPU runtime: .to('cpu') on a CPU tensor copies nothing, so there is nothing to time. On a GPU this "
          "cell plots the copy bandwidth against the transfer size.")

# %% [markdown]
# ## 6. CPU vs GPU: a matrix product, timed correctly
#
# CUDA is **asynchronous**: `x @ x` queues a kernel and Python moves on immediately.
# `time.time()` around it measures the launch, not the multiplication. Correct timing warms
# up first (the first call pays one-off costs), synchronizes before reading the clock, and
# repeats to report a median. That is what `cg.benchmark` does.

# %%
cg.show_figure("async_timeline")

# %% [markdown]
# Sizes scale with the device so the CPU run stays short.

# %%
import time

n = 4096 if device.type == "cuda" else 1024
x_dev = torch.randn(n, n, device=device)
x_dev @ x_dev  # a first call pays one-off costs (cuBLAS start-up): keep them out of both timings
cg.synchronize(device)  # and make sure nothing is still queued before the naive clock starts

start = time.time()
x_dev @ x_dev  # on a GPU this only queues the kernel
naive = time.time() - start

correct = cg.benchmark(lambda: x_dev @ x_dev, device=device)
print(f"{n}x{n} matmul on {device}: time.time() says {cg.format_seconds(naive)}, benchmark says {correct}")
if device.type == "cuda":
    # The naive number is the launch: a small fraction of the work it pretends to time.
    print(f"time.time() saw {naive / correct.median:.1%} of the real time; the product takes "
          f"{correct.median / naive:,.0f}x longer than the naive number says")
else:
    print("On a CPU the two agree, and that is expected: a CPU operation runs to its end before Python reads the "
          "clock again, so there is no queue to hide the work. On a GPU, time.time() reads only the launch:")
    assert naive > 0.3 * correct.median  # synchronous: the naive clock cannot miss most of the work (noise aside)
cg.compare_with_references("02.naive_timing_share", 100 * naive / correct.median, device,
                           unit="% of the real time", what="what time.time() saw of one product",
                           workload={"size": f"{n}x{n}"})

# %% [markdown]
# `cg.benchmark` is a few lines you can write in any project. In plain PyTorch, three ways:
# - `torch.cuda.synchronize()` before each clock reading, around `time.perf_counter()` (the exercise
#   below asks you to write this one);
# - CUDA **events**: `start.record()` and `end.record()` put timestamps in the GPU's own queue, and
#   `start.elapsed_time(end)` reads the milliseconds between them once `end` has happened;
# - `torch.utils.benchmark.Timer`, PyTorch's own: it synchronizes, warms up and repeats for you.

# %%
import logging

# Importing torch.utils.benchmark on a runtime without CUDA logs "No CUDA runtime is found": harmless, and
# quieted here by raising that one logger's level before the import.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark as torch_benchmark

# Timer runs on one CPU thread unless told otherwise: give it the threads the rest of PyTorch uses.
timer = torch_benchmark.Timer("x @ x", globals={"x": x_dev}, num_threads=torch.get_num_threads())
pytorch_timer = timer.blocked_autorange(min_run_time=0.5)
print(f"torch.utils.benchmark: {cg.format_seconds(pytorch_timer.median)} | cg.benchmark: {correct}")
if device.type == "cuda":
    event_start, event_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    event_start.record()
    x_dev @ x_dev
    event_end.record()
    event_end.synchronize()  # wait until the GPU has passed `event_end`
    print(f"CUDA events: {event_start.elapsed_time(event_end):.3f} ms for one product")
# The same work on the same device takes the same time, give or take noise.
assert 0.25 < pytorch_timer.median / correct.median < 4

# %% [markdown]
# Now the same product on the CPU, side by side. **Predict first:** how many times faster than
# the CPU will a GPU run it? Write your guess below, then run the cell: it prints your figure,
# this runtime's, and the figures measured on the course's GPUs (from the committed GPU reports),
# each with what differs where it was measured on another workload: this ratio divides by the
# CPU, and a 16-core host is not Colab's 2 vCPUs.

# %%
my_prediction = None  # your guess of the GPU's speed-up over the CPU, e.g. 10

# %%
x_cpu = x_dev.cpu()
on_cpu = cg.benchmark(lambda: x_cpu @ x_cpu, device="cpu", repeat=5)
times = {"cpu": on_cpu.median}
if device.type == "cuda":
    times[str(device)] = correct.median
    gain = cg.speedup(on_cpu, correct)
    print(f"{n}x{n} matmul: CPU {on_cpu}, GPU {correct}: the GPU is {gain:.0f}x faster")
    assert gain > 1, "the GPU should beat the CPU on a large matrix product"
else:
    gain = None  # no GPU to compare with here
    print(f"{n}x{n} matmul on the CPU: {on_cpu}. On a GPU runtime this cell adds the GPU and the speedup.")
# The ratio divides by this machine's CPU (its threads): a 16-core host and Colab's 2 vCPUs give two for one GPU.
cg.compare_with_references("02.matmul_gpu_vs_cpu", gain, device, prediction=my_prediction,
                           what=f"float32 matmul ({n}x{n}), GPU speed-up over the CPU",
                           workload={"size": f"{n}x{n}", "CPU threads": torch.get_num_threads()})
tflops = {name: 2 * n**3 / seconds / 1e12 for name, seconds in times.items()}
print("throughput:", {name: f"{value:.2f} TFLOP/s" for name, value in tflops.items()})

cg.bar_seconds(times, f"{n}x{n} float32 matmul (median)", log=True)
import matplotlib.pyplot as plt

plt.show()

# %% [markdown]
# ## 7. Results back to the host
#
# - `.item()` turns a one-element tensor into a Python number (and waits for the GPU).
# - `.cpu().numpy()` for arrays: NumPy only reads CPU memory, so `.numpy()` on a CUDA tensor is
#   a `TypeError` ("can't convert cuda:0 device type tensor to numpy").
# - `.tolist()` for small results.

# %%
total = x_dev.sum()
print("tensor:", total.device, "| .item():", type(total.item()).__name__)
array = x_dev[:2, :3].cpu().numpy()
print("numpy:", array.dtype, array.shape)
assert isinstance(total.item(), float) and array.shape == (2, 3)

# %% [markdown]
# ## 8. `with torch.device(...)`: a default device for a block
#
# Inside the block, factory functions (and `nn` layers' parameters) are created on that device
# without `device=` on each call. Handy for building a model straight on the GPU.

# %%
with torch.device(device):
    inside = torch.zeros(2)
    layer = nn.Linear(2, 2)
print(inside.device, layer.weight.device)
assert inside.device == device and layer.weight.device == device
assert torch.zeros(2).device.type == "cpu"  # outside the block the default is back

# %% [markdown]
# ## Exercise
#
# `model_ex` and `batch_ex` below were built on the CPU. Put both on `target`, then compute
# `out_ex = model_ex(batch_ex)` and run the check cell. As in lesson 01, `target` is the GPU on a
# GPU runtime and PyTorch's `meta` device (shapes, no data) on a CPU one, so that code which leaves
# something on the CPU fails here as it would on a GPU.

# %%
target = device if device.type == "cuda" else torch.device("meta")
model_ex = nn.Linear(4, 3)
batch_ex = torch.randn(5, 4)
out_ex = None  # your result goes here

# %%
cg.checks.on_device(model_ex, target, name="model_ex")
cg.checks.on_device(out_ex, target, name="out_ex")

# %% [markdown]
# ### Exercise 2: time it yourself, correctly
#
# Write `my_timer(fn, device, repeat=10)` in plain PyTorch: call `fn` once to warm up, then time
# `repeat` calls with `time.perf_counter()`, calling `torch.cuda.synchronize()` when `device` is a
# GPU before each clock reading, and return the median in seconds.
#
# The check runs your timer twice. First on a simulated GPU, on any runtime: there `fn` queues
# 5 ms of work and returns at once, as a kernel launch does, and only `torch.cuda.synchronize()`
# waits for it; its first call carries a one-off cost and one timed call a hiccup. A timer that
# skips a synchronization, the warm-up or the median reads a wrong time there, and the check says
# which. Then it compares your figure for `x_dev @ x_dev` on this runtime with `cg.benchmark`'s.

# %%
import statistics


def my_timer(fn, device, repeat=10):
    return None  # your median, in seconds


# %%
cg.checks.timer(my_timer, lambda: x_dev @ x_dev, correct, device)

# %% [markdown]
# ## Summary
#
# - Create tensors with `device=device`; move existing ones with `t = t.to(device)` (tensors
#   are not moved in place; modules are).
# - A model has no `.device`: check `next(model.parameters()).device`.
# - "Expected all tensors to be on the same device" means one input was not moved.
# - Copies between host and GPU cost real time: keep data on the GPU while you work on it.
# - Time GPU code with warm-up, synchronization and repeats (`cg.benchmark`), never a bare
#   `time.time()`.
# - `.item()`, `.cpu().numpy()` and `.tolist()` bring results back to Python.
#
# Next: **03 · Train an MLP**.
