"""Import the compute of an ONNX model as a :class:`~workloads.graph.Workload`.

Optional: needs the ``onnx`` package (``pip install 'archsim[onnx]'`` or ``pip install
onnx``), imported only when this is used. Shapes come from the model's declared inputs,
initializers (their ``dims``; external weight data is not loaded, so a model whose weights
live in a missing side file still reads) and ONNX shape inference (``onnx.shape_inference.infer_shapes``); a symbolic
dimension (``dim_param``, e.g. ``N`` or ``batch``) takes the ``batch`` argument.

Nodes read (op type -> archsim op):

Parameters: the weights of Conv, weight GEMMs and LayerNorm (``op_parameters``) plus 2
per BatchNormalization channel (scale and shift; biases of Conv/Gemm are not counted).

* ``Conv`` (2-D; dilation 1) -> :class:`Conv2d` (``groups`` kept; a pad ``begin + end``
  becomes the symmetric ``padding = (begin + end) // 2``);
* ``Gemm`` -> :class:`Gemm` ``m x n x k`` (``transA``/``transB`` honoured; B an initializer
  is a weight, otherwise an activation operand);
* ``MatMul`` -> :class:`Gemm`: leading dimensions of A become ``m`` when B is a 2-D weight,
  else the ``batch`` of an activation x activation product (attention);
* element-wise ``Add Sub Mul Div`` -> ``Elementwise(fn=add|mul, inputs=2)``; ``Relu``,
  ``Clip`` -> ``relu``; ``Gelu``/``Erf`` -> ``gelu``; ``Sigmoid Tanh`` -> ``silu``;
  ``MaxPool AveragePool GlobalAveragePool`` -> ``pool`` over the input;
* normalisation ``BatchNormalization`` -> ``Elementwise(fn=mul)`` (inference: a folded
  per-channel scale and shift, as the zoo models it), ``LayerNormalization`` -> ``Norm``,
  ``Softmax`` -> ``Softmax`` (rows = all but the last axis).

Every other node (Reshape, Transpose, Flatten, Concat, Shape, ...) moves no arithmetic:
it is skipped, and its consumers depend on its producers. Element counts use the node's
output (or input for pools) shape; ``rows`` is the product of all but the last dimension.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.models.common import op_parameters
from archsim.workloads.ops import Conv2d, Elementwise, Gemm, Norm, Op, Softmax

__all__ = ["from_onnx", "SUPPORTED_OPS"]

_ELEMENTWISE = {"Add": ("add", 2), "Sub": ("add", 2), "Mul": ("mul", 2), "Div": ("mul", 2),
                "Relu": ("relu", 1), "Clip": ("relu", 1), "Gelu": ("gelu", 1),
                "Erf": ("gelu", 1), "Sigmoid": ("silu", 1), "Tanh": ("silu", 1)}
_POOLS = ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")
SUPPORTED_OPS = ("Conv", "Gemm", "MatMul", "BatchNormalization", "LayerNormalization",
                 "Softmax", *_ELEMENTWISE, *_POOLS)


def _onnx() -> Any:
    try:
        # deferred: optional dependency (pip install 'archsim[onnx]')
        import onnx
    except ImportError:
        raise WorkloadError(Problem("reading ONNX files needs the optional onnx package: "
                                    "pip install onnx (or pip install 'archsim[onnx]')",
                                    "onnx")) from None
    return onnx


def from_onnx(path: str | Path, batch: int = 1, name: str | None = None) -> Workload:
    """The workload of an ONNX model's compute nodes (inference).

    Args:
        path: the ``.onnx`` file.
        batch: the value of symbolic dimensions (usually the batch).
        name: workload name (default: the file's stem).

    Raises:
        WorkloadError: onnx missing, an unreadable file, or a supported node whose shapes
            are unknown or unsupported (naming the node).
    """
    onnx = _onnx()
    p = Path(path)
    try:
        # shapes only: the weights' external data (a separate file that bundled models,
        # e.g. ZigZag's, do not ship) is never read
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - onnx raises DecodeError, OSError, ...
        raise WorkloadError(Problem(f"cannot read ONNX model: {exc}", "", str(p))) from None
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # noqa: BLE001 - onnx's checker raises its own types
        raise WorkloadError(Problem(f"ONNX shape inference failed: {exc}", "", str(p))) from None
    g = model.graph
    shapes: dict[str, list[int]] = {}

    def dims(t: Any) -> list[int]:
        return [d.dim_value if d.HasField("dim_value") else batch
                for d in t.type.tensor_type.shape.dim]

    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            shapes[vi.name] = dims(vi)
    weights = {init.name for init in g.initializer}
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    wl = Workload(name=name or p.stem, phase="inference", batch=batch, seq=1, context=0,
                  family="cnn")
    producers: dict[str, list[str]] = {}     # tensor -> the archsim ops it depends on
    problems: list[Problem] = []
    for i, node in enumerate(g.node):
        nname = node.name or f"{node.op_type}_{i}"
        deps = list(dict.fromkeys(d for x in node.input if x for d in producers.get(x, [])))
        try:
            op = _convert(node, nname, shapes, weights)
        except _Skip as exc:
            problems.append(Problem(str(exc), nname, str(p)))
            continue
        if op is None:
            for out in node.output:
                producers[out] = deps
            continue
        if op.name in wl.graph:
            op = _renamed(op, f"{op.name}_{i}")
        wl.add(op, deps)
        wl.parameters += op_parameters(op)    # Conv, weight GEMM, LayerNorm weights
        if node.op_type == "BatchNormalization":  # folded scale and shift, as the zoo counts
            wl.parameters += 2 * (shapes.get(node.input[1]) or [0])[0]
        for out in node.output:
            producers[out] = [op.name]
    if problems:
        raise WorkloadError(problems)
    if not len(wl):
        raise WorkloadError(Problem(f"no supported compute node (supported: "
                                    f"{', '.join(SUPPORTED_OPS)})", "", str(p)))
    return wl


class _Skip(Exception):
    """A supported node that cannot be converted (the message says why)."""


def _renamed(op: Op, name: str) -> Op:

    return replace(op, name=name)


def _attrs(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.ints:
            out[a.name] = list(a.ints)
        elif a.type == 2:     # INT
            out[a.name] = int(a.i)
        elif a.type == 1:     # FLOAT
            out[a.name] = float(a.f)
    return out


def _shape(shapes: dict[str, list[int]], t: str, nname: str) -> list[int]:
    s = shapes.get(t)
    if not s:
        raise _Skip(f"unknown shape of tensor {t!r} (run shape inference or declare it)")
    return s


def _convert(node: Any, nname: str, shapes: dict[str, list[int]], weights: set[str]
             ) -> Op | None:
    t = node.op_type
    a = _attrs(node)
    if t == "Conv":
        x = _shape(shapes, node.input[0], nname)
        w = _shape(shapes, node.input[1], nname)
        if len(x) != 4:
            raise _Skip(f"Conv: only 2-D convolutions are modelled (input shape {x})")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise _Skip(f"Conv: dilation {a['dilations']} is not modelled")
        st = a.get("strides", [1, 1])
        if st[0] != st[1]:
            raise _Skip(f"Conv: unequal strides {st} are not modelled")
        pads = a.get("pads", [0, 0, 0, 0])
        if a.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
            out = _shape(shapes, node.output[0], nname)
            pad = max(0, ((out[2] - 1) * st[0] + w[2] - x[2]) // 2)
        else:
            pad = (pads[0] + pads[2]) // 2
        return Conv2d(name=nname, n=x[0], c=x[1], h=x[2], w=x[3], k=w[0], r=w[2], s=w[3],
                      stride=st[0], padding=pad, groups=a.get("group", 1), layer=nname)
    if t == "Gemm":
        sa = _shape(shapes, node.input[0], nname)
        sb = _shape(shapes, node.input[1], nname)
        m, k = (sa[1], sa[0]) if a.get("transA", 0) else (sa[0], sa[1])
        n = sb[0] if a.get("transB", 0) else sb[1]
        return Gemm(name=nname, m=m, n=n, k=k, b_is_weight=node.input[1] in weights,
                    role="fc", layer=nname)
    if t == "MatMul":
        sa = _shape(shapes, node.input[0], nname)
        sb = _shape(shapes, node.input[1], nname)
        if len(sa) < 2 or len(sb) < 2:
            raise _Skip(f"MatMul: 1-D operands are not modelled ({sa} x {sb})")
        if node.input[1] in weights and len(sb) == 2:
            return Gemm(name=nname, m=math.prod(sa[:-1]), n=sb[1], k=sa[-1], role="fc",
                        layer=nname)
        batch = math.prod(sa[:-2])
        return Gemm(name=nname, m=sa[-2], n=sb[-1], k=sa[-1], batch=batch,
                    b_is_weight=node.input[1] in weights, layer=nname)
    if t in _ELEMENTWISE or t in ("BatchNormalization", "LayerNormalization", "Softmax"):
        out = _shape(shapes, node.output[0], nname)
        rows, cols = math.prod(out[:-1]) if len(out) > 1 else 1, out[-1]
        if t == "BatchNormalization":
            return Elementwise(name=nname, rows=rows, cols=cols, fn="mul", layer=nname,
                               role="norm")
        if t == "LayerNormalization":
            return Norm(name=nname, rows=rows, cols=cols, layer=nname)
        if t == "Softmax":
            return Softmax(name=nname, rows=rows, cols=cols, layer=nname)
        fn, inputs = _ELEMENTWISE[t]
        inputs = min(inputs, sum(1 for x in node.input if x and x not in weights) or 1)
        return Elementwise(name=nname, rows=rows, cols=cols, fn=fn, inputs=max(1, inputs),
                           layer=nname)
    if t in _POOLS:
        x = _shape(shapes, node.input[0], nname)
        return Elementwise(name=nname, rows=math.prod(x[:2]), cols=math.prod(x[2:]) or 1,
                           fn="pool", layer=nname, role="pool")
    return None
