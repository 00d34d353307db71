"""The package's JSON files read with one check each: a file cut short or edited by hand is refused by its name and
the field that is wrong, never with a raw ``JSONDecodeError`` or ``KeyError`` from deep inside a lesson."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def parsed(text: str, name: str, fields: dict[str, type], fix: str) -> dict:
    """``text`` as a JSON object that has each of ``fields`` with its type; else a ValueError that names ``name``,
    the field, and ``fix`` (what to do)."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{name} cannot be read ({err}): it is truncated or damaged. {fix}") from None
    return checked(data, name, fields, fix)


def checked(data: object, name: str, fields: dict[str, type], fix: str) -> dict:
    """``data`` when it is an object with each of ``fields`` of its type; else a ValueError naming the field."""
    if not isinstance(data, dict):
        raise ValueError(f"{name} holds a {type(data).__name__}, not a JSON object. {fix}")
    for field, kind in fields.items():
        if not isinstance(data.get(field), kind):
            raise ValueError(
                f"{name}: its field {field!r} is {type(data.get(field)).__name__}, not {kind.__name__}. {fix}"
            )
    return data


def write_atomically(path: Path, data: object) -> None:
    """``data`` as JSON into ``path``, whole or not at all: written beside it, then moved over it."""
    text = json.dumps(data, indent=2) + "\n"  # first: data that is not JSON leaves nothing behind
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}-", delete=False) as temporary:
        temporary.write(text)
    os.replace(temporary.name, path)
