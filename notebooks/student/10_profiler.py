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
# - to read `key_averages()` sorted the useful way, and to open a trace in Perfetto;
# - to see the classic bottlenecks in a profile (a slow input pipeline, a host-device sync
#   every step, many tiny operations) and fix each, measured before and after;
# - to find the bottleneck of a loop you did not write, fix it, and measure the fix;
# - why `nvidia-smi`'s "GPU utilisation" is not efficiency.
#
# **Time:** 50 minutes. **Prerequisites:** lessons 03 (the training loop) and 05 (feeding the GPU).

# %% cellView="form"
# @title Setup: colab_gpu 0.31.2, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys

COLAB_GPU = "0.31.2"
SOURCES = [f"colab-gpu=={COLAB_GPU}", f"git+https://github.com/colab-gpu-course/pytorch-gpus-colab@v{COLAB_GPU}"]
try:
    from colab_gpu import __version__ as found
except ImportError:
    found = None
source = None
if found != COLAB_GPU:
    for source in SOURCES:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], capture_output=True, text=True)
        if pip.returncode == 0:
            break
    else:
        raise RuntimeError(f"pip could not install colab_gpu {COLAB_GPU} from {SOURCES} (is this runtime "
                           f"online? On Kaggle: Settings > Internet):\n{pip.stderr[-1500:]}")
    for name in [m for m in sys.modules if m.partition(".")[0] == "colab_gpu"]:
        del sys.modules[name]  # another version was imported above: the import below loads this one
    importlib.invalidate_caches()
print(f"colab_gpu {COLAB_GPU}:", "already installed" if source is None else f"installed from {source}")

# %%
import torch

import colab_gpu as cg

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
# ## 3. Read the table
#
# `prof.key_averages()` groups the events by name. Sort by **self** time (the time spent in
# an operator itself, not in the operators it calls) on the device that matters: the GPU's
# kernels on a GPU, the CPU otherwise. "Total" times count a region and everything inside it,
# so our four labels and `ProfilerStep*` sit at the top of a total-time sort and hide the
# operators.
#
# On a GPU one more step is needed. The profiler also draws each `record_function` label on the
# GPU timeline (a "gpu_user_annotation" row, so that the trace shows the phases over the
# kernels), from the phase's first kernel to its last, idle gaps included. In the table those
# are separate rows, and their "self" GPU time is that whole span: sorted by self GPU time,
# "forward", "backward", "step" and "data" would come above every kernel, and the "Self CUDA %"
# column would add up to far more than 100%. The table's list can be filtered like any list:
# keep the rows that are not labels on the GPU.

# %%
from torch.autograd import DeviceType

averages = prof.key_averages()
averages[:] = [row for row in averages if not (row.is_user_annotation and row.device_type != DeviceType.CPU)]
sort_by = "self_device_time_total" if on_gpu else "self_cpu_time_total"
print(averages.table(sort_by=sort_by, row_limit=12))
if on_gpu:  # the most expensive row is now a kernel (or an operator), not one of our labels
    top = max(averages, key=lambda row: row.self_device_time_total)
    assert top.key not in ("data", "forward", "backward", "step") and not top.key.startswith("ProfilerStep")

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
# ## 5. A profile as a few numbers
#
# The table has hundreds of rows. `cg.summarize_profile` reduces a profile to what a learner
# can act on: time per step; the share of each label; **host reads** of tensor values per
# step (`.item()`, `print(loss)`, `if loss < x:`: on a GPU each one waits for every queued
# kernel, lesson 03); operator calls per step; and on a GPU the kernel launches per step and
# the share of the step time the GPU was busy. It names the biggest bottleneck and the
# lesson that fixes it.

# %%
first = cg.summarize_profile(prof)
print(first)

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
    print(f"{name:>15}: {summary.step_ms:7.2f} ms per step, data {summary.shares.get('data', 0):.0%} of it")
cg.compare_with_references("10.data_share_after_fix", 100 * fast.shares.get("data", 0), device,
                           prediction=my_prediction, unit="% of the step", what="the data share after the fix")
# Decoding 128 JPEGs costs far more than slicing a tensor that is already there, on any runtime. (The step
# times are printed, not asserted: three steps each, on a machine that may be busy with something else.)
assert fast.shares.get("data", 0) < slow.shares["data"]

# %% [markdown]
# ## 7. Bottleneck 2: a host-device sync every step
#
# Lesson 03's mistake: `losses.append(loss.item())` in the loop. On a GPU the CPU stops at
# every `.item()` until the GPU has finished the step, so it can no longer queue the next
# step's kernels ahead. The profile counts those reads exactly, on every runtime; the cost in
# time shows on a GPU.

# %%
reading = profile_with(resident, read_loss_every_step=True)
print(f"loss.item() every step: {reading.host_reads_per_step:g} host read(s) per step, {reading.step_ms:.2f} ms")
print(f"summed on the device:   {fast.host_reads_per_step:g} host read(s) per step, {fast.step_ms:.2f} ms")
assert reading.host_reads_per_step == 1 and fast.host_reads_per_step == 0
print("advice:", reading.advice())
if not on_gpu:
    print("On a CPU the two step times differ by noise only (either may come out ahead): with no GPU queue, a "
          ".item() has nothing to wait for. The cost is a GPU's, where every read stalls the queue:")
cg.compare_with_references("10.item_every_step_cost", reading.step_ms / fast.step_ms, device,
                           what="step time with loss.item() every step, relative to summing on the device")

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
assert grouped.ops_per_step < per_tensor.ops_per_step

# %% [markdown]
# Lesson 11's `torch.compile` goes further: it fuses the operators of the forward and backward
# passes into fewer, larger kernels.
#
# ## 9. GPU utilisation from outside, and why it is not efficiency
#
# In a terminal (Colab: **Terminal** in the left bar; Kaggle: a second notebook cell that you
# stop), `nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv -l 1` prints the
# "GPU utilisation" every second; Colab's **Resources** panel plots the same counter. It is the
# share of time **at least one kernel** was running, over its own sampling period: close to the
# `gpu_busy` figure above, which is measured over the profiled steps only and also counts the
# copies between host and GPU. A single tiny kernel that occupies 1 of a GPU's streaming
# multiprocessors (an H100 SXM has 132) counts as busy. High
# utilisation means the GPU is never idle, not that it is working at its speed: compare your
# model's FLOP/s with the matmul peak (lesson 06) for that.

# %%
if on_gpu:
    import subprocess

    query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv"]
    smi = subprocess.run(query, capture_output=True, text=True)
    print(smi.stdout or smi.stderr)
    print(f"profiled GPU-busy share with the DeviceLoader: {fast.gpu_busy:.0%}")
else:
    print("CPU runtime: no nvidia-smi here. On a GPU runtime this cell prints the utilisation counter, and "
          "every summary above adds kernel launches per step and the share of the step the GPU was busy.")

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
# ## Exercise: find and fix the bottleneck of a loop you did not write
#
# `their_steps` below is someone else's training loop: a small MLP on the JPEG images, with
# three suspects in plain sight: the loss read with `.item()` every step (section 7), an
# optimizer that updates each parameter tensor on its own (`foreach=False`, section 8), and
# JPEGs decoded one sample at a time (section 6). Which one costs the most here? Profile it:
#
# 1. Label its phases "data", "forward", "backward" and "step" with `record_function`, as in
#    section 2 (`prof.step()` is already there), and rerun the cell: `cg.checks.profile_labels`
#    checks that the labels cover the step and prints each phase's share.
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


with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
             acc_events=True) as prof:
    their_steps(5, prof)

# %%
cg.checks.profile_labels(prof)


# %%
def my_steps(steps):
    """Your loop: the same training as their_steps, without the cost your profile shows."""
    return their_steps(steps)


# %%
cg.checks.bottleneck_fix(their_steps, my_steps, device)

# %% [markdown]
# ## Summary
#
# - Profile before you fix: the suspect in plain sight is not always the cost.
# - Profile a few steps, not a whole epoch: `profile(activities=[CPU, CUDA],
#   schedule=schedule(wait=1, warmup=1, active=3, repeat=1))`, `prof.step()` after each step,
#   `record_function("...")` around data, forward, backward and step.
# - `key_averages().table(sort_by="self_device_time_total")` on a GPU (`"self_cpu_time_total"`
#   on a CPU); `export_chrome_trace` and <https://ui.perfetto.dev> for the two timelines.
# - `cg.summarize_profile(prof)`: time per step, the share of each label, host reads and
#   operator calls per step, on a GPU launches and the busy share, and which lesson fixes the
#   biggest cost.
# - Slow data: lesson 05. A `.item()` per step: lesson 03. Many tiny operations: `foreach`
#   and fused optimizers, larger batches, `torch.compile` (lesson 11).
# - "GPU utilisation" is the share of time some kernel runs, not how fast it runs.
#
# Next: lesson 11, `torch.compile`, which fuses many small operators into fewer kernels.
