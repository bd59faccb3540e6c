"""A serving engine's host time per iteration (``archsim serve --engine``).

A serving engine's iteration is the GPU's work (the model's kernels, replayed as a CUDA
graph: back to back, each paying ``launch_b2b_us``) plus the host's work around it:
scheduling, preparing the inputs, sampling bookkeeping, detokenising and streaming the
outputs. An engine that does this **between** the GPU steps exposes it every iteration
(``iteration = gpu + host``); one that prepares step ``N + 1`` while step ``N`` runs on the
GPU (vLLM's *async scheduling*, on by default from vLLM 0.14.0, 2026-01-20, "except
pipeline parallel, the CPU backend and non-MTP/EAGLE speculative decoding") hides it
behind the GPU (``iteration = max(gpu, host)``).

The host time is ``per_iteration_ms + per_seq_ms x sequences in the batch`` (decodes and
prompt chunks). The constants are engine-level, fitted on measured H100 deployments of one
model per engine and checked on the engine's other models (``archsim.validation.
serving_h100``; docs/serving.md "Engine host time"); the host CPU is the H100 node's.
They carry to another GPU unchanged (the host's work does not depend on the GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archsim.arch.accelerator import Accelerator, load_data
from archsim.serve.replica import SchedulerSpec
from archsim.workloads.errors import Problem, WorkloadError

__all__ = ["EngineHost", "ENGINES", "engine_host", "graph_runtime", "GRAPH_RUNTIME",
           "with_engine", "with_runtime"]

#: The GPU runtime protocol a serving engine's decode iterations run under: CUDA-graph
#: replay (``arch/gpu/host.py``), the protocol the kernel tables were timed under.
GRAPH_RUNTIME = "cuda_graph"


@dataclass(frozen=True)
class EngineHost:
    """One engine's host time per iteration.

    Attributes:
        name: the ``--engine`` name.
        per_iteration_ms: host time of an iteration regardless of its batch (ms).
        per_seq_ms: host time per sequence in the batch (ms; decodes and prompt chunks).
        overlap: True when the engine prepares the next iteration while the GPU runs this
            one (the iteration takes ``max(gpu, host)``), False when the host's work sits
            between the GPU steps (``gpu + host``).
        source: where the constants come from (fit rows, release).
    """

    name: str
    per_iteration_ms: float
    per_seq_ms: float
    overlap: bool
    source: str

    def host_s(self, sequences: int) -> float:
        """Host time of an iteration with ``sequences`` sequences (s)."""
        return (self.per_iteration_ms + self.per_seq_ms * sequences) * 1e-3


# Fitted (least absolute deviation of measured - predicted mean TPOT, ms, against the
# running requests, over the fit rows predicted with no host time under CUDA-graph replay:
# ``python3 benchmarks/serving_h100.py --fit-host``); checks in docs/serving.md.
_VLLM = (1.55, 0.035, "vLLM 0.12.0 (synchronous scheduling), fitted on its 90 Qwen3-32B "
         "bf16 H100 rows; checked on its Llama-3.1-70B fp8 rows")
ENGINES: dict[str, EngineHost] = {
    "none": EngineHost("none", 0.0, 0.0, False, "no host time (a hardware model's "
                       "default)"),
    "vllm": EngineHost("vllm", _VLLM[0], _VLLM[1], True,
                       "vLLM >= 0.14 (async scheduling on by default): the synchronous "
                       "engine's host time, hidden behind the GPU step; checked on vLLM "
                       "0.18.0's gpt-oss-120b and MiniMax-M2.5 rows"),
    "vllm-sync": EngineHost("vllm-sync", *_VLLM[:2], False, _VLLM[2]),
    "trtllm": EngineHost("trtllm", 0.77, 0.0, False,
                         "TensorRT-LLM 1.0.0rc3 (PyTorch backend), fitted on its 177 "
                         "Llama-3.1-8B-Instruct bf16 H100 rows; checked on its Qwen3-32B "
                         "and Qwen3-235B-A22B fp8 rows"),
    "sglang": EngineHost("sglang", 0.92, 0.009, False,
                         "SGLang 0.5.1, fitted on its 78 Qwen3-32B bf16 H100 rows; checked "
                         "on SGLang 0.5.8's 6 rows"),
}


def engine_host(name: str, pp: int = 1) -> EngineHost:
    """The engine called ``name`` (:data:`ENGINES`). vLLM turns async scheduling off with
    pipeline parallelism (``pp > 1``): ``vllm`` is then ``vllm-sync``.

    Raises:
        WorkloadError: an unknown name (path ``--engine``).
    """
    e = ENGINES.get(name)
    if e is None:
        raise WorkloadError(Problem(f"unknown serving engine {name!r}; expected one of "
                                    f"{', '.join(ENGINES)}", "--engine"))
    return ENGINES["vllm-sync"] if name == "vllm" and pp > 1 else e


def with_runtime(acc: Accelerator, runtime: str, only: str | None = None) -> Accelerator:
    """``acc`` with every GPU unit (a unit whose spec has a ``runtime``) under ``runtime``
    (``units[i].runtime``, as ``--runtime`` sets it), or only those now under ``only``;
    ``acc`` itself when nothing changes."""
    sets = [f"units[{i}].runtime={runtime}" for i, u in enumerate(acc.units)
            if (r := getattr(getattr(u, "spec", None), "runtime", None)) is not None
            and r != runtime and (only is None or r == only)]
    return load_data(acc.raw, acc.source or acc.name, sets) if sets else acc


def graph_runtime(acc: Accelerator) -> Accelerator:
    """``acc`` with every GPU unit that runs the ``ideal`` protocol (each kernel launched
    alone, device time only) under :data:`GRAPH_RUNTIME` instead; a runtime set otherwise
    (``--runtime eager``) is kept. ``acc`` itself when nothing changes."""
    return with_runtime(acc, GRAPH_RUNTIME, only="ideal")


def with_engine(spec: SchedulerSpec, name: str, pp: int = 1) -> SchedulerSpec:
    """``spec`` with the host time of the engine ``name`` (:func:`engine_host`) for a
    replica of ``pp`` pipeline stages.

    Raises:
        WorkloadError: an unknown engine (path ``--engine``).
    """
    e = engine_host(name, pp)
    return replace(spec, overhead_s=e.per_iteration_ms * 1e-3,
                   overhead_per_seq_s=e.per_seq_ms * 1e-3, overlap_host=e.overlap)
