"""The size rule of the package and of the tools: a module holds one topic, in at most `LIMIT` lines of code.

Lines of code are the lines of statements: docstrings, comments and blank lines do not count, nor does a data table
(a top-level assignment of a literal tuple, list, dict or set, such as the error atlas's entries). So a module is
split by topic, never to make room for its prose or its data. tests/test_imports.py holds the package to it,
tests/tooling/test_layout.py the tools.
"""

from __future__ import annotations

import ast
import io
import tokenize

LIMIT = 250
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _lines(node: ast.AST) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))


def exempt_lines(tree: ast.Module) -> set[int]:
    """The lines of ``tree``'s docstrings and of its top-level data tables."""
    exempt = set()
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and node.body and isinstance(first := node.body[0], ast.Expr):
            if isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                exempt |= _lines(first)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
            node.value, (ast.Tuple, ast.List, ast.Dict, ast.Set)
        ):
            exempt |= _lines(node)
    return exempt


def code_lines(source: str) -> int:
    """How many lines of ``source`` hold code (see the module's docstring)."""
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            code |= set(range(token.start[0], token.end[0] + 1))
    return len(code - exempt_lines(ast.parse(source)))
