"""Operators: the unit of work every hardware family estimates and simulates.

Ops are frozen dataclasses with integer shapes and number formats. Matrix ops (``Gemm``,
``Conv2d``) count multiply-accumulates (MACs; FLOPs = 2 x MACs); vector ops (``Softmax``,
``Norm``, ``Elementwise``) count elementary operations per element from the table
``VECTOR_OPS_PER_ELEMENT`` (a documented approximation of the instruction count of a
straightforward kernel; the units turn it into cycles on their vector hardware).

Training passes: a forward op has ``pass_="fwd"``; the backward passes of a matrix op are the
same op with ``pass_="bwd_data"`` (gradient w.r.t. the input) or ``pass_="bwd_weight"``
(gradient w.r.t. the weights). ``Gemm.as_pass`` / ``Conv2d.as_gemm`` give their GEMM
shapes (im2col view), so any unit that runs GEMMs can run training.

Tags (:mod:`workloads.tags`): every op carries its training pass (``pass_``), the block it
belongs to (``block``) and its ``role``; code selects ops by these, never by name. ``layer``
stays a free-form group label for reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.formats import FORMATS, NumberFormat
from archsim.workloads.routing import device_loads, parse_routing
from archsim.workloads.tags import (
    ATTENTION_CORE_ROLES,
    EXPERT_ROLES,
    PASSES,
    ROLES,
    PassGroup,
    pass_group,
)

__all__ = [
    "Sparsity", "Op", "Gemm", "Conv2d", "Softmax", "Norm", "Elementwise", "Embedding",
    "AllReduce", "VectorOp", "VECTOR_OPS_PER_ELEMENT", "PASSES", "MATRIX_OPS", "Attention",
    "ROLES", "ATTENTION_CORE_ROLES", "EXPERT_ROLES", "PassGroup", "pass_group", "FusedMoE",
    "MOE_BACKENDS", "moe_backend", "ATTENTION_KERNELS", "ALLREDUCE_MIN_BITS", "ALLREDUCE_IMPLS",
]

#: How an ``Attention`` call is made (``Attention.kernel``): ``sdpa`` (one call on contiguous
#: K/V) or ``paged`` (a serving framework's paged-KV backend).
ATTENTION_KERNELS = ("sdpa", "paged")

#: Narrowest element a tensor-parallel all-reduce sums: a quantised linear layer (fp8, int8,
#: int4 activations) quantises its *input* and writes its output in 16 bits, and the
#: frameworks all-reduce that 16-bit residual stream (vLLM's ``tensor_model_parallel_all_reduce``
#: of the row-parallel layer's bf16 output, NCCL ``ncclBfloat16``; TensorRT-LLM and SGLang
#: likewise); only a wider stream (fp32) reduces wider.
ALLREDUCE_MIN_BITS = 16

#: Implementations of a one-node all-reduce (``AllReduce.impl``): NCCL, vLLM's custom
#: all-reduce replayed in a CUDA graph or called eagerly, or ``auto``: what serving engines
#: do in CUDA graphs -- their custom kernel for the messages it serves faster, NCCL above
#: (vLLM's, SGLang's and TensorRT-LLM's size cutoffs; ``arch.collective``).
ALLREDUCE_IMPLS = ("nccl", "custom-graph", "custom-eager", "auto")


#: Elementary operations per element of a vector op (exp/div/sqrt count as one special-
#: function op each). softmax: max, sub, exp, sum, div = 5 (Milakov & Gimelshein 2018,
#: online softmax); layernorm: mean, sub, square, sum, rsqrt, mul, scale, shift = 8;
#: rmsnorm: square, sum, rsqrt, mul, scale = 5; gelu (tanh form) ~ 8; silu = x*sigmoid(x) ~ 4.
VECTOR_OPS_PER_ELEMENT: dict[str, int] = {
    "softmax": 5, "layernorm": 8, "rmsnorm": 5, "add": 1, "mul": 1, "relu": 1,
    "gelu": 8, "silu": 4, "swiglu": 5, "copy": 0, "sgd": 2, "adam": 10, "pool": 1,
}


#: How a sparse operand's non-zeros are stored (:class:`Sparsity`).
SPARSE_ENCODINGS = ("index", "bitmap")


@dataclass(frozen=True)
class Sparsity:
    """Sparsity of one operand.

    Attributes:
        n, m: N:M structured sparsity (``n`` non-zeros in every group of ``m``); 0:0 = none.
        density: additional unstructured density in (0, 1] (1.0 = dense).
        encoding: how the non-zeros are stored: ``index`` (each non-zero with its index:
            ``ceil(log2 M)`` bits for N:M, 16 bits unstructured, as CSR / Flash-LLM's
            tiled-CSL) or ``bitmap`` (one presence bit per element plus the non-zero
            values, SpInfer's TCA-BME): :meth:`stored_bytes_per_element`.
    """

    n: int = 0
    m: int = 0
    density: float = 1.0
    encoding: str = "index"

    def __post_init__(self) -> None:
        if (self.n == 0) != (self.m == 0) or self.n < 0 or self.n > self.m:
            raise WorkloadError(Problem(f"invalid N:M sparsity {self.n}:{self.m}; need 0 < N <= M",
                                        "sparsity"))
        if not 0.0 < self.density <= 1.0:
            raise WorkloadError(Problem(f"density must be in (0, 1], got {self.density}", "sparsity"))
        if self.encoding not in SPARSE_ENCODINGS:
            raise WorkloadError(Problem(f"expected one of {', '.join(SPARSE_ENCODINGS)}, got "
                                        f"{self.encoding!r}", "sparsity.encoding"))

    @property
    def structured(self) -> bool:
        return self.m > 0

    @property
    def fraction(self) -> float:
        """Fraction of non-zero elements."""
        nm = self.n / self.m if self.m else 1.0
        return nm * self.density

    def stored_bytes_per_element(self, bpe: float) -> float:
        """Bytes per element of the dense shape as stored, for elements of ``bpe`` bytes:
        ``index``: ``fraction * (bpe + index bits / 8)``; ``bitmap``:
        ``fraction * bpe + 1/8``; dense: ``bpe``."""
        frac = self.fraction
        if frac >= 1.0:
            return bpe
        if self.encoding == "bitmap":
            return frac * bpe + 1 / 8
        idx_bits = math.ceil(math.log2(self.m)) if self.m else 16
        return frac * (bpe + idx_bits / 8.0)

    @classmethod
    def parse(cls, text: str) -> Sparsity:
        """Parse ``"2:4"`` (N:M) or ``"0.3"`` (unstructured density)."""
        try:
            if ":" in text:
                n, m = (int(x) for x in text.split(":"))
                return cls(n=n, m=m)
            return cls(density=float(text))
        except ValueError:
            raise WorkloadError(Problem(
                f"invalid sparsity {text!r}; expected N:M (e.g. 2:4) or a density in (0, 1]",
                "sparsity")) from None

    def __str__(self) -> str:
        parts = [f"{self.n}:{self.m}"] if self.m else []
        if self.density < 1.0:
            parts.append(f"density={self.density:g}")
        return ",".join(parts) or "dense"


_FP16 = FORMATS["fp16"]
_FP32 = FORMATS["fp32"]


@dataclass(frozen=True, kw_only=True)
class Op:
    """Base of all ops.

    Attributes:
        name: unique name within a workload (``blocks.3.attn.qkv``).
        a_format: activation (input/output) format.
        w_format: weight format (for ops with weights).
        acc_format: accumulator format.
        pass_: training pass, one of ``PASSES`` (tag).
        layer: a group label for reports (``blocks.3``, ``embed``, ``layer1.0``); not a tag.
        block: index of the repeated block the op belongs to; None outside blocks (tag).
        role: what the op is in its network, a key of ``ROLES`` (tag; "" = unknown).
    """

    kind: ClassVar[str] = "op"
    name: str
    a_format: NumberFormat = _FP16
    w_format: NumberFormat = _FP16
    acc_format: NumberFormat = _FP32
    pass_: str = "fwd"
    layer: str = ""
    block: int | None = None
    role: str = ""

    def __post_init__(self) -> None:
        if self.pass_ not in PASSES:
            raise WorkloadError(Problem(f"pass must be one of {PASSES}, got {self.pass_!r}",
                                        self.name))
        if self.role not in ROLES:
            raise WorkloadError(Problem(f"role must be one of {', '.join(map(repr, ROLES))}, "
                                        f"got {self.role!r}", self.name))
        if self.block is not None and (not isinstance(self.block, int)
                                       or isinstance(self.block, bool) or self.block < 0):
            raise WorkloadError(Problem(f"block must be None or an int >= 0, got "
                                        f"{self.block!r}", self.name))
        for f in self._positive_fields():
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise WorkloadError(Problem(f"{f} must be an int >= 1, got {v!r}", self.name))

    def _positive_fields(self) -> tuple[str, ...]:
        return ()

    # --- work and traffic ---------------------------------------------------------------
    def macs(self) -> int:
        """Dense multiply-accumulates (0 for vector ops)."""
        return 0

    def effective_macs(self) -> float:
        """MACs on non-zero weights (== macs() unless the weights are sparse)."""
        return float(self.macs())

    def vector_ops(self) -> int:
        """Elementary vector operations (0 for matrix ops)."""
        return 0

    def flops(self) -> int:
        """Floating-point (or integer) operations: 2 x MACs + vector ops."""
        return 2 * self.macs() + self.vector_ops()

    def input_bytes(self) -> float:
        """Bytes of activation inputs read once."""
        return 0.0

    def weight_bytes(self) -> float:
        """Bytes of weights (including quantisation scales) read once."""
        return 0.0

    def resident_weight_bytes(self) -> float:
        """Bytes of weights the op's device must hold (``Workload.resident_bytes``): those
        it reads, plus any it holds without reading this call (idle experts)."""
        return self.weight_bytes()

    def output_bytes(self) -> float:
        """Bytes of outputs written once."""
        return 0.0

    def min_bytes(self) -> float:
        """Compulsory off-chip traffic: every operand read once, output written once."""
        return self.input_bytes() + self.weight_bytes() + self.output_bytes()

    @property
    def is_matrix(self) -> bool:
        return self.macs() > 0

    @property
    def pass_group(self) -> PassGroup:
        """``forward``, ``backward`` or ``optimizer`` (from ``pass_``)."""
        return pass_group(self.pass_)

    def with_formats(self, a_format: NumberFormat | None = None,
                     w_format: NumberFormat | None = None) -> Op:
        """A copy with other activation and/or weight formats."""
        if a_format is None and w_format is None:
            return self
        return replace(self, a_format=self.a_format if a_format is None else a_format,
                       w_format=self.w_format if w_format is None else w_format)

    def describe(self) -> str:
        """Short shape string for tables."""
        return ""


@dataclass(frozen=True, kw_only=True)
class Gemm(Op):
    """Batched matrix multiply ``C[b, m, n] = A[b, m, k] @ B[b, k, n]``.

    ``A`` is the activation operand. ``B`` is a weight when ``b_is_weight`` (linear layers),
    otherwise a second activation (attention QK^T and AV). ``b_shared`` batch entries share
    one ``B`` matrix: grouped-query attention with ``h`` query heads and ``kv`` key/value
    heads has ``b_shared = h / kv``.

    Attributes:
        m, n, k: GEMM dimensions (m = tokens x ..., n = output features, k = reduction).
        batch: independent GEMMs (e.g. batch x heads for attention).
        b_is_weight: operand B holds weights (format ``w_format``) rather than activations.
        b_shared: consecutive batch entries sharing one B matrix (GQA group size).
        group_size: weight-quantisation group along K (0 = per-channel / none); each group
            carries one ``a_format``-sized scale (and zero point for integer formats).
        w_sparsity: sparsity of operand B (weights).
        held: weight B matrices held resident besides the ``batch`` read (the experts of a
            device that no token reached this call; counted by ``resident_weight_bytes``
            only, never read).
        group_span: the K the group scales cover (0: ``k``). GPTQ act-order under tensor
            parallelism: a row-parallel shard (``k = K / tp``) keeps the scales of every group
            of the whole K (vLLM repeats them on all ranks), ``group_span = K``.
        permute_a: the input's columns are permuted before the GEMM (act-order: the rows of
            the pre-permuted weights): one more read and write of A.

    Its ``role`` (``qkv``, ``proj``, ``ffn_up``, ``qk``, ``av``, ``lm_head``, ``conv`` ...)
    tells the units which GEMMs of attention they may fuse (``qk``, ``av``).
    """

    kind: ClassVar[str] = "gemm"
    m: int
    n: int
    k: int
    batch: int = 1
    b_is_weight: bool = True
    b_shared: int = 1
    group_size: int = 0
    w_sparsity: Sparsity = field(default_factory=Sparsity)
    held: int = 0
    group_span: int = 0
    permute_a: bool = False

    def _positive_fields(self) -> tuple[str, ...]:
        return ("m", "n", "k", "batch", "b_shared")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch % self.b_shared:
            raise WorkloadError(Problem(
                f"batch {self.batch} is not a multiple of b_shared {self.b_shared}", self.name))

    def macs(self) -> int:
        return self.batch * self.m * self.n * self.k

    def effective_macs(self) -> float:
        return self.macs() * (self.w_sparsity.fraction if self.b_is_weight else 1.0)

    @property
    def b_format(self) -> NumberFormat:
        return self.w_format if self.b_is_weight else self.a_format

    def input_bytes(self) -> float:
        a = self.batch * self.m * self.k * self.a_format.bytes_per_element
        if not self.b_is_weight:
            a += self.b_bytes()
        return a

    def b_bytes(self) -> float:
        """Bytes of the distinct B matrices (with quantisation scales, sparse if sparse)."""
        elems = (self.batch // self.b_shared) * self.k * self.n
        bpe = self.b_format.bytes_per_element
        total = elems * bpe
        if self.b_is_weight:
            # values of the non-zeros + their metadata (N:M index bits, CSR index, bitmap)
            total = elems * self.w_sparsity.stored_bytes_per_element(bpe)
            if self.group_size:
                groups = ((self.batch // self.b_shared)
                          * math.ceil((self.group_span or self.k) / self.group_size) * self.n)
                total += groups * self.a_format.bytes_per_element * (2 if self.w_format.is_integer else 1)
        return total

    def weight_bytes(self) -> float:
        return self.b_bytes() if self.b_is_weight else 0.0

    def resident_weight_bytes(self) -> float:
        """The weights read plus ``held`` more matrices of the same size (idle experts)."""
        w = self.weight_bytes()
        return w + w * self.held / (self.batch // self.b_shared) if self.held else w

    def output_bytes(self) -> float:
        return self.batch * self.m * self.n * self.a_format.bytes_per_element

    def as_pass(self, pass_: str) -> Gemm:
        """The GEMM of a training pass (for weight GEMMs; QK/AV swap operands likewise).

        fwd: (m, n, k); bwd_data: dX[m, k] = dY[m, n] @ W^T -> (m, k, n);
        bwd_weight: dW[k, n] = X^T[k, m] @ dY[m, n] -> (k, n, m), B operand an activation.
        """
        if pass_ == "fwd":
            return replace(self, pass_="fwd")
        if pass_ == "bwd_data":
            return replace(self, name=f"{self.name}.bwd_data", m=self.m, n=self.k, k=self.n,
                           pass_="bwd_data")
        if pass_ == "bwd_weight":
            return replace(self, name=f"{self.name}.bwd_weight", m=self.k, n=self.n, k=self.m,
                           pass_="bwd_weight", b_is_weight=False, b_shared=1,
                           w_sparsity=Sparsity())
        raise WorkloadError(Problem(f"no GEMM for pass {pass_!r}", self.name))

    def describe(self) -> str:
        b = f"{self.batch}x" if self.batch > 1 else ""
        return f"{b}{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True, kw_only=True)
class Conv2d(Op):
    """2-D convolution, NCHW input, KCRS weights; ``groups == c == k`` is depthwise.

    Attributes:
        n: batch; c: input channels; h, w: input height/width; k: output channels;
        r, s: filter height/width; stride; padding (both sides); groups.
        w_sparsity: sparsity of the weights.
    """

    kind: ClassVar[str] = "conv2d"
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int = 1
    padding: int = 0
    groups: int = 1
    w_sparsity: Sparsity = field(default_factory=Sparsity)
    role: str = "conv"

    def _positive_fields(self) -> tuple[str, ...]:
        return ("n", "c", "h", "w", "k", "r", "s", "stride", "groups")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.padding < 0:
            raise WorkloadError(Problem(f"padding must be >= 0, got {self.padding}", self.name))
        if self.c % self.groups or self.k % self.groups:
            raise WorkloadError(Problem(
                f"groups {self.groups} must divide c {self.c} and k {self.k}", self.name))
        if self.p < 1 or self.q < 1:
            raise WorkloadError(Problem("filter larger than padded input", self.name))

    @property
    def p(self) -> int:
        """Output height."""
        return (self.h + 2 * self.padding - self.r) // self.stride + 1

    @property
    def q(self) -> int:
        """Output width."""
        return (self.w + 2 * self.padding - self.s) // self.stride + 1

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.c

    def macs(self) -> int:
        return self.n * self.k * self.p * self.q * (self.c // self.groups) * self.r * self.s

    def effective_macs(self) -> float:
        return self.macs() * self.w_sparsity.fraction

    def input_bytes(self) -> float:
        return self.n * self.c * self.h * self.w * self.a_format.bytes_per_element

    def weight_bytes(self) -> float:
        elems = self.k * (self.c // self.groups) * self.r * self.s
        return elems * self.w_sparsity.fraction * self.w_format.bytes_per_element

    def output_bytes(self) -> float:
        return self.n * self.k * self.p * self.q * self.a_format.bytes_per_element

    def as_gemm(self, pass_: str | None = None) -> Gemm:
        """The im2col GEMM of this convolution (per group, groups folded into ``batch``).

        fwd: M = N*P*Q, N = K/g, K = C/g*R*S; bwd_data and bwd_weight follow ``Gemm.as_pass``.
        Built once per (convolution, pass) and kept on the op (it is frozen, so the GEMM
        never changes): every unit's estimate of the convolution starts from it.
        """
        pass_ = pass_ or self.pass_
        memo = self.__dict__.setdefault("_as_gemm", {})
        if pass_ not in memo:
            memo[pass_] = self._im2col_gemm(pass_)
        gemm: Gemm = memo[pass_]
        return gemm

    def _im2col_gemm(self, pass_: str) -> Gemm:
        g = Gemm(name=self.name, m=self.n * self.p * self.q, n=self.k // self.groups,
                 k=(self.c // self.groups) * self.r * self.s, batch=self.groups,
                 a_format=self.a_format, w_format=self.w_format, acc_format=self.acc_format,
                 w_sparsity=self.w_sparsity, layer=self.layer, block=self.block,
                 role=self.role)
        return g.as_pass(pass_)

    def describe(self) -> str:
        dw = " dw" if self.depthwise else ""
        return (f"{self.n}x{self.c}x{self.h}x{self.w} k{self.k} {self.r}x{self.s}"
                f"/{self.stride}{dw}")


@dataclass(frozen=True, kw_only=True)
class _VectorOp(Op):
    """An op over ``rows x cols`` elements in ``a_format`` (row-wise for softmax/norm)."""

    rows: int
    cols: int

    def _positive_fields(self) -> tuple[str, ...]:
        return ("rows", "cols")

    @property
    def elements(self) -> int:
        return self.rows * self.cols

    def _ops_per_element(self) -> int:
        return VECTOR_OPS_PER_ELEMENT[self.kind]

    def vector_ops(self) -> int:
        return self.elements * self._ops_per_element()

    def input_bytes(self) -> float:
        return self.elements * self.a_format.bytes_per_element

    def output_bytes(self) -> float:
        return self.elements * self.a_format.bytes_per_element

    def describe(self) -> str:
        return f"{self.rows}x{self.cols}"


@dataclass(frozen=True, kw_only=True)
class Softmax(_VectorOp):
    """Row-wise softmax over ``cols`` (attention scores: rows = batch*heads*queries).

    ``role`` is ``"attn"`` for the softmax of attention scores (between the ``qk`` and ``av``
    GEMMs): a fused attention kernel keeps those scores on chip.
    """

    kind: ClassVar[str] = "softmax"


@dataclass(frozen=True, kw_only=True)
class Norm(_VectorOp):
    """Layer normalisation (``norm="layernorm"``) or RMS normalisation (``"rmsnorm"``).

    ``residual=True`` is the residual add fused into the norm, one kernel as serving
    engines run it (vLLM's ``fused_add_rms_norm``, SGLang, TensorRT-LLM): it reads the
    sublayer's output and the residual stream, writes the new stream (their sum) and the
    normalised output, one add per element more; its re-read pass reads the new stream
    (:meth:`stream_bytes`). Its ``role`` stays ``norm``.
    """

    kind: ClassVar[str] = "norm"
    norm: str = "layernorm"
    role: str = "norm"
    residual: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.norm not in ("layernorm", "rmsnorm"):
            raise WorkloadError(Problem(f"norm must be layernorm or rmsnorm, got {self.norm!r}",
                                        self.name))

    def _ops_per_element(self) -> int:
        return VECTOR_OPS_PER_ELEMENT[self.norm] + (VECTOR_OPS_PER_ELEMENT["add"] if self.residual else 0)

    def stream_bytes(self) -> float:
        """Bytes of the one tensor the norm normalises (``rows x cols``); a fused residual
        add reads and writes one more of them."""
        return self.elements * self.a_format.bytes_per_element

    def input_bytes(self) -> float:
        return (1 + int(self.residual)) * self.stream_bytes()

    def output_bytes(self) -> float:
        return (1 + int(self.residual)) * self.stream_bytes()

    def describe(self) -> str:
        return super().describe() + (" +residual" if self.residual else "")

    def weight_bytes(self) -> float:
        per = 2 if self.norm == "layernorm" else 1
        return per * self.cols * self.a_format.bytes_per_element


@dataclass(frozen=True, kw_only=True)
class Elementwise(_VectorOp):
    """Element-wise op (``fn`` in add, mul, relu, gelu, silu, swiglu, copy, sgd, adam, pool)
    over ``rows x cols`` elements with ``inputs`` input tensors in ``a_format``.

    ``out_format`` (default: ``a_format``) is the format of the output when it differs, e.g.
    a cast (``fn="copy"``) from fp32 to bf16 as autocast runs before a bf16 GEMM.
    ``inputs=0`` is a fill (a memset: writes only). ``mask`` is a bool mask of one byte per
    element that the kernel writes besides its output (``"write"``: PyTorch's
    ``native_dropout`` forward) or reads besides its inputs (``"read"``: its backward).
    """

    kind: ClassVar[str] = "elementwise"
    fn: str = "add"
    inputs: int = 1
    out_format: NumberFormat | None = None
    mask: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fn not in VECTOR_OPS_PER_ELEMENT or self.fn in ("softmax", "layernorm", "rmsnorm"):
            raise WorkloadError(Problem(f"unknown element-wise fn {self.fn!r}", self.name))
        if self.mask not in ("", "write", "read"):
            raise WorkloadError(Problem(f"mask must be '', 'write' or 'read', got {self.mask!r}",
                                        self.name))
        if self.inputs < 0:
            raise WorkloadError(Problem(f"inputs must be >= 0, got {self.inputs}", self.name))

    def _ops_per_element(self) -> int:
        return VECTOR_OPS_PER_ELEMENT[self.fn]

    def input_bytes(self) -> float:
        mask = self.elements if self.mask == "read" else 0
        return self.inputs * self.elements * self.a_format.bytes_per_element + mask

    def output_bytes(self) -> float:
        f = self.a_format if self.out_format is None else self.out_format
        mask = self.elements if self.mask == "write" else 0
        return self.elements * f.bytes_per_element + mask


@dataclass(frozen=True, kw_only=True)
class Embedding(Op):
    """Table lookup of ``tokens`` rows of width ``dim`` from a ``vocab x dim`` table.

    Only the gathered rows move (weight traffic = tokens x dim), not the whole table.
    """

    kind: ClassVar[str] = "embedding"
    tokens: int
    role: str = "embedding"
    dim: int
    vocab: int

    def _positive_fields(self) -> tuple[str, ...]:
        return ("tokens", "dim", "vocab")

    def weight_bytes(self) -> float:
        return min(self.tokens, self.vocab) * self.dim * self.w_format.bytes_per_element

    def output_bytes(self) -> float:
        return self.tokens * self.dim * self.a_format.bytes_per_element

    def parameters(self) -> int:
        return self.vocab * self.dim

    def describe(self) -> str:
        return f"{self.tokens}x{self.dim} of {self.vocab}"


@dataclass(frozen=True, kw_only=True)
class Collective(Op):
    """Base of the collectives: ``elements`` values in ``a_format`` per device across
    ``devices`` devices of a ``group`` (``tp``, ``ep``, ``cp``, ``dp``, ``pp``; "" = none
    named). The buffer follows nccl-tests: the whole vector for all-reduce, the gathered
    output for all-gather, the input for reduce-scatter, what one device sends for
    all-to-all, the message for send/recv (``workloads.collectives`` has the others)."""

    kind: ClassVar[str] = "collective"
    elements: int
    devices: int = 1
    group: str = ""
    role: str = "collective"

    def _positive_fields(self) -> tuple[str, ...]:
        return ("elements", "devices")

    def payload_bytes(self) -> float:
        """The per-device buffer in bytes."""
        return self.elements * self.a_format.bytes_per_element

    def input_bytes(self) -> float:
        return self.payload_bytes()

    def output_bytes(self) -> float:
        return self.payload_bytes()

    def describe(self) -> str:
        return f"{self.elements} x{self.devices}" + (f" ({self.group})" if self.group else "")


@dataclass(frozen=True, kw_only=True)
class AllReduce(Collective):
    """All-reduce of ``elements`` values across ``devices`` devices, summed in the activation
    format, at least 16-bit (:data:`ALLREDUCE_MIN_BITS`: an fp8 model reduces in bf16), by
    ``impl`` (:data:`ALLREDUCE_IMPLS`; units without a model of vLLM's kernel use theirs)."""

    kind: ClassVar[str] = "allreduce"
    impl: str = "nccl"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.impl not in ALLREDUCE_IMPLS:
            raise WorkloadError(Problem(f"all-reduce implementation must be one of "
                                        f"{', '.join(ALLREDUCE_IMPLS)}, got {self.impl!r}",
                                        self.name))

    @property
    def reduce_format(self) -> str:
        """The element format summed: ``a_format`` when at least 16 bits wide, else bf16."""
        return self.a_format.name if self.a_format.bits >= ALLREDUCE_MIN_BITS else "bf16"

    def payload_bytes(self) -> float:
        """The per-device buffer in bytes, in :attr:`reduce_format`."""
        return self.elements * max(ALLREDUCE_MIN_BITS / 8, self.a_format.bytes_per_element)


@dataclass(frozen=True, kw_only=True)
class Attention(Op):
    """Scaled dot-product attention as one op: ``softmax(Q K^T / sqrt(d)) V``.

    Q is ``batch x heads x q_len x head_dim``; K and V are ``batch x kv_heads x kv_len x
    head_dim`` (grouped-query attention when ``kv_heads < heads``). ``causal``: query ``i``
    (of the last ``q_len`` positions) sees keys ``0 .. kv_len - q_len + i``. Units may run it
    fused (FlashAttention: the scores never leave the chip) or as QK, softmax and AV kernels.
    ``window`` > 0: sliding-window attention, query ``i`` sees only its last ``window`` keys
    (``kv_len - q_len + i - window + 1 ..``); 0 = full attention. ``kv_format``: format of
    the cached K and V (an fp8 KV cache); None = ``a_format``. ``kernel``: how the call is
    made (:data:`ATTENTION_KERNELS`): ``sdpa``, one scaled-dot-product-attention call on
    contiguous K/V (PyTorch SDPA, FlashAttention's own API); ``paged``, a serving framework's
    paged-KV backend (vLLM's FlashAttention backend), whose call also writes the new tokens'
    K and V into the paged cache; units without a model of the latter price it as ``sdpa``.
    """

    kind: ClassVar[str] = "attention"
    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool = False
    window: int = 0
    kv_format: NumberFormat | None = None
    kernel: str = "sdpa"
    role: str = "attention"

    def _positive_fields(self) -> tuple[str, ...]:
        return ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim")

    @property
    def kv_bytes_per_element(self) -> float:
        """Bytes of one cached K or V element (``kv_format``, else ``a_format``)."""
        return (self.kv_format or self.a_format).bytes_per_element

    def keys_seen(self) -> int:
        """Keys one decode query (the last position) attends to: ``kv_len``, or ``window``
        when a sliding window is shorter."""
        return min(self.kv_len, self.window) if self.window > 0 else self.kv_len

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heads % self.kv_heads:
            raise WorkloadError(Problem(f"kv_heads ({self.kv_heads}) must divide heads "
                                        f"({self.heads})", self.name))
        if self.window < 0:
            raise WorkloadError(Problem(f"window ({self.window}) must be >= 0 (0 = full "
                                        "attention)", self.name))
        if self.kernel not in ATTENTION_KERNELS:
            raise WorkloadError(Problem(f"attention kernel must be one of "
                                        f"{', '.join(ATTENTION_KERNELS)}, got {self.kernel!r}",
                                        self.name))
        if self.causal and self.q_len > self.kv_len:
            raise WorkloadError(Problem(f"causal attention needs q_len ({self.q_len}) <= "
                                        f"kv_len ({self.kv_len})", self.name))

    def pairs(self) -> int:
        """(query, key) score pairs per head computed: q*kv, or with the causal mask
        q*kv - q(q-1)/2 (the masked triangle is skipped); a sliding ``window`` caps each
        query row at ``window`` keys (causal: the last ``window`` positions up to its own)."""
        q, kv, w = self.q_len, self.kv_len, self.window
        if not self.causal:
            return q * min(kv, w) if w > 0 else q * kv
        if w <= 0 or w >= kv:
            return q * kv - q * (q - 1) // 2
        first = kv - q + 1                     # keys row 0 sees without a window
        short = max(0, min(q, w - first))      # rows that see fewer than w keys
        return short * first + short * (short - 1) // 2 + (q - short) * w

    def macs(self) -> int:
        # forward: QK^T and PV, head_dim MACs per score pair each. Backward (pass bwd_data,
        # FlashAttention-2 Alg. 2): QK^T recomputed, dV = P^T dO, dP = dO V^T, dQ = dS K,
        # dK = dS^T Q: five GEMMs of the same size (Dao 2023, Section 3.2)
        gemms = 5 if self.pass_ == "bwd_data" else 2
        return gemms * self.batch * self.heads * self.pairs() * self.head_dim

    def vector_ops(self) -> int:
        return self.batch * self.heads * self.pairs() * VECTOR_OPS_PER_ELEMENT["softmax"]

    def flops(self) -> int:
        return 2 * self.macs() + self.vector_ops()

    def input_bytes(self) -> float:
        # forward: Q, K, V; backward: Q, K, V, O and dO
        bpe = self.a_format.bytes_per_element
        q = self.batch * self.heads * self.q_len * self.head_dim
        kv = 2 * self.batch * self.kv_heads * self.kv_len * self.head_dim
        return (3 * q if self.pass_ == "bwd_data" else q) * bpe + kv * self.kv_bytes_per_element

    def output_bytes(self) -> float:
        # forward: O; backward: dQ, dK, dV
        bpe = self.a_format.bytes_per_element
        q = self.batch * self.heads * self.q_len * self.head_dim
        kv = 2 * self.batch * self.kv_heads * self.kv_len * self.head_dim
        return (q + kv if self.pass_ == "bwd_data" else q) * bpe

    def describe(self) -> str:
        c = " causal" if self.causal else ""
        w = f" window{self.window}" if self.window else ""
        f = f" kv:{self.kv_format.name}" if self.kv_format else ""
        return (f"b{self.batch} h{self.heads}/{self.kv_heads} q{self.q_len} kv{self.kv_len} "
                f"d{self.head_dim}{c}{w}{f}")


#: Fused-MoE kernels a ``FusedMoE`` op may name (vLLM 0.24's dispatch).
MOE_BACKENDS = ("triton", "cutlass", "marlin")


def moe_backend(w_format: NumberFormat) -> str:
    """The fused-MoE kernel vLLM runs for experts in ``w_format`` on a Hopper GPU: Marlin MoE
    for integer weights of at most 4 bits (compressed-tensors / GPTQ / AWQ W4A16), else
    Triton (vLLM's ``fused_moe`` for 16-bit and fp8, OpenAI's triton_kernels for gpt-oss's
    MXFP4 experts)."""
    return "marlin" if w_format.kind == "int" and w_format.bits <= 4 else "triton"


@dataclass(frozen=True, kw_only=True)
class FusedMoE(Op):
    """A mixture-of-experts layer's routed experts as one fused call (vLLM's ``FusedMoE``):
    top-k over the router scores, token alignment / sort by expert, the grouped gate+up GEMM
    over the experts that received tokens, the SwiGLU, the grouped down GEMM and the weighted
    combine. The router GEMM and shared experts are separate ops.

    ``tokens`` enter the layer on this device; each goes to ``top_k`` of ``experts`` routed
    experts, of which this device holds ``experts / ep`` (expert parallelism; the tokens for
    other devices' experts arrive / leave by all-to-all, separate ops). ``width`` is the
    expert FFN width on this device (tensor-parallel sharded). ``routing``: ``balanced`` or
    ``power_law:ALPHA`` (``workloads.routing``). ``backend``: the kernel (``triton`` or
    ``cutlass``); ``fp8_block``: fp8 weights carry 128x128 block scales (else one scale per
    tensor); ``gated``: SwiGLU experts (gate, up, down) or, False, non-gated ones (up, down;
    squared-ReLU experts as in Nemotron-H). Counts (MACs, weight bytes) are the expected
    ones of the busiest device.
    """

    kind: ClassVar[str] = "fused_moe"
    tokens: int
    hidden: int
    width: int
    experts: int
    top_k: int
    ep: int = 1
    routing: str = "balanced"
    backend: str = "triton"
    fp8_block: bool = True
    gated: bool = True
    role: str = "moe"

    def _positive_fields(self) -> tuple[str, ...]:
        return ("tokens", "hidden", "width", "experts", "top_k", "ep")

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_routing(self.routing, self.name)
        if self.backend not in MOE_BACKENDS:
            raise WorkloadError(Problem(f"backend must be one of {', '.join(MOE_BACKENDS)}, "
                                        f"got {self.backend!r}", self.name))
        if self.experts % self.ep or self.top_k > self.experts:
            raise WorkloadError(Problem(f"ep ({self.ep}) must divide experts ({self.experts}) "
                                        f"and top_k ({self.top_k}) be at most experts",
                                        self.name))

    @property
    def local_experts(self) -> int:
        """Experts on this device (``experts / ep``)."""
        return self.experts // self.ep

    def loads(self) -> tuple[float, ...]:
        """Tokens each local expert that receives any gets, busiest device
        (``workloads.routing.device_loads``)."""
        return device_loads(self.tokens, self.experts, self.top_k, self.ep,
                            parse_routing(self.routing, self.name))

    @property
    def matrices(self) -> int:
        """Weight matrices per expert: 3 (gate, up, down) or 2 (non-gated: up, down)."""
        return 3 if self.gated else 2

    def macs(self) -> int:
        # gate + up (2 x width) and down (width) per (token, expert) pair on this device
        return round(sum(self.loads()) * self.matrices * self.hidden * self.width)

    def vector_ops(self) -> int:
        return round(sum(self.loads()) * self.width * VECTOR_OPS_PER_ELEMENT["swiglu"])

    def flops(self) -> int:
        return 2 * self.macs() + self.vector_ops()

    def weight_bytes(self) -> float:
        """Weights the call reads: those of the local experts that receive tokens (every
        local expert is resident: ``models.common.op_parameters`` counts them all)."""
        return float(self.matrices * len(self.loads()) * self.hidden * self.width) \
            * self.w_format.bytes_per_element

    def resident_weight_bytes(self) -> float:
        """Every local expert's weights (``experts / ep``), read or not."""
        return float(self.matrices * self.local_experts * self.hidden * self.width) \
            * self.w_format.bytes_per_element

    def input_bytes(self) -> float:
        return self.tokens * self.hidden * self.a_format.bytes_per_element

    def output_bytes(self) -> float:
        return self.tokens * self.hidden * self.a_format.bytes_per_element

    def describe(self) -> str:
        return (f"t{self.tokens} d{self.hidden} w{self.width} e{self.experts}/ep{self.ep} "
                f"top{self.top_k} {self.routing} {self.backend}")


MATRIX_OPS = (Gemm, Conv2d)

#: Public name of the base of row x column vector ops (Softmax, Norm, Elementwise).
VectorOp = _VectorOp
