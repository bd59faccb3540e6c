"""One decode iteration of a served model, op by op, under two GPU launch protocols, against
the H100 kernel tables (docs/serving.md, "Decode step of gpt-oss-120b, op by op").

    python3 benchmarks/serving_decode_ops.py [MODEL_ID TP BATCH KEYS]

Default: ``openai/gpt-oss-120b`` at TP 4, 64 requests of 1536 keys each (the middle of the
1024 / 1024 requests of ``serving_h100`` line 683). For each block kind, the graph
``archsim.validation.serving_h100.predict`` serves (paged attention, ``--tp-allreduce auto``,
for 4-bit experts vLLM's fused MoE call) is evaluated on ``gpu/h100`` under runtime
``ideal`` (each kernel an isolated launch) and ``cuda_graph`` (kernels back to back), and
each op is set beside the ``shared/reference/kernels_h100`` rows of its shape where the
tables have them (H100 rows only): a bf16 GEMM bilinear between the nearest measured
``n`` and ``k`` at the same ``m``; the custom all-reduce (CUDA-graph mode) and the FA3 decode
call interpolated in message size and in ``step``; gpt-oss's fused MXFP4 MoE call at the same
token count, TP and balanced routing. Prints one line per op (µs).
"""

from __future__ import annotations

import csv
import gzip
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import archsim  # noqa: E402
from archsim.api import device_build  # noqa: E402
from archsim.arch.reference import reference_dir  # noqa: E402
from archsim.serve.cost import model_shape  # noqa: E402
from archsim.validation.serving_h100 import (  # noqa: E402
    ZOO,
    Deployment,  # noqa: E402
    moe_routing,
)
from archsim.workloads.ops import Attention, FusedMoE, Gemm  # noqa: E402
from archsim.workloads.parallel import block_kinds  # noqa: E402


def _table(name: str) -> list[dict[str, str]]:
    path = reference_dir() / "kernels_h100" / name
    with gzip.open(path, "rt") as f:
        return list(csv.DictReader(f))


def _gemm_us(rows: list[dict[str, str]], m: int, n: int, k: int) -> str:
    grid = {(int(r["n"]), int(r["k"])): float(r["ms"]) * 1e3 for r in rows
            if r["dtype"] == "bfloat16" and int(r["m"]) == m}
    ns, ks = sorted({a for a, _ in grid}), sorted({b for _, b in grid})
    if not grid or not (ns[0] <= n <= ns[-1] and ks[0] <= k <= ks[-1]):
        return "-"

    def bracket(xs: list[int], x: int) -> tuple[int, int, float]:
        lo, hi = max(v for v in xs if v <= x), min(v for v in xs if v >= x)
        return lo, hi, 0.0 if hi == lo else (x - lo) / (hi - lo)
    n0, n1, fn = bracket(ns, n)
    k0, k1, fk = bracket(ks, k)
    v = (grid[n0, k0] * (1 - fn) * (1 - fk) + grid[n1, k0] * fn * (1 - fk)
         + grid[n0, k1] * (1 - fn) * fk + grid[n1, k1] * fn * fk)
    return f"{v:.2f} (n {n0}-{n1}, k {k0}-{k1})"


def _interp(points: list[tuple[int, float]], x: float) -> str:
    if not points:
        return "-"
    points.sort()
    return f"{float(np.interp(x, [a for a, _ in points], [b for _, b in points])):.2f}"


def main(argv: list[str]) -> int:
    model_id = argv[0] if argv else "openai/gpt-oss-120b"
    tp, batch, keys = (int(a) for a in argv[1:4]) if len(argv) >= 4 else (4, 64, 1536)
    model = ZOO[model_id]
    shape = model_shape(model)
    row = Deployment("vllm", model_id, "", "agg", keys, 1, batch, tp, 1, 1, 1, 0.0, 0.0, 0)
    routing = moe_routing(row)
    gemms = _table("gemm.csv.gz")
    allreduce = [(int(r["message_size"]), float(r["ms"]) * 1e3)
                 for r in _table("custom_allreduce.csv.gz")
                 if r["kernel"] == "vLLM_custom_graph" and int(r["num_gpus"]) == tp]
    attn = _table("attention_generation.csv.gz")
    moe = {int(r["num_tokens"]): float(r["ms"]) * 1e3 for r in _table("moe.csv.gz")
           if int(r["hidden_size"]) == shape.d_model and int(r["num_experts"]) == shape.experts
           and int(r["topk"]) == shape.top_k and int(r["moe_tp_size"]) == tp
           and int(r["moe_ep_size"]) == 1 and r["distribution"] == "balanced"
           and r["moe_dtype"] == "w4a16_mxfp4" and "gptoss" in r["kernel"]}
    heads, kv_heads = shape.heads // tp, shape.kv_heads // tp
    for runtime in ("ideal", "cuda_graph"):
        acc = archsim.load("gpu/h100", [f"units[0].runtime={runtime}"])
        build = device_build(acc, attention_kernel="paged", tp_allreduce="auto",
                             moe_routing=routing)
        for kind in block_kinds(shape):
            w = build.graph(kind.shape, "decode", batch, None, keys, tp, 1)
            r = archsim.evaluate(acc, w)
            print(f"## {runtime}: {kind.key} x {kind.count} (window {kind.window}), one-block "
                  f"model {r.latency_s * 1e6:.1f} us")
            for o in r.ops:
                op = w.op(o.name)
                meas = "-"
                if isinstance(op, Gemm) and op.b_is_weight:
                    meas = _gemm_us(gemms, op.m, op.n, op.k)
                elif isinstance(op, FusedMoE) and batch in moe:
                    meas = f"{moe[batch]:.2f}"
                elif o.role == "collective":
                    meas = _interp(list(allreduce), batch * shape.d_model)
                elif isinstance(op, Attention):
                    meas = _interp([(int(a["step"]), float(a["ms"]) * 1e3) for a in attn
                                    if a["kernel"] == "vllm_flash_attn_fa3"
                                    and int(a["batch_size"]) == batch
                                    and int(a["num_heads"]) == heads
                                    and int(a["num_key_value_heads"]) == kv_heads
                                    and int(a["head_dim"]) == shape.head_dim
                                    and a["kv_cache_dtype"] == "bfloat16"
                                    and int(a["window_size"]) == kind.window], keys)
                print(f"  {o.name:26s} {o.role:11s} {o.latency_s * 1e6:8.2f} | {meas}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
