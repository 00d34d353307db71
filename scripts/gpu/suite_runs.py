"""A run folder's report.json, read back: the one reader for --resume and --merge, and the rule they share.

`suite_report.py` writes the report; this reads it and checks that what would join a run (a second window, another
folder's run) ran the same commit on the same GPU. It also reads the runs imported into the course (`measured_on`:
which GPU classes measured each bench row, so that a report marks a target a prediction until one has).
"""

from __future__ import annotations

import json
from pathlib import Path

from colab_gpu.measure.references import gpu_label


def read_state(run: Path, option: str) -> dict:
    """The state (report.json) of the run folder ``run``, checked to be this suite's: the one reader of a run's report
    for --resume and --merge; ``option`` names the command line option that asked for it in the error."""
    report = run / "report.json"
    if not report.exists():
        raise SystemExit(f"{option} {run}: no report.json there (a run folder is what gpu_suite.py --out wrote).")
    try:
        state = json.loads(report.read_text())
    except ValueError as err:
        raise SystemExit(
            f"{option} {run}: its report.json cannot be read ({err}): it is truncated or half copied. Copy the run "
            "folder again from where it ran."
        ) from None
    if state.get("format") != 2:
        raise SystemExit(f"{option} {run}: its report comes from an older suite, without parts: run it anew.")
    return state


def require_same_run(
    option: str, run: Path, ran: dict, joining: dict, against: dict[str, str], unknown_commit: bool = False
) -> None:
    """One report holds one commit on one GPU: the rule of --resume and --merge, in one place. ``ran`` holds the
    "commit" and "gpu" of ``run``'s report, ``joining`` those of what would join it, ``against`` how the message names
    the latter for each key ("this tree is", "the run it would join ran"). ``unknown_commit``: a commit that either
    side does not know (None) passes (--resume from a tree without git); --merge asks for equal values."""
    for key, what in (("commit", "commit"), ("gpu", "GPU")):
        first, second = ran.get(key), joining.get(key)
        if key == "commit" and unknown_commit and not (first and second):
            continue
        if first != second:
            shown = tuple(str(v)[:12] if v and key == "commit" else v for v in (first, second))
            raise SystemExit(
                f"{option} {run}: it ran {what} {shown[0]}, {against[key]} {shown[1]}: one report holds one commit on "
                "one GPU. Start a new run, or use the same commit on the same GPU."
            )


IMPORTED = Path(__file__).resolve().parents[2] / "reports" / "gpu"  # the runs imported into the course


def measured_on(reports: Path = IMPORTED) -> dict[str, set[str]]:
    """Each bench row's key -> the labels of the GPUs ("T4", "H100") whose imported runs measured it."""
    labels: dict[str, set[str]] = {}
    for path in sorted(reports.glob("*/report.json")):
        report = json.loads(path.read_text())
        for row in report.get("bench", []):
            if row.get("status") == "ok":
                labels.setdefault(row["key"], set()).add(gpu_label(report.get("gpu", "")))
    return labels
