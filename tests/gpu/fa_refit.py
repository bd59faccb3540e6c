"""Refit of ``GpuSpec.paged_attention`` (configs/gpu/h100.yaml) on the fit half of
shared/reference/kernels_h100/attention_{context,generation}.csv.gz (head_dim 128, every
KV format and window; the check half is every other head_dim). Least squares of the log
ratio predicted / measured over every FIT_STRIDE-th row; needs scipy (not a dependency of
archsim: this script is how the constants were made, tests/gpu/test_paged_attention.py
checks them).

    python3 -m tests.gpu.fa_refit
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from archsim.api import load
from archsim.arch.gpu.kernels import paged_attention_time
from archsim.arch.gpu.spec import PagedAttentionSpec
from archsim.kernel_tables import attention_op, load_kernel_rows, shape_half
from tests.gpu.gpu_helpers import SHARED_REF

REF = SHARED_REF / "kernels_h100"
FIT_STRIDE = 5
PRE = ("prefill_call_us", "token_ns", "cache_write_gbps", "cta_us", "cta_dim_ns",
       "mma_efficiency", "fp8_token_factor")
DEC = ("decode_call_us", "seq_ns", "decode_cta_us", "min_keys")


def rows(name: str) -> list[dict]:
    return [d for _, d in load_kernel_rows(REF / f"{name}.csv.gz")][::FIT_STRIDE]


def fit(spec, names, start, data, fp8_call):
    def res(x):
        vals = dict(zip(names, x, strict=True), fp8_call_us=fp8_call)
        s = replace(spec, paged_attention=replace(spec.paged_attention, **vals))
        return np.array([math.log(paged_attention_time(s, attention_op(d)) / (d["ms"] * 1e-3))
                         for d in data])
    x0 = np.array([getattr(spec.paged_attention, n) for n in names] if start is None else start)
    return least_squares(res, x0, x_scale=np.abs(x0), diff_step=1e-3,
                         bounds=([1e-3 * v for v in x0], [np.inf] * len(x0))).x


def main() -> None:
    spec = load("gpu/h100").units[0].spec
    if spec.paged_attention is None:
        spec = replace(spec, paged_attention=PagedAttentionSpec(
            prefill_call_us=11.0, decode_call_us=11.0, fp8_call_us=2.5, token_ns=3.5,
            fp8_token_factor=1.5 + 1e-3, cta_us=1.0, mma_efficiency=0.7, seq_ns=8.0,
            decode_cta_us=2.5, min_keys=40))
    ctx = [d for d in rows("attention_context") if shape_half(d) == "fit"]
    gen = [d for d in rows("attention_generation") if shape_half(d) == "fit"]
    fp8_call = spec.paged_attention.fp8_call_us
    for _ in range(2):   # fp8_call_us is shared: alternate prefill / decode fits
        xp = fit(spec, PRE, None, ctx, fp8_call)
        spec = replace(spec, paged_attention=replace(spec.paged_attention,
                                                     **dict(zip(PRE, xp, strict=True))))
        xd = fit(spec, DEC, None, gen, fp8_call)
        vals = dict(zip(DEC, xd, strict=True))
        spec = replace(spec, paged_attention=replace(spec.paged_attention, **vals))
        # fp8_call_us: median of measured - predicted-without-it over the fp8 fit rows
        zero = replace(spec, paged_attention=replace(spec.paged_attention, fp8_call_us=0.0))
        left = [d["ms"] * 1e-3 - paged_attention_time(zero, attention_op(d))
                for d in ctx + gen if d["kv_dtype"] == "fp8"]
        fp8_call = max(0.0, statistics.median(left) * 1e6)
        spec = replace(spec, paged_attention=replace(spec.paged_attention,
                                                     fp8_call_us=fp8_call))
    print(spec.paged_attention)


if __name__ == "__main__":
    main()
