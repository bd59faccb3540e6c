"""Measured serving deployments on H100 SXM nodes against ``archsim serve``'s closed loop.

Data: ``shared/reference/serving_h100/deployments.csv`` (its README: 917 benchmarks of
vLLM, TensorRT-LLM and SGLang deployments, closed-loop ``concurrency`` clients with fixed
``isl``/``osl``, mean TTFT and TPOT as measured; H100 rows only — the held-out devices are
never read here). Each row archsim can express is run as the same closed-loop benchmark
(:func:`archsim.serve.session.run_serving` with ``concurrency``, ``isl``, ``osl``) on
``gpu/h100`` and its mean TTFT and TPOT are set against the measured ones.

A row is expressible when its model is a zoo decoder or a shipped config (:data:`ZOO`), its
precision is the checkpoint's own or fp8 of a 16-bit checkpoint (run in :data:`FORMATS`), it
is aggregated (one pool) without attention data parallelism, and its expert-parallel degree
(if any) divides its TP; models whose blocks differ (gpt-oss's sliding-window and full
attention, DeepSeek's dense then MoE blocks) serve one block per kind (``IterationCost``);
:func:`unsupported` says why another is not. A disaggregated row's deployment (prefill and
decode pools with their plans and batch caps, its precision, the KV link) is built by
:func:`disaggregated_setup`, but the row carries no client count, so :func:`predict` runs it
only for a given ``concurrency``. Each row runs with its engine's host time per iteration
(:func:`engine_for`, ``archsim serve --engine``), fitted on one model per engine
(:data:`HOST_FIT_ROWS`, :func:`fit_host`) and checked on the others. Splits for fit/check
are by model or by backend, never at random (docs/serving.md, "Measured deployments",
"Engine host time"). Rows measured by another harness than aiconfigurator's (:data:`HARNESS`:
InferenceMAX's vLLM Llama-70B runs) run with that harness's engine settings and request
lengths (docs/serving.md, "Who measured which rows").
"""

from __future__ import annotations

import csv
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from archsim.api import device_build, load
from archsim.arch.accelerator import Accelerator
from archsim.arch.reference import reference_dir
from archsim.serve.cluster import PoolSpec, ServeSetup, parse_link
from archsim.serve.cost import model_shape
from archsim.serve.engine import GRAPH_RUNTIME, graph_runtime, with_engine, with_runtime
from archsim.serve.replica import SchedulerSpec
from archsim.serve.run import benchmark_report, serve
from archsim.serve.session import REQUESTS_PER_CLIENT, closed_loop_requests, run_serving
from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.formats import get_format

__all__ = ["Deployment", "Prediction", "ZOO", "EngineSettings", "engine_settings",
           "HEADROOM_TOKENS", "SGLANG_CHUNK_TOKENS", "ENGINE_TOKENS", "BACKEND_POLICY",
           "RESERVED_SLOTS", "deployments_path", "load_deployments", "checkpoint_precision",
           "unsupported", "predict", "disaggregated_setup", "FORMATS", "DISAGG_LINK",
           "median_errors", "render_markdown", "VLLM_MOE_ROUTING", "moe_routing",
           "engine_design", "engine_for", "fit_host", "HOST_FIT_ROWS", "host_fit_engine",
           "host_residual",
           "VLLM_ASYNC_FROM", "Harness", "HARNESS", "INFERENCEMAX_VLLM", "harness",
           "request_lengths"]

_DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
_HF = _DATA / "hf_dense"
_DEPLOYED = _DATA / "hf_deployed"

#: Hugging Face model id -> the ``--model`` archsim serves it as: a zoo decoder of the same
#: shape (Llama 3.1 8B/70B have the layers, widths, heads and vocabulary of Llama 3 8B/70B;
#: the longer RoPE context does not change the work of a 1-8k-token request) or the
#: checkpoint's ``config.json`` (hyper-parameters as published on the model's HF page; a
#: model folder of ``tests/data/hf_deployed``, provenance in its SOURCE.md).
ZOO = {"meta-llama/Llama-3.1-8B-Instruct": "llama3-8b", "meta-llama/Llama-3.1-70B": "llama3-70b",
       "Qwen/Qwen3-32B": str(_HF / "qwen3-32b.json"),
       "Qwen/Qwen3-235B-A22B-FP8": str(_DEPLOYED / "Qwen3-235B-A22B-FP8"),
       "deepseek-ai/DeepSeek-V3": str(_DEPLOYED / "DeepSeek-V3"),
       "deepseek-ai/DeepSeek-R1": str(_DEPLOYED / "DeepSeek-R1"),
       "openai/gpt-oss-120b": str(_DEPLOYED / "gpt-oss-120b"),
       "MiniMaxAI/MiniMax-M2.5": str(_DEPLOYED / "MiniMax-M2.5")}

#: Token headroom over the prompt in a generated deployment's per-iteration token budget:
#: NVIDIA's aiconfigurator, which generated and benchmarked these deployments, sets an
#: aggregated TensorRT-LLM worker's ``max_num_tokens`` to ``max_batch_size + isl + 1500``
#: ("assuming no chunked prefill"; its first public commit, 2025-08, ``cli/backends/trtllm.py``;
#: today ``generator/rule_plugin/trtllm.rule``) and a vLLM worker's ``max_num_batched_tokens``
#: to the same (``rule_plugin/vllm.rule``, since vLLM support came, 2025-12-04), not the
#: engines' default of 8192.
HEADROOM_TOKENS = 1500

#: SGLang's own per-iteration prompt budget on H100-class GPUs (``chunked_prefill_size``
#: 8192). The SGLang rows (0.5.1.post1, 2025-08; 0.5.8.post1) predate or sit at the start of
#: aiconfigurator's SGLang generator (2025-12-04; ``--enable-mixed-chunk`` added
#: 2026-01-19), so they are run with the engine's defaults.
SGLANG_CHUNK_TOKENS = 8192

#: Tokens per iteration of the engines' defaults (TensorRT-LLM ``max_num_tokens``, vLLM V1
#: ``max_num_batched_tokens``, SGLang ``chunked_prefill_size``: 8192), used for the
#: disaggregated rows, whose generated per-worker budgets the data does not give.
ENGINE_TOKENS = 8192

#: Each engine's batching as deployed, as a registered policy (archsim.serve.policy):
#: TensorRT-LLM (generated without chunked prefill; the ``GUARANTEED_NO_EVICT`` capacity
#: scheduler by default) adds *whole* prompts to the running decodes' iteration, KV for
#: prompt + output reserved on admission: ``orca``; vLLM V1 (chunked prefill always on)
#: fills the budget the decodes leave with prompt chunks: ``sarathi``; SGLang by default
#: (mixed chunks off) runs a prefill-only batch whenever prompts wait, decodes otherwise:
#: ``vllm`` (prefill-first).
BACKEND_POLICY = {"trtllm": "orca", "vllm": "sarathi", "sglang": "vllm"}

#: Request slots an engine holds back from ``max_batch_size``. TensorRT-LLM: 1 — **chosen on
#: the fit half's TP 1 rows** (Llama-3.1-8B, 42 rows), where the measured TTFT grows in
#: proportion to the request's service time at 8-64 clients (TTFT ~ E2E / (clients - 1): one
#: client always waits a whole request for a slot) and checked on its TP 2/4/8 rows
#: (docs/serving.md). Its cause is not found: the PR once cited for it (TensorRT-LLM #7998,
#: "Reserve an extra slot for padded batch") concerns speculative decoding's slots, which
#: these rows do not use, and whether the harness that measured them set ``max_batch_size``
#: to the clients is not public (docs/serving.md "Who measured which rows"). Its reach is
#: every TensorRT-LLM row, though only the Llama-3.1-8B rows' TTFT grows with the output
#: length (Qwen3-32B fp8 and Qwen3-235B-A22B-FP8 rows do not): narrowing it would be a
#: choice made on check rows, so it is not narrowed. vLLM and SGLang: 0 (their TTFT does
#: not grow with the output length).
RESERVED_SLOTS = {"trtllm": 1, "vllm": 0, "sglang": 0}


@dataclass(frozen=True)
class Harness:
    """A benchmark harness other than aiconfigurator's that measured a group of rows, with
    the engine settings its scripts deploy (docs/serving.md, "Who measured which rows").

    Attributes:
        name: the harness and the script the settings are read from.
        release: the engine release it ran (the rows' ``backend_version`` is empty).
        engine: the ``--engine`` (host time) that release ran as, as configured.
        token_budget: tokens per iteration (vLLM ``--max-num-batched-tokens``).
        kv_format: the KV cache's format (``--kv-cache-dtype``).
        range_ratio: each request's input and output lengths are integers drawn uniformly
            from ``[int(range_ratio x L), L]`` (``L`` = the row's ``isl`` / ``osl``; the
            client's ``--random-range-ratio``).
    """

    name: str
    release: str
    engine: str
    token_budget: int
    kv_format: str
    range_ratio: float


#: SemiAnalysis InferenceMAX's H100 vLLM runs of Llama-3.3-70B-Instruct-FP8 (the shape of
#: Llama-3.1-70B), as its repository (github.com/SemiAnalysisAI/InferenceX) held them until
#: they were removed on 2025-10-29 (commit 2582bce, "remove llama 70b"; the rows' measured
#: date in aiconfigurator-core's ``silicon_data_source`` is 2025-10-29):
#: ``benchmarks/70b_fp8_h100_{docker,slurm}.sh`` serve ``vllm/vllm-openai:v0.10.2`` with
#: ``kv-cache-dtype: fp8``, ``async-scheduling: true``, ``no-enable-prefix-caching``,
#: ``max-num-batched-tokens: 8192``, ``--max-num-seqs=$CONC``; the client
#: (``kimbochen/bench_serving`` ``benchmark_serving.py``, ``runners/launch_h100-*.sh``)
#: sends ``--num-prompts=10 x CONC`` at ``--max-concurrency=CONC``, ``--request-rate=inf``,
#: random prompts with ``--random-range-ratio 0.8`` (``.github/workflows/full-sweep-tmpl.yml``;
#: lengths uniform in ``[int(0.8 L), L]``), after one single-prompt test request and no
#: warm-up (warm-up requests came to that client on 2026-01-21). TP 2/4/8, 4-64 clients and
#: isl/osl 1k/1k, 1k/8k, 8k/1k (``70b-tmpl.yml``, ``benchmark-tmpl.yml``) are the 45 rows'
#: grid: the rows are identified as these runs by that match and the date, not by a label
#: in the data.
INFERENCEMAX_VLLM = Harness("InferenceMAX 70b_fp8_h100 (vLLM v0.10.2)", "0.10.2", "vllm",
                            8192, "fp8_e4m3", 0.8)

#: (backend, backend_version, model_path) -> the harness that measured those rows; every
#: other row: aiconfigurator's generator and benchmark (:func:`engine_settings`).
HARNESS = {("vllm", "", "meta-llama/Llama-3.1-70B"): INFERENCEMAX_VLLM}


def harness(d: Deployment) -> Harness | None:
    """The harness that measured ``d`` when it is not aiconfigurator's (:data:`HARNESS`)."""
    return HARNESS.get((d.backend, d.version, d.model_path))


def request_lengths(d: Deployment) -> tuple[str, str]:
    """``d``'s request lengths as ``--isl``/``--osl`` specs: fixed ``isl``/``osl``, or
    ``uniform:int(r x L):L`` under a harness that draws them (:attr:`Harness.range_ratio`)."""
    h = harness(d)
    if h is None or h.range_ratio >= 1:
        return str(d.isl), str(d.osl)
    return tuple(f"uniform:{int(h.range_ratio * n)}:{n}"      # type: ignore[return-value]
                 for n in (d.isl, d.osl))



@dataclass(frozen=True)
class EngineSettings:
    """One deployment's engine settings as archsim runs them (docs/serving.md).

    Attributes:
        policy: the batching policy (:data:`BACKEND_POLICY`).
        token_budget: most tokens per iteration (tokens): TensorRT-LLM and vLLM
            ``max_batch_size + isl + HEADROOM_TOKENS`` (decodes included), SGLang
            :data:`SGLANG_CHUNK_TOKENS` (prompt tokens of a prefill batch).
        max_num_seqs: most running requests: ``max_batch_size`` (aiconfigurator benchmarks
            an aggregated worker at ``workers x max_batch_size`` clients: the row's
            concurrency, one worker) less :data:`RESERVED_SLOTS`.
    """

    policy: str
    token_budget: int
    max_num_seqs: int


def engine_settings(d: Deployment) -> EngineSettings:
    """The engine settings ``d`` was deployed with (:class:`EngineSettings`); under another
    :func:`harness`, its token budget and ``max_num_seqs`` = the clients."""
    h = harness(d)
    if h is not None:
        return EngineSettings(BACKEND_POLICY[d.backend], h.token_budget, d.concurrency)
    budget = (SGLANG_CHUNK_TOKENS if d.backend == "sglang"
              else d.concurrency + d.isl + HEADROOM_TOKENS)
    return EngineSettings(BACKEND_POLICY[d.backend], budget,
                          max(1, d.concurrency - RESERVED_SLOTS[d.backend]))


#: First vLLM release with async scheduling on by default (its release notes, 2026-01-20:
#: "Async scheduling is now enabled by default", pipeline parallelism excluded; the change
#: is vllm-project/vllm#27614, merged in the last week of 2025).
VLLM_ASYNC_FROM = (0, 14)


def _release(version: str) -> tuple[int, ...] | None:
    """``0.12.0`` -> (0, 12, 0); None when the column is empty or not numeric."""
    parts = []
    for p in version.split("."):
        m = re.match(r"\d+", p)
        if m is None:
            break
        parts.append(int(m.group()))
        if m.end() < len(p):            # 0rc3: a pre-release of 0
            break
    return tuple(parts) or None


def engine_for(d: Deployment) -> str:
    """The ``--engine`` (:data:`archsim.serve.engine.ENGINES`) a row's backend and release
    ran as: TensorRT-LLM ``trtllm``, SGLang ``sglang``, vLLM ``vllm`` from
    :data:`VLLM_ASYNC_FROM` on (async scheduling; ``vllm-sync`` with pipeline stages, which
    ``engine_host`` resolves) and ``vllm-sync`` before; a row of another :func:`harness`
    as that harness configured it (InferenceMAX's vLLM 0.10.2 with ``async-scheduling:
    true``: ``vllm``). Another vLLM row without a release is taken as synchronous (an
    assumption: docs/serving.md "Engine host time" shows those rows both ways)."""
    h = harness(d)
    if h is not None:
        return h.engine
    if d.backend != "vllm":
        return d.backend
    rel = _release(d.version)
    return "vllm" if rel is not None and rel[:2] >= VLLM_ASYNC_FROM else "vllm-sync"


#: The rows each engine's host time is fitted on: one model (bf16 rows) of one release per
#: engine; the engine's other models and releases are its check rows (docs/serving.md
#: "Engine host time"). vLLM's async engine (``vllm``) reuses the synchronous engine's
#: host time (the same work, hidden): nothing is fitted on its rows.
HOST_FIT_ROWS = {"trtllm": ("meta-llama/Llama-3.1-8B-Instruct", "1.0.0rc3"),
                 "vllm-sync": ("Qwen/Qwen3-32B", "0.12.0"),
                 "sglang": ("Qwen/Qwen3-32B", "0.5.1.post1")}


def host_fit_engine(d: Deployment) -> str | None:
    """The engine whose host time ``d`` is a fit row of (:data:`HOST_FIT_ROWS`), else None
    (a check row)."""
    e = engine_for(d)
    return e if (d.model_path, d.version) == HOST_FIT_ROWS.get(e) and not d.precision else None


def host_residual(d: Deployment, acc: Accelerator | str = "gpu/h100",
                  requests_per_client: int = REQUESTS_PER_CLIENT) -> tuple[int, float]:
    """One point of the host-time fit (:func:`fit_host`): (the requests ``d`` runs at once,
    its measured mean TPOT minus archsim's without host time under CUDA-graph replay, ms)."""
    p = predict(d, acc, requests_per_client=requests_per_client, runtime=GRAPH_RUNTIME,
                engine=None)
    return max(1, d.concurrency - RESERVED_SLOTS[d.backend]), d.tpot_ms - p.tpot_ms


def fit_host(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """The host time ``a + b x n`` (ms) that fits ``(n, residual ms)`` points with the least
    absolute deviation, ``a, b >= 0`` (a host cannot give time back): the residual is a
    row's measured mean TPOT minus its prediction without host time, ``n`` the requests it
    runs at once. Grid of 0.01 ms in ``a`` and 0.001 ms in ``b``, the resolution the fit
    rows resolve (their TPOTs are given to 0.01 ms)."""
    n = np.array([p[0] for p in points], dtype=float)
    r = np.array([p[1] for p in points], dtype=float)
    a = np.arange(0, 1001) * 0.01                         # 0 ... 10 ms
    best = (np.inf, 0.0, 0.0)
    for b in np.arange(0, 201) * 0.001:                   # 0 ... 0.2 ms per sequence
        dev = np.abs(r[None, :] - a[:, None] - b * n[None, :]).sum(axis=1)
        i = int(dev.argmin())
        if dev[i] < best[0] - 1e-12:
            best = (float(dev[i]), float(a[i]), float(b))
    return round(best[1], 2), round(best[2], 3)


def engine_design(acc: Accelerator | str, runtime: str) -> Accelerator:
    """``acc`` with every GPU unit under ``runtime`` (``units[i].runtime``, as ``archsim serve
    --runtime`` sets it: ``cuda_graph`` for a serving engine's CUDA-graph replay, kernels
    back to back); ``acc`` itself when its units already run it (or have no runtime)."""
    return with_runtime(acc if isinstance(acc, Accelerator) else load(acc), runtime)


@dataclass(frozen=True)
class Deployment:
    """One measured row (the columns used; lengths in tokens, times in ms). Disaggregated
    rows: ``prefill`` and ``decode`` = (workers, tp, pp, batch size) of each pool (the
    ``prefill_*`` / ``decode_*`` columns; zeros on aggregated rows). ``version``: the
    ``backend_version`` column (empty on some rows)."""

    backend: str
    model_path: str
    precision: str
    mode: str
    isl: int
    osl: int
    concurrency: int
    tp: int
    pp: int
    attention_dp: int
    moe_ep: int
    ttft_ms: float
    tpot_ms: float
    line: int
    prefill: tuple[int, int, int, int] = (0, 0, 0, 0)
    decode: tuple[int, int, int, int] = (0, 0, 0, 0)
    moe_tp: int = 0
    version: str = ""

    @property
    def model(self) -> str:
        """The model's short name (``Llama-3.1-8B-Instruct``)."""
        return self.model_path.split("/")[-1]


@dataclass(frozen=True)
class Prediction:
    """archsim's closed-loop run of one deployment: mean TTFT and TPOT (ms)."""

    deployment: Deployment
    ttft_ms: float
    tpot_ms: float

    @property
    def ttft_error(self) -> float:
        """(predicted - measured) / measured."""
        return self.ttft_ms / self.deployment.ttft_ms - 1

    @property
    def tpot_error(self) -> float:
        """(predicted - measured) / measured."""
        return self.tpot_ms / self.deployment.tpot_ms - 1


def deployments_path() -> Path:
    """``shared/reference/serving_h100/deployments.csv``."""
    return reference_dir() / "serving_h100" / "deployments.csv"


#: a disaggregated row's pool columns, in :attr:`Deployment.prefill` order
_POOL = ("num_workers", "tp_size", "pp_size", "batch_size")


def _int(v: str) -> int:
    return int(v) if v.strip() else 0


def load_deployments(path: str | Path | None = None) -> list[Deployment]:
    """Every row of the measured H100 deployments (line numbers 2, 3, ... of the file)."""
    p = Path(path) if path is not None else deployments_path()
    out: list[Deployment] = []
    with open(p, encoding="utf-8", newline="") as f:
        for line, r in enumerate(csv.DictReader(f), start=2):
            out.append(Deployment(
                r["backend"], r["model_path"], r["precision"], r["mode"], _int(r["isl"]),
                _int(r["osl"]), _int(r["concurrency"]), _int(r["tp_size"]),
                _int(r["pp_size"]), _int(r["attention_dp_size"]), _int(r["moe_ep_size"]),
                float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"]), line,
                tuple(_int(r[f"prefill_{k}"]) for k in _POOL),     # type: ignore[arg-type]
                tuple(_int(r[f"decode_{k}"]) for k in _POOL),      # type: ignore[arg-type]
                _int(r["moe_tp_size"]), r.get("backend_version", "").strip()))
    return out


def checkpoint_precision(model: str) -> str:
    """The ``precision`` column's name for the formats a model is released in: ``fp8``
    (fp8 weights, e.g. DeepSeek-V3, Qwen3-235B-A22B-FP8), ``fp4`` (MXFP4 experts: gpt-oss),
    ``""`` (16-bit)."""
    s = model_shape(model)
    if s.expert_w_format == "mxfp4":
        return "fp4"
    return "fp8" if s.w_format.startswith("fp8") else ""


def unsupported(d: Deployment) -> str | None:
    """Why archsim cannot run ``d`` as measured today, or None when it can."""
    if d.mode != "agg":
        # the pools, their plans and the KV link are expressible (disaggregated_setup), the
        # load is not: the decode slots (batch size x workers) as clients contradict the
        # measured TTFTs (docs/serving.md, "Disaggregated rows")
        return ("disaggregated: the row gives no client count (concurrency empty), so its "
                "closed-loop load is unknown; predict(d, concurrency=N) runs it for a given N")
    if d.model_path not in ZOO:
        return "model neither in the zoo nor a shipped config"
    own = checkpoint_precision(ZOO[d.model_path])
    if d.precision != own and not (own == "" and d.precision in FORMATS):
        return (f"{d.precision} of a {own or 'bf16'} checkpoint: which tensors the engine "
                "runs in which format is not given")
    if d.attention_dp > 1:
        return "attention data parallelism (DP attention with EP MoE) inside a replica"
    if d.moe_ep > 1 and d.tp % d.moe_ep:
        return "expert-parallel degree not dividing the tensor-parallel degree"
    if d.moe_ep > 1 and d.moe_tp > 1:
        # --ep E inside --tp T keeps whole experts, E-way (T/E replicas of each): with every
        # expert resident that does not fit where the engine splits each expert moe_tp-way
        return (f"experts split over moe_tp {d.moe_tp} x moe_ep {d.moe_ep}: --ep keeps whole "
                "experts (each on tp / ep devices)")
    if d.concurrency < 1 or d.tp < 1:
        return "no closed-loop concurrency or TP degree"
    return None


#: The precisions of the measured rows of 16-bit checkpoints as archsim formats: fp8 runs
#: W8A8 GEMMs (fp8_e4m3 weights, dynamic per-token fp8_e4m3 activation scales: vLLM's,
#: TensorRT-LLM's and SGLang's fp8 linear layers) with the KV cache in the model's 16-bit
#: dtype (the engines' default ``kv_cache_dtype auto``; the rows give no KV format). fp8
#: checkpoints (Qwen3-235B-A22B-FP8, DeepSeek, MiniMax) already carry these formats.
FORMATS: dict[str, dict[str, Any]] = {
    "": {}, "fp8": {"a_format": "fp8_e4m3", "w_format": "fp8_e4m3", "kv_format": "bf16"}}

#: vLLM runs a MoE block's routed experts as its fused MoE layer (``FusedMoE``), with the
#: kernel for the experts' format. Where that kernel is known — 4-bit experts: OpenAI's
#: MXFP4 Triton kernel for gpt-oss on Hopper (vLLM's one MXFP4 path there), Marlin for int4
#: — vLLM rows price each block's experts as that fused call (``arch/gpu/moe.py``, fitted on
#: ``kernels_h100/moe.csv.gz``) with this routing. fp8 experts (MiniMax-M2.5) keep the
#: separate expert GEMMs: vLLM 0.24 picks among several fp8 MoE kernels (Triton, FlashInfer
#: CUTLASS, DeepGEMM) by model and setting, and the rows do not say which (run as Triton
#: block fp8 they move from TTFT 14 % / TPOT 13 % to 41 % / 21 %: docs/serving.md). TensorRT-
#: LLM and SGLang rows keep the separate GEMMs (their own MoE kernels, not in the tables).
VLLM_MOE_ROUTING = "balanced"


def moe_routing(d: Deployment, fused_moe: bool = True) -> str | None:
    """The ``moe_routing`` a row is served with: :data:`VLLM_MOE_ROUTING` for a vLLM row of a
    MoE model with 4-bit experts (``fused_moe``), else None (separate expert GEMMs)."""
    if not fused_moe or d.backend != "vllm" or d.model_path not in ZOO:
        return None
    s = model_shape(ZOO[d.model_path])
    four_bit = bool(s.expert_w_format) and get_format(s.expert_w_format).bytes_per_element < 1
    return VLLM_MOE_ROUTING if s.is_moe and four_bit else None


#: The link disaggregated engines move KV over: their transfer engines (NIXL, Mooncake) use
#: the GPUs' RDMA NICs, InfiniBand NDR 400 Gb/s per GPU on an H100 SXM node.
DISAGG_LINK = "ib-ndr"


def disaggregated_setup(d: Deployment, acc: Accelerator) -> ServeSetup:
    """The deployment of a disaggregated row: ``prefill`` workers of TP x PP with at most
    ``batch`` prompts per iteration, ``decode`` workers of TP x PP holding at most ``batch``
    running requests each, the backend's batching, the row's precision
    (:data:`FORMATS`; others raise), KV over :data:`DISAGG_LINK`.

    Raises:
        WorkloadError: not a disaggregated row of a model archsim serves (:data:`ZOO`), or
            a precision without formats.
    """
    if d.mode != "disagg" or d.model_path not in ZOO or d.precision not in FORMATS:
        raise WorkloadError(Problem(f"line {d.line}: not a disaggregated row of a served "
                                    "model and precision", "deployment"))
    (pw, ptp, ppp, pbs), (dw, dtp, dpp, dbs) = d.prefill, d.decode
    base = SchedulerSpec(BACKEND_POLICY[d.backend], chunk=ENGINE_TOKENS,
                         max_batched_tokens=ENGINE_TOKENS)
    return ServeSetup(ZOO[d.model_path],
                      PoolSpec(pw, ptp, replace(base, max_num_seqs=max(1, pbs)), max(1, ppp)),
                      PoolSpec(dw, dtp, replace(base, max_num_seqs=max(1, dbs)), max(1, dpp)),
                      "least-outstanding", parse_link(DISAGG_LINK),
                      build=device_build(acc, **FORMATS[d.precision]))


def predict(d: Deployment, acc: Accelerator | str = "gpu/h100", requests_per_client: int = REQUESTS_PER_CLIENT,
            iteration_overhead_ms: float = 0.0, scheduler: str | None = None,
            concurrency: int | None = None, fused_moe: bool = True,
            runtime: str | None = None, engine: str | None = "auto") -> Prediction:
    """Run ``d`` as its benchmark ran (``concurrency`` clients, ``requests_per_client`` x
    ``concurrency`` requests of ``isl``/``osl`` tokens, TP ``tp``, the engine as deployed:
    :func:`engine_settings`, or the policy ``scheduler`` with the same budget), its pipeline
    and expert-parallel degrees and, for fp8 rows of a 16-bit checkpoint, the formats of
    :data:`FORMATS`, and return the mean TTFT and TPOT. The first requests of a closed loop
    all arrive at once, so the means depend on the count: 10 per client (``archsim serve``'s
    default, and the ``--request-count`` of aiconfigurator's genai-perf runner; its
    ``--warmup-request-count`` of 2 per client is drained before the measured requests
    start, so the measured phase opens with the same burst) is used throughout. Rows of
    another :func:`harness` run as it ran them: its token budget, KV format, engine and
    request lengths (:func:`request_lengths`; InferenceMAX: 10 requests per client too, no
    warm-up).

    ``runtime`` (None: the design's own) runs the design's GPUs under that launch protocol
    (:func:`engine_design`). With an ``engine`` (below) a GPU under ``ideal`` (each kernel
    launched alone) runs ``cuda_graph`` instead (kernels back to back, each paying
    ``launch_b2b_us``: how the engines replay a decode step and how the kernel tables were
    timed), and the engine's host time per iteration is added to (or, for vLLM's async
    scheduling, overlapped with) every iteration: docs/serving.md, "Engine host time".

    A vLLM row of a MoE model with 4-bit experts (gpt-oss) prices each block's routed experts
    as vLLM's fused MoE call (:func:`moe_routing`; ``fused_moe=False``: as separate expert
    GEMMs, the model before).
    A disaggregated row (:func:`disaggregated_setup`) runs with ``concurrency`` clients,
    which the row does not give.

    ``engine``: the serving engine's host time per iteration (``archsim serve --engine``):
    ``auto`` (default) the row's backend and release (:func:`engine_for`), a name of
    :data:`archsim.serve.engine.ENGINES`, or None (no host time, the design's runtime:
    the model before the engines' host time came in).

    Raises:
        WorkloadError: ``d`` is not expressible (:func:`unsupported`).
    """
    if d.mode == "disagg":
        if concurrency is None:
            raise WorkloadError(Problem(f"line {d.line}: a disaggregated row needs the "
                                        "client count (concurrency=N)", "concurrency"))
        h100 = acc if isinstance(acc, Accelerator) else load(acc)
        setup = disaggregated_setup(d, h100)
        name = engine_for(d) if engine == "auto" else engine
        if name is not None:
            h100 = graph_runtime(h100)
            pools = [replace(p, scheduler=with_engine(p.scheduler, name, p.pp))
                     for p in (setup.pool, setup.decode) if p is not None]
            setup = replace(setup, pool=pools[0], decode=pools[1])
        raw: dict = {}
        reqs = closed_loop_requests(concurrency, str(d.isl), str(d.osl),
                                    requests_per_client * concurrency, 0)
        serve(h100, setup, reqs, raw_out=raw, concurrency=concurrency)
        rep = benchmark_report(raw, concurrency)
        return Prediction(d, rep.ttft_ms["mean"], rep.tpot_ms["mean"])
    eng = engine_settings(d)
    policy = scheduler or eng.policy
    # the engine's per-iteration token budget, in the setting the policy reads
    budget = {"chunk": eng.token_budget} if policy == "sarathi" else {
        "max_batched_tokens": eng.token_budget}
    # a 16-bit checkpoint run in fp8 (FORMATS); a checkpoint's own precision: its formats
    fmts = FORMATS[d.precision] if checkpoint_precision(ZOO[d.model_path]) == "" else {}
    h = harness(d)
    if h is not None:
        fmts = {**fmts, "kv_format": h.kv_format}
    isl, osl = request_lengths(d)
    run = run_serving(engine_design(acc, runtime) if runtime else acc, ZOO[d.model_path], tp=d.tp,
                      concurrency=d.concurrency, isl=isl, osl=osl,
                      requests=requests_per_client * d.concurrency,
                      iteration_overhead_ms=iteration_overhead_ms, scheduler=policy,
                      max_num_seqs=eng.max_num_seqs,
                      pp=max(1, d.pp), ep=max(1, d.moe_ep), a_format=fmts.get("a_format"),
                      w_format=fmts.get("w_format"), kv_format=fmts.get("kv_format"),
                      moe_routing=moe_routing(d, fused_moe),
                      engine=engine_for(d) if engine == "auto" else engine,
                      **budget)  # type: ignore[arg-type]
    b = run.benchmark
    assert b is not None            # closed-loop runs always carry the report
    return Prediction(d, b.ttft_ms["mean"], b.tpot_ms["mean"])


def median_errors(preds: Iterable[Prediction],
                  key: Callable[[Deployment], str] = lambda d: f"{d.model} / {d.backend}"
                  ) -> dict[str, tuple[int, float, float, float, float]]:
    """Per group (``key``): (rows, median |TTFT error|, median |TPOT error|, median signed
    TTFT error, median signed TPOT error), errors as fractions."""
    groups: dict[str, list[Prediction]] = {}
    for p in preds:
        groups.setdefault(key(p.deployment), []).append(p)
    out = {}
    for k, ps in sorted(groups.items()):
        out[k] = (len(ps), statistics.median(abs(p.ttft_error) for p in ps),
                  statistics.median(abs(p.tpot_error) for p in ps),
                  statistics.median(p.ttft_error for p in ps),
                  statistics.median(p.tpot_error for p in ps))
    return out


def render_markdown(halves: Sequence[tuple[str, Sequence[Prediction]]]) -> str:
    """A table per half: group, rows, median |error| (and signed median) of TTFT and TPOT."""
    lines = ["| half | model / backend | rows | TTFT median \\|err\\| (signed) | "
             "TPOT median \\|err\\| (signed) |", "|---|---|---:|---:|---:|"]
    for name, preds in halves:
        for k, (n, at, ap, st, sp) in median_errors(preds).items():
            lines.append(f"| {name} | {k} | {n} | {at:.0%} ({st:+.0%}) | {ap:.0%} ({sp:+.0%}) |")
    return "\n".join(lines)
