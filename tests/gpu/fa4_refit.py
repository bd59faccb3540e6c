"""Refit of ``GpuSpec.paged_attention_fa4`` (configs/gpu/h100.yaml: vLLM's FA4 on Hopper) on
the fit half of the FA4 rows of shared/reference/kernels_h100/attention_{context,generation}.
csv.gz (every FA4 row has head_dim 512; split by GQA shape family: 1, 4 and 16 query heads
fit, 2 and 8 check: ``archsim.kernel_tables.shape_half``). Least squares of the log ratio
predicted / measured over every fit row; needs scipy (not a dependency of archsim: this script
is how the constants were made, tests/gpu/test_fa4.py checks them).

    python3 -m tests.gpu.fa4_refit
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from archsim.api import load
from archsim.arch.gpu.paged_attention import paged_attention_time
from archsim.kernel_tables import FA4_LABEL, attention_op, load_kernel_rows, shape_half
from tests.gpu.gpu_helpers import SHARED_REF

REF = SHARED_REF / "kernels_h100"
#: ``cta_tile_ns`` is held at the FA3 fit's value (per element of a CTA's Q / O tile: the
#: same loads and stores): with one head_dim and one block M in the rows only
#: cta_us + 64 x 512 x cta_tile_ns is determined
PRE = ("prefill_call_us", "token_ns", "cache_write_gbps", "cta_us", "mma_efficiency")
#: ``min_keys`` is held at the FA3 fit's: where it would act (a few keys) the tiles, not the
#: stream, set the call
DEC = ("decode_call_us", "decode_tile_us", "decode_tile_pair_ns", "scan_step_us",
       "seq_stream_gbps")
_UPPER = {"mma_efficiency": 1.0}


def fa4_rows(name: str) -> list[dict]:
    return [d for _, d in load_kernel_rows(REF / f"{name}.csv.gz") if d.get("fa") == FA4_LABEL]


def fit(spec, names, data):
    def with_(x):
        return replace(spec, paged_attention_fa4=replace(spec.paged_attention_fa4,
                                                         **dict(zip(names, x, strict=True))))

    def res(x):
        s = with_(x)
        return np.array([math.log(paged_attention_time(s, attention_op(d), FA4_LABEL)
                                  / (d["ms"] * 1e-3)) for d in data])
    x0 = np.array([float(getattr(spec.paged_attention_fa4, n)) for n in names])
    hi = np.array([_UPPER.get(n, np.inf) for n in names])
    lo = np.array([1e-3 * v for v in x0])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    return with_(least_squares(res, x0, x_scale=np.abs(x0), diff_step=1e-3,
                               bounds=(lo, hi)).x)


def main() -> None:
    spec = load("gpu/h100").units[0].spec
    # one-token prefill rows run the decode path (q_len 1): they join the decode fit
    ctx = [d for d in fa4_rows("attention_context") if shape_half(d) == "fit"]
    gen = [d for d in fa4_rows("attention_generation") if shape_half(d) == "fit"]
    spec = fit(spec, DEC, gen + [d for d in ctx if d["isl"] == 1])
    spec = fit(spec, PRE, [d for d in ctx if d["isl"] > 1])
    print(spec.paged_attention_fa4)


if __name__ == "__main__":
    main()
