"""Shared machinery of the model zoo: a graph builder that counts parameters, and the
transformation of a forward graph into a training step.

Parameters are counted from the ops' weight shapes (:func:`op_parameters`) plus what no op
shape carries: biases, learned position tables added element-wise (ViT), class tokens. A
weight reused by a second op (a tied LM head) is counted once, on its owner.

Training (:func:`to_training`): the forward graph, then, in reverse topological order, the
backward ops of every forward op, then one optimiser update per weight-bearing op:

* matrix op ``X`` -> ``X.bwd_data`` (gradient w.r.t. the input) and ``X.bwd_weight``
  (gradient w.r.t. the weights, or w.r.t. the second activation operand of attention
  GEMMs), from ``Gemm.as_pass`` / a ``Conv2d`` with ``pass_`` set; each has the forward MACs,
  so a training step runs 3x the forward matrix MACs. The input gradient of the first layer
  is kept (frameworks skip it) so that the 3x identity holds exactly.
* vector op ``X`` -> ``X.bwd``, an :class:`Elementwise` of the same size: softmax and norm
  backward as ``mul`` over (output, gradient); element-wise ``fn`` backward as the same
  ``fn`` with one more input (the gradient); residual ``add`` backward as a ``copy``; a
  ``copy`` (or a cast, ``out_format`` set) backward as a copy (a cast back).
* embedding ``X`` -> ``X.bwd``, a scatter-add (``add``) of the gathered rows.
* ``X.update``: ``Elementwise(fn=optimizer)`` over the op's parameters in fp32
  (Adam reads parameter, gradient, m, v: 4 inputs; SGD with momentum: 3).
* every backward and update op keeps the tags of its forward op (``block``, ``role``;
  :mod:`workloads.tags`), with its own ``pass_``.
* a builder may replace these rules for a forward op (``to_training(backward=...)``): the
  kernels a framework really runs for it (``kernels="eager_amp"``: autograd's), the listed
  input-gradient ops running one after the other; an empty list passes the gradient through
  (no kernel, e.g. the backward of an ``add`` whose inputs share the output's format).

Edges: the gradient of ``X``'s output comes from the input-gradient ops of ``X``'s forward
successors (the last forward op seeds the backward pass); weight-gradient ops also depend on
``X``'s forward producers (the stashed activations).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from archsim.workloads.formats import FORMATS, NumberFormat
from archsim.workloads.graph import Workload
from archsim.workloads.ops import (
    AllReduce,
    Attention,
    Conv2d,
    Elementwise,
    Embedding,
    FusedMoE,
    Gemm,
    Norm,
    Op,
    Softmax,
)

__all__ = ["op_parameters", "GraphBuilder", "to_training", "backward_ops", "FP16", "FP32"]

FP16 = FORMATS["fp16"]
FP32 = FORMATS["fp32"]

#: inputs read by the optimiser update per parameter (parameter, gradient, optimiser state)
_OPTIMIZER_INPUTS = {"adam": 4, "sgd": 3}


def op_parameters(op: Op) -> int:
    """Parameters held in ``op``'s weight shape (biases excluded: no op shape carries them).

    Gemm with weights: ``batch / b_shared * k * n``; Conv2d: ``k * c / groups * r * s``;
    Embedding: ``vocab * dim``; Norm: ``2 * cols`` (layernorm gain and shift) or ``cols``
    (rmsnorm gain); FusedMoE: gate, up and down of its local experts; every other op: 0.
    """
    if isinstance(op, Gemm):
        return (op.batch // op.b_shared) * op.k * op.n if op.b_is_weight else 0
    if isinstance(op, Conv2d):
        return op.k * (op.c // op.groups) * op.r * op.s
    if isinstance(op, Embedding):
        return op.parameters()
    if isinstance(op, Norm):
        return (2 if op.norm == "layernorm" else 1) * op.cols
    if isinstance(op, FusedMoE):
        return op.matrices * op.local_experts * op.hidden * op.width
    return 0


@dataclass
class GraphBuilder:
    """Adds ops to a :class:`Workload` and keeps the parameter ledger.

    Attributes:
        workload: the workload being built (its ``parameters`` is kept up to date).
        params: parameters owned by each op name (weights + biases + extras).
        tied: op name -> name of the op whose weights it reuses.
    """

    workload: Workload
    params: dict[str, int] = field(default_factory=dict)
    tied: dict[str, str] = field(default_factory=dict)

    def add(self, op: Op, after: list[Op | str] | tuple[Op | str, ...] = (), *, bias: int = 0,
            extra: int = 0, tied_to: str | None = None) -> Op:
        """Add ``op`` after ``after``; count its weight shape plus ``bias`` and ``extra``.

        Args:
            op: the op.
            after: producers of its inputs.
            bias: bias parameters of the op.
            extra: other parameters (learned position table added element-wise, class token).
            tied_to: name of the op whose weights ``op`` reuses; its shape is then not counted.
        """
        self.workload.add(op, after)
        n = (0 if tied_to else op_parameters(op)) + bias + extra
        if tied_to:
            self.tied[op.name] = tied_to
            self.workload.tied = self.workload.tied | {op.name}
        if n:
            self.params[op.name] = n
            self.workload.parameters += n
        return op


def _bwd_vector(op: Op, name: str) -> Elementwise:
    """The backward of a vector op: an Elementwise of the same size (see module doc)."""
    if isinstance(op, (Softmax, Norm)):
        fn, inputs = "mul", 2
    elif isinstance(op, Elementwise):
        if op.fn == "copy":     # a copy's (a cast's) gradient is a copy (a cast back)
            return Elementwise(name=name, rows=op.rows, cols=op.cols, fn="copy", inputs=1,
                               a_format=op.out_format or op.a_format,
                               out_format=None if op.out_format is None else op.a_format,
                               acc_format=op.acc_format, pass_="bwd_data", layer=op.layer,
                               block=op.block, role=op.role)
        if op.fn == "add":
            fn, inputs = "copy", 1
        else:
            fn, inputs = op.fn, op.inputs + 1
    else:  # pragma: no cover - every vector op is handled above; others have no rule
        raise TypeError(f"no backward rule for {type(op).__name__}")
    return Elementwise(name=name, rows=op.rows, cols=op.cols, fn=fn, inputs=inputs,
                       a_format=op.a_format, acc_format=op.acc_format, pass_="bwd_data",
                       layer=op.layer, block=op.block, role=op.role)


def _is_batch_norm(op: Op) -> bool:
    """A CNN batch norm: the per-channel scale-and-shift (``Elementwise`` ``fn="mul"``,
    role ``norm``) that inference runs folded."""
    return isinstance(op, Elementwise) and op.role == "norm" and op.fn == "mul"


def _batch_statistics(op: Op) -> Op:
    """A batch norm as training runs it: the batch's statistics are computed before the
    activations are normalised, so the forward reads its input twice (a reduction pass, then
    the normalising pass: cuDNN's ``batchnorm_fwtr_nhwc``); any other op unchanged."""
    if isinstance(op, Elementwise) and _is_batch_norm(op):
        return replace(op, inputs=2)
    return op


def backward_ops(op: Op) -> tuple[list[Op], list[Op]]:
    """(input-gradient ops, weight-gradient ops) of one forward op (module doc's rules)."""
    if isinstance(op, Gemm):
        data, weight = op.as_pass("bwd_data"), op.as_pass("bwd_weight")
        # attention GEMMs: both operands are activations, both gradients flow upstream
        return ([data, weight], []) if not op.b_is_weight else ([data], [weight])
    if isinstance(op, Conv2d):
        return ([replace(op, name=f"{op.name}.bwd_data", pass_="bwd_data")],
                [replace(op, name=f"{op.name}.bwd_weight", pass_="bwd_weight")])
    if isinstance(op, AllReduce):
        # tensor parallelism (Megatron): the conjugate of a forward all-reduce is an
        # all-reduce of the same size in the backward pass
        return [replace(op, name=f"{op.name}.bwd", pass_="bwd_data")], []
    if isinstance(op, Attention):
        # FlashAttention backward: one kernel recomputing the scores (Attention.macs counts
        # its five GEMMs for pass bwd_data); dQ, dK, dV all flow upstream
        return [replace(op, name=f"{op.name}.bwd", pass_="bwd_data")], []
    if isinstance(op, Embedding):
        grad = Elementwise(name=f"{op.name}.bwd", rows=op.tokens, cols=op.dim, fn="add",
                           inputs=2, a_format=op.a_format, acc_format=op.acc_format,
                           pass_="bwd_weight", layer=op.layer, block=op.block, role=op.role)
        return [], [grad]
    bwd = _bwd_vector(op, f"{op.name}.bwd")
    if _is_batch_norm(op):
        # two reductions over the output gradient and the input (sum dy, sum dy * x_hat),
        # then dx from both again: dy and x are each read twice (cuDNN batchnorm_bwtr)
        bwd = replace(bwd, inputs=4)
    return [bwd], ([bwd] if isinstance(op, Norm) else [])


def to_training(fwd: Workload, params: dict[str, int], tied: dict[str, str],
                optimizer: str,
                backward: Mapping[str, tuple[Sequence[Op], Sequence[Op]]] | None = None
                ) -> Workload:
    """A training step (forward, backward, update) built from a forward graph.

    Args:
        fwd: the forward workload (phase ignored; the result has phase ``train``).
        params: parameters owned by each forward op (``GraphBuilder.params``).
        tied: op -> owner of the weights it reuses (``GraphBuilder.tied``).
        optimizer: ``"adam"`` or ``"sgd"`` (momentum SGD).
        backward: forward op name -> (input-gradient ops, weight-gradient ops) replacing
            :func:`backward_ops` for that op; the input-gradient ops run in the listed order
            (each after the previous one); an empty list passes the gradient through.

    Returns:
        A new workload with phase ``train``; see the module docstring for the rules.
    """
    out = Workload(fwd.name, "train", fwd.batch, fwd.seq, fwd.context, fwd.parameters,
                   fwd.family, tied=fwd.tied | frozenset(tied), devices=fwd.devices)
    order = [_batch_statistics(op) for op in fwd.ops()]
    for op in order:
        out.add(op, fwd.predecessors(op.name))
    grads_in: dict[str, list[str]] = {}   # forward op -> ops producing grads of its inputs
    grads_w: dict[str, list[str]] = {}    # forward op -> ops producing grads of its weights
    for op in reversed(order):
        succ = list(fwd.graph.successors(op.name))
        upstream = [g for s in succ for g in grads_in[s]] if succ else [op.name]
        given = (backward or {}).get(op.name)
        if given is None:
            data_ops, weight_ops = backward_ops(op)
        else:
            data_ops, weight_ops = list(given[0]), list(given[1])
        preds = fwd.predecessors(op.name)
        names_in: list[str] = []
        for b in data_ops:
            deps = upstream + (preds if b.pass_ == "bwd_weight" else [])
            if given is not None and names_in:     # a chain: after the previous kernel
                deps = names_in[-1:]
            out.add(b, list(dict.fromkeys(deps)))
            names_in.append(b.name)
        if given is not None and not names_in:     # no kernel: the gradient passes through
            names_in = list(upstream)
        names_w: list[str] = []
        for b in weight_ops:
            if b.name not in out.graph:
                out.add(b, list(dict.fromkeys(upstream + preds)))
            names_w.append(b.name)
        grads_in[op.name] = names_in
        grads_w[op.name] = names_w
    inputs = _OPTIMIZER_INPUTS[optimizer]
    for op in order:
        n = params.get(op.name, 0)
        if not n:
            continue
        deps = list(grads_w[op.name]) + [g for user, owner in tied.items() if owner == op.name
                                         for g in grads_w[user]]
        if not deps:  # e.g. a bias-only or extra-only parameter holder: its input gradient
            deps = grads_in[op.name]
        out.add(Elementwise(name=f"{op.name}.update", rows=1, cols=n, fn=optimizer,
                            inputs=inputs, a_format=FP32, acc_format=FP32, pass_="update",
                            layer=op.layer, block=op.block, role=op.role), deps)
    return out


def formats(a: str = "fp16", w: str = "fp16", acc: str = "fp32"
            ) -> tuple[NumberFormat, NumberFormat, NumberFormat]:
    """(activation, weight, accumulator) formats by name."""
    return FORMATS[a], FORMATS[w], FORMATS[acc]
