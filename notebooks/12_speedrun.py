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
# - to augment on the GPU: a random crop for every image of a batch in one indexing operation;
# - to run the last rung as one call, `cg.speedrun(...)`, and read its time to accuracy.
#
# **Time:** 45 minutes. **Prerequisites:** lessons 03 (the loop), 05 (feeding the GPU),
# 06 (mixed precision) and 11 (`torch.compile`).

# %%
# @title Setup: colab_gpu 0.21.1, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys

COLAB_GPU = "0.21.1"
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
# A CPU runtime trains on a slice of CIFAR-10 (1,500 images), so that the ladder takes a minute.

# %%
data = cg.load_cifar10()
if on_gpu and data.fallback:
    data = cg.speedrun_ladder.cifar_sized(data, size.train_images)
elif not on_gpu:
    data = data.limit(train=1_500, test=500)
print(data)

# %% [markdown]
# ## 2. Predict, then climb
#
# Before you run the next cell, write down two guesses: how many times faster per epoch is the
# last rung than rung 0 on this runtime, and which single rung gains the most? (On a CPU runtime
# the GPU rungs are skipped: guess for the rungs that run.)

# %%
results = cg.run_ladder(data, device)

# %% [markdown]
# ## 3. The ladder as a table and a plot
#
# Seconds per epoch are the median of the epochs after the first: the first pays for starting
# workers and cuDNN's autotuning (and rung 5's compiling happens before the clock starts, timed
# apart). Accuracy is measured on the test set after the same number of epochs for every rung.

# %%
ran = [r for r in results if r.epoch_seconds]
base = ran[0].seconds_per_epoch
print(f"{'rung':34} {'s/epoch':>8} {'images/s':>10} {'speed-up':>9} {'test acc':>9}")
for r in ran:
    print(f"{r.rung.number} {r.rung.name:32} {r.seconds_per_epoch:8.2f} {r.images_per_s:10,.0f} "
          f"{base / r.seconds_per_epoch:8.1f}x {r.test_acc:9.1%}")

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
print(f"the last rung is {speedup:.1f}x faster per epoch than rung 0 on {device}")
assert speedup > 1
assert all(r.test_acc > 2 / len(data.classes) for r in ran), "a rung did not learn: its accuracy is near chance"

# %% [markdown]
# Read your ladder against your predictions. On a GPU, rung 0 is bound by the CPU (one image at
# a time through the transforms, then a wait on every `.item()`), so the rungs that move work
# off the CPU gain the most, and each later rung only gains once the one below it has removed
# the bottleneck in front of it: lesson 10's profiler shows where each rung spends its time.
# One such hand-over: in float16 (a T4) rung 3's GradScaler reads an overflow flag after every
# step, a `.item()` in disguise, until rung 4's fused optimizer checks it on the GPU instead.
# Rung 6 is tuned for time to accuracy rather than for seconds per epoch: on a GPU its network
# does more arithmetic per image than the lesson 04 CNN, which a small GPU may feel, to buy
# it back in accuracy per epoch: your table's last column says whether it did. On a CPU
# runtime the arithmetic dominates every rung, and only the smaller network of the last rung
# does much: the reason this course's speed-ups are measured on GPUs.
#
# ## 4. Augmentation on the GPU, for every image
#
# A torchvision v2 transform called on a batch draws one random crop for the whole batch
# (lesson 05 showed it for flips), and cropping image by image in Python costs a call per
# image. Rung 2 pads the batch once and indexes it with a different offset for every image:
# one operation for the batch, on the device. `cg.random_crop` is that function; writing it
# yourself is this lesson's exercise. Here it is on four digits, padding exaggerated:

# %%
sample = data.test_images[:4]
crops = cg.random_crop(sample, padding=8, generator=torch.Generator().manual_seed(0))
cg.show_images(torch.cat([sample, crops]), ["original"] * 4 + ["cropped"] * 4, columns=4,
               title="each image cut at its own offset")
plt.show()

# %% [markdown]
# ## 5. The last rung, at full length: `cg.speedrun`
#
# `cg.speedrun(data, device)` trains the last rung of this runtime's ladder, for longer than the
# ladder's budget (16 epochs on a GPU, the ladder's 3 on a CPU). On a
# GPU the course's target is the one the records point at: with the real CIFAR-10 on an H100 or
# A100, at least 93% test accuracy in under 15 seconds of training. No measurement backs that
# figure yet (the course's GPU machines cannot download CIFAR-10): run this cell on a GPU with
# the real data set and compare. `python -m colab_gpu bench --only speedrun` times rung 0 and the
# last rung side by side; on an offline fallback the accuracy here is digits'.

# %%
final = cg.speedrun(data, device)
training = sum(final.epoch_seconds)
print(f"time to {final.test_acc:.1%}: {training:.1f} s of training on {device}"
      + (f" (compiling took {final.warmup_s:.1f} s before)" if final.warmup_s else ""))
if data.fallback:
    print("accuracy on the offline fallback (digits): the 93% target needs the real CIFAR-10")
assert final.test_acc > 2 / len(data.classes)

# %% [markdown]
# ## 6. Common error: uint8 images into the model
#
# Keeping the images as uint8 on the GPU is what makes rung 2 fit and fast (a quarter of the
# memory and of the copies of float32). Forget to convert them before the model, and the first
# convolution stops: its weights are float32, the batch is bytes. Convert on the device, after
# indexing the batch: `(images.float() / 255 - mean) / std`, which is what the augmenting loader
# of rung 2 does. The message depends on the device: "expected scalar type Byte but found Float"
# on a CPU, "Input type (torch.cuda.ByteTensor) and weight type (torch.cuda.FloatTensor) should
# be the same" from cuDNN on a GPU.

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
# ## Exercise: crop every image at its own offset
#
# Write `my_crop(images, padding)`: pad a uint8 batch `(N, C, H, W)` by `padding` pixels on
# every side (zeros, or `mode="reflect"` on a float copy), then cut an `H x W` window out of
# every image at its own random offset between 0 and `2 * padding`, for the whole batch at once.
# Hint: draw `dy` and `dx` of shape `(N, 1)`, build row and column indices of shape `(N, 1, H,
# 1)` and `(N, 1, 1, W)`, and index the padded batch with them (broadcasting does the rest).
# `cg.check_random_crop` checks that every image is its input shifted, that the shifts differ
# between images, and that your crop beats cropping 1,024 images one at a time on this runtime.

# %%
from torchvision.transforms import v2


def my_crop(images, padding):
    crop = v2.RandomCrop(images.shape[-1], padding=padding)
    return crop(images)  # one random offset for the whole batch


# %% tags=["solution"]
def my_crop(images, padding):
    n, c, h, w = images.shape
    padded = torch.nn.functional.pad(images, (padding,) * 4)  # zeros around every image
    dy = torch.randint(0, 2 * padding + 1, (n, 1), device=images.device)
    dx = torch.randint(0, 2 * padding + 1, (n, 1), device=images.device)
    rows = (dy + torch.arange(h, device=images.device))[:, None, :, None]
    cols = (dx + torch.arange(w, device=images.device))[:, None, None, :]
    batch = torch.arange(n, device=images.device)[:, None, None, None]
    channel = torch.arange(c, device=images.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


# %%
cg.check_random_crop(my_crop, device)

# %% [markdown]
# ## Summary
#
# - Speed-ups add up only in order: each technique removes one bottleneck, and the next one only
#   shows once the one in front of it is gone. Measure every rung in the same run.
# - On a GPU: feed it (workers, or better, uint8 data resident on the device and augmented
#   there), stop synchronizing every step, use its tensor cores (channels_last, the precision
#   lesson 06 chooses), give it large batches with a per-batch schedule and a fused optimizer,
#   compile, and pick a network shaped for the hardware.
# - A v2 transform on a batch draws once per call; `cg.random_crop` and `cg.per_sample_flip`
#   draw once per image, in one operation on the device.
# - `cg.run_ladder(data, device)` measures the ladder; `cg.speedrun(data, device)` trains its
#   last rung; `python -m colab_gpu bench --only speedrun` compares rung 0 and the
#   last rung.
