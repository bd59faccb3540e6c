"""The spatial array as an N-level hierarchy for the Einsum nest model (``dataflow.nest``).

A convolution mapped through its im2col GEMM loses the sliding-window reuse of its input
(each input element is counted once per filter tap that reads it). The Einsum view keeps
the 7-D loop nest, so a tile of the input that slides along P or Q refetches only its halo
(Timeloop's analysis; parity with Timeloop in ``tests/dataflow/test_timeloop_parity.py``).

Hierarchy of a ``spatial_array`` unit, innermost first (every number from its spec and the
per-access energies of :meth:`SpatialArray.arch_params`, i.e. the ``energy/`` library at the
unit's node):

* ``pe_reg``: one register file per PE (``rows x cols`` instances, ``pe_register_bytes``);
* ``glb``: the global buffer (``global_buffer_kib``), fanning out to the PEs over a
  ``cols`` (X) x ``rows`` (Y) mesh with multicast and spatial reduction;
* ``dram``: off-chip memory, ``sustained bandwidth / word`` words per cycle, shared by
  reads and writes (one data bus, as the GEMM view's ``DRAM bytes / bandwidth``).

A level's word is ``max(activation, weight)`` bytes; each data space carries its own
element width (weights in the weight format, inputs and outputs in the activation format:
``DataSpace.word_bits``), so int8 weights beside int16 activations take half a word each in
the capacity, bandwidth and access energy of every level. Energies per word follow the
element width the same way :meth:`SpatialArray.arch_params` does. Estimates from this view report the same components
(``mac``, ``pe_reg``, ``glb``, ``dram``) as the fold model, so energy still goes through
``energy.evaluate``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from archsim.dataflow.einsum import Einsum, from_op
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import LevelMapping, NestMapping, NestResult

if TYPE_CHECKING:
    from archsim.arch.spatial.unit import SpatialArray

__all__ = ["problem_and_hierarchy", "word_bytes", "element_bits", "with_widths", "actions",
           "compact", "from_gemm_mapping"]

LEVELS = ("pe_reg", "glb", "dram")


def word_bytes(op: Any) -> float:
    """Bytes of one word of the nest model for ``op``: the wider of its operands."""
    return max(op.a_format.bytes_per_element, op.w_format.bytes_per_element)


#: The weight operand of each Einsum form (``dataflow.einsum``); the others are activations.
WEIGHT_SPACES = ("Weights", "B")


def element_bits(op: Any, space: str) -> int:
    """Bits of one element of data space ``space`` of ``op``'s Einsum: the weight format
    for the weights, the activation format for inputs and outputs."""
    fmt = op.w_format if space in WEIGHT_SPACES else op.a_format
    return int(round(fmt.bytes_per_element * 8))


def with_widths(problem: Einsum, op: Any) -> Einsum:
    """``problem`` with each data space's element width (:func:`element_bits`)."""
    return replace(problem, data_spaces=tuple(replace(ds, word_bits=element_bits(op, ds.name))
                                              for ds in problem.data_spaces))


def problem_and_hierarchy(unit: SpatialArray, op: Any) -> tuple[Einsum, Hierarchy]:
    """The Einsum of ``op`` (a ``Conv2d``) and the unit's three-level hierarchy."""
    s = unit.spec
    p = unit.arch_params(op)
    wb = word_bytes(op)
    pes = s.rows * s.cols
    bits = int(round(wb * 8))
    e_rf = {"read": p.e_rf_pj, "write": p.e_rf_pj, "update": p.e_rf_pj}
    e_glb = {"read": p.e_glb_pj, "write": p.e_glb_pj, "update": p.e_glb_pj}
    e_dram = {a: p.e_dram_pj_per_byte * wb for a in ("read", "write", "update")}
    words_per_cycle = p.dram_bytes_per_cycle / wb
    hier = Hierarchy(
        levels=(
            StorageLevel("pe_reg", instances=pes, size_words=max(1, int(p.rf_bytes // wb)),
                         word_bits=bits, energy_pj=e_rf),
            StorageLevel("glb", instances=1, mesh_x=s.cols, mesh_y=s.rows,
                         size_words=max(1, int(p.glb_bytes // wb)), word_bits=bits,
                         energy_pj=e_glb),
            StorageLevel("dram", instances=1, word_bits=bits, read_bw=words_per_cycle,
                         write_bw=words_per_cycle, energy_pj=e_dram, technology="DRAM",
                         shared_bw=True),
        ),
        compute=ComputeLevel("mac", pes, {"compute": p.e_mac_pj}, bits),
        name=unit.name)
    return with_widths(from_op(op), op), hier


def actions(unit: SpatialArray, op: Any, res: NestResult) -> tuple[dict[tuple[str, str], float],
                                                                   float, float]:
    """(action counts on the unit's components, DRAM read bytes, DRAM write bytes) of a
    nest analysis: reads per level and data space times instances; fills and updates are
    writes; each data space in its own element width (:func:`element_bits`): register
    accesses in register words (:func:`word_bytes`), GLB accesses scaled by element bits /
    GLB width (as the fold model), DRAM in bytes."""
    wb = word_bytes(op)
    tot: dict[str, dict[str, float]] = {}
    for lv in LEVELS:
        r = w = 0.0
        for ds, st in res.stats.get(lv, {}).items():
            fmt = op.w_format if ds in WEIGHT_SPACES else op.a_format
            scale = {"pe_reg": fmt.bytes_per_element / wb,
                     "glb": fmt.bits / unit.spec.glb_width_bits,
                     "dram": fmt.bytes_per_element}[lv]
            r += st.reads * st.instances * scale
            w += (st.fills + st.updates) * st.instances * scale
        tot[lv] = {"read": r, "write": w}
    dram_r, dram_w = tot["dram"]["read"], tot["dram"]["write"]
    acts = {
        (unit.cname("mac"), "mac"): float(op.effective_macs()),
        (unit.cname("pe_reg"), "read"): tot["pe_reg"]["read"],
        (unit.cname("pe_reg"), "write"): tot["pe_reg"]["write"],
        (unit.cname("glb"), "read"): tot["glb"]["read"],
        (unit.cname("glb"), "write"): tot["glb"]["write"],
        (unit.cname("dram"), "read"): dram_r,
        (unit.cname("dram"), "write"): dram_w,
    }
    return acts, dram_r, dram_w


def from_gemm_mapping(mapping: Any) -> NestMapping:
    """The GEMM view's loop nest (``dataflow.Mapping``: rows, cols, RF, GLB, DRAM factors
    and the GLB / DRAM loop orders) as a nest of the GEMM Einsum (dims M, N, K) on the
    unit's three levels: RF loops at ``pe_reg``, GLB loops and the array (columns on X,
    rows on Y) at ``glb``, DRAM loops at ``dram``; every level keeps every operand (a GLB
    bypass is not converted)."""
    f = mapping.factors
    dims = ("M", "N", "K")
    keep = frozenset({"A", "B", "Z"})

    def temporal(slot: int, order: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
        return tuple((dims[d], f[slot][d]) for d in reversed(order))   # innermost first

    spatial = tuple((dims[d], f[1][d], "X") for d in range(3) if f[1][d] > 1) + \
        tuple((dims[d], f[0][d], "Y") for d in range(3) if f[0][d] > 1)
    return NestMapping((LevelMapping(temporal(2, (0, 1, 2)), (), keep),
                        LevelMapping(temporal(3, mapping.order[0]), spatial, keep),
                        LevelMapping(temporal(4, mapping.order[1]), (), keep)))


def compact(mapping: NestMapping, hier: Hierarchy) -> str:
    """One-line form of a nest, outermost level first: ``dram[N2 K4] glb[Q14 P56]
    X[K16] Y[C16] pe_reg[S3 R3]`` (temporal loops innermost last; spatial as X/Y)."""
    parts: list[str] = []
    for i in range(len(mapping.levels) - 1, -1, -1):
        lm = mapping.levels[i]
        t = " ".join(f"{d}{b}" for d, b in reversed(lm.temporal) if b > 1)
        if t:
            parts.append(f"{hier.levels[i].name}[{t}]")
        for axis in ("X", "Y"):
            sp = " ".join(f"{d}{b}" for d, b, a in lm.spatial if a == axis and b > 1)
            if sp:
                parts.append(f"{axis}[{sp}]")
    return "nest7d " + " ".join(parts)
