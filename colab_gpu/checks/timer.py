"""Check a learner's own GPU timer (lesson 02), on a simulated GPU first, so that a CPU runtime sees the GPU bugs.

On a CPU every call is synchronous: a timer that never synchronizes, or stops its clock before the GPU finished,
reads the right time there. So the check first runs the learner's ``my_timer(fn, device, repeat)`` on a stand-in
GPU: ``fn`` queues 5 ms of work and returns at once (as a CUDA kernel launch does), ``torch.cuda.synchronize`` waits
for the queue, and ``time.perf_counter`` reads the stand-in's clock. Its first call queues a one-off 50 ms (what a
warm-up absorbs: CUDA context, cuBLAS handles), and one timed call is slowed by a hiccup (what a median ignores).
Only then does it time real work on this runtime against the course's ``cg.benchmark``.
"""

from __future__ import annotations

import math
import statistics
import time
from unittest import mock

import torch

from ..hardware.device import checked_device
from .core import CheckResult, fail
from .speed import timing

WORK, ONE_OFF, HICCUP, LAUNCH = 5e-3, 50e-3, 40e-3, 1e-5  # seconds, on the stand-in GPU


class _StandInGpu:
    """A clock, a queue of work, and the calls that use them."""

    def __init__(self, hiccup_at: int | None) -> None:
        self.now, self.queued, self.calls, self.hiccup_at = 1000.0, 0.0, 0, hiccup_at

    def work(self) -> None:
        """The learner's ``fn``: queue work, return after the launch."""
        self.queued += WORK + (ONE_OFF if self.calls == 0 else 0) + (HICCUP if self.calls == self.hiccup_at else 0)
        self.calls += 1
        self.now += LAUNCH

    def synchronize(self, *args: object, **kwargs: object) -> None:
        self.now, self.queued = self.now + self.queued, 0.0

    def clock(self) -> float:
        return self.now


def _on_stand_in(my_timer: object, repeat: int, hiccup_at: int | None) -> tuple[object, int]:
    """(what ``my_timer`` returned, the calls it made) on the stand-in GPU."""
    gpu = _StandInGpu(hiccup_at)
    with (
        mock.patch.object(torch.cuda, "synchronize", gpu.synchronize),
        mock.patch.object(torch.cuda, "is_available", lambda: True),
        mock.patch.object(time, "perf_counter", gpu.clock),
    ):
        seconds = my_timer(gpu.work, torch.device("cuda"), repeat=repeat)
    return seconds, gpu.calls


def _stand_in_problem(my_timer: object) -> str | None:
    """The hint for the first mistake the stand-in GPU shows, or None."""
    expected = WORK + LAUNCH
    for repeat, hiccup_at in ((1, None), (5, 2)):
        seconds, calls = _on_stand_in(my_timer, repeat, hiccup_at)
        shown = f"my_timer(fn, 'cuda', repeat={repeat}) on a simulated GPU (fn queues {WORK * 1e3:g} ms of work)"
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
            return f"{shown} returned {seconds!r}: return the median time in seconds, a number."
        times = "once" if calls == 1 else f"{calls} times"
        if calls == repeat:
            return f"{shown} called fn {times}: call it once more before timing (the warm-up), untimed."
        if calls != repeat + 1:
            return f"{shown} called fn {times}: once to warm up, then `repeat` ({repeat}) timed calls."
        if seconds <= 0:
            return (
                f"{shown} read {seconds * 1e3:.2f} ms, not a time: read the clock into `start` just before each "
                "timed fn(), and subtract it from the reading after."
            )
        if seconds < 0.5 * expected:
            return (
                f"{shown} read {seconds * 1e3:.2f} ms: the clock stopped before the GPU finished. Call "
                "torch.cuda.synchronize() after fn() and before reading the clock."
            )
        if seconds > expected + 0.5 * ONE_OFF:
            return (
                f"{shown} read {seconds * 1e3:.1f} ms: the warm-up's queued work landed in the first timed call. "
                "Synchronize before starting the clock too."
            )
        if math.isclose(seconds, statistics.mean([expected] * (repeat - 1) + [expected + HICCUP]), rel_tol=0.01):
            return f"{shown} read {seconds * 1e3:.1f} ms, the mean: one slow call moves a mean; return the median."
        if not math.isclose(seconds, expected, rel_tol=0.01):
            return (
                f"{shown} read {seconds * 1e3:.2f} ms where each call takes {expected * 1e3:.2f} ms: time fn() "
                "alone between two synchronizations, with time.perf_counter()."
            )
    return None


def timer(
    my_timer: object, work: object, reference: object, device: str | torch.device, name: str = "my_timer"
) -> CheckResult:
    """Check a learner's ``my_timer(fn, device, repeat=10) -> median seconds`` (lesson 02): on a simulated GPU (a
    warm-up call, a synchronization before and after each timed call, the median), then ``my_timer(work, device)``
    on this runtime against ``reference`` (a ``BenchResult`` or seconds) with `timing`.

    Taught in lesson 02.
    """
    device = checked_device(device, "cg.checks.timer")
    if not callable(my_timer):
        return fail(f"define {name}(fn, device, repeat=10), which returns the median time in seconds, and rerun.")
    problem = _stand_in_problem(my_timer)
    if problem:
        return fail(problem)
    return timing(my_timer(work, torch.device(device)), reference, name=name)
