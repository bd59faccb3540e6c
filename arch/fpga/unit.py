"""The ``nm_sparse_fpga`` unit: timing, traffic, resources and power of an N:M sparse PE
array on an FPGA (model in ``arch/fpga/__init__.py`` and ``docs/fpga.md``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from archsim.arch.base import (
    DataflowMapping,
    Estimate,
    SimInput,
    Unit,
    ceil_div,
    cycles_of,
    infeasible,
    register,
)
from archsim.arch.fpga import resources as rs
from archsim.arch.fpga.lower import lower_op
from archsim.arch.fpga.resources import VECTOR_ADD, VECTOR_MULT, Resources, index_bits
from archsim.arch.fpga.spec import NmSparseFpgaSpec
from archsim.arch.operands import fused_attention_problem, operand_width_problem
from archsim.arch.spatial import fold_cycles, gemm_traffic
from archsim.arch.vector import estimate_vector
from archsim.energy import Component
from archsim.energy.tables import (
    FPGA_BRAM_PJ,
    FPGA_DSP_PJ,
    FPGA_FF_CLOCK_PJ,
    FPGA_FF_PJ,
    FPGA_LUT_PJ,
    FPGA_URAM_PJ,
)
from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.ops import AllReduce, Conv2d, Gemm, Op

__all__ = ["NmSparseFpga", "gemm_plan", "GemmPlan"]

# Energy per event of each fabric resource: energy.tables.FPGA_*_PJ (UltraScale+, with
# their source). Resources of one fp32 vector lane: resources.VECTOR_MULT / VECTOR_ADD.


@dataclass(frozen=True)
class GemmPlan:
    """How one GEMM runs on the array (per batch entry; elements, not bytes).

    Attributes:
        order: loop order ``spatial`` (arch.spatial's rule) or ``mtile`` (M-tiled).
        sparse: N:M sparse mode; ``n``, ``m`` the pattern (0, 0 when dense).
        k_c: reduction length after compression (K x N/M when sparse, else K).
        window: activations each lane's mux chooses from (M/N; 1 when dense).
        stall: streaming slow-down from the activation-buffer width (>= 1).
        folds: (row folds x column folds); m_tiles: passes over M (1 for ``spatial``).
        compute_cycles: cycles of one batch entry.
        a_elems, b_elems: DRAM reads of A (dense) and of B (stored elements: non-zeros
            when sparse), including re-fetches; c_write, c_read: C writes incl. spills and
            partial sums read back.
        stream, stationary, psum_out: elements read from the activation buffer, loaded
            into the PEs, and leaving the array.
        first_elems: the first stationary tile (loaded before compute starts).
    """

    order: str
    sparse: bool
    n: int
    m: int
    k_c: int
    window: float
    stall: int
    folds: int
    m_tiles: int
    compute_cycles: int
    a_elems: float
    b_elems: float
    c_write: float
    c_read: float
    stream: float
    stationary: float
    psum_out: float
    first_elems: float


def gemm_plan(spec: NmSparseFpgaSpec, g: Gemm, order: str = "spatial") -> GemmPlan:
    """Fold schedule and traffic of GEMM ``g`` (weight-stationary, weights in the PEs).

    Compute: the SCALE-Sim fold model (``arch.spatial.fold_cycles``) with the reduction
    spread over rows x macs_per_pe lanes. In N:M sparse mode each lane holds non-zero
    weights with their indices, so the reduction shrinks to k_c = ceil(K N / M), while its
    mux picks the activation from a window of M/N dense ones: the array reads
    min(k_c, rows x lanes) x M/N activations per streaming step, and an activation buffer
    narrower than that stretches every step by ``stall`` = ceil(needed / width bits).

    Traffic, ``order="spatial"``: ``arch.spatial.gemm_traffic``'s ws rule with the buffer
    share = the smallest buffer / the widest element (dense mode then equals the spatial
    array), except that A stays dense (all K activations stream). ``order="mtile"``: loop
    ``for m-tile: for column fold: for row fold`` with the largest M-tile whose dense A rows
    fit the activation buffer: A is read once, B once if its stored (compressed) size fits
    the weight buffer else once per M-tile, partial sums spill only if an M-tile's outputs
    do not fit the output buffer; each M-tile pays the fold's fill and drain again.
    """
    sp = g.w_sparsity if g.b_is_weight else None
    sparse = bool(sp is not None and sp.structured and spec.sparse.supports(sp.n, sp.m))
    n_, m_ = (sp.n, sp.m) if sparse and sp is not None else (0, 0)
    k_c = ceil_div(g.k * n_, m_) if sparse else g.k
    rows_k = spec.rows * spec.macs_per_pe
    per, folds, t = fold_cycles("ws", g.m, g.n, ceil_div(k_c, spec.macs_per_pe), spec.rows,
                                spec.cols)
    fr, fc = ceil_div(k_c, rows_k), ceil_div(g.n, spec.cols)
    window = (m_ / n_) if sparse else 1.0
    need_bits = min(k_c, rows_k) * window * g.a_format.bits
    # one read port streams to the array; the other port (or the SDP write port) refills
    stall = max(1, math.ceil(need_bits / spec.act_buffer.width_bits - 1e-9))
    a_b, b_b = g.a_format.bytes_per_element, g.b_format.bytes_per_element
    acc_b = g.acc_format.bytes_per_element
    stored_b = b_b + (index_bits(m_) / 8 if sparse else 0.0)
    if order == "spatial":
        part = min(spec.act_buffer.bits, spec.weight_buffer.bits, spec.out_buffer.bits) / 8
        part /= max(a_b, b_b, acc_b)
        tr = gemm_traffic("ws", g.m, g.n, k_c, rows_k, spec.cols, part)
        m_tiles = 1
        compute = per + folds * t * (stall - 1)
        a_elems = g.m * g.k * (1 if g.m * g.k <= part else fc)
        b_elems, c_w, c_r, first = tr.b_elems, tr.c_write_elems, tr.c_read_elems, \
            tr.first_tile_elems
    elif order == "mtile":
        tm = max(1, min(g.m, int(spec.act_buffer.bits / 8 / a_b // g.k)))
        m_tiles = ceil_div(g.m, tm)
        compute = folds * (m_tiles * (2 * spec.rows + spec.cols - 2) + g.m * stall)
        a_elems = g.m * g.k
        b_fits = k_c * g.n * stored_b <= spec.weight_buffer.bits / 8
        b_elems = k_c * g.n * (1 if b_fits else m_tiles)
        spill = tm * min(g.n, spec.cols) * acc_b > spec.out_buffer.bits / 8 and fr > 1
        c_w = g.m * g.n * (fr if spill else 1)
        c_r = g.m * g.n * (fr - 1) if spill else 0
        first = min(k_c, rows_k) * min(g.n, spec.cols)
    else:
        raise ValueError(f"unknown loop order {order!r}")
    return GemmPlan(
        order=order, sparse=sparse, n=n_, m=m_, k_c=k_c, window=window, stall=stall,
        folds=folds, m_tiles=m_tiles, compute_cycles=compute, a_elems=a_elems,
        b_elems=b_elems, c_write=c_w, c_read=c_r,
        stream=folds * t * min(k_c, rows_k) * window,
        stationary=m_tiles * fr * fc * rows_k * spec.cols,
        psum_out=folds * t * spec.cols, first_elems=first)


@register
class NmSparseFpga(Unit[DataflowMapping]):
    """An N:M sparse PE array on an FPGA with dense and sparse modes (SAT-like).

    Mappings: the weight-stationary array (``ws``, the default) for matrix ops; vector ops
    run on the vector lanes whatever the mapping names.
    """

    kind = "nm_sparse_fpga"
    Spec = NmSparseFpgaSpec
    Mapping = DataflowMapping
    spec: NmSparseFpgaSpec

    # ---- identity ----------------------------------------------------------------------
    @property
    def clock_hz(self) -> float:
        return self.spec.clock_mhz * 1e6

    @property
    def pes(self) -> int:
        return self.spec.rows * self.spec.cols

    @property
    def mac_lanes(self) -> int:
        return self.pes * self.spec.macs_per_pe

    @property
    def lanes(self) -> int:
        return self.spec.vector_lanes or self.spec.cols

    def dataflows(self) -> tuple[str, ...]:
        return ("ws",)

    def op_dataflows(self, op: Op) -> tuple[str, ...]:
        return ("ws",) if op.is_matrix else ()

    # ---- resources ---------------------------------------------------------------------
    @cached_property
    def resource_breakdown(self) -> dict[str, Resources]:
        """Resources per component (see docs/fpga.md for each formula)."""
        s = self.spec
        fmt = s.mac_format
        a_bits = fmt.bits
        idx = rs.index_bits(s.sparse.m_max)
        acc_bits = 32
        p = s.macs_per_pe
        out: dict[str, Resources] = {}
        out["pe_macs"] = rs.mac_cost(fmt.name, s.adder) * self.mac_lanes
        # PE registers: the activation window passed to the right neighbour, double-buffered
        # stationary weights with their indices, and the partial-sum pipeline register.
        window = p * s.sparse.expand_max
        pe_ff = window * a_bits + 2 * p * (fmt.bits + idx) + acc_bits
        out["pe_registers"] = Resources(ff=pe_ff * self.pes)
        if s.sparse.enabled:
            per_lane = Resources(lut=a_bits * rs.mux_luts_per_bit(s.sparse.m_max))
            out["nm_muxes"] = per_lane * self.mac_lanes
            out["pregen"] = rs.topn_selector(s.sparse.n_max, s.sparse.m_max,
                                             fmt.bits) * s.pregen.lanes
        for name in ("act_buffer", "weight_buffer", "out_buffer"):
            b = getattr(s, name)
            if b.memory == "bram":
                out[name] = Resources(bram36=rs.bram36_blocks(b.bits, b.width_bits, b.ports))
            else:
                out[name] = Resources(uram=rs.uram_blocks(b.bits, b.width_bits))
        # vector lanes: one fp32 multiplier + one fp32 adder each (PG060, tag C)
        out["vector"] = (VECTOR_MULT + VECTOR_ADD) * self.lanes
        out["ddr4_controllers"] = rs.DDR4_CONTROLLER * s.ddr_channels
        out["shell"] = rs.SHELL
        return out

    @cached_property
    def resources_used(self) -> Resources:
        return Resources.total(self.resource_breakdown.values()).rounded()

    @property
    def part_resources(self) -> Resources:
        p = self.spec.part
        return Resources(dsp=p.dsp, lut=p.lut, ff=p.ff, bram36=p.bram36, uram=p.uram)

    def utilization_by_resource(self) -> dict[str, float]:
        used, part = self.resources_used, self.part_resources
        return {n: (getattr(used, n) / getattr(part, n)) if getattr(part, n) else
                (0.0 if getattr(used, n) == 0 else math.inf) for n in rs.RESOURCE_NAMES}

    def fit_problems(self) -> list[str]:
        """Exceeded resources (empty when the design fits the part)."""
        return rs.exceeded(self.resources_used, self.part_resources, self.spec.max_utilization)

    # ---- capability --------------------------------------------------------------------
    def native_formats(self) -> tuple[str, ...]:
        """The multiplier's format (narrower ones of the same kind also run)."""
        return (self.spec.mac_format.name,)

    def supports(self, op: Op) -> str | None:
        fit = self.fit_problems()
        if fit:
            return f"design does not fit {self.spec.part.name}: " + "; ".join(fit)
        why = fused_attention_problem(op, self.kind)
        if why:
            return why
        if isinstance(op, AllReduce) and op.devices > 1:
            return "a single FPGA has no inter-device link for all-reduce"
        if op.is_matrix:
            hw = self.spec.mac_format
            return operand_width_problem((("activation", op.a_format), ("weight", op.w_format)),
                                         hw, f"the PE's {hw.name} multiplier")
        return None

    def peak_macs_per_cycle(self, op: Op) -> float:
        """Effective (non-zero) MACs per cycle: every lane does one useful MAC per cycle in
        either mode; vector ops: vector lanes."""
        return float(self.mac_lanes) if op.is_matrix else float(self.lanes)

    def peak_bytes_per_cycle(self) -> float:
        return self.spec.memory.bytes_per_s / self.clock_hz

    def _bw_per_cycle(self) -> float:
        return self.spec.memory.sustained_bytes_per_s / self.clock_hz

    # ---- estimate ----------------------------------------------------------------------
    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        self.parse_mapping(mapping)
        reason = self.supports(op)
        if reason:
            return infeasible(op, self.name, reason, self.clock_hz)
        if isinstance(op, Conv2d):
            return self._estimate_gemm(op, op.as_gemm())
        if isinstance(op, Gemm):
            return self._estimate_gemm(op, op)
        return estimate_vector(op, unit=self.name, clock_hz=self.clock_hz, lanes=self.lanes,
                               bytes_per_cycle=self._bw_per_cycle(),
                               vector_component=self.cname("vector"),
                               dram_component=self.cname("ddr"))

    def plan(self, g: Gemm) -> GemmPlan:
        """The GEMM's schedule: ``loop_order: spatial`` uses arch.spatial's rule; ``best``
        (offline scheduling) takes, per op, the order with fewer cycles (then fewer DRAM
        bytes), judged with the same latency formula as the estimate."""
        if self.spec.loop_order == "spatial":
            return gemm_plan(self.spec, g, "spatial")
        cands = [gemm_plan(self.spec, g, o) for o in ("spatial", "mtile")]
        return min(cands, key=lambda pl: self._gemm_cost(g, pl)[:2])

    def pregen_cost(self, g: Gemm, plan: GemmPlan) -> tuple[float, float, float]:
        """(generator cycles, DRAM read bytes, DRAM write bytes) of pre-generating this
        layer's sparse weights for one training step: read the dense weights, select N of
        every M (top |w|), write the forward copy and the transposed (BDWP) copy, each
        N/M of the values plus ceil(log2 M) index bits per non-zero. Charged to the
        backward-data op (inference has none: its weights are pruned once, offline)."""
        if not (plan.sparse and g.pass_ == "bwd_data" and g.b_is_weight):
            return 0.0, 0.0, 0.0
        elems = (g.batch // g.b_shared) * g.k * g.n
        wb = g.w_format.bytes_per_element
        nz_bytes = elems * plan.n / plan.m * (wb + index_bits(plan.m) / 8)
        cycles = elems / (plan.m * self.spec.pregen.lanes)
        return cycles, elems * wb, 2 * nz_bytes

    def _gemm_cost(self, g: Gemm, plan: GemmPlan, op: Op | None = None
                   ) -> tuple[int, float, float, float, float, float]:
        """(cycles, DRAM bytes, read bytes, write bytes, memory cycles, first-tile cycles)."""
        a_b, b_b = g.a_format.bytes_per_element, g.b_format.bytes_per_element
        acc_b = g.acc_format.bytes_per_element
        stored_b = b_b + (index_bits(plan.m) / 8 if plan.sparse else 0.0)
        b_share = (g.batch // g.b_shared) / g.batch
        read_b = g.batch * (plan.a_elems * a_b + plan.b_elems * b_share * stored_b
                            + plan.c_read * acc_b)
        src = op if op is not None else g
        # the compulsory traffic (every operand once, sparse metadata included) is a floor
        read_b = max(read_b, src.input_bytes() + src.weight_bytes())
        write_b = g.batch * (plan.c_write - g.m * g.n) * acc_b + src.output_bytes()
        pg_cycles, pg_read, pg_write = self.pregen_cost(g, plan)
        bw = self._bw_per_cycle()
        mem = (read_b + write_b) / bw
        first = plan.first_elems * max(a_b, b_b) / bw
        compute = float(g.batch * plan.compute_cycles)
        if self.spec.pregen.overlap:
            body = max(compute, mem + (pg_read + pg_write) / bw, pg_cycles)
        else:
            body = max(compute, mem) + max(pg_cycles, (pg_read + pg_write) / bw)
        cycles = cycles_of(body + first)
        return (cycles, read_b + write_b + pg_read + pg_write, read_b + pg_read,
                write_b + pg_write, mem, first)

    def _estimate_gemm(self, op: Op, g: Gemm) -> Estimate:
        s = self.spec
        plan = self.plan(g)
        cycles, _, read_b, write_b, mem, first = self._gemm_cost(g, plan, op)
        pg_cycles, pg_read, pg_write = self.pregen_cost(g, plan)
        compute = float(g.batch * plan.compute_cycles)
        eff = float(g.batch * g.m * g.n * plan.k_c)
        idx = index_bits(plan.m) if plan.sparse else 0
        b_bits = g.b_format.bits + idx
        acc_bits = g.acc_format.bits
        w72 = 72.0                                # buffer actions: 72-bit block accesses
        nb = g.batch
        actions = {
            (self.cname("pe_macs"), "mac"): eff,
            (self.cname("act_buffer"), "read"): nb * plan.stream * g.a_format.bits / w72,
            (self.cname("act_buffer"), "write"): nb * plan.a_elems * g.a_format.bits / w72,
            (self.cname("weight_buffer"), "write"): nb * plan.b_elems * b_bits / w72,
            (self.cname("weight_buffer"), "read"): nb * plan.stationary * b_bits / w72,
            (self.cname("out_buffer"), "write"): nb * plan.psum_out * acc_bits / w72,
            (self.cname("out_buffer"), "read"):
                nb * max(plan.psum_out - g.m * g.n, 0.0) * acc_bits / w72,
            (self.cname("ddr"), "read"): read_b,
            (self.cname("ddr"), "write"): write_b,
        }
        if plan.sparse:
            actions[(self.cname("nm_muxes"), "select")] = eff
        if pg_cycles:
            actions[(self.cname("pregen"), "group")] = pg_cycles * s.pregen.lanes
        util = eff / (cycles * self.mac_lanes) if cycles else 0.0
        mode = f"{plan.n}:{plan.m} sparse" if plan.sparse else "dense"
        sp = g.w_sparsity if g.b_is_weight else None
        if sp is not None and sp.structured and not plan.sparse:
            mode += f" ({sp} not supported by the muxes: weights run dense)"
        extra = f" m_tiles={plan.m_tiles}" if plan.order == "mtile" else ""
        extra += f" act-buffer stall x{plan.stall}" if plan.stall > 1 else ""
        return Estimate(
            op.name, op.kind, self.name, "ws", cycles, self.clock_hz, macs=op.macs(),
            flops=op.flops(), dram_read_bytes=read_b, dram_write_bytes=write_b,
            actions=MappingProxyType(actions), utilization=util,
            bound="compute" if compute >= mem else "memory",
            mapping=(f"ws {s.rows}x{s.cols}x{s.macs_per_pe} {mode} {plan.order} "
                     f"folds={plan.folds}x{g.batch}{extra}"),
            details=MappingProxyType({"compute_cycles": compute, "memory_cycles": mem,
                                      "first_tile_cycles": first,
                                      "pregen_cycles": float(pg_cycles),
                                      "pregen_bytes": float(pg_read + pg_write),
                                      "k_compressed": float(plan.k_c),
                                      "m_tiles": float(plan.m_tiles),
                                      "act_buffer_stall": float(plan.stall)}))

    # ---- cycle fidelity ----------------------------------------------------------------
    def lower(self, op: Op, mapping: Any = None) -> SimInput:
        """Event-driven model of ``op`` (``arch/fpga/lower.py``) with the DDR4 configs of a
        command-level memory (``memory.model: dram``)."""

        self.parse_mapping(mapping)
        reason = self.supports(op)
        if reason:
            raise MappingError(Problem(reason, op.name))
        tg, dram = lower_op(self, op)
        return SimInput(tg, tuple(dram))

    # ---- energy / power ----------------------------------------------------------------
    def event_energy_pj(self, r: Resources) -> float:
        """Energy of one event that exercises resources ``r``: DSPs at their per-operation
        energy, LUTs and FFs at ``activity`` x their toggle energy."""
        return (r.dsp * FPGA_DSP_PJ.value
                + self.spec.activity * (r.lut * FPGA_LUT_PJ.value + r.ff * FPGA_FF_PJ.value))

    def clock_power_w(self) -> float:
        """Clock-tree power: every used flip-flop loads the clock every cycle."""
        return self.resources_used.ff * FPGA_FF_CLOCK_PJ.value * 1e-12 * self.clock_hz

    def components(self) -> list[Any]:

        s = self.spec
        br = self.resource_breakdown
        src = "energy/tables.py FPGA_*_PJ (UltraScale+, tag C)"
        mac = rs.mac_cost(s.mac_format.name, s.adder)

        def fixed(part: str, count: int, energy_pj: dict[str, float]) -> Any:
            return Component(self.cname(part), "fixed", count,
                             {"energy_pj": energy_pj, "area_mm2": 0.0, "leakage_w": 0.0,
                              "source": src})

        comps = [fixed("pe_macs", self.mac_lanes, {"mac": self.event_energy_pj(mac)})]
        if s.sparse.enabled:
            mux = Resources(lut=s.mac_format.bits * rs.mux_luts_per_bit(s.sparse.m_max))
            comps.append(fixed("nm_muxes", self.mac_lanes, {"select": self.event_energy_pj(mux)}))
            sel = rs.topn_selector(s.sparse.n_max, s.sparse.m_max, s.mac_format.bits)
            comps.append(fixed("pregen", s.pregen.lanes, {"group": self.event_energy_pj(sel)}))
        for name in ("act_buffer", "weight_buffer", "out_buffer"):
            b = getattr(s, name)
            e = FPGA_BRAM_PJ.value if b.memory == "bram" else FPGA_URAM_PJ.value
            blocks = int(br[name].bram36 + br[name].uram)
            comps.append(fixed(name, max(blocks, 1), {"read": e, "write": e}))
        # a vector op uses the lane's multiplier or its adder: the mean of the two events
        e_vec = 0.5 * (self.event_energy_pj(VECTOR_MULT) + self.event_energy_pj(VECTOR_ADD))
        comps.append(fixed("vector", self.lanes, {"op": e_vec}))
        comps.append(Component(self.cname("ddr"), "dram", 1, {"tech": s.memory.tech}))
        comps.append(Component(self.cname("static"), "static", 1,
                               {"power_w": s.part.static_power_w,
                                "source": f"{s.part.name} static power (config part.static_power_w)"}))
        comps.append(Component(self.cname("clock"), "static", 1,
                               {"power_w": self.clock_power_w(),
                                "source": "used FFs x FPGA_FF_CLOCK_PJ (energy/tables.py) x clock"}))
        return comps

    def report(self) -> dict[str, Any]:
        used = self.resources_used
        util = self.utilization_by_resource()
        res: dict[str, Any] = {n: int(getattr(used, n)) for n in rs.RESOURCE_NAMES}
        res["utilization"] = {n: round(u, 6) for n, u in util.items()}
        res["part"] = self.spec.part.name
        problems = self.fit_problems()
        res["feasible"] = not problems
        res["exceeded"] = problems
        res["breakdown"] = {k: {n: round(float(getattr(v, n)), 3) for n in rs.RESOURCE_NAMES}
                            for k, v in self.resource_breakdown.items()}
        res["area_note"] = ("FPGA area is the resource count above; area_mm2 is 0 (the die "
                            "is fixed; no honest mm2 share per resource is modelled)")
        return {"resources": res,
                "power_w": {"static": self.spec.part.static_power_w,
                            "clock": self.clock_power_w()}}
