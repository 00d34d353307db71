"""Checks of speed exercises, the learner's code measured on this runtime: timing (lesson 02), batching predictions
(lesson 04), feeding the GPU (lesson 05)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..data.loaders import suggest_num_workers
from ..experiments.feeding import measure_loader
from ..hardware.device import checked_device, synchronize
from ..measure.timing import least_disturbed
from .core import CheckResult, fail, forwards_of, ok, that
from .meta_run import BATCHES_LEFT, batches_left_on_the_host
from .timed import best_of, busy_note


def timing(seconds: object, reference: object, name: str = "your time", factor: float = 3.0) -> CheckResult:
    """Check a learner's own timing of some work against ``reference`` (a ``BenchResult`` or seconds).

    The same work on the same device takes the same time, give or take noise: within ``factor`` passes. Far
    below is the classic GPU timing bug (the clock read before the GPU finished); far above, a timed warm-up.

    Taught in lesson 02.
    """
    expected = getattr(reference, "median", reference)
    if seconds is None:
        return fail(f"{name} is not set yet: complete the exercise cell and run it.")
    if isinstance(seconds, (torch.Tensor, bool)) or not isinstance(seconds, (int, float)) or not seconds > 0:
        return fail(f"{name} should be a positive number of seconds, got {seconds!r}.")
    if not math.isfinite(seconds):
        return fail(f"{name} is {seconds!r}, not a time: the clock readings went wrong; print them.")
    ratio = seconds / expected
    if ratio < 1 / factor:
        return fail(
            f"{name} = {seconds * 1e3:.3f} ms is {1 / ratio:.0f}x less than the work takes "
            f"({expected * 1e3:.3f} ms): synchronize before reading the clock each time."
        )
    if ratio > factor:
        return fail(
            f"{name} = {seconds * 1e3:.3f} ms is {ratio:.0f}x more than the work takes "
            f"({expected * 1e3:.3f} ms): leave the first (warm-up) call out, report the median."
        )
    return ok(f"{name} = {seconds * 1e3:.3f} ms, the helper says {expected * 1e3:.3f} ms.")


def loader_speed(
    loader: object,
    baseline: object,
    device: str | torch.device,
    *,
    samples: int,
    at_least: float = 3.0,
    repeat: int = 3,
    labels: torch.Tensor | None = None,
    batch_size: int | None = None,
) -> CheckResult:
    """Measure ``loader`` against ``baseline`` on this runtime: both must deliver every one of ``samples`` samples
    per epoch, epoch after epoch (with ``labels``, the data set's labels: each sample once; with ``batch_size``, in
    batches of that size, the last one excepted), and ``loader`` at least ``at_least`` times as many samples per
    second (best of ``repeat`` each). Taught in lesson 05."""
    device = checked_device(device, "cg.checks.loader_speed")
    if loader is None:
        return fail("the loader is not set yet: complete the exercise cell and run it.")
    if not hasattr(loader, "__iter__"):
        return fail(f"expected something to iterate over in batches, got {type(loader).__name__}.")
    if iter(loader) is loader:  # a generator or an iterator: its second epoch is empty
        return fail(
            "a generator runs once, and a loader is iterated once per epoch: make something that starts over at "
            "every `for`, such as a class whose __iter__ returns a new generator each time."
        )
    delivered = [batch_labels.cpu() for _, batch_labels in loader]
    count = sum(len(batch_labels) for batch_labels in delivered)
    sizes = sorted({len(batch_labels) for batch_labels in delivered[:-1]})
    if batch_size is not None and sizes and sizes != [batch_size]:
        return fail(f"your batches hold {', '.join(map(str, sizes))} samples; the exercise asks for {batch_size}.")
    if count != samples:
        return fail(f"one epoch delivered {count:,} samples instead of all {samples:,}.")
    if labels is not None and not torch.equal(torch.cat(delivered).sort().values, labels.cpu().sort().values):
        return fail("one epoch delivered samples that are not the data set's, each once (a batch repeated?).")
    rates: dict[str, list[float]] = {"yours": [], "default": []}
    for _ in range(repeat):  # interleaved: a neighbour slows both alike; the best of each
        rates["yours"].append(measure_loader(loader, device))
        rates["default"].append(measure_loader(baseline, device))
    seconds = {name: [1 / rate for rate in values] for name, values in rates.items()}  # per sample
    yours, reference = (1 / least_disturbed(seconds[name]) for name in ("yours", "default"))
    busy = busy_note(seconds)
    gain = yours / reference
    return that(
        gain >= at_least,
        f"{yours:,.0f} samples/s, {gain:.1f}x the default DataLoader's {reference:,.0f} on this runtime.",
        f"{yours:,.0f} samples/s is {gain:.1f}x the default DataLoader's {reference:,.0f}; aim for "
        f"{at_least:g}x: where does each batch's time go?" + busy,
    )


def loader_settings(
    loader: object,
    device: str | torch.device,
    *,
    dataset: object = None,
    batch_size: int | None = None,
    measured: dict[int, float] | None = None,
) -> CheckResult:
    """Check a DataLoader for this runtime: the data set and batch size asked for (when given), the workers to use,
    persistent workers, pinned memory on GPUs.

    The workers to use are the measured advice when ``measured`` (section 2's sweep, samples/s per worker count) is
    given, as lesson 05 teaches (`suggest_num_workers(measured=...)`), else the rule's. Taught in lesson 05.
    """
    device = checked_device(device, "cg.checks.loader_settings")
    if not isinstance(loader, DataLoader):
        return fail(f"expected a torch.utils.data.DataLoader, got {type(loader).__name__}.")
    if dataset is not None and loader.dataset is not dataset:
        return fail(
            f"the loader reads a {type(loader.dataset).__name__} of {len(loader.dataset):,} samples, not the data set "
            f"the exercise names ({type(dataset).__name__}, {len(dataset):,} samples): pass that one as the first "
            "argument of DataLoader."
        )
    if batch_size is not None and loader.batch_size != batch_size:
        return fail(f"the loader's batch size is {loader.batch_size}; the exercise asks for batch_size={batch_size}.")
    problem = _worker_problem(loader.num_workers, measured)
    if problem:
        return fail(problem)
    on_gpu = torch.device(device).type == "cuda"
    if loader.num_workers > 0 and not loader.persistent_workers:
        return fail("set persistent_workers=True so workers are not re-created every epoch.")
    if loader.pin_memory != on_gpu:
        hint = (
            "set pin_memory=True: pinned pages make .to(device, non_blocking=True) asynchronous."
            if on_gpu
            else "pin_memory only helps when copying to a GPU; leave it off on the CPU."
        )
        return fail(hint)
    source = "as your sweep measured" if measured else "as the rule suggests"
    workers = f"{loader.num_workers} worker{'s' if loader.num_workers != 1 else ''} ({source})"
    kept = ", persistent" if loader.num_workers else ""
    return ok(f"{workers}{kept}, pin_memory={loader.pin_memory}.")


def _worker_problem(num_workers: int, measured: dict[int, float] | None) -> str | None:
    """The hint when ``num_workers`` is not the advice (the measured one, given a sweep), else None."""
    advice = suggest_num_workers(measured=measured)
    if num_workers == advice.num_workers:
        return None
    if measured and num_workers == suggest_num_workers().num_workers:
        return (
            f"num_workers={num_workers} is the rule's guess, made before measuring; your sweep (section 2) "
            f"measured this runtime: {advice}. Use suggest_num_workers(measured=samples_per_s).num_workers."
        )
    return f"num_workers is {num_workers}; this runtime suggests {advice}"


def prediction_speed(
    fast: object,
    slow: object,
    model: nn.Module,
    images: torch.Tensor,
    device: str | torch.device,
    *,
    at_least: float = 1.5,
    repeat: int = 3,
) -> CheckResult:
    """Check a learner's ``fast(model, images) -> predicted classes`` (lesson 04) against ``slow`` on this runtime:
    the same predictions (99% of them: a GPU may pick other convolution algorithms for another batch size) and
    at least ``at_least`` times faster, the best of ``repeat`` interleaved runs each."""
    device = checked_device(device, "cg.checks.prediction_speed")
    if not callable(fast):
        return fail("define fast_predict(model, images) and rerun.")
    if batches_left_on_the_host(fast, model, images):
        return fail(BATCHES_LEFT)
    was_training = model.training
    try:
        model.train()  # as after training: predicting is the function's job to set up
        with forwards_of(model) as forwards:
            mine = fast(model, images)
    finally:
        model.train(was_training)
    if any(training for training, _ in forwards):
        return fail("the model predicted in training mode: call model.eval() first (dropout, batch norm).")
    if any(grad for _, grad in forwards):
        return fail("autograd recorded every prediction: predict under torch.inference_mode(), as slow_predict does.")
    reference = slow(model, images)
    if not isinstance(mine, torch.Tensor) or mine.shape != reference.shape:
        shape = tuple(mine.shape) if isinstance(mine, torch.Tensor) else type(mine).__name__
        return fail(f"return one predicted class per image: shape {tuple(reference.shape)}, got {shape}.")
    agree = (mine.cpu() == reference.cpu()).float().mean().item()
    if agree < 0.99:
        return fail(
            f"only {agree:.0%} of your predictions match: same model, eval mode, argmax over the classes (dim=1)."
        )

    def timed(fn: object) -> object:
        return lambda: (fn(model, images), synchronize(device))

    best, busy = best_of({"fast": timed(fast), "slow": timed(slow)}, repeat)
    gain = best["slow"] / best["fast"]
    summary = (
        f"{len(images)} images in {best['fast'] * 1e3:.1f} ms instead of {best['slow'] * 1e3:.1f} ms: "
        f"{gain:.1f}x faster on {torch.device(device)}"
    )
    return that(
        gain >= at_least,
        summary + ".",
        f"{summary}; aim for {at_least:g}x: one forward pass per batch of images, not per image." + busy,
    )
