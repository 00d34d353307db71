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
# # 05 · Feeding the GPU: workers, pinned memory, GPU-resident data, GPU augmentation
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/05_feeding_the_gpu.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/05_feeding_the_gpu.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - why a GPU waits for the CPU, and how `num_workers`, `persistent_workers` and
#   `prefetch_factor` spread a CPU-heavy input pipeline over the cores (measured);
# - `pin_memory=True` with `non_blocking=True` copies, measured against pageable memory;
# - keeping a whole data set on the GPU and batching it there;
# - augmenting uint8 image batches on the GPU with `torchvision.transforms.v2`, and its caveat;
# - two classic mistakes: CUDA inside worker processes, and more workers than cores.
#
# **Time:** 45 minutes. **Prerequisites:** lessons 03 and 04.
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
# A training step on a GPU can take a millisecond. If preparing the next batch takes ten on the
# CPU, the GPU sits idle 90% of the time, and no GPU upgrade will help. This lesson measures
# each stage of the input pipeline and fixes the slow ones.
#
# ## 1. A CPU-heavy pipeline: decode and augment every image
#
# Real image data sets are stored as compressed files (JPEG, PNG). Every sample must be
# decoded, then augmented (random crop, flip, colour jitter), then converted to float. We build
# exactly that from CIFAR-10 (or the offline digits), stored as JPEG bytes in memory and decoded
# with Pillow, as torchvision's `ImageFolder` does.

# %%
import matplotlib.pyplot as plt
from torchvision.transforms import v2

on_gpu = device.type == "cuda"
cores = cg.cpu_count()  # the cores this process may use
torch.manual_seed(0)
data = cg.load_cifar10()
mean, std = data.normalization()

cpu_augment = v2.Compose([
    v2.RandomResizedCrop(32, scale=(0.6, 1.0), antialias=True),
    v2.RandomHorizontalFlip(),
    v2.ColorJitter(brightness=0.3, contrast=0.3, saturation=0.3),
    v2.ToDtype(torch.float32, scale=True),  # uint8 0..255 -> float 0..1
    v2.Normalize(mean.tolist(), std.tolist()),
])
jpegs = cg.EncodedImages(data.train_images[:2048], data.train_labels[:2048], cpu_augment)
image, label = jpegs[0]
print(f"{len(jpegs)} JPEG images, {sum(len(e) for e in jpegs.encoded) / 1e6:.1f} MB encoded; one sample:",
      tuple(image.shape), image.dtype)
print(f"this runtime has {cores} CPU cores")

# %% [markdown]
# ## 2. `num_workers`: spread the work over the cores
#
# With `num_workers=0` the training process itself decodes every image. With `N` workers,
# `N` extra processes prepare batches in parallel and hand them over.
# - `persistent_workers=True` keeps them alive between epochs (otherwise every epoch pays
#   the start-up of `N` processes again);
# - `prefetch_factor` is how many batches each worker prepares ahead (default 2).
#
# We measure samples per second for worker counts from 0 up to **twice** the number of cores,
# so that the curve can show what happens past them. Each count is timed in its steady state:
# its first batches start the workers and are not counted, then ten batches per worker are (ten
# rounds, and at least 20 batches), drawn at random from the data set, repeated as often as
# needed. Why so many? Time one epoch of a small data set and you time its batch count instead:
# the offline digits make 12 batches of 128, which 8 workers prepare in 2 rounds and 16 workers
# in 1, so 16 "win" whatever the cores. `cg.sweep_workers` is that loop over `cg.worker_loader`
# (read it with `cg.sweep_workers??`), the same experiment `python -m colab_gpu bench` runs.

# %%
samples_per_s = cg.sweep_workers(jpegs, device, verbose=True)  # num_workers = 0, 1, 2, ... twice the cores

fastest = max(samples_per_s, key=samples_per_s.get)
print(f"fastest: num_workers={fastest}, {samples_per_s[fastest] / samples_per_s[0]:.2f}x the samples/s of "
      "loading in the main process")
# Not asserted: on Colab's 2 vCPUs (two hyper-threads of one physical core) the gain can be close
# to 1x. On a machine with idle physical cores it is large.

fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(list(samples_per_s), list(samples_per_s.values()), marker="o")
ax.axvline(cores, color="grey", linestyle="--", label=f"{cores} cores")
ax.set(xlabel="num_workers", ylabel="samples/s", title="JPEG decode + augment")
ax.legend()
plt.show()

# %% [markdown]
# Past the number of cores, workers take turns on the same cores, so the curve flattens
# somewhere there; a worker also waits (handing its batch to the main process), so a few more
# can fill those waits. On the course's H100 run (2026-11-26, 16 cores) it still rose past the
# cores (32 workers: 14,092 samples/s, +23% over 16); on Colab's 2 vCPUs expect it to flatten
# at 2 (prediction: t4 05.workers_plateau). One worker can be slower than none (946 against 1,245 samples/s on that
# run): it decodes what the main process would, and each batch must then travel to it. Before you measure,
# `cg.suggest_num_workers()` follows a rule: one worker per core, at most 8. Given your sweep,
# it picks the fewest workers within 10% of the fastest, where the plateau starts, never more
# than the cores (past them workers compete for the cores as soon as anything else runs, and
# PyTorch warns), and says why: that is the number to use on this runtime.

# %%
rule = cg.suggest_num_workers()
print("rule:    ", rule)
assert rule.num_workers <= max(cores, 1)
advice = cg.suggest_num_workers(measured=samples_per_s)
print("measured:", advice)

# %% [markdown]
# ### Mistake: more workers than cores
#
# Copying `num_workers=16` from a tutorial written on a workstation is the most common
# slowdown on Colab. PyTorch warns when it sees it:

# %%
import warnings

too_many = 4 * cores
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loader = cg.worker_loader(jpegs, 128, device=device, num_workers=too_many, persistent_workers=False)
    next(iter(loader))
messages = [str(w.message) for w in caught if "worker" in str(w.message)]
print(messages[0] if messages else "no warning")
assert messages, "PyTorch warns when a DataLoader asks for more workers than cores"

# %% [markdown]
# ## 3. Pinned memory and `non_blocking=True`
#
# A GPU copies from host memory by DMA, which needs *page-locked* ("pinned") memory. From
# ordinary (pageable) memory, CUDA first copies into a pinned staging buffer, then to the
# GPU, and the call blocks. From pinned memory the copy is direct, and with
# `non_blocking=True` it is asynchronous: the CPU moves on while the batch travels.
# `DataLoader(pin_memory=True)` puts each batch in pinned memory (a background thread does it).

# %%
cg.show_figure("pinned_copy")  # the two paths; the cell below measures them on this runtime

# %%
import statistics

if on_gpu:
    sizes = [1, 16, 64, 256]
    bandwidth = {kind: [cg.copy_bandwidth(mb, device, pinned=kind == "pinned") for mb in sizes]
                 for kind in ("pageable", "pinned")}
    for i, mb in enumerate(sizes):
        pageable, pinned = bandwidth["pageable"][i], bandwidth["pinned"][i]
        print(f"{mb:4d} MiB: pageable {pageable:5.1f} GB/s, pinned {pinned:5.1f} GB/s")
    # What physics guarantees: a pinned copy skips the staging copy, so it is not slower (10% noise
    # allowed, on the median over sizes); no course runtime's PCIe link moves 100 GB/s, so a faster
    # figure would mean an asynchronous copy was timed before it finished.
    median_gbps = {kind: statistics.median(values) for kind, values in bandwidth.items()}
    print(f"median over sizes: pageable {median_gbps['pageable']:.1f} GB/s, pinned {median_gbps['pinned']:.1f} GB/s")
    assert median_gbps["pinned"] > 0.9 * median_gbps["pageable"], "pinned copies should not be slower"
    assert all(0 < gbps < 100 for values in bandwidth.values() for gbps in values), bandwidth
    fig, ax = plt.subplots(figsize=(5, 3))
    for kind, values in bandwidth.items():
        ax.plot(sizes, values, marker="o", label=kind)
    ax.set(xscale="log", xlabel="MiB copied", ylabel="GB/s", title="host to device copies")
    ax.legend()
    plt.show()
else:
    print("CPU runtime: there is no host-to-device copy to measure. Pinned copies skip the staging copy, so they "
          "are faster; run this cell on a GPU runtime to see by how much on yours.")

# %% [markdown]
# ## 4. Keep the whole data set on the GPU
#
# FashionMNIST is 60,000 images of 28x28: 47 MB as uint8, 188 MB as float32. That fits in
# any GPU's memory many times over. Put it there once, and each epoch only shuffles an index
# on the GPU and slices batches: no workers, no per-sample Python, no copies.
# `cg.DeviceLoader` does that. We compare one training epoch of lesson 03's MLP with the
# default `DataLoader` (`num_workers=0`, pageable memory) on the same data (random tensors of
# FashionMNIST's size: this section is about speed, not learning). **Predict first:** how many
# times faster will an epoch be with the data already on the GPU?

# %%
my_prediction = None  # your guess of the epoch speed-up from a GPU-resident loader, e.g. 2

# %%
from torch.utils.data import DataLoader, TensorDataset

n = cg.feeding.epoch_samples(device)  # FashionMNIST's 60,000 on a GPU, fewer on a CPU (the bench's size)
images_cpu, labels_cpu = torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,))
fake = TensorDataset(images_cpu, labels_cpu)

default_loader = DataLoader(fake, batch_size=256, shuffle=True)  # num_workers=0, pageable
resident_loader = cg.DeviceLoader(images_cpu, labels_cpu, batch_size=256, device=device)
print(f"on the device: {resident_loader.inputs.device}, {resident_loader.inputs.nbytes / 1e6:.0f} MB")
no_loading = [next(iter(resident_loader))] * len(resident_loader)  # one batch on the device, every step

# %%
# A fresh lesson-03 MLP per loader, a warm-up epoch each, then 7 epochs each, the loaders taking turns
# (the bench's "resident_epoch" row): the gain and its bound below come from their medians
timings = cg.time_loader_epochs(
    {"DataLoader": default_loader, "DeviceLoader": resident_loader, "no loading": no_loading}, device)
for name, result in timings.items():
    print(f"{name:>12}: one epoch of {n:,} samples in {result}")
epoch_seconds = {name: result.median for name, result in timings.items()}

resident_gain = epoch_seconds["DataLoader"] / epoch_seconds["DeviceLoader"]
print(f"the GPU-resident loader makes the training epoch {resident_gain:.1f}x faster")
cg.compare_with_references("05.resident_epoch_gain", resident_gain, device, prediction=my_prediction,
                           what="one MLP epoch, DeviceLoader vs the default DataLoader, speed-up",
                           workload={"samples per epoch": n})
cg.bar_seconds({name: epoch_seconds[name] for name in ("DataLoader", "DeviceLoader")},
               f"one MLP epoch, {n:,} samples, {device}")
plt.show()

# %% [markdown]
# Why does the epoch gain less than the loaders differ? The loaders alone first, then the
# epoch split into loading and training steps, then each step's regime (lesson 10's rule).

# %%
# The loaders alone, without training: batches per second delivered to the device (best of 3).
batches_per_s = {name: max(cg.measure_loader(loader, device) for _ in range(3)) * len(resident_loader) / n
                 for name, loader in (("DataLoader", default_loader), ("DeviceLoader", resident_loader))}
print("the loaders alone: " + ", ".join(f"{name} {rate:,.0f} batches/s" for name, rate in batches_per_s.items())
      + f" ({batches_per_s['DeviceLoader'] / batches_per_s['DataLoader']:.0f}x)")

# Why the epoch gains so much less: an epoch is loading + training, and the steps cost the same behind any loader.
train_s = epoch_seconds["no loading"]
load_s = epoch_seconds["DataLoader"] - train_s
print(f"the DataLoader's epoch: {load_s:.2f} s of loading + {train_s:.2f} s of training steps; no loader removes "
      f"the steps, so the epoch gains at most (load + train) / train = {(load_s + train_s) / train_s:.1f}x")
if on_gpu:
    assert resident_gain > 1, "on a GPU the input pipeline is a large part of a small model's epoch"

# %%
# Each step's regime, fed by each loader (profiled, so this cell takes a few seconds).
for name, loader in (("DataLoader", default_loader), ("DeviceLoader", resident_loader)):
    print(f"a step fed by the {name}: {cg.profile_step(cg.feeding.training_step(loader, device), device).regime}")


# %%
# The work each loader does. Timings swing with whatever else runs on the machine; this does not.
class CountingDataset(torch.utils.data.Dataset):
    """``fake``, counting the per-sample calls that a DataLoader makes."""

    def __init__(self, base):
        self.base, self.calls = base, 0

    def __len__(self):
        return len(self.base)

    def __getitem__(self, index):
        self.calls += 1
        return self.base[index]


counted = CountingDataset(fake)
batches = sum(1 for _ in DataLoader(counted, batch_size=256))
print(f"one epoch: the DataLoader made {counted.calls:,} Python calls of dataset[i] for {batches} batches; "
      f"the DeviceLoader made {len(resident_loader)} slices of a tensor already on {device}")
assert counted.calls == n and batches == len(resident_loader)

# %% [markdown]
# `cg.DeviceLoader` is a few lines of plain PyTorch that you can write in any project: move the
# tensors to the GPU once; each epoch, draw a random order on the device and slice it.

# %%
images_dev, labels_dev = images_cpu.to(device), labels_cpu.to(device)  # once, before training
shuffle = torch.Generator(device=device).manual_seed(0)


def epoch_batches(batch_size=256):
    """One epoch's batches: call it once per epoch (a generator runs once; the next epoch needs a new one)."""
    order = torch.randperm(len(images_dev), device=device, generator=shuffle)  # each epoch: a new order
    return ((images_dev[index], labels_dev[index]) for index in order.split(batch_size))


plain_batches = epoch_batches()

same_seed = cg.DeviceLoader(images_cpu, labels_cpu, batch_size=256, device=device, seed=0)
matches = [torch.equal(x, x2) and torch.equal(y, y2)
           for (x, y), (x2, y2) in zip(plain_batches, same_seed, strict=True)]
print(f"{len(matches)} batches from plain PyTorch, identical to cg.DeviceLoader's with the same seed: {all(matches)}")
assert all(matches)

# %% [markdown]
# The default `DataLoader` fetches samples one by one (`dataset[i]` 256 times per batch),
# then stacks them (*collation*), then copies to the GPU. For small tensors that Python work
# dominates the loader, which is why the loaders alone differ so much. The epoch gains less:
# the training steps cost the same behind either loader, so the gain is bounded by the step's
# own cost, (load + train) / train. To raise the bound, make the step cheaper (a bigger batch, a
# fused optimizer: lesson 10's levers for a launch-bound step). The epoch's "loading" (its time
# minus the no-loading epoch's) can exceed the loader timed alone (on the course's H100 run
# (2026-11-26): 0.50 s against 0.31 s at 767 batches/s): in an epoch, a copy from pageable
# memory can wait for the GPU to finish the queued step, so the host no longer runs ahead. The
# regime cell above (the two lines "a step fed by the ...") names each step's regime on this
# runtime (lesson 10 teaches the rule):
# the wait for data is divided by the step timed *without* the profiler, as the busy share is,
# and is never more than the time the GPU idles. On the course's H100 run (2026-11-26) the step
# fed by the DataLoader was input-bound (the GPU waited 61% of the profiled step, which that
# run divided by) and the one fed from the device launch-bound (busy 11%: this MLP is small);
# expect the same on a T4 (prediction: t4 05.loader_regimes). With Colab's 2 vCPUs the regime line puts the data
# on the GPU before more workers (section 2 measured why). Use a GPU-resident loader whenever
# the data set fits in GPU memory.
#
# ## 5. Augment on the GPU with `torchvision.transforms.v2`
#
# With the data on the GPU, augmentation can run there too, on whole uint8 batches. The v2
# transforms accept batched tensors `(N, C, H, W)` on any device. The correct order:
# 1. `ToImage()` marks the tensor as an image (no copy; the old `ToTensor` is for PIL images
#    and is deprecated in v2);
# 2. random geometric and colour ops on **uint8**;
# 3. `ToDtype(torch.float32, scale=True)` maps 0..255 to 0..1;
# 4. `Normalize` last, on floats.

# %%
gpu_augment = v2.Compose([
    v2.ToImage(),
    v2.RandomResizedCrop(32, scale=(0.6, 1.0), antialias=True),
    v2.RandomHorizontalFlip(),
    v2.ToDtype(torch.float32, scale=True),
    v2.Normalize(mean.tolist(), std.tolist()),
])
uint8_batch = data.train_images[:256].to(device)  # 256 uint8 images, already on the device
augmented = gpu_augment(uint8_batch)
print("in: ", tuple(uint8_batch.shape), uint8_batch.dtype, uint8_batch.device)
print("out:", tuple(augmented.shape), augmented.dtype, augmented.device)
assert augmented.dtype == torch.float32 and augmented.device == uint8_batch.device
assert abs(augmented.mean().item()) < 1.0  # normalized, not 0..255

batch_time = cg.benchmark(lambda: gpu_augment(uint8_batch), device=device)
print(f"augmenting a batch of 256 on {device}: {batch_time} ({256 / batch_time.median:,.0f} images/s; "
      f"no JPEG decoding here: the images are already uint8 tensors)")

# %% [markdown]
# ### The caveat: one random draw per call, i.e. per batch
#
# A v2 random transform draws its parameters **once per call**. Called on a batch, every
# image gets the same crop and the same flip decision. Here we flip a batch ten times and
# count how many images were flipped each time: always all or none.

# %%
flip = v2.RandomHorizontalFlip(p=0.5)
marker = torch.zeros(8, 1, 1, 2, dtype=torch.uint8, device=device)
marker[..., 1] = 1  # each image is [0, 1]; flipped it reads [1, 0]
per_call = [int((flip(marker)[:, 0, 0, 0] == 1).sum()) for _ in range(10)]
print("images flipped per call (of 8):", per_call)
assert set(per_call) <= {0, 8}

# %% [markdown]
# For per-image randomness, either draw a decision per image yourself (`cg.per_sample_flip`
# does it for flips with one `torch.where`), or apply the transform image by image (slower:
# one call per image).

# %%
per_image = [int((cg.per_sample_flip(marker)[:, 0, 0, 0] == 1).sum()) for _ in range(10)]
print("images flipped per call with per_sample_flip:", per_image)
assert any(0 < k < 8 for k in per_image)

loop_time = cg.benchmark(lambda: torch.stack([gpu_augment(img) for img in uint8_batch[:64]]), device=device,
                         repeat=3)
print(f"per-image calls: {loop_time} for 64 images, vs {batch_time} for a batch of 256")

# %% [markdown]
# ## 6. Mistake: CUDA inside worker processes
#
# On Linux, workers are *forked* copies of the notebook's process up to Python 3.13 (Colab's and
# Kaggle's); Python 3.14 starts them with `forkserver` instead, which pickles the dataset and
# cannot find a class defined in a notebook. This section asks for fork by name
# (`multiprocessing_context="fork"`), so it shows the same thing everywhere. CUDA cannot be
# initialized again in a forked child once the parent used it, so a `Dataset` that creates GPU tensors in
# `__getitem__` fails with **"Cannot re-initialize CUDA in forked subprocess"** on a GPU
# runtime. On a CPU runtime the same code runs (there is no CUDA to re-initialize), so this
# cell only fails on a GPU.

# %%
from torch.utils.data import Dataset


class GpuInWorker(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((3,), float(i), device=device)  # wrong: a CUDA tensor in a worker


with cg.shows_error(RuntimeError, match="CUDA", raises=device.type == "cuda"):  # only a GPU runtime fails
    list(DataLoader(GpuInWorker(), batch_size=16, num_workers=2, multiprocessing_context="fork"))

# %% [markdown]
# The fix: workers return **CPU** tensors; the training loop moves each batch to the GPU
# (pinned and non-blocking, as in section 3). Or, when the data fits, skip workers and keep
# the data on the GPU (section 4).

# %%
class CpuInWorker(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((3,), float(i))  # CPU tensor; moved to the GPU in the main process


loader = DataLoader(CpuInWorker(), batch_size=16, num_workers=2, pin_memory=on_gpu, multiprocessing_context="fork")
batches = [batch.to(device, non_blocking=True) for batch in loader]
assert len(batches) == 4 and batches[0].device == device

# %% [markdown]
# ## Exercise
#
# Build `my_loader`: a `DataLoader` over `jpegs` with batch size 128, the number of workers
# your sweep in section 2 measured as the one to use on this runtime (not the rule's guess),
# workers kept alive between epochs, and pinned memory exactly when the device is a GPU. The
# check reads the same sweep. (Hint: `cg.suggest_num_workers(measured=...)`, or `cg.worker_loader`.)

# %%
my_loader = None  # your DataLoader goes here

# %%
cg.checks.loader_settings(my_loader, device, dataset=jpegs, batch_size=128, measured=samples_per_s)

# %% [markdown]
# ### Exercise 2: make feeding faster, and prove it
#
# `default_loader` (section 4) feeds `images_cpu`, `labels_cpu` to the model in batches of 256.
# Build `fast_loader`, which delivers the same samples in batches of 256 at **at least 3 times**
# its rate on this runtime (CPU or GPU). The check measures both loaders here, and that yours
# delivers every sample once per epoch, epoch after epoch: a generator such as section 4's
# `epoch_batches()` runs once, so make something that starts over at every `for` (a class with
# `__iter__`). Write it in plain PyTorch first; `cg.DeviceLoader` is allowed afterwards.

# %%
fast_loader = None  # your loader: anything that yields (inputs, labels) batches

# %%
cg.checks.loader_speed(fast_loader, default_loader, device, samples=len(images_cpu), at_least=3, labels=labels_cpu,
                      batch_size=256)

# %% [markdown]
# ## Summary
#
# - Measure the input pipeline on its own (`cg.measure_loader`): if it delivers fewer
#   samples/s than the GPU trains, the GPU waits.
# - CPU-heavy pipelines: `num_workers` where your sweep's plateau starts (2 on Colab's 2 vCPUs
#   (prediction: t4 05.workers_plateau); the course's 16-core H100 host still gained at 32), `persistent_workers=True`,
#   and `prefetch_factor` if batches arrive unevenly. Time a sweep over enough batches (ten per
#   worker), not over one epoch of a small data set.
# - `pin_memory=True` + `.to(device, non_blocking=True)`: faster, asynchronous copies.
# - Data that fits in GPU memory: keep it there (`cg.DeviceLoader`) and augment on the GPU
#   with v2 on uint8 batches: `ToImage`, random ops, `ToDtype(float32, scale=True)`, `Normalize`.
# - A faster loader speeds up an epoch by at most (load + train) / train: the training step's own
#   cost bounds the gain, however fast the loader alone is.
# - v2 random transforms draw once per call: per batch, not per image.
# - Never create CUDA tensors inside `Dataset.__getitem__` when using workers.
#
# Next: **06 · Mixed precision**.
