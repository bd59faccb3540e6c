"""Refit of ``GpuSpec.paged_attention`` (configs/gpu/h100.yaml) on the fit half of
shared/reference/kernels_h100/attention_{context,generation}.csv.gz (head_dim 64 and 256,
every batch, length, GQA, KV format and window; the check half is head_dim 128 and 192).
Least squares of the log ratio predicted / measured over every FIT_STRIDE-th row; needs scipy
(not a dependency of archsim: this script is how the constants were made,
tests/gpu/test_paged_attention.py checks them).

    python3 -m tests.gpu.fa_refit            # the prefill constants (PRE), the rest held
    python3 -m tests.gpu.fa_refit --decode   # the decode constants (DEC) and fp8_call_us too

The prefill refit holds ``fp8_call_us`` at its configured value (the decode fit's: the
per-call kernel an fp8 KV cache adds is shared by both calls).
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from archsim.api import load
from archsim.arch.gpu.paged_attention import paged_attention_time
from archsim.kernel_tables import attention_op, load_kernel_rows, shape_half
from tests.gpu.gpu_helpers import SHARED_REF

REF = SHARED_REF / "kernels_h100"
FIT_STRIDE = 5
PRE = ("prefill_call_us", "token_ns", "cache_write_gbps", "cta_us", "cta_tile_ns",
       "mma_efficiency", "mma_efficiency_fp8", "no_overlap_factor", "fp8_token_factor")
DEC = ("decode_call_us", "seq_ns", "decode_cta_us", "min_keys")
#: upper bounds (an efficiency is a fraction of the peak rate)
_UPPER = {"mma_efficiency": 1.0, "mma_efficiency_fp8": 1.0}
#: lower bounds other than 1e-3 x the start (a multiplier is at least 1)
_LOWER = {"no_overlap_factor": 1.0, "fp8_token_factor": 1.0}


def rows(name: str) -> list[dict]:
    return [d for _, d in load_kernel_rows(REF / f"{name}.csv.gz")][::FIT_STRIDE]


def fit(spec, names, data):
    def res(x):
        vals = dict(zip(names, x, strict=True))
        s = replace(spec, paged_attention=replace(spec.paged_attention, **vals))
        return np.array([math.log(paged_attention_time(s, attention_op(d)) / (d["ms"] * 1e-3))
                         for d in data])
    x0 = np.array([getattr(spec.paged_attention, n) for n in names])
    hi = np.array([_UPPER.get(n, np.inf) for n in names])
    lo = np.array([_LOWER.get(n, 1e-3 * v) for n, v in zip(names, x0, strict=True)])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    return least_squares(res, x0, x_scale=np.abs(x0), diff_step=1e-3, bounds=(lo, hi)).x


def main() -> None:
    spec = load("gpu/h100").units[0].spec
    ctx = [d for d in rows("attention_context") if shape_half(d) == "fit"]
    gen = [d for d in rows("attention_generation") if shape_half(d) == "fit"]
    rounds = 2 if "--decode" in sys.argv[1:] else 1
    for _ in range(rounds):   # fp8_call_us is shared: alternate prefill / decode fits
        xp = fit(spec, PRE, ctx)
        spec = replace(spec, paged_attention=replace(spec.paged_attention,
                                                     **dict(zip(PRE, xp, strict=True))))
        if rounds == 1:
            break
        xd = fit(spec, DEC, gen)
        spec = replace(spec, paged_attention=replace(spec.paged_attention,
                                                     **dict(zip(DEC, xd, strict=True))))
        # fp8_call_us: median of measured - predicted-without-it over the fp8 fit rows
        zero = replace(spec, paged_attention=replace(spec.paged_attention, fp8_call_us=0.0))
        left = [d["ms"] * 1e-3 - paged_attention_time(zero, attention_op(d))
                for d in ctx + gen if d["kv_dtype"] == "fp8"]
        spec = replace(spec, paged_attention=replace(
            spec.paged_attention, fp8_call_us=max(0.0, statistics.median(left) * 1e6)))
    print(spec.paged_attention)


if __name__ == "__main__":
    main()
