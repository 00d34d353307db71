"""The tools' layout (scripts/README.md): two systems over one shared folder, each module short and documented."""

import ast
from pathlib import Path

from code_size import LIMIT, code_lines
from paths import ROOT

SCRIPTS = ROOT / "scripts"
FOLDERS = ("common", "course", "gpu")


def modules(folder: str) -> list[Path]:
    return sorted((SCRIPTS / folder).glob("*.py"))


def imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def test_the_tools_live_in_the_three_folders_only():
    assert sorted(p.name for p in SCRIPTS.glob("*.py")) == []
    for folder in FOLDERS:
        assert modules(folder), f"scripts/{folder}/ has no module"


def test_every_tool_module_stays_at_or_under_the_code_line_limit():
    # The package's size rule (scripts/common/code_size.py): lines of code, not of prose.
    lengths = {p.relative_to(SCRIPTS).as_posix(): code_lines(p.read_text()) for f in FOLDERS for p in modules(f)}
    long = {name: n for name, n in lengths.items() if n > LIMIT}
    assert not long, f"tool modules over {LIMIT} lines of code: {long}"


def test_the_course_build_never_imports_the_gpu_suite_and_common_imports_neither():
    gpu = {p.stem for p in modules("gpu")}
    course = {p.stem for p in modules("course")}
    for path in modules("course"):
        assert not imported_names(path) & gpu, f"{path.name} imports the GPU suite: {imported_names(path) & gpu}"
    for path in modules("common"):
        wrong = imported_names(path) & (gpu | course)
        assert not wrong, f"common/{path.name} imports a system's module: {wrong}"


def test_the_repository_root_has_one_home():
    defining = [
        p.relative_to(SCRIPTS).as_posix()
        for folder in FOLDERS
        for p in modules(folder)
        for node in ast.parse(p.read_text()).body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ROOT" for t in node.targets)
    ]
    assert defining == ["common/paths.py"]


def test_each_folders_readme_names_every_module_in_it():
    for folder in FOLDERS:
        readme = (SCRIPTS / folder / "README.md") if folder != "common" else SCRIPTS / "README.md"
        text = readme.read_text()
        missing = [p.name for p in modules(folder) if f"`{p.name}" not in text]
        assert not missing, f"{readme.relative_to(ROOT)} does not describe {missing}"
