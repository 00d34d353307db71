"""Benchmarks of this runtime, each a ratio measured side by side in the same run.

``python -m colab_gpu bench`` runs them and writes JSON and markdown. Every row says what was
measured, on which device, with which sizes, and the result; rows that need a GPU are marked
skipped, with the reason, on a CPU runtime.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from .data import fake_image_data
from .device import synchronize
from .models import mlp
from .runtime import runtime_report
from .train import fit


@dataclass
class Row:
    """One benchmark result: ``ratio`` is the headline (bigger is better unless ``note`` says otherwise)."""

    name: str
    device: str
    status: str  # "ok" or "skipped"
    ratio: float | None = None
    unit: str = ""
    details: dict = field(default_factory=dict)
    note: str = ""


def hand_loop_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer,
                    device: torch.device) -> None:
    """The minimal training loop: no metrics, no checks. The baseline `fit` is compared with."""
    model.train()
    for inputs, labels in loader:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    synchronize(device)


def _interleaved_medians(runs: dict[str, Callable[[], None]], repeat: int) -> dict[str, float]:
    """Time each callable ``repeat`` times, alternating them so drifts (clocks, heat) hit all alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def fit_vs_hand_loop(device: torch.device, *, samples: int | None = None, epochs: int = 5,
                     batch_size: int = 256) -> Row:
    """Seconds per epoch of `fit` and of the minimal hand loop, same model, data and loader."""
    device = torch.device(device)
    samples = samples or (60_000 if device.type == "cuda" else 12_000)
    loader = DataLoader(fake_image_data(samples, (1, 28, 28)), batch_size=batch_size, shuffle=True,
                        pin_memory=device.type == "cuda", generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    models = {name: mlp(784, hidden=512).to(device) for name in ("fit", "hand loop")}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-3) for name, m in models.items()}
    runs = {
        "hand loop": lambda: hand_loop_epoch(models["hand loop"], loader, optimizers["hand loop"], device),
        "fit": lambda: fit(models["fit"], loader, None, optimizers["fit"], device, epochs=1,
                           progress=False, verbose=False),
    }
    _interleaved_medians(runs, repeat=1)  # warm-up: allocator, kernels, thread pools
    seconds = _interleaved_medians(runs, repeat=epochs)
    overhead = seconds["fit"] / seconds["hand loop"]
    return Row("fit vs hand loop (seconds per epoch)", str(device), "ok", round(overhead, 3), "x (lower is better)",
               {"fit_s": seconds["fit"], "hand_loop_s": seconds["hand loop"], "samples": samples,
                "batch_size": batch_size, "epochs_timed": epochs, "model": "MLP 784-512-512-10, Adam"},
               note=f"fit costs {100 * (overhead - 1):+.1f}% per epoch vs the hand loop "
                    "(target: at most +10% on a GPU)")


BENCHMARKS: dict[str, Callable[[torch.device], Row]] = {
    "fit": fit_vs_hand_loop,
}


def run_benchmarks(device: torch.device, names: list[str] | None = None) -> list[Row]:
    """Run the named benchmarks (all by default) on ``device``, printing each row as it lands."""
    unknown = sorted(set(names or []) - set(BENCHMARKS))
    if unknown:
        raise ValueError(f"Unknown benchmark(s) {unknown}; available: {sorted(BENCHMARKS)}.")
    rows = []
    for name in names or list(BENCHMARKS):
        row = BENCHMARKS[name](device)
        print(f"{row.name} on {row.device}: {row.ratio} {row.unit} {row.note}".rstrip(), flush=True)
        rows.append(row)
    return rows


def to_markdown(rows: list[Row], report: dict) -> str:
    gpu = report["gpus"][0]["name"] if report["gpus"] else "no GPU"
    lines = [f"# colab_gpu bench: {gpu}", "",
             f"PyTorch {report['torch']}, Python {report['python']}, {report['cpu_count']} CPU cores", "",
             "| benchmark | device | status | result | details |", "|---|---|---|---|---|"]
    for row in rows:
        result = f"{row.ratio} {row.unit}" if row.status == "ok" else "-"
        details = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.details.items())
        lines.append(f"| {row.name} | {row.device} | {row.status} | {result} | {details}; {row.note} |")
    return "\n".join(lines) + "\n"


def write_results(rows: list[Row], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``bench.json`` and ``bench.md`` into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = runtime_report()
    json_path, md_path = out / "bench.json", out / "bench.md"
    json_path.write_text(json.dumps({"runtime": report, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    md_path.write_text(to_markdown(rows, report))
    return json_path, md_path
