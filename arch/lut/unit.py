"""LUT tensor-core GPU family (``kind: lut_tensor_core``): an A100-class GPU whose
low-bit mixed-precision GEMMs (mpGEMM) run on lookup-table tensor cores.

Model of Mo et al., "LUT Tensor Core", ISCA 2025 (design rules:
``shared/reference/lut_tensor_core.yaml``); equations in ``docs/lut.md``.

* A LUT unit holds, for each of its ``M`` activation rows, a table of the ``2^K`` signed
  sums of ``K`` activations; with symmetrisation (weights {0,1} read as {-1,+1},
  ``LUT[w] = -LUT[~w]``) only ``2^(K-1)`` entries are stored. Each of the ``N`` columns
  selects one entry per row with its ``K`` one-bit weights (a mux) and accumulates it:
  one lookup = ``K`` one-bit MACs. A ``W``-bit weight is processed bit-serially in ``W``
  passes (shift-accumulate).
* The elongated tile is ``M x N x K`` (default 2 x 64 x 4 = 512, the A100 INT8 MMA size).
  ``array_scale`` tiles per tensor core: at 2-bit weights a 1x array matches the A100 FP16
  tensor-core rate (512 / 2 = 256 MAC/clock/TC); the paper's LUT-4X / LUT-8X peaks
  (1248 / 2496 TOPs, W_INT2) follow.
* Tables are precomputed on the CUDA cores, fused into the preceding element-wise kernel
  (default) or as a separate kernel (``precompute: unfused``).
* Everything that is not a low-bit-weight GEMM runs on the inherited tensor-core GPU
  model (the GPU keeps its MAC tensor cores for fp16 attention: "both kinds").
* Area/energy from structure via ``energy`` components: table registers + mux trees
  (``lut``), the per-column weight buffer (``regfile``), one accumulator adder per
  output (``adder``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from archsim.arch.base import Estimate, SimInput, infeasible, register
from archsim.arch.gpu.gemm import GemmShape, gemm_time
from archsim.arch.gpu.lower import lower_gemm
from archsim.arch.gpu.precision import MmaPlan
from archsim.arch.gpu.spec import GpuSpec
from archsim.arch.gpu.unit import DATAFLOWS as GPU_DATAFLOWS
from archsim.arch.gpu.unit import TensorCoreGpu
from archsim.arch.spec import param
from archsim.energy import Component, Technology, area, area_per_instance_mm2
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Conv2d, Gemm, Op

__all__ = ["LutCoreSpec", "LutGpuSpec", "LutTensorCoreGpu", "LUT_DATAFLOWS", "table_entries",
           "table_storage_bits", "weight_storage_bits", "mac_dp_area_per_sm_mm2",
           "lut_weight_bits"]

#: Activation formats the LUT path accepts (tables are built from them).
LUT_ACT_FORMATS = ("fp16", "bf16", "int8", "fp8_e4m3", "fp8_e5m2")
LUT_DATAFLOWS = ("lut", "lut_fused", "lut_unfused", "mac")
_ENTRY_BITS = {"int8": 8, "fp16": 16}
_ACC_FORMATS = ("int32", "fp16", "fp32")


@dataclass(frozen=True, kw_only=True)
class LutCoreSpec:
    """The LUT tensor cores (per tensor-core slot of an SM)."""

    k: int = param(4, doc="LUT dot-product length K: activations per table", min=1, max=8)
    tile_m: int = param(2, doc="tile M: activation rows (tables) per LUT unit", min=1)
    tile_n: int = param(64, doc="tile N: weight columns (muxes per table) per LUT unit", min=1)
    array_scale: int = param(4, doc="LUT units per tensor core (LUT-NX: N x the A100 FP16 "
                             "array at 2-bit weights)", choices=(1, 2, 4, 8))
    entry_format: str = param("int8", doc="table-entry format (INT8 table quantisation or "
                              "FP16)", choices=tuple(_ENTRY_BITS))
    symmetric: bool = param(True, doc="symmetrised tables: 2^(K-1) entries (else 2^K)")
    design_weight_bits: int = param(2, doc="W_BIT of the weight buffer (K x N x W_BIT bits) "
                                    "the unit is sized for", min=1, max=8)
    max_weight_bits: int = param(4, doc="widest weight run bit-serially on the LUT units",
                                 min=1, max=8)
    accumulate_format: str = param("int32", doc="accumulator adder format",
                                   choices=_ACC_FORMATS)
    precompute: str = param("fused", doc="table precompute: fused into the preceding "
                            "element-wise kernel or a separate kernel",
                            choices=("fused", "unfused"))
    precompute_ops_per_entry: float = param(
        1.0, doc="CUDA-core adds per table entry (each entry = a previous entry +/- one "
                 "activation, Gray-code order)", min=0)
    table_storage: str = param("registers", doc="where tables wait for the LUT units",
                               choices=("registers", "smem"))

    @property
    def entries(self) -> int:
        return table_entries(self.k, self.symmetric)

    @property
    def entry_bits(self) -> int:
        return _ENTRY_BITS[self.entry_format]

    @property
    def tile_macs(self) -> int:
        """One-bit MACs per tile per clock (M x N lookups of K)."""
        return self.tile_m * self.tile_n * self.k

    def check(self) -> list[tuple[str, str]]:
        out = []
        if self.entry_format == "int8" and self.accumulate_format == "fp16":
            out.append(("accumulate_format", "int8 tables accumulate in int32 or fp32"))
        return out


@dataclass(frozen=True, kw_only=True)
class LutGpuSpec(GpuSpec):
    """A tensor-core GPU with LUT tensor cores (``kind: lut_tensor_core``)."""

    lut: LutCoreSpec = param(doc="the LUT tensor cores")


def table_entries(k: int, symmetric: bool = True) -> int:
    """Stored entries of one table: 2^(K-1) with symmetrisation, else 2^K."""
    return 2 ** (k - 1) if symmetric else 2 ** k


def table_storage_bits(m: int, k: int, lut_bits: int, symmetric: bool = True) -> int:
    """M x 2^(K-1) x LUT_BIT (paper)."""
    return m * table_entries(k, symmetric) * lut_bits


def weight_storage_bits(k: int, n: int, w_bits: int) -> int:
    """K x N x W_BIT (paper)."""
    return k * n * w_bits


def lut_weight_bits(op: Gemm) -> int | None:
    """Bit-serial passes of ``op``'s weights (None: not a low-bit integer weight)."""
    b = op.b_format
    if b.kind == "ternary":
        return 2
    if b.kind in ("int", "binary") and b.bits <= 8:
        return b.bits
    return None


# ---- energy/area helpers ---------------------------------------------------------------
def _area_um2(cls: str, attrs: dict, node_nm: float) -> float:

    return area_per_instance_mm2(Component("x", cls, 1, attrs), Technology(node_nm=node_nm)) * 1e6


def _mux_um2_per_bit_input(node_nm: float) -> float:
    """Area of one 2:1 mux bit, from the ``lut`` class alone: lut(n, 1) = n*dff + (n-1)*mux,
    so mux = 2*lut(3, 1) - 3*lut(2, 1) (exact for that class's area law)."""
    l2 = _area_um2("lut", {"entries": 2, "entry_bits": 1}, node_nm)
    l3 = _area_um2("lut", {"entries": 3, "entry_bits": 1}, node_nm)
    return 2 * l3 - 3 * l2


def mac_dp_area_per_sm_mm2(spec: GpuSpec, fmt: str, dp_k: int, node_nm: float = 28.0) -> float:
    """Area per SM of a MAC tensor-core array for ``fmt``, built from dot-product units of
    length ``dp_k``: dp_k multipliers (``fmt``) + (dp_k - 1) tree adders in the product
    format (int8 -> int16, floats -> fp16) + one accumulator adder (int32 / fp32)."""
    prod = "int16" if fmt.startswith("int") else "fp16"
    acc = "int32" if fmt.startswith("int") else "fp32"
    dp = (dp_k * _area_um2("multiplier", {"format": fmt}, node_nm)
          + (dp_k - 1) * _area_um2("adder", {"format": prod}, node_nm)
          + _area_um2("adder", {"format": acc}, node_nm))
    macs = spec.tc_rate_per_sm(fmt)
    return macs / dp_k * dp / 1e6


@register
class LutTensorCoreGpu(TensorCoreGpu):
    """A100-class GPU with LUT tensor cores for low-bit-weight GEMMs.

    ``mapping``: anything :class:`TensorCoreGpu` accepts, or ``"lut"`` / ``"lut_fused"`` /
    ``"lut_unfused"`` (LUT path, precompute as named) or ``"mac"`` (force the MAC tensor
    cores). A low-bit GEMM takes the faster of the LUT and MAC paths unless forced.
    """

    kind = "lut_tensor_core"
    Spec = LutGpuSpec
    spec: LutGpuSpec

    def dataflows(self) -> tuple[str, ...]:
        return GPU_DATAFLOWS + LUT_DATAFLOWS

    # ---- LUT eligibility / rate ---------------------------------------------------------
    def lut_passes(self, op: Op) -> int | None:
        """Bit-serial passes if ``op`` can run on the LUT units, else None."""
        if not isinstance(op, Gemm) or not op.b_is_weight:
            return None
        if op.a_format.name not in LUT_ACT_FORMATS:
            return None
        w = lut_weight_bits(op)
        if w is None or w > self.spec.lut.max_weight_bits:
            return None
        return w

    def lut_rate_per_sm(self) -> float:
        """One-bit lookup-MACs per clock per SM."""
        lut = self.spec.lut
        return float(self.spec.tensor_core.per_sm * lut.array_scale * lut.tile_macs)

    def peak_tops(self, w_bits: int, clock_mhz: float | None = None) -> float:
        """Peak W-bit mpGEMM TOPs (2 ops per MAC) at ``clock_mhz`` (default boost)."""
        f = (clock_mhz or self.spec.boost_clock_mhz) * 1e6
        return 2 * self.spec.sm_count * self.lut_rate_per_sm() / w_bits * f / 1e12

    def _lut_plan(self, op: Gemm, w: int) -> MmaPlan:
        return MmaPlan("lut", f"lut_{self.spec.lut.entry_format}", w, self.lut_rate_per_sm(),
                       0.0, 0.0, op.a_format.bits, tensor=True)

    def peak_macs_per_cycle(self, op: Op) -> float:
        w = self.lut_passes(op)
        base = super().peak_macs_per_cycle(op)
        if w is None:
            return base
        return max(base, self.spec.sm_count * self.lut_rate_per_sm() / w)

    # ---- estimate ---------------------------------------------------------------------
    def op_dataflows(self, op: Op) -> tuple[str, ...]:
        extra = LUT_DATAFLOWS if self.lut_passes(op) is not None else ()
        return (*super().op_dataflows(op), *extra)

    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        m = self.parse_mapping(mapping)
        df = m.dataflow if m.dataflow in LUT_DATAFLOWS else None
        w = self.lut_passes(op) if not isinstance(op, Conv2d) else None
        if df == "mac":
            return super().estimate(op, None)
        if w is None:
            if df is not None:
                reason = self.supports(op) or (f"{op.name}: no LUT path (needs a weight GEMM "
                                               f"with <= {self.spec.lut.max_weight_bits}-bit "
                                               "integer/ternary weights and "
                                               f"{'/'.join(LUT_ACT_FORMATS)} activations)")
                return infeasible(op, self.name, reason, self.clock_hz)
            return super().estimate(op, m)
        assert isinstance(op, Gemm)
        pre = self.spec.lut.precompute
        if df == "lut_fused":
            pre = "fused"
        elif df == "lut_unfused":
            pre = "unfused"
        lut = self._estimate_lut(op, w, pre)
        if df is not None or m != self.parse_mapping(None):
            return lut
        mac = super().estimate(op, None)
        return lut if (not mac.feasible or lut.cycles <= mac.cycles) else mac

    def table_bytes(self, op: Gemm) -> float:
        """Bytes of the precomputed tables of ``op``'s activations."""
        lut = self.spec.lut
        groups = op.batch * op.m * -(-op.k // lut.k)
        return groups * lut.entries * lut.entry_bits / 8

    def precompute_s(self, op: Gemm, mode: str) -> float:
        """Table precompute on the CUDA cores (fused: ALU time and the extra table bytes;
        unfused: a separate streaming kernel reading A and writing the tables)."""
        s, lut = self.spec, self.spec.lut
        groups = op.batch * op.m * -(-op.k // lut.k)
        ops = groups * lut.entries * lut.precompute_ops_per_entry
        t_alu = ops / (s.sm_count * s.cuda_core.fp32_lanes_per_sm * s.clock_hz)
        a_bytes = op.batch * op.m * op.k * op.a_format.bytes_per_element
        bw = s.memory.sustained_bytes_per_s
        if mode == "fused":
            return t_alu + max(0.0, self.table_bytes(op) - a_bytes) / bw
        return s.launch_overhead_us * 1e-6 + max(t_alu, (a_bytes + self.table_bytes(op)) / bw)

    def _feed_spec(self) -> GpuSpec:
        """The GPU spec as the LUT mainloop sees it: a table is broadcast to every LUT unit
        of the SM (design.table_precompute), so one shared-memory read of a table feeds the
        whole CTA tile width: the MMA group covers all N columns (``mma_tile_n``)."""
        s = self.spec
        if s.lut.table_storage != "registers":
            return s
        return dataclasses.replace(s, sm=dataclasses.replace(s.sm, mma_tile_n=1 << 16))

    def _lut_kernel(self, op: Gemm, w: int) -> tuple[MmaPlan, Any]:
        """The LUT mainloop: (plan, ``gemm_time`` result) with tables as the A operand."""
        plan = self._lut_plan(op, w)
        t_bytes = self.table_bytes(op)
        a_bpe_tab = t_bytes / max(1, op.batch * op.m * op.k)
        shape = GemmShape(op.batch, op.m, op.n, op.k, a_bpe_tab, self._b_bpe(op),
                          op.a_format.bytes_per_element, t_bytes, op.b_bytes(),
                          op.batch // op.b_shared, op.output_bytes())
        return plan, gemm_time(self._feed_spec(), shape, plan)

    def lower(self, op: Op, mapping: Any = None) -> SimInput:
        """LUT mpGEMMs: the LUT mainloop at CTA-tile granularity after the table
        precompute (``arch.gpu.lower.lower_gemm`` with ``pre_s``); other ops as the GPU."""
        est = self.estimate(op, mapping)
        if not est.dataflow.startswith("lut_") or not isinstance(op, Gemm):
            m = self.parse_mapping(mapping)
            return super().lower(op, None if m.dataflow in LUT_DATAFLOWS else m)

        w = self.lut_passes(op)
        assert w is not None
        _, r = self._lut_kernel(op, w)
        return SimInput(lower_gemm(self._feed_spec(), r, op.name,
                                   pre_s=self.precompute_s(op, est.dataflow[4:])))

    def _estimate_lut(self, op: Gemm, w: int, pre: str) -> Estimate:
        lut = self.spec.lut
        plan, r = self._lut_kernel(op, w)
        t_bytes = self.table_bytes(op)
        t_pre = self.precompute_s(op, pre)
        cycles = self.to_cycles(r.time_s + t_pre)
        cycles = max(cycles, int(self.roofline_cycles(op)) + 1)
        lookups = r.mma_macs / lut.k        # M x N lookups per pass, each K one-bit MACs
        n_groups = op.batch * op.m * -(-op.k // lut.k)
        actions = {
            (self.cname("lut_table"), "lookup"): lookups,
            (self.cname("lut_table"), "write"): n_groups * lut.entries,
            (self.cname("lut_acc"), "op"): lookups,
            (self.cname("lut_weights"), "read"): lookups / (lut.tile_m * lut.tile_n),
            (self.cname("cuda_core"), "op"): n_groups * lut.entries * lut.precompute_ops_per_entry,
            (self.cname("smem"), "read"): r.smem_bytes / 128,
            (self.cname("l2"), "read"): r.l2_bytes / 32,
            (self.cname("hbm"), "read"): r.hbm_read_bytes,
            (self.cname("hbm"), "write"): r.hbm_write_bytes,
        }
        peak = self.peak_macs_per_cycle(op)
        util = op.effective_macs() / (peak * cycles) if cycles else 0.0
        details = {"gemm_s": r.time_s, "precompute_s": t_pre, "passes": w, "bm": r.bm,
                   "bn": r.bn, "bk": r.bk, "split_k": r.split, "table_bytes": t_bytes,
                   "sm_s": r.sm_s, "hbm_s": r.hbm_s, "l2_s": r.l2_s}
        return Estimate(op.name, op.kind, self.name, f"lut_{pre}", cycles, self.clock_hz,
                        macs=op.macs(), flops=op.flops(), dram_read_bytes=r.hbm_read_bytes,
                        dram_write_bytes=r.hbm_write_bytes, actions=MappingProxyType(actions),
                        utilization=min(1.0, util), bound=r.bound,
                        mapping=f"lut K={lut.k} x{w} passes, precompute {pre}; {r.describe()}",
                        details=MappingProxyType(details))

    # ---- area / energy ------------------------------------------------------------------
    def n_tiles(self) -> int:
        return self.spec.sm_count * self.spec.tensor_core.per_sm * self.spec.lut.array_scale

    def components(self) -> list[Any]:

        lut = self.spec.lut
        t = self.n_tiles()
        mux_45 = _mux_um2_per_bit_input(45.0) * lut.entry_bits * (lut.entries - 1) / 1e6
        w_bits = weight_storage_bits(lut.k, lut.tile_n, lut.design_weight_bits)
        return super().components() + [
            # tables: M x 2^(K-1) x LUT_BIT registers, each with one read mux tree
            Component(self.cname("lut_table"), "lut", t * lut.tile_m,
                      {"entries": lut.entries, "entry_bits": lut.entry_bits}),
            # the other M x (N - 1) lookups of a tile: mux trees only (the table is broadcast)
            Component(self.cname("lut_mux"), "fixed", t * lut.tile_m * (lut.tile_n - 1),
                      {"energy_pj": {}, "area_mm2": mux_45, "leakage_w": 0.0, "node_nm": 45.0,
                       "source": "derived from the energy 'lut' class mux2 area (see "
                                 "arch/lut.py _mux_um2_per_bit_input); lookup energy is "
                                 "charged to lut_table"}),
            Component(self.cname("lut_weights"), "regfile", t,
                      {"capacity_bytes": w_bits / 8, "width_bits": lut.k * lut.tile_n}),
            Component(self.cname("lut_acc"), "adder", t * lut.tile_m * lut.tile_n,
                      {"format": lut.accumulate_format}),
        ]

    def lut_area_breakdown_mm2(self, node_nm: float = 28.0) -> dict[str, float]:
        """Area of the LUT tensor cores by part (whole chip) at ``node_nm``."""

        names = {self.cname(p) for p in ("lut_table", "lut_mux", "lut_weights", "lut_acc")}
        comps = [c for c in self.components() if c.name in names]
        rep = area(comps, Technology(node_nm=node_nm))
        return {k.split(".", 1)[1]: v for k, v in rep.breakdown_mm2.items()}

    def tc_area_per_sm_mm2(self, node_nm: float = 28.0) -> float:
        """LUT tensor-core area per SM (paper Table 1 column)."""
        return sum(self.lut_area_breakdown_mm2(node_nm).values()) / self.spec.sm_count

    def compute_density(self, w_bits: int = 2, node_nm: float = 28.0) -> float:
        """Peak TOPs per mm^2 of LUT tensor core at the boost clock (paper: 1.41 GHz)."""
        return self.peak_tops(w_bits) / (self.spec.sm_count * self.tc_area_per_sm_mm2(node_nm))


def weight_bit_sweep(lut_unit: LutTensorCoreGpu, mac_unit: TensorCoreGpu,
                     bits: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8),
                     gemm: tuple[int, int, int] = (2048, 3200, 3200),
                     a_format: str = "int8", node_nm: float = 28.0) -> list[dict[str, float]]:
    """LUT versus MAC as the weight width grows (issue: where LUT stops beating MAC).

    Per weight width ``w``:

    * ``lut_density``: peak W-bit TOPs per mm^2 of LUT tensor core (bit-serial: ``w``
      passes), at ``node_nm`` and the boost clock; ``lut_nosym_density`` the same without
      symmetrisation (2^K table entries: a conventional LUT);
    * ``mac_int8_density`` / ``mac_fp16_density``: the MAC tensor cores (DP16 INT8, DP4
      FP16 units) running the W-bit weights converted to the activation format - constant
      in ``w``;
    * ``lut_ms`` / ``mac_ms``: one ``gemm`` (M x N x K, ``a_format`` activations) on the LUT
      path of ``lut_unit`` and on ``mac_unit``'s tensor cores (weight-only dequantisation).

    ``max_weight_bits`` is raised to the largest ``w`` for the sweep.
    """

    wmax = max(bits)
    sym = dataclasses.replace(lut_unit.spec, lut=dataclasses.replace(
        lut_unit.spec.lut, max_weight_bits=wmax))
    nosym = dataclasses.replace(sym, lut=dataclasses.replace(sym.lut, symmetric=False))
    u_sym = LutTensorCoreGpu(lut_unit.name, sym, lut_unit.node_nm)
    u_nosym = LutTensorCoreGpu(lut_unit.name, nosym, lut_unit.node_nm)
    ms = mac_unit.spec
    f_ghz = ms.boost_clock_mhz / 1e3
    mac_int8 = (2 * ms.sm_count * ms.tc_rate_per_sm("int8") * f_ghz / 1e3
                / (ms.sm_count * mac_dp_area_per_sm_mm2(ms, "int8", 16, node_nm)))
    mac_fp16 = (2 * ms.sm_count * ms.tc_rate_per_sm("fp16") * f_ghz / 1e3
                / (ms.sm_count * mac_dp_area_per_sm_mm2(ms, "fp16", 4, node_nm)))
    m, n, k = gemm
    rows = []
    for w in bits:
        wf = FORMATS[f"int{w}"] if f"int{w}" in FORMATS else None
        row = {"w_bits": float(w), "lut_density": u_sym.compute_density(w, node_nm),
               "lut_nosym_density": u_nosym.compute_density(w, node_nm),
               "mac_int8_density": mac_int8, "mac_fp16_density": mac_fp16,
               "lut_ms": math.nan, "mac_ms": math.nan}
        if wf is not None:
            op = Gemm(name="g", m=m, n=n, k=k, a_format=FORMATS[a_format], w_format=wf)
            row["lut_ms"] = u_sym.estimate(op, "lut").latency_s * 1e3
            row["mac_ms"] = mac_unit.estimate(op).latency_s * 1e3
        rows.append(row)
    return rows
