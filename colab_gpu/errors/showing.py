"""Showing an error on purpose, so that a notebook's "Run all" still reaches its last cell.

Colab's and Kaggle's "Run all" stop at the first cell that raises: they ignore the ``raises-exception`` tag
that nbval and nbconvert honour. A lesson that reproduces an error therefore runs it inside
``with cg.shows_error(...)``: the learner sees the error as a notebook would show it (its type and message,
the line of their code that raised it, the fix), and the notebook goes on. When the expected error does
not happen, the cell fails: the lesson no longer shows what it says.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import logging
import os
import re
import sys
import sysconfig
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .atlas import ENTRIES
from .explain import extension_loaded, find_entry

_LIBRARY_DIRS = tuple(
    str(Path(path).resolve())
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(key))
) + (str(Path(__file__).resolve().parent),)


@dataclass
class ShownError:
    """What ``shows_error`` caught: ``error`` is the exception (None when none was expected here).

    Taught in lesson 09.
    """

    error: BaseException | None = None


def _is_library(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    resolved = str(Path(filename).resolve()) if not filename.startswith("<") else filename
    generated = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or "torchinductor_"  # code torch.compile wrote
    return (
        resolved.startswith(_LIBRARY_DIRS)
        or "site-packages" in resolved
        or "dist-packages" in resolved
        or generated in resolved
    )


def raising_line(tb: TracebackType | None) -> str | None:
    """The innermost line of the learner's own code in ``tb`` (not PyTorch's, Python's or colab_gpu's)."""
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if not _is_library(filename):
            found = linecache.getline(filename, lineno, frame.f_globals).strip() or found
    return found


def _atlas_entry(error: BaseException, key: str | None):
    """The atlas entry ``error`` matches; with ``key``, it must be that one (else PyTorch changed its wording)."""
    entry = find_entry(error)
    if key is not None and (entry is None or entry.key != key):
        known = {e.key for e in ENTRIES}
        raise AssertionError(
            f"the atlas entry {key!r} does not recognise {type(error).__name__}: "
            f"{_first_lines(str(error), 2)} (recognised as: {entry.key if entry else None}). "
            + (
                "Has PyTorch changed the message? Update colab_gpu/errors/atlas.py."
                if key in known
                else f"No such entry; the atlas has {sorted(known)}."
            )
        ) from error
    return entry


def _replay(captured: list[str]) -> None:
    """Print what ``quiet_children`` held back, when the block did not fail as expected."""
    if captured:
        print("\n".join(captured), file=sys.stderr)


def _first_lines(text: str, limit: int = 6) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:limit] + (["..."] if len(lines) > limit else []))


def _console_log_handlers() -> list[logging.StreamHandler]:
    """The logging handlers that write to this process's stdout or stderr as they were when the handler was made.

    Such a handler keeps the stream object itself: in a notebook, the kernel's, which neither a file-descriptor
    redirect nor ``redirect_stderr`` reaches: ``mp.spawn``'s "Terminating process ... via signal SIGTERM" warning
    went that way, through the ``torch`` logger's handler in torch 2.11."""
    consoles = {id(stream) for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    loggers = [logging.getLogger()] + [
        logger for logger in list(logging.Logger.manager.loggerDict.values()) if isinstance(logger, logging.Logger)
    ]
    return [
        handler
        for logger in loggers
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
        and "stream" in vars(handler)  # a stream of its own, not a property that follows sys.stderr
        and id(handler.stream) in consoles
    ]


@contextmanager
def _output_captured() -> Iterator[list[str]]:
    """Capture what this process and its children write to stdout and stderr, at the file-descriptor level.

    Child processes inherit file descriptors 1 and 2, so their tracebacks bypass ``sys.stderr``; the list
    receives the lines once the block ends. Log records this process writes to the console are captured too.
    """
    lines: list[str] = []
    saved = [os.dup(1), os.dup(2)]
    python_level = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as sink, contextlib.ExitStack() as logs:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        for handler in _console_log_handlers():
            logs.callback(handler.setStream, handler.setStream(python_level))
        try:
            with contextlib.redirect_stdout(python_level), contextlib.redirect_stderr(python_level):
                yield lines
        finally:
            logs.close()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            text = sink.read().decode(errors="replace") + python_level.getvalue()
            lines.extend(line for line in text.splitlines() if line.strip())


@contextmanager
def shows_error(
    expected: type[BaseException] | tuple[type[BaseException], ...],
    match: str | None = None,
    *,
    fix: str | None = None,
    raises: bool = True,
    quiet_children: bool = False,
    atlas: str | None = None,
) -> Iterator[ShownError]:
    """Run a block that must raise ``expected`` (message matching the regex ``match``), show it, go on.

    Every lesson shows its common error with it, from lesson 01; lesson 09 collects them.

    Prints the error's type and message, the line of the notebook's code that raised it and ``fix``. Like an
    uncaught error, it is kept in ``sys.last_value``/``sys.last_traceback``, so the failed frame stays alive
    until ``cg.cleanup()`` (lesson 07 teaches why that matters on a GPU).
    ``raises=False`` says this runtime does not raise it (a GPU-only error on a CPU runtime): the block must
    then run without error. Any other exception, or no exception when one is expected, fails the cell.
    ``quiet_children=True`` captures what the block and the processes it starts print (a crashing child's
    traceback) and shows one line instead: how many lines, and the last error line among them.
    ``atlas="key"``: the error must be the atlas's entry ``key`` (lesson 09; a changed wording fails the cell), and
    the entry's cause and fix are printed. With ``%load_ext colab_gpu`` any error the atlas knows is explained.

    Example:
        >>> with shows_error(ZeroDivisionError, match="division by zero"):
        ...     1 / 0
        ZeroDivisionError: division by zero
            raised by: 1 / 0
        (an expected error: the notebook goes on)
    """
    shown = ShownError()
    names = " or ".join(e.__name__ for e in (expected if isinstance(expected, tuple) else (expected,)))
    captured: list[str] = []
    try:
        with _output_captured() if quiet_children else contextlib.nullcontext(captured) as captured:
            yield shown
    except expected as err:
        if not raises:
            _replay(captured)
            raise
        if match is not None and not re.search(match, str(err)):
            _replay(captured)
            raise AssertionError(
                f"expected {names} matching {match!r}, got {type(err).__name__}: {_first_lines(str(err), 3)}"
            ) from err
        entry = _atlas_entry(err, atlas)
        shown.error = err
        sys.last_type, sys.last_value, sys.last_traceback = type(err), err, err.__traceback__
        if sys.version_info >= (3, 12):
            sys.last_exc = err
        print(_first_lines("".join(traceback.format_exception_only(type(err), err))))
        where = raising_line(err.__traceback__)
        if where:
            print(f"    raised by: {where}")
        if captured:
            errors = [line.strip() for line in captured if re.match(r"[\w.]*(Error|Exception)\b", line.strip())]
            summary = f"the error: {errors[-1]}" if errors else f"the last: {captured[-1].strip()}"
            print(f"    the block and its child processes printed {len(captured)} lines; {summary}")
        if fix:
            print(f"Fix: {fix}")
        if entry is not None and (atlas is not None or extension_loaded()):
            print(f"colab_gpu explains: {entry.format()}")
        print("(an expected error: the notebook goes on)")
        return
    except BaseException:
        _replay(captured)  # an unexpected error: what the children printed is what explains it
        raise
    if raises:
        _replay(captured)
        raise AssertionError(
            f"expected {names}{f' matching {match!r}' if match else ''} here, but the block ran "
            "without error: the lesson no longer shows what it says"
        )
    print(f"No {names} on this runtime: the block ran without error, as expected here.")
