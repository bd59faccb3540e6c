"""The comparisons of each family (registered with ``archsim.validation.checks``)."""

from __future__ import annotations

import archsim.validation_energy  # noqa: F401  (registers "energy")
import archsim.validation_fpga  # noqa: F401  (registers "fpga")
import archsim.validation_mapper  # noqa: F401  (registers "mapper")
import archsim.validation_pim  # noqa: F401  (registers "pim")
import archsim.validation_timeloop  # noqa: F401  (registers "timeloop")
from archsim.validation import Comparison, Gap, checks, first_unit, load_reference


@checks("workloads")
def _workloads() -> tuple[list[Comparison], list[Gap]]:
    """Model zoo identity: parameter counts and MACs against the published figures."""
    from workloads.zoo import model_info, model_names

    comps = []
    for name in model_names():
        info = model_info(name)
        comps.append(Comparison(
            "workloads", "parameters", info.published_source, "A", info.published_parameters,
            info.parameters, "params", 0.02, "identity: shapes from the published configs",
            design=name))
        if info.published_macs:
            comps.append(Comparison(
                "workloads", "MACs per sample", info.published_macs_source, "A",
                info.published_macs, _macs(name), "MAC", 0.02,
                "identity: counted from op shapes", design=name))
    shape_comps, gaps = _zoo_shapes()
    return comps + shape_comps, gaps


#: models.yaml entry -> zoo names, keyed by size where the entry has sizes
_MODELS_YAML = {"gpt2": "gpt2-{}", "gpt3": "gpt3-{}", "llama2": "llama2-{}",
                "llama3_8b": "llama3-8b", "opt_175b": "opt-175b", "bloom_176b": "bloom-176b",
                "bitnet_b158_3b": "bitnet-b1.58-3b", "vit_b16": "vit-b16", "bert_base": "bert-base"}


#: documented deviations of the zoo from models.yaml (workloads/zoo.py)
_SHAPE_DEVIATIONS = {"gpt3-xl": "Brown et al. 2020 (Table 2.1) list 24 heads of d_head 128, which "
                                "does not divide d_model 2048; 2048 = 16 x 128 and the published "
                                "1.3B parameter count both need 16 heads"}


def _zoo_shapes() -> tuple[list[Comparison], list[Gap]]:
    """The zoo's transformer shapes against models.yaml: per model, the number of its
    hyper-parameters (L, d, h, kv, ffn, vocab, as far as the file gives them) that match."""
    from workloads.zoo import model_info

    ref = load_reference("models.yaml")
    comps: list[Comparison] = []
    gaps: list[Gap] = []
    for key, pattern in _MODELS_YAML.items():
        entry = ref.get(key)
        if not isinstance(entry, dict):
            continue
        shared = {k: v for k, v in entry.items() if not isinstance(v, dict)}
        sized = {k: v for k, v in entry.items() if isinstance(v, dict)}
        for size, fields in (sized.items() if sized else [("", {})]):
            want = {**shared, **fields}
            name = pattern.format(size)
            info = model_info(name)
            ffn = want.get("ffn")
            if isinstance(ffn, str) and ffn.endswith("d"):
                ffn = int(ffn[:-1]) * int(want["d"])
            expect = {"L": want.get("L"), "d": want.get("d"), "h": want.get("h"),
                      "kv": want.get("kv", want.get("h")), "ffn": ffn, "vocab": want.get("vocab")}
            ours = {"L": info.layers, "d": info.d_model, "h": info.heads, "kv": info.kv_heads,
                    "ffn": info.ffn, "vocab": info.vocab}
            given = [k for k, v in expect.items() if isinstance(v, int)]
            wrong = [f"{k} {ours[k]} (file {expect[k]})" for k in given if ours[k] != expect[k]]
            c = Comparison("workloads", "shape fields matching models.yaml", f"models.yaml {key}"
                           + (f".{size}" if size else ""), "C", len(given),
                           len(given) - len(wrong), "fields", 0.0,
                           "identity: the zoo is built from these shapes", design=name)
            if c.ok:
                comps.append(c)
            else:
                gaps.append(Gap("workloads", f"{name} shape in models.yaml",
                                f"ours differs in {', '.join(wrong)}: "
                                f"{_SHAPE_DEVIATIONS.get(name, 'see workloads/zoo.py')}"))
    return comps, gaps


def _macs(name: str) -> float:
    from workloads.zoo import build

    w = build(name)
    return float(sum(op.macs() for op in w.ops() if op.pass_ == "fwd")) / w.batch


@checks("spatial")
def _spatial() -> tuple[list[Comparison], list[Gap]]:
    gaps = [Gap("spatial", "tpu_like, eyeriss_like, nvdla_like, shidiannao_like, "
                "hetero/nvdla_shidiannao",
                "shared/reference has no figure for these designs; their cycle model is "
                "checked against closed-form SCALE-Sim fold counts in tests/arch and against "
                "SCALE-Sim's own per-layer cycles in tests/cycle; the Timeloop Eyeriss "
                "cross-check is in the 'mapper' family")]
    return [], gaps


@checks("gpu")
def _gpu() -> tuple[list[Comparison], list[Gap]]:
    """Tensor-core GPUs against gpus.yaml and a100_gemm_measured.csv."""
    import csv

    from arch import load
    from archsim.api import config_dir
    from archsim.validation import load_reference, reference_dir
    from workloads.formats import FORMATS
    from workloads.ops import Elementwise, Gemm

    ref = load_reference("gpus.yaml")
    units = {n: load(config_dir() / "gpu" / f"{n}.yaml").units[0]
             for n in ("a100", "h100", "h200", "t4")}

    def tflops(name: str, m: int, n: int, k: int, fmt: str) -> float:
        f = FORMATS[fmt]
        e = units[name].estimate(Gemm(name="g", m=m, n=n, k=k, a_format=f, w_format=f))
        return 2.0 * m * n * k / e.latency_s / 1e12

    comps: list[Comparison] = []
    text = (reference_dir() / "a100_gemm_measured.csv").read_text().splitlines()
    for r in csv.DictReader(line for line in text if not line.startswith("#")):
        m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
        ms = units["a100"].estimate(Gemm(name="g", m=m, n=n, k=k)).latency_s * 1e3
        comps.append(Comparison(
            "gpu", f"fp16 GEMM {m}x{n}x{k} latency", "a100_gemm_measured.csv", "A/M",
            float(r["latency_ms"]), ms, "ms", 0.25,
            "issue bound: worst 25%, median 10% (tests/gpu); measurement includes host overhead",
            design="a100"))
    lo, hi = ref["h200_measured"]["bf16_gemm_8192_cubed_tflops"]["random_data"]
    comps.append(Comparison("gpu", "bf16 GEMM 8192^3", "gpus.yaml h200_measured."
                            "bf16_gemm_8192_cubed_tflops.random_data", "M", lo,
                            tflops("h200", 8192, 8192, 8192, "bf16"), "TFLOP/s", 0.10,
                            "run-to-run and card spread", design="h200", reference_high=hi))
    copy = Elementwise(name="copy", rows=1 << 15, cols=1 << 15, fn="copy", a_format=FORMATS["bf16"])
    e = units["h200"].estimate(copy)
    comps.append(Comparison("gpu", "device-to-device copy (2 GiB)", "gpus.yaml h200_measured."
                            "device_to_device_copy_tbps", "M",
                            ref["h200_measured"]["device_to_device_copy_tbps"],
                            e.dram_bytes / e.latency_s / 1e12, "TB/s", 0.10,
                            "not independent: HBM efficiency 0.9 = 4.3/4.8", design="h200"))
    best = ref["measured_best_gemm_tflops"]
    for name, key, fmt, shape_key, val_key in (
            ("a100", "a100_sxm", "bf16", "shape_mnk", "bf16"),
            ("h100", "h100_sxm", "bf16", "shape_mnk", "bf16"),
            ("h100", "h100_sxm", "fp8_e4m3", "fp8_shape_mnk", "fp8_e4m3"),
            ("h200", "h200_sxm", "fp8_e4m3", "fp8_shape_mnk", "fp8_e4m3")):
        m, n, k = best[key][shape_key]
        comps.append(Comparison("gpu", f"best {fmt} GEMM {m}x{n}x{k}",
                                f"gpus.yaml measured_best_gemm_tflops.{key}.{val_key}", "M",
                                best[key][val_key], tflops(name, m, n, k, fmt), "TFLOP/s", 0.10,
                                "best-of-sweep figure favours lucky shapes/clocks", design=name))
    # Peak rates emerge from SMs x tensor-core rate x clock (spec sheet peaks, tag A/C).
    for name, key in (("a100", "a100_sxm_80gb"), ("h100", "h100_sxm_80gb"), ("t4", "t4")):
        u = units[name]
        for fmt, peak in ref[key]["peak_tflops"].items():
            if fmt not in FORMATS:
                continue
            f = FORMATS[fmt]
            op = Gemm(name="g", m=1, n=1, k=1, a_format=f, w_format=f)
            # NVIDIA quotes tensor-core peaks at the boost clock and the CUDA-core fp32 peak
            # at the maximum SM clock (H100: 132 x 128 x 2 x 1.98 GHz = 67 TFLOP/s).
            clock = u.clock_hz if fmt == "fp32" else u.spec.boost_clock_mhz * 1e6
            ours = 2 * u.peak_macs_per_cycle(op) * clock / 1e12
            comps.append(Comparison("gpu", f"peak {fmt}", f"gpus.yaml {key}.peak_tflops.{fmt}",
                                    "A/C", float(peak), ours, "TFLOP/s", 0.02,
                                    "spec-sheet arithmetic: SMs x MMA rate x boost clock",
                                    design=name))
    gaps = [
        Gap("gpu", "A100 memory-bound points (M <= 128)", "predicted 10–14% fast: the "
            "measurement includes PyTorch host overhead (LLMCompass adds 21 us); we charge a "
            "4 us launch only"),
        Gap("gpu", "H200 copy", "not an independent check: the HBM efficiency (0.9) is this "
            "figure divided by the 4.8 TB/s peak"),
        Gap("gpu", "h200_measured zeros (894 TFLOP/s)", "data-dependent power/clock is not "
            "modelled (one tensor clock per design)"),
        Gap("gpu", "h200_measured sm_clock/l2/sm_count", "configuration facts, used as inputs of "
            "configs/gpu/h200.yaml rather than compared"),
    ]
    return comps, gaps


#: KV-cache length of the LUT paper's decode rows (Table 1, batch 1024), which the paper does
#: not state. At batch 1024 every cached token costs 0.33 MB per sequence (26 layers x K, V x
#: 3200 x fp16), so a context of c tokens reads 0.34 c GB per step: 128 tokens alone would
#: take ~24 ms on an A100, three times the paper's whole LUT-8X step (7.47 ms). The rows
#: therefore carry (almost) no KV traffic; we evaluate the first generated token.
LUT_DECODE_CONTEXT = 1


@checks("lut")
def _lut() -> tuple[list[Comparison], list[Gap]]:
    """LUT tensor cores against lut_tensor_core.yaml (Table 1 A100 rows, Table 2)."""
    import arch.lut as L
    from arch.gpu.unit import TensorCoreGpu
    from archsim.api import config_dir, evaluate, load, workload

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


@checks("explore")
def _explore() -> tuple[list[Comparison], list[Gap]]:
    """NASAIC (nasaic.yaml): figures that do not apply numerically, and why."""
    return [], [Gap(
        "explore", "NASAIC vs successive NAS->ASIC: latency -17.77%, energy 2.49x, area 2.32x, "
        "accuracy -0.76% (nasaic.yaml)",
        "not comparable as numbers: NASAIC's template set, tasks and accuracy data are not "
        "public; examples/nasaic reproduces the narrative with an illustrative accuracy "
        "predictor (tag C): the network-first baseline violates spec S1 (latency 2.75 ms, "
        "energy 2.24 mJ) that co-search meets at 0.73 points lower accuracy (docs/explore.md)")]
