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
#   eager, K steps at a time, after naming the step's regime on your runtime (lesson 10);
# - which mode pays where: default compile fuses the element-wise work of a GPU-bound model;
#   on a small, launch-bound model it cannot, `mode="reduce-overhead"` (CUDA graphs) removes
#   only part of the host's work, and a bigger batch is the lever that pays;
# - to capture a whole training step, optimizer included, as one CUDA graph (`torch.cuda.graph`)
#   and time it against eager (on a GPU);
# - to see graph breaks (`torch._dynamo.explain`) and recompilations (`TORCH_LOGS`), and to fix
#   both, including the last, smaller batch (`drop_last`, `dynamic=`);
# - to train with `cg.fit(..., compile=True)` and to save a compiled model's weights;
# - what to do where it is not available (no C++ compiler, a GPU Triton does not support);
# - going further (optional, on a GPU): what compiling does with mixed precision and memory.
#
# **Time:** 55 minutes. **Prerequisites:** lessons 03 (the training loop), 06 (mixed precision)
# and 10 (the profiler, and the regime rule: launch-bound, GPU-bound or input-bound).
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
cg.set_tf32(True)  # lesson 06: float32 matmuls on TF32 tensor cores where the GPU has them, eager and compiled alike
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. What `torch.compile` does
#
# In eager mode (everything so far) PyTorch runs one operator at a time: Python calls
# `linear`, the GPU runs its kernel, Python calls `relu`, another kernel, and so on. Each
# kernel reads its inputs from memory and writes its output back, and each operator costs the
# CPU time to dispatch and launch it (41-55 µs per operator call under the profiler on the
# course's H100 run (2026-11-26): lesson 10).
# `model = torch.compile(model)` changes how the same code runs:
#
# 1. **Dynamo** reads your Python `forward` as it runs and records the tensor operations into
#    a graph (an FX graph), with *guards*: the facts the graph assumed (shapes, dtypes, the
#    device, Python values it branched on). While the guards hold, later calls reuse the graph.
# 2. **AOTAutograd** derives the backward graph from the forward one, ahead of time.
# 3. **Inductor** turns both graphs into kernels: it *fuses* element-wise operations (a
#    LayerNorm, a GELU, a dropout, their gradients) into one kernel that reads and writes memory
#    once, keeps the large matmuls and convolutions in cuBLAS/cuDNN, and writes the rest as
#    **Triton** kernels on a GPU or **C++** (with OpenMP) on a CPU, which it compiles.
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
# which vector instructions the processor has), so on a fresh runtime this cell can take most of
# a minute (41 s on the course's 2-core CPU runner with an empty compile cache; a second or two
# once the cache is warm).

# %%
support = cg.compile_support(device)
print(support.reason)

# %% [markdown]
# ## 3. The first call, then the steady state
#
# A compiled model has three numbers: the first call (capture and compile: seconds), the steady
# step after it, and the eager step it replaces. In plain PyTorch, each is a clock read around a
# call, with `torch.cuda.synchronize()` before each reading on a GPU (lesson 02: a GPU call
# returns when its kernels are queued, not done). Here on a small forward pass:

# %%
import statistics
import time

from torch import nn


def seconds(call) -> float:
    """How long ``call()`` takes, its GPU work included."""
    if on_gpu:
        torch.cuda.synchronize()  # nothing queued before the clock starts
    start = time.perf_counter()
    call()
    if on_gpu:
        torch.cuda.synchronize()  # the kernels have finished, not just been queued
    return time.perf_counter() - start


small = nn.Sequential(nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 512)).to(device)
batch = torch.randn(256, 512, device=device)
compiled_small = torch.compile(small)
with torch.no_grad():
    first_call = seconds(lambda: compiled_small(batch))  # capture, compile, then run once
    steady = statistics.median(seconds(lambda: compiled_small(batch)) for _ in range(21))
    eager = statistics.median(seconds(lambda: small(batch)) for _ in range(21))
print(f"first call {first_call:.2f} s, then {steady * 1e3:.3f} ms per call; eager {eager * 1e3:.3f} ms per call")
assert first_call > steady  # compiling is the first call's work, whatever the runtime

# %% [markdown]
# A synchronization around every call suits a first call anywhere, and a call this long on a
# CPU; around short GPU steps it keeps the CPU from queueing ahead, so the helper below queues
# several steps between two readings instead (lesson 10). Whether the steady step is faster
# depends on the step's **regime** (lesson 10), so each measurement below first names it, on
# your runtime, with `cg.profile_step(step, device).regime`:
#
# - **GPU-bound**: the kernels take the time. Default `torch.compile` pays where they are
#   chains of element-wise operations, which Inductor fuses into fewer kernels.
# - **Launch-bound**: the GPU waits while the CPU dispatches and launches dozens of small
#   kernels. Cheaper kernels cannot help; less host work per step, or more work per launch,
#   can (a bigger batch, a fused optimizer). `mode="reduce-overhead"` removes only the model's
#   launches, not the rest of the step's: section 3 measures what that leaves.
#
# `cg.workloads.compare_compiled(workload, device, modes, precision)` builds a fresh model per
# side, times each compiled mode's first call, then times eager and compiled against each
# other with `cg.compare_steps` (lesson 10: K steps per sample between two synchronizations,
# the sides interleaved, 7 samples). A mode that cannot compile here is left out, with the
# reason, and the step runs eagerly. It is what the bench's "compile" rows run. float32
# matmuls use TF32 on GPUs that have it (the `cg.set_tf32(True)` above), as in lesson 06.
#
# ### A GPU-bound model: fusion pays
#
# A transformer's MLP block: `x + Dropout(Linear(Dropout(GELU(Linear(LayerNorm(x))))))`. Its
# two matmuls run in cuBLAS either way. Around them, eager mode runs the LayerNorm, the GELU,
# each dropout, the residual add and autocast's casts, and the backward of each, as separate
# kernels, each reading its input from memory and writing its output back. On a GPU the lesson
# stacks four such blocks, 64 wide, on a batch of a million rows (half a million on a T4: the
# rows of a few hundred sequences), in the precision lesson 06 chooses; on a CPU, one block on
# 256 rows (compiling for a CPU is slow). Predict first: how much faster will the compiled step
# be?

# %%
chosen = cg.choose_precision(device)
fusion = cg.workloads.fusion_workload(device)
fusion_profile = cg.profile_step(cg.workloads.workload_step(fusion, device, chosen), device,
                                 flops_per_step=cg.workloads.training_flops(fusion),
                                 peak_tflops=cg.workloads.matmul_peak(device, chosen), peak_precision=chosen.name)


def print_regime(workload, summary):
    """The regime rule's verdict on one step (lesson 10), and what it says of torch.compile's modes."""
    regime = summary.regime
    print(f"{workload.name} on {device} is {regime}")
    for lever in regime.levers:
        if "compile" in lever:
            print("  helps here:", lever)
    for lever in regime.useless:
        if "compile" in lever or "CUDA graphs" in lever:
            print("  cannot help here:", lever)


print_regime(fusion, fusion_profile)

# %%
fused = cg.workloads.compare_compiled(fusion, device, precision=chosen)
print(fused)
cg.compare_with_references("11.compile_speedup_fusion", fused.speedup(), device,
                           what=f"{fusion.name}: compiled step vs eager, speed-up", workload={"precision": chosen.name})

# %% [markdown]
# What to expect: on a GPU this step is GPU-bound, far below the matmul peak (the regime line
# says how far): its element-wise chains are most of its memory traffic. Fused, the step moves
# about a third fewer bytes. On the course's H100 run (2026-11-26) the GPU was busy 99% of the
# step at 3% of its matmul peak, and the compiled step ran 1.69x faster in bf16 (34.7 against
# 20.6 ms). Expected on a T4: at least 1.3x, the bench's "compile" row's target
# (prediction: t4 11.compile_speedup).
# On a CPU the step is CPU-bound: Inductor's C++ fuses the same chains, and the figure above
# says whether that pays on this CPU.
#
# **The compile cache.** Inductor keeps what it compiled on disk (`/tmp/torchinductor_<user>`),
# so a second compile of the same graph, even in a new process, skips the C++/Triton step and
# takes a fraction of the first. Each first call above says whether the cache was warm: "cold
# cache" is what a fresh runtime pays (this block on a 2-core CPU: 13.2 s cold, 1.0 s warm), a
# warm one means this machine compiled the same graphs before. On Colab the cache lives as long
# as the runtime: a new runtime compiles from scratch.
#
# ### A launch-bound model: what CUDA graphs remove (`mode="reduce-overhead"`)
#
# Lesson 03's MLP (784-512-512-10) at batch 256 is the opposite case: on a GPU its kernels are
# tiny, and the step waits on the host. Default compile has nothing to fuse here (eager already
# adds the bias inside cuBLAS's `addmm`, and Inductor leaves the matmuls to cuBLAS), and every
# compiled call adds guard checks and wrapper work on the host. `mode="reduce-overhead"`
# records what was compiled as **CUDA graphs** and replays each with one launch: the forward
# pass as one graph, the backward pass as another (PyTorch's "CUDA Graph Trees"). It needs a
# GPU, inputs of a fixed shape, and a little more memory (the graphs keep their own buffers).
# What was compiled is the model, not the step: the loss, `zero_grad`, the autograd engine and
# the optimizer step still run eagerly, in Python, on the host. The cell names this MLP's
# regime on your runtime, then, on a GPU, times the three ways.

# %%
mlp_step = cg.workloads.MLP_STEP  # lesson 03's MLP, in float32
print_regime(mlp_step, cg.profile_step(cg.workloads.workload_step(mlp_step, device), device))
graphs = None
if on_gpu:
    graphs = cg.workloads.compare_compiled(mlp_step, device, ("default", "reduce-overhead"))
    print(graphs)
else:
    print("CUDA graphs skipped: they record and replay CUDA kernels, and this runtime has no CUDA GPU (on a CPU "
          "the operators run on the CPU itself: there are no kernel launches to save).")
cg.compare_with_references("11.graphs_speedup_mlp", None if graphs is None else graphs.speedup("reduce-overhead"),
                           device, what=f"{mlp_step.name}: reduce-overhead vs eager, speed-up",
                           host_bound=True, workload={"step": mlp_step.name})

# %%
# The first call costs many steps' worth of time on every runtime (tens to thousands of steps), so compiling
# pays back only over a long run. Whether the steady step is faster depends on the regime, as above.
for comparison in [fused] + ([graphs] if graphs else []):
    for mode, steady in comparison.steps.items():
        if mode != "eager":  # against the fastest sample: a busy neighbour on a shared CPU only slows steps down
            assert comparison.first_call_s[mode] > 5 * steady.best, (comparison.workload, mode)

# %% [markdown]
# On the course's H100 run (2026-11-26) this step was launch-bound (the GPU busy 5% of it).
# Eager took 1.42 ms per step, default compile 1.89 ms (0.75x) and `reduce-overhead` 1.41 ms
# (1.00x): the graphs saved about what compile's own wrapper costs (its guards, and the copies
# of the inputs into the graphs' buffers), and the eager rest of the step still kept the GPU
# waiting. Expected on a T4: launch-bound too, default compile about 1x or below,
# `reduce-overhead` about 1x (prediction: t4 11.graphs). The bench's "compile_graphs" row, on an even smaller model
# (eight layers of 64 on batches of 32), therefore promises only that the graphs cost nothing
# (at least 0.95x): not measured on a GPU yet.
#
# What does pay on a launch-bound step? The regime line lists it first: **a bigger batch**,
# the same launches with more work each. The cell below times the same MLP's step at batch 256
# and at 1,024 against each other (`cg.compare_steps`) and compares samples per second.
# **Predict first:** on a GPU, how many times more samples per second at 1,024? (On a CPU
# runtime the CPU does four times the math: expect a little over 1x there, from the fixed
# cost per call spread over more samples; lesson 10's batch of 64 gained more.)

# %%
from dataclasses import replace

my_prediction = None  # your guess: samples per second at batch 1,024 / at 256, on a GPU, e.g. 2

batches = {256: mlp_step, 1024: replace(mlp_step, name="MLP 784-512-512-10, batch 1,024", shape=(1024, 1, 28, 28))}
by_batch = cg.compare_steps({f"batch {size:,}": cg.workloads.workload_step(workload, device)
                             for size, workload in batches.items()}, device=device)
for name, result in by_batch.items():
    print(f"{name:>11}: {result} per step")
per_sample = [result.median / size for result, size in zip(by_batch.values(), batches, strict=True)]
batch_gain = per_sample[0] / per_sample[1]
cg.compare_with_references("11.bigger_batch_gain", batch_gain, device, prediction=my_prediction,
                           what="samples per second at batch 1,024 / at 256, lesson 03's MLP", host_bound=True,
                           workload={"step": mlp_step.name})
# Four times the samples never take more than about four times as long (the same operators, each on more rows):
# on any runtime the rate per sample does not fall, up to noise. How much it rises is the regime's answer: printed.
assert batch_gain > 0.75

# %% [markdown]
# Expected on a T4 (not measured yet): 3-4x (prediction: t4 11.bigger_batch_gain), since the step at 1,024 still waits
# mostly on the same launches (on a T4, 4 GFLOP of matmuls take well under the host's time per
# step). A bigger batch changes the training too (fewer steps per epoch; lesson 12 raises the
# learning rate with it), and it must fit in memory (lesson 07 finds the largest that fits).
#
# ### The whole step as one CUDA graph
#
# `reduce-overhead` left the loss, `zero_grad` and the optimizer on the host. To take the whole step off the
# host, capture forward, backward *and* the optimizer step in one CUDA graph: "whole-network capture" with
# `torch.cuda.graph`, in PyTorch's notes on CUDA semantics. A graph replays the same kernels on the same memory,
# so it reads its batch from static tensors: each step copies its batch into them, then one `graph.replay()`
# launches everything. Three rules make the capture work: warm up on a side stream first (the first steps pick
# kernels and make the optimizer's state), leave the gradients as None before the capture (backward then writes
# them in the graph's own memory), and give Adam `capturable=True` (SGD needs nothing). Nothing inside may wait
# for the host: no `.item()`, no printing a tensor.
#
# **Predict first:** on a GPU, how many times faster is the captured step than the eager one, for this
# launch-bound MLP? The cell makes two copies of it with the same weights, steps one eagerly and one by the
# graph, checks that their weights agree after the same steps, then times both (the graph's side includes copying
# the batch in). On a CPU runtime it says what it would do.

# %%
def seeded_parts(workload, device):
    """A seeded copy of ``workload``'s model, its SGD optimizer and one random batch, on ``device``."""
    torch.manual_seed(0)
    model = workload.make_model().to(device)
    inputs = torch.randn(*workload.shape, device=device)
    labels = torch.randint(0, 10, (workload.shape[0],), device=device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), inputs, labels


def sgd_step(model, optimizer, inputs, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss


my_prediction = None  # your guess: eager step time / captured step time on a GPU, e.g. 2

whole_step = None
if on_gpu:
    eager, captured = seeded_parts(mlp_step, device), seeded_parts(mlp_step, device)
    eager_model, _, inputs, labels = eager  # the batch every step of this cell trains on
    static_model, static_optimizer, static_inputs, static_labels = captured
    side = torch.cuda.Stream()  # warm up on a side stream, so that the capture starts from a settled state
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            sgd_step(*captured)
    torch.cuda.current_stream().wait_stream(side)
    static_optimizer.zero_grad(set_to_none=True)  # backward writes the gradients in the graph's memory
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # recorded, not run
        static_loss = sgd_step(*captured)

    def replayed_step():
        static_inputs.copy_(inputs)  # this step's batch into the tensors the graph reads
        static_labels.copy_(labels)
        graph.replay()

    for _ in range(4):
        eager_loss = sgd_step(*eager)
    replayed_step()  # the captured copy's 4th step: 3 ran before the capture
    same = all(torch.allclose(a, b, rtol=1e-3, atol=1e-5)
               for a, b in zip(eager_model.parameters(), static_model.parameters(), strict=True))
    print(f"4th step on the same batch: loss {eager_loss.item():.4f} eager, {static_loss.item():.4f} replayed; "
          f"the weights {'the same' if same else 'DIFFERENT'} in both copies")
    assert same, "the captured step must train as the eager one does"
    whole_step = cg.compare_steps({"eager": lambda: sgd_step(*eager), "one CUDA graph": replayed_step},
                                  device=device)
    for name, result in whole_step.items():
        print(f"{name:>14}: {result} per step")
else:
    print("Whole-step capture skipped: this runtime has no CUDA GPU. On one, this cell records the MLP's forward, "
          "backward and SGD step as one CUDA graph, checks that it trains as the eager step does, and times both.")
cg.compare_with_references("11.whole_step_graph",
                           None if whole_step is None else whole_step["eager"].median
                           / whole_step["one CUDA graph"].median, device, prediction=my_prediction,
                           what=f"{mlp_step.name}: whole step as one CUDA graph vs eager, speed-up",
                           host_bound=True, workload={"step": mlp_step.name})

# %% [markdown]
# What to expect (prediction: t4 11.whole_step_graph): on a T4 at least 2x, since the eager step waits on the host
# and the captured one costs its kernels' time plus one launch; on a GPU-bound step the same capture gains
# little, as the launches already hide behind busy kernels. The price: every step must have the same shapes and
# the same code path (a last, smaller batch needs its own graph, or to be dropped), and the graph keeps its own
# memory. The regime rule offers whole-step capture once a course run on a GPU has measured it to pay.
#
# `mode="max-autotune"` is for the other regime: it benchmarks several kernel variants for
# every matmul and convolution and keeps the fastest, which makes compiling take minutes: worth
# it for a long GPU-bound job, not here.

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
print("(epoch 1 of the compiled run includes compiling the training and the evaluation graphs; in epoch 2 expect no "
      "gain: this small MLP has nothing to fuse, and on a GPU its step is launch-bound, section 3)")
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
loaded = restored.load_state_dict(compiled_model._orig_mod.state_dict())  # the fix: the plain keys
print(f"the original's weights load into a plain model: {len(loaded.missing_keys)} missing, "
      f"{len(loaded.unexpected_keys)} unexpected keys")

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
    print("cg.compile_model for the CPU, with the compiler still missing, falls back and says why:")
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
#   first call. Measure three things: the first call, the steady step, and eager, K steps at a
#   time (`cg.compare_steps`), after naming the step's regime (`cg.profile_step(...).regime`).
# - It pays back on long runs: the first call costs tens to thousands of steps. Default compile
#   pays on a GPU-bound step with element-wise chains to fuse; on a launch-bound step (a small
#   model, a small batch) it cannot. `mode="reduce-overhead"` (CUDA graphs) replays only the
#   compiled model: with the loss and optimizer still eager, it gave 1.00x on the course's H100
#   run (2026-11-26). Capturing the whole step (forward, backward and the optimizer) in one
#   `torch.cuda.graph` takes the host out of it: same shapes every step, the batch copied into
#   static tensors. On a launch-bound step a bigger batch pays too (measured above);
#   fusion does not help a step whose time is cuDNN's convolutions. `mode="max-autotune"`
#   is for long jobs.
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
# The part below is optional, and needs a GPU.

# %% [markdown]
# ## Going further (optional): compiled and mixed precision, and memory
#
# Compiling and autocast (lesson 06) combine: Inductor sees the casts in the graph and fuses
# them into their neighbours, so a compiled AMP step runs no cast kernels of its own. Memory
# can go *down* too: a fused kernel does not write out the intermediate results that separate
# kernels would, and for the backward pass Inductor keeps the inputs of cheap element-wise
# chains and recomputes the rest (lesson 07's activations), though CUDA graphs and autotuning
# keep buffers of their own. The cell shows section 3's GPU-bound model in the chosen precision
# beside the same model in float32 (TF32): each step's time and the allocator's peak for one step.

# %%
if on_gpu and fused.speedup() is not None:
    print(fused)
    if chosen.name != "fp32":
        print(cg.workloads.compare_compiled(fusion, device, precision="fp32"))
else:
    print("skipped: the allocator's peak is a CUDA GPU's figure" +
          ("" if fused.speedup() is not None else f"; and here: {fused.failed['default']}"))

# %% [markdown]
# On the course's H100 run (2026-11-26), in each precision the compiled step was faster than
# eager (bf16: 20.6 against 34.7 ms; float32: 29.9 against 46.2 ms) and peaked about the same
# (7,424 against 7,573 MiB; 12,396 against 12,841 MiB: 2-3% lower, too little to credit to
# fewer saved intermediate results without counting them), and the compiled bf16 step was the
# fastest of the four, with the casts fused into the kernels around them. Expected on a T4, in
# fp16: the same order (prediction: t4 11.compiled_fp16_order). An Ampere recipe copied to a T4
# (bf16 with `torch.compile`) compiles nothing there: Inductor warns "Tesla T4 does not support
# bfloat16 compilation natively, skipping" once and runs the step eagerly, in bf16, which a T4
# runs slowly. Choose the precision by the GPU (`cg.choose_precision`, lesson 06: fp16 there).
