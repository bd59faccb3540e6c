"""Overlap inside one device: the schedule of a block chain when the batch is split so that
kernels of different pieces run at the same time on one GPU (docs/cluster.md, "Overlap inside
one device").

Techniques (:class:`Overlap`, parsed from ``--overlap`` by :func:`parse_overlap`):

* ``nanobatch:K`` (NanoFlow, Zhu et al. 2024): the batch is split into ``K`` nano-batches;
  compute-bound kernels (GEMMs), memory-bound kernels (decode attention, norms, element-wise)
  and network kernels (all-reduce) of different nano-batches run concurrently, each kind on
  its own share of the SMs;
* ``tokensplit`` (TokenWeave, Gond et al. 2025): two halves of the tokens; one half's
  all-reduce runs on ``comm_sms`` SMs while the other half computes on the rest;
* ``fused-ar-norm`` (TokenWeave's fused all-reduce + RMSNorm on a few SMs, multimem / NVLS):
  the block's norms and residual adds disappear into the all-reduce kernel (the reduced vector
  is normalised in registers: no separate memory pass) and the all-reduce runs at the NVLS
  rate. It composes with either split (``tokensplit+fused-ar-norm`` is TokenWeave).

The schedule (:func:`makespan`): one nano-batch's chain of segments ``(kind, t)`` -- ``t`` the
segment's time alone on the whole device -- runs for each of ``K`` nano-batches through one
stream per kind (at most one kernel of a kind at a time, as NanoFlow's and TokenWeave's
streams; each stream takes its kernels segment by segment, nano-batch by nano-batch); a kernel
starts when its nano-batch's previous segment has finished and its stream is free. Kernels that
run at the same time share the device (processor sharing, advanced event by event), each at a
rate (work-seconds per second) set by the kinds running:

* network: 1 -- the collective's time already comes from the link model at NCCL's rates, on
  the ``comm_sms`` SMs it takes (``s_net = comm_sms / SMs`` while it runs, else 0);
* compute: ``1 - s_net`` alone or beside a collective (a compute-bound kernel's time scales
  with the SMs it gets); beside a memory-bound kernel ``(1 - s_mem - s_net) x interference``;
* memory: 1 unless beside a compute kernel, then ``min(1, s_mem / s_sat) x interference`` --
  HBM bandwidth saturates with ``s_sat`` of the SMs (``hbm_saturating_share``).

The step is the time the last kernel ends (the makespan). ``s_mem`` is chosen, as NanoFlow's
search does, from a grid (:data:`MEMORY_SHARES`) to give the least makespan; token-splitting
runs memory-bound kernels on the compute stream (two streams) and has no interference term
(its only cost is the SMs the all-reduce takes while it runs). With ``K = 1`` the schedule is
the chain's sum: no overlap, bit for bit. Closed form of two halves of one compute ``c`` and
all-reduce ``n`` (tokensplit): ``c + n/2 + s_net n/2`` when the first half's all-reduce ends
inside the second half's compute (``(1 - s_net) n/2 <= c/2``), else ``c/2 + n``: ``max``
of compute (with its SM tax) and communication plus the unoverlapped edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archsim.arch.collective import place
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.parallel import ParallelPlan

if TYPE_CHECKING:  # annotations only
    from archsim.arch.cluster import Cluster

__all__ = ["Overlap", "parse_overlap", "makespan", "best_makespan", "blocks_makespan",
           "check_overlap", "KINDS", "MEMORY_SHARES", "OVERLAP_HELP"]

#: segment kinds of a chain
KINDS = ("compute", "memory", "network")

#: the memory-bound kernels' SM shares searched for nano-batching (NanoFlow searches the
#: resource split per stage; a grid of tenths of the device)
MEMORY_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)

OVERLAP_HELP = ("overlap inside one device: none, nanobatch:K (NanoFlow), tokensplit "
                "(TokenWeave), fused-ar-norm (fused all-reduce + RMSNorm on NVLS), or a split "
                "joined with the fused kernel by '+' (tokensplit+fused-ar-norm)")


@dataclass(frozen=True)
class Overlap:
    """An overlap technique inside one device (module doc).

    Attributes:
        nano_batches: pieces the batch is split into (1: no split; tokensplit: 2).
        streams: ``3`` compute / memory / network streams (nano-batching) or ``2`` compute
            and network (token-splitting: memory-bound kernels stay on the compute SMs).
        fused_ar_norm: the fused all-reduce + RMSNorm kernel (NVLS rate; norms and residual
            adds folded into it).
        comm_sms: SMs a collective takes while it overlaps compute (TokenWeave's fused kernel:
            2-8 SMs on H100, "Gond et al. 2025", abstract; 8, its upper end, by default).
        hbm_saturating_share: share of the SMs at which a streaming (memory-bound) kernel
            reaches the HBM's peak bandwidth (an assumption: about half the SMs of an
            A100/H100 keep enough loads in flight; a parameter).
        interference: throughput a compute- or memory-bound kernel keeps while another such
            kernel runs beside it (L2 and HBM contention; NanoFlow profiles it per kernel
            pair; 0.9 is an assumption, not a figure of the paper).
    """

    nano_batches: int = 1
    streams: int = 3
    fused_ar_norm: bool = False
    comm_sms: int = 8
    hbm_saturating_share: float = 0.5
    interference: float = 0.9

    @property
    def splits(self) -> bool:
        """Is the batch split (``K > 1``)?"""
        return self.nano_batches > 1

    @property
    def active(self) -> bool:
        """Does this change anything (a split or the fused kernel)?"""
        return self.splits or self.fused_ar_norm

    def label(self) -> str:
        """The ``--overlap`` text this parses from."""
        parts = []
        if self.splits:
            parts.append("tokensplit" if self.streams == 2 else f"nanobatch:{self.nano_batches}")
        if self.fused_ar_norm:
            parts.append("fused-ar-norm")
        return "+".join(parts) or "none"


def parse_overlap(text: str, flag: str = "--overlap") -> Overlap:
    """``none``, ``nanobatch:K``, ``tokensplit``, ``fused-ar-norm`` or a split and the fused
    kernel joined by ``+``.

    Raises:
        ConfigError: anything else (naming ``flag``).
    """
    def bad(why: str) -> ConfigError:
        return ConfigError(Problem(f"{why}; expected none, nanobatch:K (K >= 1), tokensplit, "
                                   f"fused-ar-norm, or a split + fused-ar-norm", flag))

    t = text.strip().lower()
    if t == "none":
        return Overlap()
    k, streams, fused = 1, 3, False
    splits = 0
    for part in t.split("+"):
        if part == "fused-ar-norm":
            if fused:
                raise bad(f"fused-ar-norm given twice in {text!r}")
            fused = True
        elif part == "tokensplit":
            k, streams, splits = 2, 2, splits + 1
        elif part.startswith("nanobatch:"):
            n = part.split(":", 1)[1]
            if not n.isdigit() or int(n) < 1:
                raise bad(f"nanobatch needs a whole number of nano-batches >= 1, got {n!r}")
            k, streams, splits = int(n), 3, splits + 1
        else:
            raise bad(f"unknown overlap {part!r}")
    if splits > 1:
        raise bad(f"{text!r} splits the batch twice (nanobatch and tokensplit are "
                  f"alternatives)")
    return Overlap(nano_batches=k, streams=streams, fused_ar_norm=fused)


def _rates(o: Overlap, sms: int, mem_share: float, running: frozenset[str]
           ) -> dict[str, float]:
    """Each running kind's rate (work seconds per second) while the kinds in ``running`` share
    the device (module doc)."""
    s_net = o.comm_sms / sms if "network" in running else 0.0
    out = {"network": 1.0}
    if o.streams == 2:            # token-splitting: memory-bound kernels on the compute SMs
        out["compute"] = out["memory"] = 1.0 - s_net
        return out
    both = "compute" in running and "memory" in running
    out["compute"] = (1.0 - mem_share - s_net) * o.interference if both else 1.0 - s_net
    out["memory"] = (min(1.0, mem_share / o.hbm_saturating_share) * o.interference
                     if both else 1.0)
    return out


def makespan(chain: Sequence[tuple[str, float]], o: Overlap, sms: int,
             mem_share: float = 0.0) -> float:
    """Makespan of ``o.nano_batches`` nano-batches each running ``chain`` (module doc).

    Args:
        chain: one nano-batch's segments ``(kind, seconds alone on the device)`` in order.
        o: the technique (nano-batches, streams, SM shares).
        sms: the device's SMs.
        mem_share: the memory-bound kernels' SM share while they run beside compute.
    """
    k = o.nano_batches
    if k == 1:
        total = 0.0
        for _, t in chain:
            total += t
        return total

    def stream(kind: str) -> str:
        return "compute" if o.streams == 2 and kind == "memory" else kind

    # each stream's kernels in order: segment-major, nano-batch-minor
    queues: dict[str, list[tuple[int, int]]] = {kind: [] for kind in KINDS}
    for i, (kind, _) in enumerate(chain):
        queues[stream(kind)].extend((i, j) for j in range(k))
    head = {kind: 0 for kind in KINDS}
    done = [-1] * k                        # last finished segment of each nano-batch
    running: dict[str, tuple[int, int, float]] = {}  # stream -> (segment, nano-batch, work left)
    now = 0.0
    left = len(chain) * k
    while left:
        for st, q in queues.items():
            if st not in running and head[st] < len(q):
                i, j = q[head[st]]
                if done[j] == i - 1:
                    running[st] = (i, j, chain[i][1])
                    head[st] += 1
        kinds = frozenset(chain[i][0] for i, _, _ in running.values())
        rate = _rates(o, sms, mem_share, kinds)
        dt = min(w / rate[chain[i][0]] for i, _, w in running.values())
        now += dt
        for st, (i, j, w) in list(running.items()):
            w -= dt * rate[chain[i][0]]
            if w <= 1e-15 * max(1.0, chain[i][1]):
                del running[st]
                done[j] = i
                left -= 1
            else:
                running[st] = (i, j, w)
    return now


def best_makespan(chain: Sequence[tuple[str, float]], o: Overlap, sms: int
                  ) -> tuple[float, float]:
    """(makespan, memory share) of ``chain`` under ``o`` on a device of ``sms`` SMs: for
    nano-batching the least over :data:`MEMORY_SHARES` that leave the compute kernels SMs."""
    if not o.splits or o.streams == 2:
        return makespan(chain, o, sms), 0.0
    return min((makespan(chain, o, sms, m), m) for m in MEMORY_SHARES
               if m + o.comm_sms / sms < 1.0)


def blocks_makespan(block: Sequence[tuple[str, float]], o: Overlap, sms: int, blocks: int
                    ) -> float:
    """Makespan of ``blocks`` repetitions of one block's chain: ``T_1 + (blocks - 1)(T_2 -
    T_1)`` from the makespans of one and two blocks -- the schedule's edge once, then its
    steady state per block (the schedule repeats from the second block on; equal to
    simulating every block to rounding, tests/cluster/test_overlap.py)."""
    t1 = best_makespan(block, o, sms)[0]
    if blocks == 1:
        return t1
    t2 = best_makespan(list(block) * 2, o, sms)[0]
    return t1 + (blocks - 1) * (t2 - t1)


def check_overlap(ov: Overlap, cluster: Cluster, plan: ParallelPlan, phase: str, batch: int,
                  sms: int, flag: str = "--overlap") -> None:
    """Refuse an overlap the step cannot use, with the reason (each names ``flag``): training
    (the techniques are inference ones; training's tp overlap is ``--tp-overlap``), the fused
    kernel with sequence parallelism (no all-reduce to fuse), a split
    on a design without SMs to partition, a batch of ``batch`` sequences per device that does
    not split into the nano-batches, token-splitting or the fused kernel without a
    tensor-parallel all-reduce, the fused kernel without NVLink SHARP (multimem) in one node,
    or ``--tp-overlap`` given too.

    Raises:
        ConfigError: as above.
    """
    def no(why: str) -> ConfigError:
        return ConfigError(Problem(f"{ov.label()}: {why}", flag))

    if phase == "train":
        raise no("the overlap techniques modelled are inference ones (NanoFlow, TokenWeave: "
                 "prefill and decode); for training use --tp-overlap")
    if ov.fused_ar_norm and plan.tp > 1 and plan.sequence_parallel:
        raise no("the fused kernel is an all-reduce; sequence parallelism replaces it by a "
                 "reduce-scatter and an all-gather")
    if ov.splits and sms <= ov.comm_sms:
        raise no(f"splitting the batch partitions a GPU's SMs; {cluster.spec.device} has no "
                 f"SM count above the collective's {ov.comm_sms} SMs")
    if ov.splits and batch % ov.nano_batches:
        raise no(f"a device's batch of {batch} sequences does not split into "
                 f"{ov.nano_batches} equal nano-batches")
    if (ov.streams == 2 and ov.splits or ov.fused_ar_norm) and plan.tp == 1:
        raise no("there is no tensor-parallel all-reduce to overlap or fuse (tp 1)")
    if ov.fused_ar_norm:
        g = place(cluster, plan.tp, 1)
        if g.nodes > 1 or cluster.spec.scale_up.nvls_efficiency <= 0:
            raise no(f"the fused all-reduce + RMSNorm needs NVLink SHARP (multimem loads and "
                     f"stores in an NVSwitch) inside one node; the link "
                     f"{cluster.spec.scale_up.name!r} of {cluster.name!r} has none"
                     if g.nodes == 1 else "the fused kernel reduces inside one node; the tp "
                     f"group spans {g.nodes} nodes")
