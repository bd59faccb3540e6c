"""Convolutional networks of the zoo, as in torchvision (224x224 RGB input, 1000 classes).

* ResNet-18/50 (He et al. 2016; torchvision "v1.5": the stride of a bottleneck sits on its
  3x3 convolution), batch norm after every convolution, 1x1 projection shortcuts where the
  shape changes;
* VGG-16 (Simonyan & Zisserman 2015, configuration D, no batch norm): 13 conv + 3 fc;
* MobileNetV2 1.0 (Sandler et al. 2018): inverted residuals, depthwise 3x3 convolutions as
  ``groups == channels``, ReLU6 as ``relu``.

Cheap ops: batch norm is an ``Elementwise(fn="mul")`` over the output (inference: a folded
per-channel scale and shift; 2 parameters per channel, gain and shift, the running
statistics are buffers, not parameters); ReLU ``Elementwise(fn="relu")``; max/avg pooling
``Elementwise(fn="pool")`` over the pooled input. Convolutions carry no bias except in VGG.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.models.common import GraphBuilder, to_training
from archsim.workloads.models.transformer import resolve_phase
from archsim.workloads.ops import Conv2d, Elementwise, Gemm, Op

__all__ = ["CNN_BUILDERS", "ConvNetBuilder", "build_cnn"]


@dataclass
class ConvNetBuilder:
    """Running state while a CNN is built: builder, batch, current tensor (C, H, W).

    Each method adds ops after the given producer and updates the current shape; the zoo's
    CNNs below and the co-search networks of ``archsim.explore.nas`` are built with it.
    """

    b: GraphBuilder
    n: int
    c: int = 3
    hw: int = 224

    def conv(self, name: str, x: Op | None, k: int, r: int, stride: int = 1,
             groups: int = 1, bias: bool = False, bn: bool = True, relu: bool = True,
             layer: str = "") -> Op:
        """conv -> [bn] -> [relu]; updates the current shape; returns the last op.

        Batch norm is ``Elementwise(fn="mul")`` with 2 parameters per channel (a folded
        per-channel scale and shift); padding is ``r // 2`` (same size at stride 1).
        """
        op = Conv2d(name=name, n=self.n, c=self.c, h=self.hw, w=self.hw, k=k, r=r, s=r,
                    stride=stride, padding=r // 2, groups=groups, layer=layer)
        out: Op = self.b.add(op, [x] if x else [], bias=k if bias else 0)
        self.c, self.hw = k, op.p
        if bn:
            out = self.b.add(Elementwise(name=f"{name}.bn", rows=self.n * self.hw * self.hw,
                                         cols=k, fn="mul", layer=layer, role="norm"), [out],
                             extra=2 * k)
        if relu:
            out = self.relu(f"{name}.relu", out, layer)
        return out

    def projection(self, name: str, x: Op, c_in: int, hw_in: int, k: int, stride: int,
                   layer: str = "") -> Op:
        """A 1x1 projection shortcut (conv -> bn, no relu) of ``x``, a tensor of ``c_in``
        channels and ``hw_in`` x ``hw_in`` pixels taken before the block's main branch;
        the current shape (the main branch's output) is kept."""
        c_out, hw_out = self.c, self.hw
        self.c, self.hw = c_in, hw_in
        out = self.conv(name, x, k, 1, stride=stride, relu=False, layer=layer)
        self.c, self.hw = c_out, hw_out
        return out

    def add(self, name: str, y: Op, x: Op, layer: str = "") -> Op:
        """Residual add of two tensors of the current shape."""
        return self.b.add(Elementwise(name=name, rows=self.n * self.hw * self.hw, cols=self.c,
                                      fn="add", inputs=2, layer=layer, role="residual"), [y, x])

    def relu(self, name: str, x: Op, layer: str = "") -> Op:
        return self.b.add(Elementwise(name=name, rows=self.n * self.hw * self.hw, cols=self.c,
                                      fn="relu", layer=layer, role="act"), [x])

    def pool(self, name: str, x: Op, out_hw: int) -> Op:
        """Pooling reads the whole input once; the spatial size becomes ``out_hw``."""
        op = self.b.add(Elementwise(name=name, rows=self.n * self.c, cols=self.hw * self.hw,
                                    fn="pool", role="pool"), [x])
        self.hw = out_hw
        return op

    def fc(self, name: str, x: Op, n_out: int, k: int) -> Op:
        return self.b.add(Gemm(name=name, m=self.n, n=n_out, k=k, role="fc", layer=name),
                          [x], bias=n_out)


def _resnet(net: ConvNetBuilder, blocks: tuple[int, ...], bottleneck: bool) -> None:
    x = net.conv("conv1", None, 64, 7, stride=2, layer="stem")
    x = net.pool("maxpool", x, (net.hw + 2 - 3) // 2 + 1)
    widths = (64, 128, 256, 512)
    for li, (nblocks, width) in enumerate(zip(blocks, widths), start=1):
        for bi in range(nblocks):
            L = f"layer{li}.{bi}"
            stride = 2 if li > 1 and bi == 0 else 1
            c_in, hw_in = net.c, net.hw
            out_c = width * 4 if bottleneck else width
            if bottleneck:
                y = net.conv(f"{L}.conv1", x, width, 1, layer=L)
                y = net.conv(f"{L}.conv2", y, width, 3, stride=stride, layer=L)
                y = net.conv(f"{L}.conv3", y, out_c, 1, relu=False, layer=L)
            else:
                y = net.conv(f"{L}.conv1", x, width, 3, stride=stride, layer=L)
                y = net.conv(f"{L}.conv2", y, width, 3, relu=False, layer=L)
            short: Op = x
            if stride != 1 or c_in != out_c:
                short = net.projection(f"{L}.downsample", x, c_in, hw_in, out_c, stride, L)
            x = net.relu(f"{L}.relu", net.add(f"{L}.add", y, short, L), L)
    x = net.pool("avgpool", x, 1)
    net.fc("fc", x, 1000, net.c)


def _resnet18(net: ConvNetBuilder) -> None:
    _resnet(net, (2, 2, 2, 2), bottleneck=False)


def _resnet50(net: ConvNetBuilder) -> None:
    _resnet(net, (3, 4, 6, 3), bottleneck=True)


def _vgg16(net: ConvNetBuilder) -> None:
    cfg = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M")
    x = net.conv("features.conv0", None, 64, 3, bias=True, bn=False, layer="features.conv0")
    i = 1
    for item in cfg[1:]:
        if item == "M":
            x = net.pool(f"features.pool{i}", x, net.hw // 2)
        else:
            x = net.conv(f"features.conv{i}", x, int(item), 3, bias=True, bn=False,
                         layer=f"features.conv{i}")
            i += 1
    k = net.c * net.hw * net.hw  # 512 x 7 x 7 = 25088
    for j, n_out in enumerate((4096, 4096, 1000)):
        x = net.fc(f"classifier.fc{j}", x, n_out, k)
        if j < 2:
            x = net.b.add(Elementwise(name=f"classifier.relu{j}", rows=net.n, cols=n_out,
                                      fn="relu", layer=f"classifier.fc{j}", role="act"), [x])
        k = n_out


def _mobilenet_v2(net: ConvNetBuilder) -> None:
    x = net.conv("features.0", None, 32, 3, stride=2, layer="features.0")
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))
    idx = 1
    for t, c, n, s in settings:
        for j in range(n):
            L = f"features.{idx}"
            stride = s if j == 0 else 1
            c_in = net.c
            hidden = c_in * t
            y = x
            if t != 1:
                y = net.conv(f"{L}.expand", y, hidden, 1, layer=L)
            y = net.conv(f"{L}.dw", y, hidden, 3, stride=stride, groups=hidden, layer=L)
            y = net.conv(f"{L}.project", y, c, 1, relu=False, layer=L)
            if stride == 1 and c_in == c:
                y = net.add(f"{L}.add", y, x, L)
            x = y
            idx += 1
    x = net.conv(f"features.{idx}", x, 1280, 1, layer=f"features.{idx}")
    x = net.pool("avgpool", x, 1)
    net.fc("classifier", x, 1000, net.c)


CNN_BUILDERS = {"resnet18": _resnet18, "resnet50": _resnet50, "vgg16": _vgg16,
                "mobilenet-v2": _mobilenet_v2}


def build_cnn(name: str, phase: str | None = None, batch: int = 1) -> Workload:
    """The op graph of a zoo CNN.

    Args:
        name: a key of ``CNN_BUILDERS``.
        phase: ``inference`` (default) or ``train`` (forward, backward, momentum-SGD update).
        batch: images per step.

    Raises:
        WorkloadError: unknown phase or batch < 1.
    """
    ph = resolve_phase(name, phase, ("inference", "train"))
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise WorkloadError(Problem(f"expected an int >= 1, got {batch!r}", "batch"))
    w = Workload(name=name, phase=ph, batch=batch, seq=1, context=0, family="cnn")
    b = GraphBuilder(w)
    CNN_BUILDERS[name](ConvNetBuilder(b, batch))
    if ph == "train":
        return to_training(w, b.params, b.tied, "sgd")
    return w
