"""Measured-silicon rows (``benchmarks/silicon/`` JSON lines) against the GPU model.

A row is one JSON object (``kind`` = gemm, bmm, attn_prefill, attn_decode, vector, copy,
energy, train_step, cnn_infer, launch, device ...; fields in
``../shared/reference/silicon/README.md``). This module turns a row into the op the model
evaluates, groups rows into kernel classes, scores the model per class and fits the power
constants of ``GpuSpec.power`` from the ``energy`` rows (least squares, see
:func:`fit_power`). ``archsim calibrate`` (``archsim/cli/calibrate.py``, over ``archsim/calibration.py``) is its CLI.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from archsim.api import evaluate, load, preferred_attention, workload
from archsim.arch.gpu.bench import DO_BENCH, timed_call_s
from archsim.arch.gpu.kernels import (
    NORM_VEC_ELEMS,
    SOFTMAX_BLOCK_THREADS,
    softmax_global_reread_b,
    softmax_path,
    softmax_register_blocks,
    softmax_steps,
)
from archsim.arch.gpu.unit import TensorCoreGpu
from archsim.kernel_tables import (
    back_to_back,
    is_kernel_table,
    kernel_class,
    load_kernel_rows,
    predict_b2b_ms,
)
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.formats import FORMATS
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Attention, Elementwise, Gemm, Norm, Op, Softmax

__all__ = ["Row", "load_rows", "row_class", "row_op", "predict_ms", "score", "ClassScore", "model_rows",
           "fit_power", "PowerFit", "energy_prediction", "fit_reduce_pass_rate", "fit_norm_pass_rate",
           "fit_softmax_global", "ROW_KINDS",
           "MEASURED_FIELDS"]

_DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8_e4m3", "int8": "int8"}
#: Kernel classes scored (the issue's "Must show" list).
CLASSES = ("gemm_bf16", "gemm_fp16", "gemm_fp8", "gemm_int8", "gemm_small_m", "bmm",
           "attention", "vector", "copy")


@dataclass(frozen=True)
class Row:
    """One measured row: its line number in the file and its fields."""

    line: int
    data: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", ""))


def load_rows(path: str | Path) -> list[Row]:
    """Read a JSON-lines measurement file, or a framework kernel table (``.csv`` /
    ``.csv.gz``, ``archsim.kernel_tables``); a bad line is a ConfigError naming file:line."""
    p = Path(path)
    if is_kernel_table(p):
        return [Row(i, d) for i, d in load_kernel_rows(p)]
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(Problem(f"cannot read measurement file: {e.strerror}", str(p))) from None
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(Problem(f"expected one JSON object per line ({e.msg})",
                                      f"{p}:{i}")) from None
        if not isinstance(d, dict) or "kind" not in d:
            raise ConfigError(Problem("expected a JSON object with a 'kind' field", f"{p}:{i}"))
        _check_row(d, f"{p}:{i}")
        rows.append(Row(i, d))
    return rows


#: Row kinds a measurement file may hold (``../shared/reference/silicon/README.md``, plus the
#: harness's ``device``/``done``/``protocol``/``kernel_profile`` records and the kernel tables'
#: ``fp8_quant_delta``).
ROW_KINDS = ("gemm", "bmm", "attn_prefill", "attn_decode", "vector", "copy", "launch", "energy",
             "train_step", "cnn_infer", "cnn_train", "device", "done", "protocol",
             "kernel_profile", "fp8_quant_delta")
#: Measured times, energies, powers and clocks: each, where a row has it, a finite number > 0.
MEASURED_FIELDS = ("ms", "kernel_ms", "mj_per_call", "avg_w", "inst_w", "sm_mhz",
                   "eager_us_per_kernel", "graph_us_per_kernel")


def _check_row(d: dict[str, Any], where: str) -> None:
    """A row of a known kind whose measured values are finite and positive (ConfigError)."""
    if d["kind"] not in ROW_KINDS:
        raise ConfigError(Problem(f"unknown row kind {d['kind']!r}; expected one of "
                                  f"{', '.join(ROW_KINDS)}", where))
    for key in MEASURED_FIELDS:
        if key not in d:
            continue
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v <= 0:
            raise ConfigError(Problem(f"{key}: expected a finite number > 0, got {v!r}", where))


def _fmt(row: dict[str, Any]) -> Any:
    return FORMATS[_DTYPES.get(str(row.get("dtype", "bf16")), "bf16")]


def row_class(row: dict[str, Any]) -> str:
    """The kernel class a latency row is scored in ('' = not a latency row)."""
    k = row.get("kind")
    if row.get("protocol") == "b2b":
        return kernel_class(row)
    if k == "gemm":
        if min(row["m"], row["n"]) <= 64:
            return "gemm_small_m"
        return f"gemm_{row['dtype']}"
    if k == "bmm":
        return "bmm"
    if k in ("attn_prefill", "attn_decode"):
        return "attention"
    if k == "vector":
        return "vector"
    if k == "copy":
        return "copy"
    return ""


def row_op(row: dict[str, Any]) -> Op | None:
    """The op that reproduces a measured kernel (None for rows that are not one op)."""
    k = row.get("kind")
    if k == "gemm" or (k == "energy" and row.get("op") == "gemm"):
        f = _fmt(row)
        return Gemm(name="gemm", m=int(row["m"]), n=int(row["n"]), k=int(row["k"]),
                    a_format=f, w_format=f)
    if k == "bmm":
        f = _fmt(row)
        return Gemm(name="bmm", m=int(row["m"]), n=int(row["n"]), k=int(row["k"]),
                    batch=int(row["b"]), b_is_weight=False, a_format=f, w_format=f)
    if k in ("attn_prefill", "attn_decode"):

        f = _fmt(row)
        h = int(row["h"])
        kvh = int(row.get("kv_heads", h))     # GQA rows (enable_gqa) name their KV heads
        if k == "attn_prefill":
            s = int(row["s"])
            return Attention(name="attn", batch=int(row["b"]), heads=h, kv_heads=kvh, q_len=s,
                             kv_len=s, head_dim=int(row["d"]), causal=bool(row["causal"]),
                             a_format=f, w_format=f)
        return Attention(name="attn", batch=int(row["b"]), heads=h, kv_heads=kvh, q_len=1,
                         kv_len=int(row["L"]), head_dim=int(row["d"]), causal=False,
                         a_format=f, w_format=f)
    if k == "vector":
        f = _fmt(row)
        o, r, c = str(row["op"]), int(row["rows"]), int(row["cols"])
        if o == "softmax":
            return Softmax(name="softmax", rows=r, cols=c, a_format=f)
        if o in ("layernorm", "rmsnorm"):
            return Norm(name=o, rows=r, cols=c, norm=o, a_format=f)
        return Elementwise(name=o, rows=r, cols=c, fn=o, inputs=2 if o == "add" else 1,
                           a_format=f)
    if k == "copy" or (k == "energy" and row.get("op") == "copy"):
        n = int(row["bytes"]) // 2
        cols = math.gcd(n, 1 << 15)
        return Elementwise(name="copy", rows=n // cols, cols=cols, fn="copy",
                           a_format=FORMATS["bf16"])
    return None


def predict_ms(unit: Any, row: dict[str, Any]) -> float | None:
    """Predicted device time (ms) of a latency row on ``unit`` (None if not modelled);
    GEMM / bmm rows are timed as ``do_bench`` times them (``arch.gpu.bench``: L2 flush
    before every call, sharing the power window, dirty-L2 write-back); framework kernel-table
    rows (``"protocol": "b2b"``) back to back (``archsim.kernel_tables``)."""
    if row.get("protocol") == "b2b":
        return predict_b2b_ms(back_to_back(unit), row)
    op = row_op(row)
    if op is None or unit.supports(op):
        return None
    if row.get("kind") in ("gemm", "bmm"):
        return timed_call_s(unit, op, DO_BENCH) * 1e3
    return float(unit.estimate(op).latency_s * 1e3)


@dataclass(frozen=True)
class ClassScore:
    """Per-class error of predicted vs measured latency (signed errors pred/meas - 1)."""

    cls: str
    errors: tuple[float, ...]

    @property
    def median_abs(self) -> float:
        return statistics.median(abs(e) for e in self.errors) if self.errors else math.nan

    @property
    def worst_abs(self) -> float:
        return max(abs(e) for e in self.errors) if self.errors else math.nan


def score(unit: Any, rows: Iterable[Row | dict[str, Any]]) -> dict[str, ClassScore]:
    """Errors per kernel class of the latency rows."""
    errs: dict[str, list[float]] = {}
    for r in rows:
        d = r.data if isinstance(r, Row) else r
        cls = row_class(d)
        if not cls or "ms" not in d:
            continue
        p = predict_ms(unit, d)
        if p is None:
            continue
        errs.setdefault(cls, []).append(p / float(d["ms"]) - 1.0)
    return {c: ClassScore(c, tuple(v)) for c, v in errs.items()}


# ------------------------------------------------------------------ energy / power fit


@dataclass(frozen=True)
class PowerFit:
    """Least-squares fit of the power constants on energy rows.

    Attributes:
        active_pj_per_cycle: fitted whole-chip energy per clock at the top voltage (pJ).
        core_energy_scale: fitted multiplier on the library on-chip energies.
        hbm_energy_scale: multiplier on the library HBM energy (held at its prior).
        residuals: per calibration row, (label, relative error of board energy).
    """

    active_pj_per_cycle: float
    core_energy_scale: float
    hbm_energy_scale: float
    residuals: tuple[tuple[str, float], ...]


def _library_parts(unit: Any, op: Op) -> tuple[float, float]:
    """(on-chip J, HBM J) of ``op`` at the top voltage with library energies (scale 1)."""

    raw = TensorCoreGpu(unit.name, replace(unit.spec, power=None), unit.node_nm)
    e = raw.estimate(op)
    pj = raw.action_pj()
    hbm = raw.cname("hbm")
    core = sum(c * pj.get(k, 0.0) for k, c in e.actions.items() if k[0] != hbm) * 1e-12
    mem = sum(c * pj.get(k, 0.0) for k, c in e.actions.items() if k[0] == hbm) * 1e-12
    return core, mem


def _label(d: dict[str, Any]) -> str:
    if d.get("op") == "gemm":
        return f"gemm {d['m']}x{d['n']}x{d['k']} {d['dtype']}"
    if d.get("op") == "copy":
        return f"copy {d['bytes']} B"
    return str(d.get("op"))


def fit_power(unit: Any, rows: Sequence[Row | dict[str, Any]], idle_w: float
              ) -> PowerFit:
    """Fit ``active_pj_per_cycle`` and ``core_energy_scale`` of ``unit.spec.power``.

    For each energy row (sustained loop: ``ms`` per call, ``mj_per_call``, SM clock
    ``sm_mhz``) the measured dynamic energy ``mj - idle_w x ms`` is modelled at the measured
    clock and time (so the fit is independent of the latency model)::

        E_dyn = (V/V_top)^2 x (s_core x E_core,lib + e_cycle x f x T) + s_hbm x E_hbm,lib

    with ``s_hbm`` at its prior (1: the library HBM3 energy per bit). The two unknowns are
    solved by least squares on the relative errors (each row divided by its measurement).
    """
    p = unit.spec.power
    assert p is not None
    a_rows, b_rows, labels, meas = [], [], [], []
    s_hbm = p.hbm_energy_scale
    for r in rows:
        d = r.data if isinstance(r, Row) else r
        op = row_op(d)
        if op is None:
            continue
        t = float(d["ms"]) * 1e-3
        f = float(d["sm_mhz"])
        v2 = p.v2(f)
        core, mem = _library_parts(unit, op)
        e_meas = float(d["mj_per_call"]) * 1e-3
        e_dyn = e_meas - idle_w * t
        a_rows.append([v2 * core, v2 * f * 1e6 * t * 1e-12])   # x = (s_core, e_cycle pJ)
        b_rows.append(e_dyn - s_hbm * mem)
        labels.append(_label(d))
        meas.append(e_meas)
    a = np.array(a_rows) / np.array(meas)[:, None]
    b = np.array(b_rows) / np.array(meas)
    x, *_ = np.linalg.lstsq(a, b, rcond=None)
    s_core, e_cyc = float(x[0]), float(x[1])
    res = tuple((lab, float(pred - bb)) for lab, pred, bb in zip(labels, a @ x, b, strict=True))
    return PowerFit(e_cyc, s_core, s_hbm, res)


def fit_reduce_pass_rate(unit: Any, rows: Sequence[Row | dict[str, Any]]) -> float | None:
    """``cuda_core.reduce_pass_bytes_per_clock`` (bytes per clock per SM) from softmax rows
    with more than 1,024 columns (three passes: the two re-reads run after the stream): per
    row, the re-read bytes over the measured time left after the one-pass stream, at the
    SM count and clock; the median over the rows. None without such rows. (The rate prices
    the rows no other softmax model does: the register path's own constants are set aside
    here, so the rate stays the three-pass reading of the same rows.)"""
    s = unit.spec
    fast = type(unit)(unit.name, replace(s, cuda_core=replace(
        s.cuda_core, reduce_pass_bytes_per_clock=1e12, softmax_reg_row_ns=None,
        softmax_reg_elem_ns=None)), unit.node_nm)
    rates = []
    for r in rows:
        d = r.data if isinstance(r, Row) else r
        if d.get("kind") != "vector" or d.get("op") != "softmax" or int(d["cols"]) <= 1024:
            continue
        op = row_op(d)
        if op is None:
            continue
        left = float(d["ms"]) * 1e-3 - fast.estimate(op).latency_s
        if left > 0:
            rates.append(2 * op.input_bytes() / left / (s.sm_count * s.clock_hz))
    return statistics.median(rates) if rates else None


def fit_norm_pass_rate(unit: Any, rows: Sequence[Row | dict[str, Any]]) -> float | None:
    """``cuda_core.norm_scalar_bytes_per_clock`` (bytes per clock per SM) from layer/RMS norm
    rows on PyTorch's scalar path (width not a multiple of ``NORM_VEC_ELEMS``): per row, the
    two passes' bytes (2 x input) over the measured time less two launches and the DRAM
    latency, at the SM count and top clock; rows whose time the HBM stream explains (within
    5 %) carry no rate and are skipped; the median. None without such rows."""
    s = unit.spec
    rates = []
    for r in rows:
        d = r.data if isinstance(r, Row) else r
        if d.get("kind") != "vector" or d.get("op") not in ("layernorm", "rmsnorm"):
            continue
        op = row_op(d)
        if not isinstance(op, Norm) or op.cols % NORM_VEC_ELEMS == 0:
            continue
        body = float(d["ms"]) * 1e-3 - 2 * s.kernel_launch_s - s.dram_latency_ns * 1e-9
        stream = (op.input_bytes() + op.weight_bytes() + op.output_bytes()) \
            / s.memory.sustained_bytes_per_s
        if body > 1.05 * stream:
            rates.append(2 * op.input_bytes() / body / (s.sm_count * s.clock_hz))
    return statistics.median(rates) if rates else None


def _softmax_rows(rows: Sequence[Row | dict[str, Any]], path: str
                  ) -> Iterable[tuple[dict[str, Any], Softmax]]:
    """(row, op) of the softmax rows whose op takes PyTorch's ``path`` kernel
    (``arch.gpu.kernels.softmax_path``)."""
    for r in rows:
        d = r.data if isinstance(r, Row) else r
        if d.get("kind") != "vector" or d.get("op") != "softmax":
            continue
        op = row_op(d)
        if isinstance(op, Softmax) and softmax_path(op) == path:
            yield d, op


def fit_softmax_global(unit: Any, rows: Sequence[Row | dict[str, Any]]
                       ) -> tuple[float, float] | None:
    """(``cuda_core.softmax_step_ns``, ``softmax_vector_bytes_per_clock``) from softmax rows on
    PyTorch's global-memory path (``arch.gpu.kernels.softmax_path`` ``global``) whose time the
    HBM stream does not explain (within 5 %): least squares of the measured time less one
    launch and the DRAM latency against ``softmax_global_s``'s two terms (latency-bound scalar
    steps, rate-bound 16-byte steps; module docstring of ``arch.gpu.kernels``). None with
    fewer than two such rows."""
    s = unit.spec
    a: list[list[float]] = []
    y: list[float] = []
    for d, op in _softmax_rows(rows, "global"):
        body = float(d["ms"]) * 1e-3 - s.kernel_launch_s - s.dram_latency_ns * 1e-9
        stream = (op.input_bytes() + op.output_bytes() + softmax_global_reread_b(s, op)[1]) \
            / s.memory.sustained_bytes_per_s
        if body <= 1.05 * stream:
            continue
        scalar, vector = softmax_steps(op.cols, op.a_format.bytes_per_element)
        per_row = op.rows / s.sm_count
        # body = per_row x [scalar x (dram + 2 step) / 2 + 3 x vector x 16 KiB / (rate x f)]
        a.append([per_row * scalar, per_row * 3 * vector * SOFTMAX_BLOCK_THREADS * 16
                  / s.clock_hz])
        y.append(body - per_row * scalar * s.dram_latency_ns * 1e-9 / 2)
    if len(a) < 2:
        return None
    (step_s, inv_rate), *_ = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)
    return float(step_s * 1e9), float(1.0 / inv_rate)


def fit_softmax_register(unit: Any, rows: Sequence[Row | dict[str, Any]]
                         ) -> tuple[float, float] | None:
    """(``cuda_core.softmax_reg_row_ns``, ``softmax_reg_elem_ns``) from softmax rows on
    PyTorch's register path (``arch.gpu.kernels.softmax_path`` ``register``): least squares of
    the measured time less one launch and the DRAM latency against
    ``softmax_register_s``'s two terms (waves x 1, waves x ILP; waves = ceil(ceil(rows / SMs)
    / resident blocks)). None unless the rows hold two different ILPs."""
    s = unit.spec
    a: list[list[float]] = []
    y: list[float] = []
    for d, op in _softmax_rows(rows, "register"):
        ilp, blocks = softmax_register_blocks(op.cols)
        waves = math.ceil(math.ceil(op.rows / s.sm_count) / blocks)
        a.append([waves * 1e-9, waves * ilp * 1e-9])
        y.append(float(d["ms"]) * 1e-3 - s.kernel_launch_s - s.dram_latency_ns * 1e-9)
    if len({round(x[1] / x[0]) for x in a}) < 2:
        return None
    (row_ns, elem_ns), *_ = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)
    return float(row_ns), float(elem_ns)


def energy_prediction(acc: Any, row: dict[str, Any]) -> tuple[float, float, float] | None:
    """(energy mJ per call, board power W, SM clock MHz) predicted for an ``energy`` row."""

    op = row_op(row)
    if op is None:
        return None
    e = acc.units[0].estimate(op)
    res = evaluate(acc, Workload.single(op))
    return (res.energy_j * 1e3, float(e.details.get("power_w", math.nan)),
            float(e.details.get("clock_mhz", math.nan)))


def model_rows(acc: Any, rows: Iterable[Row | dict[str, Any]]) -> list[dict[str, Any]]:
    """Whole-model rows (``cnn_infer``, ``cnn_train``, ``train_step``) on design ``acc``:
    measured and predicted device and wall time (ms), and the predicted energy of the
    kernels (``device_j``) and over the wall time (``wall_j``: plus the static power while
    the device waits on the host). The wall time uses the ``eager``
    runtime (PyTorch eager, ``arch.gpu.host``); transformers are built with the design's
    attention (``archsim.api.preferred_attention``) and, for ``train_step`` rows (a Hugging
    Face script under autocast), the kernels eager PyTorch runs (``kernels="eager_amp"``)."""

    unit = acc.units[0]
    eager = type(unit)(unit.name, replace(unit.spec, runtime="eager"), unit.node_nm)
    acc_e = type(acc)(acc.name, [eager], acc.technology)
    out = []
    for r in rows:
        d = r.data if isinstance(r, Row) else r
        k = d.get("kind")
        if k == "cnn_infer":
            wl = workload(str(d["model"]), batch=int(d["batch"]), a_format="fp16",
                          w_format="fp16")
        elif k == "cnn_train":
            wl = workload(str(d["model"]), phase="train", batch=int(d["batch"]))
        elif k == "train_step":     # a Hugging Face script under torch.autocast
            amp = str(d.get("dtype", "amp_bf16")).removeprefix("amp_")
            wl = workload(str(d["model"]), phase="train", batch=int(d["batch"]),
                          seq=int(d["seq"]), a_format=amp, kernels="eager_amp",
                          attention=preferred_attention(acc))
        else:
            continue
        res = evaluate(acc_e, wl)
        host = res.extra.get("host", {})
        out.append({"kind": k, "label": f"{d['model']} batch {d['batch']}",
                    "device_ms": res.latency_s * 1e3,
                    "wall_ms": float(host.get("wall_s", res.latency_s)) * 1e3,
                    "device_j": res.energy_j,
                    "wall_j": float(host.get("energy_j", res.energy_j)),
                    "measured_ms": float(d["ms"]),
                    "measured_kernel_ms": float(d["kernel_ms"]) if "kernel_ms" in d else None})
    return out


def fit_core_scale_to_throughput(config: Any, op: Op, tflops: float,
                                 overrides: Sequence[str] = (),
                                 lo: float = 0.5, hi: float = 20.0) -> float:
    """``power.core_energy_scale`` of GPU design ``config`` at which the sustained
    throughput of ``op`` (power-capped, ``TensorCoreGpu.estimate``) equals ``tflops``.

    Used to move a power model to another board of the same die when that board's only
    measurement is a throughput (not an energy): the V-f curve and the per-clock energy are
    transferred, and the per-action energy scale -- the constant that sets the capped clock of
    a dense GEMM -- is solved for. The throughput falls as the scale rises (a higher energy
    per MMA lowers the clock that fits under the limit), so a bisection on ``[lo, hi]``
    (geometric, to 0.1%) finds it; the clock moves in ``clock_step_mhz`` steps, so the answer
    is the middle of the step's interval, not an exact root.
    """

    def tput(scale: float) -> float:
        acc = load(config, [*overrides, f"units[0].power.core_energy_scale={scale!r}"])
        e = acc.units[0].estimate(op)
        return 2.0 * op.macs() / e.latency_s / 1e12

    if not tput(lo) >= tflops >= tput(hi):
        raise ValueError(f"{tflops} TFLOP/s is outside what core_energy_scale in "
                         f"[{lo}, {hi}] gives for {op.name}")
    a, b = lo, hi
    while b / a > 1.001:
        mid = math.sqrt(a * b)
        if tput(mid) >= tflops:
            a = mid
        else:
            b = mid
    return math.sqrt(a * b)
