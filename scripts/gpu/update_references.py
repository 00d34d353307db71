"""Copy the lesson figures of the committed GPU runs into colab_gpu/references.json (shipped with the package).

Usage: python scripts/gpu/update_references.py   (`make import-gpu-run` runs it; then release)
Each run is a folder reports/gpu/<date>-<gpu>/ with the suite's report.json. For each GPU the course names, the newest
run (by its start time) wins, and each figure keeps its run and that run's host. A GPU on two platforms (Colab's T4
with 2 vCPUs, Kaggle's T4 x2) keeps a figure for each, named by `colab_gpu.measure.references.reference_title`. Runs
without lesson figures are skipped, and so is a figure measured on another device than its run's GPU (a unit test of the
run that recorded a CPU figure), and a figure no lesson shows any more (an older run's figure of a comparison a lesson
dropped): each such figure is named.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from nbtools import lesson_sources
from paths import ROOT  # scripts/ is on the path: run as `python scripts/gpu/update_references.py`

sys.path.insert(0, str(ROOT))
from colab_gpu.measure.references import gpu_label, reference_title  # noqa: E402

REPORTS = ROOT / "reports" / "gpu"
TARGET = ROOT / "colab_gpu" / "references.json"
ABOUT = (
    "Lesson figures from the committed GPU runs (reports/gpu/*/report.json); "
    "written by scripts/gpu/update_references.py."
)


def lesson_figure_keys(lessons: list[Path] | None = None) -> set[str]:
    """The figure keys the lessons show: each ``cg.compare_with_references("NN.name", ...)`` of a lesson's source."""
    sources = lesson_sources() if lessons is None else lessons
    return {
        key for source in sources for key in re.findall(r'compare_with_references\(\s*"([^"]+)"', source.read_text())
    }


def collect(reports: Path = REPORTS, shown: set[str] | None = None) -> dict:
    """{"figures": {key: {title: value}}, "workloads": {key: {title: workload}}, "sources": {key: {title: run}},
    "hosts": {run: host}} from every report (a workload where the lesson recorded what its figure was measured on;
    a title names the GPU and the platform, `reference_title`).

    For each figure, GPU and platform the newest run wins, by when the run started (two runs of one day are ordered by
    their clocks, not by their folders' names); ``sources`` names the run each figure came from, and ``hosts`` the host
    each of those runs recorded (CPU, clock and dispatch probe, `colab_gpu.measure.host`), which a learner's host is
    compared with. Only the figures of ``shown`` (default: the keys the lessons show, `lesson_figure_keys`) are kept.
    """
    shown = lesson_figure_keys() if shown is None else shown
    figures: dict[str, dict[str, float]] = {}
    workloads: dict[str, dict[str, dict]] = {}  # what each figure was measured on, where the run recorded it
    sources: dict[str, dict[str, str]] = {}
    hosts: dict[str, dict] = {}
    unshown: set[str] = set()
    for report, data in sorted(_read(reports), key=lambda pair: (started(pair[1]), pair[0].parent.name)):
        gpus = data.get("runtime", {}).get("gpus") or [{}]
        label = gpu_label(data.get("gpu") or gpus[0].get("name", ""))  # "Tesla T4 x2": the run's GPUs
        if label is None:
            continue
        run = report.parent.relative_to(reports.parent.parent)  # reports/gpu/<date>-<gpu>
        title = reference_title(label, data.get("runtime"))
        kept = figures_measured_on(label, data.get("lesson_figures") or {}, run)
        unshown.update(key for key in kept if key not in shown)
        kept = {key: value for key, value in kept.items() if key in shown}
        for key, value in kept.items():
            figures.setdefault(key, {})[title] = value
            sources.setdefault(key, {})[title] = report.parent.name
            workload = data["lesson_figures"][key].get("workload")
            if workload:
                workloads.setdefault(key, {})[title] = workload
            else:  # a newer run without one: the older run's workload is not this figure's
                workloads.get(key, {}).pop(title, None)
        if kept and data.get("runtime", {}).get("host"):
            hosts[report.parent.name] = data["runtime"]["host"]
    if unshown:
        print(f"left out {len(unshown)} figure(s) that no lesson shows any more: {', '.join(sorted(unshown))}")
    used = {run for by_label in sources.values() for run in by_label.values()}
    return {
        "about": ABOUT,
        "figures": figures,
        "workloads": {key: by_label for key, by_label in workloads.items() if by_label},
        "sources": sources,
        "hosts": {run: host for run, host in hosts.items() if run in used},
    }


def _read(reports: Path) -> list[tuple[Path, dict]]:
    return [(report, json.loads(report.read_text())) for report in reports.glob("*/report.json")]


def started(report: dict) -> str:
    """When a run started (ISO time of its first window, else its date): the order in which runs are newer."""
    return min(
        [w.get("started", "") for w in report.get("windows", []) if w.get("started")] or [report.get("date", "")]
    )


def figures_measured_on(label: str, lesson_figures: dict, run: Path) -> dict[str, float]:
    """{key: value} of the figures measured on the run's GPU ``label``; prints the others, which are left out.

    Each figure records the device it was measured on: a unit test during the run can record one on the CPU, and
    labelled with the run's GPU it would show learners a wrong figure for that GPU.
    """
    kept, skipped = {}, []
    for key, figure in lesson_figures.items():
        if gpu_label(figure.get("device") or "") == label:
            kept[key] = figure["value"]
        else:
            skipped.append(f"{key} ({figure.get('device') or 'no device recorded'})")
    if skipped:
        print(f"skipped {len(skipped)} figure(s) of {run} measured on another device: {', '.join(skipped)}")
    return kept


def main(reports: Path = REPORTS, target: Path = TARGET, shown: set[str] | None = None) -> int:
    data = collect(reports, shown)
    target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    runs = sorted({run for by_label in data["sources"].values() for run in by_label.values()})
    print(f"{len(data['figures'])} figure(s) from {len(runs)} GPU report(s): {runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
