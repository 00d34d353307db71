"""The self-check contract and the checks of recall exercises (lessons 01-04, 09).

Each check prints one line and returns a ``CheckResult`` (true when passed), so an exercise left
undone does not crash the notebook; the learner reads the hint and tries again.
"""

from __future__ import annotations

import contextlib
import functools

import torch
from torch import nn

from ..hardware.device import DEVICE_MISTAKES, checked_device, same_device

PASS = "✅ Correct:"
HINT = "❌ Not yet:"


class CheckResult:
    """A check's verdict: true when it passed. A notebook shows nothing more for it (the check already printed
    its line), so a check cell does not end with a bare ``True``; ``assert cg.checks.<name>(...)`` still works.
    Taught in lesson 01."""

    def __init__(self, passed: bool, message: str) -> None:
        self.passed, self.message = bool(passed), message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"CheckResult(passed={self.passed}, message={self.message!r})"

    def _ipython_display_(self) -> None:
        """Displayed as the last value of a cell: nothing, the verdict is printed already."""


def that(passed: bool, success: str, hint: str) -> CheckResult:
    """The verdict every self-check ends with: print ``success`` (passed) or ``hint`` with its mark; return it.

    Both messages are needed, since either may be shown: a check that already knows the outcome says `ok` or `fail`.
    Taught in lesson 01.
    """
    if not success or not hint:
        raise ValueError(
            "colab_gpu.checks.core.that needs both messages, what passed and the hint: for one, use "
            "colab_gpu.checks.core.ok(...) or fail(...)"
        )
    return ok(success) if passed else fail(hint)


def ok(success: str) -> CheckResult:
    """A passed check's verdict: print ``success`` after the pass mark and return it."""
    return _verdict(True, f"{PASS} {success}")


def fail(hint: str) -> CheckResult:
    """A failed check's verdict: print ``hint`` (what is wrong and what to do) after the fail mark and return it."""
    return _verdict(False, f"{HINT} {hint}")


def guarded(check):
    """``check``, with any error raised while it runs (most often by the learner's code it calls: a function that
    raises, an answer of the wrong type) turned into a hint: a self-check never crashes the cell, so Colab's "Run
    all" reaches the end of the lesson. `colab_gpu.checks` wraps every check with it."""

    @functools.wraps(check)
    def run(*args, **kwargs) -> CheckResult:
        try:
            return check(*args, **kwargs)
        except DEVICE_MISTAKES as err:  # the device door's words say what was asked, what exists and the fix
            return fail(str(err))
        except Exception as err:  # noqa: BLE001 (a hint for any error: the learner reads it and tries again)
            first_line = (str(err).splitlines() or [""])[0]
            return fail(
                f"the check could not run your answer: {type(err).__name__}: {first_line}. Check what you passed "
                "(a function, not its result; the types the exercise asks for), fix it and rerun."
            )

    return run


@contextlib.contextmanager
def forwards_of(model: nn.Module):
    """Each forward pass of ``model`` while active, as (training mode, autograd on): how the learner's code ran it
    (eval mode, inference mode, one pass per batch), which its result alone does not say."""
    seen: list[tuple[bool, bool]] = []
    handle = model.register_forward_pre_hook(lambda module, _: seen.append((module.training, torch.is_grad_enabled())))
    try:
        yield seen
    finally:
        handle.remove()


def _verdict(passed: bool, message: str) -> CheckResult:
    print(message)
    return CheckResult(passed, message)


def _device_of(obj: torch.Tensor | nn.Module) -> torch.device | None:
    if isinstance(obj, torch.Tensor):
        return obj.device
    tensors = list(obj.parameters()) + list(obj.buffers())
    devices = {t.device for t in tensors}
    return devices.pop() if len(devices) == 1 else None


def on_device(obj: object, device: str | torch.device, name: str = "it") -> CheckResult:
    """Check that a tensor, or every parameter and buffer of a model, lives on ``device``.

    Example:
        >>> bool(on_device(torch.zeros(2), "cpu", name="x"))
        ✅ Correct: x is on cpu.
        True

    Taught in lesson 01.
    """
    device = checked_device(device, "cg.checks.on_device", also=("meta",))  # lesson 01 on a CPU
    if obj is None or obj is ...:
        return fail(f"{name} is not defined yet: complete the exercise cell and run it.")
    if not isinstance(obj, (torch.Tensor, nn.Module)):
        return fail(f"{name} should be a tensor or a model, got {type(obj).__name__}.")
    actual = _device_of(obj)
    if actual is None:
        return fail(f"{name} has parameters on several devices: call .to(device) on the whole model.")
    return that(
        same_device(actual, device),
        f"{name} is on {device}.",
        f"{name} is on {actual}, expected {device}: use .to(device) (it returns the moved tensor; "
        "for tensors assign the result).",
    )


def close(actual: object, expected: torch.Tensor, name: str = "the result", atol: float = 1e-4) -> CheckResult:
    """Check that a tensor has the expected shape and values (compared on the CPU). Taught in lesson 04."""
    problem = form_problem(actual, expected, name)
    if problem:
        return fail(problem)
    mine, right = actual.detach().cpu().float(), expected.detach().cpu().float()
    if torch.allclose(mine, right, atol=atol):
        return ok(f"{name} has the right values.")
    return fail(symptom(name, mine, right, atol))


def form_problem(actual: object, expected: torch.Tensor, name: str) -> str | None:
    """The hint when ``actual`` is not a tensor of ``expected``'s shape (a list of the right length is a complete
    answer in the wrong type), else None."""
    if isinstance(actual, (list, tuple)) and len(actual) == len(expected):
        return (
            f"{name} is a Python {type(actual).__name__} of {len(actual)} numbers: the right length, in the wrong "
            f"type. Make it a tensor: torch.tensor({name}) or torch.stack(...) of tensors."
        )
    if not isinstance(actual, torch.Tensor):
        return f"{name} should be a tensor, got {type(actual).__name__}: complete the exercise."
    if actual.shape != expected.shape:
        return f"{name} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}."
    return None


def symptom(name: str, mine: torch.Tensor, right: torch.Tensor, atol: float) -> str:
    """The hint for a tensor of the right shape and wrong values, by what its values look like."""
    if torch.allclose(mine, 100 * right, atol=100 * atol):
        return f"{name} is 100 times the right values: give fractions (0.85), not percent (85)."
    if bool((mine == mine.round()).all()) and mine.max() > 1 >= right.max():
        return f"{name} holds whole numbers up to {mine.max():.0f}: counts, it seems. Divide each by its total."
    return f"{name} has the right shape but wrong values: compare a few of them with what you expect by hand."


LABEL_CASES = (([0, 1, 9], 10, True), ([1, 2, 3, 10], 10, False), ([-1, 0], 10, False), ([4], 5, True))


def label_validator(validator: object) -> CheckResult:
    """Check a function ``validator(labels, num_classes) -> bool`` that catches out-of-range labels.

    Taught in lesson 09.
    """
    if not callable(validator):
        return fail("define valid_labels(labels, num_classes) returning True or False.")
    for labels, classes, expected in LABEL_CASES:
        try:
            answer = validator(torch.tensor(labels), classes)
        except Exception as err:  # a learner's bug: a hint, not a crash
            return fail(f"valid_labels(tensor({labels}), {classes}) raised {type(err).__name__}: {err}")
        if bool(answer) != expected:
            return fail(
                f"valid_labels(tensor({labels}), {classes}) returned {answer!r}; expected "
                f"{expected}: valid labels are 0 .. num_classes - 1."
            )
    return ok(f"right on all {len(LABEL_CASES)} cases, including labels that are too large or negative.")
