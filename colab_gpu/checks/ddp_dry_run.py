"""A dry run of a learner's DDP script (lesson 08): the script runs as ``__main__`` in this process, with stand-ins
for the process group, the GPU and section 2's ``train``, once as if torchrun had started it with gloo and once with
nccl. A CPU runtime cannot start nccl, so a mistake on the GPU path (no ``set_device``, NCCL's setting missing or
too late, the wrong GPU) would pass a launch there: the dry run sees it on any runtime, in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import types
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist

NCCL_FIX = "NCCL_CUMEM_HOST_ENABLE"
# The environment torchrun gives the process: distinct numbers, so that a rank read from the wrong variable shows.
ENVIRONMENT = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}


class _Job:
    """What the script did with the stand-ins: the group it joined, the GPU it chose, what it handed to train()."""

    def __init__(self, backend: str) -> None:
        self.backend, self.joined, self.left, self.info = backend, None, 0, None
        self.gpu = self.gpu_at_join = self.fix_set = None

    def init_process_group(self, backend=None, *args, **kwargs) -> None:
        self.joined = {"backend": backend, **kwargs}
        self.fix_set, self.gpu_at_join = NCCL_FIX in os.environ, self.gpu

    def destroy_process_group(self, *args, **kwargs) -> None:
        self.left += 1

    def set_device(self, device) -> None:
        self.gpu = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)

    def train(self, info, args) -> None:
        self.info = info

    def parse_args(self):
        return types.SimpleNamespace(backend=self.backend, out="weights.pt", epochs=1, global_batch=64)


@contextlib.contextmanager
def _importable(name: str, module: types.ModuleType):
    """``module`` imported as ``name`` meanwhile, and what was there before afterwards. Nothing else in sys.modules
    is put back: patch.dict would drop what the script imported (torch._dynamo), and importing that again registers
    its operators twice ("Only a single TORCH_LIBRARY can be used ...")."""
    before = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = before


def _run(path: Path, backend: str) -> _Job:
    job = _Job(backend)
    section_2 = types.ModuleType("ddp_train")
    section_2.train, section_2.parse_args = job.train, job.parse_args
    with contextlib.ExitStack() as stand_ins:
        stand_ins.enter_context(_importable("ddp_train", section_2))
        stand_ins.enter_context(mock.patch.dict(os.environ, ENVIRONMENT))  # restored on exit, NCCL's setting too
        stand_ins.enter_context(mock.patch.object(dist, "init_process_group", job.init_process_group))
        stand_ins.enter_context(mock.patch.object(dist, "destroy_process_group", job.destroy_process_group))
        stand_ins.enter_context(mock.patch.object(torch.cuda, "set_device", job.set_device))
        stand_ins.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: backend == "nccl"))
        os.environ.pop(NCCL_FIX, None)  # the script must set it itself
        runpy.run_path(str(path), run_name="__main__")
    return job


def dry_run_problem(path: Path) -> str | None:
    """The hint for the first mistake a dry run of the script at ``path`` shows, or None."""
    for backend in ("gloo", "nccl"):
        try:
            job = _run(path, backend)
        except SystemExit as err:
            return f"run as torchrun runs it (backend {backend}), {path.name} exited ({err}): keep its __main__ block."
        except Exception as err:  # noqa: BLE001 (the learner's script: any error is a hint)
            first_line = (str(err).splitlines() or [""])[0]
            return f"run as torchrun runs it (backend {backend}), setup() raised {type(err).__name__}: {first_line}"
        problem = _job_problem(job, backend)
        if problem:
            return f"with {backend}: {problem}"
    return None


def _job_problem(job: _Job, backend: str) -> str | None:
    rank, local_rank, world_size = (int(ENVIRONMENT[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    gpu = torch.device("cuda", local_rank)
    if job.joined is None and job.info is None and not job.left:
        return (
            'run as a script, it did nothing: its `if __name__ == "__main__":` block calls setup(), train() and '
            "teardown(); keep it as given."
        )
    if job.joined is None:
        return "setup() never joins the group: call dist.init_process_group(backend)."
    if job.joined["backend"] != backend:
        return f"setup() joined with {job.joined['backend']!r}: join with the backend it is given ({backend!r})."
    if job.info is None:
        return "train(info, args) was never called: keep the script's __main__ block as given."
    info = job.info
    found = (getattr(info, "rank", None), getattr(info, "local_rank", None), getattr(info, "world_size", None))
    if found != (rank, local_rank, world_size):
        return (
            f"torchrun set RANK={rank}, LOCAL_RANK={local_rank}, WORLD_SIZE={world_size}, and setup() returned "
            f"rank={found[0]}, local_rank={found[1]}, world_size={found[2]}: read each from its variable, as int."
        )
    if getattr(info, "backend", None) != backend:
        return f"setup() returned backend={getattr(info, 'backend', None)!r}: return the one it joined with."
    expected = gpu if backend == "nccl" else torch.device("cpu")
    if getattr(info, "device", None) != expected:
        return f"setup() returned device={getattr(info, 'device', None)}; this process's device is {expected}."
    if backend == "nccl":
        if job.gpu_at_join != gpu:
            claimed = "never claims its GPU" if job.gpu is None else f"claims {job.gpu} only after joining"
            return (
                f"the process {claimed}: torch.cuda.set_device({gpu}) before init_process_group, or every "
                "process allocates on GPU 0 (cuda without an index)."
            )
        given = job.joined.get("device_id")
        if given is not None and torch.device(given) != gpu:
            return f"init_process_group got device_id={given}; this process's GPU is {gpu}."
        if not job.fix_set:
            return f'os.environ.setdefault("{NCCL_FIX}", "0") must come before init_process_group("nccl").'
    if job.left != 1:
        return "leave the group once, at the end: teardown() calls dist.destroy_process_group()."
    return None
