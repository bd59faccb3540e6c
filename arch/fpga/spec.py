"""The YAML schema of ``kind: nm_sparse_fpga`` (frozen specs; see ``docs/fpga.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from archsim.arch.memory import MemorySpec
from archsim.arch.spec import param
from archsim.workloads.formats import FORMATS, NumberFormat

__all__ = ["PartSpec", "BufferSpec", "SparseSpec", "PregenSpec", "NmSparseFpgaSpec",
           "MAC_FORMATS", "parse_pattern"]

#: Multiplier formats the resource model knows (``resources.MULT_COST``).
MAC_FORMATS = ("fp16", "bf16", "int8")
#: Widest N:M group the index multiplexers are modelled for (16:1 = one F8MUX level).
M_LIMIT = 16


@dataclass(frozen=True, kw_only=True)
class PartSpec:
    """The FPGA device: resource totals and static power."""

    name: str = param(doc="FPGA part (e.g. xcvu9p)")
    dsp: int = param(doc="DSP48E2 slices", min=1)
    lut: int = param(doc="CLB LUT6s", min=1)
    ff: int = param(doc="CLB flip-flops", min=1)
    bram36: int = param(doc="36 Kb block RAMs", min=0)
    uram: int = param(doc="288 Kb UltraRAMs", min=0)
    static_power_w: float = param(doc="device static power at the operating junction "
                                  "temperature", unit="W", min=0)


@dataclass(frozen=True, kw_only=True)
class BufferSpec:
    """One on-chip buffer mapped to block RAM or UltraRAM."""

    kib: float = param(doc="capacity", unit="KiB", min=0, min_exclusive=True)
    width_bits: int = param(doc="access width (bits read per cycle)", unit="bits", min=1)
    ports: int = param(1, doc="BRAM port mode: 1 = simple dual port (1R+1W, widths up to "
                       "72), 2 = true dual port (2 R/W ports, widths up to 36); URAM always "
                       "has 2 ports", choices=(1, 2))
    memory: str = param("bram", doc="block type", choices=("bram", "uram"))

    @property
    def bits(self) -> float:
        return self.kib * 1024 * 8


def parse_pattern(text: str) -> tuple[int, int] | None:
    """``"2:8"`` -> (2, 8); None if malformed or not 0 < N < M <= 16."""
    try:
        n_s, m_s = text.split(":")
        n, m = int(n_s), int(m_s)
    except ValueError:
        return None
    if not 0 < n < m <= M_LIMIT:
        return None
    return n, m


@dataclass(frozen=True, kw_only=True)
class SparseSpec:
    """The sparse PEs: N of every M inputs selected by index multiplexers."""

    enabled: bool = param(True, doc="sparse PEs present (false: a dense-only design, no "
                          "selection muxes)")
    patterns: tuple[str, ...] = param(("2:4",), doc="N:M patterns the PEs run in sparse mode "
                                      "(the muxes are M_max:1)")

    def check(self) -> list[tuple[str, str]]:
        out = []
        if self.enabled and not self.patterns:
            out.append(("patterns", "a sparse design needs at least one N:M pattern"))
        for i, p in enumerate(self.patterns):
            if parse_pattern(p) is None:
                out.append((f"patterns[{i}]", f"expected 'N:M' with 0 < N < M <= {M_LIMIT}, "
                            f"got {p!r}"))
        return out

    def unused(self) -> list[tuple[str, str]]:
        """Keys the model does not read (:class:`archsim.arch.spec.UnusedKeyWarning`)."""
        if not self.enabled:
            return [("patterns", "enabled: false is a dense-only design with no sparse "
                     "datapath (m_max = 1); its N:M patterns never run")]
        return []

    @property
    def parsed(self) -> tuple[tuple[int, int], ...]:
        return tuple(x for x in (parse_pattern(p) for p in self.patterns) if x is not None)

    @property
    def m_max(self) -> int:
        """Mux depth: the widest M (1 for a dense-only design)."""
        return max((m for _, m in self.parsed), default=1) if self.enabled else 1

    @property
    def n_max(self) -> int:
        return max((n for n, _ in self.parsed), default=1) if self.enabled else 1

    @property
    def expand_max(self) -> float:
        """Largest M/N: dense-equivalent positions per MAC lane per cycle."""
        return max((m / n for n, m in self.parsed), default=1.0) if self.enabled else 1.0

    def supports(self, n: int, m: int) -> bool:
        return self.enabled and (n, m) in self.parsed


@dataclass(frozen=True, kw_only=True)
class PregenSpec:
    """The sparse-weight generator: prunes dense weights to N:M each training step."""

    lanes: int = param(16, doc="N:M groups pruned per cycle (top-N-of-M selector lanes)",
                       min=1)
    overlap: bool = param(True, doc="offline scheduling overlaps pre-generation with the "
                          "compute of the op it is charged to (false: runs before it)")


@dataclass(frozen=True, kw_only=True)
class NmSparseFpgaSpec:
    """An N:M sparse PE array on an FPGA (SAT-like), with its resource and power model."""

    part: PartSpec = param(doc="the FPGA device")
    clock_mhz: float = param(doc="design clock (an input: timing closure is not modelled)",
                             unit="MHz", min=0, min_exclusive=True)
    rows: int = param(doc="PE array rows (reduction dimension, weight-stationary)", min=1)
    cols: int = param(doc="PE array columns (output features)", min=1)
    macs_per_pe: int = param(1, doc="MAC lanes per PE (a dot product along the reduction "
                             "dimension)", min=1)
    mac_format: NumberFormat = param(FORMATS["fp16"], doc="multiplier format: fp16, bf16 or "
                                     "int8 (float formats accumulate in fp32, int8 in int32)")
    adder: str = param("dsp", doc="accumulator adders in DSP48E2s or in LUT logic",
                       choices=("dsp", "logic"))
    sparse: SparseSpec = param(default_factory=SparseSpec, doc="sparse PE capability")
    act_buffer: BufferSpec = param(doc="activation (input) buffer")
    weight_buffer: BufferSpec = param(doc="weight buffer (compressed values + indices)")
    out_buffer: BufferSpec = param(doc="output / partial-sum buffer")
    vector_lanes: int = param(0, doc="fp32 vector lanes for softmax/norm/element-wise/update "
                              "(0 = one per column)", min=0)
    memory: MemorySpec = param(doc="off-chip DRAM (DDR4 channels)")
    ddr_channels: int = param(1, doc="DDR4 channels (one memory controller each)", min=1,
                              max=8)
    loop_order: str = param("best", doc="GEMM loop order: spatial (arch.spatial's buffer "
                            "rule, N-folds outermost) or best (offline scheduling picks "
                            "spatial or M-tiled per op)", choices=("spatial", "best"))
    pregen: PregenSpec = param(default_factory=PregenSpec, doc="sparse-weight generator")
    activity: float = param(0.125, doc="toggle rate of LUT/FF logic for dynamic power "
                            "(Xilinx XPE default 12.5 %)", min=0, max=1)
    max_utilization: float = param(1.0, doc="fraction of each resource a design may use to "
                                   "fit (routability margin)", min=0, max=1,
                                   min_exclusive=True)

    def check(self) -> list[tuple[str, str]]:
        out = []
        if self.mac_format.name not in MAC_FORMATS:
            out.append(("mac_format", f"expected one of {', '.join(MAC_FORMATS)}, got "
                        f"{self.mac_format.name!r}"))
        return out

    def unused(self) -> list[tuple[str, str]]:
        """Keys the model does not read (:class:`archsim.arch.spec.UnusedKeyWarning`): the
        sparse-weight generator exists only with sparse PEs (``unit.py``: its resources and
        ``pregen_cost`` need a sparse plan)."""
        if not self.sparse.enabled:
            return [("pregen", "sparse.enabled: false has no sparse weights to pre-generate "
                     "(no generator resources, no pre-generation time)")]
        return []
