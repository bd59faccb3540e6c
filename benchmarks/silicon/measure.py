"""Measure the GPU kernel suite on real silicon into JSON lines for ``archsim calibrate``.

Run on a machine with an NVIDIA GPU, PyTorch (CUDA) and Triton::

    python3 benchmarks/silicon/measure.py --out h100_$(date +%F).jsonl            # all
    python3 benchmarks/silicon/measure.py --out quick.jsonl --only gemm,copy,launch
    python3 -m archsim calibrate h100_$(date +%F).jsonl --config gpu/h100 --out h100_cal.yaml

Rows (one JSON object a line, the format of ``shared/reference/silicon/README.md``; every
row carries ``device``): ``device`` (name, SMs, L2, memory, driver, torch, CUDA, cuBLAS,
cuDNN, power limit, date), ``gemm`` (bf16/fp16 ``F.linear``, fp8 ``torch._scaled_mm``, int8
``torch._int_mm``), ``bmm``, ``attn_prefill`` / ``attn_decode`` (SDPA), ``vector`` (softmax,
layer/RMS norm, gelu, silu, add, copy), ``copy`` (bytes), ``launch`` (eager and CUDA-graph
cost of a 1-element kernel), ``energy`` (board energy from NVML's total-energy counter over a
~4 s loop, SM clock at the end, and idle power), ``train_step`` / ``cnn_train`` (whole
training steps: wall and profiler kernel time, plus their energy; needs ``transformers`` /
``torchvision``, else a ``skipped`` row). Kernel latencies: median of
``triton.testing.do_bench`` (it flushes L2 before every call). Nothing here runs without a
GPU; the module imports torch lazily so that the repository's tests can import it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Shapes of the suite (M x N x K): LLM projections at decode / prefill batch sizes,
#: squares, skinny and unaligned shapes.
GEMM_NK = ((4096, 4096), (11008, 4096), (8192, 8192), (28672, 8192))
GEMM_M = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SQUARES = (256, 1024, 4096, 8192, 16384)
UNALIGNED = ((4096, 4095, 4096), (4096, 4096, 4100), (8192, 50257, 768))
VECTOR_OPS = ("softmax", "layernorm", "rmsnorm", "gelu", "silu", "add", "copy")


def _device_row(torch: Any) -> dict[str, Any]:
    p = torch.cuda.get_device_properties(0)
    row: dict[str, Any] = {
        "kind": "device", "device": p.name, "sms": p.multi_processor_count,
        "mem_gb": p.total_memory / 1e9, "l2": getattr(p, "L2_cache_size", None),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "date": datetime.date.today().isoformat()}
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        row["driver"] = pynvml.nvmlSystemGetDriverVersion()
        row["power_limit_w"] = pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0
        row["max_sm_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
    except Exception as exc:  # noqa: BLE001 - NVML is optional; record why it is missing
        row["nvml"] = f"unavailable: {exc}"
    return row


def _bench(fn: Callable[[], Any]) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, return_mode="median"))


def _gemm_fn(torch: Any, m: int, n: int, k: int, dtype: str) -> Callable[[], Any]:
    import torch.nn.functional as F  # noqa: N812

    dev = "cuda"
    if dtype in ("bf16", "fp16"):
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        x, w = torch.randn(m, k, device=dev, dtype=dt), torch.randn(n, k, device=dev, dtype=dt)
        return lambda: F.linear(x, w)
    if dtype == "fp8":
        x = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        return lambda: torch._scaled_mm(x, w, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if dtype == "int8":
        x = torch.randint(-128, 127, (m, k), device=dev, dtype=torch.int8)
        w = torch.randint(-128, 127, (k, n), device=dev, dtype=torch.int8)
        return lambda: torch._int_mm(x, w)
    raise ValueError(dtype)


def _gemm_rows(torch: Any) -> Iterator[dict[str, Any]]:
    shapes = [(m, n, k, "bf16") for m in GEMM_M for n, k in GEMM_NK]
    shapes += [(s, s, s, d) for s in SQUARES for d in ("bf16", "fp16")]
    shapes += [(m, n, k, "fp16") for m in (1, 16, 128, 2048) for n, k in GEMM_NK]
    shapes += [(16, 4096, 4096, "fp8"), (1024, 4096, 4096, "fp8"), (4096, 4096, 4096, "fp8"),
               (16384, 16384, 16384, "fp8"), (4096, 28672, 8192, "fp8")]
    shapes += [(128, 4096, 4096, "int8"), (4096, 4096, 4096, "int8"),
               (16384, 16384, 16384, "int8")]
    shapes += [(m, n, k, "bf16") for m, n, k in UNALIGNED]
    for m, n, k, dt in shapes:
        ms = _bench(_gemm_fn(torch, m, n, k, dt))
        yield {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": dt, "ms": ms,
               "tflops": 2 * m * n * k / ms / 1e9}


def _bmm_rows(torch: Any) -> Iterator[dict[str, Any]]:
    for b, m, n, k in ((32, 2048, 2048, 128), (32, 2048, 128, 2048), (64, 1, 4096, 128),
                       (96, 1024, 1024, 128)):
        x = torch.randn(b, m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(b, k, n, device="cuda", dtype=torch.bfloat16)
        ms = _bench(lambda x=x, y=y: torch.bmm(x, y))
        yield {"kind": "bmm", "b": b, "m": m, "n": n, "k": k, "dtype": "bf16", "ms": ms,
               "tflops": 2 * b * m * n * k / ms / 1e9}


def _attention_rows(torch: Any) -> Iterator[dict[str, Any]]:
    import torch.nn.functional as F  # noqa: N812

    bf = torch.bfloat16
    for b, h, s, d in ((1, 32, 512, 128), (1, 32, 8192, 128), (8, 32, 2048, 128)):
        q = torch.randn(b, h, s, d, device="cuda", dtype=bf)
        ms = _bench(lambda q=q: F.scaled_dot_product_attention(q, q, q, is_causal=True))
        yield {"kind": "attn_prefill", "b": b, "h": h, "s": s, "d": d, "causal": True,
               "dtype": "bf16", "ms": ms}
    for b, h, L, d in ((1, 32, 1024, 128), (16, 32, 4096, 128), (1, 32, 32768, 128)):
        q = torch.randn(b, h, 1, d, device="cuda", dtype=bf)
        kv = torch.randn(b, h, L, d, device="cuda", dtype=bf)
        ms = _bench(lambda q=q, kv=kv: F.scaled_dot_product_attention(q, kv, kv))
        yield {"kind": "attn_decode", "b": b, "h": h, "L": L, "d": d, "dtype": "bf16",
               "ms": ms, "gbps": 2 * kv.numel() * 2 / ms / 1e6}


def _vector_fn(torch: Any, op: str, x: Any) -> Callable[[], Any]:
    import torch.nn.functional as F  # noqa: N812

    y = torch.empty_like(x)
    w = torch.ones(x.shape[-1], device="cuda", dtype=x.dtype)
    return {"softmax": lambda: torch.softmax(x, -1),
            "layernorm": lambda: F.layer_norm(x, x.shape[-1:], w, w),
            "rmsnorm": lambda: F.rms_norm(x, x.shape[-1:], w),
            "gelu": lambda: F.gelu(x, approximate="tanh"), "silu": lambda: F.silu(x),
            "add": lambda: x + y, "copy": lambda: y.copy_(x)}[op]


def _vector_rows(torch: Any) -> Iterator[dict[str, Any]]:
    for rows in (2048, 65536):
        x = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
        for op in VECTOR_OPS:
            yield {"kind": "vector", "op": op, "rows": rows, "cols": 4096, "dtype": "bf16",
                   "ms": _bench(_vector_fn(torch, op, x))}
    for nbytes in (1 << 20, 1 << 24, 1 << 28, 1 << 31):
        x = torch.empty(nbytes, device="cuda", dtype=torch.uint8)
        y = torch.empty_like(x)
        ms = _bench(lambda x=x, y=y: y.copy_(x))
        yield {"kind": "copy", "bytes": nbytes, "ms": ms, "tbps_rw": 2 * nbytes / ms / 1e9}


def _launch_row(torch: Any) -> dict[str, Any]:
    x = torch.zeros(1, device="cuda")
    n = 2000
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t) / n * 1e6
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            for _ in range(n):
                x.add_(1)
    torch.cuda.synchronize()
    t = time.perf_counter()
    g.replay()
    torch.cuda.synchronize()
    graph = (time.perf_counter() - t) / n * 1e6
    return {"kind": "launch", "eager_us_per_kernel": eager, "graph_us_per_kernel": graph}


def _energy_row(torch: Any, fn: Callable[[], Any], seconds: float = 4.0) -> dict[str, Any]:
    """Board energy per call over a sustained loop (NVML total-energy counter, mJ)."""
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0, e0, iters = time.perf_counter(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h), 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            fn()
        iters += 10
        torch.cuda.synchronize()
    t1, e1 = time.perf_counter(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    return {"kind": "energy", "iters": iters, "ms": (t1 - t0) / iters * 1e3,
            "mj_per_call": (e1 - e0) / iters, "avg_w": (e1 - e0) / 1e3 / (t1 - t0),
            "inst_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)}


def _energy_rows(torch: Any) -> Iterator[dict[str, Any]]:
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    time.sleep(3.0)
    e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    yield {"kind": "energy", "op": "idle", "avg_w": (e1 - e0) / 1e3 / (t1 - t0)}
    for m, n, k, dt in ((4096, 4096, 4096, "bf16"), (16384, 16384, 16384, "bf16"),
                        (8192, 8192, 8192, "fp8"), (1, 8192, 8192, "bf16")):
        row = _energy_row(torch, _gemm_fn(torch, m, n, k, dt))
        yield {**row, "op": "gemm", "m": m, "n": n, "k": k, "dtype": dt}
    x = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    yield {**_energy_row(torch, lambda: y.copy_(x)), "op": "copy", "bytes": 1 << 30}


def _step_rows(torch: Any, kind: str, fields: dict[str, Any], step: Callable[[], Any],
               iters: int = 20) -> Iterator[dict[str, Any]]:
    """Wall time per step (mean over ``iters`` after warm-up), the GPU kernel time and
    kernel count of one step from the profiler (what separates host from device time), and
    the board energy of a sustained loop of steps."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) / iters * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    # self device time of each device event, in us (older PyTorch: self_cuda_time_total)
    kernel_ms = sum(getattr(e, "self_device_time_total", None)
                    or getattr(e, "self_cuda_time_total", 0.0) for e in kernels) / 1e3
    yield {"kind": kind, **fields, "ms": ms, "kernel_ms": kernel_ms, "kernels": len(kernels)}
    # the step's kernels by name (count, summed self time): what a kernel list must contain
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        us = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
        by_name.setdefault(str(e.name)[:200], []).append(float(us))
    for name, times in sorted(by_name.items(), key=lambda kv: -sum(kv[1])):
        yield {"kind": "kernel_profile", "op": kind, "model": fields.get("model"),
               "name": name, "count": len(times), "us": sum(times)}
    try:
        yield {**_energy_row(torch, step), "op": kind, **fields}
    except Exception as exc:  # noqa: BLE001 - NVML optional: the latency row stands alone
        yield {"kind": "skipped", "suite": "models", "op": kind, "why": f"energy: {exc}"}


def _model_rows(torch: Any) -> Iterator[dict[str, Any]]:
    """Whole training steps (``train_step``: Hugging Face GPT-2 small, random init, bf16
    autocast, fused AdamW, batch 8 x 1024; ``cnn_train``: torchvision ResNet-50, channels
    last, fp16 autocast + SGD, batch 128), each with wall and kernel time. A missing library
    gives a ``skipped`` row saying which."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as exc:
        yield {"kind": "skipped", "suite": "models", "op": "train_step", "why": str(exc)}
    else:
        model = GPT2LMHeadModel(GPT2Config()).cuda().train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        ids = torch.randint(0, 50257, (8, 1024), device="cuda")

        def gpt_step() -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        yield from _step_rows(torch, "train_step", {
            "model": "gpt2-small", "batch": 8, "seq": 1024, "dtype": "amp_bf16",
            "optimizer": "adamw"}, gpt_step)
        del model, opt
    try:
        import torchvision
    except ImportError as exc:
        yield {"kind": "skipped", "suite": "models", "op": "cnn_train", "why": str(exc)}
        return
    net = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last).train()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(128, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device="cuda")

    def cnn_step() -> None:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(sgd)
        scaler.update()
        sgd.zero_grad(set_to_none=True)

    yield from _step_rows(torch, "cnn_train", {"model": "resnet50", "batch": 128,
                                               "dtype": "amp_fp16"}, cnn_step)


#: Ops timed under every runtime protocol (suite ``protocols``): a one-element kernel, small
#: vector ops and GEMMs from GEMV-like to compute-bound (M x N x K, bf16).
PROTOCOL_GEMMS = ((1, 4096, 4096), (16, 4096, 4096), (128, 4096, 4096), (2048, 4096, 4096),
                  (16, 28672, 8192), (8192, 8192, 8192))


def _protocol_times(torch: Any, fn: Callable[[], Any], n: int = 50) -> dict[str, float]:
    """Per-call ms of ``fn`` under four runtime protocols.

    ``flush_ms``: ``do_bench`` median, L2 flushed before each call (the ``silicon/`` rows);
    ``b2b_ms``: ``n`` calls back to back on one stream, CUDA events around all of them, L2 warm
    (a framework microbenchmark's loop); ``graph_ms``: the same ``n`` calls captured in one
    CUDA graph and replayed; ``host_ms``: the eager loop timed on the host clock with one
    synchronise at the end (includes the launch path when the host is the bottleneck).
    """
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    out = {"flush_ms": _bench(fn)}
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    out["b2b_ms"] = a.elapsed_time(b) / n
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    out["host_ms"] = (time.perf_counter() - t) * 1e3 / n
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        fn()
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    a.record()
    g.replay()
    b.record()
    torch.cuda.synchronize()
    out["graph_ms"] = a.elapsed_time(b) / n
    return out


def _protocol_rows(torch: Any) -> Iterator[dict[str, Any]]:
    """The same ops timed eager-with-flush, back to back, from a CUDA graph and host-timed."""
    x1 = torch.zeros(1, device="cuda")
    yield {"kind": "protocol", "op": "add1", **_protocol_times(torch, lambda: x1.add_(1))}
    for rows, op in ((16, "rmsnorm"), (2048, "rmsnorm"), (16, "silu"), (2048, "layernorm")):
        x = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
        yield {"kind": "protocol", "op": op, "rows": rows, "cols": 4096, "dtype": "bf16",
               **_protocol_times(torch, _vector_fn(torch, op, x))}
    for m, n, k in PROTOCOL_GEMMS:
        yield {"kind": "protocol", "op": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16",
               **_protocol_times(torch, _gemm_fn(torch, m, n, k, "bf16"), n=20 if m > 4096 else 50)}


#: Odd shapes (suite ``shapes``): vocabulary-wide rows and LM heads (N not a multiple of
#: 64/128), small K with large outputs, split-K candidates (small M, large K), fp8 skinny N.
ODD_COLS = (4095, 8191, 32000, 50257, 128256)
ODD_GEMMS = ((2048, 50257, 768, "bf16"), (2048, 50257, 1600, "bf16"), (8192, 32000, 4096, "bf16"),
             (512, 128256, 4096, "bf16"), (16384, 16384, 128, "bf16"), (16384, 16384, 256, "bf16"),
             (16, 4096, 28672, "bf16"), (64, 8192, 28672, "bf16"), (1, 8192, 28672, "bf16"),
             (2048, 1024, 8192, "fp8"), (256, 4096, 4096, "fp8"), (2048, 4096, 4096, "fp8"),
             (8192, 1024, 8192, "fp8"), (2048, 4096, 4096, "int8"), (32, 4096, 4096, "int8"))


def _shape_rows(torch: Any) -> Iterator[dict[str, Any]]:
    """Odd widths and LLM-specific GEMM shapes, flushed (``ms``) and back to back."""
    for cols in ODD_COLS:
        x = torch.randn(2048, cols, device="cuda", dtype=torch.bfloat16)
        for op in ("softmax", "layernorm", "rmsnorm"):
            t = _protocol_times(torch, _vector_fn(torch, op, x))
            yield {"kind": "vector", "op": op, "rows": 2048, "cols": cols, "dtype": "bf16",
                   "ms": t["flush_ms"], "b2b_ms": t["b2b_ms"], "graph_ms": t["graph_ms"]}
    for m, n, k, dt in ODD_GEMMS:
        t = _protocol_times(torch, _gemm_fn(torch, m, n, k, dt), n=20)
        yield {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": dt, "ms": t["flush_ms"],
               "tflops": 2 * m * n * k / t["flush_ms"] / 1e9, "b2b_ms": t["b2b_ms"],
               "graph_ms": t["graph_ms"], "suite": "shapes"}


def _attention_sweep_rows(torch: Any) -> Iterator[dict[str, Any]]:
    """SDPA (flash) over head dims 64/128/256, GQA (``enable_gqa``) and decode lengths."""
    import torch.nn.functional as F  # noqa: N812

    bf = torch.bfloat16
    for b, h, kvh, s, d in ((1, 32, 32, 1024, 64), (1, 32, 32, 1024, 256), (4, 32, 8, 2048, 128),
                            (1, 64, 8, 4096, 128), (16, 32, 32, 256, 128), (2, 16, 16, 8192, 64),
                            (1, 8, 8, 16384, 256)):
        q = torch.randn(b, h, s, d, device="cuda", dtype=bf)
        kv = torch.randn(b, kvh, s, d, device="cuda", dtype=bf)
        ms = _bench(lambda q=q, kv=kv, g=kvh != h: F.scaled_dot_product_attention(
            q, kv, kv, is_causal=True, enable_gqa=g))
        yield {"kind": "attn_prefill", "b": b, "h": h, "kv_heads": kvh, "s": s, "d": d,
               "causal": True, "dtype": "bf16", "ms": ms, "suite": "attention_sweep"}
    for b, h, kvh, L, d in ((1, 32, 32, 512, 128), (1, 32, 8, 8192, 128), (8, 32, 8, 4096, 128),
                            (64, 32, 8, 2048, 128), (1, 32, 32, 131072, 128), (32, 32, 32, 1024, 64),
                            (4, 16, 16, 8192, 256), (128, 64, 8, 1024, 128)):
        q = torch.randn(b, h, 1, d, device="cuda", dtype=bf)
        kv = torch.randn(b, kvh, L, d, device="cuda", dtype=bf)
        ms = _bench(lambda q=q, kv=kv, g=kvh != h: F.scaled_dot_product_attention(
            q, kv, kv, enable_gqa=g))
        yield {"kind": "attn_decode", "b": b, "h": h, "kv_heads": kvh, "L": L, "d": d,
               "dtype": "bf16", "ms": ms, "gbps": 2 * kv.numel() * 2 / ms / 1e6,
               "suite": "attention_sweep"}


SUITES: dict[str, Callable[[Any], Iterator[dict[str, Any]]]] = {
    "gemm": _gemm_rows, "bmm": _bmm_rows, "attention": _attention_rows,
    "vector": _vector_rows, "launch": lambda torch: iter([_launch_row(torch)]),
    "energy": _energy_rows, "models": _model_rows, "protocols": _protocol_rows,
    "shapes": _shape_rows, "attention_sweep": _attention_sweep_rows,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to write")
    ap.add_argument("--only", help=f"comma-separated suites ({', '.join(SUITES)}; default all)")
    args = ap.parse_args(argv)
    only = args.only.split(",") if args.only else list(SUITES)
    bad = [s for s in only if s not in SUITES]
    if bad:
        print(f"measure.py: error: unknown suite(s) {bad}; expected: {', '.join(SUITES)}",
              file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("measure.py: error: needs PyTorch with CUDA", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("measure.py: error: no CUDA device visible", file=sys.stderr)
        return 2
    dev = _device_row(torch)
    t0 = time.perf_counter()
    with open(args.out, "w") as fh:
        fh.write(json.dumps(dev) + "\n")
        for suite in only:
            for row in SUITES[suite](torch):
                row["device"] = dev["device"]
                fh.write(json.dumps(row) + "\n")
                fh.flush()
        fh.write(json.dumps({"kind": "done", "total_s": time.perf_counter() - t0,
                             "device": dev["device"]}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
