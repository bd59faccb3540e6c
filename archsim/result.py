"""Frozen results: one :class:`Result` per (design, workload), with a per-op table.

Units are in the field names (``latency_s``, ``energy_j``, ``area_mm2``). ``to_dict`` /
``to_json`` give the machine-readable form printed by ``--json``; ``table()`` the text.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from archsim.workloads.errors import inert
from archsim.workloads.tags import PassGroup, pass_group

__all__ = ["OpResult", "Result"]


@dataclass(frozen=True)
class OpResult:
    """One op's row of the per-op table, with the op's tags (``archsim.workloads.tags``):
    ``pass_``, ``block`` and ``role``; ``layer`` is the op's report group label."""

    name: str
    kind: str
    unit: str
    dataflow: str
    shape: str
    cycles: int
    latency_s: float
    energy_j: float
    utilization: float
    bound: str
    macs: int
    dram_bytes: float
    mapping: str = ""
    #: unit-specific per-op numbers worth reporting (GPU: ``clock_mhz``, ``power_w``,
    #: ``host_s``, ``wall_s``); empty for units that have none
    details: dict[str, float] = field(default_factory=dict)
    layer: str = ""
    pass_: str = "fwd"
    block: int | None = None
    role: str = ""

    @property
    def pass_group(self) -> PassGroup:
        """``forward``, ``backward`` or ``optimizer`` (from ``pass_``)."""
        return pass_group(self.pass_)


@dataclass(frozen=True)
class Result:
    """Prediction for one workload on one design.

    Attributes:
        design, workload, phase, fidelity: what was evaluated and how.
        latency_s: end-to-end latency; ``cycles`` the same in ``clock_hz`` (the first
            unit's clock).
        energy_j: total energy; ``energy_breakdown_j`` per component.
        area_mm2: total area; ``area_breakdown_mm2`` per component.
        utilization: effective MACs / (latency x peak MAC rate of the units used).
        tokens_per_s: LLM phases (prefill/train: tokens processed; decode: tokens
            generated); None otherwise. ``samples_per_s`` for other workloads.
        ops: the per-op table.
        macs, flops, dram_bytes: totals. power_w: energy / latency.
        extra: family-specific objects (e.g. FPGA ``resources``), JSON-able.
    """

    design: str
    workload: str
    phase: str
    fidelity: str
    latency_s: float
    cycles: int
    clock_hz: float
    energy_j: float
    energy_breakdown_j: dict[str, float]
    area_mm2: float
    area_breakdown_mm2: dict[str, float]
    utilization: float
    tokens_per_s: float | None
    samples_per_s: float | None
    ops: tuple[OpResult, ...]
    macs: int
    flops: int
    dram_bytes: float
    archsim_version: str
    input_hash: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def power_w(self) -> float:
        return self.energy_j / self.latency_s if self.latency_s > 0 else 0.0

    @property
    def throughput_flops(self) -> float:
        """Achieved FLOP/s."""
        return self.flops / self.latency_s if self.latency_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ops"] = [asdict(o) for o in self.ops]
        d["power_w"] = self.power_w
        d["throughput_flops"] = self.throughput_flops
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    # ---- text --------------------------------------------------------------------------
    def table(self, max_ops: int = 40) -> str:
        """A readable report: summary, per-op table (largest ops first if truncated),
        energy and area breakdowns."""
        lines = self._header() + [
            f"latency  {_t(self.latency_s)}   ({self.cycles:,} cycles @ {self.clock_hz / 1e6:g} MHz)",
            f"energy   {_e(self.energy_j)}   power {self.power_w:.3g} W",
            f"area     {self.area_mm2:.4g} mm2",
            f"util     {self.utilization:.1%}   {self.throughput_flops / 1e12:.4g} TFLOP/s",
        ]
        if self.tokens_per_s is not None:
            lines.append(f"rate     {self.tokens_per_s:,.1f} tokens/s")
        elif self.samples_per_s is not None:
            lines.append(f"rate     {self.samples_per_s:,.2f} samples/s")
        if self.extra.get("devices"):
            lines.append(f"devices  {self.extra['devices']} (tensor parallel: energy and area of "
                         f"all devices; the op table is one device's shard)")
        mem = self.extra.get("memory")
        if mem and mem.get("capacity_bytes") is None:
            lines.append(f"memory   {mem['resident_bytes'] / 1e9:.4g} GB resident; capacity "
                         f"not checked (the design gives no memory.capacity_gb)")
        elif mem:
            verdict = "fits" if mem["fits"] else "DOES NOT FIT"
            lines.append(f"memory   {mem['resident_bytes'] / 1e9:.4g} GB resident of "
                         f"{mem['capacity_bytes'] / 1e9:.4g} GB ({verdict})")
        host = self.extra.get("host")
        if host:
            lines.append(f"wall     {_t(host['wall_s'])}   (device {_t(host['device_s'])}; "
                         f"runtime {host['runtime']}: {host['note']}; "
                         f"{host['host_bound_ops']} of {len(self.ops)} ops host-bound)")
            if "energy_j" in host:
                lines.append(f"wall energy {host['energy_j']:.3g} J   (kernels + static power "
                             f"while the device waits on the host)")
        lines.append("")
        ops = list(self.ops)
        shown = ops
        note = ""
        if len(ops) > max_ops:
            top = sorted(range(len(ops)), key=lambda i: -ops[i].latency_s)[:max_ops]
            shown = [ops[i] for i in sorted(top)]
            note = f"  ({len(ops) - max_ops} smaller ops not shown; --json has all)"
        hdr = f"{'op':<34} {'kind':<11} {'unit':<10} {'dataflow':<9} {'shape':<22} " \
              f"{'latency':>10} {'energy':>10} {'util':>6} {'bound':<7}"
        # optional columns: the unit's clock and power per op, the wall time per op
        power_cols = any("clock_mhz" in o.details for o in shown)
        wall_col = any("wall_s" in o.details for o in shown)
        if power_cols:
            hdr += f" {'clock':>9} {'power':>7}"
        if wall_col:
            hdr += f" {'wall':>10}"
        lines += [hdr, "-" * len(hdr)]
        for o in shown:
            row = (f"{o.name[:34]:<34} {o.kind:<11} {o.unit[:10]:<10} {o.dataflow[:9]:<9} "
                   f"{o.shape[:22]:<22} {_t(o.latency_s):>10} {_e(o.energy_j):>10} "
                   f"{o.utilization:>6.1%} {o.bound:<7}")
            if power_cols:
                d = o.details
                row += (f" {d['clock_mhz']:>5.0f} MHz {d['power_w']:>5.0f} W" if "clock_mhz" in d
                        else f" {'':>9} {'':>7}")
            if wall_col:
                row += f" {_t(o.details['wall_s']):>10}" if "wall_s" in o.details else ""
            lines.append(row)
        if note:
            lines.append(note)
        lines += ["", "energy breakdown"]
        for k, v in sorted(self.energy_breakdown_j.items(), key=lambda kv: -kv[1]):
            share = v / self.energy_j if self.energy_j else 0.0
            lines.append(f"  {k:<30} {_e(v):>10} {share:>6.1%}")
        lines += ["area breakdown"]
        for k, v in sorted(self.area_breakdown_mm2.items(), key=lambda kv: -kv[1]):
            share = v / self.area_mm2 if self.area_mm2 else 0.0
            lines.append(f"  {k:<30} {v:>10.4g} mm2 {share:>6.1%}")
        lines.append("")
        lines.append(f"archsim {self.archsim_version}  input {self.input_hash}")
        return "\n".join(inert(line) for line in lines)   # one input cannot forge a line


    def _header(self) -> list[str]:
        """Design and workload lines: with the provenance (``extra["provenance"]``, set by
        the CLI) they name the ``--set`` overrides, batch, seq/context, formats, tp,
        sparsity, fidelity and mapping mode."""
        p = self.extra.get("provenance")
        if not p:
            return [f"design   {self.design}",
                    f"workload {self.workload} ({self.phase}), fidelity {self.fidelity}"]
        sets = "".join(f" --set {o}" for o in p.get("overrides", []))
        parts = [f"{self.workload} ({self.phase})", f"batch {p.get('batch')}"]
        if p.get("seq") and self.phase != "decode":     # decode: one new token per step
            parts.append(f"seq {p['seq']}")
        if p.get("context"):
            parts.append(f"context {p['context']}")
        fmt = f"{p.get('a_format') or 'model'}/{p.get('w_format') or 'model'}"
        src = {"design": " (design's native)", "model": " (model's own)"}.get(
            p.get("formats_from", ""), "")
        if p.get("kernels", "fused") != "fused":
            amp = p.get("a_format") or "bf16"
            parts.append(f"kernels {p['kernels']} (autocast {amp} on fp32 parameters)")
        else:
            parts.append(f"formats {fmt}{src}")
        if p.get("tp", 1) != 1:
            parts.append(f"tp {p['tp']}")
        if p.get("moe_routing"):
            parts.append(f"fused MoE, {p['moe_routing']} routing")
        if p.get("sparsity"):
            parts.append(f"sparsity {p['sparsity']}")
        return [f"design   {self.design}{sets}",
                f"workload {', '.join(parts)}",
                f"run      fidelity {self.fidelity}, mapping {p.get('mapping')}, objective "
                f"{p.get('objective')}"]

    def mapping_table(self) -> str:
        """Per-op mapping table: unit, dataflow, tiling, utilisation, latency, energy."""
        hdr = (f"{'op':<30} {'unit':<8} {'dataflow':<9} {'util':>6} {'latency':>10} "
               f"{'energy':>10}  mapping")
        lines = [*self._header(), f"latency  {_t(self.latency_s)}, energy "
                 f"{_e(self.energy_j)}", hdr, "-" * len(hdr)]
        for o in self.ops:
            lines.append(f"{o.name[:30]:<30} {o.unit[:8]:<8} {o.dataflow[:9]:<9} "
                         f"{o.utilization:>6.1%} {_t(o.latency_s):>10} {_e(o.energy_j):>10}  "
                         f"{o.mapping}")
        return "\n".join(inert(line) for line in lines)


def _t(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.2f} us"
    return f"{s * 1e9:.1f} ns"


def _e(j: float) -> str:
    if j >= 1:
        return f"{j:.3f} J"
    if j >= 1e-3:
        return f"{j * 1e3:.3f} mJ"
    if j >= 1e-6:
        return f"{j * 1e6:.3f} uJ"
    return f"{j * 1e9:.3f} nJ"
