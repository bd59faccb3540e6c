"""The public API: load a design, build a workload, evaluate it.

    from archsim import load, workload, evaluate
    acc = load("configs/spatial/tpu_like.yaml")
    res = evaluate(acc, workload("gpt2-small", phase="prefill", seq=128))
    print(res.table())
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from archsim import energy
from archsim.arch.accelerator import Accelerator
from archsim.arch.accelerator import load as _load_file
from archsim.arch.base import Estimate, Unit
from archsim.arch.shipped import configs_dir
from archsim.device_overlap import (
    check_device_overlap,
    overlap_of,
    overlapped_latency,
    with_overlap,
)
from archsim.mapper import map_workload
from archsim.mapper.constraints import load_constraints
from archsim.mapper.hetero import retime
from archsim.mapper.overlap import Overlap
from archsim.mapper.schedule import link_of, op_signature
from archsim.result import OpResult, Result
from archsim.workloads.errors import ConfigError, MappingError, Problem, WorkloadError
from archsim.workloads.formats import NumberFormat, get_format
from archsim.workloads.graph import Workload
from archsim.workloads.hf import config_path, from_hf_config, shape_from_hf_config
from archsim.workloads.kvtech import (
    KVTechniques,
    check_phase,
    kv_decode_graph,
    prefix_hit_tokens,
    with_cached_prefix,
)
from archsim.workloads.onnx_import import from_onnx
from archsim.workloads.ops import Attention, Gemm, Op
from archsim.workloads.parallel import DeviceBuild
from archsim.workloads.routing import parse_routing
from archsim.workloads.zoo import build, transformer_shape

__all__ = ["load", "workload", "gemm_workload", "workload_from_dict", "evaluate", "find_config",
           "config_dir", "list_configs", "memory_check", "native_format", "with_native_formats",
           "device_build", "paged_attention_available", "check_weight_sparsity",
           "with_format_hint", "VERSION",
           "FIDELITIES"]

VERSION = "0.1.0"
FIDELITIES = ("analytical", "cycle")
MAPPINGS = ("default", "search")


def config_dir() -> Path:
    """The ``configs/`` folder shipped with archsim (``archsim.arch.shipped``)."""
    return configs_dir()


def list_configs() -> list[Path]:
    """All reference designs, sorted (cluster descriptions in configs/cluster are not designs:
    ``arch.cluster.list_clusters``)."""
    return sorted(p for p in config_dir().rglob("*.yaml")
                  if p.relative_to(config_dir()).parts[0] != "cluster")


def find_config(name: str | Path) -> Path:
    """A config path, or a bare design name (``tpu_like``, ``gpu/a100``) looked up in configs/."""
    if not str(name).strip():
        known = ", ".join(c.stem for c in list_configs())
        raise ConfigError(Problem(f"empty design name; expected a config file or one of the "
                                  f"reference designs: {known}", "config"))
    p = Path(name)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    for cand in list_configs():
        rel = cand.relative_to(config_dir()).with_suffix("").as_posix()
        if str(name) in (cand.stem, rel):
            return cand
    known = ", ".join(c.stem for c in list_configs())
    raise ConfigError(Problem(f"no config file or reference design called {str(name)!r}; "
                              f"reference designs: {known}", "", str(name)))


def load(config: str | Path | Accelerator, overrides: Iterable[str] = ()) -> Accelerator:
    """Load a design from a YAML path or a reference-design name, with ``--set`` overrides."""
    if isinstance(config, Accelerator):
        return config
    return _load_file(find_config(config), overrides)


def workload(model: str, phase: str | None = None, batch: int = 1, seq: int | None = None,
             context: int | None = None, a_format: str | NumberFormat | None = None,
             w_format: str | NumberFormat | None = None, tp: int = 1, ep: int = 1,
             attention: str = "unfused", kernels: str = "fused",
             moe_routing: str | None = None, kv: KVTechniques | None = None,
             kv_block_size: int = 16) -> Workload:
    """Build a zoo model (or a Hugging Face ``config.json`` path) for one phase.

    ``kv`` (transformers; :mod:`workloads.kvtech`, the mechanism objects serving, ``archsim
    run`` and plans use): a prefill with a prefix hit rate is the prompt's ``P - hit``
    uncached tokens after ``hit = prefix_hit_tokens(P, H)`` cached ones
    (:func:`workloads.kvtech.with_cached_prefix`); a decode step with K/V remat or top-k
    blocks of ``kv_block_size`` tokens is :func:`workloads.kvtech.kv_decode_graph` of this
    graph. So ``evaluate(acc, workload(..., kv=...))`` is what ``archsim run --prefix-hit-rate
    / --kv-remat / --topk-blocks`` evaluates. The KV offload needs a host link (a cluster's
    ``host:`` section): a plan, not one device's graph.

    ``moe_routing`` (zoo mixture-of-experts transformers): each MoE block's routed experts as
    one ``FusedMoE`` op with this routing (``balanced`` or ``power_law:ALPHA``), as vLLM's
    fused MoE layer runs them; None = separate expert ops.

    ``kernels="eager_amp"`` (transformers) builds the kernels PyTorch eager runs for the
    Hugging Face module code under ``torch.autocast(a_format)`` with fp32 parameters (casts,
    fp32 norms and residual stream, dropout, the activation's expression op by op, the loss:
    ``workloads.models.transformer``); ``a_format`` is then the autocast format (default
    bf16) and ``w_format`` must be unset or the same.

    ``attention="fused"`` builds zoo transformers with one ``Attention`` op per layer
    (FlashAttention) instead of QK / softmax / AV ops; :func:`preferred_attention` says what
    a design runs.

    ``tp`` > 1: Megatron-style tensor parallelism over ``tp`` devices of the design; the
    workload is one device's shard with its all-reduces, and ``evaluate`` reports the step
    latency with the energy and area of all ``tp`` devices. ``ep`` > 1 (mixture-of-experts
    models): ``experts / ep`` whole experts on the device. Pipeline, data and context
    parallelism are plans over many graphs: ``archsim.parallel.evaluate_plan``
    (docs/cluster.md).
    """
    if kv is not None and kv.any:
        return _with_kv(model, kv, kv_block_size, dict(
            phase=phase, batch=batch, seq=seq, context=context, a_format=a_format,
            w_format=w_format, tp=tp, ep=ep, attention=attention, kernels=kernels,
            moe_routing=moe_routing))
    amp: str | None = None
    if kernels == "eager_amp":
        amp = get_format(a_format or "bf16", "--a-format").name
        if w_format is not None and get_format(w_format, "--w-format").name != amp:
            raise WorkloadError(Problem(f"autocast runs the weights in the activation format "
                                        f"({amp}); expected no --w-format or {amp}",
                                        "--w-format"))
    cfg = config_path(model)
    if moe_routing is not None and (cfg is not None or model.endswith(".onnx")):
        raise WorkloadError(Problem("a fused MoE layer is built for zoo models only",
                                    "--moe-routing"))
    if cfg is not None:
        w = from_hf_config(cfg, phase=phase, batch=batch, seq=seq, context=context, tp=tp,
                           ep=ep, attention=attention, kernels=kernels, amp=amp)
        if amp is not None:
            return w
    elif model.endswith(".onnx"):
        if phase not in (None, "inference") or seq or context or tp != 1 or amp:
            raise WorkloadError(Problem("an ONNX model is evaluated as exported (inference); "
                                        "expected no --phase/--seq/--context/--tp/--kernels",
                                        "--model"))

        w = from_onnx(model, batch=batch)
    elif Path(model).is_file() or "/" in model or model.endswith((".yaml", ".yml", ".pt")):
        raise WorkloadError(Problem(f"{model!r} is a file name, but archsim reads models only "
                                    f"from a zoo name ('archsim list models'), a Hugging Face "
                                    f"config.json or an .onnx file", "--model"))
    else:

        w = build(model, phase=phase, batch=batch, seq=seq, context=context, tp=tp, ep=ep,
                  attention=attention, kernels=kernels, amp=amp, moe_routing=moe_routing)
        if amp is not None:     # the builder set every op's format (autocast's policy)
            return w
    if a_format is not None or w_format is not None:
        w = w.with_formats(get_format(a_format, "--a-format") if a_format else None,
                           get_format(w_format, "--w-format") if w_format else None)
    return w


def _with_kv(model: str, kv: KVTechniques, block_size: int, args: dict[str, Any]) -> Workload:
    """:func:`workload` with the KV-cache techniques ``kv`` (its docstring).

    Raises:
        WorkloadError: not a transformer, a technique the model or the phase cannot use, or
            the KV offload (one device's graph has no host link), each naming its flag.
    """
    cfg = config_path(model)
    s = shape_from_hf_config(cfg) if cfg is not None else transformer_shape(model)
    phase = args["phase"] or "prefill"
    kv.check(s, args["tp"], block_size)
    check_phase(kv, phase)
    if kv.offload_gb:
        raise WorkloadError(Problem("one device's graph has no host link to keep KV blocks "
                                    "behind; evaluate a plan on a cluster with a host: "
                                    "section (dgx1, dgx2, frontier)", "--kv-offload-gb"))
    if phase == "prefill":
        p = args["seq"] or s.default_seq
        hit = prefix_hit_tokens(p, kv.prefix_hit_rate)
        w = workload(model, **{**args, "seq": p - hit})
        return with_cached_prefix(w, hit) if hit else w
    return kv_decode_graph(workload(model, **args), s, kv, block_size, args["tp"],
                           lambda c: workload(model, **{**args, "context": c}))


def preferred_attention(acc: Accelerator) -> str:
    """``fused`` when a unit of ``acc`` runs attention as one fused kernel by default
    (``Unit.fused_attention()``: GPUs configured ``attention: fused``), else ``unfused``."""
    return "fused" if any(u.fused_attention() for u in acc.units) else "unfused"


def gemm_workload(m: int, n: int, k: int, batch: int = 1, a_format: str = "fp16",
                  w_format: str | None = None, acc_format: str | None = None) -> Workload:
    """A one-op workload: ``C[m,n] = A[m,k] @ W[k,n]`` (``archsim gemm``)."""
    for name, v in (("m", m), ("n", n), ("k", k), ("batch", batch)):
        if not isinstance(v, int) or v < 1:
            raise WorkloadError(Problem(f"expected an int >= 1, got {v!r}", f"--{name}"))
    af = get_format(a_format, "--a-format")
    wf = get_format(w_format, "--w-format") if w_format else af
    accf = get_format(acc_format) if acc_format else (
        get_format("int32") if (af.is_integer and wf.is_integer) else get_format("fp32"))
    op = Gemm(name="gemm", m=m, n=n, k=k, batch=batch, a_format=af, w_format=wf, acc_format=accf)
    return Workload.single(op)


#: Keys a workload dict may carry (:func:`workload_from_dict`), by kind (its first key).
WORKLOAD_DICT_KEYS: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm", "batch", "a_format", "w_format", "acc_format", "sparsity"),
    "model": ("model", "phase", "batch", "seq", "context", "a_format", "w_format", "tp",
              "sparsity"),
}


def workload_from_dict(spec: Mapping[str, Any]) -> Workload:
    """The workload a plain dict describes (golden references, sweep tasks, JSON/YAML).

    Exactly one of two kinds, named by its key:

    * ``gemm: [m, n, k]`` -> :func:`gemm_workload` (``m, n, k``) with the optional keys
      ``batch``, ``a_format``, ``w_format``, ``acc_format``;
    * ``model: <zoo name or HF config.json path>`` -> :func:`workload` with the optional keys
      ``phase``, ``batch``, ``seq``, ``context``, ``a_format``, ``w_format``, ``tp``.

    Either kind may carry ``sparsity: [n, m]``: N:M structured sparsity on the weights of
    every prunable layer (:meth:`workloads.graph.Workload.with_sparsity`). A key whose value
    is None takes the function's default (dense for ``sparsity``).

    Example: ``workload_from_dict({"model": "resnet18", "phase": "train", "batch": 8,
    "sparsity": (2, 8)})``.

    Raises:
        WorkloadError: neither or both of ``gemm`` and ``model``; a key its kind does not
            take (the message names it and lists the allowed keys); ``gemm`` not three
            values; ``sparsity`` not two ints with 1 <= n <= m; anything the underlying
            builder rejects.
    """
    kinds = [k for k in WORKLOAD_DICT_KEYS if k in spec]
    if len(kinds) != 1:
        raise WorkloadError(Problem(
            f"expected exactly one of {' or '.join(WORKLOAD_DICT_KEYS)}, got keys "
            f"{sorted(map(str, spec)) or 'none'}"))
    kind = kinds[0]
    allowed = WORKLOAD_DICT_KEYS[kind]
    problems = [Problem(f"unknown key for a {kind} workload; allowed: {', '.join(allowed)}",
                        str(key)) for key in spec if key not in allowed]
    if problems:
        raise WorkloadError(problems)
    kw = {k: v for k, v in spec.items() if v is not None and k not in (kind, "sparsity")}
    if kind == "gemm":
        shape = spec["gemm"]
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__") or len(shape) != 3:
            raise WorkloadError(Problem(f"expected [m, n, k], got {shape!r}", "gemm"))
        m, n, k = shape
        wl = gemm_workload(m, n, k, **kw)
    else:
        wl = workload(spec["model"], **kw)
    sparsity = spec.get("sparsity")
    if sparsity is not None:
        ok = (not isinstance(sparsity, (str, bytes)) and hasattr(sparsity, "__len__")
              and len(sparsity) == 2
              and all(isinstance(x, int) and not isinstance(x, bool) for x in sparsity)
              and 1 <= sparsity[0] <= sparsity[1])
        if not ok:
            raise WorkloadError(Problem(f"expected [n, m] with ints 1 <= n <= m, got "
                                        f"{sparsity!r}", "sparsity"))
        wl = wl.with_sparsity(sparsity[0], sparsity[1])
    return wl


def native_format(acc: Accelerator) -> str | None:
    """The number format a design computes in by default: among its units'
    ``native_formats()``, the one the most units can run a GEMM in (ties: the first
    listed), e.g. ``int16`` for eyeriss_like, ``int8`` for an int8 + int16 heterogeneous
    design. None when no unit states a preference."""
    cands = list(dict.fromkeys(f for u in acc.units for f in u.native_formats()))
    if not cands:
        return None

    def runs_on(name: str) -> int:
        op = gemm_workload(1, 1, 1, a_format=name).ops()[0]
        return sum(u.supports(op) is None for u in acc.units)

    return max(cands, key=runs_on)


def with_native_formats(acc: Accelerator, wl: Workload) -> tuple[Workload, str | None]:
    """``wl`` in the design's :func:`native_format` (activations; weights too unless the
    model has its own weight format, e.g. BitNet's ternary weights). Returns the workload
    and the format applied (None: nothing changed)."""
    nat = native_format(acc)
    if nat is None:
        return wl, None
    return wl.in_format(get_format(nat)), nat


def paged_attention_available(acc: Accelerator) -> bool:
    """Does a unit of ``acc`` model a serving framework's paged-KV attention call
    (``Unit.attention_kernels``)? (``serve``'s default attention kernel then.)"""
    return any("paged" in u.attention_kernels() for u in acc.units)


def _paged_kv_refusal(acc: Accelerator, kv: NumberFormat) -> str | None:
    """Why no unit of ``acc`` that models the paged-KV call runs it with a ``kv`` cache (the
    units' ``supports`` of a probe call; None: one does)."""
    probe = Attention(name="probe", batch=1, heads=8, kv_heads=8, q_len=16, kv_len=16,
                      head_dim=128, causal=True, kv_format=kv, kernel="paged",
                      a_format=get_format("bf16"), w_format=get_format("bf16"))
    reasons = [u.supports(probe) for u in acc.units if "paged" in u.attention_kernels()]
    return None if not reasons or None in reasons else str(reasons[0])


def device_build(acc: Accelerator, a_format: str | None = None, w_format: str | None = None,
                 kernels: str = "fused", kv_format: str | None = None,
                 attention_kernel: str = "sdpa", tp_allreduce: str = "nccl",
                 weight_sparsity: float = 0.0, w_group_size: int = 0,
                 act_order: bool = False, kv: KVTechniques | None = None,
                 kv_block_size: int = 16, moe_routing: str | None = None) -> DeviceBuild:
    """The choices a model's graph is built with on ``acc``, wherever it runs (one device,
    each device of a plan, a serving replica): the design's attention
    (:func:`preferred_attention`), the given formats, else the design's
    :func:`native_format` (kernels ``fused`` only: autocast sets its own formats), the
    attention call (``sdpa``, or ``paged``: a serving framework's paged-KV backend, which
    needs a unit that models it and fused attention), the tensor-parallel all-reduce's
    implementation (``nccl``, ``custom-graph``, ``custom-eager``), the fraction of zero
    weights run as sparse loads + dense MMA (:func:`check_weight_sparsity`), group-wise
    weight scales and act-order (``Workload.with_weight_groups``), the KV-cache techniques
    of its decode graphs (``kv``, blocks of ``kv_block_size`` tokens: ``DeviceBuild.kv``), and
    ``moe_routing`` (MoE blocks as one fused-MoE call with that routing: ``DeviceBuild
    .moe_routing``).

    Raises:
        WorkloadError: an unknown format or attention kernel, naming its flag; ``paged`` on
            a design without a paged-KV attention model; a bad sparsity fraction.
        MappingError: an activation format a unit has no datapath for
            (``Unit.lacks_compute_format``: bf16 on a V100, fp8 on an A100), naming the
            formats it can run; weight sparsity on a design that cannot run it.
    """
    for flag, name in (("--a-format", a_format), ("--w-format", w_format),
                       ("--kv-format", kv_format)):
        if name is not None:
            get_format(name, flag)
    if moe_routing is not None:
        parse_routing(moe_routing, "--moe-routing")
    attention = preferred_attention(acc)
    if attention_kernel == "paged":
        if not paged_attention_available(acc):
            raise WorkloadError(Problem(
                f"{acc.name} has no paged-KV attention model (a GPU unit's paged_attention "
                f"constants); expected --attention-kernel sdpa", "--attention-kernel"))
        # the backend's call is one fused FlashAttention kernel, whatever the design's
        # default for other calls (gpu/a100: attention unfused; vLLM runs FA2 there)
        attention = "fused"
        if kv_format is not None:
            why = _paged_kv_refusal(acc, get_format(kv_format))
            if why:
                raise WorkloadError(Problem(f"{acc.name}: {why}; expected a 16-bit "
                                            "--kv-format or --attention-kernel sdpa",
                                            "--kv-format"))
    if a_format is not None:
        for u in acc.units:
            why = u.lacks_compute_format(get_format(a_format))
            if why:
                raise MappingError(Problem(f"{a_format}: {acc.name}'s {u.name} has {why}",
                                            "--a-format"))
    check_weight_sparsity(acc, weight_sparsity)
    native = native_format(acc) if kernels == "fused" and not a_format and not w_format \
        else None
    return DeviceBuild(attention=attention, kernels=kernels, a_format=a_format,
                       w_format=w_format, kv_format=kv_format, native=native,
                       attention_kernel=attention_kernel, tp_allreduce=tp_allreduce,
                       weight_sparsity=float(weight_sparsity), w_group_size=w_group_size,
                       act_order=act_order, kv=kv or KVTechniques(), kv_block_size=kv_block_size,
                       moe_routing=moe_routing)


def check_weight_sparsity(acc: Accelerator, fraction: float) -> None:
    """Refuse ``--weight-sparsity`` (a fraction of zero weights in [0, 1)) out of range, or
    on a design with a unit that cannot run sparse loads + dense MMA
    (``Unit.sparse_weight_loads``: tensor-core GPUs can).

    Raises:
        WorkloadError: ``fraction`` not in [0, 1).
        MappingError: the first unit that cannot, with its reason.
    """
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) \
            or not 0.0 <= fraction < 1.0:
        raise WorkloadError(Problem(f"expected a fraction of zero weights in [0, 1), got "
                                    f"{fraction!r}", "--weight-sparsity"))
    if not fraction:
        return
    for u in acc.units:
        why = u.sparse_weight_loads()
        if why is not None:
            raise MappingError(Problem(f"{acc.name} cannot run unstructured weight sparsity: "
                                       f"{why}", "--weight-sparsity"))


def with_format_hint(exc: MappingError, acc: Accelerator) -> MappingError:
    """``exc`` with the formats ``acc``'s units compute in natively appended when it refuses
    a format (else ``exc`` itself): a format a design cannot run names the ones it can."""
    nat = [f"{u.name}: {', '.join(u.native_formats())}" for u in acc.units
           if u.native_formats()]
    if not nat or not any("format" in p.message for p in exc.problems):
        return exc
    hint = (f"{acc.name} computes natively in {'; '.join(nat)} (and narrower formats of the "
            f"same kind): pass --a-format/--w-format among these, or neither")
    ps = list(exc.problems)
    if len(ps) == 1:
        p0 = ps[0]
        return MappingError(Problem(f"{p0.message}; {hint}", p0.path, p0.file, p0.line),
                            summary=exc.summary)
    return MappingError([*ps, Problem(hint, "--a-format")], summary=exc.summary)


class _EnergyCache:
    """Energy of one op's estimate, computed once per distinct (unit, cycles, actions):
    networks repeat the same layer shapes many times (ResNet-50: 174 ops, 38 distinct).
    Each unit's components are resolved once (``energy.prices``); an estimate whose action
    table was priced before (identical ops share it) is found by identity first."""

    def __init__(self, comps: dict[str, list[Any]], tech: Any) -> None:
        self.comps = comps
        self.tech = tech
        self.memo: dict[tuple, float] = {}
        self.prices: dict[str, energy.EnergyPrices] = {}
        self.seen: dict[tuple, tuple[float, Any]] = {}   # keeps each action table alive

    def __call__(self, unit: Unit, est: Estimate, cycles: int | None = None) -> float:
        cycles = est.cycles if cycles is None else cycles
        ident = (unit.name, cycles, est.clock_hz, id(est.actions))
        hit = self.seen.get(ident)
        if hit is not None and hit[1] is est.actions:
            return hit[0]
        key = (unit.name, cycles, est.clock_hz, tuple(sorted(est.actions.items())))
        e = self.memo.get(key)
        if e is None:
            e = self.unit_prices(unit.name).evaluate(est.actions, cycles / est.clock_hz).total_j
            self.memo[key] = e
        self.seen[ident] = (e, est.actions)
        return e

    def unit_prices(self, name: str) -> energy.EnergyPrices:
        """The ``energy.prices`` of unit ``name``'s components (resolved on first use)."""
        p = self.prices.get(name)
        if p is None:
            p = self.prices[name] = energy.prices(self.comps[name], self.tech)
        return p


def evaluate(acc: Accelerator, wl: Workload, fidelity: str = "analytical",
             objective: str = "latency", mapping: str = "default",
             constraints: Any = None, refine: int = 0,
             before_simulation: Any = None, progress: Any = None,
             reuse: bool = True, overlap: Overlap | str | None = None) -> Result:
    """Evaluate ``wl`` on ``acc``: latency, energy and area with breakdowns.

    Latency is the makespan of the schedule (``mapper.map_workload``): ops on one unit run
    back to back in topological order (the sum of their latencies); on a design with
    several units, independent ops overlap on different units and cross-unit edges pay
    the design's transfer cost (docs/mapper.md, "Whole-network scheduling").

    Args:
        acc: the design (``load``).
        wl: the workload (``workload`` / ``gemm_workload``).
        fidelity: ``analytical`` (fast estimates) or ``cycle`` (event-driven simulation of
            each op's task graph; families without a lowering refuse). At ``cycle`` the
            schedule keeps its assignment and order and is re-timed with the simulated
            durations.
        objective: what the op -> unit assignment (and the mapping search) minimises.
        mapping: ``default`` (each unit's configured dataflow and tiling rule) or
            ``search`` (the mapper's loop-nest search for matrix ops on spatial arrays).
        refine: with ``mapping="search"``, re-rank each matrix op's ``refine`` best
            loop-nest mappings with the cycle simulator (top-k refinement); 0 = off.
        constraints: mapping constraints (a ``mapper.constraints.Constraints`` or the path
            of a constraints YAML file), or None.
        before_simulation: with ``fidelity="cycle"``, called once after the work-size check
            (:data:`MAX_SIM_CYCLES`) and before the first op is simulated.
        progress: called as ``progress(done, total)`` while the ops are mapped
            (:func:`mapper.map_workload`).
        reuse: price (and at ``cycle`` simulate) each distinct (op signature, unit,
            mapping, constraints) once and reuse it for identical ops: the signature
            (:func:`mapper.schedule.op_signature`) ignores an op's name and its
            ``layer`` / ``block`` tags (the result rows keep them). The result is the same
            bit for bit as with ``reuse=False`` (``tests/foundation/test_reuse.py``).
        overlap: overlap inside one device (``--overlap``: ``none``, ``nanobatch:K``,
            ``tokensplit``, ``fused-ar-norm``, a split ``+fused-ar-norm``, or a
            :class:`mapper.overlap.Overlap`): the transformer blocks of one nano-batch
            (``Workload.split_batch``) scheduled as :mod:`mapper.overlap` schedules them
            (:mod:`archsim.device_overlap`); one-unit designs, prefill and decode. None or
            ``none``: the plain evaluation.

    Raises:
        ConfigError / WorkloadError / MappingError: bad input (never for infeasible-but-valid
            designs, which the unit reports through the mapping error's reasons).
    """
    ov = overlap_of(overlap)
    if ov.active:
        check_device_overlap(acc, wl, ov)
        kw: dict[str, Any] = dict(fidelity=fidelity, objective=objective, mapping=mapping,
                                  constraints=constraints, refine=refine, reuse=reuse)
        whole = evaluate(acc, wl, before_simulation=before_simulation, progress=progress, **kw)
        nano = wl.split_batch(ov.nano_batches)
        piece = evaluate(acc, nano, **kw) if ov.splits else whole
        return with_overlap(whole, overlapped_latency(acc, whole.ops, nano, piece.ops, ov), ov)
    if mapping not in MAPPINGS:
        raise ConfigError(Problem(f"unknown mapping mode {mapping!r}; expected one of "
                                  f"{', '.join(MAPPINGS)}", "--mapping"))
    if fidelity not in FIDELITIES:
        raise ConfigError(Problem(f"unknown fidelity {fidelity!r}; expected one of "
                                  f"{', '.join(FIDELITIES)}", "--fidelity"))
    tech = energy.Technology(node_nm=acc.technology.node_nm)
    comps = {u.name: u.components() for u in acc.units}
    op_energy = _EnergyCache(comps, tech)
    if constraints is not None and not hasattr(constraints, "for_op"):

        constraints = load_constraints(constraints)
    sched = map_workload(acc, wl, objective, op_energy, search=(mapping == "search"),
                         constraints=constraints, refine=refine, progress=progress,
                         reuse_estimates=reuse)
    rows: list[OpResult] = []
    total_actions: dict[tuple[str, str], float] = {}
    ideal_s: dict[str, float] = {}
    used: list[str] = []
    durations: list[float] = []
    macs = flops = 0
    dram = 0.0
    if fidelity == "cycle":
        _check_sim_size(sched.assignments)
        if before_simulation is not None:   # e.g. the CLI's "compiling kernels" note
            before_simulation()
    simulated: dict[tuple[Any, ...], int] = {}
    # the per-op numbers that depend on the op alone, once per workload (the schedule's
    # assignments follow ``wl.ops()``)
    facts = wl.derived("api.op_facts", lambda: tuple(
        (op.macs(), op.flops(), op.describe(), op.is_matrix,
         op.effective_macs() if op.is_matrix else 0.0) for op in wl.ops()))
    for a, (op_macs, op_flops, shape, is_matrix, eff_macs) in zip(sched.assignments, facts,
                                                                  strict=True):
        est = a.estimate
        cycles = est.cycles
        if fidelity == "cycle":
            cycles = _simulate(a.unit, a.op, a.mapping, simulated if reuse else None)
        lat = cycles / est.clock_hz
        durations.append(lat)
        e_op = op_energy(a.unit, est, cycles)
        for key, v in est.actions.items():
            total_actions[key] = total_actions.get(key, 0.0) + v
        if a.unit.name not in used:
            used.append(a.unit.name)
        op = a.op
        if is_matrix:
            ideal_s[a.unit.name] = ideal_s.get(a.unit.name, 0.0) + eff_macs / (
                a.unit.peak_macs_per_cycle(op) * a.unit.clock_hz)
        macs += op_macs
        flops += op_flops
        dram += est.dram_bytes
        rows.append(OpResult(op.name, op.kind, a.unit.name, est.dataflow, shape, cycles,
                             lat, e_op, (est.utilization * est.cycles / cycles) if cycles else 0.0,
                             est.bound, op_macs, est.dram_bytes, est.mapping,
                             {k: float(est.details[k]) for k in REPORTED_DETAILS
                              if k in est.details}, layer=op.layer, pass_=op.pass_,
                             block=op.block, role=op.role))
    latency, transfers = _makespan(acc, sched, durations, fidelity)
    moved = _transfer_actions(acc, comps, sched, transfers, total_actions)
    dram += moved
    all_comps = [c for u in acc.units for c in comps[u.name]]
    # Leakage runs for the whole latency on every unit (idle units leak too). One unit: its
    # components are the design's, already resolved for the per-op energies.
    prices = (op_energy.unit_prices(acc.units[0].name) if len(acc.units) == 1
              else energy.prices(all_comps, tech))
    erep = prices.evaluate(total_actions, latency)
    arep = energy.area(all_comps, tech)
    n_dev = wl.devices           # tensor parallelism: every device runs one shard
    e_total, e_break = erep.total_j * n_dev, {k: v * n_dev for k, v in erep.breakdown_j.items()}
    a_total, a_break = arep.total_mm2 * n_dev, {k: v * n_dev for k, v in
                                                 arep.breakdown_mm2.items()}
    clock = acc.units[0].clock_hz
    extra: dict[str, Any] = {}
    for u in acc.units:
        extra.update(u.report())
    if len(acc.units) > 1:
        extra["schedule"] = _schedule_summary(sched, durations, latency, transfers, moved)
    if n_dev > 1:
        extra["devices"] = n_dev
    mem = memory_check(acc, wl)
    if mem is not None:
        extra["memory"] = mem
    host = _host_summary(acc, rows, latency)
    if host is not None:
        # while the device waits on the host the board still draws its static power: the
        # energy over the wall time charges every unit's leakage for the wall time
        leak_w = erep.leakage_j / latency if latency > 0 else 0.0
        host["energy_j"] = (erep.total_j + leak_w * (host["wall_s"] - latency)) * n_dev
        extra["host"] = host
    rate = (wl.tokens / latency if wl.is_llm else None) if latency > 0 else None
    srate = (wl.batch / latency if not wl.is_llm else None) if latency > 0 else None
    # utilisation: ideal compute time over the makespan, averaged over the units used
    # (= effective MACs / (latency x peak MAC rate) with one unit).
    util = sum(ideal_s.values()) / (latency * max(1, len(ideal_s))) if latency > 0 else 0.0
    tag = f"{objective}/{mapping}" + (f"/refine{refine}" if refine else "")
    if constraints is not None:
        content = [(r.ops, r.kinds, r.units, r.dataflows, r.factors, r.order_glb, r.order_dram,
                    r.roles) for r in constraints.rules]       # what the rules say, not where they are
        tag += "/constraints:" + hashlib.sha256(repr(content).encode()).hexdigest()[:16]
    return Result(
        design=acc.name, workload=wl.name, phase=wl.phase, fidelity=fidelity,
        latency_s=latency, cycles=int(round(latency * clock)), clock_hz=clock,
        energy_j=e_total, energy_breakdown_j=e_break,
        area_mm2=a_total, area_breakdown_mm2=a_break,
        utilization=util,
        tokens_per_s=rate, samples_per_s=srate, ops=tuple(rows), macs=macs, flops=flops,
        dram_bytes=dram, archsim_version=VERSION,
        input_hash=input_hash(acc, wl, fidelity, tag), extra=extra)


#: Estimate.details keys copied into the per-op table (GPU power/clock, host runtime).
REPORTED_DETAILS = ("clock_mhz", "power_w", "host_s", "wall_s")


def _host_summary(acc: Accelerator, rows: list[OpResult], latency: float
                  ) -> dict[str, Any] | None:
    """Wall time when a unit models its host runtime (``host_s`` in op details): a launch
    queue. The host issues op after op, each after its host cost, without waiting for the
    device (asynchronous launches); the device runs them in order, each when it has been
    issued and the previous one is done::

        issue_i = issue_(i-1) + host_i        start_i = max(issue_i, end_(i-1))
        end_i   = start_i + device_i          wall    = end_last

    so the host runs ahead during long kernels and short kernels wait on the host. The
    device idles ``end_last - sum(device_i)``; the wall is the device makespan plus that."""
    if not any("host_s" in r.details for r in rows):
        return None
    issue = end = busy = 0.0
    waited = 0
    for r in rows:
        issue += float(r.details.get("host_s", 0.0))
        if issue > end:
            waited += 1
        end = max(issue, end) + r.latency_s
        busy += r.latency_s
    runtime, note = next((u.host_runtime() for u in acc.units if u.host_runtime()[0]),
                         ("", ""))
    return {"runtime": runtime, "note": note, "device_s": latency,
            "wall_s": latency + max(0.0, end - busy), "host_bound_ops": waited}


def memory_check(acc: Accelerator, wl: Workload) -> dict[str, Any] | None:
    """Does ``wl``'s resident data (``Workload.resident_bytes``) fit the design's off-chip
    memory? ``capacity_bytes`` and ``fits`` are None when no unit declares a capacity. Units that share one memory (the
    default interconnect) share its capacity; units with their own memories (an
    interconnect that copies) add theirs. A design that does not fit is still evaluated
    (weights could stream from a host): the result says so and the CLI warns.
    """

    caps = [u.memory_capacity_bytes() for u in acc.units]
    resident = wl.resident_bytes()
    if not any(c > 0 for c in caps):    # capacity_gb: 0 = unchecked; say so, do not hide it
        return {"resident_bytes": resident, "capacity_bytes": None, "fits": None}
    capacity = sum(caps) if link_of(acc).copies else max(caps)
    return {"resident_bytes": resident, "capacity_bytes": capacity,
            "fits": resident <= capacity}


def _makespan(acc: Accelerator, sched: Any, durations: list[float],
              fidelity: str) -> tuple[float, tuple]:
    """Latency (s) and transfers of the schedule; at cycle fidelity the same assignment
    and placement order re-timed with the simulated durations."""
    if fidelity != "cycle" or sched.plan is None:
        return sched.latency_s, sched.transfers

    index = {u.name: i for i, u in enumerate(acc.units)}
    unit_of = [index[a.unit.name] for a in sched.assignments]
    plan = retime(sched.plan, [a.op.name for a in sched.assignments], unit_of, durations,
                  sched.edges, sched.link)
    return plan.makespan_s, plan.transfers


def _transfer_actions(acc: Accelerator, comps: dict[str, list[Any]], sched: Any,
                      transfers: tuple, actions: dict[tuple[str, str], float]) -> float:
    """Add the DRAM actions of cross-unit copies (a DRAM read of the bytes on the
    producer's unit, a DRAM write on the consumer's) to ``actions``; returns bytes moved.
    Shared-memory designs copy nothing (the ops' own DRAM traffic already counts them)."""
    if not sched.link.copies or not transfers:
        return 0.0
    dram_of = {}
    for u in acc.units:
        d = [c.name for c in comps[u.name] if c.cls == "dram"]
        dram_of[u.name] = d[0] if d else None
    names = [u.name for u in acc.units]
    moved = 0.0
    for t in transfers:
        src, dst = dram_of[names[t.src_unit]], dram_of[names[t.dst_unit]]
        if src:
            actions[(src, "read")] = actions.get((src, "read"), 0.0) + t.nbytes
        if dst:
            actions[(dst, "write")] = actions.get((dst, "write"), 0.0) + t.nbytes
        moved += 2 * t.nbytes
    return moved


def _schedule_summary(sched: Any, durations: list[float], latency: float, transfers: tuple,
                      moved: float) -> dict[str, Any]:
    """JSON-able summary of a multi-unit schedule for ``Result.extra['schedule']``."""
    busy: dict[str, float] = {}
    for a, d in zip(sched.assignments, durations):
        busy[a.unit.name] = busy.get(a.unit.name, 0.0) + d
    return {"makespan_s": latency, "sequential_s": sum(durations),
            "strategy": sched.plan.strategy if sched.plan else "",
            "busy_s": busy, "transfers": len(transfers),
            "transfer_bytes": float(sum(t.nbytes for t in transfers)),
            "copied_dram_bytes": moved,
            "link_gbps": sched.link.bandwidth_gbps, "link_latency_s": sched.link.latency_s}


#: Largest op (in analytically estimated cycles) simulated at cycle fidelity: 1e10 cycles
#: is ~10 s of device time at 1 GHz for ONE op — 1,000x a GPT-3-175B training GEMM on an
#: A100 (12288 x 49152 x 2048 tokens: ~1.1e7 cycles). The event-driven lowerings build
#: tasks at tile or command granularity, so beyond this they need minutes and many GB
#: (a 1e6^3 GEMM: > 10 GB in 30 s on gpu/a100) before the first event runs.
MAX_SIM_CYCLES = 10**10


def _check_sim_size(assignments: Any) -> None:
    """Refuse a cycle-level run whose ops are far too large to simulate (before any work)."""
    big = [a for a in assignments if a.estimate.cycles > MAX_SIM_CYCLES]
    if big:
        a = max(big, key=lambda x: x.estimate.cycles)
        more = f" (and {len(big) - 1} more ops)" if len(big) > 1 else ""
        raise WorkloadError(Problem(
            f"op {a.op.name}{more} would simulate ~{a.estimate.cycles:.3g} cycles "
            f"({a.estimate.latency_s:.3g} s of device time) on {a.unit.name}; expected at "
            f"most {MAX_SIM_CYCLES:.0e} per op at cycle fidelity: use --fidelity analytical "
            f"or a smaller shape", "--fidelity"))


def _simulate(unit: Unit, op: Op, mapping: Any,
              memo: dict[tuple[Any, ...], int] | None = None) -> int:
    """``unit.simulate(op, mapping)``; with ``memo``, once per (op signature, unit, mapping
    object): a unit's simulation is a function of the op's fields and the mapping, and the
    schedule gives identical ops the same mapping object (``map_workload``'s reuse)."""
    key = (op_signature(op), unit.name, id(mapping))
    if memo is not None and key in memo:
        return memo[key]
    try:
        cycles = unit.simulate(op, mapping)
    except NotImplementedError as exc:
        raise ConfigError(Problem(f"{exc}; use --fidelity analytical", f"units.{unit.name}")) from None
    if memo is not None:
        memo[key] = cycles
    return cycles


def input_hash(acc: Accelerator, wl: Workload, fidelity: str, objective: str) -> str:
    """SHA-256 (16 hex digits) of everything that determines a result."""
    h = hashlib.sha256()
    h.update(json.dumps({"config": acc.raw, "fidelity": fidelity, "objective": objective,
                         "version": VERSION, "workload": [wl.name, wl.phase, wl.batch, wl.seq,
                                                          wl.context]},
                        sort_keys=True, default=str).encode())
    # every op's repr in order (the same bytes as hashing them one by one), once per workload
    h.update(wl.derived("api.op_reprs", lambda: b"".join(repr(op).encode() for op in wl.ops())))
    return h.hexdigest()[:16]
