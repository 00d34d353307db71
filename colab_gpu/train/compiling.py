"""torch.compile on the course's runtimes: can this one compile, compile or fall back to eager, count compilations.

``torch.compile(model)`` returns at once; the work happens at the first call: Dynamo captures the Python code
into graphs, AOTAutograd derives the backward, and Inductor writes kernels (Triton on a GPU, C++ on a CPU) and
compiles them. A missing piece (no C++ compiler, no Triton, a GPU Triton does not support) therefore shows up as
an error in the middle of the first training step. `compile_support` asks the questions before that, and
`compile_model` returns the eager model with a one-line reason instead of a traceback. `GraphCounter` is a
backend that only counts what Dynamo captured: graph breaks and recompilations made visible without compiling.
Taught in lesson 11.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from ..hardware.capability import TRITON_MIN, gpu_capability
from ..hardware.device import checked_device
from ..measure.timing import BenchResult, format_seconds, timed_call


@dataclass(frozen=True)
class CompileSupport:
    """Whether ``torch.compile`` works for one device on this runtime, and if not, why and what to do (lesson 11)."""

    device: str
    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


def cxx_compilers() -> list[str]:
    """The C++ compilers Inductor would try for CPU code (``torch._inductor.config.cpp.cxx``) that exist here."""
    from torch._inductor import config

    names = [os.environ.get("CXX") if name is None else name for name in config.cpp.cxx]
    if sys.platform == "win32":
        names.append("cl")  # on Windows Inductor uses MSVC's cl, whatever config.cpp.cxx says
    return [name for name in names if name and shutil.which(name)]


def _missing_piece(device: torch.device) -> str | None:
    """Why ``torch.compile`` cannot work on ``device`` here, judged without compiling; None when nothing is missing."""
    if not torch._dynamo.is_dynamo_supported():
        return (
            f"torch {torch.__version__} cannot compile on Python {sys.version_info.major}."
            f"{sys.version_info.minor}: upgrade torch (`pip install -U torch`) or train in eager mode."
        )
    if device.type == "cuda":
        gpu = gpu_capability(device)
        if not gpu.triton:
            return (
                f"{gpu.name} (CC {gpu.cc}) is too old for Triton, which writes torch.compile's GPU kernels "
                f"(it needs CC >= {TRITON_MIN[0]}.{TRITON_MIN[1]}): on Kaggle pick the T4 x2 accelerator."
            )
        if importlib.util.find_spec("triton") is None:
            return "Triton is not installed (`pip install triton`; it ships with Linux CUDA wheels of torch)."
    elif device.type == "cpu" and not cxx_compilers():
        return (
            "no C++ compiler found (Inductor writes C++ for the CPU): install g++ "
            "(`apt install g++`, Xcode's command-line tools on a Mac), or train in eager mode."
        )
    return None


_SMOKE_TESTED: dict[tuple, str | None] = {}


def first_line(error: BaseException) -> str:
    """An error as one line, its type and the first line of its message: what a fallback to eager prints."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _two_operations(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) + 1


def smoke_dtype(device: torch.device) -> torch.dtype:
    """The dtype of the smoke test: on a GPU fp16, the precision a T4 compiles the lessons in (a float32 test passed
    where fp16 kernels could still fail); float32 on a CPU, where the lessons compile in float32."""
    return torch.float16 if device.type == "cuda" else torch.float32


def _smoke_test(device: torch.device) -> str | None:
    """Compile and run a two-operation function on ``device``: the first error line, or None when it works."""
    from torch._inductor import config

    key = (str(device), tuple(config.cpp.cxx))  # fp16 on a GPU: `smoke_dtype`
    if key not in _SMOKE_TESTED:
        # A CUDA build of torch on a machine without a GPU warns about CUDA_HOME the first time it builds C++;
        # that says nothing about the CPU code being compiled here.
        quiet = logging.getLogger("torch.utils.cpp_extension")
        level, quiet.level = quiet.level, logging.ERROR
        try:
            example = [torch.ones(4, device=device, dtype=smoke_dtype(device))]
            # Inductor itself, caches off: a cached kernel would pass without the compiler the model will need.
            with config.patch(fx_graph_cache=False):
                torch._inductor.compile(torch.fx.symbolic_trace(_two_operations), example)(*example)
            _SMOKE_TESTED[key] = None
        except Exception as error:  # noqa: BLE001 - every failure means "cannot compile here"; its text says why
            _SMOKE_TESTED[key] = first_line(error)
        finally:
            quiet.level = level
    return _SMOKE_TESTED[key]


def compile_support(device: str | torch.device) -> CompileSupport:
    """Whether ``torch.compile`` works on ``device`` here: the known requirements, then a tiny real compile.

    The tiny compile runs once per device and process (a few seconds the first time: Inductor starts up).
    Taught in lesson 11.
    """
    device = checked_device(device, "cg.compile_support")
    reason = _missing_piece(device)
    if reason is None:
        failure = _smoke_test(device)
        if failure is not None:
            reason = f"a two-operation test function did not compile: {failure}"
    if reason is not None:
        return CompileSupport(str(device), False, reason)
    backend = "Triton kernels" if device.type == "cuda" else f"C++ ({cxx_compilers()[0]})"
    return CompileSupport(str(device), True, f"torch {torch.__version__} compiles for {device} with {backend}.")


def compile_model(
    model: nn.Module,
    device: str | torch.device,
    *,
    mode: str | None = None,
    dynamic: bool | None = None,
    verbose: bool = True,
) -> nn.Module:
    """``torch.compile(model, mode=..., dynamic=...)`` where this runtime can compile; else ``model``, and why.

    The compiled module shares ``model``'s parameters: train either one, save ``model.state_dict()`` (the
    compiled module's keys start with ``_orig_mod.``). Taught in lesson 11.
    """
    support = compile_support(checked_device(device, "cg.compile_model"))
    if not support.ok:
        if verbose:
            print(
                f"torch.compile is not available here, training in eager mode (same results, no speed-up): "
                f"{support.reason}"
            )
        return model
    return torch.compile(model, mode=mode, dynamic=dynamic)


class GraphCounter:
    """A ``torch.compile`` backend that runs each captured graph eagerly and keeps it: ``compiles`` counts them.

    Every graph break and every recompilation hands the backend one more graph, so
    ``torch.compile(model, backend=counter)`` shows both in seconds, without Inductor. Taught in lesson 11.
    """

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, graph: torch.fx.GraphModule, example_inputs: list) -> object:
        self.graphs.append(graph)
        return graph.forward

    @property
    def compiles(self) -> int:
        return len(self.graphs)

    def input_shapes(self) -> list[list[tuple]]:
        """The shapes of each graph's tensor inputs (symbolic sizes print as s0, s1, ...)."""
        shapes = []
        for graph in self.graphs:
            placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
            values = [node.meta.get("example_value") for node in placeholders]
            shapes.append([tuple(v.shape) for v in values if isinstance(v, torch.Tensor)])
        return shapes


def first_call(step: Callable[[], object], device: torch.device) -> tuple[float, int]:
    """(seconds of ``step``'s first call, how many graphs Inductor took from its on-disk cache during it). For a
    compiled step the first call captures and compiles: with a warm cache (the same graphs compiled before, in any
    process of this machine) it skips most of the compiling, which a fresh runtime, whose cache is empty, pays."""
    hits = _cache_hits()
    _, seconds = timed_call(step, device)
    return seconds, _cache_hits() - hits


def _cache_hits() -> int:
    """The FX graphs Inductor has loaded from its cache in this process (0 where its counters are elsewhere)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(counters["inductor"]["fxgraph_cache_hit"])


@dataclass(frozen=True)
class CompileComparison:
    """One workload's training step, eager and through ``torch.compile`` in each mode, timed against each other.

    ``steps`` holds "eager" and each mode that ran: seconds per step from ``timing.compare_steps`` (K steps per
    sample, the sides interleaved); ``first_call_s`` each side's first call (a compiled mode's: capture and compile);
    ``peak_mib`` the allocator peak of one step (GPU only); ``failed`` each mode that could not run here, and why (it
    then trains eagerly: no compiler, a GPU Triton does not support, a Triton error at the first call). Made by
    ``workloads.compare_compiled``; lesson 11 prints it, the bench's compile rows read it.
    """

    workload: str
    precision: str
    steps: dict[str, BenchResult]
    first_call_s: dict[str, float]
    peak_mib: dict[str, float | None]
    failed: dict[str, str]
    cache_hits: dict[str, int] = field(default_factory=dict)  # per compiled mode: graphs its first call found cached

    def speedup(self, mode: str = "default") -> float | None:
        """Eager's median step over ``mode``'s: above 1 the compiled step is faster; None where ``mode`` did not run."""
        return self.steps["eager"].median / self.steps[mode].median if mode in self.steps else None

    def __str__(self) -> str:
        eager = self.steps["eager"]
        ks = ", ".join(str(result.steps_per_sample) for result in self.steps.values())
        lines = [
            f"{self.workload}, {self.precision}: {len(eager.times)} samples per side, the sides interleaved "
            f"(K per side: {ks} steps per sample)"
        ]
        for mode, result in self.steps.items():
            gain = (
                f" ({self.speedup(mode):.2f}x eager; first call {self.first_call_s[mode]:.1f} s{self._cache(mode)})"
                if mode != "eager"
                else ""
            )
            peak = "" if self.peak_mib.get(mode) is None else f", peak {self.peak_mib[mode]:,.0f} MiB"
            lines.append(f"  {mode + ':':<17}{format_seconds(result.median)} per step{peak}{gain}")
        lines += [f"  {mode + ':':<17}not run, eager only: {why}" for mode, why in self.failed.items()]
        return "\n".join(lines)

    def _cache(self, mode: str) -> str:
        """Whether ``mode``'s first call found Inductor's cache warm: its seconds are then not a fresh runtime's."""
        if mode not in self.cache_hits:
            return ""
        hits = self.cache_hits[mode]
        return f", warm cache: {hits} graph(s) from it" if hits else ", cold cache"
