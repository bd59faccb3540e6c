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
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.workloads.errors import ConfigError, Problem

__all__ = ["BlockManager", "kv_blocks", "MEMORY_FRACTION", "BLOCK_SIZE"]

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
