"""Checks of tuning exercises, the learner's loop measured on this runtime: profiling it and fixing its bottleneck
(lesson 10), compiling it once (lesson 11), the capstone's fast loop (lesson 12)."""

from __future__ import annotations

import contextlib
import io
import time

import torch
from torch import nn

from ..compiling import GraphCounter
from ..device import synchronize
from ..precision import restored_backend_settings
from ..profiling import summarize_profile
from ..speedrun_ladder import (
    RungResult,
    evaluation_loader,
    ladder,
    ladder_size,
    measured_rung0,
    remember_rung0,
    run_rung,
)
from ..train import evaluate
from .core import CheckResult, fail, that
from .timed import best_of, busy_note

PHASES = ("data", "forward", "backward", "step")


def profile_labels(prof: object, *, at_least: float = 0.6) -> CheckResult:
    """Check a learner's profile of a training loop (lesson 10): finished, with scheduled steps, and each of the
    phases "data", "forward", "backward" and "step" labelled with ``record_function`` so that together they
    cover at least ``at_least`` of the step time (measured by `summarize_profile`)."""
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
    covered = sum(summary.shares.values())
    shares = ", ".join(f"{label} {share:.0%}" for label, share in summary.shares.items())
    return that(
        covered >= at_least,
        f"{summary.steps} steps of {summary.step_ms:.2f} ms: {shares}.",
        f"your labels cover {covered:.0%} of the step ({shares}); put the whole step, from "
        "fetching the batch to optimizer.step(), inside the four labels.",
    )


def bottleneck_fix(
    slow: object,
    fast: object,
    device: str | torch.device = "cpu",
    *,
    steps: int = 6,
    at_least: float = 2.0,
    repeat: int = 5,
) -> CheckResult:
    """Check lesson 10's fix of a loop: ``fast(steps)`` trains like ``slow(steps)``, returning one finite loss per
    step, and takes at most 1 / ``at_least`` of its time on this runtime (medians of ``repeat`` interleaved runs).
    Taught in lesson 10."""
    if not callable(fast):
        return fail(f"pass your function (my_steps, not my_steps(...)), got {type(fast).__name__}.")
    try:
        returned = fast(steps)
    except Exception as err:  # the learner's code: any error is a hint, not a crash of the notebook
        return fail(f"my_steps({steps}) raised {type(err).__name__}: {err}")
    if returned is None:
        return fail(f"my_steps({steps}) returned None: return the loss of every step, e.g. torch.stack(losses).")
    try:
        losses = torch.as_tensor(returned, dtype=torch.float32).detach().cpu().flatten()
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


CPU_ROUNDS = 3  # on a CPU, rung 0 and the learner's loop time one epoch each, alternately, this many times
RUNG0_SHARE = 3  # rung 0 is timed on a third of the images: its images/s does not depend on how many (per-image work)


def fast_loop(
    train: object,
    data,
    device: str | torch.device = "cpu",
    *,
    baseline=None,
    min_speedup: float = 2.0,
    accuracy_margin: float = 0.10,
) -> CheckResult:
    """Check lesson 12's fast loop ``train(data, device, epochs)``, which trains a fresh model and returns it.

    A speedrun's clock: the whole call (moving the data, building the model, compiling if it compiles, every epoch)
    takes at most 1 / ``min_speedup`` of rung 0's time for the same epochs, and the model's test accuracy, on images
    normalized with ``data.normalization()``, is at most ``accuracy_margin`` below rung 0's (10 points: a few epochs
    of rung 0 land anywhere within about that, depending on the seed).

    Rung 0 is ``baseline`` (``results[0]`` from `run_ladder`, or ``results``), else the rung 0 this session's
    `run_ladder` trained on ``data``, else rung 0 trained here first (once: the check keeps it). On a CPU, whose
    cores another program may share, rung 0 and the loop are timed again one epoch each, alternately, ``CPU_ROUNDS``
    times (the best of each): a neighbour slows both alike (rung 0 on a part of the images, at its images/s). A loop
    that calls ``torch.compile`` compiles inside every timed call. Taught in lesson 12.
    """
    device = torch.device(device)
    if isinstance(train, nn.Module) or not callable(train):
        return fail(f"pass your function (train_fast, not train_fast(...)), got {type(train).__name__}.")
    if isinstance(baseline, (list, tuple)):  # the whole ladder, results: its rung 0
        baseline = next((r for r in baseline if isinstance(r, RungResult) and r.rung.number == 0), None)
        if baseline is None:
            return fail(
                "the results you passed have no rung 0: pass results from cg.run_ladder(data, device), or "
                "leave baseline out: the check then trains rung 0 itself."
            )
    if baseline is not None and not (isinstance(baseline, RungResult) and baseline.epoch_seconds):
        return fail(
            f"baseline= takes rung 0's result from your ladder (results[0] after results = cg.run_ladder(data, "
            f"device)), got {type(baseline).__name__}; or leave it out: the check then trains rung 0 itself."
        )
    if baseline is not None and baseline.rung.number != 0:
        return fail(
            f"baseline= is rung {baseline.rung.number} ({baseline.rung.name}); the check compares your loop with rung "
            "0: pass results[0] (or the whole results), or leave it out."
        )
    baseline = baseline or measured_rung0(data, device)
    if baseline is None:
        epochs = ladder_size(device).epochs
        print(
            f"Rung 0 has not run on this data in this session (section 2's cg.run_ladder): training it here first, "
            f"{epochs} epochs (minutes on a T4; once: the check keeps it).",
            flush=True,
        )
        baseline = run_rung(ladder(device)[0], data, device, epochs=epochs)
        remember_rung0(data, device, baseline)
    epochs = len(baseline.epoch_seconds)
    run = _time_call(train, data, device, epochs)
    if isinstance(run, CheckResult):
        return run
    model, seconds, compiled = run
    if not isinstance(model, nn.Module):
        return fail(f"return the trained model (an nn.Module), got {type(model).__name__}.")
    mean, std = data.normalization()
    test = evaluation_loader(data, device, mean, std)
    try:
        accuracy = evaluate(model, test, device).accuracy
    except Exception as err:  # a model left on another device, or one that expects other inputs
        return fail(f"evaluating the model you returned raised {type(err).__name__}: {err}")
    if device.type == "cpu":  # interleaved: another process sharing the cores slows rung 0 and the loop alike
        rung0_times, times = [], []
        images = len(data.train_images)
        part = data.limit(train=max(images // RUNG0_SHARE, 4 * ladder_size(device).batch_size), test=64)
        for _ in range(CPU_ROUNDS):
            sample = run_rung(ladder(device)[0], part, device, epochs=1)
            rung0_times.append(images / sample.images_per_s)  # one epoch of all the images, at its images/s
            one = _time_call(train, data, device, 1)
            if isinstance(one, CheckResult):
                return one
            times.append(one[1])
            compiled += one[2]
        rung0_s, seconds = min(rung0_times), min(times)  # a neighbour only ever slows an epoch down
        busy = busy_note({"rung 0": rung0_times, "yours": times})
        timing = f"one epoch in {seconds:.2f} s vs rung 0's {rung0_s:.2f} s (best of {CPU_ROUNDS}, alternating)"
    else:
        busy = ""
        rung0_s = sum(baseline.epoch_seconds)
        timing = f"{epochs} epochs in {seconds:.1f} s vs rung 0's {rung0_s:.1f} s"
    speedup = rung0_s / seconds
    if speedup < min_speedup:
        if compiled:
            return fail(
                f"{timing}: {speedup:.1f}x, aim for {min_speedup:g}x. Your clock includes compiling: torch.compile "
                f"compiled {compiled} graph(s) inside your call, and a speedrun's clock counts it. These few "
                "epochs do not pay it back here: leave rung 5 out, and take the other rungs." + busy
            )
        return fail(
            f"{timing}: {speedup:.1f}x, aim for {min_speedup:g}x. Which rung's change is missing? The data on the "
            "device and no .item() per step (rung 2), a large batch with its schedule (rung 4), the speed net "
            "(rung 6): section 5 shows each as a diff. On a CPU the speed net is the one that pays (section 3's "
            "table)." + busy
        )
    return that(
        accuracy >= baseline.test_acc - accuracy_margin,
        f"{timing}: {speedup:.1f}x faster; test accuracy {accuracy:.1%} vs rung 0's {baseline.test_acc:.1%} "
        f"after {epochs} epochs, on {device}.",
        f"{speedup:.1f}x faster, but {accuracy:.1%} test accuracy vs rung 0's {baseline.test_acc:.1%}: "
        f"train all {epochs} epochs on every image, normalize with data.normalization(), and keep the "
        "learning rate and schedule of the rung you copied (rung 6: 0.05, one-cycle per batch).",
    )


def _time_call(train, data, device: torch.device, epochs: int):
    """(what ``train(data, device, epochs)`` returned, its seconds, the graphs torch.compile compiled in it), or a
    failed `CheckResult` when it raised. Dynamo forgets earlier compilations first: a loop that compiles pays for it
    in every call, as it would in a fresh runtime."""
    torch._dynamo.reset()
    compiled_before = _compiled_graphs()
    with restored_backend_settings():  # the cudnn.benchmark a loop turns on stays in that loop
        synchronize(device)
        start = time.perf_counter()
        try:
            model = train(data, device, epochs)
        except Exception as err:  # the learner's code: any error is a hint, not a crash of the notebook
            return fail(f"train_fast(data, device, {epochs}) raised {type(err).__name__}: {err}")
        synchronize(device)
        seconds = time.perf_counter() - start
    compiled = _compiled_graphs() - compiled_before
    if not compiled and isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
        compiled = 1  # a PyTorch whose Dynamo counts elsewhere: the compiled model returned still tells
    return model, seconds, compiled


def _compiled_graphs() -> int:
    """How many graphs Dynamo has captured in this process (0 where its counters are not where they were)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(counters["stats"]["unique_graphs"])
