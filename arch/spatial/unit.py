"""Generic spatial array (``kind: spatial_array``): a 2-D PE array, per-PE registers, a
global buffer (GLB) and off-chip memory; weight-, output- and input-stationary dataflows.

Analytical model (SCALE-Sim's, Samajdar et al., ISPASS 2020, Sec. III). A GEMM
``C[M,N] = A[M,K] B[K,N]`` maps two of its dimensions onto the ``rows x cols`` array and
streams the third in time::

    dataflow   spatial rows Sr   spatial cols Sc   temporal T   stationary operand
    ws         K                 N                 M            B (weights)
    os         M                 N                 K            C (outputs)
    is         K                 M                 N            A (inputs)

The array is used in ``ceil(Sr/rows) * ceil(Sc/cols)`` folds, each taking
``2*rows + cols + T - 2`` cycles (skewed fill, ``T`` streaming steps, drain), and folds do
not overlap. Convolutions run as their im2col GEMM (``Conv2d.as_gemm``), groups as batch.

Off-chip traffic uses a simple documented tiling rule until the mapper chooses tilings:
the GLB is split into three equal parts for A, B and C; the fold loop is
``for c_fold: for r_fold: stream T``; an operand slice that fits its part is fetched from
DRAM once and reused across the outer fold loop, otherwise it is re-fetched each time, and
partial sums that do not fit spill (written and read back once per extra reduction fold).
Latency = max(compute, DRAM bytes / sustained bandwidth) + the load of the first
stationary tile (double-buffered GLB; no overlap for the first tile).

Energy actions (per op): MACs; PE register reads (2 operands + 1 partial sum per MAC) and
writes (1 per MAC); GLB reads/writes from the fold structure; DRAM bytes; vector ops.

Cycle fidelity: ``lower`` (``arch.spatial.lower``) expresses the same folds, tiling rule
and double buffering as a ``sim.TaskGraph``; the simulation is the reference this estimate
is checked against (``tests/cycle``, ``docs/simulator.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from archsim.arch.base import Estimate, Unit, UnitMapping, cycles_of, infeasible, register
from archsim.arch.memory import MemorySpec
from archsim.arch.operands import fused_attention_problem, operand_width_problem
from archsim.arch.spatial.einsum import actions, compact, problem_and_hierarchy
from archsim.arch.spatial.folds import fold_cycles, gemm_traffic
from archsim.arch.spatial.lower import lower_op
from archsim.arch.spec import param
from archsim.arch.vector import estimate_vector
from archsim.dataflow.mapping import (
    DATAFLOW_CONSTRAINTS,
    ArchParams,
    Shape,
    analyse,
    cost,
    feasible,
)
from archsim.dataflow.mapping import Mapping as LoopNest
from archsim.dataflow.nest import NestMapping
from archsim.dataflow.nest import analyse as analyse_nest
from archsim.energy import Component, Technology, energy_per_action_pj
from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.formats import FORMATS, NumberFormat
from archsim.workloads.ops import AllReduce, Conv2d, Gemm, Op

__all__ = ["SpatialArraySpec", "SpatialArray", "SpatialMapping", "DATAFLOWS", "fold_cycles",
           "gemm_traffic"]

DATAFLOWS = ("ws", "os", "is")
#: Dataflow name of a 7-D Einsum nest mapping (found by the mapper's nest search).
EINSUM_DATAFLOW = "nest7d"


@dataclass(frozen=True)
class SpatialMapping(UnitMapping):
    """A spatial-array mapping: a named dataflow of the fold model (``ws``, ``os``, ``is``;
    ``""`` = the configured one), or a full loop nest (``dataflow.Mapping``, from the
    mapper's search or the user's constraints) whose ``dataflow`` names the constraint set
    it satisfies (``ws``, ``os``, ``is``, ``rs``, ``free``)."""

    nest: LoopNest | None = None
    #: a 7-D Einsum nest (``dataflow.nest.NestMapping``, dataflow ``nest7d``) of a
    #: convolution on the unit's three-level hierarchy (``arch.spatial.einsum``)
    einsum: NestMapping | None = None

    def describe(self) -> str:
        if self.einsum is not None:
            return "nest7d"
        return self.nest.describe() if self.nest is not None else (self.dataflow or "default")


@dataclass(frozen=True, kw_only=True)
class SpatialArraySpec:
    """A 2-D PE array with a global buffer and off-chip memory."""

    rows: int = param(doc="PE array rows", min=1)
    cols: int = param(doc="PE array columns", min=1)
    clock_mhz: float = param(doc="array clock", unit="MHz", min=0, min_exclusive=True)
    memory: MemorySpec = param(doc="off-chip memory")
    dataflow: str = param("ws", doc="default dataflow (until the mapper chooses)",
                          choices=DATAFLOWS)
    mac_format: NumberFormat = param(FORMATS["int8"], doc="PE multiplier format; ops in wider "
                                     "formats are not supported")
    pe_register_bytes: int = param(64, doc="register file per PE", unit="bytes", min=1)
    global_buffer_kib: float = param(doc="global buffer (GLB) capacity", unit="KiB", min=0,
                                     min_exclusive=True)
    glb_width_bits: int = param(64, doc="GLB access width (energy per access)", unit="bits",
                                min=8)
    vector_lanes: int = param(0, doc="vector unit ops per cycle for softmax/norm/element-wise "
                              "(0 = one per array column)", min=0)

    def check(self) -> list[tuple[str, str]]:
        return []


@register
class SpatialArray(Unit[SpatialMapping]):
    """A generic 2-D PE array (systolic / NVDLA-like / ShiDianNao-like / Eyeriss-like)."""

    kind = "spatial_array"
    Spec = SpatialArraySpec
    Mapping = SpatialMapping
    spec: SpatialArraySpec

    @property
    def clock_hz(self) -> float:
        return self.spec.clock_mhz * 1e6

    @property
    def pes(self) -> int:
        return self.spec.rows * self.spec.cols

    @property
    def lanes(self) -> int:
        return self.spec.vector_lanes or self.spec.cols

    def dataflows(self) -> tuple[str, ...]:
        return DATAFLOWS

    # ---- mappings ----------------------------------------------------------------------
    def convert_mapping(self, obj: Any) -> SpatialMapping:
        """A GEMM loop nest (``dataflow.Mapping``) becomes ``SpatialMapping(nest=...)``; a
        7-D Einsum nest (``dataflow.nest.NestMapping``) ``SpatialMapping("nest7d",
        einsum=...)``."""
        if isinstance(obj, LoopNest):
            return SpatialMapping(obj.dataflow, obj)
        if isinstance(obj, NestMapping):
            return SpatialMapping(EINSUM_DATAFLOW, einsum=obj)
        return super().convert_mapping(obj)

    def check_mapping(self, m: SpatialMapping) -> None:
        if m.einsum is not None:
            if not isinstance(m.einsum, NestMapping) or m.nest is not None \
                    or m.dataflow not in (EINSUM_DATAFLOW, *DATAFLOWS, "rs"):
                raise MappingError(Problem(
                    f"an Einsum nest mapping has dataflow {EINSUM_DATAFLOW!r} (or the named "
                    f"dataflow it obeys: {', '.join((*DATAFLOWS, 'rs'))}), a "
                    f"dataflow.nest.NestMapping and no GEMM nest", "mapping.einsum"))
            return
        if m.nest is None:
            super().check_mapping(m)
            return
        if not isinstance(m.nest, LoopNest):
            raise MappingError(Problem(f"expected a dataflow.Mapping loop nest, got "
                                       f"{type(m.nest).__name__}", "mapping.nest"))
        if m.nest.dataflow not in DATAFLOW_CONSTRAINTS or m.dataflow != m.nest.dataflow:
            raise MappingError(Problem(
                f"loop nest dataflow {m.nest.dataflow!r} (mapping says {m.dataflow!r}); "
                f"expected one of {', '.join(DATAFLOW_CONSTRAINTS)}", "mapping.nest.dataflow"))

    def einsum_space(self, op: Op) -> tuple[Any, Any] | None:
        """Matrix ops: their Einsum on the unit's hierarchy (``arch.spatial.einsum``): a
        convolution's 7-D nest keeps the sliding-window reuse that the im2col GEMM view
        loses; a (batched) GEMM keeps its batch / head dims (attention's QK and AV, GQA's
        shared K/V) as loops of their own."""
        if not isinstance(op, (Conv2d, Gemm)) or self.supports(op):
            return None

        return problem_and_hierarchy(self, op)

    def op_dataflows(self, op: Op) -> tuple[str, ...]:
        return DATAFLOWS if op.is_matrix else ()

    def loop_nest(self, op: Op) -> Any | None:
        return self.arch_params(op) if op.is_matrix else None

    def native_formats(self) -> tuple[str, ...]:
        """The PE multiplier's format (narrower ones of the same kind also run)."""
        return (self.spec.mac_format.name,)

    def supports(self, op: Op) -> str | None:
        why = fused_attention_problem(op, self.kind)
        if why:
            return why
        if isinstance(op, AllReduce) and op.devices > 1:
            return "a single spatial array has no inter-device link for all-reduce"
        if op.is_matrix:
            hw = self.spec.mac_format
            return operand_width_problem((("activation", op.a_format), ("weight", op.w_format)),
                                         hw, f"the PE's {hw.name} multiplier")
        return None

    def peak_macs_per_cycle(self, op: Op) -> float:
        return float(self.pes) if op.is_matrix else float(self.lanes)

    def peak_bytes_per_cycle(self) -> float:
        return self.spec.memory.bytes_per_s / self.clock_hz

    def _bw_per_cycle(self) -> float:
        return self.spec.memory.sustained_bytes_per_s / self.clock_hz

    # ---- estimate ----------------------------------------------------------------------
    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        """Fold model (named dataflow) or loop-nest analysis (``mapping.nest``) for matrix
        ops; the streaming vector model otherwise (a matrix dataflow name does not change
        a vector op; a loop nest for one is infeasible)."""
        m = self.parse_mapping(mapping)
        reason = self.supports(op)
        if reason:
            return infeasible(op, self.name, reason, self.clock_hz)
        if m.einsum is not None:
            if not isinstance(op, (Conv2d, Gemm)):
                return infeasible(op, self.name, "an Einsum nest mapping applies to "
                                  "convolutions and GEMMs only", self.clock_hz)
            return self._estimate_einsum(op, m.einsum, m.dataflow)
        if m.nest is not None:
            if not op.is_matrix:
                return infeasible(op, self.name, "a loop-nest mapping applies to matrix ops "
                                  "only", self.clock_hz)
            return self._estimate_mapped(op, m.nest)
        df = m.dataflow or self.spec.dataflow
        if isinstance(op, Conv2d):
            return self._estimate_gemm(op, op.as_gemm(), df)
        if isinstance(op, Gemm):
            return self._estimate_gemm(op, op, df)
        return estimate_vector(op, unit=self.name, clock_hz=self.clock_hz, lanes=self.lanes,
                               bytes_per_cycle=self._bw_per_cycle(),
                               vector_component=self.cname("vector"),
                               dram_component=self.cname("dram"))

    # ---- loop-nest mappings (from the mapper) ------------------------------------------
    def arch_params(self, op: Op | None = None) -> Any:
        """``dataflow.ArchParams`` of this array for ``op``'s formats, with per-access
        energies from ``energy`` (MAC, PE register read, GLB read scaled by element bits /
        GLB width, DRAM read per byte) at the unit's process node."""

        s = self.spec
        tech = Technology(node_nm=self.node_nm)
        comps = {c.name.rsplit(".", 1)[-1]: c for c in self.components()}
        a_b = op.a_format.bytes_per_element if op is not None else s.mac_format.bytes_per_element
        w_b = op.w_format.bytes_per_element if op is not None else a_b
        acc_b = op.acc_format.bytes_per_element if op is not None else 4.0

        def e(c: str, a: str) -> float:
            return energy_per_action_pj(comps[c], a, tech)

        return ArchParams(
            rows=s.rows, cols=s.cols, rf_bytes=float(s.pe_register_bytes),
            glb_bytes=float(s.global_buffer_kib * 1024),
            dram_bytes_per_cycle=self._bw_per_cycle(),
            a_bytes=a_b, b_bytes=w_b, psum_bytes=acc_b, out_bytes=a_b,
            e_mac_pj=e("mac", "mac"), e_rf_pj=e("pe_reg", "read"),
            e_glb_pj=e("glb", "read") * a_b * 8 / s.glb_width_bits,
            e_dram_pj_per_byte=e("dram", "read"))

    def _estimate_einsum(self, op: Conv2d | Gemm, nest: NestMapping,
                         dataflow: str = EINSUM_DATAFLOW) -> Estimate:
        """Estimate of a 7-D Einsum nest (``arch.spatial.einsum``, ``dataflow.nest``):
        cycles = the slowest of compute and each level's bandwidth (DRAM at the sustained
        rate); actions from the per-level access counts. Like the GEMM nest model, pipeline
        fill/drain is not charged."""

        problem, hier = problem_and_hierarchy(self, op)
        res = analyse_nest(problem, hier, nest)
        if not res.feasible:
            return infeasible(op, self.name, "; ".join(res.reasons), self.clock_hz)
        acts, dram_r, dram_w = actions(self, op, res)
        cycles = cycles_of(res.cycles)
        dram_cycles = float(res.level_cycles.get("dram", 0))
        return Estimate(
            op.name, op.kind, self.name, dataflow or EINSUM_DATAFLOW, cycles, self.clock_hz,
            macs=op.macs(), flops=op.flops(), dram_read_bytes=dram_r, dram_write_bytes=dram_w,
            actions=MappingProxyType(acts),
            utilization=op.effective_macs() / (cycles * self.pes) if cycles else 0.0,
            bound="compute" if res.compute_cycles >= dram_cycles else "memory",
            mapping=compact(nest, hier),
            details=MappingProxyType({"compute_cycles": float(res.compute_cycles),
                                      "memory_cycles": dram_cycles}))

    def _estimate_mapped(self, op: Op, mapping: Any) -> Estimate:
        """Estimate of a loop-nest mapping (``dataflow.Mapping``): cycles =
        max(temporal iterations, DRAM bytes / sustained bandwidth) and action counts from the
        access-count analysis (``dataflow.analyse``). Unlike the fold model, pipeline
        fill/drain is not charged (the mapper's model, docs/mapper.md)."""

        shape = Shape.of(op)
        p = self.arch_params(op)
        why = feasible(mapping, shape, p)
        if why:
            return infeasible(op, self.name, "; ".join(why), self.clock_hz)
        ac = analyse(mapping, shape)
        c = cost(mapping, shape, p, ac)
        g = ac.get
        tensors = ("A", "B", "C")
        acts = ("reads", "fills", "updates")
        bits = op.a_format.bits / self.spec.glb_width_bits
        out_final = shape.batch * shape.m * shape.n
        dram_w = (g("C", "DRAM", "updates") - out_final) * p.psum_bytes + out_final * p.out_bytes
        dram_r = c.dram_bytes - dram_w
        eff = op.effective_macs()
        actions = {
            (self.cname("mac"), "mac"): eff,
            (self.cname("pe_reg"), "read"): sum(g(t, "RF", "reads") for t in tensors),
            (self.cname("pe_reg"), "write"): sum(g(t, "RF", a) for t in tensors for a in acts[1:]),
            (self.cname("glb"), "read"): bits * sum(g(t, "GLB", "reads") for t in tensors),
            (self.cname("glb"), "write"): bits * sum(g(t, "GLB", a) for t in tensors
                                                     for a in acts[1:]),
            (self.cname("dram"), "read"): dram_r,
            (self.cname("dram"), "write"): dram_w,
        }
        cycles = cycles_of(c.cycles)
        return Estimate(
            op.name, op.kind, self.name, mapping.dataflow, cycles, self.clock_hz,
            macs=op.macs(), flops=op.flops(), dram_read_bytes=dram_r, dram_write_bytes=dram_w,
            actions=MappingProxyType(actions),
            utilization=eff / (cycles * self.pes) if cycles else 0.0,
            bound="compute" if c.compute_cycles >= c.dram_cycles else "memory",
            mapping=mapping.describe(),
            details=MappingProxyType({"compute_cycles": float(c.compute_cycles),
                                      "memory_cycles": float(c.dram_cycles)}))

    def _estimate_gemm(self, op: Op, g: Gemm, df: str) -> Estimate:
        s = self.spec
        rows, cols = s.rows, s.cols
        per_cycles, folds, _ = fold_cycles(df, g.m, g.n, g.k, rows, cols)
        compute = g.batch * per_cycles
        a_b = g.a_format.bytes_per_element
        b_b = g.b_format.bytes_per_element
        acc_b = g.acc_format.bytes_per_element
        glb_bytes = s.global_buffer_kib * 1024
        part_elems = glb_bytes / 3 / max(a_b, b_b, acc_b)
        tr = gemm_traffic(df, g.m, g.n, g.k, rows, cols, part_elems)
        distinct_b = g.batch // g.b_shared
        # B traffic of shared B matrices (GQA) is fetched once per distinct matrix.
        b_share = distinct_b / g.batch
        wfrac = g.w_sparsity.fraction if g.b_is_weight else 1.0
        read_b = g.batch * (tr.a_elems * a_b + tr.b_elems * b_share * b_b * wfrac
                            + tr.c_read_elems * acc_b)
        # the compulsory traffic (quantisation scales, sparse metadata) is never undercut
        read_b = max(read_b, op.input_bytes() + op.weight_bytes())
        write_b = g.batch * (tr.c_write_elems - g.m * g.n) * acc_b + op.output_bytes()
        mem_cycles = (read_b + write_b) / self._bw_per_cycle()
        first = tr.first_tile_elems * max(a_b, b_b) / self._bw_per_cycle()
        cycles = cycles_of(max(compute, mem_cycles) + first)
        macs = op.macs()
        eff = op.effective_macs()
        glb_access_scale = g.a_format.bits / s.glb_width_bits
        actions = {
            (self.cname("mac"), "mac"): eff,
            (self.cname("pe_reg"), "read"): 3.0 * eff,
            (self.cname("pe_reg"), "write"): 1.0 * eff,
            (self.cname("glb"), "read"): g.batch * tr.glb_reads * glb_access_scale,
            (self.cname("glb"), "write"): g.batch * tr.glb_writes * glb_access_scale,
            (self.cname("dram"), "read"): read_b,
            (self.cname("dram"), "write"): write_b,
        }
        util = eff / (cycles * self.pes) if cycles else 0.0
        bound = "compute" if compute >= mem_cycles else "memory"
        return Estimate(
            op.name, op.kind, self.name, df, cycles, self.clock_hz, macs=macs, flops=op.flops(),
            dram_read_bytes=read_b, dram_write_bytes=write_b,
            actions=MappingProxyType(actions), utilization=util, bound=bound,
            mapping=f"{df} {rows}x{cols} folds={folds}x{g.batch}",
            details=MappingProxyType({"compute_cycles": float(compute),
                                      "memory_cycles": float(mem_cycles),
                                      "first_tile_cycles": float(first)}))

    # ---- cycle fidelity ----------------------------------------------------------------
    def lower(self, op: Op, mapping: Any = None) -> Any:
        """Fold-level lowering to ``sim.TaskGraph`` (``arch.spatial.lower``): per fold group
        a stationary-tile load, chunked stream loads / array compute / write-backs with
        double buffering; vector ops as pipelined read -> vector -> write pieces. The graph's
        clock is the array clock x ``spatial_lower.RESOLUTION``."""
        return lower_op(self, op, mapping)

    # ---- energy / area -----------------------------------------------------------------
    def components(self) -> list[Any]:

        s = self.spec
        fmt = s.mac_format.name
        return [
            Component(self.cname("mac"), "mac", self.pes, {"format": fmt}),
            Component(self.cname("pe_reg"), "regfile", self.pes,
                      {"capacity_bytes": s.pe_register_bytes, "width_bits": s.mac_format.bits}),
            Component(self.cname("glb"), "sram", 1,
                      {"capacity_bytes": int(s.global_buffer_kib * 1024),
                       "width_bits": s.glb_width_bits, "ports": 2}),
            Component(self.cname("vector"), "vector", self.lanes, {"format": fmt}),
            Component(self.cname("dram"), "dram", 1, {"tech": s.memory.tech}),
        ]
