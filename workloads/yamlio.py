"""Strict YAML loading with line numbers.

``load_yaml`` returns plain ``dict``/``list``/scalars, except that mappings are
:class:`LocDict` and sequences :class:`LocList`, which remember the line of every key and
item so that validation errors can name ``file:line key.path``. Duplicate keys are an
error (PyYAML silently keeps the last one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from workloads.errors import Problem

__all__ = ["LocDict", "LocList", "load_yaml", "read_yaml", "parse_yaml_text", "line_of"]


class LocDict(dict):
    """A dict that remembers the source line of each key (``key_lines``) and of itself."""

    line: int | None = None
    key_lines: dict[Any, int]
    file: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines = {}


class LocList(list):
    """A list that remembers the source line of each item (``item_lines``)."""

    line: int | None = None
    item_lines: list[int]
    file: str | None = None

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines = []


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that builds LocDict/LocList and rejects duplicate keys."""

    problems: list[Problem]
    filename: str | None


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> LocDict:
    loader.flatten_mapping(node)
    out = LocDict()
    out.line = node.start_mark.line + 1
    out.file = loader.filename
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in out:
            loader.problems.append(
                Problem(f"duplicate key {key!r} (first at line {out.key_lines[key]})",
                        str(key), loader.filename, line))
            continue
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
    return out


def _construct_sequence(loader: _StrictLoader, node: yaml.SequenceNode) -> LocList:
    out = LocList()
    out.line = node.start_mark.line + 1
    out.file = loader.filename
    for item in node.value:
        out.append(loader.construct_object(item, deep=True))
        out.item_lines.append(item.start_mark.line + 1)
    return out


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def parse_yaml_text(text: str, filename: str | None = None) -> tuple[Any, list[Problem]]:
    """Parse YAML text; returns (data, problems). Syntax errors become problems."""
    loader = _StrictLoader(text)
    loader.problems = []
    loader.filename = filename
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        msg = getattr(exc, "problem", None) or str(exc)
        return None, [Problem(f"invalid YAML: {msg}", "", filename, line)]
    finally:
        loader.dispose()
    return data, loader.problems


def read_yaml(path: str | Path, error_type: type[Exception]) -> tuple[Any, list[Problem]]:
    """Read a YAML file strictly: (data, problems). Raises ``error_type`` only when the
    file cannot be read or parsed; duplicate keys are returned as problems (the first
    value is kept) so that callers can report them with every other problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise error_type([Problem(f"cannot read file: {exc.strerror or exc}", "", str(path))]) from None
    data, problems = parse_yaml_text(text, str(path))
    if data is None and problems:
        raise error_type(problems)
    return data, problems


def load_yaml(path: str | Path, error_type: type[Exception]) -> Any:
    """Load a YAML file strictly; raise ``error_type`` (an ArchsimError) on any problem."""
    data, problems = read_yaml(path, error_type)
    if problems:
        raise error_type(problems)
    return data


def line_of(container: Any, key: Any) -> int | None:
    """Line of ``key`` inside a LocDict/LocList (or the container's own line)."""
    if isinstance(container, LocDict):
        return container.key_lines.get(key, container.line)
    if isinstance(container, LocList):
        if isinstance(key, int) and 0 <= key < len(container.item_lines):
            return container.item_lines[key]
        return container.line
    return None
