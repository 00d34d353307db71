"""What lesson 10's first exercise asks of a labelled loop: each label holds the work it names, and the labels change no
line of the loop they label.

A profile's shares are only as true as its labels: "backward" around the optimizer's step reports the step's time as
the backward pass's. The profile itself says what ran inside each label (``profile_events.spans_of``): PyTorch names
the backward pass's work ``autograd::engine::evaluate_function: ...`` and an optimizer's step ``Optimizer.step#...``.
And a label is a ``with record_function(...)`` around lines that were there: the loop without its labels must be the
loop it was given, line for line (compared as code, ``ast``: comments and layout do not count).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from ..measure.profile_events import spans_of

# The events that show a phase's work, by name prefix: a label without any of them inside its time holds other work.
WORK = {
    "data": ("enumerate(DataLoader)#", "aten::"),
    "forward": ("aten::",),
    "backward": ("autograd::engine::evaluate_function",),
    "step": ("Optimizer.step#",),
}
SAYS = {
    "data": "taking the next batch and moving it to the device",
    "forward": "the model's forward pass and the loss",
    "backward": "loss.backward()",
    "step": "optimizer.step()",
}


def phase_without_its_work(prof: object) -> str | None:
    """The first of the four labels whose spans hold none of its work's events, as a hint; None when each does."""
    spans = [s for s in spans_of(prof) if not s.on_device]
    for label, prefixes in WORK.items():
        windows = [(s.start_us, s.end_us) for s in spans if s.name == label]
        inside = (s for s in spans if s.name != label and any(a <= s.start_us and s.end_us <= b for a, b in windows))
        if windows and not any(s.name.startswith(prefixes) for s in inside):
            return (
                f'your "{label}" label holds none of its work ({SAYS[label]}): its share of the profile is another '
                "phase's time. Put each label around the lines it names."
            )
    return None


class _Unlabelled(ast.NodeTransformer):
    """A function's body with each ``with record_function(...)`` replaced by the lines inside it."""

    def visit_With(self, node: ast.With):  # noqa: N802 (ast's visitor names)
        self.generic_visit(node)
        if all(_is_label(item.context_expr) for item in node.items):
            return node.body
        return node


def _is_label(expression: ast.expr) -> bool:
    function = expression.func if isinstance(expression, ast.Call) else None
    name = getattr(function, "attr", None) or getattr(function, "id", None)
    return name == "record_function"


def _statements(function: object) -> list[str] | None:
    """The function's statements without labels or docstring, one unparsed line each; None without its source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):  # defined where Python kept no source (exec of a string)
        return None
    definition = tree.body[0]
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    module = _Unlabelled().visit(ast.Module(body=body, type_ignores=[]))
    return [line for statement in module.body for line in _lines(statement)]


def _lines(statement: ast.stmt) -> list[str]:
    """A statement as lines: a simple one whole, a compound one as its header, then its nested statements."""
    nested = [s for field in ("body", "orelse", "finalbody") for s in getattr(statement, field, [])]
    if not nested:
        return [ast.unparse(statement)]
    return [ast.unparse(statement).splitlines()[0], *[line for s in nested for line in _lines(s)]]


def lines_changed(loop: object, given: object) -> str | None:
    """How ``loop`` with its labels taken away differs from ``given``, as a hint; None when it does not (or when
    either function's source cannot be read)."""
    mine, theirs = _statements(loop), _statements(given)
    if mine is None or theirs is None or mine == theirs:
        return None
    name = getattr(given, "__name__", "their loop")
    for yours, original in zip(mine, theirs, strict=False):
        if yours != original:
            return (
                f"labels wrap lines, they change none: your loop has `{yours}` where {name} has `{original}`. "
                f"Copy {name}'s lines as they are, and put the labels around them."
            )
    if len(mine) > len(theirs):
        extra = f"has lines {name} has not, from `{mine[len(theirs)]}`"
    else:
        extra = f"lacks {name}'s lines from `{theirs[len(mine)]}`"
    return (
        f"labels wrap lines, they change none: your loop {extra}. Copy {name}'s lines as they are, and put the labels "
        "around them."
    )
