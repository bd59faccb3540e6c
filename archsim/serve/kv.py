"""Paged KV cache (vLLM's PagedAttention block manager, Kwon et al. SOSP'23).

The cache of one replica is ``total`` blocks of ``block_size`` tokens. A request holds
``ceil(tokens / block_size)`` blocks; blocks are allocated when a request is admitted (its
whole prompt, or its prompt plus maximum output under Orca-style reservation) and one at a
time as decoding crosses a block boundary; they are freed when the request finishes, is
preempted or its KV leaves the replica (disaggregation).

Capacity (:func:`kv_blocks`): ``(memory_fraction x device memory - weights) /
(block_size x KV bytes per token)`` per device; with tensor parallelism each device holds
its shard of every block, so the block count is the same on every device. The default
fraction 0.9 is vLLM's ``gpu_memory_utilization`` default (vllm EngineArgs); the block size
16 is vLLM's default ``block_size``.

Models whose layers attend over different spans (gpt-oss: a 128-token sliding window on
every other block) keep, as vLLM's hybrid KV cache manager does (docs.vllm.ai, design
"Hybrid KV Cache Manager"), only the window's blocks on the sliding layers:
:class:`KVLayout`. The pool is cut into *pages* of ``block_size`` tokens of ``group``
layers (``group`` = the fewest layers of one attention type); each attention type has
``ceil(its layers / group)`` groups of pages, and a request holds, per group, a page per
token block on full-attention layers and at most the blocks a window spans
(``ceil((w - 1) / block_size) + 1``) on sliding ones once its prompt is in the cache
(a prefill writes every new token's K/V first, so an admitted prompt holds all its pages).
A model with one attention type has one group of every layer: page = block.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.workloads.errors import ConfigError, Problem

__all__ = ["BlockManager", "KVLayout", "kv_layout", "kv_blocks", "MEMORY_FRACTION", "BLOCK_SIZE"]

#: vLLM EngineArgs default gpu_memory_utilization (weights + activations + KV share).
MEMORY_FRACTION = 0.9
#: vLLM default KV block size (tokens).
BLOCK_SIZE = 16


def kv_blocks(capacity_bytes: float, weight_bytes: float, kv_bytes_per_token: float,
              block_size: int = BLOCK_SIZE, fraction: float = MEMORY_FRACTION,
              design: str = "", model: str = "") -> int:
    """KV blocks that fit one device next to its weights.

    Raises:
        ConfigError: the weights alone do not fit (path ``--tp``: use more devices).
    """
    free = capacity_bytes * fraction - weight_bytes
    blocks = int(free // (block_size * kv_bytes_per_token))
    if blocks < 1:
        raise ConfigError(Problem(
            f"{model} needs {weight_bytes / 1e9:.3g} GB of weights per device but {design} "
            f"has {capacity_bytes / 1e9:.3g} GB x {fraction:g} usable: no room for a KV "
            "cache; use a larger --tp (or --pp) or a design with more memory", "--tp"))
    return blocks


@dataclass(frozen=True)
class KVLayout:
    """How a request's token blocks become pages of the pool (module doc).

    Attributes:
        full: page groups of the full-attention layers.
        windows: ``(window tokens, page groups)`` of each sliding-window span.
        page_fraction: a page's bytes over one block of every layer's K/V
            (``group / layers``; 1 when there is one attention type).
    """

    full: int = 1
    windows: tuple[tuple[int, int], ...] = ()
    page_fraction: float = 1.0

    @property
    def hybrid(self) -> bool:
        return bool(self.windows)

    def pages(self, blocks: int, block_size: int, trimmed: bool, shared: int = 0) -> int:
        """Pages a request with ``blocks`` token blocks holds beyond ``shared`` whole blocks
        of a cached prefix (held by the prefix, not the request): every block on every
        group while its prompt is being written (``trimmed`` False), at most a window's
        blocks on the sliding groups after."""
        own = max(0, blocks - shared)
        if not self.windows:
            return own
        p = self.full * own
        for w, g in self.windows:
            p += g * (min(own, -(-(w - 1) // block_size) + 1) if trimmed else own)
        return p


def kv_layout(counts: dict[int, int]) -> KVLayout:
    """The page layout of a model with ``counts[window]`` layers per attention span
    (0 = full attention): one group of every layer when there is one span, else groups of
    the fewest layers of one span (vLLM's hybrid manager, module doc)."""
    spans = {w: n for w, n in counts.items() if n > 0}
    if not spans or (len(spans) == 1 and 0 in spans):
        return KVLayout()
    group = min(spans.values())
    layers = sum(spans.values())
    return KVLayout(full=-(-spans.get(0, 0) // group),
                    windows=tuple((w, -(-n // group)) for w, n in sorted(spans.items()) if w),
                    page_fraction=group / layers)


@dataclass
class BlockManager:
    """Free-block accounting of one replica's KV cache.

    Contract: ``used`` never exceeds ``total``; ``alloc`` either takes all the blocks
    asked for and returns True, or takes none and returns False.
    """

    total: int
    block_size: int = BLOCK_SIZE
    used: int = 0
    peak: int = 0

    @property
    def free(self) -> int:
        return self.total - self.used

    def blocks_for(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` tokens."""
        return -(-tokens // self.block_size)

    def alloc(self, n: int) -> bool:
        if n > self.total - self.used:
            return False
        self.used += n
        if self.used > self.peak:
            self.peak = self.used
        return True

    def release(self, n: int) -> None:
        self.used -= n
        if self.used < 0:
            raise AssertionError("KV block accounting went negative")
