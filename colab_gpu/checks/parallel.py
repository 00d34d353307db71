"""Checks of multi-GPU exercises: sharding and a plain DDP script (lesson 08)."""

from __future__ import annotations

import re
import subprocess
import time

import torch

from ..train.parallel import launch_torchrun
from .core import CheckResult, fail, ok, that
from .ddp_dry_run import dry_run_problem


def shard(indices: object, *, dataset_size: int, world_size: int, rank: int) -> CheckResult:
    """Check the indices a rank gets from ``DistributedSampler(shuffle=False)``. Taught in lesson 08."""
    from torch.utils.data.distributed import DistributedSampler

    expected = list(DistributedSampler(range(dataset_size), num_replicas=world_size, rank=rank, shuffle=False))
    if indices is None:
        return fail("the list of indices is not set yet: write it and rerun.")
    if not isinstance(indices, (list, tuple)) or not all(isinstance(i, int) for i in indices):
        return fail(f"give a list of integers, got {indices!r}.")
    if len(indices) != len(expected):
        return fail(
            f"each of the {world_size} ranks gets ceil({dataset_size}/{world_size}) = "
            f"{len(expected)} indices (the data is padded), you gave {len(indices)}."
        )
    return that(
        list(indices) == expected,
        f"rank {rank} of {world_size} gets {expected}.",
        f"rank {rank} takes every {world_size}th index starting at {rank}, after padding the data to "
        f"{len(expected) * world_size} samples with its first ones.",
    )


def ddp_script(script: str, reference_weights: str, *, nproc: int = 2, timeout: int = 300) -> CheckResult:
    """Check a learner's DDP training script (lesson 08): launched by torchrun with ``nproc`` gloo processes (on
    every runtime), every process must have its own rank and the job must train to the same weights as the helper's
    run saved in ``reference_weights``; where this runtime has ``nproc`` GPUs, the same with nccl (one GPU each).
    First, on any runtime, a dry run with stand-ins for the process group and the GPU (``ddp_dry_run``): the ranks
    read from torchrun's variables, each process on its own GPU, ``NCCL_CUMEM_HOST_ENABLE`` set before an nccl
    group (Kaggle's T4 x2 fails without it), the group left at the end."""
    from pathlib import Path

    if not isinstance(script, (str, Path)):
        return fail(f"pass the path of your script (e.g. 'ddp_train.py'), got {type(script).__name__}.")
    path = Path(script)
    if not path.is_file():
        return fail(f"no script at {path}: run the %%writefile cell first.")
    problem = dry_run_problem(path)
    if problem:
        return fail(problem)
    backends = ["gloo"] + (["nccl"] if torch.cuda.device_count() >= nproc else [])
    summaries = []
    for backend in backends:
        ran = _run(path, nproc, backend, timeout)
        if isinstance(ran, CheckResult):
            return ran
        out, seconds, stdout = ran
        sums = [int(n) for n in re.findall(r"all_reduce\(rank \+ 1\) = (\d+)", stdout)]
        if sums != [nproc * (nproc + 1) // 2]:
            return fail(
                f"the processes' ranks are not 0..{nproc - 1}, one each: all_reduce(rank + 1) gave {sums} where one "
                f"line of {nproc * (nproc + 1) // 2} was expected. Read each process's RANK from the environment "
                "that torchrun set."
            )
        mine, expected = torch.load(out, weights_only=True), torch.load(reference_weights, weights_only=True)
        gap = max((mine[k] - v).abs().max().item() for k, v in expected.items())
        tolerance = 1e-6 if backend == "gloo" else 1e-3  # GPU and CPU kernels round differently
        if gap > tolerance:
            return fail(
                f"with {backend}, the weights differ from cg.ddp_setup's run by up to {gap:.1e}: compare your setup() "
                "with section 2's plain PyTorch, line by line."
            )
        summaries.append(f"{backend} in {seconds:.0f} s (largest difference {gap:.1e})")
    return ok(
        f"{nproc} processes, ranks 0..{nproc - 1}, trained the same weights as cg.ddp_setup's run: "
        f"{'; '.join(summaries)}."
    )


def _run(path, nproc: int, backend: str, timeout: int):
    """(the weights file, seconds, the job's output) of ``path`` under torchrun, or a failed `CheckResult`."""
    out = path.with_name(f"{path.stem}_weights_{backend}.pt")
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        result = launch_torchrun(path, nproc, "--backend", backend, "--out", str(out), timeout=timeout, echo=False)
    except subprocess.TimeoutExpired:
        return fail(
            f"the job did not finish in {timeout} s: does every process reach the same "
            "collectives (a barrier or all_reduce on one rank only waits forever)?"
        )
    except RuntimeError as err:
        # The first exception a process printed ("NameError: ...", or "[rank0]: NameError: ..." from newer torchrun).
        found = re.search(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_.]*(?:Error|Exception): .*)$", str(err), re.M)
        return fail(f"the job failed with {backend}: {found.group(1) if found else str(err).splitlines()[0]}")
    if not out.is_file():
        return fail(f"the job ran but wrote no {out.name}: keep train(info, args) as it is.")
    return out, time.perf_counter() - start, result.stdout
