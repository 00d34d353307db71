"""The course's experiments: benchmarks of this runtime, each a ratio measured side by side in the same run.

The measuring primitives they use (and the lessons use) live in timing.py.

``python -m colab_gpu bench`` runs them and writes JSON and markdown. Every row says what was
measured, on which device, with which sizes, and the result; rows that need a GPU are marked
skipped, with the reason, on a CPU runtime.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from .data import fake_image_data, load_digits
from .device import synchronize
from .feeding import DeviceLoader, EncodedImages, copy_bandwidth, measure_loader, worker_loader
from .models import mlp, small_cnn
from .precision import choose_precision, tf32_mode
from .runtime import cpu_count, runtime_report
from .timing import BenchResult, interleaved_medians, matmul_tflops, time_train_epoch, time_train_step
from .train import fit


@dataclass
class Row:
    """One benchmark result: ``ratio`` is the headline (bigger is better unless ``note`` says otherwise)."""

    key: str  # stable identifier, e.g. "amp"
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
    interleaved_medians(runs, repeat=1)  # warm-up: allocator, kernels, thread pools
    seconds = interleaved_medians(runs, repeat=epochs)
    overhead = seconds["fit"] / seconds["hand loop"]
    return Row("fit", "fit vs hand loop (seconds per epoch)", str(device), "ok", round(overhead, 3),
               "x (lower is better)",
               {"fit_s": seconds["fit"], "hand_loop_s": seconds["hand loop"], "samples": samples,
                "batch_size": batch_size, "epochs_timed": epochs, "model": "MLP 784-512-512-10, Adam"},
               note=f"fit costs {100 * (overhead - 1):+.1f}% per epoch vs the hand loop "
                    "(target: at most +10% on a GPU)")


def skipped(key: str, name: str, device: torch.device, reason: str) -> Row:
    return Row(key, name, str(device), "skipped", note=reason)


NEEDS_GPU = "needs a CUDA GPU; this runtime has none"


def matmul_rows(device: torch.device) -> list[Row]:
    """Matmul throughput: fp32 (IEEE), TF32 and the tensor-core format, each its peak over three sizes."""
    on_gpu = device.type == "cuda"
    sizes = (2048, 4096, 8192) if on_gpu else (256, 512, 1024)
    with tf32_mode(False):  # IEEE float32, whatever the caller had set
        fp32 = max(matmul_tflops(n, torch.float32, device) for n in sizes)
    rows = [Row("matmul_fp32", "matmul fp32 peak (TFLOP/s)", str(device), "ok", round(fp32, 3), "TFLOP/s",
                {"sizes": list(sizes)})]
    if not on_gpu:
        return rows + [skipped("matmul_tf32", "matmul TF32 vs fp32", device, NEEDS_GPU),
                       skipped("matmul_half", "matmul bf16/fp16 vs fp32", device, NEEDS_GPU)]
    with tf32_mode(True):
        tf32 = max(matmul_tflops(n, torch.float32, device) for n in sizes)
    half_dtype = choose_precision(device).dtype or torch.float16
    half = max(matmul_tflops(n, half_dtype, device) for n in sizes)
    return rows + [
        Row("matmul_tf32", "matmul TF32 vs fp32", str(device), "ok", round(tf32 / fp32, 2), "x",
            {"tf32_tflops": tf32, "fp32_tflops": fp32}, "TF32 only exists on compute capability >= 8.0"),
        Row("matmul_half", f"matmul {str(half_dtype)[6:]} vs fp32", str(device), "ok", round(half / fp32, 2), "x",
            {"half_tflops": half, "fp32_tflops": fp32, "dtype": str(half_dtype)}),
    ]


def host_to_device(device: torch.device) -> Row:
    if device.type != "cuda":
        return skipped("h2d", "host-to-device copy, pinned vs pageable", device, NEEDS_GPU)
    pinned = copy_bandwidth(256, device, pinned=True)
    pageable = copy_bandwidth(256, device, pinned=False)
    return Row("h2d", "host-to-device copy, pinned vs pageable", str(device), "ok", round(pinned / pageable, 2), "x",
               {"pinned_gbps": pinned, "pageable_gbps": pageable, "mib": 256})


def _step_on(make_model: Callable[[], nn.Module], shape: tuple[int, ...], device: torch.device,
             precision: str = "fp32") -> tuple[BenchResult, float | None]:
    torch.manual_seed(0)
    inputs = torch.randn(*shape, device=device)
    labels = torch.randint(0, 10, (shape[0],), device=device)
    return time_train_step(make_model().to(device), inputs, labels, precision=precision, tf32=False,
                           repeat=5 if device.type == "cuda" else 3)


def cpu_vs_gpu_rows(device: torch.device) -> list[Row]:
    """The same MLP and CNN training steps on this machine's CPU and on its GPU."""
    if device.type != "cuda":
        return [skipped("mlp_cpu_gpu", "MLP training step, GPU vs CPU", device, NEEDS_GPU),
                skipped("cnn_cpu_gpu", "CNN training step, GPU vs CPU", device, NEEDS_GPU)]
    cpu = torch.device("cpu")
    rows = []
    for key, name, make_model, shape in (
        ("mlp_cpu_gpu", "MLP training step, GPU vs CPU", lambda: mlp(784, hidden=512), (256, 1, 28, 28)),
        ("cnn_cpu_gpu", "CNN training step, GPU vs CPU", lambda: small_cnn(3, 10, width=32), (256, 3, 32, 32)),
    ):
        on_cpu, _ = _step_on(make_model, shape, cpu)
        on_gpu, _ = _step_on(make_model, shape, device)
        rows.append(Row(key, name, str(device), "ok", round(on_cpu.median / on_gpu.median, 1), "x",
                        {"cpu_s": on_cpu.median, "gpu_s": on_gpu.median, "batch": shape[0],
                         "cpu_threads": torch.get_num_threads()}))
    return rows


def amp_rows(device: torch.device) -> list[Row]:
    """AMP vs fp32 (TF32 off) on a matmul-heavy MLP, and how close AMP training gets to the matmul peak."""
    if device.type != "cuda":
        return [skipped("amp", "AMP vs fp32 training step (matmul-heavy MLP)", device, NEEDS_GPU),
                skipped("amp_peak", "AMP MLP training vs half-precision matmul peak", device, NEEDS_GPU)]
    chosen = choose_precision(device)
    batch, width, depth = 8192, 4096, 3

    def make_model() -> nn.Module:
        return mlp(1024, hidden=width, depth=depth)

    fp32, fp32_peak = _step_on(make_model, (batch, 1024), device, "fp32")
    amp, amp_peak = _step_on(make_model, (batch, 1024), device, chosen.name)
    params = sum(p.numel() for p in make_model().parameters())
    achieved = 6 * batch * params / amp.median / 1e12  # forward 2 FLOPs per weight and sample, backward 4
    half_peak = max(matmul_tflops(n, chosen.dtype or torch.float16, device) for n in (4096, 8192))
    details = {"fp32_s": fp32.median, "amp_s": amp.median, "fp32_peak_mib": fp32_peak, "amp_peak_mib": amp_peak,
               "precision": chosen.name, "batch": batch, "width": width, "depth": depth}
    return [
        Row("amp", f"AMP ({chosen.name}) vs fp32 training step (matmul-heavy MLP)", str(device), "ok",
            round(fp32.median / amp.median, 2), "x", details),
        Row("amp_peak", f"AMP MLP training vs {chosen.name} matmul peak", str(device), "ok",
            round(achieved / half_peak, 2), "of peak", {"training_tflops": achieved, "matmul_peak_tflops": half_peak}),
    ]


def workers_sweep(device: torch.device, images: int = 1024) -> Row:
    """Samples/s of a JPEG decode + augment pipeline for 0 .. CPU-count workers."""
    from torchvision.transforms import v2

    data = load_digits(image_size=32, channels=3)
    augment = v2.Compose([v2.RandomResizedCrop(32, scale=(0.6, 1.0), antialias=True), v2.RandomHorizontalFlip(),
                          v2.ColorJitter(0.3, 0.3, 0.3), v2.ToDtype(torch.float32, scale=True)])
    jpegs = EncodedImages(data.train_images[:images], data.train_labels[:images], augment)
    cores = cpu_count()
    rates = {}
    for workers in sorted({0, 1, 2, min(4, cores), cores}):
        loader = worker_loader(jpegs, 128, device=device, num_workers=workers)
        measure_loader(loader, device)  # start the workers
        rates[workers] = measure_loader(loader, device)
        del loader
    best = max(rates, key=rates.get)
    return Row("workers", "DataLoader workers, best vs 0 (JPEG decode + augment)", str(device), "ok",
               round(rates[best] / rates[0], 2), "x", {"samples_per_s": rates, "best_workers": best, "cores": cores})


def _mlp_epoch_seconds(loader, device: torch.device) -> float:
    torch.manual_seed(0)
    return time_train_epoch(mlp(784, hidden=512).to(device), loader, device).median


def resident_vs_dataloader(device: torch.device) -> Row:
    """One MLP epoch fed by a default DataLoader (0 workers, pageable) vs by a DeviceLoader."""
    n = 60_000 if device.type == "cuda" else 12_000
    data = fake_image_data(n, (1, 28, 28))
    images, labels = data.tensors
    loaders = {"DataLoader": DataLoader(data, batch_size=256, shuffle=True),
               "DeviceLoader": DeviceLoader(images, labels, batch_size=256, device=device)}
    seconds = {name: _mlp_epoch_seconds(loader, device) for name, loader in loaders.items()}
    return Row("resident", "device-resident loader vs default DataLoader (MLP epoch)", str(device), "ok",
               round(seconds["DataLoader"] / seconds["DeviceLoader"], 2), "x",
               {"dataloader_s": seconds["DataLoader"], "deviceloader_s": seconds["DeviceLoader"], "samples": n})


BENCHMARKS: dict[str, Callable[[torch.device], Row | list[Row]]] = {
    "matmul": matmul_rows,
    "h2d": host_to_device,
    "cpu_gpu": cpu_vs_gpu_rows,
    "amp": amp_rows,
    "workers": workers_sweep,
    "resident": resident_vs_dataloader,
    "fit": fit_vs_hand_loop,
}


def run_benchmarks(device: torch.device, names: list[str] | None = None) -> list[Row]:
    """Run the named benchmarks (all by default) on ``device``, printing each row as it lands."""
    unknown = sorted(set(names or []) - set(BENCHMARKS))
    if unknown:
        raise ValueError(f"Unknown benchmark(s) {unknown}; available: {sorted(BENCHMARKS)}.")
    rows = []
    for name in names or list(BENCHMARKS):
        result = BENCHMARKS[name](device)
        for row in result if isinstance(result, list) else [result]:
            shown = f"{row.ratio} {row.unit}" if row.status == "ok" else f"skipped ({row.note})"
            print(f"{row.name} on {row.device}: {shown}", flush=True)
            rows.append(row)
    return rows


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def to_markdown(rows: list[Row], report: dict) -> str:
    gpu = report["gpus"][0]["name"] if report["gpus"] else "no GPU"
    lines = [f"# colab_gpu bench: {gpu}", "",
             f"PyTorch {report['torch']}, Python {report['python']}, {report['cpu_count']} CPU cores", "",
             "| benchmark | device | status | result | details |", "|---|---|---|---|---|"]
    for row in rows:
        result = f"{row.ratio} {row.unit}" if row.status == "ok" else "-"
        details = ", ".join(f"{k}={_show(v)}" for k, v in row.details.items())
        lines.append(f"| {row.name} | {row.device} | {row.status} | {result} | "
                     f"{'; '.join(part for part in (details, row.note) if part)} |")
    return "\n".join(lines) + "\n"


def plot_ratios(rows: list[Row], path: Path, title: str) -> Path:
    """A horizontal bar per measured ratio (log scale), 1x marked; skipped rows are listed as such."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no window, works headless
    import matplotlib.pyplot as plt

    measured = [r for r in rows if r.status == "ok" and r.unit.startswith("x")]
    fig, ax = plt.subplots(figsize=(8, 0.5 * max(len(rows), 2) + 1))
    names = [r.name for r in measured] + [f"{r.name} (skipped)" for r in rows if r.status != "ok"]
    values = [r.ratio for r in measured] + [0] * (len(names) - len(measured))
    bars = ax.barh(names, values, color=[f"C{i % 10}" for i in range(len(names))])
    ax.bar_label(bars, labels=[f"{v}x" if v else "" for v in values])
    ax.axvline(1, color="black", linewidth=0.8)
    if max(values, default=0) > 20:
        ax.set_xscale("symlog", linthresh=1)  # GPU-vs-CPU ratios reach 100x; keep the small ones readable
    ax.invert_yaxis()
    ax.set(title=title, xlabel="ratio measured side by side (x)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_results(rows: list[Row], out_dir: str | Path) -> tuple[Path, Path, Path]:
    """Write ``bench.json``, ``bench.md`` and ``bench.png`` into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = runtime_report()
    json_path, md_path = out / "bench.json", out / "bench.md"
    json_path.write_text(json.dumps({"runtime": report, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    md_path.write_text(to_markdown(rows, report) + "\n![ratios](bench.png)\n")
    gpu = report["gpus"][0]["name"] if report["gpus"] else "CPU only"
    png_path = plot_ratios(rows, out / "bench.png", f"colab_gpu bench: {gpu}")
    return json_path, md_path, png_path
