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
# # 04 · Train a CNN on the GPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/04_train_cnn.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/04_train_cnn.ipynb)
#
# **What you will learn**
# - training a small convolutional network on CIFAR-10 with `cg.fit`;
# - the image layout convolutions expect, `(N, C, H, W)`, and the error you get otherwise;
# - `torch.backends.cudnn.benchmark` and the `channels_last` memory format, measured;
# - the GPU-vs-CPU speedup for convolution training, measured on this runtime, and what bounds
#   it here (launch-bound or GPU-bound);
# - looking at what the model gets wrong.
#
# **Time:** 40 minutes. **Prerequisites:** lesson 03.
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
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. The data: CIFAR-10
#
# 60,000 colour 32x32 images in 10 classes (airplane, cat, ship...). Offline, the loader falls
# back to scikit-learn's digits resized to 3x32x32, and says so. On a CPU runtime the network
# is narrower and the data a slice, to stay under a minute.

# %%
import matplotlib.pyplot as plt

on_gpu = device.type == "cuda"
cg.seed_everything(0)
data = cg.load_cifar10()
if not on_gpu and not data.fallback:
    data = data.limit(train=5_000, test=1_000)
epochs = 10 if on_gpu else (5 if data.fallback else 3)  # a GPU trains a learner's 10 epochs, on a stand-in too
target = 0.90 if data.fallback else (0.70 if on_gpu else 0.40)
width = 32 if on_gpu else 16  # channels of the first block; the CPU gets a narrower net
print(data)
print(f"{epochs} epochs, target test accuracy {target:.0%}, width {width}")

train_loader, test_loader = cg.make_loaders(data, batch_size=128, device=device)
cg.show_images(data.train_images[:16], [data.classes[y] for y in data.train_labels[:16]], title=data.name)
plt.show()

# %% [markdown]
# ## 2. A small conv net
#
# Three blocks of two 3x3 convolutions (with batch norm and ReLU) and a 2x2 max-pool; the
# channels double while the image halves (32, 16, 8, 4 pixels). A global average pool and a
# linear layer give the 10 class scores.

# %%
model = cg.small_cnn(in_channels=data.image_shape[0], classes=len(data.classes), width=width).to(device)
print(f"{cg.count_parameters(model):,} parameters on {next(model.parameters()).device}")
print(model[0])  # the first block; the other two are the same with more channels

# %% [markdown]
# ## 3. The common error: images in the wrong layout
#
# PyTorch convolutions read **(batch, channels, height, width)**. Images from PIL, NumPy or
# Matplotlib come as (height, width, channels). Feed those and the first convolution
# complains about its channel count:

# %%
images, labels = next(iter(train_loader))
hwc = images.permute(0, 2, 3, 1)  # (N, H, W, C), as NumPy image libraries store them
print("wrong layout:", tuple(hwc.shape))
with cg.shows_error(RuntimeError, match="channels"):
    model(hwc.to(device))

# %% [markdown]
# The fix is one `permute(0, 3, 1, 2)` (or torchvision's `ToImage` transform, lesson 05),
# which puts the channels second again:

# %%
nchw = hwc.permute(0, 3, 1, 2)
outputs = model(nchw.to(device))
assert outputs.shape == (len(images), len(data.classes))
print("right layout:", tuple(nchw.shape), "->", tuple(outputs.shape))

# %% [markdown]
# ## 4. Train
#
# `cudnn.benchmark = True` lets cuDNN try several convolution algorithms on the first batch of
# each shape and keep the fastest (section 5 measures it). Adam with a one-cycle learning-rate
# schedule trains this net in a few epochs: the rate warms up, peaks, then anneals to almost zero.
# `OneCycleLR` counts **optimizer steps**, so it is built for `epochs * len(train_loader)` steps
# and stepped after every batch (`scheduler_step="batch"`). Stepped once per epoch instead, with
# `total_steps=epochs`, it would train the whole last epoch at a rate of about 1e-8. On a GPU
# the first epoch is the slow one (seconds): it loads CUDA's kernels and lets cuDNN time its
# algorithms for each new shape; the epochs after it show the steady speed.

# %%
torch.backends.cudnn.benchmark = True
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=4e-3, total_steps=epochs * len(train_loader))
history = cg.fit(model, train_loader, test_loader, optimizer, device, epochs=epochs, scheduler=scheduler,
                 scheduler_step="batch", progress=False)
assert scheduler.last_epoch == epochs * len(train_loader), "one scheduler step per batch"
cg.plot_history(history, f"small CNN on {data.name}, {device}")
plt.show()

test_acc = history.last["test_acc"]
assert history.column("train_loss")[-1] < history.column("train_loss")[0], "loss went down"
assert test_acc >= target, f"test accuracy {test_acc:.1%} is below the {target:.0%} this lesson promises"
print(f"test accuracy after {epochs} epochs: {test_acc:.1%} (target {target:.0%})")

# %% [markdown]
# ## 5. `cudnn.benchmark` and `channels_last`, measured
#
# - **`torch.backends.cudnn.benchmark`**: cuDNN has several algorithms per convolution; with
#   the flag on, it times them on the first call of each input shape and caches the winner.
#   It helps when shapes stay fixed (as here), and costs time when they change every batch. It
#   can also lose on small convolutions whose step is *launch-bound* (the GPU waits for Python
#   to launch the next kernel): the algorithm it times as fastest on the GPU may launch more
#   kernels or need a workspace, which costs the host more than the GPU time it saves. On the
#   course's H100 run (2026-11-26) both layouts were slower with the flag on (default 2.91 ->
#   3.35 ms, channels_last 2.59 -> 3.29 ms).
# - **`channels_last`**: stores images as (N, H, W, C) *in memory* while the tensor keeps its
#   (N, C, H, W) shape. Tensor cores prefer that layout; it pays where they run the
#   convolutions: in 16 bits (lesson 06 measures that), and in float32 on GPUs with TF32.
#   Convert both the model and the inputs.
#
# Measuring `cudnn.benchmark` has a trap: cuDNN caches the algorithm it chose for each shape,
# and that cache does not look at the flag. Time "off" and then "on" in the same process and
# the "on" run silently reuses the "off" run's choices: you measure nothing. So
# `cg.time_conv_step_fresh` times each setting on a fresh model in a **fresh Python process** (a
# few seconds to start), where nothing is cached: its first step shows the one-off costs (loading
# cuDNN's and cuBLAS's kernels and, with the flag on, the autotuning), then the median of the
# steady steps, timed K steps at a time between two synchronizations (a step of a few
# milliseconds timed alone measures the launch latency; each line says its K when it is more
# than 1). cuDNN settings only exist on the GPU, so the CPU runtime times `channels_last` alone.

# %%
step_shape = (len(images), *data.image_shape) if on_gpu else (32, *data.image_shape)
formats = {"default": False, "channels_last": True}
settings = [(name, last, False) for name, last in formats.items()]
if on_gpu:
    settings += [(f"{name} + cudnn.benchmark", last, True) for name, last in formats.items()]
layout_times = {}
print(f"one training step of a width-{width} CNN on a batch of {step_shape[0]}, each setting in a fresh process:")
for name, channels_last, flag in settings:
    timing = cg.time_conv_step_fresh(device, width=width, shape=step_shape, channels_last=channels_last,
                                     cudnn_benchmark=flag, repeat=10 if on_gpu else 5)
    layout_times[name] = timing.steady
    print(f"{name:>32}: first step {cg.format_seconds(timing.first_step_s):>9}, then {timing.steady}")
cg.bar_seconds({k: v.median for k, v in layout_times.items()}, f"one training step, batch of {step_shape[0]}")
plt.xticks(rotation=20)
plt.show()

# %% [markdown]
# Read your numbers rather than a rule of thumb: on the course's H100 run (2026-11-26)
# `channels_last` gained 11% in float32 (2.91 -> 2.59 ms): cuDNN runs float32 convolutions on
# TF32 tensor cores there (`torch.backends.cudnn.allow_tf32`, on by default). A T4 has no TF32:
# expect no gain in float32 there, perhaps a loss; its gains come in fp16
# (prediction: t4 04.channels_last_fp32). Lesson 06 measures it with mixed precision.
#
# On the H100 this step was launch-bound: its kernels took about 1.1 ms of a 6.6 ms step (busy
# 17%), too little GPU work for a better algorithm to save anything. Expected on a T4: the
# step's 29 GFLOP of float32 convolutions (lesson 10 counts them) take about 10 ms at the 3-4
# TFLOP/s a T4 reaches, as long as the host's part or longer, so the GPU is busy at least half
# of the step (prediction: t4 04.conv_step_busy) and the algorithms `cudnn.benchmark` picks can
# pay there (prediction: t4 04.cudnn_benchmark). Section 6 prints the regime on your runtime.
#
# ## 6. GPU vs CPU for convolutions
#
# Convolutions give a GPU far more arithmetic per byte than lesson 03's MLP, which is where the
# 10x to 100x figures that tutorials quote come from. Here is what *this* runtime gives, for the
# same training step on both devices. **Predict first:** more or less than lesson 03's MLP speed-up?
# Write your guess of the GPU's speed-up below.

# %%
my_prediction = None  # your guess of the GPU's speed-up over the CPU for one conv training step, e.g. 20

# %%
import copy

# time_train_step times a training step in train mode (cg.fit left the model in eval mode), like the GPU figure
cpu_step, _peak = cg.time_train_step(copy.deepcopy(model).cpu(), torch.randn(step_shape),
                                     torch.randint(0, 10, step_shape[:1]), repeat=3)
device_times = {"cpu": cpu_step.median}
print(f"training step on the CPU ({torch.get_num_threads()} threads), batch {step_shape[0]}: {cpu_step}")
fastest = min(layout_times, key=lambda name: layout_times[name].median)  # the GPU at its best setting
if on_gpu:
    gpu_step = layout_times[fastest]
    device_times[str(device)] = gpu_step.median
    gain = cg.speedup(cpu_step, gpu_step)
    print(f"training step on {torch.cuda.get_device_name(device)}, its fastest setting ({fastest}): {gpu_step}")
    print(f"conv training is {gain:.0f}x faster on this GPU than on this runtime's CPU")
else:
    gain = None  # no GPU to compare with here
    print("CPU runtime: the GPU side of this comparison runs on a GPU runtime.")
cg.compare_with_references("04.conv_step_gpu_vs_cpu", gain, device, prediction=my_prediction,
                           what=f"one CNN training step (batch of {step_shape[0]}), GPU speed-up over the CPU",
                           host_bound=True, workload={"batch": step_shape[0], "CPU threads": torch.get_num_threads()})
cg.bar_seconds(device_times, "CNN training step (median)", log=True)
plt.show()

# %% [markdown]
# The course's bench asks the same question another way, and so gets another figure: batch
# 256, IEEE float32 (TF32 off), in one process (28.7x on the course's H100 runs of 2026-11-26,
# against this cell's 24.6x at batch 128 with cuDNN's default TF32, each setting in a fresh
# process). Compare like with like.
#
# What does this figure measure? Lesson 10 teaches the profiler behind the next line: it profiles
# a few training steps of the same network at the fastest setting and says what each step waits
# for. A **launch-bound** step (the GPU idles while Python launches the next kernel) gives a
# GPU-vs-CPU figure that measures how fast this machine launches kernels: a bigger batch raises
# it. A **GPU-bound** step's figure compares the two devices' arithmetic. `cg.profile_step`
# times the step without the profiler first, then profiles it: recording every operator
# stretches the step's host side, not its kernels, so the GPU's busy share is the kernels'
# time over the *unprofiled* step. On the course's H100 run (2026-11-26) this step took 6.6 ms
# profiled and 2.59 ms without: its 1.12 ms of kernels are 43% of the real step (launch-bound),
# not the 17% the profiled step said.

# %%

layout = torch.channels_last if "channels_last" in fastest else torch.contiguous_format
torch.backends.cudnn.benchmark = "cudnn.benchmark" in fastest
probe = cg.small_cnn(data.image_shape[0], len(data.classes), width=width).to(device, memory_format=layout)
probe_inputs = torch.randn(step_shape, device=device).contiguous(memory_format=layout)
probe_labels = torch.randint(0, 10, step_shape[:1], device=device)
probe_sgd = torch.optim.SGD(probe.parameters(), lr=1e-3)


def conv_step():
    loss = torch.nn.functional.cross_entropy(probe(probe_inputs), probe_labels)
    probe_sgd.zero_grad()
    loss.backward()
    probe_sgd.step()


print(f"this step on {device} ({fastest}) is {cg.profile_step(conv_step, device).regime}")

# %% [markdown]
# ## 7. What does the model get wrong?
#
# `cg.predict` runs the model in eval mode under `inference_mode` and returns predictions and
# labels on the CPU. The grid shows test images it misclassified, as "predicted (true)".

# %%
predictions, truth = cg.predict(model, test_loader, device)
wrong = (predictions != truth).nonzero().flatten()
predict_acc = 1 - len(wrong) / len(truth)
print(f"{len(wrong)} of {len(truth)} test images misclassified ({predict_acc:.1%} accuracy)")
# Compare with an evaluation run now, under the same settings. fit's last test_acc is close but
# need not be equal: a GPU may pick other convolution algorithms since, and a few borderline
# images can flip their argmax.
now = cg.evaluate(model, test_loader, device)
print(f"cg.evaluate now: {now.accuracy:.2%}; fit's last epoch: {test_acc:.2%}")
assert predictions.shape == truth.shape == (now.samples,)
assert abs(predict_acc - now.accuracy) <= 0.002, "predict and evaluate score the same model on the same images"
shown = wrong[:16]
titles = [f"{data.classes[predictions[i]]} ({data.classes[truth[i]]})" for i in shown]
if len(shown):
    cg.show_images(data.test_images[shown], titles, title="misclassified: predicted (true)")
    plt.show()

# %% [markdown]
# ## Exercise
#
# Compute `class_acc`: a tensor of 10 accuracies, one per class (the fraction of that class's
# test images the model got right). Hint: `predictions` and `truth` are on the CPU;
# compare them for the images whose label is `c`.

# %%
class_acc = None  # your tensor of 10 fractions goes here

# %% tags=["solution"]
class_acc = torch.stack([(predictions[truth == c] == c).float().mean() for c in range(len(data.classes))])

# %%
cg.checks.class_accuracy(class_acc, predictions, truth, classes=len(data.classes))

# %% [markdown]
# Which class is hardest? On CIFAR-10 it is usually *cat*, confused with *dog*.
#
# ### Exercise 2: classify faster, and prove it
#
# `slow_predict` labels images the way many first scripts do: one image at a time, each answer
# read back with `.item()`. Write `fast_predict(model, images)`, which returns the same classes
# (a tensor with one class per image) at least 1.2 times as fast on this runtime. The check
# runs both on 256 test images, three times each, interleaved, and compares the fastest runs. On a
# GPU every per-image call also pays for launching each layer's kernels and for one wait on the
# GPU: compare your figure with a classmate's on the other kind of runtime.

# %%
def slow_predict(model, images):
    """The class of each image, one image at a time."""
    model.eval()
    with torch.inference_mode():
        return torch.tensor([model(image.unsqueeze(0).to(device)).argmax(dim=1).item() for image in images])


test_images = data.datasets()[1].tensors[0][:256]
fast_predict = None  # your function goes here


# %% tags=["solution"]
def fast_predict(model, images, batch_size=256):
    """The class of each image: a few large batches, the classes read back once at the end."""
    model.eval()
    with torch.inference_mode():
        classes = [model(batch.to(device, non_blocking=True)).argmax(dim=1) for batch in images.split(batch_size)]
    return torch.cat(classes).cpu()


# %%
cg.checks.prediction_speed(fast_predict, slow_predict, model, test_images, device, at_least=1.2)

# %% [markdown]
# ## Summary
#
# - Convolutions want `(N, C, H, W)`; permute images that come as `(N, H, W, C)`.
# - `torch.backends.cudnn.benchmark = True` when input shapes are fixed and the step keeps the
#   GPU busy; on a small, launch-bound step it can lose. `channels_last` (model and inputs) pays
#   off mostly with mixed precision: measure on your GPU, each setting on a fresh model.
# - Conv training is where a GPU shines: this runtime's measured speedup is printed above, against
#   the GPU's fastest setting, with the regime that bounds it.
# - `cg.predict` and a grid of mistakes tell you more than one accuracy number.
# - Predict in large batches under `inference_mode`, and read the classes back once, not per image.
#
# Next: **05 · Feeding the GPU**.
