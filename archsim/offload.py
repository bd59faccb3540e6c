"""Memory tiers for training: optimizer state, parameters or saved activations offloaded to
host DRAM or NVMe (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity, Rajbhandari et al. 2021;
activation offload), and what it costs in the step (docs/cluster.md "Memory tiers").

Per device and step, with ``W`` its weight bytes, ``P`` the parameters whose optimizer state it
owns (``P = optimizer bytes / 12``), ``A`` the activations one microbatch saves, ``n`` the
blocks of its stage and ``m`` the microbatches:

* ``optimizer`` (ZeRO-Offload): the fp32 master weights, momentum and variance (12 B/param)
  live on the host and the CPU runs the update; the gradients go down as the backward produces
  them (the GPU keeps two blocks' buckets: ``grads x 2/n``), the updated 16-bit weights come
  back up. Down ``2P`` bytes during the last microbatch's backward, up ``2P`` bytes before the
  first forward's blocks need them; the CPU update streams ``28 B/param`` through host DRAM
  (reads fp32 p, m, v and the fp16 gradient: 14 B; writes p, m, v and the fp16 copy: 14 B);
  with the ``nvme`` tier the state also moves to and from NVMe (``24 B/param``) and the update
  takes the slower of the two. The GPU's own update is gone.
* ``params`` (ZeRO-Infinity): the weights live on the tier and stream in per block for every
  forward and every backward (``W`` in per microbatch pass); the GPU keeps two blocks (the one
  computing and the one prefetched): ``weights x 2/n``.
* ``activations``: each block's saved activations go out in the forward and come back in the
  backward (``A`` out per forward, ``A`` in per backward); the GPU keeps two blocks' worth:
  ``activations x 2/(n x inflight)`` (``inflight = min(m, pp)`` microbatches).

Overlap rule: per-block prefetch (and write-behind) hides a pass's transfer up to that pass's
compute time, so each forward or backward pass of a microbatch exposes
``max(0, max(bytes_in, bytes_out) / B - t_pass)`` (the link is full duplex: the slower
direction counts), and the CPU update is exposed whole (no delayed parameter update).
With pipeline stages, each exposed pass lengthens that pass on every stage (each stage streams
its own blocks over its own link), so the step is the 1F1B flow shop of the lengthened
microbatches (:func:`offload_pipeline`), not the unstretched pipeline plus the transfer.
``B`` is the tier's achieved bandwidth per device and direction: the host link
(``host.link_gbps x host.link_efficiency``), or for ``nvme`` the smaller of that and
``host.nvme_gbps``; ``--offload-gbps`` overrides it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from archsim.arch.cluster import Cluster
from archsim.varlen import pipeline_varlen
from archsim.workloads.errors import Problem, WorkloadError

__all__ = ["Offload", "OFFLOAD_KINDS", "OFFLOAD_TIERS", "offload_memory", "offload_time",
           "offload_pipeline", "tier_bytes_per_s", "CPU_ADAM_BYTES_PER_PARAM", "NVME_STATE_BYTES_PER_PARAM"]

OFFLOAD_KINDS = ("optimizer", "params", "activations")
OFFLOAD_TIERS = ("host", "nvme")
#: Host DRAM bytes per parameter of one CPU Adam update (read p, m, v fp32 + g fp16; write
#: p, m, v fp32 + the fp16 copy).
CPU_ADAM_BYTES_PER_PARAM = 4 + 4 + 4 + 2 + 4 + 4 + 4 + 2
#: NVMe bytes per parameter of one update with the state on NVMe (read and write p, m, v).
NVME_STATE_BYTES_PER_PARAM = 24
#: Blocks the GPU keeps of a streamed quantity: the one computing and the one prefetched.
RESIDENT_BLOCKS = 2


@dataclass(frozen=True)
class Offload:
    """What is offloaded, where, and (optionally) at what bandwidth.

    Attributes:
        kinds: a subset of :data:`OFFLOAD_KINDS` (empty: nothing offloaded).
        tier: ``host`` (DRAM over the host link) or ``nvme``.
        gbps: the tier's bandwidth per device and direction in GB/s, overriding the
            cluster's ``host`` spec (achieved, no efficiency applied); None: from the spec.
    """

    kinds: tuple[str, ...] = ()
    tier: str = "host"
    gbps: float | None = None

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in OFFLOAD_KINDS]
        if bad:
            raise WorkloadError(Problem(f"unknown offload {bad[0]!r}; expected some of: "
                                        f"{', '.join(OFFLOAD_KINDS)}", "--offload"))
        if self.tier not in OFFLOAD_TIERS:
            raise WorkloadError(Problem(f"unknown tier {self.tier!r}; expected one of: "
                                        f"{', '.join(OFFLOAD_TIERS)}", "--offload-tier"))
        if self.gbps is not None and not self.gbps > 0:
            raise WorkloadError(Problem(f"expected a bandwidth > 0, got {self.gbps!r}",
                                        "--offload-gbps"))

    def label(self) -> str:
        return f"offload-{'+'.join(self.kinds)}@{self.tier}" if self.kinds else ""


def tier_bytes_per_s(cluster: Cluster, off: Offload) -> float:
    """Achieved bandwidth (bytes/s, per device and direction) of ``off``'s tier.

    Raises:
        WorkloadError: the cluster describes no host tier (and no ``--offload-gbps``), or has
            no NVMe for the ``nvme`` tier.
    """
    if off.gbps is not None:
        return off.gbps * 1e9
    host = cluster.spec.host
    if host is None:
        raise WorkloadError(Problem(f"{cluster.name!r} describes no host memory tier (a "
                                    f"cluster's host: section); give its bandwidth with "
                                    f"--offload-gbps", "--offload"))
    link = host.link_gbps * host.link_efficiency * 1e9
    if off.tier == "host":
        return link
    if host.nvme_gbps <= 0:
        raise WorkloadError(Problem(f"{cluster.name!r} has no NVMe tier (host.nvme_gbps is "
                                    f"0); use --offload-tier host or give --offload-gbps",
                                    "--offload-tier"))
    return min(link, host.nvme_gbps * 1e9)


def offload_memory(mem: Mapping[str, float], off: Offload, blocks: float,
                   inflight: float) -> dict[str, Any]:
    """Per-device memory with ``off`` applied (module doc); ``total`` recomputed."""
    out = {k: v for k, v in mem.items() if k != "total"}
    keep = min(1.0, RESIDENT_BLOCKS / max(blocks, 1.0))
    if "optimizer" in off.kinds:
        out["optimizer"] = 0.0
        out["grads"] = mem["grads"] * keep
    if "params" in off.kinds:
        out["weights"] = mem["weights"] * keep
    if "activations" in off.kinds:
        out["activations"] = mem["activations"] * min(
            1.0, RESIDENT_BLOCKS / max(blocks * inflight, 1.0))
    out["total"] = sum(out.values())
    return out


def offload_time(mem: Mapping[str, float], off: Offload, bytes_per_s: float,
                 host_dram_bytes_per_s: float, t_f: float, t_b: float, microbatches: int,
                 inflight: float) -> dict[str, Any]:
    """Exposed transfer and CPU-update time of one step (module doc).

    Args:
        mem: the per-device memory without offload (``memory_per_device``).
        bytes_per_s: the tier's achieved bandwidth per direction (:func:`tier_bytes_per_s`).
        host_dram_bytes_per_s: the host DRAM bandwidth per device (the CPU update).
        t_f, t_b: one microbatch's forward and backward pass of the stage (s).
        microbatches: ``m``; inflight: microbatches whose activations are held at once.

    Returns:
        ``transfer_s`` (exposed beyond the passes), ``cpu_update_s`` (exposed whole),
        ``bytes`` (moved each way per step, summed), and ``exposed_f`` / ``exposed_b``: the
        exposure of each microbatch's forward and backward pass, in order (what a pipeline
        stage's pass grows by: :func:`offload_pipeline`).
    """
    m = microbatches
    w = mem["weights"] if "params" in off.kinds else 0.0
    a = mem["activations"] / max(inflight, 1.0) if "activations" in off.kinds else 0.0
    p = mem["optimizer"] / 12.0 if "optimizer" in off.kinds else 0.0
    g = 2.0 * p                                   # 16-bit gradients down, 16-bit weights up
    exposed = 0.0
    e_f: list[float] = []
    e_b: list[float] = []
    for i in range(m):
        f_in, f_out = w + (g if i == 0 else 0.0), a
        b_in, b_out = w + a, (g if i == m - 1 else 0.0)
        e_f.append(max(0.0, max(f_in, f_out) / bytes_per_s - t_f))
        e_b.append(max(0.0, max(b_in, b_out) / bytes_per_s - t_b))
        exposed += e_f[-1]
        exposed += e_b[-1]
    cpu = 0.0
    if p:
        cpu = p * CPU_ADAM_BYTES_PER_PARAM / host_dram_bytes_per_s
        if off.tier == "nvme":
            cpu = max(cpu, p * NVME_STATE_BYTES_PER_PARAM / bytes_per_s)
    moved = m * (2 * w + 2 * a) + 2 * g
    return {"transfer_s": exposed, "cpu_update_s": cpu, "bytes": moved, "exposed_f": e_f,
            "exposed_b": e_b}


def offload_pipeline(t_f: float, t_b: float, exposed_f: Sequence[float],
                     exposed_b: Sequence[float], p: int, v: int = 1) -> float:
    """Step of a 1F1B pipeline of ``p`` stages whose passes an offload lengthens: microbatch
    ``j``'s forward takes ``t_f + exposed_f[j]`` and its backward ``t_b + exposed_b[j]`` on
    every stage (each stage streams its own blocks' state over its own link; stages are
    balanced), so the step is the flow shop of unequal microbatches
    (:func:`archsim.varlen.pipeline_varlen`): ``sum_j (f_j + b_j) + (p - 1)/v (max f +
    max b)``. One stage: ``m (t_f + t_b) + sum of the exposures`` (the transfer added once);
    with ``p > 1`` every exposed pass also delays the stages after it, and the ramp of the
    pipeline runs at the slowest pass."""
    f = np.asarray(exposed_f, dtype=float) + t_f
    b = np.asarray(exposed_b, dtype=float) + t_b
    return pipeline_varlen(f, b, p, v)
