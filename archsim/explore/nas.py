"""Candidate networks for co-search: parameterised spaces -> :class:`workloads.Workload`.

A *network description* is a plain JSON-able dict, so that it can travel to a worker, be
hashed into the result store's key and be looked up in an accuracy table:

* ``{"net": "cnn", "image": 32, "classes": 10, "stages": 3, "depth": 2, "width": 32,
  "kernel": 3, "expansion": 4}``: a CIFAR-style residual network. A 3x3 stem convolution
  to ``width`` channels, then ``stages`` stages of ``depth`` blocks each; stage ``s`` has
  ``width * 2**s`` channels and halves the feature map at its first block (except stage 0).
  A block is, with ``expansion == 1``, a ResNet basic block (two ``kernel x kernel``
  convolutions; He et al. 2016); with ``expansion > 1`` a MobileNetV2 inverted residual
  (1x1 expansion to ``expansion x`` channels, ``kernel x kernel`` depthwise convolution,
  1x1 projection; Sandler et al. 2018). Batch norm, ReLU, residual adds, a 1x1 projection
  shortcut where the shape changes, global average pooling and a ``classes``-way fully
  connected layer, built with the zoo's :class:`workloads.models.cnn.ConvNetBuilder` (the
  same ops as its ResNet/MobileNetV2).
* ``{"net": "transformer", "layers": 4, "d_model": 256, "heads": 4, "ffn": 1024,
  "seq": 128, "vocab": 30522, "classes": 2}``: a BERT-style encoder built by the zoo's
  :func:`workloads.models.transformer.build_transformer` (inference over ``seq`` tokens).
* ``{"net": "hf", "file": "config.json"}`` and ``{"net": "onnx", "file": "model.onnx"}``.

A *network space* maps each parameter to a value or a list of values; the candidates are
the product (see :func:`expand_space`).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.hf import from_hf_config
from archsim.workloads.models.cnn import ConvNetBuilder
from archsim.workloads.models.common import GraphBuilder
from archsim.workloads.models.transformer import TransformerShape, build_transformer
from archsim.workloads.onnx_import import from_onnx
from archsim.workloads.ops import Op

__all__ = ["FAMILIES", "CNN_PARAMS", "TRANSFORMER_PARAMS", "build_network", "expand_space",
           "network_label", "check_network"]

#: parameter -> (default, smallest allowed value); kernel sizes must also be odd.
CNN_PARAMS: dict[str, tuple[int | None, int]] = {
    "image": (32, 8), "classes": (10, 1), "stages": (3, 1), "depth": (None, 1),
    "width": (None, 1), "kernel": (3, 1), "expansion": (1, 1)}
TRANSFORMER_PARAMS: dict[str, tuple[int | None, int]] = {
    "layers": (None, 1), "d_model": (None, 1), "heads": (None, 1), "ffn": (None, 1),
    "seq": (128, 1), "vocab": (30522, 1), "classes": (2, 1)}
FAMILIES = ("cnn", "transformer", "hf", "onnx")


def expand_space(family: str, space: dict[str, Any]) -> list[dict[str, Any]]:
    """Every network of a space: the product of the listed values, defaults filled in.

    ``space`` maps each parameter to a scalar or a list of scalars (validated by the spec
    loader; :func:`check_network` checks each result)."""
    table = CNN_PARAMS if family == "cnn" else TRANSFORMER_PARAMS
    keys = list(table)
    vals = []
    for k in keys:
        v = space.get(k, table[k][0])
        vals.append(list(v) if isinstance(v, (list, tuple)) else [v])
    return [{"net": family, **dict(zip(keys, combo))} for combo in itertools.product(*vals)]


def check_network(d: dict[str, Any]) -> str | None:
    """Why a cnn/transformer description cannot be built, or None."""
    fam = d.get("net")
    table = CNN_PARAMS if fam == "cnn" else TRANSFORMER_PARAMS
    for k, (_, lo) in table.items():
        v = d.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            return f"{k}: expected an int >= {lo}, got {v!r}"
    if fam == "cnn":
        if d["kernel"] % 2 == 0:
            return f"kernel: expected an odd size, got {d['kernel']}"
        if d["image"] >> (d["stages"] - 1) < 1:
            return f"image {d['image']} is too small for {d['stages']} stride-2 stages"
    elif d["d_model"] % d["heads"]:
        return f"d_model {d['d_model']} is not a multiple of heads {d['heads']}"
    return None


def network_label(d: dict[str, Any]) -> str:
    """A short stable name: ``cnn-d2w32k3e4`` / ``tf-l4d256h4f1024`` / the file name."""
    fam = d["net"]
    if fam == "cnn":
        s = f"cnn-d{d['depth']}w{d['width']}k{d['kernel']}e{d['expansion']}"
        if d.get("stages", 3) != 3:
            s += f"s{d['stages']}"
        return s
    if fam == "transformer":
        return f"tf-l{d['layers']}d{d['d_model']}h{d['heads']}f{d['ffn']}"
    return Path(str(d["file"])).name


def build_network(d: dict[str, Any], batch: int = 1) -> Workload:
    """The workload of one network description (inference, ``batch`` samples).

    Raises:
        WorkloadError: a description that cannot be built (naming the parameter).
    """
    fam = d.get("net")
    if fam in ("cnn", "transformer"):
        why = check_network(d)
        if why:
            raise WorkloadError(Problem(why, network_label(d) if "depth" in d or "layers" in d
                                        else str(fam)))
    if fam == "cnn":
        return _cnn(d, batch)
    if fam == "transformer":

        shape = TransformerShape(name=network_label(d), kind="encoder", layers=d["layers"],
                                 d_model=d["d_model"], heads=d["heads"], ffn=d["ffn"],
                                 vocab=d["vocab"], context=d["seq"], default_seq=d["seq"])
        return build_transformer(shape, "inference", batch, d["seq"])
    if fam == "hf":

        return from_hf_config(d["file"], batch=batch, seq=d.get("seq"))
    if fam == "onnx":

        return from_onnx(d["file"], batch=batch)
    raise WorkloadError(Problem(f"unknown network family {fam!r}; expected one of "
                                f"{', '.join(FAMILIES)}", "net"))


def _cnn(d: dict[str, Any], batch: int) -> Workload:
    w = Workload(name=network_label(d), phase="inference", batch=batch, seq=1, context=0,
                 family="cnn")
    net = ConvNetBuilder(GraphBuilder(w), batch, hw=d["image"])
    x = net.conv("stem", None, d["width"], 3, layer="stem")
    kern, exp = d["kernel"], d["expansion"]
    for s in range(d["stages"]):
        width = d["width"] * 2 ** s
        for i in range(d["depth"]):
            L = f"s{s}.b{i}"
            stride = 2 if s > 0 and i == 0 else 1
            c_in, hw_in = net.c, net.hw
            if exp == 1:
                y = net.conv(f"{L}.conv1", x, width, kern, stride, layer=f"{L}.conv1")
                y = net.conv(f"{L}.conv2", y, width, kern, relu=False, layer=f"{L}.conv2")
            else:
                hidden = c_in * exp
                y = net.conv(f"{L}.expand", x, hidden, 1, layer=f"{L}.expand")
                y = net.conv(f"{L}.dw", y, hidden, kern, stride, groups=hidden,
                             layer=f"{L}.dw")
                y = net.conv(f"{L}.project", y, width, 1, relu=False, layer=f"{L}.project")
            short: Op = x
            if stride != 1 or c_in != width:
                short = net.projection(f"{L}.shortcut", x, c_in, hw_in, width, stride,
                                       layer=f"{L}.shortcut")
            x = net.add(f"{L}.add", y, short, L)
            if exp == 1:
                x = net.relu(f"{L}.relu", x, L)
    x = net.pool("avgpool", x, 1)
    net.fc("fc", x, d["classes"], net.c)
    return w
