"""Collective ops of a parallel plan: all-gather, reduce-scatter, all-to-all and send/recv, next
to the existing :class:`~workloads.ops.AllReduce` (re-exported here).

Each carries ``elements`` values in ``a_format`` per device (the nccl-tests buffer convention
of :mod:`arch.collective`: the whole vector for all-reduce, the gathered output for
all-gather, the input for reduce-scatter, what one device sends for all-to-all, the message
for send/recv), the ``devices`` of its group and the ``group`` it runs in (``tp``, ``ep``,
``cp``, ``dp``, ``pp``). A device's compute graph does not hold them: a plan prices them on the
cluster (:mod:`archsim.parallel`), so every device family can run a plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from archsim.workloads.ops import AllReduce, Collective

__all__ = ["Collective", "GroupAllReduce", "AllGather", "ReduceScatter", "AllToAll",
           "SendRecv", "AllReduce"]


#: An all-reduce that knows its group (``tp``, ``cp``, ``dp``): every all-reduce has ``group``.
GroupAllReduce = AllReduce


@dataclass(frozen=True, kw_only=True)
class AllGather(Collective):
    kind: ClassVar[str] = "allgather"


@dataclass(frozen=True, kw_only=True)
class ReduceScatter(Collective):
    kind: ClassVar[str] = "reducescatter"


@dataclass(frozen=True, kw_only=True)
class AllToAll(Collective):
    kind: ClassVar[str] = "alltoall"


@dataclass(frozen=True, kw_only=True)
class SendRecv(Collective):
    kind: ClassVar[str] = "sendrecv"
