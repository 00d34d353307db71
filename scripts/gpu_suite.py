"""GPU suite: run `make test` with REQUIRE_CUDA=1 plus `doctor`, write reports/gpu/<date>-<gpu>.md.

Usage on a GPU machine:  make gpu-suite          (or USE_SYSTEM_PYTHON=1 make gpu-suite on a
preinstalled image without .venv). Exits non-zero when there is no GPU or anything fails.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports" / "gpu"
JUNIT = ROOT / "build" / "junit"


def run(command: list[str], env: dict[str, str]) -> tuple[int, float, str]:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    print(proc.stdout)
    return proc.returncode, time.perf_counter() - start, proc.stdout


def junit_rows(path: Path) -> list[tuple[str, str, float]]:
    """(test id, outcome, seconds) for every test case in a JUnit XML file."""
    if not path.exists():
        return []
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child, word in (("failure", "FAILED"), ("error", "ERROR"), ("skipped", "skipped")):
            if case.find(child) is not None:
                outcome = word
        rows.append((f"{case.get('classname')}::{case.get('name')}", outcome, float(case.get("time", 0))))
    return rows


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main() -> int:
    env = dict(os.environ, REQUIRE_CUDA="1", JUNIT_DIR=str(JUNIT), PYTHONUNBUFFERED="1")
    python = sys.executable if env.get("USE_SYSTEM_PYTHON") == "1" else str(ROOT / ".venv" / "bin" / "python")
    JUNIT.mkdir(parents=True, exist_ok=True)
    test_rc, test_seconds, _ = run(["make", "test"], env)
    doctor_rc, _, doctor_json = run([python, "-m", "colab_gpu", "doctor", "--json"], env)
    try:
        report = json.loads(doctor_json)
    except ValueError:
        print("doctor did not produce a report: is the environment installed?", file=sys.stderr)
        return 1
    if not report["gpus"]:
        print("No CUDA GPU is visible: the GPU suite writes no report.", file=sys.stderr)
        return 1
    gpu = report["gpus"][0]
    today = dt.date.today().isoformat()
    lines = [
        f"# GPU suite: {gpu['name']}, {today}",
        "",
        f"- GPU: {gpu['name']} (compute capability {gpu['compute_capability']}, {gpu['total_memory_gib']} GiB)",
        f"- PyTorch {report['torch']}, CUDA {report['cuda_runtime']}, cuDNN {report['cudnn']}, "
        f"driver {report['driver']}, Python {report['python']}",
        f"- `REQUIRE_CUDA=1 make test`: {'passed' if test_rc == 0 else 'FAILED'} in {test_seconds:.0f} s; "
        f"doctor: {'ok' if doctor_rc == 0 else 'FAILED'}",
        "",
        "| test or notebook cell | outcome | seconds |",
        "|---|---|---:|",
    ]
    for suite in ("unit", "nbval"):
        rows = junit_rows(JUNIT / f"{suite}.xml")
        lines += [f"| {name} | {outcome} | {seconds:.2f} |" for name, outcome, seconds in rows]
    REPORTS.mkdir(parents=True, exist_ok=True)
    target = REPORTS / f"{today}-{slug(gpu['name'])}.md"
    target.write_text("\n".join(lines) + "\n")
    print(f"wrote {target.relative_to(ROOT)}")
    return 0 if test_rc == 0 and doctor_rc == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
