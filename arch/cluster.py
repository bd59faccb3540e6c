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

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archsim.arch.accelerator import load as load_design
from archsim.arch.link import (
    CustomAllreduceSpec,
    LinkSpec,
    NcclSpec,
    ProtocolSpec,
    device_link,
    nvswitch_protocols,
)
from archsim.arch.shipped import configs_dir
from archsim.arch.spec import SpecBuilder, param
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.yamlio import read_yaml

__all__ = ["HostSpec", "LinkSpec", "ProtocolSpec", "NcclSpec", "CustomAllreduceSpec", "ClusterSpec", "Cluster", "load_cluster", "cluster_dir", "list_clusters",
           "find_cluster", "single_node", "nvswitch_protocols"]

@dataclass(frozen=True, kw_only=True)
class HostSpec:
    """The memory tiers below each device of a node (training offload, docs/cluster.md
    "Memory tiers"): the host's DRAM, reached over the device's host link (PCIe, NVLink-C2C),
    and NVMe drives behind the host. Bandwidths are per device (the node's total / its
    devices), per direction."""

    link_gbps: float = param(doc="device <-> host DRAM bandwidth per device, per direction "
                                 "(PCIe x16 or C2C)", unit="GB/s", min=0, min_exclusive=True)
    link_efficiency: float = param(0.8, doc="achieved fraction of link_gbps by DMA copies of "
                                            "pinned buffers", min=0, max=1,
                                   min_exclusive=True)
    dram_gbps: float = param(doc="host DRAM bandwidth per device (the CPU's optimizer update "
                                 "streams through it)", unit="GB/s", min=0, min_exclusive=True)
    dram_gb: float = param(doc="host DRAM capacity per device", unit="GB", min=0,
                           min_exclusive=True)
    nvme_gbps: float = param(0.0, doc="NVMe bandwidth per device, per direction (0: no NVMe "
                                      "tier)", unit="GB/s", min=0)
    source: str = param("", doc="where the numbers come from")


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
    host: HostSpec | None = param(None, doc="host DRAM and NVMe tiers below each device "
                                            "(training offload); null: not described")
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


def single_node(device: Any, devices: int) -> Cluster:
    """A one-node cluster of ``devices`` copies of ``device`` joined by the device's own
    GPU-to-GPU link (``nvlink`` of its first unit, if any) through a switch.

    This is what ``archsim run DESIGN --tp N`` has always assumed; the link is
    :func:`arch.link.device_link` of that spec (NCCL's protocols and vLLM's custom
    all-reduce as fitted on H100; a device without a link spec gets a placeholder link that
    :mod:`arch.collective` refuses to use).
    """
    link = device_link(getattr(getattr(device.units[0], "spec", None), "nvlink", None))
    spec = ClusterSpec(name=f"{device.name}x{devices}", device=device.name,
                       devices_per_node=devices, scale_up=link)
    return Cluster(spec, device)
