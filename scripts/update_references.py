"""Copy the lesson figures of the committed GPU runs into colab_gpu/references.json (shipped with the package).

Usage: python scripts/update_references.py   (`make import-gpu-run` runs it; then release)
Each run is a folder reports/gpu/<date>-<gpu>/ with the suite's report.json. For each GPU the course names, the
newest run wins. Runs without lesson figures are skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nbtools import ROOT  # scripts/ is on the path: run as `python scripts/update_references.py`

sys.path.insert(0, str(ROOT))
from colab_gpu.references import gpu_label  # noqa: E402

REPORTS = ROOT / "reports" / "gpu"
TARGET = ROOT / "colab_gpu" / "references.json"
ABOUT = (
    "Lesson figures from the committed GPU runs (reports/gpu/*/report.json); written by scripts/update_references.py."
)


def collect(reports: Path = REPORTS) -> dict:
    """{"figures": {key: {label: value}}, "sources": {label: report file}} from every report, newest last."""
    figures: dict[str, dict[str, float]] = {}
    sources: dict[str, str] = {}
    for report in sorted(reports.glob("*/report.json")):  # in <date>-<gpu>/: sorted is oldest first
        data = json.loads(report.read_text())
        gpus = data.get("runtime", {}).get("gpus") or [{}]
        label = gpu_label(data.get("gpu") or gpus[0].get("name", ""))  # "Tesla T4 x2": the run's GPUs
        lesson_figures = data.get("lesson_figures") or {}
        if label is None or not lesson_figures:
            continue
        for key, figure in lesson_figures.items():
            figures.setdefault(key, {})[label] = figure["value"]
        sources[label] = report.parent.name
    return {"about": ABOUT, "figures": figures, "sources": sources}


def main(reports: Path = REPORTS, target: Path = TARGET) -> int:
    data = collect(reports)
    target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"{len(data['figures'])} figure(s) from {len(data['sources'])} GPU report(s): {sorted(data['sources'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
