"""Each part of `make test` against its time budget, with its slowest tests printed: a pytest plugin.

`make unit`, `make tooling` and `make nbval` load it (``-p tests.time_budget``) and name their part in
``COURSE_TEST_PART``. The budgets live in pyproject.toml, ``[tool.course.test-budget]``, in seconds on the course's
2-core dev machine with headroom for a slower host (a slower 2-core host took 1.4x as long);
``COURSE_TEST_BUDGET_S`` overrides the part's budget for one run. After the part's tests, the summary names its
slowest tests (for nbval, its slowest notebooks) and its time against its budget. A part over budget says so and
which tests to make faster, and passes: speed is reported, never a reason for the suite to fail (a slower or busier
host took 1.4x to 2x as long, and failed a suite whose every test passed); only ``COURSE_TEST_STRICT=1`` (an opt-in)
makes it fail. Without ``COURSE_TEST_PART`` (a maintainer running a few tests) nothing is printed.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest
import tomllib

PART_ENV = "COURSE_TEST_PART"
BUDGET_ENV = "COURSE_TEST_BUDGET_S"
STRICT_ENV = "COURSE_TEST_STRICT"  # =1: a part past its budget fails (a benchmark machine opts in)
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
SLOWEST = 8
_started: list[float] = []
_verdict: list[str] = []


def budget_of(part: str, pyproject: Path = PYPROJECT) -> float:
    """The part's budget in seconds: COURSE_TEST_BUDGET_S, else pyproject.toml's; a clear error for a part it lacks,
    a missing table, or a budget that is not a number of seconds above 0 ("fast", nan, a negative one)."""
    if os.environ.get(BUDGET_ENV):
        return _seconds(os.environ[BUDGET_ENV], f"{BUDGET_ENV}={os.environ[BUDGET_ENV]!r}", part)
    try:
        budgets = tomllib.loads(pyproject.read_text())["tool"]["course"]["test-budget"]
    except (KeyError, TypeError, tomllib.TOMLDecodeError) as err:
        raise pytest.UsageError(
            f"{pyproject.name} has no readable [tool.course.test-budget] table ({type(err).__name__}: {err}): add "
            "one, with each part's budget in seconds (unit = 160, tooling = 210, nbval = 270)."
        ) from err
    if part not in budgets:
        raise pytest.UsageError(
            f"{PART_ENV}={part!r} has no budget: pyproject.toml's [tool.course.test-budget] has {sorted(budgets)}."
        )
    return _seconds(budgets[part], f"pyproject.toml's [tool.course.test-budget] {part} = {budgets[part]!r}", part)


def _seconds(value: object, source: str, part: str) -> float:
    """``value`` as a budget in seconds, or a UsageError that names ``source`` and what a budget is."""
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise pytest.UsageError(f"{source}: a budget is a number of seconds above 0, e.g. {part} = 160.")
    return seconds


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")  # an xdist worker: the controller sees every report and judges


def pytest_configure(config: pytest.Config) -> None:
    part = os.environ.get(PART_ENV)
    if part and not _is_worker(config):
        budget_of(part)  # an unknown part fails before any test runs
        _started.append(time.monotonic())


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    part = os.environ.get(PART_ENV)
    if not part or not _started or _is_worker(session.config):
        return
    took, budget = time.monotonic() - _started[0], budget_of(part)
    _verdict.append(
        f"{part}: {took:.0f} s, budget {budget:.0f} s ({PART_ENV}; pyproject.toml [tool.course.test-budget])"
    )
    if took > budget and os.environ.get(STRICT_ENV) == "1":
        _verdict.append(f"{part} ran past its budget by {took - budget:.0f} s, and {STRICT_ENV}=1 makes it fail.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif took > budget:
        _verdict.append(
            f"{part} ran past its budget by {took - budget:.0f} s (reported, not failed): make its slowest tests "
            "faster (above)."
        )


def slowest(reports, by_file: bool) -> list[tuple[float, str]]:
    """(seconds, test or file) of the slowest, setup, call and teardown summed."""
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        name = report.nodeid.split("::")[0] if by_file else report.nodeid
        seconds[name] += getattr(report, "duration", 0.0)
    return sorted(((s, name) for name, s in seconds.items()), reverse=True)[:SLOWEST]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    part = os.environ.get(PART_ENV)
    if not part or not _verdict:
        return
    reports = [r for kind in ("passed", "failed", "skipped", "error") for r in terminalreporter.stats.get(kind, [])]
    reports = [r for r in reports if getattr(r, "when", None) in ("setup", "call", "teardown")]
    by_file = part == "nbval"
    terminalreporter.section(f"{part}: slowest {'notebooks' if by_file else 'tests'}, and the budget")
    for seconds, name in slowest(reports, by_file):
        terminalreporter.write_line(f"{seconds:7.1f} s  {name}")
    for line in _verdict:
        terminalreporter.write_line(line)
