"""Checks of tuning exercises, the learner's loop measured on this runtime: profiling it and fixing its bottleneck
(lesson 10), compiling it once (lesson 11). The capstone's fast loop (lesson 12) is checked in `.speedrun`."""

from __future__ import annotations

import contextlib
import io
import sys

import torch
from torch import nn

from ..hardware.device import checked_device, synchronize
from ..measure.profile_events import spans_of
from ..measure.profile_summary import label_coverage
from ..measure.profiling import summarize_profile
from ..train.compiling import GraphCounter
from .core import CheckResult, fail, that
from .first_loop import GRAPH_KEPT
from .labelled_loop import lines_changed, phase_without_its_work
from .same_training import watching
from .timed import best_of

PHASES = ("data", "forward", "backward", "step")


def profile_labels(prof: object, loop: object = None, given: object = None, *, at_least: float = 0.6) -> CheckResult:
    """Check a learner's profile of a training loop (lesson 10): finished, with scheduled steps, and each of the
    phases "data", "forward", "backward" and "step" labelled with ``record_function``, each label holding the work it
    names, together covering at least ``at_least`` of the step time (measured by `summarize_profile`). With ``loop``
    (the labelled function) and ``given`` (the loop it labels): the labels change none of its lines."""
    if prof is None or not hasattr(prof, "events"):
        return fail("set prof to the torch.profiler.profile object of your `with` block.")
    try:
        summary = summarize_profile(prof, PHASES)
    except (AssertionError, ValueError) as err:  # PyTorch asserts when no step was ever recorded
        if isinstance(err, ValueError):
            message = str(err).splitlines()[0]
        else:  # before PyTorch 2.10 the profiler's assert has no message
            message = f"PyTorch says: {err}." if str(err) else "The profiler recorded no step (a bare AssertionError)."
        return fail(
            f"{message} Call prof.step() once per training step, with more steps than "
            "the schedule's wait + warmup + active (and repeat=1)."
        )
    missing = [phase for phase in PHASES if phase not in summary.shares]
    if missing:
        return fail(
            f"no time under {', '.join(map(repr, missing))}: wrap that part of the step in `with record_function(...)`."
        )
    changed = lines_changed(loop, given) if loop is not None and given is not None else None
    mislabelled = changed or phase_without_its_work(prof)
    if mislabelled:
        return fail(mislabelled)
    covered = label_coverage(spans_of(prof), PHASES)  # of a typical step: one the host lost a while does not decide
    shares = ", ".join(f"{label} {share:.0%}" for label, share in summary.shares.items())
    return that(
        covered >= at_least,
        f"{summary.steps} steps of {summary.step_ms:.2f} ms: {shares}.",
        f"your labels cover {covered:.0%} of a step ({shares}); put the whole step, from "
        "fetching the batch to optimizer.step(), inside the four labels.",
    )


def _runs(fn, code, *args) -> tuple[object, bool]:
    """``fn(*args)``, and whether the function whose code is ``code`` ran inside it (a Python profile hook sees
    every Python call)."""
    seen = []

    def watch(frame, event, _arg):
        if event == "call" and frame.f_code is code:
            seen.append(True)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(previous)
    return result, bool(seen)


def bottleneck_fix(
    slow: object,
    fast: object,
    device: str | torch.device = "cpu",
    *,
    steps: int = 6,
    at_least: float = 2.0,
    repeat: int = 5,
) -> CheckResult:
    """Check lesson 10's fix of a loop: ``fast(steps)`` trains like ``slow(steps)`` (one finite, detached loss per
    step, the first close to theirs and falling; the same model, batch size and optimizer, a new batch and a step on
    this step's gradients each time: `same_training`), and takes at most 1 / ``at_least`` of its time on this
    runtime (medians of ``repeat`` interleaved runs). Taught in lesson 10."""
    device = checked_device(device, "cg.checks.bottleneck_fix")
    if not callable(fast):
        return fail(f"pass your function (my_steps, not my_steps(...)), got {type(fast).__name__}.")
    try:
        with watching() as yours:
            returned, ran_theirs = _runs(fast, getattr(slow, "__code__", None), steps)
    except Exception as err:  # the learner's code: any error is a hint, not a crash of the notebook
        return fail(f"my_steps({steps}) raised {type(err).__name__}: {err}")
    if fast is slow or ran_theirs:
        return fail(
            "my_steps still runs their loop: timing a loop against itself measures only the noise of this machine. "
            "Write the loop yourself, without the cost your profile shows."
        )
    if returned is None:
        return fail(f"my_steps({steps}) returned None: return the loss of every step, e.g. torch.stack(losses).")
    if isinstance(returned, torch.Tensor) and returned.requires_grad:
        return fail(GRAPH_KEPT)
    try:
        losses = torch.as_tensor(returned, dtype=torch.float32).detach().cpu().flatten()
        with watching() as theirs:
            reference = torch.as_tensor(slow(steps), dtype=torch.float32).detach().cpu().flatten()
    except Exception as err:
        return fail(f"my_steps({steps}) returned {type(returned).__name__}, not losses ({type(err).__name__}: {err}).")
    if losses.shape != (steps,) or not torch.isfinite(losses).all():
        return fail(f"return one finite loss per step ({steps} numbers), got {losses.tolist()[:8]}.")
    if abs(losses[0] - reference[0]) > 0.1 * abs(reference[0]):  # the same fresh model on batches of the same data
        return fail(
            f"your first loss is {losses[0]:.3f}, theirs {reference[0]:.3f}: train the same model on the same images "
            "(the same seed, model and learning rate), returning each step's real loss."
        )
    unlike = yours.unlike(theirs)  # the same model, batches, optimizer and order of calls as their loop
    if unlike:
        return fail(unlike)
    if losses[-2:].mean() >= losses[:2].mean():
        return fail(
            f"your loss does not fall ({losses[0]:.3f} -> {losses[-1]:.3f} in {steps} steps): keep their optimizer "
            "and learning rate, and the random flips."
        )

    def timed(loop: object) -> object:
        return lambda: (loop(steps), synchronize(device))

    best, busy = best_of({"slow": timed(slow), "fast": timed(fast)}, repeat)
    gain = best["slow"] / best["fast"]
    timing = f"{steps} steps in {best['fast'] * 1e3:.0f} ms instead of {best['slow'] * 1e3:.0f} ms"
    return that(
        gain >= at_least,
        f"{timing}: {gain:.1f}x faster on {torch.device(device)}.",
        f"{timing}: {gain:.1f}x, aim for {at_least:g}x. Fix the phase with the biggest share in your profile: the "
        "other suspects cost little next to it. (DataLoader workers help little on 2 vCPUs and start over at every "
        "iter(): decode once and keep the data on the device.)" + busy,
    )


def compiles_once(
    model: object, loader: object, device: str | torch.device = "cpu", *, dynamic: bool | None = None
) -> CheckResult:
    """Check that one epoch through ``torch.compile(model, dynamic=dynamic)`` captures exactly one graph (lesson 11):
    no graph break in ``model.forward`` and no recompilation for a batch of another size. Counted with
    `GraphCounter`, forward and backward, without Inductor: seconds on any runtime."""
    device = checked_device(device, "cg.checks.compiles_once")
    if not isinstance(model, nn.Module):
        return fail(f"pass your model (an nn.Module), got {type(model).__name__}.")
    torch._dynamo.reset()  # forget earlier compilations, and the batch sizes Dynamo already learned to be dynamic
    counter = GraphCounter()
    compiled = torch.compile(model, backend=counter, dynamic=dynamic)
    per_call, sizes = 0, []
    with contextlib.redirect_stdout(io.StringIO()):  # a debugging print in forward would print every batch
        for inputs, labels in loader:
            outputs = compiled(inputs.to(device))
            nn.functional.cross_entropy(outputs, labels.to(device)).backward()
            per_call = per_call or counter.compiles  # graphs captured by the first call: more than 1 is a break
            sizes.append(len(inputs))
    model.zero_grad(set_to_none=True)
    if not sizes:
        return fail("the loader gave no batch: is the data set empty?")
    if per_call > 1:
        return fail(
            f"forward breaks into {per_call} graphs: run torch._dynamo.explain(model)(inputs) "
            "to see where, and make that code branch-free or move it out of forward (a print, "
            ".item(), an if on a tensor's value)."
        )
    batch_sizes = sorted(set(sizes), reverse=True)
    return that(
        counter.compiles == 1,
        f"{len(sizes)} batches, one graph captured once: no break, no recompile.",
        f"{counter.compiles} compilations for batches of {batch_sizes} samples: the last batch is "
        "smaller; use drop_last=True in the DataLoader, or compile with dynamic=True.",
    )
