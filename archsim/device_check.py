"""Score a GPU design against every class of one measured file: a check of carried mechanisms.

``archsim.silicon.score`` scores the latency classes a calibration is fitted on. A GPU whose
constants were carried from another card (``gpu/h200`` from the H100's fit) is checked on
everything its file holds, per class, and nothing is fitted here:

* the latency classes of :func:`archsim.silicon.row_class` (GEMMs by format and small M, bmm,
  vector, copy), with attention split into ``attn_prefill`` and ``attn_decode``;
* ``protocol``: CUDA-graph replay of one op (``graph_ms``), predicted back to back
  (``archsim.kernel_tables.back_to_back``); ``launch``: the graph replay of one-element
  ``add_`` kernels (``graph_us_per_kernel``) as one such kernel;
* ``train_kernels`` / ``train_wall``: whole training steps (``train_step``, ``cnn_train``),
  the profiler's kernel sum against the predicted device time and the wall against the
  launch-queue wall (:func:`archsim.silicon.model_rows`);
* ``energy``: board energy per call of the ``energy`` rows (kernels: ``energy_prediction``;
  training steps: the wall energy of ``model_rows``), and ``clock``: the sustained SM clock
  of the kernel rows.

Errors are ``predicted / measured - 1``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from archsim.kernel_tables import back_to_back
from archsim.silicon import (
    ClassScore,
    Row,
    energy_prediction,
    model_rows,
    predict_ms,
    row_class,
    row_op,
)
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Elementwise

__all__ = ["CHECK_CLASSES", "check_classes"]

#: Every class :func:`check_classes` may report, in the order of docs/gpu.md's table.
CHECK_CLASSES = ("gemm_bf16", "gemm_fp16", "gemm_fp8", "gemm_int8", "gemm_small_m", "bmm",
                 "attn_prefill", "attn_decode", "vector", "copy", "protocol", "launch",
                 "train_kernels", "train_wall", "energy", "clock")


def _protocol_op_row(d: dict[str, Any]) -> dict[str, Any] | None:
    """The latency row a ``protocol`` row times (None for the one-element add)."""
    if d.get("op") == "gemm":
        return {"kind": "gemm", **{k: d[k] for k in ("m", "n", "k", "dtype")}}
    if "rows" in d:
        return {"kind": "vector", **{k: d[k] for k in ("op", "rows", "cols", "dtype")}}
    return None


def _graph_ms(b2b: Any, d: dict[str, Any]) -> float | None:
    """Predicted per-call time (ms) of an op replayed from a CUDA graph."""
    lat = _protocol_op_row(d)
    op = (Elementwise(name="add1", rows=1, cols=1, fn="add", inputs=2,
                      a_format=FORMATS["fp32"]) if lat is None else row_op(lat))
    if op is None:
        return None
    return float(b2b.estimate(op).latency_s * 1e3)


def check_classes(acc: Any, rows: Iterable[Row | dict[str, Any]]) -> dict[str, ClassScore]:
    """Per-class signed errors of design ``acc`` (one tensor-core GPU) on measured ``rows``."""
    unit = acc.units[0]
    b2b = back_to_back(unit)
    errs: dict[str, list[float]] = {}

    def add(cls: str, pred: float | None, meas: float) -> None:
        if pred is not None:
            errs.setdefault(cls, []).append(pred / meas - 1.0)

    data = [r.data if isinstance(r, Row) else r for r in rows]
    for d in data:
        k = d.get("kind")
        cls = row_class(d)
        if cls and "ms" in d:
            if cls == "attention":
                cls = str(k)
            add(cls, predict_ms(unit, d), float(d["ms"]))
        elif k == "protocol":
            add("protocol", _graph_ms(b2b, d), float(d["graph_ms"]))
        elif k == "launch":
            add("launch", _graph_ms(b2b, {"op": "add1"}), float(d["graph_us_per_kernel"]) / 1e3)
        elif k == "energy" and row_op(d) is not None:
            mj, _, mhz = energy_prediction(acc, d) or (None, None, None)
            add("energy", mj, float(d["mj_per_call"]))
            add("clock", mhz, float(d["sm_mhz"]))
    steps = [d for d in data if d.get("kind") in ("train_step", "cnn_train")]
    for m, d in zip(model_rows(acc, steps), steps, strict=True):
        add("train_wall", m["wall_ms"], float(d["ms"]))
        if d.get("kernel_ms"):
            add("train_kernels", m["device_ms"], float(d["kernel_ms"]))
        e = next((x for x in data if x.get("kind") == "energy" and x.get("op") == d["kind"]
                  and x.get("model") == d["model"]), None)
        if e is not None:
            add("energy", m["wall_j"] * 1e3, float(e["mj_per_call"]))
    return {c: ClassScore(c, tuple(errs[c])) for c in CHECK_CLASSES if c in errs}
