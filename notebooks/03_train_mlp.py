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
# # 03 · Train an MLP on the GPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/03_train_mlp.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/03_train_mlp.ipynb)
#
# **What you will learn**
# - the data in plain PyTorch: torchvision's data set, a `TensorDataset` and a `DataLoader` with
#   pinned memory;
# - the training loop on the GPU, written out once: model, loss and batches on the device,
#   `zero_grad` / `backward` / `step`; then the evaluation loop;
# - `cg.fit`, the same loop with metrics, a progress bar and no needless GPU synchronization;
# - `model.eval()` and `torch.inference_mode()` for predictions;
# - how much faster the same model trains on the GPU than on the CPU, measured;
# - checkpoints that survive a Colab disconnect, with an exact resume.
#
# **Time:** 45 minutes. **Prerequisites:** lessons 01 and 02.
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
# ## 1. The data: FashionMNIST
#
# 70,000 greyscale 28x28 images of clothes in 10 classes. On Colab it downloads in seconds.
# Where nothing can be downloaded (an offline laptop, the course's CI), `cg.load_fashion_mnist`
# says so and uses scikit-learn's handwritten digits instead, resized to 28x28 (on a GPU
# repeated to FashionMNIST's 60,000 training images, so an epoch takes a learner's time), so
# every cell below still runs. On a CPU runtime we train on a slice of the data to stay under a
# minute.
#
# The download goes to `cg.data_dir()`: a folder `data` here, which goes with the runtime, or,
# when Google Drive is mounted (`from google.colab import drive; drive.mount("/content/drive")`,
# lesson 13), `MyDrive/colab_gpu/data`, where every later lesson and session finds it instead of
# downloading it again (each Colab notebook runs on a machine of its own).

# %%
import matplotlib.pyplot as plt

on_gpu = device.type == "cuda"
cg.seed_everything(0)
data = cg.load_fashion_mnist()
if not on_gpu and not data.fallback:
    data = data.limit(train=12_000, test=2_000)  # a CPU runtime trains on a slice
# The accuracy this lesson promises, and asserts at the end of training.
target = 0.90 if data.fallback else (0.85 if on_gpu else 0.80)
print(data)
print(f"target test accuracy: {target:.0%}")

cg.show_images(data.train_images[:16], [data.classes[y] for y in data.train_labels[:16]], title=data.name)
plt.show()

# %% [markdown]
# `cg.load_fashion_mnist` is torchvision's `datasets.FashionMNIST(root, train=True,
# download=True)` (and `train=False` for the test set), with the offline stand-in added. In your
# own project you write those calls yourself; the cell below reads the copy just downloaded.

# %%
from torchvision import datasets

if data.name == "FashionMNIST":  # the real data set is on this disk now (offline runtimes use the stand-in)
    train_files = datasets.FashionMNIST(cg.data_dir(), train=True, download=False)
    print(f"torchvision: {len(train_files):,} training images, stored as {train_files.data.dtype} "
          f"{tuple(train_files.data.shape)}; first labels {train_files.targets[:5].tolist()}")
else:
    print(f"offline: the {data.name} stand-in, so there is no torchvision copy to read here")

# %% [markdown]
# Next, the batches. The images become float32 scaled to mean 0 and standard deviation 1 (the
# training set's statistics, used for both sets), wrapped in a `TensorDataset`, and a
# `DataLoader` serves them in shuffled batches. On a GPU it asks for **pinned** host memory,
# which lets `.to(device, non_blocking=True)` copy batches asynchronously (lesson 05 measures
# it). `cg.make_loaders(data, batch_size, device=device)` builds the same two loaders (with a
# seeded shuffle); later lessons call it.

# %%
from torch.utils.data import DataLoader, TensorDataset

pixels = data.train_images.float() / 255  # uint8 0..255 -> float32 0..1
mean, std = pixels.mean(), pixels.std()
train_set = TensorDataset((pixels - mean) / std, data.train_labels)
test_set = TensorDataset((data.test_images.float() / 255 - mean) / std, data.test_labels)

batch_size = 256
train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, pin_memory=on_gpu)
test_loader = DataLoader(test_set, batch_size=512, pin_memory=on_gpu)  # no shuffle: the order does not matter
images, labels = next(iter(train_loader))
print("one batch:", tuple(images.shape), images.dtype, "| labels:", tuple(labels.shape), labels.dtype)
print(f"inputs: mean {images.mean():.2f}, std {images.std():.2f}; pinned memory: {train_loader.pin_memory}")
helper_train, _ = cg.make_loaders(data, batch_size, device=device)
assert torch.allclose(helper_train.dataset.tensors[0], train_set.tensors[0], atol=1e-5)  # the same inputs

# %% [markdown]
# ## 2. The model
#
# A multilayer perceptron: flatten the 28x28 image into 784 numbers, two hidden layers of 512
# with ReLU, and 10 outputs (one score, or *logit*, per class). Create it, move it, then build
# the optimizer: **after** `.to(device)`. An optimizer keeps state per parameter (Adam: two
# running averages of every weight), created at its first step on the device the weights are on
# then; a model moved after that step leaves the state behind, and the next step mixes devices.

# %%
in_features = data.image_shape[0] * data.image_shape[1] * data.image_shape[2]
model = cg.mlp(in_features, hidden=512, classes=len(data.classes)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
print(model)
print(f"{cg.count_parameters(model):,} parameters on {next(model.parameters()).device}")
cg.checks.on_device(model, device, name="model")

# %% [markdown]
# ## 3. The training loop, written out
#
# One epoch by hand. Each step: move the batch to the device, forward pass, loss,
# `zero_grad` (gradients accumulate otherwise), `backward`, `step`. We keep each batch's loss
# as a GPU tensor and read them all once at the end: a `.item()` in every step would make
# the CPU wait for the GPU every step.

# %%
loss_fn = torch.nn.CrossEntropyLoss()
model.train()
batch_losses = []
for inputs, labels in train_loader:
    inputs = inputs.to(device, non_blocking=True)
    labels = labels.to(device, non_blocking=True)
    outputs = model(inputs)
    loss = loss_fn(outputs, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    batch_losses.append(loss.detach())

batch_losses = torch.stack(batch_losses).cpu()  # one synchronization for the whole epoch
first, last_five = batch_losses[0], batch_losses[-5:].mean()
print(f"{len(batch_losses)} steps: first loss {first:.3f}, mean of the last five {last_five:.3f}")
assert last_five < first, "the loss should go down during the first epoch"

# %% [markdown]
# ## 4. The common error: labels of the wrong type
#
# The loop above moves every batch where the model is; forgetting that is the error of lesson 02,
# section 4 ("Expected all tensors to be on the same device"). The other classic of a first
# training loop: `CrossEntropyLoss` takes class *indices* as 64-bit integers (`torch.long`), but
# labels read from a CSV file or a NumPy array often arrive as floats. The message depends on the
# device and the PyTorch release ("expected target dtype to be Long or Byte, but got Float" on a
# CPU, "expected scalar type Long but found Float" in older releases, "... not implemented for
# 'Float'" on a GPU in some); every version names the wrong type: `Float` here, `Int` for int32
# labels.
#
# The second cell of every lesson loaded the course's error explainer (`%load_ext colab_gpu`):
# an error the course's atlas knows (lesson 09) is followed by its cause and fix, whether the
# notebook shows it on purpose, as below, or you meet it for real.

# %%
inputs, labels = next(iter(train_loader))
inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
float_labels = labels.float()  # as if read from a CSV file
with cg.shows_error(RuntimeError, match="Float"):
    loss_fn(model(inputs), float_labels)

# %% [markdown]
# The fix: convert once, where the labels are loaded (here, before the loss): `labels.long()`.

# %%
loss = loss_fn(model(inputs), float_labels.long())
assert float_labels.long().dtype == torch.int64 and torch.isfinite(loss)

# %% [markdown]
# ## 5. Evaluate, then the same loop packaged: `cg.fit`
#
# The test accuracy, by hand: `model.eval()` switches layers such as dropout and batch norm to
# their inference behaviour (this MLP has none, but make it a habit), `torch.no_grad()` stops
# autograd from recording a graph nobody will use, and the correct answers are counted on the
# device and read once.

# %%
def evaluate(model, loader):
    """The share of ``loader``'s samples that ``model`` classifies right."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    with torch.no_grad():
        for inputs, labels in loader:
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            correct += (model(inputs).argmax(dim=1) == labels).sum()
    model.train()  # back to training mode for the next epoch
    return correct.item() / len(loader.dataset)


print(f"test accuracy after one epoch: {evaluate(model, test_loader):.1%}")

# %% [markdown]
# `cg.fit` runs the training loop for several epochs, evaluates on the test set after each one
# as `evaluate` does, and returns a history with the loss, the accuracy, the seconds and the
# samples per second of every epoch. It reads the GPU once per epoch, and shows a progress bar
# (`progress=False` turns it off).

# %%
history = cg.fit(model, train_loader, test_loader, optimizer, device, epochs=4, progress=False)
cg.plot_history(history, f"MLP on {data.name}, {device}")
plt.show()

test_acc = history.last["test_acc"]
assert history.column("train_loss")[-1] < history.column("train_loss")[0], "loss went down"
assert test_acc >= target, f"test accuracy {test_acc:.1%} is below the {target:.0%} this lesson promises"
print(f"test accuracy after {len(history)} epochs: {test_acc:.1%} (target {target:.0%})")

# %% [markdown]
# ## 6. Predictions: `model.eval()` and `torch.inference_mode()`
#
# As in `evaluate`, `model.eval()` first. `torch.inference_mode()` is a stricter
# `torch.no_grad()`: its tensors can never join a graph later, which saves a little more
# bookkeeping; use it for predictions you only read. Outputs come back to the CPU for plotting.

# %%
model.eval()
with torch.inference_mode():
    logits = model(data.datasets()[1].tensors[0][:8].to(device))
predicted = logits.argmax(dim=1).cpu()
print("predicted:", [data.classes[i] for i in predicted])
print("true:     ", [data.classes[i] for i in data.test_labels[:8]])
assert not logits.requires_grad  # no graph was recorded

# %% [markdown]
# ## 7. CPU vs GPU: the same model, timed
#
# We time one training epoch of a copy of the model on each device with `cg.time_train_epoch`
# (`cg.benchmark` around `cg.train_epoch`: warm-up, synchronize, median). On a CPU runtime only
# the CPU is timed. **Predict first:** lesson 02's matrix product ran many times faster on a GPU;
# how many times faster will a GPU train this small MLP? Write your guess below; the timing cell
# prints it beside this runtime's figure and the course GPUs' figures.

# %%
my_prediction = None  # your guess of the GPU's speed-up over the CPU for one epoch, e.g. 5

# %%
import copy


def epoch_on(dev: torch.device):
    """One training epoch of a copy of the model on ``dev`` (cg.benchmark around cg.train_epoch)."""
    return cg.time_train_epoch(copy.deepcopy(model).to(dev), train_loader, dev)


epoch_times = {"cpu": epoch_on(torch.device("cpu"))}
if on_gpu:
    epoch_times[str(device)] = epoch_on(device)
for name, result in epoch_times.items():
    print(f"{name:>7}: one epoch of {len(train_loader.dataset):,} images in {result}")
if on_gpu:
    gain = cg.speedup(epoch_times["cpu"], epoch_times[str(device)])
    print(f"the GPU trains this MLP {gain:.1f}x faster than the CPU")
    assert gain > 1
else:
    gain = None  # no GPU to compare with here
    print("CPU runtime: switch to a GPU runtime to see the speedup.")
epoch_images = len(train_loader.dataset)
cg.compare_with_references("03.mlp_epoch_gpu_vs_cpu", gain, device, prediction=my_prediction,
                           what=f"one MLP training epoch ({epoch_images:,} images), GPU speed-up over the CPU",
                           host_bound=True, workload={"images": epoch_images, "data": data.name})
cg.bar_seconds({name: r.median for name, r in epoch_times.items()}, "one training epoch (median)")
plt.show()

# %% [markdown]
# An MLP this small leaves a big GPU mostly idle: each step is a few small matrix products,
# and the time goes into launching kernels and feeding batches. Lesson 04's convolutions give
# the GPU far more work per step, and lesson 05 shows how to feed it faster.

# %% [markdown]
# ## 8. Surviving a disconnect: checkpoints
#
# When Colab disconnects, the virtual machine and everything in it are gone. Save the training
# state after every epoch to **Google Drive**:
#
# ```python
# from google.colab import drive
# drive.mount("/content/drive")      # asks for permission once
# ```
#
# In plain PyTorch, the training state is a dictionary of `state_dict()`s plus the epoch, written
# with `torch.save` **atomically**: to a temporary file first, then renamed over the old one, so a
# disconnect in the middle of a write leaves the previous checkpoint intact.

# %%
import os
from pathlib import Path


def save_training_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, epoch: int) -> None:
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
             "torch_rng": torch.get_rng_state()}
    partial = path.with_name(path.name + ".partial")
    torch.save(state, partial)  # a disconnect here leaves `path` as it was
    os.replace(partial, path)  # atomic: `path` is now the old file or the new one, never half of one


def load_training_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    state = torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain values only
    model.load_state_dict(state["model"])  # copied into the model's own device
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    return state["epoch"]


state_path = Path("checkpoints") / "plain.pt"
state_path.parent.mkdir(exist_ok=True)
save_training_state(state_path, model, optimizer, epoch=3)
restored = cg.mlp(in_features, hidden=512, classes=len(data.classes)).to(device)  # fresh weights
restored_optimizer = torch.optim.Adam(restored.parameters(), lr=1e-3)
epoch = load_training_state(state_path, restored, restored_optimizer)
same = all(torch.equal(a, b) for a, b in zip(restored.state_dict().values(), model.state_dict().values(), strict=True))
print(f"{state_path} ({state_path.stat().st_size / 1e6:.1f} MB): epoch {epoch}, weights restored exactly: {same}")
assert same and epoch == 3 and restored_optimizer.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()

# %% [markdown]
# `cg.default_checkpoint_dir()` points into Drive once it is mounted (and to a local folder
# elsewhere). The course's checkpoint, `cg.save_checkpoint`, is the same idea with more in it: the
# model, the optimizer, the GradScaler, the epoch, the history and every random generator, written
# atomically. `cg.fit(..., checkpoint=path)` saves one after each epoch and, when the file exists,
# resumes.
#
# We train 4 epochs without interruption, then again with a "disconnect" after epoch 2 and a
# resume, and compare the final weights.

# %%
small = data.limit(train=4096, test=1024)  # a few seconds per run


def fresh_run():
    """Model, optimizer and loaders exactly as a new session would build them."""
    cg.seed_everything(0)
    net = cg.mlp(in_features, hidden=256).to(device)
    small_train, small_test = cg.make_loaders(small, 128, device=device)
    return net, torch.optim.Adam(net.parameters(), lr=1e-3), small_train, small_test


net, net_optimizer, small_train, small_test = fresh_run()
cg.fit(net, small_train, small_test, net_optimizer, device, epochs=4, progress=False, verbose=False)
uninterrupted = copy.deepcopy(net.state_dict())


class Disconnect(Exception):
    pass


def disconnect_after_epoch_2(epoch, row):
    if epoch == 2:
        raise Disconnect("the runtime disconnected")


checkpoint_path = Path("checkpoints") / "mlp.pt"  # on Colab, for real: cg.default_checkpoint_dir() / "mlp.pt"
checkpoint_path.unlink(missing_ok=True)  # start from scratch each time this cell runs: fit would resume from it
net, net_optimizer, small_train, small_test = fresh_run()
try:
    cg.fit(net, small_train, small_test, net_optimizer, device, epochs=4, checkpoint=checkpoint_path,
           on_epoch_end=disconnect_after_epoch_2, progress=False)
except Disconnect as err:
    print(f"interrupted: {err}; the checkpoint holds epoch 2")

net, net_optimizer, small_train, small_test = fresh_run()  # "a new session"
resumed = cg.fit(net, small_train, small_test, net_optimizer, device, epochs=4, checkpoint=checkpoint_path,
                 progress=False)
same = all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), uninterrupted.values(), strict=True))
close = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(net.state_dict().values(), uninterrupted.values(),
                                                            strict=True))
print(f"resumed run == uninterrupted run: bit-identical {same}, within 1e-5 {close}")
assert resumed.column("epoch") == [1, 2, 3, 4]
assert same if not on_gpu else close  # exact on the CPU; GPU kernels may differ in the last bits

# %% [markdown]
# ## Exercise
#
# **Fix a first training loop's GPU bugs, and prove it.** A classmate wrote `my_train_epoch`
# below. On a CPU runtime it runs without an error, yet it has three bugs that a GPU shows: it
# crashes there, it makes the CPU wait for the GPU every step, and its gradients are wrong
# everywhere. Fix all three (section 3 has every piece you need).
#
# The check runs your loop three times:
# 1. on PyTorch's `meta` device, whose tensors have shapes but no values: mixing devices fails
#    there as it does on a GPU, and so does reading a value (`.item()`, `float()`, `.cpu()`), so
#    the check finds the GPU bugs on any runtime;
# 2. with a learning rate of 0, to see whether the gradients add up from step to step;
# 3. for one real epoch on this runtime from fresh weights: the loss must fall; then, timed
#    beside `cg.train_epoch` on the same 50 batches (the best of three runs), it must take at most 3x
#    its time.

# %%
def my_train_epoch(model, loader, optimizer, device):
    """One training epoch; returns the loss of every batch, as one tensor."""
    model.train()
    losses = []
    for inputs, labels in loader:
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses)


# %% tags=["solution"]
def my_train_epoch(model, loader, optimizer, device):
    """One training epoch; returns the loss of every batch, as one tensor on the device."""
    model.train()
    losses = []
    for inputs, labels in loader:
        inputs = inputs.to(device, non_blocking=True)  # bug 1: the batch stayed on the CPU
        labels = labels.to(device, non_blocking=True)
        loss = loss_fn(model(inputs), labels)
        optimizer.zero_grad()  # bug 2: without it every step adds to the previous gradients
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())  # bug 3: .item() made the CPU wait for the GPU every step
    return torch.stack(losses)  # read once, by the caller


# %%
cg.checks.train_loop(my_train_epoch, model, train_loader, device)

# %% [markdown]
# ## Summary
#
# - Move the model to the device **before** creating the optimizer; move every batch inside
#   the loop (`non_blocking=True` with pinned memory).
# - Each step: forward, loss, `zero_grad`, `backward`, `step`. Read losses once per epoch, not
#   with an `.item()` per step.
# - Class labels are `torch.long` indices: convert float labels once, where they are loaded.
# - `model.eval()` plus `torch.inference_mode()` for predictions; `model.train()` before training again.
# - `cg.fit` is that loop with evaluation, timing and a history; `cg.benchmark` compares devices fairly.
# - Checkpoint to Drive after every epoch, atomically; `cg.fit(..., checkpoint=path)` resumes exactly.
#
# Next: **04 · Train a CNN**.
