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
# # 08 · More than one GPU: DataParallel, DistributedDataParallel and torchrun
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/08_multi_gpu_ddp.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/08_multi_gpu_ddp.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - what `nn.DataParallel` does, and why PyTorch recommends `DistributedDataParallel` instead;
# - a DDP training script: process group, `DistributedSampler` with `set_epoch`, logging and
#   checkpoints on rank 0, `all_reduce`; launched with `torchrun`;
# - proof that 2-process DDP ends with the same weights as 1-process training on the same
#   global batch;
# - `gloo` on CPUs, `nccl` on GPUs, and the flags for several machines;
# - when DDP is faster: compute per step against one all-reduce of the gradients, measured;
# - the classic mistakes: `mp.spawn` of a notebook function, `DistributedDataParallelCPU`,
#   forgetting `set_epoch`.
#
# **Time:** 57 minutes. **Prerequisites:** lesson 03 (the training loop). Colab has one GPU: the multi-GPU
# parts run as several processes on the CPU (or on one process per GPU where you have more).
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
print(f"PyTorch {torch.__version__}, computing on: {device}, GPUs visible: {torch.cuda.device_count()}")

# %% [markdown]
# ## 1. `nn.DataParallel`: one process, many GPUs
#
# `nn.DataParallel(model, device_ids=[0, 1, ...])` runs in **one** Python process. At every
# forward pass it
# 1. **scatters** the batch: splits it along dimension 0, one slice per GPU;
# 2. **replicates** the model: copies the weights from GPU 0 to every other GPU, every step;
# 3. runs the replicas in Python threads (which share one GIL);
# 4. **gathers** the outputs back on GPU 0, where the loss and the optimizer step happen.
#
# GPU 0 does more work and holds more memory than the others, the weights travel every step, and
# the threads contend for the GIL. That is why PyTorch's documentation recommends
# `DistributedDataParallel` even on a single machine. With one GPU (Colab) or none,
# `DataParallel` simply calls the wrapped model: nothing to split. With two (Kaggle's free
# **GPU T4 x2** accelerator, the only free way to get two GPUs), each GPU computes half the batch.

# %%
import os

from torch import nn

# Kaggle's two T4s cannot reach each other directly (no peer-to-peer access); recent NCCL, which DataParallel uses
# to copy the weights to the other GPU, fails there at its first call unless this is set before it (section 4)
os.environ.setdefault("NCCL_CUMEM_HOST_ENABLE", "0")
model = cg.mlp(64, hidden=128).to(device)
parallel = nn.DataParallel(model)  # device_ids defaults to every visible GPU
print("device_ids:", parallel.device_ids, "| the real model:", type(parallel.module).__name__)
batch = torch.randn(32, 64, device=device)
assert torch.allclose(parallel(batch), model(batch), atol=1e-5)  # same model, same answer (GPU rounding aside)
assert parallel.module is model  # save parallel.module.state_dict(), not the wrapper's

# %% [markdown]
# Training through the wrapper gives the same weights as training the model itself: the loss is
# computed on the gathered outputs of the whole batch, and the replicas' gradients are summed back
# into the one real model on GPU 0. On two GPUs the sums are taken in a different order, so the
# weights agree up to rounding.

# %%
def train_steps(use_data_parallel: bool, steps: int = 10) -> nn.Module:
    cg.seed_everything(0)
    model = cg.mlp(64, hidden=128).to(device)
    net = nn.DataParallel(model) if use_data_parallel else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        inputs = torch.randn(64, 64, generator=data).to(device)
        labels = torch.randint(0, 10, (64,), generator=data).to(device)
        optimizer.zero_grad()
        nn.functional.cross_entropy(net(inputs), labels).backward()
        optimizer.step()
    return model


plain, wrapped = train_steps(False), train_steps(True)
gap = max((a - b).abs().max().item() for a, b in zip(plain.parameters(), wrapped.parameters(), strict=True))
print(f"{max(torch.cuda.device_count(), 1)} device(s): largest weight difference after 10 steps {gap:.1e}")
assert gap < 1e-4

# %% [markdown]
# ## 2. `DistributedDataParallel`: one process per GPU
#
# The two designs side by side, on two GPUs:

# %%
cg.show_figure("dataparallel_vs_ddp")

# %% [markdown]
# DDP runs **one process per GPU** (or per CPU worker). Every process holds a full copy of the
# model and trains on its own slice of each global batch. During `backward()`, DDP averages the
# gradients across processes with an **all-reduce** (overlapped with the backward pass), so
# after `optimizer.step()` every copy holds the same weights. Nothing is gathered on one GPU.
#
# The processes are started by **`torchrun`**, which gives each one its identity in environment
# variables: `RANK` (0..N-1 over all machines), `LOCAL_RANK` (which GPU on this machine),
# `WORLD_SIZE` (N), and where to meet (`MASTER_ADDR`, `MASTER_PORT`). The communication
# backend is **`nccl`** between GPUs and **`gloo`** between CPU processes.
#
# In plain PyTorch, each process started by torchrun sets itself up and tears down like this:
#
# ```python
# import os
# import torch
# import torch.distributed as dist
#
# local_rank = int(os.environ["LOCAL_RANK"])         # set by torchrun, like RANK and WORLD_SIZE
# if torch.cuda.is_available():
#     device = torch.device("cuda", local_rank)
#     torch.cuda.set_device(device)                  # before init: this process owns this GPU
#     os.environ.setdefault("NCCL_CUMEM_HOST_ENABLE", "0")  # GPUs without peer access (Kaggle's T4 x2): section 4
#     dist.init_process_group("nccl", device_id=device)
# else:
#     device = torch.device("cpu")
#     dist.init_process_group("gloo")
# model = torch.nn.parallel.DistributedDataParallel(model.to(device),
#                                                   device_ids=[local_rank] if device.type == "cuda" else None)
# ...                                                # train
# dist.destroy_process_group()                       # before the process exits
# ```
#
# `cg.ddp_setup()` and `cg.ddp_teardown()` are these lines plus what a course needs on top:
# a clear error when the script is not launched by torchrun, and the NCCL setting for GPUs that
# cannot reach each other (section 4); read them with `cg.ddp_setup??`. They live in the package,
# which every process can import.
#
# Processes cannot run a function defined in a notebook (section 6 shows the error), so the
# training code goes into a script. The model is
# built inside `train()`, so it is gone when `main()` tears down: a DDP model holds the process
# group, and a group still alive when Python exits can crash the process at the very end.

# %%
# %%writefile ddp_train.py
"""Train an MLP on scikit-learn's digits with DistributedDataParallel.

Launch: torchrun --standalone --nproc-per-node=N ddp_train.py [--backend gloo|nccl] [--epochs 3]
"""

import argparse

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

import colab_gpu as cg


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=None, help="nccl (GPUs) or gloo (CPU); default: nccl when CUDA works")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--global-batch", type=int, default=64, help="samples per step over all processes")
    parser.add_argument("--out", default="ddp_weights.pt", help="final weights, written by rank 0")
    parser.add_argument("--checkpoint", default="ddp_checkpoint.pt", help="written by rank 0 after every epoch")
    return parser.parse_args()


def train(info: cg.DistInfo, args: argparse.Namespace) -> None:
    if args.global_batch % info.world_size:
        raise ValueError(f"--global-batch {args.global_batch} does not split evenly over {info.world_size} "
                         "processes: pick a multiple of the process count.")
    # all_reduce: every process sends rank + 1, every process receives the sum.
    contribution = torch.tensor([info.rank + 1.0], device=info.device)
    torch.distributed.all_reduce(contribution, op=torch.distributed.ReduceOp.SUM)
    cg.rank0_print(info, f"{info.backend} on {info.device}: all_reduce(rank + 1) = {contribution.item():.0f}")

    cg.seed_everything(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    train_set, _ = cg.load_digits().limit(train=1024).datasets()
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)  # each rank gets its own 1/N
    loader = DataLoader(train_set, batch_size=args.global_batch // info.world_size, sampler=sampler)
    model = cg.mlp(64, hidden=128).to(info.device)
    model = DDP(model, device_ids=[info.local_rank] if info.device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle every epoch, identical on every rank
        stats = cg.train_epoch(model, loader, optimizer, info.device, progress=False)
        loss = cg.all_reduce_mean(stats.loss, info)
        cg.rank0_print(info, f"epoch {epoch + 1}: loss {loss:.4f} (mean over ranks), {stats.samples} samples here")
        if info.is_main:  # one writer, or N processes overwrite the same file
            cg.save_checkpoint(args.checkpoint, model.module, optimizer, epoch=epoch + 1)
        torch.distributed.barrier()  # nobody starts the next epoch before the checkpoint exists
    if info.is_main:
        torch.save(model.module.state_dict(), args.out)


def main() -> None:
    args = parse_args()
    info = cg.ddp_setup(args.backend)  # reads RANK, LOCAL_RANK, WORLD_SIZE that torchrun set
    try:
        train(info, args)  # the DDP model lives inside train(), so it is gone before the teardown
    finally:
        cg.ddp_teardown()


if __name__ == "__main__":
    main()

# %% [markdown]
# In a notebook cell you launch it with `!torchrun --standalone --nproc-per-node=2 ddp_train.py` on
# Kaggle's T4 x2: one process per GPU. On Colab's single GPU that is `--nproc-per-node=1` (a
# second process would find no GPU of its own); to try two processes anywhere, add `--backend
# gloo` (CPU processes).
# `cg.launch_torchrun` runs the same command with this notebook's Python and prints its output.
# Two CPU processes with `gloo` (this works on every runtime):

# %%
result = cg.launch_torchrun("ddp_train.py", 2, "--backend", "gloo", "--out", "ddp_weights_2proc.pt", timeout=300)
assert "all_reduce(rank + 1) = 3" in result.stdout  # 1 + 2 from two processes

# %% [markdown]
# ## 3. Is it right? DDP vs one process on the same global batch
#
# Each of the 2 processes took 32 samples per step; together they cover the same 64 samples a
# single process takes in one step (a `DistributedSampler` with one replica and the same seed
# gives the same order), and DDP *averages* the two halves' gradients: that is the gradient of
# the 64-sample batch. So the final weights must match those of ordinary training with
# `cg.fit` on batches of 64, up to floating-point rounding.

# %%
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

cg.seed_everything(0)
train_set, _ = cg.load_digits().limit(train=1024).datasets()
sampler = DistributedSampler(train_set, num_replicas=1, rank=0, shuffle=True, seed=0)
loader = DataLoader(train_set, batch_size=64, sampler=sampler)
reference = cg.mlp(64, hidden=128)
optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
cg.fit(reference, loader, None, optimizer, "cpu", epochs=3, progress=False,
       on_epoch_end=lambda epoch, row: sampler.set_epoch(epoch))  # as the script does before each epoch

ddp_weights = torch.load("ddp_weights_2proc.pt", weights_only=True)
difference = max((ddp_weights[k] - v).abs().max().item() for k, v in reference.state_dict().items())
print(f"largest weight difference, 2-process DDP vs 1 process: {difference:.2e}")
assert all(torch.allclose(ddp_weights[k], v, atol=1e-5) for k, v in reference.state_dict().items())

# %% [markdown]
# ## 4. On GPUs: `nccl`, one process per GPU
#
# The same script, with the default backend, uses `nccl` and one GPU per process
# (`--nproc-per-node` = number of GPUs). On Colab's single GPU that is one process: not faster,
# but the code you write here scales unchanged to a machine with 8 GPUs. On Kaggle's two T4s it
# is two processes; those GPUs cannot reach each other directly (no peer-to-peer access), which
# recent NCCL releases trip over at the first `all_reduce` ("peer access is not supported between
# these two devices", NVIDIA/nccl#1838). `NCCL_CUMEM_HOST_ENABLE=0`, set before
# `init_process_group` as section 2's lines do, is the reported fix; `cg.ddp_setup` sets it
# where the GPUs lack peer access. If NCCL still fails, the cell below says how to see why
# (`NCCL_DEBUG=INFO`) and falls back to `gloo`, which runs between GPU processes too (slower).
#
# The comparison with the 64-sample reference needs the global batch to split evenly, so we use
# the largest power of two processes that the GPUs allow (3 GPUs: 2 processes).

# %%
gpus = torch.cuda.device_count()
if gpus:
    nproc = 1 << (gpus.bit_length() - 1)  # 1, 2, 4, 8... processes: 64 samples split evenly
    try:
        result = cg.launch_torchrun("ddp_train.py", nproc, "--out", "ddp_weights_nccl.pt", timeout=300)
    except RuntimeError as error:  # a failing NCCL must not stop the notebook: say how to see why, go on
        result = None
        print(f"nccl failed here: {str(error).splitlines()[0]}\nRerun with NCCL_DEBUG=INFO in the environment to "
              "see NCCL's own reasons; the same script runs with --backend gloo between GPU processes (slower).")
    if result is not None:
        assert "nccl on cuda:0" in result.stdout
        gpu_weights = torch.load("ddp_weights_nccl.pt", weights_only=True, map_location="cpu")
        gap = max((gpu_weights[k] - v).abs().max().item() for k, v in reference.state_dict().items())
        print(f"{nproc} GPU process(es) with nccl vs the CPU reference: largest difference {gap:.2e}")
        assert gap < 1e-3  # GPU and CPU kernels round differently; the training is the same
else:
    print("CPU runtime: nccl needs GPUs. On a GPU runtime this cell runs the script with nccl, one process per GPU.")

# %% [markdown]
# **Several machines.** Run the same command on every machine, with the machine count, this
# machine's index and a meeting point (any free port on the first machine):
#
# ```bash
# torchrun --nnodes=2 --node-rank=0 --nproc-per-node=8 \
#          --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 ddp_train.py   # machine 0
# torchrun --nnodes=2 --node-rank=1 --nproc-per-node=8 \
#          --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 ddp_train.py   # machine 1
# ```
#
# `RANK` then runs over all 16 processes and `LOCAL_RANK` over 0..7 on each machine.
# `--standalone` is the single-machine shortcut: it picks a free local meeting point for you.
#
# ## 5. Is it faster? When DDP pays
#
# Section 3 proved that DDP trains the same model; you open this lesson to train it *faster*.
# DDP splits each **batch** over the processes, not the steps: with a global batch of 64, one
# process takes 8 steps of 64 samples per epoch here, and each of two processes takes 8 steps of
# 32. Two processes are faster only if a step on half the batch costs about half as much, and if
# the all-reduce of the gradients that DDP adds to every step is small next to that half:
#
# epoch with N processes ≈ steps × (compute on 1/N of the batch + the all-reduce DDP cannot hide)
#
# The script below times both sides on two models. First, one process alone trains the plain
# model (no DDP) on the whole batch: the epoch DDP must beat. Then, with 2 processes: an epoch
# with DDP's all-reduce, the same epoch inside `model.no_sync()` (DDP skips the all-reduce there:
# the compute alone), and one all-reduce of a tensor as large as the gradients. Section 2's MLP has
# 26,122 weights and uses each once per sample (2 FLOPs per weight, forward); the small CNN has
# 72,954 weights and, because a convolution reuses each weight at every pixel, does 271 FLOPs per
# weight (`torch.utils.flop_counter`): 135 times more work per byte of gradient. Each timing
# waits for the GPU (`synchronize`) and for every process (`barrier`): the slowest process sets
# the pace. Without two GPUs, each process gets one CPU core (`torchrun` sets
# `OMP_NUM_THREADS=1`), as each gets one GPU on Kaggle's T4 x2.

# %%
# %%writefile ddp_speed.py
"""Time one process against N: the plain model's epoch on rank 0 alone, then DDP's epoch, the same epoch's compute
alone, and one all-reduce, with N processes.

Launch: torchrun --standalone --nproc-per-node=N ddp_speed.py [--backend gloo|nccl] [--out ddp_speed.json]
Rank 0 writes one row per model; each time is the median of 3 repeats (DDP's three interleaved).
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import colab_gpu as cg

SAMPLES, GLOBAL_BATCH, REPEATS = 512, 64, 3
MODELS = {  # name: (build the model, one sample's shape)
    "MLP": (lambda: cg.mlp(64, hidden=128), (64,)),  # section 2's MLP on the digits' 64 pixels
    "CNN": (lambda: cg.small_cnn(3, width=16), (3, 32, 32)),  # each weight is used at every pixel
}


def wait(device: torch.device, together: bool = True) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the GPU has finished its queue, not just received it
    if together:
        torch.distributed.barrier()  # every process has finished: the slowest one sets the pace


def epoch_seconds(model, optimizer, batches, device, all_reduce: bool = True, together: bool = True) -> float:
    wait(device, together)
    start = time.perf_counter()
    for inputs, labels in batches:
        optimizer.zero_grad()
        if all_reduce:
            F.cross_entropy(model(inputs), labels).backward()  # a DDP model all-reduces the gradients here
        else:
            with model.no_sync():  # the same step without the all-reduce: the compute alone
                F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    wait(device, together)
    return time.perf_counter() - start


def random_batches(shape, batch: int, device: torch.device, seed: int) -> list:
    generator = torch.Generator().manual_seed(seed)  # random data: this times the steps, not a loader
    return [(torch.randn(batch, *shape, generator=generator).to(device),
             torch.randint(0, 10, (batch,), generator=generator).to(device)) for _ in range(SAMPLES // GLOBAL_BATCH)]


def alone_seconds(name: str, device: torch.device) -> float:
    """One process, the plain model (no DDP) on the whole batch: the epoch that DDP must beat. Rank 0 runs it while
    the other processes wait for it (DDP's first broadcast), so it has its core, or its GPU, to itself."""
    build, shape = MODELS[name]
    cg.seed_everything(0)
    model = build().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = random_batches(shape, GLOBAL_BATCH, device, seed=0)
    epoch_seconds(model, optimizer, batches[:2], device, together=False)  # warm-up
    return statistics.median(epoch_seconds(model, optimizer, batches, device, together=False) for _ in range(REPEATS))


def all_reduce_seconds(weights: int, device: torch.device, repeats: int = 10) -> float:
    gradients = torch.zeros(weights, device=device)  # float32, like the gradients
    wait(device)
    start = time.perf_counter()
    for _ in range(repeats):
        torch.distributed.all_reduce(gradients)
    wait(device)
    return (time.perf_counter() - start) / repeats


def measure(name: str, info: cg.DistInfo) -> dict:
    build, shape = MODELS[name]
    cg.seed_everything(0)
    model = DDP(build().to(info.device), device_ids=[info.local_rank] if info.device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    per_process = GLOBAL_BATCH // info.world_size  # DDP splits each batch, not the number of steps
    batches = random_batches(shape, per_process, info.device, seed=info.rank)
    epoch_seconds(model, optimizer, batches[:2], info.device)  # warm-up
    weights = sum(p.numel() for p in model.parameters())
    rounds = [(epoch_seconds(model, optimizer, batches, info.device),
               epoch_seconds(model, optimizer, batches, info.device, all_reduce=False),
               all_reduce_seconds(weights, info.device)) for _ in range(REPEATS)]
    epoch, compute, all_reduce = (statistics.median(column) for column in zip(*rounds, strict=True))
    return {"model": name, "processes": info.world_size, "weights": weights, "steps": len(batches),
            "epoch_s": epoch, "compute_s": compute, "all_reduce_s": all_reduce}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=None, help="nccl (GPUs) or gloo (CPU); default: nccl when CUDA works")
    parser.add_argument("--out", default="ddp_speed.json", help="the rows, written by rank 0")
    args = parser.parse_args()
    info = cg.ddp_setup(args.backend)
    try:
        rows = []
        for name in MODELS:
            alone = alone_seconds(name, info.device) if info.is_main else None  # the others wait in measure()
            rows.append(dict(measure(name, info), alone_s=alone))  # the DDP models are gone before the teardown
        if info.is_main:
            with open(args.out, "w") as file:
                json.dump(rows, file)
    finally:
        cg.ddp_teardown()


if __name__ == "__main__":
    main()

# %%
import json

backend = "nccl" if torch.cuda.device_count() >= 2 else "gloo"  # two GPUs, or two CPU processes
cg.launch_torchrun("ddp_speed.py", 2, "--backend", backend, "--out", "ddp_speed.json", timeout=300)
with open("ddp_speed.json") as file:
    runs = {row["model"]: row for row in json.load(file)}



def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


print(f"{backend}, one {'GPU' if backend == 'nccl' else 'CPU core'} per process; global batch 64, "
      f"{runs['MLP']['steps']} steps per epoch")
print(f"{'':14} {'1 process':>10} {'2 processes':>34}")
print(f"{'model':5} {'weights':>8} {'epoch':>10} {'compute':>10} {'all-reduces':>12} {'epoch':>10} {'speed-up':>9}")
for name, run in runs.items():
    all_reduces = run["steps"] * run["all_reduce_s"]  # one per step, timed alone
    print(f"{name:5} {run['weights']:>8,} {ms(run['alone_s']):>10} {ms(run['compute_s']):>10} "
          f"{ms(all_reduces):>12} {ms(run['epoch_s']):>10} {run['alone_s'] / run['epoch_s']:>8.2f}x")

# The physics this relies on: per step, the CNN computes many times longer than one all-reduce of its gradients
# takes, the MLP does not (by far the smaller ratio, on every runtime).
ratio = {name: run["compute_s"] / (run["steps"] * run["all_reduce_s"]) for name, run in runs.items()}
print(f"compute per step / one all-reduce, 2 processes: MLP {ratio['MLP']:.1f}, CNN {ratio['CNN']:.1f}")
assert ratio["CNN"] > ratio["MLP"]

# %% [markdown]
# Read the table from left to right. A 2-process epoch is not exactly its compute plus its
# all-reduces: DDP hides part of the all-reduces behind the backward pass (it starts on the last
# layers' gradients while the first layers' are still computed), adds work of its own (copying
# the gradients into buckets), and the processes wait for each other at every step.
#
# - **The MLP**'s step is mostly per-step overhead (Python and dispatch; on a GPU, launch-bound:
#   lesson 10), so a step on 32 samples costs about what one on 64 does: halving the batch saves
#   nothing, and every step pays an all-reduce on top. Two processes are *slower*. Fewer, larger
#   steps (a larger global batch) or one process is the lever here, not a second GPU.
# - **The CNN**'s compute shrinks with the batch, and one all-reduce is a small fraction of a step:
#   two processes are faster. Not twice: two CPU cores share caches and memory bandwidth, and
#   Colab's two vCPUs are two threads of one physical core, so the gain varies from run to run.
#   On two GPUs the picture is the rule again, with other numbers: 32 small images per GPU are too
#   little work for this CNN to be compute-bound there, so its row may read like the MLP's.
#
# So DDP pays when the step is compute-bound (its time shrinks with the batch) and the compute on
# each process's share of the batch is much longer than one all-reduce of the gradients: the
# speed-up is about `t(B) / (t(B/N) + the all-reduce DDP cannot hide behind the backward pass)`.
#
# **On Kaggle's T4 x2 (no T4 pair has run this course yet)** (prediction: t4 08.ddp_two_t4s). Without peer-to-peer
# access, every all-reduce goes through host memory, at a few GB/s instead of the hundreds an
# NVLink pair gives. Section 2's MLP on the digits stays launch-bound on a T4, so two processes
# will be slower, as here. A ResNet-18 (11.7 million weights, 47 MB of float32 gradients)
# trained on 224-pixel images with AMP computes for about 100 ms per step on 64 images per T4
# (NVIDIA's published T4 training rate for ResNet-50, scaled by the FLOPs), against roughly
# 10-15 ms for one all-reduce through host memory, much of it hidden behind the backward pass:
# predicted 1.7-1.9x faster on two T4s than on one. Measure your own step with this script's
# three timings before you rent a second GPU.
#
# ## 6. Classic mistakes
#
# ### `mp.spawn` of a function defined in the notebook
#
# `torch.multiprocessing.spawn` starts fresh Python processes that must *import* the function
# they run. A function defined in a notebook cell lives in the kernel's `__main__`, which a new
# process cannot import: each child dies with `AttributeError: Can't get attribute 'worker'`,
# and the notebook sees the children's failure.

# %%
import torch.multiprocessing as mp


def worker(rank):
    print(f"hello from process {rank}")


# quiet_children: one line instead of both children's full tracebacks.
with cg.shows_error(mp.ProcessExitedException, match="exit code", quiet_children=True):
    mp.spawn(worker, nprocs=2)

# %% [markdown]
# The fix is what section 2 did: put the code in a file and launch it (`torchrun`), or import
# the worker function from a module.
#
# ### `DistributedDataParallelCPU`
#
# Old tutorials use `torch.nn.parallel.DistributedDataParallelCPU`. It is a deprecated alias:
# `DistributedDataParallel` itself handles CPU processes with the `gloo` backend, as above
# (`device_ids=None`).
#
# ### Forgetting `sampler.set_epoch(epoch)`
#
# `DistributedSampler` shuffles with `seed + epoch`. Without `set_epoch`, the epoch stays 0 and
# every epoch visits the data in the same order. No process needs to start to see it:

# %%
data = list(range(16))
forgetful = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=0)
orders_without = [list(forgetful) for _epoch in range(3)]
careful = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=0)
orders_with = []
for epoch in range(3):
    careful.set_epoch(epoch)
    orders_with.append(list(careful))
print("without set_epoch:", orders_without)
print("with set_epoch:   ", orders_with)
assert orders_without[0] == orders_without[1] == orders_without[2]
assert orders_with[0] != orders_with[1]

# %% [markdown]
# ## Exercise
#
# A data set has 10 samples and the job has 4 processes. With `shuffle=False`, which indices
# does the process with **rank 3** get? Write them as a list in `rank3_indices`. (Hint:
# `DistributedSampler` pads the data to a multiple of the number of processes by repeating its
# first samples, then gives rank `r` every 4th index starting at `r`.)

# %%
rank3_indices = None  # your list goes here

# %%
cg.checks.shard(rank3_indices, dataset_size=10, world_size=4, rank=3)

# %% [markdown]
# ### Exercise 2: set up DDP yourself, and prove it
#
# `cg.ddp_setup` and `cg.ddp_teardown` hide a few lines of `torch.distributed` (section 2).
# Write them yourself: complete `setup()` and `teardown()` in `my_ddp_train.py`, which runs
# section 2's `train()` unchanged. The check launches your script with 2 `gloo` processes on
# this runtime and compares its final weights with section 2's run of the helpers: the same
# seed, the same data and the same all-reduce give the same weights.
#
# One line of the script is not about DDP itself: `import torch._dynamo` before the process
# group exists. DDP imports that module (`torch.compile`'s front end) when it wraps the first
# model; imported after the group is made, it keeps a reference to the group until Python
# exits, so `destroy_process_group()` cannot free it, and gloo's threads can then crash the
# process at exit (a "terminate called" line after the job's work is done). Imported first, it
# holds nothing. `cg.ddp_setup` does the same.

# %%
# %%writefile my_ddp_train.py
"""Section 2's training, set up and torn down with plain torch.distributed."""

import os

import torch
import torch._dynamo  # noqa: F401  DDP imports it; imported before the group, it cannot crash the exit
import torch.distributed as dist
from ddp_train import parse_args, train  # section 2's script, in this folder

import colab_gpu as cg


def setup(backend):
    """Join the process group that torchrun prepared; return who this process is."""
    # Your code: read RANK, LOCAL_RANK and WORLD_SIZE; pick the device (the GPU numbered LOCAL_RANK with
    # nccl, the CPU with gloo); with nccl, set NCCL_CUMEM_HOST_ENABLE as section 2 does; join the group
    # (dist.init_process_group).
    rank = local_rank = world_size = device = None
    return cg.DistInfo(rank, local_rank, world_size, backend, device)


def teardown():
    """Leave the process group."""
    pass  # your code


if __name__ == "__main__":
    args = parse_args()
    info = setup(args.backend or ("nccl" if torch.cuda.is_available() else "gloo"))
    try:
        train(info, args)  # section 2's training: the DDP model is gone when it returns
    finally:
        teardown()

# %%
cg.checks.ddp_script("my_ddp_train.py", reference_weights="ddp_weights_2proc.pt")

# %% [markdown]
# ## Summary
#
# - `nn.DataParallel`: one process, scatter/replicate/gather every step, GPU 0 overloaded. Use DDP.
# - DDP: one process per GPU, `torchrun --standalone --nproc-per-node=N script.py`, `nccl` on
#   GPUs and `gloo` on CPUs; gradients are averaged by all-reduce during `backward()`.
# - On GPUs without peer-to-peer access (Kaggle's T4 x2), set `NCCL_CUMEM_HOST_ENABLE=0` before
#   the first NCCL call (`init_process_group`, or `nn.DataParallel`'s first step).
# - `DistributedSampler` + `sampler.set_epoch(epoch)`; log and save on rank 0 only, then `barrier()`.
# - Code for spawned processes lives in files, not notebook cells.
# - Plain setup: read `RANK`/`LOCAL_RANK`/`WORLD_SIZE`, `set_device`, `init_process_group`; at the end
#   `destroy_process_group`.
# - Verified here: 2-process DDP = 1-process training on the same global batch.
# - DDP splits the batch, not the steps: it pays when the step's compute shrinks with the batch and
#   is much longer than one all-reduce of the gradients (the CNN here), never for a launch-bound step.
#
# Next: **09 · Troubleshooting**, the errors of lessons 01-08 with their real messages and fixes.
