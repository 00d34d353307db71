"""More than one process: DistributedDataParallel setup and teardown, rank-0 helpers, torchrun.

A DDP training script runs once per process, launched by ``torchrun``, which sets RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in each process's environment. These helpers
live in an importable package (not in a notebook) because every spawned process must import them.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistInfo:
    """Who this process is in the job. Taught in lesson 08."""

    rank: int  # 0 .. world_size-1 across all machines
    local_rank: int  # index on this machine: which GPU to use
    world_size: int  # number of processes in the job
    backend: str  # "nccl" (GPUs) or "gloo" (CPU)
    device: torch.device

    @property
    def is_main(self) -> bool:
        """Rank 0 logs, saves checkpoints and writes results; the others stay quiet."""
        return self.rank == 0


def _environment() -> dict[str, str]:
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise RuntimeError(
            f"ddp_setup() must run in a process started by torchrun: the environment variables {missing} "
            "are missing. Launch the script with `torchrun --standalone --nproc-per-node=N script.py` "
            "(from a notebook: cg.launch_torchrun('script.py', nproc=N))."
        )
    return {name: os.environ[name] for name in TORCHRUN_VARIABLES}


def _import_dynamo_before_the_group() -> None:
    # DistributedDataParallel imports torch._dynamo when the first model is wrapped. Imported after
    # the process group exists, torch._dynamo keeps references to it until the interpreter exits,
    # so destroy_process_group() cannot free it; gloo's worker threads then outlive Python and can
    # abort the process at exit. Imported first, it holds none (~1 s, which DDP would spend anyway).
    import torch._dynamo  # noqa: F401


def nccl_workarounds(local_gpus: int) -> dict[str, str]:
    """Set the NCCL environment a job on GPUs without peer-to-peer access needs; return what was set.

    Kaggle's "GPU T4 x2" has two T4s with no peer-to-peer (P2P) access. NCCL 2.24 and later put
    host buffers in cuMem memory by default and then fail at the first collective with "peer access
    is not supported between these two devices" (CUDA error 217). ``NCCL_CUMEM_HOST_ENABLE=0`` is
    the reported fix (NVIDIA/nccl#1838). Set only when some pair of this machine's GPUs lacks P2P,
    and never over a value the user chose. Must run before NCCL starts (``ddp_setup`` calls it).
    Taught in lesson 08.
    """
    pairs = [(a, b) for a in range(local_gpus) for b in range(local_gpus) if a != b]
    if not pairs or all(torch.cuda.can_device_access_peer(a, b) for a, b in pairs):
        return {}
    if "NCCL_CUMEM_HOST_ENABLE" in os.environ:
        return {}
    os.environ["NCCL_CUMEM_HOST_ENABLE"] = "0"
    return {"NCCL_CUMEM_HOST_ENABLE": "0"}


def ddp_setup(backend: str | None = None) -> DistInfo:
    """Join the process group that torchrun prepared; pick and bind this process's device.

    Args:
        backend: ``"nccl"`` for one GPU per process, ``"gloo"`` for CPU processes. Default: nccl
            when CUDA is available, else gloo.

    Raises:
        RuntimeError: not started by torchrun, or more processes than GPUs on this machine.
        ValueError: an unknown backend, or nccl without a GPU.

    Taught in lesson 08.
    """
    env = _environment()
    _import_dynamo_before_the_group()
    rank, local_rank, world_size = int(env["RANK"]), int(env["LOCAL_RANK"]), int(env["WORLD_SIZE"])
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"Unknown backend {backend!r}: use 'nccl' (GPUs) or 'gloo' (CPU).")
    if backend == "nccl":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus == 0:
            raise ValueError("The nccl backend needs CUDA GPUs and none is visible: use backend='gloo' on CPUs.")
        if local_rank >= gpus:
            raise RuntimeError(
                f"Process with local rank {local_rank} needs cuda:{local_rank} but this machine only "
                f"has {gpus} GPU(s): launch with --nproc-per-node={gpus}."
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)  # before init, so NCCL binds this process to its own GPU
        nccl_workarounds(min(gpus, int(os.environ.get("LOCAL_WORLD_SIZE", world_size))))
        dist.init_process_group(backend, rank=rank, world_size=world_size, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend, rank=rank, world_size=world_size)
    return DistInfo(rank, local_rank, world_size, backend, device)


def ddp_teardown() -> None:
    """Leave the process group (every process must, or the job hangs at exit).

    Call it once the DDP model is gone (build and train it in a function, tear down after that
    function returns): a DDP model holds the process group, and only a group freed here, while
    Python is fully alive, shuts down cleanly.

    Taught in lesson 08.
    """
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _IN_COLLECTIVES.clear()  # only now: see _IN_COLLECTIVES
    # Free the group now, not at interpreter exit: its destructor waits for gloo's worker threads,
    # which may still be releasing finished work whose tensors need the GIL. At exit, that release
    # aborts the process ("terminate called without an active exception"). The collection frees a
    # model that is unreachable but still in a reference cycle (a closure, a hook), and its group.
    gc.collect()


def rank0_print(info: DistInfo, *args, **kwargs) -> None:
    """print() on rank 0 only, prefixed with the job size. Taught in lesson 08."""
    if info.is_main:
        # One write per line: processes share the terminal and separate writes interleave.
        print(" ".join([f"[rank 0/{info.world_size}]", *map(str, args)]), **kwargs, flush=True)


# Tensors made here and handed to a collective, kept alive until `ddp_teardown` has destroyed the
# group. Before torch 2.8 (pytorch/pytorch#154976) ProcessGroupGloo's destructor joins its worker
# threads while holding the GIL; a worker that still holds a finished all_reduce and drops the last
# reference to a tensor whose Python object is gone must take the GIL to free it: a deadlock (seen
# with torch 2.7.1 in tests/test_parallel.py). While Python still holds the tensor, the worker's
# release needs no GIL. One scalar per call: nothing worth freeing earlier.
_IN_COLLECTIVES: list[torch.Tensor] = []


def all_reduce_mean(value: float | torch.Tensor, info: DistInfo) -> float:
    """The mean of ``value`` over every process (each process gets the same answer). Taught in lesson 08."""
    tensor = torch.as_tensor(value, dtype=torch.float64, device=info.device).clone()
    _IN_COLLECTIVES.append(tensor)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.item() / info.world_size


def _run_job(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run torchrun in a session of its own. Past ``timeout`` it is asked to stop (SIGTERM: it stops every worker it
    started; subprocess.run's kill of torchrun alone left the workers running, holding their memory), then killed
    with its process group if it has not within 30 s; then ``subprocess.TimeoutExpired`` is raised."""
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as job:
        try:
            stdout, stderr = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.terminate()  # torchrun stops the workers it started (they run in sessions of their own)
            try:
                job.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.communicate()
            raise
    return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)


def launch_torchrun(
    script: str | os.PathLike, nproc: int, *args: str, timeout: int = 600, echo: bool = True
) -> subprocess.CompletedProcess:
    """Run ``torchrun --standalone --nproc-per-node=nproc script args...`` and return its result.

    Uses this Python's ``torch.distributed.run`` (the module behind the ``torchrun`` command), so the
    processes see the same packages as the notebook. Prints the command and the output when ``echo``.

    Raises:
        FileNotFoundError: the script does not exist.
        RuntimeError: the job failed; the message ends with its output.

    Taught in lesson 08.
    """
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"No script at {script.resolve()}: write it first (e.g. with %%writefile).")
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1, got {nproc}.")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        str(script),
        *args,
    ]
    if echo:
        print("$ torchrun --standalone", f"--nproc-per-node={nproc}", script, *args)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    result = _run_job(command, env, timeout)
    if echo and result.stdout:
        print(result.stdout.rstrip())
    if result.returncode != 0:
        # The processes' own errors come first, torchrun's summary (about 40 lines) last.
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-80:])
        raise RuntimeError(f"torchrun exited with code {result.returncode}. Last lines of its output:\n{tail}")
    return result
