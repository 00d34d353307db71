"""Mutants of an exercise's solution, the way mutation testing measures a test suite (check_mutants.py runs them).

Each mutant is one small change a learner could make, edited in the solution's text (its comments stay, so a check
that reads the text meets what a learner's cell holds): a statement deleted, two dependent statements swapped, a call
the lessons teach removed (``.to(device)``, ``.detach()``, a ``with torch.no_grad():`` unwrapped), a taught keyword
dropped (``non_blocking=``, ``device=``), a constant or a comparison flipped, ``device`` replaced by ``"cpu"``.
Deterministic: the same solution gives the same mutants, named by what they change (the names are the keys of the
reviewed list of equivalent mutants, tests/tooling/check_mutants_equivalent.toml).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from exercises import WRITEFILE

TAUGHT_CALLS = {"to", "detach", "cuda", "contiguous", "float", "long", "item", "cpu"}  # x.to(d) -> x
TAUGHT_CONTEXTS = {"no_grad", "inference_mode", "autocast", "enable_grad", "device", "record_function", "profile"}
TAUGHT_KEYWORDS = {
    "non_blocking",
    "pin_memory",
    "device",
    "dtype",
    "num_workers",
    "persistent_workers",
    "batch_size",
    "set_to_none",
    "use_reentrant",
    "enabled",
    "shuffle",
    "record_shapes",
}
# The mutants only a GPU tells apart from the solution: on a CPU runtime a check sees them only if it looks for them.
GPU_ONLY_KINDS = ("device->cpu", "drop .to", "drop .cuda", "drop non_blocking=", "drop pin_memory=")
SKIPPED_STATEMENTS = (ast.Import, ast.ImportFrom, ast.Pass, ast.Global, ast.Nonlocal)


@dataclass(frozen=True)
class Mutant:
    name: str  # "delete `optimizer.zero_grad()`": what it changes, stable when unrelated lines move
    source: str  # the mutated cell

    @property
    def gpu_only(self) -> bool:
        return self.name.startswith(GPU_ONLY_KINDS)


class _Text:
    """The solution's text with offsets for ast positions (line, column) -> index."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + len(self.text[self.starts[line - 1] :].encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.at(node.lineno, node.col_offset), self.at(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def replace(self, start: int, end: int, new: str) -> str:
        return self.text[:start] + new + self.text[end:]

    def lines(self, first: ast.stmt, last: ast.stmt) -> tuple[int, int]:
        """The whole lines from ``first`` to ``last`` (their comments and line ends included)."""
        return self.starts[first.lineno - 1], self.starts[last.end_lineno]


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bodies(tree: ast.AST):
    """Every statement list in the tree, with whether it is the module's own body."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body, node is tree


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _mutable(statement: ast.stmt, top: bool) -> bool:
    if isinstance(statement, SKIPPED_STATEMENTS) or _is_docstring(statement):
        return False
    # Deleting a whole top-level definition leaves the starting cell's: the undone exercise, run on its own.
    return not (top and isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def _names(statement: ast.stmt) -> tuple[set[str], set[str]]:
    stored, loaded = set(), set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            while isinstance(receiver, ast.Attribute):
                receiver = receiver.value
            if isinstance(receiver, ast.Name):
                stored.add(receiver.id)  # a method call may change its receiver
    return stored, loaded


def _dependent(a: ast.stmt, b: ast.stmt) -> bool:
    """Whether swapping a and b can change what the code does: one writes what the other reads or writes, both are
    calls made for their effects, or either leaves its block."""
    if isinstance(a, (ast.Return, ast.Break, ast.Continue, ast.Raise)) or isinstance(b, (ast.Return, ast.Raise)):
        return True
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if isinstance(a, definitions) and isinstance(b, definitions):
        return False  # a class's methods, a cell's functions: defined in any order, called later
    if all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) for s in (a, b)):
        return True  # two calls for their effects (backward, step): their order is the point
    (a_out, a_in), (b_out, b_in) = _names(a), _names(b)
    return bool(a_out & (b_in | b_out) or b_out & a_in)


def _statement_mutants(text: _Text, tree: ast.AST):
    for body, top in _bodies(tree):
        for statement in body:
            if not _mutable(statement, top):
                continue
            start, end = text.lines(statement, statement)
            indent = " " * statement.col_offset
            new = f"{indent}pass\n" if len(body) == 1 else ""  # a block cannot be empty
            yield f"delete `{_short(text.segment(statement))}`", text.replace(start, end, new)
        for a, b in zip(body, body[1:], strict=False):
            if _mutable(a, top) and _mutable(b, top) and _dependent(a, b):
                (a0, a1), (b0, b1) = text.lines(a, a), text.lines(b, b)
                if a1 <= b0:
                    swapped = text.text[:a0] + text.text[b0:b1] + text.text[a1:b0] + text.text[a0:a1] + text.text[b1:]
                    yield f"swap `{_short(text.segment(a), 30)}` and `{_short(text.segment(b), 30)}`", swapped


def _unwrap(text: _Text, node: ast.With) -> str:
    """The ``with`` block's body in its place, one level less indented."""
    first, last = node.body[0], node.body[-1]
    shift = first.col_offset - node.col_offset
    body = text.text[text.starts[first.lineno - 1] : text.starts[last.end_lineno]]
    lines = [line[shift:] if line[:shift].strip() == "" else line for line in body.splitlines(keepends=True)]
    start, end = text.lines(node, node)
    return text.text[:start] + "".join(lines) + text.text[end:]


def _call_name(call: ast.AST) -> str:
    func = call.func if isinstance(call, ast.Call) else call
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _keyword_span(text: _Text, call: ast.Call, keyword: ast.keyword) -> tuple[int, int]:
    """From the end of the argument before ``keyword`` to its end (its comma goes with it)."""
    arguments = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    index = arguments.index(keyword)
    if index:
        return text.span(arguments[index - 1])[1], text.span(keyword)[1]
    if len(arguments) > 1:
        return text.span(keyword)[0], text.span(arguments[1])[0]
    return text.span(keyword)


FLIPPED_OPS = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


def _flipped_constant(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 if value in (0, 1) else value * 2
    if isinstance(value, float):
        return value * 10 if value else 1.0
    return None


def _expression_mutants(text: _Text, tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TAUGHT_CALLS:
            start, end = text.span(node)
            yield (
                f"drop .{node.func.attr}(): `{_short(text.segment(node))}`",
                text.replace(start, end, text.segment(node.func.value)),
            )
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in TAUGHT_KEYWORDS:
                    start, end = _keyword_span(text, node, keyword)
                    yield f"drop {keyword.arg}=: `{_short(text.segment(node))}`", text.replace(start, end, "")
        if isinstance(node, ast.With) and any(_call_name(item.context_expr) in TAUGHT_CONTEXTS for item in node.items):
            yield f"unwrap `with {_short(text.segment(node.items[0].context_expr))}`", _unwrap(text, node)
        if isinstance(node, ast.Compare) and type(node.ops[0]) in FLIPPED_OPS:
            flipped = ast.Compare(node.left, [FLIPPED_OPS[type(node.ops[0])](), *node.ops[1:]], node.comparators)
            start, end = text.span(node)
            yield f"flip `{_short(text.segment(node))}`", text.replace(start, end, ast.unparse(flipped))
        if isinstance(node, ast.Constant) and _flipped_constant(node.value) is not None:
            start, end = text.span(node)
            new = repr(_flipped_constant(node.value))
            yield (
                f"constant {text.segment(node)} -> {new} in `{_short(_line_of(text, node), 40)}`",
                text.replace(start, end, new),
            )
        if isinstance(node, ast.Name) and node.id == "device" and isinstance(node.ctx, ast.Load):
            start, end = text.span(node)
            yield f"device->cpu in `{_short(_line_of(text, node), 50)}`", text.replace(start, end, '"cpu"')


def _line_of(text: _Text, node: ast.AST) -> str:
    return text.text[text.starts[node.lineno - 1] : text.starts[node.lineno]].strip()


def mutants(solution: str, cap: int = 40) -> list[Mutant]:
    """The solution's mutants, at most ``cap`` (evenly spread over all), each different from the solution and
    from the others in what Python runs."""
    header, body = "", solution
    found = WRITEFILE.match(solution)
    if found:  # the script the cell writes is what a learner edits
        header, body = solution[: found.end()], solution[found.end() :]
    text = _Text(body)
    tree = ast.parse(body)
    seen = {ast.dump(tree)}
    names: dict[str, int] = {}
    result = []
    for name, source in [*_statement_mutants(text, tree), *_expression_mutants(text, tree)]:
        try:
            dump = ast.dump(ast.parse(source))
        except SyntaxError:
            continue
        if dump in seen:
            continue
        seen.add(dump)
        names[name] = names.get(name, 0) + 1
        result.append(Mutant(name if names[name] == 1 else f"{name} #{names[name]}", header + source))
    if len(result) > cap:  # evenly spread, the first and the last included (the first alone for a cap of 1)
        result = [result[round(i * (len(result) - 1) / max(cap - 1, 1))] for i in range(cap)]
    return result
