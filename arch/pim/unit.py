"""DRAM processing-in-memory unit (``kind: dram_pim``): bank-level MAC units driven by
all-bank DRAM commands, plus an ASIC for the non-matrix work (PIM-GPT, GDDR6-AiM,
HBM-PIM).

Mapping (PIM-GPT, Wu et al. 2024; AiM, Lee et al. ISSCC 2022). A matrix op
``C[g, m, n] = A[g, m, k] B[g, k, n]`` is a set of ``g*n`` *neurons* (columns of B), each a
``k``-long dot product with the input vector ``A[g, i, :]``. Neurons are split into equal
contiguous ranges over the channels; inside a channel the processing units work in lockstep
(all-bank commands), one neuron per unit at a time. The input vector is written into the
channel's global buffer (WRGB) in chunks of ``global_buffer_bytes``; each chunk ->
``ceil(chunk/lanes)`` MAC commands per neuron, then RDMAC moves the units' accumulators to
the ASIC, which adds the partial sums of the chunks. Each unit's weights are stored
contiguously (chunk, neuron, k) so rows are filled: an all-bank activation serves
``row_bytes * banks_per_unit / (lanes * bytes)`` MAC commands (64 for GDDR6 bf16: row-hit
rate 63/64 = 98.4 %). KV cache: K row-major (a key = a neuron of QK^T), V column-major (a
V column = a neuron of AV); a decode step appends one key (one row write per head) and one
V element per column (one masked burst per column, a row each: upper bound).

Latency. ``simulate`` issues every command through the resolved ``sim.dram`` timing table
(:mod:`arch.pim.kernel`, command level, all-bank refresh) for every channel; the op ends
with the last RDMAC's data, then the ASIC reduces partial sums. ``estimate`` is the closed
form of the same schedule (per-row overhead, RDMAC gaps, WRGB, refresh derating). Vector
ops run on the ASIC: ``ceil(vector ops / lanes)`` ASIC cycles.

Timing-table note: ``sim.dram_presets`` binds MACAB->MACAB by nCCDL. In the public AiM
simulator (arkhadem/aim_simulator, src/dram/impl/GDDR6.cpp) MAC16 has no MAC->MAC row
(only one command per tCK), and the processing unit's own clock is the limit. This module
therefore sets the MACAB->MACAB latency of its resolved table to ``mac_interval_tck`` =
ceil(1 / mac_clock_ratio); everything else is the preset table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

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
from archsim.arch.operands import fused_attention_problem, operand_width_problem
from archsim.arch.pim.spec import DRAM_ENERGY_TECH, DramPimSpec
from archsim.energy import Component, Technology
from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.ops import AllReduce, Conv2d, Embedding, Gemm, Op

__all__ = ["DramPim", "Plan", "Stream"]


@dataclass(frozen=True)
class Stream:
    """One channel's command stream parameters (see :mod:`arch.pim.kernel`)."""

    app_rows: int
    app_bursts: int
    reps: int
    seg_wrgb: tuple[int, ...]
    seg_steps: tuple[int, ...]
    seg_mpn: tuple[int, ...]

    @property
    def macab(self) -> int:
        return self.reps * sum(s * m for s, m in zip(self.seg_steps, self.seg_mpn))

    @property
    def rdmac(self) -> int:
        return self.reps * sum(self.seg_steps)

    @property
    def wrgb(self) -> int:
        return self.reps * sum(self.seg_wrgb)

    def rows(self, macs_per_row: int) -> int:
        """All-bank activations (one per row of the op's weights, per pass)."""
        per = sum(s * m for s, m in zip(self.seg_steps, self.seg_mpn))
        return self.reps * ceil_div(per, macs_per_row) if per else 0


@dataclass(frozen=True)
class Plan:
    """Mapping of one matrix op onto the channels.

    Attributes:
        streams: distinct channel streams -> channels running each.
        reduce_adds: partial-sum additions on the ASIC.
        macs_per_row: MAC commands per all-bank activation.
    """

    streams: tuple[tuple[Stream, int], ...]
    reduce_adds: int
    macs_per_row: int


@register
class DramPim(Unit[DataflowMapping]):
    """DRAM PIM channels with bank-level MAC units and a vector ASIC.

    Mappings: ``pim_gemv`` (matrix ops on the bank units) or ``asic`` (vector ops on the
    ASIC), or the default (whichever runs the op); the other one is infeasible for an op.
    """

    kind = "dram_pim"
    Spec = DramPimSpec
    Mapping = DataflowMapping
    spec: DramPimSpec

    # ---- organisation ------------------------------------------------------------------
    @property
    def dram(self) -> Any:
        return self.spec.dram_spec()

    @property
    def clock_hz(self) -> float:
        """DRAM command clock (cycles of Estimates and ``simulate`` are tCK)."""
        return self.dram.clock_hz

    @property
    def banks(self) -> int:
        """Banks per channel."""
        return self.dram.bankgroups * self.dram.banks

    @property
    def units_per_channel(self) -> int:
        return self.banks // self.spec.banks_per_unit

    @property
    def row_bytes(self) -> int:
        return self.dram.bursts_per_row * self.dram.burst_bytes

    def latency(self, prev: str, nxt: str) -> int:
        """Tightest latency (tCK) of the resolved table from ``prev`` to ``nxt`` (>= 1)."""
        return int(self.table()[(prev, nxt)]) if (prev, nxt) in self.table() else 1

    def table(self) -> dict[tuple[str, str], int]:
        """(prev, next) -> max latency over the non-window rows (the spec's
        ``latency_overrides`` included: MACAB -> MACAB is ``mac_interval_tck``)."""
        cache = self.spec._cache
        if "table" not in cache:
            d = self.dram
            t: dict[tuple[str, str], int] = {}
            for row in d.constraint_rows():
                if len(row) == 5 and row[4] > 1:
                    continue
                v = d.row_latency(row)
                t[(row[1], row[2])] = max(t.get((row[1], row[2]), 1), v, 1)
            cache["table"] = t
        return cache["table"]

    def peak_flops(self) -> float:
        """Peak FLOP/s of all channels: channels x units x lanes x 2 / MAC interval."""
        s = self.spec
        return (s.channels * self.units_per_channel * s.mac_lanes * 2.0
                / (self.latency("MACAB", "MACAB") / self.clock_hz))

    def internal_bytes_per_cycle(self, elem_bytes: float | None = None) -> float:
        """Aggregate bank -> processing-unit bandwidth (bytes per tCK)."""
        eb = self.spec.mac_format.bits / 8 if elem_bytes is None else elem_bytes
        return (self.spec.channels * self.units_per_channel * self.spec.mac_lanes * eb
                / self.latency("MACAB", "MACAB"))

    def io_bytes_per_cycle(self) -> float:
        """Aggregate external data-bus bandwidth of the channels (bytes per tCK)."""
        rr = max(self.latency("RD", "RD"), 1)
        return self.spec.channels * self.dram.burst_bytes / rr

    @property
    def asic_clock_hz(self) -> float:
        return self.spec.asic.clock_mhz * 1e6

    # ---- capability --------------------------------------------------------------------
    def dataflows(self) -> tuple[str, ...]:
        return ("pim_gemv", "asic")

    def native_formats(self) -> tuple[str, ...]:
        """The multiplier's format (narrower ones of the same kind also run)."""
        return (self.spec.mac_format.name,)

    def supports(self, op: Op) -> str | None:
        why = fused_attention_problem(op, self.kind)
        if why:
            return why
        if isinstance(op, AllReduce) and op.devices > 1:
            return "a PIM device has no inter-device link for all-reduce"
        if op.is_matrix:
            hw = self.spec.mac_format
            g = op.as_gemm() if isinstance(op, Conv2d) else op
            assert isinstance(g, Gemm)  # only Gemm and Conv2d (via its GEMM) do MACs
            why = operand_width_problem((("activation", g.a_format), ("weight", g.b_format)),
                                        hw, f"the bank units' {hw.name}")
            if why:
                return why
            if g.b_is_weight and g.w_sparsity.fraction < 1.0:
                return "bank MAC units read dense weights (no sparse format)"
        return None

    def peak_macs_per_cycle(self, op: Op) -> float:
        if op.is_matrix:
            return (self.spec.channels * self.units_per_channel * self.spec.mac_lanes
                    / self.latency("MACAB", "MACAB"))
        return self.spec.asic.vector_lanes * self.asic_clock_hz / self.clock_hz

    def peak_bytes_per_cycle(self) -> float:
        """Internal bank bandwidth: the weights never leave the banks."""
        return self.internal_bytes_per_cycle()

    # ---- mapping -----------------------------------------------------------------------
    def plan(self, op: Op) -> Plan:
        """Partition a matrix op over channels x units x rows (see module docstring)."""
        g = op.as_gemm() if isinstance(op, Conv2d) else op
        assert isinstance(g, Gemm)
        s, d = self.spec, self.dram
        C, U = s.channels, self.units_per_channel
        a_b = g.a_format.bytes_per_element
        w_b = g.b_format.bytes_per_element
        gb_elems = max(s.mac_lanes, int(s.global_buffer_bytes // a_b))
        chunk_elems = max(s.mac_lanes, gb_elems // s.mac_lanes * s.mac_lanes)
        chunks = [min(chunk_elems, g.k - i) for i in range(0, g.k, chunk_elems)]
        macs_per_row = max(1, int(self.row_bytes * s.banks_per_unit // (s.mac_lanes * w_b)))
        groups, n = g.batch, g.n
        total = groups * n
        # KV-cache append (attention): rows written per decode step
        app_rows_total, app_bursts = 0, 0
        if not g.b_is_weight and g.role in ("qk", "av"):
            kv = groups // g.b_shared
            if g.role == "qk":       # one new key (k elements) per KV head, one row each
                app_rows_total, app_bursts = kv, ceil_div(int(g.k * w_b), d.burst_bytes)
            else:                    # one new V element per column, masked burst, a row each
                app_rows_total, app_bursts = kv * n, 1
        streams: dict[Stream, int] = {}
        for c in range(C):
            lo, hi = c * total // C, (c + 1) * total // C
            wrgb: list[int] = []
            steps: list[int] = []
            mpn: list[int] = []
            gi = lo // n if n else 0
            while lo < hi:
                cnt = min(hi, (gi + 1) * n) - lo
                for ck in chunks:
                    wrgb.append(ceil_div(int(math.ceil(ck * a_b)), d.burst_bytes))
                    steps.append(ceil_div(cnt, U))
                    mpn.append(ceil_div(ck, s.mac_lanes))
                lo += cnt
                gi += 1
            ar = (c + 1) * app_rows_total // C - c * app_rows_total // C
            st = Stream(ar, app_bursts if ar else 0, g.m, tuple(wrgb), tuple(steps), tuple(mpn))
            streams[st] = streams.get(st, 0) + 1
        adds = g.batch * g.m * g.n * (len(chunks) - 1)
        return Plan(tuple(streams.items()), adds, macs_per_row)

    # ---- closed form of the command schedule ------------------------------------------
    def stream_cycles(self, st: Stream, macs_per_row: int) -> float:
        """Closed-form tCK of one channel stream (the kernel's schedule, see estimate())."""
        L = self.latency
        tm = self.timing
        n_mac = L("MACAB", "MACAB")
        t = 0.0
        if st.app_rows:
            nb_full = self.banks
            act_sp = max(tm("nRRDS"), math.ceil(tm("nFAW") / 4))
            wr_sp = L("WR", "WR")
            batches = ceil_div(st.app_rows, nb_full)
            for b in range(batches):
                nb = min(nb_full, st.app_rows - b * nb_full)
                t += ((nb - 1) * act_sp + tm("nRCDWR") + nb * st.app_bursts * wr_sp
                      + L("WR", "PRE") + tm("nRP"))
        per_pass = 0.0
        macs = sum(a * b for a, b in zip(st.seg_steps, st.seg_mpn))
        rows = ceil_div(macs, macs_per_row) if macs else 0
        if macs:
            rd_extra = L("MACAB", "RDMAC") + 1 - n_mac
            mac_time = macs * n_mac + sum(st.seg_steps) * rd_extra
            row_ovh = L("MACAB", "PREA") + L("PREA", "ACTAB") + L("ACTAB", "MACAB") - n_mac
            per_row = mac_time / rows + row_ovh
            floor = max(L("ACTAB", "ACTAB"), L("ACTAB", "PREA") + L("PREA", "ACTAB"))
            per_pass += rows * max(per_row, floor) - L("MACAB", "PREA") - L("PREA", "ACTAB")
        wr_gap = L("WRGB", "WRGB")
        for w in st.seg_wrgb:
            if w:
                per_pass += (w - 1) * wr_gap + max(L("WRGB", "MACAB"), 1)
        t += st.reps * per_pass + self.dram.read_latency_cycles
        if self.spec.refresh:
            t_ref = (tm("nRFC") + L("ACTAB", "MACAB") + L("MACAB", "PREA") + L("PREA", "REF"))
            t /= max(1e-3, 1.0 - t_ref / tm("nREFI"))
        return t

    def timing(self, name: str) -> int:
        return int(self.dram.timing[name])

    # ---- estimate ----------------------------------------------------------------------
    def op_dataflows(self, op: Op) -> tuple[str, ...]:
        return ("pim_gemv",) if op.is_matrix else ("asic",)

    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        m = self.parse_mapping(mapping)
        reason = self.supports(op)
        if reason:
            return infeasible(op, self.name, reason, self.clock_hz)
        if m.dataflow and m.dataflow not in self.op_dataflows(op):
            return infeasible(op, self.name, f"dataflow {m.dataflow!r} does not run "
                              f"{op.kind} ops here", self.clock_hz)
        if op.is_matrix:
            return self._estimate_matrix(op)
        return self._estimate_asic(op)

    def _asic_cycles_in_tck(self, asic_cycles: float) -> float:
        return asic_cycles * self.clock_hz / self.asic_clock_hz

    def _estimate_matrix(self, op: Op) -> Estimate:
        p = self.plan(op)
        dram_cyc = max(self.stream_cycles(st, p.macs_per_row) for st, _ in p.streams)
        red = self._asic_cycles_in_tck(ceil_div(p.reduce_adds, self.spec.asic.vector_lanes))
        cycles = cycles_of(dram_cyc + red)
        return self._matrix_estimate(op, p, cycles, dram_cyc, red)

    def _matrix_estimate(self, op: Op, p: Plan, cycles: int, dram_cyc: float,
                         red: float) -> Estimate:
        s = self.spec
        U = self.units_per_channel
        macab = sum(st.macab * k for st, k in p.streams)
        actab = sum(st.rows(p.macs_per_row) * k for st, k in p.streams)
        rdmac = sum(st.rdmac * k for st, k in p.streams)
        wrgb = sum(st.wrgb * k for st, k in p.streams)
        app_rows = sum(st.app_rows * k for st, k in p.streams)
        app_bytes = sum(st.app_rows * st.app_bursts * k for st, k in p.streams) * \
            self.dram.burst_bytes
        bb = self.dram.burst_bytes
        io_w = wrgb * bb + app_bytes
        io_r = rdmac * bb
        sram_words = (io_w + io_r) * 8 / s.asic.sram_width_bits
        actions = {
            (self.cname("dram"), "activate"): float(actab * self.banks + app_rows),
            (self.cname("dram"), "mac"): float(macab * U * s.mac_lanes),
            (self.cname("bank_read"), "read"): float(macab * U),
            (self.cname("dram"), "write"): float(io_w),
            (self.cname("dram"), "read"): float(io_r),
            (self.cname("asic_vector"), "op"): float(p.reduce_adds),
            (self.cname("asic_sram"), "read"): sram_words / 2,
            (self.cname("asic_sram"), "write"): sram_words / 2,
        }
        hits = macab - actab
        eff = op.effective_macs()
        peak = self.peak_macs_per_cycle(op)
        return Estimate(
            op.name, op.kind, self.name, "pim_gemv", cycles, self.clock_hz, macs=op.macs(),
            flops=op.flops(), dram_read_bytes=float(io_r), dram_write_bytes=float(io_w),
            actions=MappingProxyType(actions),
            utilization=eff / (cycles * peak) if cycles else 0.0, bound="memory",
            mapping=(f"pim_gemv {s.channels}ch x {U}u, {len(p.streams)} stream(s), "
                     f"{p.macs_per_row} MAC/row"),
            details=MappingProxyType({
                "dram_cycles": float(dram_cyc), "asic_cycles_tck": float(red),
                "macab": float(macab), "actab": float(actab), "rdmac": float(rdmac),
                "wrgb": float(wrgb), "append_rows": float(app_rows),
                "row_hit_rate": hits / macab if macab else 0.0,
                "commands": float(macab + 2 * actab + rdmac + wrgb + 3 * app_rows)}))

    def _estimate_asic(self, op: Op) -> Estimate:
        a = self.spec.asic
        ops = op.vector_ops()
        asic = self._asic_cycles_in_tck(ceil_div(ops, a.vector_lanes))
        rd = 0.0
        io = 0.0
        act = 0.0
        if isinstance(op, Embedding):   # rows gathered from the PIM DRAM over the channels
            rd = op.weight_bytes()
            io = rd / self.io_bytes_per_cycle() + self.dram.read_latency_cycles \
                + self.timing("nRCDRD")
            act = float(op.tokens * ceil_div(int(rd / op.tokens), self.row_bytes))
        cycles = cycles_of(asic + io)
        actions = {(self.cname("asic_vector"), "op"): float(ops),
                   (self.cname("asic_sram"), "read"): (op.input_bytes() + op.weight_bytes())
                   * 8 / a.sram_width_bits,
                   (self.cname("asic_sram"), "write"): op.output_bytes() * 8 / a.sram_width_bits,
                   (self.cname("dram"), "read"): rd,
                   (self.cname("dram"), "activate"): act}
        peak = self.peak_macs_per_cycle(op)
        return Estimate(op.name, op.kind, self.name, "asic", cycles, self.clock_hz,
                        flops=op.flops(), dram_read_bytes=rd, actions=MappingProxyType(actions),
                        utilization=ops / (cycles * peak) if cycles and peak else 0.0,
                        bound="compute" if asic >= io else "memory", mapping="asic",
                        details=MappingProxyType({"asic_cycles_tck": float(asic),
                                                  "io_cycles": float(io)}))

    # ---- command-level simulation -----------------------------------------------------
    def new_state(self) -> tuple[Any, np.ndarray]:
        """A fresh (DramState-like instance, per-channel state) for :meth:`run_plan`."""
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.arch.pim import kernel as PK
        from archsim.sim.dram import resolve

        inst = resolve(self.dram, ring_capacity=1)
        cs = np.zeros((self.spec.channels, PK.N_FIELDS), np.int64)
        cs[:, PK.F_OPEN] = -1
        cs[:, PK.F_REF] = self.timing("nREFI")
        return inst, cs

    def run_plan(self, p: Plan, inst: Any, cs: np.ndarray, cnt: np.ndarray,
                 start: int = 0, dedupe: bool = False) -> int:
        """Issue the plan's streams on every channel from cycle ``start``; returns the end.

        Channels share no row of the timing table, so each channel runs its whole stream
        before the next. With ``dedupe`` (only valid when every channel starts in the same
        state, e.g. a fresh device) one channel per distinct stream is simulated and its
        end cycle and counters stand for the channels running the same stream (exact:
        same state + same commands -> same timing).
        """
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.arch.pim import kernel as PK

        nrefi = self.timing("nREFI") if self.spec.refresh else 0
        rlat = self.dram.read_latency_cycles
        if start:   # the op starts when the ASIC has the previous results
            np.maximum(inst.nx, start, out=inst.nx)
            cs[:, PK.F_SUBOK] = 0  # the cached bank-row maxima of run_channel
            np.maximum(cs[:, PK.F_END], start, out=cs[:, PK.F_END])
        ch = 0
        end = start
        for st, count in p.streams:
            w = np.asarray(st.seg_wrgb, np.int64)
            sp = np.asarray(st.seg_steps, np.int64)
            mp = np.asarray(st.seg_mpn, np.int64)
            runs = 1 if dedupe else count
            before = cnt.copy()
            for _ in range(runs):
                e = PK.run_channel(inst, cs, cnt, ch, nrefi, rlat, st.app_rows, st.app_bursts,
                                   st.reps, w, sp, mp, p.macs_per_row)
                end = max(end, int(e))
                ch += 1
            if dedupe and count > 1:
                cnt += (cnt - before) * (count - 1)
                ch += count - 1
        return end

    def lower(self, op: Op, mapping: Any = None) -> SimInput:
        """The command-level replay of ``op`` as a :class:`SimInput`.

        Matrix ops: the plan's streams are issued command by command through the resolved
        DRAM timing table (fresh device state, refresh phase 0; ``run_plan``); each channel
        becomes one task on its own server whose duration is that channel's replayed
        command time, and the ASIC's cross-channel reduction one task after all of them.
        Vector ops: one ASIC task of the estimate's duration. The graph's clock is tCK.
        """
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.arch.pim import kernel as PK
        from archsim.sim.taskgraph import TaskGraphBuilder

        self.parse_mapping(mapping)
        reason = self.supports(op)
        if reason:
            raise MappingError(Problem(reason, op.name))
        b = TaskGraphBuilder(clock_hz=self.clock_hz)
        b.add_op(op.name)
        asic = b.add_server("asic")
        if not op.is_matrix:
            b.add_compute(asic, self._estimate_asic(op).cycles)
            return SimInput(b.build(), note="ASIC vector op (closed form)")
        p = self.plan(op)
        inst, cs = self.new_state()
        cnt = np.zeros(PK.N_COUNTERS, np.int64)
        ends = self.channel_ends(p, inst, cs, cnt)
        deps = [b.add_compute(b.add_server(f"channel{c}"), int(e)) for c, e in enumerate(ends)]
        red = self._asic_cycles_in_tck(ceil_div(p.reduce_adds, self.spec.asic.vector_lanes))
        b.add_compute(asic, int(red), deps=deps)
        return SimInput(b.build(), note="one task per channel = its replayed DRAM command "
                        "time (arch.pim.kernel); then the ASIC reduction")

    def channel_ends(self, p: Plan, inst: Any, cs: np.ndarray, cnt: np.ndarray) -> list[int]:
        """End cycle (tCK) of every channel's streams from a fresh state; channels that run
        the same stream share one replay (exact: same state + same commands)."""
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.arch.pim import kernel as PK

        nrefi = self.timing("nREFI") if self.spec.refresh else 0
        rlat = self.dram.read_latency_cycles
        ends: list[int] = []
        for st, count in p.streams:
            before = cnt.copy()
            e = PK.run_channel(inst, cs, cnt, len(ends), nrefi, rlat, st.app_rows,
                               st.app_bursts, st.reps, np.asarray(st.seg_wrgb, np.int64),
                               np.asarray(st.seg_steps, np.int64),
                               np.asarray(st.seg_mpn, np.int64), p.macs_per_row)
            cnt += (cnt - before) * (count - 1)
            ends.extend([int(e)] * count)
        return ends

    # ---- energy / area -----------------------------------------------------------------
    def components(self) -> list[Any]:

        s = self.spec
        fmt = s.mac_format.name
        tech = DRAM_ENERGY_TECH[s.dram_preset]
        col_bits = s.mac_lanes * s.mac_format.bits
        n_units = s.channels * self.units_per_channel
        return [
            Component(self.cname("dram"), "dram", 1, {"tech": tech}),
            Component(self.cname("bank_read"), "fixed", 1, {
                "energy_pj": {"read": s.internal_read_pj_per_bit * col_bits},
                "area_mm2": 0.0, "leakage_w": 0.0,
                "source": "internal_read_pj_per_bit x MAC operand bits (config, see source)"}),
            Component(self.cname("bank_mac"), "mac", n_units * s.mac_lanes, {"format": fmt},
                      technology=Technology(node_nm=s.pim_logic_node_nm)),
            Component(self.cname("dram_background"), "static", 1, {
                "power_w": s.background_power_w_per_channel * s.channels,
                "source": "background_power_w_per_channel x channels (config)"}),
            Component(self.cname("asic_vector"), "vector", s.asic.vector_lanes,
                      {"format": s.asic.format.name}),
            Component(self.cname("asic_sram"), "sram", 1, {
                "capacity_bytes": int(s.asic.sram_kib * 1024),
                "width_bits": s.asic.sram_width_bits}),
        ]

    def memory_capacity_bytes(self) -> float:
        """Bytes of the PIM channels (the preset's organisation x ``channels``)."""
        return float(self.dram.capacity_bytes())

    def report(self) -> dict[str, Any]:
        return {"pim": {"peak_tflops": self.peak_flops() / 1e12,
                        "mac_interval_tck": self.latency("MACAB", "MACAB"),
                        "internal_gbps": self.internal_bytes_per_cycle() * self.clock_hz / 1e9}}
