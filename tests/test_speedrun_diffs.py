"""Lesson 12's section 5: rung 0's loop and the diffs of rungs 1 to 6, read from the lesson, applied in order, and
every rung's loop trained for an epoch on a tiny data set on the CPU. A diff that stops applying, or a loop that
stops running (a name no diff defines, autocast left on in float32), fails here. The exercise's solution is the
fast loop's reference copy: section 8's plain-PyTorch copy is tested to train the same weights, and its retyped sizes
and recipe to be the ladder's."""

import ast
import re
import warnings
from pathlib import Path

import jupytext
import pytest
import torch
from torch.nn import functional as F

import colab_gpu as cg
from colab_gpu.experiments import speedrun_rungs as sr
from colab_gpu.train.precision import Precision

LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "12_speedrun.py"
GAP = "..."  # a diff line that stands for unchanged lines
CPU = torch.device("cpu")


class DiffError(AssertionError):
    pass


def apply_diff(source: str, diff: str) -> str:
    """``source`` with ``diff`` applied: lines starting with "-" taken out, "+" put in, " " kept, and a line "..."
    for unchanged lines between parts. Each part's kept and removed lines must follow one another in ``source``,
    after the part before it."""
    lines, position = source.splitlines(), 0
    parts: list[list[str]] = [[]]
    for line in diff.splitlines():
        if line.strip() == GAP:
            parts.append([])
        else:
            parts[-1].append(line)
    for part in filter(None, parts):
        if any(line[:1] not in ("-", "+", " ", "") for line in part):
            raise DiffError(f"a diff line starts with neither '-', '+' nor ' ': {part}")
        old = [line[1:] for line in part if line[:1] in ("-", " ", "")]
        new = [line[1:] for line in part if line[:1] in ("+", " ", "")]
        if not old:
            raise DiffError(f"a part of the diff has no line to anchor it (context or '-'): {part}")
        at = next((i for i in range(position, len(lines) - len(old) + 1) if lines[i : i + len(old)] == old), None)
        if at is None:
            raise DiffError("these lines of the diff are not in the loop it applies to:\n" + "\n".join(old))
        lines[at : at + len(old)] = new
        position = at + len(new)
    return "\n".join(lines) + "\n"


def section5():
    """(rung 0's cell, the speed net's cell, [(rung number, its diff)]), from the lesson."""
    cells = jupytext.read(LESSON).cells
    start = next(i for i, c in enumerate(cells) if c.source.startswith("## 5. "))
    end = next(i for i, c in enumerate(cells) if c.source.startswith("## 6. "))
    code = [c.source for c in cells[start:end] if c.cell_type == "code"]
    rung0 = next(source for source in code if "def train_fast" in source)
    net = next(source for source in code if "def speed_net" in source)
    diffs = []
    for cell in cells[start:end]:
        if cell.cell_type == "markdown":
            number = re.match(r"\*\*Rung (\d)", cell.source)
            blocks = re.findall(r"```diff\n(.*?)```", cell.source, re.S)
            if blocks:
                assert number and len(blocks) == 1, cell.source[:80]
                diffs.append((int(number.group(1)), blocks[0]))
    return rung0, net, diffs


def rung_sources() -> dict[int, str]:
    """Rung 0's cell, then each rung's: the one below with its diff applied."""
    rung0, _, diffs = section5()
    sources = {0: rung0}
    for number, diff in diffs:
        try:
            sources[number] = apply_diff(sources[number - 1], diff)
        except DiffError as err:
            raise AssertionError(f"lesson 12, rung {number}'s diff does not apply to rung {number - 1}: {err}") from err
    return sources


def loaded(source: str) -> dict:
    """The namespace after running the lesson's speed net cell (its counting loop left out) and ``source``."""
    _, net, _ = section5()
    namespace = {"torch": torch, "cg": cg}
    exec(compile(net.split("\n\nper_image")[0], str(LESSON), "exec"), namespace)
    exec(compile(source, str(LESSON), "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def tiny():
    return cg.load_digits(32, 3).limit(train=160, test=64)


def test_the_lesson_shows_one_diff_per_rung_in_order():
    _, _, diffs = section5()
    assert [number for number, _ in diffs] == [1, 2, 3, 4, 5, 6]


def test_the_diffs_applied_in_order_give_a_loop_that_runs_at_every_rung(tiny, monkeypatch):
    # Compiling on a CPU takes minutes: Dynamo still captures the graph (rung 5's code path), without Inductor.
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: compile_(model, backend="eager"))
    sources = rung_sources()
    assert sorted(sources) == list(range(7))
    before = torch.backends.cudnn.benchmark
    for number, source in sources.items():
        namespace = loaded(source)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rung 1's pin_memory=True has no GPU to pin for here
            model = namespace["train_fast"](tiny, CPU, 1)
        accuracy = namespace["test_accuracy"](model, tiny, CPU)
        assert isinstance(model, torch.nn.Module) and 0 <= accuracy <= 1, f"rung {number}"
    torch.backends.cudnn.benchmark = before  # rung 3 turns it on
    torch._dynamo.reset()
    last = sources[6]
    for line in ("speed_net(", "label_smoothing=0.2", "OneCycleLR", "torch.compile(model)", "enabled=dtype is not"):
        assert line in last, line


def test_rung_3_stays_in_float32_where_the_precision_rule_says_fp32(tiny, monkeypatch):
    # Given dtype=None, CPU autocast picks bf16: rung 3 must pass enabled=dtype is not None.
    monkeypatch.setattr(cg, "choose_precision", lambda device: Precision("fp32", False, "float32 here"))
    namespace = loaded(rung_sources()[3])
    dtypes = []

    def cross_entropy(logits, targets, **kwargs):
        dtypes.append(logits.dtype)
        return F.cross_entropy(logits, targets, **kwargs)

    namespace["F"] = type("Functional", (), {"cross_entropy": staticmethod(cross_entropy)})
    before = torch.backends.cudnn.benchmark
    namespace["train_fast"](tiny, CPU, 1)
    torch.backends.cudnn.benchmark = before
    assert dtypes and set(dtypes) == {torch.float32}


def test_the_exercise_starts_from_rung_2s_loop():
    cells = jupytext.read(LESSON).cells
    solution = next(i for i, c in enumerate(cells) if "solution" in c.metadata.get("tags", []))
    scaffold = cells[solution - 1].source
    assert "TODO rung 3" in scaffold and "TODO rung 4" in scaffold and "TODO rung 6" in scaffold
    rung2 = rung_sources()[2]
    assert _function(scaffold, "train_fast") == _function(rung2, "train_fast")


def _function(source: str, name: str) -> str:
    """The AST of function ``name`` in ``source`` without its docstring (comments are not in an AST)."""
    function = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    if isinstance(function.body[0], ast.Expr) and isinstance(function.body[0].value, ast.Constant):
        function.body = function.body[1:]
    return ast.dump(function)


def test_the_lessons_speed_net_is_the_packages():
    namespace = loaded("")
    torch.manual_seed(0)
    mine = namespace["speed_net"](3, 10, 16)
    torch.manual_seed(0)
    package = cg.speed_net(3, 10, width=16)
    assert [(k, v.shape) for k, v in mine.state_dict().items()] == [
        (k, v.shape) for k, v in package.state_dict().items()
    ]
    images = torch.randn(2, 3, 32, 32)
    assert torch.equal(mine.eval()(images), package.eval()(images))


def test_apply_diff_replaces_lines_in_order_and_says_which_lines_it_could_not_find():
    source = "a = 1\nb = 2\nc = 3\nd = 4\n"
    assert (
        apply_diff(source, " a = 1\n-b = 2\n+b = 20\n...\n d = 4\n+e = 5\n") == "a = 1\nb = 20\nc = 3\nd = 4\ne = 5\n"
    )
    with pytest.raises(DiffError, match="not in the loop it applies to:\nb = 3"):
        apply_diff(source, "-b = 3\n+b = 30\n")
    with pytest.raises(DiffError, match="not in the loop"):  # parts apply in order: "a" is behind "c"
        apply_diff(source, " c = 3\n...\n-a = 1\n")
    with pytest.raises(DiffError, match="no line to anchor"):
        apply_diff(source, "+z = 0\n")


def _lesson_function(name: str, tag: str | None = None) -> str:
    """The source of function ``name`` from the lesson's code cell that defines it (the cell tagged ``tag`` where
    several do)."""
    for cell in jupytext.read(LESSON).cells:
        if cell.cell_type != "code" or f"def {name}(" not in cell.source:
            continue
        if tag and tag not in cell.metadata.get("tags", []):
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return ast.get_source_segment(cell.source, node)
    raise AssertionError(f"lesson 12 has no code cell defining {name}" + (f" tagged {tag}" if tag else ""))


def test_the_take_home_loop_trains_the_same_model_as_the_exercises_solution():
    # One fast loop, two spellings: the solution (the reference) with colab_gpu's helpers and section 8's plain copy.
    # The same seed, sizes, statistics and random draws in the same order: the same weights, bit for bit.
    namespace = loaded("")  # the speed net's cell
    namespace["F"] = F
    for name, tag in (("random_crop", None), ("train_fast", "solution"), ("train_plain", None)):
        exec(compile(_lesson_function(name, tag), str(LESSON), "exec"), namespace)
    tiny = cg.load_digits(32, 3).limit(train=512, test=64)  # 8 steps of 64 per epoch: enough for OneCycleLR
    before = torch.backends.cudnn.benchmark
    reference = namespace["train_fast"](tiny, CPU, 2)
    plain, mean, std = namespace["train_plain"](tiny.train_images, tiny.train_labels, len(tiny.classes), CPU, 2)
    torch.backends.cudnn.benchmark = before
    assert torch.equal(mean.flatten(), tiny.normalization()[0]) and torch.equal(std.flatten(), tiny.normalization()[1])
    mine, theirs = plain.state_dict(), reference.state_dict()
    assert list(mine) == list(theirs)
    differ = [name for name in mine if not torch.equal(mine[name], theirs[name])]
    assert not differ, f"section 8's train_plain and the solution's train_fast train different weights: {differ}"


def test_the_take_home_loops_sizes_and_recipe_are_the_ladders_last_rung():
    # A CPU run compares the CPU's sizes only: the GPU's, retyped in the plain copy, are read here.
    source = _lesson_function("train_plain")
    sizes = next(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "(batch_size, width)"
    )
    on_gpu, on_cpu = ast.literal_eval(sizes.body), ast.literal_eval(sizes.orelse)
    for device, plain in (("cuda", on_gpu), ("cpu", on_cpu)):
        size = sr.ladder_size(device)
        assert plain == (size.large_batch, size.width), (device, plain)
    last = sr.ladder("cpu")[-1].recipe  # its lr and label smoothing are a CPU's and a GPU's alike
    for needle in (f"lr={last.lr}", f"label_smoothing={last.label_smoothing}", "speed_net(", "nesterov=True"):
        assert needle in source and needle in _lesson_function("train_fast", "solution"), needle
