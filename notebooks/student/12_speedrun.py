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
# # 12 · Capstone: the speedrun ladder
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/12_speedrun.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/12_speedrun.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - how far the course's techniques take one real task together: CIFAR-10, trained rung by
#   rung from a tutorial's loop to the fastest recipe this runtime allows, every rung measured
#   in the same run (seconds per epoch, images/s, test accuracy after the same budget);
# - which rungs pay on which hardware: what a GPU gains from workers, resident data,
#   channels_last, mixed precision, large batches and compiling, and what a CPU does not;
# - why a technique pays on one rung and not on another: each rung's regime (lesson 10's
#   launch-bound, GPU-bound or input-bound), measured on this runtime;
# - what each rung changes in the training loop, as a diff of a few lines; applied in order, they
#   give the fast loop;
# - to augment on the GPU: a random crop for every image of a batch in one indexing operation;
# - to write the fast loop yourself, measure it against rung 0 here, and take it home in plain
#   PyTorch (and what to do when the data does not fit on the GPU).
#
# **Time:** 80 minutes. **Prerequisites:** lessons 03 (the loop), 05 (feeding the GPU),
# 06 (mixed precision) and 11 (`torch.compile`).
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
# ## 1. The task and the rungs
#
# Small convolutional networks reach 94% CIFAR-10 test accuracy in a few seconds on one A100
# (Keller Jordan's airbench94: 2.59 s; later records, about 2 s). They get there with
# techniques this course has taught one by one: data that lives on the GPU, augmentation done
# there, channels_last, half precision, large batches with a schedule stepped every batch,
# compiling, and a network and recipe tuned for speed (label smoothing, averaging the
# predictions for each test image and its mirror).
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
# The data: CIFAR-10 where it can be downloaded. Offline, the course's stand-in (scikit-learn's
# digits at 3x32x32) is repeated on a GPU to CIFAR-10's 50,000 training images: the speeds are
# then CIFAR-10-sized, the accuracies are digits'. A CPU runtime trains on 1,000 of the training
# images, so that the ladder takes about half a minute.

# %%
data = cg.load_cifar10()
if not on_gpu:
    data = data.limit(train=1_000, test=500)
print(data)

# %% [markdown]
# ## 2. Predict, then climb
#
# Before you run the ladder, write down two guesses in the next cell: how many times faster per
# epoch is the last rung than rung 0 on this runtime, and which rung gains the most over the rung
# below it? (On a CPU runtime the GPU rungs are skipped: guess for the rungs that run.) Section 3
# sets your guesses beside what this runtime measured.

# %%
my_prediction = None  # the last rung's speed-up per epoch over rung 0, e.g. 5
my_best_rung = None  # the rung that gains the most over the rung below it, e.g. 4

# %% [markdown]
# Each rung's line grows as it trains: each epoch's seconds as it ends (rung 0 took 42 s on
# the course's H100 run, whose host prepares images faster than Colab's; expect one to three
# minutes on a T4 (prediction: t4 12.rung0_minutes)), then the rung's figures. After its
# epochs, each rung profiles five more of its steps (`profile=True`, lesson 10's
# `cg.profile_step`): its line ends with what bounds that step here.

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
# on a GPU, wider but in half precision on tensor cores (a T4's spec sheet says 65 TFLOPS fp16 and
# 8.1 fp32; PyTorch's matmuls reach about 24-42 and 4.3 there) (prediction: t4 fp16_matmul).
# And every rung learned.
speedup = base / ran[-1].seconds_per_epoch
fastest = min(ran, key=lambda r: r.seconds_per_epoch)
gains = {upper.rung.number: lower.seconds_per_epoch / upper.seconds_per_epoch  # each rung over the one below it
         for lower, upper in zip(ran, ran[1:], strict=False)}
best = max(gains, key=gains.get)
print(f"the last rung is {speedup:.1f}x faster per epoch than rung 0 on {device}"
      + ("" if my_prediction is None else f" (you predicted {my_prediction}x)"))
print(f"the biggest gain over the rung below it: rung {best}, {gains[best]:.1f}x"
      + ("" if my_best_rung is None else f" (you predicted rung {my_best_rung})"))
print(f"the fastest per epoch is rung {fastest.rung.number}, {base / fastest.seconds_per_epoch:.1f}x rung 0's speed")
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
# slower than rung 2 (on the course's H100 run of 2026-11-26: 1.83 against 1.60 s per epoch). Rung 4's levers are the
# ones a launch-bound step needs: four times the work per launch (batch 512), and a fused optimizer
# (one launch for every parameter, and no wait on GradScaler's overflow flag in float16).
#
# Whether the techniques of rungs 3 and 5 pay once the batch is large depends on the GPU. On the
# course's H100 run (2026-11-26) even rung 6's step stayed launch-bound: its kernels filled about
# 41% of its 5.7 ms step (2.3 ms of kernels; recomputed against the unprofiled step, as lesson 10
# now divides). With `torch.compile` it ran at 0.98x the speed without it, with mixed precision
# at 0.93x: neither lever paid there. The fp32 variant shows why: its 5.3 ms of kernels fill its
# whole 5.2 ms step (GPU-bound); mixed precision cut them to
# 3.6 ms, and the step then waited on the host: 65% busy, with 177 kernel launches per step.
# A T4 has about a twelfth of the float32 arithmetic the course's H100 measured: PyTorch
# reaches about 4.3 TFLOP/s there, against about 51 (prediction: t4 fp32_matmul). So a batch of
# 512 should keep it busy and both levers should pay (prediction: t4 12.levers_pay). The next
# cell measures it where it matters, on the last rung's step: the same recipe without
# `torch.compile`, then also without mixed precision, each profiled. Not without
# `cudnn.benchmark`: in this process cuDNN has already picked its plans for these shapes, so
# turning the flag off would time the same kernels (lesson 04's section 5 shows the trap; it
# measured the flag slower on this net on the H100, 2.91 -> 3.35 ms). The last rung has every
# lever on; it is not always the fastest variant (on that H100 run the fp32 eager one, then
# also without `cudnn.benchmark`, was: 0.50 against 0.55 s per epoch).

# %%
last = ran[-1]
variants = cg.speedrun_ladder.run_without_levers(last.rung, data, device, epochs=min(3, size.epochs),
                                                  width=size.width)
for r in [last, *variants]:
    print(f"{r.rung.name:42} {r.seconds_per_epoch:6.2f} s/epoch  {r.regime}")
with_lever = last
for without_lever in variants:  # each variant lacks one more lever than the one before it
    lever = without_lever.rung.adds.removesuffix(" off")
    print(f"with {lever}: {without_lever.seconds_per_epoch / with_lever.seconds_per_epoch:.2f}x the speed without it")
    with_lever = without_lever
if not variants:
    print("CPU runtime: the last rung uses none of cudnn.benchmark, torch.compile and mixed precision (rungs 3 "
          "and 5 are skipped here); on a GPU this cell trains it without each and shows what each pays.")

# %% [markdown]
# ## 5. What each rung changes in the loop
#
# The ladder's rungs run inside `colab_gpu`; here is each one in plain PyTorch. The next cell is
# rung 0, the seeds' loop, as the function the exercise asks you to speed up: `train_fast(data,
# device, epochs)` trains a fresh model and returns it. Beside it, `test_accuracy`, what a model
# is judged by. Each rung after it is the rung below plus a few lines, shown as a diff: `-` a line
# taken out, `+` a line put in, unmarked lines for context, `...` for lines that stay as they
# are. Applied in order, the diffs give a loop that runs (the course's tests apply them and train
# each rung). The sizes come from `cg.speedrun_ladder.ladder_size(device)`: batches of 128 and 512
# and a speed net of width 64 on a GPU; 32, 64 and 16 on a CPU.

# %%
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2


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
    """Rung 0, the seeds' loop: a fresh model trained for `epochs` epochs, returned."""
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


@torch.no_grad()
def test_accuracy(model, data, device):
    """The share of the test images classified right, normalized with the training images' statistics."""
    mean, std = (t.to(device)[:, None, None] for t in data.normalization())
    images = (data.test_images.to(device).float() / 255 - mean) / std
    model.eval()
    logits = torch.cat([model(batch) for batch in images.split(1024)])
    return (logits.argmax(1) == data.test_labels.to(device)).float().mean().item()


# %% [markdown]
# **Rung 1, workers + pinned memory** (lesson 05): the transforms run in two worker processes
# (a Colab runtime's two vCPUs) while the GPU trains, and batches arrive in page-locked memory, so
# their copies to the GPU can be asynchronous.
#
# ```diff
#      loader = DataLoader(CroppedFlipped(data.train_images, data.train_labels, mean, std),
# -                        batch_size=size.batch_size, shuffle=True)
# +                        batch_size=size.batch_size, shuffle=True, num_workers=2, pin_memory=True,
# +                        persistent_workers=True)
#  ...
# -            inputs, targets = inputs.to(device), targets.to(device)
# +            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
# ```

# %% [markdown]
# **Rung 2, data on the device** (lesson 05, and section 6 below): the uint8 images go to the
# device once; every batch is indexed there, cropped and flipped per image (`cg.random_crop`,
# section 6; `cg.per_sample_flip`, lesson 05), then normalized. The epoch is `steps` whole batches,
# every step the same shape; and nothing reads the loss during the epoch, so the CPU queues steps
# ahead of the GPU.
#
# ```diff
#      size = cg.speedrun_ladder.ladder_size(device)
# -    mean, std = data.normalization()
# -    loader = DataLoader(CroppedFlipped(data.train_images, data.train_labels, mean, std),
# -                        batch_size=size.batch_size, shuffle=True, num_workers=2, pin_memory=True,
# -                        persistent_workers=True)
# +    images, labels = data.train_images.to(device), data.train_labels.to(device)  # uint8, once
# +    mean, std = (t.to(device)[:, None, None] for t in data.normalization())
# +    batch_size = size.batch_size
# +    steps = len(images) // batch_size  # whole batches only: one shape for every step
#  ...
#      for _ in range(epochs):
# -        running_loss = 0.0
# -        for inputs, targets in loader:
# -            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
# +        order = torch.randperm(len(images), device=device)
# +        for step in range(steps):
# +            index = order[step * batch_size:(step + 1) * batch_size]
# +            batch = cg.per_sample_flip(cg.random_crop(images[index], 4))
# +            inputs, targets = (batch.float() / 255 - mean) / std, labels[index]
#              loss = F.cross_entropy(model(inputs), targets)
#              optimizer.zero_grad()
#              loss.backward()
#              optimizer.step()
# -            running_loss += loss.item()  # the CPU waits for the GPU at every step
# ```

# %% [markdown]
# **Rung 3, channels_last + mixed precision** (lessons 04 and 06): the layout tensor cores want,
# cuDNN's fastest algorithms for each shape, and the precision lesson 06 chooses: bf16 where the
# GPU has it, fp16 with a GradScaler on a T4, float32 (`dtype` is None) on most CPUs. There,
# `enabled=dtype is not None` matters: given no dtype, autocast picks its device's default, which
# is bf16 on a CPU.
#
# ```diff
# -    model = cg.small_cnn(3, len(data.classes), 32).to(device)
# +    model = cg.small_cnn(3, len(data.classes), 32).to(device, memory_format=torch.channels_last)
# +    torch.backends.cudnn.benchmark = True
# +    dtype = cg.choose_precision(device).dtype  # torch.bfloat16, torch.float16 on a T4, or None: float32
# +    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
#  ...
#              inputs, targets = (batch.float() / 255 - mean) / std, labels[index]
# -            loss = F.cross_entropy(model(inputs), targets)
# +            inputs = inputs.contiguous(memory_format=torch.channels_last)
# +            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
# +                loss = F.cross_entropy(model(inputs), targets)
#              optimizer.zero_grad()
# -            loss.backward()
# -            optimizer.step()
# +            scaler.scale(loss).backward()
# +            scaler.step(optimizer)
# +            scaler.update()
# ```

# %% [markdown]
# **Rung 4, large batch + schedule**: a quarter of the steps per epoch on a GPU (half on
# a CPU), a learning rate that warms up then anneals at every step (`steps` per epoch, from rung
# 2), Nesterov momentum, and on a GPU a fused optimizer: one kernel updates every parameter, and it
# reads GradScaler's overflow flag on the GPU, where a plain optimizer's `scaler.step` waits for it
# (a `.item()` per step in float16). Its momentum buffers start at zeros, what a first step
# computes anyway: section 8 shows what happens without them.
#
# ```diff
# -    batch_size = size.batch_size
# +    batch_size = size.large_batch
#      steps = len(images) // batch_size  # whole batches only: one shape for every step
#  ...
# -    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
# +    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True, weight_decay=5e-4,
# +                                fused=device.type == "cuda")
# +    for parameter in model.parameters():
# +        optimizer.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)
# +    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.2, total_steps=epochs * steps, pct_start=0.25,
# +                                                   anneal_strategy="linear")
#  ...
#              scaler.update()
# +            schedule.step()
# ```

# %% [markdown]
# **Rung 5, `torch.compile`** (lesson 11): the ladder compiles during two throwaway steps before
# its clock starts, and its line says how long that took; the exercise's clock counts it.
#
# ```diff
#      model = cg.small_cnn(3, len(data.classes), 32).to(device, memory_format=torch.channels_last)
# +    compiled = torch.compile(model)
#  ...
# -                loss = F.cross_entropy(model(inputs), targets)
# +                loss = F.cross_entropy(compiled(inputs), targets)
# ```

# %% [markdown]
# **Rung 6, speed net + recipe**: a network shaped for the hardware (the next cell), the learning
# rate that suits it, label smoothing, and at test time the logits of each image and of its
# mirror, averaged. Only the network changes the seconds per epoch: label smoothing adds a few
# element-wise operations to a step, the flips one more forward pass at test time, and those two
# buy accuracy. Which way the network goes depends on the runtime: on a CPU, the width-16 net does
# a quarter of the small CNN's arithmetic per image, and it is the one rung that pays much there
# (section 3's table); on a GPU, the width-64 net does four times more, in wide layers that keep
# tensor cores busy, to buy accuracy per epoch.
#
# ```diff
# -    model = cg.small_cnn(3, len(data.classes), 32).to(device, memory_format=torch.channels_last)
# +    model = speed_net(3, len(data.classes), size.width).to(device, memory_format=torch.channels_last)
#  ...
# -    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True, weight_decay=5e-4,
# +    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4,
#  ...
# -    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.2, total_steps=epochs * steps, pct_start=0.25,
# +    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.05, total_steps=epochs * steps, pct_start=0.25,
#  ...
# -                loss = F.cross_entropy(compiled(inputs), targets)
# +                loss = F.cross_entropy(compiled(inputs), targets, label_smoothing=0.2)
#  ...
# -    logits = torch.cat([model(batch) for batch in images.split(1024)])
# +    logits = torch.cat([(model(batch) + model(batch.flip(-1))) / 2 for batch in images.split(1024)])
# ```
#
# The speed net is `cg.speed_net`, in a few lines: a narrow first convolution, then three blocks
# that pool right after their first convolution, so that their second one runs on a quarter of
# the pixels; the last block's channels are four times the width, and each keeps only its largest
# value over the image.

# %%
from torch import nn


def pool_block(c_in, c_out):
    """Convolve, pool (the second convolution sees a quarter of the pixels), convolve again."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.MaxPool2d(2), nn.BatchNorm2d(c_out), nn.GELU(),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.GELU())


def speed_net(in_channels, classes, width):
    return nn.Sequential(
        nn.Conv2d(in_channels, width // 2, 3, padding=1, bias=False), nn.BatchNorm2d(width // 2), nn.GELU(),
        pool_block(width // 2, width), pool_block(width, 4 * width), pool_block(4 * width, 4 * width),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(4 * width, classes, bias=False))


per_image = {}  # the convolutions' and matmuls' arithmetic to train on one image, forward and backward
for name, make in [("small_cnn, width 32 (rungs 0-5)", lambda: cg.small_cnn(3, 10, 32)),
                   ("speed_net, width 16 (a CPU's rung 6)", lambda: speed_net(3, 10, 16)),
                   ("speed_net, width 64 (a GPU's rung 6)", lambda: speed_net(3, 10, 64))]:
    per_image[name] = cg.workloads.training_flops(cg.workloads.Workload(name, make, (1, 3, 32, 32)))
    print(f"{name:38} {per_image[name] / 1e6:5,.0f} MFLOP to train on one image")
small, cpu_net, gpu_net = per_image.values()
assert cpu_net < small < gpu_net

# %% [markdown]
# ## 6. Augmentation on the GPU, for every image
#
# A torchvision v2 transform called on a batch draws one random crop for the whole batch
# (lesson 05 showed it for flips), and cropping image by image in Python costs a call per
# image. Rung 2 pads the batch once and indexes it with a different offset for every image:
# one operation for the batch, on the device.
#
# First one image, 4x4 pixels numbered 0 to 15, padded by one pixel on each side by reflection
# (6x6). Its crop at offset `dy, dx` keeps rows `dy` to `dy + 3` and columns `dx` to `dx + 3`.
# Indexing with a column of row numbers, shape (4, 1), and a row of column numbers, shape (1, 4),
# picks that block: the two index tensors broadcast to (4, 4), and element `[i, j]` of the result
# is `padded[rows[i], cols[j]]`.

# %%
image = torch.arange(16).view(1, 1, 4, 4)  # one image, one channel, its pixels numbered
padded = F.pad(image.float(), (1, 1, 1, 1), mode="reflect").long()[0, 0]  # 6x6 (reflect needs floats)
dy, dx = 2, 0
rows = (dy + torch.arange(4))[:, None]  # (4, 1)
cols = (dx + torch.arange(4))[None, :]  # (1, 4)
print(f"padded, 6x6:\n{padded}\ncut at dy={dy}, dx={dx}:\n{padded[rows, cols]}")
assert torch.equal(padded[rows, cols], padded[dy:dy + 4, dx:dx + 4])  # the block a slice would cut

# %% [markdown]
# A batch adds a dimension in front: every image draws its own `dy` and `dx`, so the row indices
# have shape `(N, 1, H, 1)` and the column indices `(N, 1, 1, W)`, and with the batch and channel
# indices they broadcast to the whole `(N, C, H, W)` crop:

# %%
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
# Make `train_fast` at least twice as fast as rung 0, to a comparable test accuracy, by applying
# section 5's diffs. The next cell is your starting point: rung 2's loop (rung 0 with the diffs of
# rungs 1 and 2 applied), with a TODO where the lines of rungs 3, 4 and 6 go (about 40 lines in
# the end). On a CPU runtime rung 2 alone is barely faster than rung 0, and rung 4 adds little:
# the speed net of rung 6 is what pays there (rung 3 and the fused optimizer only pay on a GPU).
# On a GPU, where rung 0 waits on the CPU, rung 2 alone may already pass: go on with rungs 3 and
# 4, and watch the check's speed-up grow. The rules of the check, `cg.checks.fast_loop`:
#
# - its clock runs for the whole call, like a speedrun's: moving the data, building the model and
#   every epoch count, and compiling would too (leave rung 5 out unless your epochs are long
#   enough to pay it back);
# - rung 0 is the one your ladder trained in section 2; if the ladder did not run in this session
#   (you watched it on the projector), the check trains rung 0 first, once;
# - on a CPU, whose cores another program may share, it times rung 0 and your loop again, one
#   epoch each, alternately, three times: a busy neighbour slows both alike; a loop not yet twice
#   as fast gets its hint then, without training all its epochs;
# - it evaluates the model you return on the test images, normalized with `data.normalization()`
#   (no test-time flips), and compares with rung 0's accuracy.
#
# On a GPU, go further afterwards: train your loop on the real CIFAR-10 for 16 epochs. The records
# point at 93% test accuracy in under 15 seconds of training on an A100 or H100; no run of this
# course has measured that yet (its GPU machines cannot download CIFAR-10), and
# `cg.speedrun(data, device)` trains the ladder's last rung at that length if you want a second
# opinion.

# %%
def train_fast(data, device, epochs):
    """Rung 2's loop: add rungs 3, 4 and 6 where the TODOs are (section 5's diffs)."""
    torch.manual_seed(0)
    size = cg.speedrun_ladder.ladder_size(device)
    images, labels = data.train_images.to(device), data.train_labels.to(device)  # uint8, once
    mean, std = (t.to(device)[:, None, None] for t in data.normalization())
    batch_size = size.batch_size  # TODO rung 4: the large batch
    steps = len(images) // batch_size  # whole batches only: one shape for every step
    model = cg.small_cnn(3, len(data.classes), 32).to(device)  # TODO rung 6: speed_net; rung 3: channels_last
    # TODO rung 3 (on a GPU): cudnn.benchmark, the dtype lesson 06 chooses, a GradScaler
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    # TODO rung 4: Nesterov, fused on a GPU, momentum buffers at zeros, a OneCycleLR schedule (rung 6: lr 0.05)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(images), device=device)
        for step in range(steps):
            index = order[step * batch_size:(step + 1) * batch_size]
            batch = cg.per_sample_flip(cg.random_crop(images[index], 4))
            inputs, targets = (batch.float() / 255 - mean) / std, labels[index]
            loss = F.cross_entropy(model(inputs), targets)  # TODO rung 3: autocast; rung 6: label smoothing
            optimizer.zero_grad()
            loss.backward()  # TODO rung 3: through the scaler (scale, step, update)
            optimizer.step()
            # TODO rung 4: step the schedule
    return model


# %%
cg.checks.fast_loop(train_fast, data, device)

# %% [markdown]
# ## 8. Take it home: the fast loop in plain PyTorch
#
# Your loop still leans on `colab_gpu` for its crop, its flip, its sizes, the normalization
# statistics and the precision rule. The next cell is the same loop without `cg.`, for your own
# projects. It needs two cells of this lesson, both plain PyTorch: section 6's `random_crop` and
# section 5's `speed_net`. It flips each image on its own coin with one `torch.where`, computes the
# normalization statistics from the training images, picks the sizes and the precision in a few
# lines (lesson 06's rule: bf16 from compute capability 8.0, fp16 with a GradScaler before), and
# evaluates with test-time flips. It takes uint8 images `(N, 3, H, W)` and integer labels; here,
# this lesson's data.

# %%
import time


def train_plain(train_images, train_labels, classes, device, epochs):
    """The fast loop without colab_gpu: returns the trained model and the normalization statistics."""
    torch.manual_seed(0)
    on_gpu = device.type == "cuda"
    batch_size, width = (512, 64) if on_gpu else (64, 16)
    dtype = None  # float32 on a CPU
    if on_gpu:
        dtype = torch.bfloat16 if torch.cuda.get_device_capability(device) >= (8, 0) else torch.float16
    layout = torch.channels_last if on_gpu else torch.contiguous_format
    images, labels = train_images.to(device), train_labels.to(device)  # uint8, once
    pixels = images.float() / 255  # a float copy of every image, for its statistics only
    mean, std = pixels.mean(dim=(0, 2, 3))[:, None, None], pixels.std(dim=(0, 2, 3))[:, None, None]
    del pixels
    steps = len(images) // batch_size
    model = speed_net(images.shape[1], classes, width).to(device, memory_format=layout)
    torch.backends.cudnn.benchmark = on_gpu
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4,
                                fused=on_gpu)
    for parameter in model.parameters():
        optimizer.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.05, total_steps=epochs * steps, pct_start=0.25,
                                                   anneal_strategy="linear")
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(images), device=device)
        for step in range(steps):
            index = order[step * batch_size:(step + 1) * batch_size]
            batch = random_crop(images[index], 4)
            flip = torch.rand(len(batch), 1, 1, 1, device=device) < 0.5  # one coin per image
            batch = torch.where(flip, batch.flip(-1), batch)
            inputs = ((batch.float() / 255 - mean) / std).contiguous(memory_format=layout)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = F.cross_entropy(model(inputs), labels[index], label_smoothing=0.2)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            schedule.step()
    return model, mean, std


start = time.perf_counter()
plain_model, plain_mean, plain_std = train_plain(data.train_images, data.train_labels, len(data.classes), device,
                                                 epochs=size.epochs)
if on_gpu:
    torch.cuda.synchronize(device)
seconds = time.perf_counter() - start
plain_model.eval()
with torch.no_grad():
    test_images = (data.test_images.to(device).float() / 255 - plain_mean) / plain_std
    logits = torch.cat([(plain_model(b) + plain_model(b.flip(-1))) / 2 for b in test_images.split(1024)])
accuracy = (logits.argmax(1) == data.test_labels.to(device)).float().mean().item()
print(f"plain PyTorch: {size.epochs} epochs in {seconds:.1f} s, test accuracy {accuracy:.1%} "
      "(each test image and its mirror averaged)")
assert accuracy > 2 / len(data.classes)  # it learned

# %% [markdown]
# **When the data does not fit on the GPU.** CIFAR-10's 50,000 training images take 150 MB as
# uint8, and a T4 has 15 GB; a data set of large photos does not fit as pixels. Then stay at rung
# 1: a `DataLoader` with workers and pinned memory (lesson 05), and take rungs 3 and 4 on top of
# it: channels_last, mixed precision, a large batch with its schedule. With two vCPUs decoding
# JPEG files, the CPU soon bounds the epoch: lesson 13 decodes them on the GPU instead.
#
# **A fused optimizer whose first step is skipped.** Rung 4 starts the fused SGD's momentum
# buffers at zeros. A fused SGD creates them at its first step with `torch.empty_like`, memory as
# it was found, and writes them in the same kernel that updates the weights. GradScaler skips
# every step whose gradients overflowed in fp16, which is common at the start, while it lowers its
# scale. A plain SGD then never runs its `optimizer.step()`; a fused one does, and skips the update
# inside its kernel, on the device: its buffers stay as they were found, and the next step's
# momentum builds on them. It applies to `fused=True` with an fp16 GradScaler only: in bf16 or
# float32 no step is skipped, and the first step writes the buffers. The next cell makes a first
# step overflow on purpose (its loss times infinity), then takes one good step, and compares with
# a plain SGD. So that memory "as it was found" shows the same on every run, it turns on the
# switch PyTorch has for such bugs: memory handed out unwritten reads NaN.

# %%
import contextlib


@contextlib.contextmanager
def uninitialized_memory_reads_nan():
    """PyTorch's switch for finding such bugs: memory from torch.empty and empty_like reads NaN, not what it held."""
    torch.use_deterministic_algorithms(True)  # with torch.utils.deterministic.fill_uninitialized_memory (on)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def after_a_skipped_first_step(fused, zeros_first=False):
    """A layer's weights after a first step that GradScaler skips (its gradients overflowed), then one good step."""
    torch.manual_seed(0)
    layer = nn.Linear(64, 64).to(device)
    inputs = torch.randn(8, 64, device=device)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9, fused=fused)
    if zeros_first:  # rung 4's fix
        for parameter in layer.parameters():
            optimizer.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)
    scaler = torch.amp.GradScaler(device.type)
    for overflow in (float("inf"), 1.0):
        optimizer.zero_grad()
        scaler.scale(layer(inputs).square().mean() * overflow).backward()
        with uninitialized_memory_reads_nan():
            scaler.step(optimizer)  # skipped where the gradients are not finite
        scaler.update()
    return layer.weight.detach()


plain = after_a_skipped_first_step(fused=False)
for zeros_first in (False, True):
    fused = after_a_skipped_first_step(fused=True, zeros_first=zeros_first)
    print(f"fused SGD, momentum buffers {'started at zeros' if zeros_first else 'left to its first step'}: "
          f"largest difference from plain SGD's weights {(fused - plain).abs().max().item():.3g}")
assert torch.allclose(fused, plain)  # with zeros, the fused SGD is plain SGD in one kernel

# %% [markdown]
# Without zeros, one good step later the weights are NaN. Without the switch, the buffers hold
# whatever that memory held before: it changes from run to run, and is rarely all zeros. With
# zeros, both optimizers agree.

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
#   (its momentum started at zeros: with an fp16 GradScaler, a skipped first step leaves it
#   unset), compile, and pick a network shaped for the hardware. On a CPU, only less arithmetic
#   per image (the smaller speed net) pays much.
# - Each rung is a few lines of the loop; applied in order they give the fast loop, which runs in
#   plain PyTorch too. When the data does not fit on the GPU, keep rung 1's DataLoader and take
#   rungs 3 and 4.
# - A v2 transform on a batch draws once per call; indexing a padded batch with per-image
#   offsets crops every image at its own (`cg.random_crop`), and `cg.per_sample_flip` flips each
#   on its own coin, in one operation on the device.
# - Time a speedrun by the whole call: data, model, compiling and every epoch.
#   `cg.run_ladder(data, device)` measures the ladder side by side; `cg.speedrun(data, device)`
#   trains its last rung; `python -m colab_gpu bench --only speedrun` compares rung 0 with the
#   fastest rung.
