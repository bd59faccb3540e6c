"""One level of interconnect as data (:class:`LinkSpec`: bandwidth, step latency, topology,
NCCL's protocols, vLLM's custom all-reduce) and the GPU-to-GPU link of a device design.

Here rather than in :mod:`arch.cluster` (which re-exports these names) so that a device unit
prices its own collectives (the GPU unit's tensor-parallel all-reduce,
:func:`arch.collective.link_collective`) without loading clusters, which load designs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from archsim.arch.shipped import configs_dir
from archsim.arch.spec import SpecBuilder, param
from archsim.workloads.errors import ConfigError
from archsim.workloads.yamlio import read_yaml

__all__ = ["TOPOLOGIES", "ProtocolSpec", "NcclSpec", "CustomAllreduceSpec", "LinkSpec",
           "nvswitch_protocols", "device_link"]

TOPOLOGIES = ("switch", "ring", "torus", "fat_tree")


@dataclass(frozen=True, kw_only=True)
class ProtocolSpec:
    """One NCCL protocol (LL, LL128, Simple) or p2p path on a link (:mod:`arch.collective`)."""

    base_us: float = param(doc="fixed cost of one call with this protocol (launch, setup, "
                               "final synchronisation)", unit="us", min=0)
    efficiency: float = param(doc="achieved fraction of the protocol's payload rate "
                                  "(bandwidth_gbps x payload fraction)", min=0, max=1,
                              min_exclusive=True)


@dataclass(frozen=True, kw_only=True)
class NcclSpec:
    """NCCL's protocols on one level (docs/cluster.md, "NCCL protocols"): a collective's time
    is ``base + steps x step_us + wire / (bandwidth x payload x efficiency)`` for each
    protocol, and NCCL's tuner runs the cheapest."""

    step_us: float = param(doc="latency of one ring step (one hop through the switch and "
                               "the receiver's flag poll)", unit="us", min=0)
    ll: ProtocolSpec = param(doc="LL: 8-byte lines, 4 bytes of data + a 4-byte flag")
    ll128: ProtocolSpec = param(doc="LL128: 128-byte lines, 120 bytes of data + an 8-byte "
                                    "flag")
    simple: ProtocolSpec = param(doc="Simple: whole chunks, a memory fence per chunk")
    nvls_base_us: float = param(0.0, doc="NVLS (in-switch reduction) all-reduce: fixed cost "
                                         "of one call", unit="us", min=0)
    p2p_ll: ProtocolSpec = param(doc="send/recv (all-to-all) with the LL protocol")
    p2p_simple: ProtocolSpec = param(doc="send/recv (all-to-all) with the Simple protocol")
    source: str = param("", doc="where the numbers come from")


@dataclass(frozen=True, kw_only=True)
class CustomAllreduceSpec:
    """vLLM's custom all-reduce on one NVLink level (docs/cluster.md): one-shot (every
    device reads its ``n-1`` peers' whole vectors) or two-shot (reduce-scatter then
    all-gather through peer reads), whichever is cheaper; launched from a CUDA graph or
    eagerly, where the host's time per call hides the kernel."""

    graph_launch_us: float = param(doc="kernel launch + barrier of one call replayed in a "
                                       "CUDA graph", unit="us", min=0)
    eager_host_us: float = param(doc="host time of one eager call (Python, buffer "
                                     "registration check, launch): the call's floor",
                                 unit="us", min=0)
    oneshot_base_us: float = param(doc="fixed cost of the one-shot kernel", unit="us", min=0)
    oneshot_efficiency: float = param(doc="achieved fraction of bandwidth_gbps reading the "
                                          "peers' vectors", min=0, max=1, min_exclusive=True)
    twoshot_base_us: float = param(doc="fixed cost of the two-shot kernel (its second "
                                       "barrier)", unit="us", min=0)
    twoshot_efficiency: float = param(doc="achieved fraction of bandwidth_gbps in the "
                                          "two-shot kernel", min=0, max=1,
                                      min_exclusive=True)
    source: str = param("", doc="where the numbers come from")


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    """One level of interconnect (scale-up inside a node, or scale-out between nodes)."""

    name: str = param(doc="link name (nvlink4, ndr-ib, ...)")
    bandwidth_gbps: float = param(doc="per-device, per-direction bandwidth of this level "
                                      "(all of the device's ports / NICs together)", unit="GB/s",
                                  min=0, min_exclusive=True)
    latency_us: float = param(doc="latency of one step of a collective (one hop, incl. "
                                  "the software of one NCCL step)", unit="us", min=0)
    efficiency: float = param(0.8, doc="achieved fraction of bandwidth_gbps (protocol "
                                       "overhead)", min=0, max=1, min_exclusive=True)
    topology: str = param("switch", doc="how the devices of this level connect",
                          choices=TOPOLOGIES)
    torus_dims: tuple[int, ...] = param(default_factory=tuple, doc="torus: devices per dimension "
                                        "(their product = the devices of the level)")
    oversubscription: float = param(1.0, doc="fat_tree: down-links / up-links of a leaf "
                                             "switch (1 = non-blocking)", min=1)
    nvls_efficiency: float = param(0.0, doc="in-switch reduction (NVLink SHARP): all-reduce "
                                           "algorithm bandwidth as a fraction of "
                                           "bandwidth_gbps; 0 = the switch cannot reduce",
                                   min=0, max=1)
    energy_pj_per_bit: float = param(0.0, doc="energy per bit moved across this level",
                                     unit="pJ/bit", min=0)
    nccl: NcclSpec | None = param(None, doc="NCCL's protocols on this level (a switch); "
                                            "null: one protocol (efficiency, latency_us)")
    custom_allreduce: CustomAllreduceSpec | None = param(
        None, doc="vLLM's custom all-reduce on this level (a switch); null: not available")
    source: str = param("", doc="where the numbers come from")

    def check(self) -> list[tuple[str, str]]:
        out = []
        if self.topology != "switch":
            out += [(k, f"needs topology switch (topology is {self.topology})")
                    for k in ("nccl", "custom_allreduce") if getattr(self, k) is not None]
        if self.topology == "torus" and not self.torus_dims:
            out.append(("torus_dims", "a torus needs its dimensions (e.g. [4, 4])"))
        if self.topology != "torus" and self.torus_dims:
            out.append(("torus_dims", f"only a torus has dimensions (topology is "
                                      f"{self.topology})"))
        if self.nvls_efficiency and self.topology != "switch":
            out.append(("nvls_efficiency", "in-switch reduction needs topology switch"))
        if any(d < 2 for d in self.torus_dims):
            out.append(("torus_dims", f"expected every dimension >= 2, got "
                                      f"{list(self.torus_dims)}"))
        return out

    @property
    def bytes_per_s(self) -> float:
        """Achieved per-device, per-direction bandwidth (bytes/s)."""
        return self.bandwidth_gbps * 1e9 * self.efficiency

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


@functools.lru_cache(maxsize=1)
def nvswitch_protocols() -> LinkSpec:
    """The scale-up link of ``configs/cluster/dgx_h100.yaml``, whose ``nccl`` and
    ``custom_allreduce`` constants (fitted on H100, docs/cluster.md) the links of other
    devices carry (:func:`device_link`)."""
    path = configs_dir() / "cluster" / "dgx_h100.yaml"
    data, problems = read_yaml(path, ConfigError)
    b = SpecBuilder(str(path))
    b.problems.extend(problems)
    up = data.get("scale_up") if isinstance(data, dict) else None
    spec = b.build(LinkSpec, up, "scale_up", data, "scale_up")
    if b.problems:
        raise ConfigError(b.problems)
    assert spec is not None
    return spec


@functools.lru_cache(maxsize=64)
def device_link(nvlink: Any) -> LinkSpec:
    """The switched scale-up link of a device's own GPU-to-GPU link spec (``nvlink``: its
    ``bandwidth_gbps``, ``latency_us``, ``efficiency``; None: a placeholder link that
    :mod:`arch.collective` refuses to use) with NCCL's protocols and vLLM's custom all-reduce
    as fitted on H100 (:func:`nvswitch_protocols`): latencies as they are, efficiencies as
    fractions of this link's bandwidth (the mechanism carried, not refitted); NVLS (the
    fitted in-switch reduction) only when the spec says its switch has it (``nvls``)."""
    if nvlink is None:
        return LinkSpec(name="none", bandwidth_gbps=1e-9, latency_us=0.0,
                        source="no link in the device design")
    carried = nvswitch_protocols()
    return LinkSpec(name="nvlink", bandwidth_gbps=nvlink.bandwidth_gbps,
                    latency_us=nvlink.latency_us, efficiency=nvlink.efficiency,
                    nccl=carried.nccl, custom_allreduce=carried.custom_allreduce,
                    nvls_efficiency=carried.nvls_efficiency if getattr(nvlink, "nvls", False)
                    else 0.0,
                    source="the device's nvlink spec; NCCL protocols, NVLS and vLLM's custom "
                           "all-reduce carried from configs/cluster/dgx_h100.yaml")
