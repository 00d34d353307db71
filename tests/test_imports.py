"""The package's layers are its folders, and its imports point down them: the layer table below, no circle, the bench
outside the library, each module one topic (the size rule, counted in lines of code); the README's layout names every
module, and the learner's face (``dir(cg)``) is ``__all__``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from code_size import LIMIT, code_lines  # scripts/common: the size rule's home, shared with the tools

import colab_gpu as cg
from colab_gpu.experiments.sizes import SIZES, sized

PACKAGE = Path(cg.__file__).parent

# The layers, lowest first: a module imports only modules of its own layer or of a lower one. A folder is a layer;
# the modules at the top of the package (the doctor's report, the command line) sit above every folder they use.
LAYERS = ("hardware", "measure", "data", "train", "llm", "experiments", "errors", "checks", "doctor", "bench", "cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """The colab_gpu modules ``path`` imports, at the top or inside a function (a local import hides a circle,
    it does not remove it). ``from . import atlas`` names the module ``colab_gpu.errors.atlas``."""
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
    assert "colab_gpu.hardware.device" in graph["colab_gpu.measure.timing"]  # from .device import synchronize
    assert "colab_gpu.checks.core" in graph["colab_gpu.checks.data"]  # from .core import ...
    assert "colab_gpu.hardware.device" in graph["colab_gpu.checks.core"]  # from ..device import same_device
    assert "colab_gpu.bench.experiments" in graph["colab_gpu.bench"]
    assert "colab_gpu.bench" in graph["colab_gpu.cli"]  # a function-local import counts


def test_the_package_has_no_import_circle():
    circle = find_circle(import_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def layer_of(module: str) -> str:
    """``colab_gpu.measure.timing`` -> "measure"; ``colab_gpu.doctor`` -> "doctor"; ``colab_gpu.__main__`` -> "cli"."""
    name = module.split(".")[1]
    return "cli" if name == "__main__" else name


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {layer: at for at, layer in enumerate(LAYERS)}
    return sorted(
        f"{module} ({layer_of(module)}) imports {imported} ({layer_of(imported)})"
        for module, imports in graph.items()
        for imported in imports
        if imported != "colab_gpu" and rank[layer_of(imported)] > rank[layer_of(module)]
    )


def test_every_module_belongs_to_a_layer():
    unknown = sorted(module for module in import_graph() if layer_of(module) not in LAYERS)
    assert not unknown, f"modules outside the layer table {LAYERS}: {unknown}"


def test_every_module_imports_its_own_layer_or_lower_ones():
    violations = layer_violations(import_graph())
    assert not violations, "upward imports:\n" + "\n".join(violations)


def test_the_layer_rule_finds_an_upward_import():
    graph = {"colab_gpu.measure.timing": {"colab_gpu.train.steps", "colab_gpu.hardware.device"}}
    assert layer_violations(graph) == ["colab_gpu.measure.timing (measure) imports colab_gpu.train.steps (train)"]


def test_import_colab_gpu_loads_no_bench_module():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, colab_gpu; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    ).stdout.split()
    assert "colab_gpu.experiments.workloads" in loaded  # what it does load
    assert not [m for m in loaded if m.startswith("colab_gpu.bench")]


def test_every_module_stays_at_or_under_the_code_line_limit():
    # One topic per module: a module with more code than this holds two. Its docstrings, comments and data tables
    # (the atlas's entries) do not count, so nothing is split to make room for prose.
    long = {module_name(p): n for p in PACKAGE.rglob("*.py") if (n := code_lines(p.read_text())) > LIMIT}
    assert not long, f"modules over {LIMIT} lines of code: {long}"


def test_code_lines_leave_out_docstrings_comments_and_data_tables():
    source = '"""A module."""\n# why\nTABLE = (\n    1,\n    2,\n)\n\n\ndef f():\n    """What."""\n    return 1\n'
    assert code_lines(source) == 2


def test_the_package_top_holds_only_the_entry_points_and_the_doctor():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py", "doctor.py"]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(set(LAYERS) - {"doctor", "cli"})


def readme_layout() -> str:
    readme = (PACKAGE.parent / "README.md").read_text()
    block = readme[readme.index("colab_gpu/ ") :]
    return block[: block.index("\ntests/")]


def test_the_readme_layout_names_every_folder_and_module():
    text = readme_layout()
    missing = [module_name(p) for p in sorted(PACKAGE.rglob("*.py")) if p.name != "__init__.py" and p.name not in text]
    missing += [f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists() and f"{p.name}/" not in text]
    assert not missing, f"README.md's layout does not name {missing}"


def test_dir_shows_the_learners_face_only():
    assert dir(cg) == sorted(cg.__all__)
    assert "measure" not in dir(cg) and cg.measure.timing.compare_steps is cg.compare_steps  # still importable


def reexported_names(path: Path) -> list[str]:
    """Names ``path`` imports from colab_gpu and never uses: a re-export, a second import path to the same name."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("colab_gpu"))
        for alias in node.names
    }
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return sorted(imported - used)


def test_each_name_has_one_import_path():
    # No module re-exports another's names (profiling once passed on 11 it did not use): a name is imported from the
    # module that defines it. The package's __init__ gathers the learner's face and is left out.
    found = {
        module_name(p): names
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py"
        if (names := reexported_names(p))
    }
    assert not found, f"modules that re-export names: {found}"


def test_a_reexport_is_found(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from .summary import Summary, summarize\n\nsummarize(1)\n")
    assert reexported_names(module) == ["Summary"]


def test_the_menus_to_a_gpu_have_one_home():
    # "Runtime > Change runtime type > T4 GPU" was written out in six places beside ENABLE_GPU_HINT (issue 68): a
    # renamed menu would have been fixed in some. hardware/device.py holds the words; the rest use its constants.
    spelled = sorted(
        module_name(p)
        for p in PACKAGE.rglob("*.py")
        if "Change runtime type" in p.read_text() or "Settings > Accelerator" in p.read_text()
    )
    assert spelled == ["colab_gpu.hardware.device"], spelled


def test_experiment_sizes_by_device_have_one_home():
    # The loader experiments' 60,000 and 12,000 samples were written in two modules, and five more sized their work
    # by `... if on_gpu else ...` in place (issue 68): experiments/sizes.py holds every pair, the rest call `sized`.
    by_device = re.compile(
        r"(?:=|\breturn|\bor)\s*\(?\s*\(?[\d_]+(?:,\s*[\d_]+)*\)?\s+if\s+(?:on_gpu|\S+\.type == \"cuda\")\s+else\s"
    )
    picked = sorted(module_name(p) for p in PACKAGE.rglob("*.py") if by_device.search(p.read_text()))
    assert picked == [], f"{picked} pick sizes by device type: add them to experiments/sizes.py's table"
    for name, sizes in SIZES.items():
        assert type(sizes.gpu) is type(sizes.cpu) and sizes.why, name
        assert sized(name, "cuda") is sizes.gpu and sized(name, torch.device("cpu")) is sizes.cpu
    with pytest.raises(KeyError, match="No sizes named 'epoch'; the experiments' sizes: epoch_samples, "):
        sized("epoch", "cpu")
