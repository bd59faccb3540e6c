"""Whole-GPT token generation on a ``dram_pim`` unit at DRAM-command level.

:func:`simulate_token` runs every op of one decode step in order on one persistent device
state: matrix ops issue their command streams on all channels (starting when the ASIC has
finished the previous op), ASIC ops advance time by their ASIC cycles. Refresh phase, open
rows and bank timing carry from op to op and from token to token. :func:`decode_tokens`
generates ``n_tokens`` tokens after a ``prompt_len`` prompt, the KV cache growing by one
position per token (the workload of token ``i`` has context ``prompt_len + i``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archsim import energy
from archsim.arch.pim import kernel as PK
from archsim.arch.pim.unit import DramPim
from archsim.sim.dram_presets import COMMANDS
from archsim.workloads.formats import get_format
from archsim.workloads.zoo import build

__all__ = ["TokenResult", "simulate_token", "decode_tokens", "pim_unit"]


@dataclass
class TokenResult:
    """One decode step at command level.

    Attributes:
        context: KV-cache length before the step. latency_s: step latency.
        energy_j: dynamic (action counts) + static energy over the latency.
        matrix_s, asic_s: time in PIM matrix ops and in ASIC ops (serial, so they sum to
            the latency). commands: DRAM commands issued (every channel simulated).
        row_hit_rate: MAC commands served by an open row / MAC commands.
        refreshes: REF commands. wall_s: simulation wall time.
    """

    context: int
    latency_s: float
    energy_j: float
    matrix_s: float
    asic_s: float
    commands: int
    macab: int
    actab: int
    refreshes: int
    row_hit_rate: float
    wall_s: float
    per_role_s: dict[str, float] = field(default_factory=dict)


def pim_unit(acc: Any) -> DramPim:
    """The (first) ``dram_pim`` unit of an accelerator."""
    for u in acc.units:
        if isinstance(u, DramPim):
            return u
    raise ValueError(f"{acc.name!r} has no dram_pim unit")


def simulate_token(unit: DramPim, wl: Any, state: tuple[Any, np.ndarray] | None = None,
                   start: int = 0, tech: Any = None) -> tuple[TokenResult, int]:
    """Simulate one decode step; returns (result, end cycle). ``state`` is reused if given."""

    t_wall = time.perf_counter()
    inst, cs = state if state is not None else unit.new_state()
    cnt = np.zeros(PK.N_COUNTERS, np.int64)
    stats0 = inst.stats.copy()
    t = start
    mat = asic = 0
    actions: dict[tuple[str, str], float] = {}
    roles: dict[str, float] = {}
    lanes = unit.spec.asic.vector_lanes
    for op in wl.ops():
        reps = int(getattr(op, "count", 1) or 1)
        est = unit.estimate(op)
        if not est.feasible:
            raise ValueError(f"{op.name}: {est.reason}")
        for key, v in est.actions.items():
            actions[key] = actions.get(key, 0.0) + v * reps
        for _ in range(reps):
            t0 = t
            if op.is_matrix:
                p = unit.plan(op)
                end = unit.run_plan(p, inst, cs, cnt, start=t)
                red = unit._asic_cycles_in_tck(-(-p.reduce_adds // lanes))
                t = int(np.ceil(end + red))
                mat += t - t0
            else:
                t += est.cycles
                asic += t - t0
            role = getattr(op, "role", "") or op.kind
            roles[role] = roles.get(role, 0.0) + (t - t0) / unit.clock_hz
    lat = (t - start) / unit.clock_hz
    tech = tech or energy.Technology(node_nm=unit.node_nm)
    e = energy.evaluate(unit.components(), actions, lat, tech).total_j
    st = inst.stats - stats0
    n_cmd = int(st.sum())

    macab = int(st[COMMANDS.index("MACAB")])
    actab = int(st[COMMANDS.index("ACTAB")])
    res = TokenResult(
        context=int(wl.context or 0), latency_s=lat, energy_j=e,
        matrix_s=mat / unit.clock_hz, asic_s=asic / unit.clock_hz, commands=n_cmd,
        macab=macab, actab=actab, refreshes=int(st[COMMANDS.index("REF")]),
        row_hit_rate=(macab - actab) / macab if macab else 0.0,
        wall_s=time.perf_counter() - t_wall, per_role_s=roles)
    return res, t


def decode_tokens(acc: Any, model: str, n_tokens: int, prompt_len: int,
                  a_format: str = "bf16") -> list[TokenResult]:
    """Generate ``n_tokens`` tokens after a ``prompt_len``-token prompt, command level.

    The device state (bank timing, refresh phase) persists across ops and tokens; token
    ``i`` attends over ``prompt_len + i`` cached positions (plus its own).
    """

    unit = pim_unit(acc)
    state = unit.new_state()
    fmt = get_format(a_format)
    t = 0
    out: list[TokenResult] = []
    for i in range(n_tokens):
        wl = build(model, phase="decode", batch=1, context=prompt_len + i)
        wl = wl.with_formats(fmt, fmt)
        r, t = simulate_token(unit, wl, state, t)
        out.append(r)
    return out
