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
# # 10 · Find the bottleneck: torch.profiler
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/10_profiler.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/10_profiler.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - to profile a few training steps with `torch.profiler`: CPU and CUDA activities, a
#   `schedule`, and `record_function` labels for data, forward, backward and the optimizer step;
# - to read `key_averages()` as two views, the kernels the GPU ran and the operators that
#   launched them, and to open a trace in Perfetto;
# - to name a step's **regime** from the profiler's events and the step timed without it:
#   input-bound, launch-bound, GPU-bound (in matmuls, element-wise chains or tiny kernels), or
#   CPU-bound on a CPU runtime, and which fixes can pay in each;
# - to count a step's floating-point work with `FlopCounterMode`;
# - to see the classic bottlenecks in a profile (a slow input pipeline, a host-device sync
#   every step, many tiny operations) and fix each, measured before and after;
# - to find the bottleneck of a loop you did not write, fix it, and measure the fix;
# - to read a step's numbers yourself: name its regime, choose a lever, apply it, re-measure;
# - why `nvidia-smi`'s "GPU utilisation" is not efficiency.
#
# **Time:** 80 minutes. **Prerequisites:** lessons 03 (the training loop) and 05 (feeding the GPU).
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
on_gpu = device.type == "cuda"
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. Why profile
#
# "My GPU utilisation is low, what do I change?" Timing the whole step (lesson 02) says *how
# long*; a profile says *where* the time goes. A training step has four parts: fetching the
# batch, the forward pass, the backward pass and the optimizer step. On a GPU the CPU only
# *queues* kernels and the GPU runs them later (lesson 02's timeline), so a profile records
# two timelines: what the CPU did (Python, PyTorch operators, CUDA API calls) and what the
# GPU ran (kernels, copies). The fix depends on which part is slow, and on which timeline.
#
# ## 2. Profile a few steps
#
# `torch.profiler.profile` records everything inside its `with` block. Three details matter:
# - `activities`: `ProfilerActivity.CPU`, plus `ProfilerActivity.CUDA` on a GPU;
# - a `schedule`: skip `wait` steps, run `warmup` steps (the profiler's own start-up is not
#   measured), then record `active` steps, once (`repeat=1`); `prof.step()` ends each step;
# - `record_function("name")` labels a region, so the table and the trace show it by name.

# %%
import os

from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader
from torchvision.transforms import v2

# Kineto, the profiler's C++ library, writes "profiler_start"/"profiler_stop" lines to stderr at every profile
# (and "gpuGetDeviceCount failed" on a CPU). Level 6 silences it; its ERROR lines too, so unset this variable
# when a profile is missing its GPU kernels and you want to know why.
os.environ["KINETO_LOG_LEVEL"] = "6"

cg.seed_everything(0)
data = cg.load_cifar10()
images, labels = data.train_images[:2048], data.train_labels[:2048]  # uint8 images, as stored
model = cg.small_cnn(3, 10, width=32 if on_gpu else 16).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
augment = v2.Compose([v2.RandomHorizontalFlip(), v2.ToDtype(torch.float32, scale=True)])
loader = DataLoader(cg.EncodedImages(images, labels, augment), batch_size=128, shuffle=True)  # decode per sample

activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
wait, warmup, active = 1, 1, 3
with profile(activities=activities, schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
             acc_events=True) as prof:  # acc_events: keep every cycle's events (torch 2.11 warns otherwise)
    batches = iter(loader)
    for _ in range(wait + warmup + active):
        with record_function("data"):
            inputs, targets = next(batches)
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        with record_function("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function("step"):
            optimizer.step()
        prof.step()
print(f"ran {wait + warmup + active} steps of {loader.batch_size} JPEG images on {device}; the profile keeps the "
      f"{active} active ones ({active * loader.batch_size} images)")

# %% [markdown]
# (On a CPU runtime with PyTorch's CUDA build, the profiler may print a line about
# `gpuGetDeviceCount`: it looked for a GPU and found none. It is harmless.)
#
# ## 3. Read the table: operators and kernels
#
# `prof.key_averages()` groups the events by name. Sort by **self** time (the time spent in
# an operator itself, not in the operators it calls) on the device that matters: the GPU's
# kernels on a GPU, the CPU otherwise. "Total" times count a region and everything inside it,
# so our four labels and `ProfilerStep*` sit at the top of a total-time sort and hide the
# operators.
#
# On a GPU the table mixes two kinds of rows, and they count the same time twice:
# - **operators** the CPU called (`aten::convolution_backward`): an operator's "Self CUDA" time
#   is the time of the kernels it launched;
# - **kernels** the GPU ran (`void cudnn::bn_bw_1C11_kernel_new...`), each a row of its own.
#
# So one table's "Self CUDA %" column adds up to more than 100% (127% in the top 12 rows on an
# H100). Read it as two views: the kernels (what the GPU ran; they add up to 100%) and the
# operators (which line of your code launched them). The profiler also draws each
# `record_function` label on the GPU timeline (a "gpu_user_annotation" row, so that the trace
# shows the phases over the kernels), spanning the phase with its idle gaps: those rows are
# neither view. The rows of `key_averages()` filter like any list: on a GPU the cell below
# prints each view's top rows; a CPU runtime runs no kernels, so there it prints the one table.

# %%
from torch.autograd import DeviceType

averages = prof.key_averages()
kernels = [row for row in averages if row.device_type != DeviceType.CPU and not row.is_user_annotation]
operators = [row for row in averages if row.key.startswith("aten::")]
if on_gpu:  # each row's self CUDA time, as a share of the kernels' time; the CPU columns would be empty for kernels
    kernel_us = sum(row.self_device_time_total for row in kernels)
    for view, rows in (("kernels (and copies) the GPU ran", kernels), ("operators that launched them", operators)):
        print(f"{view}, by self CUDA time:")
        for row in sorted(rows, key=lambda row: row.self_device_time_total, reverse=True)[:8]:
            print(f"  {row.key[:56]:<56} {row.self_device_time_total / 1e3:8.2f} ms "
                  f"{row.self_device_time_total / kernel_us:6.1%}  ({row.count} calls)")
        total = sum(row.self_device_time_total for row in rows) / kernel_us
        print(f"  all {len(rows)} rows together: {total:.1%} of the kernels' time")
    operator_us = sum(row.self_device_time_total for row in operators)
    assert operator_us <= 1.01 * kernel_us  # each kernel belongs to one operator: no view counts it twice
else:  # a CPU runtime runs no kernels: one view, what the CPU did
    print(averages.table(sort_by="self_cpu_time_total", row_limit=12))
    assert not kernels

# %% [markdown]
# ## 4. The trace: the two timelines
#
# `export_chrome_trace` writes a JSON trace. Download it (Colab: the Files panel on the left)
# and drop it on <https://ui.perfetto.dev> (or `chrome://tracing`): one row per CPU thread,
# one per CUDA stream, every operator and kernel a bar, our labels on top. Traces are large;
# keep them out of git (this course ignores `traces/`). A profile exports once: a second
# `export_chrome_trace` on the same profile raises "Trace is already saved".

# %%
from pathlib import Path

trace = Path("traces") / "10_first_profile.json"
trace.parent.mkdir(exist_ok=True)
prof.export_chrome_trace(str(trace))
print(f"wrote {trace} ({trace.stat().st_size / 1e6:.1f} MB): open it in https://ui.perfetto.dev")

# %% [markdown]
# ## 5. The regime: what does the step wait on?
#
# The table has hundreds of rows; one question decides what to fix: what does each step
# wait on? Which fixes can pay depends on the answer, the step's **regime**. On a GPU the CPU
# queues kernels ahead, so in a loop without host reads a step costs about the *larger* of
# two parts: the host's (Python, dispatch, launches, the batch: the time it takes to *queue*
# a step) and the GPU's (its kernels, plus a gap of a microsecond or two between queued
# kernels). Measure both: the host's part is the clock read just before the final
# `synchronize` of a few queued steps; the GPU's, the kernels' time in the profile. The
# larger part is the cost. (The GPU's **busy share**, kernels over step, cannot decide it
# alone: with kernels of 100 µs, 85% busy already means a host part 15% longer than the
# GPU's.)
#
# - **input-bound**: "data" takes >= 30% of the step while the GPU has nothing to run. Helps:
#   workers, pinned memory, the data on the GPU, augmentation on the GPU if the loader
#   augments (lesson 05); with 2 CPU cores, the data on the GPU first (more workers only take
#   turns on them). Cannot help: a faster model.
# - **launch-bound**: the host's part is longer than the GPU's: the GPU waits. Helps: fewer
#   host syncs (lesson 03), a bigger batch, a fused or foreach optimizer (section 8); at most
#   step / GPU part. Cannot help: default `torch.compile`, AMP, TF32, channels_last,
#   `cudnn.benchmark` (they make kernels cheaper), nor lesson 11's CUDA graphs, which leave
#   the optimizer eager (1.00x measured).
# - **GPU-bound**: the GPU's part is the longer (from a host part at 80% of it, the host is
#   close behind: a faster kernel pays at most step / host part). The lever depends on
#   what the kernels are busy with: **matmuls and convolutions** (cuBLAS, cuDNN: 16-bit
#   precision, TF32; channels_last for convolutions; lessons 04 and 06), **element-wise** chains,
#   normalisations and reductions (fusion with default `torch.compile`, lesson 11; 16-bit
#   tensors; a fused optimizer), or **tiny kernels** under 10 µs each, too little work to fill
#   the GPU (a bigger batch; fewer kernels). Element-wise work and a decode step do little math
#   per byte: their gauge is GB/s against this GPU's copy bandwidth (`cg.copy_gbps`), and a
#   decode step's levers move fewer bytes per token (lesson 14).
# - **with a host read every step** (`.item()`), the CPU and the GPU take turns: the step is
#   the kernels plus the host work the read exposes, and the larger of the two names it.
# - **CPU-bound**: a CPU runtime, where the CPU does the math. Helps: a GPU runtime; on the
#   CPU, a bigger batch (the fixed cost per call spread over more samples), a foreach
#   optimizer.
# - A lever needs its part of the step: no optimizer lever for a step without an optimizer
#   (inference), no layouts without convolutions, no GPU augmentation without augmentation.
#
# One trap: **the profiler stretches the step**. It records every operator, which costs host
# time (more per operator on Colab's 2 vCPUs), but not the kernels, so a busy share against
# the *profiled* step reads too low. On the course's H100 run (2026-11-26) lesson 04's CNN step
# took 6.6 ms under the profiler and 2.59 ms without it; its 1.12 ms of kernels read 17% busy
# against the first and 43% against the second. Section 7's step read 73% (3.89 ms profiled)
# where its kernels fill 93% of the real 3.04 ms step. So time the step, and the host's part,
# without the profiler. The cell below does it, and reads the profile's events, in plain
# PyTorch: the steps (`ProfilerStep#N`), the time under "data", the kernels' time on the GPU
# timeline, the kernel launches (`cudaLaunchKernel`) and the waits for the GPU
# (`cudaStreamSynchronize`, what a host read such as `.item()` calls).

# %%
import time

from torch.autograd import DeviceType  # CPU or CUDA: which timeline an event is on (section 3)

from colab_gpu.measure.step_parts import KERNEL_GAP_US

events = [e for e in prof.events() if not (e.is_user_annotation and e.device_type != DeviceType.CPU)]
steps = [e for e in events if e.name.startswith("ProfilerStep")]
step_us = sum(e.time_range.elapsed_us() for e in steps)
profiled_ms = step_us / len(steps) / 1e3
data_share = sum(e.time_range.elapsed_us() for e in events if e.name == "data") / step_us


def plain_step():
    """Section 2's step, without the labels."""
    inputs, targets = next(batches)
    inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
    loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


batches = iter(loader)
plain_step()  # warm-up
timed = 5
if on_gpu:
    torch.cuda.synchronize(device)
start = time.perf_counter()
for _ in range(timed):  # queued back to back, as in training: one synchronization at the end
    plain_step()
queued = time.perf_counter()  # the host has queued every step: its part ends here
if on_gpu:
    torch.cuda.synchronize(device)
step_ms = (time.perf_counter() - start) / timed * 1e3
host_ms = (queued - start) / timed * 1e3
print(f"a step takes {step_ms:.1f} ms without the profiler, {profiled_ms:.1f} ms under it; "
      f"'data' {data_share:.0%} of the profiled step")
if on_gpu:
    kernel_ms = sum(e.time_range.elapsed_us() for e in events if e.device_type != DeviceType.CPU) / len(steps) / 1e3
    launches = sum(e.name.startswith(("cudaLaunchKernel", "cuLaunchKernel")) for e in events) / len(steps)
    waits = sum(e.name == "cudaStreamSynchronize" for e in events) / len(steps)
    gpu_ms = kernel_ms + launches * KERNEL_GAP_US / 1e3  # about 2 µs between two queued kernels
    print(f"the host's part: {host_ms:.2f} ms per step; the GPU's: kernels {kernel_ms:.2f} ms + {launches:g} "
          f"launch gaps = {gpu_ms:.2f} ms (busy {min(kernel_ms / step_ms, 1.0):.0%} of the real step, "
          f"{kernel_ms / profiled_ms:.0%} of the profiled one); {waits:g} waits for the GPU per step")
if data_share >= 0.3:
    regime = "input-bound"
elif not on_gpu:
    regime = "CPU-bound"
else:
    regime = "launch-bound" if host_ms > gpu_ms else "GPU-bound"
print("regime:", regime)

# %% [markdown]
# `cg.summarize_profile` reads the same events; given the step's time and the host's part
# without the profiler (`unprofiled_step_ms=`, `unprofiled_host_ms=`), it weighs the two parts
# as above (`cg.profile_step(step, device)` times any step with `cg.compare_steps`, which
# reads both clocks, then profiles it, and does all of this for you). It adds the host
# reads per step (`.item()`, `print(loss)`, `if loss < x:`), the operator calls per step, what
# the kernels are busy with, and, given the step's floating-point work and this GPU's measured
# matmul peak, the TFLOP/s it reaches (section 7). Its "data" rule counts only the time the
# GPU had nothing to run: a batch fetched while the GPU computes the previous step costs
# nothing. Then it names the regime, why, what helps and what cannot.

# %%
first = cg.summarize_profile(prof, unprofiled_step_ms=step_ms, unprofiled_host_ms=host_ms)
print(first)
assert first.regime.name == regime

# %% [markdown]
# ## 6. Bottleneck 1: the input pipeline
#
# Decoding and augmenting JPEGs one sample at a time in the main process is lesson 05's slow
# pipeline. The fix from lesson 05: decode once and keep the data set on the device
# (`cg.DeviceLoader`). `cg.profile_training_steps` runs the same labelled loop as section 2
# (it is the experiment the bench's "gpu_busy" row runs), so only the loader changes.
# **Predict first:** what share of the step is "data" after the fix?

# %%
my_prediction = None  # your guess of the "data" share after the fix, in % of the step, e.g. 20


def profile_with(loader, adam_options: dict | None = None, **options) -> cg.ProfileSummary:
    """Five labelled steps of a fresh copy of this lesson's CNN (Adam) fed by ``loader``, summarized."""
    torch.manual_seed(0)
    fresh = cg.small_cnn(3, 10, width=32 if on_gpu else 16).to(device)
    adam = torch.optim.Adam(fresh.parameters(), lr=1e-3, **(adam_options or {}))
    return cg.summarize_profile(cg.profile_training_steps(fresh, loader, adam, device, **options))


decoded = images.float() / 255  # decoded once: the uint8 images scaled to 0..1
resident = cg.DeviceLoader(decoded, labels, batch_size=128, device=device)
slow, fast = profile_with(loader), profile_with(resident)
for name, summary in (("JPEG DataLoader", slow), ("DeviceLoader", fast)):
    print(f"{name:>15}: {summary.step_ms:7.2f} ms per step, data {summary.shares.get('data', 0):.0%} of it; "
          f"{summary.regime.name}")
cg.compare_with_references("10.data_share_after_fix", 100 * fast.shares.get("data", 0), device,
                           prediction=my_prediction, unit="% of the step", what="the data share after the fix",
                           workload={"data": data.name, "images": len(images), "batch": resident.batch_size})
# Decoding 128 JPEGs costs far more than slicing a tensor that is already there, on any runtime. (The step
# times are printed, not asserted: three steps each, on a machine that may be busy with something else.)
assert fast.shares.get("data", 0) < slow.shares["data"]

# %% [markdown]
# ## 7. Bottleneck 2: a host-device sync every step
#
# Lesson 03's mistake: `losses.append(loss.item())` in the loop. On a GPU the CPU only
# queues kernels; `.item()` needs the value, so the CPU stops (in `cudaStreamSynchronize`)
# until the GPU has run everything queued. What does that cost? Only what the CPU could have
# done ahead of a **busy** GPU. Without the read, the CPU prepares batch n + 1 while the GPU
# computes step n; with it, they take turns, and a step costs the CPU's part plus the GPU's
# instead of the larger of the two. On a launch-bound step the GPU keeps up anyway, so a read
# costs little; on a CPU runtime there is no queue at all (one processor does both), and
# the two loops take the same time.
#
# So the step below keeps a GPU busy: 4096-wide layers at batch 512 on a GPU (smaller on a
# CPU), fed by batches picked, flipped and scaled on the CPU, as a DataLoader without workers
# does, then copied from pinned memory without waiting (lesson 05). The two loops are timed
# against each other outside the profiler (it adds its own cost to every event):
# `cg.compare_steps` times K steps between two synchronizations per sample, so the CPU can
# queue ahead as in a real loop (on a GPU K is at least 8: with K = 1 the CPU and the GPU
# would take turns in both loops, and the read would cost 1.00x by construction), each side
# with its own K (enough steps for a 20 ms sample), and interleaves the two sides (here for
# 15 samples each).
# **Predict first:** on a GPU, how many times slower is the loop with `.item()`?

# %%
from torch.nn import functional as F

my_prediction = None  # your guess: time per step with .item() / without, on a GPU, e.g. 1.5

width, batch = (4096, 512) if on_gpu else (256, 128)
torch.manual_seed(0)
busy_model = cg.mlp(3 * 32 * 32, hidden=width).to(device)
busy_adam = torch.optim.Adam(busy_model.parameters(), lr=1e-4)
losses, loss_sum = [], torch.zeros((), device=device)


def next_batch():
    """A batch made on the CPU, as a DataLoader without workers makes it: picked, flipped, scaled, then pinned."""
    with record_function("data"):
        picked = torch.randint(0, len(images), (batch,))
        inputs, targets = images[picked].flip(-1).float().div_(255), labels[picked]
        if on_gpu:  # pinned memory: the copies below run in the background, without a sync
            inputs, targets = inputs.pin_memory(), targets.pin_memory()
        return inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)


def busy_step(read_loss: bool) -> None:
    inputs, targets = next_batch()
    loss = F.cross_entropy(busy_model(inputs), targets)
    busy_adam.zero_grad(set_to_none=True)
    loss.backward()
    busy_adam.step()
    if read_loss:
        losses.append(loss.item())  # the CPU waits here until the GPU has finished this step
    else:
        loss_sum.add_(loss.detach())  # stays on the device: read once, at the end


timings = cg.compare_steps({"loss.item() every step": lambda: busy_step(True),
                            "summed on the device": lambda: busy_step(False)}, device=device, samples=15)
with_item, on_device = timings.values()
print("15 samples per side, interleaved (K: the steps queued in each sample):")
for name, result in timings.items():
    print(f"  {name:<23} {result}")
item_cost = with_item.median / on_device.median
cg.compare_with_references("10.item_cost_busy_gpu", item_cost, device, prediction=my_prediction,
                           what="time per step with loss.item() every step, relative to summing on the device",
                           workload={"MLP width": width, "batch": batch})
# A read never makes a loop faster: only noise can (a busy neighbour on a shared machine), so the medians get a 25%
# allowance. How much slower it makes the loop depends on how much CPU work a busy GPU could hide: printed.
assert item_cost > 0.75
if not on_gpu:
    print("On a CPU runtime there is no queue to wait for: both loops do the same work, one after the other.")

# %% [markdown]
# The mechanism, in a profile of the loop with `.item()`: the read is `aten::item`, which calls
# `aten::_local_scalar_dense` to copy the value to the CPU, which on a GPU waits in
# `cudaStreamSynchronize` until the queued kernels have run. That wait is CPU time spent idle,
# the time the loop without reads spends preparing the next batch. (`aten::item` also counts
# Adam's reads of its step counters, one per parameter tensor: those live on the CPU and wait
# for nothing. On a GPU the loss is the one read that synchronizes.)

# %%
with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
             acc_events=True) as reads:
    for _ in range(5):
        busy_step(read_loss=True)
        reads.step()
rows = {row.key: row for row in reads.key_averages()}
for name in ("aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize"):
    if name in rows:
        print(f"{name:<26} {rows[name].count / 3:g} call(s) per step, "
              f"{rows[name].cpu_time_total / 3 / 1e3:7.3f} ms of CPU time per step")
assert rows["aten::item"].count >= 3  # the loss, once per profiled step (and Adam's counters)
if on_gpu:  # each loss read waits for the GPU
    assert rows["cudaStreamSynchronize"].count >= 3

# %% [markdown]
# `cg.profile_step` times each loop's step without the profiler, profiles it and names its
# regime. Give it the step's floating-point work and this GPU's matmul peak, measured as
# lesson 02 times a matrix product (2n³ operations over the median time of one n x n product),
# in the step's precision (float32 here; an AMP step's is the 16-bit peak), and it also says how
# near the peak the step runs.
#
# **Count the work, don't guess it.** "6 per weight per sample" (2 forward, 4 backward) holds
# for dense layers only, and not even exactly: the first layer computes no gradient for its
# input. A convolution uses each weight at every output pixel: lesson 04's CNN does 29.4 GFLOP
# per step where the rule says 0.22, 133x less. `torch.utils.flop_counter.FlopCounterMode`
# counts the matmuls and convolutions of a real forward and backward pass; on the `meta`
# device (shapes only) it costs no memory and no time.

# %%
from torch.utils.flop_counter import FlopCounterMode

with torch.device("meta"):  # the same model and batch, shapes only
    meta_model = cg.mlp(3 * 32 * 32, hidden=width)
    meta_inputs, meta_targets = torch.randn(batch, 3, 32, 32), torch.zeros(batch, dtype=torch.long)
with FlopCounterMode(display=False) as counter:
    F.cross_entropy(meta_model(meta_inputs), meta_targets).backward()
flops = counter.get_total_flops()
weights = sum(layer.weight.numel() for layer in busy_model if isinstance(layer, torch.nn.Linear))
print(f"counted: {flops / 1e9:.3g} GFLOP per step; the rule of thumb, 6 x {weights:,} weights x {batch} samples: "
      f"{6 * weights * batch / 1e9:.3g} GFLOP")
assert flops < 6 * weights * batch  # the first layer's input gradient is not computed

n = 4096 if on_gpu else 1024
a = torch.randn(n, n, device=device)
peak = 2 * n**3 / cg.benchmark(lambda: a @ a, device=device).median / 1e12
print(f"measured matmul peak ({n} x {n}, float32): {peak:.3g} TFLOP/s")
summaries = {read: cg.profile_step(lambda read=read: busy_step(read), device, flops_per_step=flops,
                                   peak_tflops=peak, peak_precision="fp32") for read in (True, False)}
for read, summary in summaries.items():
    print(f"{'with' if read else 'without'} .item(): {summary.host_reads_per_step:g} host read(s) per step, "
          f"{summary.achieved_tflops:.3g} TFLOP/s; {summary.regime}")
assert summaries[True].host_reads_per_step == 1 and summaries[False].host_reads_per_step == 0

# %% [markdown]
# ## 8. Bottleneck 3: many tiny operations
#
# Every PyTorch operator costs a few microseconds of Python and dispatch on the CPU, and on a
# GPU one or more kernel launches. A small model with many parameters tensors pays that per
# tensor. The optimizer is the classic case: `torch.optim.Adam(..., foreach=False)` updates
# each parameter tensor with its own handful of operators; `foreach=True` (PyTorch's default
# when every parameter is on a GPU) updates them all with one operator per step of the
# formula, and `fused=True` (GPU) with fewer, fused kernels. Count the operator calls per step.

# %%
per_tensor = profile_with(resident, {"foreach": False})
grouped = profile_with(resident, {"foreach": True})
tensors = sum(1 for _ in model.parameters())
print(f"{tensors} parameter tensors; operator calls per step: foreach=False {per_tensor.ops_per_step:g}, "
      f"foreach=True {grouped.ops_per_step:g}")
if on_gpu:
    print(f"kernel launches per step: {per_tensor.launches_per_step:g} vs {grouped.launches_per_step:g}; "
          f"GPU busy {per_tensor.gpu_busy:.0%} vs {grouped.gpu_busy:.0%}")
    print(f"foreach=False: {per_tensor.regime}\nforeach=True:  {grouped.regime}")
assert grouped.ops_per_step < per_tensor.ops_per_step

# %% [markdown]
# On a GPU, print each one's regime: when the step is launch-bound, fewer launches are what
# pays: a `foreach` or `fused=True` optimizer, or a bigger batch (the same launches, more work
# each). On a GPU-bound step whose kernels are element-wise chains, a fused optimizer pays too:
# one kernel per update for all parameters. CUDA graphs remove launches as well, but lesson
# 11's `torch.compile(mode="reduce-overhead")` graphs only the compiled model's forward and
# backward; the loss, the optimizer and the rest of the step stay eager, and on the course's
# H100 that measured 1.00x for a launch-bound MLP. Default `torch.compile` fuses element-wise
# kernels into fewer, cheaper ones: that pays on a GPU-bound step, not on a GPU that waits for
# the CPU.
#
# ## 9. GPU utilisation from outside, and why it is not efficiency
#
# In a terminal (Colab: **Terminal** in the left bar; Kaggle: a second notebook cell that you
# stop), `nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv -l 1` prints the
# "GPU utilisation" every second; Colab's **Resources** panel plots the same counter. It is the
# share of time **at least one kernel** was running, over the driver's last sampling period
# (1/6 s to 1 s): asked once after the training ended, it says 0%. So ask it while the steps
# run: the cell below reads it every 0.1 s in a background thread while the section 7 loop
# (no reads) trains for two seconds, and prints the mean beside the GPU-busy share (on the
# course's H100 run (2026-11-26): 86%, where the share against the profiled step read 73% and
# the same kernels fill 93% of the unprofiled step). A single tiny kernel that occupies 1 of a
# GPU's streaming multiprocessors (an H100 SXM has 132) counts as busy: high utilisation
# means the GPU is never idle, not that it works at its speed. The achieved TFLOP/s against
# the matmul peak (section 7) says that.

# %%
import shutil

if on_gpu and shutil.which("nvidia-smi"):
    import subprocess
    import threading
    import time

    query = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    readings, done = [], threading.Event()

    def read_utilisation():
        """Sample nvidia-smi every 0.1 s until done (the busiest GPU, when the runtime has several)."""
        while not done.is_set():
            smi = subprocess.run(query, capture_output=True, text=True)
            values = [int(v) for v in smi.stdout.split() if v.isdigit()]
            if values:
                readings.append(max(values))
            done.wait(0.1)

    sampler = threading.Thread(target=read_utilisation)
    sampler.start()
    end = time.perf_counter() + 2.0
    while time.perf_counter() < end:
        busy_step(read_loss=False)
    torch.cuda.synchronize(device)
    done.set()
    sampler.join()
    if readings:
        print(f"nvidia-smi while the steps ran: {sum(readings) / len(readings):.0f}% on average over "
              f"{len(readings)} readings")
    else:
        print("nvidia-smi gave no utilisation figure on this runtime (some virtual GPUs answer [N/A])")
    print(f"profiled GPU-busy share of the same step: {summaries[False].gpu_busy:.0%}, at "
          f"{summaries[False].share_of_peak:.0%} of the matmul peak")
elif on_gpu:
    print("This runtime has no nvidia-smi command: the profiled GPU-busy share above is the figure to read.")
else:
    print("CPU runtime: no nvidia-smi here. On a GPU runtime this cell samples the utilisation counter while "
          "the section 7 loop trains, and prints its mean beside the profiled GPU-busy share.")

# %% [markdown]
# ## 10. Common error: "Profiler must be initialized before getting key averages"
#
# A profile with a `schedule` records only its `active` steps, and `prof.step()` is what moves
# it along. Forget `prof.step()`, or run fewer steps than `wait + warmup + active`, and the
# profile holds nothing: reading it fails.

# %%
with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as empty:
    for inputs, targets in list(resident)[:3]:
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)  # ...and no empty.step()
# PyTorch 2.10 and later say "Profiler must be initialized before ..."; before, it is a bare AssertionError.
with cg.shows_error(AssertionError, match="must be initialized|^$",
                    fix="call prof.step() at the end of every step, for more steps than wait + warmup + active"):
    empty.key_averages()

# %% [markdown]
# ## Exercise 1: find and fix the bottleneck of a loop you did not write
#
# `their_steps` below is someone else's training loop: a small MLP on the JPEG images, with
# three suspects in plain sight: the loss read with `.item()` every step (section 7), an
# optimizer that updates each parameter tensor on its own (`foreach=False`, section 8), and
# JPEGs decoded one sample at a time (section 6). Which one costs the most here? Profile it:
#
# 1. `labelled_steps`, below it, is a copy of their loop: label its phases "data", "forward",
#    "backward" and "step" with `record_function`, as in section 2 (`prof.step()` is already
#    there), and rerun the cell. `cg.checks.profile_labels` checks that each label holds the work
#    it names and that together they cover the step, and prints each phase's share; it compares
#    your loop with `their_steps` too: labels wrap lines, they change none.
# 2. Write `my_steps(steps)`: the same training (the same model and learning rate, batches of
#    128 of the same images, each flipped at random), returning one loss per step, without the
#    cost your profile shows. `cg.checks.bottleneck_fix` runs both loops on this runtime and
#    wants yours at least twice as fast: taking out a suspect that costs little does not get there.

# %%
from torch.nn import functional as F

their_loader = DataLoader(cg.EncodedImages(images, labels, augment), batch_size=128, shuffle=True)


def their_steps(steps, prof=None):
    """Someone else's loop: ``steps`` training steps of an MLP on JPEG images; one loss per step."""
    torch.manual_seed(0)
    model = cg.mlp(3 * 32 * 32, hidden=64).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    losses, batches = [], iter(their_loader)
    for _ in range(steps):
        inputs, targets = next(batches)
        inputs, targets = inputs.to(device), targets.to(device)
        loss = F.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if prof is not None:
            prof.step()
    return torch.tensor(losses)


# %%
def labelled_steps(steps, prof=None):
    """Their loop, to label: the same lines, each phase inside its `with record_function(...)`."""
    torch.manual_seed(0)
    model = cg.mlp(3 * 32 * 32, hidden=64).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    losses, batches = [], iter(their_loader)
    for _ in range(steps):
        inputs, targets = next(batches)
        inputs, targets = inputs.to(device), targets.to(device)
        loss = F.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if prof is not None:
            prof.step()
    return torch.tensor(losses)


with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
             acc_events=True) as prof:
    labelled_steps(5, prof)

# %%
cg.checks.profile_labels(prof, labelled_steps, their_steps)


# %%
def my_steps(steps):
    """Your loop: the same training as their_steps, without the cost your profile shows."""
    return their_steps(steps)


# %%
cg.checks.bottleneck_fix(their_steps, my_steps, device)

# %% [markdown]
# ## Exercise 2: name the regime, choose the lever, measure it
#
# The regime rule is a skill: read a step's numbers, name the row of the summary's table it
# falls in, choose a lever of that row, apply it, and measure again. No helper prints the
# verdict here: `.measurements()` prints a summary's numbers without it, and
# `cg.checks.regime` checks your reading. The levers go by short names, printed below with
# what each does in a line.
#
# **Part 1: three steps the course profiled on an H100** (any runtime: a CPU runtime can
# only ever say "CPU-bound", so these are recorded, as numbers). For each, set its pair in
# `my_readings` to (regime, lever).

# %%
from colab_gpu.measure.levers import LEVER_MEANINGS

recorded = cg.recorded_steps()
for number, step in enumerate(recorded):
    print(f"step {number}: {step}\n")
print("the levers, by the short name an answer takes:")
for lever, meaning in LEVER_MEANINGS.items():
    print(f"  {lever:>18}: {meaning}")

my_readings = [(None, None), (None, None), (None, None)]  # (regime, lever) for steps 0, 1 and 2

# %%
for step, (my_regime, my_lever) in zip(recorded, my_readings, strict=True):
    cg.checks.regime(step, my_regime, my_lever)

# %% [markdown]
# **Part 2: a step on your runtime.** `small_step` trains lesson 03's MLP on a batch of 64
# samples already on the device, with an Adam that updates each parameter tensor on its own
# (`foreach=False`), and returns how many samples it trained on. Read its numbers, name its
# regime and a lever, and write `my_step`: the same training with that lever applied,
# returning its number of samples. `cg.checks.regime` profiles `small_step`, checks your
# reading, then times both (`cg.compare_steps`) and wants yours to train at least 1.1x the
# samples per second, and the same floating-point work per sample (`FlopCounterMode`). On a
# CPU runtime it measures `my_step` too: the levers of the CPU-bound row pay there.

# %%
from torch.nn import functional as F

torch.manual_seed(0)
small = cg.mlp(784, hidden=512).to(device)
small_adam = torch.optim.Adam(small.parameters(), lr=1e-3, foreach=False)
pool_inputs, pool_targets = torch.randn(4096, 784, device=device), torch.randint(0, 10, (4096,), device=device)


def small_step(batch: int = 64) -> int:
    """One training step of lesson 03's MLP on ``batch`` random samples already on the device."""
    picked = torch.randint(0, len(pool_inputs), (batch,), device=device)
    loss = F.cross_entropy(small(pool_inputs[picked]), pool_targets[picked])
    small_adam.zero_grad(set_to_none=True)
    loss.backward()
    small_adam.step()
    return batch


print(cg.profile_step(small_step, device).measurements())

my_regime, my_lever = None, None  # e.g. "GPU-bound", "fusion"


def my_step() -> int:
    """small_step with your lever applied; returns how many samples it trained on."""
    return small_step()


# %%
cg.checks.regime(small_step, my_regime, my_lever, my_step, device)

# %% [markdown]
# ## Summary
#
# | the profile says | regime | the first lever |
# |---|---|---|
# | "data" >= 30% of the step, GPU idle | input-bound | workers, data on the GPU (first with 2 cores) |
# | host part (time to queue a step) > GPU part | launch-bound | fewer syncs, a bigger batch, a fused optimizer |
# | the GPU's part the larger, mostly matmuls and convolutions | GPU-bound | 16 bits or TF32; channels_last (convs) |
# | the GPU's part the larger, mostly element-wise kernels | GPU-bound | fusion: default `torch.compile` |
# | the GPU's part the larger, mostly kernels under 10 µs | GPU-bound | a bigger batch, fewer kernels |
# | a host read every step | the larger of kernels and exposed host work | fewer syncs first, where it pays |
# | a CPU runtime | CPU-bound | a GPU runtime; on the CPU, a bigger batch |
#
# - Profile before you fix: the suspect in plain sight is not always the cost.
# - Profile a few steps, not a whole epoch: `profile(activities=[CPU, CUDA],
#   schedule=schedule(wait=1, warmup=1, active=3, repeat=1))`, `prof.step()` after each step,
#   `record_function("...")` around data, forward, backward and step.
# - `key_averages()` on a GPU: two views, the kernels and the operators that launched them,
#   each by self CUDA time (in one table they count each kernel twice); on a CPU,
#   `.table(sort_by="self_cpu_time_total")`. `export_chrome_trace` and
#   <https://ui.perfetto.dev> for the two timelines.
# - Name the regime before you fix anything, from the kernels' time over the step timed
#   *without* the profiler (it stretches the host's side, not the kernels). A fix from
#   another row of the table above cannot pay. `cg.profile_step(step, device)` measures the
#   step both ways and names the row, with the numbers behind it; count the step's work with
#   `FlopCounterMode`, and compare it with the peak of the step's precision.
# - A `.item()` per step costs what the CPU could have done ahead of a busy GPU: time such
#   comparisons with `cg.compare_steps` (K steps per sample, interleaved), outside the profiler.
# - "GPU utilisation" is the share of time some kernel runs, not how fast it runs: sample it
#   while the steps run.
#
# Next: lesson 11, `torch.compile`: fusion for a GPU-bound step of element-wise chains, and
# what CUDA graphs can and cannot remove from a launch-bound one.
