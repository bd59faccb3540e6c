"""User mapping constraints: fix or restrict unit, dataflow, loop-nest factors and loop order
per op kind, op role (``workloads.tags.ROLES``) or op name (glob), read strictly from YAML.

File layout (``archsim map CONFIG --model M --constraints cons.yaml``)::

    rules:
      - ops: "layer1.*"          # glob on op names (fnmatch); default "*"
        kind: conv2d             # op kind or list of kinds (optional)
        role: [qk, attn, av]     # op role or list of roles (optional; workloads/tags.py)
        unit: nvdla              # unit name or list: only these units may run the ops
        dataflow: [ws, os]       # matrix ops: allowed named dataflows
        factors:                 # matrix ops: fixed loop-nest factors, GEMM view
          rows: {K: 64}          #   slots rows | cols | rf | glb | dram,
          cols: {N: 32}          #   dims M | N | K (Conv2d: M = N*P*Q, N = K, K = C*R*S)
        loop_order: {glb: MNK, dram: NKM}   # outermost first, a permutation of MNK

Every rule whose ``ops`` glob, ``kind`` and ``role`` match an op applies; later rules override the
keys set by earlier ones (factors merge per slot and dim). ``unit`` applies to every op;
``dataflow``, ``factors`` and ``loop_order`` apply to matrix ops (vector ops have no loop
nest) and ``factors``/``loop_order`` force the loop-nest search for the ops they match.

Errors: a malformed file raises one :class:`~workloads.errors.MappingError` listing every
problem with ``file:line key.path``; constraints that leave an op without a feasible
(unit, mapping) raise a MappingError naming the op and the rule's line (see
``mapper.schedule.map_workload``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archsim.dataflow.mapping import DATAFLOW_CONSTRAINTS, DIMS, DRAM, GLB, RF, SCOL, SROW
from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.ops import Op
from archsim.workloads.tags import ROLES
from archsim.workloads.yamlio import line_of, parse_yaml_text, read_yaml

__all__ = ["Rule", "OpConstraint", "Constraints", "load_constraints", "parse_constraints",
           "SLOT_NAMES", "op_kinds"]

#: YAML slot name -> loop-nest slot of :class:`dataflow.Mapping`.
SLOT_NAMES = {"rows": SROW, "cols": SCOL, "rf": RF, "glb": GLB, "dram": DRAM}
_RULE_KEYS = ("ops", "kind", "role", "unit", "dataflow", "factors", "loop_order")
_ORDER_KEYS = ("glb", "dram")


def op_kinds() -> tuple[str, ...]:
    """Every op kind defined in :mod:`workloads.ops` (for validating ``kind:``)."""

    out: set[str] = set()
    todo = list(Op.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        k = getattr(c, "kind", "")
        if k and not k.startswith("_") and k != "op":
            out.add(k)
    return tuple(sorted(out))


@dataclass(frozen=True)
class Rule:
    """One validated rule (see the module docstring); ``line`` is its line in ``file``."""

    ops: str = "*"
    kinds: tuple[str, ...] | None = None
    units: tuple[str, ...] | None = None
    dataflows: tuple[str, ...] | None = None
    factors: tuple[tuple[int, int, int], ...] = ()       # (slot, dim, value)
    order_glb: tuple[int, int, int] | None = None
    order_dram: tuple[int, int, int] | None = None
    file: str | None = None
    line: int | None = None
    index: int = 0
    key_lines: tuple[tuple[str, int], ...] = ()
    roles: tuple[str, ...] | None = None

    def matches(self, op: Any) -> bool:
        if self.kinds is not None and op.kind not in self.kinds:
            return False
        if self.roles is not None and op.role not in self.roles:
            return False
        return fnmatch.fnmatchcase(op.name, self.ops)

    def where(self, key: str = "") -> Problem:
        """A Problem locator for this rule (or one of its keys)."""
        line = dict(self.key_lines).get(key, self.line) if key else self.line
        path = f"rules[{self.index}]" + (f".{key}" if key else "")
        return Problem("", path, self.file, line)


@dataclass(frozen=True)
class OpConstraint:
    """The merged constraints of one op.

    Attributes:
        units: allowed unit names (None: any).
        dataflows: allowed dataflows for matrix ops (None: any).
        fixed: fixed loop-nest factors as (slot, dim, value).
        order_glb, order_dram: fixed loop orders (outermost first) or None.
        rules: the rules that matched, for error messages.
    """

    units: tuple[str, ...] | None = None
    dataflows: tuple[str, ...] | None = None
    fixed: tuple[tuple[int, int, int], ...] = ()
    order_glb: tuple[int, int, int] | None = None
    order_dram: tuple[int, int, int] | None = None
    rules: tuple[Rule, ...] = field(default=(), compare=False)

    @property
    def needs_search(self) -> bool:
        """Factor or loop-order constraints need the loop-nest search."""
        return bool(self.fixed) or self.order_glb is not None or self.order_dram is not None

    @property
    def nest_key(self) -> tuple:
        """Hashable key of the loop-nest constraints (for search caches)."""
        return (self.fixed, self.order_glb, self.order_dram)

    def where(self) -> str:
        """``file:line`` of the matching rules, for messages."""
        locs = []
        for r in self.rules:
            loc = f"{r.file}:{r.line}" if r.file and r.line else f"rules[{r.index}]"
            locs.append(loc)
        return ", ".join(locs)


@dataclass(frozen=True)
class Constraints:
    """A validated constraints file: rules in file order."""

    rules: tuple[Rule, ...] = ()
    file: str | None = None

    def for_op(self, op: Any) -> OpConstraint | None:
        """Merged constraints of ``op`` (None when no rule matches)."""
        hit = [r for r in self.rules if r.matches(op)]
        if not hit:
            return None
        units = dataflows = og = od = None
        fixed: dict[tuple[int, int], int] = {}
        for r in hit:
            units = r.units if r.units is not None else units
            if op.is_matrix:
                dataflows = r.dataflows if r.dataflows is not None else dataflows
                for s, d, v in r.factors:
                    fixed[(s, d)] = v
                og = r.order_glb if r.order_glb is not None else og
                od = r.order_dram if r.order_dram is not None else od
        return OpConstraint(units, dataflows, tuple((s, d, v) for (s, d), v in
                                                    sorted(fixed.items())), og, od, tuple(hit))

    def check_against(self, unit_names: tuple[str, ...],
                      dataflows: tuple[str, ...]) -> list[Problem]:
        """Problems for unit names / dataflows the accelerator does not have."""
        out: list[Problem] = []
        for r in self.rules:
            for u in r.units or ():
                if u not in unit_names:
                    w = r.where("unit")
                    out.append(Problem(f"unknown unit {u!r}; this design's units: "
                                       f"{', '.join(unit_names)}", w.path, w.file, w.line))
            for df in r.dataflows or ():
                if df not in dataflows:
                    w = r.where("dataflow")
                    out.append(Problem(f"no unit of this design has dataflow {df!r}; "
                                       f"available: {', '.join(dataflows)}", w.path, w.file,
                                       w.line))
        return out


def load_constraints(path: str | Path) -> Constraints:
    """Read and validate a constraints file (MappingError with file:line on any problem)."""
    data, problems = read_yaml(path, MappingError)
    return _build(data, str(path), problems)


def parse_constraints(text: str, filename: str = "<constraints>") -> Constraints:
    """Validate constraints given as YAML text (tests, inline use)."""
    data, problems = parse_yaml_text(text, filename)
    if data is None and problems:
        raise MappingError(problems)
    return _build(data, filename, problems)


def _perm(text: Any) -> tuple[int, int, int] | None:
    if not isinstance(text, str) or sorted(text.upper()) != sorted("MNK") or len(text) != 3:
        return None
    a, b, c = (DIMS.index(ch) for ch in text.upper())
    return a, b, c


def _names(v: Any) -> tuple[str, ...] | None:
    if isinstance(v, str) and v:
        return (v,)
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return tuple(v)
    return None


def _build(data: Any, file: str, problems: list[Problem]) -> Constraints:
    probs = list(problems)

    def bad(msg: str, path: str, container: Any, key: Any) -> None:
        probs.append(Problem(msg, path, file, line_of(container, key)))

    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise MappingError(Problem("expected a mapping with key 'rules'", "", file, 1))
    for k in data:
        if k != "rules":
            bad(f"unknown key {k!r}; allowed keys: rules", str(k), data, k)
    raw = data.get("rules", [])
    if not isinstance(raw, list):
        bad("expected a list of rules", "rules", data, "rules")
        raw = []
    def one_of(r: dict, base: str, key: str, allowed: tuple[str, ...]
               ) -> tuple[str, ...] | None:
        """The names under ``r[key]`` (op kinds or roles; None when absent), each checked
        against ``allowed``."""
        if key not in r:
            return None
        names = _names(r[key])
        if names is None or any(x not in allowed for x in names):
            bad(f"expected an op {key} or a list of them: {', '.join(allowed)}; got "
                f"{r[key]!r}", f"{base}.{key}", r, key)
        return names

    kinds = op_kinds()
    rules: list[Rule] = []
    for i, r in enumerate(raw):
        base = f"rules[{i}]"
        if not isinstance(r, dict):
            bad("expected a mapping", base, raw, i)
            continue
        n0 = len(probs)
        for k in r:
            if k not in _RULE_KEYS:
                bad(f"unknown key {k!r}; allowed keys: {', '.join(_RULE_KEYS)}",
                    f"{base}.{k}", r, k)
        ops = r.get("ops", "*")
        if not isinstance(ops, str) or not ops:
            bad("expected a glob string on op names (e.g. 'layer1.*')", f"{base}.ops", r, "ops")
        kk = one_of(r, base, "kind", kinds)
        roles = one_of(r, base, "role", tuple(x for x in ROLES if x))
        units = None
        if "unit" in r:
            units = _names(r["unit"])
            if units is None:
                bad("expected a unit name or a list of unit names", f"{base}.unit", r, "unit")
        dfs = None
        if "dataflow" in r:
            dfs = _names(r["dataflow"])
            if dfs is None:
                bad("expected a dataflow name or a list of them", f"{base}.dataflow", r,
                    "dataflow")
        fixed: list[tuple[int, int, int]] = []
        if "factors" in r:
            f = r["factors"]
            if not isinstance(f, dict):
                bad("expected a mapping slot -> {dim: factor}; slots: "
                    f"{', '.join(SLOT_NAMES)}", f"{base}.factors", r, "factors")
            else:
                for slot, dims in f.items():
                    sp = f"{base}.factors.{slot}"
                    if slot not in SLOT_NAMES:
                        bad(f"unknown slot {slot!r}; expected one of {', '.join(SLOT_NAMES)}",
                            sp, f, slot)
                        continue
                    if not isinstance(dims, dict):
                        bad("expected a mapping dim -> factor, e.g. {K: 16}", sp, f, slot)
                        continue
                    for dim, v in dims.items():
                        dp = f"{sp}.{dim}"
                        if dim not in DIMS:
                            bad(f"unknown dim {dim!r}; expected M, N or K (the GEMM view)",
                                dp, dims, dim)
                        elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
                            bad(f"expected an int >= 1, got {v!r}", dp, dims, dim)
                        else:
                            fixed.append((SLOT_NAMES[slot], DIMS.index(dim), v))
        og = od = None
        if "loop_order" in r:
            lo = r["loop_order"]
            if not isinstance(lo, dict):
                bad("expected a mapping {glb: MNK, dram: NKM}", f"{base}.loop_order", r,
                    "loop_order")
            else:
                for k, v in lo.items():
                    p = f"{base}.loop_order.{k}"
                    if k not in _ORDER_KEYS:
                        bad(f"unknown level {k!r}; expected glb or dram", p, lo, k)
                        continue
                    perm = _perm(v)
                    if perm is None:
                        bad(f"expected a permutation of MNK (outermost first), got {v!r}", p,
                            lo, k)
                    elif k == "glb":
                        og = perm
                    else:
                        od = perm
        if len(probs) > n0:
            continue
        key_lines = tuple((str(k), line_of(r, k) or 0) for k in r)
        rules.append(Rule(ops if isinstance(ops, str) else "*", kk, units, dfs, tuple(fixed),
                          og, od, file, line_of(raw, i), i, key_lines, roles))
    if probs:
        raise MappingError(probs)
    return Constraints(tuple(rules), file)


def known_dataflows() -> tuple[str, ...]:
    """Loop-nest dataflow names (``dataflow.DATAFLOW_CONSTRAINTS``)."""
    return tuple(DATAFLOW_CONSTRAINTS)
