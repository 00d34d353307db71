"""Self-checks for exercises: a clear pass, or a specific hint, never a bare assert.

Each check prints one line and returns a ``CheckResult`` (true when passed), so an exercise left
undone does not crash the notebook; the learner reads the hint and tries again.
"""

from __future__ import annotations

import copy
import re
import time

import torch
from torch import nn

from .capability import COURSE_GPUS, GpuCapability
from .device import same_device

PASS = "✅ Correct:"
HINT = "❌ Not yet:"


class CheckResult:
    """A check's verdict: true when it passed. A notebook shows nothing more for it (the check already printed
    its line), so a check cell does not end with a bare ``True``; ``assert cg.check_...(...)`` still works."""

    def __init__(self, passed: bool, message: str) -> None:
        self.passed, self.message = bool(passed), message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"CheckResult(passed={self.passed}, message={self.message!r})"

    def _ipython_display_(self) -> None:
        """Displayed as the last value of a cell: nothing, the verdict is printed already."""


def report(passed: bool, success: str, hint: str) -> CheckResult:
    """Print ``success`` or ``hint`` with a pass/fail mark; return the verdict."""
    message = f"{PASS} {success}" if passed else f"{HINT} {hint}"
    print(message)
    return CheckResult(passed, message)


def _device_of(obj: torch.Tensor | nn.Module) -> torch.device | None:
    if isinstance(obj, torch.Tensor):
        return obj.device
    tensors = list(obj.parameters()) + list(obj.buffers())
    devices = {t.device for t in tensors}
    return devices.pop() if len(devices) == 1 else None


def check_on_device(obj: object, device: str | torch.device, name: str = "it") -> CheckResult:
    """Check that a tensor, or every parameter and buffer of a model, lives on ``device``.

    Example:
        >>> bool(check_on_device(torch.zeros(2), "cpu", name="x"))
        ✅ Correct: x is on cpu.
        True
    """
    device = torch.device(device)
    if obj is None or obj is ...:
        return report(False, "", f"{name} is not defined yet: complete the exercise cell and run it.")
    if not isinstance(obj, (torch.Tensor, nn.Module)):
        return report(False, "", f"{name} should be a tensor or a model, got {type(obj).__name__}.")
    actual = _device_of(obj)
    if actual is None:
        return report(False, "", f"{name} has parameters on several devices: call .to(device) on the whole model.")
    return report(
        same_device(actual, device),
        f"{name} is on {device}.",
        f"{name} is on {actual}, expected {device}: use .to(device) (it returns the moved tensor; "
        "for tensors assign the result).",
    )


def check_close(actual: object, expected: torch.Tensor, name: str = "the result", atol: float = 1e-4) -> CheckResult:
    """Check that a tensor has the expected shape and values (compared on the CPU)."""
    if not isinstance(actual, torch.Tensor):
        return report(False, "", f"{name} should be a tensor, got {type(actual).__name__}: complete the exercise.")
    if actual.shape != expected.shape:
        return report(False, "", f"{name} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}.")
    passed = torch.allclose(actual.detach().cpu().float(), expected.detach().cpu().float(), atol=atol)
    return report(passed, f"{name} has the right values.", f"{name} has the right shape but wrong values.")


def check_accuracy(accuracy: object, at_least: float, name: str = "accuracy") -> CheckResult:
    """Check an accuracy given as a fraction in [0, 1] against a target, with a hint when it misses."""
    if accuracy is None:
        return report(False, "", f"{name} is not set yet: complete the exercise cell and run it.")
    if isinstance(accuracy, torch.Tensor):
        accuracy = accuracy.item()
    if not isinstance(accuracy, (int, float)):
        return report(False, "", f"{name} should be a number, got {type(accuracy).__name__}.")
    if not 0 <= accuracy <= 1:
        return report(False, "", f"{name} = {accuracy} is not a fraction between 0 and 1: did you give a percentage?")
    return report(
        accuracy >= at_least,
        f"{name} = {accuracy:.1%} (target {at_least:.0%}).",
        f"{name} = {accuracy:.1%} is below the target {at_least:.0%}: train longer or check the learning rate.",
    )


def check_timing(seconds: object, reference: object, name: str = "your time", factor: float = 3.0) -> CheckResult:
    """Check a learner's own timing of some work against ``reference`` (a ``BenchResult`` or seconds).

    The same work on the same device takes the same time, give or take noise: within ``factor`` passes. Far
    below is the classic GPU timing bug (the clock read before the GPU finished); far above, a timed warm-up.
    """
    expected = getattr(reference, "median", reference)
    if seconds is None:
        return report(False, "", f"{name} is not set yet: complete the exercise cell and run it.")
    if isinstance(seconds, torch.Tensor) or not isinstance(seconds, (int, float)) or seconds <= 0:
        return report(False, "", f"{name} should be a positive number of seconds, got {seconds!r}.")
    ratio = seconds / expected
    if ratio < 1 / factor:
        return report(False, "", f"{name} = {seconds * 1e3:.3f} ms is {1 / ratio:.0f}x less than the work takes "
                                 f"({expected * 1e3:.3f} ms): synchronize before reading the clock each time.")
    if ratio > factor:
        return report(False, "", f"{name} = {seconds * 1e3:.3f} ms is {ratio:.0f}x more than the work takes "
                                 f"({expected * 1e3:.3f} ms): leave the first (warm-up) call out, report the median.")
    return report(True, f"{name} = {seconds * 1e3:.3f} ms, the helper says {expected * 1e3:.3f} ms.", "")


def check_loader_speed(loader: object, baseline: object, device: str | torch.device, *, samples: int,
                       at_least: float = 3.0, repeat: int = 3) -> CheckResult:
    """Measure ``loader`` against ``baseline`` on this runtime: both must deliver every one of ``samples`` samples
    per epoch, and ``loader`` at least ``at_least`` times as many samples per second (best of ``repeat`` each)."""
    from .feeding import measure_loader

    if loader is None:
        return report(False, "", "the loader is not set yet: complete the exercise cell and run it.")
    try:
        delivered = sum(len(inputs) for inputs, _ in loader)
    except TypeError:
        return report(False, "", f"expected something to iterate over in batches, got {type(loader).__name__}.")
    if delivered != samples:
        return report(False, "", f"one epoch delivered {delivered:,} samples instead of all {samples:,}.")
    yours = max(measure_loader(loader, device) for _ in range(repeat))
    reference = max(measure_loader(baseline, device) for _ in range(repeat))
    gain = yours / reference
    return report(gain >= at_least,
                  f"{yours:,.0f} samples/s, {gain:.1f}x the default DataLoader's {reference:,.0f} on this runtime.",
                  f"{yours:,.0f} samples/s is {gain:.1f}x the default DataLoader's {reference:,.0f}; aim for "
                  f"{at_least:g}x: where does each batch's time go?")


def check_loader_settings(loader: object, device: str | torch.device) -> CheckResult:
    """Check a DataLoader for this runtime: suggested workers, persistent workers, pinned memory on GPUs."""
    from torch.utils.data import DataLoader

    from .feeding import suggest_num_workers

    if not isinstance(loader, DataLoader):
        return report(False, "", f"expected a torch.utils.data.DataLoader, got {type(loader).__name__}.")
    advice = suggest_num_workers()
    on_gpu = torch.device(device).type == "cuda"
    if loader.num_workers != advice.num_workers:
        return report(False, "", f"num_workers is {loader.num_workers}; this runtime suggests {advice}")
    if loader.num_workers > 0 and not loader.persistent_workers:
        return report(False, "", "set persistent_workers=True so workers are not re-created every epoch.")
    if loader.pin_memory != on_gpu:
        hint = ("set pin_memory=True: pinned pages make .to(device, non_blocking=True) asynchronous."
                if on_gpu else "pin_memory only helps when copying to a GPU; leave it off on the CPU.")
        return report(False, "", hint)
    return report(True, f"{loader.num_workers} workers, persistent, pin_memory={loader.pin_memory}.", "")


def _precision_cases() -> dict[str, tuple[tuple[int, int], str]]:
    """Each course GPU's compute capability and the format the course's rule (capability.py) gives it."""
    return {name: (cc, GpuCapability(name, cc).precision()[0]) for name, cc in COURSE_GPUS.items()}


def check_precision_rule(rule: object) -> CheckResult:
    """Check a function ``rule(major, minor) -> "bf16" | "fp16" | "fp32"`` on the GPUs learners meet."""
    if not callable(rule):
        return report(False, "", "define a function precision_for(major, minor) that returns 'bf16', 'fp16' or 'fp32'.")
    cases = _precision_cases()
    for gpu, ((major, minor), expected) in cases.items():
        try:
            answer = rule(major, minor)
        except Exception as err:  # a learner's bug: show it as a hint, do not crash the notebook
            return report(False, "", f"precision_for({major}, {minor}) raised {type(err).__name__}: {err}")
        if answer != expected:
            return report(False, "", f"precision_for({major}, {minor}) (a {gpu}) returned {answer!r}; expected "
                                     f"{expected!r}.")
    return report(True, f"right for all {len(cases)} GPUs ({', '.join(cases)}).", "")


def check_released(probe: object, name: str = "the tensor") -> CheckResult:
    """Check, through a ``weakref.ref`` to it, that an object was really freed."""
    if not callable(probe):
        return report(False, "", "pass a weakref.ref(...) to the object you want freed.")
    import gc

    gc.collect()
    return report(
        probe() is None,
        f"{name} was freed: nothing refers to it any more.",
        f"{name} is still alive: something still refers to it. `del` every name and container that holds it, "
        "and clear IPython's output history and last traceback (cg.clear_notebook_references()).",
    )


def check_shard(indices: object, *, dataset_size: int, world_size: int, rank: int) -> CheckResult:
    """Check the indices a rank gets from ``DistributedSampler(shuffle=False)``."""
    from torch.utils.data.distributed import DistributedSampler

    expected = list(DistributedSampler(range(dataset_size), num_replicas=world_size, rank=rank, shuffle=False))
    if indices is None:
        return report(False, "", "rank1_indices is not set yet: write the list of indices and rerun.")
    if not isinstance(indices, (list, tuple)) or not all(isinstance(i, int) for i in indices):
        return report(False, "", f"give a list of integers, got {indices!r}.")
    if len(indices) != len(expected):
        return report(False, "", f"each of the {world_size} ranks gets ceil({dataset_size}/{world_size}) = "
                                 f"{len(expected)} indices (the data is padded), you gave {len(indices)}.")
    return report(
        list(indices) == expected,
        f"rank {rank} of {world_size} gets {expected}.",
        f"rank {rank} takes every {world_size}th index starting at {rank}, after padding the data to "
        f"{len(expected) * world_size} samples with its first ones.",
    )


LABEL_CASES = (([0, 1, 9], 10, True), ([1, 2, 3, 10], 10, False), ([-1, 0], 10, False), ([4], 5, True))


def check_label_validator(validator: object) -> CheckResult:
    """Check a function ``validator(labels, num_classes) -> bool`` that catches out-of-range labels."""
    if not callable(validator):
        return report(False, "", "define valid_labels(labels, num_classes) returning True or False.")
    for labels, classes, expected in LABEL_CASES:
        try:
            answer = validator(torch.tensor(labels), classes)
        except Exception as err:  # a learner's bug: a hint, not a crash
            return report(False, "", f"valid_labels(tensor({labels}), {classes}) raised {type(err).__name__}: {err}")
        if bool(answer) != expected:
            return report(False, "", f"valid_labels(tensor({labels}), {classes}) returned {answer!r}; expected "
                                     f"{expected}: valid labels are 0 .. num_classes - 1.")
    return report(True, f"right on all {len(LABEL_CASES)} cases, including labels that are too large or negative.", "")


def _fresh_copy(model: nn.Module, device: str | torch.device) -> nn.Module:
    """A copy of ``model`` with newly initialized weights, on ``device`` (training starts from scratch)."""
    clone = copy.deepcopy(model)
    for module in clone.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    return clone.to(device)


META_HINTS = (
    (("not on the expected device", "same device"), "move each batch to `device` inside the loop: on a GPU "
                                                    "runtime the model's weights are there, the loader's batches "
                                                    "are not."),
    (("item() cannot be called", "Cannot copy out of meta", "no data"),
     "the loop reads a value every step (.item(), float(), .cpu() or print): each read makes the CPU wait for "
     "the GPU. Keep the losses as tensors (loss.detach()) and return torch.stack(losses)."),
)


def _meta_dry_run(train_epoch_fn: object, model: nn.Module, batches: list) -> str | None:
    """Run the learner's epoch on the ``meta`` device, where tensors have shapes but no data: mixing devices or
    reading a value fails there as it costs on a GPU. Return a hint, or None when the loop is clean."""
    meta = torch.device("meta")
    meta_model = _fresh_copy(model, "cpu").to(meta)
    optimizer = torch.optim.Adam(meta_model.parameters(), lr=1e-3)
    try:
        losses = train_epoch_fn(meta_model, batches, optimizer, meta)
    except (RuntimeError, NotImplementedError) as err:
        hint = next((h for keys, h in META_HINTS if any(k in str(err) for k in keys)), None)
        return hint or f"the loop raised {type(err).__name__}: {str(err).splitlines()[0]}"
    if not isinstance(losses, torch.Tensor) or losses.shape != (len(batches),):
        return (f"return the batch losses as one tensor with one loss per batch (torch.stack(losses)); for "
                f"{len(batches)} batches you returned {type(losses).__name__}"
                f"{'' if not isinstance(losses, torch.Tensor) else ' of shape ' + str(tuple(losses.shape))}.")
    return None


def _grads_accumulate(train_epoch_fn: object, model: nn.Module, batches: list, device: torch.device) -> bool:
    """With a learning rate of 0 the weights stay put, so after the epoch each gradient must be the last batch's
    alone (or cleared): a sum over the batches means ``zero_grad`` is missing."""
    model = _fresh_copy(model, device)
    train_epoch_fn(model, batches, torch.optim.SGD(model.parameters(), lr=0.0), device)
    left = [p.grad for p in model.parameters()]
    if all(g is None or not g.any() for g in left):
        return False
    model.zero_grad(set_to_none=True)
    inputs, labels = (t.to(device) for t in batches[-1])
    nn.functional.cross_entropy(model(inputs), labels).backward()
    return not all(g is not None and torch.allclose(g, p.grad, rtol=1e-3, atol=1e-6)
                   for g, p in zip(left, model.parameters(), strict=True))


def check_train_loop(train_epoch_fn: object, model: nn.Module, loader: object, device: str | torch.device, *,
                     factor: float = 3.0) -> CheckResult:
    """Check a learner's ``train_epoch_fn(model, loader, optimizer, device) -> losses`` (lesson 03).

    First on the ``meta`` device (shapes, no data): batches must be moved to ``device``, no value read per step, one
    loss per batch returned. Then on ``device`` with a learning rate of 0: ``zero_grad`` every step. Then one real
    epoch from fresh weights on this runtime: the loss must fall, in at most ``factor`` times ``train_epoch``'s time.
    """
    from .train import train_epoch

    if not callable(train_epoch_fn):
        return report(False, "", "define my_train_epoch(model, loader, optimizer, device) and rerun.")
    device = torch.device(device)
    batches = []
    for batch in loader:
        batches.append(batch)
        if len(batches) == 3:
            break
    hint = _meta_dry_run(train_epoch_fn, model, batches)
    if hint:
        return report(False, "", hint)
    if _grads_accumulate(train_epoch_fn, model, batches, device):
        return report(False, "", "the gradients add up over the steps: call optimizer.zero_grad() before "
                                 "loss.backward() in every step.")
    torch.manual_seed(0)
    yours = _fresh_copy(model, device)
    start = time.perf_counter()
    losses = train_epoch_fn(yours, loader, torch.optim.Adam(yours.parameters(), lr=1e-3), device).cpu()
    seconds = time.perf_counter() - start  # .cpu() above waited for the GPU
    torch.manual_seed(0)
    helper = _fresh_copy(model, device)
    expected = train_epoch(helper, loader, torch.optim.Adam(helper.parameters(), lr=1e-3), device, progress=False)
    first, last = losses[0].item(), losses[-5:].mean().item()
    summary = (f"loss {first:.3f} -> {last:.3f} in {len(losses)} steps, {seconds:.2f} s; cg.train_epoch: "
               f"{expected.seconds:.2f} s on {device}.")
    if not last < first:
        return report(False, "", f"the loss did not fall ({summary}) Is optimizer.step() called every step?")
    return report(seconds <= factor * expected.seconds, summary,
                  f"{summary} Yours is more than {factor:g}x slower: what in the loop waits?")


def check_prediction_speed(fast: object, slow: object, model: nn.Module, images: torch.Tensor,
                           device: str | torch.device, *, at_least: float = 1.5, repeat: int = 3) -> CheckResult:
    """Check a learner's ``fast(model, images) -> predicted classes`` (lesson 04) against ``slow`` on this runtime:
    the same predictions (99% of them: a GPU may pick other convolution algorithms for another batch size) and
    at least ``at_least`` times faster, on medians of ``repeat`` interleaved runs."""
    from .device import synchronize
    from .timing import interleaved_medians

    if not callable(fast):
        return report(False, "", "define fast_predict(model, images) and rerun.")
    mine, reference = fast(model, images), slow(model, images)
    if not isinstance(mine, torch.Tensor) or mine.shape != reference.shape:
        shape = tuple(mine.shape) if isinstance(mine, torch.Tensor) else type(mine).__name__
        return report(False, "", f"return one predicted class per image: shape {tuple(reference.shape)}, got {shape}.")
    agree = (mine.cpu() == reference.cpu()).float().mean().item()
    if agree < 0.99:
        return report(False, "", f"only {agree:.0%} of your predictions match: same model, eval mode, argmax "
                                 "over the classes (dim=1).")

    def timed(fn: object) -> object:
        return lambda: (fn(model, images), synchronize(device))

    medians = interleaved_medians({"fast": timed(fast), "slow": timed(slow)}, repeat)
    gain = medians["slow"] / medians["fast"]
    summary = (f"{len(images)} images in {medians['fast'] * 1e3:.1f} ms instead of {medians['slow'] * 1e3:.1f} ms: "
               f"{gain:.1f}x faster on {torch.device(device)}")
    return report(gain >= at_least, summary + ".",
                  f"{summary}; aim for {at_least:g}x: one forward pass per batch of images, not per image.")


def _amp_step_reference(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor,
                        optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, max_norm: float) -> None:
    with torch.autocast(inputs.device.type, dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(inputs), labels)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


AMP_HINTS = ((("already been called", "after step()"),
              "call scaler.update() at the end of every step: it resets the scaler for the next one (and adapts "
              "the scale)."),)


def check_amp_step(step: object, device: str | torch.device, *, steps: int = 3, max_norm: float = 0.1) -> CheckResult:
    """Check a learner's ``step(model, inputs, labels, optimizer, scaler, max_norm)`` (lesson 06): float16 autocast,
    GradScaler and gradient clipping, run for ``steps`` steps on this runtime beside the right step, from the same
    weights and batches. The weights must move alike (within 5% of the right step's change)."""
    if not callable(step):
        return report(False, "", "define amp_step(model, inputs, labels, optimizer, scaler, max_norm) and rerun.")
    device = torch.device(device)
    torch.manual_seed(0)
    start = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    batches = [(torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device)) for _ in range(steps)]
    moved = {}
    for name, fn in (("yours", step), ("right", _amp_step_reference)):
        model = copy.deepcopy(start)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10)
        try:
            for inputs, labels in batches:
                fn(model, inputs, labels, optimizer, scaler, max_norm)
        except RuntimeError as err:
            hint = next((h for keys, h in AMP_HINTS if any(k in str(err) for k in keys)), None)
            return report(False, "", hint or f"your step raised RuntimeError: {str(err).splitlines()[0]}")
        moved[name] = torch.cat([(p - q).flatten() for p, q in zip(model.parameters(), start.parameters(),
                                                                   strict=True)]).detach()
    change = moved["yours"].norm().item() / moved["right"].norm().item()
    difference = (moved["yours"] - moved["right"]).norm().item() / moved["right"].norm().item()
    summary = f"after {steps} steps your weights moved {change:.2f}x as far as the right step's on {device}"
    if change < 0.1:
        return report(False, "", f"{summary}: far less. Is clip_grad_norm_ comparing the *scaled* gradients with "
                                 "max_norm? Call scaler.unscale_(optimizer) before clipping.")
    if change > 1.5:
        return report(False, "", f"{summary}: more. Clip the gradients (after scaler.unscale_) so no step "
                                 "exceeds max_norm.")
    return report(difference < 0.05, f"{summary}, {difference:.1e} apart.",
                  f"{summary}, but {difference:.0%} apart: compare your step with section 4's, line by line.")


def check_memory_saving(step: object, reference: object, model: nn.Module, inputs: torch.Tensor,
                        labels: torch.Tensor, *, at_most: float = 0.5) -> CheckResult:
    """Check a learner's ``step(model, inputs, labels)`` (lesson 07): it must leave the same gradients in ``.grad``
    as ``reference`` while autograd keeps at most ``at_most`` of its activation memory (``measure_activations``,
    measured on this runtime; on a GPU the allocator's peak is printed too)."""
    from .memory import measure_activations, measure_peak

    if not callable(step):
        return report(False, "", "define my_step(model, inputs, labels) and rerun.")
    results = {}
    for name, fn in (("reference", reference), ("yours", step)):
        clone = copy.deepcopy(model)
        clone.zero_grad(set_to_none=True)
        with measure_peak(inputs.device) as peak, measure_activations(clone) as saved:
            fn(clone, inputs, labels)
        if any(p.grad is None for p in clone.parameters()):
            return report(False, "", "after your step some parameters have no gradient: call backward().")
        grads = torch.cat([p.grad.flatten() for p in clone.parameters()])
        results[name] = (grads, saved, peak)
    (expected, full, full_peak), (grads, saved, peak) = results["reference"], results["yours"]
    difference = ((grads - expected).norm() / expected.norm()).item()
    if difference > 1e-3:
        return report(False, "", f"your gradients differ from the full batch's by {difference:.0%}: each of k "
                                 "pieces' losses must be divided by k (and zero_grad only once, before).")
    ratio = saved.peak_bytes / full.peak_bytes
    summary = (f"activations kept for backward: {saved.peak_mib:.1f} MiB instead of {full.peak_mib:.1f} MiB "
               f"({ratio:.2f}x), same gradients")
    if peak.peak_mib is not None:
        summary += f"; allocator peak on {peak.device}: {peak.peak_mib:.1f} MiB instead of {full_peak.peak_mib:.1f}"
    return report(ratio <= at_most, summary + ".",
                  f"{summary}; aim for at most {at_most:g}x: smaller pieces, or recompute instead of store.")


def check_evaluation_memory(predict_fn: object, leaky_fn: object, model: nn.Module, images: torch.Tensor, *,
                            at_most: float = 0.25) -> CheckResult:
    """Check a learner's ``predict_fn(model, images) -> outputs`` (lesson 09): the same outputs as ``leaky_fn``, with
    at most ``at_most`` of the activation memory autograd keeps for it (``measure_activations``, on any device;
    on a GPU the allocator's peak is printed too). An evaluation that keeps every batch's graph grows with the
    data set until a GPU runs out of memory."""
    from .memory import measure_activations, measure_peak

    if not callable(predict_fn):
        return report(False, "", "define predict_all(model, images) and rerun.")
    measured = {}
    device = next(model.parameters()).device  # the images may wait on the CPU; the memory is the model's device's
    for name, fn in (("leaky", leaky_fn), ("yours", predict_fn)):
        with measure_peak(device) as peak, measure_activations(model) as saved:
            outputs = fn(model, images)
            needs_grad = getattr(outputs, "requires_grad", False)
            outputs = outputs.detach() if isinstance(outputs, torch.Tensor) else outputs  # frees the graph
        measured[name] = (outputs, saved, peak, needs_grad)
    (expected, leaky, leaky_peak, _), (outputs, saved, peak, needs_grad) = measured["leaky"], measured["yours"]
    if not isinstance(outputs, torch.Tensor) or outputs.shape != expected.shape:
        return report(False, "", f"return the outputs of every image as one tensor of shape {tuple(expected.shape)}.")
    if not torch.allclose(outputs.float(), expected.float(), rtol=1e-3, atol=1e-4):
        return report(False, "", "your outputs differ from the model's: same model, same images, in order.")
    ratio = saved.peak_bytes / leaky.peak_bytes
    summary = (f"autograd kept {saved.peak_mib:.2f} MiB for backward instead of {leaky.peak_mib:.2f} MiB "
               f"({ratio:.2f}x)")
    if peak.peak_mib is not None:
        summary += f"; allocator peak on {peak.device}: {peak.peak_mib:.1f} MiB instead of {leaky_peak.peak_mib:.1f}"
    if needs_grad:
        return report(False, "", f"{summary}, and your outputs still carry a graph: evaluate under "
                                 "torch.inference_mode().")
    return report(ratio <= at_most, summary + ".",
                  f"{summary}; aim for at most {at_most:g}x: nothing in an evaluation needs a backward pass.")


def check_ddp_script(script: str, reference_weights: str, *, nproc: int = 2, timeout: int = 300) -> CheckResult:
    """Check a learner's DDP training script (lesson 08): launched by torchrun with ``nproc`` gloo processes (on
    every runtime), it must train to the same weights as the helper's run saved in ``reference_weights``."""
    from pathlib import Path

    from .parallel import launch_torchrun

    path = Path(script)
    if not path.is_file():
        return report(False, "", f"no script at {path}: run the %%writefile cell first.")
    text = path.read_text()
    for call in ("init_process_group(", "destroy_process_group("):
        if call not in text:
            return report(False, "", f"{path.name} never calls dist.{call}...): every process joins the group "
                                     "after torchrun starts it, and leaves it before it exits.")
    out = path.with_name(f"{path.stem}_weights.pt")
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        launch_torchrun(path, nproc, "--backend", "gloo", "--out", str(out), timeout=timeout, echo=False)
    except RuntimeError as err:
        # The first exception a process printed ("NameError: ...", or "[rank0]: NameError: ..." from newer torchrun).
        found = re.search(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_.]*(?:Error|Exception): .*)$", str(err), re.M)
        return report(False, "", f"the job failed: {found.group(1) if found else str(err).splitlines()[0]}")
    seconds = time.perf_counter() - start
    if not out.is_file():
        return report(False, "", f"the job ran but wrote no {out.name}: keep train(info, args) as it is.")
    mine, expected = torch.load(out, weights_only=True), torch.load(reference_weights, weights_only=True)
    gap = max((mine[k] - v).abs().max().item() for k, v in expected.items())
    return report(gap <= 1e-6, f"{nproc} processes with gloo in {seconds:.0f} s trained the same weights as "
                               f"cg.ddp_setup's run (largest difference {gap:.1e}).",
                  f"the weights differ from cg.ddp_setup's run by up to {gap:.1e}: is each process's rank the "
                  "one torchrun gave it (RANK), and the world size WORLD_SIZE?")
