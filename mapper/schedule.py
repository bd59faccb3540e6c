"""Op -> unit assignment and the resulting schedule.

``map_workload`` builds, for every op, one candidate per unit that can run it (the unit's
estimate with its default mapping, or with the best loop-nest mapping of the search, under
the user's constraints), then assigns and schedules the DAG with the list scheduler of
:mod:`mapper.hetero` (overlap of independent ops on different units, transfer costs between
units). A one-unit design runs its ops back to back in topological order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from archsim import energy
from archsim.arch.accelerator import Accelerator
from archsim.arch.base import Estimate, Unit
from archsim.dataflow.nest import lower_bound_cycles
from archsim.mapper.constraints import Constraints, load_constraints
from archsim.mapper.einsum_dataflow import dataflow_constraints
from archsim.mapper.gemm_search import best_mapping, refine_with_simulation
from archsim.mapper.hetero import HeteroPlan, Link, Option, Transfer, list_schedule
from archsim.mapper.objective import OBJECTIVES, objective_value
from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Op

__all__ = ["OBJECTIVES", "Assignment", "Schedule", "map_workload", "objective_value",
           "op_signature", "link_of", "clear_einsum_memo"]

@dataclass(frozen=True)
class Assignment:
    """One op placed on one unit with one mapping, and its estimate."""

    op: Op
    unit: Unit
    mapping: Any
    estimate: Estimate
    energy_j: float


@dataclass(frozen=True)
class Schedule:
    """Ops in execution order with their assignments.

    Attributes:
        assignments: one per op, in topological order.
        start_s, end_s: per-op start/end times (seconds); ops run back to back unless the
            scheduler overlapped independent ops on different units.
        transfers: cross-unit tensor transfers (``mapper.hetero.Transfer``).
        link: the transfer model used.
        plan: the scheduler's plan (placement order, strategy), for re-timing.
        edges: ``(producer index, consumer index, bytes)`` of the DAG, indices into
            ``assignments``.
    """

    assignments: tuple[Assignment, ...]
    start_s: tuple[float, ...]
    end_s: tuple[float, ...]
    transfers: tuple[Transfer, ...] = ()
    link: Link = Link()
    plan: HeteroPlan | None = None
    edges: tuple[tuple[int, int, float], ...] = ()

    @property
    def latency_s(self) -> float:
        return max(self.end_s) if self.end_s else 0.0


def link_of(acc: Accelerator) -> Link:
    """The design's transfer model from its ``interconnect`` (shared memory by default)."""
    ic = acc.interconnect
    if ic.shared_memory:
        return Link()
    return Link(float(ic.bandwidth_gbps), float(ic.latency_ns) * 1e-9)


def _dram_j_per_byte(acc: Accelerator) -> list[tuple[float, float]]:
    """Per unit (DRAM read J/B, DRAM write J/B) from its ``dram`` component (0 if none)."""

    tech = energy.Technology(node_nm=acc.technology.node_nm)
    out = []
    for u in acc.units:
        d = [c for c in u.components() if c.cls == "dram"]
        if not d:
            out.append((0.0, 0.0))
            continue
        out.append((energy.energy_per_action_pj(d[0], "read", tech) * 1e-12,
                    energy.energy_per_action_pj(d[0], "write", tech) * 1e-12))
    return out


def _candidates(op: Op, unit: Unit, objective: str, search: bool, oc: Any,
                op_energy: Callable[[Unit, Estimate], float] | None, refine: int = 0,
                memo: bool = True) -> tuple[Assignment | None, str]:
    """The best (unit, mapping) candidate of ``op`` on ``unit`` under constraints ``oc``,
    or (None, reason).

    Candidates, for every family alike: with neither search nor constraints, the unit's
    default mapping; otherwise every mapping of ``unit.mapping_space(op, oc)`` and, where
    the unit has a loop-nest space (``unit.loop_nest(op)``), the best loop nest of
    :func:`mapper.gemm_search.best_mapping` (optionally re-ranked by the cycle simulator).
    """
    if oc is not None and oc.units is not None and unit.name not in oc.units:
        return None, f"excluded by the unit constraint ({oc.where()})"
    why = unit.supports(op)
    if why:
        return None, why
    dfs = None
    if oc is not None and oc.dataflows is not None and op.is_matrix:
        dfs = tuple(d for d in unit.dataflows() if d in oc.dataflows)
        if not dfs:
            return None, (f"none of its dataflows {', '.join(unit.dataflows()) or '-'} is "
                          f"allowed by the constraints ({oc.where()})")
    needs_search = oc is not None and oc.needs_search
    nest = (search or needs_search) and unit.loop_nest(op) is not None
    if needs_search and not nest:
        return None, f"factor / loop-order constraints need a loop-nest unit ({oc.where()})"
    mappings: list[Any]
    if nest and (search or needs_search):

        kw: dict[str, Any] = {}
        if oc is not None:
            kw = {"fixed": oc.fixed, "order_glb": oc.order_glb, "order_dram": oc.order_dram}
        r = best_mapping(unit, op, objective, dataflows=dfs, **kw)
        if r is None and oc is not None and (needs_search or dfs is not None):
            return None, f"no loop-nest mapping satisfies the constraints ({oc.where()})"
        if r is not None and refine > 0:
            rr, _ = refine_with_simulation(unit, op, objective, refine, dataflows=dfs, **kw)
            r = rr or r
        mappings = [unit.parse_mapping(r.mapping if r is not None else None)]
        es = unit.einsum_space(op) if objective in OBJECTIVES and not needs_search else None
        if es is not None and not (r is not None and objective == "latency"
                                   and _nest_cannot_win(unit, op, mappings[0], es)):
            # the Einsum nest (a convolution's 7-D nest, a GEMM's with its batch / head
            # dims) competes with the GEMM view, under each allowed named dataflow when the
            # constraints name some (unless the GEMM view already reaches the nest's lower
            # bound, which no nest can beat on latency)
            for df in dfs or (None,):
                nm = _einsum_best(es, objective, memo, df)
                if nm is not None:
                    m = unit.parse_mapping(nm)
                    mappings.append(replace(m, dataflow=df) if df else m)
    elif search or dfs is not None:
        mappings = list(unit.mapping_space(op, oc if dfs is not None else None))
    else:
        mappings = [unit.parse_mapping(None)]
    best: tuple[float, Assignment] | None = None
    reason = "no mapping in its mapping space"
    for mapping in mappings:
        est = unit.estimate(op, mapping)
        if not est.feasible:
            reason = est.reason
            continue
        if dfs is not None and est.dataflow not in dfs:
            reason = (f"its estimate uses dataflow {est.dataflow!r}, not one allowed by the "
                      f"constraints ({oc.where()})")
            continue
        e = op_energy(unit, est) if op_energy else 0.0
        cost = objective_value(objective, est.latency_s, e)
        if best is None or cost < best[0]:
            best = (cost, Assignment(op, unit, mapping, est, e))
    if best is None:
        return None, reason
    return best[1], ""


def _nest_cannot_win(unit: Unit, op: Op, mapping: Any, space: tuple[Any, Any]) -> bool:
    """True when ``mapping`` runs ``op`` in no more cycles than any nest of ``space``
    (``(problem, hierarchy)``) can (:func:`dataflow.nest.lower_bound_cycles`): a nest
    search for the ``latency`` objective cannot win (the first of equal candidates is kept)
    and is skipped."""
    problem, hier = space
    est = unit.estimate(op, mapping)
    return est.feasible and est.cycles <= lower_bound_cycles(problem, hier)


#: Candidates the 7-D Einsum nest search judges per (problem, hierarchy, objective): a fixed
#: count (not a time budget), so a search gives the same mapping on any machine.
EINSUM_EVALUATIONS = 100_000
#: Searched mappings by (problem signature, hierarchy, constraints, objective): layers of
#: the same shape on the same unit share one search (the name of the op is not in the key).
_EINSUM_MEMO: dict[tuple[Any, ...], Any] = {}


def clear_einsum_memo() -> None:
    """Forget every memoised Einsum search (:func:`map_workload` with ``reuse_searches``)."""
    _EINSUM_MEMO.clear()


def _einsum_best(space: tuple[Any, Any], objective: str, memo: bool = True,
                 dataflow: str | None = None) -> Any:
    """Best ``dataflow.nest.NestMapping`` of ``(problem, hierarchy)`` for ``objective`` by
    :func:`mapper.einsum_search.search` (seeded, :data:`EINSUM_EVALUATIONS` candidates),
    or None when it finds no feasible mapping; with ``dataflow``, among the mappings that
    obey it (:func:`mapper.einsum_dataflow.dataflow_constraints`: the hierarchy's first
    fan-out level feeds the PEs, its innermost level is the PE register). With ``memo``,
    one search per canonical signature (:meth:`dataflow.einsum.Einsum.signature`, the
    hierarchy, the dataflow, the objective): the search is deterministic, so reuse changes
    no result."""
    problem, hier = space
    key = (problem.signature(), repr(hier), dataflow, objective)
    if memo and key in _EINSUM_MEMO:
        return _EINSUM_MEMO[key]
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.mapper.einsum_search import search as einsum_search

    cons = None
    if dataflow is not None:
        fan = next(lv.name for lv in hier.levels if lv.fanout > 1)
        cons = dataflow_constraints(problem, dataflow, fan, hier.levels[0].name)
    try:
        found = einsum_search(problem, hier, cons, objective=objective,
                              time_budget_s=float("inf"), max_evaluations=EINSUM_EVALUATIONS,
                              seed=0).mapping
    except ValueError:              # nothing feasible among the candidates
        found = None
    if memo:
        _EINSUM_MEMO[key] = found
    return found


def map_workload(acc: Accelerator, workload: Workload, objective: str = "latency",
                 op_energy: Callable[[Unit, Estimate], float] | None = None,
                 search: bool = False, constraints: Any = None,
                 link: Link | None = None, refine: int = 0,
                 progress: Callable[[int, int], None] | None = None,
                 reuse_searches: bool = True, reuse_estimates: bool | None = None) -> Schedule:
    """Assign each op to a unit and schedule the workload's DAG.

    With ``search=False`` every unit uses its default mapping (its configured dataflow);
    with ``search=True`` every unit's ``mapping_space`` is searched, and matrix ops on
    units with a loop-nest space (``unit.loop_nest(op)``: spatial arrays) get the best
    loop nest of ``mapper.gemm_search.best_mapping`` for the objective.
    Each op gets one candidate per unit (its best mapping there); the list scheduler of
    :mod:`mapper.hetero` assigns and times them (one unit: back to back, in topological
    order).

    Args:
        constraints: a :class:`mapper.constraints.Constraints` (``load_constraints``) or a
            path to a constraints YAML file; restricts unit, dataflow, factors and loop
            order per op.
        link: how tensors move between units (default: the design's interconnect, else
            shared memory).
        refine: with ``search``, re-rank each op's ``refine`` best loop-nest mappings by
            the cycle simulator (``mapper.gemm_search.refine_with_simulation``); 0 = off.
        progress: called as ``progress(done, total)`` after each op's candidates.
        reuse_searches: search each distinct (layer shape, unit, constraints, objective)
            once and reuse the mapping (the searches are seeded: same result as without).
        reuse_estimates: price each distinct (:func:`op_signature`, unit, constraints) once
            and give every identical op the same candidate under its own name (identical
            transformer blocks, repeated convolutions): the same schedule bit for bit as
            without, since a unit's estimate reads only what the signature holds.
            None: as ``reuse_searches`` (``reuse_searches=False`` alone prices every op).

    Raises:
        MappingError: an op no unit supports (the message lists each unit's reason), or
            constraints that leave an op without a feasible (unit, mapping) (the message
            names the op and the rules' file:line), or constraints naming unknown units or
            dataflows.
    """
    objective_value(objective, 0.0, 0.0)  # validates the name
    cons = _constraints(constraints, acc)
    link = link or link_of(acc)
    unit_index = {u.name: i for i, u in enumerate(acc.units)}
    ops = workload.ops()
    cand: list[list[Assignment]] = []
    problems: list[Problem] = []
    priced: dict[tuple[Any, ...], tuple[Assignment | None, str, str]] = {}
    if reuse_estimates is None:
        reuse_estimates = reuse_searches
    # identical ops (equal op_signature) share a group: the index of the first of them.
    # Worked out once per workload (a sweep maps one workload on many designs).
    groups = workload.derived("mapper.signature_groups", lambda: _signature_groups(ops)) \
        if reuse_estimates else None
    for n_done, op in enumerate(ops, 1):
        oc = cons.for_op(op) if cons is not None else None
        sig = groups[n_done - 1] if groups is not None else None
        got: list[Assignment] = []
        reasons = []
        for i, unit in enumerate(acc.units):
            key = (sig, i, _constraint_key(oc))
            hit = priced.get(key) if sig is not None else None
            a, why = _reuse(hit, op) if hit is not None else (None, "")
            if hit is None or (a is None and not why):
                a, why = _candidates(op, unit, objective, search, oc, op_energy, refine,
                                     reuse_searches)
                if sig is not None:
                    priced[key] = (a, why, op.name)
            if a is None:
                reasons.append(f"{unit.name}: {why}")
            else:
                got.append(a)
        if not got:
            if oc is not None:
                r0 = oc.rules[-1]
                problems.append(Problem(f"op {op.name!r}: the constraints leave no feasible "
                                        f"unit/mapping: " + "; ".join(reasons),
                                        f"rules[{r0.index}]", r0.file, r0.line))
            else:
                problems.append(Problem("no unit can run this op: " + "; ".join(reasons),
                                        f"{workload.name}:{op.name}"))
        cand.append(got)
        if progress is not None:
            progress(n_done, len(ops))
    if problems:
        raise _op_problems(problems)
    edges = workload.derived("mapper.edges", lambda: _edges(workload, ops))
    options = [[Option(unit_index[a.unit.name], a.estimate.latency_s, a.energy_j) for a in c]
               for c in cand]
    plan = list_schedule([op.name for op in ops], options, edges, objective, link,
                         len(acc.units), _dram_j_per_byte(acc) if link.copies else None)
    assignments = tuple(cand[i][c] for i, c in enumerate(plan.choice))
    return Schedule(assignments, plan.start_s, plan.end_s, plan.transfers, link, plan, edges)


def _edges(workload: Workload, ops: list[Op]) -> tuple[tuple[int, int, float], ...]:
    """``(producer index, consumer index, bytes)`` of every edge, indices into ``ops``."""
    index = {op.name: i for i, op in enumerate(ops)}
    return tuple((index[a], index[b], float(d.get("bytes", 0.0)))
                 for a, b, d in workload.graph.edges(data=True))


#: Op fields that label an op in its network but never change what it costs: its name and
#: its ``layer`` / ``block`` tags (the result rows keep them; plans select by ``block``).
_LABEL_FIELDS = ("name", "layer", "block")


def op_signature(op: Op) -> tuple[Any, ...]:
    """The canonical signature of ``op`` for pricing: its type and every field except its
    name and its ``layer`` / ``block`` tags (shapes, formats, sparsity, pass, role and the
    kind-specific fields all stay). Two ops with the same signature get the same estimate
    on a unit (:meth:`arch.base.Unit.estimate` reads the op's fields, and the estimate
    names the op only in ``op_name``)."""
    return (type(op), tuple((f, getattr(op, f)) for f in op.__dataclass_fields__
                            if f not in _LABEL_FIELDS))


def _signature_groups(ops: list[Op]) -> tuple[int, ...]:
    """Per op, the index of the first op with the same :func:`op_signature`."""
    first: dict[tuple[Any, ...], int] = {}
    return tuple(first.setdefault(op_signature(op), i) for i, op in enumerate(ops))


def _constraint_key(oc: Any) -> Any:
    """What the merged constraints of an op say (not which rules said it, nor where)."""
    if oc is None:
        return None
    return (oc.units, oc.dataflows, oc.fixed, oc.order_glb, oc.order_dram)


def _reuse(hit: tuple[Assignment | None, str, str], op: Op
           ) -> tuple[Assignment | None, str]:
    """The candidate ``hit`` priced for an identical op (its name last), given to ``op``
    under its own name; (None, "") when the text of the estimate or of the reason names the
    op it was priced for (then ``op`` is priced afresh, so no message names the wrong op)."""
    a, why, priced_for = hit
    if a is None:
        return (None, "") if priced_for in why else (None, why)
    e = a.estimate
    if priced_for in e.mapping or priced_for in e.reason or priced_for in e.dataflow:
        return None, ""
    return Assignment(op, a.unit, a.mapping, e.renamed(op.name), a.energy_j), ""


def _constraints(constraints: Any, acc: Accelerator) -> Any:
    if constraints is None:
        return None

    cons = constraints if isinstance(constraints, Constraints) else load_constraints(constraints)
    dfs = tuple(dict.fromkeys(d for u in acc.units for d in u.dataflows()))
    problems = cons.check_against(tuple(u.name for u in acc.units), dfs)
    if problems:
        raise MappingError(problems)
    return cons


def _op_problems(problems: list[Problem], shown: int = 5) -> MappingError:
    """One error for every op that cannot run: ops failing for the same reason are one line
    (``first op (and N more ops): reason``); at most ``shown`` reasons, the headline counts
    every op."""
    groups: dict[tuple[str, str | None, int | None], list[Problem]] = {}
    for p in problems:
        groups.setdefault((p.message, p.file, p.line), []).append(p)
    lines = []
    for (msg, file, line), ps in list(groups.items())[:shown]:
        more = f" (and {len(ps) - 1} more ops)" if len(ps) > 1 else ""
        lines.append(Problem(msg, ps[0].path + more, file, line))
    rest = list(groups.values())[shown:]
    if rest:
        n = sum(len(ps) for ps in rest)
        lines.append(Problem(f"{n} more ops fail for {len(rest)} other reasons"))
    n_ops = len(problems)
    if len(lines) == 1:
        return MappingError(lines)
    return MappingError(lines, summary=f"{n_ops} ops cannot run")
