"""Issue 63: the Pythons the package declares are the Pythons CI tests, and the README says the same range."""

import re

import tomllib
from paths import ROOT


def test_the_declared_pythons_are_the_tested_ones_and_the_readme_says_so():
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert floor.startswith(">=3.")
    lowest = floor.removeprefix(">=")
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    matrix_lines = " ".join(re.findall(r"python: [^\n]+", workflow))  # `python: ["3.11", "3.13"]`, `{ python: "3.13"`
    tested = sorted(set(re.findall(r"3\.\d+", matrix_lines)), key=lambda v: int(v.split(".")[1]))
    assert tested[0] == lowest, (tested, floor)  # no declared Python left untested, none tested below the floor
    readme = (ROOT / "README.md").read_text()
    assert f"Python {lowest} to {tested[-1]}" in readme and "3.10 to" not in readme
