"""Bring a GPU run into the course: `make import-gpu-run RUN=<folder or .zip>`.

A run is what scripts/gpu/gpu_runner.py leaves (Kaggle's /kaggle/working, the maintainer notebook's zip, a self-hosted
runner's build/gpu-run): manifest.json, the suite's report.md/report.json, the executed notebooks, logs, JUnit XML.
Importing it:
  - copies manifest.json, report.md, report.json, the GPU-executed notebooks and the steps the run profiled
    (profiles/*.jsonl, which tests/test_regimes.py replays) to reports/gpu/<date>-<gpu>/
    (the logs and JUnit XML stay in the run, which the workflow keeps as an artifact);
  - refreshes colab_gpu/references.json from every imported run (scripts/gpu/update_references.py), so the lessons
    show "on a T4: ..." beside the learner's own figure once the next release ships it;
  - fills the instructor guide's GPU column from every imported run: a lesson's T4 time where one ran (workshops run
    on Colab's free T4), else its newest time on another GPU, named in the cell;
  - prints each prediction of reports/predictions.toml about the run's GPU beside the figure the run measured:
    confirmed, refuted, not measured by this run, or read by hand (predictions.py);
and the site (course/course_site.py) then shows a lesson's GPU outputs wherever a run of its current source exists.

A CPU dry run, or a run whose manifest and report disagree on the commit, is refused with the reason.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

import guide_times
import predictions
import update_references
from gpu_suite import slug
from nbtools import lesson_sources
from paths import ROOT

MANIFEST = "manifest.json"
RUN_FILES = (MANIFEST, "report.md", "report.json")


class ImportRefused(Exception):
    """The run cannot be imported; the message says why and what to do."""


def find_run(folder: Path) -> Path:
    """The folder holding manifest.json (or, from the suite alone, report.json): ``folder`` itself, or the one folder
    a zip wrapped it in."""
    for name in ("manifest.json", "report.json"):
        if (folder / name).exists():
            return folder
        inner = [p.parent for p in folder.glob(f"*/{name}")]
        if len(inner) == 1:
            return inner[0]
    found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    raise ImportRefused(
        f"{folder} holds no manifest.json or report.json (it has: {found or 'nothing'}); a run is what "
        "scripts/gpu/gpu_runner.py or scripts/gpu/gpu_suite.py writes: its --out folder, or the zip of it."
    )


def manifest_of_suite_run(report: dict) -> dict:
    """What a run of the suite alone (`make gpu-suite`, a self-hosted runner, no gpu_runner.py) says of itself in
    its report, in the manifest's terms."""
    windows = report.get("windows") or [{"started": f"{report.get('date')}T00:00:00+00:00"}]
    return {
        "format": 1,
        "sha": report.get("commit"),
        "status": "passed" if report.get("complete") else "incomplete",
        "failures": [],
        "started": windows[0]["started"],
        "gpus": [gpu["name"] for gpu in report.get("runtime", {}).get("gpus", [])],
        "image": {},
        "from": "scripts/gpu/gpu_suite.py alone (no gpu_runner.py manifest): read from report.json",
    }


def read_json(path: Path) -> dict:
    """A run's JSON file, or the reason it cannot be read (a copy cut short, a file half written)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ImportRefused(
            f"{path} cannot be read ({type(err).__name__}: {err}): it is truncated or was half copied. Copy the "
            "run again from where it ran (or its zip), then import it."
        ) from None


# What the import, the references and the guide read of a report: (field, type, what it holds), each checked first,
# so that a damaged report is refused by name before anything is copied into reports/gpu/.
REPORT_FIELDS = (
    ("gpu", str, "the GPU it ran on"),
    ("parts", dict, "each lesson's and benchmark's outcome"),
    ("lesson_figures", dict, "the figures each lesson measured"),
    ("runtime", dict, "the runtime it ran on"),
    ("windows", list, "the windows of GPU time"),
)


def check_report(report: object, path: Path) -> None:
    """Refuse a report that is not the suite's (valid JSON with a field missing or of another type), by field."""
    if not isinstance(report, dict):
        raise ImportRefused(f"{path} holds a {type(report).__name__}, not a report: copy the run again.")
    for field, kind, holds in REPORT_FIELDS:
        required = field == "gpu"
        if (required and not report.get(field)) or (field in report and not isinstance(report[field], kind)):
            raise ImportRefused(
                f"{path}: its field {field!r} ({holds}) is {report.get(field)!r}, not a {kind.__name__}: the report "
                "is damaged. Copy the run again from where it ran (or its zip), then import it."
            )
    if any(not isinstance(part, dict) or "status" not in part for part in report.get("parts", {}).values()):
        raise ImportRefused(f"{path}: a part of 'parts' has no status: the report is damaged. Copy the run again.")


def read_run(run: Path) -> tuple[dict, dict]:
    """(manifest, report) of a run, checked: a GPU run, and one commit."""
    if not (run / "manifest.json").exists() and (run / "report.json").exists():
        manifest = manifest_of_suite_run(read_json(run / "report.json"))
    else:
        manifest = None
    missing = [name for name in RUN_FILES if not (run / name).exists() and not (name == MANIFEST and manifest)]
    if missing:
        manifest = read_json(run / "manifest.json") if (run / "manifest.json").exists() else {}
        why = "; ".join(manifest.get("failures", [])) or "see its logs/"
        raise ImportRefused(
            f"{run} has no {', '.join(missing)}: the run stopped before the suite wrote its report ({why})."
        )
    manifest = manifest or read_json(run / MANIFEST)
    report = read_json(run / "report.json")
    check_report(report, run / "report.json")
    if not manifest.get("gpus"):
        raise ImportRefused(f"{run} is a CPU dry run (no GPU in its manifest): only GPU runs are imported.")
    if not manifest.get("sha"):
        raise ImportRefused(
            f"{run} does not say which commit it ran: run scripts/gpu/gpu_runner.py with --sha COMMIT (or from a "
            "`git archive` tarball, which carries it)."
        )
    if report.get("commit") and report["commit"] != manifest.get("sha"):
        raise ImportRefused(
            f"{run}: its report is of commit {report['commit']}, its manifest of "
            f"{manifest.get('sha')}: the folder mixes two runs."
        )
    return manifest, report


def run_folder(reports: Path, manifest: dict, report: dict) -> Path:
    """reports/gpu/<date>-<gpu>/; a second run of another commit on the same day and GPU gets its short sha."""
    folder = reports / f"{manifest['started'][:10]}-{slug(report['gpu'])}"
    existing = folder / "manifest.json"
    if existing.exists() and read_json(existing).get("sha") != manifest["sha"]:
        folder = folder.with_name(f"{folder.name}-{manifest['sha'][:7]}")
    return folder


def copy_run(run: Path, target: Path, manifest: dict) -> list[str]:
    """The run's report, manifest and notebooks into ``target``; returns the lessons whose notebook came along.

    The copy is made beside ``target`` and replaces it only once complete: an import that fails leaves the run
    imported before it as it was. A run already at ``target`` (re-imported to refresh the references) stays."""
    if run.resolve() == target.resolve():
        return sorted(notebook.stem for notebook in (run / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    final, target = target, target.with_name(f"{target.name}.importing")
    shutil.rmtree(target, ignore_errors=True)
    (target / "notebooks").mkdir(parents=True)
    for name in RUN_FILES:
        if name != MANIFEST:
            shutil.copyfile(run / name, target / name)
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")  # the run's, or read from its report
    profiles = sorted((run / "profiles").glob("*.jsonl"))  # the steps it profiled: tests/test_regimes.py replays them
    if profiles:
        (target / "profiles").mkdir()
    for profile in profiles:
        shutil.copyfile(profile, target / "profiles" / profile.name)
    lessons = []
    for notebook in sorted((run / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shutil.copyfile(notebook, target / "notebooks" / notebook.name)
        lessons.append(notebook.stem)
    shutil.rmtree(final, ignore_errors=True)
    target.rename(final)
    return lessons


def window_lines(report: dict) -> list[str]:
    """Which parts each window of GPU time ran, and what no window finished (a run merged by --resume)."""
    parts = report.get("parts", {})
    lines = [
        f"window {w['window']} ({w['started']}, {w.get('seconds', 0):.0f} s): "
        + (", ".join(name for name in parts if parts[name].get("window") == w["window"]) or "nothing")
        for w in report.get("windows", [])
    ]
    left = [f"{name} ({part['status']})" for name, part in parts.items() if part["status"] != "passed"]
    return lines + ([f"not finished in any window: {', '.join(left)}"] if left else [])


def keeps_what_is_there(run: Path, target: Path) -> None:
    """Refuse a run of the commit already imported at ``target`` that lacks some of its GPU-executed notebooks: a
    partial re-run would replace the full run (and the references computed from it)."""
    if not (target / MANIFEST).exists():
        return

    def lessons(folder: Path) -> set[str]:
        return {notebook.stem for notebook in (folder / "notebooks").glob("[0-9][0-9]_*.ipynb")}

    lacking = sorted(lessons(target) - lessons(run))
    if lacking:
        raise ImportRefused(
            f"{target.name} holds a run of this commit with {len(lessons(target))} GPU-executed notebooks; this run "
            f"lacks {len(lacking)} of them ({', '.join(lacking[:3])}{', ...' if len(lacking) > 3 else ''}): importing "
            "it would replace them. Finish it with gpu_runner.py --resume into the same --out, or import it with "
            "--replace if that is what you want."
        )


def import_run(source: Path, root: Path = ROOT, replace: bool = False) -> str:
    """Import the run at ``source`` (a folder or a zip) into the course at ``root``; return what was done. A run of
    an imported commit that lacks some of its notebooks replaces it only with ``replace``."""
    if not source.exists():
        raise ImportRefused(f"{source} does not exist: give RUN= a run folder or the zip of one.")
    with tempfile.TemporaryDirectory() as scratch:
        if source.is_file():
            if not zipfile.is_zipfile(source):
                raise ImportRefused(f"{source} is neither a folder nor a zip file.")
            with zipfile.ZipFile(source) as archive:
                archive.extractall(scratch)
            source = Path(scratch)
        run = find_run(source)
        manifest, report = read_run(run)
        target = run_folder(root / "reports" / "gpu", manifest, report)
        already = run.resolve() == target.resolve()
        if not already and not replace:
            keeps_what_is_there(run, target)
        lessons = copy_run(run, target, manifest)
    references = root / "colab_gpu" / "references.json"
    update_references.main(root / "reports" / "gpu", references)
    where = f"{target.relative_to(root)} ({len(lessons)} GPU-executed notebook(s))"
    done = [
        f"{target.relative_to(root)} is imported already: kept as it is, read again ({len(lessons)} notebook(s))"
        if already
        else f"imported the {manifest['status']} run of {manifest['sha'][:7]} on {report['gpu']} into {where}",
        f"refreshed {references.name}",
    ]
    done.extend(window_lines(report))
    cells = guide_times.fill_gpu_from_reports(root / "reports" / "gpu", root / "docs" / "instructor_guide.md")
    done.append(f"filled the instructor guide's GPU column: {len(cells)} of {len(lesson_sources())} lessons measured")
    done.extend(prediction_lines(root, report))
    return "\n".join(done)


def prediction_lines(root: Path, report: dict) -> list[str]:
    """Each prediction of the course's registry about this run's GPU, judged by the figures it measured."""
    registry = root / "reports" / predictions.REGISTRY.name
    if not registry.exists():
        return [f"predictions: no reports/{registry.name} in this course to judge"]
    return predictions.judgement(report, predictions.load(registry), update_references.gpu_label(report["gpu"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="the run's folder, or the zip of it")
    parser.add_argument("--replace", action="store_true", help="let a partial run replace a fuller one of its commit")
    args = parser.parse_args(argv)
    try:
        print(import_run(args.run, replace=args.replace))
    except ImportRefused as refused:
        print(f"not imported: {refused}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
