"""A learner's function run once as a GPU runtime would feed it, on any runtime: the model on PyTorch's ``meta``
device (shapes, no data) and the notebook's ``device`` seen as ``meta`` too.

On a CPU runtime a batch that never moves to ``device`` is where the model is anyway, so a forgotten
``.to(device)`` passes there and fails on a GPU. Run with the notebook's global ``device`` (or a parameter of that
name) bound to ``meta`` for the call, each batch the function moves goes to ``meta``, where the model is; a batch it
does not move reaches the model from the CPU, and the model's forward hook sees it.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator

import torch
from torch import nn

META = torch.device("meta")
BATCHES_LEFT = (
    "your batches stay on the CPU: move each one to `device`, where the model is (batch.to(device)). A CPU runtime "
    "hides it; on a GPU the model refuses them (the check ran your function once on PyTorch's meta device to see)."
)


@contextlib.contextmanager
def notebook_device_as(function: object, device: torch.device) -> Iterator[None]:
    """While the block runs, the global ``device`` that ``function`` reads (the notebook's) is ``device``."""
    names = function.__globals__
    had, before = "device" in names, names.get("device")
    names["device"] = device
    try:
        yield
    finally:
        if had:
            names["device"] = before
        else:
            del names["device"]


def batches_left_on_the_host(function: object, model: nn.Module, *args: object) -> bool:
    """Whether ``function(model, *args)``, run with ``model`` on ``meta`` and ``device`` seen as ``meta`` (the
    notebook's global, or a parameter of that name), feeds the model a tensor that is not on ``meta``: a batch it
    would leave on the CPU on a GPU runtime."""
    meta_model = copy.deepcopy(model).to(META)
    seen: list[torch.device] = []

    def before_forward(_module, inputs):
        seen.extend(x.device for x in inputs if isinstance(x, torch.Tensor))

    meta_model.register_forward_pre_hook(before_forward)
    try:
        takes_device = "device" in inspect.signature(function).parameters
    except (TypeError, ValueError):  # a callable without a signature Python can read
        takes_device = False
    keywords = {"device": META} if takes_device else {}
    # The notebook's `device`, if the function's namespace has one: the functions it calls read it there too.
    has_global = "device" in getattr(function, "__globals__", {})
    global_device = notebook_device_as(function, META) if has_global else contextlib.nullcontext()
    with global_device, contextlib.suppress(Exception):
        function(meta_model, *args, **keywords)  # reading a meta value (.cpu(), .item()) raises after the forwards
    return any(d.type != "meta" for d in seen)
