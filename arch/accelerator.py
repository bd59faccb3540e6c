"""Loading an accelerator: YAML -> validated :class:`Accelerator` of :class:`~arch.base.Unit`.

File layout::

    name: tpu_like                 # required
    description: "..."             # optional
    technology: {node_nm: 28}      # process node of the logic (energy/area scaling)
    units:                         # one or more sub-accelerators
      - kind: spatial_array        # a registered family (arch.UNIT_KINDS)
        name: array                # optional; default: the kind
        ...                        # the family's Spec keys

Every problem in a file (and in ``--set`` overrides) is collected and raised as one
:class:`~workloads.errors.ConfigError` naming file, line and key path.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import archsim.arch.registry  # noqa: F401  (registers the families)
from archsim.arch.base import UNIT_KINDS, Unit
from archsim.arch.spec import PlausibilityWarning, SpecBuilder, UnusedKeyWarning, param
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.yamlio import LocDict, parse_value, read_yaml

__all__ = ["Accelerator", "TechnologySpec", "InterconnectSpec", "load", "load_data", "apply_overrides", "parse_override"]


@dataclass(frozen=True, kw_only=True)
class TechnologySpec:
    """Process technology of the accelerator's logic."""

    node_nm: float = param(45.0, doc="logic process node (energy/area scaling)", unit="nm",
                           min=3, max=180)


@dataclass(frozen=True, kw_only=True)
class InterconnectSpec:
    """How tensors move between the units of a heterogeneous design.

    ``shared_memory: true`` (the default when the key is absent): the units share one
    off-chip memory, a consumer reads what a producer wrote, no copy and no extra time;
    their memory capacity is shared. ``false``: each unit has its own memory and a tensor
    crossing units is copied over a link (``latency_ns + bytes / bandwidth_gbps``), read
    from the producer's DRAM and written to the consumer's; capacities add up.
    """

    shared_memory: bool = param(True, doc="units share one off-chip memory (no copies)")
    bandwidth_gbps: float = param(0.0, doc="link bandwidth between units' memories "
                                  "(shared_memory: false)", unit="GB/s", min=0)
    latency_ns: float = param(0.0, doc="per-transfer link latency", unit="ns", min=0)

    def check(self) -> list[tuple[str, str]]:
        if not self.shared_memory and not self.bandwidth_gbps > 0:
            return [("bandwidth_gbps", "must be > 0 when shared_memory is false")]
        return []


_TOP_KEYS = ("name", "description", "technology", "interconnect", "units")
#: Most sub-accelerators one design may list: heterogeneous chips have a handful; every op is
#: costed on every unit, so thousands would make each evaluation crawl (a config mistake).
MAX_UNITS = 256
_UNIT_META = ("kind", "name")


class Accelerator:
    """A validated accelerator: named units plus technology.

    Attributes:
        name: design name.
        description: free text.
        source: the YAML file it came from ("" if built in code).
        technology: :class:`TechnologySpec`.
        units: the sub-accelerators, in file order.
        interconnect: :class:`InterconnectSpec` (transfers and memory capacity between
            units; the default shares one memory).
        raw: the plain (JSON-able) config tree after overrides, for hashing/reporting.
    """

    def __init__(self, name: str, units: list[Unit], technology: TechnologySpec,
                 description: str = "", source: str = "", raw: dict | None = None,
                 interconnect: InterconnectSpec | None = None) -> None:
        self.name = name
        self.units = tuple(units)
        self.technology = technology
        self.interconnect = interconnect or InterconnectSpec()
        self.description = description
        self.source = source
        self.raw = raw or {}

    def unit(self, name: str) -> Unit:
        """The unit called ``name`` (KeyError if none)."""
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(name)

    def components(self) -> list[Any]:
        """All energy/area components of all units."""
        out: list[Any] = []
        for u in self.units:
            out.extend(u.components())
        return out

    def config_hash(self) -> str:
        """SHA-256 (16 hex digits) of the canonical config tree."""
        blob = json.dumps(self.raw, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def __repr__(self) -> str:
        kinds = ", ".join(f"{u.name}:{u.kind}" for u in self.units)
        return f"Accelerator({self.name!r}, units=[{kinds}])"


# ---- overrides -----------------------------------------------------------------------------
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def parse_override(text: str) -> tuple[list[str | int], Any, str]:
    """Parse ``units[0].sm_count=144`` into (path tokens, value, path text).

    The value is parsed as a YAML scalar/flow value (``144`` -> int, ``[1, 2]`` -> list).
    """
    if "=" not in text:
        raise ConfigError(Problem(f"override {text!r} must look like key.path=value", "", "--set"))
    path_text, value_text = text.split("=", 1)
    path_text = path_text.strip()
    tokens: list[str | int] = []
    pos = 0
    while pos < len(path_text):
        if path_text[pos] == ".":
            pos += 1
            continue
        m = _TOKEN.match(path_text, pos)
        if not m:
            raise ConfigError(Problem(f"cannot parse key path {path_text!r}", path_text, "--set"))
        tokens.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not tokens:
        raise ConfigError(Problem("empty key path", "", "--set"))
    value = parse_value(value_text) if value_text.strip() else ""
    return tokens, value, path_text


def apply_overrides(data: Any, overrides: Iterable[str]) -> tuple[Any, set[str]]:
    """Apply ``--set`` overrides to a loaded tree; returns (tree copy, overridden paths)."""
    data = copy.deepcopy(data)
    touched: set[str] = set()
    problems: list[Problem] = []
    for text in overrides:
        tokens, value, path_text = parse_override(text)
        node = data
        ok = True
        for i, tok in enumerate(tokens[:-1]):
            nxt = node[tok] if _has(node, tok) else None
            if not isinstance(nxt, (dict, list)):
                where = _path_text(tokens[: i + 1])
                problems.append(Problem(f"no mapping or list at {where!r} to override", path_text,
                                        "--set"))
                ok = False
                break
            node = nxt
        if not ok:
            continue
        last = tokens[-1]
        if isinstance(node, list):
            if not isinstance(last, int) or not 0 <= last < len(node):
                problems.append(Problem(f"index {last} out of range", path_text, "--set"))
                continue
            node[last] = value
        elif isinstance(node, dict) and isinstance(last, str):
            node[last] = value
            if isinstance(node, LocDict):
                node.key_lines.pop(last, None)
        else:
            problems.append(Problem("cannot set this key", path_text, "--set"))
            continue
        touched.add(_path_text(tokens))
    if problems:
        raise ConfigError(problems)
    return data, touched


def _has(node: Any, tok: str | int) -> bool:
    if isinstance(node, dict):
        return tok in node
    if isinstance(node, list):
        return isinstance(tok, int) and 0 <= tok < len(node)
    return False


def _path_text(tokens: list[str | int]) -> str:
    out = ""
    for t in tokens:
        out += f"[{t}]" if isinstance(t, int) else (f".{t}" if out else t)
    return out


# ---- loading ---------------------------------------------------------------------------------
def load(path: str | Path, overrides: Iterable[str] = ()) -> Accelerator:
    """Load and validate an accelerator config file, with optional ``--set`` overrides.

    Raises:
        ConfigError: every problem in the file and the overrides, with file:line key.path.
    """

    data, problems = read_yaml(path, ConfigError)
    return load_data(data, str(path), overrides, problems)


def load_data(data: Any, file: str = "<config>", overrides: Iterable[str] = (),
              problems: Iterable[Problem] = ()) -> Accelerator:
    """Validate an already-parsed config tree (see :func:`load`)."""

    overrides = list(overrides)
    touched: set[str] = set()
    if overrides:
        data, touched = apply_overrides(data, overrides)
    b = SpecBuilder(file)
    b.problems.extend(problems)
    if not isinstance(data, dict):
        raise ConfigError(Problem("expected a mapping at the top of the file", "", file, 1))
    for k in data:
        if k not in _TOP_KEYS:
            b.problem(f"unknown key {k!r}; allowed keys: {', '.join(_TOP_KEYS)}", str(k), data, k)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        b.problem("missing or empty required key (string: the design's name)", "name", data, "name")
        name = ""  # reported: load_data raises ConfigError before building the Accelerator
    description = data.get("description", "")
    if not isinstance(description, str):
        b.problem("expected string", "description", data, "description")
    tech = TechnologySpec()
    if "technology" in data:
        tech = b.build(TechnologySpec, data["technology"], "technology", data, "technology") or tech
    ic = InterconnectSpec()
    if "interconnect" in data:
        ic = (b.build(InterconnectSpec, data["interconnect"], "interconnect", data,
                      "interconnect") or ic)
    units: list[Unit] = []
    raw_units = data.get("units")
    if not isinstance(raw_units, list) or not raw_units:
        b.problem("expected a non-empty list of units", "units", data, "units")
        raw_units = []
    elif len(raw_units) > MAX_UNITS:
        b.problem(f"{len(raw_units)} units; a design holds at most {MAX_UNITS} sub-accelerators "
                  f"(a cluster of devices is a cluster file: configs/cluster/)", "units", data,
                  "units")
        raw_units = []
    names: set[str] = set()
    for i, u in enumerate(raw_units):
        upath = f"units[{i}]"
        if not isinstance(u, dict):
            b.problem("expected a mapping", upath, raw_units, i)
            continue
        kind = u.get("kind")
        if kind not in UNIT_KINDS:
            b.problem(f"unknown or missing kind {kind!r}; expected one of: "
                      f"{', '.join(sorted(UNIT_KINDS))}", f"{upath}.kind", u, "kind")
            continue
        cls = UNIT_KINDS[kind]
        uname = u.get("name", kind)
        if not isinstance(uname, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", uname):
            b.problem("name must be a non-empty string of letters, digits, _ or -", f"{upath}.name",
                      u, "name")
            continue
        if uname in names:
            b.problem(f"duplicate unit name {uname!r}", f"{upath}.name", u, "name")
        names.add(uname)
        body = LocDict({k: v for k, v in u.items() if k not in _UNIT_META})
        if isinstance(u, LocDict):
            body.key_lines = {k: v for k, v in u.key_lines.items() if k not in _UNIT_META}
            body.line = u.line
        spec = b.build(cls.Spec, body, upath, raw_units, i)
        if spec is not None:
            units.append(cls(uname, spec, tech.node_nm))
    problems = b.problems
    if touched:
        problems = _relabel(problems, touched)
    if problems:
        raise ConfigError(problems)
    for w in _relabel(b.warnings, touched):
        warnings.warn(str(w), PlausibilityWarning, stacklevel=3)
    for w in _relabel(b.unused, touched):
        warnings.warn(str(w), UnusedKeyWarning, stacklevel=3)
    return Accelerator(name, units, tech, description, file, _plain(data), ic)


#: ``--runtime X`` is the override ``units[0].runtime=X`` (``archsim/cli/common.py``); on a
#: unit whose spec has no ``runtime`` key its error names the flag and the designs that have one.
_RUNTIME_PATH = re.compile(r"units\[\d+\]\.runtime")


def _relabel(problems: list[Problem], touched: set[str]) -> list[Problem]:
    """Problems of overridden keys name ``--set`` instead of the file's line (``--runtime``
    for an unknown ``runtime`` key: a unit kind without runtime protocols)."""
    out = []
    for p in problems:
        if not any(p.path == t or p.path.startswith(t + ".") for t in touched):
            out.append(p)
        elif _RUNTIME_PATH.fullmatch(p.path) and p.message.startswith("unknown key"):
            out.append(Problem(
                "this unit has no runtime protocol; --runtime (= --set units[0].runtime=X) "
                "applies only to tensor-core GPU designs (units of kind tensor_core_gpu: "
                "the configs in configs/gpu/, e.g. gpu/h100; 'archsim list configs')", "",
                "--runtime", None))
        else:
            out.append(Problem(p.message, p.path, "--set", None))
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x
