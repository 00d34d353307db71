"""The check of lesson 15's exercise 2: FSDP2 applied by the learner (`fully_shard` per block, then the model, with a
mixed-precision policy), run in this process as a group of one (gloo), so that no torchrun is needed to check it."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..llm.llm_memory import ModelShape
from ..llm.tiny_lm import TinyDecoder
from .core import CheckResult, fail, ok

SHAPE = ModelShape("check", vocab=64, hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2, head_dim=8)
ROWS = (torch.arange(4)[:, None] * 7 + torch.arange(33)) % 64  # each token follows from the one before: learnable
STEPS = 6


@contextlib.contextmanager
def group_of_one():
    """A process group of this process alone (gloo, an in-memory store), left as it was found: FSDP2 needs a group
    even to shard over one process. An existing group (a script under torchrun) is used as it is."""
    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _model() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(SHAPE)


def _losses(model: nn.Module, scaled: bool) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # made after sharding: it holds the shards
    # fp16 compute: the loss scaled, as on a T4; from 2**10, not 2**16: a first step that overflows is skipped, and
    # six steps are too few to lose any
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, enabled=scaled)
    losses = []
    for _ in range(STEPS):
        logits, _ = model(ROWS[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), ROWS[:, 1:].flatten())
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def _structure_problem(model: nn.Module) -> str | None:
    from torch.distributed.fsdp import FSDPModule

    if not isinstance(model, nn.Module):
        return f"shard(model, half) should return the model it sharded; it returned a {type(model).__name__}."
    blocks = [i for i, block in enumerate(model.layers) if not isinstance(block, FSDPModule)]
    if blocks:
        return (
            f"block {blocks[0]} is not sharded on its own: fully_shard(block, mp_policy=...) for each block of "
            "model.layers, so that each is gathered just before it runs and freed after (one unit for the whole "
            "model would gather every weight at once)."
        )
    if not isinstance(model, FSDPModule):
        return (
            "the blocks are sharded but not the model: fully_shard(model, mp_policy=...) last, for the embeddings "
            "and the final norm (and to start the step's communication)."
        )
    return None


def _precision_problem(computed: torch.dtype, reduced: torch.dtype | None, half: torch.dtype) -> str | None:
    """What is wrong with the dtype the first block computed in and the one its gradients were reduced in."""
    if computed == torch.bfloat16 and half == torch.float16:
        return (
            "the weights are gathered in bf16, and a T4 has no bf16 (lesson 06): use the format you are given, "
            "MixedPrecisionPolicy(param_dtype=half), fp16 with a GradScaler there."
        )
    if computed != half:
        return (
            f"the blocks compute in {str(computed).replace('torch.', '')}, not in half "
            f"({str(half).replace('torch.', '')}): pass mp_policy=MixedPrecisionPolicy(param_dtype=half, "
            "reduce_dtype=torch.float32) to every fully_shard call."
        )
    if reduced not in (None, torch.float32):
        return (
            f"the gradients are averaged in {str(reduced).replace('torch.', '')}: reduce them in fp32 "
            "(reduce_dtype=torch.float32), as the fp32 shards the optimizer updates."
        )
    return None


def fsdp_shard(shard: Callable[[nn.Module, torch.dtype], nn.Module], half: torch.dtype = torch.float16) -> CheckResult:
    """Lesson 15's exercise 2: ``shard(model, half)`` applies FSDP2 to a small decoder (each block, then the model,
    computing in ``half``, fp32 shards and gradient reduction); checked on the CPU in a group of this process alone,
    where it must train as the unsharded model does (the same losses, to 16-bit rounding). Taught in lesson 15."""
    with group_of_one(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FSDP2's notes about views of the decoder's cache: not the learner's
        sharded = shard(_model(), half)
        problem = _structure_problem(sharded)
        if problem:
            return fail(problem)
        seen = []  # the dtype the first block's weights are gathered in: what its kernels compute in
        hook = sharded.layers[0].q.register_forward_pre_hook(lambda layer, _: seen.append(layer.weight.dtype))
        mine = _losses(sharded, scaled=half == torch.float16)
        hook.remove()
        state = getattr(sharded.layers[0], "_get_fsdp_state", lambda: None)()  # its policy, where readable
        reduced = getattr(getattr(state, "_mp_policy", None), "reduce_dtype", None)
    problem = _precision_problem(seen[0], reduced, half)
    if problem:
        return fail(problem)
    alone = _losses(_model(), scaled=False)  # fp32, one process: fp16 compute with fp32 shards trains the same
    gap = max(abs(a - b) for a, b in zip(mine, alone, strict=True))
    if not mine[-1] < mine[0] or gap > 0.05 * alone[0]:
        return fail(
            f"sharded, the model does not train as it does alone: loss {mine[0]:.3f} -> {mine[-1]:.3f}, alone "
            f"{alone[0]:.3f} -> {alone[-1]:.3f}. Shard the model you are given and return it; leave its weights as "
            "they are."
        )
    return ok(
        f"each block and the model are FSDP2 units, computing in {str(half).replace('torch.', '')} with fp32 "
        f"shards; {STEPS} steps give the losses of the unsharded model (largest gap {gap:.1e}: 16-bit rounding)."
    )
