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
* ``dram``: off-chip memory, ``sustained bandwidth / word`` words per cycle.

Every data space is counted in words of ``max(activation, weight)`` bytes (the nest model
has one word size per level); energies per word follow the element width the same way
:meth:`SpatialArray.arch_params` does. Estimates from this view report the same components
(``mac``, ``pe_reg``, ``glb``, ``dram``) as the fold model, so energy still goes through
``energy.evaluate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archsim.dataflow.einsum import Einsum, from_op
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import NestMapping, NestResult

if TYPE_CHECKING:
    from archsim.arch.spatial.unit import SpatialArray

__all__ = ["problem_and_hierarchy", "word_bytes", "actions", "compact"]

LEVELS = ("pe_reg", "glb", "dram")


def word_bytes(op: Any) -> float:
    """Bytes of one word of the nest model for ``op``: the wider of its operands."""
    return max(op.a_format.bytes_per_element, op.w_format.bytes_per_element)


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
                         write_bw=words_per_cycle, energy_pj=e_dram, technology="DRAM"),
        ),
        compute=ComputeLevel("mac", pes, {"compute": p.e_mac_pj}, bits),
        name=unit.name)
    return from_op(op), hier


def actions(unit: SpatialArray, op: Any, res: NestResult) -> tuple[dict[tuple[str, str], float],
                                                                   float, float]:
    """(action counts on the unit's components, DRAM read bytes, DRAM write bytes) of a
    nest analysis: reads per level and data space times instances; fills and updates are
    writes; GLB accesses scaled by element bits / GLB width (as the fold model); DRAM in
    bytes (a word is :func:`word_bytes`)."""
    wb = word_bytes(op)
    tot: dict[str, dict[str, float]] = {}
    for lv in LEVELS:
        r = w = 0.0
        for st in res.stats.get(lv, {}).values():
            r += st.reads * st.instances
            w += (st.fills + st.updates) * st.instances
        tot[lv] = {"read": r, "write": w}
    glb_scale = op.a_format.bits / unit.spec.glb_width_bits
    dram_r, dram_w = tot["dram"]["read"] * wb, tot["dram"]["write"] * wb
    acts = {
        (unit.cname("mac"), "mac"): float(op.effective_macs()),
        (unit.cname("pe_reg"), "read"): tot["pe_reg"]["read"],
        (unit.cname("pe_reg"), "write"): tot["pe_reg"]["write"],
        (unit.cname("glb"), "read"): tot["glb"]["read"] * glb_scale,
        (unit.cname("glb"), "write"): tot["glb"]["write"] * glb_scale,
        (unit.cname("dram"), "read"): dram_r,
        (unit.cname("dram"), "write"): dram_w,
    }
    return acts, dram_r, dram_w


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
