"""Timing GPU code correctly: warm up, synchronize, repeat, report the median.

The course's timing methods, named here once (lessons, the experiments, the checks and the bench all call them):

| method | what it times | the figure |
|---|---|---|
| `benchmark` | a call, synchronized around each of ``repeat`` calls after warm-up | `typical` (median) |
| `compare_steps` | ways of running a short step: K steps queued per sample, the ways interleaved | `typical` |
| `interleaved_times`, `interleaved_medians` | host work, the callables alternating round by round | `typical` |
| `timed_call` | what runs once: a first call that compiles, an epoch, a learner's whole training | its one reading |
| `interleaved_best` | a learner's code against a reference, on a machine it may share (checks) | `least_disturbed` |

Two statistics reduce repeats, each for one purpose: `typical` (the median) is every figure the course prints,
records and predicts; `least_disturbed` (the fastest) is only what a self-check compares, never printed as a figure.
`speedup`, `format_seconds`, `matmul_tflops` and `copy_gbps` build on them. This module imports nothing of
colab_gpu but `device`: everything that times something builds on it, never the other way round.

CUDA calls return as soon as the work is *queued*. ``time.time()`` around them measures the
launch, not the computation. And the first calls pay one-off costs (CUDA context, cuDNN
autotuning, memory allocation), so they must not be counted either. `benchmark` does both.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..hardware.device import checked_device, synchronize


def typical(times: Sequence[float]) -> float:
    """The figure the course reports for repeated timings: their median. A slow outlier (a garbage collection, a
    neighbour) and a lucky fast run weigh nothing; lessons, the bench, the references and the predictions use it."""
    return statistics.median(times)


def least_disturbed(times: Sequence[float]) -> float:
    """What a self-check compares when it times a learner's code against a reference on a machine it may share: the
    fastest run, since another program only ever slows a run down. Never printed as the course's figure."""
    return min(times)


@dataclass(frozen=True)
class BenchResult:
    """Timings of one benchmarked function, in seconds. Taught in lesson 02."""

    times: tuple[float, ...]
    steps_per_sample: int = 1  # K: each time is the mean of K calls between two synchronizations (`compare_steps`)
    # Per sample, the host's time per call to queue its K calls: the clock read just before the final synchronize
    # (`compare_steps`). On a GPU that is the step's host part H while the launch queue does not fill.
    host_times: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        """The figure to report (`typical`)."""
        return typical(self.times)

    @property
    def best(self) -> float:
        """The fastest repeat (`least_disturbed`): for comparisons on a shared machine, not for reporting."""
        return least_disturbed(self.times)

    @property
    def host_median(self) -> float | None:
        """The median of `host_times` (seconds per call), or None where they were not measured."""
        return typical(self.host_times) if self.host_times else None

    @property
    def spread(self) -> float:
        """Interquartile range: how much the middle half of the repeats varied."""
        if len(self.times) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times, n=4, method="inclusive")
        return q3 - q1

    def __str__(self) -> str:
        k = self.steps_per_sample
        per = f", K={k} step{'s' if k > 1 else ''} per sample"
        return f"{format_seconds(self.median)} median (±{format_seconds(self.spread / 2)}, n={len(self.times)}{per})"


def format_seconds(seconds: float) -> str:
    """Format a duration with a unit a human reads at a glance (``'1.23 ms'``). Taught in lesson 02."""
    if isinstance(seconds, BenchResult):
        seconds = seconds.median
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"format_seconds takes a number of seconds (or a cg.benchmark result), got {seconds!r}.")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def benchmark(
    fn: Callable[[], object],
    *,
    device: str | torch.device,
    warmup: int = 3,
    repeat: int = 10,
) -> BenchResult:
    """Time ``fn()`` on ``device`` the right way.

    Args:
        fn: the work to time, called with no arguments.
        device: the device ``fn`` runs on; it is synchronized before and after each call.
        warmup: untimed calls first (CUDA context, cuDNN autotuning and allocator warm-up).
        repeat: timed calls; the median is robust to the odd slow one.

    Returns:
        A `BenchResult` with every timing, its median and spread.

    Example:
        >>> x = torch.randn(256, 256)
        >>> result = benchmark(lambda: x @ x, device="cpu", repeat=5)
        >>> result.median > 0
        True

    Taught in lesson 02.
    """
    if warmup < 0 or repeat < 1:
        raise ValueError(f"benchmark needs warmup >= 0 and repeat >= 1, got warmup={warmup}, repeat={repeat}.")
    _require_callable(fn, "benchmark", "cg.benchmark(lambda: x @ x, device=device)")
    device = checked_device(device, "cg.benchmark")
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        # Without this the clock stops when the kernels are queued, not when they finish.
        synchronize(device)
        times.append(time.perf_counter() - start)
    return BenchResult(tuple(times))


def interleaved_medians(runs: dict[str, Callable[[], None]], repeat: int) -> dict[str, float]:
    """Median seconds of each callable over ``repeat`` rounds, alternating them so drifts (clocks, heat, a busy
    neighbour) hit all alike. CPU work: callables that queue GPU work must synchronize themselves."""
    return {name: typical(values) for name, values in interleaved_times(runs, repeat).items()}


def interleaved_best(runs: dict[str, Callable[[], object]], repeat: int) -> tuple[dict[str, float], dict[str, list]]:
    """(the fastest of ``repeat`` interleaved runs of each callable, every run's seconds): how a self-check times a
    learner's code against a reference, so that a busy neighbour, which slows both alike, fails no right answer."""
    times = interleaved_times(runs, repeat)
    return {name: least_disturbed(values) for name, values in times.items()}, times


def interleaved_times(runs: dict[str, Callable[[], None]], repeat: int) -> dict[str, list[float]]:
    """Each callable's seconds over ``repeat`` rounds, the order reversed every other round (no side always first)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs.items())
    for round_ in range(repeat):
        for name, run in order if round_ % 2 == 0 else reversed(order):
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


MIN_SAMPLE_SECONDS = 0.02  # a sample shorter than this measures launch latency and clock jitter, not the step
MIN_SAMPLES = 7
# On a GPU, the fewest steps a sample queues between two synchronizations. With K steps per sample the CPU's first
# step is not hidden behind the GPU's work, so a loop that queues ahead reads (H + K G) / K per step where it costs
# max(H, G): at K = 1 the CPU and the GPU take turns by construction, and a host read (`.item()`) costs 1.00x
# whatever it really costs. At K = 8 the error is at most H / (8 G), a few percent for a GPU busy a few times longer
# than the host (host 4 ms and GPU 20 ms: a read that costs a true 1.20x reads 1.17x, where K = 1
# reads 1.00x; tests/test_regimes.py measures it on a simulated stream).
MIN_QUEUED_STEPS = 8
LONG_SAMPLE_SECONDS = 1.0  # the floor of K stops where K steps would take longer than this
PROBE_CALLS = 3  # K comes from the median of these single calls: one slow outlier (a 50 ms hiccup) cannot set it
LONG_WAIT_SECONDS = 10.0  # compare_steps says how long it will take when the timing itself takes longer than this


def steps_per_sample(one_step: float, min_sample: float = MIN_SAMPLE_SECONDS, most: int = 1000, least: int = 1) -> int:
    """K: how many calls of a step of ``one_step`` seconds make a sample last at least ``min_sample``, and at least
    ``least`` calls while they take under `LONG_SAMPLE_SECONDS` (a 2 s generation queued 8 at a time made each
    sample 16 s: a step that long runs ahead of nothing that matters)."""
    least = max(1, min(least, math.floor(LONG_SAMPLE_SECONDS / max(one_step, 1e-9))))
    return max(least, min(most, math.ceil(min_sample / max(one_step, 1e-9))))


def can_queue(device: str | torch.device) -> bool:
    """Whether the CPU can queue work ahead of ``device``: a GPU runs what the CPU queued while the CPU goes on; on a
    CPU runtime the one processor does both, in turn, so no comparison there can show run-ahead (lesson 10)."""
    return torch.device(device).type == "cuda"


def compare_steps(
    steps: dict[str, Callable[[], object]],
    *,
    device: str | torch.device,
    samples: int = MIN_SAMPLES,
    warmup: int = 3,
    min_sample: float = MIN_SAMPLE_SECONDS,
) -> dict[str, BenchResult]:
    """Time two (or more) ways of running a step against each other: the course's one method for steps of a few
    milliseconds, and for any step whose CPU work can run ahead of the GPU.

    Timing a sub-millisecond step one synchronized call at a time measures the launch latency and the clock's jitter,
    not the step: the same MLP step read different times from one notebook cell to the next. Here each sample times K
    calls between two synchronizations, so the CPU queues ahead of the GPU as a real training loop does. Each side's K
    makes its sample last ``min_sample`` (20 ms), from the median of 3 single calls, and on a GPU it is at least 8
    (`MIN_QUEUED_STEPS`: a 25 ms step is still queued 8 at a time). Each side has its own K: one K for all, set by the
    fastest, made a 1 ms step beside a no-op run 1000 times per sample (7 s). The sides are interleaved, in alternating
    order, so a drift (clocks, heat, a busy neighbour) hits all alike; and there are at least 7 samples, of which the
    median counts. On a CPU runtime there is no queue (`can_queue`): K only makes samples long enough to time. A timing
    expected to last more than `LONG_WAIT_SECONDS` says so first, with its estimate.

    Returns each side's `BenchResult`: seconds per call, one per sample, its K (print it beside the figure), and
    per sample the host's time per call to queue the K calls (``host_times``: the clock just before the final
    synchronize; on a GPU the step's host part, which the regime rule weighs against the kernels' time).

    Example:
        >>> x = torch.randn(64, 64)
        >>> timings = compare_steps({"matmul": lambda: x @ x, "add": lambda: x + x}, device="cpu")
        >>> timings["matmul"].steps_per_sample >= 1 and len(timings["add"].times) == 7
        True

    Taught in lesson 10.
    """
    if not isinstance(steps, dict):
        raise TypeError(
            f"compare_steps takes a dict of named steps, got {type(steps).__name__}: "
            'cg.compare_steps({"a": step_a, "b": step_b}, device=device).'
        )
    for name, step in steps.items():
        _require_callable(step, f"compare_steps' step {name!r}", f'{{"{name}": lambda: my_step()}}')
    device = checked_device(device, "cg.compare_steps")
    if len(steps) < 1 or samples < MIN_SAMPLES or warmup < 1:
        raise ValueError(
            f"compare_steps needs at least one step, samples >= {MIN_SAMPLES} and warmup >= 1; got {len(steps)} "
            f"step(s), samples={samples}, warmup={warmup}."
        )
    one = {}
    for name, step in steps.items():
        for _ in range(warmup):
            step()
        probes = []
        for _ in range(PROBE_CALLS):
            synchronize(device)
            start = time.perf_counter()
            step()
            synchronize(device)
            probes.append(time.perf_counter() - start)
        one[name] = typical(probes)
    least = MIN_QUEUED_STEPS if can_queue(device) else 1
    ks = {name: steps_per_sample(seconds, min_sample, least=least) for name, seconds in one.items()}
    _say_if_long(samples * sum(ks[name] * one[name] for name in steps), ks, samples)
    times: dict[str, list[float]] = {name: [] for name in steps}
    queued: dict[str, list[float]] = {name: [] for name in steps}
    order = list(steps)
    for sample in range(samples):
        for name in order if sample % 2 == 0 else reversed(order):
            synchronize(device)
            start = time.perf_counter()
            for _ in range(ks[name]):
                steps[name]()
            enqueued = time.perf_counter()  # the host's part: what it took to queue the K calls
            synchronize(device)  # once per sample: the K calls queue back to back
            times[name].append((time.perf_counter() - start) / ks[name])
            queued[name].append((enqueued - start) / ks[name])
    return {name: BenchResult(tuple(values), ks[name], tuple(queued[name])) for name, values in times.items()}


def _say_if_long(seconds: float, ks: dict[str, int], samples: int) -> None:
    """One line before a timing that will take a while, so that a silent cell is not mistaken for a hung one."""
    if seconds > LONG_WAIT_SECONDS:
        calls = ", ".join(f"{name} K={k}" for name, k in ks.items())
        print(f"compare_steps: timing {samples} samples of each step ({calls}), about {seconds:.0f} s ...", flush=True)


def timed_call(fn: Callable[[], object], device: str | torch.device) -> tuple[object, float]:
    """(what ``fn()`` returned, its seconds): one call between two synchronizations of ``device``, the clock started
    after the first (nothing queued before counts) and read after the second (the kernels finished, not queued)."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


def speedup(slow: BenchResult, fast: BenchResult) -> float:
    """How many times faster ``fast`` is than ``slow`` (ratio of medians). Taught in lesson 02."""
    for name, result in (("slow", slow), ("fast", fast)):
        if not isinstance(result, BenchResult):
            raise TypeError(
                f"speedup compares two timings from cg.benchmark; its {name} argument is {type(result).__name__} "
                f"{result!r}. For two plain times in seconds, divide them: slow_seconds / fast_seconds."
            )
    return slow.median / fast.median


def _require_callable(fn: object, what: str, example: str) -> None:
    """A clear error when a result was passed where the work to time is expected (``benchmark(x @ x)``)."""
    if not callable(fn):
        raise TypeError(
            f"{what} needs the work as a function to call, got a {type(fn).__name__}: passing `x @ x` runs it once, "
            f"before timing starts. Wrap it: {example}."
        )


def matmul_tflops(
    n: int, dtype: torch.dtype, device: torch.device, repeat: int = 10, *, warm_seconds: float = 0.0
) -> float:
    """Measured TFLOP/s of an n x n x n matrix product (2 n^3 floating-point operations). With ``warm_seconds``,
    after that long of back-to-back products first: the rate a long step meets, once the GPU's clock has settled
    under its power cap (a T4's 70 W: about 42 TFLOP/s of fp16 in short bursts, about 24 sustained, as reported
    from outside measurements: prediction: t4 fp16_matmul), not the burst a cold GPU gives for a moment."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    started = time.perf_counter()
    while time.perf_counter() - started < warm_seconds:
        for _ in range(8):  # queued in groups: the loop's clock costs nothing beside them
            a @ b
        synchronize(device)
    return 2 * n**3 / benchmark(lambda: a @ b, device=device, repeat=repeat).median / 1e12


def copy_gbps(device: str | torch.device, megabytes: int = 256, repeat: int = 10) -> float:
    """Measured GB/s of a copy of ``megabytes`` within ``device``'s memory, counting the bytes read and written: the
    bandwidth a memory-bound kernel (element-wise work, a decode step reading its weights and cache) can reach at
    most. What ``cg.profile_step`` compares such a step's bytes per second with (lesson 14). Taught in lesson 10."""
    device = checked_device(device, "cg.copy_gbps")
    source = torch.empty(megabytes * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    return 2 * source.nbytes / benchmark(lambda: target.copy_(source), device=device, repeat=repeat).median / 1e9
