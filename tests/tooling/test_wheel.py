"""The lessons' setup cell installs the built wheel into an environment that already holds torch, keeps that
torch, and lesson 01 then runs against the installed package from a folder outside the checkout.

scripts/course/wheel_check.py does the work (`make test-wheel` adds the unit tests against the wheel; the release
workflow runs it in a fresh venv with another torch). Here the environment is a new venv that sees this
environment's packages (torch, the notebook tooling) but not colab_gpu, and pip is pointed at the wheel, offline.
"""

from __future__ import annotations

import wheel_check
from nbtools import course_config

from tests.conftest import requires_source


@requires_source
def test_setup_cell_installs_the_wheel_keeps_torch_and_lesson_01_runs_outside_the_checkout(tmp_path):
    steps = wheel_check.check(None, None, tmp_path, unit=False)
    print("\n".join(steps))
    version = course_config().version
    assert steps[0] == f"wheel: colab_gpu-{version}-py3-none-any.whl"
    assert f"colab_gpu {version}: installed from colab-gpu=={version}" in steps[1]  # PyPI (here: the wheel)
    assert "already installed" in steps[1]
    assert steps[2].startswith("torch unchanged: ")
    assert f"colab_gpu {version} imported from {tmp_path}" in steps[3]
    # PyPI without the release: the cell takes the repository's tag of it, and says so in its one line.
    repository = course_config().repository
    assert steps[4] == (
        f"setup cell without PyPI: 'colab_gpu {version}: installed from git+https://github.com/{repository}@v{version}'"
    )
    assert steps[-1].startswith("01_enable_gpu_runtime executed top to bottom")


def test_the_check_fails_loudly_when_a_step_fails(tmp_path):
    try:
        wheel_check.run(["python3", "-c", "raise SystemExit(3)"], cwd=tmp_path)
    except wheel_check.WheelCheckError as err:
        assert "failed (3)" in str(err)
    else:
        raise AssertionError("a failing step must raise WheelCheckError")
