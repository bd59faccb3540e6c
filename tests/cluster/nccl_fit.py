"""The H100 NCCL and vLLM custom all-reduce measurements, and the fit of the link constants.

Data: ``shared/reference/kernels_h100/nccl.csv.gz`` (nccl-tests, NCCL 2.29.2) and
``custom_allreduce.csv.gz`` (vLLM 0.24), H100 SXM, one HGX node (NVLink4 + NVSwitch); see
that folder's README. Split by GPU count (never at random): the constants are fitted on the
2- and 8-GPU rows and checked on the 4-GPU rows (tests/cluster/test_nccl.py).

``python3 -m tests.cluster.nccl_refit`` (needs scipy, which archsim itself does not) refits
from the repository root: it prints the fitted constants (as configs/cluster/dgx_h100.yaml
holds them) and the per-op median |error| of both halves. The Simple-protocol efficiency is not fitted: it is the measured
large-message ring plateau of the fit half (module constant below).
"""

from __future__ import annotations

import csv
import gzip
import statistics
from dataclasses import replace
from pathlib import Path

from archsim.arch.cluster import Cluster, CustomAllreduceSpec, NcclSpec, ProtocolSpec, load_cluster
from archsim.arch.collective import collective, place

REF = Path(__file__).resolve().parents[3] / "shared" / "reference" / "kernels_h100"
CFG = Path(__file__).resolve().parents[2] / "configs" / "cluster"
FIT_GPUS = (2, 8)
CHECK_GPUS = (4,)
OPS = {"all_reduce": "allreduce", "all_gather": "allgather",
       "reduce_scatter": "reducescatter", "alltoall": "alltoall"}
DTYPE = {"half": ("fp16", 2), "int8": ("int8", 1)}
#: 8 GPUs, int8 all-reduce (ring: no NVLS for 8-bit types), 512 MiB: 351 GB/s busbw of
#: 450 GB/s -- the large-message plateau of the Simple protocol, read off the fit half
SIMPLE_EFFICIENCY = 0.78


def nccl_rows() -> list[tuple[str, int, int, str, float]]:
    """(kind, gpus, bytes, dtype, seconds) of every nccl-tests row."""
    out = []
    with gzip.open(REF / "nccl.csv.gz", "rt") as f:
        for r in csv.DictReader(f):
            dt, width = DTYPE[r["nccl_dtype"]]
            out.append((OPS[r["op_name"]], int(r["num_gpus"]), int(r["message_size"]) * width,
                        dt, float(r["ms"]) * 1e-3))
    return out


def custom_rows() -> list[tuple[str, int, int, float]]:
    """(impl, gpus, bytes, seconds) of every vLLM custom all-reduce row (bf16)."""
    with gzip.open(REF / "custom_allreduce.csv.gz", "rt") as f:
        return [("custom-graph" if r["kernel"].endswith("graph") else "custom-eager",
                 int(r["num_gpus"]), int(r["message_size"]) * 2, float(r["ms"]) * 1e-3)
                for r in csv.DictReader(f)]


def node() -> Cluster:
    """The DGX H100 cluster (its node: 8 GPUs on NVSwitch)."""
    return load_cluster(CFG / "dgx_h100.yaml")


def predict_nccl(c: Cluster, row: tuple[str, int, int, str, float]) -> float:
    kind, n, nbytes, dt, _ = row
    return collective(c, kind, nbytes, place(c, n, 1), dtype=dt).time_s


def predict_custom(c: Cluster, row: tuple[str, int, int, float]) -> float:
    impl, n, nbytes, _ = row
    return collective(c, "allreduce", nbytes, place(c, n, 1), impl=impl).time_s


def median_errors(c: Cluster, gpus: tuple[int, ...]) -> dict[str, float]:
    """Median |predicted / measured - 1| per op (and per custom launch mode) on ``gpus``."""
    err: dict[str, list[float]] = {}
    for r in nccl_rows():
        if r[1] in gpus:
            err.setdefault(r[0], []).append(abs(predict_nccl(c, r) / r[4] - 1))
    for q in custom_rows():
        if q[1] in gpus:
            err.setdefault(q[0], []).append(abs(predict_custom(c, q) / q[3] - 1))
    return {k: statistics.median(v) for k, v in err.items()}


def with_constants(c: Cluster, v: list[float]) -> Cluster:
    """``c`` with the NCCL and custom all-reduce constants ``v`` (order: nccl_refit.NAMES)."""
    P = ProtocolSpec
    nc = NcclSpec(step_us=v[0], ll=P(base_us=v[1], efficiency=v[2]),
                  ll128=P(base_us=v[3], efficiency=v[4]),
                  simple=P(base_us=v[5], efficiency=SIMPLE_EFFICIENCY), nvls_base_us=v[6],
                  p2p_ll=P(base_us=v[8], efficiency=v[9]),
                  p2p_simple=P(base_us=v[10], efficiency=v[11]))
    ca = CustomAllreduceSpec(graph_launch_us=v[12], eager_host_us=v[13], oneshot_base_us=v[14],
                             oneshot_efficiency=v[15], twoshot_base_us=v[16],
                             twoshot_efficiency=v[17])
    up = replace(c.spec.scale_up, nccl=nc, custom_allreduce=ca, nvls_efficiency=v[7])
    return Cluster(replace(c.spec, scale_up=up), c.device, c.file)
