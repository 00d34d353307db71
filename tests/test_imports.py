"""The package's imports point one way: no circle, a leaf timing module, and the bench outside the library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import colab_gpu as cg

PACKAGE = Path(cg.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """The colab_gpu modules ``path`` imports, at the top or inside a function (a local import hides a circle,
    it does not remove it). ``from . import atlas`` names the module ``colab_gpu.atlas``."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("colab_gpu")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("colab_gpu"):
                target = node.module
            else:
                continue
            submodules = {f"{target}.{alias.name}" for alias in node.names}
            found |= {m for m in submodules if m in GRAPH_NODES} or {target}
    return found - {here}


GRAPH_NODES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    graph = {module_name(p): imported_modules(p) for p in PACKAGE.rglob("*.py")}
    del graph["colab_gpu"]  # the package's __init__ gathers the public names: it imports every module
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt]
            if nxt not in state and (circle := visit(nxt, path + [nxt])):
                return circle
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (circle := visit(start, [start])):
            return circle
    return None


def test_find_circle_finds_a_circle_and_only_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_read_relative_local_and_package_forms(tmp_path):
    graph = import_graph()
    assert "colab_gpu.device" in graph["colab_gpu.timing"]  # from .device import synchronize
    assert "colab_gpu.checks.core" in graph["colab_gpu.checks.data"]  # from .core import ...
    assert "colab_gpu.device" in graph["colab_gpu.checks.core"]  # from ..device import same_device
    assert "colab_gpu.bench.experiments" in graph["colab_gpu.bench"]
    assert "colab_gpu.bench" in graph["colab_gpu.cli"]  # a function-local import counts


def test_the_package_has_no_import_circle():
    circle = find_circle(import_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_timing_is_a_leaf():
    # Everything that times something builds on timing.py's primitives, so timing.py itself imports nothing of
    # colab_gpu but the device helpers (synchronize): else precision -> timing -> train -> precision comes back.
    assert import_graph()["colab_gpu.timing"] <= {"colab_gpu.device"}


def test_no_library_module_imports_the_bench():
    # The bench is course tooling: it imports the library, never the other way round. The command line's
    # `bench` command (cli.py) is the bench's own entry point.
    offenders = sorted(
        module
        for module, imports in import_graph().items()
        if not module.startswith("colab_gpu.bench") and module != "colab_gpu.cli"
        if any(m == "colab_gpu.bench" or m.startswith("colab_gpu.bench.") for m in imports)
    )
    assert not offenders, f"library modules that import colab_gpu.bench: {offenders}"


def test_import_colab_gpu_loads_no_bench_module():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, colab_gpu; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    ).stdout.split()
    assert "colab_gpu.workloads" in loaded  # what it does load
    assert not [m for m in loaded if m.startswith("colab_gpu.bench")]


def test_every_module_stays_at_or_under_300_lines():
    # One topic per module: a module that outgrows this holds two, and splitting it keeps imports pointing one way.
    long = {module_name(p): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 300}
    assert not long, f"modules over 300 lines: {long}"
