"""Framework kernel tables (``shared/reference/kernels_h100/``) against the GPU model.

The tables time each framework op warm and back to back (README there: a tiny op costs
~2.5-3 us, successive calls are not separated by host gaps), so a row is predicted on the
unit under a back-to-back runtime (``cuda_graph``: each kernel pays ``launch_b2b_us``, not the
isolated ``launch_overhead_us``; ``arch.gpu.host``) and at its sustained clock (no L2 flush,
no shared power window). Files read:

* ``gemm.csv(.gz)`` — ``dtype,kernel,m,n,k,ms``: bf16 ``F.linear`` is one GEMM; vLLM's fp8
  linear (``CutlassFP8ScaledMMLinearKernel``) is two kernels, the dynamic per-token
  activation quantisation (bf16 ``m x k`` in, fp8 out: a streaming kernel) and the CUTLASS
  scaled-mm (fp8 x fp8). On a GPU without fp8 tensor cores (Ampere) vLLM runs an fp8 linear
  as FP8 Marlin, weight-only: bf16 activations, fp8 weights dequantised in the kernel, no
  activation quantisation (``MarlinFP8ScaledMMLinearKernel``; vLLM
  ``marlin_utils_fp8.py``: "Weight-only FP8 compression will be used leveraging the Marlin
  kernel"), priced as the library's W8A16 GEMM (:func:`fp8_linear_is_marlin`).
* ``fp8_quantize.csv(.gz)`` — ``kernel,quant_dtype,m,k,ms``: the *difference* between the
  dynamic and the static quantisation kernel (the per-token absmax's extra time); read, not
  scored (it is not one kernel's time).

* ``attention_context.csv(.gz)`` / ``attention_generation.csv(.gz)`` — ``kernel,batch_size,
  isl,step,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,window_size,ms``:
  one vLLM FlashAttention call through the paged-KV backend, prefill (``isl`` new tokens per
  sequence, causal) or decode (one new token after ``step`` cached ones). Rows of vLLM's
  FLASH_ATTN backend (:func:`is_fa_row`: FA3 on Hopper, FA2 on Ampere, FA4; the collector
  names them ``vllm_flash_attn_fa<version>``) are read; rows whose KV heads do not divide
  the query heads are skipped. Predicted by ``arch.gpu.paged_attention.paged_attention_time``: FA2 /
  FA3 rows with the FlashAttention generation *the GPU* runs (``paged_attention.kernel``),
  FA4 rows (``"fa": "fa4"`` in the row) with FA4's constants (``paged_constants``: the GPU's
  own where it runs FA4, else ``paged_attention_fa4``); None where the GPU has no such
  constants or the kernel cannot run the row's KV cache (fp8 on FA2 / FA4:
  ``paged_kv_refusal``). Classes ``vllm_attn_prefill`` and ``vllm_attn_decode``, split by
  head_dim: 64 and 256 fit, 128 and 192 check; FA4 rows (all head_dim 512 on H100) in
  ``vllm_attn_prefill_fa4`` / ``vllm_attn_decode_fa4``, split by GQA shape family
  (:data:`FA4_FIT_HEADS`).

* ``moe.csv(.gz)`` — ``kernel,moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,
  moe_tp_size,moe_ep_size,distribution,ms``: one vLLM fused-MoE layer call (``kind``
  ``moe``), predicted by ``arch.gpu.moe.fused_moe_time`` on the op of :func:`moe_op`.
  Rows of the Triton kernel (bf16, fp8_block), FlashInfer's CUTLASS kernel (fp8,
  fp8_block) and the 4-bit weight-only kernels (gpt-oss's MXFP4 Triton kernel, Marlin MoE
  int4 and MXFP4: :data:`MOE_KERNELS`) are read. Classes ``vllm_moe_<kernel>_<dtype>``,
  split by shape family: hidden size a power of two fits, the others (2688, 2816, 3072,
  5120, 6144, 7168) check; the 4-bit kernels, one model shape each, split by expert count
  (gpt-oss: 32 fit, 128 check) or by the per-device expert shape (Marlin: log2(tp x ep)
  even fit, odd check).

Rows become dicts with ``kind`` ``gemm`` (``"protocol": "b2b"``, ``"quant"`` for fp8)
or ``fp8_quant_delta``. Classes scored: ``vllm_gemm_bf16``, ``vllm_gemm_fp8`` (m > 64) and
``vllm_gemm_small_m`` (m <= 64, both dtypes). The fit/check split is by shape family:
:func:`shape_half` puts rows whose K is a power of two in the fit half, the others (K = 768,
1536, 2560, ... 51200) in the check half.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from archsim.arch.gpu.kernels import ROW_CHUNK_ELEMS, row_quant_fixed_s, row_quant_s
from archsim.arch.gpu.moe import fused_moe_time, moe_kernel_spec
from archsim.arch.gpu.paged_attention import (
    paged_attention_time,
    paged_constants,
    paged_kv_refusal,
)
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Attention, FusedMoE, Gemm

__all__ = ["load_kernel_rows", "is_kernel_table", "kernel_class", "predict_b2b_ms",
           "shape_half", "back_to_back", "fit_launch_b2b_us", "fit_row_quant_us", "sample",
           "TINY_MNK", "VLLM_SCALED_MM_TILES", "scaled_mm_kernel", "scaled_mm_estimate", "attention_op",
           "ATTN_FIT_HEAD_DIMS", "moe_op", "MOE_KERNELS", "MOE_WEIGHT_FORMATS", "TABLE_SWITCHING_ACTIVITY",
           "fit_switching_activity", "gemm_row_estimate", "fit_quant_call_us", "is_fa_row",
           "fa_version", "FA4_LABEL", "FA4_FIT_HEADS",
           "fp8_linear_is_marlin"]

_GEMM_COLS = ("dtype", "kernel", "m", "n", "k", "ms")
_QUANT_COLS = ("kernel", "quant_dtype", "m", "k", "ms")
_ATTN_COLS = ("kernel", "batch_size", "isl", "step", "num_heads", "num_key_value_heads",
              "head_dim", "attn_dtype", "kv_cache_dtype", "window_size", "ms")
_MOE_COLS = ("kernel", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
             "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "ms")
#: vLLM 0.24 fused-MoE kernels of moe.csv.gz the model prices: kernel name -> (backend,
#: weight formats it is read for)
MOE_KERNELS = {
    "vllm_unquantizedfusedmoe_triton_tritonexperts": ("triton", ("bfloat16",)),
    "vllm_fp8moe_triton_tritonexperts": ("triton", ("fp8_block",)),
    "vllm_fp8moe_flashinfer_cutlass_flashinferexperts": ("cutlass", ("fp8_block",)),
    "vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts": ("cutlass", ("fp8",)),
    # the 4-bit weight-only kernels (bf16 activations): gpt-oss's MXFP4 experts through
    # OpenAI's triton_kernels, and Marlin MoE for int4 (W4A16) and MXFP4 weights
    "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic": ("triton", ("w4a16_mxfp4",)),
    "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts": ("marlin", ("int4_wo",)),
    "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu":
        ("marlin", ("w4a16_mxfp4",)),
}
#: moe_dtype of the table -> the archsim weight format of the experts
MOE_WEIGHT_FORMATS = {"bfloat16": "bf16", "fp8": "fp8_e4m3", "fp8_block": "fp8_e4m3",
                      "int4_wo": "int4", "w4a16_mxfp4": "mxfp4"}
#: moe_dtype -> the class name's suffix (``vllm_moe_<backend>_<suffix>``)
_MOE_CLASS_DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block",
                    "int4_wo": "int4", "w4a16_mxfp4": "mxfp4"}
#: the 4-bit kernels each measure one model shape (gpt-oss-20b and -120b for the Triton
#: MXFP4 kernel, 7168/2048 x 384 experts for Marlin int4, 3584/3072 x 896 for Marlin MXFP4),
#: so their rows split by another shape family than the hidden size (:func:`shape_half`):
#: gpt-oss by its expert count (32 experts, gpt-oss-20b, fit; 128, gpt-oss-120b, check);
#: Marlin by the per-device expert shape, ``log2(tp x ep)`` even fit, odd check
MOE_FIT_EXPERTS_TRITON_MXFP4 = 32
_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}
#: vLLM FLASH_ATTN backend rows: the collector names them ``vllm_flash_attn`` plus
#: ``_fa<version>`` when it records the FlashAttention version. Every version is read: FA2 /
#: FA3 rows are priced with the generation the GPU itself runs (``paged_attention.kernel``),
#: whatever the label says; FA4 rows (FlashAttention's CuTe-DSL kernel, which vLLM 0.24 runs
#: on Hopper for head_dim 512, beyond FA3) with FA4's constants
#: (``arch.gpu.paged_attention.paged_constants``: the GPU's own on Blackwell,
#: ``paged_attention_fa4`` on Hopper) and scored in their own classes
FA_PREFIX = "vllm_flash_attn"
FA_SKIPPED_VERSIONS: frozenset[str] = frozenset()
#: the FlashAttention label priced by FA4's constants
FA4_LABEL = "fa4"


def is_fa_row(kernel: str) -> bool:
    """True for a FlashAttention-backend row this module reads (:data:`FA_PREFIX`, any
    version suffix except :data:`FA_SKIPPED_VERSIONS`)."""
    if kernel == FA_PREFIX:
        return True
    if not kernel.startswith(FA_PREFIX + "_"):
        return False
    return kernel[len(FA_PREFIX) + 1:] not in FA_SKIPPED_VERSIONS


def fa_version(kernel: str) -> str:
    """The FlashAttention version suffix of a backend row's kernel label ('' without one)."""
    return kernel[len(FA_PREFIX) + 1:] if kernel.startswith(FA_PREFIX + "_") else ""
#: head_dims of the attention rows' fit half (the extremes; 128 and 192 are the check half)
ATTN_FIT_HEAD_DIMS = (64, 256)
#: query heads of the FA4 rows' fit half: every FA4 row has head_dim 512, so they split by
#: GQA shape family instead: 1 (MHA), 4 (one KV head) and 16 (over 2 KV heads) fit, 2 and 8
#: (one KV head) check
FA4_FIT_HEADS = (1, 4, 16)


def is_kernel_table(path: str | Path) -> bool:
    """True for a framework kernel table (``.csv`` or ``.csv.gz``)."""
    name = str(path)
    return name.endswith(".csv") or name.endswith(".csv.gz")


def _read_text(p: Path) -> str:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(Problem(f"cannot read kernel table: {e.strerror}", str(p))) from None
    try:
        return (gzip.decompress(raw) if p.name.endswith(".gz") else raw).decode()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(Problem(f"expected a (gzip) CSV file ({e})", str(p))) from None


def load_kernel_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """Rows of a ``gemm`` or ``fp8_quantize`` kernel table: (line number, row dict); the
    dicts have the fields of ``archsim.silicon`` rows (``archsim.silicon.load_rows`` reads
    these files through this function).

    Raises:
        ConfigError: unreadable file, unknown header, or a bad value (``file:line column``).
    """
    p = Path(path)
    reader = csv.DictReader(io.StringIO(_read_text(p)))
    cols = tuple(reader.fieldnames or ())
    if cols == _ATTN_COLS:
        return _attention_rows(reader, p)
    if cols == _MOE_COLS:
        return _moe_rows(reader, p)
    if cols == _GEMM_COLS:
        gemm = True
    elif cols == _QUANT_COLS:
        gemm = False
    else:
        raise ConfigError(Problem(f"expected the columns {','.join(_GEMM_COLS)} (gemm), "
                                  f"{','.join(_QUANT_COLS)} (fp8_quantize) or "
                                  f"{','.join(_ATTN_COLS)} (attention) or "
                                  f"{','.join(_MOE_COLS)} (moe), got "
                                  f"{','.join(cols) or 'none'}", f"{p}:1"))
    rows = []
    for i, r in enumerate(reader, 2):
        try:
            d: dict[str, Any] = {"m": int(r["m"]), "k": int(r["k"]), "ms": float(r["ms"]),
                                 "protocol": "b2b"}
            if gemm:
                d.update(kind="gemm", n=int(r["n"]), dtype=_DTYPE[r["dtype"]],
                         quant=r["dtype"] == "fp8")
            else:
                d.update(kind="fp8_quant_delta")
        except (KeyError, ValueError, TypeError) as e:
            raise ConfigError(Problem(f"expected integer m, n, k, a float ms and a dtype in "
                                      f"{sorted(_DTYPE)} ({e!s})", f"{p}:{i}")) from None
        if min(d["m"], d["k"], d.get("n", 1)) < 1 or not math.isfinite(d["ms"]) or d["ms"] <= 0:
            raise ConfigError(Problem(f"expected positive m, n, k and a finite ms > 0, got "
                                      f"ms={r['ms']}", f"{p}:{i}"))
        rows.append((i, d))
    return rows


def _attention_rows(reader: csv.DictReader, p: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for i, r in enumerate(reader, 2):
        try:
            if not is_fa_row(r["kernel"]):
                continue
            d: dict[str, Any] = {
                k: int(r[c]) for k, c in (("b", "batch_size"), ("isl", "isl"), ("step", "step"),
                                          ("h", "num_heads"), ("kv", "num_key_value_heads"),
                                          ("d", "head_dim"), ("window", "window_size"))}
            d.update(ms=float(r["ms"]), protocol="b2b", dtype=_DTYPE[r["attn_dtype"]],
                     kv_dtype=_DTYPE[r["kv_cache_dtype"]])
            if fa_version(r["kernel"]) == FA4_LABEL:
                d["fa"] = FA4_LABEL
        except (KeyError, ValueError, TypeError) as e:
            raise ConfigError(Problem(f"expected integer shape columns, a float ms and dtypes "
                                      f"in {sorted(_DTYPE)} ({e!s})", f"{p}:{i}")) from None
        if min(d["b"], d["isl"], d["h"], d["kv"], d["d"]) < 1 or d["ms"] <= 0 \
                or d["window"] < 0 or d["step"] < 0:
            raise ConfigError(Problem("expected positive shapes and ms", f"{p}:{i}"))
        if d["h"] % d["kv"]:
            continue
        d["kind"] = "attn_generation" if d["step"] > 0 else "attn_context"
        rows.append((i, d))
    return rows


def _moe_rows(reader: csv.DictReader, p: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    ints = (("tokens", "num_tokens"), ("hidden", "hidden_size"), ("inter", "inter_size"),
            ("top_k", "topk"), ("experts", "num_experts"), ("tp", "moe_tp_size"),
            ("ep", "moe_ep_size"))
    for i, r in enumerate(reader, 2):
        try:
            known = MOE_KERNELS.get(r["kernel"])
            if known is None or r["moe_dtype"] not in known[1]:
                continue
            d: dict[str, Any] = {k: int(r[c]) for k, c in ints}
            dist = r["distribution"]
            d.update(kind="moe", protocol="b2b", ms=float(r["ms"]), backend=known[0],
                     dtype=r["moe_dtype"],
                     routing="balanced" if dist == "balanced"
                     else "power_law:" + dist.removeprefix("power_law_"))
        except (KeyError, ValueError, TypeError) as e:
            raise ConfigError(Problem(f"expected integer shape columns and a float ms ({e!s})",
                                      f"{p}:{i}")) from None
        if min(d[k] for k, _ in ints) < 1 or not math.isfinite(d["ms"]) or d["ms"] <= 0:
            raise ConfigError(Problem("expected positive shapes and a finite ms > 0",
                                      f"{p}:{i}"))
        rows.append((i, d))
    return rows


#: (hidden, inter, experts, top_k) of the moe-table families measured for models with
#: non-gated squared-ReLU experts (NVIDIA Nemotron 3: Nano 30B-A3B is 2688/1856/128/6, the
#: latent-MoE Super/Ultra shapes 1024/2688 and 2048/5120 with 512 experts, top-22; model
#: cards), whose experts hold up and down matrices only: the model's architecture, not a
#: fitted value (their gated reading would stream 3/2 of the weights, beyond the HBM rate).
NON_GATED_MOE = frozenset({(2688, 1856, 128, 6), (1024, 2688, 512, 22),
                           (2048, 5120, 512, 22)})


def moe_op(row: dict[str, Any]) -> FusedMoE:
    """The ``FusedMoE`` op of a moe-table row: the expert width sharded over
    ``moe_tp_size``, ``moe_ep_size`` devices' worth of experts (the row times EP rank 0, the
    busiest under power-law routing)."""
    f = FORMATS[MOE_WEIGHT_FORMATS[str(row["dtype"])]]
    return FusedMoE(name="moe", tokens=int(row["tokens"]), hidden=int(row["hidden"]),
                    width=-(-int(row["inter"]) // int(row["tp"])), experts=int(row["experts"]),
                    top_k=int(row["top_k"]), ep=int(row["ep"]), routing=str(row["routing"]),
                    backend=str(row["backend"]), fp8_block=row["dtype"] == "fp8_block",
                    gated=(int(row["hidden"]), int(row["inter"]), int(row["experts"]),
                           int(row["top_k"])) not in NON_GATED_MOE,
                    a_format=FORMATS["bf16"], w_format=f)


def attention_op(row: dict[str, Any]) -> Attention:
    """The ``Attention`` op of an attention-table row: prefill = ``isl`` causal queries over
    ``isl`` keys; decode = one query over ``step + 1`` keys (the new token's own K/V is
    written to the cache first)."""
    f = FORMATS[row["dtype"]]
    kvf = FORMATS["fp8_e4m3" if row["kv_dtype"] == "fp8" else row["kv_dtype"]]
    prefill = row["kind"] == "attn_context"
    q = int(row["isl"]) if prefill else 1
    keys = int(row["isl"]) if prefill else int(row["step"]) + 1
    return Attention(name="attn", batch=int(row["b"]), heads=int(row["h"]),
                     kv_heads=int(row["kv"]), q_len=q, kv_len=keys, head_dim=int(row["d"]),
                     causal=prefill, window=int(row["window"]),
                     kv_format=kvf if kvf is not f else None, a_format=f, w_format=f)


def kernel_class(row: dict[str, Any]) -> str:
    """Scoring class of a back-to-back GEMM or attention row ('' for other rows)."""
    fa4 = "_fa4" if row.get("fa") == FA4_LABEL else ""
    if row.get("protocol") == "b2b" and row.get("kind") == "attn_context":
        return "vllm_attn_prefill" + fa4
    if row.get("protocol") == "b2b" and row.get("kind") == "attn_generation":
        return "vllm_attn_decode" + fa4
    if row.get("kind") == "moe":
        return f"vllm_moe_{row['backend']}_{_MOE_CLASS_DTYPE[str(row['dtype'])]}"
    if row.get("kind") != "gemm" or row.get("protocol") != "b2b":
        return ""
    if int(row["m"]) <= 64:
        return "vllm_gemm_small_m"
    return f"vllm_gemm_{row['dtype']}"


def shape_half(row: dict[str, Any]) -> str:
    """``fit`` when K is a power of two, else ``check`` (split by shape family); attention
    rows: ``fit`` at the head_dims :data:`ATTN_FIT_HEAD_DIMS`, else ``check``; moe rows:
    ``fit`` when the hidden size is a power of two."""
    if str(row.get("kind", "")).startswith("attn_") and row.get("fa") == FA4_LABEL:
        return "fit" if int(row["h"]) in FA4_FIT_HEADS else "check"
    if str(row.get("kind", "")).startswith("attn_"):
        return "fit" if int(row["d"]) in ATTN_FIT_HEAD_DIMS else "check"
    if row.get("kind") == "moe":
        dt = str(row["dtype"])
        if dt == "w4a16_mxfp4" and row["backend"] == "triton":
            return "fit" if int(row["experts"]) == MOE_FIT_EXPERTS_TRITON_MXFP4 else "check"
        if row["backend"] == "marlin":
            return "fit" if (int(row["tp"]) * int(row["ep"])).bit_length() % 2 else "check"
        h = int(row["hidden"])
        return "fit" if h & (h - 1) == 0 else "check"
    k = int(row["k"])
    return "fit" if k & (k - 1) == 0 else "check"


def back_to_back(unit: Any) -> Any:
    """``unit`` under the back-to-back (CUDA-graph) runtime: kernels queued behind kernels."""
    if unit.spec.runtime != "ideal":
        return unit
    return type(unit)(unit.name, replace(unit.spec, runtime="cuda_graph"), unit.node_nm)


#: vLLM's CUTLASS 3 fp8 scaled-mm on sm90 (``scaled_mm_sm90_fp8_dispatch.cuh``, tag C: read in
#: vLLM's source): one kernel configuration per (M, N) bucket, as
#: (m upper bound, n upper bound, (bm, bn, bk bytes), swap_ab). TMA warp-specialised, persistent,
#: no split-K and no stream-K: the framework's kernel choice. For m <= 64 the kernel computes
#: the transposed product (``swap_ab``: C^T = W X^T), so the weights' N runs along the tile's
#: first (64-wide) side and the few tokens along a 16- or 64-wide second side, with a 256-byte
#: K step; above, 64 x 128 (m <= 128) and 128 x 128 tiles with a 128-byte K step.
VLLM_SCALED_MM_TILES: tuple[tuple[int, int, tuple[int, int, int], bool], ...] = (
    (16, 2**62, (64, 16, 256), True),
    (64, 1280, (64, 16, 256), True),
    (64, 2**62, (64, 64, 256), True),
    (128, 2**62, (64, 128, 128), False),
    (2**62, 2**62, (128, 128, 128), False))


def scaled_mm_kernel(m: int, n: int) -> dict[str, Any]:
    """The GPU mapping of vLLM's fp8 scaled-mm for ``m`` tokens and ``n`` output features
    (:data:`VLLM_SCALED_MM_TILES`; ``swap_ab``: the kernel runs C^T = W X^T)."""
    tile, swap = next((t, sw) for top_m, top_n, t, sw in VLLM_SCALED_MM_TILES
                      if m <= top_m and n <= top_n)
    return {"dataflow": "gemm_tc", "tile": list(tile), "split_k": 1, "swap_ab": swap}


def scaled_mm_estimate(unit: Any, m: int, n: int, k: int) -> Any:
    """Estimate of vLLM's fp8 scaled-mm kernel for an m x n x k linear layer on ``unit``."""
    f8 = FORMATS["fp8_e4m3"]
    return unit.estimate(Gemm(name="scaled_mm", m=m, n=n, k=k, a_format=f8, w_format=f8),
                         scaled_mm_kernel(m, n))


#: Switching activity of the GEMM table's operands relative to random data
#: (``TensorCoreGpu.switching_activity``: the power model's on-chip, data-dependent energies
#: scale with it, so a power-capped GEMM holds a higher clock). The table's collector
#: (aiconfigurator ``collector/vllm/collect_gemm.py``, read for its protocol) builds vLLM's
#: linear layers with ``torch.empty`` weights it never fills ("TODO, to evaluate random
#: weights impact"): uninitialised memory, zero where freshly mapped, times ``randn``
#: activations, so the MMA datapath and the operand paths toggle less than on the random
#: data of the silicon rows. Fitted by :func:`fit_switching_activity` on the fit half
#: (K a power of two) and checked on the other half (docs/gpu.md "GEMM kernel choice");
#: the data cannot tell this apart from a cooler / better-binned card (same effect on the
#: clock), so it is a property of the table, not of the GPU: the GPU's power constants stay
#: those fitted on the silicon rows.
TABLE_SWITCHING_ACTIVITY = 0.67


def _table_unit(unit: Any) -> Any:
    """``unit`` with the GEMM table's operand switching activity (a GPU with a power model)."""
    if getattr(unit.spec, "power", None) is None or not hasattr(unit, "with_switching_activity"):
        return unit
    return unit.with_switching_activity(TABLE_SWITCHING_ACTIVITY)


def predict_b2b_ms(unit: Any, row: dict[str, Any]) -> float | None:
    """Predicted time (ms) of one back-to-back framework call of a ``gemm`` row: bf16
    ``F.linear`` = the library's GEMM; vLLM's fp8 linear = the dynamic per-token activation
    quantisation kernel (``arch.gpu.kernels.row_quant_s``) + the CUTLASS scaled-mm with
    vLLM's tile for the M bucket (:func:`scaled_mm_kernel`). Attention rows:
    ``arch.gpu.paged_attention.paged_attention_time`` (None without ``paged_attention`` constants);
    moe rows: ``arch.gpu.moe.fused_moe_time`` (None where the GPU has no constants for the
    row's kernel and weight format).
    ``unit`` should be :func:`back_to_back`."""
    if str(row.get("kind", "")).startswith("attn_"):
        kernel = row.get("fa")
        c = paged_constants(unit.spec, kernel)
        if c is None:
            return None
        op = attention_op(row)
        if paged_kv_refusal(replace(unit.spec, paged_attention=c),
                            int(op.kv_bytes_per_element * 8)):
            return None
        return paged_attention_time(unit.spec, op, kernel) * 1e3
    if row.get("kind") == "moe":
        moe = moe_op(row)
        if getattr(unit.spec, "fused_moe", None) is None \
                or isinstance(moe_kernel_spec(unit.spec, moe), str):
            return None
        return fused_moe_time(unit.spec, moe).time_s * 1e3
    if row.get("kind") != "gemm":
        return None
    return _predict_gemm_ms(_table_unit(unit), row)


def _predict_gemm_ms(unit: Any, row: dict[str, Any]) -> float | None:
    """A gemm row's time (ms) on ``unit`` as given (:func:`predict_b2b_ms`)."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    if row["dtype"] == "fp8" and fp8_linear_is_marlin(unit.spec):
        op = Gemm(name="fp8_marlin", m=m, n=n, k=k, a_format=FORMATS["bf16"],
                  w_format=FORMATS["fp8_e4m3"])
        return None if unit.supports(op) else unit.estimate(op).latency_s * 1e3
    if row["dtype"] == "fp8":
        f8 = FORMATS["fp8_e4m3"]
        if unit.supports(Gemm(name="scaled_mm", m=m, n=n, k=k, a_format=f8, w_format=f8)):
            return None
        t = scaled_mm_estimate(unit, m, n, k).latency_s
        if row.get("quant", True):
            t += row_quant_s(unit.spec, m, k, FORMATS["bf16"].bytes_per_element,
                             f8.bytes_per_element)
        return t * 1e3
    f = FORMATS[row["dtype"]]
    op = Gemm(name="linear", m=m, n=n, k=k, a_format=f, w_format=f)
    if unit.supports(op):
        return None
    return unit.estimate(op).latency_s * 1e3


def fp8_linear_is_marlin(spec: Any) -> bool:
    """Does vLLM run an fp8 linear layer on this GPU as FP8 Marlin (weight-only W8A16, no
    activation quantisation) rather than quantisation + CUTLASS scaled-mm? Yes where the GPU
    has no fp8 tensor-core rate (Ampere: vLLM picks ``MarlinFP8ScaledMMLinearKernel`` below
    compute capability 8.9)."""
    return not spec.tc_rate_per_sm("fp8_e4m3")


def _median(xs: list[float]) -> float:
    """Median of a non-empty list (the mean of the middle two for an even count)."""
    v = sorted(xs)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else 0.5 * (v[mid - 1] + v[mid])


#: Rows whose m*n*k is at most this are fixed-cost dominated: their measured time minus the
#: modelled body is the per-kernel back-to-back cost (:func:`fit_launch_b2b_us`).
TINY_MNK = 2**18


def fit_launch_b2b_us(unit: Any, rows: list[dict[str, Any]]) -> tuple[float, int] | None:
    """``launch_b2b_us`` from the tiny bf16 GEMM rows (m*n*k <= :data:`TINY_MNK`) of the
    fit half: the median of measured time minus the modelled body (the kernel at
    ``launch_b2b_us`` = 0). Returns (value us, rows used), None without such rows."""
    zero = type(unit)(unit.name, replace(unit.spec, runtime="cuda_graph", launch_b2b_us=0.0),
                      unit.node_nm)
    left = []
    for d in rows:
        if (d.get("kind") != "gemm" or d.get("protocol") != "b2b" or d.get("dtype") != "bf16"
                or int(d["m"]) * int(d["n"]) * int(d["k"]) > TINY_MNK or shape_half(d) != "fit"):
            continue
        p = predict_b2b_ms(zero, d)
        if p is not None:
            left.append((float(d["ms"]) - p) * 1e3)
    if not left:
        return None
    return max(0.0, _median(left)), len(left)


def sample(rows: list[Any], every: int) -> list[Any]:
    """Every ``every``-th row (deterministic; the tables hold ~71k rows, a model call costs
    milliseconds), counted over the rows other than FA4's, plus every FA4 row (1.4k of the
    attention tables' 112k: a stride would leave too few for a class median; rows or
    ``silicon.Row``-like objects with ``.data``)."""
    def fa4(r: Any) -> bool:
        return (r.data if hasattr(r, "data") else r).get("fa") == FA4_LABEL
    return [r for r in rows if not fa4(r)][::max(1, every)] + [r for r in rows if fa4(r)]


def gemm_row_estimate(unit: Any, row: dict[str, Any]) -> Any:
    """The Estimate of a gemm row's GEMM kernel (fp8: vLLM's scaled-mm, or FP8 Marlin where
    :func:`fp8_linear_is_marlin`) on ``unit`` as given."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    if row["dtype"] == "fp8" and fp8_linear_is_marlin(unit.spec):
        return unit.estimate(Gemm(name="fp8_marlin", m=m, n=n, k=k, a_format=FORMATS["bf16"],
                                  w_format=FORMATS["fp8_e4m3"]))
    if row["dtype"] == "fp8":
        return scaled_mm_estimate(unit, m, n, k)
    f = FORMATS[row["dtype"]]
    return unit.estimate(Gemm(name="linear", m=m, n=n, k=k, a_format=f, w_format=f))


def fit_switching_activity(unit: Any, rows: list[dict[str, Any]]
                           ) -> tuple[float, int] | None:
    """:data:`TABLE_SWITCHING_ACTIVITY` from the fit half: the gemm rows with m > 64 whose
    kernel, at activity 1 on ``unit`` (:func:`back_to_back`), is power-capped and
    compute-bound (the rows the clock sets); the activity in [0.2, 1] at which their median
    signed error is zero (bisection: a lower activity only raises the clock). Returns
    (activity, rows used), None without such rows."""
    if getattr(unit.spec, "power", None) is None:
        return None
    base = unit.with_switching_activity(1.0)
    sel = []
    for d in rows:
        if (d.get("kind") != "gemm" or d.get("protocol") != "b2b" or shape_half(d) != "fit"
                or kernel_class(d) == "vllm_gemm_small_m"):
            continue
        e = gemm_row_estimate(base, d)
        if e.feasible and e.details.get("power_capped") and e.bound in ("compute", "feed"):
            sel.append(d)
    if not sel:
        return None

    def median_err(activity: float) -> float:
        u = unit.with_switching_activity(activity)
        return _median([p / float(d["ms"]) - 1.0 for d in sel
                        if (p := _predict_gemm_ms(u, d)) is not None])

    lo, hi = 0.2, 1.0
    if median_err(hi) <= 0:
        return hi, len(sel)
    if median_err(lo) >= 0:
        return lo, len(sel)
    while hi - lo > 0.002:
        mid = 0.5 * (lo + hi)
        if median_err(mid) > 0:
            hi = mid
        else:
            lo = mid
    return round(0.5 * (lo + hi), 3), len(sel)


def fit_quant_call_us(unit: Any, rows: list[dict[str, Any]]) -> tuple[float, int] | None:
    """``quant_call_us`` from the tiny fp8 rows (m*n*k <= :data:`TINY_MNK`) of the fit half:
    the median of measured time minus the modelled scaled-mm (:func:`predict_b2b_ms`'s) and
    minus the quantisation kernel's row time (one row per SM here), i.e. what is left for
    that kernel's fixed cost back to back. ``unit``: :func:`back_to_back`, with the row
    constants set. Returns (value us, rows used), None without such rows."""
    s = unit.spec
    if s.quant_row_us is None:
        return None
    table = _table_unit(unit)
    left = []
    for d in rows:
        if (d.get("kind") != "gemm" or d.get("protocol") != "b2b" or d.get("dtype") != "fp8"
                or int(d["m"]) * int(d["n"]) * int(d["k"]) > TINY_MNK or shape_half(d) != "fit"):
            continue
        m, n, k = int(d["m"]), int(d["n"]), int(d["k"])
        per_row = (s.quant_row_us + -(-k // ROW_CHUNK_ELEMS) * s.quant_chunk_us) * 1e-6
        row_s = max(per_row * -(-m // s.sm_count), m * (k * 3 + 4) / s.memory.sustained_bytes_per_s)
        left.append((float(d["ms"]) * 1e-3 - scaled_mm_estimate(table, m, n, k).latency_s
                     - row_s) * 1e6)
    if not left:
        return None
    return max(0.0, _median(left)), len(left)


#: fp8 rows used for the quantisation kernel's fit: N = 32 (the scaled-mm is small) and
#: m >= 4096 (thousands of rows per SM), K up to 16384 (beyond, the kernel is HBM-bound).
_QUANT_FIT_N, _QUANT_FIT_M, _QUANT_FIT_K = 32, 4096, 16384


def fit_row_quant_us(unit: Any, rows: list[dict[str, Any]]) -> tuple[float, float, int] | None:
    """(``quant_row_us``, ``quant_chunk_us``, rows used): least squares of the per-row SM time
    ``(measured - scaled-mm - the kernel's fixed cost) / ceil(m / SMs)`` against
    ``ceil(k / ROW_CHUNK_ELEMS)`` over the fit half's fp8 rows with N = 32, m >= 4096,
    K <= 16384 (where the quantisation kernel dominates). None without such rows."""
    s = unit.spec
    xs, ys = [], []
    for d in rows:
        if (d.get("kind") != "gemm" or d.get("protocol") != "b2b" or d.get("dtype") != "fp8"
                or int(d["n"]) != _QUANT_FIT_N or int(d["m"]) < _QUANT_FIT_M
                or int(d["k"]) > _QUANT_FIT_K or shape_half(d) != "fit"):
            continue
        m, k = int(d["m"]), int(d["k"])
        left = (float(d["ms"]) * 1e-3 - scaled_mm_estimate(unit, m, _QUANT_FIT_N, k).latency_s
                - row_quant_fixed_s(s))
        xs.append(float(-(-k // ROW_CHUNK_ELEMS)))
        ys.append(left / -(-m // s.sm_count) * 1e6)
    if len(set(xs)) < 2:
        return None
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    return max(0.0, my - slope * mx), max(0.0, slope), n
