"""Checks of training exercises: the precision rule (lesson 06). Lesson 03's first loop is checked in
``first_loop``, lesson 06's AMP step in ``amp``."""

from __future__ import annotations

from ..hardware.capability import GpuCapability
from ..hardware.gpus import COURSE_GPUS
from .core import CheckResult, fail, ok


def _precision_cases() -> dict[str, tuple[tuple[int, int], str]]:
    """Each course GPU's compute capability and the format the course's rule (capability.py) gives it."""
    return {name: (cc, GpuCapability(name, cc).precision()[0]) for name, cc in COURSE_GPUS.items()}


def precision_rule(rule: object) -> CheckResult:
    """Check a function ``rule(major, minor) -> "bf16" | "fp16" | "fp32"`` on the GPUs learners meet.

    Taught in lesson 06.
    """
    if not callable(rule):
        return fail("define a function precision_for(major, minor) that returns 'bf16', 'fp16' or 'fp32'.")
    cases = _precision_cases()
    for gpu, ((major, minor), expected) in cases.items():
        try:
            answer = rule(major, minor)
        except Exception as err:  # a learner's bug: show it as a hint, do not crash the notebook
            return fail(f"precision_for({major}, {minor}) raised {type(err).__name__}: {err}")
        if answer != expected:
            return fail(f"precision_for({major}, {minor}) (a {gpu}) returned {answer!r}; expected {expected!r}.")
    return ok(f"right for all {len(cases)} GPUs ({', '.join(cases)}).")
