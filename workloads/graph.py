"""Workload: a network as a networkx DiGraph of ops.

Nodes are op names with the :class:`~workloads.ops.Op` in the node attribute ``op``; an edge
``u -> v`` means ``v`` consumes ``u``'s output and carries ``bytes`` (the tensor size). The
order of ``ops()`` is a deterministic topological order (insertion order breaks ties), so
results are reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import networkx as nx

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.formats import NumberFormat
from archsim.workloads.ops import Conv2d, Embedding, Gemm, Op, Sparsity

__all__ = ["Workload", "PHASES", "SPARSE_WEIGHT_ROLES", "ROW_PARALLEL_ROLES"]

#: The linear layers whose K (input features) tensor parallelism splits over the ranks
#: (Megatron's row-parallel layers): the attention output and the MLP's down projections.
ROW_PARALLEL_ROLES = frozenset({"proj", "ffn_down", "expert_down"})

#: The linear layers of a block that unstructured weight pruning sparsifies (attention
#: projections, the MLP, routed experts): what Flash-LLM / SpInfer run as sparse GEMMs.
SPARSE_WEIGHT_ROLES = frozenset({"qkv", "proj", "ffn_up", "ffn_gate", "ffn_down",
                                 "expert_gate", "expert_up", "expert_down"})

PHASES = ("prefill", "decode", "train", "inference")

_T = TypeVar("_T")


@dataclass
class Workload:
    """A network (or a single op) to evaluate.

    Attributes:
        name: model name (``llama2-7b``).
        phase: ``prefill``, ``decode``, ``train`` or ``inference`` (CNNs, single ops).
        batch: sequences (LLMs) or samples (CNNs) per step.
        seq: tokens per sequence processed in this step (prefill/train), 1 for decode.
        context: KV-cache length for decode (tokens already in the cache).
        parameters: the model's parameter count (for identity checks and reports).
        family: ``transformer`` (rates in tokens/s), ``cnn`` (samples/s) or ``op``.
        graph: the op graph.
        tied: names of ops that reuse another op's weights (a tied LM head); their weights
            are stored once, on the owner.
        devices: devices that each run this graph in parallel (tensor parallelism: the graph
            is one device's shard, with its all-reduces); results scale energy and area by it.
        held_bytes: bytes resident beyond what the ops read (the KV cache a top-k decode
            step leaves unread, ``workloads.kvtech``): added by :meth:`resident_bytes`.
    """

    name: str
    phase: str = "inference"
    batch: int = 1
    seq: int = 1
    context: int = 0
    parameters: int = 0
    family: str = "op"
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    _order: list[str] = field(default_factory=list, repr=False)
    tied: frozenset[str] = frozenset()
    devices: int = 1
    held_bytes: float = 0.0
    _derived: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)

    def add(self, op: Op, after: Iterable[Op | str] = ()) -> Op:
        """Add ``op`` with edges from each op (or op name) in ``after``; returns ``op``."""
        if op.name in self.graph:
            raise WorkloadError(Problem(f"duplicate op name {op.name!r}", self.name))
        self._derived.clear()
        self.graph.add_node(op.name, op=op, index=len(self._order))
        self._order.append(op.name)
        for dep in after:
            dname = dep if isinstance(dep, str) else dep.name
            if dname not in self.graph:
                raise WorkloadError(Problem(f"op {op.name!r} depends on unknown op {dname!r}",
                                            self.name))
            src = self.graph.nodes[dname]["op"]
            self.graph.add_edge(dname, op.name, bytes=src.output_bytes())
        return op

    def derived(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """``make()``, computed once per state of the graph: a value derived from the ops and
        edges alone (their order, a per-op table), stored under ``key`` and reused until the
        graph changes. A sweep or a serving run evaluates one workload on many designs, so
        what depends only on the workload is worked out once (``ops``, ``resident_bytes``,
        the mapper's op signatures). ``add`` forgets every stored value; so does a graph
        whose node count changed behind ``add``'s back (ops and their edges are added by
        ``add`` alone). ``make`` must read only the graph and what ``key`` names (a value
        that also depends on, say, ``phase`` puts the phase in its key)."""
        stamp = len(self.graph)
        if self._derived.get("_stamp") != stamp:
            self._derived.clear()
            self._derived["_stamp"] = stamp
        if key not in self._derived:
            self._derived[key] = make()
        value: _T = self._derived[key]
        return value

    def ops(self) -> list[Op]:
        """Ops in deterministic topological order (a new list; the order is worked out once
        per graph, :meth:`derived`)."""
        return list(self.derived("ops", self._topological_ops))

    def _topological_ops(self) -> tuple[Op, ...]:
        idx = nx.get_node_attributes(self.graph, "index")
        order = nx.lexicographical_topological_sort(self.graph, key=lambda n: idx[n])
        return tuple(self.graph.nodes[n]["op"] for n in order)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops())

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def op(self, name: str) -> Op:
        return self.graph.nodes[name]["op"]

    def predecessors(self, name: str) -> list[str]:
        return list(self.graph.predecessors(name))

    def macs(self) -> int:
        """Total dense MACs."""
        return sum(op.macs() for op in self.ops())

    def flops(self) -> int:
        """Total operations (2 x MACs + vector ops)."""
        return sum(op.flops() for op in self.ops())

    @property
    def tokens(self) -> int:
        """Tokens processed (prefill/train: batch x seq) or generated (decode: batch)."""
        return self.batch * (1 if self.phase == "decode" else self.seq)

    @property
    def is_llm(self) -> bool:
        """Transformer workloads report tokens/s; others samples/s."""
        return self.family == "transformer"

    def with_formats(self, a_format: NumberFormat | None = None,
                     w_format: NumberFormat | None = None) -> Workload:
        """A copy whose ops use other activation / weight formats (weights: matrix ops and
        embeddings). Optimiser updates (``pass_ == "update"``) keep their format: mixed
        precision updates fp32 master weights and fp32 optimiser state whatever the compute
        formats are."""
        out = Workload(self.name, self.phase, self.batch, self.seq, self.context, self.parameters,
                       self.family, tied=self.tied, devices=self.devices)
        for op in self.ops():
            if op.pass_ == "update":
                out.add(op, self.graph.predecessors(op.name))
                continue
            out.add(op.with_formats(a_format, w_format if op.is_matrix or op.kind == "embedding"
                                    else None),
                    self.graph.predecessors(op.name))
        return out

    def in_format(self, fmt: NumberFormat) -> Workload:
        """A copy computing in ``fmt`` (a design's native format): activations, and weights
        too unless the model has its own weight format (a matrix op whose weights are in
        another format than its activations, e.g. BitNet's ternary weights)."""
        own_w = any(op.w_format.name != op.a_format.name for op in self.ops() if op.is_matrix)
        return self.with_formats(fmt, None if own_w else fmt)

    def with_sparsity(self, n: int, m: int) -> Workload:
        """A copy with ``n:m`` structured sparsity on the weights of every prunable layer.

        Prunable: a weight-bearing GEMM or a non-grouped convolution in the forward or
        backward-data pass whose reduction dimension (the GEMM ``k`` of that pass) is a
        multiple of ``m`` (the usual rule of NVIDIA ASP / SR-STE: a first convolution with
        C*R*S = 147 stays dense). Backward-data ops get the transposed weight's pattern
        (BDWP, Fang et al. 2023); backward-weight GEMMs produce a dense gradient and stay
        dense. ``n == m`` removes sparsity.
        """

        sp = Sparsity() if n == m else Sparsity(n, m)
        out = Workload(self.name, self.phase, self.batch, self.seq, self.context, self.parameters,
                       self.family, tied=self.tied, devices=self.devices)
        for op in self.ops():
            new = op
            if op.pass_ in ("fwd", "bwd_data"):
                if isinstance(op, Gemm) and op.b_is_weight and op.k % m == 0:
                    new = replace(op, w_sparsity=sp)
                elif (isinstance(op, Conv2d) and op.groups == 1
                      and op.as_gemm().k % m == 0):
                    new = replace(op, w_sparsity=sp)
            out.add(new, self.graph.predecessors(op.name))
        return out

    def split_batch(self, k: int, flag: str = "--overlap") -> Workload:
        """One of ``k`` equal pieces of the batch (a nano-batch, :mod:`mapper.overlap`): the
        same graph with every op's batch-proportional size divided by ``k`` -- a GEMM's rows
        ``m`` (a weight GEMM) or its ``batch`` (activation x activation, per sequence and
        head), an attention's sequences, a vector op's rows, an embedding's or a fused MoE
        layer's tokens, a collective's elements, a convolution's images. A model built at
        ``batch / k`` has the same ops (tests/foundation/test_split_batch.py).

        Raises:
            WorkloadError: the batch or an op's size does not split into ``k`` (naming
                ``flag``), or an op with no batch dimension known here.
        """
        if k == 1:
            return self
        if self.batch % k:
            raise WorkloadError(Problem(f"a batch of {self.batch} sequences does not split into "
                                        f"{k} equal nano-batches", flag))
        out = Workload(self.name, self.phase, self.batch // k, self.seq, self.context,
                       self.parameters, self.family, tied=self.tied, devices=self.devices)
        for op in self.ops():
            if isinstance(op, Gemm):
                key = "m" if op.b_is_weight else "batch"
            elif isinstance(op, Conv2d):
                key = "n"
            else:
                key = next((f for f in ("rows", "tokens", "elements", "batch")
                            if hasattr(op, f)), "")
            size: int = getattr(op, key, 0) if key else 0
            if not key or size % k:
                raise WorkloadError(Problem(
                    f"op {op.name} ({op.kind}) does not split into {k} nano-batches"
                    + (f" ({key} {size})" if key else " (no batch dimension)"), flag))
            smaller: dict[str, Any] = {key: size // k}
            out.add(replace(op, **smaller), self.graph.predecessors(op.name))
        return out

    def with_weight_sparsity(self, fraction: float) -> Workload:
        """A copy whose blocks' linear layers (roles :data:`SPARSE_WEIGHT_ROLES`, forward
        pass) hold a ``fraction`` of zeros at random positions (unstructured pruning, as
        SparseGPT / Wanda produce), stored bitmap-encoded (``Sparsity(density=1 -
        fraction, encoding="bitmap")``): the weights the serving kernels of Flash-LLM and
        SpInfer load compressed; a GEMM of unknown role (a single GEMM, an imported graph's)
        too. The embedding and the head stay dense. ``fraction`` 0 is the workload itself.

        Raises:
            WorkloadError: ``fraction`` outside [0, 1) (naming ``--weight-sparsity``).
        """
        if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) \
                or not 0.0 <= fraction < 1.0:
            raise WorkloadError(Problem(f"expected a fraction of zero weights in [0, 1), "
                                        f"got {fraction!r}", "--weight-sparsity"))
        if fraction == 0:
            return self
        sp = Sparsity(density=1.0 - fraction, encoding="bitmap")
        out = Workload(self.name, self.phase, self.batch, self.seq, self.context, self.parameters,
                       self.family, tied=self.tied, devices=self.devices)
        for op in self.ops():
            new = op
            if (op.pass_ == "fwd" and isinstance(op, Gemm) and op.b_is_weight
                    and (op.role in SPARSE_WEIGHT_ROLES or op.role == "")):
                new = replace(op, w_sparsity=sp)
            out.add(new, self.graph.predecessors(op.name))
        return out

    def with_weight_groups(self, group_size: int, act_order: bool = False,
                           tp: int = 1) -> Workload:
        """A copy whose blocks' linear layers (:data:`SPARSE_WEIGHT_ROLES`, forward; a single
        GEMM and a CNN's fully-connected layers too) carry group-wise quantisation scales: one scale and zero point per
        ``group_size`` weights along K (GPTQ / AWQ). With ``act_order`` (GPTQ ``desc_act``),
        as vLLM runs it: the weights are pre-permuted at load time and each GEMM permutes its
        input's columns first (``Gemm.permute_a``); under tensor parallelism (``tp`` > 1) the
        row-parallel layers (:data:`ROW_PARALLEL_ROLES`, K split over ranks) keep the scales
        of every group of the whole K on every rank (``Gemm.group_span = k x tp``), and no
        activation is gathered. ``group_size`` 0 is the workload itself.

        Raises:
            WorkloadError: ``group_size`` not an int >= 0 (``--w-group-size``); act-order
                without groups (``--act-order``); groups on float weights
                (``--w-group-size``: scales quantise integer weights).
        """
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 0:
            raise WorkloadError(Problem(f"expected an int >= 0, got {group_size!r}",
                                        "--w-group-size"))
        if act_order and not group_size:
            raise WorkloadError(Problem("act-order permutes the groups of group-wise "
                                        "quantised weights: give --w-group-size (e.g. 128)",
                                        "--act-order"))
        if not group_size:
            return self
        out = Workload(self.name, self.phase, self.batch, self.seq, self.context, self.parameters,
                       self.family, tied=self.tied, devices=self.devices)
        for op in self.ops():
            new = op
            if (op.pass_ == "fwd" and isinstance(op, Gemm) and op.b_is_weight
                    and (op.role in SPARSE_WEIGHT_ROLES or op.role in ("", "fc"))):
                if not op.w_format.is_integer:
                    raise WorkloadError(Problem(
                        f"group scales quantise integer weights; {op.name} has "
                        f"{op.w_format.name} weights (give --w-format int2..int8)",
                        "--w-group-size"))
                span = op.k * tp if act_order and op.role in ROW_PARALLEL_ROLES else 0
                new = replace(op, group_size=group_size, group_span=span,
                              permute_a=act_order)
            out.add(new, self.graph.predecessors(op.name))
        return out

    def resident_bytes(self) -> float:
        """Bytes that must sit in off-chip memory at once (a lower bound), for the memory
        capacity check of ``archsim.evaluate``:

        * weights: every forward op's resident weights once (``Op.resident_weight_bytes``:
          every expert a device holds, reached by a token or not; embedding tables whole,
          ``vocab x dim``; tied weights on their owner only);
        * decode: the KV cache (operand B of the attention QK and AV GEMMs of every layer);
        * train: what the optimiser ``update`` ops read (fp32 parameters, gradients and
          optimiser states) plus the forward activations kept for the backward pass (every
          forward op's output);
        * the largest single op's activations (inputs and outputs).

        Worked out once per (graph, phase, tied ops): :meth:`derived`.
        """
        return self.derived(("resident_bytes", self.phase, self.tied), self._resident_bytes)

    def _resident_bytes(self) -> float:
        total = peak = 0.0
        for op in self.ops():
            act = op.input_bytes() + op.output_bytes()
            if op.pass_ == "fwd" and op.name not in self.tied:
                if isinstance(op, Embedding):
                    total += op.vocab * op.dim * op.w_format.bytes_per_element
                else:
                    total += op.resident_weight_bytes()
                if isinstance(op, Gemm) and not op.b_is_weight and self.phase == "decode":
                    total += op.b_bytes()             # K (QK) and V (AV) caches
                    act -= op.b_bytes()               # ... counted once, above
                if self.phase == "train":
                    total += op.output_bytes()        # stashed for the backward pass
            elif op.pass_ == "update":
                total += op.input_bytes()
            peak = max(peak, act)
        return total + peak + self.held_bytes

    @classmethod
    def single(cls, op: Op) -> Workload:
        """A workload of one op (``archsim gemm``)."""
        w = cls(name=op.name, phase="inference", batch=1, seq=1)
        w.add(op)
        return w
