"""Problems as Einsums: named dimensions, data spaces with affine projections.

An :class:`Einsum` is the iteration space of one operation (a perfectly nested loop over
named dimensions with integer bounds) plus the tensors (*data spaces*) it touches. Each
data space has one *rank* per tensor axis; a rank's coordinate is an affine sum of
dimensions, ``sum(coef * dim)``. A convolution input axis is ``W = Wstride*P +
Wdilation*R``, so a tile of ``P`` and ``R`` covers a sliding window whose consecutive
positions overlap (the halo): the access analysis in :mod:`dataflow.nest` keeps that
reuse instead of flattening the convolution to a GEMM (im2col).

This is the same problem description as Timeloop's v0.4 ``problem`` (Parashar et al.,
"Timeloop: A Systematic Approach to DNN Accelerator Evaluation", ISPASS 2019, Sec. III-A);
:func:`from_timeloop` reads it. Padding is not part of the projection: like Timeloop, the
input tensor is the box the projection spans, ``(P-1)*stride + (R-1)*dilation + 1`` wide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archsim.workloads.errors import ConfigError, Problem

__all__ = ["DataSpace", "Einsum", "conv2d", "gemm", "batched_gemm", "attention_qk",
           "attention_av", "from_op", "from_timeloop"]

Term = tuple[int, str]          # (coefficient, dimension name)
Rank = tuple[Term, ...]         # one tensor axis: sum of coef * dim


@dataclass(frozen=True)
class DataSpace:
    """One tensor of an Einsum.

    Attributes:
        name: tensor name (``Weights``, ``Inputs``, ``Outputs``).
        ranks: one affine projection per tensor axis, each a tuple of (coef, dim).
        read_write: True for the output (read-modify-write partial sums).
        word_bits: bits of one element in its own format (int8 weights beside fp16
            activations), or None: an element is one word of whichever level holds it
            (Timeloop's per-level ``datawidth``). The nest model counts a level's capacity,
            bandwidth and access energy in that level's words, ``word_bits / level bits``
            of them per element.
    """

    name: str
    ranks: tuple[Rank, ...]
    read_write: bool = False
    word_bits: int | None = None

    def dims(self) -> frozenset[str]:
        """Dimensions this tensor's coordinates depend on (its *relevant* dims)."""
        return frozenset(d for rank in self.ranks for _, d in rank)

    def extent(self, tile: dict[str, int]) -> int:
        """Elements in the axis-aligned box a tile of ``tile[dim]`` iterations spans.

        Each rank spans ``sum(coef * (tile[dim] - 1)) + 1`` coordinates (strided gaps count,
        as in Timeloop's AAHR point sets).
        """
        n = 1
        for rank in self.ranks:
            n *= sum(c * (tile.get(d, 1) - 1) for c, d in rank) + 1
        return n


@dataclass(frozen=True)
class Einsum:
    """An iteration space with named dimensions and the tensors it reads and writes.

    Attributes:
        name: problem name (``conv2D``).
        dims: dimension name -> bound, in the problem's order.
        data_spaces: the tensors; exactly one should be ``read_write`` (the output).
    """

    name: str
    dims: dict[str, int]
    data_spaces: tuple[DataSpace, ...]

    @property
    def macs(self) -> int:
        """Number of points of the iteration space (multiply-accumulates)."""
        n = 1
        for b in self.dims.values():
            n *= b
        return n

    def signature(self) -> tuple[Any, ...]:
        """Everything that defines the problem but its name: the bounds (in order) and each
        data space's name, projections and read-write flag. Two problems with the same
        signature have the same map space and the same counts for every mapping (and, with
        the element widths in it, the same energies)."""
        return (tuple(self.dims.items()),
                tuple((ds.name, ds.ranks, ds.read_write, ds.word_bits)
                      for ds in self.data_spaces))

    def space(self, name: str) -> DataSpace:
        """The data space called ``name`` (KeyError if none)."""
        for ds in self.data_spaces:
            if ds.name == name:
                return ds
        raise KeyError(name)

    def size(self, name: str) -> int:
        """Elements of tensor ``name`` (its full projected box)."""
        return self.space(name).extent(self.dims)

    def compulsory_words(self) -> int:
        """Sum of all tensor sizes: the traffic no mapping can avoid at the outermost level."""
        return sum(ds.extent(self.dims) for ds in self.data_spaces)


def conv2d(n: int, c: int, m: int, p: int, q: int, r: int, s: int, *,
           stride: tuple[int, int] = (1, 1), dilation: tuple[int, int] = (1, 1),
           groups: int = 1, name: str = "conv2D") -> Einsum:
    """A 2-D convolution as an Einsum (Timeloop's 7-D conv: N C M P Q R S).

    ``Outputs[n,m,q,p] += Weights[c,m,r,s] * Inputs[n,c,Hs*q+Hd*s, Ws*p+Wd*r]``; P (output
    width) pairs with R and Q (height) with S, as in Timeloop's problem.

    Grouped convolutions (``groups > 1``) get a group dimension ``G``; ``c`` and ``m`` are then
    the per-group channels. Depthwise is ``groups = channels, c = m = 1``.

    Args:
        n, c, m, p, q, r, s: batch, input channels, output channels (per group if grouped),
            output width, output height, filter width, filter height.
        stride: (width, height) strides. dilation: (width, height) dilations.
        groups: channel groups. name: problem name.
    """
    ws, hs = stride
    wd, hd = dilation
    dims = {"C": c, "M": m, "R": r, "S": s, "N": n, "P": p, "Q": q}
    g: tuple[Rank, ...] = ()
    if groups > 1:
        dims = {"G": groups, **dims}
        g = (((1, "G"),),)
    weights = DataSpace("Weights", g + (((1, "C"),), ((1, "M"),), ((1, "R"),), ((1, "S"),)))
    inputs = DataSpace("Inputs", (((1, "N"),),) + g + (((1, "C"),), ((wd, "R"), (ws, "P")),
                                                        ((hd, "S"), (hs, "Q"))))
    outputs = DataSpace("Outputs", (((1, "N"),),) + g + (((1, "M"),), ((1, "Q"),), ((1, "P"),)),
                        read_write=True)
    return Einsum(name, dims, (weights, inputs, outputs))


def gemm(m: int, n: int, k: int, *, name: str = "gemm") -> Einsum:
    """``Z[m,n] += A[m,k] * B[k,n]`` with dims M, N, K."""
    a = DataSpace("A", (((1, "M"),), ((1, "K"),)))
    b = DataSpace("B", (((1, "K"),), ((1, "N"),)))
    z = DataSpace("Z", (((1, "M"),), ((1, "N"),)), read_write=True)
    return Einsum(name, {"M": m, "N": n, "K": k}, (a, b, z))


def batched_gemm(batch: int, m: int, n: int, k: int, *, shared_b: bool = False,
                 b_shared: int = 1, name: str = "bmm") -> Einsum:
    """``Z[b,m,n] += A[b,m,k] * B[b,k,n]`` with dims B, M, N, K.

    ``shared_b`` drops B's batch axis (one weight matrix for every batch entry);
    ``b_shared > 1`` (grouped-query attention) lets ``b_shared`` consecutive entries share one
    B: the batch splits into dims B (``batch / b_shared``) and G (``b_shared``), B's operand
    depending on B only.
    """
    if shared_b:
        b_shared = batch
    if b_shared > 1 and batch % b_shared:
        raise ConfigError(Problem(f"batch {batch} is not a multiple of b_shared {b_shared}",
                                  name))
    outer = batch // b_shared
    bdims: tuple[Rank, ...] = (((1, "B"),),) if outer > 1 or b_shared == 1 else ()
    gdims: tuple[Rank, ...] = (((1, "G"),),) if b_shared > 1 else ()
    dims = {"B": outer, "M": m, "N": n, "K": k}
    if b_shared > 1:
        dims = {"B": outer, "G": b_shared, "M": m, "N": n, "K": k}
    a = DataSpace("A", bdims + gdims + (((1, "M"),), ((1, "K"),)))
    b = DataSpace("B", bdims + (((1, "K"),), ((1, "N"),)))
    z = DataSpace("Z", bdims + gdims + (((1, "M"),), ((1, "N"),)), read_write=True)
    return Einsum(name, dims, (a, b, z))


def attention_qk(batch_heads: int, q_len: int, kv_len: int, head_dim: int) -> Einsum:
    """Attention scores ``S[h,i,j] += Q[h,i,e] * K[h,j,e]`` (dims H, I, J, E)."""
    q = DataSpace("Q", (((1, "H"),), ((1, "I"),), ((1, "E"),)))
    k = DataSpace("K", (((1, "H"),), ((1, "J"),), ((1, "E"),)))
    s = DataSpace("S", (((1, "H"),), ((1, "I"),), ((1, "J"),)), read_write=True)
    return Einsum("attention_qk", {"H": batch_heads, "I": q_len, "J": kv_len, "E": head_dim},
                  (q, k, s))


def attention_av(batch_heads: int, q_len: int, kv_len: int, head_dim: int) -> Einsum:
    """Attention output ``O[h,i,e] += A[h,i,j] * V[h,j,e]`` (dims H, I, J, E)."""
    a = DataSpace("A", (((1, "H"),), ((1, "I"),), ((1, "J"),)))
    v = DataSpace("V", (((1, "H"),), ((1, "J"),), ((1, "E"),)))
    o = DataSpace("O", (((1, "H"),), ((1, "I"),), ((1, "E"),)), read_write=True)
    return Einsum("attention_av", {"H": batch_heads, "I": q_len, "J": kv_len, "E": head_dim},
                  (a, v, o))


def from_op(op: Any) -> Einsum:
    """The Einsum of a zoo op (:class:`workloads.ops.Gemm` or ``Conv2d``).

    Raises:
        ConfigError: for op types without an Einsum form (elementwise ops).
    """
    kind = type(op).__name__
    if kind == "Conv2d":
        # workloads.ops.Conv2d: p (output height) pairs with r (filter height), q with s.
        groups = int(op.groups)
        return conv2d(int(op.n), int(op.c) // groups, int(op.k) // groups, int(op.p), int(op.q),
                      int(op.r), int(op.s), stride=(int(op.stride), int(op.stride)),
                      groups=groups, name=str(op.name))
    if kind == "Gemm":
        if int(op.batch) > 1:
            return batched_gemm(int(op.batch), int(op.m), int(op.n), int(op.k),
                                b_shared=int(getattr(op, "b_shared", 1)), name=str(op.name))
        return gemm(int(op.m), int(op.n), int(op.k), name=str(op.name))
    raise ConfigError(Problem(f"op {getattr(op, 'name', kind)!r} of type {kind} has no Einsum "
                              "form (expected Gemm or Conv2d)"))


# --------------------------------------------------------------------------- Timeloop


def _coef(value: Any, coefficients: dict[str, int], instance: dict[str, int], where: str,
          file: str | None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in instance:
            return int(instance[value])
        if value in coefficients:
            return int(coefficients[value])
    raise ConfigError(Problem(f"unknown coefficient {value!r} (expected an integer or a name "
                              f"from shape.coefficients)", where, file))


def from_timeloop(doc: dict[str, Any], file: str | None = None) -> Einsum:
    """Build an Einsum from a Timeloop v0.4 ``problem`` mapping (``{shape, instance}``).

    Supports ``shape.dimensions``, ``shape.coefficients`` (defaults, overridden by the
    instance), ``shape.data_spaces`` with ``projection`` (list of ranks, each a list of
    terms ``[dim]`` or ``[dim, coef]``) and ``read_write``. ``densities`` (sparsity) and
    flattened ranks are not supported and raise :class:`ConfigError` naming the key.
    """
    prob = doc.get("problem", doc)
    if not isinstance(prob, dict) or "shape" not in prob or "instance" not in prob:
        raise ConfigError(Problem("expected a Timeloop problem with 'shape' and 'instance'",
                                  "problem", file))
    shape, inst = prob["shape"], prob["instance"]
    version = prob.get("version", 0.4)
    if str(version) not in ("0.3", "0.4"):
        raise ConfigError(Problem(f"unsupported problem version {version!r} (expected 0.4, or "
                                  f"0.3)", "problem.version", file))
    if not isinstance(shape, dict) or not isinstance(inst, dict):
        raise ConfigError(Problem("expected 'shape' and 'instance' to be mappings", "problem",
                                  file))
    allowed_inst = set(shape.get("dimensions", [])) | {c["name"] for c in
                                                        shape.get("coefficients", [])}
    for key, val in inst.items():
        if key == "densities":
            if val:
                raise ConfigError(Problem("sparse densities are not supported (dense only)",
                                          "problem.instance.densities", file))
            continue
        if (key.endswith("pad") and key[:-3] + "stride" in allowed_inst) or \
                key + "stride" in allowed_inst:
            continue          # padding and the input size are implied by the projection
        if key not in allowed_inst:
            raise ConfigError(Problem(f"unknown instance key {key!r} (expected one of "
                                      f"{sorted(allowed_inst)})", f"problem.instance.{key}",
                                      file))
    for key in shape:
        if key not in ("name", "dimensions", "coefficients", "data_spaces", "data-spaces"):
            raise ConfigError(Problem(f"unsupported shape key {key!r}", f"problem.shape.{key}",
                                      file))
    coefs = {str(c["name"]): int(c.get("default", 1)) for c in shape.get("coefficients", [])}
    dims: dict[str, int] = {}
    for d in shape["dimensions"]:
        if d not in inst:
            raise ConfigError(Problem(f"dimension {d!r} has no bound in the instance",
                                      f"problem.instance.{d}", file))
        v = inst[d]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(Problem(f"expected a positive integer bound, got {v!r}",
                                      f"problem.instance.{d}", file))
        dims[str(d)] = v
    spaces = []
    raw_spaces: list[Any] = shape.get("data_spaces", shape.get("data-spaces")) or []
    for i, ds in enumerate(raw_spaces):
        ranks: list[Rank] = []
        for j, rank in enumerate(ds["projection"]):
            terms: list[Term] = []
            where = f"problem.shape.data_spaces[{i}].projection[{j}]"
            if isinstance(rank, str):          # v0.3 shorthand: one dim
                rank = [[rank]]
            for term in rank:
                if not isinstance(term, list) or not 1 <= len(term) <= 2:
                    raise ConfigError(Problem("expected a term [dim] or [dim, coefficient]",
                                              where, file))
                dim = str(term[0])
                if dim not in dims:
                    raise ConfigError(Problem(f"unknown dimension {dim!r}", where, file))
                coef = _coef(term[1], coefs, inst, where, file) if len(term) == 2 else 1
                terms.append((coef, dim))
            ranks.append(tuple(terms))
        spaces.append(DataSpace(str(ds["name"]), tuple(ranks), bool(ds.get("read_write", False))))
    return Einsum(str(shape.get("name", "problem")), dims, tuple(spaces))
