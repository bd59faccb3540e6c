"""The cost of a collective (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv) on
a cluster's topology: the one home of the collective models (the GPU unit's tensor-parallel
all-reduce is :func:`link_collective` on the device's own link).

Conventions (those of nccl-tests, ``doc/PERFORMANCE.md``): ``nbytes`` is the buffer of one
device -- the whole vector for all-reduce, the gathered output for all-gather, the input for
reduce-scatter, everything a device sends (its own share included) for all-to-all, the
message for send/recv. Bus bandwidth = ``nbytes / time x`` the algorithm factor
(``2(n-1)/n`` all-reduce, ``(n-1)/n`` all-gather / reduce-scatter / all-to-all, 1 send/recv).

Algorithms on one level of ``n`` devices with achieved per-device bandwidth ``B`` (bytes/s,
``LinkSpec.bytes_per_s``) and per-step latency ``a`` (Thakur et al. 2005; NCCL):

* ring all-reduce: ``2(n-1)/n x S / B + 2(n-1) a`` (reduce-scatter then all-gather);
* double-binary-tree all-reduce: ``2 S / B + 2 ceil(log2 n) a`` (wins on small messages);
* ring all-gather / reduce-scatter: ``(n-1)/n x S / B + (n-1) a``;
* all-to-all: ``(n-1)/n x S x hops / B + (n-1) a`` where ``hops`` is 1 through a switch and
  the mean distance of a bidirectional ring / torus otherwise (Σ d_i / 4);
* NVLink SHARP (``nvls_efficiency`` > 0, a switch that reduces): ``S / (nvls_efficiency x
  bandwidth) + 2 a``; NCCL's default all-reduce on H100 when it is faster;
* a torus runs the ring algorithm dimension by dimension, each on ``1/k`` of the bandwidth
  (k dimensions), on a vector that shrinks by ``d_i`` after each dimension.

NCCL's protocols (a switch level with an ``nccl`` spec, :class:`arch.cluster.NcclSpec`;
issue 26): each of LL, LL128 and Simple costs ``base_p + steps x step_us + wire /
(bandwidth x payload_p x efficiency_p)`` with the payload fraction of its line format
(:data:`PAYLOAD`), and the cheapest (algorithm, protocol) runs, as NCCL's tuner picks it:
ring (``2(n-1)`` steps for all-reduce, ``n-1`` for all-gather / reduce-scatter), NVLS
(``nvls_base_us + S / (nvls_efficiency x bandwidth)``, 16/32-bit floats only), all-to-all and
send/recv as one step of grouped sends (``p2p_ll``, ``p2p_simple``). This replaces ``a`` and
``efficiency`` on that level (the multi-node formulas below keep them).

vLLM's custom all-reduce (``impl``, a ``custom_allreduce`` spec): one-shot ``(n-1) S`` of peer
reads or two-shot ``2(n-1)/n S``, the cheaper, plus the CUDA-graph launch; eager calls cost at
least the host's time per call (docs/cluster.md).

Across nodes (``l`` devices of the group per node, ``N`` nodes; NCCL's choice is the fastest):

* ``ring``: one ring through all devices, one ring per NIC rail, so its bandwidth is the
  slowest of the scale-up link and the node's NICs shared by the group's ``l`` devices
  (``min(B_up, l B_out)``); ``2(n-N)`` intra-node and ``2N`` inter-node steps;
* ``tree``: chains inside nodes, double binary tree across nodes: ``2 S / min(B_up, l B_out)
  + 2(l-1) a_up + 2 ceil(log2 N) a_out``;
* ``hierarchical``: reduce-scatter inside the node, all-reduce of ``S / l`` across nodes,
  all-gather inside the node (the 2D algorithm; also what a torus of nodes uses).

Contract: :func:`collective` is the link's ``estimate`` (a link is priced the way a core is):
the caller may rely on a time that never beats the minimum traffic of the collective
(``(n-1)/n x S``, ``S`` for send/recv) at the line rate of the levels it uses, that grows with
``S``, and is 0 for a group of one; the implementation must keep every algorithm it offers
within those bounds (a property test in tests/cluster checks both).

Scale-out bandwidth is divided by the fat tree's oversubscription (every device sends at once
in the collectives of a training step) and by ``share``, the number of collectives that use the
same links at the same time (link sharing when groups overlap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.ops import ALLREDUCE_IMPLS

if TYPE_CHECKING:  # annotations only: a cluster loads designs, whose GPU units use this module
    from archsim.arch.cluster import Cluster
    from archsim.arch.link import LinkSpec

__all__ = ["CollectiveCost", "Group", "place", "collective", "link_collective",
           "ring_or_tree_allreduce", "bus_factor", "KINDS", "PROTOCOLS", "PAYLOAD",
           "NVLS_DTYPES", "IMPLS", "multimem_allreduce"]

KINDS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")
PROTOCOLS = ("ll", "ll128", "simple")
#: payload fraction of a line on the wire: LL stores 4 data bytes + a 4-byte flag per 8-byte
#: store; LL128 120 data bytes + an 8-byte flag per 128-byte line; Simple moves whole chunks
#: and synchronises with a fence (NCCL src/device/prims_ll.h, prims_ll128.h; Hu et al.,
#: "Demystifying NCCL", arXiv 2507.04786, sec. 3)
PAYLOAD = {"ll": 0.5, "ll128": 120 / 128, "simple": 1.0}
#: formats the NVSwitch reduces in place (multimem.ld_reduce: f16, bf16, f32; PTX ISA 8.x);
#: NCCL does not run NVLS for 8-bit types
NVLS_DTYPES = ("fp16", "bf16", "fp32")
IMPLS = ALLREDUCE_IMPLS


@dataclass(frozen=True)
class Group:
    """Where a communicating group sits: ``size`` devices, ``local`` of them in each node."""

    size: int
    local: int

    @property
    def nodes(self) -> int:
        return self.size // self.local


@dataclass(frozen=True)
class CollectiveCost:
    """Time and traffic of one collective.

    Attributes:
        kind, algorithm: what ran and how (``ring``, ``tree``, ``hierarchical``, ``direct``).
        time_s: completion time.
        nbytes: the per-device buffer (nccl-tests convention, module doc).
        wire_bytes: bytes each device sends over links (both levels).
        energy_j: link energy of the whole group (every sender; one for send/recv).
        group: devices in the group.
        protocol: the NCCL protocol (``ll``, ``ll128``, ``simple``) on a level with an
            ``nccl`` spec, ``custom-graph`` / ``custom-eager`` for vLLM's kernel, else "".
    """

    kind: str
    algorithm: str
    time_s: float
    nbytes: float
    wire_bytes: float
    energy_j: float
    group: int
    protocol: str = ""

    @property
    def algbw_gbps(self) -> float:
        return self.nbytes / self.time_s / 1e9 if self.time_s > 0 else 0.0

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * bus_factor(self.kind, self.group)


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of a collective over ``n`` devices."""
    if kind == "allreduce":
        return 2 * (n - 1) / n
    if kind in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def place(cluster: Cluster, size: int, stride: int) -> Group:
    """The group of ``size`` devices whose ranks are ``stride`` apart (Megatron rank order:
    tensor parallel innermost), on nodes of ``devices_per_node`` consecutive ranks."""
    dpn = cluster.spec.devices_per_node
    local = math.gcd(size, max(1, dpn // stride)) if stride < dpn else 1
    return Group(size, local)


def ring_or_tree_allreduce(n: int, nbytes: float, bytes_per_s: float, latency_s: float
                           ) -> tuple[str, float, int, float]:
    """NCCL's single-level all-reduce: the faster of a ring and a double binary tree.

    Returns:
        (algorithm, bytes sent per device, steps, time in s).
    """
    ring = ("ring", 2 * (n - 1) / n * nbytes, 2 * (n - 1))
    tree = ("tree", 2.0 * nbytes, 2 * math.ceil(math.log2(n)))
    best = min((ring, tree), key=lambda a: a[1] / bytes_per_s + a[2] * latency_s)
    return best[0], best[1], best[2], best[1] / bytes_per_s + best[2] * latency_s


def _hops(link: LinkSpec, n: int) -> float:
    """Mean hops of a message between two devices of the level (all-to-all)."""
    if link.topology == "ring":
        return max(1.0, n / 4)
    if link.topology == "torus":
        return max(1.0, sum(d / 4 for d in link.torus_dims))
    return 1.0


def _level(kind: str, link: LinkSpec, n: int, nbytes: float, bw: float,
           algo_only: str | None = None, dtype: str = "bf16", protocol: str | None = None
           ) -> tuple[str, str, float, float]:
    """(algorithm, protocol, time, wire bytes per device) of a collective on one level of
    ``n`` devices; ``bw`` is the level's achieved bandwidth (bytes/s) for this collective."""
    a = link.latency_s
    if n == 1:
        return "local", "", 0.0, 0.0
    if link.nccl is not None and algo_only != "tree":
        return _nccl_level(kind, link, n, nbytes, bw / link.bytes_per_s, algo_only, dtype,
                           protocol)
    if kind == "sendrecv":
        return "direct", "", nbytes / bw + a, nbytes
    if kind == "alltoall":
        wire = (n - 1) / n * nbytes
        return "direct", "", wire * _hops(link, n) / bw + (n - 1) * a, wire
    if link.topology == "torus" and len(link.torus_dims) > 1:
        k = len(link.torus_dims)
        t = wire_total = 0.0
        s = nbytes
        passes = 2 if kind == "allreduce" else 1
        for d in link.torus_dims:
            wire = passes * (d - 1) / d * s
            t += wire / (bw / k) + passes * (d - 1) * a
            wire_total += wire
            s /= d
        return "torus-rings", "", t, wire_total
    if kind == "allreduce":
        algo, wire, _, t = ring_or_tree_allreduce(n, nbytes, bw, a)
        if algo_only in ("ring", "tree") and algo != algo_only:
            wire = 2 * (n - 1) / n * nbytes if algo_only == "ring" else 2.0 * nbytes
            steps = 2 * (n - 1) if algo_only == "ring" else 2 * math.ceil(math.log2(n))
            algo, t = algo_only, wire / bw + steps * a
        if link.nvls_efficiency > 0 and algo_only in (None, "nvls"):
            # NVLink SHARP: each device sends its vector to the switch once and receives the
            # sum once; the switch's reduction rate bounds the algorithm bandwidth
            t_nvls = nbytes / (link.nvls_efficiency * link.bandwidth_gbps * 1e9 * bw
                               / link.bytes_per_s) + 2 * a
            if algo_only == "nvls" or t_nvls < t:
                return "nvls", "", t_nvls, nbytes
        return algo, "", t, wire
    wire = (n - 1) / n * nbytes          # all-gather / reduce-scatter ring
    return "ring", "", wire / bw + (n - 1) * a, wire


def _nccl_level(kind: str, link: LinkSpec, n: int, nbytes: float, share: float,
                algo_only: str | None, dtype: str, protocol: str | None
                ) -> tuple[str, str, float, float]:
    """NCCL's protocols on one switch level (module doc): the cheapest (algorithm,
    protocol); ``share`` = the fraction of the link this collective gets."""
    nc = link.nccl
    assert nc is not None
    raw = link.bandwidth_gbps * 1e9 * share          # bytes/s on the wire, per direction
    cands: list[tuple[str, str, float, float]] = []  # algorithm, protocol, time, wire
    if kind in ("sendrecv", "alltoall"):
        # grouped send/recv to every peer at once through the switch: one step
        wire = nbytes if kind == "sendrecv" else (n - 1) / n * nbytes
        for name, ps in (("ll", nc.p2p_ll), ("simple", nc.p2p_simple)):
            cands.append(("direct", name, ps.base_us * 1e-6
                          + wire / (raw * PAYLOAD[name] * ps.efficiency), wire))
    else:
        passes = 2 if kind == "allreduce" else 1
        steps, wire = passes * (n - 1), passes * (n - 1) / n * nbytes
        if algo_only in (None, "ring"):
            for name in PROTOCOLS:
                ps = getattr(nc, name)
                cands.append(("ring", name, ps.base_us * 1e-6 + steps * nc.step_us * 1e-6
                              + wire / (raw * PAYLOAD[name] * ps.efficiency), wire))
        if (kind == "allreduce" and link.nvls_efficiency > 0 and dtype in NVLS_DTYPES
                and algo_only in (None, "nvls")):
            # NVLink SHARP: one multimem reduce-load and one multimem store of the vector;
            # Simple protocol only (NCCL)
            cands.append(("nvls", "simple", nc.nvls_base_us * 1e-6
                          + nbytes / (raw * link.nvls_efficiency), nbytes))
    if protocol is not None:
        cands = [c for c in cands if c[1] == protocol]
    if not cands:
        raise ConfigError(Problem(f"NCCL has no {algo_only or ''} {protocol or ''} algorithm "
                                  f"for {kind} of {dtype} on {link.name}", "algorithm"))
    return min(cands, key=lambda c: c[2])


def _custom_allreduce(link: LinkSpec, n: int, nbytes: float, share: float, launch: str
                      ) -> tuple[str, float, float]:
    """vLLM's custom all-reduce (module doc): (algorithm, time, wire bytes per device)."""
    c = link.custom_allreduce
    assert c is not None
    raw = link.bandwidth_gbps * 1e9 * share
    one = c.oneshot_base_us * 1e-6 + (n - 1) * nbytes / (raw * c.oneshot_efficiency)
    two = c.twoshot_base_us * 1e-6 + 2 * (n - 1) / n * nbytes / (raw * c.twoshot_efficiency)
    algo, t, wire = (("oneshot", one, (n - 1) * nbytes) if one <= two
                     else ("twoshot", two, 2 * (n - 1) / n * nbytes))
    gpu = c.graph_launch_us * 1e-6 + t
    return algo, gpu if launch == "graph" else max(c.eager_host_us * 1e-6, gpu), wire


def link_collective(link: LinkSpec, kind: str, n: int, nbytes: float, share: int = 1,
                    algorithm: str | None = None, *, protocol: str | None = None,
                    dtype: str = "bf16", impl: str = "nccl", file: str | None = None
                    ) -> CollectiveCost:
    """Cost of one collective of ``kind`` over ``n`` devices of one level, ``link`` (one
    node's switch: a device's own GPU link, :func:`arch.link.device_link`, or a cluster's
    scale-up link); the arguments are :func:`collective`'s (``file``: where ``link`` was
    read, for the error).

    Raises:
        ConfigError: ``impl`` is vLLM's custom all-reduce and ``link`` has no
            ``custom_allreduce`` spec; an unknown ``impl``.
    """
    if impl not in IMPLS:
        raise ConfigError(Problem(f"unknown all-reduce implementation {impl!r} (expected one "
                                  f"of {', '.join(IMPLS)})", "impl"))
    if n <= 1 or nbytes <= 0:
        return CollectiveCost(kind, "local", 0.0, nbytes, 0.0, 0.0, max(1, n))
    if impl == "auto":      # the engine's custom kernel where it is faster, else NCCL
        nccl = link_collective(link, kind, n, nbytes, share, algorithm, protocol=protocol,
                               dtype=dtype, impl="nccl", file=file)
        if kind != "allreduce" or link.custom_allreduce is None:
            return nccl
        custom = link_collective(link, kind, n, nbytes, share, impl="custom-graph")
        return custom if custom.time_s < nccl.time_s else nccl
    if impl != "nccl" and kind == "allreduce":
        if link.custom_allreduce is None:
            raise ConfigError(Problem(f"{impl} all-reduce needs a custom_allreduce spec on "
                                      f"the link {link.name!r}", "scale_up.custom_allreduce",
                                      file))
        algo, t, wire = _custom_allreduce(link, n, nbytes, 1.0 / share, impl.split("-")[1])
        proto = impl
    else:
        algo, proto, t, wire = _level(kind, link, n, nbytes, link.bytes_per_s / share,
                                      algorithm, dtype, protocol)
    e = wire * (1 if kind == "sendrecv" else n) * 8 * link.energy_pj_per_bit * 1e-12
    return CollectiveCost(kind, algo, t, nbytes, wire, e, n, proto)


def collective(cluster: Cluster, kind: str, nbytes: float, group: Group, share: int = 1,
               algorithm: str | None = None, *, protocol: str | None = None,
               dtype: str = "bf16", impl: str = "nccl") -> CollectiveCost:
    """Cost of one collective of ``kind`` over ``group`` on ``cluster`` (module doc).

    Args:
        cluster: the cluster.
        kind: one of :data:`KINDS`.
        nbytes: the per-device buffer in bytes (module doc).
        group: from :func:`place`.
        share: collectives using the same links at once (each gets ``1/share``).
        algorithm: force one single-node all-reduce algorithm (``ring``, ``tree``, ``nvls``;
            as ``NCCL_ALGO``); None = the fastest.
        protocol: force one NCCL protocol (``ll``, ``ll128``, ``simple``; as ``NCCL_PROTO``)
            on a level with an ``nccl`` spec; None = the cheapest.
        dtype: the element format reduced (NVLS reduces 16- and 32-bit floats only).
        impl: the all-reduce implementation of a one-node group: ``nccl``, vLLM's custom
            all-reduce replayed in a CUDA graph (``custom-graph``) or called eagerly
            (``custom-eager``), or ``auto`` (the cheaper of ``custom-graph`` and NCCL, as
            serving engines choose by message size); other collectives, and groups across
            nodes, use NCCL (as vLLM falls back to it).

    Raises:
        ConfigError: the group needs a link the cluster does not have.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}")       # a program bug
    if impl not in IMPLS:
        raise ConfigError(Problem(f"unknown all-reduce implementation {impl!r} (expected one "
                                  f"of {', '.join(IMPLS)})", "impl"))
    n = group.size
    if n <= 1 or nbytes <= 0:
        return CollectiveCost(kind, "local", 0.0, nbytes, 0.0, 0.0, max(1, n))
    up, out = cluster.spec.scale_up, cluster.spec.scale_out
    if group.local > 1 and up.name == "none":
        raise ConfigError(Problem(f"{n} devices communicate but the design "
                                  f"{cluster.spec.device!r} has no device-to-device link "
                                  "(give it an nvlink spec or use a cluster YAML)", "nvlink"))
    b_up = up.bytes_per_s / share
    loc, N = group.local, group.nodes
    if N == 1:
        return link_collective(up, kind, n, nbytes, share, algorithm, protocol=protocol,
                               dtype=dtype, impl=impl, file=cluster.file or None)
    if out is None:
        raise ConfigError(Problem(f"a group of {n} devices spans {N} nodes but the cluster "
                                  f"{cluster.name!r} has no scale_out link", "scale_out",
                                  cluster.file or None))
    b_out = out.bytes_per_s / share / (out.oversubscription if out.topology == "fat_tree"
                                       else 1.0)
    a_up, a_out = up.latency_s, out.latency_s
    e_bit_up, e_bit_out = up.energy_pj_per_bit * 1e-12, out.energy_pj_per_bit * 1e-12
    cands: list[tuple[str, float, float, float]] = []    # algo, time, wire up, wire out
    if kind == "sendrecv":
        cands.append(("direct", nbytes / b_out + a_out, 0.0, nbytes))
    elif kind == "alltoall":
        off = (n - loc) / n * nbytes          # to devices on other nodes, through the NIC
        on = (loc - 1) / n * nbytes           # to the node's other devices
        t = max(off * _hops(out, N) / b_out, on * _hops(up, loc) / b_up) + (N - 1) * a_out \
            + max(0, loc - 1) * a_up
        cands.append(("direct", t, on, off))
    else:
        passes = 2 if kind == "allreduce" else 1
        # hierarchical: (reduce-scatter) inside, the collective of S/loc across nodes, (all-gather)
        inner_kind = "reducescatter" if kind != "allgather" else "allgather"
        _, _, t_in, w_in = _level(inner_kind, up, loc, nbytes, b_up, dtype=dtype)
        _, _, t_o, w_o = _level(kind, out, N, nbytes / loc, b_out, dtype=dtype)
        t_h = t_in * (2 if kind == "allreduce" else 1) + t_o
        cands.append(("hierarchical", t_h, w_in * (2 if kind == "allreduce" else 1), w_o))
        switchlike = out.topology in ("switch", "fat_tree") and up.topology in ("switch",
                                                                                 "fat_tree")
        if switchlike:
            bw = min(b_up, loc * b_out)
            wire = passes * (n - 1) / n * nbytes
            t_r = wire / bw + passes * ((n - N) * a_up + N * a_out)
            # a ring crosses each node boundary once per rail: 1/loc of the traffic leaves
            cands.append(("ring", t_r, wire * (loc - 1) / loc, wire / loc))
            if kind == "allreduce":
                t_t = 2 * nbytes / bw + 2 * (loc - 1) * a_up + 2 * math.ceil(math.log2(N)) * a_out
                cands.append(("tree", t_t, 2 * nbytes * (loc - 1) / loc, 2 * nbytes / loc))
    algo, t, w_up, w_out = min(cands, key=lambda c: c[1])
    senders = 1 if kind == "sendrecv" else n
    e = senders * 8 * (w_up * e_bit_up + w_out * e_bit_out)
    return CollectiveCost(kind, algo, t, nbytes, w_up + w_out, e, n)


def multimem_allreduce(cluster: Cluster, nbytes: float, group: Group) -> CollectiveCost:
    """A one-kernel all-reduce through the switch's multimem loads and stores (NVLS) replayed
    in a CUDA graph, as TokenWeave's fused all-reduce + RMSNorm (Gond et al. 2025): the NVLS
    transfer ``S / (nvls_efficiency x bandwidth)`` of NCCL's NVLS algorithm (module doc) plus
    the launch and barrier of a one-shot custom kernel (``custom_allreduce.graph_launch_us +
    oneshot_base_us``) instead of NCCL's ``nvls_base_us``, since it is not NCCL's kernel --
    both constants fitted elsewhere (docs/cluster.md), composed here, not refitted; the
    cheaper of it and NCCL's NVLS when the link has no custom all-reduce spec to take the
    launch from (then NCCL's NVLS alone).

    Raises:
        ConfigError: the group spans nodes or its switch does not reduce (no NVLS).
    """
    up = cluster.spec.scale_up
    if group.nodes > 1 or up.nvls_efficiency <= 0:
        raise ConfigError(Problem(f"a multimem all-reduce needs NVLink SHARP inside one node; "
                                  f"the link {up.name!r} of {cluster.name!r} has "
                                  f"{'none' if up.nvls_efficiency <= 0 else 'more nodes'}",
                                  "scale_up.nvls_efficiency", cluster.file or None))
    nccl = collective(cluster, "allreduce", nbytes, group, algorithm="nvls")
    c = up.custom_allreduce
    if c is None or group.size <= 1:
        return nccl
    raw = up.bandwidth_gbps * 1e9
    t = (c.graph_launch_us + c.oneshot_base_us) * 1e-6 + nbytes / (raw * up.nvls_efficiency)
    if t >= nccl.time_s:
        return nccl
    e = nbytes * group.size * 8 * up.energy_pj_per_bit * 1e-12
    return CollectiveCost("allreduce", "multimem", t, nbytes, nbytes, e, group.size, "")
