"""Overlap inside one device on one device's graph: ``archsim.evaluate(acc, wl, overlap=)``
and ``archsim run DEVICE --overlap ...`` on a device design (docs/cluster.md, "Overlap
inside one device").

The mechanism is :mod:`mapper.overlap`'s, as plans (:func:`archsim.parallel.evaluate_plan`)
and serving replicas (:class:`archsim.serve.cost.IterationCost`) run it: the workload's batch
splits into ``K`` nano-batches (:meth:`workloads.graph.Workload.split_batch`, priced by the
design's own model, so smaller GEMMs are as (in)efficient as the unit makes them); each
block of one nano-batch is a chain of its ops in graph order -- the tensor-parallel
collectives (role ``collective``) as ``network``, the others ``compute`` or ``memory`` by
the op row's bound -- and a run of identical blocks takes
:func:`mapper.overlap.blocks_makespan`. The fused all-reduce + RMSNorm kernel drops the
blocks' norm and residual ops (:data:`workloads.tags.FUSED_AR_NORM_ROLES`) and prices each
all-reduce as :func:`arch.collective.multimem_allreduce` on the device's own link (as a
serving replica does). The ops outside the blocks (embedding, head, the vocabulary-parallel
embedding's all-reduce) run once, unsplit. The collectives keep the time of the graph's own
all-reduce ops (the unit's model of its link), so ``overlap="none"`` is the plain
evaluation, bit for bit; the energy is the plain evaluation's (the same work).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from archsim.arch.accelerator import Accelerator
from archsim.arch.cluster import single_node
from archsim.arch.collective import multimem_allreduce, place
from archsim.mapper.overlap import Overlap, blocks_makespan, check_overlap, parse_overlap
from archsim.result import OpResult, Result
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Collective
from archsim.workloads.parallel import ParallelPlan
from archsim.workloads.tags import FUSED_AR_NORM_ROLES

__all__ = ["overlap_of", "check_device_overlap", "overlapped_latency", "with_overlap"]


def overlap_of(overlap: Overlap | str | None) -> Overlap:
    """An :class:`Overlap` from a technique, its ``--overlap`` text or None (no overlap)."""
    if overlap is None:
        return Overlap()
    if isinstance(overlap, Overlap):
        return overlap
    return parse_overlap(overlap)


def _sms(acc: Accelerator) -> int:
    return getattr(getattr(acc.units[0], "spec", None), "sm_count", 0) or 0


def check_device_overlap(acc: Accelerator, wl: Workload, ov: Overlap) -> None:
    """Refuse an overlap the workload cannot use on ``acc`` (one line naming ``--overlap``):
    a design of several units (the schedule already overlaps their ops; the technique
    partitions one GPU's SMs), a workload without transformer blocks, and every reason of
    :func:`mapper.overlap.check_overlap` (training, no SMs, a batch that does not split,
    tp 1 for token-splitting and the fused kernel, no NVLink SHARP for the fused kernel).

    Raises:
        ConfigError: as above.
    """
    if len(acc.units) > 1:
        raise ConfigError(Problem(f"{ov.label()}: overlap inside one device partitions one "
                                  f"GPU's SMs; {acc.name} has {len(acc.units)} units",
                                  "--overlap"))
    if not any(op.block is not None for op in wl.ops()):
        raise ConfigError(Problem(f"{ov.label()}: {wl.name} has no transformer blocks to "
                                  "overlap", "--overlap"))
    check_overlap(ov, single_node(acc, wl.devices), ParallelPlan(tp=wl.devices), wl.phase,
                  wl.batch, _sms(acc))


def overlapped_latency(acc: Accelerator, whole: Sequence[OpResult], piece_wl: Workload,
                       piece: Sequence[OpResult], ov: Overlap) -> float:
    """The latency of a one-unit workload under ``ov`` (module doc).

    Args:
        acc: the design (one unit).
        whole: the op rows of the whole batch (the ops outside the blocks are taken from it).
        piece_wl: one nano-batch's workload (``Workload.split_batch``).
        piece: its op rows.
        ov: the technique.
    """
    tp = piece_wl.devices
    cluster = single_node(acc, tp) if ov.fused_ar_norm else None
    ops = {op.name: op for op in piece_wl.ops()}
    chains: list[tuple[int, tuple[tuple[str, float], ...]]] = []
    current: int | None = None
    chain: list[tuple[str, float]] = []
    for r in piece:
        if r.block is None:
            continue
        if r.block != current:
            if current is not None:
                chains.append((current, tuple(chain)))
            current, chain = r.block, []
        if r.role == "collective":
            t = r.latency_s
            op = ops[r.name]
            if cluster is not None and isinstance(op, Collective):
                t = multimem_allreduce(cluster, op.payload_bytes(),
                                       place(cluster, tp, 1)).time_s
            chain.append(("network", t))
        elif not (ov.fused_ar_norm and r.role in FUSED_AR_NORM_ROLES):
            chain.append(("compute" if r.bound == "compute" else "memory", r.latency_s))
    if current is not None:
        chains.append((current, tuple(chain)))
    total = 0.0
    for r in whole:
        if r.block is None:
            total += r.latency_s
    # runs of identical consecutive blocks: the schedule's edge once, then its steady state
    i = 0
    while i < len(chains):
        j = i
        while j + 1 < len(chains) and chains[j + 1][1] == chains[i][1]:
            j += 1
        total += blocks_makespan(chains[i][1], ov, _sms(acc), j - i + 1)
        i = j + 1
    return total


def with_overlap(res: Result, latency_s: float, ov: Overlap) -> Result:
    """``res`` with the overlapped latency (cycles, rates and utilisation follow it; the
    energy and the op rows stay the whole batch's) and ``extra["overlap"]``."""
    old = res.latency_s
    f = old / latency_s if latency_s > 0 else 1.0
    extra = dict(res.extra)
    extra["overlap"] = {"technique": ov.label(), "unoverlapped_latency_s": old}
    return replace(res, latency_s=latency_s, cycles=int(round(latency_s * res.clock_hz)),
                   tokens_per_s=None if res.tokens_per_s is None else res.tokens_per_s * f,
                   samples_per_s=None if res.samples_per_s is None else res.samples_per_s * f,
                   utilization=res.utilization * f, extra=extra,
                   input_hash=hashlib.sha256(f"{res.input_hash}/overlap:{ov.label()}".encode()
                                             ).hexdigest()[:16])
