"""The check of lesson 12's capstone, the learner's fast loop against rung 0 of the speedrun ladder: the whole call on
a speedrun's clock, then the test accuracy of the model it returns."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from unittest import mock

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from ..data.augment import evaluation_loader
from ..experiments.speedrun_ladder import RungResult, measured_rung0, remember_rung0, run_rung
from ..experiments.speedrun_rungs import ladder, ladder_size
from ..hardware.device import checked_device
from ..measure.timing import least_disturbed, timed_call
from ..train.precision import restored_backend_settings
from ..train.steps import evaluate
from .core import CheckResult, fail, that
from .timed import busy_note

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
    times (the best of each): a neighbour slows both alike (rung 0 on a part of the images, at its images/s). Those
    rounds come first there: a loop not yet fast enough gets its hint without training its epochs for the accuracy.
    A loop that calls ``torch.compile`` compiles inside every timed call. Taught in lesson 12.
    """
    device = checked_device(device, "cg.checks.fast_loop")
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
    if device.type == "cpu":  # timed first: a loop not yet fast enough gets its hint without training for accuracy
        timed = _cpu_rounds(train, data, device, min_speedup)
        if isinstance(timed, CheckResult):
            return timed
    run = _time_call(train, data, device, epochs)
    if isinstance(run, CheckResult):
        return run
    model, seconds, compiled, unstepped = run
    if unstepped:  # a schedule made and never stepped: the learning rate stays at its first value for the whole run
        return fail(
            f"your loop makes a learning-rate schedule ({unstepped}) but never steps it: call schedule.step() once "
            "after each optimizer step, as rung 6 does (one-cycle per batch)."
        )
    if not isinstance(model, nn.Module):
        return fail(f"return the trained model (an nn.Module), got {type(model).__name__}.")
    mean, std = data.normalization()
    test = evaluation_loader(data, device, mean, std)
    try:
        accuracy = evaluate(model, test, device).accuracy
    except Exception as err:  # a model left on another device, or one that expects other inputs
        return fail(f"evaluating the model you returned raised {type(err).__name__}: {err}")
    if device.type != "cpu":
        rung0_s = sum(baseline.epoch_seconds)
        timing = f"{epochs} epochs in {seconds:.1f} s vs rung 0's {rung0_s:.1f} s"
        timed = _speedup_or_hint(rung0_s / seconds, min_speedup, compiled, timing)
        if isinstance(timed, CheckResult):
            return timed
    speedup, timing = timed  # from the rounds on a CPU, from the full run elsewhere
    return that(
        accuracy >= baseline.test_acc - accuracy_margin,
        f"{timing}: {speedup:.1f}x faster; test accuracy {accuracy:.1%} vs rung 0's {baseline.test_acc:.1%} "
        f"after {epochs} epochs, on {device}.",
        f"{speedup:.1f}x faster, but {accuracy:.1%} test accuracy vs rung 0's {baseline.test_acc:.1%}: "
        f"train all {epochs} epochs on every image, normalize with data.normalization(), and keep the "
        "learning rate and schedule of the rung you copied (rung 6: 0.05, one-cycle per batch).",
    )


def _cpu_rounds(train, data, device: torch.device, min_speedup: float):
    """(the speed-up, how it was timed), or the failed `CheckResult` of a loop that raised, returned no model or is
    too slow. Rung 0 (on a part of the images, at its images/s) and the loop are timed one epoch each, alternately,
    `CPU_ROUNDS` times, the best of each: another process sharing the cores slows both alike."""
    rung0_times, times, compiled = [], [], 0
    images = len(data.train_images)
    part = data.limit(train=max(images // RUNG0_SHARE, 4 * ladder_size(device).batch_size), test=64)
    for _ in range(CPU_ROUNDS):
        sample = run_rung(ladder(device)[0], part, device, epochs=1)
        rung0_times.append(images / sample.images_per_s)  # one epoch of all the images, at its images/s
        one = _time_call(train, data, device, 1)
        if isinstance(one, CheckResult):
            return one
        if not isinstance(one[0], nn.Module):
            return fail(f"return the trained model (an nn.Module), got {type(one[0]).__name__}.")
        times.append(one[1])
        compiled += one[2]
    rung0_s, seconds = least_disturbed(rung0_times), least_disturbed(times)
    timing = f"one epoch in {seconds:.2f} s vs rung 0's {rung0_s:.2f} s (best of {CPU_ROUNDS}, alternating)"
    busy = busy_note({"rung 0": rung0_times, "yours": times})
    return _speedup_or_hint(rung0_s / seconds, min_speedup, compiled, timing, busy)


def _speedup_or_hint(speedup: float, min_speedup: float, compiled: int, timing: str, busy: str = ""):
    """(``speedup``, ``timing``), or under ``min_speedup`` the hint: the compiling paid inside the clock, else the
    rungs the loop lacks."""
    if speedup >= min_speedup:
        return speedup, timing
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


@contextmanager
def _schedule_steps():
    """Counts ``step()`` per learning-rate schedule made inside the block ({schedule: calls}); a schedule's own
    first step, which its constructor makes, counts 1."""
    calls: Counter = Counter()
    original = LRScheduler.step

    def counted(self, *args, **kwargs):
        calls[self] += 1
        return original(self, *args, **kwargs)

    with mock.patch.object(LRScheduler, "step", counted):
        yield calls


def _time_call(train, data, device: torch.device, epochs: int):
    """(what ``train(data, device, epochs)`` returned, its seconds, the graphs torch.compile compiled in it, the name
    of a learning-rate schedule it made and never stepped, else ""), or a failed `CheckResult` when it raised.
    Dynamo forgets earlier compilations first: a loop that compiles pays for it in every call, as it would in a
    fresh runtime."""
    torch._dynamo.reset()
    compiled_before = _compiled_graphs()
    with restored_backend_settings(), _schedule_steps() as steps:  # cudnn.benchmark set by a loop stays in it
        try:
            model, seconds = timed_call(lambda: train(data, device, epochs), device)
        except Exception as err:  # the learner's code: any error is a hint, not a crash of the notebook
            return fail(f"train_fast(data, device, {epochs}) raised {type(err).__name__}: {err}")
    compiled = _compiled_graphs() - compiled_before
    if not compiled and isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
        compiled = 1  # a PyTorch whose Dynamo counts elsewhere: the compiled model returned still tells
    unstepped = next((type(schedule).__name__ for schedule, calls in steps.items() if calls <= 1), "")
    return model, seconds, compiled, unstepped


def _compiled_graphs() -> int:
    """How many graphs Dynamo has captured in this process (0 where its counters are not where they were)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(counters["stats"]["unique_graphs"])
