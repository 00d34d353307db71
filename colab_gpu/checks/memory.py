"""Checks of memory exercises: freed, fitted, nothing kept for backward (lessons 07, 09)."""

from __future__ import annotations

import copy
import gc
import sys
import types

import torch
from torch import nn

from ..measure.memory import PeakMemory, measure_peak
from ..train.activations import ActivationMemory, measure_activations
from .core import CheckResult, fail, forwards_of, ok, that
from .meta_run import BATCHES_LEFT, batches_left_on_the_host


def released(probe: object, name: str = "the tensor") -> CheckResult:
    """Check, through a ``weakref.ref`` to it, that an object was really freed; if not, say what still holds it.
    Taught in lesson 07."""
    if not callable(probe):
        return fail("pass a weakref.ref(...) to the object you want freed.")
    gc.collect()
    if probe() is None:
        return ok(f"{name} was freed: nothing refers to it any more.")
    holders = _holders(probe())  # (kind, words) pairs
    kinds = {kind for kind, _ in holders} or {"other"}
    held_by = ", ".join(words for _, words in holders) or "something outside the notebook"
    return fail(
        f"{name} is still alive, held by {held_by}. "
        + " ".join(how for kind, how in _HOW_TO_DROP.items() if kind in kinds)
    )


_HISTORY = ("history", "IPython's output history (Out and _: a cell ended with it)")
_HOW_TO_DROP = {
    "name": "`del` the name.",
    "container": "Remove it from the container (`.clear()`, `del d[key]`), or `del` the container.",
    "history": "Clear IPython's output history and last traceback: cg.clear_notebook_references().",
    "other": "`del` whatever else refers to it.",
}


def _holders(obj: object) -> list[tuple[str, str]]:
    """What refers to ``obj``, as (kind, words) pairs, the kinds those of `_HOW_TO_DROP`: a name of the notebook, a
    container (and the name that holds it), IPython's output history, the last error's traceback."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - IPython ships with every notebook kernel
        shell = None
    names = shell.user_ns if shell is not None else vars(sys.modules["__main__"])
    here = sys._getframe()
    found = []
    for holder in gc.get_referrers(obj):
        if holder is names:
            found += [("name", f"the name {n!r}") for n, v in names.items() if v is obj and not n.startswith("_")]
            if any(v is obj for n, v in names.items() if n[:1] == "_"):
                found.append(_HISTORY)
        elif isinstance(holder, types.FrameType):
            if holder is not here and holder.f_back is not here:
                found.append(("history", "the last error's traceback (a frame that still holds it)"))
        elif isinstance(holder, (dict, list, tuple, set)):
            if (
                holder is names.get("Out")
                or (isinstance(holder, dict) and "_oh" in holder)
                or _ipython_attributes(holder)
            ):
                found.append(_HISTORY)
            else:
                owner = next((n for n, v in names.items() if v is holder and not n.startswith("_")), None)
                found.append(
                    ("container", f"the {type(holder).__name__} {owner!r}" if owner else f"a {type(holder).__name__}")
                )
    return list(dict.fromkeys(found))


def _ipython_attributes(holder: object) -> bool:
    """Whether ``holder`` is the attribute dict of one of IPython's own objects (the last cell's result)."""
    return isinstance(holder, dict) and any(
        getattr(owner, "__dict__", None) is holder and type(owner).__module__.startswith("IPython")
        for owner in gc.get_referrers(holder)
    )


def _run_measured(fn, model: nn.Module, *args, exclude=()) -> tuple[object, ActivationMemory, PeakMemory]:
    """``fn(model, *args)`` with what autograd keeps for backward and, on a GPU, the allocator's peak measured."""
    device = next(model.parameters()).device  # inputs may wait on the CPU; the memory is the model's device's
    with measure_peak(device) as peak, measure_activations(model, exclude=exclude) as saved:
        result = fn(model, *args)
    return result, saved, peak


def _compare(
    what: str,
    saved: ActivationMemory,
    baseline: ActivationMemory,
    peak: PeakMemory,
    baseline_peak: PeakMemory,
    digits: int,
) -> tuple[float, str]:
    """The activation ratio and one sentence with both measurements (and both allocator peaks on a GPU)."""
    ratio = saved.peak_bytes / baseline.peak_bytes
    summary = f"{what}: {saved.peak_mib:.{digits}f} MiB instead of {baseline.peak_mib:.{digits}f} MiB ({ratio:.2f}x)"
    if peak.peak_mib is not None:
        summary += f"; allocator peak on {peak.device}: {peak.peak_mib:.1f} MiB instead of {baseline_peak.peak_mib:.1f}"
    return ratio, summary


def memory_saving(
    step: object,
    reference: object,
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    at_most: float = 0.5,
) -> CheckResult:
    """Check a learner's ``step(model, inputs, labels)`` (lesson 07): it must leave the same gradients in ``.grad``
    as ``reference`` while autograd keeps at most ``at_most`` of its activation memory (``measure_activations``,
    measured on this runtime, the batch itself left out). On a GPU the allocator's peak must fall too: gradient
    accumulation keeps the gradients between pieces, so it saves memory only where the activations outweigh them
    (the exercise's model is sized so). Activation checkpointing recomputes under its own saved-tensor hooks, which
    this count cannot see: the exercise asks for gradient accumulation."""
    if not callable(step):
        return fail("define my_step(model, inputs, labels) and rerun.")
    results, forwards = {}, {"before backward": 0, "during backward": 0}
    for name, fn in (("reference", reference), ("yours", step)):
        clone = copy.deepcopy(model)
        clone.zero_grad(set_to_none=True)
        if name == "yours":
            _count_forwards(clone, forwards)
        try:
            _, saved, peak = _run_measured(fn, clone, inputs, labels, exclude=(inputs, labels))
        except (RuntimeError, ValueError) as err:
            if name == "yours" and "batch" in str(err).lower():
                return fail(
                    "your pieces of inputs and labels do not match: split the labels as you split the inputs "
                    f"(inputs.chunk(k) beside labels.chunk(k)). PyTorch said: {str(err).splitlines()[0]}"
                )
            raise
        if name == "yours" and forwards["during backward"]:
            return fail(
                "your step runs the forward pass again during backward: activation checkpointing, whose "
                "recomputation this count cannot see. The exercise asks for gradient accumulation: process the "
                "batch in pieces, a backward on each."
            )
        if any(p.grad is None for p in clone.parameters()):
            return fail("after your step some parameters have no gradient: call backward().")
        grads = torch.cat([p.grad.flatten() for p in clone.parameters()])
        results[name] = (grads, saved, peak)
    (expected, full, full_peak), (grads, saved, peak) = results["reference"], results["yours"]
    difference = ((grads - expected).norm() / expected.norm()).item()
    if difference > 1e-3:
        return fail(
            f"your gradients differ from the full batch's by {difference:.0%}: each of k "
            "pieces' losses must be divided by k (and zero_grad only once, before)."
        )
    ratio, summary = _compare("activations kept for backward", saved, full, peak, full_peak, digits=1)
    summary += ", same gradients"
    if ratio <= at_most and peak.peak_mib is not None and peak.peak_mib >= full_peak.peak_mib:
        gradient_mib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        return fail(
            f"{summary}. Autograd keeps less, but the allocator's peak did not fall: the gradients "
            f"({gradient_mib:.1f} MiB), kept from piece to piece, outweigh the activations your pieces saved. "
            "Accumulation saves memory where activations dominate: a larger batch, or a narrower model."
        )
    split = forwards["before backward"] > 1  # the batch went through the model in pieces
    advice = (
        "backward on each piece's loss (divided by k) before the next piece's forward: summed first, every piece's "
        "activations are kept until the one backward"
        if split
        else "process the batch in smaller pieces"
    )
    return that(
        ratio <= at_most + 0.005,  # as printed: two pieces keep half, give or take a few bytes of the batch's split
        summary + ".",
        f"{summary}; aim for at most {at_most:g}x: {advice}.",
    )


def _count_forwards(model: nn.Module, counts: dict[str, int]) -> None:
    """Count the forward passes of each of ``model``'s layers, before and during backward (a recomputation:
    activation checkpointing, of any layer). Where PyTorch cannot say whether backward is running, everything counts
    as before."""
    task_id = getattr(torch._C, "_current_graph_task_id", lambda: -1)

    def hook(module, args, output) -> None:
        counts["during backward" if task_id() != -1 else "before backward"] += 1

    for layer in [m for m in model.modules() if not list(m.children())] or [model]:
        layer.register_forward_hook(hook)


def evaluation_memory(
    predict_fn: object, leaky_fn: object, model: nn.Module, images: torch.Tensor, *, at_most: float = 0.25
) -> CheckResult:
    """Check a learner's ``predict_fn(model, images) -> outputs`` (lesson 09): the same outputs as ``leaky_fn``, with
    at most ``at_most`` of the activation memory autograd keeps for it (``measure_activations``, on any device;
    on a GPU the allocator's peak is printed too). An evaluation that keeps every batch's graph grows with the
    data set until a GPU runs out of memory."""
    if not callable(predict_fn):
        return fail("define predict_all(model, images) and rerun.")
    if batches_left_on_the_host(predict_fn, model, images):
        return fail(BATCHES_LEFT)
    measured, forwards = {}, {}
    for name, fn in (("leaky", leaky_fn), ("yours", predict_fn)):
        with forwards_of(model) as calls:
            outputs, saved, peak = _run_measured(fn, model, images)
        forwards[name] = len(calls)
        needs_grad = getattr(outputs, "requires_grad", False)
        outputs = outputs.detach() if isinstance(outputs, torch.Tensor) else outputs  # frees a graph kept by mistake
        measured[name] = (outputs, saved, peak, needs_grad)
    (expected, leaky, leaky_peak, _), (outputs, saved, peak, needs_grad) = measured["leaky"], measured["yours"]
    if not isinstance(outputs, torch.Tensor) or outputs.shape != expected.shape:
        return fail(f"return the outputs of every image as one tensor of shape {tuple(expected.shape)}.")
    if not torch.allclose(outputs.float(), expected.float(), rtol=1e-3, atol=1e-4):
        return fail("your outputs differ from the model's: same model, same images, in order.")
    if forwards["yours"] < forwards["leaky"]:
        return fail(
            f"your function ran the model {forwards['yours']} time(s) over the {len(images):,} images, the classmate's "
            f"{forwards['leaky']} (a batch at a time): keep the batches, or a large test set's activations fill the "
            "GPU at once, the out-of-memory you are fixing."
        )
    ratio, summary = _compare("autograd kept for backward", saved, leaky, peak, leaky_peak, digits=2)
    if needs_grad:
        return fail(f"{summary}, and your outputs still carry a graph: evaluate under torch.inference_mode().")
    return that(
        ratio <= at_most,
        summary + ".",
        f"{summary}; aim for at most {at_most:g}x: nothing in an evaluation needs a backward pass.",
    )
