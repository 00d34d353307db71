"""tests/time_budget.py: a part of `make test` past its budget says so and names its slowest tests, and passes."""

import os
import subprocess
import sys

import pytest
from paths import ROOT

from tests.time_budget import budget_of


def run_part(tmp_path, part: str, budget: str | None, strict: bool = False) -> subprocess.CompletedProcess:
    (tmp_path / "test_slow.py").write_text(
        "import time\n\ndef test_slow():\n    time.sleep(0.3)\n\ndef test_quick():\n    pass\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), COURSE_TEST_PART=part)
    env.pop("COURSE_TEST_BUDGET_S", None)
    env.pop("COURSE_TEST_STRICT", None)
    if strict:
        env["COURSE_TEST_STRICT"] = "1"
    if budget is not None:
        env["COURSE_TEST_BUDGET_S"] = budget
    command = [sys.executable, "-m", "pytest", "-p", "tests.time_budget", "-p", "no:cacheprovider", "test_slow.py"]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_part_past_its_budget_passes_and_names_its_slowest_test(tmp_path):
    done = run_part(tmp_path, "unit", "0.1")
    assert done.returncode == 0, done.stdout  # speed is reported, never a reason for the suite to fail
    assert "2 passed" in done.stdout
    assert "unit ran past its budget" in done.stdout and "(reported, not failed)" in done.stdout
    slowest = done.stdout.split("slowest tests")[1].splitlines()[2]
    assert "test_slow.py::test_slow" in slowest  # the slowest comes first


def test_a_part_within_its_budget_passes_and_prints_its_time_against_the_budget(tmp_path):
    done = run_part(tmp_path, "tooling", None)  # pyproject.toml's budget for tooling: minutes
    assert done.returncode == 0, done.stdout
    assert "tooling: 0 s, budget" in done.stdout or "tooling: 1 s, budget" in done.stdout


def test_a_part_without_a_budget_is_refused_with_the_parts_that_have_one(tmp_path):
    done = run_part(tmp_path, "lint", None)
    assert done.returncode != 0
    assert "'lint' has no budget" in done.stderr + done.stdout
    assert "'nbval'" in done.stderr + done.stdout


def test_a_part_past_its_budget_fails_only_where_the_run_opts_in(tmp_path):
    done = run_part(tmp_path, "unit", "0.1", strict=True)
    assert done.returncode != 0 and "2 passed" in done.stdout
    assert "COURSE_TEST_STRICT=1 makes it fail" in done.stdout


@pytest.mark.parametrize("budget", ["fast", "nan", "-5", "0", "inf"])
def test_a_budget_that_is_not_seconds_is_refused_by_name_not_with_an_internal_error(tmp_path, budget):
    done = run_part(tmp_path, "unit", budget)
    assert done.returncode != 0 and "INTERNALERROR" not in done.stdout + done.stderr
    assert f"COURSE_TEST_BUDGET_S={budget!r}: a budget is a number of seconds above 0" in done.stdout + done.stderr


def test_a_pyproject_without_the_budget_table_or_with_a_word_for_a_budget_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_TEST_BUDGET_S", raising=False)
    (tmp_path / "pyproject.toml").write_text("[tool.course]\nname = 'x'\n")
    with pytest.raises(pytest.UsageError, match=r"no readable \[tool.course.test-budget\] table"):
        budget_of("unit", tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text('[tool.course.test-budget]\nunit = "fast"\n')
    with pytest.raises(pytest.UsageError, match="unit = 'fast': a budget is a number of seconds above 0"):
        budget_of("unit", tmp_path / "pyproject.toml")
