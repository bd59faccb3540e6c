"""LUT tensor cores: golden reference workloads and validation against
``lut_tensor_core.yaml`` (``arch.reference``)."""

from __future__ import annotations

import archsim.arch.lut.unit as L
from archsim.arch.gpu.unit import TensorCoreGpu
from archsim.arch.reference import (
    Comparison,
    EvaluationAPI,
    Gap,
    checks,
    first_unit,
    reference_workloads,
)

reference_workloads("lut_tensor_core", {
    "bitnet_prefill_bs1_seq2048": {"model": "bitnet-b1.58-3b", "phase": "prefill", "batch": 1, "seq": 2048},
    "bitnet_decode_bs64": {"model": "bitnet-b1.58-3b", "phase": "decode", "batch": 64, "context": 256},
    "gemm_w2a8_m16": {"gemm": [16, 8192, 8192], "a_format": "int8", "w_format": "int2"},
})


#: KV-cache length of the LUT paper's decode rows (Table 1, batch 1024), which the paper does
#: not state. At batch 1024 every cached token costs 0.33 MB per sequence (26 layers x K, V x
#: 3200 x fp16), so a context of c tokens reads 0.34 c GB per step: 128 tokens alone would
#: take ~24 ms on an A100, three times the paper's whole LUT-8X step (7.47 ms). The rows
#: therefore carry (almost) no KV traffic; we evaluate the first generated token.
LUT_DECODE_CONTEXT = 1


@checks("lut")
def _lut(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """LUT tensor cores against lut_tensor_core.yaml (Table 1 A100 rows, Table 2)."""
    config_dir, evaluate, load, workload = api.config_dir, api.evaluate, api.load, api.workload

    cfg = config_dir()
    units = {"lut4x": first_unit(load(cfg / "lut" / "a100_lut4x.yaml"), L.LutTensorCoreGpu),
             "lut8x": first_unit(load(cfg / "lut" / "a100_lut8x.yaml"), L.LutTensorCoreGpu)}
    a100 = load(cfg / "gpu" / "a100.yaml")
    src = "lut_tensor_core.yaml results.table1_a100_rows"
    comps: list[Comparison] = []
    for key, row_cfg, area, dens, peak in (("lut4x", "A100-LUT-4X", 0.187, 61.84, 1248),
                                           ("lut8x", "A100-LUT-8X", 0.373, 61.95, 2496)):
        u = units[key]
        comps += [
            Comparison("lut", "tensor-core area per SM (28 nm)", src, "B", area,
                       u.tc_area_per_sm_mm2(), "mm2", 0.15, "issue bound; structural area "
                       "from energy/ components", design=row_cfg),
            Comparison("lut", "compute density W_INT2 (28 nm)", src, "B", dens,
                       u.compute_density(2), "TOPS/mm2", 0.15, "issue bound", design=row_cfg),
            Comparison("lut", "peak W_INT2 TOPs", src, "B", peak, u.peak_tops(2), "TOPs", 0.02,
                       "arithmetic of tile x array scale x clock", design=row_cfg)]
    lut4 = units["lut4x"]
    comps.append(Comparison("lut", "LUT tile area (W_INT2 A_INT8, M*N*K=512)",
                            "lut_tensor_core.yaml results.table2_vs_unpu[3]", "B", 11991.29,
                            sum(lut4.lut_area_breakdown_mm2().values()) / lut4.n_tiles() * 1e6,
                            "um2", 0.15, "issue bound", design="A100-LUT-4X"))
    comps.append(Comparison("lut", "INT8 tensor-core area per SM (DP16 m8n4k16)", src, "B",
                            0.312, L.mac_dp_area_per_sm_mm2(a100.units[0].spec, "int8", 16),
                            "mm2", 0.15, "issue bound", design="A100 INT8 TC"))

    def ms(acc, phase: str, a=None, w=None) -> float:
        if phase == "prefill":
            wl = workload("bitnet-b1.58-3b", phase="prefill", batch=1, seq=2048, a_format=a,
                          w_format=w)
        else:
            wl = workload("bitnet-b1.58-3b", phase="decode", batch=1024,
                          context=LUT_DECODE_CONTEXT, a_format=a, w_format=w)
        return evaluate(acc, wl).latency_s * 1e3

    acc4, acc8 = load(cfg / "lut" / "a100_lut4x.yaml"), load(cfg / "lut" / "a100_lut8x.yaml")
    # Table 1 rows: (label, design, formats, paper prefill ms, paper decode ms)
    rows = (("A100 FP16 TC", a100, ("fp16", "fp16"), 106.71, 41.15),
            ("A100 INT8 TC", a100, (None, None), 67.06, 21.70),
            ("A100-LUT-4X", acc4, (None, None), 42.49, 11.41),
            ("A100-LUT-8X", acc8, (None, None), 38.02, 7.47))
    ours = {(lab, ph): ms(acc, ph, *fm) for lab, acc, fm, _, _ in rows
            for ph in ("prefill", "decode")}
    paper = {(lab, "prefill"): pp for lab, _, _, pp, _ in rows}
    paper.update({(lab, "decode"): pd for lab, _, _, _, pd in rows})
    what = {"prefill": "BitNet 3B prefill (bs 1, seq 2048)",
            "decode": f"BitNet 3B decode (bs 1024, context {LUT_DECODE_CONTEXT})"}
    why = {"prefill": "our A100 model is checked against measured silicon (a100_gemm_measured: "
                      "median 2.9%); the paper's rows come from Accel-Sim, whose A100 prefill "
                      "GEMMs run at ~45% of peak (fp16: 106.7 ms) where silicon reaches ~70%, "
                      "which also inflates the fp16 / LUT ratios",
           "decode": "the paper's decode rows imply GEMMs at ~50% of peak and no KV-cache "
                     "traffic; ours are faster on the MAC tensor cores (validated A100) and "
                     "LUT-8X is bound by the 5 TB/s L2 (tag C): int8 tables (2 B per "
                     "activation) are re-read by every N tile, so it barely beats LUT-4X"}
    comps_t1: list[Comparison] = []
    gaps_t1: list[Gap] = []
    for (lab, ph), v in ours.items():
        c = Comparison("lut", what[ph], src, "B", paper[(lab, ph)], v, "ms", 0.25,
                       "issue bound (absolute)", design=lab)
        if c.ok:
            comps_t1.append(c)
        else:
            gaps_t1.append(Gap("lut", f"{what[ph]} on {lab}: {paper[(lab, ph)]} ms",
                               f"ours {v:.2f} ms ({c.error:+.0%}): {why[ph]}"))
    base = "A100 FP16 TC"
    for lab, _, _, _, _ in rows[1:]:
        for ph in ("prefill", "decode"):
            ref = paper[(base, ph)] / paper[(lab, ph)]
            v = ours[(base, ph)] / ours[(lab, ph)]
            fig = f"{what[ph]}: fp16 / {lab} latency ratio"
            c = Comparison("lut", fig, src, "B", ref, v, "x", 0.15, "issue bound", design=lab)
            if c.ok:
                comps_t1.append(c)
            else:
                gaps_t1.append(Gap("lut", f"{fig}: {ref:.2f}x",
                                   f"ours {v:.2f}x ({c.error:+.0%}): {why[ph]}"))
    comps += comps_t1
    sweep = L.weight_bit_sweep(units["lut4x"], first_unit(a100, TensorCoreGpu))
    ahead = max(int(r["w_bits"]) for r in sweep if r["lut_density"] > r["mac_int8_density"])
    comps.append(Comparison(
        "lut", "widest weight where LUT density beats INT8 MAC", "lut_tensor_core paper text "
        "(issue #6: 'LUT ahead up to about 6-bit weights')", "B", 6, ahead, "bits", 0.2,
        "one bit of the 1..8 sweep (docs/lut.md)", design="A100-LUT-4X"))
    gaps = [
        Gap("lut", "A100 FP16 TC area/SM 0.975 mm2 and density 2.96; INT8 density 17.73",
            "not reached (ours +30% / −23% / +22%): the energy library's fp16 adder area is "
            "close to its fp16 multiplier; no constant was tuned. The paper's own INT8 row is "
            "inconsistent: 624/(108 x 0.312) = 18.5, not 17.73"),
        Gap("lut", "DP4 density 61.55 vs 3.39 TFLOPS/mm2 (Fig. 12)",
            "not reached (ours ~10.1 vs 1.81, 5.6x instead of 18x): the paper's whole LUT DP4 "
            "unit (~130 um2) is smaller than one fp16 adder of our area table"),
    ]
    return comps, gaps + gaps_t1
