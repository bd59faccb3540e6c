"""A cluster: devices of one design (any unit family) grouped into nodes, with a link per level.

A cluster is its own YAML file (``configs/cluster/*.yaml``) that names the device design it
is built from (``device: gpu/h100``, any family: a GPU, a LUT tensor-core GPU, a PIM memory)
and describes two levels of interconnect:

* ``scale_up``: inside a node (NVLink through NVSwitch, or a custom ring/torus link);
* ``scale_out``: between nodes (InfiniBand / Ethernet NICs per device, through a switch or a
  fat tree with an oversubscription ratio); absent for a one-node cluster.

Each level is a :class:`LinkSpec`: per-device, per-direction bandwidth (GB/s), the latency of
one step of a collective (us), the fraction of the bandwidth a collective achieves
(protocol overhead), the topology, and the energy per bit moved. The cost of a collective
on a cluster is in :mod:`arch.collective`.

Loading uses the strict spec machinery of :mod:`arch.spec`: unknown keys, wrong types and
out-of-range values are reported together, each with ``file:line key.path``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archsim.arch.accelerator import load as load_design
from archsim.arch.shipped import configs_dir
from archsim.arch.spec import SpecBuilder, param
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.yamlio import read_yaml

__all__ = ["LinkSpec", "ProtocolSpec", "NcclSpec", "CustomAllreduceSpec", "ClusterSpec", "Cluster", "load_cluster", "cluster_dir", "list_clusters",
           "find_cluster", "single_node", "nvswitch_protocols"]

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


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """A cluster of identical devices (``configs/cluster/*.yaml``)."""

    name: str = param(doc="cluster name")
    device: str = param(doc="the device design: a reference-design name (gpu/h100) or a "
                            "config path relative to configs/")
    devices_per_node: int = param(doc="devices in one node (one scale-up domain)", min=1)
    nodes: int = param(1, doc="nodes in the cluster", min=1)
    scale_up: LinkSpec = param(doc="the link inside a node")
    scale_out: LinkSpec | None = param(None, doc="the link between nodes (null: one node)")
    description: str = param("", doc="free text")
    source: str = param("", doc="where the numbers come from")

    def check(self) -> list[tuple[str, str]]:
        out = []
        if self.nodes > 1 and self.scale_out is None:
            out.append(("scale_out", f"{self.nodes} nodes need a scale_out link"))
        su = self.scale_up
        if su.topology == "torus" and _prod(su.torus_dims) != self.devices_per_node:
            out.append(("scale_up.torus_dims", f"the torus {list(su.torus_dims)} holds "
                        f"{_prod(su.torus_dims)} devices, the node {self.devices_per_node}"))
        so = self.scale_out
        if so is not None and so.topology == "torus" and _prod(so.torus_dims) != self.nodes:
            out.append(("scale_out.torus_dims", f"the torus {list(so.torus_dims)} holds "
                        f"{_prod(so.torus_dims)} nodes, the cluster {self.nodes}"))
        return out

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes


def _prod(xs: tuple[int, ...]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


@dataclass(frozen=True)
class Cluster:
    """A loaded cluster: its spec and the device design (an ``arch.Accelerator``).

    Attributes:
        spec: the validated spec.
        device: the device design every device of the cluster runs.
        file: the YAML it came from ("" when built in code).
    """

    spec: ClusterSpec
    device: Any
    file: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def devices(self) -> int:
        return self.spec.devices

    def with_nodes(self, nodes: int) -> Cluster:
        """The same cluster with ``nodes`` nodes (a pod of any size from one reference node)."""

        return Cluster(replace(self.spec, nodes=nodes), self.device, self.file)


def cluster_dir() -> Path:
    """``configs/cluster``."""
    return configs_dir() / "cluster"


def list_clusters() -> list[Path]:
    return sorted(cluster_dir().glob("*.yaml"))


def find_cluster(name: str | Path) -> Path | None:
    """A cluster YAML path, or a bare name (``dgx_h100``) in configs/cluster; None if none."""
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p if _is_cluster_file(p) else None
    for c in list_clusters():
        if str(name) in (c.stem, f"cluster/{c.stem}"):
            return c
    return None


def _is_cluster_file(p: Path) -> bool:
    """Does the file look like a cluster description (a top-level ``device:`` key)? Only a
    regular file is looked into, and only its head; an unreadable, binary or special file is
    "no", and the design loader then reports what is wrong with it."""
    try:
        if not p.is_file():
            return False
        with open(p, "rb") as fh:
            head = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return False
    return any(line.startswith("device:") for line in head.splitlines())


def load_cluster(path: str | Path) -> Cluster:
    """Load and validate a cluster YAML and the device design it names.

    Raises:
        ConfigError: every problem in the file (``file:line key.path: message``), or a
            device design that cannot be found or loaded.
    """

    file = str(path)
    data, problems = read_yaml(path, ConfigError)
    b = SpecBuilder(file)
    b.problems.extend(problems)
    spec = b.build(ClusterSpec, data)
    if b.problems:
        raise ConfigError(b.problems)
    assert spec is not None
    dev = _device_path(spec.device)
    if dev is None:
        line = data.key_lines.get("device") if hasattr(data, "key_lines") else None
        known = ", ".join(sorted(p.relative_to(_configs()).with_suffix("").as_posix()
                                 for p in _configs().rglob("*.yaml")
                                 if p.parent.name != "cluster"))
        raise ConfigError(Problem(f"no device design {spec.device!r}; expected one of: {known}",
                                  "device", file, line))
    return Cluster(spec, load_design(dev), file)


def _configs() -> Path:
    return cluster_dir().parent


def _device_path(name: str) -> Path | None:
    p = Path(name)
    if p.suffix in (".yaml", ".yml"):
        for cand in (p, _configs() / p):
            if cand.exists():
                return cand
        return None
    cand = _configs() / f"{name}.yaml"
    if cand.exists():
        return cand
    hits = [c for c in _configs().rglob(f"{name}.yaml") if c.parent.name != "cluster"]
    return hits[0] if len(hits) == 1 else None


@functools.lru_cache(maxsize=1)
def nvswitch_protocols() -> LinkSpec:
    """The scale-up link of ``configs/cluster/dgx_h100.yaml``, whose ``nccl`` and
    ``custom_allreduce`` constants (fitted on H100, docs/cluster.md) one-node clusters of
    other designs carry (:func:`single_node`)."""
    path = cluster_dir() / "dgx_h100.yaml"
    data, problems = read_yaml(path, ConfigError)
    b = SpecBuilder(str(path))
    b.problems.extend(problems)
    spec = b.build(ClusterSpec, data)
    if b.problems:
        raise ConfigError(b.problems)
    assert spec is not None
    return spec.scale_up


def single_node(device: Any, devices: int) -> Cluster:
    """A one-node cluster of ``devices`` copies of ``device`` joined by the device's own
    GPU-to-GPU link (``nvlink`` of its first unit, if any) through a switch.

    This is what ``archsim run DESIGN --tp N`` has always assumed; a device without a link
    spec gets a placeholder link that :mod:`arch.collective` refuses to use. The link gets
    NCCL's protocols and vLLM's custom all-reduce as fitted on H100
    (:func:`nvswitch_protocols`): latencies as they are, efficiencies as fractions of this
    device's link bandwidth (the mechanism carried, not refitted); NVLS only when the
    device's spec says its switch reduces (``nvlink.nvls_efficiency`` > 0; default 0).
    """
    nv = getattr(getattr(device.units[0], "spec", None), "nvlink", None)
    if nv is not None:
        carried = nvswitch_protocols()
        link = LinkSpec(name="nvlink", bandwidth_gbps=nv.bandwidth_gbps, latency_us=nv.latency_us,
                        efficiency=nv.efficiency, nvls_efficiency=nv.nvls_efficiency,
                        nccl=carried.nccl,
                        custom_allreduce=carried.custom_allreduce,
                        source="the device's nvlink spec; NCCL protocols and vLLM's custom "
                               "all-reduce carried from configs/cluster/dgx_h100.yaml")
    else:
        link = LinkSpec(name="none", bandwidth_gbps=1e-9, latency_us=0.0,
                        source="no link in the device design")
    spec = ClusterSpec(name=f"{device.name}x{devices}", device=device.name,
                       devices_per_node=devices, scale_up=link)
    return Cluster(spec, device)
