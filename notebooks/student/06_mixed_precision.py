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
# **Time:** 40 minutes. **Prerequisites:** lessons 01 (compute capability) and 03 (training loop).

# %%
# Setup: on Colab, install the course's companion package (Colab's own torch is left as it is).
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q",
         "colab_gpu @ git+https://github.com/colab-gpu-course/pytorch-gpus-colab@v0.1.0"],
        check=True,
    )

import torch

import colab_gpu as cg

device = cg.get_device()
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. Three 16-bit-ish formats
#
# | format | bits (sign/exponent/mantissa) | range | precision | tensor cores |
# |---|---|---|---|---|
# | float32 | 1 / 8 / 23 | 1e-38 .. 3e38 | ~7 digits | TF32 mode on CC >= 8.0 |
# | float16 | 1 / 5 / 10 | 6e-8 .. 65504 | ~3 digits | CC >= 7.0 (V100, T4) |
# | bfloat16 | 1 / 8 / 7 | 1e-38 .. 3e38 | ~2 digits | CC >= 8.0 (A100, L4, H100) |
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
# low-precision dtype; operations that need range or accuracy (softmax, losses, reductions on
# CUDA) run in float32; element-wise ops follow their inputs. The CPU has its own lists (on
# the CPU softmax stays in bf16, for instance). Printing dtypes shows what happens here:

# %%
import torch.nn.functional as F

precision = cg.choose_precision(device)
low = precision.dtype or torch.float16  # the dtype autocast will use on this runtime
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
        "cross_entropy": F.cross_entropy(logits, targets).dtype,
        "x + 1 (float32 input)": (x + 1).dtype,
    }
for op, dtype in dtypes.items():
    print(f"{op:>22}: {dtype}")
print("outside the region, x @ w is", (x @ w).dtype)

assert dtypes["matmul (x @ w)"] == low and dtypes["F.linear"] == low
assert dtypes["cross_entropy"] == torch.float32
if device.type == "cuda":
    assert dtypes["softmax"] == torch.float32 and dtypes["sum"] == torch.float32

# %% [markdown]
# ## 3. Choose the format from the hardware
#
# `cg.choose_precision(device)` applies the rule of lesson 01: bf16 on compute capability 8.0
# and later; fp16 with a GradScaler on 7.x; float32 below. It reads the compute capability
# and does **not** trust `torch.cuda.is_bf16_supported()`, which counts emulation and says
# True on a T4.

# %%
if device.type == "cuda":
    print("is_bf16_supported():                        ", torch.cuda.is_bf16_supported())
    print("is_bf16_supported(including_emulation=False):", torch.cuda.is_bf16_supported(including_emulation=False))
    print("compute capability:", torch.cuda.get_device_capability(device))
print(precision)
assert precision.use_scaler == (precision.name == "fp16" and device.type == "cuda")

# %% [markdown]
# ## 4. Why fp16 needs a GradScaler
#
# Gradients are often tiny. float16's smallest number is about 6e-8: anything smaller becomes
# **0** (underflow) and that weight stops learning. The fix is to multiply the loss by a large
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
data = cg.load_fashion_mnist("data")
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
# ## 5. TF32: faster float32 matmuls on CC >= 8.0
#
# TensorFloat-32 runs float32 matrix products on tensor cores with a 10-bit mantissa (like
# fp16) and float32's range. Inputs and outputs stay float32: no code change, slightly lower
# precision, often several times faster. It exists from compute capability 8.0; on a T4 it does
# **nothing**. Switch it on with
#
# ```python
# torch.backends.cuda.matmul.fp32_precision = "tf32"   # matmuls
# torch.backends.cudnn.conv.fp32_precision = "tf32"    # convolutions
# ```
#
# (`torch.set_float32_matmul_precision("high")` is the older global switch; use one API, not both:
# PyTorch refuses to report the setting when they were mixed.) `cg.set_tf32(True/False)` sets both.

# %%
if device.type == "cuda":
    n = 4096
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    exact = (a.double() @ b.double())
    tf32_times = {}
    for enabled in (False, True):
        cg.set_tf32(enabled)
        label = "TF32" if enabled else "fp32 (IEEE)"
        tf32_times[label] = cg.benchmark(lambda: a @ b, device=device)
        error = ((a @ b).double() - exact).abs().max().item()
        print(f"{label:>12}: {tf32_times[label]}, max abs error {error:.2e}")
    cg.set_tf32(False)
    tf32_gain = cg.speedup(tf32_times["fp32 (IEEE)"], tf32_times["TF32"])
    print(f"TF32 speedup on {n}x{n}: {tf32_gain:.1f}x")
    if torch.cuda.get_device_capability(device) >= (8, 0):
        assert tf32_gain > 1.2, "TF32 should speed up float32 matmuls on CC >= 8.0"
else:
    print("CPU runtime: TF32 is a GPU tensor-core mode (CC >= 8.0); there is nothing to measure here.")

# %% [markdown]
# ## 6. Measured: fp32 vs TF32 vs mixed precision
#
# The same training step in three modes, on two models: a matmul-heavy MLP and lesson 04's
# CNN. `cg.time_train_step` times the step (`cg.benchmark`) and measures the peak memory it
# allocates (`cg.measure_peak`, GPU only). On a CPU runtime the sizes are small and we compare float32
# with bf16 autocast: CPUs without bf16 hardware (AMX, AVX-512 BF16) emulate it, so the
# speed claims are **not** asserted there.

# %%
on_gpu = device.type == "cuda"
setups = {
    "MLP": (lambda: cg.mlp(1024, hidden=4096, depth=3) if on_gpu else cg.mlp(256, hidden=512, depth=3),
            (8192, 1024) if on_gpu else (256, 256)),
    "CNN": (lambda: cg.small_cnn(3, 10, width=32 if on_gpu else 16), (256, 3, 32, 32) if on_gpu else (32, 3, 32, 32)),
}
modes = {"fp32": ("fp32", False), "TF32": ("fp32", True), "AMP": (precision.name, False)}
if not on_gpu:
    modes.pop("TF32")  # no effect on a CPU


def measure(make_model, shape, mode: str, tf32: bool) -> tuple[cg.BenchResult, float | None]:
    """Step time and peak MiB of a fresh model on random inputs of ``shape`` (cg.time_train_step)."""
    inputs = torch.randn(*shape, device=device)
    labels = torch.randint(0, 10, (shape[0],), device=device)
    return cg.time_train_step(make_model().to(device), inputs, labels, precision=mode, tf32=tf32,
                              repeat=5 if on_gpu else 3)


results = {}
for model_name, (make_model, shape) in setups.items():
    for mode, (name, tf32) in modes.items():
        timing, peak_mib = measure(make_model, shape, name, tf32)
        results[model_name, mode] = (timing.median, peak_mib)
        memory = f"{peak_mib:8.1f} MiB" if peak_mib is not None else "   n/a (CPU)"
        print(f"{model_name} {mode:>5} ({name}): step {cg.format_seconds(timing.median):>9}, peak {memory}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for ax, model_name in zip(axes, setups, strict=True):
    base = results[model_name, "fp32"][0]
    speedups = [base / results[model_name, mode][0] for mode in modes]
    bars = ax.bar(list(modes), speedups, color=[f"C{i}" for i in range(len(modes))])
    ax.bar_label(bars, labels=[f"{s:.2f}x" for s in speedups])
    ax.set(title=f"{model_name}: speed vs fp32", ylabel="speedup (higher is better)")
fig.tight_layout()
plt.show()

amp_gain = results["MLP", "fp32"][0] / results["MLP", "AMP"][0]
print(f"AMP ({precision.name}) vs fp32 on the MLP: {amp_gain:.2f}x")
if on_gpu and precision.name != "fp32":
    assert amp_gain > 1.5, "mixed precision should speed up a matmul-heavy MLP on tensor cores"
    assert results["MLP", "AMP"][1] < results["MLP", "fp32"][1], "AMP should use less activation memory"
    print(f"peak memory: fp32 {results['MLP', 'fp32'][1]:.0f} MiB, AMP {results['MLP', 'AMP'][1]:.0f} MiB")
else:
    print(f"CPU runtime: bf16 autocast ran at {amp_gain:.2f}x the fp32 speed. CPUs without bf16 hardware emulate it; "
          "the speed and memory claims are checked on a GPU runtime.")

# %% [markdown]
# `cg.fit` takes the same choice: `cg.fit(..., precision="auto")` uses `cg.choose_precision`,
# and creates a GradScaler for fp16.

# %%
model = cg.mlp(in_features, hidden=256).to(device)
history = cg.fit(model, train_loader, test_loader, torch.optim.Adam(model.parameters(), 1e-3), device,
                 epochs=2, precision="auto", progress=False)
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

# %% tags=["raises-exception"]
scaler = torch.amp.GradScaler(device.type)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for inputs, labels in list(train_loader)[:2]:
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
for inputs, labels in list(train_loader)[:2]:
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
cg.check_precision_rule(precision_for)

# %% [markdown]
# ## Summary
#
# - `torch.autocast(device.type, dtype=...)` runs matmuls and convolutions in 16 bits and keeps
#   sensitive ops in float32; weights stay float32.
# - CC >= 8.0: bf16, no scaler. CC 7.x (T4): fp16 with `torch.amp.GradScaler("cuda")`:
#   `scale(loss).backward()`, `step(optimizer)`, `update()`. Never `torch.cuda.amp.*`.
# - TF32 (`torch.backends.cuda.matmul.fp32_precision = "tf32"`) speeds up float32 matmuls on
#   CC >= 8.0 and does nothing on a T4.
# - Measure: this runtime's speedups and memory savings are printed above.
#
# Next: **07 · GPU memory**.
