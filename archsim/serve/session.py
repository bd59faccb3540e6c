"""What ``archsim serve`` does, as one call: a serving simulation of a model on a design from
deployment, request, scheduler and SLO settings.

    from archsim import run_serving
    run = run_serving("gpu/h100", "llama2-7b", rate=2.0, duration=30, scheduler="sarathi",
                      slo="ttft=2s,tpot=100ms")
    print(run.result.table())

With ``find_capacity=True`` the rate is searched (the highest that meets the SLO) and the run
at that rate is returned with :attr:`ServingRun.capacity_rps`. Lengths are ``N``,
``uniform:A:B`` or ``lognormal:MEDIAN:SIGMA``; ``trace`` takes a CSV or JSONL file or a
shipped trace name (``sharegpt_like``, ``azure_conv_like``, ``azure_code_like``): with
``rate`` its arrivals are rescaled to that mean rate, with ``duration`` cut to that window.
Disaggregated serving (Splitwise/DistServe) is on when ``decode_replicas`` is given:
``replicas``/``tp`` then describe the prefill pool.

Closed-loop load, as serving benchmarks run it (vLLM ``benchmark_serving
--max-concurrency``, SGLang ``bench_serving``, genai-perf): ``concurrency=N`` clients send
``requests`` requests of ``isl`` input and ``osl`` output tokens (same length forms), each
client its next request when its previous one finishes; no rate, duration or trace. The
run then also carries :attr:`ServingRun.benchmark`, the report those tools print:

    run = run_serving("gpu/h100", "llama3-70b", tp=4, concurrency=16, isl="1024",
                      osl="1024", requests=256)
    print(run.benchmark.table())
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archsim.api import device_build, load, paged_attention_available, preferred_attention
from archsim.arch.accelerator import Accelerator
from archsim.mapper.overlap import parse_overlap
from archsim.run_request import RunWarning
from archsim.serve.cluster import PoolSpec, ServeSetup, parse_link
from archsim.serve.cost import model_shape, span_layout
from archsim.serve.engine import graph_runtime, with_engine
from archsim.serve.metrics import SLO, BenchmarkReport, ServeResult, parse_slo
from archsim.serve.replica import SchedulerSpec
from archsim.serve.requests import (
    Request,
    check_work,
    closed_loop,
    load_trace,
    parse_length,
    synthesize,
    trace_path,
)
from archsim.serve.run import benchmark_report, serve
from archsim.serve.run import find_capacity as search_capacity
from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.kvtech import KVTechniques

__all__ = ["run_serving", "ServingRun", "request_source", "closed_loop_requests",
           "parse_plan", "serving_attention_kernel"]

#: Closed-loop runs without a request count send this many requests per client.
REQUESTS_PER_CLIENT = 10

#: A function from an arrival rate (req/s; None: the given one) to the requests.
RequestSource = Callable[[float | None], list[Request]]


@dataclass
class ServingRun:
    """One serving simulation.

    Attributes:
        result: the metrics (percentiles, SLO attainment, throughput, energy per token);
            None when a capacity search found no rate that meets the SLO.
        capacity_rps: the rate found by ``find_capacity`` (req/s), else None.
        raw: the raw records (``states``, ``tbt``, ``timeline`` ...) for timelines and plots.
        benchmark: closed-loop runs: the report serving benchmark tools print, else None.
    """

    result: ServeResult | None
    capacity_rps: float | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    benchmark: BenchmarkReport | None = None


def request_source(*, trace: str | None = None, rate: float | None = None,
                   duration: float | None = None, prompt: str = "512", output: str = "128",
                   arrival: str = "poisson", cv: float = 1.0, seed: int = 0,
                   max_requests: int | None = None, rate_searched: bool = False
                   ) -> RequestSource:
    """The requests for a rate: a trace (rescaled to the rate, cut to ``duration``) or
    synthetic arrivals (``rate`` req/s over ``duration`` s; ``rate_searched``: the rate
    comes from a capacity search).

    Raises:
        WorkloadError: neither a trace nor a rate, or no duration with a rate.
    """
    if trace:
        base = load_trace(trace_path(trace), max_rows=max_requests)
        span = base[-1].arrival_s - base[0].arrival_s
        mean_rate = (len(base) - 1) / span if span > 0 else None

        def from_trace(r: float | None) -> list[Request]:
            k = 1.0
            if r is not None and mean_rate:
                k = mean_rate / r
            out: list[Request] = []
            for q in base:
                t = (q.arrival_s - base[0].arrival_s) * k
                if duration is not None and t >= duration:
                    break
                out.append(replace(q, rid=len(out), arrival_s=t))
                if max_requests and len(out) >= max_requests:
                    break
            if out:
                check_work(len(out), sum(q.output_tokens for q in out) / len(out),
                           f"--trace {trace}" + (f" (--rate {r:g})" if r is not None else "")
                           + (f" (--duration {duration:g})" if duration is not None else ""))
            return out
        return from_trace
    if rate is None and not rate_searched:
        raise WorkloadError(Problem("give --rate (with --duration) or --trace", "--rate"))
    if duration is None:
        raise WorkloadError(Problem("give --duration S (the arrival window) with --rate",
                                    "--duration"))
    pl = parse_length(prompt, "--prompt")
    ol = parse_length(output, "--output")
    window = duration

    def synth(r: float | None) -> list[Request]:
        return synthesize(r or rate or 0.0, window, pl, ol, seed, arrival, cv, max_requests)
    return synth


def closed_loop_requests(concurrency: int, isl: str | None, osl: str | None,
                         requests: int | None, seed: int = 0, *, rate: float | None = None,
                         duration: float | None = None, trace: str | None = None,
                         max_requests: int | None = None, find_capacity: bool = False
                         ) -> list[Request]:
    """The requests of a closed-loop run (lengths ``isl``/``osl``: ``N``, ``uniform:A:B``,
    ``lognormal:MEDIAN:SIGMA``; ``requests`` of them, default
    :data:`REQUESTS_PER_CLIENT` x ``concurrency``), after checking that no open-loop
    setting is given with it.

    Raises:
        WorkloadError: one line naming the flag: an open-loop setting (``--rate``,
            ``--duration``, ``--trace``, ``--max-requests``, ``--find-capacity``) with
            ``--concurrency``, a missing ``--isl``/``--osl``, a bad length or count.
    """
    for flag, given in (("--rate", rate is not None), ("--trace", bool(trace)),
                        ("--duration", duration is not None),
                        ("--max-requests", max_requests is not None),
                        ("--find-capacity", find_capacity)):
        if given:
            raise WorkloadError(Problem("closed-loop load (--concurrency) sends each request "
                                        "when a client frees up; it takes no arrival "
                                        "settings (--rate, --duration, --trace, "
                                        "--max-requests, --find-capacity); use --requests",
                                        flag))
    if concurrency < 1:
        raise WorkloadError(Problem(f"expected a client count >= 1, got {concurrency!r}",
                                    "--concurrency"))
    for flag, text in (("--isl", isl), ("--osl", osl)):
        if text is None:
            raise WorkloadError(Problem("closed-loop load needs --isl and --osl (N, "
                                        "uniform:A:B or lognormal:MEDIAN:SIGMA tokens)", flag))
    count = REQUESTS_PER_CLIENT * concurrency if requests is None else requests
    return closed_loop(count, parse_length(isl or "", "--isl"),
                       parse_length(osl or "", "--osl"), seed)


_PLAN_PART = re.compile(r"(tp|pp|ep)(\d+)")


def parse_plan(text: str, flag: str = "--plan") -> tuple[int, int, int]:
    """``(tp, pp, ep)`` of a replica plan string: ``tp4pp2``, ``tp8ep8``, ``pp2tp4`` (each
    of ``tp``, ``pp``, ``ep`` at most once, degrees >= 1; a missing one is 1), the ``plan``
    label ``archsim plan`` prints (``tp4 pp2``; ``single`` is degree 1; a ``mbN`` micro-batch
    count is dropped: a serving pipeline keeps ``pp`` batches in flight), or the path of an
    ``archsim plan --json`` output (its best plan, the first of ``plans``).

    Raises:
        WorkloadError: any other text (naming ``flag`` and the accepted form), a plan with
            data, context parallelism or training options (``--replicas`` gives data
            parallelism), or an unreadable plan file.
    """
    if text.endswith(".json"):
        text = _plan_from_file(text, flag)
    if text.strip() == "single":
        return 1, 1, 1
    words = text.split()
    if len(words) > 1:
        other = [w for w in words if not re.fullmatch(r"(tp|pp|ep|mb)\d+", w)]
        if other:
            raise WorkloadError(Problem(f"a serving replica's plan takes tp, pp and ep; "
                                        f"{' '.join(other)!r} of {text!r} has no serving "
                                        "meaning here (data parallelism: --replicas)", flag))
        text = " ".join(w for w in words if not w.startswith("mb"))
    compact = text.replace(" ", "").lower()
    found = dict.fromkeys(("tp", "pp", "ep"), 1)
    pos = 0
    seen: set[str] = set()
    for m in _PLAN_PART.finditer(compact):
        if m.start() != pos or m.group(1) in seen or int(m.group(2)) < 1:
            break
        seen.add(m.group(1))
        found[m.group(1)] = int(m.group(2))
        pos = m.end()
    if not seen or pos != len(compact):
        raise WorkloadError(Problem(f"expected a replica plan such as tp4pp2 or tp8ep8 "
                                    f"(tp, pp, ep with degrees >= 1), got {text!r}", flag))
    return found["tp"], found["pp"], found["ep"]


def _plan_from_file(path: str, flag: str) -> str:
    """The best plan's label in an ``archsim plan --json`` output."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        label = d["plans"][0]["plan"]
    except OSError as e:
        raise WorkloadError(Problem(f"cannot read {path}: {e.strerror}", flag)) from None
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        raise WorkloadError(Problem(f"{path} is not an 'archsim plan --json' output (no "
                                    "plans[0].plan)", flag)) from None
    if not isinstance(label, str):
        raise WorkloadError(Problem(f"{path}: plans[0].plan is not a plan label", flag))
    return label


def _open_loop_only(isl: str | None, osl: str | None, requests: int | None) -> None:
    """``--isl``/``--osl``/``--requests`` belong to closed-loop load (one line otherwise)."""
    for flag, v in (("--isl", isl), ("--osl", osl), ("--requests", requests)):
        if v is not None:
            raise WorkloadError(Problem("closed-loop setting without --concurrency N; "
                                        "open-loop lengths are --prompt/--output, the count "
                                        "--max-requests", flag))


def _warn_inert(*, arrival: str, cv: float, scheduler: str, chunk: int,
                max_batched_tokens: int | None, attainment: float, slo: SLO,
                trace: str | None, concurrency: int | None) -> None:
    """A serving setting the run has no use for is said (RunWarning), not dropped: each
    compares with its default, so a flag left at its default is quiet."""
    synthetic = not trace and concurrency is None
    inert = [
        (cv != 1.0 and (arrival != "gamma" or not synthetic),
         f"--cv {cv:g} applies only to --arrival gamma (synthetic arrivals)"),
        (arrival == "gamma" and cv == 1.0 and synthetic,
         "--arrival gamma with --cv 1 (the default) has exponential gaps: it is the poisson "
         "process; give --cv"),
        (arrival != "poisson" and not synthetic,
         f"--arrival {arrival} applies only to synthetic arrivals (--rate, no --trace or "
         "--concurrency)"),
        (chunk != 512 and scheduler != "sarathi",
         f"--chunk {chunk} is the sarathi token budget; --scheduler {scheduler} does not use "
         "it"),
        (bool(max_batched_tokens) and scheduler == "sarathi",
         f"--max-batched-tokens {max_batched_tokens} is the vllm/orca budget; sarathi's is "
         "--chunk"),
        (attainment != 0.9 and not slo.any(),
         f"--attainment {attainment:g} needs an SLO (--slo ttft=2s,...)"),
    ]
    for hit, msg in inert:
        if hit:
            warnings.warn(msg if msg.endswith("--cv") else f"{msg}; ignored", RunWarning,
                          stacklevel=3)


def serving_attention_kernel(acc: Accelerator, given: str | None) -> tuple[str, str]:
    """The attention call a serving run prices, and a one-line note when the default falls
    back: ``given`` if set; else ``paged`` (the framework's paged-KV backend, a fused
    FlashAttention call: FA3 on gpu/h100 and gpu/h200, FA2 on gpu/a100) where a unit of
    ``acc`` models it (``Unit.attention_kernels``), else ``sdpa`` -- with a note when a unit
    names attention kernels (a GPU) but not the paged one (no ``paged_attention`` constants:
    gpu/t4, gpu/v100, ...)."""
    if given is not None:
        return given, ""
    if paged_attention_available(acc):
        return "paged", ""
    if any(u.attention_kernels() for u in acc.units):
        return "sdpa", (f"{acc.name} has no paged-KV attention model (paged_attention "
                        "constants): attention priced by its own "
                        f"({preferred_attention(acc)}) model, as --attention-kernel sdpa")
    return "sdpa", ""


def run_serving(design: str | Accelerator, model: str, *, overrides: Sequence[str] = (),
                tp: int = 1, replicas: int = 1, router: str = "round-robin",
                decode_replicas: int | None = None, decode_tp: int | None = None,
                kv_link: str | None = None, memory_fraction: float = 0.9,
                rate: float | None = None, duration: float | None = None,
                trace: str | None = None, prompt: str = "512", output: str = "128",
                arrival: str = "poisson", cv: float = 1.0, seed: int = 0,
                max_requests: int | None = None, scheduler: str = "vllm", chunk: int = 512,
                max_num_seqs: int = 256, max_batched_tokens: int | None = None,
                order: str = "fcfs", preemption: str = "recompute", block_size: int = 16,
                iteration_overhead_ms: float = 0.0, slo: str | SLO = "",
                attainment: float = 0.9, find_capacity: bool = False,
                fidelity: str = "analytical", constraints: str | None = None,
                decode_constraints: str | None = None,
                a_format: str | None = None, w_format: str | None = None,
                kv_format: str | None = None, attention_kernel: str | None = None,
                tp_allreduce: str = "auto",
                progress: Callable[[int, int], None] | None = None,
                note: Callable[[str], None] | None = None, concurrency: int | None = None,
                isl: str | None = None, osl: str | None = None,
                requests: int | None = None, pp: int = 1, ep: int = 1, cp: int = 1,
                plan: str | None = None, decode_pp: int | None = None,
                decode_ep: int | None = None, decode_plan: str | None = None,
                decode_design: str | Accelerator | None = None,
                prefix_hit_rate: float = 0.0, kv_remat: bool = False, topk_blocks: int = 0,
                kv_offload_gb: float = 0.0, overlap: str = "none",
                weight_sparsity: float = 0.0, w_group_size: int = 0,
                act_order: bool = False, kv_manager: str = "hybrid",
                moe_routing: str | None = None, engine: str | None = None) -> ServingRun:
    """Simulate serving ``model`` on ``design`` (docs/serving.md).

    Args:
        design: config YAML, reference-design name or a loaded accelerator.
        tp, replicas, router: tensor parallelism per replica, data-parallel replicas and
            the router (the prefill pool's when disaggregated).
        pp, ep: pipeline stages and expert-parallel degree of a replica (the prefill
            pool's when disaggregated; :class:`~archsim.serve.cluster.PoolSpec`).
        cp: context parallelism: only 1 (refused otherwise, with the reason).
        plan: the replica's plan instead of ``tp``/``pp``/``ep``: a spec string
            (``tp4pp2``, ``tp8ep8``, ``"tp4 pp2"``) or an ``archsim plan --json`` output
            (:func:`parse_plan`).
        decode_replicas, decode_tp, kv_link: disaggregated decode pool and the KV link
            (``nvlink4``, ``ib-ndr``, ... or ``GBPS[:LATENCY_US]``; default ``nvlink4``, or
            ``ib-ndr`` when the decode pool runs on another design: another node).
        decode_pp, decode_ep, decode_plan: the decode pool's plan (default the prefill
            pool's degrees, as ``decode_tp``).
        decode_design: the decode pool's design (config YAML, name or loaded accelerator;
            default ``design``): a heterogeneous deployment, prefill on one design and
            decode on another, each with its own plan; formats apply to both.
        overlap: overlap inside one device of every replica (``none``, ``nanobatch:K``,
            ``tokensplit``, ``fused-ar-norm``, a split ``+fused-ar-norm``;
            :func:`mapper.overlap.parse_overlap`, docs/serving.md).
        memory_fraction: share of device memory for weights + KV, in (0, 1].
        rate, duration, trace, prompt, output, arrival, cv, seed, max_requests: the
            requests (:func:`request_source`); rate in req/s, duration in s.
        scheduler, chunk, max_num_seqs, max_batched_tokens, order, preemption, block_size:
            the batching policy (``vllm``, ``orca``, ``sarathi``) and its limits.
        iteration_overhead_ms: engine time per iteration outside the ops (ms).
        engine: a serving engine's host time per iteration (``vllm``, ``vllm-sync``,
            ``trtllm``, ``sglang``, ``none``; :data:`~archsim.serve.engine.ENGINES`), with
            the GPUs' ``ideal`` runtime replaced by CUDA-graph replay, as the engines run
            decode steps (:func:`~archsim.serve.engine.graph_runtime`); excludes
            ``iteration_overhead_ms``. None (default): no host time, the design's runtime.
        kv_manager: ``hybrid`` (default: sliding-window layers keep only their window's
            KV blocks, as the engines do) or ``uniform`` (every layer every token's;
            :class:`~archsim.serve.replica.SchedulerSpec`).
        slo, attainment: ``ttft=2s,tpot=100ms,...`` (or an :class:`SLO`) and its target.
        find_capacity: search the highest rate that meets the SLO.
        a_format, w_format, kv_format: number formats of every replica (activations,
            weights, KV cache; ``archsim.api.device_build``: default the design's).
        attention_kernel: ``paged`` (a serving framework's paged-KV attention call) or
            ``sdpa``; None (default): ``paged`` where the design models it
            (:func:`serving_attention_kernel`), else ``sdpa``.
        tp_allreduce: the replicas' tensor-parallel all-reduce: ``auto`` (default: what
            serving engines run in CUDA graphs, their custom all-reduce where it is faster
            than NCCL, NCCL above), ``nccl`` (NCCL's protocols over the GPU's link), or vLLM's
            custom all-reduce (``custom-graph``, ``custom-eager``).
        weight_sparsity: fraction of zero weights in every replica's linear layers, run as
            sparse loads + dense MMA (``archsim.api.check_weight_sparsity``; GPU designs).
        w_group_size, act_order: group-wise weight scales and GPTQ act-order of every
            replica (``Workload.with_weight_groups``).
        moe_routing: None (default): a MoE block's routed experts as separate expert GEMMs;
            else each block's routed experts as one fused-MoE call (vLLM's kernel for the
            experts' format: ``arch/gpu/moe.py``) with this routing (``balanced``,
            ``power_law:ALPHA``).
        progress: called with (finished, total) requests during a run.
        note: called with one line per capacity-search step (and the attention kernel's
            fallback note).
        concurrency, isl, osl, requests: closed-loop load (module doc): clients, input and
            output lengths, request count (default 10 per client); excludes ``rate``,
            ``duration``, ``trace``, ``max_requests`` and ``find_capacity``.
        prefix_hit_rate, kv_remat, topk_blocks, kv_offload_gb: the KV-cache techniques
            (:class:`~archsim.workloads.kvtech.KVTechniques`): share of each prompt found in the
            prefix cache, store X and recompute K/V, attend to the top-k KV blocks, host
            memory per device for KV beyond the device's (GB).
    Raises:
        WorkloadError: inconsistent settings (naming the flag), bad lengths or traces.
        ConfigError: a bad design or override.
    """
    if not 0 < memory_fraction <= 1:
        raise WorkloadError(Problem(f"expected a fraction in (0, 1], got "
                                    f"{memory_fraction}", "--memory-fraction"))
    slo_ = slo if isinstance(slo, SLO) else parse_slo(slo, attainment)
    _warn_inert(arrival=arrival, cv=cv, scheduler=scheduler, chunk=chunk,
                max_batched_tokens=max_batched_tokens, attainment=attainment, slo=slo_,
                trace=trace, concurrency=concurrency)
    if tp_allreduce != "auto" and max(tp, decode_tp or 1) == 1:
        warnings.warn(f"--tp-allreduce {tp_allreduce} applies to replicas with --tp > 1 "
                      "(no all-reduce at --tp 1); ignored", RunWarning, stacklevel=2)
    if find_capacity and not slo_.any():
        raise WorkloadError(Problem("--find-capacity needs an SLO (e.g. --slo "
                                    "ttft=2s,tpot=100ms)", "--slo"))
    closed: list[Request] = []
    if concurrency is not None:
        closed = closed_loop_requests(concurrency, isl, osl, requests, seed, rate=rate,
                                      duration=duration, trace=trace,
                                      max_requests=max_requests, find_capacity=find_capacity)
    else:
        _open_loop_only(isl, osl, requests)
        make = request_source(trace=trace, rate=rate, duration=duration, prompt=prompt,
                              output=output, arrival=arrival, cv=cv, seed=seed,
                              max_requests=max_requests, rate_searched=find_capacity)
    acc = design if isinstance(design, Accelerator) else load(design, overrides)
    if kv_manager == "uniform" and not span_layout(model_shape(model)).hybrid:
        warnings.warn(f"--kv-manager uniform: {model} has one attention span, where the "
                      "hybrid and uniform KV managers are the same; ignored", RunWarning,
                      stacklevel=2)
    sch = SchedulerSpec(scheduler, chunk, max_num_seqs, max_batched_tokens or 0, order,
                        preemption, block_size, overhead_s=iteration_overhead_ms * 1e-3,
                        kv_manager=kv_manager)
    if not 0 <= iteration_overhead_ms < 1e4:
        raise WorkloadError(Problem(f"expected 0 <= ms < 10000, got "
                                    f"{iteration_overhead_ms}", "--iteration-overhead-ms"))
    if cp != 1:
        raise WorkloadError(Problem(
            f"context parallelism (cp {cp}) inside a serving replica is not modelled: its "
            "ring attention splits one long prompt's prefill over devices, while a replica "
            "here batches many requests per iteration and keeps each request's KV on every "
            "stage; use --tp/--pp (or archsim run --cp for one long prefill)", "--cp"))
    if plan is not None:
        if (tp, pp, ep) != (1, 1, 1):
            raise WorkloadError(Problem("give the replica's degrees either as --plan or as "
                                        "--tp/--pp/--ep, not both", "--plan"))
        tp, pp, ep = parse_plan(plan, "--plan")
    psch = sch
    if engine is not None:
        if iteration_overhead_ms:
            raise WorkloadError(Problem("--engine sets the host time of every iteration; "
                                        "give --engine or --iteration-overhead-ms, not both",
                                        "--iteration-overhead-ms"))
        psch = with_engine(sch, engine, pp)
        acc = graph_runtime(acc)
    decode = None
    dacc: Accelerator | None = None
    if decode_design is not None:
        if not decode_replicas:
            raise WorkloadError(Problem("--decode-design needs --decode-replicas",
                                        "--decode-design"))
        dacc = (decode_design if isinstance(decode_design, Accelerator)
                else load(decode_design, overrides))
        if engine is not None:
            dacc = graph_runtime(dacc)
        if dacc.name == acc.name and dacc.raw == acc.raw:
            dacc = None              # the same design: one pool model, as before
    kernel, why = serving_attention_kernel(acc, attention_kernel)
    if decode_replicas:
        if decode_plan is not None and (decode_tp or decode_pp or decode_ep):
            raise WorkloadError(Problem("give the decode pool's degrees either as "
                                        "--decode-plan or as --decode-tp/--decode-pp/"
                                        "--decode-ep, not both", "--decode-plan"))
        dtp, dpp, dep = (parse_plan(decode_plan, "--decode-plan") if decode_plan is not None
                         else (decode_tp or tp, decode_pp or pp, decode_ep or ep))
        dbuild = (None if dacc is None
                  else device_build(dacc, a_format, w_format, kv_format=kv_format,
                                    attention_kernel=serving_attention_kernel(
                                        dacc, attention_kernel)[0],
                                    tp_allreduce=tp_allreduce,
                                    weight_sparsity=weight_sparsity,
                                    w_group_size=w_group_size, act_order=act_order,
                                    moe_routing=moe_routing))
        decode = PoolSpec(decode_replicas, dtp,
                          sch if engine is None else with_engine(sch, engine, dpp), dpp, dep,
                          dacc, dbuild)
    else:
        for flag, v in (("--decode-tp", decode_tp), ("--decode-pp", decode_pp),
                        ("--decode-ep", decode_ep), ("--decode-plan", decode_plan)):
            if v:
                raise WorkloadError(Problem(f"{flag} needs --decode-replicas", flag))
    if kv_link is None:          # another design: another node, over the scale-out NIC
        kv_link = "ib-ndr" if dacc is not None else "nvlink4"

    def done(run: ServingRun) -> ServingRun:
        """``run``, after the attention kernel's fallback note (once, on success)."""
        if why and note is not None:
            note(why)
        return run
    setup = ServeSetup(model, PoolSpec(replicas, tp, psch, pp, ep), decode, router,
                       parse_link(kv_link), memory_fraction, fidelity, constraints,
                       decode_constraints,
                       device_build(acc, a_format, w_format, kv_format=kv_format,
                                    attention_kernel=kernel, tp_allreduce=tp_allreduce,
                                    weight_sparsity=weight_sparsity,
                                    w_group_size=w_group_size, act_order=act_order,
                                    moe_routing=moe_routing),
                       KVTechniques(prefix_hit_rate, kv_remat, topk_blocks, kv_offload_gb),
                       parse_overlap(overlap))
    raw: dict[str, Any] = {}
    if concurrency is not None:
        closed_res = serve(acc, setup, closed, slo_, seed=seed, progress=progress,
                           raw_out=raw, concurrency=concurrency)
        return done(ServingRun(closed_res, None, raw, benchmark_report(raw, concurrency)))
    if find_capacity:
        found, res = search_capacity(acc, setup, slo_, make, progress=note)
        if res is None:
            return done(ServingRun(None))
        res = serve(acc, setup, make(found), slo_, seed=seed, raw_out=raw)
        return done(ServingRun(res, found, raw))
    reqs = make(rate)
    if not reqs:
        raise WorkloadError(Problem("no requests arrive in the window", "--duration"))
    res = serve(acc, setup, reqs, slo_, seed=seed, progress=progress, raw_out=raw)
    return done(ServingRun(res, None, raw))
