"""Refit the NCCL and vLLM custom all-reduce constants of configs/cluster/dgx_h100.yaml on
the fit half (2 and 8 GPUs) and print both halves' errors: ``python3 -m
tests.cluster.nccl_refit`` from the repository root. A tool run by hand (scipy is not an
archsim dependency), never by the tests; the data and the split: tests/cluster/nccl_fit.py.
"""

from __future__ import annotations

import math

from scipy.optimize import least_squares

from tests.cluster.nccl_fit import (
    CHECK_GPUS,
    FIT_GPUS,
    custom_rows,
    median_errors,
    nccl_rows,
    node,
    predict_custom,
    predict_nccl,
    with_constants,
)

#: the order of ``with_constants``' values
NAMES = ["step_us", "ll.base_us", "ll.efficiency", "ll128.base_us", "ll128.efficiency",
         "simple.base_us", "nvls_base_us", "nvls_efficiency", "p2p_ll.base_us",
         "p2p_ll.efficiency", "p2p_simple.base_us", "p2p_simple.efficiency",
         "graph_launch_us", "eager_host_us", "oneshot_base_us", "oneshot_efficiency",
         "twoshot_base_us", "twoshot_efficiency"]


def fit() -> list[float]:
    """Least squares of log(predicted / measured), soft-L1, on the fit half's rows."""
    base = node()
    fit_n = [r for r in nccl_rows() if r[1] in FIT_GPUS]
    fit_c = [q for q in custom_rows() if q[1] in FIT_GPUS]

    def res(v: list[float]) -> list[float]:
        c = with_constants(base, list(v))
        return ([math.log(predict_nccl(c, r) / r[4]) for r in fit_n]
                + [math.log(predict_custom(c, q) / q[3]) for q in fit_c])

    x0 = [0.8, 5, 0.4, 8, 0.5, 50, 50, 0.56, 6, 0.03, 13, 0.6, 4, 20, 0.5, 0.6, 5, 0.7]
    lo = [0, 0, 0.005, 0, 0.005, 0, 0, 0.05, 0, 0.005, 0, 0.05, 0, 0, 0, 0.05, 0, 0.05]
    hi = [10, 50, 1, 50, 1, 200, 200, 1, 50, 1, 50, 1, 50, 50, 50, 1, 50, 1]
    s = least_squares(res, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05)
    return [float(x) for x in s.x]


if __name__ == "__main__":
    v = fit()
    for k, x in zip(NAMES, v):
        print(f"{k}: {x:.4g}")
    c = with_constants(node(), v)
    for label, g in (("fit", FIT_GPUS), ("check", CHECK_GPUS)):
        for k, e in median_errors(c, g).items():
            print(f"{label} {g}: {k:14s} median |error| {e:.1%}")
