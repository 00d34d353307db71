"""What a training loop did, seen from outside: the model it ran, the batches it fed, the optimizer and its steps.

Lesson 10's loops build their own model and optimizer inside the function (`their_steps`, `my_steps`), so a check
cannot hand them objects to watch, as lesson 03's does (first_loop.py). PyTorch's global hooks see them anyway: every
module's forward (``torch.nn.modules.module.register_module_forward_hook``) and every optimizer's step
(``torch.optim.optimizer.register_optimizer_step_pre_hook``), whoever created them. ``watching()`` records a loop
under them; ``TrainingRecord.unlike(theirs)`` names the first way it does not train as ``theirs`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from .first_loop import ACCUMULATE, ORDER


@dataclass
class TrainingRecord:
    """What one run of a loop did: filled in by ``watching()``."""

    model: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # the outermost module's parameters
    devices: set[str] = field(default_factory=set)  # where the model's weights and its batches are
    batch_sizes: list[int] = field(default_factory=list)  # each forward's first dimension
    batch_sums: list[float] = field(default_factory=list)  # each batch's sum: equal sums, the same images
    optimizers: list[str] = field(default_factory=list)  # each step's optimizer, "Adam, lr=0.001"
    backwards: int = 0  # gradients that reached the model's first weight
    steps_without_gradients: int = 0
    steps_on_other_weights: int = 0
    accumulated: bool = False  # a backward added to the previous step's gradients

    def unlike(self, theirs: TrainingRecord) -> str | None:
        """The first way this run does not train as ``theirs`` did, as a hint; None when none is seen."""
        if not self.batch_sizes:
            return "my_steps ran no model: train the same model as their loop, one batch per step."
        if self.model != theirs.model:
            return (
                f"your model is not theirs: its weights have the shapes {_shapes(self.model)}, theirs "
                f"{_shapes(theirs.model)}. Build the same model (the same layers and sizes)."
            )
        if self.devices != theirs.devices:
            return (
                f"your model and batches are on {', '.join(sorted(self.devices))}, theirs on "
                f"{', '.join(sorted(theirs.devices))}: move the model and each batch to `device`."
            )
        if sorted(set(self.batch_sizes)) != sorted(set(theirs.batch_sizes)):
            return f"your batches hold {_sizes(self.batch_sizes)} samples, theirs {_sizes(theirs.batch_sizes)}."
        if len(self.batch_sums) > 1 and _all_close(self.batch_sums) and not _all_close(theirs.batch_sums):
            return "every step trains on the same images: take the next batch in each step."
        if not self.optimizers:
            return f"the weights never change: call optimizer.step() after loss.backward() ({ORDER})."
        if self.steps_on_other_weights:
            return (
                "optimizer.step() updates other weights than your model's (the notebook's optimizer?): create the "
                "optimizer in your loop, from this model's parameters."
            )
        if self.optimizers[0] != theirs.optimizers[0]:
            return f"your optimizer is {self.optimizers[0]}, theirs {theirs.optimizers[0]}: keep theirs."
        if not self.backwards:
            return f"no gradient was computed: call loss.backward() on each step's loss ({ORDER})."
        if self.steps_without_gradients:
            return (
                "optimizer.step() ran with no gradients (it comes before loss.backward(), or zero_grad() between "
                f"them): step applies the gradients backward computes ({ORDER})."
            )
        if self.accumulated and not theirs.accumulated:
            return ACCUMULATE
        return None


def _shapes(model: list[tuple[str, tuple[int, ...]]]) -> str:
    return ", ".join("x".join(map(str, shape)) for _, shape in model) or "none"


def _sizes(sizes: list[int]) -> str:
    return " or ".join(str(size) for size in sorted(set(sizes)))


def _all_close(sums: list[float]) -> bool:
    return all(abs(s - sums[0]) <= 1e-4 * max(1.0, abs(sums[0])) for s in sums)


@contextlib.contextmanager
def watching() -> Iterator[TrainingRecord]:
    """Record, while the block runs, the outermost module's forwards (its input batches), its first parameter's
    gradients (whether each backward added to a gradient left from the step before) and every optimizer step."""
    record, depth, watched, handles = TrainingRecord(), [0], [], []

    def before_forward(_module, _args):
        depth[0] += 1

    def after_forward(module, args, _output):
        depth[0] -= 1
        if depth[0] or not args or not isinstance(args[0], torch.Tensor):
            return  # an inner module, or a call without a batch
        if not any(p.requires_grad for p in module.parameters()):
            return  # a transform of the data (a v2.Compose is a module too), not the model
        if not watched:
            watched.append(module)
            record.model = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
            handles.extend(_watch_gradients(module, record))
        if module is watched[0]:
            batch = args[0]
            record.devices |= {batch.device.type, next(module.parameters()).device.type}
            record.batch_sizes.append(batch.shape[0] if batch.dim() else 1)
            if batch.is_floating_point() and batch.device.type != "meta":
                record.batch_sums.append(float(batch.detach().double().sum()))

    def before_step(optimizer, _args, _kwargs):
        group = optimizer.param_groups[0]
        record.optimizers.append(f"{type(optimizer).__name__}, lr={group.get('lr')}")
        if watched:
            weights = list(watched[0].parameters())
            stepped = {id(p) for g in optimizer.param_groups for p in g["params"]}
            record.steps_on_other_weights += not any(id(p) in stepped for p in weights)
            record.steps_without_gradients += all(p.grad is None or not p.grad.any() for p in weights)

    handles += [
        nn.modules.module.register_module_forward_pre_hook(before_forward),
        nn.modules.module.register_module_forward_hook(after_forward),
        register_optimizer_step_pre_hook(before_step),
    ]
    try:
        yield record
    finally:
        for handle in handles:
            handle.remove()


def _watch_gradients(module: nn.Module, record: TrainingRecord) -> list:
    """Hooks on the module's first trainable parameter: the gradient a backward brings, and ``.grad`` after it is
    added: when they differ, a gradient from an earlier step was still there (no zero_grad between)."""
    first = next((p for p in module.parameters() if p.requires_grad), None)
    if first is None:
        return []
    incoming = []

    def arriving(gradient):
        incoming[:] = [gradient.detach().clone()]

    def added(parameter):
        record.backwards += 1
        if incoming and parameter.grad is not None and not torch.equal(parameter.grad, incoming[0]):
            record.accumulated = True

    return [first.register_hook(arriving), first.register_post_accumulate_grad_hook(added)]
