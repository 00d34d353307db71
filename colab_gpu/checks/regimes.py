"""The check of lesson 10's closed-loop exercise: name a step's regime and a lever that pays, apply it, re-measure."""

from __future__ import annotations

import re

import torch

from ..hardware.device import checked_device
from ..measure.levers import LEVER_NAMES
from ..measure.profile_summary import ProfileSummary
from ..measure.profiling import profile_step
from ..measure.recorded import RecordedStep
from ..measure.regimes import rule_row
from ..measure.timing import compare_steps
from .core import CheckResult, fail, ok

REGIME_NAMES = ("input-bound", "launch-bound", "GPU-bound", "CPU-bound")


def regime(
    measured: object,
    my_regime: object,
    my_lever: object,
    my_step: object = None,
    device: str | torch.device = "cpu",
    *,
    at_least: float = 1.1,
) -> CheckResult:
    """Check a learner's reading of a step (lesson 10): the regime it is in and a lever that pays for it, and, given
    ``my_step``, that the lever moved the step on this runtime (a GPU's or a CPU's): the same floating-point work
    per sample (``FlopCounterMode``, two calls of each side), at least ``at_least`` times the samples per second,
    and less than 100 times (no lever does that: the work was skipped).

    Args:
        measured: the step to read: a function (profiled here, on ``device``, with ``cg.profile_step``), its
            `ProfileSummary`, or a step recorded on a GPU (``cg.recorded_steps()``).
        my_regime: "input-bound", "launch-bound", "GPU-bound" or "CPU-bound".
        my_lever: one of ``colab_gpu.measure.levers.LEVER_NAMES`` ("bigger batch", "fused optimizer", "fusion", ...).
        my_step: the step with that lever applied (for a function measured here); each call may return how many
            samples it trained on (a bigger batch), else it counts as many as ``measured`` (both or neither).
        device: the device the steps run on.
        at_least: how many times more samples per second ``my_step`` must train.

    Taught in lesson 10.
    """
    device = checked_device(device, "cg.checks.regime")
    if my_regime is None or my_lever is None:
        return fail("set my_regime and my_lever to your answers (strings) and run the cell again.")
    answered = {"my_regime": (my_regime, REGIME_NAMES), "my_lever": (my_lever, LEVER_NAMES)}
    for name, (answer, names) in answered.items():
        if _canonical(answer, names) is None:
            return fail(f"{name} is {answer!r}; answer one of {', '.join(map(repr, names))}.")
    my_regime, my_lever = _canonical(my_regime, REGIME_NAMES), _canonical(my_lever, LEVER_NAMES)
    summary = _summary_of(measured, device)
    if not isinstance(summary, ProfileSummary):
        return fail(summary)
    truth = summary.regime
    if my_regime != truth.name:
        return fail(f"not {my_regime}: {rule_row(summary)} Read the step's numbers against lesson 10's table.")
    why_not = truth.why_useless(my_lever)
    if why_not is not None:
        return fail(f"{truth.name} is right, but {my_lever!r} cannot help this step: {why_not}.")
    if my_lever not in truth.lever_names:
        return fail(
            f"{truth.name} is right, but {my_lever!r} is not among the levers for what this step waits on: "
            f"{truth.reason} Which lever of lesson 10's table answers that?"
        )
    first = "" if my_lever == truth.lever_names[0] else f" (the first one to try here: {truth.lever_names[0]!r})"
    named = f"{truth.name}, and {my_lever!r} pays for it{first}"
    if not callable(measured):
        return ok(f"{named}: {truth.reason}")
    if my_lever == "GPU runtime":  # the one lever a step on this runtime cannot apply
        counted = _samples_of(my_step) if callable(my_step) else None
        if isinstance(counted, str):
            return fail(counted)
        here = [name for name in truth.lever_names if name != my_lever]
        return ok(
            f"{named}. A GPU runtime cannot be measured from this one: rerun there, or apply a lever that pays here "
            f"({', '.join(map(repr, here))}) in my_step to measure it."
        )
    if my_step is None or not callable(my_step):
        return fail(f"{named}; now write my_step, the step with {my_lever!r} applied, and pass it.")
    return _lever_moved(measured, my_step, my_lever, device, at_least)


def _canonical(answer: object, names: tuple[str, ...]) -> str | None:
    """The name among ``names`` that ``answer`` spells, whatever its case, spaces, hyphens or underscores
    ("Launch bound" is "launch-bound"), or None."""
    if not isinstance(answer, str):
        return None

    def key(text: str) -> str:
        return re.sub(r"[\s_-]+", " ", text).strip().lower()

    return next((name for name in names if key(name) == key(answer)), None)


def _samples_of(my_step: object) -> int | str:
    """What one call of ``my_step`` says it trained on: a positive number of samples, or what is wrong (a CPU runtime
    cannot time a GPU lever, but the step still runs, and a bigger batch is measured by what it returns)."""
    try:
        samples = my_step()
    except Exception as err:  # the learner's step: a hint, not a crash
        return f"my_step() raised {type(err).__name__}: {err}"
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        return (
            f"my_step() returned {samples!r}: return how many samples it trained on, as small_step returns its "
            "batch (a GPU runtime divides by it to compare samples per second)."
        )
    return samples


def _summary_of(measured: object, device) -> ProfileSummary | str:
    """The summary to read, or what is wrong with ``measured``."""
    if isinstance(measured, RecordedStep):
        return measured.summary
    if isinstance(measured, ProfileSummary):
        return measured
    if callable(measured):
        try:
            return profile_step(measured, device)
        except Exception as err:  # the learner's step: a hint, not a crash
            return f"profiling the step raised {type(err).__name__}: {err}"
    return f"pass the step (a function), its summary or a recorded step, not a {type(measured).__name__}."


SAME_WORK = 0.05  # the two sides' floating-point work per sample may differ by this share (rounding of the counts)
WORK_CALLS = 2  # calls of each side counted: a step that trains on every other call does half the work per sample
MOST_GAIN = 100.0  # no lever of lesson 10 makes a step this many times faster: the work was skipped


def _lever_moved(step, my_step, lever: str, device, at_least: float) -> CheckResult:
    """Whether ``my_step`` does the same work per sample as ``step`` and trains at least ``at_least`` times (and less
    than `MOST_GAIN` times) more samples per second."""
    try:
        work = {"yours": _work_of(my_step), "before": _work_of(step)}
        timed = compare_steps({"before": step, "yours": my_step}, device=device)
    except Exception as err:  # the learner's step: a hint, not a crash
        return fail(f"my_step raised {type(err).__name__}: {err}")
    samples = {name: returned for name, (_, returned) in work.items()}
    count = {name: _count(values) for name, values in samples.items()}
    if (count["yours"] is None) != (count["before"] is None):  # samples per second of one side, calls of the other
        counted, other = ("my_step", "before") if count["yours"] else ("the step you improve", "yours")
        uncounted = "the step you improve" if count["yours"] else "my_step"
        return fail(
            f"{counted} returns how many samples it trained on, {uncounted} returns {samples[other][0]!r}: return "
            "the count from both (as small_step returns its batch), so that both are compared in samples per second."
        )
    per_sample = {name: flops / (count[name] or WORK_CALLS) for name, (flops, _) in work.items()}
    if per_sample["before"] and abs(per_sample["yours"] / per_sample["before"] - 1) > SAME_WORK:
        return fail(
            f"my_step does {per_sample['yours']:,.0f} floating-point operations per sample, the step you improve "
            f"{per_sample['before']:,.0f} (FlopCounterMode, {WORK_CALLS} calls of each): a lever changes how fast "
            "the same work runs, not the work. Does my_step train on every call, on as many samples as it returns?"
        )
    before, yours = (count["before"] or WORK_CALLS) / WORK_CALLS, (count["yours"] or WORK_CALLS) / WORK_CALLS
    gain = (yours / timed["yours"].median) / (before / timed["before"].median)
    rates = f"{gain:.2f}x the samples per second (K={timed['yours'].steps_per_sample} steps per sample)"
    if gain >= MOST_GAIN:
        return fail(
            f"my_step trains {rates}: no lever of lesson 10 makes this step {MOST_GAIN:.0f} times faster. Does it "
            "skip the work (a result kept from an earlier call, a return before the step)?"
        )
    if gain >= at_least:
        return ok(f"{lever!r} applied: {rates}, the same work per sample, measured on {device}.")
    after = profile_step(my_step, device).regime
    return fail(f"with {lever!r} your step trains {rates}, under {at_least:g}x. Is the lever applied? Now: {after}")


def _work_of(step) -> tuple[float, list[object]]:
    """The floating-point operations of `WORK_CALLS` calls of ``step`` (``torch.utils.flop_counter``: matmuls,
    convolutions and attention, compiled or eager) and what each call returned."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        returned = [step() for _ in range(WORK_CALLS)]
    return counter.get_total_flops(), returned


def _count(returned: list[object]) -> int | None:
    """The samples the calls trained on, when every call returned a positive count, else None."""
    if all(isinstance(value, int) and not isinstance(value, bool) and value > 0 for value in returned):
        return sum(returned)
    return None
