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
# # 11 · Speed it up: torch.compile
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/11_torch_compile.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/11_torch_compile.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - what `torch.compile` does (Dynamo, AOTAutograd, Inductor; Triton kernels on a GPU, C++ on a
#   CPU), and whether your runtime can use it;
# - to measure it honestly: the first call (compiling) apart from the steady-state step, against
#   eager, for an MLP and a CNN;
# - to see graph breaks (`torch._dynamo.explain`) and recompilations (`TORCH_LOGS`), and to fix
#   both, including the last, smaller batch (`drop_last`, `dynamic=`);
# - to train with `cg.fit(..., compile=True)` and to save a compiled model's weights;
# - what to do where it is not available (no C++ compiler, a GPU Triton does not support);
# - going further (optional, on a GPU): `mode="reduce-overhead"` (CUDA graphs) for a launch-bound
#   model, and what compiling does with mixed precision and memory.
#
# **Time:** 45 minutes. **Prerequisites:** lessons 03 (the training loop), 06 (mixed precision)
# and 10 (the profiler: many tiny operations).

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
# ## 1. What `torch.compile` does
#
# In eager mode (everything so far) PyTorch runs one operator at a time: Python calls
# `linear`, the GPU runs its kernel, Python calls `relu`, another kernel, and so on. Each
# kernel reads its inputs from memory and writes its output back, and each launch costs a few
# microseconds of CPU time. `model = torch.compile(model)` changes how the same code runs:
#
# 1. **Dynamo** reads your Python `forward` as it runs and records the tensor operations into
#    a graph (an FX graph), with *guards*: the facts the graph assumed (shapes, dtypes, the
#    device, Python values it branched on). While the guards hold, later calls reuse the graph.
# 2. **AOTAutograd** derives the backward graph from the forward one, ahead of time.
# 3. **Inductor** turns both graphs into kernels: it *fuses* element-wise operations (a bias, a
#    ReLU, their gradients) into one kernel that reads and writes memory once, keeps the large
#    matmuls and convolutions in cuBLAS/cuDNN, and writes the rest as **Triton** kernels on a
#    GPU or **C++** (with OpenMP) on a CPU, which it compiles.
#
# All of that happens at the **first call**, not at `torch.compile(...)`, which returns at once.
# So a compiled model has three numbers: the first call (seconds: capture and compile), the
# steady-state step afterwards, and the eager step it replaces.

# %% [markdown]
# ## 2. Can this runtime compile?
#
# Compiling needs more than PyTorch: a C++ compiler for CPU code, Triton for GPU code (it ships
# with PyTorch's Linux CUDA wheels), and a GPU Triton supports (compute capability 7.0 or newer:
# a T4 yes, Kaggle's P100 no). `cg.compile_support` checks those, then compiles a two-operation
# function for real: the first compile in a runtime also starts Inductor up (on a CPU it tests
# which vector instructions the processor has), so this cell takes a few seconds.

# %%
support = cg.compile_support(device)
print(support.reason)

# %% [markdown]
# ## 3. The first call, then the steady state
#
# `cg.workloads.time_compiled_step` times a training step of a fresh model through
# `torch.compile`: the first call (forward and backward, compiled), then the median of the steps
# after it; `cg.workloads.time_step` times the same step eagerly (both in float32, TF32 off).
# They are the experiments `python -m colab_gpu bench` runs ("compile" row). On a CPU the
# lesson compiles the MLP only: compiling the CNN's forward and backward for a CPU takes more
# than half a minute on two cores.

# %%
torch._dynamo.reset()  # start from nothing compiled (re-running this cell measures a fresh compile again)
compiled_steps = {}
if support:
    for name, workload in cg.workloads.compile_workloads(device).items():
        eager, _ = cg.workloads.time_step(workload, device)
        compiled = cg.workloads.time_compiled_step(workload, device)
        compiled_steps[name] = compiled
        print(f"{workload.name} on {device}: first call {compiled.first_call_s:.2f} s, then "
              f"{compiled.step.median * 1e3:.2f} ms per step compiled vs {eager.median * 1e3:.2f} ms eager "
              f"({eager.median / compiled.step.median:.2f}x)")
        cg.compare_with_references(f"11.compile_speedup_{name.lower()}", eager.median / compiled.step.median, device,
                                   what=f"{workload.name}: compiled step vs eager, speed-up")
    if not on_gpu:
        print("On a CPU, expect about 1x, a little more or a little less: this small MLP's time is in its matmuls, "
              "which eager PyTorch already hands to the CPU's BLAS, and Inductor's generated C++ has little left to "
              "fuse. On a GPU, fusing the element-wise work between the matmuls saves memory traffic and launches.")
else:
    print(f"skipped: {support.reason}")

# %%
# The first call costs many steps' worth of time on every runtime (hundreds on a fresh one), so compiling
# pays back only over a long run. Whether the compiled step is faster depends on the model and the device.
for name, compiled in compiled_steps.items():
    assert compiled.first_call_s > 5 * compiled.step.median, (name, compiled.first_call_s, compiled.step.median)

# %% [markdown]
# What to expect: on a GPU, the MLP's step gets faster because Inductor fuses each layer's
# bias, ReLU and their gradients into fewer kernels (the course's target for the GPU report:
# at least 1.3x on an H100, the "compile" row of `bench`); the CNN gains less, since its time
# is in cuDNN's convolutions, which stay as they are. On a CPU the gain is small or none.
#
# **The compile cache.** Inductor keeps what it compiled on disk (`/tmp/torchinductor_<user>`),
# so a second compile of the same graph, even in a new process, skips the C++/Triton step and
# takes a fraction of the first. On Colab the cache lives as long as the runtime: a new runtime
# compiles from scratch.

# %% [markdown]
# ## 4. Graph breaks: where Dynamo stops
#
# When Dynamo meets something it cannot put in a graph (printing a tensor's value, `.item()`,
# `.tolist()`, branching on a tensor's value, an unsupported library call), it ends the graph
# there, runs that piece in Python, and starts a new graph after it: a **graph break**. The
# model still runs, but each break is a point where nothing can be fused across, and a
# `.item()` is also a host-device sync (lesson 03). The classic case is a debugging print left
# in `forward`. `torch._dynamo.explain` runs the model once and lists the graphs and the breaks.

# %%
import logging

from torch import nn


class DebugNet(nn.Module):
    """An MLP with a debugging print left in forward."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU())
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        hidden = self.body(x)
        print("mean activation:", hidden.mean().item())  # a tensor's value, read by Python
        return self.head(hidden)


class FixedNet(DebugNet):
    """The same network, the value logged outside forward (if at all)."""

    def forward(self, x):
        return self.head(self.body(x))


torch._dynamo.reset()
inputs = torch.randn(64, 1, 28, 28, device=device)
torch._logging.set_logs(dynamo=logging.ERROR)  # explain reports the break below; no need for Dynamo's warning too
broken = torch._dynamo.explain(DebugNet().to(device))(inputs)
fixed = torch._dynamo.explain(FixedNet().to(device))(inputs)
torch._logging.set_logs()  # back to the defaults
print(f"DebugNet: {broken.graph_count} graphs, {broken.graph_break_count} break(s); first reason:")
print("   ", broken.break_reasons[0].reason.splitlines()[0])
print(f"FixedNet: {fixed.graph_count} graph, {fixed.graph_break_count} breaks")
assert broken.graph_count == 2 and broken.graph_break_count == 1
assert fixed.graph_count == 1 and fixed.graph_break_count == 0

# %% [markdown]
# In a script, `TORCH_LOGS="graph_breaks" python train.py` prints each break as it happens
# (recent PyTorch versions also log a warning at a `.item()` break, which the cell above turned off
# while `explain` reported the same break).
# `torch.compile(model, fullgraph=True)` turns any break into an error: useful when you want to
# be sure a model compiles whole.
#
# ## 5. Recompilations and the last, smaller batch
#
# Guards include the input's shape. A loader of 1,000 samples in batches of 128 ends with a
# batch of 104: a new shape, so Dynamo compiles again. By default it then marks the batch size
# as *dynamic* and compiles a graph that works for any size, so it happens once, but on a large
# model that is another long compile in the middle of your first epoch. `cg.GraphCounter` is a
# `torch.compile` backend that runs each captured graph as it is and counts them: it shows
# breaks and recompilations in a second, without compiling anything. Inside a notebook,
# `torch._logging.set_logs(recompiles=True)` does what `TORCH_LOGS="recompiles"` does in a
# script: it says *why* each recompilation happened.

# %% tags=["shows-log"]
from torch.utils.data import DataLoader, TensorDataset

samples = TensorDataset(torch.randn(1000, 1, 28, 28), torch.randint(0, 10, (1000,)))


def graphs_for_one_epoch(loader, **compile_options):
    """How many graphs Dynamo captures for one pass of FixedNet over loader (forward only)."""
    torch._dynamo.reset()  # forget earlier graphs, and which sizes Dynamo already learned to treat as dynamic
    counter = cg.GraphCounter()
    net = torch.compile(FixedNet().to(device), backend=counter, **compile_options)
    for batch, _ in loader:
        net(batch.to(device))
    return counter.compiles


torch._logging.set_logs(recompiles=True)
last_batch_smaller = graphs_for_one_epoch(DataLoader(samples, batch_size=128))
torch._logging.set_logs()  # back to the defaults
dropped = graphs_for_one_epoch(DataLoader(samples, batch_size=128, drop_last=True))
dynamic = graphs_for_one_epoch(DataLoader(samples, batch_size=128), dynamic=True)
print(f"batches of 128 then 104: {last_batch_smaller} graphs; drop_last=True: {dropped}; dynamic=True: {dynamic}")
assert (last_batch_smaller, dropped, dynamic) == (2, 1, 1)

# %% [markdown]
# Three ways out, each with a cost: `drop_last=True` skips up to one batch per epoch (fine for
# training with shuffling, never for evaluation); `dynamic=True` compiles size-generic kernels
# from the start, which can be a little slower than kernels for one size; and
# `torch._dynamo.mark_dynamic(inputs, 0)` marks only the batch dimension. Dynamo recompiles a
# function at most 8 times (`torch._dynamo.config.recompile_limit`) and then runs it eagerly
# with a warning; in a notebook, `torch._dynamo.reset()` forgets everything compiled so far,
# which is why the experiments above call it first.
#
# ## 6. Training compiled: `cg.fit(..., compile=True)`
#
# `fit(compile=True)` trains and evaluates through `torch.compile(model)`; where this runtime
# cannot compile it says why in one line and trains eagerly, with the same results. Evaluation
# (`model.eval()`, no gradients) is another graph, compiled at its first call. Here the same
# MLP trains twice from the same seed, eager then compiled.

# %%
data = cg.load_fashion_mnist()
histories = {}
for compiled in (False, True):
    torch._dynamo.reset()
    cg.seed_everything(0)
    train_loader, test_loader = cg.make_loaders(data, batch_size=128, device=device)
    model = cg.mlp(784, hidden=256).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    print("compiled:" if compiled else "eager:")
    histories[compiled] = cg.fit(model, train_loader, test_loader, optimizer, device, epochs=2, progress=False,
                                 compile=compiled)

# %%
eager_run, compiled_run = histories[False].rows, histories[True].rows
for epoch, (eager_row, compiled_row) in enumerate(zip(eager_run, compiled_run, strict=True), start=1):
    print(f"epoch {epoch}: {compiled_row['seconds']:.2f} s compiled vs {eager_row['seconds']:.2f} s eager")
print("(epoch 1 of the compiled run includes compiling the training and the evaluation graphs)")
# The same training: compiled kernels round differently, so the figures agree closely, not bit for bit.
assert abs(compiled_run[-1]["train_loss"] - eager_run[-1]["train_loss"]) < 0.02
assert abs(compiled_run[-1]["test_acc"] - eager_run[-1]["test_acc"]) < 0.02

# %% [markdown]
# ### Saving a compiled model's weights
#
# `torch.compile(model)` returns a wrapper module that shares `model`'s parameters and stores
# it as `_orig_mod`, so the wrapper's `state_dict()` keys all start with `_orig_mod.`. Saved
# from the wrapper, the weights do not load into a plain model: the error below. Save
# `model.state_dict()` (the original; `fit` does so in its checkpoints), or
# `compiled._orig_mod.state_dict()`.

# %%
compiled_model = torch.compile(model)
print(list(compiled_model.state_dict())[:2], "vs", list(model.state_dict())[:2])
with cg.shows_error(RuntimeError, match="_orig_mod",
                    fix="save model.state_dict() (or compiled._orig_mod.state_dict()), not the compiled wrapper's"):
    cg.mlp(784, hidden=256).load_state_dict(compiled_model.state_dict())
restored = cg.mlp(784, hidden=256)
print(restored.load_state_dict(compiled_model._orig_mod.state_dict()))  # the fix: the plain keys

# %% [markdown]
# ## 7. Common error: "No working C++ compiler found"
#
# On a platform without a C++ compiler (a Windows laptop without Visual Studio's build tools,
# a slim Docker image), compiling for the CPU fails at the first call:
# `InductorError: InvalidCxxCompiler: No working C++ compiler found in
# torch._inductor.config.cpp.cxx`. Reproduced here by pointing Inductor at a compiler that does
# not exist. The GPU twin, on Kaggle's P100 (compute capability 6.0), reads: `RuntimeError:
# Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, which
# is used as the backend. Triton only supports devices of CUDA Capability >= 7.0` (quoted from
# PyTorch's source; this runtime cannot raise it).

# %%
from torch._inductor import config as inductor_config


def scaled_sine(x):
    return torch.sin(x) * 2


with inductor_config.patch({"cpp.cxx": ("no-such-compiler++",)}):
    with cg.shows_error(RuntimeError, match="C\\+\\+ compiler",
                        fix="install g++ (apt install g++), or train in eager mode: cg.compile_model falls back"):
        torch.compile(scaled_sine)(torch.ones(4))  # a CPU tensor: C++ code, on every runtime
    fallback = cg.compile_model(nn.Linear(4, 2), "cpu")  # the same runtime, asked first: eager, and why
assert isinstance(fallback, nn.Linear)

# %% [markdown]
# `cg.compile_model(model, device)` and `cg.fit(..., compile=True)` ask `cg.compile_support`
# first, so a runtime that cannot compile trains eagerly with one line of explanation instead
# of a traceback in the middle of the first epoch. To stop on the first error instead, call
# `torch.compile` yourself.
#
# ## Exercise: compile a model you did not write, once
#
# The network below came from someone else, and its training loop compiles more often than it
# should, for two reasons. Find each with the tools of sections 4 and 5 (`torch._dynamo.explain`
# on one batch, `torch._logging.set_logs(recompiles=True)` over an epoch), then fix the model
# class and the loader (keep `batch_size=128`, and keep what `forward` computes) so that one
# epoch captures exactly one graph. `cg.checks.compiles_once(model, loader)` counts the graphs of
# one epoch, forward and backward, with `cg.GraphCounter`, and tells you which cause is left.

# %%
class ExerciseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU())
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        hidden = self.body(x)
        if hidden.max() > 6:  # keep large activations in check
            hidden = hidden.clamp(max=6)
        return self.head(hidden)


exercise_loader = DataLoader(samples, batch_size=128, shuffle=True)

# %%
cg.checks.compiles_once(ExerciseNet().to(device), exercise_loader, device)

# %% [markdown]
# ## Summary
#
# - `torch.compile(model)` captures your code into graphs (Dynamo), derives the backward
#   (AOTAutograd) and writes fused kernels (Inductor: Triton on a GPU, C++ on a CPU), at the
#   first call. Measure three things: the first call, the steady step, and eager.
# - It pays back on long runs: the first call costs hundreds of steps. `mode="reduce-overhead"`
#   (CUDA graphs, "Going further") is for launch-bound models; `mode="max-autotune"` for long jobs.
# - Graph breaks (`torch._dynamo.explain`, `TORCH_LOGS="graph_breaks"`): keep prints, `.item()`
#   and `if` on a tensor's value out of `forward` (`clamp`, `torch.where` compute without one).
#   Recompilations (`TORCH_LOGS="recompiles"`): a smaller last batch; `drop_last=True` or
#   `dynamic=True`. `torch._dynamo.reset()` starts over.
# - `cg.fit(..., compile=True)`; save `model.state_dict()`, not the compiled wrapper's
#   (`_orig_mod.` keys).
# - Where it cannot compile (no C++ compiler, no Triton, a GPU older than compute capability
#   7.0), `cg.compile_support` says why and `cg.compile_model` falls back to eager.
#
# Next: lesson 12 puts every technique of the course together on one task: the speedrun ladder.
# The two parts below are optional, and need a GPU.

# %% [markdown]
# ## Going further (optional): many tiny kernels and `mode="reduce-overhead"`
#
# Lesson 10's third bottleneck: a small model whose step is dozens of microsecond kernels
# spends its time *launching* them. Fusing helps a little; `mode="reduce-overhead"` helps more:
# it records what was compiled as **CUDA graphs** and then replays each with one launch. Only
# what was compiled is captured. Here that is the model: its forward pass is recorded as one
# graph and its backward pass as another (PyTorch's "CUDA Graph Trees"). The loss,
# `zero_grad` and the optimizer step still run eagerly, kernel by kernel, so the step below
# is part graph replay and part launches. It needs a GPU, inputs of a fixed shape, and a
# little more memory (the graphs keep their own buffers). `mode="max-autotune"` goes further:
# it benchmarks several kernel variants for every matmul and convolution and keeps the
# fastest, which makes compiling take minutes; worth it for a long job, not for a notebook.

# %%
if on_gpu and support:
    torch._dynamo.reset()
    tiny = cg.workloads.TINY_STEP
    eager, _ = cg.workloads.time_step(tiny, device)
    for mode in ("default", "reduce-overhead"):
        compiled = cg.workloads.time_compiled_step(tiny, device, mode)
        print(f"{tiny.name}, mode={mode!r}: {compiled.step.median * 1e6:.0f} us per step vs "
              f"{eager.median * 1e6:.0f} us eager ({eager.median / compiled.step.median:.2f}x), "
              f"first call {compiled.first_call_s:.1f} s")
else:
    print("skipped: CUDA graphs need a CUDA GPU" + ("" if support else f", and {support.reason}"))

# %% [markdown]
# The course's target for the GPU report: `reduce-overhead` at least 2x eager on this tiny
# model (the "compile_graphs" row of `bench`).

# %% [markdown]
# ## Going further (optional): compiled and mixed precision, and memory
#
# Compiling and autocast (lesson 06) combine: Inductor sees the casts in the graph and fuses
# them with their neighbours, so a compiled AMP step saves the separate cast kernels too. Memory
# often goes *down*: a fused kernel does not store the intermediate results that separate
# kernels would write out (lesson 07's activations), though CUDA graphs and autotuning keep
# buffers of their own. Measured on a GPU: the step time and the peak memory of the MLP's step,
# eager and compiled, in float32 and in the precision lesson 06 chooses.

# %%
if on_gpu and support:
    chosen = cg.choose_precision(device)
    mlp_step = cg.workloads.compile_workloads(device)["MLP"]
    torch._dynamo.reset()
    for precision in ("fp32", chosen.name):
        eager, eager_peak = cg.workloads.time_step(mlp_step, device, precision)
        compiled = cg.workloads.time_compiled_step(mlp_step, device, precision=precision)
        print(f"{precision}: eager {eager.median * 1e3:.2f} ms, peak {eager_peak:.0f} MiB; compiled "
              f"{compiled.step.median * 1e3:.2f} ms, peak {compiled.peak_mib:.0f} MiB")
else:
    print("skipped: peak memory and mixed precision are measured on a CUDA GPU" +
          ("" if support else f"; and {support.reason}"))
