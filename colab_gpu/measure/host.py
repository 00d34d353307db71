"""The host: the CPU beside the GPU, and how fast it dispatches PyTorch operations.

A launch-bound step (lessons 04, 10, 12) runs at the speed of the CPU that launches its kernels, not of the GPU: the
same rung of lesson 12 ran an epoch half again as long on one H100 host as on another (lesson 12 in
reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3 and reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2). So a
launch-bound figure is a host figure, and comparing one with the course's reference needs both hosts: `host_record`
describes this one (CPU model, cores, clock, and a dispatch probe), the GPU suite stores it in every report, and
`compare_hosts` says how a learner's host compares with the one that measured a reference figure.
"""

from __future__ import annotations

import torch
from torch import nn

from ..hardware.device import checked_device
from ..hardware.machine import cpu_count, cpu_mhz, cpu_model
from .timing import compare_steps

SAME_HOST = 1.25  # dispatch times within this factor of each other: hosts of about the same speed


def dispatch_probe(device: str | torch.device) -> dict[str, float]:
    """Microseconds per call, timed as the course times any short step (`timing.compare_steps`: K calls queued
    between two synchronizations, 7 samples, the two calls interleaved, medians): ``empty_op_us``, an in-place add
    on a one-element tensor (the floor every operation pays: Python, the dispatcher and, on a GPU, the launch), and
    ``linear_step_us``, a forward and backward of a small ``nn.Linear`` (64 to 64, batch 8), a launch-bound training
    step in miniature. On a GPU both measure the host: their kernels take less time than their launches."""
    device = torch.device(device)
    one = torch.zeros(1, device=device)
    layer = nn.Linear(64, 64).to(device)
    inputs = torch.randn(8, 64, device=device)

    def empty_op() -> None:
        one.add_(1)

    def linear_step() -> None:
        layer(inputs).sum().backward()

    timed = compare_steps({"empty_op_us": empty_op, "linear_step_us": linear_step}, device=device, warmup=20)
    return {name: round(result.median * 1e6, 2) for name, result in timed.items()}


def host_record(device: str | torch.device) -> dict:
    """This host as the GPU suite records it beside its figures: CPU model, cores, clock and `dispatch_probe` on
    ``device`` (or, where the probe cannot run, ``probe_error``)."""
    device = checked_device(
        device, "colab_gpu.measure.host.host_record"
    )  # a wrong name is the caller's mistake, not the host's
    record = {"cpu_model": cpu_model(), "cores": cpu_count(), "mhz": cpu_mhz(), "device": str(device)}
    try:
        record.update(dispatch_probe(device))
    except RuntimeError as err:  # a GPU that cannot run (doctor must still report): the record says why
        record["probe_error"] = (str(err).splitlines() or [type(err).__name__])[0][:200]
    return record


def compare_hosts(mine: dict, reference: dict, label: str) -> str:
    """One sentence: how fast this host dispatches a small training step next to the host of the ``label`` run
    (``reference``, a `host_record`), and what that means for a launch-bound figure."""
    ratio = mine["linear_step_us"] / reference["linear_step_us"]
    speed = (
        "about as fast as"
        if 1 / SAME_HOST <= ratio <= SAME_HOST
        else f"{ratio:.1f}x slower than"
        if ratio > 1
        else f"{1 / ratio:.1f}x faster than"
    )
    return (
        f"this host dispatches a small training step in {mine['linear_step_us']:.0f} µs, {speed} the {label} run's "
        f"host ({reference['linear_step_us']:.0f} µs, {reference['cpu_model']}): a launch-bound figure follows the "
        "host, so expect yours to differ by about as much."
    )
