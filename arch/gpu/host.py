"""The host software stack that launches a GPU's kernels (``GpuSpec.runtime``).

A GPU kernel cannot start before the host has issued it. The host issues op after op
asynchronously (a launch queue: it does not wait for the device), and the device runs each op
once it is issued and the previous one is done::

    issue_i = issue_(i-1) + host cost        end_i = max(issue_i, end_(i-1)) + device_i
    host cost = RUNTIMES[runtime]            wall  = end_last     (archsim.api._host_summary)

so the host runs ahead during long kernels, and a stream of short kernels runs at the host's
pace (``docs/gpu.md``). ``Result.latency_s`` stays the device
time; ``Result.extra["host"]`` carries the wall time and how many ops were host-bound.

The runtime is also the device-side protocol (``GpuSpec.kernel_launch_s``): under ``ideal``
each kernel is launched alone and pays ``launch_overhead_us`` (the event-timed do_bench rows);
under the framework runtimes (``cuda_graph``, ``eager``, ``eager_hf``) kernels are queued back
to back and each pays ``launch_b2b_us`` (its launch processed during the previous kernel's
tail; ``docs/gpu.md`` "Runtime protocols"). ``--runtime`` on run/gemm/map/serve sets it.

Host cost per op of each runtime (per op of the workload graph, one kernel each):

* ``ideal``: 0 (device time only; what every other family reports).
* ``cuda_graph``: 1.0 us: the whole step replayed from a captured CUDA graph
  (silicon/h100.jsonl ``launch.graph_us_per_kernel`` = 0.997 us, back-to-back 1-element
  kernels, tag M).
* ``eager``: 44.9 us: PyTorch eager through ``nn.Module`` calls (dispatcher, Python module
  call, allocator; the bare launch alone is 7.6 us, ``launch.eager_us_per_kernel``). Fitted:
  torchvision ResNet-50 fp16 at batch 1 runs 7.81 ms of wall time for 0.79 ms of kernels
  (silicon/h100.jsonl ``cnn_infer``), i.e. host-bound: 7.81 ms / 174 ops of our graph.
  Checked on batch 32 (7.62 ms wall, 2.53 ms kernels) and 256 (device-bound).
* ``eager_hf``: 114 us: a Hugging Face ``generate`` decode step (its attention, cache and
  logits-processing Python per layer): GPT-2 XL at batch 1 takes 66 ms of wall time for
  3.3 ms of kernels (issue 16, H100) = 66 ms / 581 ops of our GPT-2 XL decode graph. Tag M,
  not held out (the only HF measurement at hand).
"""

from __future__ import annotations

__all__ = ["RUNTIMES", "host_s", "RUNTIME_NOTES", "EAGER_OPS_PER_ATTENTION"]

#: The eager host costs are per op of the graphs they were fitted on, where attention is three
#: ops (QK, softmax, AV); a fused ``Attention`` op still runs that module's Python, so under
#: ``eager`` / ``eager_hf`` it is charged three ops of host time (one kernel under a graph).
EAGER_OPS_PER_ATTENTION = 3

#: Host cost per op (seconds) by runtime (sources in the module docstring).
RUNTIMES: dict[str, float] = {
    "ideal": 0.0,
    "cuda_graph": 1.0e-6,
    "eager": 7.81e-3 / 174,
    "eager_hf": 66e-3 / 581,
}

#: One-line reason shown next to the wall time.
RUNTIME_NOTES: dict[str, str] = {
    "ideal": "device time only (no host)",
    "cuda_graph": "CUDA-graph replay: ~1 us per kernel launch",
    "eager": "PyTorch eager: ~45 us of Python/dispatcher per op",
    "eager_hf": "Hugging Face eager generate: ~114 us of Python per op",
}


def host_s(runtime: str) -> float:
    """Host cost per op (s) of ``runtime`` (a key of :data:`RUNTIMES`)."""
    return RUNTIMES[runtime]
