"""Cross-check of the mapper with Timeloop's published Eyeriss example.

Timeloop (Parashar et al., ISPASS 2019; the timeloop-accelergy exercises) maps the
ResNet-50 conv2_x 3x3 convolution (C = K = 64, P = Q = 56, R = S = 3, N = 1) onto an
Eyeriss-like 256-PE design and reports a utilisation of 0.75 and about 6.4 pJ per MAC with
its default energy tables [C: the figures given in issue #4, not re-checked against the
tool's output here]. We map the same layer onto ``configs/spatial/eyeriss_like.yaml``
(16 x 16 PEs, 16-bit) with our search and put access counts, utilisation and energy per MAC
side by side (:func:`timeloop_eyeriss`, :func:`timeloop_table`; docs/mapper.md).

What we can check exactly is what both tools must agree on by construction (MAC count,
compulsory weight reads and final output writes). The utilisation and energy per MAC
differ for documented reasons and are reported as gaps, never tuned.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import archsim
from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks
from archsim.dataflow.mapping import ACTIONS, LEVELS, TENSORS, Shape, analyse, cost
from archsim.dataflow.nest import analyse as analyse_nest
from archsim.mapper.gemm_search import best_mapping
from archsim.mapper.schedule import _einsum_best
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Conv2d

__all__ = ["timeloop_eyeriss", "timeloop_table", "TIMELOOP_UTILIZATION",
           "TIMELOOP_PJ_PER_MAC", "conv2_x"]

#: Timeloop's figures for the example (issue #4 text) [C].
TIMELOOP_UTILIZATION = 0.75
TIMELOOP_PJ_PER_MAC = 6.4
_SOURCE = "Timeloop eyeriss_like ResNet-50 conv2_x example (issue #4)"


def conv2_x() -> Any:
    """The layer: ResNet-50 conv2_x 3x3, 64 -> 64 channels, 56 x 56, pad 1, 16-bit."""

    f = FORMATS["int16"]
    return Conv2d(name="conv2_x", n=1, c=64, h=56, w=56, k=64, r=3, s=3, padding=1,
                  a_format=f, w_format=f, acc_format=FORMATS["int32"])


@lru_cache(maxsize=1)
def _runs() -> dict[str, dict[str, Any]]:
    """Our best mappings per objective (and an RS-like constrained one) with their counts."""

    unit: Any = archsim.load("eyeriss_like").units[0]
    op = conv2_x()
    shape = Shape.of(op)
    p = unit.arch_params(op)
    out: dict[str, dict[str, Any]] = {}
    # 'rs-like': Eyeriss' row stationary puts filter rows x channels on the PE rows; with
    # R = 3 that is 3 x 4 = 12 of 16 rows (a user constraint, mapper/constraints.py).
    cases: tuple[tuple[str, dict[str, Any]], ...] = (("latency", {}), ("energy", {}), ("edp", {}),
             ("rs-like (rows K=12, edp)", {"fixed": ((0, 2, 12),)}))
    for label, kw in cases:
        obj = label if not kw else "edp"
        r = best_mapping(unit, op, obj, **kw)
        assert r is not None, label
        ac = analyse(r.mapping, shape)
        c = cost(r.mapping, shape, p, ac)
        counts = {(t, lv, a): ac.get(t, lv, a) for t in TENSORS for lv in LEVELS
                  for a in ACTIONS}
        macs = shape.macs
        g = ac.get
        rf = sum(g(t, "RF", a) for t in TENSORS for a in ACTIONS)
        glb = sum(g(t, "GLB", a) for t in TENSORS for a in ACTIONS)
        out[label] = {
            "mapping": r.mapping.describe(), "utilization": c.utilization,
            "pj_per_mac": c.energy_pj / macs, "counts": counts, "cycles": c.cycles,
            "pj_mac": p.e_mac_pj, "pj_rf": rf * p.e_rf_pj / macs,
            "pj_glb": glb * p.e_glb_pj / macs,
            "pj_dram": c.dram_bytes * p.e_dram_pj_per_byte / macs,
        }
    out["_params"] = {"e_mac_pj": p.e_mac_pj, "e_rf_pj": p.e_rf_pj, "e_glb_pj": p.e_glb_pj,
                      "e_dram_pj_per_byte": p.e_dram_pj_per_byte, "macs": shape.macs}
    return out


@lru_cache(maxsize=1)
def _einsum_input_reads() -> float:
    """Input DRAM reads (words) of the energy-optimal 7-D nest of conv2_x on eyeriss_like,
    as the mapper's search finds it (``mapper.schedule._einsum_best``)."""

    unit: Any = archsim.load("eyeriss_like").units[0]
    problem, hier = unit.einsum_space(conv2_x())
    res = analyse_nest(problem, hier, _einsum_best((problem, hier), "energy"))
    return float(res.stats["dram"]["Inputs"].reads)


@checks("mapper")
def timeloop_eyeriss(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """Comparisons and gaps of the Timeloop Eyeriss conv2_x cross-check."""
    runs = _runs()
    macs = runs["_params"]["macs"]
    e = runs["energy"]
    cnt = e["counts"]
    design = "eyeriss_like"
    comps = [
        # 64 * 64 * 56 * 56 * 3 * 3 = 115,605,504 (D)
        Comparison("mapper", "conv2_x MACs", _SOURCE, "D", 64 * 64 * 56 * 56 * 9, macs,
                   "MAC", 0.0, "identity: the same loop nest", design),
        # weights read from DRAM exactly once: 64 * 64 * 3 * 3 = 36,864 words (D)
        Comparison("mapper", "conv2_x weight DRAM reads (min-energy mapping)", _SOURCE, "D",
                   64 * 64 * 9, cnt[("B", "DRAM", "reads")], "words", 0.0,
                   "compulsory traffic: an energy-optimal mapping reads weights once", design),
        # outputs written once: 64 * 56 * 56 = 200,704 words (D)
        Comparison("mapper", "conv2_x output DRAM writes (min-energy mapping)", _SOURCE, "D",
                   64 * 56 * 56, cnt[("C", "DRAM", "updates")], "words", 0.0,
                   "compulsory traffic: outputs leave the chip once", design),
    ]
    lat, rs = runs["latency"], runs["rs-like (rows K=12, edp)"]
    gaps = [
        Gap("mapper", "conv2_x utilisation (Timeloop 0.75)",
            f"ours {lat['utilization']:.2f} (best-latency mapping): our GEMM view of the conv "
            "(im2col, K = C*R*S = 576) can put 16 reduction elements on the 16 PE rows, where "
            "Eyeriss' row-stationary dataflow puts filter rows (R = 3) x channels on them; "
            f"constrained to 12 rows (3 x 4, an RS-like mapping) we get {rs['utilization']:.2f}"),
        Gap("mapper", "conv2_x energy per MAC (Timeloop ~6.4 pJ)",
            f"ours {e['pj_per_mac']:.1f} pJ/MAC (min-energy mapping: MAC {e['pj_mac']:.1f}, RF "
            f"{e['pj_rf']:.1f}, GLB {e['pj_glb']:.1f}, DRAM {e['pj_dram']:.1f}); our 65 nm "
            "tables charge more per access than Timeloop's defaults (GLB "
            f"{runs['_params']['e_glb_pj']:.0f} pJ per 16-bit word from the 108 KiB SRAM "
            "model, RF ~1.5 pJ), each MAC does 4 RF accesses (2 operand reads, psum read + "
            "update) in one shared RF, and the im2col view re-reads inputs 9x at the GLB"),
        Gap("mapper", "conv2_x input DRAM reads",
            f"GEMM view {cnt[('A', 'DRAM', 'reads')]:,.0f} words: im2col reads "
            "P*Q*C*R*S = 1,806,336 input words, 8.4x the padded ifmap (58*58*64 = 215,296). "
            f"The 7-D Einsum nest the mapper now also searches (arch/spatial/einsum.py) reads "
            f"{_einsum_input_reads():,.0f} on this design's 108 KiB GLB (its energy-optimal "
            "mapping trades some input halo re-reads for fewer weight re-reads); on "
            "Timeloop's eyeriss_like the EDP-optimal nest reads exactly 215,296 "
            "(docs/timeloop.md)"),
    ]
    return comps, gaps


def timeloop_table() -> str:
    """Markdown side-by-side table (for docs/mapper.md)."""
    runs = _runs()
    labels = [k for k in runs if not k.startswith("_")]
    lines = ["| quantity | Timeloop (eyeriss_like, 256 PEs) | "
             + " | ".join(f"ours: {k}" for k in labels) + " |",
             "|---|---|" + "---|" * len(labels)]

    def row(name: str, ref: str, fn: Any) -> None:
        lines.append(f"| {name} | {ref} | " + " | ".join(fn(runs[k]) for k in labels) + " |")

    row("utilisation", f"{TIMELOOP_UTILIZATION}", lambda r: f"{r['utilization']:.3f}")
    row("energy / MAC (pJ)", f"~{TIMELOOP_PJ_PER_MAC}", lambda r: f"{r['pj_per_mac']:.2f}")
    row("  of which MAC / RF / GLB / DRAM", "-",
        lambda r: f"{r['pj_mac']:.2f} / {r['pj_rf']:.2f} / {r['pj_glb']:.2f} / "
                  f"{r['pj_dram']:.2f}")
    row("cycles", "-", lambda r: f"{r['cycles']:,.0f}")
    for t, name in (("A", "inputs"), ("B", "weights"), ("C", "outputs")):
        for lv in ("DRAM", "GLB", "RF"):
            acts = ("reads", "updates") if t == "C" else ("reads", "fills")
            row(f"{name} {lv} {'/'.join(acts)}", "-",
                lambda r, t=t, lv=lv, acts=acts: " / ".join(
                    f"{r['counts'][(t, lv, a)]:,.0f}" for a in acts))
    lines.append("")
    lines.append("Mappings: " + "; ".join(f"{k}: `{runs[k]['mapping']}`" for k in labels))
    return "\n".join(lines)
