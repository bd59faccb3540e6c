"""The tensor-core GPU unit (``kind: tensor_core_gpu``): estimates per op and components.

Kernels modelled (equations in ``docs/gpu.md``):

* GEMM / batched GEMM / im2col convolution: CTA-tile search (``arch.gpu.gemm``) with wave
  quantisation, L2 reuse, split-K, epilogue and launch overhead; the MMA datapath comes
  from the operand formats (``arch.gpu.precision``): tensor cores, weight-only
  dequantisation (W4A16), integer tensor cores (W8A8, W4A4), digit / bit-serial
  decomposition (arbitrary precision, INT6), 2:4 sparse tensor cores, SIMT fp32.
* attention: ``unfused`` (QK, softmax, AV are kernels with the scores in HBM) or
  flash-style ``fused`` (scores stay on chip; one launch), from the spec's ``attention``
  or the ``attn_fused`` / ``attn_unfused`` dataflow.
* softmax, norms, element-wise ops, embedding gathers: bandwidth-bound streaming kernels
  (``max(bytes / sustained bandwidth, ops / CUDA-core rate)``) plus launch overhead.
* all-reduce over ``devices`` GPUs: NCCL's protocols (LL, LL128, Simple; ring) or vLLM's
  custom all-reduce over the GPU's own NVLink (``arch.collective.link_collective`` on
  ``arch.link.device_link``), in at least 16-bit elements.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from archsim.arch.base import Estimate, SimInput, Unit, UnitMapping, cycles_of, infeasible, register
from archsim.arch.collective import link_collective
from archsim.arch.gpu.choice import gemm_kernel_class, kernel_spec
from archsim.arch.gpu.datapath import (
    L2_SECTOR_BITS,
    L2_SLICE_BYTES,
    RF_AB_B_PER_MAC,
    RF_READ_B_PER_MAC,
    RF_WIDTH_BITS,
    RF_WRITE_B_PER_MAC,
    SFU_PER_ELEMENT,
    SMEM_WIDTH_BITS,
)
from archsim.arch.gpu.gemm import (
    SPARSE_EXPAND_OPS_PER_ELEMENT,
    SPLITS,
    GemmResult,
    GemmShape,
    gemm_time,
)
from archsim.arch.gpu.host import EAGER_OPS_PER_ATTENTION, RUNTIME_NOTES, host_s
from archsim.arch.gpu.kernels import (
    attention_tc_format,
    norm_kernels,
    norm_pass_s,
    softmax_global_reread_b,
    softmax_global_s,
    softmax_register_s,
    softmax_reread_s,
    unit_attention_time,
    vector_reread_bytes,
)
from archsim.arch.gpu.lower import lower_attention, lower_gemm, lower_stream
from archsim.arch.gpu.moe import estimate_fused_moe, moe_kernel_spec
from archsim.arch.gpu.paged_attention import estimate_attention, paged_kv_refusal, runs_paged
from archsim.arch.gpu.power import solve_clock
from archsim.arch.gpu.precision import (
    MmaPlan,
    missing_compute_format,
    narrow_float_refusal,
    plan_mma,
)
from archsim.arch.gpu.spec import GpuSpec
from archsim.arch.link import device_link
from archsim.energy import (
    Component,  # energy sits below arch; imported lazily
    Technology,
)
from archsim.energy.report import energy_per_action_pj
from archsim.workloads.errors import MappingError, Problem
from archsim.workloads.formats import NumberFormat
from archsim.workloads.ops import (
    AllReduce,
    Attention,
    Conv2d,
    Elementwise,
    Embedding,
    FusedMoE,
    Gemm,
    Norm,
    Op,
    Softmax,
    VectorOp,
)

__all__ = ["TensorCoreGpu", "GpuMapping", "DATAFLOWS"]

#: Named dataflows (kernels). ``gemm_tc`` = the default tile search.
DATAFLOWS = ("gemm_tc", "gemm_splitk", "w_only", "digit", "bitserial", "simt", "attn_fused",
             "attn_unfused", "vector", "gather", "allreduce")


@dataclass(frozen=True)
class GpuMapping(UnitMapping):
    """A GPU kernel choice: ``dataflow`` (a kernel of :data:`DATAFLOWS`, ``""`` = the best
    the tile search finds), an optional CTA ``tile`` ``(bm, bn, bk_bytes)``, an optional
    ``split_k`` (None = searched) and ``swap_ab``: the kernel computes the transposed product
    (C^T = W X^T, CUTLASS "swap AB": a GEMM with few tokens puts the weights' N along the
    tile's first side, e.g. vLLM's fp8 scaled-mm for m <= 64); the tile is then given in the
    transposed orientation and the row-alignment class is still the GEMM's own."""

    tile: tuple[int, int, int] | None = None
    split_k: int | None = None
    swap_ab: bool = False


@register
class TensorCoreGpu(Unit[GpuMapping]):
    """A tensor-core GPU (A100 / H100 / H200 / T4 class).

    Contract (in addition to :class:`arch.base.Unit`): ``estimate`` is the CTA-tile model
    of ``arch.gpu.gemm`` for matrix ops and a streaming model for vector ops; it never
    beats ``roofline_cycles`` and is monotone in M, N and K (the tile candidates do not
    depend on the shape). ``mapping`` is None, a dataflow name from :data:`DATAFLOWS`, or
    a mapping ``{"dataflow": str, "tile": [bm, bn, bk_bytes], "split_k": int}``.
    """

    kind = "tensor_core_gpu"
    Spec = GpuSpec
    Mapping = GpuMapping
    spec: GpuSpec

    #: (joules, seconds) of other work sharing the power limiter's averaging window with
    #: each kernel (0, 0 = the kernel runs back to back with itself: sustained).
    power_window: tuple[float, float] = (0.0, 0.0)

    #: Switching activity of the operand data relative to random data: the on-chip,
    #: data-dependent energies (MMA, register file, shared memory, L2, CUDA cores) of the
    #: power model are scaled by it (dynamic energy ~ toggle rate x C V^2). 1 = random
    #: operands (the silicon rows); a benchmark whose operands are mostly zero (uninitialised
    #: weights) switches less and holds a higher clock under the power cap.
    switching_activity: float = 1.0

    def _copy(self) -> TensorCoreGpu:
        u = TensorCoreGpu(self.name, self.spec, self.node_nm)
        u.power_window = self.power_window
        u.switching_activity = self.switching_activity
        return u

    def in_power_window(self, other_j: float, other_s: float) -> TensorCoreGpu:
        """A copy of this unit whose kernels alternate with ``other_s`` seconds of other work
        costing ``other_j`` joules (board energy) inside the power limiter's window, as in a
        benchmark that flushes L2 between calls (``archsim.silicon``)."""
        u = self._copy()
        u.power_window = (float(other_j), float(other_s))
        return u

    def with_switching_activity(self, activity: float) -> TensorCoreGpu:
        """A copy of this unit whose operands switch ``activity`` times as often as random
        data (:attr:`switching_activity`)."""
        u = self._copy()
        u.switching_activity = float(activity)
        return u

    # ---- identity / capability ------------------------------------------------------
    @property
    def clock_hz(self) -> float:
        return self.spec.clock_hz

    def supports(self, op: Op) -> str | None:
        if isinstance(op, (Gemm, Conv2d)):
            g = op.as_gemm() if isinstance(op, Conv2d) else op
            return narrow_float_refusal(self.spec, g.a_format, g.b_format)
        if isinstance(op, (Softmax, Norm, Elementwise, Embedding)):
            return None
        if isinstance(op, Attention):
            f = attention_tc_format(self.spec, op.a_format)
            if not self.spec.tc_rate_per_sm(f):
                return f"no tensor-core rate for attention in {op.a_format.name}"
            if runs_paged(self.spec, op):
                return paged_kv_refusal(self.spec, int(op.kv_bytes_per_element * 8))
            return None
        if isinstance(op, FusedMoE):
            k = moe_kernel_spec(self.spec, op)
            return k if isinstance(k, str) else None
        if isinstance(op, AllReduce):
            if op.devices > 1 and self.spec.nvlink is None:
                return "all-reduce over several GPUs needs an nvlink spec"
            return None
        return f"op kind {op.kind!r} is not modelled on a tensor-core GPU"

    def lacks_compute_format(self, fmt: NumberFormat) -> str | None:
        return missing_compute_format(self.spec, fmt)
    def sparse_weight_loads(self) -> str | None:
        """Bitmap-encoded sparse weights are loaded compressed and expanded into each CTA's
        shared-memory tile before dense MMAs (``GemmShape.b_expand_bpe``)."""
        return None

    def dataflows(self) -> tuple[str, ...]:
        return DATAFLOWS

    # ---- roofline ---------------------------------------------------------------------
    def _plan(self, op: Op, prefer: str = "") -> MmaPlan | None:
        g = op.as_gemm() if isinstance(op, Conv2d) else op
        assert isinstance(g, Gemm)
        return plan_mma(self.spec, g.a_format, g.b_format, self.spec.dequant_ops_per_weight,
                        prefer)

    def peak_macs_per_cycle(self, op: Op) -> float:
        """Dense MACs/cycle of the fastest datapath for the op's formats at ``clock_hz``
        (vector ops: FP32 lanes)."""
        if isinstance(op, Attention):
            f = attention_tc_format(self.spec, op.a_format)
            return float(self.spec.sm_count * self.spec.tc_rate_per_sm(f))
        if isinstance(op, FusedMoE):
            f = "fp8_e4m3" if op.w_format.bytes_per_element < 2 else "fp16"
            return float(self.spec.sm_count * self.spec.tc_rate_per_sm(f))
        if op.is_matrix:
            plan = self._plan(op)
            assert plan is not None
            return self.spec.sm_count * plan.macs_per_clock_sm
        return float(self.spec.sm_count * self.spec.cuda_core.fp32_lanes_per_sm)

    def peak_bytes_per_cycle(self) -> float:
        return self.spec.memory.bytes_per_s / self.clock_hz

    def roofline_cycles(self, op: Op, mapping: Any = None) -> float:
        """As :meth:`Unit.roofline_cycles`, except that a fused-attention op (spec
        ``attention: fused`` or ``mapping="attn_fused"``) has compulsory traffic without the
        score matrix, which never leaves the chip."""
        df = self._parse_mapping(mapping)[0]
        if not self._fused(op, df or None):
            return super().roofline_cycles(op)
        work = op.effective_macs() if op.is_matrix else op.vector_ops()
        rate = self.peak_macs_per_cycle(op)
        return max(work / rate if rate else 0.0, self._compulsory_bytes(op, True)
                   / self.peak_bytes_per_cycle())

    # ---- helpers ----------------------------------------------------------------------
    def _fused(self, op: Op, dataflow: str | None) -> bool:
        if dataflow == "attn_unfused":
            return False
        fused = dataflow == "attn_fused" or self.spec.attention == "fused"
        if not fused:
            return False
        if isinstance(op, Gemm):
            return op.role in ("qk", "av")
        if isinstance(op, Softmax):
            return op.role == "attn"
        return False

    @staticmethod
    def _compulsory_bytes(op: Op, fused: bool) -> float:
        if not fused:
            return op.min_bytes()
        if isinstance(op, Gemm) and op.role == "qk":
            return op.input_bytes()
        if isinstance(op, Gemm) and op.role == "av":
            return op.b_bytes() + op.output_bytes()
        return 0.0  # fused softmax: scores live in registers / shared memory

    @staticmethod
    def _b_bpe(g: Gemm) -> float:
        """Bytes per B element as streamed by the mainloop, independent of the shape:
        storage bits, N:M compression (values + index bits), group scales amortised over
        ``group_size`` (the same accounting as ``Gemm.b_bytes``)."""
        fmt = g.b_format
        bpe = fmt.bytes_per_element
        if g.b_is_weight:
            bpe = g.w_sparsity.stored_bytes_per_element(bpe)
            if g.group_size:   # (act-order shards keep the whole K's scales: group_span)
                bpe += (g.a_format.bytes_per_element * (2 if fmt.is_integer else 1)
                        / g.group_size * (g.group_span or g.k) / g.k)
        return bpe

    # ---- mappings -----------------------------------------------------------------------
    def check_mapping(self, m: GpuMapping) -> None:
        super().check_mapping(m)
        if m.tile is not None and (
                not isinstance(m.tile, tuple) or len(m.tile) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0
                           for x in m.tile)):
            raise MappingError(Problem(f"expected [bm, bn, bk_bytes] positive ints, got "
                                       f"{m.tile!r}", "mapping.tile"))
        if m.split_k is not None and (not isinstance(m.split_k, int)
                                      or isinstance(m.split_k, bool) or m.split_k < 1):
            raise MappingError(Problem(f"expected an int >= 1, got {m.split_k!r}",
                                       "mapping.split_k"))
        if not isinstance(m.swap_ab, bool):
            raise MappingError(Problem(f"expected true or false, got {m.swap_ab!r}",
                                       "mapping.swap_ab"))

    def host_runtime(self) -> tuple[str, str]:
        """The spec's ``runtime`` (``arch.gpu.host``) unless ``ideal``."""

        r = self.spec.runtime
        return ("", "") if r == "ideal" else (r, RUNTIME_NOTES.get(r, ""))

    def fused_attention(self) -> bool:
        """The spec's ``attention: fused`` (FlashAttention-style kernels: Ampere and later)."""
        return self.spec.attention == "fused"

    def attention_kernels(self) -> tuple[str, ...]:
        """``sdpa`` always; ``paged`` with ``paged_attention`` constants (``arch.gpu.kernels``
        ``paged_attention_parts``), whatever ``attention`` says: a paged-KV backend's call is
        one fused FlashAttention kernel (FA3 on Hopper, FA2 on Ampere), so a graph built for
        it has fused attention (``archsim.api.device_build``)."""
        if self.spec.paged_attention is not None:
            return ("sdpa", "paged")
        return ("sdpa",)

    def op_dataflows(self, op: Op) -> tuple[str, ...]:
        """Kernels worth trying: the GEMM datapaths for matrix ops (and both attention
        forms for the attention GEMMs), fused/unfused for an attention softmax."""
        if isinstance(op, (Gemm, Conv2d)):
            att = ("attn_fused", "attn_unfused") if getattr(op, "role", "") in ("qk", "av") \
                else ()
            return ("gemm_tc", "gemm_splitk", "w_only", "digit", "bitserial", "simt", *att)
        if isinstance(op, Softmax) and op.role == "attn":
            return ("attn_fused", "attn_unfused")
        return ()

    def _parse_mapping(self, mapping: Any) -> tuple[str, tuple[int, int, int] | None, int | None]:
        m = self.parse_mapping(mapping)
        return m.dataflow, m.tile, m.split_k

    def to_cycles(self, seconds: float) -> int:
        """``seconds`` as whole cycles of this unit's clock (rounded up)."""
        return cycles_of(seconds * self.clock_hz)

    def action_pj(self) -> dict[tuple[str, str], float]:
        """Energy per action (pJ, at the top voltage) of this unit's components, from
        ``energy/`` (cached; used only by the power model)."""
        cache = self.__dict__.get("_pj_cache")
        if cache is None:

            tech = Technology(node_nm=self.node_nm)
            cache = {}
            for c in self.components():
                if c.cls == "static":
                    continue
                for a in ("mac", "op", "read", "write", "cycle"):
                    try:
                        cache[(c.name, a)] = energy_per_action_pj(c, a, tech)
                    except ValueError:
                        continue
            self.__dict__["_pj_cache"] = cache
        return cache

    def power_cap(self, time_s: float, fixed_s: float, t_clk_s: float, t_mem_s: float,
                  actions: dict[tuple[str, str], float]
                  ) -> tuple[float, dict[tuple[str, str], float], dict[str, float]]:
        """Apply the power cap (``spec.power``, ``arch.gpu.power``) to a kernel timed at the
        top clock: ``fixed_s`` (launch, latency) + max(``t_clk_s`` (SM-clock bound), ``t_mem_s``
        (HBM bound)). Returns (latency s, actions, details). Core-rail action counts come back
        weighted by (V/V_top)^2 (energy-equivalent actions at the top voltage; HBM unscaled),
        plus the active-chip clock cycles. Without ``spec.power``: unchanged."""
        p = self.spec.power
        if p is None:
            return time_s, actions, {}

        pj = self.action_pj()
        hbm = self.cname("hbm")
        e_core = sum(c * pj.get(k, 0.0) for k, c in actions.items()
                     if k[0] != hbm) * 1e-12 * self.switching_activity
        e_hbm = sum(c * pj.get(k, 0.0) for k, c in actions.items() if k[0] == hbm) * 1e-12
        pt = solve_clock(p, self.spec.static_power_w, t_clk_s, t_mem_s, e_core, e_hbm,
                         *self.power_window)
        out = {k: (c if k[0] == hbm else c * pt.v2) for k, c in actions.items()}
        out[(self.cname("clock"), "cycle")] = pt.body_s * pt.clock_mhz * 1e6 * pt.v2
        return fixed_s + pt.body_s, out, {"clock_mhz": pt.clock_mhz, "power_w": pt.power_w,
                                          "volts": pt.volts, "power_capped": float(pt.capped)}

    # ---- estimate ---------------------------------------------------------------------
    def estimate(self, op: Op, mapping: Any = None) -> Estimate:
        reason = self.supports(op)
        if reason:
            return infeasible(op, self.name, reason, self.clock_hz)
        df, tile, split = self._parse_mapping(mapping)
        if isinstance(op, (Gemm, Conv2d)):
            swap = self.parse_mapping(mapping).swap_ab
            return self._with_host(self._estimate_gemm(op, df, tile, split, swap))
        if isinstance(op, VectorOp):
            return self._with_host(self._estimate_vector(op, df))
        if isinstance(op, Embedding):
            return self._with_host(self._estimate_stream(op, "gather", op.weight_bytes(),
                                                         op.output_bytes(), 0))
        if isinstance(op, AllReduce):
            return self._with_host(self._estimate_allreduce(op))
        if isinstance(op, Attention):
            return self._with_host(self._estimate_attention(op))
        if isinstance(op, FusedMoE):
            return self._with_host(estimate_fused_moe(self, op))
        return infeasible(op, self.name, f"op kind {op.kind!r} not modelled", self.clock_hz)

    def _with_host(self, e: Estimate) -> Estimate:
        """Add the host cost of ``spec.runtime`` (``arch.gpu.host``): ``host_s`` and
        ``wall_s = max(device, host)`` (this op alone) in the details; the device latency is
        unchanged; the run's wall is a launch queue over the ops (``archsim.api``). A
        fused piece that launches nothing (flash AV / softmax) costs no host time."""
        if self.spec.runtime == "ideal" or not e.feasible:
            return e

        h = host_s(self.spec.runtime) * float(e.details.get("launches", 1.0))
        if e.op_kind == "attention" and self.spec.runtime.startswith("eager"):
            h *= EAGER_OPS_PER_ATTENTION
        return replace(e, details=MappingProxyType({**e.details, "host_s": h,
                                                    "wall_s": max(e.latency_s, h)}))

    def _estimate_attention(self, op: Attention) -> Estimate:
        """FlashAttention prefill / split-KV decode (``arch.gpu.kernels``)."""

        return estimate_attention(self, op)

    def _gemm_kernel(self, op: Gemm | Conv2d, df: str, tile: tuple[int, int, int] | None,
                     split: int | None, swap: bool = False
                     ) -> tuple[MmaPlan, GemmResult, bool, float] | Estimate:
        """The chosen GEMM kernel: (plan, tile-model result, fused, sparse speedup), or an
        infeasible Estimate. Shared by ``estimate`` and ``lower``."""
        s = self.spec
        g = op.as_gemm() if isinstance(op, Conv2d) else op
        prefer = df if df in ("bitserial", "digit", "simt", "w_only") else ""
        plan = self._plan(op, prefer)
        if plan is None:
            return infeasible(op, self.name, f"no {df} datapath for {g.a_format.name} x "
                              f"{g.b_format.name} on this GPU", self.clock_hz)
        lib = s.tensor_core.library_rate_fraction.get(plan.tc_format) if plan.tensor else None
        if lib:   # the library's kernel for this format does not reach the hardware rate
            plan = replace(plan, rate_per_sm=plan.rate_per_sm * lib)
        if plan.tensor:   # the library's kernel class for the rows' alignment (choice.py)
            kc = gemm_kernel_class(s, g.n, g.k, g.a_format.bits, g.b_format.bits,
                                   padded=isinstance(op, Conv2d))
            if not kc.tma:
                plan = replace(plan, rate_per_sm=plan.rate_per_sm * kc.rate_fraction)
                s = kernel_spec(s, kc)
        fused = self._fused(g, df)
        a_bpe = g.a_format.bytes_per_element
        b_bytes = g.b_bytes()
        if isinstance(op, Conv2d):
            a_hbm = op.input_bytes()
            b_bytes = op.weight_bytes()
            b_distinct = g.batch
        else:
            # act-order: the input's columns are permuted first (read + write, then read)
            a_hbm = g.batch * g.m * g.k * a_bpe * (3 if g.permute_a else 1)
            b_distinct = g.batch // g.b_shared
        c_hbm = g.output_bytes()
        if fused and g.role == "qk":
            c_hbm = 0.0
        if fused and g.role == "av":
            a_hbm = 0.0
        sp = g.w_sparsity if g.b_is_weight else None
        sparse = 1.0
        if (sp is not None and sp.structured and sp.m in (2, 4) and sp.n / sp.m <= 0.5
                and plan.tensor):
            sparse = s.tensor_core.sparse_24_speedup
        # unstructured sparse weights: sparse loads + dense MMA (Flash-LLM / SpInfer)
        expand = sp is not None and sp.fraction < 1.0 and not sp.structured
        shape = GemmShape(g.batch, g.m, g.n, g.k, a_bpe, self._b_bpe(g),
                          g.a_format.bytes_per_element, a_hbm, b_bytes, b_distinct, c_hbm, sparse,
                          b_expand_bpe=g.b_format.bytes_per_element if expand else 0.0,
                          b_expand_ops=SPARSE_EXPAND_OPS_PER_ELEMENT if expand else 0.0)
        if swap and g.batch == 1 and not expand and sparse == 1.0:
            # C^T = W X^T: the weights are the tile's first operand, the tokens its second
            shape = GemmShape(1, g.n, g.m, g.k, self._b_bpe(g), a_bpe,
                              g.a_format.bytes_per_element, b_bytes, a_hbm, 1, c_hbm)
        splits: tuple[int, ...] = SPLITS
        if split is not None:
            splits = (split,)
        elif df == "gemm_splitk":
            splits = tuple(x for x in SPLITS if x > 1)
        launch = not (fused and g.role == "av")
        rank = None
        if s.power is not None:

            # energy of a candidate is linear in its counts: fold the pJ per count once
            probe = GemmResult(0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                               1, 1, 1, 1, 2, 1, 1, "")
            pj = self.action_pj()
            hbm = self.cname("hbm")
            per: dict[str, float] = {}
            for field_ in ("mma_macs", "convert_ops", "smem_bytes", "l2_bytes"):
                unit_counts = {f: float(f == field_) for f in
                               ("mma_macs", "convert_ops", "smem_bytes", "l2_bytes")}
                only = replace(probe, hbm_read_bytes=0.0, hbm_write_bytes=0.0,
                               mma_macs=unit_counts["mma_macs"],
                               convert_ops=unit_counts["convert_ops"],
                               smem_bytes=unit_counts["smem_bytes"],
                               l2_bytes=unit_counts["l2_bytes"])
                per[field_] = sum(c * pj.get(key, 0.0) for key, c in
                                  self._gemm_actions(plan, only).items()) * 1e-12
            e_hbm_b = pj.get((hbm, "read"), 0.0) * 1e-12
            pw = s.power

            def rank(c: GemmResult) -> float:   # latency at the candidate's own clock
                e_core = ((c.mma_macs - c.zero_macs) * per["mma_macs"] + c.convert_ops * per["convert_ops"]
                          + c.smem_bytes * per["smem_bytes"]
                          + c.l2_bytes * per["l2_bytes"]) * self.switching_activity
                e_mem = (c.hbm_read_bytes + c.hbm_write_bytes) * e_hbm_b
                pt = solve_clock(pw, s.static_power_w, max(c.sm_s, c.l2_s), c.hbm_s, e_core,
                                 e_mem, *self.power_window)
                return c.launch_s + pt.body_s
        try:
            r = gemm_time(s, shape, plan, tiles=(tile,) if tile else None, splits=splits,
                          launch=launch, rank=rank)
        except ValueError as exc:   # no CTA tile fits this SM's shared memory / registers
            return infeasible(op, self.name, str(exc), self.clock_hz)
        return plan, r, fused, sparse

    def _estimate_gemm(self, op: Gemm | Conv2d, df: str, tile: tuple[int, int, int] | None,
                       split: int | None, swap: bool = False) -> Estimate:
        s = self.spec
        k = self._gemm_kernel(op, df, tile, split, swap)
        if isinstance(k, Estimate):
            return k
        plan, r, fused, sparse = k
        actions = self._gemm_actions(plan, r)
        lat_s, actions, dvfs = self.power_cap(r.time_s, r.launch_s, max(r.sm_s, r.l2_s), r.hbm_s,
                                          actions)
        cycles = self.to_cycles(lat_s)
        util = op.effective_macs() / (self.peak_macs_per_cycle(op) * cycles) if cycles else 0.0
        dataflow = ("attn_fused" if fused else plan.path if plan.path != "tc" else
                    "gemm_splitk" if r.split > 1 else "gemm_tc")
        details = {"sm_s": r.sm_s, "l2_s": r.l2_s, "hbm_s": r.hbm_s, "waves": r.waves,
                   "bm": r.bm, "bn": r.bn, "bk": r.bk, "split_k": r.split, "stages": r.stages,
                   "ctas_per_sm": r.ctas_per_sm, "passes": plan.passes,
                   "sparse_speedup": sparse, "tensor_clock_hz": s.tensor_clock_mhz * 1e6}
        details.update(dvfs)
        details["launches"] = 1.0 if r.launch_s > 0 else 0.0
        return Estimate(op.name, op.kind, self.name, dataflow, cycles, self.clock_hz,
                        macs=op.macs(), flops=op.flops(), dram_read_bytes=r.hbm_read_bytes,
                        dram_write_bytes=r.hbm_write_bytes,
                        actions=MappingProxyType(actions), utilization=min(1.0, util),
                        bound=r.bound, mapping=f"{plan.describe()} {r.describe()}",
                        details=MappingProxyType(details))

    def _gemm_actions(self, plan: MmaPlan, r: GemmResult) -> dict[tuple[str, str], float]:
        a: dict[tuple[str, str], float] = {}
        if plan.tensor:
            # A and B fragment bytes per MAC scale with the operand width (fp8/int8 fragments
            # are half the bytes of fp16 ones); the fp32 accumulator traffic does not
            w = min(1.0, plan.operand_bits / 16.0) if self.spec.power is not None else 1.0
            rf_read = RF_READ_B_PER_MAC - RF_AB_B_PER_MAC * (1.0 - w)
            # MMAs on zero-filled padding toggle no datapath: no MAC or register energy
            macs = r.mma_macs - r.zero_macs
            a[(self.cname(f"tensor_core_{plan.tc_format}"), "mac")] = macs
            a[(self.cname("regfile"), "read")] = macs * rf_read / (RF_WIDTH_BITS / 8)
            a[(self.cname("regfile"), "write")] = macs * RF_WRITE_B_PER_MAC / (RF_WIDTH_BITS / 8)
            if r.convert_ops:
                a[(self.cname("cuda_core"), "op")] = r.convert_ops
        else:
            a[(self.cname("cuda_core"), "op")] = r.mma_macs + r.convert_ops
        a[(self.cname("smem"), "read")] = r.smem_bytes / (SMEM_WIDTH_BITS / 8)
        a[(self.cname("smem"), "write")] = r.l2_bytes / (SMEM_WIDTH_BITS / 8)
        a[(self.cname("l2"), "read")] = r.l2_bytes / (L2_SECTOR_BITS / 8)
        a[(self.cname("hbm"), "read")] = r.hbm_read_bytes
        a[(self.cname("hbm"), "write")] = r.hbm_write_bytes
        return a

    def _estimate_vector(self, op: VectorOp, df: str) -> Estimate:
        fused = isinstance(op, Softmax) and self._fused(op, df or None)
        fn = op.fn if isinstance(op, Elementwise) else op.kind
        sfu = SFU_PER_ELEMENT.get(fn, 0) * op.elements
        if fused:
            return self._estimate_stream(op, "attn_fused", 0.0, 0.0, op.vector_ops(), sfu,
                                         launch=False)

        extra = vector_reread_bytes(op)
        s = self.spec
        passes = norm_pass_s(s, op)
        if passes is not None:
            # odd width: PyTorch's scalar norm path, two kernels whose passes are issue-bound
            # per SM (calibrated; docs/gpu.md "Vector ops over odd widths"), overlapped with
            # the stream; the re-read hits L2 (a block's row stays there), for the energy
            return self._estimate_stream(op, "vector", op.input_bytes() + op.weight_bytes(),
                                         op.output_bytes(), op.vector_ops(), sfu,
                                         issue_s=passes, l2_reread_b=extra,
                                         launches=norm_kernels(s, op))
        glob = softmax_global_s(s, op)
        if glob is not None:
            # PyTorch's global-memory softmax (docs/gpu.md "Vector ops over odd widths"): its
            # SM side (latency-bound scalar steps, rate-bound 16-byte steps) overlaps the HBM
            # stream; the two re-read passes hit L2 while the rows in flight fit, else HBM
            l2_b, hbm_b = softmax_global_reread_b(s, op)
            return self._estimate_stream(op, "vector",
                                         op.input_bytes() + op.weight_bytes() + hbm_b,
                                         op.output_bytes(), op.vector_ops(), sfu,
                                         issue_s=glob, l2_reread_b=l2_b)
        reg = softmax_register_s(s, op)
        if reg is not None:
            # PyTorch's register softmax (docs/gpu.md "Vector ops over odd widths"): the row
            # read once into registers; its SM side (rows per SM / resident blocks x one row's
            # time) overlaps the HBM stream
            return self._estimate_stream(op, "vector", op.input_bytes() + op.weight_bytes(),
                                         op.output_bytes(), op.vector_ops(), sfu, issue_s=reg)
        serial = softmax_reread_s(s, op)
        if serial:
            # the re-read passes run after the first, issue-bound per SM (calibrated;
            # docs/gpu.md "vector"), whether they hit L2 or HBM
            return self._estimate_stream(op, "vector", op.input_bytes() + op.weight_bytes(),
                                         op.output_bytes(), op.vector_ops(), sfu,
                                         serial_s=serial, l2_reread_b=extra)
        reread = op.stream_bytes() if isinstance(op, Norm) else op.input_bytes()
        if extra and reread <= s.l2.l2_bytes * s.l2.usable_fraction:
            # the re-reads hit L2 (the tensor re-read fits: a fused residual norm's new
            # stream): charged on the L2 at its bandwidth
            return self._estimate_stream(op, "vector", op.input_bytes() + op.weight_bytes(),
                                         op.output_bytes(), op.vector_ops(), sfu,
                                         l2_extra_b=extra)
        return self._estimate_stream(op, "vector", op.input_bytes() + op.weight_bytes() + extra,
                                     op.output_bytes(), op.vector_ops(), sfu)

    def _estimate_stream(self, op: Op, dataflow: str, read_b: float, write_b: float,
                         ops: float, sfu_ops: float = 0.0, launch: bool = True,
                         l2_extra_b: float = 0.0, serial_s: float = 0.0,
                         l2_reread_b: float = 0.0, issue_s: float = 0.0,
                         launches: int = 1) -> Estimate:
        """Streaming kernel: max(bytes / sustained bandwidth, L2 re-reads, ALU, SFU, SM issue
        ``issue_s``) + ``launches`` launches + latency, plus ``serial_s`` of passes that run
        after it (``l2_reread_b`` bytes they read through L2, for the energy)."""
        s = self.spec
        t_mem = (read_b + write_b) / s.memory.sustained_bytes_per_s
        t_alu = max(ops / (s.sm_count * s.cuda_core.fp32_lanes_per_sm * s.clock_hz), issue_s)
        t_sfu = sfu_ops / (s.sm_count * s.cuda_core.sfu_per_sm * s.clock_hz)
        t_alu = max(t_alu, (read_b + l2_extra_b) / (s.l2.bandwidth_gbps * 1e9)) if l2_extra_b \
            else t_alu
        body = max(t_mem, t_alu, t_sfu) + serial_s
        fixed = (launches * s.kernel_launch_s if launch else 0.0) + (
            s.dram_latency_ns * 1e-9 if read_b else 0.0)
        bound = "memory" if body == t_mem and t_mem > 0 else "compute"
        if fixed > body:
            bound = "latency"
        actions: dict[tuple[str, str], float] = {}
        if ops:
            actions[(self.cname("cuda_core"), "op")] = float(ops)
        if read_b:
            actions[(self.cname("hbm"), "read")] = read_b
            actions[(self.cname("l2"), "read")] = read_b / (L2_SECTOR_BITS / 8)
        if write_b:
            actions[(self.cname("hbm"), "write")] = write_b
        if l2_reread_b:
            actions[(self.cname("l2"), "read")] = (actions.get((self.cname("l2"), "read"), 0.0)
                                                   + l2_reread_b / (L2_SECTOR_BITS / 8))
        # serial passes add to both bounds: max(a + s, b + s) = max(a, b) + s at the top clock
        lat_s, actions, dvfs = self.power_cap(fixed + body, fixed, max(t_alu, t_sfu) + serial_s,
                                          t_mem + serial_s, actions)
        cycles = self.to_cycles(lat_s)
        peak = s.sm_count * s.cuda_core.fp32_lanes_per_sm
        util = ops / (peak * cycles) if cycles and ops else 0.0
        return Estimate(op.name, op.kind, self.name, dataflow, cycles, self.clock_hz,
                        flops=op.flops(), dram_read_bytes=read_b, dram_write_bytes=write_b,
                        actions=MappingProxyType(actions), utilization=min(1.0, util),
                        bound=bound, mapping=dataflow,
                        details=MappingProxyType({"mem_s": t_mem, "alu_s": t_alu, "sfu_s": t_sfu,
                                                  "launches": 1.0 if launch else 0.0,
                                                  "kernels": float(launches), **dvfs}))

    def _estimate_allreduce(self, op: AllReduce) -> Estimate:
        """All-reduce over the GPU's own link (``arch.link.device_link``: NCCL's protocols
        and vLLM's custom all-reduce as fitted on H100, carried to this link's bandwidth),
        priced by ``arch.collective.link_collective``: the cheapest NCCL (algorithm,
        protocol), or vLLM's kernel when ``op.impl`` says so; the payload in the op's reduce
        format (at least 16-bit, ``AllReduce.reduce_format``). The protocols' base cost is
        the call's launch; the HBM traffic (each step reads the outgoing chunk and writes
        the incoming one) bounds it from below with a launch of its own."""
        s = self.spec
        n = op.devices
        payload = op.payload_bytes()
        if n == 1 or s.nvlink is None:
            return self._estimate_stream(op, "allreduce", payload, payload, 0)
        c = link_collective(device_link(s.nvlink), "allreduce", n, payload,
                            impl=op.impl, dtype=op.reduce_format)
        sent = c.wire_bytes
        reads = payload + sent
        writes = payload + sent
        t_mem = (reads + writes) / s.memory.sustained_bytes_per_s
        cycles = self.to_cycles(max(c.time_s, s.kernel_launch_s + t_mem))
        actions = {(self.cname("hbm"), "read"): reads, (self.cname("hbm"), "write"): writes,
                   (self.cname("cuda_core"), "op"): float(op.elements) * (n - 1) / n}
        how = f"{c.algorithm}/{c.protocol}" if c.protocol else c.algorithm
        return Estimate(op.name, op.kind, self.name, "allreduce", cycles, self.clock_hz,
                        dram_read_bytes=reads, dram_write_bytes=writes,
                        actions=MappingProxyType(actions),
                        bound="network" if c.time_s >= s.kernel_launch_s + t_mem else "memory",
                        mapping=f"{how} over {n} GPUs ({op.reduce_format})",
                        details=MappingProxyType({"link_s": c.time_s, "mem_s": t_mem,
                                                  "link_bytes": sent}))

    # ---- energy / area components -----------------------------------------------------
    def components(self) -> list[Any]:

        s = self.spec
        fmts = list(s.tensor_core.fma_per_clock)
        primary = "fp16" if "fp16" in fmts else fmts[0]
        out = []
        for f in fmts:
            # one physical array: its area is counted once (the fp16 datapath); the other
            # formats are modes of the same array (count 0: energy per action only).
            count = (s.sm_count * s.tensor_core.per_sm * s.tensor_core.fma_per_clock[f]
                     if f == primary else 0)
            # the fp6 mode prices one MAC of the wider-exponent OCP element (E3M2)
            energy_fmt = "fp6_e3m2" if f == "fp6" else f
            out.append(Component(self.cname(f"tensor_core_{f}"), "mac", count,
                                 {"format": energy_fmt}))
        out += [
            Component(self.cname("cuda_core"), "vector", s.sm_count * s.cuda_core.fp32_lanes_per_sm,
                      {"format": "fp32"}),
            Component(self.cname("regfile"), "regfile", s.sm_count,
                      {"capacity_bytes": s.sm.regfile_bytes_per_sm, "width_bits": RF_WIDTH_BITS}),
            Component(self.cname("smem"), "sram", s.sm_count,
                      {"capacity_bytes": s.sm.smem_bytes_per_sm, "width_bits": SMEM_WIDTH_BITS}),
            Component(self.cname("l2"), "sram", max(1, int(s.l2.l2_bytes // L2_SLICE_BYTES)),
                      {"capacity_bytes": L2_SLICE_BYTES, "width_bits": L2_SECTOR_BITS}),
            Component(self.cname("hbm"), "dram", 1, {"tech": s.memory.tech}),
            Component(self.cname("static"), "static", 1,
                      {"power_w": s.static_power_w, "source": s.source or "config static_power_w"}),
        ]
        if s.power is not None:
            # calibrated board (docs/gpu.md): the on-chip library energies times the fitted
            # scale, the HBM energy times its scale, and the active-chip energy per clock

            scale = {"mac": s.power.core_energy_scale, "vector": s.power.core_energy_scale,
                     "regfile": s.power.core_energy_scale, "sram": s.power.core_energy_scale,
                     "dram": s.power.hbm_energy_scale}
            out = [replace(c, attrs={**c.attrs, "energy_scale": scale[c.cls]})
                   if c.cls in scale else c for c in out]
            out.append(Component(self.cname("clock"), "fixed", 1, {
                "energy_pj": {"cycle": s.power.active_pj_per_cycle}, "area_mm2": 0.0,
                "leakage_w": 0.0, "source": s.power.source or "config power.active_pj_per_cycle"}))
        return out

    # ---- cycle-level lowering ---------------------------------------------------------
    def lower(self, op: Op, mapping: Any = None) -> SimInput:
        """CTA-tile lowering (``arch.gpu.lower``): per k-step HBM/L2 loads into shared
        memory, MMA, epilogue stores; streaming kernels as pipelined read/ALU/write pieces.
        The graph's clock is the tensor clock (GEMMs) or the SM clock."""
        return SimInput(self._lower_graph(op, mapping))

    def _lower_graph(self, op: Op, mapping: Any = None) -> Any:
        """The ``sim.TaskGraph`` of :meth:`lower`."""

        reason = self.supports(op)
        if reason:
            raise MappingError(Problem(reason, op.name))
        df, tile, split = self._parse_mapping(mapping)
        s = self.spec
        # DVFS: the graph runs at the clock the power cap leaves this kernel (the estimate's
        # operating point; the top clock without a power model)
        mhz = float(self.estimate(op, mapping).details.get("clock_mhz", 0.0)) \
            if s.power is not None else 0.0
        f_hz = mhz * 1e6 if mhz > 0 else s.clock_hz
        if isinstance(op, (Gemm, Conv2d)):
            k = self._gemm_kernel(op, df, tile, split, self.parse_mapping(mapping).swap_ab)
            if isinstance(k, Estimate):
                raise MappingError(Problem(k.reason, op.name))
            r = k[1] if f_hz == s.clock_hz else replace(k[1], f_hz=f_hz * k[1].f_hz / s.clock_hz)
            return lower_gemm(s, r, op.name)
        if isinstance(op, VectorOp):
            fused = isinstance(op, Softmax) and self._fused(op, df or None)
            fn = op.fn if isinstance(op, Elementwise) else op.kind
            sfu = SFU_PER_ELEMENT.get(fn, 0) * op.elements
            if fused:
                return lower_stream(s, op.name, 0.0, 0.0, op.vector_ops(), sfu, launch=False,
                                    clock_hz=f_hz)

            ops = float(op.vector_ops())
            passes = norm_pass_s(s, op)
            if passes is None:
                passes = softmax_global_s(s, op)
            if passes is None:
                passes = softmax_register_s(s, op)
            if passes is not None:      # issue-/latency-bound passes hold the SM's lanes
                ops = max(ops, passes * s.clock_hz * s.sm_count * s.cuda_core.fp32_lanes_per_sm)
            reread_hbm = softmax_global_reread_b(s, op)[1] if isinstance(op, Softmax) else 0.0
            return lower_stream(s, op.name, op.input_bytes() + op.weight_bytes() + reread_hbm,
                                op.output_bytes(), ops, sfu, clock_hz=f_hz,
                                serial_s=softmax_reread_s(s, op), launches=norm_kernels(s, op))
        if isinstance(op, Embedding):
            return lower_stream(s, op.name, op.weight_bytes(), op.output_bytes(), 0.0)
        if isinstance(op, AllReduce):
            e = self._estimate_allreduce(op)
            return lower_stream(s, op.name, e.dram_read_bytes, e.dram_write_bytes,
                                float(op.elements) * (op.devices - 1) / op.devices,
                                link_s=float(e.details.get("link_s", 0.0)))
        if isinstance(op, Attention):

            t = unit_attention_time(s, op)
            return lower_attention(s, op, t, f_hz * s.tensor_clock_mhz / s.clock_mhz, op.name)
        raise NotImplementedError(f"no cycle-level lowering for op kind {op.kind!r}")
