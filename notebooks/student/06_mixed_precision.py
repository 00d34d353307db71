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
# # 06 · Mixed precision: autocast, GradScaler, bf16 vs fp16, TF32
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/06_mixed_precision.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/06_mixed_precision.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - what `torch.autocast` does to each operation, seen by printing dtypes;
# - choosing bf16 or fp16 from the GPU's compute capability, and why fp16 needs a `GradScaler`;
# - TF32: what it is, how to switch it on, and where it does nothing;
# - fp32 vs TF32 vs mixed precision, step time and peak memory, measured on this runtime;
# - the classic mistakes: deprecated `torch.cuda.amp`, a scaler with bf16, `step` without `update`.
#
# **Time:** 45 minutes. **Prerequisites:** lessons 01 (compute capability) and 03 (training loop).
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
# ## 1. Three 16-bit-ish formats
#
# | format | bits (sign/exponent/mantissa) | normal range | precision | tensor cores |
# |---|---|---|---|---|
# | float32 | 1 / 8 / 23 | 1.2e-38 .. 3.4e38 | ~7 digits | TF32 mode on CC >= 8.0 |
# | float16 | 1 / 5 / 10 | 6.1e-05 .. 65504 | ~3 digits | CC >= 7.0 (V100, T4) |
# | bfloat16 | 1 / 8 / 7 | 1.2e-38 .. 3.4e38 | ~2 digits | CC >= 8.0 (A100, L4, H100) |
#
# Below the smallest *normal* number, each format has *subnormal* numbers that trade digits for
# range: float16 reaches about 6e-8 that way, with fewer and fewer significant digits.
#
# Half-size numbers halve memory traffic and run on tensor cores, many times faster than
# float32. *Mixed* precision keeps the weights in float32 and runs each operation in the
# format that is safe for it. `torch.autocast` makes that choice per operation.

# %%
# NBVAL_CHECK_OUTPUT
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    info = torch.finfo(dtype)
    print(f"{str(dtype):>15}: smallest normal {info.tiny:.1e}, largest {info.max:.1e}, epsilon {info.eps:.1e}")

# %% [markdown]
# ## 2. What autocast does, operation by operation
#
# Inside `torch.autocast(device_type, dtype=...)`, matrix products and convolutions run in the
# low-precision dtype; operations on autocast's float32 list run in float32; everything else
# follows its inputs. On CUDA that list has the losses, softmax and log_softmax, `sum`,
# `prod`, `cumsum`, `cumprod`, the norms, and functions such as `exp`, `log` and `pow`. It
# does **not** have `mean`, `max`, `min`, `var` or `std`: those stay in the inputs' 16-bit
# dtype (they accumulate in float32 internally, but return fp16 or bf16). The CPU has its own,
# shorter lists (on the CPU softmax and sum stay in bf16, for instance). Printing dtypes shows
# what happens here:

# %%
import torch.nn.functional as F

precision = cg.choose_precision(device)
# The 16-bit format autocast uses here: the chosen one, else the device's usual one (bf16 is the
# CPU's autocast format; fp16 that of GPUs without bf16), so every runtime can show autocast.
low = precision.dtype or (torch.bfloat16 if device.type == "cpu" else torch.float16)
low_name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[low]
print(f"precision for this runtime: {precision}")

x = torch.randn(64, 64, device=device)
w = torch.randn(64, 64, device=device)
targets = torch.randint(0, 64, (64,), device=device)
with torch.autocast(device.type, dtype=low):
    logits = x @ w
    dtypes = {
        "matmul (x @ w)": logits.dtype,
        "F.linear": F.linear(x, w).dtype,
        "softmax": torch.softmax(logits, dim=-1).dtype,
        "sum": logits.sum().dtype,
        "mean": logits.mean().dtype,
        "cross_entropy": F.cross_entropy(logits, targets).dtype,
        "x + 1 (float32 input)": (x + 1).dtype,
    }
for op, dtype in dtypes.items():
    print(f"{op:>22}: {dtype}")
print("outside the region, x @ w is", (x @ w).dtype)

assert dtypes["matmul (x @ w)"] == low and dtypes["F.linear"] == low
assert dtypes["cross_entropy"] == torch.float32
assert dtypes["mean"] == low  # not on autocast's float32 list, on CUDA or the CPU
if device.type == "cuda":
    assert dtypes["softmax"] == torch.float32 and dtypes["sum"] == torch.float32

# %% [markdown]
# ## 3. Choose the format from the hardware
#
# A GPU's compute capability (CC, its architecture version: lesson 01) decides which formats its
# tensor cores run natively:
#
# | GPU | CC | fp16 | bf16 | TF32 | what to use |
# |---|---|---|---|---|---|
# | T4, V100 | 7.5, 7.0 | native | emulated (slow) | no | fp16 autocast + `GradScaler` |
# | A100, L4, H100 | 8.0, 8.9, 9.0 | native | native | yes | bf16 autocast, TF32 for fp32 |
#
# `cg.choose_precision(device)` applies that rule: bf16 on CC 8.0 and later; fp16 with a
# GradScaler on 7.x; float32 below. It reads the compute capability and does **not** trust
# `torch.cuda.is_bf16_supported()`, which counts emulation and answers **True on a T4**; ask
# `torch.cuda.is_bf16_supported(including_emulation=False)` for the native answer.
#
# On a CPU there is no such rule: bf16 autocast runs everywhere, but it is fast only where the
# CPU has bf16 units that PyTorch's kernels use. One course machine *with* AVX-512 BF16 ran a
# bf16 training step 35x slower than float32, another 1.6x faster. So on a CPU `choose_precision`
# **measures** a small bf16 and float32 training step once, and picks bf16 only when it is at
# least 1.2x faster; the reason it prints says what it measured.

# %%
if device.type == "cuda":
    print("is_bf16_supported():                        ", torch.cuda.is_bf16_supported())
    print("is_bf16_supported(including_emulation=False):", torch.cuda.is_bf16_supported(including_emulation=False))
    major, minor = torch.cuda.get_device_capability(device)
    print("compute capability:", f"{major}.{minor}")
    assert torch.cuda.is_bf16_supported(including_emulation=False) == (major >= 8)
print(precision)
assert precision.use_scaler == (precision.name == "fp16" and device.type == "cuda")

# %% [markdown]
# ## 4. Why fp16 needs a GradScaler
#
# Gradients are often tiny. float16's smallest normal number is 6.1e-05 and its subnormals
# reach about 6e-8, with ever fewer digits: anything smaller becomes **0** (underflow) and that
# weight stops learning. The fix is to multiply the loss by a large
# *scale* before `backward()` (every gradient grows by the same factor), then divide the
# gradients by it, in float32, before the optimizer step. bfloat16 has float32's range, so it
# needs no scaling.

# %%
# NBVAL_CHECK_OUTPUT
grads = torch.tensor([1e-3, 1e-6, 1e-8, 1e-10])
scale = 2.0**16
print("float32 gradients:      ", [f"{g:.0e}" for g in grads.tolist()])
print("in float16:             ", [f"{g:.0e}" for g in grads.half().float().tolist()])
print("scaled, then float16:   ", [f"{g:.0e}" for g in (grads * scale).half().float().tolist()])
print("...unscaled in float32: ", [f"{g:.0e}" for g in ((grads * scale).half().float() / scale).tolist()])
print("in bfloat16:            ", [f"{g:.0e}" for g in grads.bfloat16().float().tolist()])
assert grads.half()[2] == 0 and (grads * scale).half()[2] > 0

# %% [markdown]
# `torch.amp.GradScaler` does this automatically, and picks the scale itself: it starts high;
# when a step produces `inf` gradients (the scale was too big, fp16 overflowed at 65504) it
# **skips that step** and halves the scale; after `growth_interval` good steps it doubles it
# again. Here is the scale during a real fp16 training run (a short growth interval and a
# very high start make the behaviour visible in 150 steps).

# %%
import matplotlib.pyplot as plt

cg.seed_everything(0)
data = cg.load_fashion_mnist()
train_loader, test_loader = cg.make_loaders(data, batch_size=64, device=device)
in_features = data.image_shape[0] * data.image_shape[1] * data.image_shape[2]
model = cg.mlp(in_features, hidden=256).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**24, growth_interval=20)

scales = []
while len(scales) < 150:
    for inputs, labels in train_loader:
        inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.float16):
            loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()  # backward on the scaled loss
        scaler.step(optimizer)  # unscales the gradients; skips the step if any is inf/nan
        scaler.update()  # halves the scale after an overflow, grows it after good steps
        scales.append(scaler.get_scale())
        if len(scales) == 150:
            break

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(scales)
ax.set(yscale="log", xlabel="step", ylabel="loss scale", title=f"GradScaler on {device}, fp16 autocast")
plt.show()
backoffs = sum(b < a for a, b in zip(scales, scales[1:], strict=False))
print(f"scale went from {scales[0]:.0f} to {scales[-1]:.0f}, backing off {backoffs} times")
assert backoffs >= 1 and scales[-1] < 2.0**24

# %% [markdown]
# ### The AMP step, written out: where `backward` goes, and gradient clipping
#
# Two details that tutorials often get wrong:
# - **only the forward pass and the loss go inside `autocast`**. `backward()` runs outside it:
#   autograd already runs each operation's backward in the dtype its forward used, and the
#   gradients land in float32, like the weights;
# - **clip the real gradients**. After `scaler.scale(loss).backward()` every gradient is
#   multiplied by the scale (65,536 by default), so `clip_grad_norm_` would compare a huge norm
#   with your threshold. Call `scaler.unscale_(optimizer)` first; `scaler.step` then knows the
#   gradients are already unscaled (and still skips the step if any is inf or NaN).

# %%
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10)
inputs, labels = next(iter(train_loader))
inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
with torch.autocast(device.type, dtype=torch.float16):
    loss = F.cross_entropy(model(inputs), labels)  # forward and loss: inside autocast
optimizer.zero_grad(set_to_none=True)
scaler.scale(loss).backward()  # backward: outside autocast
scaled_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
scaler.unscale_(optimizer)  # the gradients, divided by the scale, in float32
true_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # returns the norm before clipping
scaler.step(optimizer)  # does not unscale a second time
scaler.update()
print(f"gradient norm as backward left it: {scaled_norm:.1f}; after unscale_: {true_norm:.3f} "
      f"(scale {scaler.get_scale():.0f}); gradients in {model[1].weight.grad.dtype}")
print(f"clipping before unscale_ would have compared {scaled_norm:.0f} with max_norm=1.0")
assert all(p.grad.dtype == torch.float32 for p in model.parameters())
assert torch.isclose(scaled_norm / 2.0**10, true_norm, rtol=1e-3), "unscale_ divides every gradient by the scale"

# %% [markdown]
# ## 5. TF32: faster float32 matmuls on CC >= 8.0
#
# TensorFloat-32 runs float32 matrix products on tensor cores with a 10-bit mantissa (like
# fp16) and float32's range. Inputs and outputs stay float32: no code change, slightly lower
# precision, often several times faster. It exists from compute capability 8.0; on a T4 it does
# **nothing**. Switch it on with
#
# ```python
# torch.set_float32_matmul_precision("high")  # matmuls: TF32 ("highest": IEEE float32)
# torch.backends.cudnn.allow_tf32 = True      # convolutions
# ```
#
# **A trap: three spellings of one switch.** For matmuls PyTorch has the legacy flag
# `torch.backends.cuda.matmul.allow_tf32`, the documented `torch.set_float32_matmul_precision`
# (what `torch.compile`'s warning asks you to call) and, since PyTorch 2.9,
# `torch.backends.cuda.matmul.fp32_precision = "tf32"`. Mix them and PyTorch's state stops
# agreeing with itself: after `set_float32_matmul_precision("high")` then `allow_tf32 = False`,
# or after setting only `fp32_precision`, reading the state (`get_float32_matmul_precision()`,
# or the legacy flag) raises "... you have used mix of the legacy and new APIs ...". Your own
# code rarely reads it, but `torch.compile` (lesson 11) does, so it fails on its first call
# (pytorch/pytorch#166387; reproduced on PyTorch 2.10 and 2.14). The two lines above keep every reader
# answering, whatever was set before: `cg.set_tf32(True/False)` calls exactly those two, and
# lesson 09 reproduces the error.
#
# These are **process-wide** settings, and PyTorch's defaults are not symmetric: matmuls IEEE,
# convolutions TF32. So "switch it off afterwards" is not "put it back": a later cell would run
# its convolutions slower than PyTorch's default. Change them for a block with
# `with cg.tf32_mode(True):`, which restores what you had.

# %%
if device.type == "cuda":
    n = 4096
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    exact = (a.double() @ b.double())
    tf32_times = {}
    before = cg.tf32_enabled()
    for enabled in (False, True):
        with cg.tf32_mode(enabled):  # the caller's settings come back at the end of the block
            label = "TF32" if enabled else "fp32 (IEEE)"
            tf32_times[label] = cg.benchmark(lambda: a @ b, device=device)
            error = ((a @ b).double() - exact).abs().max().item()
        print(f"{label:>12}: {tf32_times[label]}, max abs error {error:.2e}")
    assert cg.tf32_enabled() == before
    tf32_gain = cg.speedup(tf32_times["fp32 (IEEE)"], tf32_times["TF32"])
    print(f"TF32 speedup on {n}x{n}: {tf32_gain:.1f}x")
    # Data-center GPUs (A100, H100) run TF32 several times faster than float32; some workstation
    # cards of the same generation run both at one rate. What holds everywhere: TF32 is not slower.
    if torch.cuda.get_device_capability(device) >= (8, 0):
        assert tf32_gain > 0.9, "TF32 should not slow float32 matmuls down on CC >= 8.0"
else:
    print("CPU runtime: TF32 is a GPU tensor-core mode (CC >= 8.0); there is nothing to measure here.")

# %% [markdown]
# ## 6. Measured: fp32 vs TF32 vs mixed precision
#
# The same training step in three modes, on two models: a matmul-heavy MLP and lesson 04's
# CNN, which also runs mixed precision with `channels_last` (the layout tensor cores prefer for
# convolutions, promised in lesson 04). `cg.time_train_step` times the step (`cg.benchmark`) and
# measures the peak memory it allocates (`cg.measure_peak`, GPU only). "fp32" here is IEEE float32
# (TF32 off for matmuls and convolutions). On a CPU runtime the sizes are small and we compare
# float32 with bf16 autocast: whether bf16 is faster depends on the CPU (section 3), so the speed
# claims are **not** asserted there. **Predict first:** how many times faster will mixed precision
# train the MLP than float32 on a T4? On an H100? (The course's H100 run measured 10.4x. On a T4,
# PyTorch's fp16 matmuls reach 5-10x its float32 ones, about 24-42 against 4.3 TFLOP/s, not the
# spec sheet's 65 against 8.1 (prediction: t4 fp16_matmul); the step's element-wise work gains
# less, so expect about 3-6x (prediction: t4 06.amp_mlp_speedup).)

# %%
my_prediction = None  # your guess of the AMP speed-up over fp32 for the MLP, e.g. 2

# %%
on_gpu = device.type == "cuda"
# The models and sizes the bench's AMP row times (cg.workloads.amp_workloads): large on a GPU, small on a CPU.
setups = cg.workloads.amp_workloads(device)
print("; ".join(f"{name}: {w.name}, input {w.shape}" for name, w in setups.items()))
# mode: (precision, TF32, channels_last)
modes = {"fp32": ("fp32", False, False), "TF32": ("fp32", True, False), "AMP": (low_name, False, False)}
if not on_gpu:
    modes.pop("TF32")  # no effect on a CPU
# The CNN also runs AMP with the channels_last layout (lesson 04's promise).
model_modes = {"MLP": modes, "CNN": {**modes, "AMP + channels_last": (low_name, False, True)}}

results = {}
for model_name, workload in setups.items():
    for mode, (name, tf32, channels_last) in model_modes[model_name].items():
        # A fresh model on random inputs, timed with cg.time_train_step: the bench's experiment
        timing, peak_mib = cg.workloads.time_step(workload, device, name, tf32=tf32, channels_last=channels_last)
        results[model_name, mode] = (timing.median, peak_mib)
        memory = f"{peak_mib:8.1f} MiB" if peak_mib is not None else "   n/a (CPU)"
        print(f"{model_name} {mode:>18} ({name}): step {cg.format_seconds(timing.median):>9}, peak {memory}")

# %%
amp_gain = results["MLP", "fp32"][0] / results["MLP", "AMP"][0]
layout_gain = results["CNN", "AMP"][0] / results["CNN", "AMP + channels_last"][0]
tensor_cores = on_gpu and precision.name != "fp32"
if tensor_cores:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax, model_name in zip(axes, setups, strict=True):
        base = results[model_name, "fp32"][0]
        names = list(model_modes[model_name])
        speedups = [base / results[model_name, mode][0] for mode in names]
        bars = ax.bar([n.replace(" + ", "\n+ ") for n in names], speedups, color=[f"C{i}" for i in range(len(names))])
        ax.bar_label(bars, labels=[f"{s:.2f}x" for s in speedups])
        ax.set(title=f"{model_name}: speed vs fp32", ylabel="speedup (higher is better)")
    fig.tight_layout()
    plt.show()
    print(f"AMP ({low_name}) vs fp32 on the MLP: {amp_gain:.2f}x; channels_last with AMP on the CNN: "
          f"{layout_gain:.2f}x")
    assert amp_gain > 1.5, "mixed precision should speed up a matmul-heavy MLP on tensor cores"
    assert results["MLP", "AMP"][1] < results["MLP", "fp32"][1], "AMP should use less activation memory"
    print(f"peak memory: fp32 {results['MLP', 'fp32'][1]:.0f} MiB, AMP {results['MLP', 'AMP'][1]:.0f} MiB")
else:
    # No plot: a CPU's bf16 speed says nothing about tensor cores, and a ratio below 1 would read as "AMP is slow".
    print(f"{device} runtime: no tensor cores, so this is not the speed-up AMP gives on a GPU. For the record, "
          f"{low_name} autocast ran at {amp_gain:.2f}x the fp32 speed here (it depends on the CPU's bf16 "
          "instructions); the course GPUs' figures are below.")
cg.compare_with_references("06.amp_mlp_speedup", amp_gain if tensor_cores else None, device,
                           prediction=my_prediction, what="MLP training step, mixed precision vs fp32, speed-up",
                           workload={"precision": low_name})

# %% [markdown]
# **Reading the peaks.** The MLP's peak is weights, gradients and activations, and AMP's 16-bit
# activations take half the bytes. The CNN's fp32 peak is mostly something else: for every
# convolution, cuDNN picks a fast algorithm that fits in the free memory, and in float32 that can
# be an FFT convolution whose scratch *workspace* takes hundreds of MiB, allocated for the call
# and counted in the peak. On the H100 run the CNN peaked at 688 MiB in fp32 and 153 MiB with
# AMP, far more than halving its activations explains. So a peak is what a step asked of the
# allocator, workspaces included; lesson 07 shows how to count the activations alone.

# %% [markdown]
# `cg.fit` takes the same choice: `cg.fit(..., precision="auto")` uses `cg.choose_precision`,
# and creates a GradScaler for fp16. `max_norm=` clips the gradients in every step, after
# `scaler.unscale_` as in section 4.

# %%
model = cg.mlp(in_features, hidden=256).to(device)
history = cg.fit(model, train_loader, test_loader, torch.optim.Adam(model.parameters(), 1e-3), device,
                 epochs=2, precision="auto", max_norm=1.0, progress=False)
assert history.last["precision"] == precision.name
assert history.last["test_acc"] > 0.8

# %% [markdown]
# ## 7. Classic mistakes
#
# **Deprecated API.** Old tutorials write `torch.cuda.amp.autocast()` and
# `torch.cuda.amp.GradScaler()`. Both emit a `FutureWarning` today. Write
# `torch.autocast("cuda", dtype=torch.float16)` and `torch.amp.GradScaler("cuda")`.
#
# **A GradScaler with bf16.** Pointless work (bf16 cannot underflow where fp32 does not), and
# a sign the code was written for a T4 and never revisited. `cg.fit` refuses the combination:

# %%
try:
    cg.fit(model, train_loader, None, optimizer, device, epochs=1, precision="bf16",
           scaler=torch.amp.GradScaler(device.type), progress=False)
except ValueError as err:
    print(err)

# %% [markdown]
# **`scaler.step` without `scaler.update`.** The scale never adapts, and PyTorch stops you at
# the next step:

# %%
import itertools

scaler = torch.amp.GradScaler(device.type)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with cg.shows_error(RuntimeError, match="update"):  # islice: the first two batches, without loading a whole epoch
    for inputs, labels in itertools.islice(train_loader, 2):
        inputs, labels = inputs.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.float16):
            loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # ...and no scaler.update()

# %% [markdown]
# The fix: `scaler.update()` after every `scaler.step(optimizer)`, as in section 4 (and in
# `cg.train_step`).

# %%
scaler = torch.amp.GradScaler(device.type)  # a fresh scaler: the one above is stuck mid-step
for inputs, labels in itertools.islice(train_loader, 2):
    inputs, labels = inputs.to(device), labels.to(device)
    with torch.autocast(device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
assert scaler.get_scale() > 0

# %% [markdown]
# ## Exercise
#
# Write `precision_for(major, minor)`: given a GPU's compute capability, return `"bf16"`,
# `"fp16"` or `"fp32"` following the rule of section 3. The check tries it on a P100, V100,
# T4, A100, L4 and H100.

# %%
precision_for = None  # your function goes here

# %%
cg.checks.precision_rule(precision_for)

# %% [markdown]
# ### Exercise 2: fix an AMP training step, and prove it
#
# `amp_step` is the mixed-precision step as it often appears in forum posts: float16 autocast,
# a `GradScaler` and gradient clipping. It has two bugs from section 4: one makes every step
# far too small, so training crawls without any error; the other stops training at the second
# step. Fix both. The check runs your step and the right one for 6 steps from the same weights
# and batches, on this runtime (a GradScaler works on the CPU too), starting from a scale so
# large that the first steps' gradients overflow and must be skipped, and compares how far the
# weights moved; it also notes which scaler calls your step makes, in which order.

# %%
def amp_step(model, inputs, labels, optimizer, scaler, max_norm):
    """One float16 mixed-precision step with gradient clipping."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(inputs), labels)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    return loss.detach()


# %%
cg.checks.amp_step(amp_step, device)

# %% [markdown]
# ## Summary
#
# - `torch.autocast(device.type, dtype=...)` runs matmuls and convolutions in 16 bits and keeps
#   sensitive ops in float32; weights stay float32.
# - CC >= 8.0: bf16, no scaler. CC 7.x (T4): fp16 with `torch.amp.GradScaler("cuda")`:
#   `scale(loss).backward()`, `step(optimizer)`, `update()`. Never `torch.cuda.amp.*`.
# - Only the forward pass and the loss go inside `autocast`; with a scaler, `scaler.unscale_(optimizer)`
#   before `clip_grad_norm_`.
# - TF32 (`torch.set_float32_matmul_precision("high")` and `torch.backends.cudnn.allow_tf32 = True`,
#   section 5's two lines) speeds up float32 matmuls on CC >= 8.0 and does nothing on a T4. Not the
#   legacy `torch.backends.cuda.matmul.allow_tf32` after them, nor the newer `fp32_precision` alone:
#   mixed, reading the state raises and `torch.compile` fails. It is process-wide: change it in
#   `with cg.tf32_mode(...)`.
# - Measure: this runtime's speedups and memory savings are printed above.
#
# Next: **07 · GPU memory**.
