"""Writing bench results: ``bench.json`` (what scripts read), ``bench.md`` and ``bench.png`` (what people read)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..doctor import runtime_report
from .rows import Row


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def to_markdown(rows: list[Row], report: dict) -> str:
    gpu = report["gpus"][0]["name"] if report["gpus"] else "no GPU"
    lines = [
        f"# colab_gpu bench: {gpu}",
        "",
        f"PyTorch {report['torch']}, Python {report['python']}, {report['cpu_count']} CPU cores",
        "",
        "| benchmark | device | status | result | target on a GPU | details |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        result = f"{row.ratio} {row.unit}" if row.status == "ok" else "-"
        details = ", ".join(f"{k}={_show(v)}" for k, v in row.details.items())
        verdict = {True: " (met)", False: " (NOT met)", None: ""}[row.met]
        lines.append(
            f"| {row.name} | {row.device} | {row.status} | {result} | {row.target}{verdict} | "
            f"{'; '.join(part for part in (details, row.note) if part)} |"
        )
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


def write_json(rows: list[Row], out_dir: str | Path, experiments: dict | None = None) -> Path:
    """``bench.json``: the runtime, the rows, and (from the CLI) each experiment's seconds and row keys."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = {"runtime": runtime_report(), "rows": [asdict(r) for r in rows], "experiments": experiments or {}}
    partial = out / "bench.json.partial"
    partial.write_text(json.dumps(data, indent=2) + "\n")
    return partial.replace(out / "bench.json")  # atomic: a reader never sees half a file


def write_results(rows: list[Row], out_dir: str | Path, experiments: dict | None = None) -> tuple[Path, Path, Path]:
    """Write ``bench.json``, ``bench.md`` and ``bench.png`` into ``out_dir``; return their paths."""
    out = Path(out_dir)
    json_path = write_json(rows, out, experiments)
    report = runtime_report()
    md_path = out / "bench.md"
    md_path.write_text(to_markdown(rows, report) + "\n![ratios](bench.png)\n")
    gpu = report["gpus"][0]["name"] if report["gpus"] else "CPU only"
    png_path = plot_ratios(rows, out / "bench.png", f"colab_gpu bench: {gpu}")
    return json_path, md_path, png_path
