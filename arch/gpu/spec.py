"""Configuration of a tensor-core GPU (``kind: tensor_core_gpu``): frozen, validated specs.

Every field is declared with :func:`arch.spec.param` (doc, unit, range); the YAML loader
(``arch.load``) converts ``configs/gpu/*.yaml`` into :class:`GpuSpec` and reports every
problem with file, line and key path. Cross-field rules live in ``check()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.arch.gpu.power import PowerSpec
from archsim.arch.memory import MemorySpec
from archsim.arch.spec import param

__all__ = ["TensorCoreSpec", "CudaCoreSpec", "SmSpec", "L2Spec", "NvlinkSpec", "GpuSpec",
           "PagedAttentionSpec", "MoeKernelSpec", "FusedMoeSpec",
           "TC_FORMATS"]

#: Formats a tensor core may list a rate for (the MMA operand formats of NVIDIA GPUs).
TC_FORMATS = ("tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6", "fp4", "int8", "int4",
              "int1")


@dataclass(frozen=True)
class TensorCoreSpec:
    """The tensor cores of one SM."""

    per_sm: int = param(doc="tensor cores per SM", min=1)
    fma_per_clock: dict[str, int] = param(
        doc="dense MMA rate per tensor core per clock, by operand format (fp16, bf16, tf32, "
            "fp8_e4m3, fp6, fp4, int8, int4, int1 ...; fp6 = both OCP FP6 element formats, fp4 = "
            "E2M1 plain or block-scaled: nvfp4, mxfp4); a format not listed has no "
            "tensor-core path",
        unit="FMA/clock")
    mma_efficiency: float = param(
        doc="achieved fraction of peak MMA issue in a steady-state GEMM mainloop at a fixed "
            "clock (instruction issue / operand-fetch limits; see docs/gpu.md)",
        min=0, max=1, min_exclusive=True)

    library_rate_fraction: dict[str, float] = param(
        default_factory=dict,
        doc="fraction of the MMA rate that the kernels the libraries actually ship for a "
            "format reach, by format (Hopper int8 via PyTorch _int_mm / cuBLASLt runs "
            "Ampere-style mma.sync kernels, not wgmma); a format not listed: 1")
    unaligned_rate_fraction: float = param(
        1.0, doc="fraction of the MMA rate reached when a GEMM's N or K row is a multiple of "
                 "4 or 8 bytes but not 16: no TMA / 16-byte loads, the libraries run "
                 "Ampere-style mma.sync kernels fed by narrower cp.async (arch/gpu/choice.py; "
                 "1 = no penalty)", min=0, max=1, min_exclusive=True)
    align1_rate_fraction: float = param(
        1.0, doc="fraction of the MMA rate reached when a GEMM's N or K row is only 1- or "
                 "2-byte aligned (odd N or K in 16-bit formats): scalar loads, the libraries "
                 "run Turing-class align1 mma.sync kernels (arch/gpu/choice.py; 1 = no "
                 "penalty)", min=0, max=1, min_exclusive=True)
    sparse_24_speedup: float = param(
        1.0, doc="MMA rate multiplier for 2:4 structured-sparse weights (Ampere+: 2; 1 = none)",
        min=1, max=2)
    def check(self) -> list[tuple[str, str]]:
        out = []
        for k, v in self.fma_per_clock.items():
            if k not in TC_FORMATS:
                out.append((f"fma_per_clock.{k}",
                            f"unknown tensor-core format {k!r}; expected one of: "
                            f"{', '.join(TC_FORMATS)}"))
            elif not isinstance(v, int) or v < 1:
                out.append((f"fma_per_clock.{k}", f"expected an int >= 1, got {v!r}"))
        if not self.fma_per_clock:
            out.append(("fma_per_clock", "expected at least one format"))
        for k, frac in self.library_rate_fraction.items():
            if k not in self.fma_per_clock:
                out.append((f"library_rate_fraction.{k}", f"expected a format listed in "
                            f"fma_per_clock ({', '.join(self.fma_per_clock)})"))
            elif not 0 < frac <= 1:
                out.append((f"library_rate_fraction.{k}", f"expected 0 < x <= 1, got {frac!r}"))
        return out


@dataclass(frozen=True)
class CudaCoreSpec:
    """The SIMT (CUDA-core) datapath of one SM: vector ops, dequantisation, GEMV."""

    fp32_lanes_per_sm: int = param(doc="FP32 FMA lanes per SM", min=1)
    int32_lanes_per_sm: int = param(doc="INT32 lanes per SM (dequantisation bit ops)", min=1)
    sfu_per_sm: int = param(16, doc="special-function units per SM (exp, rsqrt)", min=1)
    reduce_pass_bytes_per_clock: float | None = param(
        None, doc="rate of each re-read pass of a multi-pass row reduction (softmax over rows "
                  "longer than 1,024: max, sum, normalise), per SM; the passes of a row block "
                  "run one after another, issue-bound whether they hit L2 or HBM "
                  "(arch/gpu/kernels.py). null = re-reads at the L2 / HBM bandwidth",
        unit="B/clock", min=0.01)
    norm_scalar_bytes_per_clock: float | None = param(
        None, doc="per-SM rate of each of the two passes of the scalar layer/RMS norm path "
                  "PyTorch takes when the row width is not a multiple of NORM_VEC_ELEMS "
                  "(element loads, one block per row; two kernels: row moments, then the "
                  "normalisation, each reading the row); issue-bound, overlapped with the HBM "
                  "stream (arch/gpu/kernels.py norm_pass_s). null = such rows priced as the "
                  "vectorised kernel", unit="B/clock", min=0.01)
    softmax_step_ns: float | None = param(
        None, doc="one scalar step of PyTorch's global-memory softmax (cunn_SoftMaxForward, one "
                  "1,024-thread block per row; rows too wide for its register and shared-memory "
                  "kernels): a 2-byte load per thread from L2 and its use, latency-bound, in "
                  "the max and sum passes' re-reads (the first pass waits dram_latency_ns per "
                  "step) (arch/gpu/kernels.py softmax_global_s). null = such rows priced by "
                  "reduce_pass_bytes_per_clock", unit="ns", min=0)
    softmax_vector_bytes_per_clock: float | None = param(
        None, doc="per-SM rate of the 16-byte (vectorised) steps of the global-memory softmax's "
                  "three passes", unit="B/clock", min=0.01)
    softmax_reg_row_ns: float | None = param(
        None, doc="fixed part of one row of PyTorch's register softmax (cunn_SoftMaxForwardReg, "
                  "one 1,024-thread block per row, the row read once into registers): the "
                  "load round trip, the two block-wide reductions (max, sum), the write "
                  "(arch/gpu/kernels.py softmax_register_s). null = such rows priced by "
                  "reduce_pass_bytes_per_clock (three passes)", unit="ns", min=0)
    softmax_reg_elem_ns: float | None = param(
        None, doc="time one row of the register softmax adds per element a thread holds "
                  "(ceil(cols / 1024) registers: its load, exp, sum and store, for the "
                  "block's 32 warps)", unit="ns", min=0)


@dataclass(frozen=True)
class SmSpec:
    """On-SM storage and load paths."""

    smem_bytes_per_sm: int = param(doc="shared memory a kernel may allocate per SM",
                                   unit="bytes", min=1)
    smem_bytes_per_clock: int = param(128, doc="shared-memory bandwidth per SM", unit="B/clock",
                                      min=1)
    regfile_bytes_per_sm: int = param(262144, doc="register file per SM", unit="bytes", min=1)
    load_bytes_per_clock: int = param(
        64, doc="L2->SM load bandwidth per SM (L1/TMA fill path)", unit="B/clock", min=1)
    mma_tile_m: int = param(64, doc="rows of C one MMA-issuing group (warp / warpgroup) "
                            "covers; sets how often B fragments are re-read from smem", min=8)
    mma_tile_n: int = param(64, doc="columns of C one MMA-issuing group covers (mma.sync warp "
                            "tile: 64; Hopper wgmma reads the whole N <= 256 of B)", min=8)
    max_stages: int = param(4, doc="deepest software pipeline (cp.async / TMA stages)",
                            min=2, max=8)
    stream_k: bool = param(
        False, doc="persistent stream-K scheduling (Hopper cuBLAS / CUTLASS 3): the k-iterations "
                   "of all tiles are divided evenly over the SMs, removing wave quantisation",)
    cluster_multicast: int = param(
        1, doc="CTAs of a thread-block cluster sharing one operand load via TMA multicast "
               "(Hopper: 2; 1 = none)", min=1, max=4)


@dataclass(frozen=True)
class L2Spec:
    """The L2 cache."""

    l2_mib: float = param(doc="L2 capacity", unit="MiB", min=0, min_exclusive=True)
    bandwidth_gbps: float = param(doc="aggregate L2 read bandwidth", unit="GB/s", min=0,
                                  min_exclusive=True)
    usable_fraction: float = param(
        0.5, doc="fraction of L2 that holds reusable GEMM operands across waves (the rest "
                 "is streaming/partitioned-L2 duplication)", min=0, max=1, min_exclusive=True)

    @property
    def l2_bytes(self) -> float:
        return self.l2_mib * 1024 * 1024


@dataclass(frozen=True)
class NvlinkSpec:
    """The GPU-to-GPU link used by all-reduce (tensor parallelism)."""

    bandwidth_gbps: float = param(doc="per-direction NVLink bandwidth per GPU", unit="GB/s",
                                  min=0, min_exclusive=True)
    latency_us: float = param(doc="per-step latency of a ring all-reduce", unit="us", min=0)
    efficiency: float = param(0.8, doc="achieved fraction of link bandwidth (NCCL bus bw)",
                              min=0, max=1, min_exclusive=True)
    nvls: bool = param(False, doc="the GPUs sit on an NVSwitch that reduces in place (NVLink "
                                  "SHARP: HGX H100/H200 boards); their link then carries the "
                                  "fitted NVLS all-reduce (arch/link.py device_link)")


@dataclass(frozen=True)
class PagedAttentionSpec:
    """FlashAttention as a serving framework calls it through a paged-KV backend (vLLM's FA3
    on Hopper, FA2 on Ampere): the fixed work of one call and the per-token / per-CTA costs
    beyond the MMAs and the KV stream (arch/gpu/paged_attention.py ``paged_attention_time``)."""

    prefill_call_us: float = param(doc="fixed work of one prefill call: the backend's kernels "
                                       "(KV-cache write, scheduler metadata, attention) at "
                                       "one token", unit="us", min=0)
    decode_call_us: float = param(doc="fixed work of one decode call (KV-cache write, "
                                      "split-KV attention and its combine) at one sequence",
                                  unit="us", min=0)
    token_ns: float = param(doc="per new token: writing its K and V into the paged cache "
                                "(one CTA per token, reshape_and_cache)", unit="ns", min=0)
    cache_write_gbps: float = param(doc="rate of the per-token K/V bytes written into the "
                                        "paged cache (on top of token_ns)", unit="GB/s",
                                    min=0, min_exclusive=True)
    cta_us: float = param(doc="SM time of one prefill CTA (one block-M tile of packed "
                              "query rows of one KV head) beyond its MMAs: tile scheduler, "
                              "page-table walk, pipeline prologue", unit="us", min=0)
    cta_tile_ns: float = param(doc="prefill: per element of a CTA's Q / O tile (block M x "
                                   "head_dim) added to its SM time (Q load, O and LSE write)",
                               unit="ns", min=0)
    cta_dim_ns: float = param(doc="decode: per unit of head_dim added to every (sequence, KV "
                                  "head) CTA's fixed time (its Q tile load, O and LSE write)",
                              unit="ns", min=0)
    mma_efficiency: float = param(doc="achieved fraction of the dense 16-bit MMA rate in the "
                                      "prefill main loop (FA3: warp-specialised ping-pong; "
                                      "FA2: mma.sync, softmax issued by the same warps)",
                                  min=0, max=1, min_exclusive=True)
    seq_ns: float = param(doc="decode: per sequence (block-table and sequence-length reads, "
                              "split scheduling)", unit="ns", min=0)
    decode_cta_us: float = param(doc="decode: SM time of one (sequence, KV head) CTA's "
                                     "dependent loads (page table, Q, first K/V tile) beyond "
                                     "cta_dim_ns x head_dim", unit="us", min=0)
    min_keys: float = param(doc="decode: keys a CTA loads at least (its first K/V tiles, "
                                "whatever the context)", min=1)
    kernel: str = param("fa3", doc="FlashAttention generation the backend runs on this GPU "
                                   "(arch/gpu/paged_attention.py paged_tile): fa3 (Hopper: TMA, "
                                   "wgmma, "
                                   "warp specialisation, packed GQA, an e4m3 kernel), fa2 "
                                   "(Ampere: mma.sync, vLLM's split-KV kernel for a paged "
                                   "cache, no fp8 KV cache) or fa4 (FlashAttention's CuTe-DSL "
                                   "kernel: Blackwell's, also run on Hopper; no fp8 KV cache "
                                   "in vLLM)", choices=("fa3", "fa2", "fa4"))
    mma_efficiency_fp8: float | None = param(
        None, doc="the same with an fp8 KV cache (FA3's e4m3 kernel: the query quantised to "
                  "fp8, V transposed in shared memory), of the dense fp8 MMA rate; null = no "
                  "fp8 KV kernel (an fp8 KV cache is refused)", min=0, max=1,
        min_exclusive=True)
    no_overlap_factor: float = param(1.0, doc="prefill: per-pair time multiplier of the FA3 "
                                              "tile configurations built without "
                                              "intra-warpgroup overlap "
                                              "(arch/gpu/paged_attention.py "
                                              "fa3_tile)", min=1)
    fp8_call_us: float = param(0.0, doc="extra fixed work with an fp8 KV cache (the query's "
                                        "fp8 quantisation kernel)", unit="us", min=0)
    fp8_token_factor: float = param(1.0, doc="prefill: per-token cost multiplier with an fp8 "
                                             "KV cache (per-token scale and convert)", min=1)
    decode_tile_us: float = param(0.0, doc="fa4 decode, up to serial_max_batch sequences: time "
                                           "of one (sequence, KV head) tile of a one-token "
                                           "call, the tiles taken one after another (measured "
                                           "on FA4's Hopper kernel: the call grows with batch "
                                           "x KV heads long before the SMs fill); 0 = the "
                                           "per-wave decode_cta_us model", unit="us", min=0)
    decode_tile_pair_ns: float = param(0.0, doc="fa4 decode, up to serial_max_batch sequences: "
                                                "per pair of tiles (each tile's time grows "
                                                "with the tiles before it)", unit="ns", min=0)
    serial_max_batch: int = param(0, doc="fa4 decode with decode_tile_us: largest batch whose "
                                         "tiles run one after another; above it they run in "
                                         "parallel, each paying the varlen tile scheduler's "
                                         "scan (scan_step_us); 0 = serial at every batch",
                                  min=0)
    scan_step_us: float = param(0.0, doc="fa4 decode (tiles in parallel): one step of the "
                                         "varlen tile scheduler's linear scan for a tile's "
                                         "sequence (a warp prefix sum over 31 sequences: a "
                                         "dependent load and shuffles); a tile takes batch / "
                                         "62 steps on average (arch/gpu/paged_attention.py "
                                         "fa4_decode_tiles_s)", unit="us", min=0)
    seq_stream_gbps: float | None = param(
        None, doc="fa4 decode: the K/V stream rate one sequence reaches (its KV split CTAs); "
                  "the call streams at min(sustained HBM rate, batch x this); null = the HBM "
                  "rate", unit="GB/s", min=0, min_exclusive=True)
    softmax_overlap: bool = param(False, doc="prefill: the exp runs beside the MMAs (FA4 on "
                                             "Blackwell: asynchronous tcgen05 MMAs issued by one "
                                             "warp, softmax in other warpgroups): per pair "
                                             "max(MMA, exp) instead of their sum")

    def check(self) -> list[tuple[str, str]]:
        if self.kernel in ("fa2", "fa4") and self.mma_efficiency_fp8 is not None:
            name = "FlashAttention-2" if self.kernel == "fa2" else "vLLM's FA4"
            return [("mma_efficiency_fp8", f"expected null with kernel {self.kernel} ({name} "
                                           "has no fp8 KV kernel)")]
        return []


@dataclass(frozen=True)
class MoeKernelSpec:
    """One fused-MoE backend as a serving framework calls it (vLLM's ``fused_experts``):
    the costs beyond its two grouped GEMMs' MMAs and weight stream
    (arch/gpu/moe.py ``fused_moe_time``)."""

    call_us: float = param(doc="fixed work of one layer call: top-k, token alignment / sort, "
                               "the activation and combine kernels at one token", unit="us",
                           min=0)
    mma_efficiency: float = param(doc="achieved fraction of the dense MMA rate in the grouped "
                                      "GEMMs' main loop", min=0, max=1, min_exclusive=True)
    cta_gbps: float = param(doc="HBM rate one CTA sustains (bounds the stream when few "
                                "tiles run: decode with few experts hit)", unit="GB/s", min=0,
                            min_exclusive=True)
    block_m: int = param(doc="rows of a CTA tile: each expert's tokens are padded to a "
                             "multiple of it (above the decode threshold)", min=1)
    block_m_small: int = param(doc="rows of a CTA tile when tokens <= experts (vLLM's "
                                   "small-batch config)", min=1)
    block_n: int = param(doc="columns of a CTA tile", min=1)
    token_ns: float = param(0.0, doc="per token (top-k softmax, per-token quantisation, the "
                                     "combine's output row)", unit="ns", min=0)
    token_hidden_b: float = param(0.0, doc="bytes per token per unit of the hidden width, "
                                           "every token whatever its experts (the input's "
                                           "activation quantisation, the combine's output "
                                           "row written for every token)", min=0)
    pair_width_b: float = param(0.0, doc="bytes moved per (token, expert) pair routed "
                                         "anywhere, per unit of the expert width (the "
                                         "intermediate caches every pair owns, local or not)",
                                min=0)
    pair_hidden_b: float = param(0.0, doc="bytes per routed pair per unit of the hidden "
                                          "width (zero-filled outputs, the combine's reads)",
                                 min=0)
    local_width_b: float = param(0.0, doc="bytes per pair on this device's experts per unit "
                                          "of the expert width (permute, activation)", min=0)
    local_hidden_b: float = param(0.0, doc="bytes per local pair per unit of the hidden width "
                                           "(gather, un-permute)", min=0)
    expert_us: float = param(0.0, doc="per expert that receives tokens (its GEMM problem's "
                                      "prologue and pipeline fill)", unit="us", min=0)
    stream_efficiency: float = param(1.0, doc="achieved fraction of the sustained HBM rate "
                                              "while streaming expert weights", min=0, max=1,
                                     min_exclusive=True)
    partial_tile_gbps: float | None = param(None, doc="rate at which an expert's last, "
                                                     "partial block-M tile (fewer tokens than "
                                                     "block_m) streams that expert's weights, "
                                                     "its time instead of the tile's MMAs; "
                                                     "null = priced like a full tile",
                                            unit="GB/s", min=0, min_exclusive=True)
    block_m_rule: str = param("fixed", doc="how the kernel picks its block M: fixed "
                                           "(block_m, or block_m_small when tokens <= "
                                           "experts: vLLM's Triton defaults), marlin (the "
                                           "smallest of 8, 16, 32, 48, 64 above 1/0.9 x the "
                                           "mean tokens per local expert), pow2 (the mean "
                                           "tokens per expert rounded up to a power of two, "
                                           "clamped to [block_m_small, block_m]: "
                                           "triton_kernels' routing)",
                              choices=("fixed", "marlin", "pow2"))
    sort_us: float = param(0.0, doc="extra fixed work of a call above 16 tokens under "
                                    "expert parallelism, where triton_kernels' routing "
                                    "leaves its one fused sort kernel for the multi-kernel "
                                    "sort and keeps the local experts' pairs (gpt-oss's "
                                    "MXFP4 kernel)", unit="us", min=0)
    dequant_per_clock: float | None = param(None, doc="weight elements one SM dequantises "
                                                      "per clock on its CUDA cores (4-bit "
                                                      "weight-only kernels: each M tile "
                                                      "dequantises its N x K weights before "
                                                      "the 16-bit MMAs); null = no dequant",
                                            min=0, min_exclusive=True)


@dataclass(frozen=True)
class FusedMoeSpec:
    """Fused mixture-of-experts layers (arch/gpu/moe.py), one constant set per kernel and
    weight format as vLLM 0.24 dispatches them: its Triton kernel (bf16, block-scaled fp8)
    and FlashInfer's CUTLASS kernel (per-tensor and block-scaled fp8). Null = that pair is
    not modelled (refused with a reason)."""

    triton_bf16: MoeKernelSpec | None = param(None, doc="Triton fused_moe, bf16/fp16")
    triton_fp8_block: MoeKernelSpec | None = param(None, doc="Triton fused_moe, fp8 weights "
                                                             "with 128x128 block scales")
    cutlass_fp8: MoeKernelSpec | None = param(None, doc="FlashInfer CUTLASS, fp8 weights with "
                                                        "per-tensor scales")
    cutlass_fp8_block: MoeKernelSpec | None = param(None, doc="FlashInfer CUTLASS, fp8 "
                                                              "weights with block scales")
    triton_mxfp4: MoeKernelSpec | None = param(None, doc="OpenAI's triton_kernels "
                                                         "matmul_ogs (vLLM's gpt-oss MXFP4 "
                                                         "experts, monolithic), bf16 "
                                                         "activations")
    marlin_int4: MoeKernelSpec | None = param(None, doc="Marlin MoE, int4 weights with group "
                                                        "scales, bf16 activations (W4A16)")
    marlin_mxfp4: MoeKernelSpec | None = param(None, doc="Marlin MoE, MXFP4 weights, bf16 "
                                                         "activations (weight-only)")


@dataclass(frozen=True)
class GpuSpec:
    """A tensor-core GPU (``kind: tensor_core_gpu``)."""

    sm_count: int = param(doc="streaming multiprocessors", min=1)
    clock_mhz: float = param(doc="SM clock under load when not power-capped (the unit clock)",
                             unit="MHz", min=0, min_exclusive=True)
    boost_clock_mhz: float = param(doc="clock at which the vendor's peak TFLOP/s are quoted",
                                   unit="MHz", min=0, min_exclusive=True)
    tensor_clock_mhz: float = param(
        doc="sustained SM clock during dense tensor-core mainloops (power-capped boards "
            "drop below clock_mhz)", unit="MHz", min=0, min_exclusive=True)
    tensor_core: TensorCoreSpec = param(doc="tensor cores")
    cuda_core: CudaCoreSpec = param(doc="CUDA cores")
    sm: SmSpec = param(doc="shared memory, registers, load paths")
    l2: L2Spec = param(doc="L2 cache")
    memory: MemorySpec = param(doc="off-chip memory (HBM / GDDR)")
    launch_overhead_us: float = param(
        doc="per-kernel fixed cost of a kernel launched alone (event-timed single call, "
            "runtime ideal): launch, CTA rasterisation, pipeline ramp and drain",
        unit="us", min=0)
    tdp_w: float = param(doc="board power limit (energy sanity check)", unit="W", min=0,
                         min_exclusive=True)
    static_power_w: float = param(doc="idle/static board power charged for the op's latency",
                                  unit="W", min=0)
    launch_b2b_us: float | None = param(
        None, doc="per-kernel fixed cost of a kernel queued behind another (runtimes "
                  "cuda_graph, eager, eager_hf: its launch is processed during the previous "
                  "kernel's tail, arch/gpu/host.py); null = launch_overhead_us", unit="us",
        min=0)
    quant_row_us: float | None = param(
        None, doc="SM time per row of a one-CTA-per-row kernel beyond its chunks: the dynamic "
                  "per-token fp8 quantisation's two block-wide reductions and scale write "
                  "(arch/gpu/kernels.py row_quant_s); null = that kernel is a plain stream",
        unit="us", min=0)
    quant_chunk_us: float = param(
        0.0, doc="SM time per ROW_CHUNK_ELEMS (2048) elements of such a row (one 16-byte load "
                 "per thread of a 256-thread CTA, absmax, convert)", unit="us", min=0)
    quant_call_us: float | None = param(
        None, doc="fixed cost of that quantisation kernel queued behind another (launch, "
                  "first load, scale store): a plain streaming kernel, below a TMA GEMM's "
                  "launch_b2b_us + dram_latency_ns; launched alone it pays launch_overhead_us "
                  "- launch_b2b_us more; null = launch + DRAM latency like any kernel",
        unit="us", min=0)
    dram_latency_ns: float = param(600.0, doc="load-to-use latency of an off-chip access",
                                   unit="ns", min=0)
    nvlink: NvlinkSpec | None = param(None, doc="GPU-to-GPU link (null = single GPU)")
    paged_attention: PagedAttentionSpec | None = param(
        None, doc="FlashAttention through a serving framework's paged-KV backend (fitted on "
                  "kernels_h100 attention tables); null = not modelled")
    paged_attention_fa4: PagedAttentionSpec | None = param(
        None, doc="FA4 (kernel: fa4) on a GPU whose backend runs another generation: the "
                  "constants that price a framework's FA4 calls there (kernels_h100 FA4 rows "
                  "on Hopper; arch/gpu/paged_attention.py paged_constants); null = none")
    fused_moe: FusedMoeSpec | None = param(
        None, doc="fused mixture-of-experts layers as a serving framework runs them (fitted on "
                  "kernels_h100 moe.csv.gz); null = not modelled")
    attention: str = param("unfused", doc="attention kernels: separate QK/softmax/AV kernels "
                           "with scores in HBM, or flash-style fused", choices=("unfused", "fused"))
    dequant_ops_per_weight: float = param(
        1.0, doc="CUDA-core instructions per dequantised weight element (Marlin-style lop3 + "
                 "fma on packed halves)", min=0)
    power: PowerSpec | None = param(
        None, doc="power limit, V-f curve and calibrated power constants (arch/gpu/power.py); "
                  "with it the SM clock of each kernel emerges from the power cap and "
                  "tensor_clock_mhz must equal clock_mhz (the top of the curve); null = one "
                  "fixed tensor_clock_mhz and library energies")
    runtime: str = param(
        "ideal", doc="host software stack that launches the kernels (arch/gpu/host.py): ideal "
                     "(no host cost), cuda_graph, eager (PyTorch eager), eager_hf (Hugging "
                     "Face generate)", choices=("ideal", "cuda_graph", "eager", "eager_hf"))
    source: str = param("", doc="where the numbers come from")

    def check(self) -> list[tuple[str, str]]:
        out = []
        if self.power is not None and not (
                self.clock_mhz == self.tensor_clock_mhz == self.power.top_mhz):
            out.append(("power.vf_mhz", f"with a power section clock_mhz ({self.clock_mhz:g}), "
                        f"tensor_clock_mhz ({self.tensor_clock_mhz:g}) and the top of vf_mhz "
                        f"({self.power.top_mhz:g}) must be equal"))
        if self.tensor_clock_mhz > self.clock_mhz:
            out.append(("tensor_clock_mhz", f"expected <= clock_mhz ({self.clock_mhz:g}), got "
                                            f"{self.tensor_clock_mhz:g}"))
        if self.static_power_w > self.tdp_w:
            out.append(("static_power_w", f"expected <= tdp_w ({self.tdp_w:g})"))
        if self.paged_attention_fa4 is not None and self.paged_attention_fa4.kernel != "fa4":
            out.append(("paged_attention_fa4.kernel", "expected fa4"))
        return out

    def unused(self) -> list[tuple[str, str]]:
        """Keys the model does not read (:class:`archsim.arch.spec.UnusedKeyWarning`): the
        GPU families have no command-level DRAM model (``arch/gpu/lower.py`` streams HBM
        through a bandwidth server at every fidelity)."""
        if self.memory.model != "dram":
            return []
        why = ("the GPU families have no command-level DRAM model; the memory is a bandwidth "
               "server (bandwidth_gbps x efficiency) at every fidelity")
        return [("memory.model", why), ("memory.preset", why)]

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6

    @property
    def kernel_launch_s(self) -> float:
        """Fixed cost (s) of one kernel launch under this spec's ``runtime``: isolated
        (``launch_overhead_us``) for ``ideal``, back to back (``launch_b2b_us``) for the
        framework runtimes (``arch.gpu.host.BACK_TO_BACK``)."""
        if self.runtime != "ideal" and self.launch_b2b_us is not None:
            return self.launch_b2b_us * 1e-6
        return self.launch_overhead_us * 1e-6

    def tc_rate_per_sm(self, fmt: str) -> int:
        """Dense MMA FMAs per clock per SM for tensor-core format ``fmt`` (0 if none)."""
        return self.tensor_core.per_sm * int(self.tensor_core.fma_per_clock.get(fmt, 0))

