"""Write the student versions of every lesson: notebooks/student/NN_topic.py + .ipynb, solutions removed.

The self-check cells stay, so learners test their own answers; the Colab badge of each student notebook
opens that notebook. Run by `make course` and `make notebooks`; the hygiene tests fail when they are stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # scripts/common: what both systems share

from nbtools import course_config, write_student_versions
from paths import ROOT


def main() -> int:
    for path in write_student_versions(course_config()):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
