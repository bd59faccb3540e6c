"""Refit of ``GpuSpec.fused_moe`` (configs/gpu/h100.yaml) on the fit half of
shared/reference/kernels_h100/moe.csv.gz (hidden size a power of two: 1024, 2048, 4096; the
check half is 2688, 2816, 3072, 5120, 6144, 7168). One constant set per kernel class
(``archsim.kernel_tables.kernel_class``): least squares of the log ratio predicted /
measured over every FIT_STRIDE-th fit row of the class. The block sizes are not fitted
(vLLM's Triton default configs: BM 16 below ``tokens <= experts``, else 64, BN 64;
CUTLASS: 128 x 128). Needs scipy (not a dependency of archsim: this script is how the
constants were made; tests/gpu/test_fused_moe.py checks them).

    python3 -m tests.gpu.moe_refit [CLASS ...]     # e.g. vllm_moe_cutlass_fp8; default all

The 4-bit weight-only classes (:data:`DEQUANT_CLASSES`: gpt-oss's MXFP4 Triton kernel,
Marlin int4 and MXFP4) fit on their own halves (``shape_half``: gpt-oss by expert count,
Marlin by log2(tp x ep) parity), every :data:`FIT_STRIDE_4BIT`-th fit row, with
``dequant_per_clock`` and (gpt-oss's kernel) ``sort_us``.

Every class fits ``token_hidden_b`` (bytes per token per hidden element: the input's
quantisation and the combine's output row, for every token whatever its experts). The
per-tensor fp8 CUTLASS class also fits ``partial_tile_gbps`` (an expert's last, partial
tile streams its weights at that rate: :data:`PARTIAL_CLASSES`).
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from archsim.api import load
from archsim.arch.gpu.moe import fused_moe_time
from archsim.arch.gpu.spec import FusedMoeSpec, MoeKernelSpec
from archsim.kernel_tables import kernel_class, load_kernel_rows, moe_op, shape_half
from tests.gpu.gpu_helpers import SHARED_REF

MOE_CSV = SHARED_REF / "kernels_h100" / "moe.csv.gz"
FIT_STRIDE = 13          # coprime to the table's 3 routings and 27 token counts
FIT_STRIDE_4BIT = 4      # the 4-bit classes have 1-2 thousand rows: every 4th fit row
NAMES = ("call_us", "token_ns", "token_hidden_b", "pair_width_b", "pair_hidden_b",
         "local_width_b", "local_hidden_b", "expert_us", "mma_efficiency", "stream_efficiency", "cta_gbps")
UPPER = (500, 100, 100, 100, 100, 100, 100, 100, 1, 1, 2000)
BLOCKS = {"triton": (64, 16, 64), "cutlass": (128, 128, 128)}
#: the 4-bit weight-only classes: (block_m, block_m_small, block_n, block_m_rule); the tile
#: rows follow the kernel's own rule (tag C: triton_kernels' routing pads each expert to a
#: power of two of its mean pairs, 16..128; vLLM's Marlin MoE picks 8..64), block_n 128
#: (the N extent of a Marlin CTA and of matmul_ogs' Hopper tile); each fits dequant_per_clock
#: (the CUDA-core dequantisation of every M tile's weights)
DEQUANT_CLASSES = {"vllm_moe_triton_mxfp4": (128, 16, 128, "pow2"),
                   "vllm_moe_marlin_int4": (64, 8, 128, "marlin"),
                   "vllm_moe_marlin_mxfp4": (64, 8, 128, "marlin")}
START = (30.0, 1.0, 1.0, 5.0, 2.0, 2.0, 1.0, 0.5, 0.5, 0.8, 50.0)
#: classes whose partial tiles run at their own weight-stream rate (start 600 GB/s, 50..5000)
PARTIAL_CLASSES = ("vllm_moe_cutlass_fp8",)


def _key(cls: str) -> str:
    return cls.removeprefix("vllm_moe_")


def fit_class(spec, cls: str, rows: list[dict]) -> MoeKernelSpec:
    deq = DEQUANT_CLASSES.get(cls)
    bm, bms, bn = deq[:3] if deq else BLOCKS[cls.split("_")[2]]
    ops = [(moe_op(d), d["ms"] * 1e-3) for d in rows]
    partial = cls in PARTIAL_CLASSES or deq is not None

    def kspec(x):
        extra = {"partial_tile_gbps": float(x[-1])} if partial and not deq else {}
        if deq:
            extra = {"dequant_per_clock": float(x[-2]), "block_m_rule": deq[3],
                     "sort_us": float(x[-1]) if deq[3] == "pow2" else 0.0}
        return MoeKernelSpec(block_m=bm, block_m_small=bms, block_n=bn, **extra,
                             **dict(zip(NAMES, (float(v) for v in x[:len(NAMES)]),
                                        strict=True)))

    def res(x):
        s = replace(spec, fused_moe=FusedMoeSpec(**{_key(cls): kspec(x)}))
        return np.array([math.log(fused_moe_time(s, op).time_s / ms) for op, ms in ops])

    x0 = np.array(START + (((64.0, 5.0) if deq else (600.0,)) if partial else ()))
    lo = [0.0] * len(NAMES) + (([1.0, 0.0] if deq else [50.0]) if partial else [])
    lo[NAMES.index("mma_efficiency")] = lo[NAMES.index("stream_efficiency")] = 0.02
    lo[NAMES.index("cta_gbps")] = 1.0
    up = list(UPPER) + ((([4096.0, 200.0] if deq else [5000.0])) if partial else [])
    sol = least_squares(res, x0, x_scale=x0, diff_step=1e-3, bounds=(lo, up))
    return kspec(sol.x)


def main() -> None:
    spec = load("gpu/h100").units[0].spec
    rows = [d for _, d in load_kernel_rows(MOE_CSV)]
    fitted = {}
    only = sys.argv[1:]
    for cls in sorted({kernel_class(d) for d in rows}):
        if only and cls not in only:
            continue
        mine = [d for d in rows if kernel_class(d) == cls]
        stride = FIT_STRIDE_4BIT if cls in DEQUANT_CLASSES else FIT_STRIDE
        k = fit_class(spec, cls, [d for d in mine if shape_half(d) == "fit"][::stride])
        fitted[_key(cls)] = k
        s = replace(spec, fused_moe=FusedMoeSpec(**{_key(cls): k}))
        for h in ("fit", "check"):
            e = [abs(fused_moe_time(s, moe_op(d)).time_s * 1e3 / d["ms"] - 1)
                 for d in mine if shape_half(d) == h][::7]
            print(f"{cls} {h}: {len(e)} rows, median |err| {statistics.median(e):.3f}")
    for key, k in fitted.items():
        print(f"      {key}:")
        for n in ("call_us", *NAMES[1:], "partial_tile_gbps", "dequant_per_clock",
                  "sort_us", "block_m",
                  "block_m_small", "block_n"):
            v = getattr(k, n)
            if v is None:
                continue
            print(f"        {n}: {0 if v < 1e-3 else float(f'{v:.4g}'):g}")
        if k.block_m_rule != "fixed":
            print(f"        block_m_rule: {k.block_m_rule}")


if __name__ == "__main__":
    main()
