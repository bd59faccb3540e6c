"""What ``archsim run`` / ``map`` / ``gemm`` evaluate, as one typed request.

:class:`RunRequest` holds every input of one evaluation (design, workload, formats, sparsity,
fidelity, mapping); :func:`evaluate_request` turns it into a :class:`~archsim.result.Result`:

* The workload gets the design's native number format when no ``a_format`` / ``w_format``
  is given (:func:`archsim.api.with_native_formats`), so ``archsim map eyeriss_like --model
  resnet50`` runs in int16 out of the box.
* A refused format names the formats each unit computes in natively.
* Sparsity ``N:M`` that changes nothing (the design runs the pattern dense, or no layer can
  be pruned with it) is a :class:`RunWarning`, not a silent dense result.
* Every result carries its provenance (``Result.extra["provenance"]``): the design and its
  overrides, model, phase, batch, seq, context, formats, tp, sparsity, fidelity, mapping
  mode, objective, archsim version, input hash and the command line that reproduces it
  (:meth:`RunRequest.argv`); ``archsim rerun result.json`` runs it again and checks the hash.

Warnings go through :mod:`warnings` (category :class:`RunWarning`); the command line shows
each as one ``warning: ...`` line on stderr.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from archsim import sim
from archsim.api import (
    check_weight_sparsity,
    device_build,
    evaluate,
    gemm_workload,
    load,
    with_format_hint,
    with_native_formats,
)
from archsim.api import workload as build_model_workload
from archsim.arch.accelerator import Accelerator
from archsim.arch.gpu.precision import plan_mma, tc_format_name
from archsim.arch.gpu.spec import GpuSpec
from archsim.parallel import shape_of
from archsim.result import Result
from archsim.workloads.errors import MappingError, Problem, WorkloadError
from archsim.workloads.formats import get_format
from archsim.workloads.graph import Workload
from archsim.workloads.kvtech import KV_FLAGS, KVTechniques, check_phase, prefix_hit_tokens

__all__ = ["RunRequest", "RunWarning", "evaluate_request", "request_workload",
           "numba_cache_cold", "compile_notice", "memory_warning", "warn_unused_lengths",
           "DEFAULT_CONFIG", "DEFAULT_MODEL"]

#: Design and model of ``archsim run`` without arguments.
DEFAULT_CONFIG = "tpu_like"
DEFAULT_MODEL = "gpt2-small"


class RunWarning(UserWarning):
    """A result the user should look at twice (a flag that changed nothing, a substituted
    format, a workload that does not fit in memory)."""


@dataclass(frozen=True)
class RunRequest:
    """One evaluation of ``archsim run`` (a zoo model), ``map`` (the same with mapping
    search) or ``gemm`` (one GEMM ``C[m,n] = A[m,k] @ W[k,n]``).

    Attributes:
        cmd: ``run``, ``map`` or ``gemm`` (``map`` forces ``mapping="search"``).
        config: config YAML path or reference-design name.
        model: zoo model name or Hugging Face ``config.json`` (``run``/``map``).
        m, n, k: the GEMM's dimensions (``gemm``).
        overrides: ``KEY=VALUE`` config overrides (``--set``).
        sparsity: ``(N, M)`` structured weight sparsity, or None.
        weight_sparsity: fraction of zero weights run as sparse loads + dense MMA
            (``--weight-sparsity``; GPU designs, inference), 0 = dense.
        w_group_size, act_order: group-wise weight scales along K (``--w-group-size``) and
            GPTQ act-order (``--act-order``): ``Workload.with_weight_groups``.
        moe_routing: mixture-of-experts models: one fused MoE op per block with this
            routing (``--moe-routing``); None = separate expert ops.
        kv: the KV-cache techniques (``--prefix-hit-rate``, ``--kv-remat``,
            ``--topk-blocks``; ``--kv-offload-gb`` needs a cluster's host link, so a plan)
            built into the model's graph as plans and serving build them
            (``DeviceBuild.kv``, :mod:`workloads.kvtech`); ``block_size``: top-k's KV block.
        overlap: overlap inside one device (``--overlap``: ``none``, ``nanobatch:K``,
            ``tokensplit``, ``fused-ar-norm``, ...; :func:`archsim.api.evaluate`'s
            ``overlap``).
        native_format: set by :func:`request_workload`: the design-native format applied
            when no format was given (None: none applied).
    """

    cmd: str = "run"
    config: str = DEFAULT_CONFIG
    model: str = DEFAULT_MODEL
    phase: str | None = None
    batch: int = 1
    seq: int | None = None
    context: int | None = None
    tp: int = 1
    kernels: str = "fused"
    moe_routing: str | None = None
    attention_kernel: str = "sdpa"
    m: int = 0
    n: int = 0
    k: int = 0
    a_format: str | None = None
    w_format: str | None = None
    sparsity: tuple[int, int] | None = None
    weight_sparsity: float = 0.0
    w_group_size: int = 0
    act_order: bool = False
    overrides: tuple[str, ...] = ()
    fidelity: str = "analytical"
    objective: str = "latency"
    mapping: str = "default"
    constraints: str | None = None
    refine: int = 0
    overlap: str = "none"
    kv: KVTechniques = KVTechniques()
    block_size: int = 16
    native_format: str | None = field(default=None, compare=False)

    @property
    def mapping_mode(self) -> str:
        """The mapping mode evaluated: ``search`` for ``map``, else :attr:`mapping`."""
        return "search" if self.cmd == "map" else self.mapping

    def argv(self) -> list[str]:
        """The ``archsim`` command line that reproduces this request."""
        argv = [self.cmd, str(self.config)]
        if self.cmd == "gemm":
            argv += ["--m", str(self.m), "--n", str(self.n), "--k", str(self.k)]
        else:
            argv += ["--model", self.model]
            for flag, v in (("--phase", self.phase), ("--seq", self.seq),
                            ("--context", self.context)):
                if v is not None:
                    argv += [flag, str(v)]
            if self.tp != 1:
                argv += ["--tp", str(self.tp)]
            if self.kernels != "fused":
                argv += ["--kernels", self.kernels]
            if self.moe_routing:
                argv += ["--moe-routing", self.moe_routing]
            if self.attention_kernel != "sdpa":
                argv += ["--attention-kernel", self.attention_kernel]
        argv += ["--batch", str(self.batch), "--fidelity", self.fidelity, "--objective",
                 self.objective, "--mapping", self.mapping_mode]
        for flag, v in (("--a-format", self.a_format), ("--w-format", self.w_format),
                        ("--constraints", self.constraints)):
            if v:
                argv += [flag, str(v)]
        if self.refine:
            argv += ["--refine", str(self.refine)]
        if self.sparsity:
            argv += ["--sparsity", f"{self.sparsity[0]}:{self.sparsity[1]}"]
        if self.weight_sparsity:
            argv += ["--weight-sparsity", f"{self.weight_sparsity:g}"]
        if self.w_group_size:
            argv += ["--w-group-size", str(self.w_group_size)]
        if self.act_order:
            argv += ["--act-order"]
        if self.overlap != "none":
            argv += ["--overlap", self.overlap]
        for key, flag in KV_FLAGS.items():
            v = getattr(self.kv, key)
            if v is True:
                argv += [flag]
            elif v:
                argv += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
        if self.block_size != 16:
            argv += ["--block-size", str(self.block_size)]
        for o in self.overrides:
            argv += ["--set", o]
        return argv


def request_workload(req: RunRequest, acc: Accelerator) -> tuple[Workload, RunRequest]:
    """The workload of ``req`` on ``acc``, in the design's native format unless formats were
    given; returns it with ``req`` updated by the native format applied."""
    if req.cmd != "gemm" and req.kv.any:
        return _kv_workload(req, acc)
    if req.cmd == "gemm":
        wl = gemm_workload(req.m, req.n, req.k, req.batch, a_format=req.a_format or "fp16",
                           w_format=req.w_format)
    else:
        # the choices every device makes (archsim.api.device_build; plans use the same):
        # fused (FlashAttention-style) attention where the design runs it, the formats
        b = device_build(acc, req.a_format, req.w_format, req.kernels,
                         attention_kernel=req.attention_kernel)
        wl = build_model_workload(req.model, phase=req.phase, batch=req.batch, seq=req.seq,
                                  context=req.context, tp=req.tp, a_format=req.a_format,
                                  w_format=req.w_format, attention=b.attention,
                                  kernels=req.kernels, moe_routing=req.moe_routing)
        warn_unused_lengths(req.model, req.seq, req.context, wl)
    native = None
    # eager_amp: autocast's policy set every op's format, so no design-native formats
    if req.kernels == "fused" and not req.a_format and not req.w_format:
        wl, native = with_native_formats(acc, wl)
    if req.cmd != "gemm":       # the attention call (paged-KV backend or not), after formats
        wl = b.framework_calls(wl)
    if req.sparsity:
        wl = wl.with_sparsity(*req.sparsity)
    wl = wl.with_weight_groups(req.w_group_size, req.act_order, req.tp)
    if req.weight_sparsity:
        check_weight_sparsity(acc, req.weight_sparsity)
        if wl.phase == "train":
            raise WorkloadError(Problem(
                "sparse weight loads are an inference kernel (Flash-LLM / SpInfer serve a "
                "pruned model); training updates dense weights", "--weight-sparsity"))
        wl = wl.with_weight_sparsity(req.weight_sparsity)
    return wl, replace(req, native_format=native)


def _kv_workload(req: RunRequest, acc: Accelerator) -> tuple[Workload, RunRequest]:
    """The workload of a request with KV-cache techniques: the model's graph built by the
    one builder plans and serving use (:meth:`workloads.parallel.DeviceBuild.graph` with
    ``kv``): a prefill of the prompt's ``P - hit`` uncached tokens after ``hit =
    kvtech.prefix_hit_tokens(P, H)`` cached ones, or a decode step with remat / top-k.

    Raises:
        WorkloadError: a technique the model or the phase cannot use, the KV offload (it
            streams over a cluster's host link: run a plan on one), or an option the builder
            does not take (``--moe-routing``, ``--sparsity``), each naming its flag.
    """
    for flag, given in (("--kv-offload-gb", req.kv.offload_gb), ("--moe-routing", req.moe_routing),
                        ("--sparsity", req.sparsity)):
        if given:
            why = (f"{acc.name} is a device design with no host link to keep KV blocks "
                   f"behind; run a plan on a cluster with a host: section (dgx1, dgx2, "
                   f"frontier)" if flag == "--kv-offload-gb" else
                   "is not modelled together with the KV-cache techniques")
            raise WorkloadError(Problem(why, flag))
    s = shape_of(req.model)
    phase = req.phase or "prefill"
    req.kv.check(s, req.tp, req.block_size)
    check_phase(req.kv, phase)
    b = device_build(acc, req.a_format, req.w_format, req.kernels,
                     attention_kernel=req.attention_kernel, weight_sparsity=req.weight_sparsity,
                     w_group_size=req.w_group_size, act_order=req.act_order, kv=req.kv,
                     kv_block_size=req.block_size)
    if phase == "prefill":
        p = req.seq or s.default_seq
        hit = prefix_hit_tokens(p, req.kv.prefix_hit_rate)
        wl = b.graph(s, phase, req.batch, p - hit, hit, req.tp)
    else:
        wl = b.graph(s, phase, req.batch, None, req.context, req.tp)
    return wl, replace(req, native_format=b.native)


def warn_unused_lengths(model: str, seq: int | None, context: int | None,
                        wl: Workload) -> None:
    """A sequence length or context the model has no use for (a CNN) is said, not dropped
    (``run``, ``map``, ``trace``)."""
    for flag, given, used in (("--seq", seq, wl.seq), ("--context", context, wl.context)):
        if given not in (None, 0, 1) and used != given:
            warnings.warn(f"{flag} {given} does not apply to {model} (it has no token "
                          f"sequence); ignored", RunWarning, stacklevel=3)


def _warn_unused_refine(req: RunRequest) -> None:
    """``--refine`` polishes a mapping search; without one it has nothing to refine."""
    if req.refine and req.mapping_mode != "search":
        warnings.warn(f"--refine {req.refine} applies only to a mapping search (--mapping "
                      f"search or 'archsim map'); ignored", RunWarning, stacklevel=3)


def _warn_unused_objective(req: RunRequest, acc: Accelerator) -> None:
    """``--objective`` picks each op's unit and steers a mapping search (and the choice among
    a constrained unit's dataflows); on a one-unit design without either it has nothing to
    choose (``mapper.schedule._candidates``: one default mapping)."""
    if req.objective != "latency" and len(acc.units) == 1 and req.mapping_mode != "search" \
            and not req.constraints:
        warnings.warn(f"--objective {req.objective} changes nothing on {acc.name}: it picks "
                      f"each op's unit (one unit here) and steers a mapping search (--mapping "
                      f"search or 'archsim map'); ignored", RunWarning, stacklevel=3)


def evaluate_request(req: RunRequest, acc: Accelerator | None = None,
                     before_simulation: Callable[[], None] | None = None,
                     progress: Callable[[int, int], None] | None = None,
                     on_compile: Callable[[], None] | None = None) -> Result:
    """Evaluate ``req`` (on ``acc`` if given, else ``load(req.config, req.overrides)``), with
    the format hint, the sparsity check and the provenance record.

    Args:
        before_simulation: called once before a cycle-level simulation starts (the command
            line says when the simulator kernels compile).
        progress: called as ``progress(done, total)`` while the ops are mapped.
        on_compile: at ``cycle`` fidelity, called once when Numba starts compiling a
            simulator kernel (a cache miss; never when every kernel loads from the cache):
            :func:`compile_notice`.
    Raises:
        ArchsimError: a bad design, workload, format or mapping (one message, its location).
    """
    if acc is None:
        acc = load(req.config, req.overrides)
    wl, req = request_workload(req, acc)
    _warn_unused_refine(req)
    _warn_unused_objective(req, acc)
    mode = req.mapping_mode
    try:
        with compile_notice(on_compile if req.fidelity == "cycle" else None):
            res = evaluate(acc, wl, fidelity=req.fidelity, objective=req.objective,
                           mapping=mode, constraints=req.constraints, refine=req.refine,
                           before_simulation=before_simulation, progress=progress,
                           overlap=req.overlap)
    except MappingError as exc:
        hinted = with_format_hint(exc, acc)
        if hinted is exc:
            raise
        raise hinted from None
    if req.sparsity and req.sparsity[0] < req.sparsity[1]:
        _check_sparsity_effect(req, acc, wl, res)
    _check_substituted_formats(req, acc, res)
    _check_tensor_core_path(req, acc, res)
    res.extra["provenance"] = _provenance(req, acc, wl, res)
    return res


def memory_warning(res: Result, acc: Accelerator) -> str | None:
    """The warning text when the workload of ``res`` does not fit in ``acc``'s off-chip
    memory (``Result.extra["memory"]``), else None."""
    mem = res.extra.get("memory")
    if not mem or mem["fits"] is not False:
        return None
    return (f"{res.workload} ({res.phase}) needs {mem['resident_bytes'] / 1e9:.4g} GB "
            f"resident (weights, KV cache, training state) but {acc.name} has "
            f"{mem['capacity_bytes'] / 1e9:.4g} GB of off-chip memory; the result assumes "
            f"it fits")


@contextmanager
def compile_notice(callback: Callable[[], None] | None,
                   modules: tuple[str, ...] = ("archsim.",)) -> Iterator[None]:
    """While active, call ``callback`` once, when Numba starts compiling a kernel defined in
    one of ``modules`` (module-name prefixes: archsim's own kernels; Numba's helpers, e.g.
    the small ``typed.List`` constructors it compiles in every process, do not count).

    Numba announces a compilation (its ``numba:compile`` event) only on a cache miss, after
    it failed to load the kernel from its cache (wherever its cache locator put it, stale
    entries included), so ``callback`` runs exactly when a run compiles: never on a warm
    cache or with ``NUMBA_DISABLE_JIT=1``. ``None``: nothing is installed (and Numba is
    not imported)."""
    if callback is None:
        yield
        return
    notify: Callable[[], None] = callback       # narrowed for the listener below
    # deferred: loads numba (only cycle-level runs need it)
    from numba.core import event

    class _First(event.Listener):
        fired = False

        def on_start(self, ev: Any) -> None:
            func = getattr(ev.data["dispatcher"], "py_func", None)
            if not self.fired and getattr(func, "__module__", "").startswith(modules):
                self.fired = True
                notify()

        def on_end(self, ev: Any) -> None:
            pass

    with event.install_listener("numba:compile", _First()):
        yield


def numba_cache_cold() -> bool:
    """True when no compiled event-engine kernel is cached yet (Numba writes ``*.nbi``
    index files next to ``sim/`` or under ``NUMBA_CACHE_DIR``): a guess made before the
    run (a stale or relocated cache fools it); :func:`compile_notice` says when a run
    actually compiles."""
    base = Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else \
        Path(sim.__file__).resolve().parent / "__pycache__"
    try:
        return not any(base.rglob("engine._kernel-*.nbi"))
    except OSError:
        return True


def _check_substituted_formats(req: RunRequest, acc: Accelerator, res: Result) -> None:
    """Warn when a requested format runs on a unit whose native format has the same width
    but is another format (fp16 on tpu_like's bf16 multipliers is timed and charged as
    bf16): the substitution is the model's, the user should know it happened."""
    used = {o.unit for o in res.ops}
    for flag, name in (("--a-format", req.a_format), ("--w-format", req.w_format)):
        if not name:
            continue
        f = get_format(name)
        for u in acc.units:
            nat = [get_format(n) for n in u.native_formats()]
            if u.name in used and nat and f.name not in {n.name for n in nat} and any(
                    n.bits == f.bits and n.is_float == f.is_float for n in nat):
                warnings.warn(f"{flag} {f.name}: {acc.name}'s {u.name} computes in "
                              f"{nat[0].name}; {f.name} operands are modelled as {nat[0].name} "
                              f"(same width)", RunWarning, stacklevel=2)


def _check_tensor_core_path(req: RunRequest, acc: Accelerator, res: Result) -> None:
    """Warn when both operand formats lack a tensor-core rate of their own on a tensor-core
    GPU and the MMAs run in a wider format (int4 x int4 on Hopper runs on the int8 tensor
    cores: int4 storage and traffic, int8 MMA time; fp8 x fp8 on Ampere runs as fp16);
    weight-only plans whose activation format has tensor cores (fp16 x int4, Marlin-style)
    and fp32 on the CUDA cores are the design's own paths and are not warned about."""
    if not (req.a_format and req.w_format):
        return
    a, b = get_format(req.a_format), get_format(req.w_format)
    used = {o.unit for o in res.ops}
    for u in acc.units:
        spec = getattr(u, "spec", None)
        if u.name not in used or not isinstance(spec, GpuSpec):
            continue
        plan = plan_mma(spec, a, b, spec.dequant_ops_per_weight)
        if plan is not None and plan.tensor and plan.tc_format not in (
                a.name, b.name, tc_format_name(a), tc_format_name(b)):
            warnings.warn(f"--a-format {a.name} --w-format {b.name}: {acc.name}'s {u.name} has "
                          f"no {a.name} x {b.name} tensor-core path (rates for "
                          f"{', '.join(spec.tensor_core.fma_per_clock)}); the MMAs run as "
                          f"{plan.tc_format}{f' x{plan.passes}' if plan.passes > 1 else ''} "
                          f"(storage and traffic stay {b.name})", RunWarning, stacklevel=2)


def _check_sparsity_effect(req: RunRequest, acc: Accelerator, wl: Workload,
                           res: Result) -> None:
    """Warn when the sparsity left the analytical result exactly unchanged."""
    assert req.sparsity is not None
    n, m = req.sparsity
    mode = req.mapping_mode
    dense = wl.with_sparsity(m, m)             # n == m removes sparsity
    a = evaluate(acc, dense, objective=req.objective, mapping=mode, constraints=req.constraints)
    s = res if req.fidelity == "analytical" else evaluate(
        acc, wl, objective=req.objective, mapping=mode, constraints=req.constraints)
    if (a.latency_s, a.energy_j, a.dram_bytes) == (s.latency_s, s.energy_j, s.dram_bytes):
        pruned = sum(1 for op in wl.ops()
                     if getattr(getattr(op, "w_sparsity", None), "structured", False))
        why = (f"no layer's reduction dimension is a multiple of {m}" if not pruned else
               f"{acc.name} runs {n}:{m}-sparse weights dense (the pattern is not supported)")
        warnings.warn(f"--sparsity {n}:{m} changed nothing: {why}; the result is the dense "
                      f"one", RunWarning, stacklevel=2)
        res.extra["sparsity_effect"] = "none"


def _provenance(req: RunRequest, acc: Accelerator, wl: Workload, res: Result) -> dict[str, Any]:
    """Everything that produced ``res``, and the argv that reproduces it."""
    return {
        "design": acc.name, "config": str(req.config), "config_file": acc.source,
        "overrides": list(req.overrides), "model": req.model if req.cmd != "gemm" else None,
        "gemm": [req.m, req.n, req.k] if req.cmd == "gemm" else None,
        "phase": wl.phase, "batch": req.batch, "seq": wl.seq, "context": wl.context,
        "a_format": req.a_format or req.native_format,
        "w_format": req.w_format or req.native_format,
        "formats_from": "flags" if (req.a_format or req.w_format) else
        ("design" if req.native_format else "model"),
        "tp": req.tp if req.cmd != "gemm" else 1,
        "kernels": req.kernels if req.cmd != "gemm" else "fused",
        "sparsity": f"{req.sparsity[0]}:{req.sparsity[1]}" if req.sparsity else None,
        "fidelity": req.fidelity, "mapping": req.mapping_mode, "objective": req.objective,
        "refine": req.refine, "constraints": req.constraints, "overlap": req.overlap,
        "kv": asdict(req.kv), "block_size": req.block_size,
        "archsim_version": res.archsim_version, "input_hash": res.input_hash,
        "argv": req.argv(),
    } | ({"moe_routing": req.moe_routing} if req.moe_routing else {})
