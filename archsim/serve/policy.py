"""Per-iteration batching policies of a replica, registered by name (``SchedulerSpec.policy``).

A policy is one :class:`Policy` subclass plus one registration line
(``@register_policy``); :data:`POLICIES` maps each name to its class and is what the
command line offers. The policies shipped, each as its paper describes it:

* ``vllm`` — vLLM v0 default (Kwon et al. SOSP'23): *prefill-prioritising* continuous
  batching. When requests wait and fit (whole prompt's KV blocks, ``max_num_seqs``,
  ``max_batched_tokens``), the iteration is a prefill-only batch of whole prompts;
  otherwise every running request decodes one token. Decodes stall while prefills run.
* ``orca`` — Orca (Yu et al. OSDI'22) iteration-level scheduling: every iteration runs all
  decodes *and* admits waiting requests with their whole prompt in the same batch, within
  the token budget; KV for prompt + maximum output is reserved on admission (Orca has no
  paging), so Orca never preempts.
* ``sarathi`` — Sarathi-Serve (Agrawal et al. OSDI'24) stall-free batching: all running
  decodes first, then chunks of partially prefilled requests, then new requests, up to a
  token budget of ``chunk`` tokens per iteration (chunked prefill).
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from archsim.serve.registry import registrar

if TYPE_CHECKING:
    from archsim.serve.replica import Replica, SchedulerSpec, State

__all__ = ["Policy", "POLICIES", "register_policy", "Vllm", "Orca", "Sarathi"]

#: Every registered policy by name (registration order); the ``--scheduler`` choices.
POLICIES: dict[str, type[Policy]] = {}

#: One iteration's work: prefill chunks ``(state, tokens)``, decoding states, swap time (s).
Work = tuple[list[tuple["State", int]], list["State"], float]


class Policy(ABC):
    """How a replica forms each iteration's batch from its queues.

    Contract: :meth:`batch` is called when the replica is idle and has work, after
    swapped-out requests were brought back where they fit. It returns this iteration's
    prefill chunks ``(state, tokens)`` (``0 < tokens <= state.target - state.done``),
    the decoding states and the swap time (s) of the preemptions it caused. It moves
    requests from ``rep.waiting`` to ``rep.running`` only through ``rep.admit`` /
    ``rep.admit_whole`` (KV blocks allocated first), grows decodes' KV only through
    ``rep.decodes`` (which preempts when the cache is full), keeps ``rep.running`` within
    ``rep.spec.max_num_seqs``, and does not change any token count: the simulation
    advances the requests after the iteration is priced. Same queues -> same batch
    (deterministic). A replica's token budget per iteration is :meth:`token_budget`.
    """

    #: The name ``SchedulerSpec.policy`` and ``--scheduler`` use (set by registration).
    name: ClassVar[str] = ""

    def token_budget(self, spec: SchedulerSpec, context: int) -> int:
        """Most tokens in one iteration: ``max_batched_tokens``, or vLLM's default without
        chunked prefill, max(model context, 2048)."""
        return spec.max_batched_tokens or max(context, 2048)

    def label(self, spec: SchedulerSpec) -> str:
        """How the deployment summary names this policy with its settings."""
        return self.name

    @abstractmethod
    def batch(self, rep: Replica, swap_s: float) -> Work:
        """The next iteration's work (see the class contract); ``swap_s`` is the swap-in
        time already spent this iteration, included in the returned time."""


#: Class decorator: ``@register_policy("name")`` registers a :class:`Policy` subclass.
register_policy = registrar(POLICIES, "scheduling policy")


@register_policy("vllm")
class Vllm(Policy):
    """vLLM v0: a prefill-only batch of whole prompts while requests wait and fit (and
    nothing is swapped out), else one decode step of every running request."""

    def batch(self, rep: Replica, swap_s: float) -> Work:
        chunks = rep.admit_whole(0, reserve=False) if not rep.swapped else []
        if chunks:
            return chunks, [], swap_s
        dec, t = rep.decodes()
        return [], dec, swap_s + t


@register_policy("orca")
class Orca(Policy):
    """Orca: every decode plus whole prompts of admitted requests, KV for prompt + maximum
    output reserved on admission."""

    def batch(self, rep: Replica, swap_s: float) -> Work:
        dec, t = rep.decodes()
        chunks = rep.admit_whole(len(dec), reserve=True)
        return chunks, dec, swap_s + t


@register_policy("sarathi")
class Sarathi(Policy):
    """Sarathi-Serve: decodes, then ongoing prefills, then new ones, within ``chunk``
    tokens per iteration."""

    def token_budget(self, spec: SchedulerSpec, context: int) -> int:
        return spec.chunk

    def label(self, spec: SchedulerSpec) -> str:
        return f"{self.name} chunk {spec.chunk}"

    def batch(self, rep: Replica, swap_s: float) -> Work:
        dec, t = rep.decodes()
        budget = rep.max_tokens - len(dec)
        chunks: list[tuple[State, int]] = []
        for s in rep.prefilling:     # the running requests still prefilling, in order
            if budget <= 0:
                break
            if s.done < s.target:
                c = min(budget, s.target - s.done)
                chunks.append((s, c))
                budget -= c
        while budget > 0 and rep.waiting and len(rep.running) < rep.spec.max_num_seqs:
            s = rep.waiting[0][1]
            if not rep.admit(s, reserve_output=False):
                break
            heapq.heappop(rep.waiting)
            rep.running.append(s)
            if s.done < s.target:
                c = min(budget, s.target - s.done)
                chunks.append((s, c))
                budget -= c
        return chunks, dec, swap_s + t
