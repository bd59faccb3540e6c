"""Strict YAML loading with line numbers.

``load_yaml`` returns plain ``dict``/``list``/scalars, except that mappings are
:class:`LocDict` and sequences :class:`LocList`, which remember the line of every key and
item so that validation errors can name ``file:line key.path``. Duplicate keys are an
error (PyYAML silently keeps the last one).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml

from archsim.workloads.errors import Problem

__all__ = ["LocDict", "LocList", "load_yaml", "read_yaml", "parse_yaml_text", "parse_value",
           "line_of", "MAX_DEPTH"]


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
    """A mapping with its lines; a key written twice in the mapping itself is a problem, while
    a key it also receives from a YAML merge (``<<: *base``) is the usual override: the
    mapping's own value wins, as the YAML merge-key spec says."""
    own_nodes = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
    loader.flatten_mapping(node)
    out = LocDict()
    out.line = node.start_mark.line + 1
    out.file = loader.filename
    own_keys: set[Any] = set()
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        own = id(key_node) in own_nodes
        if key in out:                   # flattened: merge sources (last = highest
            if key in own_keys:          # precedence) come before the mapping's own keys
                loader.problems.append(
                    Problem(f"duplicate key {key!r} (first at line {out.key_lines[key]})",
                            str(key), loader.filename, line))
                continue
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
        if own:
            own_keys.add(key)
    return out


def _construct_sequence(loader: _StrictLoader, node: yaml.SequenceNode) -> LocList:
    out = LocList()
    out.line = node.start_mark.line + 1
    out.file = loader.filename
    for item in node.value:
        out.append(loader.construct_object(item, deep=True))
        out.item_lines.append(item.start_mark.line + 1)
    return out


#: Nesting depth (mappings + sequences) beyond which a document is refused. Real configs
#: nest < 10 levels; PyYAML's recursive composer would otherwise hit Python's recursion
#: limit (~1,000 frames, several per level) and die with a RecursionError.
MAX_DEPTH = 100

# YAML 1.1 (PyYAML's resolver) reads ``1e3`` and ``4.5e2`` as strings: its float pattern
# demands a dot and a signed exponent. YAML 1.2 and JSON read them as numbers, and so do
# users; this is the YAML 1.2 core-schema float pattern (plus YAML 1.1's forms).
_FLOAT_RE = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)

_StrictLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:float"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE,
                                    list("-+0123456789."))


def _compose_node(self: _StrictLoader, parent: Any, index: Any) -> Any:
    """PyYAML's composer with a depth limit (a ``Problem`` instead of a RecursionError)."""
    self.depth = getattr(self, "depth", 0) + 1
    try:
        if self.depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise yaml.YAMLError(_DepthMark(mark))
        return yaml.composer.Composer.compose_node(self, parent, index)
    finally:
        self.depth -= 1


class _DepthMark:
    """Carries the line of the too-deep node through ``yaml.YAMLError``."""

    def __init__(self, mark: Any) -> None:
        self.problem_mark = mark
        self.problem = (f"nested more than {MAX_DEPTH} levels deep; expected a config of a "
                        f"few levels")


_StrictLoader.compose_node = _compose_node  # type: ignore[assignment,method-assign]
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
        if exc.args and isinstance(exc.args[0], _DepthMark):
            exc = exc.args[0]  # type: ignore[assignment]
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        msg = getattr(exc, "problem", None) or str(exc)
        return None, [Problem(f"invalid YAML: {msg}", "", filename, line)]
    finally:
        loader.dispose()
    return data, loader.problems


#: ``parse_value`` results that are immutable scalars, by text (a sweep sets the same few
#: values on every point; lists and mappings are parsed afresh, callers may change them).
_SCALARS: dict[str, Any] = {}
_SCALAR_TYPES = (int, float, str, bool, type(None))


def parse_value(text: str) -> Any:
    """Parse one ``--set`` value the way the config files are parsed (YAML flow syntax with
    the same number rules: ``1e3`` is a float); text that is not valid YAML stays a string."""
    if text in _SCALARS:
        return _SCALARS[text]
    value = _parse_value(text)
    if isinstance(value, _SCALAR_TYPES) and len(_SCALARS) < 65536:
        _SCALARS[text] = value
    return value


def _parse_value(text: str) -> Any:
    loader = _StrictLoader(text)
    loader.problems = []
    loader.filename = "--set"
    try:
        data = loader.get_single_data()
    except yaml.YAMLError:
        return text
    finally:
        loader.dispose()
    return _plain(data)


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


#: Largest input file read whole (configs, problems, mappings, calibration rows): a design
#: is a few KB; anything this big is a wrong file, and reading it would stall the run.
MAX_INPUT_BYTES = 4 * 1024 * 1024


def read_input_bytes(path: str | Path, error_type: type[Exception],
                     max_bytes: int = MAX_INPUT_BYTES, what: str = "file") -> bytes:
    """The bytes of an input file, refusing before reading what would hang or flood a run:
    a FIFO, a device (``/dev/zero`` never ends), a folder, a file over ``max_bytes``.

    Raises:
        error_type: one problem naming the path and what was expected.
    """
    p = Path(path)

    def refuse(msg: str) -> Exception:
        return error_type([Problem(msg, "", str(path))])

    try:
        st = p.stat()
    except OSError as exc:
        raise refuse(f"cannot read file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise refuse(f"is a folder; expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or special file"
        raise refuse(f"is {kind}; expected a regular {what}")
    if st.st_size > max_bytes:
        raise refuse(f"is {st.st_size / 2**20:.1f} MiB; a {what} is read whole and is "
                     f"limited to {max_bytes / 2**20:.0f} MiB")
    try:
        with open(p, "rb") as fh:
            return fh.read(max_bytes + 1)[:max_bytes + 1]
    except OSError as exc:
        raise refuse(f"cannot read file: {exc.strerror or exc}") from None


def read_yaml(path: str | Path, error_type: type[Exception]) -> tuple[Any, list[Problem]]:
    """Read a YAML file strictly: (data, problems). Raises ``error_type`` only when the
    file cannot be read or parsed; duplicate keys are returned as problems (the first
    value is kept) so that callers can report them with every other problem."""
    raw = read_input_bytes(path, error_type, what="YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error_type([Problem(f"not a text file (byte 0x{raw[exc.start]:02x} at offset "
                                  f"{exc.start} is not UTF-8); expected a YAML file",
                                  "", str(path), line)]) from None
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
