"""Recognise an error of the atlas and say what to do: `explain`, and the ``%load_ext colab_gpu`` extension.

An error the atlas does not know passes through untouched: `explain` prints nothing (``show=False``: returns None),
and the extension shows IPython's usual traceback and nothing else. Taught in lesson 09.
"""

from __future__ import annotations

from .atlas import ENTRIES, AtlasEntry

_extension_loaded = False


def _texts(error: BaseException) -> list[str]:
    """``"Type: message"`` of an error and of the errors it was raised from (a worker's error, re-raised)."""
    texts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        texts.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    return texts


def find_entry(error: BaseException | str) -> AtlasEntry | None:
    """The atlas entry an exception (or a pasted message) matches, or None. Taught in lesson 09."""
    texts = [error] if isinstance(error, str) else _texts(error)
    for text in texts:
        for entry in ENTRIES:
            if entry.matches(text):
                return entry
    return None


def explain(error: BaseException | str, *, show: bool = True) -> AtlasEntry | None:
    """Print the cause and the fix of a known error (an exception, or its message pasted as text); for an unknown
    error print nothing. Like ``print``, it returns None, so a notebook cell that ends with it shows the explanation
    and nothing after it. ``show=False`` prints nothing and returns the error's atlas entry instead (None for an
    unknown error), to check which one it is. Taught in lesson 09.

    Example:
        >>> explain("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3072 and 784x10)", show=False).key
        'shapes-multiplied'
    """
    entry = find_entry(error)
    if not show:
        return entry
    if entry is not None:
        print(f"colab_gpu explains: {entry.format()}")
    return None


def extension_loaded() -> bool:
    """Whether ``%load_ext colab_gpu`` is active (`shows_error` then explains the errors it shows too)."""
    return _extension_loaded


def _traceback_then_explanation(shell, etype, value, tb, tb_offset=None):
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    explain(value)


def load_ipython_extension(ipython) -> None:
    """``%load_ext colab_gpu``: after the traceback of an error the atlas knows, print its cause and fix."""
    global _extension_loaded
    ipython.set_custom_exc((Exception,), _traceback_then_explanation)
    _extension_loaded = True


def unload_ipython_extension(ipython) -> None:
    """``%unload_ext colab_gpu``: IPython's own error display again."""
    global _extension_loaded
    ipython.set_custom_exc((), None)
    _extension_loaded = False
