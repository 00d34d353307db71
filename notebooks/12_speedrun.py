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
# # 12 · Capstone: the speedrun ladder
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/12_speedrun.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/12_speedrun.ipynb)
#
# **What you will learn**
# - how far the course's techniques take one real task together: CIFAR-10, trained rung by
#   rung from a tutorial's loop to the fastest recipe this runtime allows, every rung measured
#   in the same run (seconds per epoch, images/s, test accuracy after the same budget);
# - which rungs pay on which hardware: what a GPU gains from workers, resident data,
#   channels_last, mixed precision, large batches and compiling, and what a CPU does not;
# - why a technique pays on one rung and not on another: each rung's regime (lesson 10's
#   launch-bound, GPU-bound or input-bound), measured on this runtime;
# - what each rung changes in the training loop, as a diff of a few lines;
# - to augment on the GPU: a random crop for every image of a batch in one indexing operation;
# - to write the fast loop yourself, in plain PyTorch, and measure it against rung 0 here.
#
# **Time:** 60 minutes. **Prerequisites:** lessons 03 (the loop), 05 (feeding the GPU),
# 06 (mixed precision) and 11 (`torch.compile`).

# %%
# @title Setup: colab_gpu 0.32.0, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys

COLAB_GPU = "0.32.0"
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
# ## 1. The task and the rungs
#
# Small convolutional networks reach 94% CIFAR-10 test accuracy in a few seconds on one A100
# (Keller Jordan's airbench: 3.29 s). They get there with techniques this course has taught one
# by one: data that lives on the GPU, augmentation done there, channels_last, half precision,
# large batches with a schedule stepped every batch, compiling, and a network and recipe tuned
# for speed (label smoothing, averaging the predictions for each test image and its mirror).
# This lesson adds them up on one task, each rung the rung below plus one technique:

# %%
import matplotlib.pyplot as plt

size = cg.speedrun_ladder.ladder_size(device)
rungs = cg.speedrun_ladder.ladder(device)
for rung in rungs:
    where = f"skipped here: {rung.skip}" if rung.skip else rung.adds
    print(f"rung {rung.number}  {rung.name:32} {where}")
print(f"\nevery rung trains a fresh model for {size.epochs} epochs on {device}")

# %% [markdown]
# Rung 0 is the loop that tutorials (and this course's first drafts) write: a `Dataset` that
# crops, flips and normalizes one image at a time on the CPU, `num_workers=0`, float32, and
# `running_loss += loss.item()` after every step, which makes the CPU wait for the GPU before it
# even fetches the next batch. On a CPU runtime the rungs that only pay on a GPU are skipped,
# and their technique stays off above them too, so each rung still differs from the one below
# by what its line says.
#
# The data: CIFAR-10 where it can be downloaded. Offline, the course's fallback (scikit-learn's
# digits at 3x32x32) is too small to time a GPU with, so on a GPU its training images are
# repeated to CIFAR-10's 50,000: the speeds are then CIFAR-10-sized, the accuracies are digits'.
# A CPU runtime trains on 1,000 of the training images, so that the ladder takes about half a
# minute.

# %%
data = cg.load_cifar10()
if on_gpu and data.fallback:
    data = cg.speedrun_ladder.cifar_sized(data, size.train_images)
elif not on_gpu:
    data = data.limit(train=1_000, test=500)
print(data)

# %% [markdown]
# ## 2. Predict, then climb
#
# Before you run the next cell, write down two guesses: how many times faster per epoch is the
# last rung than rung 0 on this runtime, and which single rung gains the most? (On a CPU runtime
# the GPU rungs are skipped: guess for the rungs that run.) After its epochs, each rung profiles
# five more of its steps (`profile=True`, lesson 10's `cg.profile_step`): its line ends with
# what bounds that step here.

# %%

results = cg.run_ladder(data, device, profile=True)

# %% [markdown]
# ## 3. The ladder as a table and a plot
#
# Seconds per epoch are the median of the epochs after the first: the first pays for starting
# workers and cuDNN's autotuning (and rung 5's compiling happens before the clock starts, timed
# apart). Accuracy is measured on the test set after the same number of epochs for every rung.

# %%
ran = [r for r in results if r.epoch_seconds]
base = ran[0].seconds_per_epoch
print(f"{'rung':34} {'s/epoch':>8} {'images/s':>10} {'speed-up':>9} {'test acc':>9}  regime")
for r in ran:
    print(f"{r.rung.number} {r.rung.name:32} {r.seconds_per_epoch:8.2f} {r.images_per_s:10,.0f} "
          f"{base / r.seconds_per_epoch:8.1f}x {r.test_acc:9.1%}  {r.regime.name}")

figure, (speed_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(11, 3.5))
labels = [str(r.rung.number) for r in ran]
speed_axis.bar(labels, [base / r.seconds_per_epoch for r in ran], color="tab:green")
speed_axis.set(title=f"speed-up per epoch over rung 0 ({device.type})", xlabel="rung", ylabel="x rung 0")
accuracy_axis.plot(labels, [100 * r.test_acc for r in ran], "o-")
accuracy_axis.set(title=f"test accuracy after {size.epochs} epochs", xlabel="rung", ylabel="%", ylim=(0, 100))
plt.tight_layout()
plt.show()

# %%
# What every runtime guarantees: rung 0 pays for every image in Python on the CPU and waits on every step.
# The last rung has no per-image Python and no per-step wait; its network is smaller on a CPU (width 16) and,
# on a GPU, wider but in half precision on tensor cores (a T4's spec sheet: 65 TFLOPS fp16, 8.1 fp32).
# And every rung learned.
speedup = base / ran[-1].seconds_per_epoch
fastest = min(ran, key=lambda r: r.seconds_per_epoch)
print(f"the last rung is {speedup:.1f}x faster per epoch than rung 0 on {device}; the fastest per epoch is rung "
      f"{fastest.rung.number}, {base / fastest.seconds_per_epoch:.1f}x")
assert speedup > 1
assert all(r.test_acc > 2 / len(data.classes) for r in ran), "a rung did not learn: its accuracy is near chance"

# %% [markdown]
# Read your ladder against your predictions. On a GPU, rung 0 is bound by the CPU (one image at
# a time through the transforms, then a wait on every `.item()`), so the rungs that move work
# off the CPU gain the most, and each later rung only gains once the one below it has removed
# the bottleneck in front of it. Rung 6 is tuned for time to accuracy rather than for seconds per
# epoch: on a GPU its network does more arithmetic per image than the lesson 04 CNN, to buy it
# back in accuracy per epoch: your table's last columns say whether it did. That is why the
# bench (`python -m colab_gpu bench --only speedrun`) compares rung 0 with the *fastest* rung per
# epoch, not with the last. On a CPU runtime the arithmetic dominates every rung, and only the
# smaller network of the last rung does much: the reason this course's speed-ups are measured on
# GPUs.
#
# ## 4. Why a technique loses on one rung and pays on another: the regime
#
# The regime column is lesson 10's rule, applied to a few steps of each rung on this runtime.
# Each line below says what the step waits for:

# %%
for r in ran:
    print(f"rung {r.rung.number}: {r.regime}")

# %% [markdown]
# Mixed precision, `channels_last`, `cudnn.benchmark` and `torch.compile`'s fusion make
# **kernels** cheaper. They pay only on a step that waits on its kernels (GPU-bound). At batch
# 128 the small CNN's step is short, and on a fast GPU it is *launch-bound*: the GPU finishes each
# kernel before Python has launched the next one, so cheaper kernels save nothing, while
# autocast adds cast kernels and a compiled model adds its guards. That is how rung 3 can come out
# slower than rung 2 (the first H100 run: 1.65 against 1.56 s per epoch). Rung 4's levers are the
# ones a launch-bound step needs: four times the work per launch (batch 512), and a fused optimizer
# (one launch for every parameter, and no wait on GradScaler's overflow flag in float16).
#
# Whether the techniques of rungs 3 and 5 pay once the batch is large depends on the GPU: on a T4
# (8 TFLOP/s in fp32) a batch of 512 keeps it busy, on an H100 the small CNN may still be
# launch-bound, and only the wider speed net of rung 6 keeps it busy (expectations: the committed
# outputs are a CPU's). The next cell measures it where it matters, on the last rung's step:
# the same recipe without `torch.compile`, then also without mixed precision, each profiled.

# %%
last = ran[-1]
variants = cg.speedrun_ladder.run_without_levers(last.rung, data, device, epochs=min(3, size.epochs),
                                                  width=size.width)
for r in [last, *variants]:
    print(f"{r.rung.name:42} {r.seconds_per_epoch:6.2f} s/epoch  {r.regime}")
for with_it, without in zip([last, *variants], variants, strict=False):  # each variant lacks one more lever
    lever = without.rung.adds.removesuffix(" off")
    print(f"with {lever}: {without.seconds_per_epoch / with_it.seconds_per_epoch:.2f}x the speed without it")
if not variants:
    print("CPU runtime: the last rung uses neither torch.compile nor mixed precision (rungs 3 and 5 are skipped "
          "here); on a GPU this cell trains it without each and shows what each pays.")

# %% [markdown]
# ## 5. What each rung changes in the loop
#
# Rung 0's loop is the starting code of this lesson's exercise: a `Dataset` that transforms one
# image at a time, a `DataLoader`, and the loop of lesson 03. Each rung is the rung below plus a
# few lines. Here they are as diffs (`-` a line taken out, `+` a line put in), with a GPU's
# sizes (a CPU's ladder uses batches of 32 and 64 and a speed net of width 16).
#
# **Rung 1, workers + pinned memory** (lesson 05): the transforms run in worker processes while
# the GPU trains, and batches arrive in page-locked memory, so their copies can be asynchronous.
#
# ```diff
# -loader = DataLoader(dataset, batch_size=128, shuffle=True)
# +loader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=2, pin_memory=True,
# +                    persistent_workers=True)
#  for inputs, targets in loader:
# -    inputs, targets = inputs.to(device), targets.to(device)
# +    inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
# ```
#
# **Rung 2, data on the device** (lesson 05, and section 6 below): the uint8 images go to the
# device once; every batch is indexed, cropped, flipped and normalized there; nothing reads the
# loss during the epoch, so the CPU queues steps ahead of the GPU.
#
# ```diff
# -loader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=2, pin_memory=True, ...)
# +images, labels = data.train_images.to(device), data.train_labels.to(device)  # uint8, once
# +mean, std = (t.to(device)[:, None, None] for t in data.normalization())
#  for epoch in range(epochs):
# -    for inputs, targets in loader:
# -        inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
# +    order = torch.randperm(len(images), device=device)
# +    for step in range(len(images) // batch_size):
# +        index = order[step * batch_size:(step + 1) * batch_size]
# +        batch = cg.per_sample_flip(cg.random_crop(images[index], 4))
# +        inputs, targets = (batch.float() / 255 - mean) / std, labels[index]
#          loss = F.cross_entropy(model(inputs), targets)
#          ...
# -        running_loss += loss.item()
# ```
#
# **Rung 3, channels_last + mixed precision** (lessons 04 and 06):
#
# ```diff
# -model = model.to(device)
# +model = model.to(device, memory_format=torch.channels_last)
# +torch.backends.cudnn.benchmark = True
# +dtype = cg.choose_precision(device).dtype  # bf16, or fp16 with a GradScaler on a T4
# +scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
#  ...
# -        loss = F.cross_entropy(model(inputs), targets)
# +        inputs = inputs.contiguous(memory_format=torch.channels_last)
# +        with torch.autocast(device.type, dtype=dtype):
# +            loss = F.cross_entropy(model(inputs), targets)
#          optimizer.zero_grad()
# -        loss.backward()
# -        optimizer.step()
# +        scaler.scale(loss).backward()
# +        scaler.step(optimizer)
# +        scaler.update()
# ```
#
# **Rung 4, large batch + schedule**: four times fewer steps, a learning rate that warms up
# then anneals at every batch, and a fused optimizer.
#
# ```diff
# -batch_size = 128
# +batch_size = 512
# -optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
# +optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True,
# +                            weight_decay=5e-4, fused=True)
# +for parameter in model.parameters():
# +    optimizer.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)
# +schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.2, total_steps=epochs * steps,
# +                                               pct_start=0.25, anneal_strategy="linear")
#  ...
#          scaler.update()
# +        schedule.step()
# ```
#
# A fused SGD updates every parameter in one kernel and reads GradScaler's overflow flag on the
# GPU, where a plain optimizer's `scaler.step` waits for it: a `.item()` per step in float16.
# Its first step creates the momentum buffers with `torch.empty_like`, and a first step that
# GradScaler skips (an overflow, common at the start) would leave them holding garbage:
# starting them at zeros gives what a first step computes anyway.
#
# **Rung 5, `torch.compile`** (lesson 11): the ladder compiles before its clock starts.
#
# ```diff
# +compiled = torch.compile(model)
#  ...
# -            loss = F.cross_entropy(model(inputs), targets)
# +            loss = F.cross_entropy(compiled(inputs), targets)
# ```
#
# **Rung 6, speed net + recipe**: a network shaped for the hardware, its own learning rate,
# label smoothing, and at test time the logits of each image and of its mirror, averaged.
#
# ```diff
# -model = cg.small_cnn(3, 10, 32)
# +model = cg.speed_net(3, 10, width=64)
# -optimizer = torch.optim.SGD(model.parameters(), lr=0.2, ...)
# +optimizer = torch.optim.SGD(model.parameters(), lr=0.05, ...)
# -            loss = F.cross_entropy(compiled(inputs), targets)
# +            loss = F.cross_entropy(compiled(inputs), targets, label_smoothing=0.2)
#  # testing
# -logits = model(images)
# +logits = (model(images) + model(images.flip(-1))) / 2
# ```
#
# ## 6. Augmentation on the GPU, for every image
#
# A torchvision v2 transform called on a batch draws one random crop for the whole batch
# (lesson 05 showed it for flips), and cropping image by image in Python costs a call per
# image. Rung 2 pads the batch once and indexes it with a different offset for every image:
# one operation for the batch, on the device. Row indices of shape `(N, 1, H, 1)` and column
# indices of shape `(N, 1, 1, W)` broadcast, with the batch and channel indices, to the whole
# `(N, C, H, W)` crop:

# %%
from torch.nn import functional as F
from torchvision.transforms import v2


def random_crop(images, padding):
    """Pad a batch (N, C, H, W) by reflection, then cut every image back to H x W at its own offset."""
    n, c, h, w = images.shape
    padded = F.pad(images.float(), (padding,) * 4, mode="reflect").to(images.dtype)  # reflect needs floats
    dy = torch.randint(0, 2 * padding + 1, (n, 1), device=images.device)
    dx = torch.randint(0, 2 * padding + 1, (n, 1), device=images.device)
    rows = (dy + torch.arange(h, device=images.device))[:, None, :, None]  # (N, 1, H, 1)
    cols = (dx + torch.arange(w, device=images.device))[:, None, None, :]  # (N, 1, 1, W)
    batch = torch.arange(n, device=images.device)[:, None, None, None]
    channel = torch.arange(c, device=images.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


torch.manual_seed(0)
sample = data.test_images[:4]
cg.show_images(torch.cat([sample, random_crop(sample, padding=8)]), ["original"] * 4 + ["cropped"] * 4,
               columns=4, title="each image cut at its own offset (padding exaggerated)")
plt.show()

# %%
images = data.train_images[:1024].to(device)
one_at_a_time = v2.RandomCrop(32, padding=4, padding_mode="reflect")
loop = cg.benchmark(lambda: torch.stack([one_at_a_time(image) for image in images]), device=device, repeat=3)
batched = cg.benchmark(lambda: random_crop(images, 4), device=device, repeat=5)
print(f"{len(images):,} images cropped on {device}: {loop.median * 1e3:.1f} ms one at a time, "
      f"{batched.median * 1e3:.1f} ms as one operation ({loop.median / batched.median:.0f}x)")
assert batched.median < loop.median  # a Python call per image against one indexing operation

# %% [markdown]
# `cg.random_crop(images, padding)` is this function, and `cg.per_sample_flip(images)` (lesson
# 05) flips each image on its own coin: the exercise uses both.
#
# ## 7. Common error: uint8 images into the model
#
# Keeping the images as uint8 on the GPU is what makes rung 2 fit and fast (a quarter of the
# memory and of the copies of float32). Forget to convert them before the model, and the first
# convolution stops: its weights are float32, the batch is bytes. Convert on the device, after
# indexing the batch: `(images.float() / 255 - mean) / std`, which is what rung 2's loop does.
# The message depends on the device: "expected scalar type Byte but found Float" on a CPU,
# "Input type (torch.cuda.ByteTensor) and weight type (torch.cuda.FloatTensor) should be the
# same" from cuDNN on a GPU.

# %%
model = cg.speed_net(3, 10, width=8).to(device)
uint8_batch = data.test_images[:8].to(device)
with cg.shows_error(RuntimeError, match="expected scalar type Byte but found Float|Input type",
                    fix="convert the uint8 batch on the device: images.float().div(255), then normalize"):
    model(uint8_batch)
mean, std = data.normalization()
normalized = (uint8_batch.float().div(255) - mean.to(device)[:, None, None]) / std.to(device)[:, None, None]
print("converted batch:", normalized.dtype, tuple(model(normalized).shape))

# %% [markdown]
# ## Exercise: write the fast loop
#
# The next cell is rung 0 in plain PyTorch: `train_fast(data, device, epochs)` trains a fresh
# model on `data` for `epochs` epochs and returns it. Make it at least twice as fast as rung 0
# was in your ladder, to a comparable test accuracy, by applying section 5's diffs yourself (about
# 40 lines in the end). The rules of the check, `cg.checks.fast_loop`:
#
# - its clock runs for the whole call, like a speedrun's: moving the data, building the model and
#   every epoch count, and compiling would too (leave rung 5 out unless your epochs are long
#   enough to pay it back);
# - it evaluates the model you return on the test images, normalized with `data.normalization()`
#   (no test-time flips), and compares with rung 0's accuracy in your ladder;
# - `cg.speedrun_ladder.ladder_size(device)` has this device's sizes: `batch_size` (rung 0),
#   `large_batch` and `width` (the speed net's).
#
# On a CPU runtime only rungs 2, 4 and 6 apply. On a GPU, go further afterwards: train your loop
# on the real CIFAR-10 for 16 epochs. The records point at 93% test accuracy in under 15 seconds
# of training on an A100 or H100; no run of this course has measured that yet (its GPU machines
# cannot download CIFAR-10), and `cg.speedrun(data, device)` trains the ladder's last rung at that
# length if you want a second opinion.

# %%
from torch.utils.data import DataLoader, Dataset


class CroppedFlipped(Dataset):
    """Rung 0's data: every image cropped, flipped and normalized on the CPU, one at a time."""

    def __init__(self, images, labels, mean, std):
        self.images, self.labels = images, labels
        self.transform = v2.Compose([
            v2.RandomCrop(32, padding=4, padding_mode="reflect"), v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean.tolist(), std.tolist())])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.transform(self.images[index]), self.labels[index]


def train_fast(data, device, epochs):
    """Rung 0, the seeds' loop: make it at least twice as fast, to a comparable accuracy."""
    torch.manual_seed(0)
    size = cg.speedrun_ladder.ladder_size(device)
    mean, std = data.normalization()
    loader = DataLoader(CroppedFlipped(data.train_images, data.train_labels, mean, std),
                        batch_size=size.batch_size, shuffle=True)
    model = cg.small_cnn(3, len(data.classes), 32).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    model.train()
    for _ in range(epochs):
        running_loss = 0.0
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = F.cross_entropy(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()  # the CPU waits for the GPU at every step
    return model


# %% tags=["solution"]
def train_fast(data, device, epochs):
    """Rungs 2, 3, 4 and 6 in one loop (rung 3 on a GPU only): no per-image Python, no wait per step."""
    torch.manual_seed(0)
    size, on_gpu = cg.speedrun_ladder.ladder_size(device), device.type == "cuda"
    images, labels = data.train_images.to(device), data.train_labels.to(device)  # uint8, once
    mean, std = (t.to(device)[:, None, None] for t in data.normalization())
    layout = torch.channels_last if on_gpu else torch.contiguous_format
    model = cg.speed_net(3, len(data.classes), width=size.width).to(device, memory_format=layout)
    batch_size = size.large_batch
    steps = len(images) // batch_size  # whole batches only: one shape for cuDNN and the schedule
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4,
                                fused=on_gpu)
    for parameter in model.parameters():  # see rung 4's note: a skipped fused first step leaves them unset
        optimizer.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.05, total_steps=epochs * steps, pct_start=0.25,
                                                   anneal_strategy="linear")
    dtype = cg.choose_precision(device).dtype if on_gpu else None  # None: float32
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    torch.backends.cudnn.benchmark = on_gpu
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(images), device=device)
        for step in range(steps):
            index = order[step * batch_size:(step + 1) * batch_size]
            batch = cg.per_sample_flip(cg.random_crop(images[index], 4))
            inputs = ((batch.float() / 255 - mean) / std).contiguous(memory_format=layout)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = F.cross_entropy(model(inputs), labels[index], label_smoothing=0.2)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            schedule.step()
    return model


# %%
cg.checks.fast_loop(train_fast, data, device, baseline=results[0])

# %% [markdown]
# ## Summary
#
# - Speed-ups add up only in order: each technique removes one bottleneck, and the next one only
#   shows once the one in front of it is gone. Measure every rung in the same run.
# - A technique pays only in its regime: mixed precision, channels_last and compiling make kernels
#   cheaper, which a launch-bound step does not wait on; a bigger batch and a fused optimizer are
#   that step's levers. Profile a few steps (`cg.profile_step`) before choosing.
# - On a GPU: feed it (workers, or better, uint8 data resident on the device and augmented
#   there), stop synchronizing every step, use its tensor cores (channels_last, the precision
#   lesson 06 chooses), give it large batches with a per-batch schedule and a fused optimizer
#   (its momentum started at zeros), compile, and pick a network shaped for the hardware.
# - A v2 transform on a batch draws once per call; indexing a padded batch with per-image
#   offsets crops every image at its own (`cg.random_crop`), and `cg.per_sample_flip` flips each
#   on its own coin, in one operation on the device.
# - Time a speedrun by the whole call: data, model and every epoch. `cg.run_ladder(data, device)`
#   measures the ladder side by side; `cg.speedrun(data, device)` trains its last rung;
#   `python -m colab_gpu bench --only speedrun` compares rung 0 with the fastest rung.
