"""Request routers of a serving cluster, registered by name (``ServeSetup.router``).

A router is one :class:`Router` subclass plus one registration line
(``@register_router``); :data:`ROUTERS` maps each name to its class and is what the
command line offers. Shipped: ``round-robin``; ``least-outstanding`` (fewest queued +
running requests); ``kv-aware`` (most free KV blocks after the waiting requests' demand).
Ties go to the lowest replica index.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from archsim.serve.registry import registrar

if TYPE_CHECKING:
    from archsim.serve.replica import Replica

__all__ = ["Router", "ROUTERS", "register_router", "RoundRobin", "LeastOutstanding",
           "KvAware"]

#: Every registered router by name (registration order); the ``--router`` choices.
ROUTERS: dict[str, type[Router]] = {}


class Router(ABC):
    """Picks the replica of a pool that receives a request (on arrival, or on its KV
    hand-off to the decode pool).

    Contract: one instance serves one pool for one simulation; :meth:`pick` is called
    with that pool (fixed, at least two replicas; a pool of one is not asked) and returns
    one of its replicas without changing any replica. It may keep its own state (a
    round-robin cursor); same calls in the same order -> same picks (deterministic).
    """

    #: The name ``ServeSetup.router`` and ``--router`` use (set by registration).
    name: ClassVar[str] = ""

    @abstractmethod
    def pick(self, pool: Sequence[Replica]) -> Replica:
        """The replica of ``pool`` that gets the next request."""


#: Class decorator: ``@register_router("name")`` registers a :class:`Router` subclass.
register_router = registrar(ROUTERS, "router")


@register_router("round-robin")
class RoundRobin(Router):
    """Replicas in turn."""

    def __init__(self) -> None:
        self.next = 0

    def pick(self, pool: Sequence[Replica]) -> Replica:
        i = self.next % len(pool)
        self.next += 1
        return pool[i]


@register_router("least-outstanding")
class LeastOutstanding(Router):
    """Fewest queued + running requests."""

    def pick(self, pool: Sequence[Replica]) -> Replica:
        return min(pool, key=lambda x: (x.outstanding(), x.index))


@register_router("kv-aware")
class KvAware(Router):
    """Most free KV blocks after the waiting requests' demand, then fewest outstanding."""

    def pick(self, pool: Sequence[Replica]) -> Replica:
        return min(pool, key=lambda x: (-(x.kv.free - x.demand_blocks()), x.outstanding(),
                                        x.index))
